"""Typed stack configuration: every value that differs between clusters, validated before any resource exists.

The values live in `Pulumi.<stack>.yaml` under the project's namespace (`gpu-platform:`) and reach the
program through Pulumi's config system, so `pulumi preview` and the offline export read the same data.
Errors are shaped like onedr0p/cluster-template's: `file: key: value: problem; hint`, one line each.
"""

from __future__ import annotations

import difflib
import enum
import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from model.errors import RefusalError
from model.images import PLEX_REPOSITORY, pin_problem
from model.layout import ENTRY_NAME, Layout, is_within, repo_dir
from model.safe_yaml import escaped
from policy.rules import SHARED_DEV_NUM_REASON_ANNOTATION

PROJECT = "gpu-platform"

# Flux's own duration pattern (kustomize-controller v1 CRD, `interval`, `timeout`, `retryInterval`).
FLUX_DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
# Flux postBuild variable names (kustomize-controller docs): shell-style, no dashes, no dots.
FLUX_VAR_NAME_PATTERN = r"^[_a-zA-Z][_a-zA-Z0-9]*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# An optional DNS-subdomain prefix and '/', then the name part (at most 63 characters).
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
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


class ConfigError(RefusalError):
    """A user mistake in stack config (the program raises it to the Pulumi CLI as a RunError: no traceback)."""


# A rule between keys of one model (a model_validator) is refused at the key the user must change, not at the model:
# pydantic would place a plain ValueError at the model's own location and show its value as `{…}`. A validator
# raises key_rule(...), and format_validation_error extends the model's location by `key`.
KeyPath = tuple[str | int, ...]


class _Missing(enum.Enum):
    KEY = "missing"


MISSING = _Missing.KEY  # the value of a key the stack file does not set: the line shows `missing`


def key_rule(key: KeyPath, value: Any, problem: str, hint: str, also: KeyPath | None = None) -> PydanticCustomError:
    """The error a model validator raises for `key` (relative to its model) holding `value` (or MISSING): the line
    reads `<key>: <value>: <problem>[ (also <also>)]; hint: <hint>`; `also` names a second key of the same model."""
    return PydanticCustomError("key_rule", "{problem}",
                               {"key": key, "value": value, "problem": problem, "hint": hint, "also": also})


def _first_repeat(items: list[Any]) -> tuple[int, int] | None:
    """(first index, index of its first repeat) of the earliest item that repeats, or None."""
    seen: dict[Any, int] = {}
    for j, item in enumerate(items):
        if item in seen:
            return seen[item], j
        seen[item] = j
    return None


def _as_written(value: Any) -> Any:
    """A parsed value as a stack file writes it, for a key_rule line: a section as its keys, a dependsOn entry that
    names only a Kustomization in its shorthand (`cilium`)."""
    if isinstance(value, list):
        return [_as_written(v) for v in value]
    if isinstance(value, DependsOnRef) and value.namespace is None:
        return value.name
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


def _no_latest(tag: str) -> str:
    if tag == "latest":
        raise ValueError("the tag 'latest' is not a pin; hint: use an exact version tag")
    return tag


def _known_plugin_flags(args: list[str]) -> list[str]:
    # Every flag of the pinned gpu_plugin release is allowed or refused, with the upstream reason, in one table
    # (model/plugin_flags.py): -health-management and -xpumd-endpoint need a sidecar or a mount this DaemonSet
    # does not have, -shared-dev-num goes through sharedDevNum and its reason, unknown flags make the plugin exit.
    from model.plugin_flags import check_plugin_args

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
Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"),
                     fits_export_line()]
_OCTET = r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])"
IPv4 = Annotated[str, StringConstraints(pattern=rf"^({_OCTET}\.){{3}}{_OCTET}$")]
PluginArg = Annotated[str, StringConstraints(pattern=r"^--?[A-Za-z][-_A-Za-z0-9]*(=[^\s]+)?$"), fits_export_line()]
# Free text the export writes as a value (an annotation, a cluster variable): one line, bounded.
ExportedText = Annotated[str, fits_export_line()]
# Where a number or a boolean is meant, nothing else is taken: `true` is not 1, "1000" is not 1000.
StrictBool = Annotated[bool, Field(strict=True)]
# An object as the export names it in a refusal: `<Kind> <namespace>/<name>`, or `<Kind> <name>` for a cluster-scoped
# one (PersistentVolumeClaim plex/plex-config).
OBJECT_REF_PATTERN = r"^[A-Z][A-Za-z0-9]* ([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
ObjectRef = Annotated[str, StringConstraints(pattern=OBJECT_REF_PATTERN, max_length=400)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


class ClusterConfig(Strict):
    """The cluster's nodes, by the names Kubernetes knows them by (`kubectl get nodes`)."""

    # Every node of the cluster, each once. The GPU gate needs all of them in evidence/<stack>.yaml before an app may
    # request gpu.intel.com/i915 (one missing node would leave a pod Unschedulable there), `make verify-nodes` checks
    # these names, and the plugin's Kustomization timeout grows with their count (one image pull per node).
    nodes: Annotated[list[NodeName], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_nodes(self) -> ClusterConfig:
        first = _first_repeat(self.nodes)
        if first is not None:
            i, j = first
            raise key_rule(("nodes", j), self.nodes[j], "named twice", "name each node once", also=("nodes", i))
        return self


class KubernetesConfig(Strict):
    """How `pulumi up` reaches Kubernetes. Render mode writes YAML and needs no cluster."""

    # What the explicit provider does under the Pulumi CLI (the offline export ignores it). `render` (default): it
    # writes YAML to `renderDirectory` and talks to no cluster, so Flux stays the only thing that applies. `cluster`:
    # `pulumi up` applies to `context`, refused while fluxManagesCluster is true.
    mode: Literal["render", "cluster"] = "render"
    # Where render mode writes, one folder per stack below it (`<renderDirectory>/<stack>`), relative to the project.
    # This is the CLI's own tree (0-crd/, 1-manifest/, Secrets in plaintext), not the GitOps tree Flux reads: keep it
    # out of any repository. Default build/pulumi-render: under build/, which git ignores and `make clean` removes.
    renderDirectory: str = "build/pulumi-render"
    # The kubeconfig context mode 'cluster' applies to; required there, refused in render mode (it would suggest a
    # cluster is touched when none is). Default unset.
    context: str | None = None
    # Flux reconciles the cluster `context` names (default true). `pulumi up` with mode 'cluster' applies straight to
    # it, so Pulumi and Flux would fight over the same objects: mode 'cluster' is refused unless this is false.
    fluxManagesCluster: StrictBool = True

    @model_validator(mode="after")
    def _context_only_for_cluster(self) -> KubernetesConfig:
        if self.mode == "cluster" and not self.context:
            raise key_rule(("context",), MISSING if self.context is None else self.context,
                           "mode 'cluster' needs the kubeconfig context to apply to",
                           "add context: <a name from kubectl config get-contexts>, or use mode: render")
        if self.mode == "render" and self.context:
            raise key_rule(("context",), self.context, "only used with mode 'cluster'",
                           "remove it, or set mode: cluster")
        if self.mode == "cluster" and self.fluxManagesCluster:
            raise key_rule(("mode",), self.mode, "makes Pulumi apply straight to a cluster that Flux also reconciles, "
                           "so the two would fight over the same objects", "keep mode 'render' and let Flux apply the "
                           "export, or set fluxManagesCluster: false if Flux does not manage that cluster")
        return self


class IntelGpuPluginConfig(Strict):
    """The Intel GPU device plugin's DaemonSet (components/intel_gpu_plugin.py). No image or digest here: the
    plugin's tag and digest are pinned together in model/images.py, where Renovate bumps both."""

    # How many containers may be allocated one iGPU (the plugin's -shared-dev-num): each node advertises this many
    # gpu.intel.com/i915. Default 1, one container per iGPU: a higher count is a lie the scheduler believes, with
    # no GPU partitioning behind it.
    sharedDevNum: Annotated[int, Field(ge=1, le=64, strict=True)] = 1
    # Why the iGPU is shared: required when sharedDevNum is above 1, and exported as the DaemonSet's
    # gpu-platform.home.arpa/shared-dev-num-reason annotation, so reviewers and the policy pack see it. One line.
    sharedDevNumReason: ExportedText | None = None
    # More flags for the plugin (e.g. -v=4), each checked against the pinned release's flag table
    # (docs/plugin-flags.md): unknown flags are refused (the plugin would exit), -shared-dev-num goes through
    # sharedDevNum, -health-management and -xpumd-endpoint need a sidecar or mount this DaemonSet lacks. Default
    # none: the upstream defaults.
    extraArgs: Annotated[list[PluginArg], AfterValidator(_known_plugin_flags)] = []

    @model_validator(mode="after")
    def _shared_needs_reason(self) -> IntelGpuPluginConfig:
        if self.sharedDevNum > 1 and not (self.sharedDevNumReason or "").strip():
            raise key_rule(("sharedDevNumReason",), MISSING if self.sharedDevNumReason is None
                           else self.sharedDevNumReason,
                           f"sharedDevNum {self.sharedDevNum} lets several pods share one iGPU with no partitioning "
                           "behind it, so the reason is required",
                           "add sharedDevNumReason: <why the iGPU is shared>, or set sharedDevNum: 1")
        return self


class DependsOnRef(Strict):
    """A Flux `dependsOn` entry. `namespace` defaults to the depending Kustomization's own namespace."""

    # The metadata.name of the Kustomization to wait for.
    name: Dns1123Label
    # Its namespace; unset: the depending Kustomization's own (Flux's rule), so most entries need only a name.
    namespace: Dns1123Label | None = None


def _as_refs(value: Any) -> Any:
    # `dependsOn: [cilium]` is shorthand for `[{name: cilium}]`, as in a hand-written Kustomization.
    if isinstance(value, list):
        return [{"name": v} if isinstance(v, str) else v for v in value]
    return value


DependsOnList = Annotated[list[DependsOnRef], BeforeValidator(_as_refs)]


class SecretRef(Strict):
    """A Secret in the Kustomization's own namespace (Flux reads no other)."""

    # The Secret's name, e.g. sops-age: the age or GPG private key that kustomize-controller decrypts with.
    name: Dns1123Label


class DecryptionConfig(Strict):
    """Flux `spec.decryption`: SOPS-encrypted Secrets in the tier's folder are decrypted with this key."""

    # The decryption provider; Flux knows only sops, so it is the default and the only value.
    provider: Literal["sops"] = "sops"
    # The Secret holding the decryption key. Unset: kustomize-controller's own identity (a cloud KMS through
    # workload identity); a home cluster with age keys names its Secret here.
    secretRef: SecretRef | None = None


class HealthCheckConfig(Strict):
    """Flux `spec.healthChecks[]` (a NamespacedObjectKindReference)."""

    # The object's API group and version, e.g. apps/v1 or helm.toolkit.fluxcd.io/v2. Optional in Flux's schema;
    # give it, so the check names exactly one API.
    apiVersion: Annotated[str, StringConstraints(pattern=r"^([a-z0-9.-]+/)?v[0-9]+[a-z0-9]*$"),
                          fits_export_line()] | None = None
    # The object's kind, e.g. Deployment or HelmRelease: Flux waits until it reports Ready (up to the timeout).
    kind: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9]*$"), fits_export_line()]
    # The object's metadata.name.
    name: Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253), fits_export_line()]
    # The object's namespace; unset for a cluster-scoped object.
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

    # The Kustomization's metadata.name: other tiers' dependsOn, `cniTier` and a component's `delivery.tier` name it.
    name: Dns1123Label
    # `export` (default): the export writes this Kustomization with the fields below. `repository`: the repository
    # already declares it (per-app layouts); the export only refers to it and checks that Flux's walk reaches it.
    declaredBy: Literal["export", "repository"] = "export"
    # Default: flux.namespace.
    namespace: Dns1123Label | None = None
    # spec.path: the tier's hand-written folder, from the repository root (./kubernetes/prod/apps/wave-0). Required
    # when the export declares the tier, refused when the repository does; it must not overlap the export's folders,
    # or the tier would apply exported objects a second time.
    path: FluxPath | None = None
    # The Kustomizations this tier waits for (Ready) before it applies: `[cilium]` or `[{name, namespace}]`.
    dependsOn: DependsOnList = []
    # A tier that others depend on must wait, or 'Ready' says nothing about its workloads (graph rule).
    wait: StrictBool = True
    # How often Flux reconciles the tier (applies the folder again, undoing drift). Default 10m. A component that
    # joins the tier takes this interval too.
    interval: FluxDuration = "10m"
    # How long one apply, and with wait the tier's workloads becoming Ready, may take before Flux marks the tier
    # failed. Default 5m; a waiting tier's timeout must lie above the worst-case start of what it waits for.
    timeout: FluxDuration = "5m"
    # How soon Flux retries after a failed reconcile. Unset: at the next `interval` (Flux's default), so set it
    # shorter when a failure should not wait 10 minutes.
    retryInterval: FluxDuration | None = None
    # Flux deletes what was removed from the folder (default true); false leaves such objects running, unmanaged.
    prune: StrictBool = True
    decryption: DecryptionConfig | None = None
    healthChecks: list[HealthCheckConfig] = []
    # Every namespaced object of the folder is put into this namespace (spec.targetNamespace). Unset: each keeps
    # its own.
    targetNamespace: Dns1123Label | None = None

    @model_validator(mode="after")
    def _path_when_exported(self) -> TierConfig:
        if self.declaredBy == "export" and self.path is None:
            raise key_rule(("path",), MISSING, f"tier {self.name!r} is declared by the export, which writes its "
                           "Kustomization pointing at its hand-written folder",
                           "add path: ./<its folder>, e.g. ./kubernetes/prod/apps/wave-0, or set declaredBy: "
                           "repository if the repository declares that Kustomization")
        if self.declaredBy == "repository":
            exported_only = [k for k in ("path", "decryption", "targetNamespace", "retryInterval")
                             if getattr(self, k) is not None] + (["healthChecks"] if self.healthChecks else [])
            if exported_only:
                first, *others = exported_only
                held = first + (f" (and {', '.join(others)})" if others else "")
                raise key_rule((first,), _as_written(getattr(self, first)),
                               f"tier {self.name!r} is declared by the repository, so its hand-written Kustomization "
                               f"holds {held}", f"remove {'them' if others else 'it'} here, or set declaredBy: export")
        return self


class FluxConfig(Strict):
    """The cluster's Flux as the export meets it: the objects `flux bootstrap` made, where Flux's walk of the
    repository starts, the delivery graph's tiers and the cluster variables."""

    # The GitRepository source every exported Kustomization reads (sourceRef). Default flux-system: the one
    # `flux bootstrap` creates for the repository it bootstraps.
    gitRepository: Dns1123Label = "flux-system"
    # Flux's namespace: the exported Kustomizations and the cluster-vars ConfigMap live here, and it is a tier's
    # namespace unless the tier names one. Default flux-system, as `flux bootstrap` installs it.
    namespace: Dns1123Label = "flux-system"
    # The Kustomization `flux bootstrap` created: the root of Flux's walk of the repository (at bootstrapPath), and a
    # dependsOn target tiers may use without declaring it. Default flux-system, bootstrap's name for it.
    bootstrapKustomization: Dns1123Label = "flux-system"
    # The bootstrap Kustomization's spec.path, where Flux's walk of the repository starts. Default ./clusters/<stack>.
    bootstrapPath: FluxPath | None = None
    # The tier the GPU plugin depends on (and nothing else): pods need a network, nothing more.
    cniTier: Dns1123Label = "cilium"
    # The delivery graph's tiers, in order. See TierConfig.
    tiers: Annotated[list[TierConfig], Field(min_length=1)]
    # Written as `  NAME: value` lines of the cluster-vars ConfigMap: name and value count together (cross-field).
    # Not with layout: shared-base, where the repository's own cluster-vars holds them (default none).
    clusterVars: dict[FluxVarName, ExportedText] = {}

    @model_validator(mode="after")
    def _tiers_consistent(self) -> FluxConfig:
        names = [t.name for t in self.tiers]
        first = _first_repeat(names)
        if first is not None:
            i, j = first
            raise key_rule(("tiers", j, "name"), names[j], "declared twice", "one entry per tier", also=("tiers", i))
        if self.cniTier not in names:
            raise key_rule(("cniTier",), self.cniTier, f"not among the tiers ({', '.join(names)})",
                           "declare the CNI's Kustomization as a tier, or set cniTier to one of them")
        return self


class DeliveryConfig(Strict):
    """How Flux delivers a component: from its own Kustomization, which the export writes.
    `tier` (default apps-wave-0): the component joins that tier: same dependsOn, and every Kustomization that
    depends on the tier also depends on the component, so nothing after the tier starts before it is Ready.
    `dependsOn`: explicit dependencies instead (per-app layouts, where no wave waits for the app)."""

    # The tier (flux.tiers) the component joins: its Kustomization takes the tier's dependsOn, interval and
    # retryInterval, and whatever depends on the tier depends on the component too. Set this or dependsOn.
    tier: Dns1123Label | None = None
    # The Kustomizations the component's own waits for, instead of a tier: nothing that comes later waits for it.
    dependsOn: DependsOnList | None = None

    @model_validator(mode="after")
    def _one_of(self) -> DeliveryConfig:
        if self.tier is not None and self.dependsOn is not None:
            raise key_rule(("dependsOn",), _as_written(self.dependsOn), "set together with tier; a component joins "
                           "a tier or names its own dependsOn, not both", "remove dependsOn to join the tier, or "
                           "remove tier")
        if self.tier is None and self.dependsOn is None:
            raise key_rule(("tier",), MISSING, "neither tier nor dependsOn is set; a component joins a tier or names "
                           "its own dependsOn", "add tier: <a tier> or dependsOn: [...]")
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
    # the bootstrap path so the bootstrap Kustomization reaches it. Default clusters/<stack>/gpu-platform; with
    # layout: shared-base, the base folder every cluster's overlay includes (default clusters/base), whose
    # hand-written kustomization.yaml gets one entry per exported Kustomization.
    entryDir: RepoFolder | None = None
    # One folder per component below this one. Default components/<stack>; with layout: shared-base, the folder of
    # components authored once (default platform), where the export owns only its components' own folders.
    componentsDir: ComponentsFolder | None = None
    # 0 (default): list items unindented under their key, as kubectl and flux write them. 2: indented by two
    # spaces, as prettier and oxfmt write them; pick what the repository's formatter writes.
    sequenceIndent: Annotated[Literal[0, 2], BeforeValidator(_exact_int)] = 0
    # split (default): the entry holds every Kustomization, each component its own folder under componentsDir.
    # per-app: the shape of cluster-template's namespace folders: <entryDir>/<component>/ks.yaml beside
    # <entryDir>/<component>/app/, listed by <entryDir>/kustomization.yaml; componentsDir is then not used.
    # shared-base: one base for every cluster (R-ENV-02 of the repository the program was made for): every stack
    # naming the same entryDir exports together, its files written once; a value that differs between them becomes
    # a ${TOKEN} each overlay's cluster-vars sets; the entry's kustomization.yaml is the repository's, edited by one
    # line per Kustomization; the index, DELIVERY.md and POST-MERGE.md go to recordsDir.
    layout: Literal["split", "per-app", "shared-base"] = "split"
    # The export's bookkeeping (per stack: export-index.json, DELIVERY.md, POST-MERGE.md), a folder Flux never
    # applies. Only with layout: shared-base (split and per-app keep it in the entry folder): default gpu-platform,
    # one subfolder per stack.
    recordsDir: RepoFolder | None = None
    # Objects the export may replace on purpose (`PersistentVolumeClaim plex/plex-config`): a change Kubernetes will
    # not make in place (a claim's storage class, a selector, a Service's clusterIP, …) is refused unless its object
    # is listed here; listed, the export writes it and DELIVERY.md warns the reviewer. Remove the entry after the
    # merge: the next export says when one no longer replaces anything. Default: none.
    acceptReplacement: list[ObjectRef] = []


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


# --- GPU apps: one generic shape, Plex being one instance (components/gpu_app.py, components/plex.py) ------------

_IMAGE_PATTERN = \
    r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
ImageRef = Annotated[str, StringConstraints(pattern=_IMAGE_PATTERN),
    AfterValidator(lambda ref: ref.rsplit(":", 1)[0] + ":" + _no_latest(ref.rsplit(":", 1)[1])),
    fits_export_line(suffix=_DIGEST_SUFFIX, extra=-_IMAGE_KEY_SAVING, what=" with a digest")]
# An image the export writes on a line of its own (folded, a single word yamllint allows past its line length),
# so no line rule: a registry path as long as ghcr.io's for Intel's DRA driver fits.
OwnLineImageRef = Annotated[str, StringConstraints(pattern=_IMAGE_PATTERN, max_length=255),
                            AfterValidator(lambda ref: ref.rsplit(":", 1)[0] + ":" + _no_latest(ref.rsplit(":", 1)[1]))]
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


class GpuAppConfig(Strict):
    """One GPU app (components/gpu_app.py): its namespace with the app-policy labels, default-deny plus DNS egress,
    internet egress and its own ingress port, its PVCs, a Deployment whose GPU branch comes from the evidence gate,
    a Service, and a Flux Kustomization of its own. Hardened by default: no service-account token, every capability
    dropped (add back only what `capabilities` names), no privilege escalation, RuntimeDefault seccomp."""

    # The app's name: its namespace, Deployment, Service, Flux Kustomization and component folder (PVCs are
    # `<name>-<volume>`). It must not be plex, intel-gpu-plugin or a tier's name.
    name: Dns1123Label
    # repository:tag, Renovate-tracked where it is written; `imageDigest` pins it (the export refuses a digest
    # recorded for another tag).
    image: ImageRef
    # The sha256 digest of exactly `image`'s tag, written as `<image>@<digest>` so the pull cannot change under the
    # tag. Unset: the tag alone.
    imageDigest: Sha256Digest | None = None
    # The TCP port the app listens on: the container's and the Service's port, the ingress NetworkPolicy's and
    # the probes'.
    port: Port
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
    # policies key on, e.g. internet. Required: what a class allows is the cluster's, not this program's, to say.
    egressClass: LabelValue
    # The namespace's auth-mode label value (key: appPolicy.authModeLabel), which the cluster's ingress policies
    # key on, e.g. app-native (the app authenticates its users itself). Required, for the same reason.
    authMode: LabelValue
    # A LoadBalancer Service on this address (Cilium LB-IPAM); unset: ClusterIP.
    loadBalancerIp: IPv4 | None = None
    # Whether the app gets the iGPU, and by which route; the evidence gate decides what is exported.
    hardware: GpuHardwareConfig = GpuHardwareConfig()
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")

    @model_validator(mode="after")
    def _volumes_unique(self) -> GpuAppConfig:
        names = [v.name for v in self.volumes]
        first = _first_repeat(names)
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

    # The docker.io/plexinc/pms-docker tag, an exact version (Renovate bumps it); `latest` is refused: not a pin.
    imageTag: ImageTag
    # The digest of exactly this tag; the export refuses a digest recorded for another tag (model/images.py).
    imageDigest: Sha256Digest | None = None
    # Plex belongs to wave 0: apps-wave-1 does not start before Plex is Ready.
    delivery: DeliveryConfig = DeliveryConfig(tier="apps-wave-0")
    # The container's TZ, an IANA zone such as Europe/Berlin: the clock of Plex's scheduled tasks and its logs.
    timezone: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$"), fits_export_line()]
    # PLEX_UID: the user the image's init switches to and chowns /config and /transcode to. Default 1000, the
    # image's own and the uid the post-merge device test opens the iGPU as; match the owner of the media files.
    uid: Annotated[int, Field(ge=1, le=65535, strict=True)] = 1000
    # PLEX_GID: that user's group, which /config and /transcode get too. Default 1000, the image's own; match the
    # group of the media files.
    gid: Annotated[int, Field(ge=1, le=65535, strict=True)] = 1000
    # The LAN address clients reach Plex at: the LoadBalancer Service's IP (Cilium LB-IPAM) and ADVERTISE_IP
    # (http://<ip>:32400/). Required: no address is right for every LAN.
    advertiseIp: IPv4
    # The Secret (key `token`, in Plex's namespace, SOPS-encrypted in the repository) whose value becomes
    # PLEX_CLAIM, which links a new server to a Plex account. Read on first start only, so optional: later starts
    # need no Secret. Default plex-claim-token.
    claimTokenSecret: Dns1123Label = "plex-claim-token"
    # The egress-class label value of Plex's namespace, as an app's `egressClass` (e.g. internet: Plex needs
    # metadata, sign-in and remote access).
    egressClass: LabelValue
    # The auth-mode label value of Plex's namespace, as an app's `authMode` (e.g. app-native: Plex signs its users
    # in itself).
    authMode: LabelValue
    storage: PlexStorageConfig
    # Whether Plex transcodes on the iGPU, and by which route; the evidence gate decides what is exported.
    hardware: PlexHardwareConfig = PlexHardwareConfig()
    # export (default): the export writes Plex and its Kustomization. repository: the repository delivers Plex
    # (its own renderer, its own tier); the export writes no Plex object, and the program's Plex becomes the
    # reference the evidence gate holds the repository's Plex (as Flux's walk applies it) to: a request for
    # gpu.intel.com/i915 there without evidence for every stack is refused.
    deliveredBy: Literal["export", "repository"] = "export"


# The driver release this project's DRA route is written for (gpu-v0.11.0, 2026-06-10, the one its README marks
# supported, Kubernetes 1.34+); the hint when a stack on the route names no image.
DRA_DRIVER_IMAGE = "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0"


class DraDriverConfig(Strict):
    """Intel's GPU resource driver for Dynamic Resource Allocation (components/intel_gpu_dra.py), used with
    `gpu.route: dra`."""

    # repository:tag of the driver's kubelet plugin, e.g. the gpu-v0.11.0 release's
    # ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0. Required with route: dra,
    # with no default, and written with a `# renovate:` marker above it as an app's image is: the tag and the digest
    # below then sit in one file, and Renovate bumps them together.
    image: OwnLineImageRef | None = None
    # The sha256 digest of exactly `image`'s tag, as the registry reports it (`crane digest <image>`). Required with
    # route: dra: upstream's own base runs `:latest`, and this project could not read ghcr.io to record one; the
    # export never writes the driver without a digest.
    imageDigest: Sha256Digest | None = None
    # The kernel driver the nodes' iGPU is bound to, as the driver reports it in each device's `driver` attribute:
    # i915 (default, as the device plugin's gpu.intel.com/i915) or xe. The evidence gate requires it on every node.
    kernelDriver: Literal["i915", "xe"] = "i915"
    # Where the move from the device plugin stands (docs/dra.md): each stage is its own export, and the evidence gate
    # allows one only on evidence that the cluster reached the stage before it (model/dra/gate.py).
    # driver-added (step 1, default): the driver beside the plugin, nothing claims a device.
    # apps-on-claims (step 3): every GPU app the export delivers claims the iGPU through a ResourceClaimTemplate,
    #   its gpu.intel.com/i915 request removed in the same export; needs step 2's slice evidence.
    # plugin-removed (step 5): the device plugin is no longer exported; needs step 4's evidence that every claim is
    #   allocated and every app runs.
    stage: Literal["driver-added", "apps-on-claims", "plugin-removed"] = "driver-added"
    # The namespaces where a claim may ask for adminAccess (an app with hardware.draAllocation: admin-access, or a
    # repository's own, e.g. a GPU metrics exporter). Admin access reaches every device of the class, in use or not,
    # so the API server admits it only in a namespace labelled `resource.kubernetes.io/admin-access: "true"`: the
    # export labels the GPU app namespaces it writes, the repository labels any other it names here, and the export's
    # walk of the repository refuses that label, or an adminAccess claim, in a namespace not named here. Empty
    # (default): no admin access anywhere.
    adminAccessNamespaces: list[Dns1123Label] = []

    @property
    def pinned_image(self) -> str:
        return f"{self.image}@{self.imageDigest}"


class GpuConfig(Strict):
    """How GPU apps reach the iGPU, for the whole cluster (docs/dra.md)."""

    # device-plugin (default): the Intel GPU device plugin advertises gpu.intel.com/i915 and apps request it.
    # dra: Dynamic Resource Allocation (resource.k8s.io/v1, GA since Kubernetes 1.34): Intel's GPU resource driver
    # publishes a ResourceSlice per node, and apps claim a device. The move runs in steps, each its own export
    # (dra.stage), each allowed only on evidence of the one before.
    route: Literal["device-plugin", "dra"] = "device-plugin"
    dra: DraDriverConfig = DraDriverConfig()

    @model_validator(mode="after")
    def _dra_needs_its_pinned_image(self) -> GpuConfig:
        if self.route == "dra" and (self.dra.image is None or self.dra.imageDigest is None):
            problem = ("route: dra needs the driver's image and the sha256 digest of its tag: the export never "
                       "writes it by tag alone")
            if self.dra.image is None:
                raise key_rule(("dra", "image"), MISSING, problem,
                               f"add image: {DRA_DRIVER_IMAGE} (the release this project is written for) and "
                               "imageDigest: <the digest `crane digest <image>` gives>")
            raise key_rule(("dra", "imageDigest"), MISSING, problem,
                           f"add imageDigest: <the digest `crane digest {self.dra.image}` gives>")
        return self


class StackConfig(Strict):
    """Everything under `gpu-platform:` in a `Pulumi.<stack>.yaml`, one section per key."""

    # The cluster's nodes. Required: the GPU gate and the plugin's rollout timeout count them.
    cluster: ClusterConfig
    kubernetes: KubernetesConfig = KubernetesConfig()
    # The Intel GPU device plugin's DaemonSet; every default is the safe one (no sharing, no extra flags).
    intelGpuPlugin: IntelGpuPluginConfig = IntelGpuPluginConfig()
    # The route to the iGPU: the device plugin (default) or Dynamic Resource Allocation.
    gpu: GpuConfig = GpuConfig()
    # The cluster's Flux and the delivery graph. Required: the tiers and cluster variables are the repository's own.
    flux: FluxConfig
    appPolicy: AppPolicyConfig = AppPolicyConfig()
    plex: PlexConfig
    # More GPU apps, as config only (Plex is always there, from `plex`).
    apps: list[GpuAppConfig] = []
    gitops: GitopsConfig = GitopsConfig()


def cross_field_problems(cfg: StackConfig, source: str, stack: str) -> list[str]:
    """Rules across sections, reported with the key to change (a model_validator could only name the root)."""
    layout = Layout.of(stack, cfg.gitops, cfg.flux)
    return [f"{source}: {PROJECT}:{problem}" for problem in (
        *_folder_problems(cfg, layout), *_tier_path_problems(cfg, layout), *_cluster_var_problems(cfg),
        *_delivery_tier_problems(cfg), *_pin_problems(cfg), *_app_name_problems(cfg), *_admin_access_problems(cfg))]


# Each rule below gives `<key>: <value>: <problem>; hint: <fix>`; cross_field_problems prefixes the file and project.

def _folder_problems(cfg: StackConfig, layout: Layout) -> list[str]:
    """The export's two folders, as the layout places them."""
    if layout.shared_base:
        return _shared_base_problems(cfg, layout)
    if cfg.gitops.recordsDir is not None:
        return [f"gitops.recordsDir: {json.dumps(cfg.gitops.recordsDir)}: only used with layout: shared-base; the "
                "split and per-app layouts keep their records in the entry folder; hint: remove recordsDir"]
    if layout.per_app and cfg.gitops.componentsDir is not None:
        return [f"gitops.componentsDir: {json.dumps(cfg.gitops.componentsDir)}: not "
                "used with layout: per-app, where each component's folder is <entryDir>/<component>/app; "
                "hint: remove componentsDir, or use layout: split"]
    if is_within(layout.entry_dir, layout.components_dir) or is_within(layout.components_dir, layout.entry_dir):
        return [f"gitops.entryDir: {json.dumps(layout.entry_dir)}: overlaps "
                f"componentsDir {layout.components_dir!r}; hint: use two separate folders"]
    return []


def _shared_base_problems(cfg: StackConfig, layout: Layout) -> list[str]:
    """A shared base: the repository's cluster-vars is the only one, the folders apart, the overlay outside the base."""
    problems = []
    if cfg.flux.clusterVars:
        problems.append(f"flux.clusterVars: {json.dumps(sorted(cfg.flux.clusterVars))}: with layout: shared-base the "
                        "repository's own cluster-vars (its base and each overlay's patch) holds every cluster "
                        "variable, and the export writes only the keys it owns there; a second cluster-vars would "
                        "collide with it; hint: remove flux.clusterVars and keep those values in the overlays")
    records = repo_dir(cfg.gitops.recordsDir or ENTRY_NAME)
    bootstrap = repo_dir(layout.bootstrap_path)
    for name, folder in (("entryDir", layout.entry_dir), ("componentsDir", layout.components_dir)):
        if is_within(records, folder) or is_within(folder, records):
            problems.append(f"gitops.recordsDir: {json.dumps(records)}: overlaps {name} {folder!r}, which Flux "
                            "applies; the records are never applied; hint: a folder of their own, e.g. gpu-platform")
    if is_within(layout.entry_dir, layout.components_dir) or is_within(layout.components_dir, layout.entry_dir):
        problems.append(f"gitops.entryDir: {json.dumps(layout.entry_dir)}: overlaps componentsDir "
                        f"{layout.components_dir!r}; hint: use two separate folders")
    if is_within(bootstrap, layout.entry_dir):
        problems.append(f"flux.bootstrapPath: {json.dumps(layout.bootstrap_path)}: inside the shared base "
                        f"{layout.entry_dir!r}; each stack's bootstrap path is its overlay of the base; hint: "
                        "./clusters/<stack>")
    return problems


def _tier_path_problems(cfg: StackConfig, layout: Layout) -> list[str]:
    """A repository tier never applies a folder the export owns."""
    owned = layout.owned_folders()
    problems = []
    for i, tier in enumerate(cfg.flux.tiers):
        if tier.path is None:
            continue
        folder = repo_dir(tier.path)
        clash = next((o for o in owned if is_within(folder, o) or is_within(o, folder)), None)
        if clash is not None:
            problems.append(f"flux.tiers[{i}].path: {json.dumps(tier.path)}: overlaps "
                            f"{clash!r}, a folder the export owns, so the tier would apply exported objects a "
                            "second time; hint: point the tier at its hand-written folder")
    return problems


def _cluster_var_problems(cfg: StackConfig) -> list[str]:
    """Each cluster variable fits on one line of the exported ConfigMap."""
    problems = []
    for name, value in cfg.flux.clusterVars.items():
        width = len(f"{name}: ") + (exported_width(value) or 0)
        if width > MAX_EXPORTED_VALUE:
            problems.append(f"flux.clusterVars.{name}: {_shown(value)}: `{name}: <value>` is "
                            f"{width} characters as exported, above the {MAX_EXPORTED_VALUE} that fit on one "
                            f"{EXPORT_LINE_MAX}-character line (.yamllint.yaml) of the cluster-vars ConfigMap; "
                            f"hint: shorten the name or the value")
    return problems


def _delivery_tier_problems(cfg: StackConfig) -> list[str]:
    """A component joins a tier that exists."""
    tiers = [t.name for t in cfg.flux.tiers]
    deliveries = [("plex.delivery.tier", cfg.plex.delivery)] + [
        (f"apps[{i}].delivery.tier", app.delivery) for i, app in enumerate(cfg.apps)]
    return [f"{key}: {json.dumps(delivery.tier)}: not a tier; hint: one of {', '.join(tiers)}"
            for key, delivery in deliveries if delivery.tier is not None and delivery.tier not in tiers]


def _pin_problems(cfg: StackConfig) -> list[str]:
    """An image's digest must belong to its tag (model/images.py keeps the record)."""
    pins = [("plex.imageDigest", PLEX_REPOSITORY, cfg.plex.imageTag, cfg.plex.imageDigest)] + [
        (f"apps[{i}].imageDigest", *app.image.rsplit(":", 1), app.imageDigest) for i, app in enumerate(cfg.apps)]
    problems = []
    for key, repository, tag, digest in pins:
        why = pin_problem(repository, tag, digest)
        if why:
            problems.append(f"{key}: {json.dumps(digest)}: {why}")
    return problems


def _app_name_problems(cfg: StackConfig) -> list[str]:
    """Each app gets a namespace and a Flux Kustomization of its own name."""
    taken = {"plex": "plex", "intel-gpu-plugin": "the GPU plugin", **{t.name: "a tier" for t in cfg.flux.tiers}}
    problems = []
    for i, app in enumerate(cfg.apps):
        if app.name in taken:
            problems.append(f"apps[{i}].name: {json.dumps(app.name)}: already the name of "
                            f"{taken[app.name]}; each app gets a namespace and a Flux Kustomization of that name; "
                            "hint: choose another name")
        taken.setdefault(app.name, f"apps[{i}]")
    return problems


def _admin_access_problems(cfg: StackConfig) -> list[str]:
    """gpu.route: dra: a claim asking for adminAccess only in a namespace the stack names, which the export labels
    (the API server refuses such a claim anywhere else); a named namespace must be one the export writes."""
    if cfg.gpu.route != "dra":
        return []
    named = cfg.gpu.dra.adminAccessNamespaces
    apps = [("plex", "plex", cfg.plex.hardware)] + [(f"apps[{i}]", app.name, app.hardware)
                                                   for i, app in enumerate(cfg.apps)]
    problems = []
    for key, name, hardware in apps:
        if hardware.gpu != "none" and hardware.draAllocation == "admin-access" and name not in named:
            problems.append(f"{key}.hardware.draAllocation: \"admin-access\": an adminAccess claim in namespace "
                            f"{json.dumps(name)}, which gpu.dra.adminAccessNamespaces does not name, so the export "
                            "does not label it resource.kubernetes.io/admin-access: \"true\" and the API server "
                            f"would refuse the claim; hint: add {json.dumps(name)} to gpu.dra.adminAccessNamespaces, "
                            "or use draAllocation: exclusive")
    if len(set(named)) != len(named):
        problems.append("gpu.dra.adminAccessNamespaces: a namespace is named twice; hint: name each once")
    return problems


_PATTERN_MEANING = {
    FLUX_DURATION_PATTERN: "a Flux duration such as 30s, 10m or 1h30m",
    FLUX_VAR_NAME_PATTERN: "a Flux variable name: letters, digits and '_', not starting with a digit",
    DNS1123_LABEL: "a DNS-1123 label: lowercase letters, digits and '-', at most 63",
    DNS1123_SUBDOMAIN: "a DNS-1123 name: lowercase letters, digits, '-' and '.'",
    LABEL_KEY: "a Kubernetes label key",
    LABEL_VALUE: "a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.'",
    OBJECT_REF_PATTERN: "an object as `Kind namespace/name` (`Kind name` when cluster-scoped), e.g. "
                        "PersistentVolumeClaim plex/plex-config",
}


def _pattern_problem(pattern: str) -> str:
    meaning = _PATTERN_MEANING.get(pattern)
    return f"must be {meaning} ({pattern})" if meaning else f"must match {pattern}"


def _key_path(loc: tuple[Any, ...]) -> str:
    # A key from the file is shown escaped: a line break or control character in it must not break the line.
    head, *rest = [escaped(str(part)) for part in loc] or ["(root)"]
    key = head
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def _format_loc(loc: tuple[Any, ...]) -> str:
    return f"{PROJECT}:{_key_path(loc)}"


def _key_rule_line(source: str, loc: tuple[Any, ...], ctx: dict[str, Any]) -> str:
    """A key_rule error: at the key the rule names below the model that raised it, in the rule's own words."""
    value = "missing" if ctx["value"] is MISSING else _shown(ctx["value"])
    also = f" (also {_key_path(loc + tuple(ctx['also']))})" if ctx.get("also") else ""
    return f"{source}: {_format_loc(loc + tuple(ctx['key']))}: {value}: {ctx['problem']}{also}; hint: {ctx['hint']}"


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
    return f"did you mean {close[0]}?" if close else "check its spelling against docs/config.md"


def format_validation_error(source: str, error: ValidationError) -> list[str]:
    lines = []
    for err in error.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if not str(part).startswith("function-") and part != "[key]")
        if err["type"] == "key_rule":
            lines.append(_key_rule_line(source, loc, err.get("ctx", {})))
            continue
        if err["type"] == "missing":
            lines.append(f"{source}: {_format_loc(loc)}: missing: this key is required; hint: add it (every key, "
                         "its type and default: docs/config.md)")
            continue
        value = err.get("input")
        shown = _shown(value)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; hint: {_unknown_key_hint(loc)}"
        elif err["type"] == "string_pattern_mismatch":
            msg = f"{_pattern_problem(err.get('ctx', {}).get('pattern', ''))}; hint: write a value of that form"
        elif err["type"] in _TYPE_PROBLEMS:
            msg = _TYPE_PROBLEMS[err["type"]]
        if "; hint: " not in msg:
            msg += "; hint: see the key's type in docs/config.md"
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

