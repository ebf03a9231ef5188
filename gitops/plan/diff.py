"""The preview's field differences, as `pulumi preview --diff` shows them, and what Kubernetes will not change in
place (a PVC's spec other than a storage increase, a workload's selector, a Service's clusterIP, a Job's template, ...)
with the safe path per kind."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from model.safe_yaml import as_mapping, escaped

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


def join_path(path: str, key: Any) -> str:
    """`a.b`, or `a["app.kubernetes.io/name"]` for a key that is not a plain name (as Pulumi prints them)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if _PLAIN_KEY.match(text):
        return f"{path}.{text}" if path else text
    return f'{path}["{escaped(text)}"]'


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


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def immutable_reason(group: str, kind: str, change: Change, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why the API server refuses `change` on an existing object (so it can only be deleted and created), or None
    when it is updated in place."""
    path = change.path
    old_spec, new_spec = as_mapping(old.get("spec")), as_mapping(new.get("spec"))
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


def safe_path(kind: str) -> str:
    """What to do instead of letting Flux fail (or force) the replacement of an object of `kind`."""
    return _SAFE_PATH.get(kind, _SAFE_PATH_DEFAULT)


