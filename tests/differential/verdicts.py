"""The verdicts the differential test compares (issue 30): for each Flux Kustomization reached from the bootstrap, the
objects it applies with their applied spec, or a refusal.

- `walk_verdict`: the walk (gitops/flux/walk.py), the code under test.
- `oracle_verdict` with `flux_build`: Flux's own build, `flux build kustomization --dry-run --in-memory-build` per
  Kustomization (kustomize-controller's generator and kustomize, on a filesystem confined to the repository as the
  controller's is), strict substitution on.
- `oracle_verdict` with `kustomize_build`: kustomize's own build (`kubectl kustomize`) of the kustomization file Flux's
  generator writes (fluxcd/pkg/kustomize GenerateManifest, restated here: the Kustomization's fields appended to the
  folder's file, or a file generated listing every manifest below), then commonMetadata and Flux's text
  substitution. The fast tier of `make test`; kubectl is on PATH where the project runs.

The oracles walk the graph as kustomize-controller does: the bootstrap's own object (its path built once to find it)
is the root; each child has the spec its parent's build gives it; the first Kustomization to apply an object owns
it. Variables for `substituteFrom` come from the ConfigMaps built so far (cluster-vars is the bootstrap's)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import ReusedAnchorWarning, YAMLError as RuamelError

from gitops.flux.build import RepoView
from gitops.flux.inventory import FLUX_GROUP, ObjectId, is_flux_kustomization, show_key
from gitops.flux.walk import walk_from_bootstrap as walk

KsKey = tuple[str, str]
BOOTSTRAP: KsKey = ("flux-system", "flux-system")
OWNER_LABELS = (f"{FLUX_GROUP}/name", f"{FLUX_GROUP}/namespace")
KFILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_VAR = re.compile(r"\$\{([_A-Za-z][_A-Za-z0-9]*)(?::=([^}]*))?\}")


class BuildFailedError(Exception):
    """A build that fails, with the builder's reason."""


@dataclass
class Outcome:
    objects: dict[ObjectId, dict[str, Any]] | None  # None: the build fails (the Kustomization is not applied)
    reason: str = ""


@dataclass
class Verdict:
    kustomizations: dict[KsKey, Outcome] = field(default_factory=dict)

    def applied_twice(self) -> set[ObjectId]:
        seen: dict[ObjectId, int] = {}
        for o in self.kustomizations.values():
            for oid in o.objects or {}:
                seen[oid] = seen.get(oid, 0) + 1
        return {oid for oid, n in seen.items() if n > 1}


def without_owner_labels(obj: dict[str, Any]) -> dict[str, Any]:
    """Without the owner labels the controller sets at apply (the walk models the build)."""
    obj = json.loads(json.dumps(obj))
    meta = obj.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in OWNER_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return obj


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def _key(manifest: dict[str, Any]) -> KsKey:
    meta = manifest.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


# --- the walk --------------------------------------------------------------------------------------------------

def walk_verdict(repo: Path, root: str, relative: bool = False) -> Verdict:
    """The walk's verdict. A Kustomization is refused when its build fails, its path is not in the repository, a
    `substituteFrom` names nothing, or a variable is undefined (the walk holds every repository to Flux's strict
    substitution). Only the first Kustomization to apply an object gets its fields compared (`manifests` keeps one)."""
    where = Path(os.path.relpath(repo)) if relative else repo
    view = walk(RepoView(where), root, BOOTSTRAP, BOOTSTRAP)
    out = Verdict()
    for key, ks in view.kustomizations.items():
        shown = show_key(key)
        if ks.status == "other-source":
            continue
        refused = [p for p in view.problems if p.startswith(f"{shown} (") or f" is not defined for {shown}," in p]
        if ks.status != "built" or refused:
            out.kustomizations[key] = Outcome(None, ks.error or ks.status if ks.status != "built" else refused[0])
            continue
        out.kustomizations[key] = Outcome({oid: view.manifests[oid] if view.applied_by[oid][0] == key else {}
                                           for oid in ks.objects})
    return out


# --- the oracles -----------------------------------------------------------------------------------------------

# (repository, Kustomization, variables, strict) -> the objects, or BuildFailedError
Build = Callable[[Path, dict[str, Any], dict[str, str], bool], list[dict[str, Any]]]
STRICT_FAILURE = "variable not set (strict mode)"  # fluxcd/pkg/envsubst's words, in flux build's error too


def oracle_verdict(repo: Path, root: str, build: Build) -> Verdict:
    out = Verdict()
    boot: dict[str, Any] = {"apiVersion": f"{FLUX_GROUP}/v1", "kind": "Kustomization",
                            "metadata": {"name": BOOTSTRAP[1], "namespace": BOOTSTRAP[0]},
                            "spec": {"interval": "10m", "path": root, "prune": True,
                                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}
    try:
        first = build(repo, boot, {}, True)
    except BuildFailedError as exc:
        out.kustomizations[BOOTSTRAP] = Outcome(None, str(exc))
        return out
    boot = next((without_owner_labels(o) for o in first if is_flux_kustomization(o) and _key(o) == BOOTSTRAP), boot)
    queue: deque[dict[str, Any]] = deque([boot])
    queued = {BOOTSTRAP}
    built_so_far: list[dict[str, Any]] = []
    while queue:
        ks = queue.popleft()
        key = _key(ks)
        source = (ks.get("spec") or {}).get("sourceRef") or {}
        if (source.get("namespace") or key[0], source.get("name")) != ("flux-system", "flux-system"):
            continue  # another source (here: one that does not exist); the walk does not build it either
        try:
            variables = _variables(ks, built_so_far)
        except BuildFailedError as exc:  # Flux fails it before building: nothing it holds is applied
            out.kustomizations[key] = Outcome(None, str(exc))
            continue
        try:
            objects = build(repo, ks, variables, True)
        except BuildFailedError as exc:
            out.kustomizations[key] = Outcome(None, str(exc))
            if STRICT_FAILURE not in str(exc):
                continue
            # The walk's stance: strict, so this Kustomization is refused; but Flux's default substitution applies
            # it with the empty text, and what it applies is walked (the walk says the variable once).
            objects = build(repo, ks, variables, False)
            for o in objects:
                if is_flux_kustomization(o) and _key(o) not in queued:
                    queued.add(_key(o))
                    queue.append(without_owner_labels(o))
            built_so_far += objects
            continue
        mine = {ObjectId.of(o): without_owner_labels(o) for o in objects}
        out.kustomizations[key] = Outcome({oid: ({} if any(oid in (v.objects or {}) for v in
                                                           out.kustomizations.values()) else m)
                                           for oid, m in mine.items()})
        built_so_far += objects
        for o in objects:
            if is_flux_kustomization(o) and _key(o) not in queued:
                queued.add(_key(o))
                queue.append(without_owner_labels(o))
    return out


def _variables(ks: dict[str, Any], built: list[dict[str, Any]]) -> dict[str, str]:
    """The values Flux loads for `substituteFrom` (newlines taken out, as LoadVariables does), then `substitute`."""
    post = (ks.get("spec") or {}).get("postBuild") or {}
    namespace = _key(ks)[0]
    variables: dict[str, str] = {}
    for ref in post.get("substituteFrom") or []:
        found = next((o for o in built if o.get("kind") == ref.get("kind") and _key(o) == (namespace, ref["name"])),
                     None)
        if found is None:
            if ref.get("optional"):
                continue
            raise BuildFailedError(f"substitute from '{ref.get('kind')}/{ref['name']}' error: not found")
        variables.update({k: str(v).replace("\n", "") for k, v in (found.get("data") or {}).items()})
    variables.update({k: str(v).replace("\n", "") for k, v in (post.get("substitute") or {}).items()})
    return variables


def flux_build(flux: Path, work: Path, strict_: bool = True) -> Build:
    """Flux's own build of one Kustomization, its variables inline (dry-run does not read substituteFrom). Strict (when
    both this and the caller ask): an undefined variable fails the build (the walk's stance); else Flux substitutes the
    empty text."""
    counter = iter(range(1_000_000))

    def build(repo: Path, ks: dict[str, Any], variables: dict[str, str], strict: bool) -> list[dict[str, Any]]:
        ks = json.loads(json.dumps(ks))
        spec = ks["spec"]
        if "postBuild" in spec:
            spec["postBuild"] = {"substitute": variables}
        kfile = work / f"ks-{next(counter)}.yaml"
        kfile.write_text(yaml.safe_dump(ks, sort_keys=False))
        path = repo / str(spec.get("path") or "./").removeprefix("./")
        namespace, name = _key(ks)
        done = subprocess.run([str(flux), "build", "kustomization", name, "--path", str(path), "--kustomization-file",
                               str(kfile), "--dry-run", "--in-memory-build",
                               *(["--strict-substitute"] if strict and strict_ else []),
                               "--namespace", namespace or "flux-system"],
                              capture_output=True, text=True, timeout=120, cwd=repo,
                              env={"HOME": str(work), "PATH": "/usr/bin:/bin"})
        if done.returncode != 0:
            raise BuildFailedError(_last_line(done))
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    return build


# --- kustomize's own build of the file Flux's generator writes ----------------------------------------------------

def _go_yaml_documents(data: bytes) -> list[Any]:
    """The documents of a file as Flux's generator reads them (go-yaml): an anchor name may be defined again, each
    alias taking the latest definition. Read by ruamel.yaml, not by the walk's reader under test; libyaml (PyYAML)
    refuses the second definition."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReusedAnchorWarning)
        reader = YAML(typ="safe", pure=True)
        reader.allow_duplicate_keys = True  # as PyYAML, which read these files before
        return list(reader.load_all(data))


def _generated(folder: Path) -> dict[str, Any]:
    """The kustomization Flux writes where a folder has none: every manifest below it, a folder that has its own
    kustomization file listed as one entry and not entered; a `.yaml`/`.yml` file that is no manifest fails."""
    resources: list[str] = []
    for here, dirs, files in os.walk(folder):
        dirs.sort()
        for d in list(dirs):
            if (Path(here) / d).is_symlink():  # filepath.Walk reads a link with Lstat: no folder, no manifest
                dirs.remove(d)
            elif any((Path(here) / d / k).is_file() for k in KFILES):
                resources.append(os.path.relpath(Path(here) / d, folder))
                dirs.remove(d)
        for f in sorted(files):
            if not f.endswith((".yaml", ".yml")):
                continue
            try:
                docs = [d for d in _go_yaml_documents((Path(here) / f).read_bytes()) if d is not None]
            except (RuamelError, OSError) as exc:
                raise BuildFailedError(f"failed to decode Kubernetes YAML from {f}: {exc}") from None
            if any(not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d for d in docs):
                raise BuildFailedError(f"failed to decode Kubernetes YAML from {f}: missing kind or apiVersion")
            resources.append(os.path.relpath(Path(here) / f, folder))
    # filepath.Walk visits a folder's entries in lexical order, folders and files mixed
    resources.sort(key=lambda r: r.split(os.sep))
    doc: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    if resources:
        doc["resources"] = [f"./{r}" for r in resources]
    else:
        doc["namespace"] = "_placeholder"
    return doc


def _with_flux_fields(doc: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """GenerateManifest: the Flux Kustomization's fields written into the folder's kustomization."""
    doc = dict(doc)
    if spec.get("targetNamespace"):
        doc["namespace"] = spec["targetNamespace"]
    for fld in ("namePrefix", "nameSuffix"):
        if fld in spec:
            doc[fld] = spec[fld]
    if spec.get("patches"):
        doc["patches"] = [*(doc.get("patches") or []),
                          *({k: v for k, v in p.items() if k in ("patch", "target")} for p in spec["patches"])]
    if spec.get("components"):
        doc["components"] = [*(doc.get("components") or []), *spec["components"]]
    for image in spec.get("images") or []:
        images = doc.setdefault("images", [])
        same = next((i for i in images if i.get("name") == image["name"]), None)
        if same is None:
            images.append(dict(image))
        else:
            same.update({k: v for k, v in image.items() if k != "name" and v})
    return doc


def _envsubst(text: str, variables: dict[str, str], strict: bool) -> str:
    def one(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        value = variables.get(name)
        if default is not None:
            return value or default
        if value is None:
            if not strict:
                return ""
            raise BuildFailedError(f"variable substitution failed: {STRICT_FAILURE}: {name!r}")
        return value
    return _VAR.sub(one, text)


def kustomize_build(repo: Path, ks: dict[str, Any], variables: dict[str, str], strict: bool) -> list[dict[str, Any]]:
    spec = ks.get("spec") or {}
    rel = str(spec.get("path") or "./").removeprefix("./")
    folder = repo / rel
    if not folder.is_dir():
        raise BuildFailedError(f"{rel}: no such directory")
    existing = next((folder / k for k in KFILES if (folder / k).is_file()), None)
    if existing is not None:
        try:
            docs = _go_yaml_documents(existing.read_bytes())
        except RuamelError as exc:
            raise BuildFailedError(f"{existing.name}: {exc}") from None
        if len(docs) > 1:
            raise BuildFailedError(f"{existing.name}: expected a single document in the stream")
        doc = (docs[0] if docs else None) or {}
        if not isinstance(doc, dict):
            raise BuildFailedError(f"{existing.name}: not a mapping")
        if not doc.get("resources"):
            doc["buildMetadata"] = ["originAnnotations"]
    else:
        doc = _generated(folder)
    target = existing or folder / "kustomization.yaml"
    before = target.read_bytes() if existing else None
    target.write_text(yaml.safe_dump(_with_flux_fields(doc, spec), sort_keys=False))
    try:
        done = subprocess.run(["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(folder)],
                              capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    finally:
        if before is None:
            target.unlink()
        else:
            target.write_bytes(before)
    if done.returncode != 0:
        raise BuildFailedError(_last_line(done))
    post = spec.get("postBuild")
    meta = spec.get("commonMetadata") or {}
    out = []
    for text in re.split(r"^---\n", done.stdout, flags=re.M):
        if not text.strip():
            continue
        if post is not None and variables:
            text = _envsubst(text, variables, strict)
        obj = yaml.safe_load(text)
        for fld in ("labels", "annotations"):
            if meta.get(fld):
                m = obj.setdefault("metadata", {})
                m[fld] = {**(m.get(fld) or {}), **meta[fld]}
        out.append(obj)
    return out


# --- judging ---------------------------------------------------------------------------------------------------

def disagreements(walked: Verdict, oracle: Verdict) -> list[str]:
    """Where the walk and the oracle part: a Kustomization one reaches and the other does not, one builds and the other
    refuses, a different set of objects, or an object whose fields differ (the first differing field named)."""
    out = []
    for key in sorted(set(walked.kustomizations) | set(oracle.kustomizations)):
        w, o = walked.kustomizations.get(key), oracle.kustomizations.get(key)
        shown = show_key(key)
        if w is None or o is None:
            out.append(f"{shown}: reached by {'the oracle' if w is None else 'the walk'} only")
            continue
        if (w.objects is None) != (o.objects is None):
            out.append(f"{shown}: the walk {'refuses' if w.objects is None else 'builds'} ({w.reason}), the oracle "
                       f"{'refuses' if o.objects is None else 'builds'} ({o.reason})")
            continue
        if w.objects is None or o.objects is None:
            continue
        if set(w.objects) != set(o.objects):
            out.append(f"{shown}: objects differ: walk only {sorted(map(str, set(w.objects) - set(o.objects)))}, "
                       f"oracle only {sorted(map(str, set(o.objects) - set(w.objects)))}")
            continue
        for oid in sorted(w.objects, key=str):
            a, b = w.objects[oid], o.objects[oid]
            if a and b and a != b:
                out.append(f"{shown}: {oid}: {first_difference(a, b)}")
    return out


def first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path or '.'}: walk {a!r}, oracle {b!r}"


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)


__all__ = ["BOOTSTRAP", "Outcome", "BuildFailedError", "Verdict", "disagreements", "flux_build", "kustomize_build",
           "oracle_verdict", "walk_verdict"]
