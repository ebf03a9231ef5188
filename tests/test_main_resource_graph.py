"""The resource graph each stack declares (parents, providers, `depends_on` edges) as a golden snapshot: the mock
engine's side of the contract that tests/e2e checks against the real engine's `pulumi stack export`."""

from __future__ import annotations

from collections import Counter

import pytest

from conftest import STACKS
from golden_files import assert_golden
from resource_graph import Node, graph_of_capture, key_of_urn, render


@pytest.mark.parametrize("stack", STACKS)
def test_the_declared_resource_graph_matches_its_golden_snapshot(captures, stack):
    assert_golden(f"graph/{stack}.txt", render(graph_of_capture(captures[stack])))


def test_the_graph_holds_the_delivery_order_and_each_kustomization_waits_for_what_it_applies(captures):
    graph = graph_of_capture(captures["prod"])
    ks = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
    deps = {key: set(node.dependencies) for key, node in graph.items()}
    assert (ks, "flux-plex") in deps[(ks, "flux-apps-wave-1")]
    assert ("kubernetes:apps/v1:Deployment", "plex-deployment") in deps[(ks, "flux-plex")]
    assert ("kubernetes:apps/v1:DaemonSet", "intel-gpu-plugin-daemonset") in deps[(ks, "flux-intel-gpu-plugin")]
    assert not any((ks, "flux-intel-gpu-plugin") in d for d in deps.values())  # nothing depends on the plugin
    assert all(node.provider == ("pulumi:providers:kubernetes", "k8s-prod") for key, node in graph.items()
               if key[0].startswith("kubernetes:"))


def test_a_dropped_dependency_is_a_one_line_difference(captures):
    graph = graph_of_capture(captures["prod"])
    key = next(k for k, node in sorted(graph.items()) if node.dependencies)
    node = graph[key]
    dropped = {**graph, key: Node(node.parent, node.provider, node.dependencies[1:])}
    before, after = render(graph).splitlines(), render(dropped).splitlines()
    assert Counter(before) - Counter(after) == Counter([f"  dependsOn: {' '.join(node.dependencies[0])}"])
    assert not Counter(after) - Counter(before)


def test_urns_of_either_engine_name_the_same_resource():
    mock = "urn:pulumi:prod::gpu-platform::gpu-platform:components:GpuApp$kubernetes:core/v1:Namespace::plex-namespace"
    real = ("urn:pulumi:prod::gpu-platform::gpu-platform:components:FluxDeliveryGraph$gpu-platform:components:"
            "GpuApp$kubernetes:core/v1:Namespace::plex-namespace")
    assert key_of_urn(mock) == key_of_urn(real) == ("kubernetes:core/v1:Namespace", "plex-namespace")
