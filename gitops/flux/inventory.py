"""What Flux's walk of a repository found (kustomize-controller keeps it as each Kustomization's inventory): the
Kustomizations it reached, the objects each applies, and the one identity of an object, `ObjectId`."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from model.safe_yaml import as_list, as_mapping, escaped

FLUX_GROUP = "kustomize.toolkit.fluxcd.io"
# Kinds without a namespace: targetNamespace leaves them alone (kustomize's list of built-in cluster-scoped kinds,
# plus the cluster-scoped CRDs a home cluster commonly carries).
CLUSTER_SCOPED = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterIssuer", "ClusterRole", "ClusterRoleBinding",
    "ComponentStatus", "CSIDriver", "CSINode", "CustomResourceDefinition", "FlowSchema", "IngressClass",
    "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume", "PodSecurityPolicy",
    "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "StorageClass", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration", "VolumeAttachment",
    "ClusterPolicy", "CiliumClusterwideNetworkPolicy", "CiliumLoadBalancerIPPool", "ClusterSecretStore",
})


@dataclass(frozen=True, order=True)
class ObjectId:
    """What Kubernetes identifies an object by (the version is not part of it)."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> ObjectId:
        api = str(manifest.get("apiVersion", ""))
        meta = as_mapping(manifest.get("metadata"))
        return cls(api.rpartition("/")[0], str(manifest.get("kind", "")), str(meta.get("namespace") or ""),
                   str(meta.get("name", "")))

    def __str__(self) -> str:  # escaped: the names come from the repository and go into one-line problems
        return escaped(f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}")


KsKey = tuple[str, str]  # (namespace, name)


def show_key(key: KsKey) -> str:
    return escaped(f"{key[0]}/{key[1]}")


class Variables(dict[str, str | None]):
    """A Kustomization's variables, name -> value (None: a Secret's, unknown here). `unread` names the Secrets and
    ExternalSecrets it substitutes from whose keys the repository does not show (a Secret made outside it, an
    ExternalSecret's `dataFrom`): a name not among the variables may still be one of theirs. True (Flux
    substitutes) when it has a variable or such a source."""

    unread: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return len(self) > 0 or bool(self.unread)


@dataclass
class WalkedKustomization:
    key: KsKey
    path: str  # repository folder ('' = root); for a non-walked one the spec.path as written
    declared_in: str  # the file holding the Kustomization object ('' for the bootstrap root)
    parent: KsKey | None
    spec: dict[str, Any]
    status: str = "built"  # built | external (path not in the repository) | other-source | failed
    error: str = ""
    objects: list[ObjectId] = field(default_factory=list)
    variables: Variables = field(default_factory=Variables)
    # The spec as its file declares it; `spec` is what Flux applies (the parent's patches and fields applied).
    declared_spec: dict[str, Any] | None = None

    @property
    def shown_path(self) -> str:
        """The path as a spec writes it, normalised once (`./a/b`), whether the walk built it or not."""
        path = posixpath.normpath(self.path.removeprefix("./") or ".")
        return "./" if path == "." else f"./{path}"

    @property
    def changed_by_parent(self) -> list[str]:
        """The spec's fields the parent changed (`postBuild.substituteFrom`, `timeout`, …), sorted; empty: none."""
        if self.declared_spec is None:
            return []
        return sorted(_changed_paths(self.declared_spec, self.spec))

    @property
    def depends(self) -> tuple[KsKey, ...]:
        out = []
        for d in as_list(self.spec.get("dependsOn")):
            if isinstance(d, dict) and d.get("name"):
                out.append((str(d.get("namespace") or self.key[0]), str(d["name"])))
        return tuple(out)


@dataclass
class FluxView:
    """The walk's answer. `applied_by[id]`: the Kustomizations applying that object, in walk order."""

    bootstrap: KsKey
    kustomizations: dict[KsKey, WalkedKustomization] = field(default_factory=dict)
    applied_by: dict[ObjectId, list[KsKey]] = field(default_factory=dict)
    manifests: dict[ObjectId, dict[str, Any]] = field(default_factory=dict)
    origins: dict[ObjectId, str] = field(default_factory=dict)
    # The file each Kustomization applies an object from: an object applied twice may come from two files.
    sources: dict[tuple[ObjectId, KsKey], str] = field(default_factory=dict)
    trails: dict[tuple[ObjectId, KsKey], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # stable one-line texts (compared before/after an export)
    # What the walk cannot tell from the repository (a Secret's keys kept in a secret store): said, never refused
    unsure: list[str] = field(default_factory=list)
    kubectl_builds: int = 0


def _changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    """Dotted paths where `new` differs from `old`, down to the first level below spec where lists are replaced
    wholesale (a strategic-merge patch on a custom resource replaces a list, it does not merge it)."""
    if isinstance(old, dict) and isinstance(new, dict) and path.count(".") < 1:
        out = []
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                out += _changed_paths(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out
    return [path] if old != new else []


def is_flux_kustomization(manifest: Mapping[str, Any]) -> bool:
    return manifest.get("kind") == "Kustomization" and \
        str(manifest.get("apiVersion", "")).startswith(FLUX_GROUP + "/")
