"""Pulumi depends_on edges, parents and providers, read from what the engine received (RegisterResource)."""

from __future__ import annotations

import pytest

from builders import registration, registrations
from conftest import COMPLETE_PROD_EVIDENCE, stack_text

KS = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
DS = "kubernetes:apps/v1:DaemonSet"
DEPLOY = "kubernetes:apps/v1:Deployment"


def urn(capture, type_, name):
    return registration(capture, type_, name).urn


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_daemonset_depends_on_its_namespace(captures, stack):
    c = captures[stack]
    namespace = urn(c, "kubernetes:core/v1:Namespace", "intel-gpu-plugin-namespace")
    assert namespace in registration(c, DS, "intel-gpu-plugin-daemonset").dependencies


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_plugin_kustomization_depends_on_the_plugin_objects(captures, stack):
    c = captures[stack]
    deps = registration(c, KS, "flux-intel-gpu-plugin").dependencies
    assert urn(c, DS, "intel-gpu-plugin-daemonset") in deps
    assert urn(c, "kubernetes:core/v1:Namespace", "intel-gpu-plugin-namespace") in deps


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_kustomization_depends_on_the_kustomizations_it_depends_on_in_flux(captures, stack):
    c = captures[stack]
    by_urn = c.by_urn()
    for reg in registrations(c, KS):
        flux_deps = {d["name"] for d in reg.inputs["spec"].get("dependsOn", [])}
        pulumi_deps = {by_urn[d].inputs["metadata"]["name"] for d in reg.dependencies if by_urn[d].type == KS}
        assert pulumi_deps == flux_deps - {"flux-system"}, f"Kustomization {reg.inputs['metadata']['name']}"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_children_are_parented_to_their_component(captures, stack):
    c = captures[stack]
    comp = {r.name: r.urn for r in c.registrations if r.type.startswith("gpu-platform:components:")}
    assert registration(c, DS, "intel-gpu-plugin-daemonset").parent == comp["intel-gpu-plugin"]
    assert registration(c, KS, "flux-cilium").parent == comp["flux"]
    assert registration(c, "kubernetes:apps/v1:Deployment", "plex-deployment").parent == comp["plex"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_kubernetes_resource_uses_the_explicit_provider(captures, stack):
    c = captures[stack]
    (provider,) = registrations(c, "pulumi:providers:kubernetes")
    assert provider.inputs["renderYamlToDirectory"] == f"build/pulumi-render/{stack}"
    for reg in c.registrations:
        if reg.type.startswith("kubernetes:"):
            assert reg.provider.startswith(provider.urn + "::"), f"{reg.type} {reg.name} uses {reg.provider!r}"


def test_host_path_plex_does_not_depend_on_the_plugin(captures):
    c = captures["prod"]
    assert urn(c, DS, "intel-gpu-plugin-daemonset") not in registration(c, DEPLOY, "plex-deployment").dependencies


def test_device_plugin_plex_depends_on_the_plugin_daemonset(run_stack_text):
    c = run_stack_text(stack_text("prod"), stack="prod", evidence=COMPLETE_PROD_EVIDENCE)
    assert c.stack_outputs["plexGpuAccess"] == "device-plugin"
    assert urn(c, DS, "intel-gpu-plugin-daemonset") in registration(c, DEPLOY, "plex-deployment").dependencies


def test_cluster_mode_uses_the_kubeconfig_context(run_stack_text):
    text = stack_text("dev").replace("    mode: render\n    renderDirectory: build/pulumi-render\n",
                                     "    mode: cluster\n    context: k3s-dev\n    fluxManagesCluster: false\n")
    (provider,) = registrations(run_stack_text(text), "pulumi:providers:kubernetes")
    assert provider.inputs.get("context") == "k3s-dev"
    assert "renderYamlToDirectory" not in provider.inputs
