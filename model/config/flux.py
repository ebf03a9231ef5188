"""The stack's `flux:` section: the objects `flux bootstrap` made, the delivery graph's tiers and the cluster
variables; and how a component is delivered (DeliveryConfig), which Plex and every GPU app name."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, StringConstraints, model_validator

from model.config.errors import MISSING, first_repeat, key_rule
from model.config.line_width import fits_export_line
from model.config.values import (
    DNS1123_SUBDOMAIN,
    Dns1123Label,
    ExportedText,
    FluxDuration,
    FluxVarName,
    RepoPath,
    Strict,
    StrictBool,
)


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
        first = first_repeat(names)
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
