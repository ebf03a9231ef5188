"""A stack's walk before and after the export (`StackWalk`), and what its Kustomizations' builds say.

A failed build is said once per cause, at the file at fault (the kustomization with the bad entry, the file that
closes a cycle, the Kustomization without a usable spec.path), with the Kustomizations it fails, the export's objects
they leave unapplied and the tiers the walk cannot reach behind it folded in (`Failures`). Other build and `${VAR}`
problems are refused when new since `before` or about an exported file or Kustomization, else kept as notices; what
the walk cannot tell (`FluxView.unsure`) is a notice.
Nothing below a symlink the export would write through is judged (`links_on_the_way`): OUT's guard names the link.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitops.flux.build import RepoView, join_path
from gitops.flux.inventory import FluxView, KsKey, ObjectId, WalkedKustomization, show_key
from gitops.flux.varsub import string_values, unresolved_variables
from gitops.tree import Tree
from model.layout import is_within, repo_dir
from model.outputs import FluxGraph, GpuAppOutput
from model.safe_yaml import as_mapping, load_yaml


@dataclass
class StackWalk:
    tree: Tree
    before: FluxView
    after: FluxView
    fresh: bool  # OUT held no bootstrap folder for this stack: hand-written parts are assumed, not checked
    notices: list[str] = field(default_factory=list)
    gpu_apps: Mapping[str, GpuAppOutput] = field(default_factory=dict)  # the stack's GPU apps, by name
    app_keys: Mapping[str, str] = field(default_factory=dict)  # their keys in the stack file where not their name

    def repository_app(self, component: str | None) -> str | None:
        """The stack key (`plex`, `apps[0]`) of the GPU app `component` the export writes: a repository that holds
        that app's objects itself delivers it, and the fix is that key's deliveredBy."""
        app = self.gpu_apps.get(component or "")
        if app is None or app.by_repository:
            return None
        return self.app_keys.get(str(component), str(component))


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
                     f"{listed([f'{folder}/' for folder in _outermost(list(self.unapplied))])} (e.g. {first})")
        if self.tiers:
            said += (f"; Flux's walk cannot reach {listed([show_key(t) for t in self.tiers])}, which the stack says "
                     "the repository declares (flux.tiers)")
        return f"{self.head}; {said}; hint: {self.hint}"


@dataclass
class Failures:
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


def listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _outermost(folders: list[str]) -> list[str]:
    """The folders that lie below none of the others (each named once, what lies below it with it)."""
    return [f for f in folders if not any(other != f and is_within(f, other) for other in folders)]


def failures_of(sw: StackWalk, graph: FluxGraph, view: RepoView, hidden: list[str]) -> Failures:
    """Each failed build of the after-walk under its cause (none below a link the export would write through: OUT's
    guard names the link, see `links_on_the_way`)."""
    found = Failures()
    for ks in sw.after.kustomizations.values():
        if ks.status != "failed" or below_a_link(ks, hidden):
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
    if is_pathless(ks):
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
                f"build {folder}/ with more than one", f"delete {listed(other)}; the export's {own[0]} lists what "
                f"{folder}/ holds")
    return (f"{files[-1]}: a second kustomization file beside {listed(files[:-1])}: kustomize and Flux refuse to build "
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


def is_pathless(ks: WalkedKustomization) -> bool:
    """A Kustomization the walk reached whose spec sets no path: Flux builds the whole repository for it."""
    return ks.parent is not None and not ks.spec.get("path")


def links_on_the_way(sw: StackWalk, view: RepoView) -> list[str]:
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


def below_a_link(ks: WalkedKustomization, links: list[str]) -> bool:
    """The Kustomization's path lies below one of these links."""
    return any(is_within(repo_dir(ks.shown_path), link) for link in links)


def build_problems(sw: StackWalk, graph: FluxGraph, hidden: list[str]) -> list[str]:
    """3. Builds and substitutions: new problems, and every problem about an exported file or Kustomization; older
    problems of hand-written files become notices. A failed build is said by its cause's line (`Failures`), a
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
    # What the walk cannot tell is no ground to refuse: said, for the user to check
    sw.notices += [line for line in sw.after.unsure if not any(is_within(line.split(" ", 1)[0], link)
                                                               for link in hidden)]
    return problems


def applied_as_written(sw: StackWalk, graph: FluxGraph, hidden: list[str]) -> None:
    """A notice, not a refusal: a `${VAR}` under a Kustomization the export declares that has no variables at all.
    Flux substitutes only where a Kustomization has some, so it applies `${VAR}` as written (legal, and right for a
    dashboard's `${DS}`); under the export's own tier it is usually a tier moved out of cluster-vars' reach."""
    after = sw.after
    for key in sorted(graph.exported):
        ks = after.kustomizations.get(key)
        if ks is None or ks.status != "built" or ks.variables or below_a_link(ks, hidden):
            continue
        for oid in ks.objects:
            for path, name in unresolved_variables(after.manifests[oid], {})[:1]:
                sw.notices.append(
                    f"{after.sources[(oid, key)]} ({oid}): {path}: ${{{name}}} is "
                    f"applied as written: {show_key(key)} has no variables (no postBuild, or a substituteFrom out of "
                    f"its namespace's reach), and Flux substitutes only where a Kustomization has some; hint: give "
                    f"{show_key(key)} the variables it needs (cluster-vars lives in {graph.namespace}), or write "
                    f"$${{{name}}} if the text is meant")
