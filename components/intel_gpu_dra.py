"""IntelGpuResourceDriver: Intel's GPU resource driver for DRA (`gpu.route: dra`), added by step 1 of the move from the
device plugin (docs/dra.md): it runs beside the plugin and publishes one ResourceSlice per node, which the apps claim
from step 3 (model/dra/gate.py) and alone serve from step 5. Read from upstream's kustomize base at gpu-v0.11.0
(intel/intel-resource-drivers-for-kubernetes, commit 7a4d31b56155b3d9d23c5b5964ea2e26086db9e9, `deployments/gpu/base/`)
and the release's Helm chart (`charts/intel-gpu-resource-driver`). Kept as upstream has them: namespace, names, labels;
ServiceAccount, ClusterRole and binding; the ValidatingAdmissionPolicy confining the driver to its own node's
ResourceSlices; the container's command, env, gRPC probes, mounts, security context; the `gpu.intel.com` DeviceClass.
Deliberate differences, each argued where declared: not privileged; no health monitoring (it needs Intel's XPU Manager,
not run here); the image pinned by tag and digest; no `gpu-vfio.intel.com` DeviceClass; requests and limits, the
DaemonSet's update strategy; the namespace labelled `app-namespace: "false"`, with a deny-all-ingress NetworkPolicy."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from model.config import DraDriverConfig
from model.dra.evidence import DEVICE_CLASS, DRIVER
from model.flux_graph import StartBudget, worst_case_start
from model.labels import PLUGIN_REMOVED_LABEL
from policy.rules import DRA_DRIVER_NAMESPACE

NAMESPACE = DRA_DRIVER_NAMESPACE
NAME = "intel-gpu-resource-driver-kubelet-plugin"
SERVICE_ACCOUNT = "intel-gpu-resource-driver-service-account"
CLUSTER_ROLE = "intel-gpu-resource-driver-role"
SLICE_POLICY = "resourceslices-policy-dra-kubelet-plugin-gpu"
HEALTHCHECK_PORT = 51516
STARTUP_FAILURES, STARTUP_PERIOD = 60, 10  # upstream's startup probe: up to 10 minutes to register with kubelet

core = k8s.core.v1
meta = k8s.meta.v1
apps = k8s.apps.v1
rbac = k8s.rbac.v1


def namespace_args(plugin_removed: bool = False) -> core.NamespaceInitArgs:
    # Not an app namespace: the driver needs hostPaths, which the app policies rightly forbid.
    labels = {"app-namespace": "false"}
    if plugin_removed:  # step 5: what the policy rule intel-gpu-plugin-not-beside-dra-driver reads, here and in Kyverno
        labels[PLUGIN_REMOVED_LABEL] = "true"
    return core.NamespaceInitArgs(metadata=meta.ObjectMetaArgs(name=NAMESPACE, labels=labels))


def _grpc_probe(failure_threshold: int, period: int) -> core.ProbeArgs:
    return core.ProbeArgs(grpc=core.GRPCActionArgs(port=HEALTHCHECK_PORT, service="liveness"),
                          failure_threshold=failure_threshold, period_seconds=period, timeout_seconds=10)


def _host_path(name: str, path: str) -> core.VolumeArgs:
    return core.VolumeArgs(name=name, host_path=core.HostPathVolumeSourceArgs(path=path))


def _container(cfg: DraDriverConfig) -> core.ContainerArgs:
    return core.ContainerArgs(
        name="kubelet-plugin",
        image=cfg.pinned_image,
        image_pull_policy="IfNotPresent",
        command=["/kubelet-gpu-plugin"],
        # No -m (health monitoring): it reads device health from Intel's XPU Manager daemon (xpumd) over
        # /run/xpumd, and this cluster runs none; the chart's own `healthMonitoring.enabled: true` assumes its xpumd
        # subchart. Without it the driver publishes every device's health as Unknown (upstream's newDriver), which the
        # evidence gate counts as usable; only Unhealthy, which needs monitoring, would not be.
        args=[f"--healthcheck-port={HEALTHCHECK_PORT}"],
        ports=[core.ContainerPortArgs(name="healthcheck", container_port=HEALTHCHECK_PORT)],
        startup_probe=_grpc_probe(STARTUP_FAILURES, STARTUP_PERIOD),
        liveness_probe=_grpc_probe(3, 30),
        env=[
            core.EnvVarArgs(name="NODE_NAME", value_from=core.EnvVarSourceArgs(
                field_ref=core.ObjectFieldSelectorArgs(field_path="spec.nodeName"))),
            core.EnvVarArgs(name="POD_NAMESPACE", value_from=core.EnvVarSourceArgs(
                field_ref=core.ObjectFieldSelectorArgs(field_path="metadata.namespace"))),
            core.EnvVarArgs(name="SYSFS_ROOT", value="/sysfs"),
        ],
        # Upstream sets none. A kubelet plugin that only publishes slices and writes CDI specs: the device plugin's
        # figures, which this driver's footprint was not measured against (docs/dra.md says so).
        resources=core.ResourceRequirementsArgs(limits={"cpu": "100m", "memory": "128Mi"},
                                                requests={"cpu": "40m", "memory": "64Mi"}),
        # Not privileged, the chart's default (upstream's kustomize base says privileged: true, and the home-ops
        # repositories that moved to DRA set it on Talos). Privileged buys what an iGPU does not have: the driver
        # reads local memory size through it, and an integrated GPU has no local memory; upstream's USAGE.md for
        # v0.11.0: without it and without health monitoring, devices are "announced to the cluster without the HW
        # details (e.g. memory)". The first suspect if no slice appears.
        security_context=core.SecurityContextArgs(
            privileged=False,
            allow_privilege_escalation=False,
            capabilities=core.CapabilitiesArgs(drop=["ALL"]),
            read_only_root_filesystem=True,
            run_as_user=0,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        volume_mounts=[
            core.VolumeMountArgs(name="plugins-registry", mount_path="/var/lib/kubelet/plugins_registry"),
            core.VolumeMountArgs(name="plugins", mount_path="/var/lib/kubelet/plugins"),
            # Both CDI folders writable: the driver writes the CDI specs containerd (k3s's, CDI on by default in
            # containerd 2) reads when it starts a claiming container.
            core.VolumeMountArgs(name="cdi", mount_path="/etc/cdi"),
            core.VolumeMountArgs(name="varruncdi", mount_path="/var/run/cdi"),
            core.VolumeMountArgs(name="sysfs", mount_path="/sysfs", read_only=True),
        ],
    )


def daemonset_args(cfg: DraDriverConfig) -> apps.DaemonSetInitArgs:
    labels = {"app": NAME}
    return apps.DaemonSetInitArgs(
        metadata=meta.ObjectMetaArgs(name=NAME, namespace=NAMESPACE, labels=labels),
        spec=apps.DaemonSetSpecArgs(
            selector=meta.LabelSelectorArgs(match_labels=labels),
            template=core.PodTemplateSpecArgs(
                metadata=meta.ObjectMetaArgs(labels=labels),
                spec=core.PodSpecArgs(
                    # The driver publishes ResourceSlices through the API server: it needs its token, unlike the
                    # device plugin.
                    service_account_name=SERVICE_ACCOUNT,
                    containers=[_container(cfg)],
                    # Every node has the iGPU (as for the plugin); a node without one publishes an empty slice.
                    node_selector={"kubernetes.io/arch": "amd64"},
                    volumes=[
                        _host_path("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                        _host_path("plugins", "/var/lib/kubelet/plugins"),
                        _host_path("cdi", "/etc/cdi"),
                        _host_path("varruncdi", "/var/run/cdi"),
                        _host_path("sysfs", "/sys"),
                    ],
                ),
            ),
            # As the plugin's: one node at a time, never a second copy on a node.
            update_strategy=apps.DaemonSetUpdateStrategyArgs(
                type="RollingUpdate", rolling_update=apps.RollingUpdateDaemonSetArgs(max_surge=0, max_unavailable=1)),
        ),
    )


def start_budget(node_count: int) -> StartBudget:
    """The driver's worst-case rollout, by the rule Flux's walk applies to its DaemonSet (components/flux.py): its
    startup probe and an image pull, once per node. Its Kustomization gets a timeout above it."""
    startup = {"periodSeconds": STARTUP_PERIOD, "failureThreshold": STARTUP_FAILURES}
    return worst_case_start({"kind": "DaemonSet", "spec": {"template": {"spec": {
        "containers": [{"name": "kubelet-plugin", "startupProbe": startup}]}}}}, node_count=node_count)


def service_account_args() -> core.ServiceAccountInitArgs:
    return core.ServiceAccountInitArgs(metadata=meta.ObjectMetaArgs(name=SERVICE_ACCOUNT, namespace=NAMESPACE))


def cluster_role_args() -> rbac.ClusterRoleInitArgs:
    # Upstream's rules, unchanged; its `metadata.namespace` on a cluster-scoped object is dropped (the API ignores it).
    return rbac.ClusterRoleInitArgs(metadata=meta.ObjectMetaArgs(name=CLUSTER_ROLE), rules=[
        rbac.PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["get"]),
        rbac.PolicyRuleArgs(api_groups=["resource.k8s.io"], resources=["resourceslices"],
                            verbs=["get", "list", "watch", "create", "update", "patch", "delete"]),
        rbac.PolicyRuleArgs(api_groups=["resource.k8s.io"], resources=["resourceclaims"], verbs=["get"]),
    ])


def cluster_role_binding_args() -> rbac.ClusterRoleBindingInitArgs:
    return rbac.ClusterRoleBindingInitArgs(
        metadata=meta.ObjectMetaArgs(name=f"{CLUSTER_ROLE}-binding"),
        subjects=[rbac.SubjectArgs(kind="ServiceAccount", name=SERVICE_ACCOUNT, namespace=NAMESPACE)],
        role_ref=rbac.RoleRefArgs(kind="ClusterRole", name=CLUSTER_ROLE, api_group="rbac.authorization.k8s.io"))


def slice_policy() -> dict[str, Any]:
    """Upstream's ValidatingAdmissionPolicy: the driver's ServiceAccount may create, update and delete only the
    ResourceSlices of the node its pod runs on (the node name the API server puts in the pod's token)."""
    # upstream's comparison, its one long literal written as a concatenation (the same string) so a repository's
    # line length can break it
    sa = f'"system:serviceaccount:" + "{NAMESPACE}" + ":" + "{SERVICE_ACCOUNT}"'
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": SLICE_POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["resourceslices"]}]},
                "matchConditions": [{"name": "isRestrictedUser", "expression": f"request.userInfo.username == {sa}"}],
                "variables": [
                    {"name": "userNodeName", "expression":
                        "request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')"},
                    {"name": "objectNodeName", "expression":
                        '(request.operation == "DELETE" ? oldObject : object).spec.?nodeName.orValue("")'}],
                "validations": [
                    {"expression": 'variables.userNodeName != ""',
                     "message": "no node association found for user, this user must run in a pod on a node and "
                                "ServiceAccountTokenPodNodeInfo must be enabled"},
                    {"expression": "variables.userNodeName == variables.objectNodeName",
                     # upstream's expression with spaces around its operators (the same CEL), so the line can break
                     "messageExpression": "\"this user running on node '\" + variables.userNodeName + \"' may not "
                                          "modify \" + (variables.objectNodeName == \"\" ? \"cluster resourceslices\" "
                                          ": \"resourceslices on node '\" + variables.objectNodeName + \"'\")"}]}}


def slice_policy_binding() -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": SLICE_POLICY},
            "spec": {"policyName": SLICE_POLICY, "validationActions": ["Deny"]}}


def device_class() -> dict[str, Any]:
    """Every device the driver publishes. No `extendedResourceName`: apps claim through a ResourceClaimTemplate,
    never by an extended-resource name the scheduler would serve from the plugin on one node and from DRA on another
    (KEP-5004's per-node bridge), which is the mixed state the migration steps avoid."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def network_policy_args() -> k8s.networking.v1.NetworkPolicyInitArgs:
    """No ingress: kubelet reaches the driver through host sockets and probes it from the node, neither of which a
    NetworkPolicy governs. Egress stays open: the driver talks to the API server, whose address a plain
    NetworkPolicy can only name by IP."""
    net = k8s.networking.v1
    return net.NetworkPolicyInitArgs(
        metadata=meta.ObjectMetaArgs(name="default-deny-ingress", namespace=NAMESPACE),
        spec=net.NetworkPolicySpecArgs(pod_selector=meta.LabelSelectorArgs(), policy_types=["Ingress"]))


class IntelGpuResourceDriver(pulumi.ComponentResource):
    """The driver's namespace, identity, admission policy, DaemonSet and DeviceClass."""

    TYPE = "gpu-platform:components:IntelGpuResourceDriver"

    namespace: core.Namespace
    daemonset: apps.DaemonSet

    def __init__(self, name: str, cfg: DraDriverConfig, opts: pulumi.ResourceOptions | None = None,
                 plugin_removed: bool = False) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.namespace = core.Namespace(f"{name}-namespace", namespace_args(plugin_removed), opts=child)
        in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace]))
        self.network_policy = k8s.networking.v1.NetworkPolicy(f"{name}-default-deny-ingress", network_policy_args(),
                                                              opts=in_namespace)
        account = core.ServiceAccount(f"{name}-service-account", service_account_args(), opts=in_namespace)
        role = rbac.ClusterRole(f"{name}-role", cluster_role_args(), opts=child)
        binding = rbac.ClusterRoleBinding(f"{name}-role-binding", cluster_role_binding_args(),
                                          opts=pulumi.ResourceOptions.merge(
                                              child, pulumi.ResourceOptions(depends_on=[role, account])))
        admission = k8s.apiextensions.CustomResource(f"{name}-slice-policy", **custom_args(slice_policy()), opts=child)
        k8s.apiextensions.CustomResource(f"{name}-slice-policy-binding", **custom_args(slice_policy_binding()),
                                         opts=pulumi.ResourceOptions.merge(
                                             child, pulumi.ResourceOptions(depends_on=[admission])))
        self.device_class = k8s.apiextensions.CustomResource(f"{name}-device-class", **custom_args(device_class()),
                                                             opts=child)
        self.daemonset = apps.DaemonSet(f"{name}-daemonset", daemonset_args(cfg), opts=pulumi.ResourceOptions.merge(
            in_namespace, pulumi.ResourceOptions(depends_on=[self.namespace, binding, admission])))
        self.register_outputs({"namespace": NAMESPACE, "daemonset": NAME, "driver": DRIVER,
                               "deviceClass": DEVICE_CLASS})


def custom_args(doc: dict[str, Any]) -> dict[str, Any]:
    """A plain object as the provider's CustomResource takes it: apiVersion, kind, metadata and the rest."""
    rest = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
    return {"api_version": doc["apiVersion"], "kind": doc["kind"], "metadata": doc["metadata"], **rest}
