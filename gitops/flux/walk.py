"""Flux's view of a GitOps repository: which Flux Kustomization applies each object. From the bootstrap
Kustomization (`flux-system`, path `./clusters/<stack>`) the walk follows every Flux Kustomization a build holds
to that one's `spec.path`, as kustomize-controller does (tests/fixtures/repos/FLUX-FACTS.md): the path built
(build.py), then postBuild substitution with the Kustomization's own variables (inline `substitute`, then
`substituteFrom` ConfigMaps and Secrets in its namespace; a Secret's keys are known here, not its values) and
`targetNamespace`. A path not in the repository (a fresh export folder) is external: reported, not walked.
It reads through a `RepoView` (OUT plus the export's writes, minus its prunes), so it answers for the tree as it
will be, before anything is written; it never leaves OUT.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitops.flux.build import Builder, RepoView, join_path
from gitops.flux.documents import BuildError, Built
from gitops.flux.inventory import FluxView, KsKey, ObjectId, WalkedKustomization, is_flux_kustomization, show_key
from gitops.flux.overlay import FLUX_OVERLAY_FIELDS
from gitops.flux.varsub import substitute, unresolved_variables, variables_of
from model.safe_yaml import as_mapping


def walk_from_bootstrap(view: RepoView, bootstrap_path: str, bootstrap: KsKey = ("flux-system", "flux-system"),
                        git_repository: KsKey = ("flux-system", "flux-system")) -> FluxView:
    """Walk the repository from the bootstrap Kustomization as kustomize-controller would: discover every
    Kustomization it reaches and build each one's path, then attribute every built object to what applies it."""
    result = FluxView(bootstrap=bootstrap)
    builder = Builder(view)
    try:
        raw = _discover(view, builder, result, bootstrap_path, git_repository)
    finally:
        builder.close()
        result.kubectl_builds = builder.kubectl_builds
    _attribute(result, raw)
    return result


def _discover(view: RepoView, builder: Builder, result: FluxView, bootstrap_path: str,
              git_repository: KsKey) -> dict[KsKey, list[Built]]:
    """Breadth first from the bootstrap Kustomization: each one's path built (or its status set), the Flux
    Kustomizations in that build queued as its children. Returns what each built Kustomization's build holds."""
    bootstrap = result.bootstrap
    raw: dict[KsKey, list[Built]] = {}
    root = WalkedKustomization(key=bootstrap, path=bootstrap_path, declared_in="", parent=None, spec={})
    queue = [root]
    while queue:
        ks = queue.pop(0)
        result.kustomizations[ks.key] = ks
        built = _build_path(view, builder, ks)
        if built is not None and ks is root:
            _take_own_spec(root, built)
            if root.key != result.bootstrap:  # found by its path: the walk's root is that object
                del result.kustomizations[result.bootstrap]
                result.bootstrap = root.key
                result.kustomizations[root.key] = root
            # The repository's GitRepository is the one the bootstrap reads, whatever the stack file calls Flux's
            # namespace: a tier of that source in another namespace is still the repository's, and is followed.
            git_repository = _source_key(root.spec, root.key) or git_repository
            if _shapes_build(root.spec):
                # Flux builds the bootstrap's path with the spec of the bootstrap's own object (gotk-sync.yaml),
                # its patches and other build fields included; the first build was only to find that object.
                built = _build_path(view, builder, root)
        if built is None:
            continue
        raw[ks.key] = built
        if _substitution_fails(ks, raw):
            continue  # Flux fails it before applying anything: its children are never applied
        for b in built:
            if not is_flux_kustomization(b.manifest):
                continue
            key = _ks_key(b.manifest)
            if key in result.kustomizations or any(q.key == key for q in queue):
                continue  # the bootstrap's own object, or applied twice: the attribution reports it
            queue.append(_child(ks, key, b, git_repository))
    return raw


def _substitution_fails(ks: WalkedKustomization, raw: dict[KsKey, list[Built]]) -> bool:
    """Flux fails this Kustomization before applying anything: a `substituteFrom` names nothing built so far. An
    undefined variable fails it only under strict substitution; by default Flux applies the empty text and goes on,
    so the walk refuses the variable (one line) and still follows what the Kustomization applies."""
    problems: list[str] = []
    variables_of(ks, [b.manifest for built in raw.values() for b in built], problems)
    return bool(problems)


def _ks_key(manifest: Mapping[str, Any]) -> KsKey:
    meta = as_mapping(manifest.get("metadata"))
    return (str(meta.get("namespace") or ""), str(meta.get("name", "")))


def _source_key(spec: Mapping[str, Any], key: KsKey) -> KsKey | None:
    src = as_mapping(spec.get("sourceRef"))
    if src.get("kind", "GitRepository") != "GitRepository" or not src.get("name"):
        return None
    return (str(src.get("namespace") or key[0]), str(src["name"]))


def _take_own_spec(root: WalkedKustomization, built: list[Built]) -> None:
    """The bootstrap's spec and file, from its own object in its build (gotk-sync.yaml); none when it is not there.
    Found by its key, else by its name and its path being the walk's root: a stack file that placed Flux in another
    namespace must not make the real bootstrap object a child that applies the whole root a second time (the root
    then takes that object's key)."""
    own = next((b for b in built if is_flux_kustomization(b.manifest) and _ks_key(b.manifest) == root.key), None)
    if own is None:
        own = next((b for b in built if is_flux_kustomization(b.manifest) and _ks_key(b.manifest)[1] == root.key[1]
                    and join_path("", str(as_mapping(b.manifest.get("spec")).get("path") or "./").removeprefix("./")
                                  or ".") == root.path), None)
        if own is not None:
            root.key = _ks_key(own.manifest)
    if own is not None:
        root.spec = dict(as_mapping(own.manifest.get("spec")))
        root.declared_in = own.origin


def _shapes_build(spec: Mapping[str, Any]) -> bool:
    """The spec has a field that changes what its path builds into (Builder.flux_build applies them)."""
    return any(spec.get(k) for k in (*FLUX_OVERLAY_FIELDS, "targetNamespace", "commonMetadata"))


def _build_path(view: RepoView, builder: Builder, ks: WalkedKustomization) -> list[Built] | None:
    """What kustomize-controller builds from the Kustomization's path, or None with its status set (not built:
    another source, a path outside the repository or not in it, a failing build)."""
    if ks.status != "built":
        return None
    folder = join_path("", ks.path.removeprefix("./") or ".")
    if folder is None:
        ks.status, ks.error = "failed", f"spec.path {ks.path!r} leaves the repository"
        return None
    ks.path = folder
    if not view.is_dir(folder):
        ks.status = "external"
        return None
    try:
        return builder.flux_build(folder, ks.spec, ks.declared_in)
    except BuildError as exc:
        ks.status, ks.error = "failed", str(exc)
        return None


def _child(parent: WalkedKustomization, key: KsKey, b: Built, git_repository: KsKey) -> WalkedKustomization:
    spec = dict(as_mapping(b.manifest.get("spec")))
    child = WalkedKustomization(key=key, path=str(spec.get("path") or "./"), declared_in=b.origin,
                                parent=parent.key, spec=spec,
                                declared_spec=dict(as_mapping(b.declared.get("spec"))) if b.declared else None)
    if _source_key(spec, key) != git_repository:
        child.status = "other-source"
    return child


def _attribute(result: FluxView, raw: dict[KsKey, list[Built]]) -> None:
    """Every built object, with its variables substituted, to the Kustomization that applies it; the failed builds
    and the unresolved variables as problems."""
    everything = [b.manifest for built in raw.values() for b in built]
    for key, ks in result.kustomizations.items():
        if ks.status == "failed":
            result.problems.append(f"{show_key(key)} ({ks.declared_in or 'bootstrap'}): build fails: {ks.error}; "
                                   "Flux would fail this Kustomization and everything that depends on it; hint: fix "
                                   "the file named, and see kustomize's own answer with `kubectl kustomize "
                                   f"--load-restrictor LoadRestrictionsNone {ks.shown_path}`")
        if key not in raw:
            continue
        ks.variables = variables_of(ks, everything, result.problems, result.unsure)
        for b in raw[key]:
            # Flux substitutes only where the Kustomization has variables: without any, `${VAR}` stays as written
            manifest = substitute(b.manifest, ks.variables) if ks.variables else b.manifest
            oid = ObjectId.of(manifest)
            ks.objects.append(oid)
            result.applied_by.setdefault(oid, []).append(key)
            result.manifests.setdefault(oid, manifest)
            result.origins.setdefault(oid, b.origin)
            result.sources[(oid, key)] = b.origin
            result.trails[(oid, key)] = b.trail
            for path, name in unresolved_variables(b.manifest, ks.variables) if ks.variables else ():
                if ks.variables.unread:
                    result.unsure.append(
                        f"{b.origin} ({oid}): {path}: ${{{name}}} is not among the variables the repository shows "
                        f"for {show_key(key)}, which applies it ({', '.join(sorted(ks.variables)) or 'none'}); the "
                        f"program cannot tell whether {', '.join(ks.variables.unread)} gives it (its keys are not in "
                        "the repository); if not, Flux's strict substitution would fail the whole Kustomization; "
                        "hint: give the variable a default (${VAR:=value}), or list the key in an ExternalSecret's "
                        "spec.data so the walk can check it")
                    continue
                result.problems.append(
                    f"{b.origin} ({oid}): {path}: ${{{name}}} is not defined for {show_key(key)}, which applies it "
                    f"(its variables: {', '.join(sorted(ks.variables)) or 'none'}); Flux's strict substitution "
                    "would fail the whole Kustomization; hint: define it in the ConfigMap or Secret that "
                    "Kustomization substitutes from, or give it a default (${VAR:=value})")
