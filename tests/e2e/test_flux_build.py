"""Flux's own build judges the walk (issue 20): for every Kustomization the walk reaches in every fixture repository,
with the export written into it, `flux build kustomization --dry-run` (kustomize-controller's code, from `make
tools`) gives the objects the walk attributes to it. Each Kustomization is built with the spec Flux gives it: the
object as its parent's Flux build produced it (the parent's patches applied), with the variables the walk knows for
its `substituteFrom` passed inline (dry-run skips substituteFrom). Run by `make e2e`.

The walk (gitops/fluxview.py) stays the export's fast path; a difference here is fixed in the walk, or named in
FLUX_DIFFERENCES with the reason."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import FIXTURES, ROOT, export, make_project, stack_text
from gitops.fluxview import FLUX_GROUP, ObjectId, RepoView, walk

pytestmark = pytest.mark.e2e

FLUX = ROOT / "build" / "tools" / "bin" / "flux"


@pytest.fixture(autouse=True, scope="module")
def _flux_is_built() -> None:
    """A missing Flux CLI fails these tests (never skips them): `make e2e` builds it first."""
    if not FLUX.is_file():
        pytest.fail(f"{FLUX}: not built; hint: run `make tools` (make e2e does)")

REPOS = FIXTURES / "repos"
# Every fixture repository with the stacks exported into it and where Flux's walk starts.
CASES = {
    "flux-bootstrap": {"stacks": {"dev": stack_text("dev"), "prod": stack_text("prod")},
                       "roots": {"dev": "./clusters/dev", "prod": "./clusters/prod"}},
    "cluster-template": {"stacks": {"home": (REPOS / "stacks" / "cluster-template.yaml").read_text()},
                         "roots": {"home": "./kubernetes/flux/cluster"}},
    "cluster-template-generated": {
        "stacks": {"home": (REPOS / "stacks" / "cluster-template-generated.yaml").read_text()},
        "roots": {"home": "./kubernetes/flux/cluster"}},
    # the same repository with the export in cluster-template's own per-app shape (gitops.layout: per-app)
    "cluster-template-generated:per-app": {
        "stacks": {"home": (REPOS / "stacks" / "cluster-template-generated.yaml").read_text().replace(
            "    componentsDir: kubernetes/gpu-platform\n", "    layout: per-app\n")},
        "roots": {"home": "./kubernetes/flux/cluster"}},
    # every field kustomize-controller adds to a build, at once; nothing exported into it
    "flux-fields": {"stacks": {}, "roots": {"lab": "./clusters/lab"}},
}
BOOTSTRAP = ("flux-system", "flux-system")
# Labels kustomize-controller sets on every object it applies (and `flux build` shows); the walk models the build,
# not the apply, so they are taken out before comparing.
OWNER_LABELS = (f"{FLUX_GROUP}/name", f"{FLUX_GROUP}/namespace")
SOPS_MASK = "**SOPS**"


@dataclass
class Judged:
    """One Kustomization: the objects the walk attributes to it and the objects Flux's build gives."""

    walk: dict[ObjectId, dict[str, Any]]
    flux: dict[ObjectId, dict[str, Any]]


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    meta = obj.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in OWNER_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return obj


def _masked(obj: dict[str, Any]) -> dict[str, Any]:
    """A SOPS-encrypted Secret as `flux build` prints it: values masked, the sops block gone (flux2
    internal/build maskSopsData); the walk keeps the ciphertext, which no one can read either."""
    if obj.get("kind") != "Secret" or "sops" not in obj:
        return obj
    out = {k: v for k, v in obj.items() if k != "sops"}
    for field in ("data", "stringData"):
        if isinstance(out.get(field), dict):
            out[field] = {k: SOPS_MASK for k in out[field]}
    return out


def flux_build(repo: Path, work: Path, ks: dict[str, Any]) -> list[dict[str, Any]]:
    name, namespace = ks["metadata"]["name"], ks["metadata"].get("namespace", "flux-system")
    kfile = work / f"{namespace}.{name}.yaml"
    kfile.write_text(yaml.safe_dump(ks, sort_keys=False))
    path = repo / str(ks["spec"].get("path", "./")).removeprefix("./")
    done = subprocess.run([str(FLUX), "build", "kustomization", name, "--path", str(path), "--kustomization-file",
                           str(kfile), "--dry-run", "--namespace", namespace],
                          capture_output=True, text=True, timeout=300, env={"HOME": str(work), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, f"flux build {namespace}/{name}: {done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def with_inline_variables(ks: dict[str, Any], variables: dict[str, str | None]) -> dict[str, Any]:
    """The Kustomization with the walk's variables inline: a Secret's value the walk cannot know stays `${NAME}`,
    as the walk leaves it."""
    ks = json.loads(json.dumps(ks))
    post = ks["spec"].setdefault("postBuild", {})
    post.pop("substituteFrom", None)
    post["substitute"] = {k: ("${" + k + "}" if v is None else v) for k, v in sorted(variables.items())}
    return ks


def judge(repo: Path, root_path: str, work: Path) -> dict[tuple[str, str], Judged]:
    """Flux's build of every Kustomization the walk reaches, parent before child, each child's spec taken from its
    parent's Flux build."""
    view = walk(RepoView(repo), root_path, BOOTSTRAP, BOOTSTRAP)
    assert not [k for k in view.kustomizations.values() if k.status == "failed"], view.problems
    root = view.kustomizations[BOOTSTRAP]
    root_object = {"apiVersion": f"{FLUX_GROUP}/v1", "kind": "Kustomization",
                   "metadata": {"name": BOOTSTRAP[1], "namespace": BOOTSTRAP[0]},
                   "spec": root.spec or {"interval": "10m", "path": root_path, "prune": True,
                                         "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}
    out: dict[tuple[str, str], Judged] = {}
    queue = deque([(BOOTSTRAP, root_object)])
    while queue:
        key, obj = queue.popleft()
        walked = view.kustomizations[key]
        if walked.status != "built" or key in out:
            continue
        built = flux_build(repo, work, with_inline_variables(obj, walked.variables))
        flux_objects = {ObjectId.of(o): _strip(o) for o in built}
        out[key] = Judged(walk={oid: _masked(view.manifests[oid]) for oid in walked.objects}, flux=flux_objects)
        for o in built:
            if o.get("kind") == "Kustomization" and str(o.get("apiVersion", "")).startswith(FLUX_GROUP + "/"):
                child = (o["metadata"].get("namespace", ""), o["metadata"]["name"])
                if child != key and child in view.kustomizations:
                    queue.append((child, _strip(o)))
    return out


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[tuple[str, str], dict[tuple[str, str], Judged]]:
    results = {}
    for repo_name, case in CASES.items():
        base = tmp_path_factory.mktemp(repo_name.replace(":", "-"))
        repo = base / "repo"
        shutil.copytree(REPOS / repo_name.split(":")[0], repo)
        if case["stacks"]:
            project = make_project(base / "project", case["stacks"])
            assert export(repo, *case["stacks"], project=project) == 0
        for stack, root_path in case["roots"].items():
            work = base / f"work-{stack}"
            work.mkdir()
            results[(repo_name, stack)] = judge(repo, root_path, work)
    return results


# Where Flux's build and the walk cannot agree, by (repository, stack, Kustomization): the reason. Empty: they agree.
FLUX_DIFFERENCES: dict[tuple[str, str, tuple[str, str]], str] = {}

SUBJECTS = [(repo, stack) for repo, case in CASES.items() for stack in case["roots"]]


@pytest.mark.parametrize(("repo", "stack"), SUBJECTS)
def test_flux_builds_every_kustomization_the_walk_reaches_into_the_objects_the_walk_attributes_to_it(judged, repo,
                                                                                                   stack):
    results = judged[(repo, stack)]
    assert len(results) >= 2  # the root and what it applies at least
    for key, j in results.items():
        if (repo, stack, key) in FLUX_DIFFERENCES:
            continue
        assert set(j.walk) == set(j.flux), (key, sorted(map(str, set(j.walk) ^ set(j.flux))))
        differing = [str(oid) for oid in j.walk if j.walk[oid] != j.flux[oid]]
        assert not differing, (key, differing)


def test_the_export_s_own_kustomizations_are_judged_in_every_repository(judged):
    for (repo, stack), results in judged.items():
        if not CASES[repo]["stacks"]:
            continue
        assert any(key[1] == "plex" for key in results), (repo, stack)
        assert any(key[1] == "intel-gpu-plugin" for key in results), (repo, stack)


def test_a_parent_s_patch_on_its_children_reaches_them_in_flux_s_build_and_in_the_walk(judged):
    """cluster-template's cluster-apps patches every child Kustomization (decryption, deletionPolicy, a nested
    HelmRelease patch): the export's own Kustomizations included."""
    results = judged[("cluster-template-generated", "home")]
    apps = results[("flux-system", "cluster-apps")]
    plex = next(o for oid, o in apps.flux.items() if oid.name == "plex" and oid.kind == "Kustomization")
    assert plex["spec"]["deletionPolicy"] == "WaitForTermination"
    assert plex["spec"]["patches"][0]["target"]["kind"] == "HelmRelease"
    assert apps.walk == apps.flux


def test_every_field_flux_adds_to_a_build_is_judged(judged):
    """flux-fields: targetNamespace, namePrefix/nameSuffix, images, commonMetadata, components and patches on one
    Kustomization, and the walk gives what Flux gives."""
    apps = judged[("flux-fields", "lab")][("flux-system", "apps")]
    deployment = next(o for oid, o in apps.flux.items() if oid.kind == "Deployment")
    assert deployment["metadata"]["name"] == "lab-web-v1" and deployment["metadata"]["namespace"] == "shop"
    assert deployment["metadata"]["labels"] == {"team": "home"}
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "docker.io/library/nginx:1.27.3"
    assert container["env"] == [{"name": "GREETING", "value": "hello"}]
    assert any(oid.kind == "ConfigMap" and oid.name == "lab-extra-v1" for oid in apps.flux)
    assert apps.walk == apps.flux
