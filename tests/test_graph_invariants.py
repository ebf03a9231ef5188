"""Graph invariants are enforced: each with one failing and one passing case."""

from __future__ import annotations

import pytest

from components.config import FluxConfig
from components.flux import GraphError, KustomizationDecl, KustomizationSpec, check_graph, delivery_graph
from conftest import ROOT
from test_config import project_keys

FLUX = FluxConfig.model_validate(project_keys(ROOT / "Pulumi.prod.yaml")["flux"])


def graph() -> list[KustomizationDecl]:
    return delivery_graph("prod", FLUX, 3)


def change(decls, name, **spec_changes) -> list[KustomizationDecl]:
    return [d.model_copy(update={"spec": d.spec.model_copy(update=spec_changes)}) if d.name == name else d for d in decls]


def add(decls, name, depends, wait=True) -> list[KustomizationDecl]:
    spec = KustomizationSpec(path=f"./kubernetes/prod/{name}", interval="10m", dependsOn=depends, wait=wait)
    return decls + [KustomizationDecl(name=name, spec=spec, owned=False)]


def test_the_shipped_graph_passes():
    check_graph(graph(), external_roots=["flux-system"])


def test_a_dependency_cycle_is_refused():
    bad = change(graph(), "cilium", dependsOn=("apps-wave-1",))
    with pytest.raises(GraphError, match=r"dependsOn cycle: .*cilium.*apps-wave-1"):
        check_graph(bad, external_roots=["flux-system"])


def test_depends_on_a_missing_kustomization_is_refused():
    with pytest.raises(GraphError, match=r"apps-wave-1.spec.dependsOn: 'apps-wave-9': no such Kustomization"):
        check_graph(change(graph(), "apps-wave-1", dependsOn=("apps-wave-9",)), external_roots=["flux-system"])


def test_depending_on_an_external_root_that_exists_passes():
    check_graph(change(graph(), "platform", dependsOn=("cilium", "flux-system")), external_roots=["flux-system"])


def test_anything_depending_on_the_plugin_is_refused():
    with pytest.raises(GraphError, match=r"apps-wave-0.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin"):
        check_graph(change(graph(), "apps-wave-0", dependsOn=("platform-config", "intel-gpu-plugin")), ["flux-system"])


def test_the_plugin_depending_on_more_than_the_cni_is_refused():
    with pytest.raises(GraphError, match=r"intel-gpu-plugin.spec.dependsOn: \['platform'\]: the plugin may depend on the CNI"):
        check_graph(change(graph(), "intel-gpu-plugin", dependsOn=("cilium", "platform")), ["flux-system"])


def test_wait_false_on_a_tier_others_depend_on_is_refused():
    with pytest.raises(GraphError, match=r"apps-wave-0.spec.wait: false: apps-wave-1 dependsOn it"):
        check_graph(change(graph(), "apps-wave-0", wait=False), ["flux-system"])


def test_wait_false_on_a_leaf_tier_passes():
    decls = add(graph(), "apps-wave-2", ("apps-wave-0",), wait=False)
    assert not next(d for d in decls if d.name == "apps-wave-1").spec.wait
    check_graph(decls, ["flux-system"])


def test_every_problem_is_reported_at_once_one_line_each():
    bad = change(change(graph(), "apps-wave-0", wait=False, dependsOn=("intel-gpu-plugin",)), "cilium", dependsOn=("nope",))
    with pytest.raises(GraphError) as caught:
        check_graph(bad, ["flux-system"])
    assert len(caught.value.lines) >= 3
