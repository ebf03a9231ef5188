"""The stack's apps: `plex:` and `apps:` (GPU apps, one generic shape of which Plex is one instance:
components/gpu_app.py, components/plex.py), their hardware, volumes, probes and resources, and `appPolicy:` (the
label keys the cluster's app policies require on their namespaces)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticKnownError

from model.config.errors import MISSING, first_repeat, key_rule
from model.config.flux import DeliveryConfig
from model.config.line_width import fits_export_line
from model.config.values import (
    Dns1123Label,
    ExportedText,
    ImageRef,
    ImageTag,
    IPv4,
    LabelKey,
    LabelValue,
    Quantity,
    Sha256Digest,
    Strict,
    StrictBool,
)


class AppPolicyConfig(Strict):
    """Label keys the cluster's Kyverno app policies require on app namespaces."""

    # The label key that carries an app's `egressClass` on its namespace (require-egress-class-label). Default
    # egress-class, the key the cluster's policies use; change it only with them.
    egressClassLabel: LabelKey = "egress-class"
    # The label key that carries an app's `authMode` on its namespace (require-auth-mode-label). Default auth-mode,
    # the key the cluster's policies use; change it only with them.
    authModeLabel: LabelKey = "auth-mode"


class PlexStorageConfig(Strict):
    """Plex's three volumes: /config (database and metadata), /data (the media library, read-only) and /transcode
    (scratch). A PVC's storage class cannot change in place: changing one later replaces the claim and its data."""

    # StorageClass of the plex-config PVC (ReadWriteOnce, /config): Plex's SQLite database wants local or block
    # storage; on NFS its locking corrupts it. No default: the classes are the cluster's own.
    configStorageClass: Dns1123Label
    # Storage requested for /config. Default 20Gi: the database, metadata and thumbnails of a mid-sized library;
    # video preview thumbnails need more.
    configSize: Quantity = "20Gi"
    # StorageClass of the plex-media PVC (ReadWriteMany, mounted read-only at /data): the share that holds the
    # library, which other pods write. No default: the classes are the cluster's own.
    mediaStorageClass: Dns1123Label
    # Storage requested for the media PVC: the library's size. Default 1Ti; many NFS provisioners do not enforce it.
    mediaSize: Quantity = "1Ti"
    # sizeLimit of the /transcode emptyDir on the node's disk; kubelet evicts the pod above it. Default 20Gi: a few
    # concurrent transcodes' segments.
    transcodeSizeLimit: Quantity = "20Gi"


Timezone = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$"), fits_export_line()]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
AbsPath = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._/-]*$", max_length=100)]
Capability = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z_]*$", max_length=32)]
Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
Seconds = Annotated[int, Field(ge=1, le=600, strict=True)]


class GpuHardwareConfig(Strict):
    """Whether the app uses the nodes' Intel iGPU (Quick Sync), and how its pod reaches it."""

    # `intel-quicksync`: the app gets the iGPU, by the route intelGpuAccess chooses. `none` (default): no GPU and no
    # device access at all, the safe choice for an app that does not transcode.
    gpu: Literal["none", "intel-quicksync"] = "none"
    # How intel-quicksync reaches the iGPU. `auto`: the device plugin's resource once evidence/<stack>.yaml proves
    # every node advertises it, else the legacy hostPath (a known no-op: node visible, EPERM on open).
    # `device-plugin` is a request the evidence gate refuses without proof; `host-path` holds back on purpose.
    intelGpuAccess: Literal["auto", "host-path", "device-plugin"] = "auto"
    # gpu.intel.com/i915 devices the app requests on the device-plugin path, or devices its claim asks for on the
    # DRA route (the capacity checks count them).
    devices: Annotated[int, Field(ge=1, le=8, strict=True)] = 1
    # gpu.route: dra, once the apps are on claims: how the app's claim holds the iGPU. `exclusive` (default): the
    # scheduler gives the device to this app alone, so the capacity check counts it against the nodes' devices, and
    # a second app on a one-iGPU node waits; the safe reading of "a claim". `admin-access`: the claim asks for
    # `adminAccess`, which does not consume the device, so several apps share one iGPU (what the home-ops
    # repositories do for Plex, Jellyfin and a metrics exporter). Kubernetes meant admin access for monitoring
    # tools, and it admits it only in a namespace labelled `resource.kubernetes.io/admin-access: "true"`, so the
    # stack must name the app's namespace in gpu.dra.adminAccessNamespaces, which the export labels.
    draAllocation: Literal["exclusive", "admin-access"] = "exclusive"

    @model_validator(mode="after")
    def _access_needs_gpu(self) -> GpuHardwareConfig:
        if self.gpu == "none" and self.intelGpuAccess != "auto":
            raise key_rule(("intelGpuAccess",), self.intelGpuAccess, "needs gpu 'intel-quicksync'",
                           "set gpu: intel-quicksync beside it, or remove intelGpuAccess")
        return self


PlexHardwareConfig = GpuHardwareConfig  # the name Plex's config has always used


class AppVolumeConfig(Strict):
    """A volume mounted at `mountPath`: a PersistentVolumeClaim `<app>-<name>` when `storageClass` is set, else an
    emptyDir limited to `size` (scratch space such as a transcode folder)."""

    # The volume's name in the pod; its PVC is `<app>-<name>`. Unique within the app.
    name: Dns1123Label
    # The absolute path in the container the volume is mounted at.
    mountPath: AbsPath
    # A PVC's storage request, or an emptyDir's sizeLimit (kubelet evicts the pod above it), as a Kubernetes
    # quantity (10Gi).
    size: Quantity
    # The PVC's StorageClass. Unset: an emptyDir on the node's disk, lost whenever the pod goes. Changing it later
    # replaces the PVC and its data (the class is immutable).
    storageClass: Dns1123Label | None = None
    # The PVC's access mode. Default ReadWriteOnce: one node writes, as the app's Recreate rollout expects;
    # ReadWriteMany for a share other pods use too. Not used by an emptyDir.
    accessMode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"] = "ReadWriteOnce"
    # Mount it read-only (a library the app only reads). Default false.
    readOnly: StrictBool = False


class AppSecretEnvConfig(Strict):
    """An environment variable read from a Secret, by name: the value never passes through config or the export."""

    # The environment variable's name in the container, e.g. PLEX_CLAIM.
    name: EnvName
    # The Secret in the app's namespace (kept SOPS-encrypted in the GitOps repository) that holds the value.
    secret: Dns1123Label
    # The key within that Secret whose value the variable gets.
    key: Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", max_length=63)]
    # Default true: a Secret that is needed once (a claim token) must not keep the pod from starting later.
    optional: StrictBool = True


class AppProbeConfig(Strict):
    """HTTP GET on the app's port. Startup: `startupFailureThreshold` × `startupPeriodSeconds` before kubelet gives
    up (the worst-case start Flux's timeout is sized from). `timeoutSeconds` (default 5): an answer slower than this
    counts as a failure; 1 s (Kubernetes' default) fails a healthy app under a transcode's load."""

    # The HTTP path the startup, liveness and readiness probes GET; any 2xx or 3xx answer counts as up. Default /;
    # name a cheap endpoint the app answers from memory (Plex: /identity).
    path: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._/~-]*$", max_length=100)] = "/"
    # Seconds a probe waits for the answer before it counts as failed. Default 5: Kubernetes' 1 s fails a healthy
    # app under a transcode's load (the probe-timeouts policy wants at least 2).
    timeoutSeconds: Seconds = 5
    # Seconds between two startup probes. Default 10.
    startupPeriodSeconds: Seconds = 10
    # Failed startup probes before kubelet restarts the container. Default 30: 30 × 10 s = 5 minutes for a first
    # start that migrates a database; the app's Kustomization timeout is sized above this budget.
    startupFailureThreshold: Annotated[int, Field(ge=1, le=120, strict=True)] = 30


class AppResourcesConfig(Strict):
    """The app container's requests and memory limit. No CPU limit: throttling would stall a transcode, and the
    request already reserves the app's share."""

    # CPU the scheduler reserves for the app, in cores (0.5) or millicores (500m). Default 500m: the iGPU does
    # the transcoding, the CPU serves the app.
    cpuRequest: Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] = "500m"
    # Memory the scheduler reserves for the app (a Kubernetes quantity). Default 1Gi.
    memoryRequest: Quantity = "1Gi"
    # Memory above which the container is OOM-killed. Default 4Gi: room for a library scan on top of the request.
    memoryLimit: Quantity = "4Gi"


# Who writes an app's objects into the repository: the export, or the repository's own renderer.
DeliveredBy = Literal["export", "repository"]
# How an adopted release's pod reaches the iGPU, where the export cannot read it from the release's values.
AssertedAccess = Literal["device-plugin", "dra-claim", "host-path", "none"]


class HelmReleaseRefConfig(Strict):
    """The repository's Flux HelmRelease that installs an app it delivers (deliveredBy: repository), read by the
    export's walk as Flux applies it. The export reads a bjw-s app-template release's values as the chart renders
    them (model/adopt/app_template.py); another chart's pod it cannot see."""

    # The HelmRelease's namespace as Flux applies it (its Kustomization's targetNamespace, e.g. default).
    namespace: Dns1123Label
    # The HelmRelease's metadata.name.
    name: Dns1123Label
    # What the release's pod holds, stated by you where the export cannot read it: another chart than app-template,
    # a `valuesFrom`/`postRenderers`, or a field the proven app-template release does not render the same way
    # (pod-level resourceClaims before 5.3.0). Unset (default): read from the values; a value the reading contradicts
    # is refused. The post-merge checks test it on the cluster either way.
    gpuAccess: AssertedAccess | None = None


class WorkloadRefConfig(Strict):
    """The workload of an adopted release whose pod holds the iGPU, in the release's namespace."""

    # Deployment (default), StatefulSet or DaemonSet: a CronJob's or Job's pods are not judged (none of the evidence
    # or the post-merge checks can follow a pod that comes and goes).
    kind: Literal["Deployment", "StatefulSet", "DaemonSet"] = "Deployment"
    # Its metadata.name as the chart renders it (app-template: the release's name, with the controller's key when
    # the release has more than one controller).
    name: Dns1123Label


# The keys that only say what the export writes: refused beside helmRelease, where the repository writes the app.
EXPORT_ONLY_APP_KEYS = ("image", "imageDigest", "port", "portName", "env", "secretEnv", "volumes", "probe",
                        "resources", "capabilities", "runAsUser", "runAsGroup", "egressClass", "authMode",
                        "loadBalancerIp", "delivery")
# The keys required of an app the export writes (pydantic's own "missing" without helmRelease).
APP_WRITTEN_KEYS = ("image", "port", "egressClass", "authMode")
PLEX_WRITTEN_KEYS = ("imageTag", "timezone", "advertiseIp", "egressClass", "authMode", "storage")
EXPORT_ONLY_PLEX_KEYS = ("imageTag", "imageDigest", "delivery", "timezone", "uid", "gid", "advertiseIp",
                         "claimTokenSecret", "egressClass", "authMode", "storage")


def required_unless_adopted(value: object, info: ValidationInfo) -> object:
    """A key of what the export writes: required (pydantic's own "missing", with every other refusal of the file)
    unless the app is adopted from the repository's HelmRelease, declared above it so that it is read first."""
    if value is None and info.data.get("helmRelease") is None:
        raise PydanticKnownError("missing")
    return value


def adopted_release_rules(model: Strict, delivered_by: str, release: HelmReleaseRefConfig | None,
                          workload: WorkloadRefConfig | None, export_only: tuple[str, ...]) -> None:
    """An app is either written by the export or adopted from the repository's HelmRelease (the export's keys
    refused: they would change nothing, and a reader would believe they do)."""
    if release is None:
        if workload is not None:
            raise key_rule(("workload",), workload.name, "names the workload of a HelmRelease the stack does not "
                           "name", "add helmRelease: {namespace: <ns>, name: <release>} beside it, or remove workload")
        return
    if delivered_by != "repository":
        raise key_rule(("helmRelease",), release.name, "names the repository's HelmRelease, but deliveredBy is "
                       "export: the export would write a second app beside it",
                       "set deliveredBy: repository to adopt the release, or remove helmRelease")
    given = [key for key in export_only if key in model.model_fields_set]
    if given:
        raise key_rule((given[0],), getattr(model, given[0]), "describes what the export writes, but the "
                       "repository's HelmRelease delivers this app: the key would change nothing",
                       "remove it (the release's values are the app's)")


@dataclass(frozen=True)
class WrittenApp:
    """The keys every app the program declares has (config requires them unless the app is adopted)."""

    image: str
    port: int
    egress_class: str
    auth_mode: str


class GpuAppConfig(Strict):
    """One GPU app (components/gpu_app.py): its namespace with the app-policy labels, default-deny plus DNS egress,
    internet egress and its own ingress port, its PVCs, a Deployment whose GPU branch comes from the evidence gate,
    a Service, and a Flux Kustomization of its own. Hardened by default: no service-account token, every capability
    dropped (add back only what `capabilities` names), no privilege escalation, RuntimeDefault seccomp."""

    # The app's name: its namespace, Deployment, Service, Flux Kustomization and component folder (PVCs are
    # `<name>-<volume>`). It must not be plex, intel-gpu-plugin or a tier's name.
    name: Dns1123Label
    # export (default): the export writes the app and its Kustomization. repository: the repository delivers it (its
    # own renderer, its own tier); the export writes none of its objects, and the program's app becomes the reference
    # the evidence gate holds the repository's (as Flux's walk applies it) to: a request for gpu.intel.com/i915
    # there without evidence for every stack is refused.
    deliveredBy: DeliveredBy = "export"
    # With deliveredBy: repository, the repository's Flux HelmRelease that installs the app: the export adopts it
    # (writes none of its objects and needs none of the keys below that describe them) and holds the pod its values
    # render to the evidence gate. Unset: the repository's plain Deployment `<name>/<name>` is the app.
    helmRelease: HelmReleaseRefConfig | None = None
    # The adopted release's workload whose pod holds the iGPU. Default: the Deployment named after the release.
    workload: WorkloadRefConfig | None = None
    # repository:tag, Renovate-tracked where it is written; `imageDigest` pins it (the export refuses a digest
    # recorded for another tag). Required unless the app is adopted from a HelmRelease (helmRelease).
    image: ImageRef | None = Field(default=None, validate_default=True)
    # The sha256 digest of exactly `image`'s tag, written as `<image>@<digest>` so the pull cannot change under the
    # tag. Unset: the tag alone.
    imageDigest: Sha256Digest | None = None
    # The TCP port the app listens on: the container's and the Service's port, the ingress NetworkPolicy's and
    # the probes'. Required unless the app is adopted from a HelmRelease.
    port: Port | None = Field(default=None, validate_default=True)
    # The container and Service port's name (an IANA-style service name).
    portName: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")] = "http"
    # Plain environment variables, NAME: value, written into the Deployment as they are. They are visible in the
    # export: anything secret goes through secretEnv.
    env: dict[EnvName, ExportedText] = {}
    secretEnv: list[AppSecretEnvConfig] = []
    volumes: list[AppVolumeConfig] = []
    probe: AppProbeConfig = AppProbeConfig()
    # The container's CPU and memory requests and memory limit.
    resources: AppResourcesConfig = AppResourcesConfig()
    # Added back after `drop: [ALL]`; name each one's reason next to it in the stack file.
    capabilities: list[Capability] = []
    # Run as this uid/gid (runAsNonRoot). Unset: the image's own user (an init that drops privileges itself).
    runAsUser: Annotated[int, Field(ge=1, le=65535, strict=True)] | None = None
    # Run with this primary gid; needs runAsUser. Unset: the runtime's choice (the image's group for that user).
    runAsGroup: Annotated[int, Field(ge=1, le=65535, strict=True)] | None = None
    # The command that runs the post-merge device test as the app's uid 1000 (e.g. `s6-setuidgid plex`); unset when
    # the container already runs as that user.
    openTestPrefix: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9 ._/=-]*$", max_length=60)] | None = None
    # The namespace's egress-class label value (key: appPolicy.egressClassLabel), which the cluster's egress
    # policies key on, e.g. internet. Required (unless adopted from a HelmRelease): what a class allows is the
    # cluster's, not this program's, to say.
    egressClass: LabelValue | None = Field(default=None, validate_default=True)
    # The namespace's auth-mode label value (key: appPolicy.authModeLabel), which the cluster's ingress policies
    # key on, e.g. app-native (the app authenticates its users itself). Required (unless adopted from a
    # HelmRelease), for the same reason.
    authMode: LabelValue | None = Field(default=None, validate_default=True)
    # A LoadBalancer Service on this address (Cilium LB-IPAM); unset: ClusterIP.
    loadBalancerIp: IPv4 | None = None
    # Whether the app gets the iGPU, and by which route; the evidence gate decides what is exported.
    hardware: GpuHardwareConfig = GpuHardwareConfig()
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")

    _required = field_validator(*APP_WRITTEN_KEYS)(required_unless_adopted)

    def written(self) -> WrittenApp:
        """What the program writes of an app it declares; an app adopted from a HelmRelease declares nothing."""
        if self.image is None or self.port is None or self.egressClass is None or self.authMode is None:
            raise ValueError(f"{self.name}: adopted from the repository's HelmRelease: the program declares none "
                             "of its objects")
        return WrittenApp(self.image, self.port, self.egressClass, self.authMode)

    @model_validator(mode="after")
    def _export_or_adopted(self) -> GpuAppConfig:
        adopted_release_rules(self, self.deliveredBy, self.helmRelease, self.workload, EXPORT_ONLY_APP_KEYS)
        return self

    @model_validator(mode="after")
    def _volumes_unique(self) -> GpuAppConfig:
        names = [v.name for v in self.volumes]
        first = first_repeat(names)
        if first is not None:
            i, j = first
            raise key_rule(("volumes", j, "name"), names[j], "named twice", "name each volume once",
                           also=("volumes", i))
        if (self.runAsGroup is not None) and self.runAsUser is None:
            raise key_rule(("runAsUser",), MISSING, f"runAsGroup {self.runAsGroup} needs the user it is the primary "
                           "group of", "add runAsUser: <the uid the app runs as>, or remove runAsGroup")
        return self


class PlexConfig(Strict):
    """Plex's own settings; components/plex.py turns them into a GpuAppConfig (Plex is one GPU app)."""

    # export (default): the export writes Plex and its Kustomization. repository: the repository delivers Plex
    # (its own renderer, its own tier); the export writes no Plex object, and the program's Plex becomes the
    # reference the evidence gate holds the repository's Plex (as Flux's walk applies it) to: a request for
    # gpu.intel.com/i915 there without evidence for every stack is refused.
    deliveredBy: DeliveredBy = "export"
    # With deliveredBy: repository, the repository's Flux HelmRelease that installs Plex (as an app's helmRelease).
    helmRelease: HelmReleaseRefConfig | None = None
    # The adopted release's workload whose pod holds the iGPU. Default: the Deployment named after the release.
    workload: WorkloadRefConfig | None = None
    # The docker.io/plexinc/pms-docker tag, an exact version (Renovate bumps it); `latest` is refused: not a pin.
    # This key and timezone, advertiseIp, egressClass, authMode and storage are required unless Plex is adopted from
    # the repository's HelmRelease (helmRelease), which says them all itself.
    imageTag: ImageTag | None = Field(default=None, validate_default=True)
    # The digest of exactly this tag; the export refuses a digest recorded for another tag (model/images.py).
    imageDigest: Sha256Digest | None = None
    # Plex belongs to wave 0: apps-wave-1 does not start before Plex is Ready.
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")
    # The container's TZ, an IANA zone such as Europe/Berlin: the clock of Plex's scheduled tasks and its logs.
    timezone: Timezone | None = Field(default=None, validate_default=True)
    # PLEX_UID: the user the image's init switches to and chowns /config and /transcode to. Default 1000, the
    # image's own and the uid the post-merge device test opens the iGPU as; match the owner of the media files.
    uid: Annotated[int, Field(ge=1, le=65535, strict=True)] = 1000
    # PLEX_GID: that user's group, which /config and /transcode get too. Default 1000, the image's own; match the
    # group of the media files.
    gid: Annotated[int, Field(ge=1, le=65535, strict=True)] = 1000
    # The LAN address clients reach Plex at: the LoadBalancer Service's IP (Cilium LB-IPAM) and ADVERTISE_IP
    # (http://<ip>:32400/). Required: no address is right for every LAN.
    advertiseIp: IPv4 | None = Field(default=None, validate_default=True)
    # The Secret (key `token`, in Plex's namespace, SOPS-encrypted in the repository) whose value becomes
    # PLEX_CLAIM, which links a new server to a Plex account. Read on first start only, so optional: later starts
    # need no Secret. Default plex-claim-token.
    claimTokenSecret: Dns1123Label = "plex-claim-token"
    # The egress-class label value of Plex's namespace, as an app's `egressClass` (e.g. internet: Plex needs
    # metadata, sign-in and remote access).
    egressClass: LabelValue | None = Field(default=None, validate_default=True)
    # The auth-mode label value of Plex's namespace, as an app's `authMode` (e.g. app-native: Plex signs its users
    # in itself).
    authMode: LabelValue | None = Field(default=None, validate_default=True)
    storage: PlexStorageConfig | None = Field(default=None, validate_default=True)
    # Whether Plex transcodes on the iGPU, and by which route; the evidence gate decides what is exported.
    hardware: PlexHardwareConfig = PlexHardwareConfig()

    _required = field_validator(*PLEX_WRITTEN_KEYS)(required_unless_adopted)

    @model_validator(mode="after")
    def _export_or_adopted(self) -> PlexConfig:
        adopted_release_rules(self, self.deliveredBy, self.helmRelease, self.workload, EXPORT_ONLY_PLEX_KEYS)
        return self
