"""Preview what an export would change, shaped like `pulumi preview --diff`, without the Pulumi CLI.

`python -m gitops.preview --stack prod --out <repository>` (or `make preview STACK=prod OUT=...`) runs the program
as the export does (gitops/engine.py under the SDK's mock engine, then build_tree and validate_tree), reads the
tree the last export left in OUT (the owned files its index lists; OUT is only read, under the export's shared
lock) and prints, per resource of the program (Stack -> components -> Kubernetes objects):

- `+` create, `~` update, `-` delete, `+-` replace, unchanged resources folded into a count;
- for updates, the fields that change, by path (`spec.template.spec.containers[0].image: "a" => "b"`);
- replace where Kubernetes will not change a field in place (a PVC's spec other than a storage increase, a
  workload's selector, a Service's clusterIP, a Job's template, ...), loud, with what Flux will do and the safe path;
- stack-output changes (against the outputs the last export recorded in its index), the program's warnings as
  diagnostics, and `Resources: N to create, N to update, N to replace, N to delete, N unchanged`.

Objects are identified as Kubernetes identifies them: API group, kind, namespace and name. The preview does not
walk the repository as Flux would (the export and `--check` do); it compares objects. Colour on a terminal only;
`--json` prints one JSON document for CI. Exit 0 when the preview ran (with or without changes), 2 on an error
(one line each: `error: <file>: <key or path>: <problem>; hint: <fix>`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from components.errors import RefusalError
from gitops.engine import lazy_imports, levers

lazy_imports.install()  # before anything imports the SDK (as the export does)

# isort: split
from gitops.engine.program import run_program  # noqa: E402
from gitops.engine.stacks import ROOT, StackFileError  # noqa: E402

# --- field differences ---------------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_SHOWN = 200  # characters of one value in a diff line; the rest is counted, not printed


@dataclass
class Change:
    """One field that differs: `kind` add | delete | update; `replace` says why Kubernetes refuses it in place."""

    path: str
    kind: str
    old: Any = None
    new: Any = None
    replace: str | None = None

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"path": self.path, "kind": self.kind}
        if self.kind != "add":
            doc["old"] = self.old
        if self.kind != "delete":
            doc["new"] = self.new
        doc["replaceReason"] = self.replace
        return doc


def _escaped(text: str) -> str:
    from components.safe_yaml import escaped

    return escaped(text)


def join_path(path: str, key: Any) -> str:
    """`a.b`, or `a["app.kubernetes.io/name"]` for a key that is not a plain name (as Pulumi prints them)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if _PLAIN_KEY.match(text):
        return f"{path}.{text}" if path else text
    return f'{path}["{_escaped(text)}"]'


def _same(old: Any, new: Any) -> bool:
    # 1 == True == 1.0 in Python; a manifest that turns `true` into 1 has changed.
    return type(old) is type(new) and old == new


def diff(old: Any, new: Any, path: str = "") -> list[Change]:
    """The differences from `old` to `new`, leaf by leaf: mappings key by key (sorted), lists index by index."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[Change] = []
        for key in sorted(set(old) | set(new), key=str):
            where = join_path(path, key)
            if key not in new:
                changes.append(Change(where, "delete", old=old[key]))
            elif key not in old:
                changes.append(Change(where, "add", new=new[key]))
            else:
                changes += diff(old[key], new[key], where)
        return changes
    if isinstance(old, list) and isinstance(new, list):
        changes = []
        for i in range(max(len(old), len(new))):
            where = join_path(path, i)
            if i >= len(new):
                changes.append(Change(where, "delete", old=old[i]))
            elif i >= len(old):
                changes.append(Change(where, "add", new=new[i]))
            else:
                changes += diff(old[i], new[i], where)
        return changes
    if _same(old, new):
        return []
    return [Change(path or "(root)", "update", old, new)]


def shown(value: Any) -> str:
    """A value as a diff line shows it: JSON, non-printable characters escaped, cut after MAX_SHOWN characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)
    if len(text) > MAX_SHOWN:
        return f"{text[:MAX_SHOWN]}… ({len(text)} characters)"
    return text


# --- what Kubernetes will not change in place ----------------------------------------------------------------

_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?")  # fullmatch: no "10Gi\n"
_FACTORS = {None: 1, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity in base units (`10Gi` -> 10737418240), or None when it is not one."""
    match = _QUANTITY.fullmatch(str(value)) if isinstance(value, (str, int, float)) else None
    return float(match.group(1)) * _FACTORS[match.group(2)] if match else None


_WORKLOADS = {("apps", "Deployment"), ("apps", "DaemonSet"), ("apps", "StatefulSet"), ("apps", "ReplicaSet")}
# apps/v1 StatefulSet validation: "updates to statefulset spec for fields other than ... are forbidden".
_STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                        "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def immutable_reason(group: str, kind: str, change: Change, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why the API server refuses `change` on an existing object (so it can only be deleted and created), or None
    when it is updated in place."""
    path = change.path
    old_spec, new_spec = _mapping(old.get("spec")), _mapping(new.get("spec"))
    if group == "" and kind == "PersistentVolumeClaim" and _under(path, "spec"):
        if path == "spec.resources.requests.storage" and change.kind == "update":
            before, after = quantity(change.old), quantity(change.new)
            if before is not None and after is not None and after >= before:
                return None  # expansion: allowed in place where the storage class has allowVolumeExpansion
            return "a claim's storage request can grow, never shrink"
        if _under(path, "spec.volumeAttributesClassName"):
            return None
        return "a bound claim's spec is immutable except a storage increase"
    if (group, kind) in _WORKLOADS and _under(path, "spec.selector"):
        return f"a {kind}'s spec.selector is immutable (apps/v1)"
    if group == "apps" and kind == "StatefulSet" and _under(path, "spec"):
        field_name = re.split(r"[.\[]", path[len("spec."):], maxsplit=1)[0] if path != "spec" else ""
        if field_name not in _STATEFULSET_MUTABLE:
            mutable = ", ".join(_STATEFULSET_MUTABLE)
            return f"a StatefulSet's spec.{field_name or '*'} is immutable (only {mutable} change)"
    if group == "batch" and kind == "Job" and (_under(path, "spec.template") or _under(path, "spec.selector")
                                               or _under(path, "spec.completionMode")):
        return "a Job's pod template and selector are immutable"
    if group == "" and kind == "Service" and _under(path, "spec"):
        external = "ExternalName" in (old_spec.get("type"), new_spec.get("type"))
        if (_under(path, "spec.clusterIP") or _under(path, "spec.clusterIPs")) and change.kind != "delete" \
                and not external:
            return "a Service's clusterIP cannot change once allocated (only by switching to or from ExternalName)"
        if _under(path, "spec.ipFamilies[0]") and change.kind == "update":
            return "a Service's primary IP family cannot change"
        if _under(path, "spec.loadBalancerClass") and old_spec.get("type") == "LoadBalancer" \
                and new_spec.get("type") == "LoadBalancer":
            return "a LoadBalancer Service's loadBalancerClass is immutable"
    if group == "" and kind in ("ConfigMap", "Secret") and old.get("immutable") is True and (
            _under(path, "data") or _under(path, "binaryData") or _under(path, "stringData") or path == "immutable"):
        return f"the {kind} is marked immutable: true"
    if group == "rbac.authorization.k8s.io" and kind in ("RoleBinding", "ClusterRoleBinding") \
            and _under(path, "roleRef"):
        return f"a {kind}'s roleRef is immutable"
    return None


# Per kind: what to do instead of letting Flux fail (or force) the replacement.
_SAFE_PATH = {
    "PersistentVolumeClaim": "create a claim under a new name with the new spec, copy the data into it (a one-off Job "
                             "mounting both), point the workload at it, then remove the old claim; or revert this "
                             "change",
    "Job": "Jobs run once: give the changed Job a new name (e.g. a version suffix), or annotate just this Job "
           "`kustomize.toolkit.fluxcd.io/force: Enabled` so Flux recreates it",
    "Service": "leave clusterIP out and keep the allocated one, or delete the Service by hand once in a maintenance "
               "window (clients see a new address)",
}
_SAFE_PATH_DEFAULT = ("give the object a new name (a new object; with prune: true Flux removes the old one), or "
                      "delete it by hand once in a maintenance window so the next reconcile creates it")


# --- the plan ------------------------------------------------------------------------------------------------

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


class PreviewError(RefusalError):
    """What the preview cannot compare: the export would refuse, or OUT cannot be read (one line each)."""


def _object_id(manifest: dict[str, Any]) -> tuple[str, str, str, str]:
    from gitops.fluxview import ObjectId

    oid = ObjectId.of(manifest)
    return (oid.group, oid.kind, oid.namespace, oid.name)


def _object_ref(manifest: dict[str, Any]) -> dict[str, str]:
    meta = _mapping(manifest.get("metadata"))
    ref = {"apiVersion": str(manifest.get("apiVersion", "")), "kind": str(manifest.get("kind", "")),
           "name": str(meta.get("name", ""))}
    if meta.get("namespace"):
        ref["namespace"] = str(meta["namespace"])
    return ref


def _shown_ref(ref: dict[str, str]) -> str:
    ns = f"{ref['namespace']}/" if ref.get("namespace") else ""
    return _escaped(f"{ref['kind']} {ns}{ref['name']}")


def _load_objects(out: Path, rel: str, data: bytes) -> list[dict[str, Any]]:
    """The Kubernetes objects of one owned YAML file under OUT (untrusted: a bad file is one error line)."""
    import yaml

    from components.safe_yaml import MAX_EXPANDED_NODES, expanded_size

    hint = f"hint: restore it from git (`git checkout -- {rel}`), then run the preview again"
    try:
        docs = list(yaml.load_all(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise PreviewError([f"{out / rel}: (root): not valid YAML ({_escaped(problem)}); the export would refuse "
                            f"it as a hand edit; {hint}"]) from None
    except (RecursionError, UnicodeDecodeError) as exc:
        raise PreviewError([f"{out / rel}: (root): not readable as YAML ({type(exc).__name__}); {hint}"]) from None
    if any(expanded_size(d) > MAX_EXPANDED_NODES for d in docs):
        raise PreviewError([f"{out / rel}: (root): expands through its aliases beyond any manifest; {hint}"])
    return [d for d in docs if isinstance(d, dict) and d.get("kind") and isinstance(d.get("metadata"), dict)]


@dataclass
class _Current:
    """What the repository holds now for the stack: its objects by identity, and the outputs the index recorded."""

    index: str | None
    objects: dict[tuple[str, str, str, str], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def read_current(out: Path, tree: Any) -> _Current:
    """The owned objects of `tree.stack` in OUT, as the last export's index lists them. Reads only."""
    from gitops.out.writer import matches_record, read_index, read_regular, same_content
    from gitops.tree import KUSTOMIZE_FILE

    if not out.is_dir():
        return _Current(index=None)
    owned = read_index(out, tree)  # entries validated; a tampered index is an OwnershipError (one line each)
    index_data = read_regular(out, tree.index_path)
    current = _Current(index=tree.index_path if index_data is not None else None)
    if index_data is not None:
        try:
            doc = json.loads(index_data)
        except (ValueError, RecursionError):
            doc = {}
        outputs = doc.get("stackOutputs") if isinstance(doc, dict) else None
        current.outputs = outputs if isinstance(outputs, dict) else None
    for rel in sorted(owned):
        # Every owned file, kustomization.yaml and DELIVERY.md too: the export refuses a hand edit of any of them.
        data = read_regular(out, rel)
        if data is None:
            current.notes.append(f"{rel}: listed in the export index but missing; the export writes it again")
            continue
        if not matches_record(rel, data, owned[rel]):
            current.notes.append(f"{rel}: edited by hand since the last export: the export refuses to overwrite it "
                                 f"(hint: put the change into the program or stack config, then `git checkout` it)")
        if not rel.endswith(".yaml") or rel.rsplit("/", 1)[-1] == KUSTOMIZE_FILE:
            continue  # DELIVERY.md, a kustomization: no cluster objects in them (the export writes only .yaml)
        for manifest in _load_objects(out, rel, data):
            key = _object_id(manifest)
            if key in current.objects:
                current.notes.append(f"{rel}: {_shown_ref(_object_ref(manifest))} is also in "
                                     f"{current.objects[key][0]}; the preview compares with the last one")
            current.objects[key] = (rel, manifest)
    for obj in tree.objects:  # a file the export wants to write where a hand-written one stands: it would refuse
        if obj.path in owned:
            continue
        data = read_regular(out, obj.path)
        if data is not None and not same_content(obj.path, data, tree.files[obj.path]):
            current.notes.append(f"{obj.path}: exists and was not written by this export: the export refuses to "
                                 f"overwrite it (hint: move it away or delete it)")
    return current


def _kustomizations(tree: Any) -> list[dict[str, Any]]:
    from components import flux as flux_mod

    return [o.manifest for o in tree.objects if o.manifest.get("kind") == flux_mod.KIND
            and str(o.manifest.get("apiVersion", "")).startswith(flux_mod.API_GROUP + "/")]


def flux_consequences(tree: Any, folder: str, step: Step, bootstrap: tuple[str, str]) -> list[str]:
    """What Flux does with an object Kubernetes refuses to update, and what to do instead."""
    kustomizations = _kustomizations(tree)

    def key(ks: dict[str, Any]) -> tuple[str, str]:
        meta = ks.get("metadata") or {}
        return (str(meta.get("namespace") or "flux-system"), str(meta.get("name", "")))

    applier = next((ks for ks in kustomizations if str((ks.get("spec") or {}).get("path", "")).removeprefix("./")
                    == folder), None)
    kind = (step.object or {}).get("kind", "")
    ref = _shown_ref(step.object or {"kind": kind, "name": step.name})
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
        f"Safe path: {_SAFE_PATH.get(kind, _SAFE_PATH_DEFAULT)}.",
    ]


def _type_of(ref: dict[str, str]) -> str:
    group, _, version = ref["apiVersion"].rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{ref['kind']}"


def make_plan(capture: Any, tree: Any, current: _Current, out: str) -> Plan:
    """Compare the program's objects (`tree`) with what OUT holds (`current`)."""
    by_urn = capture.by_urn()
    project = next((r.urn.split("::")[1] for r in capture.registrations), "project")
    plan = Plan(stack=capture.stack, project=project, out=out, index=current.index)
    for reg in capture.registrations:
        if not reg.custom:
            plan.components.append(Step("same", reg.urn, reg.type, reg.name,
                                        reg.parent if reg.parent in by_urn else plan.root_urn))
    graph = capture.stack_outputs.get("fluxGraph") or {}
    boot = graph.get("bootstrap") or {}
    bootstrap = (str(boot.get("namespace", "flux-system")), str(boot.get("name", "flux-system")))
    folder_parent: dict[str, str] = {}
    seen: set[tuple[str, str, str, str]] = set()
    for obj in tree.objects:
        reg = obj.registration
        parent = reg.parent if reg.parent in by_urn else plan.root_urn
        folder = obj.path.rsplit("/", 1)[0]
        folder_parent.setdefault(folder, parent)
        key = _object_id(obj.manifest)
        seen.add(key)
        step = Step("create", reg.urn, reg.type, reg.name, parent, obj.path, _object_ref(obj.manifest))
        if key in current.objects:
            _, old = current.objects[key]
            step.changes = diff(old, obj.manifest)
            for change in step.changes:
                change.replace = immutable_reason(key[0], key[1], change, old, obj.manifest)
            step.op = "replace" if step.replace_reasons else "update" if step.changes else "same"
            if step.op == "replace":
                step.flux = flux_consequences(tree, folder, step, bootstrap)
        plan.steps.append(step)
    for key, (rel, old) in sorted(current.objects.items(), key=lambda kv: kv[1][0]):
        if key in seen:
            continue
        ref = _object_ref(old)
        name = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else ref["name"]
        parent = folder_parent.get(rel.rsplit("/", 1)[0], plan.root_urn)
        plan.steps.append(Step("delete", f"{parent}::{_type_of(ref)}::{name}", _type_of(ref), _escaped(name), parent,
                               rel, ref))
    new_outputs = capture.stack_outputs
    if current.outputs is None:
        plan.outputs_recorded = current.index is None
        if current.index is None:
            plan.outputs = [Change(k, "add", new=v) for k, v in sorted(new_outputs.items())]
    else:
        plan.outputs = diff(current.outputs, new_outputs)
        changed_top = {re.split(r"[.\[]", c.path, maxsplit=1)[0] for c in plan.outputs}
        plan.outputs_unchanged = len([k for k in new_outputs if k not in changed_top])
    plan.diagnostics = [(level, message) for level, message in capture.logs if level in ("warning", "error")]
    plan.diagnostics += [("warning", note) for note in current.notes]
    return plan


# --- rendering -----------------------------------------------------------------------------------------------

_SYMBOL = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": ""}
_COLOUR = {"create": "32", "add": "32", "update": "33", "replace": "1;35", "delete": "31", "warning": "33",
           "error": "31", "loud": "1;31"}
_CHANGE_SYMBOL = {"add": "+", "delete": "-", "update": "~"}


class _Paint:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, what: str) -> str:
        code = _COLOUR.get(what)
        return f"\033[{code}m{text}\033[0m" if self.on and code and text else text


def shown_pair(old: Any, new: Any) -> tuple[str, str]:
    """Both sides of an update; two long strings that differ past the cut are shown from just before the first
    difference, so the line never reads `"a…" => "a…"`."""
    before, after = shown(old), shown(new)
    if before != after or not (isinstance(old, str) and isinstance(new, str)):
        return before, after
    first = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    start = max(0, first - 40)
    return shown(f"…{old[start:]}"), shown(f"…{new[start:]}")


def _change_line(change: Change) -> str:
    symbol = "+-" if change.replace else _CHANGE_SYMBOL[change.kind]
    if change.kind == "add":
        text = f"{change.path}: {shown(change.new)}"
    elif change.kind == "delete":
        text = f"{change.path}: {shown(change.old)}"
    else:
        before, after = shown_pair(change.old, change.new)
        text = f"{change.path}: {before} => {after}"
    return f"{symbol} {text}"


def render_text(plan: Plan, colour: bool = False) -> str:
    paint = _Paint(colour)
    rows: list[tuple[str, str, str, str, str]] = []  # (op, tree prefix + type, name, plan text, kind of row)
    details: dict[int, list[tuple[str, str, str]]] = {}  # row index -> (prefix, text, colour)

    children: dict[str, list[Step]] = {}
    for comp in plan.components:
        children.setdefault(comp.parent, []).append(comp)
    for step in plan.steps:
        children.setdefault(step.parent, []).append(step)

    def unchanged_below(urn: str) -> bool:
        return all(c.op == "same" and (c.object is not None or unchanged_below(c.urn)) for c in children.get(urn, []))

    def count_below(urn: str) -> int:
        return sum(1 if c.object is not None else count_below(c.urn) for c in children.get(urn, []))

    def visit(urn: str, prefix: str) -> None:
        kids = children.get(urn, [])
        # By type and name: the engine's registration order follows the SDK's scheduling, not the program's text.
        comps = sorted((c for c in kids if c.object is None), key=lambda c: (c.type, c.name))
        shown_objects = sorted((c for c in kids if c.object is not None and c.op != "same"),
                               key=lambda c: (c.type, c.name))
        folded = sum(1 for c in kids if c.object is not None and c.op == "same")
        entries: list[Step | int] = [*comps, *shown_objects] + ([folded] if folded else [])
        for i, entry in enumerate(entries):
            last = i == len(entries) - 1
            branch = prefix + ("└─ " if last else "├─ ")
            below = prefix + ("   " if last else "│  ")
            if isinstance(entry, int):
                rows.append(("same", f"{branch}{entry} unchanged", "", "", "fold"))
                continue
            if entry.object is None:
                info = f"{count_below(entry.urn)} unchanged" if unchanged_below(entry.urn) else ""
                rows.append(("same", branch + entry.type, entry.name, info, "component"))
                if not info:
                    visit(entry.urn, below)
                continue
            rows.append((entry.op, branch + entry.type, entry.name, entry.op, "object"))
            lines = [(below + "    ", _change_line(c), "replace" if c.replace else c.kind) for c in entry.changes
                     if entry.op in ("update", "replace")]
            lines += [(below + "    ", f"!! {text}", "loud") for text in entry.flux]
            details[len(rows) - 1] = lines

    warnings = sum(1 for level, _ in plan.diagnostics if level == "warning")
    errors = sum(1 for level, _ in plan.diagnostics if level == "error")
    info = ", ".join(f"{n} {word}{'s' if n > 1 else ''}" for n, word in ((errors, "error"), (warnings, "warning")) if n)
    rows.append(("same", "pulumi:pulumi:Stack", f"{plan.project}-{plan.stack}", info, "stack"))
    visit(plan.root_urn, "")

    type_width = max(len("Type"), *(len(r[1]) for r in rows if r[4] != "fold"))
    name_width = max(len("Name"), *(len(r[2]) for r in rows))
    against = (f"the tree the last export left in {plan.out} ({plan.index})" if plan.index
               else f"{plan.out}, which holds no export of {plan.stack} (every object is new)")
    lines = [f"Previewing update ({plan.stack}): the export compared with {against}", "",
             f"     {'Type':<{type_width}}  {'Name':<{name_width}}  Plan"]
    for i, (op, type_text, name, plan_text, _) in enumerate(rows):
        symbol = _SYMBOL.get(op, "")
        head = f" {paint(f'{symbol:<2}', op)}  " if symbol else "     "
        if not name and not plan_text:
            lines.append(f"{head}{type_text}")
        else:
            shown_plan = paint(plan_text, op) if symbol else plan_text
            line = f"{head}{type_text:<{type_width}}  {name:<{name_width}}  {shown_plan}"
            lines.append(line.rstrip())
        for prefix, text, what in details.get(i, []):
            lines.append(f"     {prefix}{paint(text, what)}")

    lines += ["", "Outputs:"]
    if not plan.outputs_recorded:
        lines.append(f"    (not compared: {plan.index} records no outputs; the next export records them)")
    for change in plan.outputs:
        lines.append(f"  {paint(_change_line(change), change.kind)}")
    if plan.outputs_unchanged:
        lines.append(f"    {plan.outputs_unchanged} unchanged")
    if plan.diagnostics:
        lines += ["", "Diagnostics:", f"  pulumi:pulumi:Stack ({plan.project}-{plan.stack}):"]
        for level, message in plan.diagnostics:
            lines.append(f"    {paint(level + ':', level)} {message}")
    replaced = [s for s in plan.steps if s.op == "replace"]
    if replaced:
        names = ", ".join(_shown_ref(s.object or {}) for s in replaced)
        lines += ["", paint(f"!! {len(replaced)} to replace ({names}): Kubernetes refuses these changes in place; "
                            f"see what Flux will do and the safe path above.", "loud")]
    lines += ["", plan.summary_line(), ""]
    return "\n".join(lines)


def render_json(plan: Plan) -> str:
    steps = []
    for step in sorted(plan.steps, key=lambda s: (s.file or "", s.type, s.name)):
        doc: dict[str, Any] = {"op": step.op, "urn": step.urn, "type": step.type, "name": step.name,
                               "parent": step.parent, "file": step.file, "object": step.object}
        if step.changes:
            doc["diffs"] = [c.as_json() for c in step.changes]
        if step.op == "replace":
            doc["replaceReasons"] = step.replace_reasons
            doc["flux"] = step.flux
        steps.append(doc)
    doc = {
        "stack": plan.stack,
        "out": plan.out,
        "index": plan.index,
        "steps": steps,
        "outputs": {"recorded": plan.outputs_recorded, "changes": [c.as_json() for c in plan.outputs],
                    "unchanged": plan.outputs_unchanged},
        "diagnostics": [{"severity": level, "message": message} for level, message in plan.diagnostics],
        "changeSummary": plan.summary(),
        "summary": plan.summary_line(),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


# --- the command ---------------------------------------------------------------------------------------------

def preview(stack: str, out: Path, project_dir: Path = ROOT) -> Plan:
    """Run the program for `stack` as the export does and compare it with OUT. Raises PreviewError (one line per
    problem) for everything the export would refuse before writing, and for an OUT it cannot read."""
    from components.config import ConfigError
    from components.evidence import EvidenceError
    from components.flux import GraphError
    from gitops.tree import PlacementError

    try:
        capture = run_program(stack, project_dir.resolve())
    except (ConfigError, EvidenceError, GraphError) as exc:
        raise PreviewError(exc.lines) from None
    except (StackFileError, PlacementError) as exc:
        raise PreviewError([str(exc)]) from None
    return preview_capture(capture, out)


def preview_capture(capture: Any, out: Path) -> Plan:
    """The preview of a program run already captured (gitops.engine.run_program): tree, validation, comparison."""
    from gitops.checks.validate import ExportValidationError, validate_tree
    from gitops.out.writer import OwnershipError, check_out, interrupted, out_lock
    from gitops.tree import PlacementError, build_tree

    stack = capture.stack
    try:
        tree = build_tree(capture)
        validate_tree(tree, capture.stack_outputs.get("appPolicy"), lint=False)
    except ExportValidationError as exc:
        raise PreviewError(exc.lines) from None
    except PlacementError as exc:
        raise PreviewError([str(exc)]) from None
    try:
        check_out(out, creating=False)
        with out_lock(out, exclusive=False):  # never a half-written tree; nothing is written
            current = read_current(out, tree)
            pending = out.is_dir() and interrupted(out, stack)
    except OwnershipError as exc:
        raise PreviewError(exc.lines) from None
    except OSError as exc:
        raise PreviewError([f"{exc.filename or out}: {exc.strerror or type(exc).__name__}; hint: check that OUT "
                            f"is readable"]) from None
    plan = make_plan(capture, tree, current, str(out))
    if pending:
        plan.diagnostics.append(("warning", f"{out}: an export of {stack} was interrupted after its commit point; "
                                            f"the next export completes it (compared: the tree as it is now)"))
    return plan


def _use_colour(choice: str, stream: IO[str]) -> bool:
    if choice != "auto":
        return choice == "always"
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def main(argv: list[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    out: IO[str] = stdout or sys.stdout
    err: IO[str] = stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m gitops.preview", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stack", required=True, help="the stack to preview (Pulumi.<stack>.yaml)")
    parser.add_argument("--out", default="build/gitops", help="root of the GitOps tree to compare with "
                                                              "(default: build/gitops); only read")
    parser.add_argument("--json", action="store_true", help="one JSON document (for CI) instead of the text plan")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the plan: auto (default) on a terminal only, unless NO_COLOR is set")
    parser.add_argument("--project-dir", type=Path, default=ROOT,
                        help="folder holding Pulumi.yaml, __main__.py and the stack files (default: this project)")
    args = parser.parse_args(argv)
    lever_problem = levers.env_problem()
    if lever_problem is not None:
        print(f"error: {lever_problem}", file=err)
        return 2
    try:
        plan = preview(args.stack, Path(args.out), args.project_dir)
    except PreviewError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=err)
        return 2
    if args.json:
        out.write(render_json(plan))
    else:
        out.write(render_text(plan, _use_colour(args.color, out)))
    return 0


def console() -> None:
    """The `gpu-platform-preview` console script."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as the export: no interpreter teardown of the SDK's modules and threads


if __name__ == "__main__":
    console()
