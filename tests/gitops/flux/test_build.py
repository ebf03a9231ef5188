"""Flux's view of a repository (gitops/flux/build.py, gitops/flux/walk.py), held to kustomize and to Flux's
documented behaviour."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, repository
from gitops.flux.build import Builder, RepoView
from gitops.flux.documents import BuildError
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk

REPOS = FIXTURES / "repos"


def kustomize_ids(folder: Path) -> list[ObjectId]:
    result = subprocess.run(["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(folder)],
                            capture_output=True, text=True, check=True)
    return sorted(ObjectId.of(d) for d in yaml.safe_load_all(result.stdout) if d)


def kustomization_folders(repo: Path) -> list[str]:
    return sorted(p.parent.relative_to(repo).as_posix() for p in repo.rglob("kustomization.yaml")
                  if "components/common" not in p.parent.as_posix())  # a Component is built only inside others


@pytest.mark.parametrize("repo,folder", [(r, f) for r in ("flux-bootstrap", "cluster-template")
                                         for f in kustomization_folders(repository(r))], ids=lambda v: str(v))
def test_every_fixture_folder_builds_to_what_kubectl_kustomize_builds(repo, folder):
    builder = Builder(RepoView(repository(repo)))
    ours = sorted(ObjectId.of(b.manifest) for b in builder.kustomize(folder))
    assert ours == kustomize_ids(repository(repo) / folder)


def test_a_plain_list_of_resources_is_built_without_kubectl_and_anything_more_with_it():
    builder = Builder(RepoView(REPOS / "cluster-template"))
    builder.kustomize("kubernetes/apps/default/echo/app")  # resources only
    assert builder.kubectl_builds == 0
    builder.kustomize("kubernetes/apps/default")  # namespace + components
    assert builder.kubectl_builds == 1


def test_flux_generates_a_kustomization_where_none_exists_and_does_not_descend_into_one_that_does(tmp_path):
    (tmp_path / "c" / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "c" / "app").mkdir()
    (tmp_path / "c" / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n")
    (tmp_path / "c" / "NOTES.md").write_text("not yaml, ignored\n")
    (tmp_path / "c" / "index.json").write_text("{}")
    (tmp_path / "c" / "sub" / "deeper" / "b.yml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: x}\n")
    (tmp_path / "c" / "app" / "kustomization.yaml").write_text("resources: [c.yaml]\n")
    (tmp_path / "c" / "app" / "c.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n")
    (tmp_path / "c" / "app" / "not-listed.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hidden, namespace: x}\n")
    built = Builder(RepoView(tmp_path)).flux_path("c")
    assert sorted(ObjectId.of(b.manifest).name for b in built) == ["a", "b", "c"]


def test_a_yaml_file_that_is_not_a_kubernetes_object_fails_flux_generated_build(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".sops.yaml").write_text("creation_rules:\n- age: x\n")
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(tmp_path)).flux_path("c")
    assert str(refused.value) == ("c/.sops.yaml: failed to decode Kubernetes YAML: a document without apiVersion "
                                  "and kind")


def test_an_object_twice_in_one_build_fails_as_kustomize_fails(tmp_path):
    (tmp_path / "c").mkdir()
    for name in ("one.yaml", "two.yaml"):
        (tmp_path / "c" / name).write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: x}\n")
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(tmp_path)).flux_path("c")
    assert str(refused.value) == ("c (Flux's generated kustomization): ConfigMap x/same comes from both c/one.yaml and "
                                  "c/two.yaml; kustomize refuses an object twice in one build")


def test_a_kustomization_listing_a_missing_file_fails_naming_the_entry(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "kustomization.yaml").write_text("resources: [gone.yaml]\n")
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(tmp_path)).flux_path("c")
    assert str(refused.value) == "c/kustomization.yaml: resources: 'gone.yaml': no such file or folder"


def test_the_view_shows_pending_writes_and_hides_pending_deletes(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "old.yaml").write_text("x: 1\n")
    view = RepoView(tmp_path, writes={"c/new.yaml": b"y: 2\n", "d/e/f.yaml": b"z: 3\n"}, deletes={"c/old.yaml"})
    assert view.listdir("c") == ([], ["new.yaml"])
    assert view.is_dir("d/e") and view.read("d/e/f.yaml") == b"z: 3\n"
    assert not view.is_file("c/old.yaml")
    with view.on_disk() as root:
        assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.yaml")) == ["c/new.yaml", "d/e/f.yaml"]
    assert not (tmp_path / ".gitops-export").exists(), "the mirror is removed afterwards"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c", "old.yaml"], "the view never writes into OUT"


def test_the_view_never_reads_through_a_symlink_that_leads_out_of_the_repository(tmp_path):
    """Flux's confined filesystem refuses such a link where its generated kustomization reads it: so does the walk,
    naming the link, and the secret behind it is never read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\n")
    repo = tmp_path / "repo"
    (repo / "c").mkdir(parents=True)
    os.symlink(outside, repo / "c" / "linked")
    os.symlink(outside / "secret.yaml", repo / "c" / "file.yaml")
    view = RepoView(repo)
    assert view.listdir("c") == ([], ["file.yaml"])
    assert not view.is_dir("c/linked") and not view.is_file("c/file.yaml") and view.leads_out("c/file.yaml")
    with pytest.raises(BuildError) as refused:
        Builder(view).flux_path("c")
    assert str(refused.value) == ("c/file.yaml: cannot be read (a symlink that leads out of the repository or to "
                                  "nothing)")
    (repo / "c" / "kustomization.yaml").write_text("resources: [linked]\n")
    with pytest.raises(BuildError) as refused:
        Builder(view).flux_path("c")
    assert str(refused.value) == ("c/kustomization.yaml: resources: 'linked': a symlink that leads out of the "
                                  "repository (or to nothing); Flux's confined filesystem refuses to read it")


def test_a_symlink_inside_the_repository_is_followed_as_flux_follows_it(tmp_path):
    """A file shared between clusters by a link, and a folder linked into a kustomization's resources: Flux
    builds both (tests/differential found the walk refusing them)."""
    repo = tmp_path / "repo"
    (repo / "shared" / "app").mkdir(parents=True)
    (repo / "shared" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\n")
    (repo / "shared" / "app" / "kustomization.yaml").write_text("resources: [svc.yaml]\n")
    (repo / "shared" / "app" / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: app}\n")
    (repo / "c").mkdir()
    os.symlink("../shared/cm.yaml", repo / "c" / "cm.yaml")
    os.symlink("../shared/app", repo / "c" / "app")
    view = RepoView(repo)
    assert [b.manifest["metadata"]["name"] for b in Builder(view).flux_path("c")] == ["shared"]  # not entered
    (repo / "c" / "kustomization.yaml").write_text("resources: [cm.yaml, app]\n")
    built = Builder(view).flux_path("c")
    assert [(b.manifest["metadata"]["name"], b.origin) for b in built] == [("shared", "c/cm.yaml"),
                                                                          ("app", "shared/app/svc.yaml")]


def test_a_linked_folder_s_entries_are_resolved_from_its_real_path_as_kustomize_resolves_them(tmp_path):
    """`a/b/link` -> `x`: x's `../outside` is outside the repository from x, though `a/b/link/../outside` is not;
    kustomize reads from the real path, so the walk judges from there and never lets kubectl read outside."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n")
    repo = tmp_path / "repo"
    (repo / "x").mkdir(parents=True)
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "x" / "kustomization.yaml").write_text("namePrefix: p-\nresources: [../../outside/cm.yaml]\n")
    os.symlink("../../x", repo / "a" / "b" / "link")
    (repo / "a" / "b" / "kustomization.yaml").write_text("resources: [link]\n")
    builder = Builder(RepoView(repo))
    with pytest.raises(BuildError) as refused:
        builder.flux_path("a/b")
    assert str(refused.value) == "a/b/link/kustomization.yaml: '../../outside/cm.yaml': leaves the repository"
    assert builder.kubectl_builds == 0


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_bootstrap_fixture_as_flux_sees_it_before_any_export(stack):
    view = walk(RepoView(repository("flux-bootstrap")), f"./clusters/{stack}")
    assert list(view.kustomizations) == [("flux-system", "flux-system")]
    root = view.kustomizations[("flux-system", "flux-system")]
    assert root.declared_in == f"clusters/{stack}/flux-system/gotk-sync.yaml" and root.spec["prune"] is True
    assert ObjectId("", "Namespace", "", "flux-system") in view.applied_by
    assert len(root.objects) == 12 and view.problems == []


def test_the_cluster_template_fixture_as_flux_sees_it():
    view = walk(RepoView(REPOS / "cluster-template"), "./kubernetes/flux/cluster")
    assert ("kube-system", "cilium") in view.kustomizations
    echo = view.kustomizations[("default", "echo")]
    assert echo.depends == (("kube-system", "coredns"),)
    assert echo.variables == {"SECRET_DOMAIN": None, "SECRET_ACME_EMAIL": None}  # from a SOPS Secret: names only
    assert view.problems == []
    assert all(len(appliers) == 1 for appliers in view.applied_by.values())


# --- untrusted input: whatever a repository holds, the walk answers and never crashes ---------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 400), st.text(max_size=12),
                     st.sampled_from(["${X}", "./c", "./../x", "5m", "flux-system", "Deployment"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                       max_leaves=12)
_spec = st.fixed_dictionaries({}, optional={
    k: _values for k in ("path", "dependsOn", "postBuild", "sourceRef", "targetNamespace", "wait", "timeout",
                         "healthChecks", "template", "containers")})
_docs = st.lists(st.fixed_dictionaries({
    "apiVersion": st.sampled_from(["kustomize.toolkit.fluxcd.io/v1", "apps/v1", "v1"]),
    "kind": st.sampled_from(["Kustomization", "Deployment", "DaemonSet", "ConfigMap", "Secret"]),
}, optional={"metadata": st.one_of(_values, st.fixed_dictionaries({}, optional={
    "name": _values, "namespace": _values, "annotations": _values})), "spec": st.one_of(_values, _spec),
    "data": _values}), min_size=1, max_size=4)


ONE_LINE_WITH_HINT = re.compile(r"[^\n]+; hint: [^\n]+")


def _answer(repo: Path) -> tuple[list[str], list, list, list[str]]:
    """What the export asks of the walk: its problems, the Kustomizations, every start budget, the graph and
    timeout lines."""
    from gitops.checks.applied_specs import _waited_workloads
    from model.flux_graph import GraphNode, check_graph, check_wait_timeout, worst_case_start

    view = walk(RepoView(repo), "./c")
    starts = [worst_case_start(manifest, 3) for manifest in view.manifests.values()]
    lines, nodes = [], []
    for ks in view.kustomizations.values():
        line = check_wait_timeout(str(ks.key), ks.spec.get("timeout"), str(ks.spec.get("interval", "0s")),
                                  _waited_workloads(ks, view, 3, set()))
        lines += [line] if line else []
        nodes.append(GraphNode(ks.key, ks.depends, ks.spec.get("wait") is True, ks.declared_in))
    lines += check_graph(nodes, [view.bootstrap], ("flux-system", "intel-gpu-plugin"), ("flux-system", "cilium"))
    return view.problems, list(view.kustomizations), starts, lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=_docs)
def test_any_shape_of_object_in_the_repository_gives_an_answer_not_a_crash(tmp_path_factory, docs):
    repo = tmp_path_factory.mktemp("fuzz")
    (repo / "c").mkdir()
    (repo / "c" / "objects.yaml").write_text(yaml.safe_dump_all(docs))
    problems, kustomizations, starts, lines = _answer(repo)
    assert _answer(repo) == (problems, kustomizations, starts, lines), "the same repository, the same answer"
    assert all(start.seconds >= 0 and start.explanation for start in starts)
    assert all(ONE_LINE_WITH_HINT.fullmatch(p) for p in problems), problems
    assert all(line.startswith("flux: ") and ONE_LINE_WITH_HINT.fullmatch(line) for line in lines), lines


@pytest.mark.parametrize("entry,problem", [
    ("../../outside", "leaves the repository"),
    ("https://github.com/example/repo//base?ref=main", "a remote resource; the walk reads only this repository"),
    ("linked", "a symlink that leads out of the repository (or to nothing); Flux's confined filesystem refuses to "
               "read it"),
])
def test_kubectl_is_never_asked_to_read_outside_the_repository(tmp_path, entry, problem):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (outside / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n")
    repo = tmp_path / "repo"
    (repo / "c").mkdir(parents=True)
    os.symlink(outside, repo / "c" / "linked")
    # namePrefix makes the kustomization more than a plain list, so kubectl would build it.
    (repo / "c" / "kustomization.yaml").write_text(f"namePrefix: x-\nresources:\n- {entry}\n")
    builder = Builder(RepoView(repo))
    with pytest.raises(BuildError) as refused:
        builder.flux_path("c")
    assert str(refused.value) == f"c/kustomization.yaml: '{entry}': {problem}"
    assert builder.kubectl_builds == 0


def test_the_bootstrap_object_is_found_by_its_path_when_the_stack_file_places_flux_in_another_namespace(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(repository("flux-bootstrap"), root)
    right = walk(RepoView(root), "./clusters/prod")
    moved = walk(RepoView(root), "./clusters/prod", bootstrap=("gpu-platform", "flux-system"),
                 git_repository=("gpu-platform", "flux-system"))
    assert moved.bootstrap == right.bootstrap == ("flux-system", "flux-system")
    assert moved.applied_by == right.applied_by  # not the root applied a second time by its own object
    statuses = [{k: v.status for k, v in view.kustomizations.items()} for view in (moved, right)]
    assert statuses[0] == statuses[1]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_folder_with_two_kustomization_files_is_refused_as_kustomize_refuses_it(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n",
                                     "apps/kustomization.yml": "resources: []\n",
                                     "apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(root)).flux_path("apps")
    assert str(refused.value) == ("apps: found multiple kustomization files (apps/kustomization.yaml, "
                                  "apps/kustomization.yml); kustomize and Flux refuse to build the folder")
    kubectl = subprocess.run(["kubectl", "kustomize", str(root / "apps")], capture_output=True, text=True)
    assert kubectl.returncode != 0 and "multiple" in kubectl.stderr.lower()  # the model agrees with kustomize


@pytest.mark.parametrize(("files", "cycle"), [
    ({"a/kustomization.yaml": "resources: [.]\n"}, "a/kustomization.yaml: resources: '.': a cycle of kustomizations "
                                                   "(a/ -> a/)"),
    ({"a/kustomization.yaml": "resources: [../b]\n", "b/kustomization.yaml": "resources: [../a]\n"},
     "b/kustomization.yaml: resources: '../a': a cycle of kustomizations (a/ -> b/ -> a/)"),
], ids=["itself", "each-other"])
def test_a_cycle_of_kustomizations_is_named_not_a_recursion_error(tmp_path, files, cycle):
    root = _tree(tmp_path / "repo", files)
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(root)).flux_path("a")
    assert str(refused.value) == f"{cycle}; kustomize refuses to build it"
    assert subprocess.run(["kubectl", "kustomize", str(root / "a")], capture_output=True).returncode != 0


# --- the build with a Kustomization's own fields (the overlay), piece by piece ------------------------------------

def _cm(name: str, namespace: str = "", **meta: object) -> str:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **meta}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})


# --- where kubectl builds a hand-written kustomization: each object still named at its file -----------------------

def _listed_origins_repo(root: Path) -> Path:
    return _tree(root, {
        "base/kustomization.yaml": "resources: [cm.yaml, svc.yaml]\n",
        "base/cm.yaml": _cm("cm", "x"),
        "base/svc.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: x}\n",
        "patched/kustomization.yaml": "namePrefix: p-\nresources: [../base]\n",
        "patched/cm.yaml": _cm("only-patched"),
        "overlay/extra.yaml": _cm("extra", "x"),
        "overlay/dup.yaml": _cm("cm", "y"),
        "overlay/bad.yaml": "a: [unclosed\n",
        "overlay/kustomization.yaml": yaml.safe_dump({"namePrefix": "o-", "resources": [
            "https://example.com/remote", {"not": "a string"}, "../../outside.yaml", "missing.yaml", "bad.yaml",
            "../patched", "extra.yaml", "../base", "dup.yaml"]}),
        "nothing/cm.yaml": _cm("n"),
        "odd/kustomization.yaml": "namePrefix: o-\nresources: just-a-string\n",
        "broken/kustomization.yaml": "resources: [unclosed\n",
    })


def test_the_files_a_kustomizations_resources_name_give_each_object_its_origin_where_one_file_holds_it(tmp_path):
    """An object in one listed file (or a folder that builds plainly) is named at that file; one found in two files,
    or only in a folder kubectl must build, or behind an entry that reads nothing, keeps the folder."""
    builder = Builder(RepoView(_listed_origins_repo(tmp_path / "repo")))
    assert builder._listed_origins("overlay") == {("ConfigMap", "extra"): "overlay/extra.yaml",
                                                  ("Service", "svc"): "base/svc.yaml"}
    assert builder._listed_origins("nothing") == {}  # Flux's generated kustomization: nothing listed
    assert builder._listed_origins("odd") == {}
    with pytest.raises(BuildError) as refused:
        builder._listed_origins("broken")
    assert str(refused.value) == "broken/kustomization.yaml: not valid YAML"


def test_a_kustomization_kubectl_builds_names_each_object_at_the_file_it_came_from(tmp_path):
    root = _tree(tmp_path / "repo", {
        "base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": _cm("cm", "x"),
        "overlay/extra.yaml": _cm("extra", "x"),
        "overlay/kustomization.yaml": "namespace: x\nresources: [../base, extra.yaml]\n"
                                      "configMapGenerator: [{name: gen, literals: [a=b]}]\n"
                                      "generatorOptions: {disableNameSuffixHash: true}\n"})
    built = Builder(RepoView(root)).kustomize("overlay")
    assert {ObjectId.of(b.manifest).name: (b.origin, b.trail) for b in built} == {
        name: (origin, (("overlay/kustomization.yaml", "(kustomize build)"),)) for name, origin in [
            ("cm", "base/cm.yaml"), ("extra", "overlay/extra.yaml"), ("gen", "overlay")]}


# --- kustomize's refusals, word for word, where the walk must agree with it ---------------------------------------

def test_the_repositorys_root_with_two_kustomization_files_is_refused_by_its_own_name(tmp_path):
    root = _tree(tmp_path / "repo", {"kustomization.yaml": "resources: []\n", "kustomization.yml": "resources: []\n"})
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(root)).flux_path("")
    assert str(refused.value) == (".: found multiple kustomization files (kustomization.yaml, kustomization.yml); "
                                  "kustomize and Flux refuse to build the folder")


@pytest.mark.parametrize(("files", "start", "message"), [
    ({"a/kustomization.yaml": "resources: [../b]\n", "b/kustomization.yaml": "resources: [../c]\n",
      "c/kustomization.yaml": "resources: [../b]\n"}, "a",
     "c/kustomization.yaml: resources: '../b': a cycle of kustomizations (b/ -> c/ -> b/)"),
    ({"kustomization.yaml": "resources: [a]\n", "a/kustomization.yaml": "resources: [..]\n"}, "",
     "a/kustomization.yaml: resources: '..': a cycle of kustomizations (./ -> a/ -> ./)"),
], ids=["not-from-the-start", "through-the-root"])
def test_a_cycle_is_named_from_where_it_closes(tmp_path, files, start, message):
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(_tree(tmp_path / "repo", files))).flux_path(start)
    assert str(refused.value) == f"{message}; kustomize refuses to build it"


def test_a_resource_behind_a_link_that_leads_out_is_refused_in_full_words(tmp_path):
    (tmp_path / "outside").mkdir()
    root = _tree(tmp_path / "repo", {"c/kustomization.yaml": "resources: [linked]\n"})
    os.symlink(tmp_path / "outside", root / "c" / "linked")
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(root)).flux_path("c")
    assert str(refused.value) == ("c/kustomization.yaml: resources: 'linked': a symlink that leads out of the "
                                  "repository (or to nothing); Flux's confined filesystem refuses to read it")


def test_an_object_without_a_namespace_and_the_same_in_default_are_one_object_to_kustomize(tmp_path):
    root = _tree(tmp_path / "repo", {"c/one.yaml": _cm("same"), "c/two.yaml": _cm("same", "default")})
    with pytest.raises(BuildError) as refused:
        Builder(RepoView(root)).flux_path("c")
    assert str(refused.value) == ("c (Flux's generated kustomization): ConfigMap default/same comes from both "
                                  "c/one.yaml and c/two.yaml; kustomize refuses an object twice in one build")
    (root / "c" / "kustomization.yaml").write_text("resources: [one.yaml, two.yaml]\n")
    kubectl = subprocess.run(["kubectl", "kustomize", str(root / "c")], capture_output=True, text=True)
    assert kubectl.returncode != 0 and "already registered id" in kubectl.stderr  # kustomize agrees


def test_a_long_or_multi_line_string_is_skipped_and_the_paths_after_it_still_confined(tmp_path):
    kustomization = {"namePrefix": "x-", "commonAnnotations": {"a": "two\nlines"}, "resources": ["../../outside"]}
    root = _tree(tmp_path / "repo", {"c/kustomization.yaml": yaml.safe_dump(kustomization, sort_keys=False)})
    builder = Builder(RepoView(root))
    with pytest.raises(BuildError) as refused:
        builder.flux_path("c")
    assert str(refused.value) == "c/kustomization.yaml: '../../outside': leaves the repository"
    assert builder.kubectl_builds == 0


def test_a_nested_kustomization_yaml_cannot_read_is_named_before_kubectl_runs(tmp_path):
    root = _tree(tmp_path / "repo", {"c/kustomization.yaml": "namePrefix: x-\nresources: [sub]\n",
                                     "c/sub/kustomization.yaml": "resources: !!int x\n"})
    builder = Builder(RepoView(root))
    with pytest.raises(BuildError) as refused:
        builder.flux_path("c")
    assert str(refused.value) == "c/sub/kustomization.yaml: not valid YAML"
    assert builder.kubectl_builds == 0


# --- the view: reading, resolving and mirroring as the OS and Flux would ------------------------------------------

def test_reading_what_the_view_does_not_hold_is_refused_as_the_os_refuses_it(tmp_path):
    (tmp_path / "outside.yaml").write_text(_cm("leak"))
    root = _tree(tmp_path / "repo", {"c/kept.yaml": _cm("k")})
    os.symlink(tmp_path / "outside.yaml", root / "c" / "out.yaml")
    view = RepoView(root)
    with pytest.raises(PermissionError) as refused:
        view.read("c/out.yaml")
    assert (refused.value.errno, refused.value.filename) == (errno.EACCES, "c/out.yaml")
    deleted = RepoView(root, deletes={"c/kept.yaml"})
    with pytest.raises(FileNotFoundError) as missing:
        deleted.read("c/kept.yaml")
    assert (missing.value.errno, missing.value.filename) == (errno.ENOENT, "c/kept.yaml")
    for rel, where in (("c/missing.yaml", view), ("c/kept.yaml", deleted)):
        with pytest.raises(BuildError) as refused_build:
            Builder(where)._read(rel)
        assert str(refused_build.value) == f"{rel}: cannot be read (No such file or directory)"


def test_a_path_resolves_through_links_inside_the_repository_and_stays_as_written_through_one_that_leads_out(
        tmp_path):
    (tmp_path / "outside").mkdir()
    root = _tree(tmp_path / "repo", {"a/x.yaml": _cm("x")})
    os.symlink("a", root / "link")
    os.symlink(".", root / "self")
    os.symlink(tmp_path / "outside", root / "out")
    view = RepoView(root, writes={"new/y.yaml": b""})
    assert [view.resolved(p) for p in ("", "a", "link", "self", "out", "new")] == ["", "a", "a", "", "out", "new"]


def test_the_mirror_links_unchanged_folders_and_rebuilds_a_linked_folder_that_gets_a_new_file(tmp_path):
    root = _tree(tmp_path / "repo", {"a/x.yaml": _cm("x"), "b/old.yaml": _cm("old")})
    os.symlink("a", root / "linked")
    os.symlink("b", root / "written")
    view = RepoView(root, writes={"written/new.yaml": b"new"})
    with view.on_disk() as mirror:
        assert (mirror / "linked").is_symlink() and os.readlink(mirror / "linked") == str(root / "linked")
        assert (mirror / "written").is_dir() and not (mirror / "written").is_symlink()
        assert (mirror / "written" / "new.yaml").read_bytes() == b"new"
        assert os.readlink(mirror / "written" / "old.yaml") == str(root / "written" / "old.yaml")
        assert os.readlink(mirror / "a" / "x.yaml") == str(root / "a" / "x.yaml")


# --- Lists: the in-process build takes a List apart exactly as kubectl kustomize does ------------------------------
