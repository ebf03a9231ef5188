"""Advertisement evidence and the GPU gate.

Plex may request `gpu.intel.com/i915` only when every configured node is proven to advertise it. Requesting a
resource no node advertises leaves Plex Unschedulable and, through apps-wave-0's `wait: true` and apps-wave-1's
dependsOn, stalls every app. The proof is `evidence/<stack>.yaml`, written by
`make verify-nodes STACK=<stack> NODES=<kubectl get nodes -o json output>` from real node status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from model.errors import RefusalError

RESOURCE = "gpu.intel.com/i915"
WRONG_DRIVER_RESOURCE = "gpu.intel.com/xe"
EVIDENCE_DIR = "evidence"

# dra-claim: a ResourceClaimTemplate of the DRA driver's DeviceClass (gpu.route: dra, model/dra/gate.py)
GpuAccess = Literal["none", "host-path", "device-plugin", "dra-claim"]


class EvidenceError(RefusalError):
    """Evidence that cannot be trusted, or a request the gate refuses (the program raises it to the Pulumi CLI as a
    RunError: no traceback)."""


def evidence_path(project_dir: Path, stack: str) -> Path:
    return project_dir / EVIDENCE_DIR / f"{stack}.yaml"


def next_step(stack: str) -> str:
    return (f"kubectl get nodes -o json > nodes-{stack}.json && "
            f"make verify-nodes STACK={stack} NODES=nodes-{stack}.json WRITE_EVIDENCE=1")


@dataclass(frozen=True)
class Evidence:
    """Parsed evidence: node name -> allocatable i915 count. `missing` when there is no file."""

    source: str
    nodes: dict[str, int] | None


def parse_count(value: Any) -> int | None:
    """A whole device count from evidence or a node's allocatable (Kubernetes gives quantities as strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    # ASCII digits only: '²'.isdigit() is True and int('²') raises.
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def parse_evidence(doc: Any, source: str, stack: str) -> Evidence:
    """Refuse anything but `{stack, resource: gpu.intel.com/i915, nodes: {name: count ≥ 1}}`."""
    problems: list[str] = []
    regen = f"; hint: regenerate it with `{next_step(stack)}`"
    if not isinstance(doc, dict):
        raise EvidenceError([f"{source}: (root): not a mapping{regen}"])
    extra = sorted(str(key) for key in set(doc) - {"stack", "resource", "nodes"})  # keys of any type: no crash
    if extra:
        problems.append(f"{source}: {', '.join(map(str, extra))}: unknown keys; evidence holds stack, resource and "
                        f"nodes only{regen}")
    if doc.get("stack") != stack:
        problems.append(f"{source}: stack: {doc.get('stack')!r}: evidence of another stack; expected {stack!r}{regen}")
    if doc.get("resource") != RESOURCE:
        problems.append(f"{source}: resource: {doc.get('resource')!r}: must be {RESOURCE}"
                        + ("; the nodes run the xe driver, and Plex requests i915"
                           if doc.get("resource") == WRONG_DRIVER_RESOURCE else "")
                        + regen)
    nodes = doc.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        problems.append(f"{source}: nodes: {nodes!r}: must map each node name to its allocatable {RESOURCE}{regen}")
        raise EvidenceError(problems)
    counts: dict[str, int] = {}
    for name, value in nodes.items():
        count = parse_count(value)
        if count is None:
            problems.append(f"{source}: nodes.{name}: {value!r}: not a whole number{regen}")
        elif count < 1:
            problems.append(f"{source}: nodes.{name}: {count}: advertises no {RESOURCE}; Plex would be Unschedulable "
                            f"there{regen}")
        else:
            counts[str(name)] = count
    if problems:
        raise EvidenceError(problems)
    return Evidence(source=source, nodes=counts)


def load_evidence(project_dir: Path, stack: str) -> Evidence:
    path = evidence_path(project_dir, stack)
    source = f"{EVIDENCE_DIR}/{path.name}"
    if not path.exists():
        return Evidence(source=source, nodes=None)
    from model.safe_yaml import InputFileError, load_yaml, read_text

    try:  # untrusted: a folder, binary or non-UTF-8 data, aliases, duplicate keys are one error line each
        doc = load_yaml(read_text(path, 1024 * 1024), string_keys=True)
    except FileNotFoundError:
        return Evidence(source=source, nodes=None)
    except InputFileError as exc:
        raise EvidenceError([exc.line(source, f"regenerate it with `{next_step(stack)}`")]) from None
    return parse_evidence(doc, source, stack)


@dataclass(frozen=True)
class GpuDecision:
    access: GpuAccess
    reason: str


def decide_gpu_access(gpu: str, requested: str, nodes: list[str], evidence: Evidence, stack: str,
                      app: str = "plex", key: str = "plex.hardware.intelGpuAccess") -> GpuDecision:
    """The gate, for one GPU app. `requested`: auto | host-path | device-plugin (the app's `key` in stack config);
    every message names the app and that key."""
    if gpu == "none":
        return GpuDecision("none", "hardware.gpu is none")
    if not nodes:  # "every node advertises" would hold vacuously: the gate refuses itself, not only the config model
        raise EvidenceError([
            f"Pulumi.{stack}.yaml: gpu-platform:cluster.nodes: no nodes: nothing could prove that the nodes {app} "
            f"runs on advertise {RESOURCE}; hint: list every node of the cluster (`kubectl get nodes`)"])
    if evidence.nodes is not None:
        others = sorted(set(evidence.nodes) - set(nodes))
        if others:
            raise EvidenceError([
                f"{evidence.source}: nodes: {', '.join(others)}: not in this stack's cluster.nodes "
                f"({', '.join(nodes)}); the evidence is for another cluster or an old node list; "
                f"hint: regenerate it with `{next_step(stack)}`"])
    uncovered = [n for n in nodes if evidence.nodes is None or n not in evidence.nodes]
    if requested == "host-path":
        return GpuDecision("host-path", f"{key} is host-path (held back by config)")
    if not uncovered:
        return GpuDecision("device-plugin", f"{evidence.source} shows every node advertising {RESOURCE}")
    why = (f"there is no evidence that the nodes advertise {RESOURCE} ({evidence.source} is missing)"
           if evidence.nodes is None else
           f"{evidence.source} does not cover {', '.join(uncovered)}")
    if requested == "device-plugin":
        raise EvidenceError([
            f"Pulumi.{stack}.yaml: gpu-platform:{key}: \"device-plugin\": refused: {why}; requesting it now would "
            f"leave {app} Unschedulable, its Kustomization never Ready, and every tier that waits for it stalled; "
            f"hint: merge the plugin first, then run `{next_step(stack)}`"])
    return GpuDecision("host-path", f"{app} keeps the legacy /dev/dri hostPath (a known no-op: EPERM on open) "
                                    f"because {why}; next: {next_step(stack)}")


@dataclass(frozen=True)
class GpuRequest:
    """An app on the device-plugin path: `devices` of gpu.intel.com/i915 for its one pod (`key`: where config sets
    it)."""

    app: str
    key: str
    devices: int


def check_capacity(requests: list[GpuRequest], evidence: Evidence, stack: str) -> None:
    """Refuse requests that cannot all be scheduled at once on what the nodes advertise (the evidence's counts, which
    already include the plugin's sharedDevNum): each pod takes its devices from one node. Placement is first-fit,
    largest request first; with one pod per app and a handful of nodes that finds a fit whenever one exists in
    practice, and it never says "fits" when nothing would."""
    if not requests or evidence.nodes is None:
        return
    free = dict(sorted(evidence.nodes.items()))
    unplaced = []
    for r in sorted(requests, key=lambda r: (-r.devices, r.app)):
        node = next((n for n, count in free.items() if count >= r.devices), None)
        if node is None:
            unplaced.append(r)
        else:
            free[node] -= r.devices
    if unplaced:
        total = sum(r.devices for r in requests)
        advertised = ", ".join(f"{n}={c}" for n, c in sorted(evidence.nodes.items()))
        names = ", ".join(f"{r.app} ({r.devices})" for r in sorted(requests, key=lambda r: r.app))
        raise EvidenceError([
            f"Pulumi.{stack}.yaml: gpu-platform:{r.key}: {r.devices}: {r.app} does not fit: the apps on the "
            f"device-plugin path request {total} {RESOURCE} in all ({names}), the nodes advertise {advertised} "
            f"({evidence.source}), and a pod takes its devices from one node; {r.app} would stay Unschedulable; "
            "hint: hold an app back with intelGpuAccess: host-path, request fewer devices, or raise the plugin's "
            "sharedDevNum (with its reason) and record new evidence" for r in unplaced])


# --- what a workload's pod holds: the other side of the gate ------------------------------------------------------

HOST_DEVICE_DIR = "/dev/dri"


def _pod_spec(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = manifest.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod = template.get("spec") if isinstance(template, Mapping) else None
    return pod if isinstance(pod, Mapping) else {}


def gpu_requests(manifest: Mapping[str, Any]) -> list[str]:
    """The paths where a workload's containers request or limit the device plugin's resource."""
    found = []
    for list_name in ("initContainers", "containers"):
        containers = _pod_spec(manifest).get(list_name)
        for i, c in enumerate(containers if isinstance(containers, list) else []):
            resources = c.get("resources") if isinstance(c, Mapping) else None
            for kind in ("limits", "requests"):
                values = resources.get(kind) if isinstance(resources, Mapping) else None
                if isinstance(values, Mapping) and RESOURCE in values:
                    found.append(f"spec.template.spec.{list_name}[{i}].resources.{kind}.{RESOURCE}")
    return found


def is_host_device_path(path: Any) -> bool:
    """Whether a hostPath volume's path is /dev/dri or a path under it."""
    path = str(path).rstrip("/")
    return path == HOST_DEVICE_DIR or path.startswith(HOST_DEVICE_DIR + "/")


def host_device_volumes(manifest: Mapping[str, Any]) -> list[str]:
    """The names of a workload's hostPath volumes of /dev/dri (or a path under it)."""
    volumes = _pod_spec(manifest).get("volumes")
    names = []
    for volume in volumes if isinstance(volumes, list) else []:
        host = volume.get("hostPath") if isinstance(volume, Mapping) else None
        if isinstance(host, Mapping) and is_host_device_path(host.get("path", "")):
            names.append(str(volume.get("name")))
    return names


def held_access(manifest: Mapping[str, Any]) -> GpuAccess:
    """How a workload's pod reaches the GPU as its manifest is written, whatever the gate allows: the access the
    cluster runs once that manifest is applied (a repository's own app, read from Flux's walk)."""
    if gpu_requests(manifest):
        return "device-plugin"
    if _pod_spec(manifest).get("resourceClaims"):
        return "dra-claim"
    return "host-path" if host_device_volumes(manifest) else "none"
