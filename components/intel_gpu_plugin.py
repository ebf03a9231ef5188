"""IntelGpuPlugin: the `intel-gpu-plugin` Namespace and the upstream DaemonSet, with deliberate differences.

Why: a `/dev/dri` hostPath makes the device node visible but not openable (device-cgroup EPERM); the plugin's Allocate
response makes kubelet add the device and the cgroup rule, and it advertises `gpu.intel.com/i915` per node.
Differences from the upstream base (`tests/fixtures/upstream/upstream-base-rendered.yaml`), each tested: namespace
`intel-gpu-plugin` (the base has none); image `docker.io/intel/intel-gpu-plugin:<tag>@sha256:…` (tag and digest pinned
together in model/images.py); memory limit 115Mi (the release's base value); `args` only when config asks
(`-shared-dev-num=N`, N > 1, with its reason as an annotation, and `extraArgs`); `automountServiceAccountToken: false`
(the plugin talks to kubelet's socket, never to the API server). Beside it, a default-deny NetworkPolicy: the plugin
needs no network at all."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from model.config import IntelGpuPluginConfig
from model.images import INTEL_GPU_PLUGIN_DIGEST, INTEL_GPU_PLUGIN_REPOSITORY, INTEL_GPU_PLUGIN_TAG, image_ref
from model.labels import SHARED_DEV_NUM_REASON_ANNOTATION

NAMESPACE = "intel-gpu-plugin"
NAME = "intel-gpu-plugin"
ADVERTISED_RESOURCE = "gpu.intel.com/i915"
MEMORY_LIMIT = "115Mi"  # the pinned release's base; 0.36.0 had 90Mi

core = k8s.core.v1
meta = k8s.meta.v1
apps = k8s.apps.v1


def plugin_args(cfg: IntelGpuPluginConfig) -> list[str]:
    # No -shared-dev-num at the default of 1: a higher count is a lie the scheduler believes, with no GPU
    # partitioning behind it. No -health-management ever: the config model refuses it (Level-Zero sidecar, EPERM).
    args = [f"-shared-dev-num={cfg.sharedDevNum}"] if cfg.sharedDevNum > 1 else []
    return args + list(cfg.extraArgs)


def namespace_args() -> core.NamespaceInitArgs:
    # Not an app namespace: the plugin needs hostPaths, which the app policies rightly forbid.
    return core.NamespaceInitArgs(
        metadata=meta.ObjectMetaArgs(name=NAMESPACE, labels={"app-namespace": "false"}),
    )


def _container(cfg: IntelGpuPluginConfig) -> core.ContainerArgs:
    args = plugin_args(cfg)
    return core.ContainerArgs(
        name=NAME,
        image=image_ref(INTEL_GPU_PLUGIN_REPOSITORY, INTEL_GPU_PLUGIN_TAG, INTEL_GPU_PLUGIN_DIGEST),
        image_pull_policy="IfNotPresent",
        args=args or None,
        env=[
            core.EnvVarArgs(name="NODE_NAME", value_from=core.EnvVarSourceArgs(
                field_ref=core.ObjectFieldSelectorArgs(field_path="spec.nodeName"))),
            core.EnvVarArgs(name="HOST_IP", value_from=core.EnvVarSourceArgs(
                field_ref=core.ObjectFieldSelectorArgs(field_path="status.hostIP"))),
        ],
        resources=core.ResourceRequirementsArgs(
            limits={"cpu": "100m", "memory": MEMORY_LIMIT},
            requests={"cpu": "40m", "memory": "45Mi"},
        ),
        # Not privileged: the plugin only reads sysfs and device nodes and writes its socket and CDI specs.
        security_context=core.SecurityContextArgs(
            allow_privilege_escalation=False,
            capabilities=core.CapabilitiesArgs(drop=["ALL"]),
            read_only_root_filesystem=True,
            se_linux_options=core.SELinuxOptionsArgs(type="container_device_plugin_t"),
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        volume_mounts=[
            # Read-only: the plugin enumerates devices; kubelet, not the plugin, hands them to containers.
            core.VolumeMountArgs(name="devfs", mount_path="/dev/dri", read_only=True),
            core.VolumeMountArgs(name="sysfsdrm", mount_path="/sys/class/drm", read_only=True),
            core.VolumeMountArgs(name="kubeletsockets", mount_path="/var/lib/kubelet/device-plugins"),
            # Writable on purpose: the plugin writes its CDI specs here.
            core.VolumeMountArgs(name="cdipath", mount_path="/var/run/cdi"),
        ],
    )


def daemonset_args(cfg: IntelGpuPluginConfig) -> apps.DaemonSetInitArgs:
    labels = {"app": NAME}
    # The reason travels with the object, so reviewers and the policy pack see why devices are shared (the config
    # model requires one above 1).
    reason = cfg.sharedDevNumReason
    annotations = {SHARED_DEV_NUM_REASON_ANNOTATION: reason} if cfg.sharedDevNum > 1 and reason is not None else None
    return apps.DaemonSetInitArgs(
        metadata=meta.ObjectMetaArgs(name=NAME, namespace=NAMESPACE, labels=labels, annotations=annotations),
        spec=apps.DaemonSetSpecArgs(
            selector=meta.LabelSelectorArgs(match_labels=labels),
            template=core.PodTemplateSpecArgs(
                metadata=meta.ObjectMetaArgs(labels=labels),
                spec=core.PodSpecArgs(
                    # The plugin registers with kubelet over its socket and never calls the API server (no
                    # -resource-manager here), so no token: one less credential on every node.
                    automount_service_account_token=False,
                    containers=[_container(cfg)],
                    # Architecture only. No NFD label selector: this cluster runs no Node Feature Discovery,
                    # and every node has the iGPU; a node without one simply advertises nothing.
                    # No supplementalGroups: the plugin reads the device nodes as root-owned sysfs/devfs entries.
                    node_selector={"kubernetes.io/arch": "amd64"},
                    volumes=[
                        core.VolumeArgs(name="devfs", host_path=core.HostPathVolumeSourceArgs(path="/dev/dri")),
                        core.VolumeArgs(name="sysfsdrm", host_path=core.HostPathVolumeSourceArgs(
                            path="/sys/class/drm")),
                        core.VolumeArgs(name="kubeletsockets", host_path=core.HostPathVolumeSourceArgs(
                            path="/var/lib/kubelet/device-plugins")),
                        core.VolumeArgs(name="cdipath", host_path=core.HostPathVolumeSourceArgs(
                            path="/var/run/cdi", type="DirectoryOrCreate")),
                    ],
                ),
            ),
            update_strategy=apps.DaemonSetUpdateStrategyArgs(
                type="RollingUpdate",
                rolling_update=apps.RollingUpdateDaemonSetArgs(max_surge=0, max_unavailable=1),
            ),
        ),
    )


def network_policy_args() -> k8s.networking.v1.NetworkPolicyInitArgs:
    """Deny all, in and out: the plugin speaks only to kubelet through a host socket, which no NetworkPolicy
    governs; any packet from or to this namespace is unexpected."""
    net = k8s.networking.v1
    return net.NetworkPolicyInitArgs(
        metadata=meta.ObjectMetaArgs(name="default-deny", namespace=NAMESPACE),
        spec=net.NetworkPolicySpecArgs(pod_selector=meta.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]))


class IntelGpuPlugin(pulumi.ComponentResource):
    """Namespace + DaemonSet. Installed directly, not through Intel's operator: one DaemonSet needs no operator,
    its CRDs or its webhook."""

    TYPE = "gpu-platform:components:IntelGpuPlugin"

    namespace: core.Namespace
    daemonset: apps.DaemonSet

    def __init__(self, name: str, cfg: IntelGpuPluginConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.namespace = core.Namespace(f"{name}-namespace", namespace_args(), opts=child)
        after_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace]))
        self.network_policy = k8s.networking.v1.NetworkPolicy(f"{name}-default-deny", network_policy_args(),
                                                              opts=after_namespace)
        self.daemonset = apps.DaemonSet(
            f"{name}-daemonset",
            daemonset_args(cfg),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace])),
        )
        self.register_outputs({
            "namespace": NAMESPACE,
            "daemonset": NAME,
            "advertisedResource": ADVERTISED_RESOURCE,
        })
