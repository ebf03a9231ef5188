"""The Flux delivery graph as the program builds it (under the Pulumi mock engine): each test runs the program
itself, so what it asserts is what that run produced."""

from __future__ import annotations

import pytest

from builders import registrations
from components.flux import GraphError
from conftest import EXAMPLE, stack_text
from gitops.engine.program import Capture, run_program

KS = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
GRAPH = "gpu-platform:components:FluxDeliveryGraph"


def short(urns) -> set[str]:
    return {u.rsplit("::", 1)[-1] for u in urns}


def test_the_program_refuses_a_graph_that_config_breaks_before_writing_anything(run_stack_text):
    broken = stack_text("dev").replace("dependsOn: [platform]", "dependsOn: [platform, intel-gpu-plugin]")
    with pytest.raises(GraphError) as caught:
        run_stack_text(broken)
    assert caught.value.lines == [
        'Pulumi.variant.yaml: gpu-platform:flux.tiers[2].dependsOn: "intel-gpu-plugin": nothing may depend on the GPU '
        "plugin; a failed plugin rollout would stall that tier; hint: remove the dependency"]


def test_each_kustomization_is_created_after_cluster_vars_what_it_depends_on_and_the_objects_it_applies():
    capture: Capture = run_program("dev", EXAMPLE)
    deps = {r.name: short(r.dependencies) for r in registrations(capture, KS)}
    assert deps["flux-cilium"] == {"flux-cluster-vars"}
    assert deps["flux-apps-wave-1"] == {"flux-cluster-vars", "flux-apps-wave-0", "flux-plex"}
    assert deps["flux-intel-gpu-plugin"] == {"flux-cluster-vars", "flux-cilium", "intel-gpu-plugin-daemonset",
                                             "intel-gpu-plugin-default-deny", "intel-gpu-plugin-namespace"}
    assert {"flux-cluster-vars", "flux-platform-config", "plex-deployment"} <= deps["flux-plex"]
    assert all(r.parent.endswith(f"{GRAPH}::flux") for r in registrations(capture, KS))
    assert {r.inputs["metadata"]["namespace"] for r in registrations(capture, KS)} == {"flux-system"}


def test_the_graph_s_objects_go_through_the_stack_s_own_kubernetes_provider_never_the_default_one():
    capture: Capture = run_program("dev", EXAMPLE)
    graph = [r for r in capture.registrations if r.custom and r.parent.endswith(f"{GRAPH}::flux")]
    assert len(graph) == 8  # cluster-vars and seven Kustomizations
    assert all("pulumi:providers:kubernetes::k8s-dev::" in r.provider for r in graph), [r.provider for r in graph]
    [graph] = [urn for urn in capture.outputs if urn.endswith(f"{GRAPH}::flux")]
    assert capture.outputs[graph] == {
        "kustomizations": ["apps-wave-0", "apps-wave-1", "cilium", "intel-gpu-plugin", "platform", "platform-config",
                           "plex"],
        "owned": ["intel-gpu-plugin", "plex"],
    }


def test_a_tier_the_repository_declares_is_in_the_graph_but_not_written_by_the_export(run_stack_text):
    text = stack_text("dev").replace("      - name: platform\n        path: ./kubernetes/dev/platform\n",
                                     "      - name: platform\n        declaredBy: repository\n")
    assert "declaredBy: repository" in text
    capture = run_stack_text(text)
    names = sorted(r.inputs["metadata"]["name"] for r in registrations(capture, KS))
    assert names == ["apps-wave-0", "apps-wave-1", "cilium", "intel-gpu-plugin", "platform-config", "plex"]
    walked = {k["name"]: k for k in capture.stack_outputs["fluxGraph"]["kustomizations"]}
    assert walked["platform"] == {"name": "platform", "namespace": "flux-system", "declared": False,
                                  "owned": False, "path": None}
    assert capture.stack_outputs["fluxGraph"]["plugin"] == ["flux-system", "intel-gpu-plugin"]
