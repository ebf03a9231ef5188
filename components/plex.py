"""Plex: namespace with the app-policy labels, default-deny NetworkPolicy baseline plus Plex's allows, storage,
Deployment and Service. Spec builders are pure functions; the component only declares what they return.

GPU access (decided by the evidence gate in components/evidence.py): `none`; the legacy `/dev/dri` hostPath
(today's known no-op: the node is visible, opening it fails with EPERM from the device cgroup); or the device
plugin's `gpu.intel.com/i915` resource, which kubelet turns into the device node and the cgroup rule.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.config import AppPolicyConfig, PlexConfig
from components.evidence import GpuAccess, GpuDecision
from components.flux import StartBudget, worst_case_start
from components.images import PLEX_REPOSITORY, image_ref
from components.intel_gpu_plugin import ADVERTISED_RESOURCE

NAME = "plex"
NAMESPACE = NAME
PORT = 32400
CLAIM_TOKEN_KEY = "token"

core = k8s.core.v1
meta = k8s.meta.v1
apps = k8s.apps.v1
net = k8s.networking.v1



def selector(app: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": app}

PRIVATE_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
# A first start migrates the database and can take minutes on a large library: 30 × 10 s before kubelet gives up.
STARTUP_PROBE_PERIOD_SECONDS = 10
STARTUP_PROBE_FAILURE_THRESHOLD = 30


def start_budget() -> StartBudget:
    """Plex's worst-case start, by the rule Flux's walk applies to the exported Deployment (components/flux.py);
    Plex's own Kustomization gets a timeout above it."""
    probe = {"periodSeconds": STARTUP_PROBE_PERIOD_SECONDS, "failureThreshold": STARTUP_PROBE_FAILURE_THRESHOLD}
    return worst_case_start({"kind": "Deployment", "spec": {"template": {"spec": {
        "containers": [{"name": NAME, "startupProbe": probe}]}}}}, node_count=1)


def namespace_args(cfg: PlexConfig, policy: AppPolicyConfig, app: str = NAME) -> core.NamespaceInitArgs:
    return core.NamespaceInitArgs(metadata=meta.ObjectMetaArgs(name=app, labels={
        "app-namespace": "true",
        policy.egressClassLabel: cfg.egressClass,
        policy.authModeLabel: cfg.authMode,
    }))


def network_policy_args(app: str = NAME) -> dict[str, net.NetworkPolicyInitArgs]:
    """Baseline deny-all (what require-default-deny-baseline checks) plus exactly what Plex needs."""

    def policy(name: str, spec: net.NetworkPolicySpecArgs) -> net.NetworkPolicyInitArgs:
        return net.NetworkPolicyInitArgs(metadata=meta.ObjectMetaArgs(name=name, namespace=app), spec=spec)

    plex_pods = meta.LabelSelectorArgs(match_labels=selector(app))
    return {
        "default-deny": policy("default-deny", net.NetworkPolicySpecArgs(
            pod_selector=meta.LabelSelectorArgs(), policy_types=["Ingress", "Egress"])),
        "allow-plex-ingress": policy("allow-plex-ingress", net.NetworkPolicySpecArgs(
            pod_selector=plex_pods, policy_types=["Ingress"],
            ingress=[net.NetworkPolicyIngressRuleArgs(
                ports=[net.NetworkPolicyPortArgs(protocol="TCP", port=PORT)])])),
        "allow-dns-egress": policy("allow-dns-egress", net.NetworkPolicySpecArgs(
            pod_selector=plex_pods, policy_types=["Egress"],
            egress=[net.NetworkPolicyEgressRuleArgs(
                to=[net.NetworkPolicyPeerArgs(
                    namespace_selector=meta.LabelSelectorArgs(
                        match_labels={"kubernetes.io/metadata.name": "kube-system"}),
                    pod_selector=meta.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}))],
                ports=[net.NetworkPolicyPortArgs(protocol="UDP", port=53),
                       net.NetworkPolicyPortArgs(protocol="TCP", port=53)])])),
        # Internet only: metadata, plex.tv auth and remote access. The LAN is not reachable from the pod.
        "allow-internet-egress": policy("allow-internet-egress", net.NetworkPolicySpecArgs(
            pod_selector=plex_pods, policy_types=["Egress"],
            egress=[net.NetworkPolicyEgressRuleArgs(
                to=[net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr="0.0.0.0/0", except_=PRIVATE_RANGES))])])),
    }


def pvc_args(cfg: PlexConfig, app: str = NAME) -> dict[str, core.PersistentVolumeClaimInitArgs]:
    s = cfg.storage

    def pvc(name: str, mode: str, storage_class: str, size: str) -> core.PersistentVolumeClaimInitArgs:
        return core.PersistentVolumeClaimInitArgs(
            metadata=meta.ObjectMetaArgs(name=name, namespace=app),
            spec=core.PersistentVolumeClaimSpecArgs(
                access_modes=[mode], storage_class_name=storage_class,
                resources=core.VolumeResourceRequirementsArgs(requests={"storage": size})))

    return {
        f"{app}-config": pvc(f"{app}-config", "ReadWriteOnce", s.configStorageClass, s.configSize),
        f"{app}-media": pvc(f"{app}-media", "ReadWriteMany", s.mediaStorageClass, s.mediaSize),
    }


def deployment_args(cfg: PlexConfig, access: GpuAccess, app: str = NAME) -> apps.DeploymentInitArgs:
    """`access` comes from the evidence gate (components/evidence.py), never straight from config."""
    http_probe = core.HTTPGetActionArgs(path="/identity", port=PORT)
    limits = {"memory": "4Gi"}
    mounts = [
        core.VolumeMountArgs(name="config", mount_path="/config"),
        core.VolumeMountArgs(name="media", mount_path="/data", read_only=True),
        core.VolumeMountArgs(name="transcode", mount_path="/transcode"),
    ]
    volumes = [
        core.VolumeArgs(name="config", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(
            claim_name=f"{app}-config")),
        core.VolumeArgs(name="media", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(
            claim_name=f"{app}-media", read_only=True)),
        core.VolumeArgs(name="transcode", empty_dir=core.EmptyDirVolumeSourceArgs(
            size_limit=cfg.storage.transcodeSizeLimit)),
    ]
    if access == "device-plugin":
        # kubelet adds /dev/dri/* and the device-cgroup rule from the plugin's Allocate response.
        limits[ADVERTISED_RESOURCE] = "1"
    elif access == "host-path":
        # Legacy: the node is visible but the device cgroup still denies open(). Kept until evidence shows
        # every node advertises the plugin resource; requesting it earlier leaves Plex Unschedulable.
        mounts.append(core.VolumeMountArgs(name="dri", mount_path="/dev/dri"))
        volumes.append(core.VolumeArgs(name="dri", host_path=core.HostPathVolumeSourceArgs(
            path="/dev/dri", type="Directory")))
    container = core.ContainerArgs(
        name=NAME,  # the container is Plex whatever the app is called
        image=image_ref(PLEX_REPOSITORY, cfg.imageTag),
        image_pull_policy="IfNotPresent",
        env=[
            core.EnvVarArgs(name="TZ", value=cfg.timezone),
            core.EnvVarArgs(name="PLEX_UID", value=str(cfg.uid)),
            core.EnvVarArgs(name="PLEX_GID", value=str(cfg.gid)),
            core.EnvVarArgs(name="ADVERTISE_IP", value=f"http://{cfg.advertiseIp}:{PORT}/"),
            # By name only: the Secret lives SOPS-encrypted in the GitOps repo. Optional because the claim is
            # only read on first start and expires minutes after it is issued.
            core.EnvVarArgs(name="PLEX_CLAIM", value_from=core.EnvVarSourceArgs(
                secret_key_ref=core.SecretKeySelectorArgs(
                    name=cfg.claimTokenSecret, key=CLAIM_TOKEN_KEY, optional=True))),
        ],
        ports=[core.ContainerPortArgs(name="pms", container_port=PORT, protocol="TCP")],
        resources=core.ResourceRequirementsArgs(requests={"cpu": "500m", "memory": "1Gi"}, limits=limits),
        # The image's init starts as root and drops to PLEX_UID, so capabilities are not dropped wholesale;
        # never privileged, no escalation. No supplementalGroups: device access must come from the plugin.
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")),
        startup_probe=core.ProbeArgs(http_get=http_probe, period_seconds=STARTUP_PROBE_PERIOD_SECONDS,
                                     failure_threshold=STARTUP_PROBE_FAILURE_THRESHOLD),
        liveness_probe=core.ProbeArgs(http_get=http_probe, period_seconds=30, failure_threshold=3),
        readiness_probe=core.ProbeArgs(http_get=http_probe, period_seconds=10, failure_threshold=3),
        volume_mounts=mounts,
    )
    return apps.DeploymentInitArgs(
        metadata=meta.ObjectMetaArgs(name=app, namespace=app, labels=selector(app)),
        spec=apps.DeploymentSpecArgs(
            replicas=1,
            # Recreate: the config volume is ReadWriteOnce and Plex's database must never have two writers.
            strategy=apps.DeploymentStrategyArgs(type="Recreate"),
            selector=meta.LabelSelectorArgs(match_labels=selector(app)),
            template=core.PodTemplateSpecArgs(
                metadata=meta.ObjectMetaArgs(labels=selector(app)),
                spec=core.PodSpecArgs(containers=[container], volumes=volumes),
            ),
        ),
    )


def service_args(cfg: PlexConfig, app: str = NAME) -> core.ServiceInitArgs:
    return core.ServiceInitArgs(
        # Cilium LB-IPAM pins the address Plex advertises (ADVERTISE_IP) so clients find it on the LAN.
        metadata=meta.ObjectMetaArgs(name=app, namespace=app,
                                     annotations={"lbipam.cilium.io/ips": cfg.advertiseIp}),
        spec=core.ServiceSpecArgs(
            type="LoadBalancer",
            selector=selector(app),
            ports=[core.ServicePortArgs(name="pms", port=PORT, target_port=PORT, protocol="TCP")],
        ),
    )


class Plex(pulumi.ComponentResource):
    TYPE = "gpu-platform:components:Plex"

    def __init__(self, name: str, cfg: PlexConfig, policy: AppPolicyConfig, gpu: GpuDecision,
                 gpu_plugin_daemonset: pulumi.Resource | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.gpu_access: GpuAccess = gpu.access
        child = pulumi.ResourceOptions(parent=self)

        def after(*deps: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=list(deps)))

        # The component's name is the app's name and namespace ("plex"); the scale benchmark declares many.
        self.namespace = core.Namespace(f"{name}-namespace", namespace_args(cfg, policy, name), opts=child)
        self.network_policies = [
            net.NetworkPolicy(f"{name}-{key}", args, opts=after(self.namespace))
            for key, args in network_policy_args(name).items()
        ]
        self.pvcs = [core.PersistentVolumeClaim(f"{name}-{key}", args, opts=after(self.namespace))
                     for key, args in pvc_args(cfg, name).items()]
        deployment_deps: list[pulumi.Resource] = [self.namespace, *self.network_policies, *self.pvcs]
        if self.gpu_access == "device-plugin":
            if gpu_plugin_daemonset is None:
                raise ValueError("Plex in device-plugin mode needs the GPU plugin DaemonSet to depend on")
            # Pulumi-only edge: it orders a direct `pulumi up`. On the cluster, Flux does not order apps after
            # the plugin (nothing may dependsOn it); the advertisement evidence gate is what keeps this safe.
            deployment_deps.append(gpu_plugin_daemonset)
        self.deployment = apps.Deployment(f"{name}-deployment", deployment_args(cfg, self.gpu_access, name),
                                          opts=after(*deployment_deps))
        self.service = core.Service(f"{name}-service", service_args(cfg, name), opts=after(self.namespace))
        self.register_outputs({"namespace": name, "gpuAccess": self.gpu_access, "gpuReason": gpu.reason})
