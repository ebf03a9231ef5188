"""GpuApp: one GPU app (Plex, Jellyfin, …) from a `GpuAppConfig`, with no app-specific code path.

Namespace with the app-policy labels; default-deny NetworkPolicy plus DNS egress, internet egress and the app's own
ingress port; a PVC per persistent volume; a Deployment whose GPU branch comes from the evidence gate
(model/evidence.py), never straight from config; a Service; the specs built by pure functions. Secure by default, each
opt-out explicit in config: no service-account token, every capability dropped (config adds back what the image needs,
with a reason), no privilege escalation, not privileged, RuntimeDefault seccomp, probes with a chosen timeout. GPU
access: `none`; the legacy `/dev/dri` hostPath (visible, but opening it fails with EPERM from the device cgroup); the
device plugin's `gpu.intel.com/i915` (kubelet adds the device node and cgroup rule); or, on the DRA route, a claim from
the app's ResourceClaimTemplate (a node's ResourceSlice; the driver's CDI spec adds the same node and rule)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.intel_gpu_dra import custom_args
from components.intel_gpu_plugin import ADVERTISED_RESOURCE
from model.config import AppPolicyConfig, AppProbeConfig, GpuAppConfig
from model.dra.evidence import CLAIM_NAME, DEVICE_CLASS, DRIVER
from model.evidence import GpuAccess, GpuDecision
from model.flux_graph import StartBudget, worst_case_start
from model.images import image_ref
from model.labels import ADMIN_ACCESS_LABEL

core = k8s.core.v1
meta = k8s.meta.v1
apps = k8s.apps.v1
net = k8s.networking.v1

PRIVATE_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
LIVENESS_PERIOD_SECONDS = 30
READINESS_PERIOD_SECONDS = 10



@dataclass(frozen=True)
class DraClaim:
    """How the app's claim asks for the iGPU (gpu.route: dra, from step 3): the kernel driver every node's slice was
    proven to report, and whether the claim shares the device through adminAccess."""

    kernel_driver: str
    admin_access: bool = False


def selector(app: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": app}


def namespace_args(cfg: GpuAppConfig, policy: AppPolicyConfig, admin_access: bool = False) -> core.NamespaceInitArgs:
    labels = {"app-namespace": "true", policy.egressClassLabel: cfg.written().egress_class,
              policy.authModeLabel: cfg.written().auth_mode}
    if admin_access:  # named in gpu.dra.adminAccessNamespaces (model/config/stack.py checks the app is)
        labels[ADMIN_ACCESS_LABEL] = "true"
    return core.NamespaceInitArgs(metadata=meta.ObjectMetaArgs(name=cfg.name, labels=labels))


def claim_template_name(app: str) -> str:
    return f"{app}-gpu"


def resource_claim_template(cfg: GpuAppConfig, claim: DraClaim) -> dict[str, Any]:
    """One request, `gpu`, for the app's devices of the driver's DeviceClass. The selector asks for a device bound to
    the kernel driver the slice evidence proved on every node, so a node whose iGPU moved to another driver is passed
    over instead of handing the app a device its image cannot drive. No capacity selector: an iGPU has no local
    memory to ask for. `adminAccess` only where the stack chose sharing (GpuHardwareConfig.draAllocation)."""
    exactly: dict[str, Any] = {
        "deviceClassName": DEVICE_CLASS,
        "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].driver == "{claim.kernel_driver}"'}}],
    }
    if cfg.hardware.devices > 1:
        exactly["count"] = cfg.hardware.devices
    if claim.admin_access:
        exactly["adminAccess"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": claim_template_name(cfg.name), "namespace": cfg.name},
            "spec": {"spec": {"devices": {"requests": [{"name": CLAIM_NAME, "exactly": exactly}]}}}}


def network_policy_args(cfg: GpuAppConfig) -> dict[str, net.NetworkPolicyInitArgs]:
    """Baseline deny-all (what require-default-deny-baseline checks) plus exactly what the app needs."""
    app = cfg.name

    def policy(name: str, spec: net.NetworkPolicySpecArgs) -> net.NetworkPolicyInitArgs:
        return net.NetworkPolicyInitArgs(metadata=meta.ObjectMetaArgs(name=name, namespace=app), spec=spec)

    pods = meta.LabelSelectorArgs(match_labels=selector(app))
    return {
        "default-deny": policy("default-deny", net.NetworkPolicySpecArgs(
            pod_selector=meta.LabelSelectorArgs(), policy_types=["Ingress", "Egress"])),
        f"allow-{app}-ingress": policy(f"allow-{app}-ingress", net.NetworkPolicySpecArgs(
            pod_selector=pods, policy_types=["Ingress"],
            ingress=[net.NetworkPolicyIngressRuleArgs(
                ports=[net.NetworkPolicyPortArgs(protocol="TCP", port=cfg.written().port)])])),
        "allow-dns-egress": policy("allow-dns-egress", net.NetworkPolicySpecArgs(
            pod_selector=pods, policy_types=["Egress"],
            egress=[net.NetworkPolicyEgressRuleArgs(
                to=[net.NetworkPolicyPeerArgs(
                    namespace_selector=meta.LabelSelectorArgs(
                        match_labels={"kubernetes.io/metadata.name": "kube-system"}),
                    pod_selector=meta.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}))],
                ports=[net.NetworkPolicyPortArgs(protocol="UDP", port=53),
                       net.NetworkPolicyPortArgs(protocol="TCP", port=53)])])),
        # Internet only (metadata, sign-in, remote access). The LAN is not reachable from the pod.
        "allow-internet-egress": policy("allow-internet-egress", net.NetworkPolicySpecArgs(
            pod_selector=pods, policy_types=["Egress"],
            egress=[net.NetworkPolicyEgressRuleArgs(
                to=[net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr="0.0.0.0/0", except_=PRIVATE_RANGES))])])),
    }


def pvc_args(cfg: GpuAppConfig) -> dict[str, core.PersistentVolumeClaimInitArgs]:
    return {
        f"{cfg.name}-{v.name}": core.PersistentVolumeClaimInitArgs(
            metadata=meta.ObjectMetaArgs(name=f"{cfg.name}-{v.name}", namespace=cfg.name),
            spec=core.PersistentVolumeClaimSpecArgs(
                access_modes=[v.accessMode], storage_class_name=v.storageClass,
                resources=core.VolumeResourceRequirementsArgs(requests={"storage": v.size})))
        for v in cfg.volumes if v.storageClass is not None
    }


def _probe(cfg: GpuAppConfig, period: int, failures: int) -> core.ProbeArgs:
    return core.ProbeArgs(http_get=core.HTTPGetActionArgs(path=cfg.probe.path, port=cfg.written().port),
                          period_seconds=period, failure_threshold=failures, timeout_seconds=cfg.probe.timeoutSeconds)


def deployment_args(cfg: GpuAppConfig, access: GpuAccess) -> apps.DeploymentInitArgs:
    """`access` comes from the evidence gate (model/evidence.py), never straight from config."""
    app = cfg.name
    limits = {"memory": cfg.resources.memoryLimit}
    mounts, volumes = _volumes(cfg)
    claims = None
    if access == "dra-claim":
        # The claim made from the app's template, per pod; no gpu.intel.com/i915 beside it (never both in one pod).
        claims = [core.PodResourceClaimArgs(name=CLAIM_NAME, resource_claim_template_name=claim_template_name(app))]
    elif access == "device-plugin":
        # kubelet adds /dev/dri/* and the device-cgroup rule from the plugin's Allocate response.
        limits[ADVERTISED_RESOURCE] = str(cfg.hardware.devices)
    elif access == "host-path":
        # Legacy: the node is visible but the device cgroup still denies open(). Kept until evidence shows every
        # node advertises the plugin resource; requesting it earlier leaves the app Unschedulable.
        mounts.append(core.VolumeMountArgs(name="dri", mount_path="/dev/dri"))
        volumes.append(core.VolumeArgs(name="dri", host_path=core.HostPathVolumeSourceArgs(
            path="/dev/dri", type="Directory")))
    return apps.DeploymentInitArgs(
        metadata=meta.ObjectMetaArgs(name=app, namespace=app, labels=selector(app)),
        spec=apps.DeploymentSpecArgs(
            replicas=1,
            # Recreate: a ReadWriteOnce volume and an app database must never have two writers.
            strategy=apps.DeploymentStrategyArgs(type="Recreate"),
            selector=meta.LabelSelectorArgs(match_labels=selector(app)),
            template=core.PodTemplateSpecArgs(
                metadata=meta.ObjectMetaArgs(labels=selector(app)),
                # The app never calls the Kubernetes API: no token in the pod for an intruder to use.
                spec=core.PodSpecArgs(automount_service_account_token=False,
                                      containers=[_container(cfg, limits, mounts, claimed=claims is not None)],
                                      resource_claims=claims, volumes=volumes or None),
            ),
        ),
    )


def _volumes(cfg: GpuAppConfig) -> tuple[list[core.VolumeMountArgs], list[core.VolumeArgs]]:
    """The app's own volumes and their mounts: a claim per volume with a storage class, an emptyDir otherwise."""
    app = cfg.name
    mounts = [core.VolumeMountArgs(name=v.name, mount_path=v.mountPath, read_only=v.readOnly or None)
              for v in cfg.volumes]
    volumes = [
        core.VolumeArgs(name=v.name, persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(
            claim_name=f"{app}-{v.name}", read_only=v.readOnly or None))
        if v.storageClass is not None else
        core.VolumeArgs(name=v.name, empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=v.size))
        for v in cfg.volumes
    ]
    return mounts, volumes


def _container(cfg: GpuAppConfig, limits: dict[str, str], mounts: list[core.VolumeMountArgs],
               claimed: bool) -> core.ContainerArgs:
    app = cfg.name
    env = [core.EnvVarArgs(name=k, value=v) for k, v in cfg.env.items()]
    # By name only: each Secret lives SOPS-encrypted in the GitOps repo; its value never passes through here.
    env += [core.EnvVarArgs(name=s.name, value_from=core.EnvVarSourceArgs(secret_key_ref=core.SecretKeySelectorArgs(
        name=s.secret, key=s.key, optional=s.optional))) for s in cfg.secretEnv]
    repository, tag = cfg.written().image.rsplit(":", 1)  # ImageRef: always repository:tag
    return core.ContainerArgs(
        name=app,
        image=image_ref(repository, tag, cfg.imageDigest),
        image_pull_policy="IfNotPresent",
        env=env or None,
        ports=[core.ContainerPortArgs(name=cfg.portName, container_port=cfg.written().port, protocol="TCP")],
        resources=core.ResourceRequirementsArgs(
            requests={"cpu": cfg.resources.cpuRequest, "memory": cfg.resources.memoryRequest}, limits=limits,
            claims=[core.ResourceClaimArgs(name=CLAIM_NAME)] if claimed else None),
        # Every capability dropped, NET_RAW included; the app's config adds back only what its image's init needs.
        # No supplementalGroups for the device: access must come from the plugin's allocation, not a group.
        security_context=core.SecurityContextArgs(
            privileged=False, allow_privilege_escalation=False,
            capabilities=core.CapabilitiesArgs(drop=["ALL"], add=list(cfg.capabilities) or None),
            run_as_user=cfg.runAsUser, run_as_group=cfg.runAsGroup,
            run_as_non_root=True if cfg.runAsUser is not None else None,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")),
        startup_probe=_probe(cfg, cfg.probe.startupPeriodSeconds, cfg.probe.startupFailureThreshold),
        liveness_probe=_probe(cfg, LIVENESS_PERIOD_SECONDS, 3),
        readiness_probe=_probe(cfg, READINESS_PERIOD_SECONDS, 3),
        volume_mounts=mounts or None,
    )


def service_args(cfg: GpuAppConfig) -> core.ServiceInitArgs:
    annotations = None
    if cfg.loadBalancerIp:
        # Cilium LB-IPAM pins the address clients find the app at on the LAN.
        annotations = {"lbipam.cilium.io/ips": cfg.loadBalancerIp}
    return core.ServiceInitArgs(
        metadata=meta.ObjectMetaArgs(name=cfg.name, namespace=cfg.name, annotations=annotations),
        spec=core.ServiceSpecArgs(
            type="LoadBalancer" if cfg.loadBalancerIp else "ClusterIP",
            selector=selector(cfg.name),
            ports=[core.ServicePortArgs(name=cfg.portName, port=cfg.written().port, target_port=cfg.written().port,
                                        protocol="TCP")],
        ),
    )


def start_budget(cfg: GpuAppConfig) -> StartBudget:
    """The app's worst-case start, by the rule Flux's walk applies to its Deployment (components/flux.py); the
    app's own Kustomization gets a timeout above it."""
    return probe_start_budget(cfg.name, cfg.probe)


def probe_start_budget(name: str, probe: AppProbeConfig) -> StartBudget:
    startup = {"periodSeconds": probe.startupPeriodSeconds, "failureThreshold": probe.startupFailureThreshold}
    return worst_case_start({"kind": "Deployment", "spec": {"template": {"spec": {
        "containers": [{"name": name, "startupProbe": startup}]}}}}, node_count=1)


class GpuApp(pulumi.ComponentResource):
    """One GPU app. Its name is the app's name, namespace and Flux Kustomization."""

    TYPE = "gpu-platform:components:GpuApp"

    def __init__(self, cfg: GpuAppConfig, policy: AppPolicyConfig, gpu: GpuDecision,
                 gpu_plugin_daemonset: pulumi.Resource | None = None,
                 opts: pulumi.ResourceOptions | None = None, dra: DraClaim | None = None,
                 dra_driver: Sequence[pulumi.Resource] | None = ()) -> None:
        # dra_driver None: the repository installs the driver (gpu.dra.deliveredBy: repository), no Pulumi edge to it
        super().__init__(self.TYPE, cfg.name, None, opts)
        name = cfg.name
        self.gpu_access: GpuAccess = gpu.access
        child = pulumi.ResourceOptions(parent=self)

        def after(*deps: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=list(deps)))

        if (self.gpu_access == "dra-claim") != (dra is not None):
            raise ValueError(f"{name}: a claim's settings go with the dra-claim decision, and only with it")
        self.namespace = core.Namespace(f"{name}-namespace",
                                        namespace_args(cfg, policy, admin_access=bool(dra and dra.admin_access)),
                                        opts=child)
        self.network_policies = [net.NetworkPolicy(f"{name}-{key}", args, opts=after(self.namespace))
                                 for key, args in network_policy_args(cfg).items()]
        self.pvcs = [core.PersistentVolumeClaim(f"{name}-{key}", args, opts=after(self.namespace))
                     for key, args in pvc_args(cfg).items()]
        deployment_deps: list[pulumi.Resource] = [self.namespace, *self.network_policies, *self.pvcs]
        if self.gpu_access == "device-plugin":
            if gpu_plugin_daemonset is None:
                raise ValueError(f"{name} in device-plugin mode needs the GPU plugin DaemonSet to depend on")
            # Pulumi-only edge: it orders a direct `pulumi up`. On the cluster, Flux does not order apps after the
            # plugin (nothing may dependsOn it); the advertisement evidence gate is what keeps this safe.
            deployment_deps.append(gpu_plugin_daemonset)
        self.claim_template = None
        if dra is not None:
            if dra_driver is not None and not dra_driver:
                raise ValueError(f"{name} on a claim needs the DRA driver's DaemonSet and DeviceClass to depend on")
            self.claim_template = k8s.apiextensions.CustomResource(
                f"{name}-claim-template", **custom_args(resource_claim_template(cfg, dra)), opts=after(self.namespace))
            # Pulumi-only edges, as the plugin's: on the cluster the app's Kustomization dependsOn the driver's.
            deployment_deps += [self.claim_template, *(dra_driver or [])]
        self.deployment = apps.Deployment(f"{name}-deployment", deployment_args(cfg, self.gpu_access),
                                          opts=after(*deployment_deps))
        self.service = core.Service(f"{name}-service", service_args(cfg), opts=after(self.namespace))
        self.register_outputs({"namespace": name, "gpuAccess": self.gpu_access, "gpuReason": gpu.reason})

