"""The export's Kustomizations as Flux applies them, parents' patches included (for delivery.py's `check_stack`).

Refused: a parent's patch (or the applied spec) taking what they rely on: `substituteFrom`, being applied at all
(`suspend: true`, `$patch: delete`), `prune`, and for the plugin's and the DRA driver's, `wait` and the dependency on
the CNI; a graph rule (components/flux.py) broken by any Kustomization the walk reaches; a waiting one's timeout below
the worst-case start of its workloads; a Kustomization depending on a tier a component joined but not on the
component; a tier the stack says the repository declares that the walk does not reach. What one patch breaks is one
line at that patch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from gitops.checks.walk_builds import Failures, StackWalk, below_a_link, listed
from gitops.flux.build import Builder, RepoView
from gitops.flux.documents import BuildError
from gitops.flux.inventory import FluxView, KsKey, ObjectId, WalkedKustomization, is_flux_kustomization, show_key
from gitops.tree import ExportedObject
from model.flux_graph import (
    WORKLOAD_KINDS,
    GraphNode,
    StartBudget,
    check_graph,
    check_wait_timeout,
    duration_seconds,
    minutes_above,
    worst_case_start,
)
from model.outputs import FluxGraph


def patched_by(after: FluxView, ks: WalkedKustomization, field_name: str) -> str | None:
    """Where a parent changed `field_name` of `ks`'s spec: "<parent's file>: spec.patches[i] of <parent>" (the patches
    whose text names the field; all of them when none does), or None when the parent left it as declared."""
    top = field_name.split(".")[-1]
    if not any(p == field_name or p.startswith(field_name + ".") or field_name.startswith(p + ".")
               for p in ks.changed_by_parent):
        return None
    parent = after.kustomizations.get(ks.parent) if ks.parent else None
    if parent is None:
        return None
    patches = [p for p in parent.spec.get("patches") or [] if isinstance(p, dict)]
    naming = [i for i, p in enumerate(patches) if top in str(p.get("patch", ""))] or list(range(len(patches)))
    which = ", ".join(f"spec.patches[{i}]" for i in naming) or "its spec"
    return f"{parent.declared_in or 'the bootstrap Kustomization'}: {which} of {show_key(parent.key)}"


def check_parent_patches(after: FluxView, exported_ks: set[KsKey], plugin: KsKey | None = None,
                         cni: KsKey | None = None, driver: KsKey | None = None,
                         folds: dict[str, list[str]] | None = None) -> list[str]:
    """What the export's own Kustomizations rely on, taken away where Flux applies them (a parent's patch, a hand
    edit): their `substituteFrom` (the variables their objects use), being applied at all (`suspend: true`), `prune`
    (without it, what a later export or `--remove` takes away stays on the cluster), and the plugin's dependency on
    the CNI and its `wait`. Timeouts and added dependencies are checked by the rules on the applied spec, which name
    the patch; a `$patch: delete` by `deleted_by_patch`. The DRA driver's Kustomization (`driver`) is held to the
    plugin's rules. With `folds`, what a patch's dependsOn breaks goes there, to be said in that patch's one line
    (`depends_patches`)."""
    problems = []
    suspended: dict[str, list[KsKey]] = {}
    dropped: dict[str, list[tuple[KsKey, str]]] = {}  # a patch -> the export's Kustomizations it takes variables from
    daemons = {k: what for k, what in ((plugin, "plugin"), (driver, "DRA driver")) if k is not None}
    for ks in after.kustomizations.values():
        if ks.key not in exported_ks:
            continue
        where = patched_by(after, ks, "postBuild") if ks.declared_spec is not None else None
        declared = ((ks.declared_spec or {}).get("postBuild") or {}).get("substituteFrom") or []
        applied = (ks.spec.get("postBuild") or {}).get("substituteFrom") or []
        lost = [ref for ref in declared if ref not in applied]
        if where and lost:  # a patch that lists what was declared, and more, takes nothing away
            shown = ", ".join(f"{r.get('kind')} {r.get('name')}" for r in lost if isinstance(r, dict)) or "its list"
            dropped.setdefault(where, []).append((ks.key, shown))
        if ks.spec.get("suspend") is True:
            suspended.setdefault(patched_by(after, ks, "suspend") or ks.declared_in or show_key(ks.key), []).append(
                ks.key)
        what = daemons.get(ks.key)
        if what is not None and cni is not None and cni not in ks.depends:
            at = patched_by(after, ks, "dependsOn") or ks.declared_in or show_key(ks.key)
            if folds is not None and "spec.patches[" in at:
                folds.setdefault(at, []).append(f"{show_key(ks.key)} loses its dependency on the CNI {show_key(cni)}, "
                                                f"so the {what} would roll out before pods have a network")
            else:
                problems.append(f"{at}: {show_key(ks.key)}.spec.dependsOn: lacks the CNI {show_key(cni)} as Flux "
                                f"applies it: the {what} would roll out before pods have a network; hint: leave "
                                f"dependsOn of the {what}'s Kustomization as the export writes it")
        if ks.spec.get("prune") is False:
            at = patched_by(after, ks, "prune")
            problems.append(f"{at or ks.declared_in or show_key(ks.key)}: sets the export's {show_key(ks.key)}.spec."
                            "prune: false: Flux would leave on the cluster whatever a later export removes or renames "
                            f"in {ks.shown_path}, and after `--remove` all it applied (Flux deletes a Kustomization's "
                            f"objects with it only when it prunes); hint: {_keep_true(at, 'prune', ks.key)}")
        waited_for = any(ks.key in k.depends for k in after.kustomizations.values() if k.key != ks.key)
        if what is not None and ks.spec.get("wait") is not True and not waited_for:
            at = patched_by(after, ks, "wait")  # with a dependent, the graph's wait rule says it (naming the patch)
            problems.append(f"{at or ks.declared_in or show_key(ks.key)}: sets the export's {show_key(ks.key)}.spec."
                            f"wait: false: Flux would call the {what}'s Kustomization Ready once it is applied, not "
                            f"once the {what}'s DaemonSet runs, so a failed rollout would go unseen; hint: "
                            f"{_keep_true(at, 'wait', ks.key)}")
    return [*(_suspends(at, keys) for at, keys in suspended.items()),
            *(_drops_variables(at, found) for at, found in dropped.items()), *problems]


def _drops_variables(at: str, found: list[tuple[KsKey, str]]) -> str:
    """One line for a patch replacing the substituteFrom of the export's Kustomizations, however many it reaches."""
    keys = listed([show_key(k) for k, _ in found])
    shown = ", ".join(dict.fromkeys(s for _, s in found))
    if len(found) == 1:
        return (f"{at}: changes the export's {keys}.spec.postBuild.substituteFrom, dropping {shown} (a patch on a Flux "
                "Kustomization replaces a list, it does not merge it): its objects' variables would go undefined; "
                f"hint: give the patch a target that leaves {keys} out (e.g. a labelSelector), or list {shown} in the "
                "patch too")
    return (f"{at}: changes spec.postBuild.substituteFrom of the export's {len(found)} Kustomizations {keys}, dropping "
            f"{shown} (a patch on a Flux Kustomization replaces a list, it does not merge it): their objects' "
            f"variables would go undefined; hint: give the patch a target that leaves {keys} out (e.g. a "
            f"labelSelector), or list {shown} in the patch too")


def _suspends(at: str, keys: list[KsKey]) -> str:
    """One line for a patch (or a file) suspending the export's Kustomizations, however many it reaches."""
    it = "it" if len(keys) == 1 else "them"
    return (f"{at}: sets spec.suspend: true on the export's {listed([show_key(k) for k in keys])}: Flux would never "
            f"apply {it}, while the export, its checklist and its evidence gate take {it} as delivered; hint: take "
            "suspend out of the repository (`flux suspend kustomization` on the cluster is the emergency valve, not "
            "git)")


def _keep_true(patch: str | None, field_name: str, key: KsKey) -> str:
    """The hint for a boolean the export writes as true and a parent turned off: at the patch when one did it."""
    if patch and "spec.patches[" in patch:
        return (f"leave {field_name} out of that patch or set it to true there, or give the patch a target that "
                f"leaves {show_key(key)} out")
    return f"leave {field_name}: true as the export writes it"


def deleted_by_patch(sw: StackWalk, exported_ks: set[KsKey], view: RepoView) -> dict[KsKey, str]:
    """The export's Kustomizations a parent's `$patch: delete` takes out of what that parent applies, each with its
    line. Found where it happens: the parent's build without its patches holds the export's file's Kustomization,
    its build with that one patch does not (kustomize itself decides what the patch's target matches)."""
    after = sw.after
    ours = {(oid.namespace, oid.name): o for o in sw.tree.objects if is_flux_kustomization(o.manifest)
            for oid in [ObjectId.of(o.manifest)]}
    ours = {k: o for k, o in ours.items() if k in exported_ks and k not in after.kustomizations}
    found: dict[KsKey, str] = {}
    if not ours:
        return found
    builder = Builder(view)
    try:
        for parent in [k for k in after.kustomizations.values() if k.status == "built"]:
            patches = parent.spec.get("patches")
            patches = patches if isinstance(patches, list) else []
            deleting = [i for i, p in enumerate(patches) if _deletes(p)]
            if not deleting:
                continue
            try:
                plain = _kustomizations_built(builder, parent, [], ours)
                for i in deleting:
                    for key in sorted(plain - _kustomizations_built(builder, parent, [patches[i]], ours)):
                        path = (ours[key].manifest.get("spec") or {}).get("path")
                        found.setdefault(key, (
                            f"{parent.declared_in or 'the bootstrap Kustomization'}: spec.patches[{i}] of "
                            f"{show_key(parent.key)}: deletes the export's {show_key(key)} (`$patch: delete`) from "
                            f"what {show_key(parent.key)} applies: Flux would never apply it nor the objects of "
                            f"{path}, while the export, its checklist and its evidence gate take them as delivered; "
                            f"hint: remove that patch, or give it a target that leaves {show_key(key)} out"))
            except BuildError:
                continue  # kustomize refuses the patch on its own: no line here rather than a guess
    finally:
        builder.close()
    return found


def _deletes(patch: Any) -> bool:
    """A strategic merge patch that deletes the objects it applies to."""
    if not isinstance(patch, dict) or not isinstance(patch.get("patch"), str):
        return False
    try:
        body = yaml.safe_load(patch["patch"])
    except (yaml.YAMLError, RecursionError, ValueError):
        return False  # the walk's build of the parent says what is wrong with it
    return isinstance(body, dict) and body.get("$patch") == "delete"


def _kustomizations_built(builder: Builder, parent: WalkedKustomization, patches: list[Any],
                          ours: dict[KsKey, ExportedObject]) -> set[KsKey]:
    """Which of `ours` the parent's path builds into with these patches (and the rest of its spec), from their
    exported files."""
    spec = {**parent.spec, "patches": patches}
    built = builder.flux_build(parent.path, spec, parent.declared_in)
    out = set()
    for b in built:
        oid = ObjectId.of(b.manifest)
        key = (oid.namespace, oid.name)
        if is_flux_kustomization(b.manifest) and key in ours and b.origin == ours[key].path:
            out.add(key)
    return out


def graph_rules(sw: StackWalk, graph: FluxGraph, failures: Failures, folds: dict[str, list[str]]) -> list[str]:
    """4. The graph rules (components/flux.py) over every Kustomization the walk reached, and the tiers the stack says
    the repository declares (one the walk cannot reach while a build fails folds into the first failure's line: what
    that build would have declared is unknown)."""
    after = sw.after
    nodes = [GraphNode(key=k.key, depends=k.depends, wait=k.spec.get("wait") is True, where=k.declared_in,
                       declared_by="export" if k.key in graph.exported else "repository")
             for k in after.kustomizations.values() if k.key != after.bootstrap]
    roots = [after.bootstrap]
    missing: dict[KsKey, list[str]] = {}  # a tier the walk does not reach -> what depends on it
    if sw.fresh:
        roots += [t for t in graph.repository_tiers if t not in after.kustomizations]  # assumed: this is not the repo
    else:
        first = next(iter(failures.causes.values()), None)
        for t in graph.repository_tiers:
            if t not in after.kustomizations and first is not None:
                first.tiers.append(t)
            elif t not in after.kustomizations:
                missing[t] = []
    # The walk knows where each Kustomization is declared: that file leads the line, as in every other refusal.
    by_file = {k.declared_in: k for k in after.kustomizations.values() if k.declared_in}
    problems: list[str] = []
    cycles: list[str] = []
    for line in check_graph(nodes, roots, plugin=graph.plugin, cni=graph.cni, default_namespace=graph.namespace,
                            warnings=sw.notices, driver=graph.driver, driver_dependents=graph.driver_dependents,
                            adopted_driver=graph.adopted_driver):
        rest = line.removeprefix("flux: ")
        where = rest.split(": ", 1)[0]
        ks = by_file.get(where)
        patch = patched_by(after, ks, "dependsOn") if ks is not None and ".spec.dependsOn:" in rest else None
        gone = next((t for t in missing if ks is not None and ": no such Kustomization;" in rest
                     and t in ks.depends), None)
        written = _stack_key(sw, graph, ks.key) if ks is not None and ks.key in graph.exported else None
        missed = _MISSING_DEPENDENCY.match(rest) if written else None
        if gone is not None and ks is not None:
            missing[gone].append(f"{show_key(ks.key)} ({where})")
        elif patch:
            folds.setdefault(patch, []).append(rest.removeprefix(f"{where}: ").split("; hint: ")[0])
        elif rest.startswith("dependsOn cycle: "):
            cycles.append(line)
        elif missed:  # the export wrote that dependency from the stack file: the line leads with the key to fix
            problems.append(f"Pulumi.{sw.tree.stack}.yaml: gpu-platform:{written}: \"{missed['dep']}\": "
                            f"{missed['rest']}")
        else:
            problems.append(_from_patch(after, ks, rest) if ks is not None else line)
    for line in cycles:  # a cycle the patch's dependencies close is one more thing that patch breaks
        if len(folds) == 1:
            next(iter(folds.values())).append(line.removeprefix("flux: ").split("; hint: ")[0])
        else:
            problems.append(line)
    return [*(_tier_not_reached(sw, graph, t, dependents) for t, dependents in missing.items()), *problems]


_MISSING_DEPENDENCY = re.compile(r"^[^:]+: \S+\.spec\.dependsOn: '(?P<dep>[^']*)': (?P<rest>no such Kustomization;.*)$")


def _stack_key(sw: StackWalk, graph: FluxGraph, key: KsKey) -> str | None:
    """Where the stack file writes the dependsOn of the export's Kustomization `key`: its tier's entry of flux.tiers
    (a component that joined a tier has the tier's), else the component's delivery; None for the plugin's and the
    driver's (the program sets theirs)."""
    component = next((name for name, c in graph.components.items() if c.kustomization == key), None)
    tier = graph.components[component].tier if component is not None else key
    components = {c.kustomization for c in graph.components.values()}
    tiers = [k.key for k in graph.kustomizations if k.key not in components | {graph.plugin, graph.driver}]
    if tier in tiers:
        return f"flux.tiers[{tiers.index(tier)}].dependsOn"
    return f"{sw.app_keys.get(component, component)}.delivery.dependsOn" if component is not None else None


def _tier_not_reached(sw: StackWalk, graph: FluxGraph, tier: KsKey, dependents: list[str]) -> str:
    """A tier the stack says the repository declares that Flux's walk does not reach, at its entry of flux.tiers
    (the graph lists the tiers first, in the stack's order), with what would wait for it folded in."""
    at = f"gpu-platform:flux.tiers[{[k.key for k in graph.kustomizations].index(tier)}]"  # one of repository_tiers
    waits = (f"; {listed(dependents)} depend{'s' if len(dependents) == 1 else ''} on it, and Flux would wait for it "
             "forever" if dependents else "")
    return (f"Pulumi.{sw.tree.stack}.yaml: {at}: {show_key(tier)}: the stack says the repository declares this "
            f"Kustomization (declaredBy: repository) but Flux's walk does not reach it{waits}; hint: fix its name or "
            "namespace there, or declare it in the repository")


def depends_patches(folds: dict[str, list[str]]) -> list[str]:
    """One line for each parent's patch whose dependsOn breaks the graph's rules, everything it breaks counted."""
    lines = []
    for patch, found in folds.items():
        same: dict[tuple[str, str], list[str]] = {}  # (the dependency, the rule) -> the Kustomizations breaking it
        other: list[str] = []
        for said in found:
            if m := _DEPENDS_RULE.match(said):
                same.setdefault((m["dep"], m["rule"]), []).append(m["key"])
            else:
                other.append(said)
        broken = [f"{_counted(keys)} depend{'s' if len(keys) == 1 else ''} on {dep}: {rule}"
                  for (dep, rule), keys in same.items()] + other
        lines.append(f"{patch}: sets spec.dependsOn of the Kustomizations it patches, which breaks {len(broken)} "
                     f"rule{'s' if len(broken) != 1 else ''} of Flux's order: {'; '.join(broken)}; hint: take "
                     "dependsOn out of that patch, or give the patch a target that leaves those Kustomizations out")
    return lines


_DEPENDS_RULE = re.compile(r"^(?P<key>\S+)\.spec\.dependsOn: (?P<dep>.+?): (?P<rule>.+)$")


def _counted(keys: list[str]) -> str:
    return keys[0] if len(keys) == 1 else f"{len(keys)} Kustomizations ({', '.join(keys)})"


# What a graph rule's line says when the field it is about was set by a parent's patch: the fix is in the patch, not
# in the file that declares the Kustomization (whose own value the patch overrides).
_SET_BY_PATCH = {
    "dependsOn": "the dependency comes from {patch}; hint: remove it from that patch",
    "wait": "wait: false comes from {patch}; hint: leave wait out of that patch or set it to true there",
}


def _from_patch(after: FluxView, ks: WalkedKustomization, line: str) -> str:
    """A graph rule's line about `ks`, pointed at the parent's patch when that patch set the field the line is
    about."""
    for field_name, fix in _SET_BY_PATCH.items():
        patch = patched_by(after, ks, field_name) if f".spec.{field_name}:" in line else None
        if patch:
            return (f"{line.split('; hint: ')[0]}; {fix.format(patch=patch)}, or give the patch a target that leaves "
                    "this Kustomization out")
    return line


def wait_timeouts(after: FluxView, node_count: int, hidden: list[str],
                   second: set[tuple[KsKey, ObjectId]]) -> list[str]:
    """5. A Kustomization that waits outlasts its slowest workload (one whose path lies below a link the export would
    write through is left to OUT's guard, which names the link: the walk cannot tell what Flux reads there). An
    exported workload it applies a second time is not its own: that refusal names the entry to remove, and the
    timeout would be one more line for the same cause."""
    problems: list[str] = []
    by_patch: dict[str, list[_SlowStart]] = {}  # the fix is in the patch, not in the exported files it overrides
    for ks in after.kustomizations.values():
        if below_a_link(ks, hidden):
            continue
        waited = _waited_workloads(ks, after, node_count, {o for k, o in second if k == ks.key})
        deadline = str(ks.spec.get("timeout") or ks.spec.get("interval", "0s"))  # Flux's: the interval without one
        line = check_wait_timeout(show_key(ks.key), ks.spec.get("timeout"), str(ks.spec.get("interval", "0s")), waited)
        if line:
            patch = patched_by(after, ks, "timeout") or patched_by(after, ks, "interval")
            if patch:
                slowest, budget = max(waited, key=lambda w: w[1].seconds)  # the workload check_wait_timeout names
                by_patch.setdefault(patch, []).append(_SlowStart(ks.key, deadline, slowest, budget.seconds))
            else:
                problems.append(f"{ks.declared_in or 'bootstrap'}: {line.removeprefix('flux: ')}")
    return [*(_timeout_patch(patch, found) for patch, found in by_patch.items()), *problems]


@dataclass(frozen=True)
class _SlowStart:
    """A waiting Kustomization whose deadline a parent's patch set is not above its slowest workload's start."""

    key: KsKey
    deadline: str  # the timeout, else the interval, as the patched spec has it
    slowest: str  # that workload, e.g. "Deployment plex/plex"
    seconds: int  # its worst-case start


def _timeout_patch(patch: str, found: list[_SlowStart]) -> str:
    """One line for a parent's patch whose timeout is below the start of the workloads of the Kustomizations it
    patches, each counted with its slowest workload."""
    deadline = found[-1].deadline
    shown = [f"{show_key(s.key)} ({s.slowest}: {s.seconds} s)" for s in found]
    it = "it" if len(found) == 1 else "them"
    most = minutes_above(max(s.seconds for s in found))
    return (f"{patch}: sets spec.timeout: {deadline} ({int(duration_seconds(deadline))} s), not above the "
            f"worst-case start of the workloads of {_counted(shown)} it patches; a slow start fails {it} and holds "
            f"back everything that depends on {it}; hint: set timeout: {most} or more in that patch, or leave timeout "
            f"out of that patch, or give the patch a target that leaves {listed([show_key(s.key) for s in found])} out")


def tier_members(after: FluxView, graph: FluxGraph) -> list[str]:
    """6. A component that joined a tier is waited for by everything that waits for the tier."""
    problems: list[str] = []
    for name, c in graph.components.items():
        if c.tier is None:
            continue
        tier, comp = c.tier, c.kustomization
        if comp not in after.kustomizations:
            continue  # its Kustomization is not applied: that refusal is the line, this would be its consequence
        for ks in after.kustomizations.values():
            if ks.key != comp and tier in ks.depends and comp not in ks.depends:
                entry = f"- name: {comp[1]}" + (f", namespace: {comp[0]}" if comp[0] != ks.key[0] else "")
                problems.append(f"{ks.declared_in or show_key(ks.key)}: {show_key(ks.key)}.spec.dependsOn: lacks "
                                f"{show_key(comp)}: {name} joined the tier {show_key(tier)}, and whatever waits for "
                                f"that tier must wait for {name} too; hint: add `{entry}` to its dependsOn")
    return problems


def _waited_workloads(ks: WalkedKustomization, view: FluxView, node_count: int,
                      not_its_own: set[ObjectId]) -> list[tuple[str, StartBudget]]:
    if ks.spec.get("wait") is True:
        ids = [o for o in ks.objects if o.kind in WORKLOAD_KINDS and o not in not_its_own]
    else:
        ids = []
        checks = ks.spec.get("healthChecks")
        for h in checks if isinstance(checks, list) else []:
            if isinstance(h, dict) and h.get("kind") in WORKLOAD_KINDS:
                ids += [o for o in ks.objects if o.kind == h["kind"] and o.name == h.get("name")
                        and o.namespace == str(h.get("namespace") or ks.key[0]) and o not in not_its_own]
    return [(str(o), worst_case_start(view.manifests[o], node_count)) for o in ids]
