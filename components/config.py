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

    apiVersion: Annotated[str, StringConstraints(pattern=r"^([a-z0-9.-]+/)?v[0-9]+[a-z0-9]*$")] | None = None
    kind: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9]*$")]
    name: Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
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
    wait: bool = True
    interval: FluxDuration = "10m"
    timeout: FluxDuration = "5m"
    retryInterval: FluxDuration | None = None
    prune: bool = True
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
    clusterVars: dict[FluxVarName, str]

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


class GitopsConfig(Strict):
    """Where the export writes inside the GitOps repository, and how its YAML is formatted."""

    # The export's Flux entry point (Kustomizations, cluster-vars, its own kustomization.yaml). It must lie inside
    # the bootstrap path so the bootstrap Kustomization reaches it. Default clusters/<stack>/gpu-platform.
    entryDir: RepoFolder | None = None
    # One folder per component below this one. Default components/<stack>.
    componentsDir: RepoFolder | None = None
    # 0 (default): list items unindented under their key, as kubectl and flux write them. 2: indented by two
    # spaces, as prettier and oxfmt write them; pick what the repository's formatter writes.
    sequenceIndent: Literal[0, 2] = 0


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
    # Plex belongs to wave 0: apps-wave-1 does not start before Plex is Ready.
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")
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
    tier = cfg.plex.delivery.tier
    if tier is not None and tier not in tiers:
        problems.append(f"{source}: {PROJECT}:plex.delivery.tier: {json.dumps(tier)}: not a tier; "
                        f"hint: one of {', '.join(tiers)}")
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
