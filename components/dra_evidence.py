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

from components.evidence import EVIDENCE_DIR, parse_count
from components.intel_gpu_dra import DEVICE_CLASS, DRIVER
from components.safe_yaml import escaped

DRA_EVIDENCE_DIR = f"{EVIDENCE_DIR}/dra"
HEALTHY = "Healthy"  # the driver's `health` attribute (its pkg/gpu/device: Healthy or Unhealthy)
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
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
        return self.health == HEALTHY


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
            raise SliceInputError(f"{source}: {where}.spec.nodeName: \"{escaped(node[:80])}\": not a Kubernetes node "
                                  f"name; hint: {_HINT}")
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


def parse_dra_evidence(doc: Any, source: str, stack: str, kernel_driver: str) -> dict[str, int]:
    """Refuse anything but `{stack, driver: gpu.intel.com, kernelDriver, nodes: {name: count ≥ 1}}` of this stack
    and kernel driver; one line per problem."""
    regen = f"; hint: regenerate it with `{next_dra_step(stack)}`"
    if not isinstance(doc, dict):
        raise SliceInputError(f"{source}: (root): not a mapping{regen}")
    problems = []
    extra = sorted(str(k) for k in set(doc) - {"stack", "driver", "kernelDriver", "nodes"})
    if extra:
        problems.append(f"{source}: {', '.join(extra)}: unknown keys; slice evidence holds stack, driver, kernelDriver "
                        f"and nodes only{regen}")
    for key, want in (("stack", stack), ("driver", DRIVER), ("kernelDriver", kernel_driver)):
        if doc.get(key) != want:
            problems.append(f"{source}: {key}: {json.dumps(doc.get(key), default=str)}: expected {json.dumps(want)}"
                            f"{regen}")
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
