"""Typed stack configuration: every value that differs between clusters, validated before any resource exists.

The values live in `Pulumi.<stack>.yaml` under the project's namespace (`gpu-platform:`) and reach the
program through Pulumi's config system, so `pulumi preview` and the offline export read the same data.
Errors are shaped like onedr0p/cluster-template's: `file: key: value: problem; hint`, one line each.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import pulumi
import yaml
from components.images import PLEX_REPOSITORY
from components.safe_yaml import escaped
from policy.rules import SHARED_DEV_NUM_REASON_ANNOTATION
from pydantic import (
    AfterValidator,
    BeforeValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

PROJECT = "gpu-platform"

# Flux's own duration pattern (kustomize-controller v1 CRD, `interval`, `timeout`, `retryInterval`).
FLUX_DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
# Flux postBuild variable names (kustomize-controller docs): shell-style, no dashes, no dots.
FLUX_VAR_NAME_PATTERN = r"^[_a-zA-Z][_a-zA-Z0-9]*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
LABEL_KEY = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


def _yamllint_line_max(path: Path) -> int:
    """`rules.line-length.max` of the yamllint config the export lints its tree with (yamllint's default: 80)."""
    rules = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("rules") or {}
    line_length = rules.get("line-length")
    return int(line_length.get("max", 80)) if isinstance(line_length, dict) else 80


# Value lengths, one rule: every string from stack config that the export writes into its YAML must fit on one line
# of the export's own yamllint (`.yamllint.yaml` line-length), after the longest `indentation + key: ` the export
# puts before such a value: the DaemonSet's `    gpu-platform.home.arpa/shared-dev-num-reason: ` (every other
# site is shorter: Plex's env values sit behind 14 spaces and `value: `, a tier path behind `  path: `). A value is
# measured as it is written (quotes and escapes included); text the export writes into the same scalar (an image
# repository, a component folder) or a key taken from config (cluster variables, label keys) counts with it.
EXPORT_LINE_MAX = _yamllint_line_max(Path(__file__).resolve().parent.parent / ".yamllint.yaml")
EXPORT_VALUE_PREFIX = len(f"    {SHARED_DEV_NUM_REASON_ANNOTATION}: ")
MAX_EXPORTED_VALUE = EXPORT_LINE_MAX - EXPORT_VALUE_PREFIX
_EMITTERS = tuple({getattr(yaml, "CSafeDumper", yaml.SafeDumper), yaml.SafeDumper})  # both the export may use


@lru_cache(maxsize=4096)  # pure; every stack value is measured on each run, and emitting it twice is not free
def exported_width(value: str) -> int | None:
    """Characters `value` takes as the export writes it as a mapping value, or None when it would not be written on
    one line (a line break, or a string so long the emitter folds it)."""
    widths = []
    for dumper in _EMITTERS:
        text = yaml.dump({"k": value}, Dumper=dumper, default_flow_style=False, width=4096, allow_unicode=True)
        body = text[len("k: "):].removesuffix("\n")
        if "\n" in body:
            return None
        widths.append(len(body))
    return max(widths)


def fits_export_line(prefix: str = "", suffix: str = "", extra: int = 0, what: str = "") -> AfterValidator:
    """The value-length rule as a pydantic validator. The export writes `prefix + value + suffix` as one scalar,
    and `extra` more characters on its line (the `: value` after a key from config)."""

    def check(value: str) -> str:
        width = exported_width(prefix + value + suffix)
        if width is None:
            raise ValueError("must be one line of text: the export writes it on one line of YAML; hint: remove the "
                             "line breaks")
        width += extra
        if width > MAX_EXPORTED_VALUE:
            raise ValueError(f"{width} characters as exported{what}, above the {MAX_EXPORTED_VALUE} that fit on one "
                             f"{EXPORT_LINE_MAX}-character line (.yamllint.yaml) after the key the export writes "
                             f"before it; hint: shorten it by {width - MAX_EXPORTED_VALUE} character"
                             + ("s" if width - MAX_EXPORTED_VALUE > 1 else ""))
        return value

    return AfterValidator(check)


def _exact_int(value: Any) -> Any:
    # Literal[0, 2] alone would take false as 0 and 2.0 as 2.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be the number 0 or 2; hint: write 0 or 2, unquoted")
    return value


class ConfigError(pulumi.RunError):
    """A user mistake in stack config. `pulumi.RunError` makes the Pulumi CLI print it without a traceback."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


def _no_latest(tag: str) -> str:
    if tag == "latest":
        raise ValueError("the tag 'latest' is not a pin; hint: use an exact version tag")
    return tag


def _known_plugin_flags(args: list[str]) -> list[str]:
    # Every flag of the pinned gpu_plugin release is allowed or refused, with the upstream reason, in one table
    # (components/plugin_flags.py): -health-management and -xpumd-endpoint need a sidecar or a mount this DaemonSet
    # does not have, -shared-dev-num goes through sharedDevNum and its reason, unknown flags make the plugin exit.
    from components.plugin_flags import check_plugin_args

    problems = check_plugin_args(args)
    if problems:
        raise ValueError("; ".join(problems).removesuffix(".") if len(problems) > 1 else problems[0])
    return args


NodeName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
Dns1123Label = Annotated[str, StringConstraints(pattern=DNS1123_LABEL)]
FluxDuration = Annotated[str, StringConstraints(pattern=FLUX_DURATION_PATTERN), fits_export_line()]
RepoPath = Annotated[str, StringConstraints(pattern=r"^\./([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+$"), fits_export_line()]
FluxVarName = Annotated[str, StringConstraints(pattern=FLUX_VAR_NAME_PATTERN)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE)]
# A label key is written with its value (a label value, at most 63) as `key: value`.
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316),
                     fits_export_line(extra=len(": ") + 63, what=" with ': ' and a 63-character label value")]
# An image reference is written behind the container's `        image: `, a shorter key than the rule's longest: it
# may use the difference. A digest may always follow the tag, so the bound counts one.
_IMAGE_KEY_SAVING = EXPORT_VALUE_PREFIX - len("        image: ")
_DIGEST_SUFFIX = "@sha256:" + "0" * 64
# Plex's tag is written after its repository: `image: docker.io/plexinc/pms-docker:<tag>[@sha256:…]`.
ImageTag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"), AfterValidator(_no_latest),
                     fits_export_line(prefix=f"{PLEX_REPOSITORY}:", suffix=_DIGEST_SUFFIX, extra=-_IMAGE_KEY_SAVING,
                                      what=f" as '{PLEX_REPOSITORY}:<tag>@<digest>'")]
Sha256Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"), fits_export_line()]
IPv4 = Annotated[str, StringConstraints(pattern=r"^((25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])$")]
PluginArg = Annotated[str, StringConstraints(pattern=r"^--?[A-Za-z][-_A-Za-z0-9]*(=[^\s]+)?$"), fits_export_line()]
# Free text the export writes as a value (an annotation, a cluster variable): one line, bounded.
ExportedText = Annotated[str, fits_export_line()]
# Where a number or a boolean is meant, nothing else is taken: `true` is not 1, "1000" is not 1000.
StrictBool = Annotated[bool, Field(strict=True)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


class ClusterConfig(Strict):
    nodes: Annotated[list[NodeName], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_nodes(self) -> ClusterConfig:
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("node names must be unique")
        return self


class KubernetesConfig(Strict):
    """How `pulumi up` reaches Kubernetes. Render mode writes YAML and needs no cluster."""

    mode: Literal["render", "cluster"] = "render"
    renderDirectory: str = "build/pulumi-render"
    context: str | None = None
    # Flux reconciles the cluster `context` names (default true). `pulumi up` with mode 'cluster' applies straight to
    # it, so Pulumi and Flux would fight over the same objects: mode 'cluster' is refused unless this is false.
    fluxManagesCluster: StrictBool = True

    @model_validator(mode="after")
    def _context_only_for_cluster(self) -> KubernetesConfig:
        if self.mode == "cluster" and not self.context:
            raise ValueError("mode 'cluster' needs 'context' (a kubeconfig context name)")
        if self.mode == "render" and self.context:
            raise ValueError("'context' is only used with mode 'cluster'")
        if self.mode == "cluster" and self.fluxManagesCluster:
            raise ValueError("mode 'cluster' makes Pulumi apply straight to a cluster that Flux also reconciles, so "
                             "the two would fight over the same objects; hint: keep mode 'render' and let Flux apply "
                             "the export, or set fluxManagesCluster: false if Flux does not manage that cluster")
        return self


class IntelGpuPluginConfig(Strict):
    # No imageDigest here: the plugin's tag and digest are pinned together in components/images.py.
    # 1 device per container: a higher count is a lie the scheduler believes, with no GPU partitioning behind it.
    sharedDevNum: Annotated[int, Field(ge=1, le=64, strict=True)] = 1
    sharedDevNumReason: ExportedText | None = None
    extraArgs: Annotated[list[PluginArg], AfterValidator(_known_plugin_flags)] = []

    @model_validator(mode="after")
    def _shared_needs_reason(self) -> IntelGpuPluginConfig:
        if self.sharedDevNum > 1 and not (self.sharedDevNumReason or "").strip():
            raise ValueError(
                f"sharedDevNum {self.sharedDevNum} needs 'sharedDevNumReason': more than 1 lets several pods "
                "share one iGPU with no partitioning behind it"
            )
        return self


class DependsOnRef(Strict):
    """A Flux `dependsOn` entry. `namespace` defaults to the depending Kustomization's own namespace."""

    name: Dns1123Label
    namespace: Dns1123Label | None = None


def _as_refs(value: Any) -> Any:
    # `dependsOn: [cilium]` is shorthand for `[{name: cilium}]`, as in a hand-written Kustomization.
    if isinstance(value, list):
        return [{"name": v} if isinstance(v, str) else v for v in value]
    return value


DependsOnList = Annotated[list[DependsOnRef], BeforeValidator(_as_refs)]


class SecretRef(Strict):
    name: Dns1123Label


class DecryptionConfig(Strict):
    """Flux `spec.decryption`: SOPS-encrypted Secrets in the tier's folder are decrypted with this key."""

    provider: Literal["sops"] = "sops"
    secretRef: SecretRef | None = None


class HealthCheckConfig(Strict):
    """Flux `spec.healthChecks[]` (a NamespacedObjectKindReference)."""

    apiVersion: Annotated[str, StringConstraints(pattern=r"^([a-z0-9.-]+/)?v[0-9]+[a-z0-9]*$"),
                          fits_export_line()] | None = None
    kind: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9]*$"), fits_export_line()]
    name: Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253), fits_export_line()]
    namespace: Dns1123Label | None = None


def _inside_repository(path: str) -> str:
    parts = path.removeprefix("./").split("/")
    if any(part in (".", "..") for part in parts):
        raise ValueError("'.' and '..' are not allowed: a Flux path names a folder inside the repository; "
                         "hint: write it from the repository root, e.g. ./kubernetes/prod/apps")
    return path


FluxPath = Annotated[RepoPath, AfterValidator(_inside_repository)]


class TierConfig(Strict):
    """One Flux Kustomization of the delivery graph. `declaredBy: export` (default): the export writes this
    Kustomization with these fields; its `path` is a hand-written folder. `declaredBy: repository`: a Kustomization
    the repository already declares (per-app layouts); the export only refers to it and checks it exists.
    Defaults are today's tier timing: interval 10m, timeout 5m, wait true, prune true."""

    name: Dns1123Label
    declaredBy: Literal["export", "repository"] = "export"
    # Default: flux.namespace.
    namespace: Dns1123Label | None = None
    path: FluxPath | None = None
    dependsOn: DependsOnList = []
    # A tier that others depend on must wait, or 'Ready' says nothing about its workloads (graph rule).
    wait: StrictBool = True
    interval: FluxDuration = "10m"
    timeout: FluxDuration = "5m"
    retryInterval: FluxDuration | None = None
    prune: StrictBool = True
    decryption: DecryptionConfig | None = None
    healthChecks: list[HealthCheckConfig] = []
    targetNamespace: Dns1123Label | None = None

    @model_validator(mode="after")
    def _path_when_exported(self) -> TierConfig:
        if self.declaredBy == "export" and self.path is None:
            raise ValueError(f"tier {self.name!r} is declared by the export and needs 'path' (its hand-written "
                             "folder, e.g. ./kubernetes/prod/apps/wave-0)")
        if self.declaredBy == "repository":
            exported_only = [k for k in ("path", "decryption", "targetNamespace", "retryInterval")
                             if getattr(self, k) is not None] + (["healthChecks"] if self.healthChecks else [])
            if exported_only:
                raise ValueError(f"tier {self.name!r} is declared by the repository; {', '.join(exported_only)} "
                                 "belong in its hand-written Kustomization, not here")
        return self


class FluxConfig(Strict):
    gitRepository: Dns1123Label = "flux-system"
    namespace: Dns1123Label = "flux-system"
    bootstrapKustomization: Dns1123Label = "flux-system"
    # The bootstrap Kustomization's spec.path, where Flux's walk of the repository starts. Default ./clusters/<stack>.
    bootstrapPath: FluxPath | None = None
    # The tier the GPU plugin depends on (and nothing else): pods need a network, nothing more.
    cniTier: Dns1123Label = "cilium"
    # The delivery graph's tiers, in order. See TierConfig.
    tiers: Annotated[list[TierConfig], Field(min_length=1)]
    # Written as `  NAME: value` lines of the cluster-vars ConfigMap: name and value count together (cross-field).
    clusterVars: dict[FluxVarName, ExportedText]

    @model_validator(mode="after")
    def _tiers_consistent(self) -> FluxConfig:
        names = [t.name for t in self.tiers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tiers: {', '.join(twice)} declared twice; hint: one entry per tier")
        if self.cniTier not in names:
            raise ValueError(f"cniTier {self.cniTier!r} is not among the tiers ({', '.join(names)}); "
                             "hint: declare the CNI's Kustomization as a tier")
        return self


class DeliveryConfig(Strict):
    """How Flux delivers a component: from its own Kustomization, which the export writes.
    `tier` (default apps-wave-0): the component joins that tier: same dependsOn, and every Kustomization that
    depends on the tier also depends on the component, so nothing after the tier starts before it is Ready.
    `dependsOn`: explicit dependencies instead (per-app layouts, where no wave waits for the app)."""

    tier: Dns1123Label | None = None
    dependsOn: DependsOnList | None = None

    @model_validator(mode="after")
    def _one_of(self) -> DeliveryConfig:
        if (self.tier is None) == (self.dependsOn is None):
            raise ValueError("set exactly one of 'tier' and 'dependsOn'")
        return self


def _relative_folder(path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("must be a folder relative to the repository root, without '.', '..' or '//'")
    return path


RepoFolder = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]+$", max_length=200),
                       AfterValidator(_relative_folder)]
# A component's Kustomization is written with `path: ./<componentsDir>/<component>`, the component a DNS label.
ComponentsFolder = Annotated[RepoFolder, fits_export_line(prefix="./", suffix="/" + "c" * 63,
                                                          what=" as './<folder>/<63-character component>'")]


class GitopsConfig(Strict):
    """Where the export writes inside the GitOps repository, and how its YAML is formatted."""

    # The export's Flux entry point (Kustomizations, cluster-vars, its own kustomization.yaml). It must lie inside
    # the bootstrap path so the bootstrap Kustomization reaches it. Default clusters/<stack>/gpu-platform.
    entryDir: RepoFolder | None = None
    # One folder per component below this one. Default components/<stack>.
    componentsDir: ComponentsFolder | None = None
    # 0 (default): list items unindented under their key, as kubectl and flux write them. 2: indented by two
    # spaces, as prettier and oxfmt write them; pick what the repository's formatter writes.
    sequenceIndent: Annotated[Literal[0, 2], BeforeValidator(_exact_int)] = 0


class AppPolicyConfig(Strict):
    """Label keys the cluster's Kyverno app policies require on app namespaces."""

    egressClassLabel: LabelKey = "egress-class"
    authModeLabel: LabelKey = "auth-mode"


class PlexStorageConfig(Strict):
    configStorageClass: Dns1123Label
    configSize: Quantity = "20Gi"
    mediaStorageClass: Dns1123Label
    mediaSize: Quantity = "1Ti"
    transcodeSizeLimit: Quantity = "20Gi"


# --- GPU apps: one generic shape, Plex being one instance (components/gpu_app.py, components/plex.py) ------------

ImageRef = Annotated[str, StringConstraints(
    pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"),
    AfterValidator(lambda ref: ref.rsplit(":", 1)[0] + ":" + _no_latest(ref.rsplit(":", 1)[1])),
    fits_export_line(suffix=_DIGEST_SUFFIX, extra=-_IMAGE_KEY_SAVING, what=" with a digest")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
AbsPath = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._/-]*$", max_length=100)]
Capability = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z_]*$", max_length=32)]
Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
Seconds = Annotated[int, Field(ge=1, le=600, strict=True)]


class GpuHardwareConfig(Strict):
    gpu: Literal["none", "intel-quicksync"] = "none"
    # How intel-quicksync reaches the iGPU. `auto`: the device plugin's resource once evidence/<stack>.yaml proves
    # every node advertises it, else the legacy hostPath (a known no-op: node visible, EPERM on open).
    # `device-plugin` is a request the evidence gate refuses without proof; `host-path` holds back on purpose.
    intelGpuAccess: Literal["auto", "host-path", "device-plugin"] = "auto"
    # gpu.intel.com/i915 devices the app requests on the device-plugin path (the capacity check counts them).
    devices: Annotated[int, Field(ge=1, le=8, strict=True)] = 1

    @model_validator(mode="after")
    def _access_needs_gpu(self) -> GpuHardwareConfig:
        if self.gpu == "none" and self.intelGpuAccess != "auto":
            raise ValueError(f"intelGpuAccess '{self.intelGpuAccess}' needs gpu 'intel-quicksync'")
        return self


PlexHardwareConfig = GpuHardwareConfig  # the name Plex's config has always used


class AppVolumeConfig(Strict):
    """A volume mounted at `mountPath`: a PersistentVolumeClaim `<app>-<name>` when `storageClass` is set, else an
    emptyDir limited to `size` (scratch space such as a transcode folder)."""

    name: Dns1123Label
    mountPath: AbsPath
    size: Quantity
    storageClass: Dns1123Label | None = None
    accessMode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"] = "ReadWriteOnce"
    readOnly: StrictBool = False


class AppSecretEnvConfig(Strict):
    """An environment variable read from a Secret, by name: the value never passes through config or the export."""

    name: EnvName
    secret: Dns1123Label
    key: Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", max_length=63)]
    # Default true: a Secret that is needed once (a claim token) must not keep the pod from starting later.
    optional: StrictBool = True


class AppProbeConfig(Strict):
    """HTTP GET on the app's port. Startup: `startupFailureThreshold` × `startupPeriodSeconds` before kubelet gives
    up (the worst-case start Flux's timeout is sized from). `timeoutSeconds` (default 5): an answer slower than this
    counts as a failure; 1 s (Kubernetes' default) fails a healthy app under a transcode's load."""

    path: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._/~-]*$", max_length=100)] = "/"
    timeoutSeconds: Seconds = 5
    startupPeriodSeconds: Seconds = 10
    startupFailureThreshold: Annotated[int, Field(ge=1, le=120, strict=True)] = 30


class AppResourcesConfig(Strict):
    cpuRequest: Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] = "500m"
    memoryRequest: Quantity = "1Gi"
    memoryLimit: Quantity = "4Gi"


class GpuAppConfig(Strict):
    """One GPU app (components/gpu_app.py): its namespace with the app-policy labels, default-deny plus DNS egress,
    internet egress and its own ingress port, its PVCs, a Deployment whose GPU branch comes from the evidence gate,
    a Service, and a Flux Kustomization of its own. Hardened by default: no service-account token, every capability
    dropped (add back only what `capabilities` names), no privilege escalation, RuntimeDefault seccomp."""

    name: Dns1123Label
    # repository:tag, Renovate-tracked where it is written; `imageDigest` pins it (the export refuses a digest
    # recorded for another tag).
    image: ImageRef
    imageDigest: Sha256Digest | None = None
    port: Port
    # The container and Service port's name (an IANA-style service name).
    portName: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")] = "http"
    env: dict[EnvName, ExportedText] = {}
    secretEnv: list[AppSecretEnvConfig] = []
    volumes: list[AppVolumeConfig] = []
    probe: AppProbeConfig = AppProbeConfig()
    resources: AppResourcesConfig = AppResourcesConfig()
    # Added back after `drop: [ALL]`; name each one's reason next to it in the stack file.
    capabilities: list[Capability] = []
    # Run as this uid/gid (runAsNonRoot). Unset: the image's own user (an init that drops privileges itself).
    runAsUser: Annotated[int, Field(ge=1, le=65535, strict=True)] | None = None
    runAsGroup: Annotated[int, Field(ge=1, le=65535, strict=True)] | None = None
    # The command that runs the post-merge device test as the app's uid 1000 (e.g. `s6-setuidgid plex`); unset when
    # the container already runs as that user.
    openTestPrefix: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9 ._/=-]*$", max_length=60)] | None = None
    egressClass: LabelValue
    authMode: LabelValue
    # A LoadBalancer Service on this address (Cilium LB-IPAM); unset: ClusterIP.
    loadBalancerIp: IPv4 | None = None
    hardware: GpuHardwareConfig = GpuHardwareConfig()
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")

    @model_validator(mode="after")
    def _volumes_unique(self) -> GpuAppConfig:
        names = [v.name for v in self.volumes]
        if len(set(names)) != len(names):
            raise ValueError("two volumes share a name; hint: one entry per volume")
        if (self.runAsGroup is not None) and self.runAsUser is None:
            raise ValueError("runAsGroup needs runAsUser")
        return self


class PlexConfig(Strict):
    """Plex's own settings; components/plex.py turns them into a GpuAppConfig (Plex is one GPU app)."""

    imageTag: ImageTag
    # The digest of exactly this tag; the export refuses a digest recorded for another tag (components/images.py).
    imageDigest: Sha256Digest | None = None
    # Plex belongs to wave 0: apps-wave-1 does not start before Plex is Ready.
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")
    timezone: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$"), fits_export_line()]
    uid: Annotated[int, Field(ge=1, le=65535, strict=True)] = 1000
    gid: Annotated[int, Field(ge=1, le=65535, strict=True)] = 1000
    advertiseIp: IPv4
    claimTokenSecret: Dns1123Label = "plex-claim-token"
    egressClass: LabelValue
    authMode: LabelValue
    storage: PlexStorageConfig
    hardware: PlexHardwareConfig = PlexHardwareConfig()


class StackConfig(Strict):
    cluster: ClusterConfig
    kubernetes: KubernetesConfig = KubernetesConfig()
    intelGpuPlugin: IntelGpuPluginConfig = IntelGpuPluginConfig()
    flux: FluxConfig
    appPolicy: AppPolicyConfig = AppPolicyConfig()
    plex: PlexConfig
    # More GPU apps, as config only (Plex is always there, from `plex`).
    apps: list[GpuAppConfig] = []
    gitops: GitopsConfig = GitopsConfig()


def cross_field_problems(cfg: StackConfig, source: str, stack: str) -> list[str]:
    """Rules across sections, reported with the key to change (a model_validator could only name the root)."""
    from components.layout import Layout, is_within, repo_dir

    tiers = [t.name for t in cfg.flux.tiers]
    problems = []
    layout = Layout.of(stack, cfg.gitops, cfg.flux)
    owned = layout.owned_folders()
    if is_within(layout.entry_dir, layout.components_dir) or is_within(layout.components_dir, layout.entry_dir):
        problems.append(f"{source}: {PROJECT}:gitops.entryDir: {json.dumps(layout.entry_dir)}: overlaps "
                        f"componentsDir {layout.components_dir!r}; hint: use two separate folders")
    for i, tier in enumerate(cfg.flux.tiers):
        if tier.path is None:
            continue
        folder = repo_dir(tier.path)
        clash = next((o for o in owned if is_within(folder, o) or is_within(o, folder)), None)
        if clash is not None:
            problems.append(f"{source}: {PROJECT}:flux.tiers[{i}].path: {json.dumps(tier.path)}: overlaps "
                            f"{clash!r}, a folder the export owns, so the tier would apply exported objects a "
                            "second time; hint: point the tier at its hand-written folder")
    for name, value in cfg.flux.clusterVars.items():
        width = len(f"{name}: ") + (exported_width(value) or 0)
        if width > MAX_EXPORTED_VALUE:
            problems.append(f"{source}: {PROJECT}:flux.clusterVars.{name}: {_shown(value)}: `{name}: <value>` is "
                            f"{width} characters as exported, above the {MAX_EXPORTED_VALUE} that fit on one "
                            f"{EXPORT_LINE_MAX}-character line (.yamllint.yaml) of the cluster-vars ConfigMap; "
                            f"hint: shorten the name or the value")
    deliveries = [("plex.delivery.tier", cfg.plex.delivery)] + [
        (f"apps[{i}].delivery.tier", app.delivery) for i, app in enumerate(cfg.apps)]
    for key, delivery in deliveries:
        if delivery.tier is not None and delivery.tier not in tiers:
            problems.append(f"{source}: {PROJECT}:{key}: {json.dumps(delivery.tier)}: not a tier; "
                            f"hint: one of {', '.join(tiers)}")
    # An image's digest must belong to its tag (components/images.py keeps the record).
    from components.images import PLEX_REPOSITORY, pin_problem

    pins = [("plex.imageDigest", PLEX_REPOSITORY, cfg.plex.imageTag, cfg.plex.imageDigest)] + [
        (f"apps[{i}].imageDigest", *app.image.rsplit(":", 1), app.imageDigest) for i, app in enumerate(cfg.apps)]
    for key, repository, tag, digest in pins:
        why = pin_problem(repository, tag, digest)
        if why:
            problems.append(f"{source}: {PROJECT}:{key}: {json.dumps(digest)}: {why}")
    # Each app gets a namespace and a Flux Kustomization of its own name.
    taken = {"plex": "plex", "intel-gpu-plugin": "the GPU plugin", **{t: "a tier" for t in tiers}}
    for i, app in enumerate(cfg.apps):
        if app.name in taken:
            problems.append(f"{source}: {PROJECT}:apps[{i}].name: {json.dumps(app.name)}: already the name of "
                            f"{taken[app.name]}; each app gets a namespace and a Flux Kustomization of that name; "
                            "hint: choose another name")
        taken.setdefault(app.name, f"apps[{i}]")
    return problems


_PATTERN_MEANING = {
    FLUX_DURATION_PATTERN: "a Flux duration such as 30s, 10m or 1h30m",
    FLUX_VAR_NAME_PATTERN: "a Flux variable name: letters, digits and '_', not starting with a digit",
    DNS1123_LABEL: "a DNS-1123 label: lowercase letters, digits and '-', at most 63",
    DNS1123_SUBDOMAIN: "a DNS-1123 name: lowercase letters, digits, '-' and '.'",
    LABEL_KEY: "a Kubernetes label key",
    LABEL_VALUE: "a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.'",
}


def _pattern_problem(pattern: str) -> str:
    meaning = _PATTERN_MEANING.get(pattern)
    return f"must be {meaning} ({pattern})" if meaning else f"must match {pattern}"


def _format_loc(loc: tuple[Any, ...]) -> str:
    # A key from the file is shown escaped: a line break or control character in it must not break the line.
    head, *rest = [escaped(str(part)) for part in loc] or ["(root)"]
    key = f"{PROJECT}:{head}"
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def _shown(value: Any, limit: int = 80) -> str:
    """A value as an error line shows it: JSON, cut after `limit` characters (a value may be kilobytes long)."""
    if isinstance(value, dict):
        return "{…}"
    # A string keeps its printable characters (é, ²) and escapes the rest; anything else is ASCII JSON.
    try:
        text = f'"{escaped(value)}"' if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):  # keys of mixed types, a structure too deep
        text = escaped(repr(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…\" ({len(value)} characters)" if isinstance(value, str) else f"{text[:limit]}…"


# Where strict types refuse a look-alike (`true` for a number, "1000" for 1000), say what to write instead.
_TYPE_PROBLEMS = {
    "int_type": "must be a whole number, not a string, a boolean or a decimal; hint: write the number unquoted",
    "bool_type": "must be true or false; hint: write true or false unquoted",
}


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose field `loc[-1]` would be (for "did you mean" on an unknown key)."""
    from typing import get_args

    def find(annotation: Any) -> type[BaseModel] | None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        return next((m for m in map(find, get_args(annotation)) if m is not None), None)

    model: type[BaseModel] | None = StackConfig
    for part in loc[:-1]:
        if isinstance(part, int) or str(part).isdigit():
            continue
        field = model.model_fields.get(str(part)) if model is not None else None
        model = find(field.annotation) if field is not None else None
    return model


def _unknown_key_hint(loc: tuple[Any, ...]) -> str:
    model = _model_at(loc)
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1) if model and loc else []
    return f"did you mean {close[0]}?" if close else "check its spelling against components/config.py"


def format_validation_error(source: str, error: ValidationError) -> list[str]:
    lines = []
    for err in error.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if not str(part).startswith("function-") and part != "[key]")
        if err["type"] == "missing":
            lines.append(f"{source}: {_format_loc(loc)}: missing: this key is required; hint: add it (every key, "
                         "its type and default: components/config.py)")
            continue
        value = err.get("input")
        shown = _shown(value)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; hint: {_unknown_key_hint(loc)}"
        elif err["type"] == "string_pattern_mismatch":
            msg = f"{_pattern_problem(err['ctx']['pattern'])}; hint: write a value of that form"
        elif err["type"] in _TYPE_PROBLEMS:
            msg = _TYPE_PROBLEMS[err["type"]]
        if "; hint: " not in msg:
            msg += "; hint: see the key's type in components/config.py"
        lines.append(f"{source}: {_format_loc(loc)}: {shown}: {msg}")
    return lines


def parse_stack_config(raw: dict[str, Any], source: str, stack: str | None = None) -> StackConfig:
    """Validate the project's config keys (without the `gpu-platform:` prefix). Raises ConfigError."""
    try:
        cfg = StackConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None
    stack = stack or source.removeprefix("Pulumi.").removesuffix(".yaml")
    problems = cross_field_problems(cfg, source, stack)
    if problems:
        raise ConfigError(problems)
    return cfg


def _decode(value: Any) -> Any:
    # The Pulumi engine hands structured config over as JSON text; plain strings stay strings.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def project_config(config: dict[str, Any], secret_keys: set[str] | list[str], source: str) -> dict[str, Any]:
    """The `gpu-platform:*` keys of an engine config map, prefix stripped and decoded. Raises ConfigError for
    secret keys (secrets are referenced by name, SOPS in the GitOps repo, never carried in config)."""
    prefix = f"{PROJECT}:"
    raw: dict[str, Any] = {}
    errors: list[str] = []
    for key in sorted(config):
        if not key.startswith(prefix):
            continue
        if key in secret_keys:
            errors.append(f"{source}: {key}: (secret): secret config is refused; hint: reference a Secret by name")
            continue
        raw[key[len(prefix):]] = _decode(config[key])
    if errors:
        raise ConfigError(errors)
    return raw


def load_stack_config() -> StackConfig:
    """Read every `gpu-platform:*` key the engine passed in, so unknown keys are caught, not ignored."""
    source = f"Pulumi.{pulumi.get_stack()}.yaml"
    raw = project_config(pulumi.runtime.config.CONFIG.get(), pulumi.runtime.config._SECRET_KEYS.get(), source)
    return parse_stack_config(raw, source, pulumi.get_stack())
