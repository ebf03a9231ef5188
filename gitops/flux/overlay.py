"""A Flux Kustomization's own build fields (patches, images, namePrefix/nameSuffix, components, targetNamespace,
commonMetadata), as kustomize-controller adds them to what its path builds: the overlay kustomization kubectl builds
over the folder, and each object of that build named at the file (and trail) its plain build gave it, read from
kustomize's origin annotation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gitops.flux.documents import BuildError, Built, PlainVarLoader
from model.safe_yaml import DocumentsError, as_list, as_mapping, out_loader, yaml_documents

# The fields of a Flux Kustomization's spec that kustomize-controller adds to the kustomization it builds
# (fluxcd/pkg/kustomize, Generator.GenerateManifest; targetNamespace too, handled on its own); commonMetadata is set
# on every object after the build (ssautil.SetCommonMetadata).
FLUX_OVERLAY_FIELDS = ("patches", "images", "namePrefix", "nameSuffix", "components")
ORIGIN_ANNOTATION = "config.kubernetes.io/origin"


def overlay_kustomization(resources: list[str], fields: dict[str, Any], target: str | None,
                          where: str) -> dict[str, Any]:
    """The overlay's kustomization without its components: `resources` (the folder, or what Flux's generated
    kustomization lists), the spec's fields, origin annotations on. `where` names the file declaring the spec."""
    doc: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                           "resources": resources, "buildMetadata": ["originAnnotations"]}
    if target:
        doc["namespace"] = target
    for key in ("namePrefix", "nameSuffix", "images"):
        if key in fields:
            doc[key] = fields[key]
    if "patches" in fields:
        doc["patches"] = _patches(fields["patches"], where)
    return doc


def _patches(given: Any, where: str) -> list[dict[str, Any]]:
    patches = []
    for i, patch in enumerate(as_list(given)):
        if not isinstance(patch, dict) or not isinstance(patch.get("patch"), str):
            raise BuildError(f"{where}: spec.patches[{i}]: Flux takes an inline `patch` string (and an optional "
                             "target) only")
        try:  # kustomize's own error would name the folder it builds, never the file holding the patch
            body = yaml.load(patch["patch"], Loader=out_loader(patch["patch"], PlainVarLoader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" (line {mark.line + 1} of the patch)" if mark is not None else ""
            raise BuildError(f"{where}: spec.patches[{i}].patch: not valid YAML"
                             f"{at}: {getattr(exc, 'problem', None) or 'unreadable'}") from None
        except (RecursionError, ValueError):
            raise BuildError(f"{where}: spec.patches[{i}].patch: not readable as YAML") from None
        if not isinstance(body, (dict, list)):
            raise BuildError(f"{where}: spec.patches[{i}].patch: neither a strategic merge patch (a mapping) nor a "
                             "JSON6902 patch (a list of operations)")
        patches.append({k: v for k, v in patch.items() if k in ("patch", "target")})
    return patches


def without_origin(manifest: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """An object of the overlay's build with kustomize's origin annotation taken off (every other annotation kept),
    and the path that annotation gives, relative to the overlay's folder (None where it names no file)."""
    annotations = dict(as_mapping(as_mapping(manifest.get("metadata")).get("annotations")))
    path = _origin_path(annotations.pop(ORIGIN_ANNOTATION, None))
    meta = dict(as_mapping(manifest.get("metadata")))
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**manifest, "metadata": meta}, path


def _origin_path(annotation: Any) -> str | None:
    """The `path` of kustomize's origin annotation, a YAML mapping it writes (path, repo, ref, configuredIn, ...);
    None where it names no file (an object a generator made)."""
    try:
        docs = yaml_documents(annotation.encode()) if isinstance(annotation, str) else ()
    except DocumentsError:
        return None
    path = as_mapping(next(iter(docs), None)).get("path")
    return path if isinstance(path, str) else None


def attributed(manifest: dict[str, Any], origin: str, folder: str, plain: list[Built], prefix: str, suffix: str,
               declared_in: str) -> Built:
    """One object of the overlay's build (from `origin`, or the `folder` where no file is known), with the trail and
    the object as declared of its counterpart in the folder's plain build; without one, it came by the spec."""
    plain_match = counterpart(manifest, origin, plain, prefix, suffix)
    if plain_match is not None and origin == folder:
        origin = plain_match.origin
    trail = plain_match.trail if plain_match is not None else ((declared_in, "spec (Flux's own fields)"),)
    declared = plain_match.manifest if plain_match is not None else None
    return Built(manifest, origin, trail, declared if declared != manifest else None)


def counterpart(manifest: Mapping[str, Any], origin: str, plain: list[Built], prefix: str,
                suffix: str) -> Built | None:
    """The object of the folder's plain build that `manifest` (from the build with the Kustomization's own fields)
    came from: same kind, same name once namePrefix/nameSuffix are taken off, from the same file where known."""
    name = str(as_mapping(manifest.get("metadata")).get("name", ""))
    bare = name[len(prefix):len(name) - len(suffix) or None] \
        if prefix + suffix and name.startswith(prefix) and name.endswith(suffix) else name
    same = [b for b in plain if b.manifest.get("kind") == manifest.get("kind")
            and as_mapping(b.manifest.get("metadata")).get("name") in (name, bare)]
    return next((b for b in same if b.origin == origin), same[0] if len(same) == 1 else None)


def with_common_metadata(manifest: dict[str, Any], labels: Mapping[str, Any],
                         annotations: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(as_mapping(manifest.get("metadata")))
    if labels:
        meta["labels"] = {**as_mapping(meta.get("labels")), **{str(k): str(v) for k, v in labels.items()}}
    if annotations:
        meta["annotations"] = {**as_mapping(meta.get("annotations")),
                               **{str(k): str(v) for k, v in annotations.items()}}
    return {**manifest, "metadata": meta}
