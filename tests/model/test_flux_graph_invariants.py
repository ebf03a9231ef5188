"""Graph invariants are enforced: each with one failing and one passing case, on the graph config declares."""

from __future__ import annotations

import pytest

from builders import project_keys
from components.flux import DeliveredComponent, GraphError, check_program_graph, delivery_graph, graph_nodes
from components.plex import start_budget
from conftest import EXAMPLE
from model.config import DeliveryConfig, FluxConfig
from model.flux_graph import DRIVER_KUSTOMIZATION, GraphNode, check_graph, check_wait_timeout, worst_case_start
from model.layout import SplitLayout

FLUX = FluxConfig.model_validate(project_keys(EXAMPLE / "Pulumi.prod.yaml")["flux"])
LAYOUT = SplitLayout("prod", "clusters/prod/gpu-platform", "components/prod", "./clusters/prod")
ROOTS = [("flux-system", "flux-system")]
PLUGIN = ("flux-system", "intel-gpu-plugin")
CNI = ("flux-system", "cilium")
PLEX = DeliveredComponent("plex", DeliveryConfig(tier="apps-wave-0"), start_budget())


def graph() -> list[GraphNode]:
    return graph_nodes(delivery_graph(LAYOUT, FLUX, 3, [PLEX]))


def change(nodes, name, **fields) -> list[GraphNode]:
    out = []
    for n in nodes:
        if n.key[1] == name:
            if "depends" in fields:
                fields = {**fields, "depends": tuple(("flux-system", d) for d in fields["depends"])}
            n = GraphNode(**{**n.__dict__, **fields})
        out.append(n)
    return out


def check(nodes) -> list[str]:
    return check_graph(nodes, ROOTS, plugin=PLUGIN, cni=CNI)


def test_the_shipped_graph_passes():
    assert check(graph()) == []


def test_a_dependency_cycle_is_refused():
    # the graph's own lines, before the program names them at a stack key (there the wait line folds into the cycle)
    assert check(change(graph(), "cilium", depends=("apps-wave-1",))) == [
        "flux: apps-wave-1.spec.wait: false: cilium dependsOn it, and without wait 'Ready' does not mean its "
        "workloads are healthy; hint: set wait: true",
        "flux: dependsOn cycle: cilium -> apps-wave-1 -> apps-wave-0 -> platform-config -> platform -> cilium; Flux "
        "would never reconcile these; hint: remove one of these dependencies"]


def test_depends_on_a_missing_kustomization_is_refused():
    problems = check(change(graph(), "apps-wave-1", depends=("apps-wave-9",)))
    assert problems == ["flux: apps-wave-1.spec.dependsOn: 'apps-wave-9': no such Kustomization; Flux would wait "
                        "for it forever; hint: did you mean apps-wave-0?"]


def test_depending_on_an_external_root_that_exists_passes():
    assert check(change(graph(), "platform", depends=("cilium", "flux-system"))) == []


def test_anything_depending_on_the_plugin_is_refused():
    problems = check(change(graph(), "apps-wave-0", depends=("platform-config", "intel-gpu-plugin")))
    assert problems == ["flux: apps-wave-0.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; "
                        "a failed plugin rollout would stall that tier; hint: remove the dependency"]


def test_the_plugin_depending_on_more_than_the_cni_is_refused():
    problems = check(change(graph(), "intel-gpu-plugin", depends=("cilium", "platform")))
    assert problems == ["flux: intel-gpu-plugin.spec.dependsOn: ['platform']: the plugin may depend on the CNI "
                        "(cilium) only; hint: remove the others"]


def test_wait_false_on_a_tier_others_depend_on_is_refused():
    assert check(change(graph(), "apps-wave-0", wait=False)) == [
        "flux: apps-wave-0.spec.wait: false: apps-wave-1 dependsOn it, and without wait 'Ready' does not mean its "
        "workloads are healthy; hint: set wait: true"]


def test_wait_false_on_a_leaf_tier_passes():
    nodes = graph() + [GraphNode(("flux-system", "apps-wave-2"), (("flux-system", "apps-wave-0"),), False)]
    assert not next(n for n in nodes if n.key[1] == "apps-wave-1").wait
    assert check(nodes) == []


def test_a_kustomization_declared_twice_is_refused():
    assert check(graph() + graph()[:1]) == [
        "flux: Kustomization cilium is declared twice (also in the program); hint: keep one"]


def test_every_problem_is_reported_at_once_one_line_each():
    bad = change(change(graph(), "apps-wave-0", wait=False, depends=("intel-gpu-plugin",)), "cilium", depends=("nope",))
    assert check(bad) == [
        "flux: cilium.spec.dependsOn: 'nope': no such Kustomization; Flux would wait for it forever; hint: use one of "
        "apps-wave-0, apps-wave-1, flux-system, platform, platform-config, plex",
        "flux: apps-wave-0.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; a failed plugin "
        "rollout would stall that tier; hint: remove the dependency",
        "flux: apps-wave-0.spec.wait: false: apps-wave-1 dependsOn it, and without wait 'Ready' does not mean its "
        "workloads are healthy; hint: set wait: true"]


def test_check_program_graph_refuses_a_component_whose_timeout_is_too_short():
    decls = delivery_graph(LAYOUT, FLUX, 3, [PLEX])
    short = [d.model_copy(update={"spec": d.spec.model_copy(update={"timeout": "5m"})}) if d.name == "plex" else d
             for d in decls]
    check_program_graph(decls, FLUX, [PLEX])
    with pytest.raises(GraphError) as caught:
        check_program_graph(short, FLUX, [PLEX])
    assert caught.value.lines == [
        "flux: plex.spec.timeout: 5m (300 s) is not above the worst-case start of plex: 480 s (startupProbe 30 × 10 s "
        "+ 180 s image pull margin); a slow start fails the Kustomization and holds back everything that depends on "
        "it; hint: set timeout: 9m or more"]


# A stack file's graph mistake, refused by the program before any resource, in one line at the key to change.
STACK_GRAPH_MISTAKES = [
    # the cycle it closes (the plugin depends on the CNI) folds into it: removing that dependency breaks both
    pytest.param("dependsOn: [flux-system]", "dependsOn: [intel-gpu-plugin]",
                 'flux.tiers[0].dependsOn: "intel-gpu-plugin": nothing may depend on the GPU plugin; a failed plugin '
                 "rollout would stall that tier; hint: remove the dependency", id="a tier on the plugin"),
    pytest.param("dependsOn: [cilium]", "dependsOn: [apps-wave-0]",
                 'flux.tiers[1].dependsOn: "apps-wave-0": closes the cycle platform -> apps-wave-0 -> platform-config '
                 "-> platform; Flux would never reconcile these; hint: remove it, or another dependency of the cycle",
                 id="a tier on a later tier: the dependency that closes the cycle"),
    # apps-wave-0 -> apps-wave-1 both closes a cycle and makes wave 1 (wait: false) a dependency: one cause
    pytest.param("dependsOn: [platform-config]", "dependsOn: [platform-config, apps-wave-1]",
                 'flux.tiers[3].dependsOn: "apps-wave-1": closes the cycle apps-wave-0 -> apps-wave-1 -> apps-wave-0; '
                 "Flux would never reconcile these; hint: remove it, or another dependency of the cycle",
                 id="a cycle through a tier that does not wait: one line"),
    pytest.param("    clusterVars:", "      - name: late\n        path: ./kubernetes/dev/late\n"
                 "        dependsOn: [apps-wave-1]\n    clusterVars:",
                 "flux.tiers[4].wait: false: late dependsOn it, and without wait 'Ready' does not mean its workloads "
                 "are healthy; hint: set wait: true", id="a dependency on a tier that does not wait: at its wait"),
]


@pytest.mark.parametrize(("old", "new", "line"), STACK_GRAPH_MISTAKES)
def test_a_graph_mistake_of_the_stack_file_is_one_line_at_its_key_before_any_resource(run_stack_text, old, new, line):
    from conftest import stack_text
    with pytest.raises(GraphError) as caught:
        run_stack_text(stack_text("dev").replace(old, new))
    assert caught.value.lines == [f"Pulumi.variant.yaml: gpu-platform:{line}"]


def test_a_dependency_on_a_kustomization_the_stack_does_not_declare_is_left_to_the_walk_of_the_repository(
        run_stack_text):
    """The program cannot see the repository: `kube-system/intel-gpu-resource-driver` may be one of its
    Kustomizations (issue 53), and a tier is only for what the export writes into. The export's walk judges it."""
    from conftest import stack_text
    on_the_repository = "dependsOn: [apps-wave-0, {name: intel-gpu-resource-driver, namespace: kube-system}]"
    run_stack_text(stack_text("dev").replace("dependsOn: [apps-wave-0]", on_the_repository))


def test_a_dependency_on_a_name_the_export_owns_is_still_judged_by_the_program():
    nodes = [node("cilium"), node("plex", "cilium", "intel-gpu-plugin"), node("web", "intel-gpu-resource-driver")]
    assert check_graph(nodes, ROOTS, plugin=None, cni=CNI, repository_unseen=True) == [
        "flux: plex.spec.dependsOn: 'intel-gpu-plugin': no such Kustomization; Flux would wait for it forever; hint: "
        "use one of cilium, flux-system, web",
        "flux: web.spec.dependsOn: 'intel-gpu-resource-driver': no such Kustomization; Flux would wait for it "
        "forever; hint: use one of cilium, flux-system, plex"]
    assert check_graph([node("plex", "elsewhere")], ROOTS, plugin=None, cni=CNI, repository_unseen=True) == []


def test_a_missing_dependency_s_hint_names_the_same_name_in_another_namespace_first():
    nodes = [GraphNode(("flux-system", "plex"), (("flux-system", "intel-gpu-resource-driver"),), True),
             GraphNode(("kube-system", "intel-gpu-resource-driver"), (), True),
             GraphNode(("media", "intel-gpu-resource-driver"), (), True)]
    assert check_graph(nodes, ROOTS, plugin=None, cni=CNI) == [
        "flux: plex.spec.dependsOn: 'intel-gpu-resource-driver': no such Kustomization; Flux would wait for it "
        "forever; hint: did you mean kube-system/intel-gpu-resource-driver or media/intel-gpu-resource-driver? (a "
        "dependsOn without a namespace names one in the Kustomization's own, flux-system)"]


def test_a_missing_dependency_s_hint_names_the_closest_names_that_exist_or_where_to_see_them_all():
    many = [GraphNode(("apps", f"app-{i:02}"), (), True) for i in range(18)] + [
        GraphNode(("kube-system", "intel-gpu-resource-driver"), (), True),
        GraphNode(("kube-system", "intel-gpu-plugin-operator"), (), True)]
    typo = GraphNode(("flux-system", "plex"), (("kube-system", "intel-gpu-driver"),), True)
    (line,) = check_graph([*many, typo], ROOTS, plugin=None, cni=CNI)
    assert line == ("flux: plex.spec.dependsOn: 'kube-system/intel-gpu-driver': no such Kustomization; Flux would "
                    "wait for it forever; hint: the closest that exist: kube-system/intel-gpu-resource-driver, "
                    "kube-system/intel-gpu-plugin-operator")
    unlike = GraphNode(("flux-system", "plex"), (("media", "jellyfin"),), True)
    (line,) = check_graph([*many, unlike], ROOTS, plugin=None, cni=CNI)
    assert line == ("flux: plex.spec.dependsOn: 'media/jellyfin': no such Kustomization; Flux would wait for it "
                    "forever; hint: none of the 21 Kustomizations there are has a name close to it; the last export's "
                    "DELIVERY.md lists those Flux's walk reaches, `flux get kustomizations -A` those on the cluster")


def test_a_wait_timeout_at_or_below_the_worst_case_start_is_refused_with_the_numbers():
    plex = [("Deployment plex/plex", start_budget())]
    line = check_wait_timeout("apps-wave-0", "5m", "10m", plex)
    assert line is not None
    assert line == ("flux: apps-wave-0.spec.timeout: 5m (300 s) is not above the worst-case start of Deployment "
                    "plex/plex: 480 s (startupProbe 30 × 10 s + 180 s image pull margin); a slow start fails the "
                    "Kustomization and holds back everything that depends on it; hint: set timeout: 9m or more")
    assert check_wait_timeout("apps-wave-0", "8m", "10m", plex) is not None  # 480 s is not above 480 s
    assert check_wait_timeout("apps-wave-0", "9m", "10m", plex) is None
    assert check_wait_timeout("apps-wave-0", None, "10m", plex) is None  # Flux's timeout defaults to the interval


def test_a_daemonset_pays_its_start_once_per_node():
    ds = {"kind": "DaemonSet", "spec": {"template": {"spec": {"containers": [{"name": "x"}]}}}}
    assert worst_case_start(ds, 3).seconds == 540
    assert worst_case_start({**ds, "kind": "Deployment"}, 3).seconds == 180


# --- the DRA driver's rules (gpu.route: dra), on a small graph: whole lines, so each word is held ---------------

FS = "flux-system"
DRIVER = (FS, DRIVER_KUSTOMIZATION)


def node(name: str, *depends: str, where: str = "") -> GraphNode:
    return GraphNode((FS, name), tuple((FS, d) for d in depends), True, where)


def dra_graph(*extra: GraphNode) -> list[GraphNode]:
    return [node("cilium"), node("platform", "cilium"), node("intel-gpu-resource-driver", "cilium"),
            node("plex", "platform", "intel-gpu-resource-driver"), *extra]


def check_dra(nodes: list[GraphNode], **kwargs) -> list[str]:
    return check_graph(nodes, ROOTS, plugin=None, cni=CNI, driver=DRIVER,
                       driver_dependents=kwargs.pop("driver_dependents", [(FS, "plex")]), **kwargs)


def test_an_app_that_claims_a_device_may_depend_on_the_dra_driver_and_nothing_else_may():
    assert check_dra(dra_graph()) == []
    assert check_dra(dra_graph(node("jellyfin", "intel-gpu-resource-driver", where="apps/jellyfin/ks.yaml"))) == [
        "flux: apps/jellyfin/ks.yaml: jellyfin.spec.dependsOn: 'intel-gpu-resource-driver': nothing may depend on "
        "the DRA driver but the Kustomization of an app that claims a device; a failed driver rollout would stall "
        "that tier; hint: remove the dependency"]
    assert len(check_dra(dra_graph(), driver_dependents=[])) == 1


def test_without_a_driver_a_dependency_on_its_name_is_only_a_missing_kustomization():
    nodes = [node("cilium"), node("plex", "cilium", "intel-gpu-resource-driver")]
    assert check_graph(nodes, ROOTS, plugin=None, cni=CNI) == [
        "flux: plex.spec.dependsOn: 'intel-gpu-resource-driver': no such Kustomization; Flux would wait for it "
        "forever; hint: use one of cilium, flux-system"]


def test_the_dra_driver_depending_on_more_than_the_cni_is_refused_in_its_own_words():
    nodes = [node("cilium"), node("platform", "cilium"), node("intel-gpu-resource-driver", "cilium", "platform",
                                                              where="infra/dra/ks.yaml")]
    assert check_dra(nodes) == [
        "flux: infra/dra/ks.yaml: intel-gpu-resource-driver.spec.dependsOn: ['platform']: the DRA driver may "
        "depend on the CNI (cilium) only; hint: remove the others"]


def test_with_the_plugin_gone_depending_on_its_old_name_is_no_plugin_rule():
    nodes = [node("cilium"), node("intel-gpu-plugin", "cilium", "platform"), node("platform", "cilium"),
             node("plex", "intel-gpu-plugin")]
    assert check_graph(nodes, ROOTS, plugin=None, cni=CNI) == []
    assert len(check_graph(nodes, ROOTS, plugin=PLUGIN, cni=CNI)) == 2
