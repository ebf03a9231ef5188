"""The evidence gate of the DRA route (docs/dra.md): which stage of the move from the device plugin the stack may
export, on what evidence, and what each GPU app's pod gets there.

Five steps, three of them exports (`gpu.dra.stage`), two of them evidence the cluster gives between them; each export
only when the step before it is proven, because each wrong order stalls the app tier. Step 1 (`driver-added`) needs
nothing: the driver runs beside the plugin, unconsumed. Step 3 (`apps-on-claims`) needs step 2's slice evidence
(evidence/dra/<stack>.yaml): a claim no ResourceSlice can satisfy leaves the app Pending, its Kustomization never
Ready, every tier after it stalled. Step 5 (`plugin-removed`) needs step 4's allocation evidence
(evidence/dra/claims/<stack>.yaml): removing the plugin before every claim is allocated takes the GPU away from an app
still on `gpu.intel.com/i915`. Every refusal is one line naming the stack key, the missing evidence and its command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.config import DeliveredBy, GpuConfig, GpuHardwareConfig
from model.dra.evidence import (
    DEVICE_CLASS,
    DRA_EVIDENCE_DIR,
    DRIVER,
    SliceInputError,
    claims_evidence_path,
    dra_evidence_path,
    next_claims_step,
    next_dra_step,
    parse_claims_evidence,
    parse_dra_evidence,
)
from model.evidence import EvidenceError, GpuDecision
from model.outputs import DraMigrationOutput

STEPS = {"driver-added": 1, "apps-on-claims": 3, "plugin-removed": 5}
STAGE_KEY = "gpu-platform:gpu.dra.stage"


@dataclass(frozen=True)
class DraApp:
    """A GPU app as the DRA gate sees it: `key` is where its settings sit in the stack file (plex, apps[0])."""

    key: str
    name: str
    hardware: GpuHardwareConfig
    delivered_by: DeliveredBy = "export"
    adopted: bool = False  # from the repository's HelmRelease (helmRelease), whose file the export's walk reads


@dataclass(frozen=True)
class EvidenceFile:
    """Parsed evidence: `found` is None when there is no file."""

    source: str
    found: dict[str, Any] | None


def _load(path: Path, project_dir: Path, parse: Any, regen: str) -> EvidenceFile:
    from model.safe_yaml import InputFileError, load_yaml, read_text

    source = path.relative_to(project_dir).as_posix()
    if not path.exists():
        return EvidenceFile(source, None)
    try:  # untrusted: the same reader and one-line refusals as the device plugin's evidence
        doc = load_yaml(read_text(path, 1024 * 1024), string_keys=True)
        return EvidenceFile(source, parse(doc, source))
    except FileNotFoundError:
        return EvidenceFile(source, None)
    except InputFileError as exc:
        raise EvidenceError([exc.line(source, f"regenerate it with `{regen}`")]) from None
    except SliceInputError as exc:
        raise EvidenceError(str(exc).splitlines()) from None


def load_slice_evidence(project_dir: Path, stack: str, kernel_driver: str) -> EvidenceFile:
    """Step 2's evidence: node -> healthy devices on `kernel_driver`."""
    return _load(dra_evidence_path(project_dir, stack), project_dir,
                 lambda doc, source: parse_dra_evidence(doc, source, stack, kernel_driver), next_dra_step(stack))


def load_claim_evidence(project_dir: Path, stack: str) -> EvidenceFile:
    """Step 4's evidence: app -> the node its allocated claim runs it on."""
    return _load(claims_evidence_path(project_dir, stack), project_dir,
                 lambda doc, source: parse_claims_evidence(doc, source, stack), next_claims_step(stack))


@dataclass(frozen=True)
class DraPlan:
    """Where the stack stands on the DRA route, and what each app switched by it gets (`decisions`)."""

    stage: str
    step: int
    plugin: bool  # the device plugin is still exported
    decisions: dict[str, GpuDecision]  # the apps this stage decides (the others keep the device plugin's gate)
    admin_access: frozenset[str]  # apps whose claim asks for adminAccess
    next: str  # what the next step needs, for the preview and the post-merge checklist
    admin_access_namespaces: tuple[str, ...] = ()  # gpu.dra.adminAccessNamespaces, for the repository's walk

    @property
    def claiming(self) -> list[str]:
        return sorted(name for name, d in self.decisions.items() if d.access == "dra-claim")

    def as_output(self) -> dict[str, Any]:
        return DraMigrationOutput(self.stage, self.step, self.plugin, tuple(self.claiming),
                                  tuple(sorted(self.admin_access)), self.next,
                                  tuple(self.admin_access_namespaces)).as_output()


def _on_claims(app: DraApp) -> bool:
    """An app the DRA stages move: it uses the GPU and is not held back on the hostPath."""
    return app.hardware.gpu != "none" and app.hardware.intelGpuAccess != "host-path"


def _stage_refusal(stack: str, stage: str, why: str, harm: str, hint: str) -> str:
    return f"Pulumi.{stack}.yaml: {STAGE_KEY}: \"{stage}\": refused: {why}; {harm}; hint: {hint}"


def _covering(evidence: EvidenceFile, wanted: Sequence[str], what: str, stack: str, regen: str) -> list[str]:
    """`wanted` not in the evidence; a name the evidence holds that the stack does not know is refused (evidence of
    another cluster, or an old node list)."""
    if evidence.found is None:
        return list(wanted)
    others = sorted(set(evidence.found) - set(wanted))
    if others:
        raise EvidenceError([f"{evidence.source}: {what}: {', '.join(others)}: not in this stack's {what} "
                             f"({', '.join(wanted)}); the evidence is for another cluster or an old list; hint: "
                             f"regenerate it with `{regen}`"])
    return [n for n in wanted if n not in evidence.found]


def plan_dra(gpu: GpuConfig, nodes: Sequence[str], apps: Sequence[DraApp], slices: EvidenceFile,
             claims: EvidenceFile, stack: str) -> DraPlan:
    """The stage the stack asks for, allowed only on the evidence of the step before it."""
    stage = gpu.dra.stage
    step = STEPS[stage]
    admin = frozenset(a.name for a in apps if _on_claims(a) and a.hardware.draAllocation == "admin-access")
    moved = [a for a in apps if _on_claims(a)]
    named = tuple(gpu.dra.adminAccessNamespaces)
    if step == 1:
        following = ("step 2: record that every node publishes its slice: " + next_dra_step(stack)
                     if slices.found is None else
                     f"step 3: set gpu.dra.stage: apps-on-claims and export ({slices.source} proves the slices)")
        return DraPlan(stage, step, True, {}, admin, following, named)
    explicit = [a for a in moved if a.hardware.intelGpuAccess == "device-plugin"]
    if explicit:
        a = explicit[0]
        raise EvidenceError([
            f"Pulumi.{stack}.yaml: gpu-platform:{a.key}.hardware.intelGpuAccess: \"device-plugin\": refused at "
            f"gpu.dra.stage {stage}: from step 3 on every GPU app claims the iGPU, never a claim and "
            f"gpu.intel.com/i915 in one export; hint: set intelGpuAccess: auto (or host-path to hold {a.name} back)"])
    missing = _covering(slices, list(nodes), "nodes", stack, next_dra_step(stack))
    if missing:
        why = (f"there is no evidence that every node publishes a {DRIVER} ResourceSlice ({slices.source} is "
               "missing): step 2 was skipped" if slices.found is None else
               f"{slices.source} shows no {DRIVER} slice on {', '.join(missing)}")
        if _all_the_repositorys(gpu, moved, step):
            return _claims_judged_by_the_walk(stage, moved, {}, why, next_dra_step(stack), admin, named,
                                              "step 2: record that every node publishes its slice: "
                                              + next_dra_step(stack))
        names = ", ".join(a.name for a in moved) or "a GPU app"
        raise EvidenceError([_stage_refusal(
            stack, stage, why, f"a claim no slice can satisfy leaves {names} Pending, its Kustomization never Ready "
            "and every tier that waits for it stalled",
            f"merge step 1 (driver-added), then run `{next_dra_step(stack)}`")])
    decisions: dict[str, GpuDecision] = {}
    exported = [a for a in moved if a.delivered_by == "export"]
    for a in exported:
        sharing = ("adminAccess, sharing the device" if a.name in admin else "exclusive")
        decisions[a.name] = GpuDecision("dra-claim", f"{slices.source} shows a {DRIVER} slice on every node; "
                                                     f"{a.name} claims {a.hardware.devices} device"
                                                     f"{'s' * (a.hardware.devices > 1)} of class {DEVICE_CLASS} "
                                                     f"({sharing})")
    _check_claim_capacity([a for a in exported if a.name not in admin], slices, stack)
    if step == 3:
        if claims.found is not None:
            following = f"step 5: set gpu.dra.stage: plugin-removed and export ({claims.source} proves the claims)"
        else:
            following = "step 4: record that every claim is allocated and every app runs: " + next_claims_step(stack)
        return DraPlan(stage, step, True, decisions, admin, following, named)
    return _plugin_removed(gpu, moved, decisions, claims, stack, admin)


def _proven_claim(claims: EvidenceFile, a: DraApp) -> GpuDecision:
    return GpuDecision("dra-claim", f"{claims.source} shows {a.name} running on an allocated claim; the device plugin "
                                    "is removed")


def _plugin_removed(gpu: GpuConfig, moved: Sequence[DraApp], decisions: dict[str, GpuDecision], claims: EvidenceFile,
                    stack: str, admin: frozenset[str]) -> DraPlan:
    """Step 5, on the evidence that every app the stages move runs on an allocated claim."""
    stage, named = gpu.dra.stage, tuple(gpu.dra.adminAccessNamespaces)
    unproven = _covering(claims, [a.name for a in moved], "apps", stack, next_claims_step(stack))
    if unproven:
        why = (f"there is no evidence that the claims are allocated and the apps run ({claims.source} is missing): "
               "step 4 was skipped" if claims.found is None else
               f"{claims.source} does not show {', '.join(unproven)} running on an allocated claim")
        if _all_the_repositorys(gpu, moved, STEPS[stage]):
            proven = {a.name: _proven_claim(claims, a) for a in moved if a.name not in unproven}
            return _claims_judged_by_the_walk(stage, [a for a in moved if a.name in unproven], proven, why,
                                              next_claims_step(stack), admin, named,
                                              "step 4: record that every claim is allocated and every app runs: "
                                              + next_claims_step(stack))
        raise EvidenceError([_stage_refusal(
            stack, stage, why, f"removing the plugin now would take the GPU from {', '.join(unproven)} while it may "
            "still run on gpu.intel.com/i915", f"export and merge step 3 (apps-on-claims), then run "
            f"`{next_claims_step(stack)}`")])
    for a in moved:  # an app the repository delivers: its claim is proven; the i915 request is now refused there
        if a.delivered_by != "export":
            decisions[a.name] = _proven_claim(claims, a)
    return DraPlan(stage, STEPS[stage], False, decisions, admin, "none: the move to DRA is complete", named)


def _all_the_repositorys(gpu: GpuConfig, moved: Sequence[DraApp], step: int) -> bool:
    """Step 5 with the repository's driver (gpu.dra.deliveredBy: repository) and every app it moves adopted from the
    repository's HelmReleases: the export writes no driver, no plugin and no claim, so the missing evidence stalls
    nothing the export writes. It is asked of each app instead, at its release's file, where the export's walk reads
    what the pod holds (gitops/checks/reference.py): a claim there without the evidence is refused, as a claim the
    export would write."""
    return step == 5 and gpu.dra.deliveredBy == "repository" and bool(moved) and all(a.adopted for a in moved)


def _claims_judged_by_the_walk(stage: str, unproven: Sequence[DraApp], proven: dict[str, GpuDecision], why: str,
                               command: str, admin: frozenset[str], named: tuple[str, ...], following: str) -> DraPlan:
    """The plan of `_all_the_repositorys`: the apps without evidence are allowed no claim (the hostPath at most), and
    the reason carries the command that records it, for the walk's line at the release."""
    decisions = dict(proven)
    for a in unproven:
        decisions[a.name] = GpuDecision("host-path", f"{why}; a claim of {a.name} needs that evidence; next: {command}")
    return DraPlan(stage, STEPS[stage], False, decisions, admin, following, named)


def _check_claim_capacity(exclusive: Sequence[DraApp], slices: EvidenceFile, stack: str) -> None:
    """Exclusive claims must all be satisfiable at once: each pod's devices from one node's healthy devices
    (first-fit, largest first, as the device plugin's capacity check). adminAccess claims consume nothing."""
    assert slices.found is not None
    free = dict(sorted(slices.found.items()))
    unplaced = []
    for a in sorted(exclusive, key=lambda a: (-a.hardware.devices, a.name)):
        node = next((n for n, count in free.items() if count >= a.hardware.devices), None)
        if node is None:
            unplaced.append(a)
        else:
            free[node] -= a.hardware.devices
    if unplaced:
        total = sum(a.hardware.devices for a in exclusive)
        have = ", ".join(f"{n}={c}" for n, c in sorted(slices.found.items()))
        raise EvidenceError([
            f"Pulumi.{stack}.yaml: gpu-platform:{a.key}.hardware.devices: {a.hardware.devices}: {a.name}'s exclusive "
            f"claim cannot be allocated: the apps' exclusive claims ask for {total} {DEVICE_CLASS} devices in all, "
            f"the nodes publish {have} healthy ({slices.source}), and an exclusive device serves one claim; "
            f"{a.name} would stay Pending; hint: share the iGPU with draAllocation: admin-access (its namespace in "
            "gpu.dra.adminAccessNamespaces), or hold an app back with intelGpuAccess: host-path"
            for a in unplaced])


__all__ = ["DRA_EVIDENCE_DIR", "DraApp", "DraPlan", "EvidenceFile", "STEPS", "load_claim_evidence",
           "load_slice_evidence", "plan_dra"]
