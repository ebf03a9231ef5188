"""The stack outputs the export reads, typed: the program exports each with `as_output()` (__main__.py) and the export
reads it back with `from_output()` (gitops/pipeline.py), as `Layout` does. The wire form is the stack output itself:
the export index records it (`stackOutputs`) and the preview diffs it, so `as_output` keeps its exact shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from model.layout import Layout

if TYPE_CHECKING:  # the export reads the outputs back without loading the config models
    from model.config import DeliveredBy

KsKey = tuple[str, str]  # (namespace, name) of a Flux Kustomization


def _key(pair: Any) -> KsKey:
    return (str(pair[0]), str(pair[1]))


@dataclass(frozen=True)
class BootstrapRef:
    """The Kustomization `flux bootstrap` created, and the GitRepository it reads."""

    name: str
    namespace: str
    git_repository: str
    path: str  # a Flux path, ./…

    @property
    def key(self) -> KsKey:
        return (self.namespace, self.name)

    @property
    def source_key(self) -> KsKey:
        return (self.namespace, self.git_repository)

    def as_output(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "gitRepository": self.git_repository,
                "path": self.path}

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> BootstrapRef:
        return cls(name=str(out["name"]), namespace=str(out["namespace"]),
                   git_repository=str(out.get("gitRepository", out["name"])), path=str(out.get("path", "")))


@dataclass(frozen=True)
class GraphKustomization:
    """A Kustomization of the delivery graph: `declared` by the export, or by the repository (a tier it names)."""

    name: str
    namespace: str
    declared: bool
    owned: bool = False
    path: str | None = None

    @property
    def key(self) -> KsKey:
        return (self.namespace, self.name)

    def as_output(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "declared": self.declared, "owned": self.owned,
                "path": self.path}

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> GraphKustomization:
        return cls(name=str(out["name"]), namespace=str(out["namespace"]), declared=bool(out["declared"]),
                   owned=bool(out.get("owned", False)), path=out.get("path"))


@dataclass(frozen=True)
class DeliveredOutput:
    """One delivered component: its Kustomization, the folder that Kustomization applies, the tier it joined."""

    kustomization: KsKey
    folder: str
    tier: KsKey | None = None
    start_seconds: int | None = None
    start_explanation: str | None = None

    def as_output(self) -> dict[str, Any]:
        return {"kustomization": list(self.kustomization), "folder": self.folder,
                "tier": list(self.tier) if self.tier else None,
                "start": {"seconds": self.start_seconds, "explanation": self.start_explanation}}

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> DeliveredOutput:
        start = out.get("start") or {}
        return cls(kustomization=_key(out["kustomization"]), folder=str(out["folder"]),
                   tier=_key(out["tier"]) if out.get("tier") else None,
                   start_seconds=start.get("seconds"), start_explanation=start.get("explanation"))


@dataclass(frozen=True)
class FluxGraph:
    """The delivery graph as the stack's config intends it (`fluxGraph`), which the export's walk of the real
    repository is checked against (gitops/checks/delivery.py)."""

    namespace: str
    bootstrap: BootstrapRef
    plugin: KsKey | None  # None once the DRA route removed the device plugin (gpu.dra.stage: plugin-removed)
    cni: KsKey
    kustomizations: tuple[GraphKustomization, ...]
    components: dict[str, DeliveredOutput]
    plugin_folder: str
    driver: KsKey | None = None  # the DRA driver's Kustomization (gpu.route: dra)
    driver_folder: str = ""
    driver_dependents: tuple[KsKey, ...] = ()  # the Kustomizations of apps that claim a device (after the driver's)
    # gpu.dra.deliveredBy: repository: the repository's Kustomization installing the driver the stack adopts (the
    # export then writes no driver: `driver` is None), which the claiming apps' Kustomizations depend on instead
    adopted_driver: KsKey | None = None

    @property
    def exported(self) -> set[KsKey]:
        """The Kustomizations the export declares (writes)."""
        return {k.key for k in self.kustomizations if k.declared}

    @property
    def repository_tiers(self) -> list[KsKey]:
        """The tiers the stack says the repository declares, in the graph's order."""
        return [k.key for k in self.kustomizations if not k.declared]

    def as_output(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "bootstrap": self.bootstrap.as_output(),
            "plugin": list(self.plugin) if self.plugin else None,
            "cni": list(self.cni),
            "kustomizations": [k.as_output() for k in self.kustomizations],
            "components": {name: c.as_output() for name, c in self.components.items()},
            "pluginFolder": self.plugin_folder,
            # only with the DRA route: the device-plugin route's outputs stay as they were
            **({"driver": list(self.driver), "driverFolder": self.driver_folder} if self.driver else {}),
            **({"driverDependents": [list(k) for k in self.driver_dependents]} if self.driver_dependents else {}),
            **({"adoptedDriver": list(self.adopted_driver)} if self.adopted_driver else {}),
        }

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> FluxGraph:
        return cls(
            namespace=str(out["namespace"]),
            bootstrap=BootstrapRef.from_output(out["bootstrap"]),
            plugin=_key(out["plugin"]) if out.get("plugin") else None,
            cni=_key(out["cni"]),
            kustomizations=tuple(GraphKustomization.from_output(k) for k in out["kustomizations"]),
            components={str(name): DeliveredOutput.from_output(c) for name, c in out["components"].items()},
            plugin_folder=str(out["pluginFolder"]),
            driver=_key(out["driver"]) if out.get("driver") else None,
            driver_folder=str(out.get("driverFolder") or ""),
            driver_dependents=tuple(_key(k) for k in out.get("driverDependents") or ()),
            adopted_driver=_key(out["adoptedDriver"]) if out.get("adoptedDriver") else None,
        )


@dataclass(frozen=True)
class AppPolicy:
    """The label keys the cluster's Kyverno app policies require on app namespaces (`appPolicy`), which the
    export's offline policy run checks against (policy/rules.py)."""

    egress_class_label: str = "egress-class"
    auth_mode_label: str = "auth-mode"

    def as_output(self) -> dict[str, str]:
        return {"egressClassLabel": self.egress_class_label, "authModeLabel": self.auth_mode_label}

    @classmethod
    def from_output(cls, out: dict[str, Any] | None) -> AppPolicy:
        out = out or {}
        return cls(egress_class_label=str(out.get("egressClassLabel", cls.egress_class_label)),
                   auth_mode_label=str(out.get("authModeLabel", cls.auth_mode_label)))


@dataclass(frozen=True)
class GpuAppOutput:
    """How one GPU app reaches the GPU (`gpuApps.<name>`), for the post-merge checklist and the repository's walk."""

    access: str
    reason: str
    devices: int = 1
    open_test_prefix: str = ""
    delivered_by: DeliveredBy = "export"  # repository: the repository delivers the app; its objects are the reference
    adopted: AdoptedRelease | None = None  # the repository's HelmRelease the app is adopted from (no reference objects)

    @property
    def by_repository(self) -> bool:
        return self.delivered_by == "repository"

    def as_output(self) -> dict[str, Any]:
        out: dict[str, Any] = {"access": self.access, "reason": self.reason, "devices": self.devices,
                               "openTestPrefix": self.open_test_prefix}
        if self.adopted is not None:
            out["adopted"] = self.adopted.as_output()
        return {**out, "deliveredBy": self.delivered_by} if self.by_repository else out

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> GpuAppOutput:
        # Read back from an index too, which is untrusted: anything but "repository" is the default.
        delivered_by: DeliveredBy = "repository" if out.get("deliveredBy") == "repository" else "export"
        adopted = out.get("adopted")
        return cls(access=str(out.get("access", "unknown")), reason=str(out.get("reason", "")),
                   devices=int(out.get("devices", 1)), open_test_prefix=str(out.get("openTestPrefix") or ""),
                   delivered_by=delivered_by,
                   adopted=AdoptedRelease.from_output(adopted) if isinstance(adopted, dict) else None)


@dataclass(frozen=True)
class AdoptedRelease:
    """An app the export adopts from the repository's Flux HelmRelease (`helmRelease:` of its stack key), the
    workload whose pod holds the iGPU, and the access the stack asserts where the values cannot say."""

    key: str  # the app's key in the stack file: plex, apps[0]
    namespace: str
    name: str
    workload_kind: str
    workload_name: str
    asserted: str | None = None  # helmRelease.gpuAccess

    def as_output(self) -> dict[str, Any]:
        return {"key": self.key, "namespace": self.namespace, "name": self.name, "workloadKind": self.workload_kind,
                "workloadName": self.workload_name, **({"gpuAccess": self.asserted} if self.asserted else {})}

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> AdoptedRelease:
        asserted = out.get("gpuAccess")
        return cls(str(out.get("key", "")), str(out.get("namespace", "")), str(out.get("name", "")),
                   str(out.get("workloadKind", "Deployment")), str(out.get("workloadName", "")),
                   str(asserted) if asserted else None)


@dataclass(frozen=True)
class DraMigrationOutput:
    """Where the stack stands on the DRA route (`draMigration`, model/dra/gate.py): the step of five, the stage
    config names, whether the device plugin is still exported, the apps on claims, and what the next step needs."""

    stage: str
    step: int
    plugin: bool
    claims: tuple[str, ...]
    admin_access: tuple[str, ...]
    next: str
    admin_access_namespaces: tuple[str, ...] = ()  # gpu.dra.adminAccessNamespaces: where admin access may be


    def as_output(self) -> dict[str, Any]:
        return {"stage": self.stage, "step": self.step, "plugin": self.plugin, "claims": list(self.claims),
                "adminAccess": list(self.admin_access), "next": self.next,
                "adminAccessNamespaces": list(self.admin_access_namespaces)}

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> DraMigrationOutput:
        return cls(stage=str(out["stage"]), step=int(out["step"]), plugin=bool(out["plugin"]),
                   claims=tuple(str(a) for a in out.get("claims") or ()),
                   admin_access=tuple(str(a) for a in out.get("adminAccess") or ()), next=str(out.get("next", "")),
                   admin_access_namespaces=tuple(str(n) for n in out.get("adminAccessNamespaces") or ()))


@dataclass(frozen=True)
class ProgramOutputs:
    """Every stack output the export reads, read once from the program's run."""

    layout: Layout
    flux_graph: FluxGraph
    app_policy: AppPolicy
    nodes: tuple[str, ...]
    gpu_apps: dict[str, GpuAppOutput]
    # What every node's allocatable gpu.intel.com/i915 is once the plugin runs: one iGPU per node times the plugin's
    # -shared-dev-num (the post-merge suite asserts exactly this)
    gpu_shares_per_node: int = 1
    dra_kernel_driver: str | None = None  # gpu.route: dra: the kernel driver every node's slice must report
    dra_migration: DraMigrationOutput | None = None  # gpu.route: dra: the step of the move
    accept_replacement: tuple[str, ...] = ()  # gitops.acceptReplacement: objects the export may replace on purpose

    @classmethod
    def from_output(cls, stack: str, out: dict[str, Any]) -> ProgramOutputs:
        return cls(
            layout=Layout.from_output(stack, out["layout"]),
            flux_graph=FluxGraph.from_output(out["fluxGraph"]),
            app_policy=AppPolicy.from_output(out.get("appPolicy")),
            nodes=tuple(str(n) for n in out.get("nodes", [])),
            gpu_apps={str(name): GpuAppOutput.from_output(app) for name, app in (out.get("gpuApps") or {}).items()},
            gpu_shares_per_node=int(out.get("gpuSharesPerNode", 1)),
            dra_kernel_driver=str(out["draKernelDriver"]) if out.get("draKernelDriver") else None,
            dra_migration=DraMigrationOutput.from_output(out["draMigration"]) if out.get("draMigration") else None,
            accept_replacement=tuple(str(ref) for ref in out.get("acceptReplacement") or ()),
        )
