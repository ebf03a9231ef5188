"""Slice evidence for the DRA route (docs/dra.md, step 2): every node of the stack publishes a ResourceSlice of
Intel's driver (`gpu.intel.com`) with at least one healthy device bound to the kernel driver the stack names, and the
`gpu.intel.com` DeviceClass exists. Read from `kubectl get deviceclasses,resourceslices -o json` by
`make verify-nodes STACK=<stack> SLICES=<file>`, which writes `evidence/dra/<stack>.yaml` (node names and device
counts, nothing else from the input) when every node has one. The switch of the apps to claims (step 3) is allowed
only on this evidence.

The input is untrusted: every shape is checked, and a refusal is one line naming the file and the path in it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.evidence import EVIDENCE_DIR, parse_count
from model.safe_yaml import escaped

# The DRA driver's name (each ResourceSlice's spec.driver) and its DeviceClass's name: what the evidence is read for,
# and what components/intel_gpu_dra.py installs.
DRIVER = "gpu.intel.com"
DEVICE_CLASS = "gpu.intel.com"
DRA_EVIDENCE_DIR = f"{EVIDENCE_DIR}/dra"
# The driver's `health` attribute (its pkg/gpu/device: Unknown, Healthy or Unhealthy). Without health monitoring
# (`-m`, which needs xpumd; the exported driver runs without it) newDriver sets every device to Unknown, so Unknown
# counts as usable; only Unhealthy, which the driver reports only when monitoring saw a fault, does not.
USABLE_HEALTH = ("Healthy", "Unknown")
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NOT_A_NODE_NAME = "not a Kubernetes node name (lowercase letters, digits, '-' and '.', at most 253)"
_HINT = "use the output of `kubectl get deviceclasses,resourceslices -o json` as it is"


class SliceInputError(ValueError):
    """One line: `<file>: <path>: <problem>; hint: <fix>`."""


@dataclass(frozen=True)
class SliceDevice:
    """One device of a node's slice, as the evidence needs it."""

    name: str
    kernel_driver: str | None  # the device's `driver` attribute: i915, xe, or a VFIO driver
    health: str | None

    @property
    def healthy(self) -> bool:
        return self.health in USABLE_HEALTH


@dataclass(frozen=True)
class Slices:
    """What the input says: whether the DeviceClass exists, and each node's devices from Intel's driver."""

    device_class: bool
    by_node: dict[str, list[SliceDevice]]


def dra_evidence_path(project_dir: Path, stack: str) -> Path:
    return project_dir / DRA_EVIDENCE_DIR / f"{stack}.yaml"


def next_dra_step(stack: str) -> str:
    return (f"kubectl get deviceclasses,resourceslices -o json > slices-{stack}.json && "
            f"make verify-nodes STACK={stack} SLICES=slices-{stack}.json WRITE_EVIDENCE=1")


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


def _get(item: Any, key: str, want: type, where: str, source: str, required: bool = True) -> Any:
    """`item[key]` checked to be a `want`; absent is None unless required."""
    value = item.get(key) if isinstance(item, dict) else None
    if value is None:
        if required:
            raise SliceInputError(f"{source}: {where}.{key}: missing; hint: {_HINT}")
        return None
    if not isinstance(value, want) or isinstance(value, bool) and want is not bool:
        raise SliceInputError(f"{source}: {where}.{key}: {_kind(value)}, not {_kind(want())}; hint: {_HINT}")
    return value


def _string_attribute(attributes: dict[str, Any], key: str, where: str, source: str) -> str | None:
    attribute = _get(attributes, key, dict, f"{where}.attributes", source, required=False)
    return None if attribute is None else _get(attribute, "string", str, f"{where}.attributes.{key}", source,
                                               required=False)


def read_slices(doc: Any, source: str) -> Slices:
    """The DeviceClass and Intel's slices from a `kind: List`; slices of other drivers are passed over, other kinds
    refused (a node list given for slices is the likely mistake)."""
    if not isinstance(doc, dict) or doc.get("kind") != "List" or not isinstance(doc.get("items"), list):
        raise SliceInputError(f"{source}: (root): not the output of `kubectl get deviceclasses,resourceslices -o json` "
                              f"(expected kind List with items); hint: {_HINT}")
    device_class, by_node = False, {}
    for i, item in enumerate(doc["items"]):
        where = f"items[{i}]"
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind == "DeviceClass":
            device_class = device_class or _get(item, "metadata", dict, where, source).get("name") == DEVICE_CLASS
            continue
        if kind != "ResourceSlice":
            raise SliceInputError(f"{source}: {where}.kind: {json.dumps(escaped(str(kind))[:40])}: neither a "
                                  f"DeviceClass nor a ResourceSlice; hint: {_HINT}")
        spec = _get(item, "spec", dict, where, source)
        if _get(spec, "driver", str, f"{where}.spec", source) != DRIVER:
            continue
        node = _get(spec, "nodeName", str, f"{where}.spec", source)
        if len(node) > 253 or not NODE_NAME.match(node):
            raise SliceInputError(f"{source}: {where}.spec.nodeName: \"{escaped(node[:80])}\": {NOT_A_NODE_NAME}; "
                                  f"hint: {_HINT}")
        devices = _get(spec, "devices", list, f"{where}.spec", source, required=False) or []
        for j, device in enumerate(devices):
            at = f"{where}.spec.devices[{j}]"
            name = _get(device, "name", str, at, source)
            attributes = _get(device, "attributes", dict, at, source, required=False) or {}
            by_node.setdefault(node, []).append(SliceDevice(
                name, _string_attribute(attributes, "driver", at, source),
                _string_attribute(attributes, "health", at, source)))
        by_node.setdefault(node, [])
    return Slices(device_class, by_node)


def slice_report(stack: str, nodes: list[str], kernel_driver: str,
                 slices: Slices) -> tuple[list[str], dict[str, int]]:
    """One line per configured node, and the nodes proven (healthy devices on the kernel driver, at least one)."""
    lines, proven = [], {}
    width = max(len(n) for n in [*nodes, *slices.by_node])
    for node in nodes:
        devices = slices.by_node.get(node)
        usable = [d for d in devices or [] if d.healthy and d.kernel_driver == kernel_driver]
        if devices is None:
            lines.append(f"{node:<{width}}  NO SLICE of driver {DRIVER}")
        elif usable:
            lines.append(f"{node:<{width}}  {DRIVER}: {len(usable)} healthy device{'s' * (len(usable) > 1)} on "
                         f"{kernel_driver}")
            proven[node] = len(usable)
        else:
            seen = ", ".join(f"{d.name} ({escaped(d.kernel_driver or '?')[:20]}, {escaped(d.health or '?')[:20]})"
                             for d in devices[:4]) or "no device"
            lines.append(f"{node:<{width}}  NO healthy device on {kernel_driver} (the slice has: {seen})")
    for node in sorted(set(slices.by_node) - set(nodes)):
        lines.append(f"{node:<{width}}  (not in Pulumi.{stack}.yaml cluster.nodes; ignored)")
    return lines, proven


def dra_evidence_text(stack: str, kernel_driver: str, proven: dict[str, int]) -> str:
    body = "".join(f"  {json.dumps(name)}: {count}\n" for name, count in sorted(proven.items()))
    return (f"# Slice evidence for the DRA route, written by `make verify-nodes STACK={stack} SLICES=... "
            "WRITE_EVIDENCE=1`\n# from `kubectl get deviceclasses,resourceslices -o json`. Node names and healthy "
            "device counts only.\n"
            f"stack: {json.dumps(stack)}\ndriver: {DRIVER}\nkernelDriver: {kernel_driver}\nnodes:\n{body}")


def _header_problems(doc: Any, source: str, what: str, fixed: dict[str, str], body: str, regen: str) -> list[str]:
    """An evidence file's shape before its body: a mapping of the `fixed` keys with exactly their values, and `body`;
    a non-mapping is refused at once, every other problem is a line of its own."""
    if not isinstance(doc, dict):
        raise SliceInputError(f"{source}: (root): not a mapping{regen}")
    problems = []
    keys = [*fixed, body]
    extra = sorted(str(k) for k in set(doc) - set(keys))
    if extra:
        problems.append(f"{source}: {', '.join(extra)}: unknown keys; {what} holds {', '.join(keys[:-1])} and "
                        f"{keys[-1]} only{regen}")
    for key, want in fixed.items():
        if doc.get(key) != want:
            problems.append(f"{source}: {key}: {json.dumps(doc.get(key), default=str)}: expected {json.dumps(want)}"
                            f"{regen}")
    return problems


def parse_dra_evidence(doc: Any, source: str, stack: str, kernel_driver: str) -> dict[str, int]:
    """Refuse anything but `{stack, driver: gpu.intel.com, kernelDriver, nodes: {name: count ≥ 1}}` of this stack
    and kernel driver; one line per problem."""
    regen = f"; hint: regenerate it with `{next_dra_step(stack)}`"
    problems = _header_problems(doc, source, "slice evidence", {"stack": stack, "driver": DRIVER,
                                                                "kernelDriver": kernel_driver}, "nodes", regen)
    nodes = doc.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        problems.append(f"{source}: nodes: must map each node name to its healthy device count{regen}")
        nodes = {}
    counts = {}
    for name, value in nodes.items():
        count = parse_count(value)
        if count is None or count < 1:
            problems.append(f"{source}: nodes.{name}: {json.dumps(value, default=str)}: not a count of 1 or more"
                            f"{regen}")
        else:
            counts[str(name)] = count
    if problems:
        raise SliceInputError("\n".join(problems))
    return counts


# Step 4: allocation evidence. Read from `kubectl get pods,resourceclaims -A -o json`; written to
# evidence/dra/claims/<stack>.yaml (a folder of its own: no stack name can collide with it).
CLAIM_NAME = "gpu"  # the pod's resourceClaims entry and the template's one request (components/gpu_app.py)
APP_LABEL = "app.kubernetes.io/name"  # each GPU app's pods carry it (components/gpu_app.py selector)
_CLAIMS_HINT = "use the output of `kubectl get pods,resourceclaims -A -o json` as it is"


def claims_evidence_path(project_dir: Path, stack: str) -> Path:
    return project_dir / DRA_EVIDENCE_DIR / "claims" / f"{stack}.yaml"


def next_claims_step(stack: str) -> str:
    return (f"kubectl get pods,resourceclaims -A -o json > claims-{stack}.json && "
            f"make verify-nodes STACK={stack} CLAIMS=claims-{stack}.json WRITE_EVIDENCE=1")


@dataclass(frozen=True)
class AppPod:
    """A pod of a GPU app, as the allocation evidence needs it."""

    namespace: str
    name: str
    uid: str
    app: str | None
    node: str | None
    running: bool
    ready: bool
    claim: str | None  # the generated ResourceClaim behind the pod's `gpu` entry


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    devices: tuple[str, ...]  # `<pool>/<device>` of each allocated device of Intel's driver
    reserved_for: tuple[str, ...]  # the uids of the pods it is reserved for


@dataclass(frozen=True)
class Claims:
    pods: tuple[AppPod, ...]
    claims: dict[tuple[str, str], Claim]


def _claims_get(item: Any, key: str, want: type, where: str, source: str, required: bool = False) -> Any:
    try:
        return _get(item, key, want, where, source, required)
    except SliceInputError as exc:  # the same checks, with this input's hint
        raise SliceInputError(str(exc).replace(_HINT, _CLAIMS_HINT)) from None


def read_claims(doc: Any, source: str) -> Claims:
    """The pods and ResourceClaims of a `kind: List`; other kinds refused (slices or nodes given for claims are the
    likely mistakes)."""
    if not isinstance(doc, dict) or doc.get("kind") != "List" or not isinstance(doc.get("items"), list):
        raise SliceInputError(f"{source}: (root): not the output of `kubectl get pods,resourceclaims -A -o json` "
                              f"(expected kind List with items); hint: {_CLAIMS_HINT}")
    pods, claims = [], {}
    for i, item in enumerate(doc["items"]):
        where = f"items[{i}]"
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind not in ("Pod", "ResourceClaim"):
            raise SliceInputError(f"{source}: {where}.kind: {json.dumps(escaped(str(kind))[:40])}: neither a Pod nor "
                                  f"a ResourceClaim; hint: {_CLAIMS_HINT}")
        metadata = _claims_get(item, "metadata", dict, where, source, required=True)
        namespace = _claims_get(metadata, "namespace", str, f"{where}.metadata", source, required=True)
        name = _claims_get(metadata, "name", str, f"{where}.metadata", source, required=True)
        status = _claims_get(item, "status", dict, where, source) or {}
        if kind == "ResourceClaim":
            allocation = _claims_get(status, "allocation", dict, f"{where}.status", source) or {}
            results = _claims_get(_claims_get(allocation, "devices", dict, f"{where}.status.allocation", source) or {},
                                  "results", list, f"{where}.status.allocation.devices", source) or []
            devices = tuple(f"{_claims_get(r, 'pool', str, at, source)}/{_claims_get(r, 'device', str, at, source)}"
                            for j, r in enumerate(results)
                            for at in [f"{where}.status.allocation.devices.results[{j}]"]
                            if _claims_get(r, "driver", str, at, source) == DRIVER)
            reserved = tuple(str(_claims_get(r, "uid", str, f"{where}.status.reservedFor[{j}]", source) or "")
                             for j, r in enumerate(_claims_get(status, "reservedFor", list, f"{where}.status",
                                                               source) or []))
            claims[(namespace, name)] = Claim(namespace, name, devices, reserved)
            continue
        labels = _claims_get(metadata, "labels", dict, f"{where}.metadata", source) or {}
        spec = _claims_get(item, "spec", dict, where, source) or {}
        conditions = _claims_get(status, "conditions", list, f"{where}.status", source) or []
        statuses = _claims_get(status, "resourceClaimStatuses", list, f"{where}.status", source) or []
        claim = next((s.get("resourceClaimName") for s in statuses
                      if isinstance(s, dict) and s.get("name") == CLAIM_NAME), None)
        pods.append(AppPod(
            namespace, name, str(_claims_get(metadata, "uid", str, f"{where}.metadata", source) or ""),
            labels.get(APP_LABEL) if isinstance(labels.get(APP_LABEL), str) else None,
            _claims_get(spec, "nodeName", str, f"{where}.spec", source),
            status.get("phase") == "Running",
            any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            claim if isinstance(claim, str) else None))
    return Claims(tuple(pods), claims)


def claim_report(apps: list[str], nodes: list[str], found: Claims) -> tuple[list[str], dict[str, str]]:
    """One line per app on claims (its namespace is its name), and the apps proven: a Running, Ready pod whose `gpu`
    claim is allocated a device of Intel's driver and reserved for that pod, on a node of the stack."""
    lines, proven = [], {}
    width = max(len(a) for a in apps) if apps else 0
    for app in apps:
        pods = sorted((p for p in found.pods if p.namespace == app and p.app == app), key=lambda p: p.name)
        problems = []
        for pod in pods:
            claim = found.claims.get((app, pod.claim)) if pod.claim else None
            if not (pod.running and pod.ready):
                problems.append(f"pod {pod.name} not Running and Ready")
            elif pod.claim is None:
                problems.append(f"pod {pod.name} has no `{CLAIM_NAME}` claim (is step 3's export reconciled?)")
            elif claim is None or not claim.devices:
                problems.append(f"claim {pod.claim} of pod {pod.name} not allocated a {DRIVER} device")
            elif not pod.uid or pod.uid not in claim.reserved_for:
                problems.append(f"claim {pod.claim} not reserved for pod {pod.name}")
            elif pod.node not in nodes:
                problems.append(f"pod {pod.name} runs on {escaped(str(pod.node))[:80]}, not a node of the stack")
            else:
                proven[app] = pod.node
                lines.append(f"{app:<{width}}  pod {pod.name} Running on {pod.node}, claim {pod.claim} allocated "
                             f"{', '.join(claim.devices)} and reserved for it")
                break
        else:
            lines.append(f"{app:<{width}}  NOT PROVEN: " + ("; ".join(escaped(p)[:200] for p in problems[:3])
                                                            or f"no pod labelled {APP_LABEL}={app} in namespace {app}"))
    return lines, proven


def claims_evidence_text(stack: str, proven: dict[str, str]) -> str:
    body = "".join(f"  {json.dumps(app)}: {json.dumps(node)}\n" for app, node in sorted(proven.items()))
    return (f"# Allocation evidence for the DRA route, written by `make verify-nodes STACK={stack} CLAIMS=... "
            "WRITE_EVIDENCE=1`\n# from `kubectl get pods,resourceclaims -A -o json`: each GPU app and the node its "
            "allocated claim runs it on.\n"
            f"stack: {json.dumps(stack)}\ndriver: {DRIVER}\napps:\n{body}")


def parse_claims_evidence(doc: Any, source: str, stack: str) -> dict[str, str]:
    """Refuse anything but `{stack, driver: gpu.intel.com, apps: {app: node}}` of this stack."""
    regen = f"; hint: regenerate it with `{next_claims_step(stack)}`"
    problems = _header_problems(doc, source, "allocation evidence", {"stack": stack, "driver": DRIVER}, "apps", regen)
    apps = doc.get("apps")
    if not isinstance(apps, dict) or not apps:
        problems.append(f"{source}: apps: must map each GPU app to the node its allocated claim runs it on{regen}")
        apps = {}
    proven = {}
    for app, node in apps.items():
        if not isinstance(node, str) or len(node) > 253 or not NODE_NAME.match(node):
            problems.append(f"{source}: apps.{app}: {json.dumps(node, default=str)[:80]}: {NOT_A_NODE_NAME}{regen}")
        else:
            proven[str(app)] = node
    if problems:
        raise SliceInputError("\n".join(problems))
    return proven
