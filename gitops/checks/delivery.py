"""Refusals from Flux's view of the repository (gitops/flux/), before anything is written.

Each stack's repository is walked twice: as it is (`before`) and as it will be after the export (`after`). The
export is refused, one line per problem naming the file to change and the entry to add or remove, when:
- an exported object is applied by no Flux Kustomization, or by two, or by another than its component's own;
- an object the repository applied before is applied by nothing after (with prune: true Flux would delete it:
  `flux-system/` cut out of the bootstrap build is the classic);
- a `${VAR}` is unresolved in the scope of the Kustomization that applies it, or a Kustomization's build fails
  (new since `before`, or about an exported file: older problems of hand-written files are shown, not refused);
- any Flux Kustomization the walk reaches breaks a graph rule (components/flux.py), a waiting one has a timeout
  below the worst-case start of its workloads, or a Kustomization depends on a tier that a component joined
  without depending on that component too;
- a tier the stack says the repository declares is not in the repository;
- a parent's patch (or the spec as Flux applies it) takes from an exported Kustomization what it relies on: its
  `substituteFrom`, being applied at all (`suspend: true`, `$patch: delete`), `prune`, and for the plugin's, `wait`
  and its dependency on the CNI.

One problem, one line, cause first (issue 43): a failed build is said once per cause, at the file at fault (the
kustomization with the bad entry, the file that closes a cycle, the Kustomization without a usable spec.path), with
the Kustomizations it fails, the export's objects they leave unapplied and the tiers the walk cannot reach behind it
folded in; a patch suspending several of the export's Kustomizations is one line. Nothing below a symlink the export
would write through is judged: the walk sees there only what the export writes, and OUT's own guard names the link.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gitops.flux.build import Builder, BuildError, RepoView, join_path
from gitops.flux.inventory import FluxView, KsKey, ObjectId, WalkedKustomization, is_flux_kustomization, show_key
from gitops.flux.varsub import string_values, unresolved_variables
from gitops.flux.walk import walk_from_bootstrap
from gitops.tree import ExportedObject, Tree
from model.flux_graph import (
    WORKLOAD_KINDS,
    GraphNode,
    StartBudget,
    check_graph,
    check_wait_timeout,
    duration_seconds,
    worst_case_start,
)
from model.layout import is_within, repo_dir
from model.outputs import FluxGraph
from model.safe_yaml import as_mapping, load_yaml


@dataclass
class StackWalk:
    tree: Tree
    before: FluxView
    after: FluxView
    fresh: bool  # OUT held no bootstrap folder for this stack: hand-written parts are assumed, not checked
    notices: list[str] = field(default_factory=list)


def before_and_after(tree: Tree, graph: FluxGraph, before_view: RepoView, after_view: RepoView) -> StackWalk:
    """Flux's walk of the repository from the stack's bootstrap, as it is (none when the bootstrap folder is not there
    yet: a first export) and as it will be."""
    def walk_view(view: RepoView) -> FluxView:
        return walk_from_bootstrap(view, tree.layout.bootstrap_path, graph.bootstrap.key, graph.bootstrap.source_key)

    boot_dir = tree.layout.bootstrap_path.removeprefix("./")
    fresh = not before_view.is_dir(boot_dir)
    before = walk_view(before_view) if not fresh else FluxView(bootstrap=graph.bootstrap.key)
    return StackWalk(tree=tree, before=before, after=walk_view(after_view), fresh=fresh)


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
    (`_depends_patches`)."""
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
    keys = _and([show_key(k) for k, _ in found])
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
    return (f"{at}: sets spec.suspend: true on the export's {_and([show_key(k) for k in keys])}: Flux would never "
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


def deciding_file(view: RepoView, after: FluxView, folder: str) -> tuple[str | None, str | None]:
    """(the kustomization file whose `resources` decide whether `folder` is built, the entry to list there).
    (None, None) when no walked Kustomization's path contains `folder`."""
    containing = [k for k in after.kustomizations.values() if k.status == "built" and is_within(folder, k.path)
                  and k.path != folder]
    if not containing:
        return None, None
    base = max(containing, key=lambda k: len(k.path)).path
    parts = folder.split("/")
    start = len(base.split("/")) if base else 0
    deciding = None
    for i in range(len(parts) - 1, start - 1, -1):
        d = "/".join(parts[:i])
        kfile = view.kustomization_file(d)
        if kfile:
            deciding = (kfile, d)
            break
    if deciding is None:
        return None, None
    kfile, d = deciding
    return kfile, posixpath.relpath(folder, d or ".")


def _entry_into(trail: tuple[tuple[str, str], ...], folder: str) -> tuple[str | None, str | None]:
    """The outermost (kustomization file, entry) of a build trail whose entry leads into `folder`."""
    for kfile, entry in trail:
        if is_within(posixpath.dirname(kfile), folder):
            break  # the exported folder's own kustomization.yaml: the way in was a generated walk, not an entry
        target = posixpath.normpath(posixpath.join(posixpath.dirname(kfile), entry))
        if is_within(target, folder) or is_within(folder, target):
            return kfile, entry
    return None, None


def _applier(after: FluxView, key: KsKey) -> str:
    ks = after.kustomizations.get(key)
    path = ks.shown_path if ks is not None else "?"
    return f"{show_key(key)} (path {path})"


# --- one cause, one line ------------------------------------------------------------------------------------------
# A Kustomization's failed build is said once per cause, at the file at fault: the Kustomizations it fails, the
# export's objects they leave unapplied and the tiers the walk cannot reach behind them fold into that line.

_CYCLE = re.compile(r"^(?P<kfile>.+?): resources: (?P<entry>.+?): a cycle of kustomizations \((?P<cycle>.+?)\); ")
_MULTIPLE = re.compile(r"^(?P<folder>.+?): found multiple kustomization files \((?P<files>.+?)\); ")
_KUSTOMIZE = re.compile(r"^(?P<folder>.+?): kustomize build failed: (?P<said>.*)$", re.DOTALL)
_QUOTED = re.compile(r"^(?P<kfile>[^:]+): (?P<text>'.*'|\".*\"): (?P<problem>leaves the repository|a symlink that "
                     r"leads out of the repository.*)$", re.DOTALL)
_DEEPEST = re.compile(r"accumulation of path '([^']+)'")
_KUSTOMIZE_CYCLE = re.compile(r"cycle detected: candidate root '([^']+)'")
_ACCUMULATING = re.compile(r"accumulating resources from '([^']+)'")
_NOT_A_FOLDER = re.compile(r"must build at directory: '([^']+)': file is not directory")


@dataclass
class _Cause:
    """One cause of failed builds: its line's head (the file at fault first, then the key or path and the problem),
    its hint, the Kustomizations it fails (walk order) and what of the export it takes down."""

    head: str
    hint: str
    failing: list[WalkedKustomization] = field(default_factory=list)
    unapplied: dict[str, list[ObjectId]] = field(default_factory=dict)  # the export's folder -> its objects
    tiers: list[KsKey] = field(default_factory=list)  # flux.tiers the walk cannot reach behind it
    refused: bool = False  # new since before the export, or about the export's own Kustomizations or files

    def line(self) -> str:
        keys = [k.key for k in self.failing]
        if len(keys) == 1:
            k = self.failing[0]
            said = f"{show_key(k.key)} ({k.declared_in or 'bootstrap'}) fails to build because of it"
        else:
            said = (f"{len(keys)} Kustomizations fail to build because of it "
                    f"({', '.join(show_key(k) for k in keys)})")
        said += ", and Flux holds back whatever depends on " + ("it" if len(keys) == 1 else "them")
        if self.unapplied:
            count = sum(len(ids) for ids in self.unapplied.values())
            first = next(iter(self.unapplied.values()))[0]
            said += (f"; nothing applies the {count} object{'s' if count != 1 else ''} the export writes to "
                     f"{_and([f'{folder}/' for folder in _outermost(list(self.unapplied))])} (e.g. {first})")
        if self.tiers:
            said += (f"; Flux's walk cannot reach {_and([show_key(t) for t in self.tiers])}, which the stack says the "
                     "repository declares (flux.tiers)")
        return f"{self.head}; {said}; hint: {self.hint}"


@dataclass
class _Failures:
    """The after-walk's failed builds, one `_Cause` each, in walk order; `of[key]`: the cause of a failed one."""

    causes: dict[str, _Cause] = field(default_factory=dict)
    of: dict[KsKey, str] = field(default_factory=dict)
    took: dict[ObjectId, str] = field(default_factory=dict)  # an object of the export -> the cause that took it

    def take(self, after: FluxView, folder: str, oid: ObjectId, own: KsKey | None) -> bool:
        """An object of the export in `folder` that nothing applies: the cause of its own Kustomization's failed build
        takes it, else that of the deepest failed build whose path holds the folder (True), or none does (False). A
        failed bootstrap holds every folder: the walk reaches nothing beyond it."""
        holding = [after.kustomizations[k] for k in self.of
                   if is_within(folder, after.kustomizations[k].path) or k == after.bootstrap]
        if own not in self.of and not holding:
            return False
        self.took[oid] = self.of[own] if own in self.of else self.of[max(holding, key=lambda k: len(k.path)).key]
        self.causes[self.took[oid]].unapplied.setdefault(folder, []).append(oid)
        return True

    def follow(self, waiting: dict[KsKey, list[tuple[str, ObjectId]]]) -> None:
        """The objects of the export's Kustomizations that a failed build left unapplied go to its cause too."""
        for key, objects in waiting.items():
            cause = next((self.causes[c] for oid, c in self.took.items()
                          if oid.kind == "Kustomization" and (oid.namespace, oid.name) == key), None)
            if cause is None:
                continue
            for folder, oid in objects:
                cause.unapplied.setdefault(folder, []).append(oid)

    def lines(self, sw: StackWalk) -> list[str]:
        """The refusals; a cause older than the export that takes nothing of it down is a notice."""
        refused = []
        for cause in self.causes.values():
            if cause.refused or cause.unapplied or cause.tiers:
                refused.append(cause.line())
            else:
                sw.notices.append(f"already in the repository before this export: {cause.line()}")
        return refused


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _outermost(folders: list[str]) -> list[str]:
    """The folders that lie below none of the others (each named once, what lies below it with it)."""
    return [f for f in folders if not any(other != f and is_within(f, other) for other in folders)]


def _failures_of(sw: StackWalk, graph: FluxGraph, view: RepoView, hidden: list[str]) -> _Failures:
    """Each failed build of the after-walk under its cause (none below a link the export would write through: OUT's
    guard names the link, see `_links_on_the_way`)."""
    found = _Failures()
    for ks in sw.after.kustomizations.values():
        if ks.status != "failed" or _below(ks, hidden):
            continue
        key, head, hint = _cause(sw.tree, view, ks)
        cause = found.causes.setdefault(key, _Cause(head=head, hint=hint))
        cause.failing.append(ks)
        found.of[ks.key] = key
        old = sw.before.kustomizations.get(ks.key)
        cause.refused |= (ks.key in graph.exported or head.split(": ", 1)[0] in sw.tree.files or old is None
                          or old.status != "failed" or old.error != ks.error)
    return found


def _cause(tree: Tree, view: RepoView, ks: WalkedKustomization) -> tuple[str, str, str]:
    """(what tells one cause from another, the line's head naming the file at fault first, the hint)."""
    err, where = ks.error, ks.declared_in or "the bootstrap Kustomization"
    if err.startswith("spec.path "):  # the walk's own: the path leaves the repository
        return (f"{where}: {err}", f"{where}: spec.path: {ks.path!r}: leaves the repository, and Flux reads only "
                "its source", "set spec.path to a folder of the repository (./…)")
    if _pathless(ks):
        return (f"{where}: {err}", f"{where}: spec.path: not set, so Flux builds the whole repository (./), and that "
                f"build fails: {err}", "set spec.path to the folder this Kustomization is meant to apply")
    if m := _CYCLE.match(err):
        return _cycle(m["kfile"], m["entry"], m["cycle"].split(" -> "))
    if m := _MULTIPLE.match(err):
        return (err, *_two_kustomizations(tree, m["folder"], m["files"].split(", ")))
    if m := _KUSTOMIZE.match(err):
        return _kustomize_refused(view, m["folder"], m["said"], ks)
    if m := _QUOTED.match(err):
        at = _key_of(view, m["kfile"], m["text"])
        fix = ("point it inside the repository, or take it out" if m["problem"] == "leaves the repository"
               else "replace the link with the folder it stands for, inside the repository")
        return (err, f"{m['kfile']}: {at + ': ' if at else ''}{m['text']}: {m['problem']}", fix)
    return (err, err, "fix the file named; see kustomize's own answer with `kubectl kustomize --load-restrictor "
            f"LoadRestrictionsNone {ks.shown_path}`")


def _cycle(kfile: str, entry: str, way: list[str]) -> tuple[str, str, str]:
    """A cycle of kustomizations, shown from the folder it returns to (not the way into it, which differs between
    the Kustomizations, and the stacks, that build it) and told apart by its folders."""
    cycle = way[way.index(way[-1]):]
    return ("a cycle of " + ", ".join(sorted(set(cycle))), f"{kfile}: resources: {entry}: a cycle of kustomizations "
            f"({' -> '.join(cycle)}); kustomize refuses to build it", f"remove {entry} from the resources of {kfile}")


def _two_kustomizations(tree: Tree, folder: str, files: list[str]) -> tuple[str, str]:
    """A folder with two kustomization files: the one to delete is the one the export does not write."""
    own = [f for f in files if f in tree.files]
    other = [f for f in files if f not in tree.files]
    if own and other:
        return (f"{other[0]}: a second kustomization file beside the export's {own[0]}: kustomize and Flux refuse to "
                f"build {folder}/ with more than one", f"delete {_and(other)}; the export's {own[0]} lists what "
                f"{folder}/ holds")
    return (f"{files[-1]}: a second kustomization file beside {_and(files[:-1])}: kustomize and Flux refuse to build "
            f"{folder}/ with more than one", "keep one of them")


def _kustomize_refused(view: RepoView, folder: str, said: str, ks: WalkedKustomization) -> tuple[str, str, str]:
    """kubectl's refusal, named at the kustomization file it was building when it failed (its deepest `accumulation
    of path`); a component listed as a file is said as such."""
    deepest = ([folder, *_DEEPEST.findall(said)])[-1]
    kfile = view.kustomization_file(deepest) or deepest
    root, entries = _KUSTOMIZE_CYCLE.search(said), _ACCUMULATING.findall(said)
    if root and entries:
        return _cycle(kfile, repr(entries[-1]), [f"{d}/" for d in [folder, *_DEEPEST.findall(said), root[1]]])
    if (m := _NOT_A_FOLDER.search(said)) and (entry := _entry_to(view, kfile, "components", m[1])):
        return (f"{kfile}: components: {entry!r}", f"{kfile}: components: {entry!r}: a file; kustomize takes a "
                "component from a folder holding its kustomization.yaml (kind: Component)",
                "list the component's folder, not a file in it")
    return (f"{kfile}: {said}", f"{kfile}: kustomize refuses to build {deepest}/: {said}", "see kustomize's own answer "
            f"with `kubectl kustomize --load-restrictor LoadRestrictionsNone {ks.shown_path}`")


def _kustomization(view: RepoView, kfile: str) -> Any:
    try:
        return load_yaml(view.read(kfile).decode())
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # the walk's line says what is wrong with it


def _entry_to(view: RepoView, kfile: str, field_name: str, target: str) -> str | None:
    """The entry of the kustomization's `field_name` list that resolves to `target` (a repository path)."""
    doc = _kustomization(view, kfile)
    entries = as_mapping(doc).get(field_name)
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str) and join_path(posixpath.dirname(kfile), entry) == target:
            return entry
    return None


def _key_of(view: RepoView, kfile: str, shown: str) -> str | None:
    """Where in the kustomization the string shown (quoted, as the build's line shows it) stands: `components[0]`."""
    at = next((at for at, text in string_values(_kustomization(view, kfile)) if repr(text) == shown), None)
    return re.sub(r"\[\d+\]$", "", at) if at else None  # `components`, as a build's line says `resources`


def _links_on_the_way(sw: StackWalk, view: RepoView) -> list[str]:
    """The symlinks on the way to a file the export writes (the first of each path). OUT's own guard refuses every
    one, naming it (gitops/repo/out_folder.py, `read_regular`: the export never reads or writes through a link),
    and the walk cannot tell what Flux would read there: nothing below them is judged here."""
    found: set[str] = set()
    for rel in sw.tree.files:
        parts = rel.split("/")
        ways = ("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        link = next((way for way in ways if (view.root / way).is_symlink()), None)
        if link is not None:
            found.add(link)
    return sorted(found)


def _below(ks: WalkedKustomization, links: list[str]) -> bool:
    """The Kustomization's path lies below one of these links."""
    return any(is_within(repo_dir(ks.shown_path), link) for link in links)


def check_stack(sw: StackWalk, graph: FluxGraph, view: RepoView, old_owned: set[str],
                node_count: int) -> list[str]:
    """Every refusal of the stack's walk, one line each, in the order of the module's list; notices (problems the
    repository had before this export) go to `sw.notices`."""
    deleted = deleted_by_patch(sw, graph.exported, view)
    links = _links_on_the_way(sw, view)
    failures = _failures_of(sw, graph, view, links)
    _applied_as_written(sw, graph, links)
    second: set[tuple[KsKey, ObjectId]] = set()  # (Kustomization, exported object) it applies a second time
    applied = _applied_once(sw, graph, view, set(deleted), failures, links, second)
    folds: dict[str, list[str]] = {}  # a parent's patch -> what its dependsOn breaks, said in one line
    rules = _graph_rules(sw, graph, failures, folds)  # before the failures' lines: a tier it cannot reach folds in
    parents = check_parent_patches(sw.after, graph.exported, graph.plugin, graph.cni, graph.driver, folds)
    return [
        *failures.lines(sw),
        *applied,
        *_nothing_dropped(sw, view, old_owned),
        *deleted.values(),
        *_depends_patches(folds),
        *parents,
        *_build_problems(sw, graph, links),
        *rules,
        *_wait_timeouts(sw.after, node_count, links, second),
        *_tier_members(sw.after, graph),
        *_namespaces_created(sw),
        *_second_plugin(sw, graph),
    ]


# What installs Intel's GPU device plugin besides the export's DaemonSet: its Helm charts, the operator's custom
# resource, or a DaemonSet running the plugin's image.
PLUGIN_CHARTS = ("intel-device-plugins-gpu", "intel-device-plugins-operator")
PLUGIN_IMAGE = "intel/intel-gpu-plugin"


def _installs_a_plugin(manifest: dict[str, Any]) -> str | None:
    m = as_mapping
    kind, spec = manifest.get("kind"), m(manifest.get("spec"))
    if kind == "HelmRelease":
        chart = m(m(spec.get("chart")).get("spec")).get("chart")
        return f"the Helm chart {chart}" if chart in PLUGIN_CHARTS else None
    if kind == "GpuDevicePlugin":
        return "the operator's GpuDevicePlugin"
    if kind in WORKLOAD_KINDS:
        containers = m(m(spec.get("template")).get("spec")).get("containers")
        for c in containers if isinstance(containers, list) else []:
            if PLUGIN_IMAGE in str(m(c).get("image", "")):
                return f"the image {m(c).get('image')}"
    return None


def _second_plugin(sw: StackWalk, graph: FluxGraph) -> list[str]:
    """Another Intel GPU plugin the repository installs: two on one node each advertise gpu.intel.com/i915, so the
    scheduler counts every device twice and the evidence and capacity checks count wrong. Once the DRA route removed
    the export's plugin (step 5), any plugin left is one serving the nodes beside the DRA driver: each hands out the
    same iGPU without counting the other's use, which the move exists to end."""
    ours = {ObjectId.of(o.manifest) for o in sw.tree.objects}
    problems = []
    for oid, manifest in sorted(sw.after.manifests.items()):
        what = None if oid in ours else _installs_a_plugin(manifest)
        if not what:
            continue
        origin = sw.after.origins.get(oid, "?")
        if graph.plugin is None and graph.driver is not None:
            problems.append(f"{origin}: {oid}: installs an Intel GPU device plugin ({what}) beside the DRA driver "
                            f"after gpu.dra.stage plugin-removed: both would hand out the same iGPU, neither counting "
                            "the other's use; hint: remove it from the repository in the same pull request")
        else:
            problems.append(f"{origin}: {oid}: installs a second Intel GPU plugin ({what}) beside the export's "
                            "intel-gpu-plugin DaemonSet; two plugins on one node each advertise gpu.intel.com/i915, "
                            "so every device is counted twice; hint: remove one of them")
    return problems


def _namespaces_created(sw: StackWalk) -> list[str]:
    """Each exported Kustomization lives in the bootstrap's namespace or one something applies: in
    a namespace nothing creates, the API server refuses it and nothing the export delivers ever reconciles."""
    if sw.fresh:
        return []
    # The bootstrap Kustomization's own namespace exists wherever Flux was installed from (bootstrap, Helm, operator).
    created = {oid.name for oid in sw.after.applied_by if oid.kind == "Namespace"} | {sw.after.bootstrap[0]}
    problems = []
    for obj in sw.tree.objects:
        namespace = str((obj.manifest.get("metadata") or {}).get("namespace") or "")
        if obj.manifest.get("kind") == "Kustomization" and namespace and namespace not in created:
            problems.append(f"{obj.path}: {ObjectId.of(obj.manifest)}: its namespace {namespace!r} is created by "
                            "nothing Flux's walk applies; the API server refuses the object and nothing the export "
                            "delivers would reconcile; hint: set flux.namespace to Flux's own namespace (flux-system), "
                            f"or add a Namespace {namespace} to the repository")
    return problems


def _applied_once(sw: StackWalk, graph: FluxGraph, view: RepoView, deleted: set[KsKey], failures: _Failures,
                  hidden: list[str], second: set[tuple[KsKey, ObjectId]]) -> list[str]:
    """1. Every exported object is applied exactly once, by the Kustomization meant for its folder (the export's
    Kustomizations a parent's patch deletes are said by that refusal, and are not looked for; what a failed build
    leaves unapplied folds into its cause's line; what lies below a link is left to OUT's guard, which names it).
    `second` gains each Kustomization that applies an exported object a second time, with the object."""
    tree, after = sw.tree, sw.after
    expected: dict[str, KsKey] = {c.folder: c.kustomization for c in graph.components.values()}
    if graph.plugin is not None:
        expected[graph.plugin_folder] = graph.plugin
    if graph.driver is not None:
        expected[graph.driver_folder] = graph.driver
    problems: list[str] = []
    unapplied: dict[str, ObjectId] = {}
    waiting: dict[KsKey, list[tuple[str, ObjectId]]] = {}  # its own Kustomization is not applied either
    twice: dict[tuple[KsKey, str | None, str | None, str], list] = {}
    elsewhere: dict[tuple[KsKey, str], list[tuple[str, ObjectId]]] = {}  # applied only by another Kustomization
    own_file: dict[tuple[KsKey, str, str, KsKey | None], list[Any]] = {}  # a file of the repository's holds them too
    for obj in tree.objects:
        oid = ObjectId.of(obj.manifest)
        folder = posixpath.dirname(obj.path)
        appliers = after.applied_by.get(oid, [])
        if any(is_within(obj.path, link) for link in hidden):
            continue
        if not appliers:
            if is_flux_kustomization(obj.manifest) and (oid.namespace, oid.name) in deleted:
                continue
            own = expected.get(folder)
            if own is not None and own not in after.kustomizations and own in graph.exported:
                waiting.setdefault(own, []).append((folder, oid))  # the line about its Kustomization names the cause
            elif folder not in unapplied and not failures.take(after, folder, oid, own):
                unapplied[folder] = oid
        elif len(appliers) > 1:
            want = expected.get(folder)
            extra = [a for a in appliers if a != want] if want in appliers else appliers[1:]
            for a in extra:
                second.add((a, oid))
                source = after.sources.get((oid, a), "")
                if source and not is_within(source, folder):  # the repository's own file holds the object too
                    own_file.setdefault((a, source, folder, want), []).append(obj)
                    continue
                kfile, entry = _entry_into(after.trails.get((oid, a), ()), folder)
                twice.setdefault((a, kfile, entry, folder), []).append((obj, appliers))
        elif folder in expected and appliers[0] != expected[folder]:
            elsewhere.setdefault((appliers[0], folder), []).append((obj.path, oid))
    problems += [_applied_from_own_file(sw, graph, key, objs) for key, objs in own_file.items()]
    problems += [_applied_by_another(sw, graph, applier, folder, expected[folder], objs)
                 for (applier, folder), objs in elsewhere.items()]
    failures.follow(waiting)
    pathless = {key: objs for key, objs in twice.items() if _pathless(after.kustomizations[key[0]])}
    return [*problems, *_not_applied(sw, view, unapplied),
            *_applied_twice_by_applier(after, {key: objs for key, objs in twice.items() if key not in pathless}),
            *_applied_by_a_pathless(after, pathless)]


def _applied_by_another(sw: StackWalk, graph: FluxGraph, applier: KsKey, folder: str, own: KsKey,
                        objs: list[tuple[str, ObjectId]]) -> str:
    """Objects of an exported folder that another Kustomization applies instead of the folder's own, one line per
    applier and folder. Where the repository holds the objects itself (their origin outside the export's folder),
    the repository delivers the app: for Plex the fix is the stack key, and the line leads with it."""
    after = sw.after
    path, oid = objs[0]
    more = f" and {len(objs) - 1} more" if len(objs) > 1 else ""
    declared = after.kustomizations[applier].declared_in or "that Kustomization"
    origin = after.origins.get(oid, "")
    app = next((name for name, c in graph.components.items() if c.folder == folder), None)
    if origin and not is_within(origin, folder) and app == "plex" and any(o.kind == "Deployment" for _, o in objs):
        return (f"Pulumi.{sw.tree.stack}.yaml: gpu-platform:plex.deliveredBy: export (the default), but "
                f"{_applier(after, applier)} already applies the repository's own plex ({oid}{more} from {origin}) "
                f"that the export writes to {folder}/ for {show_key(own)}; hint: set plex.deliveredBy: repository "
                f"(the export then writes no Plex and holds the repository's to the GPU gate), or take plex out of "
                f"{declared}")
    ks = after.kustomizations[applier]
    kfile, entry = _entry_into(after.trails.get((oid, applier), ()), folder)
    if kfile in sw.tree.files:
        kfile = entry = None  # the export's own listing: the fix is where the applier reaches in
    where = f"{kfile}: resources: `{entry}`" if kfile else ks.declared_in or ks.shown_path
    what = (f"the {len(objs)} objects of {folder}/ (e.g. {oid}, written to {path})" if more
            else f"{oid} (written to {path})")
    return (f"{where}: {_applier(after, applier)} applies {what}, which only its own Kustomization {show_key(own)} "
            "should apply; hint: " + (f"remove `{entry}` from its resources" if kfile
                                      else f"stop {show_key(applier)} from reaching {folder}/"))


def _not_applied(sw: StackWalk, view: RepoView, unapplied: dict[str, ObjectId]) -> list[str]:
    """What no Kustomization applies and no failed build holds, one line per cause: the entry a listing lacks (the
    folders it leaves out counted together), or the walk that never reaches the export (named at its first folder)."""
    tree, after = sw.tree, sw.after
    lacking: dict[tuple[str, str], list[str]] = {}
    unreached: list[str] = []
    for folder in sorted(unapplied, key=lambda f: f.count("/")):
        if any(is_within(folder, top) for top in [*unreached, *(f[0] for f in lacking.values())]):
            continue  # below a folder said already, and counted with it
        kfile, entry = deciding_file(view, after, folder)
        if kfile is not None and entry is not None:
            lacking.setdefault((kfile, entry), []).append(folder)
        else:
            unreached.append(folder)
    lines = []
    for (kfile, entry), folders in lacking.items():
        count = sum(1 for o in tree.objects if any(o.path.startswith(f + "/") for f in folders))
        lines.append(f"{kfile}: resources: lacks {entry!r}, so nothing applies the {count} objects the export writes "
                     f"to {_and([f'{f}/' for f in folders])} (e.g. {unapplied[folders[0]]}); hint: add `- {entry}` to "
                     "its resources")
    for folder in unreached[:1]:
        lines.append(f"{folder}: {unapplied[folder]}: no Flux Kustomization applies it; Flux's walk starts at "
                     f"{tree.layout.bootstrap_path} ({show_key(after.bootstrap)}); hint: set gitops.entryDir to a "
                     "folder inside the bootstrap path")
    return lines


def _applied_from_own_file(sw: StackWalk, graph: FluxGraph, key: tuple[KsKey, str, str, KsKey | None],
                           objs: list[Any]) -> str:
    """The clash named at its file, one line per file and folder: a hand-written file the repository applies holds
    objects the export writes. When that is Plex, the repository delivers it: the line leads with the stack key."""
    applier, source, folder, own = key
    after, obj = sw.after, objs[0]
    oid = ObjectId.of(obj.manifest)
    more = f" and {len(objs) - 1} more" if len(objs) > 1 else ""
    mine = f" for {show_key(own)}" if own else ""
    app = next((name for name, c in graph.components.items() if c.folder == folder), None)
    if app == "plex" and any(ObjectId.of(o.manifest).kind == "Deployment" for o in objs):  # its Plex, not a stray
        return (f"Pulumi.{sw.tree.stack}.yaml: gpu-platform:plex.deliveredBy: export (the default), but "
                f"{_applier(after, applier)} already applies the repository's own plex ({oid}{more} from {source}) "
                f"that the export writes to {folder}/{mine}; hint: set plex.deliveredBy: repository (the export then "
                f"writes no Plex and holds the repository's to the GPU gate), or take plex out of {source}")
    return (f"{source}: {oid}{more}: applied by {_applier(after, applier)} from this file, and written by the export "
            f"to {obj.path if not more else folder + '/'}{mine}; two Kustomizations applying one object fight over it "
            f"and each prunes it when the other changes; hint: take {oid.kind} {oid.name}{more} out of {source}, or, "
            "for an app the repository delivers, set its deliveredBy: repository")


def _applied_twice_by_applier(after: FluxView,
                              twice: dict[tuple[KsKey, str | None, str | None, str], list]) -> list[str]:
    """One line per cause: an entry of a kustomization listing one folder, or a Kustomization whose own path reaches
    several of the export's folders (its folders counted in one line)."""
    by_path: dict[KsKey, list[tuple[tuple[KsKey, str | None, str | None, str], list]]] = {}
    lines: list[str] = []
    for key, objs in twice.items():
        if key[1]:  # a kustomization's entry: the fix is that entry, one per entry
            lines.append(_applied_twice(after, key, objs))
        else:
            by_path.setdefault(key[0], []).append((key, objs))
    for a, folders in by_path.items():
        if len(folders) == 1:
            lines.append(_applied_twice(after, *folders[0]))
            continue
        ks = after.kustomizations[a]
        obj = folders[0][1][0][0]
        others = list(dict.fromkeys(show_key(x) for _, objs in folders for _, appliers in objs
                                    for x in appliers if x != a))
        shown = ", ".join(f"{key[3]}/" for key, _ in folders)
        count = sum(len(o) for _, o in folders)
        lines.append(f"{ks.declared_in or ks.shown_path}: {show_key(a)} applies the {count} objects of {shown} (e.g. "
                     f"{ObjectId.of(obj.manifest)}, written to {obj.path}), which {', '.join(others)} apply too; two "
                     "Kustomizations applying one object fight over it and each prunes it when the other changes; "
                     f"hint: stop {show_key(a)} from reaching {shown}")
    return lines


def _applied_twice(after: FluxView, key: tuple[KsKey, str | None, str | None, str], objs: list) -> str:
    a, kfile, entry, folder = key
    ks = after.kustomizations[a]
    obj, appliers = objs[0]
    where = kfile or ks.declared_in or ks.shown_path
    what = f"resources: `{entry}`: " if kfile else ""
    others = [_applier(after, x) for x in appliers if x != a]
    return (f"{where}: {what}{show_key(a)} applies the {len(objs)} objects of {folder}/ (e.g. "
            f"{ObjectId.of(obj.manifest)}, written to {obj.path}), which {' and '.join(others)} "
            f"{'apply' if len(others) > 1 else 'applies'} too; two Kustomizations applying one object fight over it "
            "and each prunes it when the other changes; "
            "hint: " + (f"remove `{entry}` from its resources" if kfile
                        else f"stop {show_key(a)} from reaching {folder}/"))


def _pathless(ks: WalkedKustomization) -> bool:
    """A Kustomization the walk reached whose spec sets no path: Flux builds the whole repository for it."""
    return ks.parent is not None and not ks.spec.get("path")


def _applied_by_a_pathless(after: FluxView, twice: dict[tuple[KsKey, str | None, str | None, str], list]) -> list[str]:
    """What a Kustomization without spec.path applies a second time, one line for each such Kustomization: its
    file first, every folder of the export it reaches folded in."""
    by_applier: dict[KsKey, list[tuple[str, list]]] = {}
    for (a, _, _, folder), objs in twice.items():
        by_applier.setdefault(a, []).append((folder, objs))
    lines = []
    for a, found in by_applier.items():
        ks = after.kustomizations[a]
        obj, _ = found[0][1][0]
        lines.append(f"{ks.declared_in or show_key(a)}: spec.path: not set, so Flux builds the whole repository (./) "
                     f"for {show_key(a)}, which applies the {sum(len(objs) for _, objs in found)} objects of "
                     f"{_and([f'{folder}/' for folder, _ in found])} (e.g. {ObjectId.of(obj.manifest)}, written to "
                     f"{obj.path}) that their own Kustomizations apply too; two Kustomizations applying one object "
                     "fight over it and each prunes it when the other changes; hint: set spec.path to the folder this "
                     "Kustomization is meant to apply")
    return lines


def _nothing_dropped(sw: StackWalk, view: RepoView, old_owned: set[str]) -> list[str]:
    """2. Nothing the repository applied before is applied by nothing after (with prune: true Flux deletes it)."""
    tree, after, before = sw.tree, sw.after, sw.before
    cut: dict[str, list[tuple[str, ObjectId, KsKey]]] = {}  # the export's own kustomization file -> what it cuts out
    dropped: dict[tuple[str, str], list[tuple[str, ObjectId, KsKey]]] = {}  # one cause (head, hint) -> its objects
    for oid, appliers in sorted(before.applied_by.items()):
        if oid in after.applied_by:
            continue
        origin = before.origins.get(oid, "")
        if origin in old_owned or any(posixpath.dirname(f) == origin for f in old_owned):
            continue  # the export's own object from an earlier export: pruning it is the export's job
        folder = posixpath.dirname(origin) if origin.endswith((".yaml", ".yml")) else origin
        own = view.kustomization_file(folder)  # the export's own listing in the folder itself leaves the file out
        kfile, entry = (own, None) if own in tree.files else deciding_file(view, after, folder)
        if kfile in tree.files and posixpath.dirname(kfile) in (tree.layout.entry_dir, tree.layout.components_dir):
            cut.setdefault(kfile, []).append((origin, oid, appliers[0]))
            continue
        if kfile in tree.files:
            cause = (f"{kfile}: the export writes this file and lists only its own files in it",
                     f"set gitops.entryDir to a folder of its own, such as "
                     f"{tree.layout.bootstrap_path.removeprefix('./')}/gpu-platform, so the export writes no "
                     "kustomization file where the repository's files are")
        elif kfile and entry:
            cause = (f"{kfile}: resources: lacks {entry!r}", f"add `- {entry}` to its resources")
        else:
            cause = (f"{folder}/: no Kustomization reaches this folder after this export",
                     f"make {folder}/ reachable from {tree.layout.bootstrap_path} again")
        dropped.setdefault(cause, []).append((origin, oid, appliers[0]))
    return [*(_cut_out_by_the_export(tree, kfile, found) for kfile, found in cut.items()),
            *(_dropped(head, hint, found) for (head, hint), found in dropped.items())]


def _dropped(head: str, hint: str, found: list[tuple[str, ObjectId, KsKey]]) -> str:
    """The repository's objects no Kustomization applies after the export, one line per cause (its head: the file
    to change first), the objects counted."""
    origin, oid, _ = found[0]
    appliers = _and(list(dict.fromkeys(show_key(a) for _, _, a in found)))
    objects = (f"{oid} (from {origin})" if len(found) == 1
               else f"the {len(found)} objects of {_and(list(dict.fromkeys(o for o, _, _ in found)))} (e.g. {oid} from "
                    f"{origin})")
    return (f"{head}, so {objects}, applied by {appliers} before this export, would be applied by no Kustomization "
            f"after it; with prune: true Flux would delete {'them' if len(found) != 1 else 'it'} from the cluster; "
            f"hint: {hint}")


def _cut_out_by_the_export(tree: Tree, kfile: str, found: list[tuple[str, ObjectId, KsKey]]) -> str:
    """The repository's objects the export's own kustomization file leaves out of a folder they were built from,
    one line at the stack key that put the export's folder there, the objects counted."""
    layout, folder = tree.layout, posixpath.dirname(kfile)
    key, value = ("entryDir", layout.entry_dir) if folder == layout.entry_dir else ("componentsDir", folder)
    origin, oid, applier = found[0]
    files = sorted({o for o, _, _ in found})
    objects = f"the {len(found)} objects" if len(found) != 1 else "the object"
    own = f"{layout.bootstrap_path.removeprefix('./')}/gpu-platform"
    hint = (f"set gitops.{key} to a folder of its own, such as {own}" if own != value else
            f"move {_and(files)} out of {folder}/, or set gitops.{key} to a folder of its own")
    return (f"Pulumi.{tree.stack}.yaml: gpu-platform:gitops.{key}: \"{value}\": the export's own {kfile} lists only "
            f"the export's files, so {objects} {show_key(applier)} applied from {_and(files)} before this export "
            f"(e.g. {oid} from {origin}) would be applied by no Kustomization after it; with prune: true Flux would "
            f"delete {'them' if len(found) != 1 else 'it'} from the cluster; hint: {hint}")


def _build_problems(sw: StackWalk, graph: FluxGraph, hidden: list[str]) -> list[str]:
    """3. Builds and substitutions: new problems, and every problem about an exported file or Kustomization; older
    problems of hand-written files become notices. A failed build is said by its cause's line (`_Failures`), a
    problem below a link by OUT's guard, which names the link."""
    old = set(sw.before.problems)
    exported_files = set(sw.tree.files)
    # The walk's line of a failed build (gitops/flux/walk.py, _attribute) begins with these words.
    said = tuple(f"{show_key(k.key)} ({k.declared_in or 'bootstrap'}): build fails: "
                 for k in sw.after.kustomizations.values() if k.status == "failed")
    problems: list[str] = []
    for line in sw.after.problems:
        subject = line.split(" ", 1)[0]
        if line.startswith(said) or any(is_within(subject, link) for link in hidden):
            continue
        ours = subject in exported_files or any(line.startswith(show_key(k) + " ") for k in graph.exported)
        if ours or line not in old:
            problems.append(line)
        else:
            sw.notices.append(f"already in the repository before this export: {line}")
    return problems


def _applied_as_written(sw: StackWalk, graph: FluxGraph, hidden: list[str]) -> None:
    """A notice, not a refusal: a `${VAR}` under a Kustomization the export declares that has no variables at all.
    Flux substitutes only where a Kustomization has some, so it applies `${VAR}` as written (legal, and right for a
    dashboard's `${DS}`); under the export's own tier it is usually a tier moved out of cluster-vars' reach."""
    after = sw.after
    for key in sorted(graph.exported):
        ks = after.kustomizations.get(key)
        if ks is None or ks.status != "built" or ks.variables or _below(ks, hidden):
            continue
        for oid in ks.objects:
            for path, name in unresolved_variables(after.manifests[oid], {})[:1]:
                sw.notices.append(
                    f"{after.sources.get((oid, key), after.origins.get(oid, '?'))} ({oid}): {path}: ${{{name}}} is "
                    f"applied as written: {show_key(key)} has no variables (no postBuild, or a substituteFrom out of "
                    f"its namespace's reach), and Flux substitutes only where a Kustomization has some; hint: give "
                    f"{show_key(key)} the variables it needs (cluster-vars lives in {graph.namespace}), or write "
                    f"$${{{name}}} if the text is meant")


def _graph_rules(sw: StackWalk, graph: FluxGraph, failures: _Failures, folds: dict[str, list[str]]) -> list[str]:
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
                            warnings=sw.notices, driver=graph.driver, driver_dependents=graph.driver_dependents):
        rest = line.removeprefix("flux: ")
        where = rest.split(": ", 1)[0]
        ks = by_file.get(where)
        patch = patched_by(after, ks, "dependsOn") if ks is not None and ".spec.dependsOn:" in rest else None
        gone = next((t for t in missing if ks is not None and ": no such Kustomization;" in rest
                     and t in ks.depends), None)
        if gone is not None and ks is not None:
            missing[gone].append(f"{show_key(ks.key)} ({where})")
        elif patch:
            folds.setdefault(patch, []).append(rest.removeprefix(f"{where}: ").split("; hint: ")[0])
        elif rest.startswith("dependsOn cycle: "):
            cycles.append(line)
        else:
            problems.append(_from_patch(after, ks, rest) if ks is not None else line)
    for line in cycles:  # a cycle the patch's dependencies close is one more thing that patch breaks
        if len(folds) == 1:
            next(iter(folds.values())).append(line.removeprefix("flux: ").split("; hint: ")[0])
        else:
            problems.append(line)
    return [*(_tier_not_reached(sw, graph, t, dependents) for t, dependents in missing.items()), *problems]


def _tier_not_reached(sw: StackWalk, graph: FluxGraph, tier: KsKey, dependents: list[str]) -> str:
    """A tier the stack says the repository declares that Flux's walk does not reach, at its entry of flux.tiers
    (the graph lists the tiers first, in the stack's order), with what would wait for it folded in."""
    keys = [k.key for k in graph.kustomizations]
    at = f"gpu-platform:flux.tiers[{keys.index(tier)}]" if tier in keys else "gpu-platform:flux.tiers"
    waits = (f"; {_and(dependents)} depend{'s' if len(dependents) == 1 else ''} on it, and Flux would wait for it "
             "forever" if dependents else "")
    return (f"Pulumi.{sw.tree.stack}.yaml: {at}: {show_key(tier)}: the stack says the repository declares this "
            f"Kustomization (declaredBy: repository) but Flux's walk does not reach it{waits}; hint: fix its name or "
            "namespace there, or declare it in the repository")


def _depends_patches(folds: dict[str, list[str]]) -> list[str]:
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


def _wait_timeouts(after: FluxView, node_count: int, hidden: list[str],
                   second: set[tuple[KsKey, ObjectId]]) -> list[str]:
    """5. A Kustomization that waits outlasts its slowest workload (one whose path lies below a link the export would
    write through is left to OUT's guard, which names the link: the walk cannot tell what Flux reads there). An
    exported workload it applies a second time is not its own: that refusal names the entry to remove, and the
    timeout would be one more line for the same cause."""
    problems: list[str] = []
    by_patch: dict[str, list[tuple[KsKey, str]]] = {}  # the fix is in the patch, not in the exported files it overrides
    for ks in after.kustomizations.values():
        if _below(ks, hidden):
            continue
        waited = _waited_workloads(ks, after, node_count, {o for k, o in second if k == ks.key})
        line = check_wait_timeout(show_key(ks.key), ks.spec.get("timeout"), str(ks.spec.get("interval", "0s")), waited)
        if line:
            patch = patched_by(after, ks, "timeout") or patched_by(after, ks, "interval")
            if patch:
                by_patch.setdefault(patch, []).append((ks.key, line))
            else:
                problems.append(f"{ks.declared_in or 'bootstrap'}: {line.removeprefix('flux: ')}")
    return [*(_timeout_patch(patch, found) for patch, found in by_patch.items()), *problems]


_BELOW_START = re.compile(r"\.spec\.timeout: (?P<timeout>.+?) is not above the worst-case start of (?P<what>.+?): "
                          r"(?P<secs>\d+ s) \(.*hint: set timeout: (?P<needed>\S+) or more", re.DOTALL)


def _timeout_patch(patch: str, found: list[tuple[KsKey, str]]) -> str:
    """One line for a parent's patch whose timeout is below the start of the workloads of the Kustomizations it
    patches, each counted with its slowest workload."""
    shown, timeout, needed = [], "", []
    for key, line in found:
        m = _BELOW_START.search(line)
        if m is None:
            shown.append(show_key(key))
            continue
        timeout = m["timeout"]
        needed.append(m["needed"])
        shown.append(f"{show_key(key)} ({m['what']}: {m['secs']})")
    it = "it" if len(found) == 1 else "them"
    most = max(needed, key=duration_seconds, default="")
    return (f"{patch}: sets spec.timeout{f': {timeout}' if timeout else ''}, not above the worst-case start of the "
            f"workloads of {_counted(shown)} it patches; a slow start fails {it} and holds back everything that "
            f"depends on {it}; hint: {f'set timeout: {most} or more in that patch, or ' if most else ''}leave timeout "
            f"out of that patch, or give the patch a target that leaves {_and([show_key(k) for k, _ in found])} out")


def _tier_members(after: FluxView, graph: FluxGraph) -> list[str]:
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


__all__ = ["StackWalk", "check_stack", "deciding_file", "before_and_after"]
