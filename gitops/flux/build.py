"""Building one path as kustomize-controller does (its generator/build): the repository as it will be (`RepoView`),
and the `Builder`: kustomize, or Flux's generated kustomization over a folder without one, then the Kustomization's
own fields (overlay.py). A plain list of local resources is built in this process (documents.py reads the files);
anything more goes to `kubectl kustomize` (kubectl.py), first confined to the repository."""

from __future__ import annotations

import dataclasses
import errno
import os
import posixpath
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from gitops.flux.documents import BuildError, Built, kind_name, load_docs, plain_resources, read_kustomization
from gitops.flux.inventory import ObjectId
from gitops.flux.kubectl import kustomize_build
from gitops.flux.overlay import (
    FLUX_OVERLAY_FIELDS,
    attributed,
    overlay_kustomization,
    with_common_metadata,
    without_origin,
)
from gitops.flux.varsub import string_values
from model.layout import WORK_DIR
from model.safe_yaml import as_list, as_mapping

KUSTOMIZE_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SKIP_AT_ROOT = {".git", WORK_DIR}
# The walk's scratch (the mirror, the overlays) lives in private temporary folders named so, never under OUT.
SCRATCH_PREFIX = "gpu-platform-walk-"


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
        """A real folder holding the view, for kubectl: OUT itself when the view adds nothing, else a mirror in a
        private temporary folder outside OUT (folders real, unchanged files as symlinks into OUT, new files written):
        the walk writes nothing into the user's repository, so a run killed mid-walk leaves nothing there."""
        if not self.changed:
            yield self.root
            return
        with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX + "view-") as scratch:
            mirror = Path(scratch) / "repository"
            self._mirror("", mirror)
            yield mirror

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


def join_path(folder: str, relative: str) -> str | None:
    """`relative` resolved against `folder` inside the repository; None when it escapes it."""
    joined = posixpath.normpath(posixpath.join(folder or ".", relative))
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == ".." or joined.startswith("/"):
        return None
    return joined


class Builder:
    def __init__(self, view: RepoView) -> None:
        self.view = view
        self.kubectl_builds = 0
        self._disk: Any = None
        self._disk_root: Path | None = None
        self.overlays = 0
        self._overlay_scratch: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        if self._disk is not None:
            self._disk.__exit__(None, None, None)
            self._disk = None
        if self._overlay_scratch is not None:
            self._overlay_scratch.cleanup()
            self._overlay_scratch = None

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
            built = [Built(with_common_metadata(b.manifest, labels, annotations), b.origin, b.trail) for b in built]
        return built

    def _overlay(self, folder: str, plain: list[Built], fields: dict[str, Any], target: str | None,
                 declared_in: str) -> list[Built]:
        """The folder built by kubectl under an overlay holding the spec's fields. An overlay, not an edit of the
        folder's kustomization as Flux makes it: the walk never writes into the repository. Each object keeps the
        origin and trail its plain build gave (kustomize's origin annotations say which file it came from)."""
        self._confine(folder)
        root = self._disk_path()
        if self._overlay_scratch is None:  # outside OUT, as the mirror: the walk never writes into the repository
            self._overlay_scratch = tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX + "overlay-")
        here = Path(self._overlay_scratch.name) / str(self.overlays)
        here.mkdir()
        self.overlays += 1
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
        doc = overlay_kustomization(resources, fields, target, declared_in or folder)
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
        """One object of the overlay's build, named at the file its origin annotation gives where the view holds that
        file, else at the folder; its trail and declaration from its counterpart in the plain build."""
        manifest, path = without_origin(manifest)
        origin = folder
        if path is not None:
            candidate = os.path.relpath(os.path.normpath(os.path.join(here, path)), root).replace(os.sep, "/")
            origin = candidate if self.view.is_file(candidate) else folder
        return attributed(manifest, origin, folder, plain, prefix, suffix, declared_in)

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
                out += [Built(d, rel) for d in load_docs(self._read(rel), rel)]
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
        resources = plain_resources(doc)
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
                out += [Built(d, rel, step) for d in load_docs(self._read(rel), rel)]
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
        return read_kustomization(self._read(kfile), kfile, detailed)

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
        return [Built(m, origins.get(kind_name(m), folder), trail) for m in manifests]

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
                    plain = [Built(d, rel) for d in load_docs(self._read(rel), rel)]
                elif below and plain_resources(self._kustomization_doc(below, detailed=False)) is not None:
                    plain = self.kustomize(rel)
                else:
                    continue
            except BuildError:
                continue
            for b in plain:
                found.setdefault(kind_name(b.manifest), []).append(b.origin)
        return {k: v[0] for k, v in found.items() if len(v) == 1}

    def _kubectl_at(self, path: Path, folder: str) -> list[dict[str, Any]]:
        root = self._disk_path()
        self.kubectl_builds += 1
        return kustomize_build(path, root, folder)

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
