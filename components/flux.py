"""Flux delivery graph: typed `FluxKustomization` objects (kustomize.toolkit.fluxcd.io/v1) and `cluster-vars`.

The graph is built by pure functions (`delivery_graph`, `check_graph`) and only then declared as resources, so
an order that could stall the cluster is refused before anything exists.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import Sequence

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, model_validator

from components.config import Dns1123Label, FluxConfig, FluxDuration, RepoPath
from components.layout import component_dir, flux_path

API_VERSION = "kustomize.toolkit.fluxcd.io/v1"
KIND = "Kustomization"
CLUSTER_VARS = "cluster-vars"
PLUGIN_KUSTOMIZATION = "intel-gpu-plugin"
CNI_KUSTOMIZATION = "cilium"

# A 3-node DaemonSet rollout with maxUnavailable 1 replaces pods one node at a time; each node gets this
# budget for an image pull on a home uplink plus plugin registration with kubelet.
PLUGIN_ROLLOUT_BUDGET_PER_NODE_MINUTES = 3


class GraphError(pulumi.RunError):
    """The delivery graph would break reconciliation. RunError: the CLI prints it without a traceback."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


class KustomizationSpec(BaseModel):
    """The subset of Flux's Kustomization v1 spec this program sets; names and types follow the CRD."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: RepoPath
    interval: FluxDuration
    timeout: FluxDuration | None = None
    retryInterval: FluxDuration | None = None
    dependsOn: tuple[Dns1123Label, ...] = ()
    wait: bool
    prune: bool = True
    sourceRef: Dns1123Label = "flux-system"
    substituteFrom: tuple[Dns1123Label, ...] = ()

    @model_validator(mode="after")
    def _no_self_dependency(self) -> KustomizationSpec:
        if len(set(self.dependsOn)) != len(self.dependsOn):
            raise ValueError("dependsOn lists a Kustomization twice")
        return self


class KustomizationDecl(BaseModel):
    """One node of the delivery graph. `owned`: the program writes the objects at `spec.path`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Dns1123Label
    spec: KustomizationSpec
    owned: bool


def kustomization_spec_dict(spec: KustomizationSpec) -> dict:
    """The Flux API `spec` object (camelCase keys, unset optionals left out)."""
    out: dict = {
        "interval": spec.interval,
        "path": spec.path,
        "prune": spec.prune,
        "sourceRef": {"kind": "GitRepository", "name": spec.sourceRef},
        "wait": spec.wait,
    }
    if spec.dependsOn:
        out["dependsOn"] = [{"name": name} for name in spec.dependsOn]
    if spec.timeout:
        out["timeout"] = spec.timeout
    if spec.retryInterval:
        out["retryInterval"] = spec.retryInterval
    if spec.substituteFrom:
        out["postBuild"] = {"substituteFrom": [{"kind": "ConfigMap", "name": n} for n in spec.substituteFrom]}
    return out


def plugin_rollout_timeout(node_count: int) -> str:
    return f"{node_count * PLUGIN_ROLLOUT_BUDGET_PER_NODE_MINUTES + 1}m"


def delivery_graph(stack: str, flux: FluxConfig, node_count: int) -> list[KustomizationDecl]:
    """The cluster's six Kustomizations. Every tier another tier dependsOn waits, so 'Ready' means healthy."""
    common = {"sourceRef": flux.gitRepository, "substituteFrom": (CLUSTER_VARS,)}
    ext = flux.externalPaths

    def external(name: str, depends: tuple[str, ...], wait: bool, **timing: str) -> KustomizationDecl:
        spec = KustomizationSpec(path=ext[name], dependsOn=depends, wait=wait, **timing, **common)
        return KustomizationDecl(name=name, spec=spec, owned=False)

    tier_timing = {"interval": "10m", "timeout": "5m"}
    return [
        external(CNI_KUSTOMIZATION, (flux.bootstrapKustomization,), True, **tier_timing),
        external("platform", (CNI_KUSTOMIZATION,), True, **tier_timing),
        external("platform-config", ("platform",), True, **tier_timing),
        external("apps-wave-0", ("platform-config",), True, **tier_timing),
        # Nothing depends on wave 1, so it does not wait: a slow app there delays no one.
        external("apps-wave-1", ("apps-wave-0",), False, **tier_timing),
        KustomizationDecl(
            name=PLUGIN_KUSTOMIZATION,
            owned=True,
            spec=KustomizationSpec(
                path=flux_path(component_dir(stack, PLUGIN_KUSTOMIZATION)),
                # The CNI only: pods need a network, nothing else. Depending on `platform` would tie the
                # plugin to every platform component's health, the coupling this split exists to avoid.
                dependsOn=(CNI_KUSTOMIZATION,),
                wait=True,
                prune=True,
                # The plugin rarely changes; an hourly drift check is plenty, retries come sooner.
                interval="1h",
                retryInterval="2m",
                timeout=plugin_rollout_timeout(node_count),
                **common,
            ),
        ),
    ]


def check_graph(decls: Sequence[KustomizationDecl], external_roots: Sequence[str]) -> None:
    """Refuse graphs that Flux would reconcile into a stall. Raises GraphError with one line per problem."""
    problems: list[str] = []
    by_name = {d.name: d for d in decls}
    if len(by_name) != len(decls):
        problems.append("flux: two Kustomizations share a name")
    known = set(by_name) | set(external_roots)
    for d in decls:
        for dep in d.spec.dependsOn:
            if dep not in known:
                problems.append(
                    f"flux: {d.name}.spec.dependsOn: {dep!r}: no such Kustomization; known: {', '.join(sorted(known))}"
                )
            if dep == PLUGIN_KUSTOMIZATION:
                problems.append(
                    f"flux: {d.name}.spec.dependsOn: {dep!r}: nothing may depend on the GPU plugin; a failed "
                    "plugin rollout would stall that tier; hint: remove the dependency"
                )
    plugin = by_name.get(PLUGIN_KUSTOMIZATION)
    if plugin is not None and set(plugin.spec.dependsOn) - {CNI_KUSTOMIZATION}:
        extra = sorted(set(plugin.spec.dependsOn) - {CNI_KUSTOMIZATION})
        problems.append(
            f"flux: {PLUGIN_KUSTOMIZATION}.spec.dependsOn: {extra}: the plugin may depend on the CNI "
            f"({CNI_KUSTOMIZATION}) only"
        )
    depended_on = {dep for d in decls for dep in d.spec.dependsOn}
    for d in decls:
        if d.name in depended_on and not d.spec.wait:
            dependents = sorted(x.name for x in decls if d.name in x.spec.dependsOn)
            problems.append(
                f"flux: {d.name}.spec.wait: false: {', '.join(dependents)} dependsOn it, and without wait "
                "'Ready' does not mean its workloads are healthy; hint: set wait: true"
            )
    cycle = _find_cycle(decls)
    if cycle:
        problems.append(f"flux: dependsOn cycle: {' -> '.join(cycle)}; Flux would never reconcile these")
    if problems:
        raise GraphError(problems)


def _find_cycle(decls: Sequence[KustomizationDecl]) -> list[str] | None:
    try:
        _sorter(decls).prepare()
    except CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists a cycle against the edges; show it as dependsOn reads
    return None


def _sorter(decls: Sequence[KustomizationDecl]) -> TopologicalSorter:
    names = {d.name for d in decls}
    return TopologicalSorter({d.name: [dep for dep in d.spec.dependsOn if dep in names] for d in decls})


class FluxKustomization(k8s.apiextensions.CustomResource):
    """A Flux Kustomization whose spec went through `KustomizationSpec` validation."""

    def __init__(self, resource_name: str, name: str, namespace: str, spec: KustomizationSpec,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            resource_name,
            api_version=API_VERSION,
            kind=KIND,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace),
            spec=kustomization_spec_dict(spec),
            opts=opts,
        )


def cluster_vars_args(flux: FluxConfig) -> k8s.core.v1.ConfigMapInitArgs:
    return k8s.core.v1.ConfigMapInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=CLUSTER_VARS, namespace=flux.namespace),
        data=dict(sorted(flux.clusterVars.items())),
    )


class FluxDeliveryGraph(pulumi.ComponentResource):
    """The cluster's Flux Kustomizations and the `cluster-vars` ConfigMap their postBuild substitutes from."""

    TYPE = "gpu-platform:components:FluxDeliveryGraph"

    kustomizations: dict[str, FluxKustomization]

    def __init__(self, name: str, stack: str, flux: FluxConfig, node_count: int,
                 owned_sources: dict[str, pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        decls = delivery_graph(stack, flux, node_count)
        check_graph(decls, external_roots=[flux.bootstrapKustomization])
        child = pulumi.ResourceOptions(parent=self)
        self.cluster_vars = k8s.core.v1.ConfigMap(f"{name}-{CLUSTER_VARS}", cluster_vars_args(flux), opts=child)
        self.kustomizations = {}
        for decl in _dependency_order(decls):
            depends: list[pulumi.Resource] = [self.cluster_vars]
            # Flux orders tiers by spec.dependsOn itself; these edges only order Pulumi's own creates when a
            # CLI user applies straight to a cluster, and make the graph visible in `pulumi preview`.
            depends += [self.kustomizations[d] for d in decl.spec.dependsOn if d in self.kustomizations]
            if decl.name in owned_sources:
                # Pulumi-only edge: in the GitOps tree the Kustomization is what applies these objects.
                depends.append(owned_sources[decl.name])
            self.kustomizations[decl.name] = FluxKustomization(
                f"{name}-{decl.name}", decl.name, flux.namespace, decl.spec,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=depends)),
            )
        self.register_outputs({
            "kustomizations": sorted(self.kustomizations),
            "owned": sorted(d.name for d in decls if d.owned),
        })


def _dependency_order(decls: Sequence[KustomizationDecl]) -> list[KustomizationDecl]:
    """Dependencies first; check_graph has ruled out cycles."""
    by_name = {d.name: d for d in decls}
    return [by_name[name] for name in _sorter(decls).static_order()]


__all__ = [
    "API_VERSION", "CLUSTER_VARS", "FluxDeliveryGraph", "FluxKustomization", "GraphError", "KustomizationDecl",
    "KustomizationSpec", "check_graph", "delivery_graph", "kustomization_spec_dict", "plugin_rollout_timeout",
]
