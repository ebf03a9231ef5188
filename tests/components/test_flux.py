"""The delivery graph a stack's config makes, and the rules it must pass, on a small made-up stack: tiers in two
namespaces, a tier the repository declares, a component that joins a tier and one with dependsOn of its own."""

from __future__ import annotations

import pytest

from components.flux import (
    DeliveredComponent,
    GraphError,
    check_program_graph,
    cluster_vars_args,
    delivery_graph,
    graph_nodes,
    graph_summary,
    kustomization_spec_dict,
)
from model.config import DeliveryConfig, DependsOnRef, FluxConfig
from model.flux_graph import GraphNode, StartBudget, check_graph, check_wait_timeout, display
from model.layout import SplitLayout
from model.outputs import FluxGraph

FLUX = FluxConfig.model_validate({
    "tiers": [
        {"name": "cilium", "path": "./k/cilium", "dependsOn": ["flux-system"]},
        {"name": "apps", "namespace": "apps", "path": "./k/apps", "interval": "20m", "retryInterval": "1m",
         "dependsOn": [{"name": "cilium", "namespace": "flux-system"}]},
        {"name": "late", "path": "./k/late", "dependsOn": [{"name": "apps", "namespace": "apps"}], "wait": False},
        {"name": "repo", "declaredBy": "repository", "dependsOn": ["cilium"]},
    ],
    "clusterVars": {"ZONE": "b", "CLUSTER_NAME": "lab"},
})
LAYOUT = SplitLayout("lab", "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
PLEX = DeliveredComponent("plex", DeliveryConfig(tier="apps"), StartBudget(480, "slow"))
WEB = DeliveredComponent("web", DeliveryConfig.model_validate({"dependsOn": ["cilium"]}), StartBudget(100, "quick"))


def specs(node_count: int = 2, components=(PLEX, WEB)) -> dict[str, dict]:
    return {d.name: kustomization_spec_dict(d.spec) for d in delivery_graph(LAYOUT, FLUX, node_count, components)}


def test_a_tier_in_flux_s_namespace_substitutes_cluster_vars_and_reads_the_source_without_a_namespace():
    cilium = specs()["cilium"]
    assert cilium["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}
    assert cilium["postBuild"] == {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]}


def test_a_tier_in_another_namespace_names_the_source_s_namespace_and_cannot_substitute():
    apps = specs()["apps"]
    assert apps["sourceRef"] == {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}
    assert "postBuild" not in apps
    assert (apps["interval"], apps["timeout"], apps["retryInterval"]) == ("20m", "5m", "1m")
    assert apps["dependsOn"] == [{"name": "cilium", "namespace": "flux-system"}]


def test_a_tier_that_depends_on_a_tier_a_component_joined_waits_for_the_component_too():
    assert specs()["late"]["dependsOn"] == [{"name": "apps", "namespace": "apps"}, {"name": "plex"}]
    assert specs(components=(WEB,))["late"]["dependsOn"] == [{"name": "apps", "namespace": "apps"}]


def test_the_plugin_depends_on_the_cni_only_checks_hourly_retries_in_two_minutes_and_prunes():
    assert specs(3)["intel-gpu-plugin"] == {
        "interval": "1h", "retryInterval": "2m", "timeout": "10m", "wait": True, "prune": True,
        "path": "./components/lab/intel-gpu-plugin", "dependsOn": [{"name": "cilium"}],
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]},
    }


def test_a_component_that_joins_a_tier_takes_its_dependencies_interval_and_retry_with_its_own_timeout():
    assert specs()["plex"] == {
        "interval": "20m", "retryInterval": "1m", "timeout": "9m", "wait": True, "prune": True,
        "path": "./components/lab/plex", "dependsOn": [{"name": "cilium"}],
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]},
    }


def test_a_component_with_its_own_dependencies_reconciles_every_ten_minutes_without_a_retry_interval():
    assert specs()["web"] == {
        "interval": "10m", "timeout": "2m", "wait": True, "prune": True,
        "path": "./components/lab/web", "dependsOn": [{"name": "cilium"}],
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]},
    }


def test_which_kustomizations_the_export_declares_and_which_folders_it_owns():
    decls = delivery_graph(LAYOUT, FLUX, 2, (PLEX, WEB))
    assert [(d.name, d.namespace, d.declared, d.owned) for d in decls] == [
        ("cilium", "flux-system", True, False), ("apps", "apps", True, False), ("late", "flux-system", True, False),
        ("repo", "flux-system", False, False), ("intel-gpu-plugin", "flux-system", True, True),
        ("plex", "flux-system", True, True), ("web", "flux-system", True, True),
    ]


def test_the_graph_summary_for_the_export_s_walk_is_the_stack_output_it_reads_back():
    decls = delivery_graph(LAYOUT, FLUX, 2, (PLEX, WEB))
    summary = graph_summary(decls, FLUX, LAYOUT, (PLEX, WEB))
    assert FluxGraph.from_output(summary.as_output()) == summary
    assert summary.exported == {k.key for k in summary.kustomizations} - {("flux-system", "repo")}
    assert summary.repository_tiers == [("flux-system", "repo")]
    assert summary.as_output() == {
        "namespace": "flux-system",
        "bootstrap": {"name": "flux-system", "namespace": "flux-system", "gitRepository": "flux-system",
                      "path": "./clusters/lab"},
        "plugin": ["flux-system", "intel-gpu-plugin"],
        "cni": ["flux-system", "cilium"],
        "kustomizations": [
            {"name": "cilium", "namespace": "flux-system", "declared": True, "owned": False, "path": "./k/cilium"},
            {"name": "apps", "namespace": "apps", "declared": True, "owned": False, "path": "./k/apps"},
            {"name": "late", "namespace": "flux-system", "declared": True, "owned": False, "path": "./k/late"},
            {"name": "repo", "namespace": "flux-system", "declared": False, "owned": False, "path": None},
            {"name": "intel-gpu-plugin", "namespace": "flux-system", "declared": True, "owned": True,
             "path": "./components/lab/intel-gpu-plugin"},
            {"name": "plex", "namespace": "flux-system", "declared": True, "owned": True,
             "path": "./components/lab/plex"},
            {"name": "web", "namespace": "flux-system", "declared": True, "owned": True,
             "path": "./components/lab/web"},
        ],
        "components": {
            "plex": {"kustomization": ["flux-system", "plex"], "folder": "components/lab/plex",
                     "tier": ["apps", "apps"], "start": {"seconds": 480, "explanation": "slow"}},
            "web": {"kustomization": ["flux-system", "web"], "folder": "components/lab/web", "tier": None,
                    "start": {"seconds": 100, "explanation": "quick"}},
        },
        "pluginFolder": "components/lab/intel-gpu-plugin",
    }


def test_cluster_vars_is_one_config_map_in_flux_s_namespace_with_its_variables_sorted():
    args = cluster_vars_args(FLUX)
    assert args.metadata.name == "cluster-vars" and args.metadata.namespace == "flux-system"  # type: ignore[union-attr]
    assert list(args.data.items()) == [("CLUSTER_NAME", "lab"), ("ZONE", "b")]  # type: ignore[union-attr]


def graph_problems(decls, flux: FluxConfig = FLUX, components=()) -> list[str]:
    """The lines check_program_graph refuses the graph with; empty when it passes."""
    try:
        check_program_graph(decls, flux, components)
    except GraphError as exc:
        return exc.lines
    return []


def test_the_made_up_stack_passes_the_graph_rules():
    decls = delivery_graph(LAYOUT, FLUX, 2, (PLEX, WEB))
    assert [d.name for d in decls] == ["cilium", "apps", "late", "repo", "intel-gpu-plugin", "plex", "web"]
    assert graph_problems(decls, FLUX, (PLEX, WEB)) == []


def test_a_component_whose_timeout_is_not_above_its_start_is_refused_with_one_line():
    decls = delivery_graph(LAYOUT, FLUX, 2, (PLEX, WEB))
    short = [d.model_copy(update={"spec": d.spec.model_copy(update={"timeout": "8m"})}) if d.name == "plex" else d
             for d in decls]
    with pytest.raises(GraphError) as info:
        check_program_graph(short, FLUX, (PLEX, WEB))
    assert info.value.lines == [
        "flux: plex.spec.timeout: 8m (480 s) is not above the worst-case start of plex: 480 s (slow); a slow start "
        "fails the Kustomization and holds back everything that depends on it; hint: set timeout: 9m or more"]


def test_a_component_missing_from_the_graph_is_not_checked_for_its_timeout():
    decls = [d for d in delivery_graph(LAYOUT, FLUX, 2, (WEB,))]
    never = StartBudget(10**6, "never")
    assert "ghost" not in {d.name for d in decls}
    assert graph_problems(decls, FLUX, (WEB, DeliveredComponent("ghost", DeliveryConfig(tier="apps"), never))) == []
    # the same start for a component the graph has is checked, and refused
    (line,) = graph_problems(decls, FLUX, (DeliveredComponent("web", WEB.delivery, never),))
    assert line == ("flux: web.spec.timeout: 2m (120 s) is not above the worst-case start of web: 1000000 s (never); "
                    "a slow start fails the Kustomization and holds back everything that depends on it; hint: set "
                    "timeout: 16667m or more")


def test_without_a_timeout_the_interval_is_the_deadline_and_the_slowest_workload_decides():
    workloads = [("Deployment z/z", StartBudget(100, "z")), ("Deployment a/a", StartBudget(700, "a"))]
    line = check_wait_timeout("wave", None, "10m", workloads)
    assert line == ("flux: wave.spec.timeout: 10m (600 s) is not above the worst-case start of Deployment a/a: "
                    "700 s (a); a slow start fails the Kustomization and holds back everything that depends on it; "
                    "hint: set timeout: 12m or more")
    assert check_wait_timeout("wave", None, "12m", workloads) is None
    assert check_wait_timeout("wave", "1m", "10m", []) is None


def test_a_kustomization_in_the_default_namespace_is_shown_by_name_and_others_with_their_namespace():
    assert display(("flux-system", "cilium")) == "cilium"
    assert display(("apps", "plex")) == "apps/plex"
    assert display(("apps", "plex"), default_namespace="apps") == "plex"


def node(name: str, *depends: str, wait: bool = True, where: str = "") -> GraphNode:
    return GraphNode(("flux-system", name), tuple(("flux-system", d) for d in depends), wait, where)


ROOT = [("flux-system", "flux-system")]
PLUGIN = ("flux-system", "intel-gpu-plugin")
CNI = ("flux-system", "cilium")


def rules(*nodes: GraphNode) -> list[str]:
    return check_graph(nodes, ROOT, plugin=PLUGIN, cni=CNI)


def test_the_program_s_own_nodes_carry_their_namespace_resolved_dependencies_and_wait():
    nodes = {n.key: n for n in graph_nodes(delivery_graph(LAYOUT, FLUX, 2, (PLEX, WEB)))}
    assert nodes[("apps", "apps")] == GraphNode(("apps", "apps"), (("flux-system", "cilium"),), True)
    assert nodes[("flux-system", "late")] == GraphNode(("flux-system", "late"),
                                                       (("apps", "apps"), ("flux-system", "plex")), False)


def test_a_graph_of_roots_tiers_and_a_plugin_on_the_cni_passes():
    assert rules(node("cilium", "flux-system"), node("intel-gpu-plugin", "cilium"), node("apps", "cilium")) == []


def test_a_kustomization_declared_twice_names_both_places():
    assert rules(node("cilium", "flux-system", where="a.yaml"), node("cilium", "flux-system", where="b.yaml")) == [
        "flux: b.yaml: Kustomization cilium is declared twice (also in a.yaml); hint: keep one"]
    assert rules(node("cilium", "flux-system"), node("cilium", "flux-system")) == [
        "flux: Kustomization cilium is declared twice (also in the program); hint: keep one"]


def test_a_missing_dependency_is_one_line_that_lists_what_exists():
    assert rules(node("cilium", "flux-system"), node("apps", "cilium", "nope", where="apps.yaml")) == [
        "flux: apps.yaml: apps.spec.dependsOn: 'nope': no such Kustomization; Flux would wait for it forever; "
        "hint: use one of cilium, flux-system"]


def test_depending_on_the_plugin_is_one_line_with_the_reason():
    assert rules(node("cilium", "flux-system"), node("intel-gpu-plugin", "cilium"),
                 node("apps", "intel-gpu-plugin")) == [
        "flux: apps.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; a failed plugin "
        "rollout would stall that tier; hint: remove the dependency"]


def test_the_plugin_depending_on_anything_but_the_cni_lists_the_extras():
    assert rules(node("cilium", "flux-system"), node("apps", "cilium"),
                 node("intel-gpu-plugin", "cilium", "apps", "flux-system")) == [
        "flux: intel-gpu-plugin.spec.dependsOn: ['apps', 'flux-system']: the plugin may depend on the CNI "
        "(cilium) only; hint: remove the others"]


def test_a_graph_without_the_plugin_or_with_a_plugin_on_nothing_passes():
    assert rules(node("cilium", "flux-system")) == []
    assert rules(node("cilium", "flux-system"), node("intel-gpu-plugin")) == []


def test_a_kustomization_others_wait_for_must_wait_itself_and_names_them():
    assert rules(node("cilium", "flux-system", wait=False), node("b", "cilium"), node("a", "cilium")) == [
        "flux: cilium.spec.wait: false: a, b dependsOn it, and without wait 'Ready' does not mean its workloads "
        "are healthy; hint: set wait: true"]
    assert rules(node("cilium", "flux-system"), node("leaf", "cilium", wait=False)) == []


def test_a_cycle_is_shown_in_depends_on_order():
    assert rules(node("a", "b"), node("b", "c"), node("c", "a")) == [
        "flux: dependsOn cycle: a -> b -> c -> a; Flux would never reconcile these; hint: remove one of these "
        "dependencies"]


def test_a_dependency_on_an_external_root_is_no_edge_of_the_cycle_check():
    assert rules(node("a", "flux-system"), node("b", "a")) == []


def test_names_outside_the_default_namespace_keep_their_namespace_in_messages():
    nodes = [GraphNode(("apps", "web"), (("apps", "gone"),), True)]
    assert check_graph(nodes, ROOT, plugin=PLUGIN, cni=CNI) == [
        "flux: apps/web.spec.dependsOn: 'apps/gone': no such Kustomization; Flux would wait for it forever; "
        "hint: use one of flux-system"]
    assert check_graph(nodes, ROOT, plugin=PLUGIN, cni=CNI, default_namespace="apps") == [
        "flux: web.spec.dependsOn: 'gone': no such Kustomization; Flux would wait for it forever; "
        "hint: use one of flux-system/flux-system"]


def test_a_refused_graph_reads_as_one_problem_per_line():
    decls = delivery_graph(LAYOUT, FLUX, 2, (PLEX, WEB))
    broken = [d.model_copy(update={"spec": d.spec.model_copy(update={"timeout": "1m"})})
              if d.name in ("plex", "web") else d for d in decls]
    with pytest.raises(GraphError) as info:
        check_program_graph(broken, FLUX, (PLEX, WEB))
    assert str(info.value).splitlines() == info.value.lines == [
        "flux: plex.spec.timeout: 1m (60 s) is not above the worst-case start of plex: 480 s (slow); a slow start "
        "fails the Kustomization and holds back everything that depends on it; hint: set timeout: 9m or more",
        "flux: web.spec.timeout: 1m (60 s) is not above the worst-case start of web: 100 s (quick); a slow start "
        "fails the Kustomization and holds back everything that depends on it; hint: set timeout: 2m or more"]


FLUX_ELSEWHERE = FluxConfig.model_validate({
    "namespace": "flux",
    "tiers": [
        {"name": "cilium", "path": "./k/cilium", "dependsOn": [{"name": "flux-system", "namespace": "flux"}]},
        {"name": "base", "namespace": "apps", "path": "./k/base",
         "dependsOn": [{"name": "cilium", "namespace": "flux"}]},
        {"name": "apps", "namespace": "apps", "path": "./k/apps", "dependsOn": ["base"]},
        {"name": "after", "namespace": "apps", "path": "./k/after",
         "dependsOn": [{"name": "cilium", "namespace": "flux"}]},
    ],
    "bootstrapKustomization": "flux-system",
    "clusterVars": {"CLUSTER_NAME": "lab"},
})
JOINS_CILIUM = DeliveredComponent("web", DeliveryConfig(tier="cilium"), StartBudget(100, "quick"))
JOINS_APPS = DeliveredComponent("plex", DeliveryConfig(tier="apps"), StartBudget(480, "slow"))


def test_with_flux_in_its_own_namespace_the_plugin_and_components_live_there():
    decls = delivery_graph(LAYOUT, FLUX_ELSEWHERE, 2, (JOINS_APPS,))
    assert {d.name: d.namespace for d in decls} == {"cilium": "flux", "base": "apps", "apps": "apps", "after": "apps",
                                                    "intel-gpu-plugin": "flux", "plex": "flux"}
    check_program_graph(decls, FLUX_ELSEWHERE, (JOINS_APPS,))


def test_a_component_joining_a_tier_in_another_namespace_depends_on_that_tier_s_dependencies_by_namespace():
    plex = {d.name: d for d in delivery_graph(LAYOUT, FLUX_ELSEWHERE, 2, (JOINS_APPS,))}["plex"]
    assert kustomization_spec_dict(plex.spec)["dependsOn"] == [{"name": "base", "namespace": "apps"}]


def test_a_tier_in_another_namespace_waits_for_a_component_of_flux_s_namespace_by_namespace():
    after = {d.name: d for d in delivery_graph(LAYOUT, FLUX_ELSEWHERE, 2, (JOINS_CILIUM,))}["after"]
    assert kustomization_spec_dict(after.spec)["dependsOn"] == [{"name": "cilium", "namespace": "flux"},
                                                                {"name": "web", "namespace": "flux"}]


def test_problems_name_kustomizations_of_flux_s_own_namespace_without_it():
    decls = delivery_graph(LAYOUT, FLUX_ELSEWHERE, 2, ())
    plugin = DependsOnRef(name="intel-gpu-plugin")
    broken = [d.model_copy(update={"spec": d.spec.model_copy(update={"dependsOn": (*d.spec.dependsOn, plugin)})})
              if d.name == "cilium" else d for d in decls]
    with pytest.raises(GraphError) as info:
        check_program_graph(broken, FLUX_ELSEWHERE)
    assert info.value.lines == [
        "flux: cilium.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; a failed plugin "
        "rollout would stall that tier; hint: remove the dependency",
        "flux: dependsOn cycle: cilium -> intel-gpu-plugin -> cilium; Flux would never reconcile these; hint: remove "
        "one of these dependencies"]


def test_a_component_without_a_timeout_is_held_to_its_interval():
    decls = delivery_graph(LAYOUT, FLUX, 2, (PLEX,))

    def plex_with(**spec) -> list:
        return [d.model_copy(update={"spec": d.spec.model_copy(update=spec)}) if d.name == "plex" else d
                for d in decls]

    untimed = plex_with(timeout=None)
    plex = next(d for d in untimed if d.name == "plex")
    assert (plex.spec.timeout, plex.spec.interval) == (None, "20m")
    assert graph_problems(untimed, FLUX, (PLEX,)) == []  # interval 20m (1200 s) is above 480 s
    assert graph_problems(plex_with(timeout=None, interval="5m"), FLUX, (PLEX,)) == [
        "flux: plex.spec.timeout: 5m (300 s) is not above the worst-case start of plex: 480 s (slow); a slow start "
        "fails the Kustomization and holds back everything that depends on it; hint: set timeout: 9m or more"]


def test_a_repository_kustomization_without_wait_is_a_warning_naming_every_dependent():
    fs = "flux-system"
    apps = GraphNode(key=(fs, "apps"), depends=(), wait=False, where="kubernetes/apps.yaml", declared_by="repository")
    nodes = [apps, GraphNode(key=(fs, "plex"), depends=((fs, "apps"),), wait=True),
             GraphNode(key=(fs, "web"), depends=((fs, "apps"),), wait=True)]
    warnings: list[str] = []
    assert check_graph(nodes, [(fs, "apps")], plugin=(fs, "plex"), cni=(fs, "apps"), warnings=warnings) == []
    assert warnings == ["kubernetes/apps.yaml: apps.spec.wait: false (the repository's choice): plex, web dependsOn "
                        "it, so they start once it is applied, not once its workloads are healthy; wait: true there "
                        "would hold them until its workloads are Ready"]


# --- gpu.route: dra: the driver's own Kustomization, the plugin's gone, an app that claims a device waits for it ---

FLUX_CNI_ELSEWHERE = FluxConfig.model_validate({
    "tiers": [
        {"name": "cilium", "namespace": "network", "path": "./k/cilium", "dependsOn": [
            {"name": "flux-system", "namespace": "flux-system"}]},
        {"name": "apps", "path": "./k/apps", "dependsOn": [{"name": "cilium", "namespace": "network"}]},
    ],
    "clusterVars": {"CLUSTER_NAME": "lab"},
})
DRIVER_START = StartBudget(330, "3 nodes × (startup probe)")
CLAIMS = DeliveredComponent("plex", DeliveryConfig(tier="apps"), StartBudget(480, "slow"), claims_device=True)
# a claiming app that already names the driver among its own dependencies
CLAIMS_OWN = DeliveredComponent("own", DeliveryConfig.model_validate({"dependsOn": ["intel-gpu-resource-driver"]}),
                                StartBudget(100, "quick"), claims_device=True)


def dra_decls(flux: FluxConfig = FLUX, components=(CLAIMS, WEB)) -> dict:
    return {d.name: d for d in delivery_graph(LAYOUT, flux, 3, components, driver=DRIVER_START, plugin=False)}


def test_on_the_dra_route_the_driver_has_a_kustomization_like_the_plugin_s_its_timeout_from_its_start():
    decls = dra_decls()
    assert list(decls) == ["cilium", "apps", "late", "repo", "intel-gpu-resource-driver", "plex", "web"]
    driver = decls["intel-gpu-resource-driver"]
    assert (driver.namespace, driver.declared, driver.owned) == ("flux-system", True, True)
    assert kustomization_spec_dict(driver.spec) == {
        "interval": "1h", "retryInterval": "2m", "timeout": "6m", "wait": True, "prune": True,
        "path": "./components/lab/intel-gpu-resource-driver", "dependsOn": [{"name": "cilium"}],
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]},
    }


def test_the_driver_follows_the_cni_in_the_cni_s_own_namespace():
    driver = dra_decls(FLUX_CNI_ELSEWHERE, (CLAIMS,))["intel-gpu-resource-driver"]
    assert kustomization_spec_dict(driver.spec)["dependsOn"] == [{"name": "cilium", "namespace": "network"}]
    assert graph_problems(list(dra_decls(FLUX_CNI_ELSEWHERE, (CLAIMS,)).values()), FLUX_CNI_ELSEWHERE, (CLAIMS,)) == []


def test_an_app_that_claims_a_device_waits_for_the_driver_once_and_one_that_does_not_never():
    decls = dra_decls(components=(CLAIMS, WEB, CLAIMS_OWN))
    assert kustomization_spec_dict(decls["plex"].spec)["dependsOn"] == [
        {"name": "cilium"}, {"name": "intel-gpu-resource-driver"}]
    assert kustomization_spec_dict(decls["web"].spec)["dependsOn"] == [{"name": "cilium"}]
    assert kustomization_spec_dict(decls["own"].spec)["dependsOn"] == [{"name": "intel-gpu-resource-driver"}]


def test_the_driver_and_the_plugin_side_by_side_on_the_first_step():
    decls = delivery_graph(LAYOUT, FLUX, 3, (WEB,), driver=DRIVER_START)
    assert [d.name for d in decls][-3:] == ["intel-gpu-plugin", "intel-gpu-resource-driver", "web"]
    assert graph_problems(decls, FLUX, (WEB,)) == []


def test_the_program_s_graph_refuses_a_dependency_on_the_driver_from_an_app_that_claims_nothing():
    decls = dra_decls()
    assert graph_problems(list(decls.values()), FLUX, (CLAIMS, WEB)) == []
    driver = DependsOnRef(name="intel-gpu-resource-driver")
    broken = [d.model_copy(update={"spec": d.spec.model_copy(update={"dependsOn": (*d.spec.dependsOn, driver)})})
              if d.name == "web" else d for d in decls.values()]
    assert graph_problems(broken, FLUX, (CLAIMS, WEB)) == [
        "flux: web.spec.dependsOn: 'intel-gpu-resource-driver': nothing may depend on the DRA driver but the "
        "Kustomization of an app that claims a device; a failed driver rollout would stall that tier; hint: remove "
        "the dependency"]
    claiming_web = DeliveredComponent("web", WEB.delivery, WEB.start, claims_device=True)
    assert graph_problems(broken, FLUX, (CLAIMS, claiming_web)) == []


def test_the_program_s_graph_holds_the_driver_to_the_cni_and_knows_the_plugin_is_gone():
    decls = dra_decls()
    plugin = DependsOnRef(name="intel-gpu-plugin")
    on_plugin = [d.model_copy(update={"spec": d.spec.model_copy(update={"dependsOn": (*d.spec.dependsOn, plugin)})})
                 if d.name == "web" else d for d in decls.values()]
    assert graph_problems(on_plugin, FLUX, (CLAIMS, WEB)) == [
        "flux: web.spec.dependsOn: 'intel-gpu-plugin': no such Kustomization; Flux would wait for it forever; hint: "
        "use one of apps/apps, cilium, flux-system, late, plex, repo"]
    apps = DependsOnRef(name="apps", namespace="apps")
    driver_on_apps = [d.model_copy(update={"spec": d.spec.model_copy(update={"dependsOn": (*d.spec.dependsOn, apps)})})
                      if d.name == "intel-gpu-resource-driver" else d for d in decls.values()]
    assert graph_problems(driver_on_apps, FLUX, (CLAIMS, WEB)) == [
        "flux: intel-gpu-resource-driver.spec.dependsOn: ['apps/apps']: the DRA driver may depend on the CNI (cilium) "
        "only; hint: remove the others"]


def test_the_graph_summary_on_the_dra_route_names_the_driver_its_folder_and_the_apps_that_claim_a_device():
    decls = delivery_graph(LAYOUT, FLUX, 3, (CLAIMS, WEB), driver=DRIVER_START, plugin=False)
    summary = graph_summary(decls, FLUX, LAYOUT, (CLAIMS, WEB))
    assert FluxGraph.from_output(summary.as_output()) == summary
    assert (summary.plugin, summary.plugin_folder) == (None, "")
    assert (summary.driver, summary.driver_folder) == (("flux-system", "intel-gpu-resource-driver"),
                                                       "components/lab/intel-gpu-resource-driver")
    assert summary.driver_dependents == (("flux-system", "plex"),)
    assert summary.cni == ("flux-system", "cilium")
    side_by_side = graph_summary(delivery_graph(LAYOUT, FLUX, 3, (WEB,), driver=DRIVER_START), FLUX, LAYOUT, (WEB,))
    assert (side_by_side.plugin, side_by_side.plugin_folder) == (("flux-system", "intel-gpu-plugin"),
                                                                 "components/lab/intel-gpu-plugin")
    assert side_by_side.driver == ("flux-system", "intel-gpu-resource-driver")
    assert side_by_side.driver_dependents == ()


def test_the_graph_summary_names_the_cni_and_a_component_s_tier_in_their_own_namespaces():
    decls = delivery_graph(LAYOUT, FLUX_CNI_ELSEWHERE, 3, (CLAIMS,))
    summary = graph_summary(decls, FLUX_CNI_ELSEWHERE, LAYOUT, (CLAIMS,))
    assert summary.cni == ("network", "cilium")
    assert summary.components["plex"].tier == ("flux-system", "apps")
    assert (summary.driver, summary.driver_folder, summary.driver_dependents) == (None, "", (("flux-system", "plex"),))


def test_the_driver_s_kustomization_lives_in_flux_s_own_namespace():
    decls = {d.name: d for d in delivery_graph(LAYOUT, FLUX_ELSEWHERE, 3, (JOINS_APPS,), driver=DRIVER_START,
                                               plugin=False)}
    assert decls["intel-gpu-resource-driver"].namespace == "flux"
    assert graph_problems(list(decls.values()), FLUX_ELSEWHERE, (JOINS_APPS,)) == []


def test_without_the_driver_s_kustomization_a_dependency_on_its_name_is_only_a_missing_one():
    decls = delivery_graph(LAYOUT, FLUX, 2, (WEB,))
    driver = DependsOnRef(name="intel-gpu-resource-driver")
    broken = [d.model_copy(update={"spec": d.spec.model_copy(update={"dependsOn": (*d.spec.dependsOn, driver)})})
              if d.name == "web" else d for d in decls]
    (line,) = graph_problems(broken, FLUX, (WEB,))
    assert line == ("flux: web.spec.dependsOn: 'intel-gpu-resource-driver': no such Kustomization; Flux would wait "
                    "for it forever; hint: use one of apps/apps, cilium, flux-system, late, repo")
