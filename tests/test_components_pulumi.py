"""Each component in Pulumi's documented unit-test idiom: `pulumi.runtime.set_mocks` with this file's own `Mocks`,
`@pulumi.runtime.test`, assertions on the components' Outputs (https://www.pulumi.com/docs/iac/guides/testing/unit/).

Beside the rest of the suite, which runs the whole program through gitops/engine.py: here each component is built
alone, from config models written in the test. Every test runs in a `contextvars.Context` of its own (the SDK keeps
its settings in context variables), so no mock state leaks into another test.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, cast

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks

from components.config import AppPolicyConfig, FluxConfig, GitopsConfig, IntelGpuPluginConfig, PlexConfig
from components.evidence import GpuDecision
from components.flux import PLUGIN_KUSTOMIZATION, DeliveredComponent, FluxDeliveryGraph
from components.gpu_app import GpuApp, start_budget
from components.images import INTEL_GPU_PLUGIN_DIGEST
from components.intel_gpu_plugin import ADVERTISED_RESOURCE, IntelGpuPlugin
from components.layout import Layout
from components.plex import plex_app

DIGEST = "sha256:" + "a" * 64


class Mocks(pulumi.runtime.Mocks):
    """The engine's part: every resource gets an id and echoes its inputs as its state (what Kubernetes would
    return for these objects, minus server-set fields)."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


class Monitor(pulumi_mocks.MockMonitor):
    """The SDK's MockMonitor, also keeping each resource's dependencies as the SDK sends them (`depends_on`)."""

    def __init__(self) -> None:
        super().__init__(Mocks())
        self.dependencies: dict[str, list[str]] = {}

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        self.dependencies[response.urn] = list(request.dependencies)
        return response


@pytest.fixture
def monitor() -> Monitor:
    return Monitor()


def under_mocks(test: Callable[..., Any]) -> Callable[..., Any]:
    """set_mocks(...) then the @pulumi.runtime.test function, in a fresh context (see the module docstring)."""

    @functools.wraps(test)
    def wrapper(*args: Any, monitor: Monitor, **kwargs: Any) -> None:
        def run() -> None:
            pulumi.runtime.set_mocks(monitor.mocks, project="gpu-platform", stack="unit", preview=False,
                                     monitor=monitor)
            test(*args, monitor=monitor, **kwargs)

        contextvars.Context().run(run)

    return wrapper


def plex_config(**overrides: Any) -> PlexConfig:
    return PlexConfig.model_validate({
        "imageTag": "1.42.2.10156-f737b826c", "timezone": "Europe/Berlin", "advertiseIp": "192.168.10.40",
        "egressClass": "internet", "authMode": "app-native",
        "storage": {"configStorageClass": "local-path", "mediaStorageClass": "nfs-media"},
        "hardware": {"gpu": "intel-quicksync"}, **overrides})


def flux_config() -> FluxConfig:
    return FluxConfig.model_validate({
        "tiers": [{"name": "cilium", "path": "./kubernetes/unit/cilium", "dependsOn": ["flux-system"]},
                  {"name": "apps-wave-0", "path": "./kubernetes/unit/apps", "dependsOn": ["cilium"]},
                  {"name": "apps-wave-1", "path": "./kubernetes/unit/apps-1", "dependsOn": ["apps-wave-0"],
                   "wait": False}],
        "clusterVars": {"CLUSTER_NAME": "unit"}})


@under_mocks
@pulumi.runtime.test
def test_intel_gpu_plugin_daemonset_runs_the_pinned_image_unprivileged_in_its_namespace(monitor):
    plugin = IntelGpuPlugin("intel-gpu-plugin", IntelGpuPluginConfig())
    container = plugin.daemonset.spec.template.spec.containers[0]

    def check(args: list[Any]) -> None:
        namespace, ds_namespace, image, security, daemonset_urn, namespace_urn = args
        assert namespace == "intel-gpu-plugin" == ds_namespace
        assert image == f"docker.io/intel/intel-gpu-plugin:0.37.0@{INTEL_GPU_PLUGIN_DIGEST}"
        assert security["allow_privilege_escalation"] is False and "privileged" not in security
        assert namespace_urn in monitor.dependencies[daemonset_urn]

    return pulumi.Output.all(plugin.namespace.metadata.name, plugin.daemonset.metadata.namespace, container.image,
                             container.security_context, plugin.daemonset.urn, plugin.namespace.urn).apply(check)


@under_mocks
@pulumi.runtime.test
def test_intel_gpu_plugin_passes_shared_dev_num_only_with_its_reason(monitor):
    plugin = IntelGpuPlugin("intel-gpu-plugin", IntelGpuPluginConfig(sharedDevNum=2, sharedDevNumReason="two apps"))

    def check(args: list[Any]) -> None:
        container_args, annotations = args
        assert container_args == ["-shared-dev-num=2"]
        assert "two apps" in annotations.values()

    return pulumi.Output.all(plugin.daemonset.spec.template.spec.containers[0].args,
                             plugin.daemonset.metadata.annotations).apply(check)


@under_mocks
@pulumi.runtime.test
def test_plex_with_the_device_plugin_requests_the_gpu_and_depends_on_the_plugin_daemonset(monitor):
    plugin = IntelGpuPlugin("intel-gpu-plugin", IntelGpuPluginConfig())
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("device-plugin", "evidence complete"),
                  gpu_plugin_daemonset=plugin.daemonset)
    container = plex.deployment.spec.template.spec.containers[0]

    def check(args: list[Any]) -> None:
        container, deployment_urn, daemonset_urn = args
        assert container["resources"]["limits"][ADVERTISED_RESOURCE] == "1"
        assert "/dev/dri" not in [m["mount_path"] for m in container["volume_mounts"]]
        assert daemonset_urn in monitor.dependencies[deployment_urn]

    return pulumi.Output.all(container, plex.deployment.urn, plugin.daemonset.urn).apply(check)


@under_mocks
@pulumi.runtime.test
def test_plex_without_evidence_keeps_the_host_path_and_does_not_wait_for_the_plugin(monitor):
    plugin = IntelGpuPlugin("intel-gpu-plugin", IntelGpuPluginConfig())
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"),
                  gpu_plugin_daemonset=plugin.daemonset)
    container = plex.deployment.spec.template.spec.containers[0]

    def check(args: list[Any]) -> None:
        container, deployment_urn, daemonset_urn, labels = args
        assert ADVERTISED_RESOURCE not in container["resources"]["limits"]
        assert "/dev/dri" in [m["mount_path"] for m in container["volume_mounts"]]
        assert daemonset_urn not in monitor.dependencies[deployment_urn]
        assert labels == {"app-namespace": "true", "egress-class": "internet", "auth-mode": "app-native"}

    return pulumi.Output.all(container, plex.deployment.urn, plugin.daemonset.urn,
                             plex.namespace.metadata.labels).apply(check)


@under_mocks
@pulumi.runtime.test
def test_flux_graph_gives_each_component_its_kustomization_and_the_plugin_the_cni_only(monitor):
    layout = Layout.of("unit", GitopsConfig(), flux_config())
    plugin = IntelGpuPlugin("intel-gpu-plugin", IntelGpuPluginConfig())
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"))
    flux = FluxDeliveryGraph("flux", layout, flux_config(), node_count=2,
                             components=[DeliveredComponent("plex", plex_config().delivery,
                                                            start_budget(plex_app(plex_config())))],
                             owned_sources={PLUGIN_KUSTOMIZATION: plugin, "plex": plex})
    ks = flux.kustomizations

    def check(args: list[Any]) -> None:
        plugin_spec, plex_spec, wave1_spec, cluster_vars, plex_ks_urn, plex_deployment_urn = args
        assert plugin_spec["dependsOn"] == [{"name": "cilium"}]
        assert plugin_spec["path"] == "./components/unit/intel-gpu-plugin"
        assert plex_spec["path"] == "./components/unit/plex" and plex_spec["wait"] is True
        assert plex_spec["dependsOn"] == [{"name": "cilium"}]  # joins apps-wave-0: the tier's own dependsOn
        assert {"name": "plex"} in wave1_spec["dependsOn"]  # what depends on the tier waits for Plex too
        assert cluster_vars == {"CLUSTER_NAME": "unit"}
        # depends_on=[plex] reaches the engine as Plex's resources (the SDK expands a component).
        assert plex_deployment_urn in monitor.dependencies[plex_ks_urn]

    spec = {name: cast(Any, ks[name]).spec for name in (PLUGIN_KUSTOMIZATION, "plex", "apps-wave-1")}  # untyped CR
    return pulumi.Output.all(spec[PLUGIN_KUSTOMIZATION], spec["plex"], spec["apps-wave-1"],
                             flux.cluster_vars.data, ks["plex"].urn, plex.deployment.urn).apply(check)
