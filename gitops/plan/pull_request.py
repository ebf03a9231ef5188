"""The pull request an export makes, measured where the reviewer measures it: against its base (gitops/repo/
work_tree.py: the merge-base of HEAD with the default branch, or `--base REF`), whose files are read outside OUT, or,
where OUT is no Git work tree, against OUT as it is before the write. Per stack: the exported objects (the plan's
object steps), the repository's own objects the GPU gate judges where the change changes them (an app it renders:
its Deployment, with the fields), the export's lines in the user's files, the records (gitops/plan/summary.py shapes
and prints it)."""

from __future__ import annotations

import posixpath
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops.flux.inventory import FluxView, ObjectId
from gitops.plan.plan import Step, object_steps
from gitops.plan.summary import ObjectChange, PullRequest, summarize
from gitops.repo import out_folder, work_tree
from gitops.repo.current import Current, read_current
from gitops.reports.renderer_change import RendererChange, differing_fields, held_of, same_object
from gitops.tree import Tree
from model.evidence import held_access
from model.outputs import ProgramOutputs
from model.safe_yaml import DocumentsError, yaml_documents


@dataclass(frozen=True)
class StackChange:
    """One stack's part, as the export has it before writing: its tree, its outputs, its object steps against OUT
    as it is (`steps`), and Flux's walk of the repository as it will be (`after`)."""

    tree: Tree
    outputs: ProgramOutputs
    steps: list[Step]
    after: FluxView


def pull_request(out: Path, stacks: list[StackChange], base: work_tree.Base | None,
                 renderer_changes: list[RendererChange] | None = None) -> PullRequest:
    """Each stack's change against the pull request's base (its files read outside OUT), or, where OUT is no Git
    work tree, against OUT as it is before the write: objects, the repository's own objects the gate judges, the
    export's lines in the user's files, the records."""
    with work_tree.files_at(out, base) if base is not None else nullcontext(out) as before:
        summaries = []
        for s in stacks:
            steps = s.steps
            if base is not None:
                try:
                    steps = object_steps(s.tree, read_current(before, s.tree), s.outputs.flux_graph.bootstrap.key)
                except out_folder.OwnershipError:  # the base's own files cannot be read: all of it is new
                    steps = object_steps(s.tree, Current(index=None), s.outputs.flux_graph.bootstrap.key)
            after = s.after
            runs = {name: held_of(s.tree, after, name) for name, app in s.outputs.gpu_apps.items()
                    if app.by_repository}
            records = s.tree.layout.records
            changed_records = any(_read(before, rel) != data for rel, data in s.tree.files.items()
                                  if rel.startswith(records + "/"))
            summaries.append(summarize(s.tree.stack, steps, s.outputs, posixpath.dirname(s.tree.index_path), runs,
                                       _judged(s, after, before, out), _lines(s, before), changed_records))
    return PullRequest(tuple(summaries), base.shown() if base is not None else "", tuple(renderer_changes or ()))


def _read(root: Path, rel: str) -> bytes | None:
    try:
        return out_folder.read_regular(root, rel)
    except (OSError, out_folder.OwnershipError):
        return None


def _lines(s: StackChange, before: Path) -> tuple[str, ...]:
    """The export's lines in the user's files that this change adds: `file: line`."""
    found = []
    for rel, spec in sorted(s.tree.edits.items()):
        if rel in s.tree.files and _read(before, rel) != s.tree.files[rel]:
            found += [f"{rel}: - {entry}" for entry in spec.get("resources", [])]
            found += [f"{rel}: {key}: {value}" for key, value in sorted(spec.get("data", {}).items())]
    return tuple(found)


def _judged(s: StackChange, after: FluxView, before: Path, out: Path) -> tuple[ObjectChange, ...]:
    """The repository's own object of each app it delivers, where this change changes it: the gate judges it."""
    found = []
    for name, app in sorted(s.outputs.gpu_apps.items()):
        reference = s.tree.reference_deployment(name) if app.by_repository else None
        oid = ObjectId.of(reference) if reference is not None else None
        if oid is None or oid not in after.origins:
            continue
        origin = after.origins[oid]
        old, new = _document(_read(before, origin), oid), _document(_read(out, origin), oid)
        if new is None or old == new:
            continue
        fields = tuple(differing_fields(new, old or {}))
        judged = f"{held_access(old) if old else '(none)'} -> {held_access(new)}"
        found.append(ObjectChange("update" if old else "create", str(oid), origin, fields, judged))
    return tuple(found)


def _document(data: bytes | None, oid: ObjectId) -> dict[str, Any] | None:
    """The document of `oid` in a repository file, as written (before Flux's substitutions)."""
    try:
        docs = yaml_documents(data) if data is not None else []
    except DocumentsError:
        return None
    wanted = {"kind": oid.kind, "metadata": {"name": oid.name, "namespace": oid.namespace}}
    return next((d for d in docs if same_object(d, wanted)), None)


__all__ = ["StackChange", "pull_request"]
