"""Typed stack configuration: every value that differs between clusters, validated before any resource exists.

The values live in `Pulumi.<stack>.yaml` under the project's namespace (`gpu-platform:`) and reach the
program through Pulumi's config system, so `pulumi preview` and the offline export read the same data.
Errors are shaped like onedr0p/cluster-template's: `file: key: value: problem; hint`, one line each.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pulumi
from policy.rules import flag
from pydantic import (
    AfterValidator,
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


class ConfigError(pulumi.RunError):
    """A user mistake in stack config. `pulumi.RunError` makes the Pulumi CLI print it without a traceback."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


def _no_latest(tag: str) -> str:
    if tag == "latest":
        raise ValueError("the tag 'latest' is not a pin; hint: use an exact version tag")
    return tag


def _no_health_management(args: list[str]) -> list[str]:
    for arg in args:
        name, _ = flag(arg)
        # -health-management starts a Level-Zero sidecar that opens the device itself and brings the EPERM back.
        if name == "health-management":
            raise ValueError(
                "'-health-management' is refused: its Level-Zero sidecar opens /dev/dri and hits the device "
                "cgroup EPERM; hint: remove it"
            )
        if name == "shared-dev-num":
            raise ValueError("set the shared device count with 'sharedDevNum', not in 'extraArgs'")
    return args


NodeName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
Dns1123Label = Annotated[str, StringConstraints(pattern=DNS1123_LABEL)]
FluxDuration = Annotated[str, StringConstraints(pattern=FLUX_DURATION_PATTERN)]
RepoPath = Annotated[str, StringConstraints(pattern=r"^\./([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+$")]
FluxVarName = Annotated[str, StringConstraints(pattern=FLUX_VAR_NAME_PATTERN)]
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE)]
ImageTag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"), AfterValidator(_no_latest)]
Sha256Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")]
IPv4 = Annotated[str, StringConstraints(pattern=r"^((25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])$")]
PluginArg = Annotated[str, StringConstraints(pattern=r"^-[A-Za-z][-A-Za-z0-9]*(=[^\s]+)?$")]


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

    @model_validator(mode="after")
    def _context_only_for_cluster(self) -> KubernetesConfig:
        if self.mode == "cluster" and not self.context:
            raise ValueError("mode 'cluster' needs 'context' (a kubeconfig context name)")
        if self.mode == "render" and self.context:
            raise ValueError("'context' is only used with mode 'cluster'")
        return self


class IntelGpuPluginConfig(Strict):
    imageDigest: Sha256Digest | None = None
    # 1 device per container: a higher count is a lie the scheduler believes, with no GPU partitioning behind it.
    sharedDevNum: Annotated[int, Field(ge=1, le=64)] = 1
    sharedDevNumReason: str | None = None
    extraArgs: Annotated[list[PluginArg], AfterValidator(_no_health_management)] = []

    @model_validator(mode="after")
    def _shared_needs_reason(self) -> IntelGpuPluginConfig:
        if self.sharedDevNum > 1 and not (self.sharedDevNumReason or "").strip():
            raise ValueError(
                f"sharedDevNum {self.sharedDevNum} needs 'sharedDevNumReason': more than 1 lets several pods "
                "share one iGPU with no partitioning behind it"
            )
        return self


EXTERNAL_KUSTOMIZATIONS = ("cilium", "platform", "platform-config", "apps-wave-0", "apps-wave-1")


class FluxConfig(Strict):
    gitRepository: Dns1123Label = "flux-system"
    namespace: Dns1123Label = "flux-system"
    bootstrapKustomization: Dns1123Label = "flux-system"
    # Paths of the Kustomizations whose content this program does not own (hand-written in the GitOps repo).
    externalPaths: dict[Dns1123Label, RepoPath]
    clusterVars: dict[FluxVarName, str]

    @model_validator(mode="after")
    def _every_external_path(self) -> FluxConfig:
        missing = sorted(set(EXTERNAL_KUSTOMIZATIONS) - set(self.externalPaths))
        extra = sorted(set(self.externalPaths) - set(EXTERNAL_KUSTOMIZATIONS))
        if missing:
            raise ValueError(f"externalPaths lacks {', '.join(missing)}; hint: one path per external Kustomization")
        if extra:
            raise ValueError(
                f"externalPaths names {', '.join(extra)}, not an external Kustomization; allowed: "
                + ", ".join(EXTERNAL_KUSTOMIZATIONS)
            )
        return self


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


class PlexHardwareConfig(Strict):
    gpu: Literal["none", "intel-quicksync"] = "none"
    # How intel-quicksync reaches the iGPU. `auto`: the device plugin's resource once evidence/<stack>.yaml proves
    # every node advertises it, else the legacy hostPath (a known no-op: node visible, EPERM on open).
    # `device-plugin` is a request the evidence gate refuses without proof; `host-path` holds back on purpose.
    intelGpuAccess: Literal["auto", "host-path", "device-plugin"] = "auto"

    @model_validator(mode="after")
    def _access_needs_gpu(self) -> PlexHardwareConfig:
        if self.gpu == "none" and self.intelGpuAccess != "auto":
            raise ValueError(f"intelGpuAccess '{self.intelGpuAccess}' needs gpu 'intel-quicksync'")
        return self


class PlexConfig(Strict):
    imageTag: ImageTag
    timezone: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$")]
    uid: Annotated[int, Field(ge=1, le=65535)] = 1000
    gid: Annotated[int, Field(ge=1, le=65535)] = 1000
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
    head, *rest = [str(part) for part in loc] or ["(root)"]
    key = f"{PROJECT}:{head}"
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def format_validation_error(source: str, error: ValidationError) -> list[str]:
    lines = []
    for err in error.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if not str(part).startswith("function-") and part != "[key]")
        if err["type"] == "missing":
            lines.append(f"{source}: {_format_loc(loc)}: missing: this key is required")
            continue
        value = err.get("input")
        shown = json.dumps(value, sort_keys=True) if not isinstance(value, dict) else "{…}"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key; hint: check its spelling against components/config.py"
        elif err["type"] == "string_pattern_mismatch":
            msg = _pattern_problem(err["ctx"]["pattern"])
        lines.append(f"{source}: {_format_loc(loc)}: {shown}: {msg}")
    return lines


def parse_stack_config(raw: dict[str, Any], source: str) -> StackConfig:
    """Validate the project's config keys (without the `gpu-platform:` prefix). Raises ConfigError."""
    try:
        return StackConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None


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
    return parse_stack_config(raw, source)
