"""The preview's plan: the program's tree (gitops/tree.py) against what OUT holds (gitops/repo/current.py), step by
step per resource of the program (Stack -> components -> Kubernetes objects), with what Flux will do where Kubernetes
refuses an update in place, the stack-output changes and the program's warnings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gitops.engine.program import Capture
from gitops.flux.inventory import KsKey, ObjectId, is_flux_kustomization
from gitops.plan.diff import Change, diff, immutable_reason, safe_path
from gitops.repo.current import Current
from gitops.tree import ExportedObject, Tree
from model.safe_yaml import as_mapping, escaped


@dataclass
class Step:
    """One Kubernetes object of the plan (or a component: `object` None)."""

    op: str  # create | update | replace | delete | same
    urn: str
    type: str
    name: str
    parent: str
    file: str | None = None
    object: dict[str, str] | None = None
    changes: list[Change] = field(default_factory=list)
    flux: list[str] = field(default_factory=list)  # what Flux will do with a replacement, and the safe path

    @property
    def replace_reasons(self) -> list[str]:
        return [f"{c.path}: {c.replace}" for c in self.changes if c.replace]


@dataclass
class Plan:
    stack: str
    project: str
    out: str
    index: str | None
    steps: list[Step] = field(default_factory=list)
    components: list[Step] = field(default_factory=list)
    outputs: list[Change] = field(default_factory=list)
    outputs_unchanged: int = 0
    outputs_recorded: bool = True
    diagnostics: list[tuple[str, str]] = field(default_factory=list)  # (severity, message)
    refused: list[str] = field(default_factory=list)  # what the export would refuse: a replacement not accepted

    @property
    def root_urn(self) -> str:
        return f"urn:pulumi:{self.stack}::{self.project}::pulumi:pulumi:Stack::{self.project}-{self.stack}"

    def count(self, op: str) -> int:
        return sum(1 for s in self.steps if s.op == op)

    def summary(self) -> dict[str, int]:
        return {op: self.count(op) for op in ("create", "update", "replace", "delete", "same")}

    def summary_line(self) -> str:
        s = self.summary()
        return (f"Resources: {s['create']} to create, {s['update']} to update, {s['replace']} to replace, "
                f"{s['delete']} to delete, {s['same']} unchanged")



def step_object(manifest: dict[str, Any]) -> dict[str, str]:
    """apiVersion, kind, name and (when set) namespace, as strings: what a plan step shows of its object."""
    meta = as_mapping(manifest.get("metadata"))
    ref = {"apiVersion": str(manifest.get("apiVersion", "")), "kind": str(manifest.get("kind", "")),
           "name": str(meta.get("name", ""))}
    if meta.get("namespace"):
        ref["namespace"] = str(meta["namespace"])
    return ref


def shown_object(ref: dict[str, str]) -> str:
    """A step's object as every line names an object (`ObjectId`): `Kind namespace/name`, escaped."""
    return str(ObjectId.of({"apiVersion": ref.get("apiVersion", ""), "kind": ref.get("kind", ""),
                            "metadata": {"name": ref.get("name", ""), "namespace": ref.get("namespace", "")}}))

def flux_consequences(tree: Tree, folder: str, step: Step, bootstrap: KsKey) -> list[str]:
    """What Flux does with an object Kubernetes refuses to update, and what to do instead."""
    kustomizations = [o.manifest for o in tree.objects if is_flux_kustomization(o.manifest)]

    def key(ks: dict[str, Any]) -> tuple[str, str]:
        meta = ks.get("metadata") or {}
        return (str(meta.get("namespace") or "flux-system"), str(meta.get("name", "")))

    applier = next((ks for ks in kustomizations if str((ks.get("spec") or {}).get("path", "")).removeprefix("./")
                    == folder), None)
    kind = (step.object or {}).get("kind", "")
    ref = shown_object(step.object or {"kind": kind, "name": step.name})
    if applier is not None:
        app_key = key(applier)
        waits = bool((applier.get("spec") or {}).get("wait"))
        dependents = sorted(f"{key(ks)[0]}/{key(ks)[1]}" for ks in kustomizations
                            if any(isinstance(d, dict) and d.get("name") == app_key[1]
                                   and (d.get("namespace") or key(ks)[0]) == app_key[0]
                                   for d in (ks.get("spec") or {}).get("dependsOn") or []))
    else:
        app_key, waits, dependents = bootstrap, True, ["every other Kustomization"]
    who = f"Kustomization {app_key[0]}/{app_key[1]}"
    held = (f"with wait: true it holds back its dependents ({', '.join(dependents)})" if waits and dependents
            else "nothing depends on it" if not dependents
            else f"its dependents ({', '.join(dependents)}) wait for it")
    loss = (": every file on the volume is lost" if kind == "PersistentVolumeClaim"
            else " (the workload restarts from scratch)" if kind in ("Deployment", "DaemonSet", "StatefulSet")
            else "")
    return [
        f"Kubernetes will not change {ref} in place: {'; '.join(step.replace_reasons)}.",
        f"Flux: the server-side apply fails (field is immutable), so {who} goes not Ready and {held}; "
        f"the change never lands.",
        f"`force: true` on that Kustomization would delete and recreate the object{loss}.",
        f"Safe path: {safe_path(kind)}.",
    ]


def _type_of(ref: dict[str, str]) -> str:
    group, _, version = ref["apiVersion"].rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{ref['kind']}"


def make_plan(capture: Capture, tree: Tree, current: Current, out: str,
              bootstrap: KsKey = ("flux-system", "flux-system")) -> Plan:
    """Compare the program's objects (`tree`) with what OUT holds (`current`); `bootstrap`: the Kustomization that
    applies a folder no Kustomization of the tree applies."""
    by_urn = capture.by_urn()
    project = next((r.urn.split("::")[1] for r in capture.registrations), "project")
    plan = Plan(stack=capture.stack, project=project, out=out, index=current.index)
    for reg in capture.registrations:
        if not reg.custom:
            plan.components.append(Step("same", reg.urn, reg.type, reg.name,
                                        reg.parent if reg.parent in by_urn else plan.root_urn))
    folder_parent: dict[str, str] = {}
    for obj in tree.objects:
        parent = obj.registration.parent if obj.registration.parent in by_urn else plan.root_urn
        folder_parent.setdefault(obj.path.rsplit("/", 1)[0], parent)
        plan.steps.append(_object_step(obj, parent, tree, current, bootstrap))
    seen = {ObjectId.of(obj.manifest) for obj in tree.objects}
    for key, (rel, old) in sorted(current.objects.items(), key=lambda kv: kv[1][0]):
        if key not in seen:
            plan.steps.append(_delete_step(rel, old, folder_parent.get(rel.rsplit("/", 1)[0], plan.root_urn)))
    _compare_outputs(plan, current, capture.stack_outputs)
    # info too: the DRA route's "step N of 5; next: …" line is how the preview says where the move stands
    plan.diagnostics = [(level, message) for level, message in capture.logs if level in ("info", "warning", "error")]
    plan.diagnostics += [("warning", note) for note in current.notes]
    return plan


def _object_step(obj: ExportedObject, parent: str, tree: Tree, current: Current, bootstrap: KsKey) -> Step:
    """Create, or against the object OUT holds: the field changes, and replace (with what Flux will do) where
    Kubernetes refuses one in place."""
    reg = obj.registration
    key = ObjectId.of(obj.manifest)
    step = Step("create", reg.urn, reg.type, reg.name, parent, obj.path, step_object(obj.manifest))
    if key in current.objects:
        _, old = current.objects[key]
        step.changes = diff(old, obj.manifest)
        for change in step.changes:
            change.replace = immutable_reason(key.group, key.kind, change, old, obj.manifest)
        step.op = "replace" if step.replace_reasons else "update" if step.changes else "same"
        if step.op == "replace":
            step.flux = flux_consequences(tree, obj.path.rsplit("/", 1)[0], step, bootstrap)
    return step


def object_steps(tree: Tree, current: Current, bootstrap: KsKey) -> list[Step]:
    """Every object of `tree` against what OUT holds (`current`), and each object OUT holds that `tree` no longer
    has, as a delete: the export's change, object by object (no components, no parents)."""
    steps = [_object_step(obj, "", tree, current, bootstrap) for obj in tree.objects]
    seen = {ObjectId.of(obj.manifest) for obj in tree.objects}
    steps += [_delete_step(rel, old, "") for key, (rel, old) in sorted(current.objects.items(), key=lambda kv: kv[1][0])
              if key not in seen]
    return steps


def replacements(tree: Tree, current: Current, bootstrap: KsKey) -> list[Step]:
    """The objects of `tree` Kubernetes will not change in place from what OUT holds (`current`): each a replace step
    with its reasons and what Flux will do. The export refuses them unless the stack accepts them."""
    return [step for step in object_steps(tree, current, bootstrap) if step.op == "replace"]


def _delete_step(rel: str, old: dict[str, Any], parent: str) -> Step:
    """An object OUT holds that the program no longer makes, under the component of its folder."""
    ref = step_object(old)
    name = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else ref["name"]
    return Step("delete", f"{parent}::{_type_of(ref)}::{name}", _type_of(ref), escaped(name), parent, rel, ref)


def _compare_outputs(plan: Plan, current: Current, new_outputs: dict[str, Any]) -> None:
    """The stack outputs against those the last export's index recorded (all new on a first export)."""
    if current.outputs is None:
        plan.outputs_recorded = current.index is None
        if current.index is None:
            plan.outputs = [Change(k, "add", new=v) for k, v in sorted(new_outputs.items())]
    else:
        plan.outputs = diff(current.outputs, new_outputs)
        changed_top = {re.split(r"[.\[]", c.path, maxsplit=1)[0] for c in plan.outputs}
        plan.outputs_unchanged = len([k for k in new_outputs if k not in changed_top])
