"""Each component in Pulumi's documented unit-test idiom: `pulumi.runtime.set_mocks` with this file's own `Mocks`,
`@pulumi.runtime.test`, assertions on the components' Outputs (https://www.pulumi.com/docs/iac/guides/testing/unit/).

Beside the rest of the suite, which runs the whole program through gitops/engine/program.py: here each component is
built alone, from config models written in the test. Every test runs in a `contextvars.Context` of its own (the SDK
keeps its settings in context variables), so no mock state leaks into another test.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, cast

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks

from components.flux import DeliveredComponent, FluxDeliveryGraph
from components.gpu_app import GpuApp, start_budget
from components.intel_gpu_plugin import ADVERTISED_RESOURCE, IntelGpuPlugin
from components.plex import plex_app
from model.config import AppPolicyConfig, FluxConfig, GitopsConfig, IntelGpuPluginConfig, PlexConfig
from model.evidence import GpuDecision
from model.flux_graph import PLUGIN_KUSTOMIZATION
from model.images import INTEL_GPU_PLUGIN_DIGEST
from model.layout import Layout, SharedBaseLayout

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
        self.parents: dict[str, str] = {}
        self.outputs: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        self.dependencies[response.urn] = list(request.dependencies)
        self.parents[response.urn] = request.parent
        return response

    def RegisterResourceOutputs(self, request):  # noqa: N802 (gRPC method name)
        from pulumi.runtime import rpc

        self.outputs[request.urn] = rpc.deserialize_properties(request.outputs)
        return super().RegisterResourceOutputs(request)


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
    assert flux.cluster_vars is not None  # the split layout writes its own cluster-vars
    return pulumi.Output.all(spec[PLUGIN_KUSTOMIZATION], spec["plex"], spec["apps-wave-1"],
                             flux.cluster_vars.data, ks["plex"].urn, plex.deployment.urn).apply(check)



@under_mocks
@pulumi.runtime.test
def test_flux_graph_on_the_dra_route_gives_the_driver_a_kustomization_after_its_objects_and_no_plugin(monitor):
    from components.intel_gpu_dra import IntelGpuResourceDriver
    from model.config import DraDriverConfig
    from model.flux_graph import DRIVER_KUSTOMIZATION, StartBudget

    layout = Layout.of("unit", GitopsConfig(), flux_config())
    driver = IntelGpuResourceDriver("intel-gpu-resource-driver", DraDriverConfig.model_validate(
        {"image": "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0",
         "imageDigest": DIGEST}), plugin_removed=True)
    claims = DeliveredComponent("plex", plex_config().delivery, start_budget(plex_app(plex_config())),
                                claims_device=True)
    flux = FluxDeliveryGraph("flux", layout, flux_config(), node_count=3, components=[claims],
                             owned_sources={DRIVER_KUSTOMIZATION: driver}, driver=StartBudget(780, "3 × 260 s"),
                             plugin=False)
    ks = flux.kustomizations

    def check(args: list[Any]) -> None:
        driver_spec, plex_spec, driver_ks_urn, driver_ns_urn, graph = args
        assert driver_spec["dependsOn"] == [{"name": "cilium"}] and driver_spec["timeout"] == "14m"
        assert driver_spec["path"] == "./components/unit/intel-gpu-resource-driver"
        assert plex_spec["dependsOn"] == [{"name": "cilium"}, {"name": DRIVER_KUSTOMIZATION}]
        assert driver_ns_urn in monitor.dependencies[driver_ks_urn]
        assert monitor.outputs[graph] == {"kustomizations": ["apps-wave-0", "apps-wave-1", "cilium",
                                                             DRIVER_KUSTOMIZATION, "plex"],
                                          "owned": [DRIVER_KUSTOMIZATION, "plex"]}

    assert PLUGIN_KUSTOMIZATION not in ks
    assert (flux.summary.plugin, flux.summary.driver) == (None, ("flux-system", DRIVER_KUSTOMIZATION))
    assert flux.summary.driver_dependents == (("flux-system", "plex"),)
    spec = {name: cast(Any, ks[name]).spec for name in (DRIVER_KUSTOMIZATION, "plex")}  # untyped CR
    return pulumi.Output.all(spec[DRIVER_KUSTOMIZATION], spec["plex"], ks[DRIVER_KUSTOMIZATION].urn,
                             driver.namespace.urn, flux.urn).apply(check)


@under_mocks
@pulumi.runtime.test
def test_flux_graph_on_a_shared_base_writes_no_cluster_vars_of_its_own_and_orders_by_dependencies_alone(monitor):
    shared = SharedBaseLayout("unit", "kubernetes/base/gpu-platform", "kubernetes/base/components",
                              "./kubernetes/overlays/unit", records_dir=".gpu-platform/unit")
    flux = FluxDeliveryGraph("flux", shared, flux_config(), node_count=2, components=[], owned_sources={})
    assert flux.cluster_vars is None
    ks = flux.kustomizations

    def check(urns: list[str]) -> None:
        cilium, plugin, wave0 = urns
        assert not [u for u in monitor.resources if "ConfigMap" in u]
        assert monitor.dependencies[cilium] == []
        assert monitor.dependencies[plugin] == [cilium] and monitor.dependencies[wave0] == [cilium]

    return pulumi.Output.all(ks["cilium"].urn, ks[PLUGIN_KUSTOMIZATION].urn, ks["apps-wave-0"].urn).apply(check)

# --- GpuApp as a component: its children, their order and its outputs --------------------------------------------

APP_TYPE = "gpu-platform:components:GpuApp"


def app_urn(kind: str, name: str) -> str:
    return f"urn:pulumi:unit::gpu-platform::{APP_TYPE}${kind}::{name}"


@under_mocks
@pulumi.runtime.test
def test_a_gpu_app_is_one_component_named_after_the_app_parenting_each_of_its_objects(monitor):
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"))
    assert plex.claim_template is None
    component = f"urn:pulumi:unit::gpu-platform::pulumi:pulumi:Stack${APP_TYPE}::plex"
    netpol = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    pvc = "kubernetes:core/v1:PersistentVolumeClaim"
    children = {
        app_urn("kubernetes:core/v1:Namespace", "plex-namespace"),
        app_urn(netpol, "plex-default-deny"), app_urn(netpol, "plex-allow-plex-ingress"),
        app_urn(netpol, "plex-allow-dns-egress"), app_urn(netpol, "plex-allow-internet-egress"),
        app_urn(pvc, "plex-plex-config"), app_urn(pvc, "plex-plex-media"),
        app_urn("kubernetes:apps/v1:Deployment", "plex-deployment"),
        app_urn("kubernetes:core/v1:Service", "plex-service"),
    }

    def check(urns: list[str]) -> None:
        assert set(urns) == children
        assert set(monitor.resources) == children | {component}
        assert {monitor.parents[urn] for urn in children} == {component}
        assert monitor.outputs[component] == {"namespace": "plex", "gpuAccess": "host-path", "gpuReason": "no evidence"}
        assert plex.gpu_access == "host-path"

    resources = [plex.namespace, *plex.network_policies, *plex.pvcs, plex.deployment, plex.service]
    return pulumi.Output.all(*[r.urn for r in resources]).apply(check)


@under_mocks
@pulumi.runtime.test
def test_a_gpu_apps_deployment_waits_for_its_namespace_policies_and_claims_and_the_rest_for_the_namespace(monitor):
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"))

    def check(urns: list[str]) -> None:
        namespace, *others = urns
        policies, pvcs = others[:4], others[4:6]
        deployment, service = others[6:]
        assert sorted(monitor.dependencies[deployment]) == sorted([namespace, *policies, *pvcs])
        for urn in [*policies, *pvcs, service]:
            assert monitor.dependencies[urn] == [namespace]
        assert monitor.dependencies[namespace] == []

    resources = [plex.namespace, *plex.network_policies, *plex.pvcs, plex.deployment, plex.service]
    return pulumi.Output.all(*[r.urn for r in resources]).apply(check)


@under_mocks
def test_a_gpu_app_on_the_device_plugin_without_the_plugin_daemonset_is_refused(monitor):
    with pytest.raises(ValueError, match=r"^plex in device-plugin mode needs the GPU plugin DaemonSet to depend on$"):
        GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("device-plugin", "evidence complete"))


@under_mocks
@pulumi.runtime.test
def test_a_gpu_app_registers_each_object_with_its_builders_spec(monitor):
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"))

    def check(urns: list[str]) -> None:
        state = {urn.rsplit("::", 1)[1]: monitor.resources[urn].state for urn in urns}
        assert state["plex-namespace"]["metadata"]["labels"]["app-namespace"] == "true"
        assert state["plex-default-deny"]["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert state["plex-allow-plex-ingress"]["spec"]["ingress"][0]["ports"] == [{"port": 32400, "protocol": "TCP"}]
        assert state["plex-plex-config"]["spec"]["storageClassName"] == "local-path"
        assert state["plex-plex-media"]["spec"]["storageClassName"] == "nfs-media"
        assert state["plex-deployment"]["spec"]["strategy"] == {"type": "Recreate"}
        assert state["plex-service"]["spec"]["ports"][0]["port"] == 32400

    resources = [plex.namespace, *plex.network_policies, *plex.pvcs, plex.deployment, plex.service]
    return pulumi.Output.all(*[r.urn for r in resources]).apply(check)


class Platform(pulumi.ComponentResource):
    def __init__(self) -> None:
        super().__init__("gpu-platform:test:Platform", "platform")


@under_mocks
@pulumi.runtime.test
def test_a_gpu_app_takes_the_options_it_is_given_such_as_its_parent(monitor):
    parent = Platform()
    plex = GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"),
                  opts=pulumi.ResourceOptions(parent=parent))

    def check(urn: str) -> None:
        assert urn == f"urn:pulumi:unit::gpu-platform::gpu-platform:test:Platform${APP_TYPE}::plex"

    return plex.urn.apply(check)


# --- GpuApp on a claim (gpu.route: dra, from step 3) ---------------------------------------------------------------

def driver_stand_in() -> pulumi.CustomResource:
    """Stands for the DRA driver's DaemonSet the app's Deployment waits for."""
    return pulumi.CustomResource("gpu-platform:test:Driver", "driver-daemonset")


def claiming_plex(admin_access: bool = False, driver: tuple[pulumi.Resource, ...] | None = None) -> GpuApp:
    from components.gpu_app import DraClaim

    return GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("dra-claim", "slices proven"),
                  dra=DraClaim("i915", admin_access=admin_access),
                  dra_driver=(driver_stand_in(),) if driver is None else driver)


@under_mocks
@pulumi.runtime.test
def test_a_gpu_app_on_a_claim_has_its_claim_template_and_its_deployment_waits_for_it_and_the_driver(monitor):
    driver = driver_stand_in()
    plex = claiming_plex(driver=(driver,))
    assert plex.claim_template is not None

    def check(args: list[Any]) -> None:
        template, deployment, namespace, app, labels, driver_urn = args
        assert template == app_urn("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", "plex-claim-template")
        assert monitor.parents[template] == app and monitor.dependencies[template] == [namespace]
        assert template in monitor.dependencies[deployment]
        assert driver_urn in monitor.dependencies[deployment] and namespace in monitor.dependencies[deployment]
        state = monitor.resources[template].state
        assert state["metadata"] == {"name": "plex-gpu", "namespace": "plex"}
        assert "resource.kubernetes.io/admin-access" not in labels
        assert monitor.outputs[app] == {"namespace": "plex", "gpuAccess": "dra-claim", "gpuReason": "slices proven"}

    return pulumi.Output.all(plex.claim_template.urn, plex.deployment.urn, plex.namespace.urn, plex.urn,
                             plex.namespace.metadata.labels, driver.urn).apply(check)


@under_mocks
@pulumi.runtime.test
def test_a_claim_that_shares_the_device_labels_the_app_s_namespace_for_admin_access(monitor):
    plex = claiming_plex(admin_access=True)

    def check(labels: dict[str, str]) -> None:
        assert labels["resource.kubernetes.io/admin-access"] == "true"

    return plex.namespace.metadata.labels.apply(check)


@under_mocks
def test_a_claim_goes_with_the_dra_claim_decision_only_and_needs_the_driver_to_wait_for(monitor):
    from components.gpu_app import DraClaim

    only_with = r"^plex: a claim's settings go with the dra-claim decision, and only with it$"
    with pytest.raises(ValueError, match=only_with):
        GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("host-path", "no evidence"),
               dra=DraClaim("i915"))
    with pytest.raises(ValueError, match=only_with):
        GpuApp(plex_app(plex_config()), AppPolicyConfig(), GpuDecision("dra-claim", "slices proven"))
    with pytest.raises(ValueError, match=r"^plex on a claim needs the DRA driver's DaemonSet and DeviceClass to "
                                         r"depend on$"):
        claiming_plex(driver=())
