"""What the program declares for each GPU app, decided before any resource is: the GPU gate (model/evidence.py), the
DRA route's stage (model/dra/gate.py), the capacity check, and who delivers the app. `__main__.py` only wires the
components to this plan; every decision here is tested directly (tests/model/test_app_plan.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from model.config import DeliveredBy, GpuAppConfig, StackConfig
from model.dra.gate import DraApp, DraPlan, EvidenceFile, plan_dra
from model.evidence import Evidence, GpuDecision, GpuRequest, check_capacity, decide_gpu_access
from model.outputs import AdoptedRelease, GpuAppOutput


@dataclass(frozen=True)
class AppPlan:
    """One GPU app: `key` is where its settings sit in the stack file (`plex`, `apps[0]`)."""

    key: str
    config: GpuAppConfig
    decision: GpuDecision
    admin_access: bool = False  # its DRA claim shares the device through adminAccess

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def delivered_by(self) -> DeliveredBy:
        return self.config.deliveredBy

    @property
    def exported(self) -> bool:
        """The export writes the app and its Kustomization; else the repository delivers it and the program's
        objects are the reference the gate holds the repository's to."""
        return self.config.deliveredBy == "export"

    @property
    def claims_device(self) -> bool:
        return self.decision.access == "dra-claim"

    @property
    def adopted(self) -> AdoptedRelease | None:
        """The repository's HelmRelease the app is adopted from: the program declares none of its objects."""
        release, workload = self.config.helmRelease, self.config.workload
        if release is None:
            return None
        return AdoptedRelease(self.key, release.namespace, release.name,
                              workload.kind if workload else "Deployment", workload.name if workload else release.name,
                              release.gpuAccess)

    def output(self) -> GpuAppOutput:
        """The app as the export reads it back (`gpuApps.<name>`)."""
        return GpuAppOutput(self.decision.access, self.decision.reason, self.config.hardware.devices,
                            self.config.openTestPrefix or "", self.delivered_by, self.adopted)


@dataclass(frozen=True)
class StackPlan:
    apps: tuple[AppPlan, ...]
    dra: DraPlan | None  # gpu.route: dra only
    warnings: tuple[str, ...]  # an app that asked for the GPU and does not get it, and why

    @property
    def plugin(self) -> bool:
        """The device plugin is declared: always, until the DRA route's step 5 removes it."""
        return self.dra is None or self.dra.plugin

    def app(self, name: str) -> AppPlan:
        return next(a for a in self.apps if a.name == name)

    def progress(self) -> str | None:
        """Where the stack stands on the DRA route, for the program's log."""
        dra = self.dra
        return f"gpu.route dra: step {dra.step} of 5 ({dra.stage}); next: {dra.next}" if dra else None


def plan_apps(cfg: StackConfig, apps: Sequence[tuple[str, GpuAppConfig]], evidence: Evidence,
              dra_evidence: tuple[EvidenceFile, EvidenceFile] | None, stack: str) -> StackPlan:
    """Each app's GPU access: on the DRA route from step 3 its stage decides the apps it moves to a claim (on
    `dra_evidence`: slices and claims, read for that route only); every other app requests gpu.intel.com/i915 only
    when `evidence` proves every node advertises it, and all such requests together must fit what the nodes
    advertise. Raises the gate's one-line refusals."""
    dra = None
    if cfg.gpu.route == "dra":
        if dra_evidence is None:
            raise ValueError("gpu.route: dra is planned on its slice and claim evidence, which were not read")
        slices, claims = dra_evidence
        dra_apps = [DraApp(key, app.name, app.hardware, app.deliveredBy, app.helmRelease is not None)
                    for key, app in apps]
        dra = plan_dra(cfg.gpu, cfg.cluster.nodes, dra_apps, slices, claims, stack)
    plans = []
    for key, app in apps:
        decision = (dra.decisions.get(app.name) if dra else None) or decide_gpu_access(
            app.hardware.gpu, app.hardware.intelGpuAccess, cfg.cluster.nodes, evidence, stack, app=app.name,
            key=f"{key}.hardware.intelGpuAccess")
        plans.append(AppPlan(key, app, decision, admin_access=dra is not None and app.name in dra.admin_access))
    check_capacity([GpuRequest(p.name, f"{p.key}.hardware.devices", p.config.hardware.devices)
                    for p in plans if p.decision.access == "device-plugin"], evidence, stack)
    warnings = tuple(f"{p.name}: {p.decision.reason}" for p in plans if p.config.hardware.gpu != "none"
                     and p.decision.access not in ("device-plugin", "dra-claim"))
    return StackPlan(tuple(plans), dra, warnings)
