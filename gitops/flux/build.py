"""Building one path as kustomize-controller does (its generator/build): the repository as it will be (`RepoView`),
kustomize or Flux's generated kustomization over a folder (each resource file read as kustomize reads it, a
`kind: List` taken apart into its items), and a Kustomization's own fields (patches, images, namePrefix/nameSuffix,
components, commonMetadata) applied to what it builds. A plain list of local resources is built
in this process; anything more goes to `kubectl kustomize --load-restrictor LoadRestrictionsNone`."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import posixpath
import re
import shutil
import subprocess
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gitops.flux.inventory import ObjectId
from gitops.flux.varsub import PlainVar, string_values
from model.layout import WORK_DIR
from model.safe_yaml import (
    MAX_EXPANDED_NODES,
    DocumentsError,
    as_list,
    as_mapping,
    expanded_size,
    yaml_documents,
    yaml_reason,
)

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
KUSTOMIZE_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SKIP_AT_ROOT = {".git", WORK_DIR}
KUBECTL_TIMEOUT_SECONDS = 120
# The fields of a Flux Kustomization's spec that kustomize-controller adds to the kustomization it builds
# (fluxcd/pkg/kustomize, Generator.GenerateManifest; targetNamespace too, handled on its own); commonMetadata is set
# on every object after the build (ssautil.SetCommonMetadata).
FLUX_OVERLAY_FIELDS = ("patches", "images", "namePrefix", "nameSuffix", "components")
ORIGIN_ANNOTATION = "config.kubernetes.io/origin"


class BuildError(Exception):
    """kustomize or Flux's generator would fail on this folder; the message names the file and the cause."""


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
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
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


@dataclass
class Built:
    manifest: dict[str, Any]
    origin: str  # the file it came from, or the folder kubectl built
    # The (kustomization file, resources entry) pairs that brought it into the build, outermost first.
    trail: tuple[tuple[str, str], ...] = ()
    # The object as its file declares it, where the applying Kustomization's own fields (patches, …) changed it
    declared: dict[str, Any] | None = None


class _PlainVarLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _construct_str(loader: Any, node: Any) -> str:
    value = loader.construct_scalar(node)
    return PlainVar(value) if "${" in value and _written_plain(value) else value


def _written_plain(text: str) -> bool:
    """kustomize (go-yaml v3, a port of libyaml as PyYAML's emitter is) writes this string without quotes. Neither
    emitter picks a block style (`|`, `>`) unless asked to, nor does the line width change the style it picks."""
    return not yaml.safe_dump(text).startswith(("'", '"'))


_PlainVarLoader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def _marked(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return f"line {mark.line + 1}: " if mark is not None else ""


def _load_docs(data: bytes, where: str, lists: bool = True) -> list[dict[str, Any]]:
    """The objects of a resource file as kustomize reads them (resource.Factory.SliceFromBytes), its Lists taken
    apart into their items (`_list_items`). `lists=False` for kustomize's own output: no List is left in it to take
    apart, and one it kept (without items) is an object of its own."""
    try:
        docs = yaml_documents(data)  # the checked reader: sizes, aliases, errors as one line
        if b"${" in data:  # read again, the same way, keeping which `${VAR}` scalars are plain
            docs = tuple(yaml.load_all(data, Loader=_PlainVarLoader))
    except DocumentsError as exc:
        raise BuildError({
            "invalid": f"{where}: not valid YAML ({f'line {exc.line}: ' if exc.line else ''}{exc.problem})",
            "unreadable": f"{where}: not readable as YAML ({exc.problem})",
        }.get(exc.reason, f"{where}: a document that expands to more than {MAX_EXPANDED_NODES} values through its "
                          "aliases; no manifest needs that (a YAML alias bomb?)")) from None
    if lists and docs and _unwrapped_by_reader(docs[0]) and not _SEPARATOR.search(data.replace(b"\r\n", b"\n")):
        # kyaml's reader (kio.ByteReader) takes the items out of a file that is one List, before anything is checked
        return _list_items([node for path, item in _wrapped("", docs[0]) for node in _checked(path, item, where)],
                           where)
    out = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
            raise BuildError(f"{where}: failed to decode Kubernetes YAML: a document without apiVersion and kind")
        out.append(doc)
    if lists and any(str(doc.get("kind")).endswith("List") for doc in out):
        return _list_items([(f"document {n}", doc) for n, doc in enumerate(docs, 1) if doc is not None], where)
    return out


# Where kyaml's reader splits a file into documents: a line that starts with `---` (kio's splitDocuments)
_SEPARATOR = re.compile(rb"\n---.*\n")


def _unwrapped_by_reader(doc: Any) -> bool:
    """kyaml's reader unwraps this document where it is a file's only one (kio.ByteReader.Read): kind exactly `List`
    or `ResourceList`, with `items` or `functionConfig`, whatever they hold."""
    return isinstance(doc, dict) and doc.get("kind") in ("List", "ResourceList") and \
        ("items" in doc or "functionConfig" in doc)


def _wrapped(path: str, doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """What kyaml's reader takes out of such a document, each node with its path: the items of a list, the keys and
    values of a mapping in turn (a key is no object: kustomize refuses it), nothing of a scalar or null."""
    items = doc.get("items")
    if isinstance(items, list):
        return [(_below(path, f"items[{i}]"), item) for i, item in enumerate(items)]
    if isinstance(items, dict):
        return [(_below(path, "items"), node) for pair in items.items() for node in pair]
    return []


def _below(path: str, step: str) -> str:
    """Where `step` is in the file: `items[0].items[1]`, or after the number of its document, `document 2: items`."""
    if not path:
        return step
    return f"{path}: {step}" if path.startswith("document ") else f"{path}.{step}"


def _list_items(queue: list[tuple[str, dict[str, Any]]], where: str) -> list[dict[str, Any]]:
    """The objects kustomize takes from these documents (each with where it is in the file), in its order
    (resource.Factory.RNodesFromBytes): a document whose kind ends in List and that has `items` is taken apart, each
    item read again as a file of one document (so an item of kind `List` is unwrapped where it stands) and checked
    (`_checked`), and the objects it gives queued after the rest; a List without items is an object of its own."""
    pending, out = deque(queue), []
    while pending:
        path, doc = pending.popleft()
        if not str(doc.get("kind")).endswith("List") or "items" not in doc:
            # kustomize writes the metadata a List it keeps lacks as `metadata: {}`
            out.append(doc if "metadata" in doc or not str(doc.get("kind")).endswith("List")
                       else {**doc, "metadata": {}})
            if not doc.get("apiVersion"):  # kustomize builds it; Flux's apply refuses it
                raise BuildError(f"{where}: {path} ({' '.join(filter(None, _kind_name(doc)))}): an object without "
                                 "apiVersion; Flux cannot apply it")
            continue
        items = doc["items"]
        if items is None:
            continue  # an empty List
        if not isinstance(items, list):
            raise BuildError(f"{where}: {_below(path, 'items')}: {_shape(items)} where kustomize expects a list of "
                             "objects; it refuses the build")
        for i, item in enumerate(items):
            at = _below(path, f"items[{i}]")
            nodes = _wrapped(at, item) if _unwrapped_by_reader(item) else [(at, item)]
            pending += [node for p, n in nodes for node in _checked(p, n, where)]
    return out


def _checked(path: str, node: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """kustomize's check of a node it reads (resource.Factory's dropBadNodes): null, `{}` and `[]` are skipped;
    anything else is an object with a kind, and a name unless its kind ends in List. (A file's own documents keep
    the walk's older check, which leaves out the name.)"""
    if node is None or node == {} or node == []:
        return []
    if not isinstance(node, dict):
        raise BuildError(f"{where}: {path}: {_shape(node)}, not an object; kustomize refuses it (missing Resource "
                         "metadata)")
    kind = node.get("kind")
    if kind is None or kind == "" or isinstance(kind, (dict, list)):
        raise BuildError(f"{where}: {path}: an object without kind; kustomize refuses it")
    name = as_mapping(node.get("metadata")).get("name")
    if not str(kind).endswith("List") and (name is None or name == "" or isinstance(name, (dict, list))):
        raise BuildError(f"{where}: {path} ({kind}): an object without metadata.name; kustomize refuses it")
    return [(path, node)]


def _shape(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return {dict: "a mapping", list: "a list"}.get(type(value), f"a {type(value).__name__}")


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
    return str(manifest.get("kind", "")), str(as_mapping(manifest.get("metadata")).get("name", ""))


def join_path(folder: str, relative: str) -> str | None:
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
            raise BuildError(f"{rel}: cannot be read ({exc.strerror})") from None  # the view's, as the OS words them

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
        meta = as_mapping(spec.get("commonMetadata"))
        if meta:
            labels, annotations = as_mapping(meta.get("labels")), as_mapping(meta.get("annotations"))
            built = [Built(_with_common_metadata(b.manifest, labels, annotations), b.origin, b.trail) for b in built]
        return built

    def _overlay(self, folder: str, plain: list[Built], fields: dict[str, Any], target: str | None,
                 declared_in: str) -> list[Built]:
        """The folder built by kubectl under an overlay holding the spec's fields. An overlay, not an edit of the
        folder's kustomization as Flux makes it: the walk never writes into the repository. Each object keeps the
        origin and trail its plain build gave (kustomize's origin annotations say which file it came from)."""
        self._confine(folder)
        root = self._disk_path()
        here = self.view.root / WORK_DIR / f"flux-overlay.{os.getpid()}" / str(self.overlays)
        here.mkdir(parents=True)
        self.overlays += 1  # counted once made: close removes the folder of each overlay counted
        doc = self._overlay_doc(folder, fields, target, declared_in, root, here)
        (here / "kustomization.yaml").write_text(yaml.safe_dump(doc))
        prefix, suffix = str(fields.get("namePrefix") or ""), str(fields.get("nameSuffix") or "")
        # No id check of our own: kustomize refuses an object twice (namespace transformation included) itself
        return [self._attributed(manifest, folder, plain, prefix, suffix, declared_in, root, here)
                for manifest in self._kubectl_at(here, folder)]

    def _overlay_doc(self, folder: str, fields: dict[str, Any], target: str | None, declared_in: str, root: Path,
                     here: Path) -> dict[str, Any]:
        """The overlay's kustomization: the folder (or what Flux's generated kustomization lists) as its resources,
        the spec's fields, origin annotations on."""
        if self.view.kustomization_file(folder):
            resources = [os.path.relpath(root / folder, here)]
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
            for i, patch in enumerate(as_list(fields["patches"])):
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
        for component in as_list(fields.get("components")):
            joined = join_path(self.view.resolved(folder), str(component))
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
        annotations = dict(as_mapping(as_mapping(manifest.get("metadata")).get("annotations")))
        path = _origin_path(annotations.pop(ORIGIN_ANNOTATION, None))
        origin = folder
        if path is not None:
            candidate = os.path.relpath(os.path.normpath(os.path.join(here, path)), root).replace(os.sep, "/")
            origin = candidate if self.view.is_file(candidate) else folder
        meta = dict(as_mapping(manifest.get("metadata")))
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
        dirs, files = self.view.listdir(folder)
        out = [f"{folder}/{f}" if folder else f for f in files if f.endswith((".yaml", ".yml"))]
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
            rel = join_path(base, entry)  # kustomize resolves entries from the folder's real path
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
            raise BuildError(f"{kfile}: not valid YAML" + (f" ({_marked(exc)}{yaml_reason(exc)})" if detailed
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
        for _, text in string_values(doc):
            if "://" in text or text.startswith(("github.com/", "git@", "gitlab.com/", "bitbucket.org/")):
                raise BuildError(f"{kfile}: {text!r}: a remote resource; the walk reads only this repository")
            if "\n" in text or len(text) > 1024:
                continue
            target = join_path(self.view.resolved(folder), text)
            if target is None:
                raise BuildError(f"{kfile}: {text!r}: leaves the repository")
            if self.view.is_dir(target):
                self._confine(target, seen)
            elif self.view.leads_out(target):
                raise BuildError(f"{kfile}: {text!r}: a symlink that leads out of the repository (or to nothing); "
                                 "Flux's confined filesystem refuses to read it")

    def _kubectl(self, folder: str, trail: tuple[tuple[str, str], ...]) -> list[Built]:
        self._confine(folder)
        manifests = self._kubectl_at(self._disk_path() / folder, folder)
        origins = self._listed_origins(folder)
        return [Built(m, origins.get(_kind_name(m), folder), trail) for m in manifests]

    def _listed_origins(self, folder: str) -> dict[tuple[str, str], str]:
        """The file each object of the folder's `resources` comes from, where those resources build plainly (an
        overlay of `../base` that patches: its objects are named at the base's files, not at the overlay). An
        object found in two files, or a resource that does not build plainly, keeps the folder as its origin."""
        kfile = self.view.kustomization_file(folder)
        doc = self._kustomization_doc(kfile, detailed=False) if kfile else None
        entries = doc.get("resources") if isinstance(doc, dict) else None
        found: dict[tuple[str, str], list[str]] = {}
        for entry in entries if isinstance(entries, list) else []:
            # Never a remote entry: _confine refused the folder before kubectl built it
            rel = join_path(self.view.resolved(folder), entry) if isinstance(entry, str) else None
            if rel is None:
                continue
            below = self.view.kustomization_file(rel) if self.view.is_dir(rel) else None
            try:
                if self.view.is_file(rel):
                    plain = [Built(d, rel) for d in _load_docs(self._read(rel), rel)]
                elif below and _plain_resources(self._kustomization_doc(below, detailed=False)) is not None:
                    plain = self.kustomize(rel)
                else:
                    continue
            except BuildError:
                continue
            for b in plain:
                found.setdefault(_kind_name(b.manifest), []).append(b.origin)
        return {k: v[0] for k, v in found.items() if len(v) == 1}

    def _kubectl_at(self, path: Path, folder: str) -> list[dict[str, Any]]:
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
            # Paths relative to the repository (kustomize names them absolute, or from the folder it builds), without
            # klog's prefix
            message = result.stderr.decode(errors="replace").strip().replace(str(root) + "/", "").replace(
                os.path.relpath(root, path) + "/", "")
            last = _KLOG_PREFIX.sub("", message.splitlines()[-1]) if message else "?"
            if len(last) > 1 and last[0] == last[-1] == '"':  # klog's err="…", a Go-quoted string
                try:
                    last = json.loads(last)
                except ValueError:
                    pass
            raise BuildError(f"{folder}: kustomize build failed: {last}")
        return _load_docs(result.stdout, f"{folder} (kustomize output)", lists=False)

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


def _origin_path(annotation: Any) -> str | None:
    """The `path` of kustomize's origin annotation, a YAML mapping it writes (path, repo, ref, configuredIn, ...);
    None where it names no file (an object a generator made)."""
    try:
        docs = yaml_documents(annotation.encode()) if isinstance(annotation, str) else ()
    except DocumentsError:
        return None
    path = as_mapping(next(iter(docs), None)).get("path")
    return path if isinstance(path, str) else None


def _counterpart(manifest: Mapping[str, Any], origin: str, plain: list[Built], prefix: str,
                 suffix: str) -> Built | None:
    """The object of the folder's plain build that `manifest` (from the build with the Kustomization's own fields)
    came from: same kind, same name once namePrefix/nameSuffix are taken off, from the same file where known."""
    name = str(as_mapping(manifest.get("metadata")).get("name", ""))
    bare = name[len(prefix):len(name) - len(suffix) or None] \
        if prefix + suffix and name.startswith(prefix) and name.endswith(suffix) else name
    same = [b for b in plain if b.manifest.get("kind") == manifest.get("kind")
            and as_mapping(b.manifest.get("metadata")).get("name") in (name, bare)]
    return next((b for b in same if b.origin == origin), same[0] if len(same) == 1 else None)


def _with_common_metadata(manifest: dict[str, Any], labels: Mapping[str, Any],
                          annotations: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(as_mapping(manifest.get("metadata")))
    if labels:
        meta["labels"] = {**as_mapping(meta.get("labels")), **{str(k): str(v) for k, v in labels.items()}}
    if annotations:
        meta["annotations"] = {**as_mapping(meta.get("annotations")),
                               **{str(k): str(v) for k, v in annotations.items()}}
    return {**manifest, "metadata": meta}
