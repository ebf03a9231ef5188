"""Flux's own build judges the walk (issue 20): for every Kustomization the walk reaches in every fixture repository,
with the export written into it, `flux build kustomization --dry-run` (kustomize-controller's code, from `make
tools`) gives the objects the walk attributes to it. Each Kustomization is built with the spec Flux gives it: the
object as its parent's Flux build produced it (the parent's patches applied), with the variables the walk knows for
its `substituteFrom` passed inline (dry-run skips substituteFrom). Run by `make e2e`.

The walk (gitops/flux/walk.py) stays the export's fast path; a difference here is fixed in the walk, or named in
FLUX_DIFFERENCES with the reason.

A shared base (gitops.layout: shared-base, the user's home-network-k3s) is judged by the program too: for each stack,
Flux's build of the plugin with that overlay's cluster-vars is, field for field, what the stack's program registered."""

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

from builders import capture_tree
from components.intel_gpu_plugin import IntelGpuPlugin
from conftest import EXAMPLES, FIXTURES, ROOT, export, make_project, repository, stack_text
from differential.verdicts import without_owner_labels  # the owner labels the controller adds at apply
from gitops.checks.base_merge import first_difference, shown_value, value_at
from gitops.flux.build import RepoView
from gitops.flux.inventory import FLUX_GROUP, ObjectId, show_key
from gitops.flux.walk import walk_from_bootstrap as walk
from gitops.tree import Tree
from model.flux_graph import duration_seconds
from model.labels import SHARED_DEV_NUM_REASON_ANNOTATION

pytestmark = pytest.mark.e2e

FLUX = ROOT / "build" / "tools" / "bin" / "flux"


@pytest.fixture(autouse=True, scope="module")
def _flux_is_built() -> None:
    """A missing Flux CLI fails these tests (never skips them): `make e2e` builds it first."""
    if not FLUX.is_file():
        pytest.fail(f"{FLUX}: not built; hint: run `make tools` (make e2e does)")

REPOS = FIXTURES / "repos"
# The user's own repository (one shared base, gitops.layout: shared-base): dev and prod export together into it.
HOME_STACKS = {s: (ROOT / f"Pulumi.{s}.yaml").read_text() for s in ("dev", "prod")}  # the shipped stacks
# Each stack shares the iGPU differently: the base's DaemonSet carries ${GPU_PLATFORM_…} tokens, each overlay's
# cluster-vars its values (the stacks differ in scalars only; a stack at sharedDevNum 1 has no args and no
# annotation, a difference of shape the export refuses).
SHARED_DEV_NUM = {"dev": (2, "two transcoders share the dev iGPU"),
                  "prod": (3, "three transcoders share each prod iGPU")}


def with_shared_dev_num(text: str, stack: str) -> str:
    count, reason = SHARED_DEV_NUM[stack]
    return text + f"  gpu-platform:intelGpuPlugin:\n    sharedDevNum: {count}\n    sharedDevNumReason: \"{reason}\"\n"


# Every fixture repository with the stacks exported into it and where Flux's walk starts; `exports`: the
# Kustomizations the export writes there (both by default); `project`: a project folder to export from (default: one
# made of `stacks`).
CASES: dict[str, dict[str, Any]] = {
    "flux-bootstrap": {"stacks": {"dev": stack_text("dev"), "prod": stack_text("prod")},
                       "roots": {"dev": "./clusters/dev", "prod": "./clusters/prod"}},
    "cluster-template": {"stacks": {"home": (REPOS / "stacks" / "cluster-template.yaml").read_text()},
                         "roots": {"home": "./kubernetes/flux/cluster"}},
    "cluster-template-generated": {
        "stacks": {"home": (EXAMPLES / "cluster-template" / "Pulumi.home.yaml").read_text()},
        "roots": {"home": "./kubernetes/flux/cluster"}},
    # the same repository with the export in cluster-template's own per-app shape (gitops.layout: per-app)
    "cluster-template-generated:per-app": {
        "stacks": {"home": (EXAMPLES / "cluster-template" / "Pulumi.home.yaml").read_text().replace(
            "    componentsDir: kubernetes/gpu-platform\n", "    layout: per-app\n")},
        "roots": {"home": "./kubernetes/flux/cluster"}},
    # onedr0p/home-ops's shape: Intel's DRA driver and Plex adopted from its HelmReleases (namespace folders whose
    # Namespace is named `_` until kustomize's namespace sets it); the example's own project, for its evidence/dra/
    # files; the export writes only its records and cluster-vars, no Kustomization of its own
    "home-ops": {"stacks": {"home": (EXAMPLES / "home-ops" / "Pulumi.home.yaml").read_text()},
                 "roots": {"home": "./kubernetes/flux/cluster"}, "project": EXAMPLES / "home-ops", "exports": ()},
    # every field kustomize-controller adds to a build, at once; nothing exported into it
    "flux-fields": {"stacks": {}, "roots": {"lab": "./clusters/lab"}},
    # the shared base: each overlay's build, and every Kustomization of the base built with that overlay's
    # cluster-vars; Plex is the repository's (plex.deliveredBy: repository), so only the plugin is exported
    "home-network-k3s": {"stacks": HOME_STACKS, "roots": {"dev": "./clusters/dev", "prod": "./clusters/prod"},
                         "exports": ("intel-gpu-plugin",)},
    # the same with a value that differs between the stacks: a ${TOKEN} in the base, a key in each cluster-vars
    "home-network-k3s:shared-dev-num": {
        "stacks": {s: with_shared_dev_num(text, s) for s, text in HOME_STACKS.items()},
        "roots": {"dev": "./clusters/dev", "prod": "./clusters/prod"}, "exports": ("intel-gpu-plugin",)},
}
BOOTSTRAP = ("flux-system", "flux-system")
SOPS_MASK = "**SOPS**"


@dataclass
class Judged:
    """One Kustomization: the objects the walk attributes to it and the objects Flux's build gives."""

    walk: dict[ObjectId, dict[str, Any]]
    flux: dict[ObjectId, dict[str, Any]]


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
        flux_objects = {ObjectId.of(o): without_owner_labels(o) for o in built}
        out[key] = Judged(walk={oid: _masked(view.manifests[oid]) for oid in walked.objects}, flux=flux_objects)
        for o in built:
            if o.get("kind") == "Kustomization" and str(o.get("apiVersion", "")).startswith(FLUX_GROUP + "/"):
                child = (o["metadata"].get("namespace", ""), o["metadata"]["name"])
                if child != key and child in view.kustomizations:
                    queue.append((child, without_owner_labels(o)))
    return out


@dataclass
class Copy:
    """A case's copy of its fixture repository with its stacks exported into it, and the project they ran from."""

    repo: Path
    project: Path | None


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, Copy]:
    out = {}
    for repo_name, case in CASES.items():
        base = tmp_path_factory.mktemp(repo_name.replace(":", "-"))
        repo = base / "repo"
        shutil.copytree(repository(repo_name.split(":")[0]), repo)
        project = case.get("project") or (make_project(base / "project", case["stacks"]) if case["stacks"] else None)
        if project:
            assert export(repo, *case["stacks"], project=project) == 0
        out[repo_name] = Copy(repo, project)
    return out


@pytest.fixture(scope="module")
def judged(copies) -> dict[tuple[str, str], dict[tuple[str, str], Judged]]:
    results = {}
    for repo_name, case in CASES.items():
        repo = copies[repo_name].repo
        for stack, root_path in case["roots"].items():
            work = repo.parent / f"work-{stack}"
            work.mkdir()
            results[(repo_name, stack)] = judge(repo, root_path, work)
    return results


def difference(oid: ObjectId, theirs: dict[str, Any], flux: dict[str, Any], who: str) -> str:
    """The first field where an object differs from Flux's build of it, and both values."""
    where = first_difference(theirs, flux)
    return f"{oid}: {where}: {who} {shown_value(value_at(theirs, where))}, flux {shown_value(value_at(flux, where))}"


# Where Flux's build and the walk cannot agree, by (repository, stack, Kustomization): the reason. Empty: they agree.
FLUX_DIFFERENCES: dict[tuple[str, str, tuple[str, str]], str] = {}

SUBJECTS = [(repo, stack) for repo, case in CASES.items() for stack in case["roots"]]


@pytest.mark.parametrize(("repo", "stack"), SUBJECTS)
def test_flux_builds_every_kustomization_the_walk_reaches_into_the_objects_the_walk_attributes_to_it(judged, repo,
                                                                                                   stack):
    results = judged[(repo, stack)]
    assert len(results) >= 2  # the root and what it applies at least
    differing = []  # every Kustomization's, so one run shows them all
    for key, j in results.items():
        if (repo, stack, key) in FLUX_DIFFERENCES:
            continue
        assert set(j.walk) == set(j.flux), (key, sorted(map(str, set(j.walk) ^ set(j.flux))))
        differing += [f"{show_key(key)}: {difference(oid, j.walk[oid], j.flux[oid], 'walk')}" for oid in j.walk
                      if j.walk[oid] != j.flux[oid]]
    assert not differing, differing


def test_the_export_s_own_kustomizations_are_judged_in_every_repository(judged):
    for (repo, stack), results in judged.items():
        if not CASES[repo]["stacks"]:
            continue
        for name in CASES[repo].get("exports", ("plex", "intel-gpu-plugin")):
            assert any(key[1] == name for key in results), (repo, stack, name)


def test_a_parent_s_patch_on_its_children_reaches_them_in_flux_s_build_and_in_the_walk(judged):
    """cluster-template's cluster-apps patches every child Kustomization (decryption, deletionPolicy, a nested
    HelmRelease patch): the export's own Kustomizations included."""
    results = judged[("cluster-template-generated", "home")]
    apps = results[("flux-system", "cluster-apps")]
    plex = next(o for oid, o in apps.flux.items() if oid.name == "plex" and oid.kind == "Kustomization")
    assert plex["spec"]["deletionPolicy"] == "WaitForTermination"
    assert plex["spec"]["patches"][0]["target"]["kind"] == "HelmRelease"
    assert apps.walk == apps.flux


def test_the_repository_s_driver_and_plex_the_stack_adopts_are_judged_in_home_ops(judged):
    """examples/home-ops: the export writes neither; Flux's build of the repository's own Kustomizations of Intel's
    DRA driver and Plex (under cluster-apps' patch) gives their HelmReleases, as the walk the adoption reads does."""
    results = judged[("home-ops", "home")]
    for key, release in ((("kube-system", "intel-gpu-resource-driver"), "intel-gpu-resource-driver"),
                         (("default", "plex"), "plex")):
        assert ObjectId("helm.toolkit.fluxcd.io", "HelmRelease", key[0], release) in results[key].flux, key
        assert results[key].walk == results[key].flux, key


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


# --- the shared base judged by the program: each overlay's Flux build of the plugin is that stack's own objects ---

HOME_CASES = [name for name in CASES if name.split(":")[0] == "home-network-k3s"]
PLUGIN = "intel-gpu-plugin"
CLUSTER_VARS = ObjectId("", "ConfigMap", "flux-system", "cluster-vars")


@pytest.fixture(scope="module")
def programs(copies) -> dict[tuple[str, str], Tree]:
    """Each stack's program run on its own (the stack file as the export read it), its objects placed by
    build_tree: what the program registered, before the shared base merges the stacks into one set of files."""
    from gitops.engine.program import run_program

    out = {}
    for name in HOME_CASES:
        project = copies[name].project
        assert project is not None
        for stack in CASES[name]["stacks"]:
            out[(name, stack)] = capture_tree(run_program(stack, project))
    return out


def plugin_by_flux(copy: Copy, overlay: dict[ObjectId, dict[str, Any]], work: Path,
                   ) -> tuple[dict[str, Any], dict[ObjectId, dict[str, Any]]]:
    """The plugin's Kustomization as Flux's build of the overlay gives it, and Flux's build of it with the
    overlay's cluster-vars (as Flux's build of the overlay gives them, the ConfigMap the cluster will hold)."""
    ks = overlay[ObjectId(FLUX_GROUP, "Kustomization", "flux-system", PLUGIN)]
    assert ks["spec"]["postBuild"] == {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]}
    work.mkdir(exist_ok=True)
    built = flux_build(copy.repo, work, with_inline_variables(ks, overlay[CLUSTER_VARS]["data"]))
    return ks, {ObjectId.of(o): without_owner_labels(o) for o in built}


@pytest.mark.parametrize(("repo", "stack"), [(repo, stack) for repo in HOME_CASES for stack in CASES[repo]["roots"]])
def test_flux_builds_the_plugin_of_each_overlay_into_that_stack_s_own_program_objects(judged, copies, programs,
                                                                                     tmp_path, repo, stack):
    """The Done-when of the shared base: `flux build kustomization intel-gpu-plugin` with the overlay's cluster-vars
    gives, field for field, the objects the stack's program registered for the plugin (owner labels taken out).
    The plugin's Kustomization in the overlay's build is the program's own, but for spec.timeout: one file in the
    base for every stack, it takes the longest of the stacks' (gitops/checks/shared_base.py)."""
    overlay = judged[(repo, stack)][BOOTSTRAP].flux
    ks, flux_objects = plugin_by_flux(copies[repo], overlay, tmp_path)
    tree = programs[(repo, stack)]
    program = {ObjectId.of(o.manifest): o.manifest for o in tree.objects if o.component_type == IntelGpuPlugin.TYPE}
    assert sorted(map(str, flux_objects)) == sorted(map(str, program)) == [
        "DaemonSet intel-gpu-plugin/intel-gpu-plugin", "Namespace intel-gpu-plugin",
        "NetworkPolicy intel-gpu-plugin/default-deny"]
    differing = [difference(oid, obj, flux_objects[oid], "program") for oid, obj in program.items()
                 if obj != flux_objects[oid]]
    assert not differing, (repo, stack, differing)
    own = {s: next(o.manifest for o in programs[(repo, s)].objects if ObjectId.of(o.manifest) == ObjectId.of(ks))
           for s in CASES[repo]["stacks"]}
    timeout = max((k["spec"]["timeout"] for k in own.values()), key=duration_seconds)
    assert without_owner_labels(ks) == {**own[stack], "spec": {**own[stack]["spec"], "timeout": timeout}}


def test_a_value_that_differs_between_the_stacks_is_a_token_in_the_base_and_each_overlay_s_value_in_flux_s_build(
        judged, copies, tmp_path):
    """home-network-k3s:shared-dev-num: the base's DaemonSet holds ${GPU_PLATFORM_…} in place of the plugin's
    -shared-dev-num flag and its reason; each overlay's cluster-vars holds its stack's values; Flux's build of the
    plugin with them gives each stack's own count and reason (and the test above: the rest of the program's
    objects)."""
    repo = "home-network-k3s:shared-dev-num"
    copy = copies[repo]
    daemonset = yaml.safe_load((copy.repo / "platform" / PLUGIN / f"daemonset.{PLUGIN}.yaml").read_text())
    tokens = [daemonset["spec"]["template"]["spec"]["containers"][0]["args"][0],
              daemonset["metadata"]["annotations"][SHARED_DEV_NUM_REASON_ANNOTATION]]
    assert all(t.startswith("${GPU_PLATFORM_") and t.endswith("}") for t in tokens), tokens
    for stack, (count, reason) in SHARED_DEV_NUM.items():
        overlay_vars = yaml.safe_load((copy.repo / "clusters" / stack / "cluster-vars.yaml").read_text())["data"]
        assert [overlay_vars[t[2:-1]] for t in tokens] == [f"-shared-dev-num={count}", reason]
        overlay = judged[(repo, stack)][BOOTSTRAP].flux
        assert {k: overlay[CLUSTER_VARS]["data"][k] for k in (t[2:-1] for t in tokens)} == \
            {t[2:-1]: overlay_vars[t[2:-1]] for t in tokens}
        _, built = plugin_by_flux(copy, overlay, tmp_path / stack)
        flux_daemonset = built[ObjectId("apps", "DaemonSet", PLUGIN, PLUGIN)]
        assert flux_daemonset["spec"]["template"]["spec"]["containers"][0]["args"] == [f"-shared-dev-num={count}"]
        assert flux_daemonset["metadata"]["annotations"] == {SHARED_DEV_NUM_REASON_ANNOTATION: reason}
    # the base never holds a stack's value: the unsubstituted build keeps the tokens
    assert "-shared-dev-num=" not in (copy.repo / "platform" / PLUGIN / f"daemonset.{PLUGIN}.yaml").read_text()


def test_stacks_that_share_the_plugin_only_in_one_differ_in_shape_and_the_export_refuses_them(tmp_path, capsys):
    """dev at sharedDevNum 2, prod at 1: prod's DaemonSet has no args and no annotation at all, so no token can say
    both; the export refuses in one line, naming dev's stack file and keys, then the DaemonSet's metadata and
    container, and writes nothing."""
    repo = tmp_path / "repo"
    shutil.copytree(repository("home-network-k3s"), repo)
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    stacks = {"dev": with_shared_dev_num(HOME_STACKS["dev"], "dev"), "prod": HOME_STACKS["prod"]}
    capsys.readouterr()
    assert export(repo, *stacks, project=make_project(tmp_path / "project", stacks)) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, errors
    assert errors[0].startswith("error: Pulumi.dev.yaml: gpu-platform:intelGpuPlugin.sharedDevNum: 2, while prod says "
                                "(not set); "), errors
    assert (f"so platform/{PLUGIN}/daemonset.{PLUGIN}.yaml differs in shape at metadata (prod lacks annotations) and "
            "at spec.template.spec.containers[0] (prod lacks args) ") in errors[0], errors
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before
