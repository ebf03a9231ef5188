"""DELIVERY.md: what Flux's walk of the repository as it will be found, drawn and tabled. Every Kustomization reached
from the bootstrap one, exported or hand-written, its dependsOn, and which Kustomization applies each folder the
export writes."""

from __future__ import annotations

from collections.abc import Mapping

from gitops.flux.helm import helm_release_id
from gitops.flux.inventory import FluxView, ObjectId, is_flux_kustomization
from gitops.headers import markdown_generated_line, program_version
from gitops.reports.renderer_change import RendererChange
from gitops.tree import Tree
from model.outputs import AdoptedRelease


def _mermaid_id(name: str) -> str:
    return name.replace("-", "_").replace(".", "_")


def delivery_markdown(tree: Tree, after: FluxView | None, renderer_changes: list[RendererChange] | None = None,
                      adopted_driver: tuple[str, str] | None = None,
                      adopted_apps: Mapping[str, AdoptedRelease] | None = None) -> str:
    """What Flux's walk of the repository as it will be found (`after`): every Kustomization reached from the
    bootstrap one, its dependsOn, and which Kustomization applies each folder the export writes (and, with
    `adopted_driver`, the repository's Kustomization installing the DRA driver the stack adopts); then the change the
    renderer's pull request of an app the repository delivers must make (step 4 of the rollout), in full."""
    stack = tree.stack
    lines = [
        markdown_generated_line(stack),
        f"# Delivery graph of `{stack}`",
        "",
        f"Exported by gpu-platform {program_version()} (`python -m gitops.export --version`).",
        "",
        *_together(tree),
        f"What Flux's walk of this repository found when the export ran, starting at the bootstrap Kustomization "
        f"(path `{tree.layout.bootstrap_path}`): every Flux Kustomization it reaches, exported or hand-written.",
        "Solid arrows: `dependsOn` (from a Kustomization to the one it waits for). Thick arrows: the Kustomization "
        "that applies a folder the export writes. Thick borders: written by this export.",
        "",
    ]
    if after is None:
        return "\n".join(lines + ["(not walked)", ""])
    folders = _folders_applied(tree, after)
    lines += _mermaid(tree, after, folders)
    lines += _kustomization_table(after)
    lines += ["", "| folder written by the export | objects | applied by |", "| --- | --- | --- |"]
    for folder, (count, appliers) in folders.items():
        shown = ", ".join(_shown_key(after, k) for k in sorted(appliers)) or "**nothing**"
        lines.append(f"| `{folder}/` | {count} | {shown} |")
    lines.append("")
    if adopted_driver is not None:
        lines += [f"The DRA driver is the repository's: {_shown_key(after, adopted_driver)}, which the stack adopts "
                  "(`gpu.dra.deliveredBy: repository`); the export writes no driver, and the Kustomization of each "
                  "app the export writes that claims a device depends on it.", ""]
    for name, adopted in sorted((adopted_apps or {}).items()):
        oid = helm_release_id(adopted.namespace, adopted.name)
        where = after.origins.get(oid)
        lines += [f"`{name}` is the repository's: {oid}{f' ({where})' if where else ''}, {adopted.workload_kind} "
                  f"{adopted.namespace}/{adopted.workload_name}, which the stack adopts (`{adopted.key}.helmRelease`); "
                  "the export writes none of its objects and holds what its values render to the gate.", ""]
    for notice in tree.notices:
        lines.append(f"> {notice}")
    if renderer_changes:
        lines += ["", "## The renderer's pull request (step 4 of the rollout)", ""]
        for change in renderer_changes:
            lines += change.markdown()
    return "\n".join(lines).rstrip() + "\n"


def _together(tree: Tree) -> list[str]:
    """The one place that says which stacks every run of this one exports too (the terminal does not, each time)."""
    if not tree.together:
        return []
    others = [f"`{other}`" for other in sorted(tree.together)]
    named = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} and {others[-1]}"
    where = " and ".join(f"`{folder}/`" for folder in sorted(set(tree.together.values())))
    return [f"Exported together with {named}, which {'writes' if len(others) == 1 else 'write'} into {where} too: "
            f"every export, `--check` and `--remove` of `{tree.stack}` runs "
            f"{'it' if len(others) == 1 else 'them'} as well, since one stack alone would overwrite what "
            f"{'the other' if len(others) == 1 else 'another'} wrote there.", ""]


def _shown_key(after: FluxView, key: tuple[str, str]) -> str:
    return key[1] if key[0] == after.bootstrap[0] else f"{key[0]}/{key[1]}"


def _node(key: tuple[str, str]) -> str:
    return "k_" + _mermaid_id(f"{key[0]}_{key[1]}")


def _folders_applied(tree: Tree, after: FluxView) -> dict[str, tuple[int, set[tuple[str, str]]]]:
    """Each folder the export writes, sorted: how many objects, and the Kustomizations that apply them."""
    folders: dict[str, tuple[int, set[tuple[str, str]]]] = {}
    for o in tree.objects:
        folder = o.path.rsplit("/", 1)[0]
        count, appliers = folders.get(folder, (0, set()))
        appliers.update(after.applied_by.get(ObjectId.of(o.manifest), []))
        folders[folder] = (count + 1, appliers)
    return dict(sorted(folders.items()))


def _mermaid(tree: Tree, after: FluxView, folders: dict[str, tuple[int, set[tuple[str, str]]]]) -> list[str]:
    ours = {(str((o.manifest.get("metadata") or {}).get("namespace", "")), o.name)
            for o in tree.objects if is_flux_kustomization(o.manifest)}
    lines = ["```mermaid", "flowchart BT"]
    status_text = {"built": "", "external": "<br/>(path not in this repository)",
                   "other-source": "<br/>(another source)", "failed": "<br/>(build fails)"}
    for key, ks in after.kustomizations.items():
        wait = "" if key == after.bootstrap else f"<br/>wait: {str(bool(ks.spec.get('wait', False))).lower()}"
        label = f"{_shown_key(after, key)}{' (bootstrap)' if key == after.bootstrap else ''}<br/>{ks.shown_path}{wait}"
        mark = ":::ours" if key in ours else ""
        lines.append(f"  {_node(key)}[\"{label}{status_text.get(ks.status, '')}\"]{mark}")
    for key, ks in after.kustomizations.items():
        for dep in ks.depends:
            if dep not in after.kustomizations:
                lines.append(f"  {_node(dep)}[\"{_shown_key(after, dep)}<br/>(not found)\"]")
            lines.append(f"  {_node(key)} --> {_node(dep)}")
    for folder, (count, appliers) in folders.items():
        node = f"f_{_mermaid_id(folder.replace('/', '_'))}"
        lines.append(f"  {node}([\"{folder}/<br/>{count} objects\"]):::ours")
        for key in sorted(appliers):
            lines.append(f"  {_node(key)} ==> {node}")
    return lines + ["  classDef ours stroke-width:3px", "```", ""]


def _kustomization_table(after: FluxView) -> list[str]:
    """The spec of every Kustomization as Flux applies it; `*` marks a field the parent Kustomization changed (its
    patches), listed below the table."""
    lines = ["| Kustomization | declared in | path | dependsOn | wait | timeout | objects it applies |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    changed_lines: list[str] = []
    for key, ks in after.kustomizations.items():
        changed = set(ks.changed_by_parent)

        def mark(field_name: str, text: str, changed: set[str] = changed) -> str:
            return f"{text} *" if field_name in changed else text

        deps = mark("dependsOn", ", ".join(_shown_key(after, d) for d in ks.depends) or "-")
        where = ks.declared_in or "(bootstrap)"
        state = {"built": str(len(ks.objects)), "external": "not in this repository",
                 "other-source": "another source", "failed": "build fails"}[ks.status]
        wait = mark("wait", str(bool(ks.spec.get('wait', False))).lower()) if key != after.bootstrap else "-"
        lines.append(f"| {_shown_key(after, key)} | `{where}` | `{ks.shown_path}` | {deps} | {wait} | "
                     f"{mark('timeout', str(ks.spec.get('timeout', '-')))} | {state} |")
        if changed and ks.parent in after.kustomizations:
            parent = after.kustomizations[ks.parent]
            fields = ", ".join(f"`{f}`" for f in sorted(changed))
            changed_lines.append(f"- {_shown_key(after, key)}: {fields}, set by the patches of "
                                 f"{_shown_key(after, parent.key)} (`{parent.declared_in or '(bootstrap)'}`)")
    if changed_lines:
        lines += ["", "The specs above are as Flux applies them: a parent Kustomization's patches changed these "
                  "fields (`*` in the table):", "", *changed_lines]
    return lines
