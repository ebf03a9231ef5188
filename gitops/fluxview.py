"""Flux's view of a GitOps repository: which Flux Kustomization applies each object.

The walk does what kustomize-controller does (facts in tests/fixtures/repos/FLUX-FACTS.md, from fluxcd/pkg's
generator and the Kustomization v1 CRD), starting from the bootstrap Kustomization (`flux-system`, path
`./clusters/<stack>`) and following every Flux Kustomization its build contains to that one's `spec.path`:

- a folder holding kustomization.yaml/.yml/Kustomization is built by kustomize with load restrictions off;
- a folder without one gets Flux's generated kustomization: every .yaml/.yml file below it, recursively, except
  that a sub-folder holding a kustomization file is one resource and is not descended into;
- then postBuild substitution with the Kustomization's own variables (inline `substitute`, then `substituteFrom`
  ConfigMaps and Secrets in its namespace; a Secret's values are unknown here, its keys are not) and
  `targetNamespace`;
- a path that does not exist in the repository (a fresh export folder) is external: reported, not walked.

Where a kustomization is a plain list of local resources (every file the export writes, and most hand-written
tier folders), it is built in this process; anything more (patches, components, generators, remote bases) goes
to `kubectl kustomize --load-restrictor LoadRestrictionsNone`. tests/gitops/test_fluxview.py holds the in-process build
to kubectl's answer on every fixture folder.

The walk reads the repository through a `RepoView`: the files in OUT plus the files an export is about to write,
minus those it is about to prune, so it answers for the tree as it will be, before anything is written. It never
follows a symlink and never leaves OUT; kubectl, when the view differs from the disk, reads a mirror of the view
kept under OUT's work folder and removed afterwards.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import posixpath
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from model.layout import WORK_DIR
from model.safe_yaml import (
    MAX_EXPANDED_NODES,
    DocumentsError,
    escaped,
    expanded_size,
    yaml_documents,
)

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
KUSTOMIZE_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
FLUX_GROUP = "kustomize.toolkit.fluxcd.io"
SKIP_AT_ROOT = {".git", WORK_DIR}
SUBSTITUTE_ANNOTATION = "kustomize.toolkit.fluxcd.io/substitute"
KUBECTL_TIMEOUT_SECONDS = 120
# The fields of a Flux Kustomization's spec that kustomize-controller adds to the kustomization it builds
# (fluxcd/pkg/kustomize, Generator.GenerateManifest; targetNamespace too, handled on its own); commonMetadata is set
# on every object after the build (ssautil.SetCommonMetadata).
FLUX_OVERLAY_FIELDS = ("patches", "images", "namePrefix", "nameSuffix", "components")
ORIGIN_ANNOTATION = "config.kubernetes.io/origin"
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
# ${NAME} or ${NAME<operator>…}; `$${…}` is Flux's escape for a literal.
VAR_REF = re.compile(r"(?<!\$)\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*")
DEFAULT_OPERATORS = (":=", ":-", "=", "-")


class BuildError(Exception):
    """kustomize or Flux's generator would fail on this folder; the message names the file and the cause."""


def _map(value: Any) -> dict[str, Any]:
    """Everything read here comes from files under OUT, untrusted: a field that should be a mapping and is not
    counts as absent (the schema checks of Flux and kustomize would reject it; the walk must not crash on it)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


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
        meta = _map(manifest.get("metadata"))
        return cls(api.rpartition("/")[0], str(manifest.get("kind", "")), str(meta.get("namespace") or ""),
                   str(meta.get("name", "")))

    def __str__(self) -> str:  # escaped: the names come from the repository and go into one-line problems
        return escaped(f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}")


KsKey = tuple[str, str]  # (namespace, name)


def show_key(key: KsKey) -> str:
    return escaped(f"{key[0]}/{key[1]}")


# --- the repository as it will be ----------------------------------------------------------------------------

class RepoView:
    """OUT's files plus `writes`, minus `deletes` (paths relative to OUT, `/`-separated). A symlink is followed
    where it stays inside OUT, as Flux follows it inside its source's folder; one that leads out of OUT (or nowhere)
    is no file and no folder, and reading it is refused, as Flux's confined filesystem refuses it."""

    def __init__(self, root: Path, writes: Mapping[str, bytes] | None = None, deletes: set[str] | None = None):
        # Absolute (never resolved through a link): the mirror's links and kubectl's messages are read from
        # another folder than the one OUT was named from (`--out ../home-ops`).
        self.root = root.absolute()
        self.writes = dict(writes or {})
        self.deletes = set(deletes or ()) - set(self.writes)
        self._dirs_written: set[str] = set()
        for rel in self.writes:
            parts = rel.split("/")[:-1]
            for i in range(len(parts) + 1):
                self._dirs_written.add("/".join(parts[:i]))
        self._real: dict[str, bool] = {}
        self._real_root = os.path.realpath(self.root)

    @property
    def changed(self) -> bool:
        return bool(self.writes or self.deletes)

    def _on_disk(self, rel: str) -> Path | None:
        """The disk path of `rel` when it resolves inside OUT, symlinks followed, else None."""
        if rel not in self._real:
            real = os.path.realpath(self.root / rel)
            self._real[rel] = real == self._real_root or real.startswith(self._real_root + os.sep)
        return self.root / rel if self._real[rel] else None

    def leads_out(self, rel: str) -> bool:
        """`rel` is a symlink (or lies below one) that leads out of OUT or to nothing."""
        return rel not in self.writes and os.path.lexists(self.root / rel) and \
            (self._on_disk(rel) is None or not (self.root / rel).exists())

    def resolved(self, rel: str) -> str:
        """`rel` with its symlinks resolved, relative to OUT ('' for OUT itself): one folder reached two ways is
        one folder (a cycle through a symlink is a cycle)."""
        if rel in self._dirs_written or self._on_disk(rel) is None:
            return rel  # the export's own folder, or a link that leads out (nothing is read through it)
        real = os.path.relpath(os.path.realpath(self.root / rel), self._real_root).replace(os.sep, "/")
        return "" if real == "." else real

    def is_file(self, rel: str) -> bool:
        if rel in self.writes:
            return True
        if rel in self.deletes:
            return False
        p = self._on_disk(rel)
        return p is not None and p.is_file()

    def is_dir(self, rel: str) -> bool:
        if rel in self._dirs_written:
            return True
        p = self._on_disk(rel)
        return p is not None and p.is_dir()

    def read(self, rel: str) -> bytes:
        if rel in self.writes:
            return self.writes[rel]
        p = self._on_disk(rel)
        if rel not in self.deletes and self.leads_out(rel):
            raise PermissionError(errno.EACCES, "a symlink that leads out of the repository or to nothing", rel)
        if p is None or rel in self.deletes:
            raise FileNotFoundError(rel)
        return p.read_bytes()

    def listdir(self, rel: str, linked_dirs: bool = False) -> tuple[list[str], list[str]]:
        """(sub-folders, files) of `rel`, sorted by name. A linked folder is left out unless `linked_dirs` (Flux's
        generated kustomization never enters one: filepath.Walk does not follow links); a linked file is a file,
        read through its link (reading one that leads out of OUT is refused)."""
        dirs: set[str] = set()
        files: set[str] = set()
        p = self._on_disk(rel)
        if p is not None and p.is_dir():
            with os.scandir(p) as entries:
                for e in entries:
                    if not rel and e.name in SKIP_AT_ROOT:
                        continue
                    if e.is_dir():
                        if linked_dirs or not e.is_symlink():
                            dirs.add(e.name)
                    else:
                        files.add(e.name)
        prefix = f"{rel}/" if rel else ""
        for w in self.writes:
            if w.startswith(prefix):
                head, sep, _ = w[len(prefix):].partition("/")
                (dirs if sep else files).add(head)
        files -= {f for f in files if f"{prefix}{f}" in self.deletes}
        return sorted(dirs), sorted(files)

    def kustomization_file(self, rel: str) -> str | None:
        for name in KUSTOMIZE_FILES:
            candidate = f"{rel}/{name}" if rel else name
            if self.is_file(candidate):
                return candidate
        return None

    @contextmanager
    def on_disk(self) -> Iterator[Path]:
        """A real folder holding the view, for kubectl: OUT itself when the view adds nothing, else a mirror under
        OUT's work folder (folders real, unchanged files as symlinks into OUT, new files written)."""
        if not self.changed:
            yield self.root
            return
        mirror = self.root / WORK_DIR / f"flux-view.{os.getpid()}"
        shutil.rmtree(mirror, ignore_errors=True)
        try:
            self._mirror("", mirror)
            yield mirror
        finally:
            shutil.rmtree(mirror, ignore_errors=True)
            try:
                (self.root / WORK_DIR).rmdir()
            except OSError:
                pass  # holds an export in flight

    def _mirror(self, rel: str, target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        dirs, files = self.listdir(rel, linked_dirs=True)
        for f in files:
            r = f"{rel}/{f}" if rel else f
            if r in self.writes:
                (target / f).write_bytes(self.writes[r])
            else:
                os.symlink(self.root / r, target / f)
        for d in dirs:
            r = f"{rel}/{d}" if rel else d
            if (self.root / r).is_symlink() and not any(w.startswith(f"{r}/") for w in self.writes):
                os.symlink(self.root / r, target / d)
            else:
                self._mirror(r, target / d)


# --- building one path ---------------------------------------------------------------------------------------

@dataclass
class Built:
    manifest: dict[str, Any]
    origin: str  # the file it came from, or the folder kubectl built
    # The (kustomization file, resources entry) pairs that brought it into the build, outermost first.
    trail: tuple[tuple[str, str], ...] = ()
    # The object as its file declares it, where the applying Kustomization's own fields (patches, …) changed it
    declared: dict[str, Any] | None = None


class PlainVar(str):
    """A scalar holding `${VAR}` that kustomize writes plain. Flux substitutes the YAML text of each object as
    kustomize wrote it and reads it again, so `id: ${CLUSTER_ID}` becomes the number 2. Quotes in the repository do
    not keep it a string: kustomize drops the quotes of `"${CLUSTER_ID}"` (nothing there needs them), so it becomes 2
    as well (flux build 2.9.5 prints `id: 2` for both). Only what kustomize must quote (`${A}: b`, a line break)
    stays a string."""


class _PlainVarLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _construct_str(loader: Any, node: Any) -> str:
    value = loader.construct_scalar(node)
    return PlainVar(value) if "${" in value and _written_plain(value) else value


def _written_plain(text: str) -> bool:
    """kustomize (go-yaml v3, a port of libyaml as PyYAML's emitter is) writes this string without quotes."""
    return not yaml.safe_dump(text, width=1 << 20).startswith(("'", '"', "|", ">"))


_PlainVarLoader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def _load_docs(data: bytes, where: str) -> list[dict[str, Any]]:
    try:
        docs = yaml_documents(data)  # the checked reader: sizes, aliases, errors as one line
        if b"${" in data:  # read again, the same way, keeping which `${VAR}` scalars are plain
            docs = tuple(yaml.load_all(data, Loader=_PlainVarLoader))
    except DocumentsError as exc:
        raise BuildError({
            "invalid": f"{where}: not valid YAML ({exc.problem})",
            "unreadable": f"{where}: not readable as YAML ({exc.problem})",
        }.get(exc.reason, f"{where}: a document that expands to more than {MAX_EXPANDED_NODES} values through its "
                          "aliases; no manifest needs that (a YAML alias bomb?)")) from None
    out = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
            raise BuildError(f"{where}: failed to decode Kubernetes YAML: a document without apiVersion and kind")
        out.append(doc)
    return out


def _plain_resources(doc: Any) -> list[str] | None:
    """The resources of a kustomization that only lists local files and folders, else None (kubectl builds it)."""
    if not isinstance(doc, dict) or set(doc) - {"apiVersion", "kind", "resources"}:
        return None
    if doc.get("kind", "Kustomization") != "Kustomization" or \
            str(doc.get("apiVersion", "kustomize.config.k8s.io/v1beta1")) != "kustomize.config.k8s.io/v1beta1":
        return None
    resources = doc.get("resources") or []
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        return None
    if any("://" in r or r.startswith(("github.com/", "git@")) or "?ref=" in r for r in resources):
        return None
    return resources


def _kind_name(manifest: Mapping[str, Any]) -> tuple[str, str]:
    return str(manifest.get("kind", "")), str(_map(manifest.get("metadata")).get("name", ""))


def _join(folder: str, relative: str) -> str | None:
    """`relative` resolved against `folder` inside the repository; None when it escapes it."""
    joined = posixpath.normpath(posixpath.join(folder or ".", relative))
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == ".." or joined.startswith("/"):
        return None
    return joined


# kubectl's log prefix on its last line: `E1203 11:47:47.328723   30467 run.go:72] "command failed" err=`
_KLOG_PREFIX = re.compile(r'^[EWIF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] (?:"command failed" err=)?')


class Builder:
    def __init__(self, view: RepoView) -> None:
        self.view = view
        self.kubectl_builds = 0
        self._disk: Any = None
        self._disk_root: Path | None = None
        self.overlays = 0

    def close(self) -> None:
        if self._disk is not None:
            self._disk.__exit__(None, None, None)
            self._disk = None
        if self.overlays:
            shutil.rmtree(self.view.root / WORK_DIR / f"flux-overlay.{os.getpid()}", ignore_errors=True)
            try:
                (self.view.root / WORK_DIR).rmdir()
            except OSError:
                pass  # holds an export in flight

    def _disk_path(self) -> Path:
        if self._disk is None:
            self._disk = self.view.on_disk()
            self._disk_root = self._disk.__enter__()
        assert self._disk_root is not None
        return self._disk_root

    def _read(self, rel: str) -> bytes:
        try:
            return self.view.read(rel)
        except OSError as exc:
            raise BuildError(f"{rel}: cannot be read ({exc.strerror or type(exc).__name__})") from None

    def flux_build(self, folder: str, spec: Mapping[str, Any], declared_in: str = "") -> list[Built]:
        """What kustomize-controller builds for a Kustomization with this spec at `folder`: the folder's build with
        the spec's own kustomize fields (FLUX_OVERLAY_FIELDS, targetNamespace) added, as fluxcd/pkg's generator
        adds them to the folder's kustomization, then commonMetadata on every object."""
        overlay = {k: spec[k] for k in FLUX_OVERLAY_FIELDS if spec.get(k)}
        target = spec.get("targetNamespace")
        target = target if isinstance(target, str) and target else None
        plain = self.flux_path(folder)
        if overlay or target:  # kustomize's namespace transformer does more than set metadata.namespace
            built = self._overlay(folder, plain, overlay, target, declared_in)
        else:
            built = plain
        meta = _map(spec.get("commonMetadata"))
        if meta:
            built = [Built(_with_common_metadata(b.manifest, _map(meta.get("labels")), _map(meta.get("annotations"))),
                           b.origin, b.trail) for b in built]
        return built

    def _overlay(self, folder: str, plain: list[Built], fields: dict[str, Any], target: str | None,
                 declared_in: str) -> list[Built]:
        """The folder built by kubectl under an overlay holding the spec's fields. An overlay, not an edit of the
        folder's kustomization as Flux makes it: the walk never writes into the repository. Each object keeps the
        origin and trail its plain build gave (kustomize's origin annotations say which file it came from)."""
        self._confine(folder)
        root = self._disk_path()
        here = self.view.root / WORK_DIR / f"flux-overlay.{os.getpid()}" / str(self.overlays)
        self.overlays += 1
        here.mkdir(parents=True)
        doc = self._overlay_doc(folder, fields, target, declared_in, root, here)
        (here / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        prefix, suffix = str(fields.get("namePrefix") or ""), str(fields.get("nameSuffix") or "")
        out = [self._attributed(b.manifest, folder, plain, prefix, suffix, declared_in, root, here)
               for b in self._kubectl_at(here, folder, ())]
        return self._check_ids(out, f"{folder or '.'} (with {declared_in or 'its Kustomization'}'s spec)")

    def _overlay_doc(self, folder: str, fields: dict[str, Any], target: str | None, declared_in: str, root: Path,
                     here: Path) -> dict[str, Any]:
        """The overlay's kustomization: the folder (or what Flux's generated kustomization lists) as its resources,
        the spec's fields, origin annotations on."""
        if self.view.kustomization_file(folder):
            resources = [os.path.relpath(root / folder, here) if folder else os.path.relpath(root, here)]
        else:  # Flux's generated kustomization: what _generated reads, files and folders holding a kustomization
            resources = [os.path.relpath(root / entry, here) for entry in self._generated_entries(folder)]
        doc: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                               "resources": resources, "buildMetadata": ["originAnnotations"]}
        if target:
            doc["namespace"] = target
        for key in ("namePrefix", "nameSuffix", "images"):
            if key in fields:
                doc[key] = fields[key]
        if "patches" in fields:
            patches = []
            for i, patch in enumerate(_list(fields["patches"])):
                if not isinstance(patch, dict) or not isinstance(patch.get("patch"), str):
                    raise BuildError(f"{declared_in or folder}: spec.patches[{i}]: Flux takes an inline `patch` "
                                     "string (and an optional target) only")
                try:  # kustomize's own error would name the folder it builds, never the file holding the patch
                    body = yaml.load(patch["patch"], Loader=_PlainVarLoader)
                except yaml.YAMLError as exc:
                    where = getattr(exc, "problem_mark", None)
                    at = f" (line {where.line + 1} of the patch)" if where is not None else ""
                    raise BuildError(f"{declared_in or folder}: spec.patches[{i}].patch: not valid YAML"
                                     f"{at}: {getattr(exc, 'problem', None) or 'unreadable'}") from None
                except (RecursionError, ValueError):
                    raise BuildError(f"{declared_in or folder}: spec.patches[{i}].patch: not readable as YAML") \
                        from None
                if not isinstance(body, (dict, list)):
                    raise BuildError(f"{declared_in or folder}: spec.patches[{i}].patch: neither a strategic merge "
                                     "patch (a mapping) nor a JSON6902 patch (a list of operations)")
                patches.append({k: v for k, v in patch.items() if k in ("patch", "target")})
            doc["patches"] = patches
        components = []
        for component in _list(fields.get("components")):
            joined = _join(self.view.resolved(folder), str(component))
            if joined is None:
                raise BuildError(f"{declared_in or folder}: spec.components: {component!r}: leaves the repository")
            if not self.view.is_dir(joined):
                raise BuildError(f"{declared_in or folder}: spec.components: {component!r}: no such folder")
            self._confine(joined)
            components.append(os.path.relpath(root / joined, here))
        if components:
            doc["components"] = components
        return doc

    def _attributed(self, manifest: dict[str, Any], folder: str, plain: list[Built], prefix: str, suffix: str,
                    declared_in: str, root: Path, here: Path) -> Built:
        """One object of the overlay's build, its origin annotation taken off and read: the file it came from, the
        trail and the object as declared from its counterpart in the plain build."""
        annotations = dict(_map(_map(manifest.get("metadata")).get("annotations")))
        origin_text = annotations.pop(ORIGIN_ANNOTATION, None)
        origin = folder
        if isinstance(origin_text, str):
            found = re.search(r"^path: (.+)$", origin_text, re.M)
            if found:
                resolved = os.path.normpath(os.path.join(here, found.group(1).strip().strip("'\"")))
                candidate = os.path.relpath(resolved, root).replace(os.sep, "/")
                origin = candidate if self.view.is_file(candidate) else folder
        meta = dict(_map(manifest.get("metadata")))
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
        manifest = {**manifest, "metadata": meta}
        plain_match = _counterpart(manifest, origin, plain, prefix, suffix)
        if plain_match is not None and origin == folder:
            origin = plain_match.origin
        trail = plain_match.trail if plain_match is not None else ((declared_in, "spec (Flux's own fields)"),)
        declared = plain_match.manifest if plain_match is not None else None
        return Built(manifest, origin, trail, declared if declared != manifest else None)

    def flux_path(self, folder: str) -> list[Built]:
        """What Flux builds for a Kustomization whose spec.path is `folder`."""
        if self.view.kustomization_file(folder):
            return self.kustomize(folder)
        return self._check_ids(self._generated(folder), f"{folder or '.'} (Flux's generated kustomization)")

    def _generated_entries(self, folder: str) -> list[str]:
        out: list[str] = []
        dirs, files = self.view.listdir(folder)
        out += [f"{folder}/{f}" if folder else f for f in files if f.endswith((".yaml", ".yml"))]
        for d in dirs:
            rel = f"{folder}/{d}" if folder else d
            out += [rel] if self.view.kustomization_file(rel) else self._generated_entries(rel)
        return out

    def _generated(self, folder: str) -> list[Built]:
        out: list[Built] = []
        dirs, files = self.view.listdir(folder)
        for f in files:
            if f.endswith((".yaml", ".yml")):
                rel = f"{folder}/{f}" if folder else f
                out += [Built(d, rel) for d in _load_docs(self._read(rel), rel)]
        for d in dirs:
            rel = f"{folder}/{d}" if folder else d
            out += self.kustomize(rel) if self.view.kustomization_file(rel) else self._generated(rel)
        return out

    def kustomize(self, folder: str, trail: tuple[tuple[str, str], ...] = ()) -> list[Built]:
        kfile = self.view.kustomization_file(folder)
        if kfile is None:
            raise BuildError(f"{folder}: kustomize needs a kustomization.yaml in a folder it is asked to build")
        every = [f"{folder}/{name}" if folder else name for name in KUSTOMIZE_FILES
                 if self.view.is_file(f"{folder}/{name}" if folder else name)]
        if len(every) > 1:
            raise BuildError(f"{folder or '.'}: found multiple kustomization files ({', '.join(every)}); kustomize "
                             "and Flux refuse to build the folder")
        doc = self._kustomization_doc(kfile, detailed=True)
        resources = _plain_resources(doc)
        if resources is None:
            return self._kubectl(folder, trail + ((kfile, "(kustomize build)"),))
        out: list[Built] = []
        base = self.view.resolved(folder)
        for entry in resources:
            rel = _join(base, entry)  # kustomize resolves entries from the folder's real path
            step = trail + ((kfile, entry),)
            if rel is None:
                raise BuildError(f"{kfile}: resources: {entry!r}: leaves the repository")
            if self.view.is_file(rel):
                out += [Built(d, rel, step) for d in _load_docs(self._read(rel), rel)]
            elif self.view.is_dir(rel):
                on_the_way = [posixpath.dirname(k) for k, _ in step]
                real_way = [self.view.resolved(d) for d in on_the_way]
                if self.view.resolved(rel) in real_way:  # kustomize refuses a cycle; following it would never end
                    at = real_way.index(self.view.resolved(rel))
                    cycle = " -> ".join(f"{d or '.'}/" for d in [*on_the_way[at:], rel])
                    raise BuildError(f"{kfile}: resources: {entry!r}: a cycle of kustomizations ({cycle}); kustomize "
                                     "refuses to build it")
                out += self.kustomize(rel, step)
            elif self.view.leads_out(rel):
                raise BuildError(f"{kfile}: resources: {entry!r}: a symlink that leads out of the repository (or to "
                                 "nothing); Flux's confined filesystem refuses to read it")
            else:
                raise BuildError(f"{kfile}: resources: {entry!r}: no such file or folder")
        return self._check_ids(out, kfile)

    def _kustomization_doc(self, kfile: str, detailed: bool) -> Any:
        """The one document of a kustomization file (kustomize reads one): a second document is a YAML error, as
        is an alias bomb. `detailed`: the parser's reason in the line (kubectl's own error names it otherwise)."""
        try:
            doc = yaml.load(self._read(kfile), Loader=_LOADER)
        except yaml.YAMLError as exc:
            raise BuildError(f"{kfile}: not valid YAML" + (f" ({getattr(exc, 'problem', exc)})" if detailed
                                                            else "")) from None
        except (RecursionError, ValueError, UnicodeDecodeError) as exc:
            raise BuildError(f"{kfile}: not readable as YAML ({type(exc).__name__})" if detailed
                             else f"{kfile}: not valid YAML") from None
        if expanded_size(doc) > MAX_EXPANDED_NODES:
            raise BuildError(f"{kfile}: expands to more than {MAX_EXPANDED_NODES} values through its aliases")
        return doc

    def _confine(self, folder: str, seen: set[str] | None = None) -> None:
        """Before kubectl reads a hand-written kustomization: every path it names, and every kustomization below,
        stays inside the repository and reaches no symlink (kustomize would follow both), and nothing is remote
        (kustomize would fetch it). Strings that are no paths resolve to nothing and are left to kustomize."""
        seen = set() if seen is None else seen
        if self.view.resolved(folder) in seen:
            return
        seen.add(self.view.resolved(folder))
        kfile = self.view.kustomization_file(folder)
        if kfile is None:
            return
        doc = self._kustomization_doc(kfile, detailed=False)
        for _, text in _strings(doc):
            if "://" in text or text.startswith(("github.com/", "git@", "gitlab.com/", "bitbucket.org/")):
                raise BuildError(f"{kfile}: {text!r}: a remote resource; the walk reads only this repository")
            if "\n" in text or len(text) > 1024:
                continue
            target = _join(self.view.resolved(folder), text)
            if target is None:
                raise BuildError(f"{kfile}: {text!r}: leaves the repository")
            if self.view.is_dir(target):
                self._confine(target, seen)
            elif self.view.leads_out(target):
                raise BuildError(f"{kfile}: {text!r}: a symlink that leads out of the repository (or to nothing); "
                                 "Flux's confined filesystem refuses to read it")

    def _kubectl(self, folder: str, trail: tuple[tuple[str, str], ...]) -> list[Built]:
        self._confine(folder)
        built = self._kubectl_at(self._disk_path() / folder, folder, trail)
        origins = self._listed_origins(folder)
        return [Built(b.manifest, origins.get(_kind_name(b.manifest), b.origin), b.trail, b.declared) for b in built]

    def _listed_origins(self, folder: str) -> dict[tuple[str, str], str]:
        """The file each object of the folder's `resources` comes from, where those resources build plainly (an
        overlay of `../base` that patches: its objects are named at the base's files, not at the overlay). An
        object found in two files, or a resource that does not build plainly, keeps the folder as its origin."""
        kfile = self.view.kustomization_file(folder)
        doc = self._kustomization_doc(kfile, detailed=False) if kfile else None
        entries = doc.get("resources") if isinstance(doc, dict) else None
        found: dict[tuple[str, str], list[str]] = {}
        for entry in entries if isinstance(entries, list) else []:
            rel = _join(self.view.resolved(folder), entry) if isinstance(entry, str) and "://" not in entry else None
            if rel is None:
                continue
            try:
                if self.view.is_file(rel):
                    plain = [Built(d, rel) for d in _load_docs(self._read(rel), rel)]
                elif self.view.is_dir(rel) and _plain_resources(
                        self._kustomization_doc(self.view.kustomization_file(rel) or "", False)
                        if self.view.kustomization_file(rel) else None) is not None:
                    plain = self.kustomize(rel)
                else:
                    continue
            except BuildError:
                continue
            for b in plain:
                found.setdefault(_kind_name(b.manifest), []).append(b.origin)
        return {k: v[0] for k, v in found.items() if len(v) == 1}

    def _kubectl_at(self, path: Path, folder: str, trail: tuple[tuple[str, str], ...]) -> list[Built]:
        root = self._disk_path()
        self.kubectl_builds += 1
        try:
            result = subprocess.run(
                ["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(path)],
                capture_output=True, timeout=KUBECTL_TIMEOUT_SECONDS, env={**os.environ, "KUBECONFIG": os.devnull})
        except FileNotFoundError:
            raise BuildError(f"{folder}: needs `kubectl kustomize` (its kustomization does more than list "
                             "resources) and kubectl is not on PATH") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"{folder}: kubectl kustomize did not finish in {KUBECTL_TIMEOUT_SECONDS} s") from None
        if result.returncode != 0:
            # Paths relative to the repository, never to the walk's overlay folder, and without klog's prefix
            message = result.stderr.decode(errors="replace").strip().replace(str(root) + "/", "").replace(
                str(self.view.root / WORK_DIR) + "/", "").replace(os.path.relpath(root, path) + "/", "")
            last = _KLOG_PREFIX.sub("", message.splitlines()[-1]) if message else "?"
            if len(last) > 1 and last[0] == last[-1] == '"':  # klog's err="…", a Go-quoted string
                try:
                    last = json.loads(last)
                except ValueError:
                    pass
            raise BuildError(f"{folder}: kustomize build failed: {last}")
        return [Built(d, folder, trail) for d in _load_docs(result.stdout, f"{folder} (kustomize output)")]

    @staticmethod
    def _check_ids(built: list[Built], where: str) -> list[Built]:
        seen: dict[ObjectId, str] = {}
        for b in built:
            oid = ObjectId.of(b.manifest)
            # kustomize's ids take no namespace and `default` as one (resid.IsNsEquals)
            same = oid if oid.namespace else dataclasses.replace(oid, namespace="default")
            if same in seen:
                raise BuildError(f"{where}: {oid} comes from both {seen[same]} and {b.origin}; kustomize refuses "
                                 "an object twice in one build")
            seen[same] = b.origin
        return built


# --- postBuild substitution ----------------------------------------------------------------------------------

UNKNOWN = None  # a variable whose value lives in a Secret: its name is known, its value is not


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            key = escaped(str(k))  # a key from the repository: never a line break in a problem line
            yield from _strings(v, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def unresolved_variables(manifest: Mapping[str, Any], variables: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(field path, variable) for each `${VAR}` without a value or a default: Flux's strict substitution fails."""
    annotations = _map(_map(manifest.get("metadata")).get("annotations"))
    if annotations.get(SUBSTITUTE_ANNOTATION) == "disabled":
        return []
    out = []
    for path, text in _strings(manifest):
        for match in VAR_REF.finditer(text):
            body = match.group(1)
            m = _VAR_NAME.match(body)
            name = m.group(0) if m else body
            if name not in variables and not body[len(name):].startswith(DEFAULT_OPERATORS):
                out.append((path, name))
    return out


_GO_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_GO_TRUE = frozenset({"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"})
_GO_FALSE = frozenset({"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"})
_GO_INT = re.compile(r"[-+]?(0b[01_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _retyped(text: str) -> Any:
    """A plain scalar's substituted text as Flux reads it again: sigs.k8s.io/yaml's YAMLToJSON, go-yaml v2's YAML 1.1
    types (`2` and `0x1F` numbers, `yes`, `on` and `y` booleans, `~` and the empty text null), as flux build 2.9.5
    prints them; anything else, a date included, stays the text."""
    if text in _GO_NULL:
        return None
    if text in _GO_TRUE or text in _GO_FALSE:
        return text in _GO_TRUE
    if _GO_INT.fullmatch(text):
        digits = text.replace("_", "")
        sign, body = (-1 if digits.startswith("-") else 1), digits.lstrip("+-")
        base = {"0b": 2, "0o": 8, "0x": 16}.get(body[:2].lower())
        if base:
            return sign * int(body[2:], base)
        return sign * int(body, 8 if len(body) > 1 and body.startswith("0") else 10)
    if _GO_FLOAT.fullmatch(text):
        return float(text)
    return text


def substitute(value: Any, variables: Mapping[str, str | None]) -> Any:
    """Known values replaced; unknown ones (Secret) and undefined ones left as written."""
    if isinstance(value, str):
        def one(match: re.Match) -> str:
            body = match.group(1)
            m = _VAR_NAME.match(body)
            name = m.group(0) if m else body
            known = variables.get(name)
            if known is not None:
                return known
            for op in DEFAULT_OPERATORS:
                if body[len(name):].startswith(op) and name not in variables:
                    return body[len(name) + len(op):]
            return match.group(0)
        result = VAR_REF.sub(one, value)
        return _retyped(result) if isinstance(value, PlainVar) and result != value else result
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    return value


# --- the walk ------------------------------------------------------------------------------------------------

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
    variables: dict[str, str | None] = field(default_factory=dict)
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
        for d in _list(self.spec.get("dependsOn")):
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
    kubectl_builds: int = 0

    def applied_in(self, folder: str) -> list[ObjectId]:
        return sorted(o for o, origin in self.origins.items() if posixpath.dirname(origin) == folder
                      or origin == folder)


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


def _counterpart(manifest: Mapping[str, Any], origin: str, plain: list[Built], prefix: str,
                 suffix: str) -> Built | None:
    """The object of the folder's plain build that `manifest` (from the build with the Kustomization's own fields)
    came from: same kind, same name once namePrefix/nameSuffix are taken off, from the same file where known."""
    name = str(_map(manifest.get("metadata")).get("name", ""))
    bare = name[len(prefix):len(name) - len(suffix) or None] \
        if prefix + suffix and name.startswith(prefix) and name.endswith(suffix) else name
    same = [b for b in plain if b.manifest.get("kind") == manifest.get("kind")
            and _map(b.manifest.get("metadata")).get("name") in (name, bare)]
    return next((b for b in same if b.origin == origin), same[0] if len(same) == 1 else None)


def _with_common_metadata(manifest: dict[str, Any], labels: Mapping[str, Any],
                          annotations: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(_map(manifest.get("metadata")))
    if labels:
        meta["labels"] = {**_map(meta.get("labels")), **{str(k): str(v) for k, v in labels.items()}}
    if annotations:
        meta["annotations"] = {**_map(meta.get("annotations")), **{str(k): str(v) for k, v in annotations.items()}}
    return {**manifest, "metadata": meta}


def walk(view: RepoView, bootstrap_path: str, bootstrap: KsKey = ("flux-system", "flux-system"),
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
    _variables(ks, [b.manifest for built in raw.values() for b in built], problems)
    return bool(problems)


def _ks_key(manifest: Mapping[str, Any]) -> KsKey:
    meta = _map(manifest.get("metadata"))
    return (str(meta.get("namespace") or ""), str(meta.get("name", "")))


def _source_key(spec: Mapping[str, Any], key: KsKey) -> KsKey | None:
    src = _map(spec.get("sourceRef"))
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
                    and _join("", str(_map(b.manifest.get("spec")).get("path") or "./").removeprefix("./") or ".")
                    == root.path), None)
        if own is not None:
            root.key = _ks_key(own.manifest)
    if own is not None:
        root.spec = dict(_map(own.manifest.get("spec")))
        root.declared_in = own.origin


def _shapes_build(spec: Mapping[str, Any]) -> bool:
    """The spec has a field that changes what its path builds into (Builder.flux_build applies them)."""
    return any(spec.get(k) for k in (*FLUX_OVERLAY_FIELDS, "targetNamespace", "commonMetadata"))


def _build_path(view: RepoView, builder: Builder, ks: WalkedKustomization) -> list[Built] | None:
    """What kustomize-controller builds from the Kustomization's path, or None with its status set (not built:
    another source, a path outside the repository or not in it, a failing build)."""
    if ks.status != "built":
        return None
    folder = _join("", ks.path.removeprefix("./") or ".")
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
    spec = dict(_map(b.manifest.get("spec")))
    child = WalkedKustomization(key=key, path=str(spec.get("path") or "./"), declared_in=b.origin,
                                parent=parent.key, spec=spec,
                                declared_spec=dict(_map(b.declared.get("spec"))) if b.declared else None)
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
        ks.variables = _variables(ks, everything, result.problems)
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
                result.problems.append(
                    f"{b.origin} ({oid}): {path}: ${{{name}}} is not defined for {show_key(key)}, which applies it "
                    f"(its variables: {', '.join(sorted(ks.variables)) or 'none'}); Flux's strict substitution "
                    "would fail the whole Kustomization; hint: define it in the ConfigMap or Secret that "
                    "Kustomization substitutes from, or give it a default (${VAR:=value})")


def _variables(ks: WalkedKustomization, everything: list[dict[str, Any]], problems: list[str]) -> dict[str, str | None]:
    post = _map(ks.spec.get("postBuild"))
    variables: dict[str, str | None] = {}
    for ref in _list(post.get("substituteFrom")):
        if not isinstance(ref, dict):
            continue
        kind, name = ref.get("kind"), ref.get("name")
        found = next((m for m in everything if m.get("kind") == kind and _map(m.get("metadata")).get("name") == name
                      and (_map(m.get("metadata")).get("namespace") or "") == ks.key[0]), None)
        if found is None:
            if not ref.get("optional"):
                problems.append(f"{show_key(ks.key)} ({ks.declared_in or 'bootstrap'}): postBuild.substituteFrom: "
                                f"{kind} {ks.key[0]}/{name} is applied by no Kustomization in this repository; "
                                "Flux would fail the build; hint: add it, or mark the reference optional: true")
            continue
        if kind == "ConfigMap":  # Flux takes line breaks out of every value (fluxcd/pkg/kustomize LoadVariables)
            variables.update({str(k): str(v).replace("\n", "") for k, v in _map(found.get("data")).items()})
        else:  # a Secret, usually SOPS-encrypted: the keys are readable, the values are not
            variables.update({str(k): UNKNOWN for k in {**_map(found.get("data")), **_map(found.get("stringData"))}})
    variables.update({str(k): str(v).replace("\n", "") for k, v in _map(post.get("substitute")).items()})
    return variables


__all__ = ["BuildError", "Builder", "FluxView", "ObjectId", "RepoView", "WalkedKustomization", "walk"]
