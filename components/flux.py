"""Flux delivery graph: typed `FluxKustomization` objects (kustomize.toolkit.fluxcd.io/v1) and `cluster-vars`.

The graph comes from stack config (`flux.tiers`, each component's `delivery`) through pure functions
(`delivery_graph`, `check_program_graph`) and only then becomes resources, so an order that could stall the cluster
is refused before anything exists. The rules themselves (model/flux_graph.py) run again in the export over every
Flux Kustomization that Flux's walk of the real repository reaches, hand-written ones included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, model_validator

from model.config import (
    PROJECT,
    DecryptionConfig,
    DeliveryConfig,
    DependsOnRef,
    Dns1123Label,
    FluxConfig,
    FluxDuration,
    HealthCheckConfig,
    RepoPath,
    TierConfig,
)
from model.errors import RefusalError
from model.flux_graph import (
    API_VERSION,
    CLUSTER_VARS,
    DRIVER_KUSTOMIZATION,
    IMAGE_PULL_MARGIN_SECONDS,
    KIND,
    PLUGIN_KUSTOMIZATION,
    GraphNode,
    StartBudget,
    check_graph,
    check_wait_timeout,
    display,
    minutes_above,
)
from model.layout import Layout, flux_path
from model.outputs import BootstrapRef, DeliveredOutput, FluxGraph, GraphKustomization


class GraphError(RefusalError, pulumi.RunError):
    """The delivery graph would break reconciliation. RunError: the CLI prints it without a traceback."""


class KustomizationSpec(BaseModel):
    """The subset of Flux's Kustomization v1 spec this program sets; names and types follow the CRD."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: RepoPath
    interval: FluxDuration
    timeout: FluxDuration | None = None
    retryInterval: FluxDuration | None = None
    dependsOn: tuple[DependsOnRef, ...] = ()
    wait: bool
    prune: bool = True
    sourceRef: Dns1123Label = "flux-system"
    sourceNamespace: Dns1123Label | None = None
    substituteFrom: tuple[Dns1123Label, ...] = ()
    decryption: DecryptionConfig | None = None
    healthChecks: tuple[HealthCheckConfig, ...] = ()
    targetNamespace: Dns1123Label | None = None

    @model_validator(mode="after")
    def _no_self_dependency(self) -> KustomizationSpec:
        refs = [(d.namespace, d.name) for d in self.dependsOn]
        if len(set(refs)) != len(refs):
            raise ValueError("dependsOn lists a Kustomization twice")
        return self


class KustomizationDecl(BaseModel):
    """One node of the delivery graph. `declared`: the export writes this Kustomization object (False: the
    repository declares it, `spec` holds only what config says of it). `owned`: its path is a folder the export
    writes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Dns1123Label
    namespace: Dns1123Label = "flux-system"
    spec: KustomizationSpec
    owned: bool
    declared: bool = True


def kustomization_spec_dict(spec: KustomizationSpec) -> dict:
    """The Flux API `spec` object (camelCase keys, unset optionals left out)."""
    source: dict[str, Any] = {"kind": "GitRepository", "name": spec.sourceRef}
    if spec.sourceNamespace:
        source["namespace"] = spec.sourceNamespace
    out: dict = {
        "interval": spec.interval,
        "path": spec.path,
        "prune": spec.prune,
        "sourceRef": source,
        "wait": spec.wait,
    }
    if spec.dependsOn:
        out["dependsOn"] = [d.model_dump(exclude_none=True) for d in spec.dependsOn]
    if spec.timeout:
        out["timeout"] = spec.timeout
    if spec.retryInterval:
        out["retryInterval"] = spec.retryInterval
    if spec.substituteFrom:
        out["postBuild"] = {"substituteFrom": [{"kind": "ConfigMap", "name": n} for n in spec.substituteFrom]}
    if spec.decryption:
        out["decryption"] = spec.decryption.model_dump(exclude_none=True)
    if spec.healthChecks:
        out["healthChecks"] = [h.model_dump(exclude_none=True) for h in spec.healthChecks]
    if spec.targetNamespace:
        out["targetNamespace"] = spec.targetNamespace
    return out



# --- the program's graph from config -------------------------------------------------------------------------

@dataclass(frozen=True)
class DeliveredComponent:
    """A component the export delivers through a Kustomization of its own (named after the component)."""

    name: str
    delivery: DeliveryConfig
    start: StartBudget
    # gpu.route: dra, from step 3: the app claims a device, so its Kustomization waits for the driver's (the one
    # dependency on the driver the graph rules admit: a claim applied before any slice exists leaves the app Pending)
    claims_device: bool = False
    # Where the stack file configures it (`plex`, `apps[0]`): a graph problem names `<key>.delivery`, not the
    # Kustomization the program derived from it.
    key: str = ""


def _ref(dep: DependsOnRef, namespace: str) -> tuple[str, str]:
    return (dep.namespace or namespace, dep.name)


def _as_dep(key: tuple[str, str], own_namespace: str) -> DependsOnRef:
    namespace, name = key
    return DependsOnRef(name=name, namespace=None if namespace == own_namespace else namespace)


def delivery_graph(layout: Layout, flux: FluxConfig, node_count: int,
                   components: Sequence[DeliveredComponent] = (),
                   driver: StartBudget | None = None, plugin: bool = True,
                   adopted_driver: tuple[str, str] | None = None) -> list[KustomizationDecl]:
    """Every Kustomization of the graph: the tiers from config, the plugin's own (until the DRA route removes it),
    the DRA driver's own (`driver`, its worst-case start, with gpu.route: dra), one per delivered component. With
    `adopted_driver` (gpu.dra.deliveredBy: repository) the repository's Kustomization installs the driver: the export
    declares none, and a component that claims a device depends on that one instead."""
    tier_ns = {t.name: t.namespace or flux.namespace for t in flux.tiers}
    decls = [*_tier_decls(layout, flux, tier_ns, components)]
    if plugin:
        decls.append(_plugin_decl(layout, flux, tier_ns, node_count))
    if driver is not None:
        decls.append(_driver_decl(layout, flux, tier_ns, driver))
    return decls + _component_decls(layout, flux, tier_ns, decls, components,
                                    adopted_driver or (flux.namespace, DRIVER_KUSTOMIZATION))


def _common(flux: FluxConfig, namespace: str) -> dict[str, Any]:
    """The source and the substitution every Kustomization of the graph shares, from where it lives."""
    same = namespace == flux.namespace
    # cluster-vars lives in flux.namespace; substituteFrom reads the Kustomization's own namespace only.
    return {"sourceRef": flux.gitRepository, "sourceNamespace": None if same else flux.namespace,
            "substituteFrom": (CLUSTER_VARS,) if same else ()}


def _tier_decls(layout: Layout, flux: FluxConfig, tier_ns: Mapping[str, str],
                components: Sequence[DeliveredComponent]) -> list[KustomizationDecl]:
    """The tiers from config, each also waiting for the components that joined a tier it depends on."""
    joined: dict[tuple[str, str], list[tuple[str, str]]] = {}  # tier -> components that joined it
    for c in components:
        if c.delivery.tier is not None:
            joined.setdefault((tier_ns[c.delivery.tier], c.delivery.tier), []).append((flux.namespace, c.name))
    decls: list[KustomizationDecl] = []
    for t in flux.tiers:
        ns = tier_ns[t.name]
        keys = [_ref(d, ns) for d in t.dependsOn]
        # A component that joined a tier this one depends on: this tier waits for the component too.
        joins = [c for k in keys for c in joined.get(k, []) if c not in keys]
        spec = KustomizationSpec(
            path=t.path or flux_path(f"{layout.entry_dir}/{t.name}"),  # a repository tier's path is not used
            interval=t.interval, timeout=t.timeout, retryInterval=t.retryInterval,
            dependsOn=(*t.dependsOn, *(_as_dep(k, ns) for k in joins)), wait=t.wait, prune=t.prune,
            decryption=t.decryption, healthChecks=tuple(t.healthChecks), targetNamespace=t.targetNamespace,
            **_common(flux, ns))
        decls.append(KustomizationDecl(name=t.name, namespace=ns, spec=spec, owned=False,
                                       declared=t.declaredBy == "export"))
    return decls


def _plugin_decl(layout: Layout, flux: FluxConfig, tier_ns: Mapping[str, str], node_count: int) -> KustomizationDecl:
    """The plugin's own Kustomization, after the CNI tier only; nothing depends on it."""
    ns = flux.namespace
    return KustomizationDecl(
        name=PLUGIN_KUSTOMIZATION, namespace=ns, owned=True,
        spec=KustomizationSpec(
            path=flux_path(layout.component_dir(PLUGIN_KUSTOMIZATION)),
            # The CNI only: pods need a network, nothing else. Depending on `platform` would tie the plugin to
            # every platform component's health, the coupling this split exists to avoid.
            dependsOn=(_as_dep((tier_ns[flux.cniTier], flux.cniTier), ns),),
            wait=True,
            prune=True,
            # The plugin rarely changes; an hourly drift check is plenty, retries come sooner.
            interval="1h",
            retryInterval="2m",
            timeout=plugin_rollout_timeout(node_count),
            **_common(flux, ns),
        ),
    )


def _driver_decl(layout: Layout, flux: FluxConfig, tier_ns: Mapping[str, str],
                 start: StartBudget) -> KustomizationDecl:
    """The DRA driver's own Kustomization: as the plugin's (after the CNI only, waits, hourly), its timeout sized
    from its DaemonSet's startup probe, paid once per node."""
    ns = flux.namespace
    return KustomizationDecl(
        name=DRIVER_KUSTOMIZATION, namespace=ns, owned=True,
        spec=KustomizationSpec(
            path=flux_path(layout.component_dir(DRIVER_KUSTOMIZATION)),
            dependsOn=(_as_dep((tier_ns[flux.cniTier], flux.cniTier), ns),),
            wait=True, prune=True, interval="1h", retryInterval="2m", timeout=minutes_above(start.seconds),
            **_common(flux, ns),
        ),
    )


def _component_decls(layout: Layout, flux: FluxConfig, tier_ns: Mapping[str, str],
                     decls: Sequence[KustomizationDecl], components: Sequence[DeliveredComponent],
                     driver: tuple[str, str]) -> list[KustomizationDecl]:
    """One per delivered component: after what its tier waits for (`decls`: the tiers' as written out), or after
    its own dependsOn; one that claims a device after the DRA driver's Kustomization too (`driver`)."""
    ns = flux.namespace
    by_name = {t.name: t for t in flux.tiers}
    tier_decls = {d.name: d for d in decls if d.name in by_name}
    own: list[KustomizationDecl] = []
    for c in components:
        if c.delivery.tier is not None:
            tier: TierConfig = by_name[c.delivery.tier]
            # The tier's dependsOn as written out, components that joined the tiers it waits for included.
            deps = [_ref(d, tier_ns[tier.name]) for d in tier_decls[tier.name].spec.dependsOn]
            interval, retry = tier.interval, tier.retryInterval
        else:
            deps = [_ref(d, ns) for d in c.delivery.dependsOn or []]
            interval, retry = "10m", None
        if c.claims_device and driver not in deps:
            deps.append(driver)
        own.append(KustomizationDecl(
            name=c.name, namespace=ns, owned=True,
            spec=KustomizationSpec(
                path=flux_path(layout.component_dir(c.name)),
                dependsOn=tuple(_as_dep(k, ns) for k in deps),
                # It waits: whatever comes after its tier starts only once the component is Ready. Its timeout is
                # sized from its own workloads, not borrowed from the tier (check_wait_timeout holds it above).
                wait=True, prune=True, interval=interval, retryInterval=retry,
                timeout=minutes_above(c.start.seconds),
                **_common(flux, ns),
            ),
        ))
    return own


def plugin_rollout_timeout(node_count: int) -> str:
    """The plugin has no probes: its worst case is one image pull per node, rolled node by node."""
    return minutes_above(node_count * IMAGE_PULL_MARGIN_SECONDS)


def graph_nodes(decls: Sequence[KustomizationDecl],
                where: Mapping[tuple[str, str], str] | None = None) -> list[GraphNode]:
    return [GraphNode(key=(d.namespace, d.name), depends=tuple(_ref(x, d.namespace) for x in d.spec.dependsOn),
                      wait=d.spec.wait, where=(where or {}).get((d.namespace, d.name), "")) for d in decls]


def check_program_graph(decls: Sequence[KustomizationDecl], flux: FluxConfig,
                        components: Sequence[DeliveredComponent] = (), source: str = "",
                        adopted_driver: tuple[str, str] | None = None) -> None:
    """The graph rules on what config declares, before any resource exists. Raises GraphError. With `source` (the
    stack file), a problem of a tier or a component is named at its stack key, as a config refusal is. A dependsOn
    on a Kustomization the stack does not declare may be one of the repository's (a tier is only for what the
    export writes into): the program cannot see the repository, the export's walk judges it."""
    tier_ns = {t.name: t.namespace or flux.namespace for t in flux.tiers}
    driver = (flux.namespace, DRIVER_KUSTOMIZATION) if any(d.name == DRIVER_KUSTOMIZATION for d in decls) else None
    plugin = (flux.namespace, PLUGIN_KUSTOMIZATION) if any(d.name == PLUGIN_KUSTOMIZATION for d in decls) else None
    keys = _stack_keys(flux, components) if source else {}
    nodes = graph_nodes(decls, keys)
    problems = check_graph(nodes, roots=[(flux.namespace, flux.bootstrapKustomization)],
                           plugin=plugin, cni=(tier_ns[flux.cniTier], flux.cniTier),
                           default_namespace=flux.namespace, driver=driver,
                           driver_dependents=[(flux.namespace, c.name) for c in components if c.claims_device],
                           repository_unseen=True, adopted_driver=adopted_driver)
    by_name = {d.name: d for d in decls}
    for c in components:
        d = by_name.get(c.name)
        if d is not None:
            line = check_wait_timeout(c.name, d.spec.timeout, d.spec.interval, [(c.name, c.start)])
            problems += [line] if line else []
    if problems and source:
        written = {((tier_ns[t.name], t.name), _ref(d, flux.namespace)) for t in flux.tiers for d in t.dependsOn}
        written |= {((flux.namespace, c.name), _ref(d, flux.namespace)) for c in components
                    for d in c.delivery.dependsOn or []}
        problems = _at_stack_keys(problems, nodes, keys, written, source, flux.namespace)
    if problems:
        raise GraphError(problems)


def _stack_keys(flux: FluxConfig, components: Sequence[DeliveredComponent]) -> dict[tuple[str, str], str]:
    """Each Kustomization the stack file configures -> its key there, in the stack's order (tiers first)."""
    keys = {(t.namespace or flux.namespace, t.name): f"flux.tiers[{i}]" for i, t in enumerate(flux.tiers)}
    keys.update({(flux.namespace, c.name): f"{c.key}.delivery" for c in components if c.key})
    return keys


# `flux: <stack key>: <name>.spec.<field>: <value>: <problem>` as check_graph words a node's problem
_NODE_LINE = re.compile(r"flux: (?P<key>[^ :]+): [^ :]+\.spec\.(?P<field>dependsOn|wait): (?P<value>'[^']*'|\S+): "
                        r"(?P<rest>.*)")
_CYCLE_LINE = re.compile(r"flux: dependsOn cycle: (?P<cycle>.*?); (?P<rest>.*)")


def _at_stack_keys(problems: list[str], nodes: Sequence[GraphNode], keys: Mapping[tuple[str, str], str],
                   written: set[tuple[tuple[str, str], tuple[str, str]]], source: str, namespace: str) -> list[str]:
    """The graph's lines as config refusals: the stack file and the key to change first. A cycle is named at the
    one dependency that points forward in the stack's order of tiers (the one most likely added by mistake), and a
    wait problem that dependency causes folds into it: one cause, one line. `written`: the dependencies as the
    stack file writes them."""
    by_name = {display(n.key, namespace): n for n in nodes}
    order = {k: i for i, k in enumerate(keys)}
    refused = {(m["key"], m["value"].strip("'")) for m in map(_NODE_LINE.fullmatch, problems) if m}
    lines: list[str] = []
    cut: GraphNode | None = None  # the Kustomization the cycle's named dependency points at
    for line in problems:
        cycle = _CYCLE_LINE.fullmatch(line)
        if cycle is None:
            lines.append(line)
            continue
        names = cycle["cycle"].split(" -> ")
        edges = [(by_name[a], by_name[b]) for a, b in zip(names, names[1:], strict=False)
                 if a in by_name and b in by_name]
        # a dependency the stack file wrote (a tier's dependsOn as exported also holds the components joining it)
        keyed = [(a, b) for a, b in edges if a.where and (a.key, b.key) in written]
        if any((a.where, display(b.key, namespace)) in refused for a, b in keyed):
            continue  # a dependency already refused closes it: removing that one breaks the cycle too
        if not keyed:
            lines.append(line)
            continue
        a, cut = max(keyed, key=lambda e: order.get(e[1].key, len(order)) - order.get(e[0].key, len(order)))
        consequence = cycle["rest"].split("; hint: ")[0]
        lines.append(f"{source}: {PROJECT}:{a.where}.dependsOn: \"{display(cut.key, namespace)}\": closes the "
                     f"cycle {cycle['cycle']}; {consequence}; hint: remove it, or another dependency of the cycle")
    out = []
    for line in lines:
        node = _NODE_LINE.fullmatch(line)
        if node is None:
            out.append(line)
        elif not (cut is not None and node["key"] == cut.where and node["field"] == "wait"):
            value = f'"{node["value"][1:-1]}"' if node["value"].startswith("'") else node["value"]
            out.append(f"{source}: {PROJECT}:{node['key']}.{node['field']}: {value}: {node['rest']}")
    return out


def _dependency_order(decls: Sequence[KustomizationDecl]) -> list[KustomizationDecl]:
    """Dependencies first; check_graph has ruled out cycles."""
    by_key = {(d.namespace, d.name): d for d in decls}
    order = TopologicalSorter({k: [_ref(x, k[0]) for x in d.spec.dependsOn if _ref(x, k[0]) in by_key]
                               for k, d in sorted(by_key.items())}).static_order()
    return [by_key[k] for k in order]


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
    """The export's Flux Kustomizations (tiers declared by the export, the plugin's, one per delivered component)
    and the `cluster-vars` ConfigMap their postBuild substitutes from."""

    TYPE = "gpu-platform:components:FluxDeliveryGraph"

    kustomizations: dict[str, FluxKustomization]

    def __init__(self, name: str, layout: Layout, flux: FluxConfig, node_count: int,
                 components: Sequence[DeliveredComponent], owned_sources: dict[str, pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None, driver: StartBudget | None = None,
                 plugin: bool = True, source: str = "", adopted_driver: tuple[str, str] | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        decls = delivery_graph(layout, flux, node_count, components, driver, plugin, adopted_driver)
        check_program_graph(decls, flux, components, source, adopted_driver)
        child = pulumi.ResourceOptions(parent=self)
        # A shared base substitutes from the repository's own cluster-vars (each overlay patches it): a second one
        # would collide with it, so the export only sets the keys it owns there (gitops/checks/shared_base.py).
        self.cluster_vars = k8s.core.v1.ConfigMap(f"{name}-{CLUSTER_VARS}", cluster_vars_args(flux), opts=child) \
            if layout.writes_cluster_vars else None
        self.kustomizations = {}
        for decl in _dependency_order(decls):
            if not decl.declared:
                continue  # the repository declares it; the export's walk checks it exists
            depends: list[pulumi.Resource] = [self.cluster_vars] if self.cluster_vars else []
            # Flux orders tiers by spec.dependsOn itself; these edges only order Pulumi's own creates when a
            # CLI user applies straight to a cluster, and make the graph visible in `pulumi preview`.
            depends += [self.kustomizations[d.name] for d in decl.spec.dependsOn if d.name in self.kustomizations]
            if decl.name in owned_sources:
                # Pulumi-only edge: in the GitOps tree the Kustomization is what applies these objects.
                depends.append(owned_sources[decl.name])
            self.kustomizations[decl.name] = FluxKustomization(
                f"{name}-{decl.name}", decl.name, decl.namespace, decl.spec,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=depends)),
            )
        self.summary = graph_summary(decls, flux, layout, components, adopted_driver)
        self.register_outputs({
            "kustomizations": sorted(self.kustomizations),
            "owned": sorted(d.name for d in decls if d.owned),
        })


def graph_summary(decls: Sequence[KustomizationDecl], flux: FluxConfig, layout: Layout,
                  components: Sequence[DeliveredComponent],
                  adopted_driver: tuple[str, str] | None = None) -> FluxGraph:
    """The graph as config intends it, for the export's walk of the repository (gitops/checks/delivery.py)."""
    tier_ns = {t.name: t.namespace or flux.namespace for t in flux.tiers}
    driven = any(d.name == DRIVER_KUSTOMIZATION for d in decls)
    plugged = any(d.name == PLUGIN_KUSTOMIZATION for d in decls)
    return FluxGraph(
        namespace=flux.namespace,
        bootstrap=BootstrapRef(name=flux.bootstrapKustomization, namespace=flux.namespace,
                               git_repository=flux.gitRepository, path=layout.bootstrap_path),
        plugin=(flux.namespace, PLUGIN_KUSTOMIZATION) if plugged else None,
        cni=(tier_ns[flux.cniTier], flux.cniTier),
        kustomizations=tuple(GraphKustomization(name=d.name, namespace=d.namespace, declared=d.declared,
                                                owned=d.owned, path=d.spec.path if d.declared else None)
                             for d in decls),
        components={c.name: DeliveredOutput(kustomization=(flux.namespace, c.name),
                                            folder=layout.component_dir(c.name),
                                            tier=(tier_ns[c.delivery.tier], c.delivery.tier) if c.delivery.tier
                                            else None,
                                            start_seconds=c.start.seconds, start_explanation=c.start.explanation)
                    for c in components},
        plugin_folder=layout.component_dir(PLUGIN_KUSTOMIZATION) if plugged else "",
        driver=(flux.namespace, DRIVER_KUSTOMIZATION) if driven else None,
        driver_folder=layout.component_dir(DRIVER_KUSTOMIZATION) if driven else "",
        driver_dependents=tuple((flux.namespace, c.name) for c in components if c.claims_device),
        adopted_driver=adopted_driver,
    )


__all__ = [
    "DeliveredComponent", "FluxDeliveryGraph", "FluxKustomization", "GraphError", "KustomizationDecl",
    "KustomizationSpec", "check_program_graph", "delivery_graph", "kustomization_spec_dict", "plugin_rollout_timeout",
]
