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
from gitops.flux.build import ORIGIN_ANNOTATION, Builder, BuildError, Built, RepoView
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


def test_a_variable_that_kustomize_must_quote_stays_a_string():
    from gitops.flux.build import _load_docs
    from gitops.flux.varsub import PlainVar

    doc = _load_docs(b'apiVersion: v1\nkind: ConfigMap\na: "${A}"\nb: "${A}: x"\nc: "x\\n${A}"\nd: "\\a${A}"\n',
                     "f.yaml")[0]
    assert [isinstance(doc[k], PlainVar) for k in "abcd"] == [True, False, False, False]  # d: written "\a${A}"


# --- the build with a Kustomization's own fields (the overlay), piece by piece ------------------------------------

def _cm(name: str, namespace: str = "", **meta: object) -> str:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **meta}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})


def _overlay_doc(root: Path, folder: str, fields: dict, target: str | None = None) -> dict:
    here = root / ".gitops-export" / "flux-overlay" / "0"
    return Builder(RepoView(root))._overlay_doc(folder, fields, target, "clusters/dev/apps.yaml", root, here)


def test_the_overlay_names_the_folder_from_the_work_folder_and_carries_each_field_flux_adds(tmp_path):
    patch = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n"
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a"),
                                     "extra/kustomization.yaml": "kind: Component\n"})
    fields = {"namePrefix": "lab-", "nameSuffix": "-v1", "images": [{"name": "nginx", "newTag": "1.27"}],
              "patches": [{"patch": patch, "target": {"kind": "ConfigMap"}, "options": {"allowNameChange": True}}],
              "components": ["../extra"]}
    assert _overlay_doc(root, "apps", fields, "shop") == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["../../../apps"],
        "buildMetadata": ["originAnnotations"], "namespace": "shop", "namePrefix": "lab-", "nameSuffix": "-v1",
        "images": [{"name": "nginx", "newTag": "1.27"}],
        "patches": [{"patch": patch, "target": {"kind": "ConfigMap"}}],  # what Flux takes of a patch, no more
        "components": ["../../../extra"]}
    assert _overlay_doc(root, "", {}) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["../../../apps",
                                                                                              "../../../extra"],
        "buildMetadata": ["originAnnotations"]}, "the repository's root, which has no kustomization: what Flux lists"


def test_where_flux_generates_the_kustomization_the_overlay_lists_what_it_would_read(tmp_path):
    root = _tree(tmp_path / "repo", {"a.yaml": _cm("a"), "b.yml": _cm("b"), "NOTES.md": "not yaml\n",
                                     "deep/x/c.yaml": _cm("c"), "sub/kustomization.yaml": "resources: [d.yaml]\n",
                                     "sub/d.yaml": _cm("d"), "sub/not-listed.yaml": _cm("e")})
    assert _overlay_doc(root, "", {"namePrefix": "p-"})["resources"] == [
        "../../../a.yaml", "../../../b.yml", "../../../deep/x/c.yaml", "../../../sub"]
    assert _overlay_doc(root, "deep", {"namePrefix": "p-"})["resources"] == ["../../../deep/x/c.yaml"]


@pytest.mark.parametrize(("spec", "problem"), [
    ({"patches": ["a string"]},
     "spec.patches[0]: Flux takes an inline `patch` string (and an optional target) only"),
    ({"patches": [{"patch": "kind: ConfigMap\n"}, {"path": "patch.yaml"}]},
     "spec.patches[1]: Flux takes an inline `patch` string (and an optional target) only"),
    ({"patches": [{"patch": "a: 1\nb: [1"}]},
     "spec.patches[0].patch: not valid YAML (line 3 of the patch): did not find expected ',' or ']'"),
    ({"patches": [{"patch": "a: \x07"}]}, "spec.patches[0].patch: not valid YAML: unreadable"),
    ({"patches": [{"patch": "a: !!int x"}]}, "spec.patches[0].patch: not readable as YAML"),
    ({"patches": [{"patch": "just text"}]}, "spec.patches[0].patch: neither a strategic merge patch (a mapping) "
                                            "nor a JSON6902 patch (a list of operations)"),
    ({"components": ["../../elsewhere"]}, "spec.components: '../../elsewhere': leaves the repository"),
    ({"components": ["../missing"]}, "spec.components: '../missing': no such folder"),
], ids=["not-a-mapping", "a-patch-file", "invalid-yaml", "unreadable", "a-bad-tag", "a-scalar", "leaves", "missing"])
@pytest.mark.parametrize("declared_in", ["clusters/dev/apps.yaml", ""])
def test_a_kustomization_field_flux_would_refuse_is_named_at_the_file_declaring_it(tmp_path, spec, problem,
                                                                                   declared_in):
    """Before kubectl runs: kustomize's own error would name the walk's overlay, not the file the user wrote (or the
    folder, where the caller knows no file)."""
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a")})
    builder = Builder(RepoView(root))
    with pytest.raises(BuildError) as refused:
        builder.flux_build("apps", spec, declared_in) if declared_in else builder.flux_build("apps", spec)
    builder.close()
    assert str(refused.value) == f"{declared_in or 'apps'}: {problem}"
    assert builder.kubectl_builds == 0
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "apps", "apps/cm.yaml", "apps/kustomization.yaml"], "the overlay's folder is gone once the builder closes"


def _attributed(root: Path, manifest: dict, plain: list[Built]) -> Built:
    here = root / ".gitops-export" / "flux-overlay" / "0"
    return Builder(RepoView(root))._attributed(manifest, "apps", plain, "lab-", "", "clusters/dev/apps.yaml", root,
                                               here)


def _overlay_object(origin: str | None, name: str = "lab-a", **annotations: str) -> dict:
    if origin is not None:
        annotations[ORIGIN_ANNOTATION] = origin
    return {"kind": "ConfigMap", "metadata": {"name": name, **({"annotations": annotations} if annotations else {})}}


@pytest.mark.parametrize(("annotation", "origin"), [
    ("path: ../../../apps/cm.yaml\n", "apps/cm.yaml"),
    ("path: '../../../apps/a: b.yaml'\n", "apps/a: b.yaml"),  # a path kustomize must quote
    ("configuredIn: ../../../apps/kustomization.yaml\nconfiguredBy:\n  kind: ConfigMapGenerator\n", "apps"),
    ("path: ../../../apps/gone.yaml\n", "apps"),
    ("path: [unclosed\n", "apps"),
    ("path: 5\n", "apps"),
    (None, "apps"),
], ids=["a-file", "quoted", "a-generator", "no-such-file", "not-yaml", "not-a-string", "none"])
def test_an_object_of_the_overlay_is_named_at_the_file_its_origin_annotation_gives_or_else_at_the_folder(
        tmp_path, annotation, origin):
    root = _tree(tmp_path / "repo", {"apps/cm.yaml": _cm("a"), "apps/a: b.yaml": _cm("b")})
    built = _attributed(root, _overlay_object(annotation), [])
    assert (built.origin, built.trail, built.declared) == (
        origin, (("clusters/dev/apps.yaml", "spec (Flux's own fields)"),), None)
    assert built.manifest == {"kind": "ConfigMap", "metadata": {"name": "lab-a"}}, "the annotation is taken off"


def test_the_origin_annotation_is_taken_off_and_every_other_annotation_kept(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/cm.yaml": _cm("a")})
    built = _attributed(root, _overlay_object("path: ../../../apps/cm.yaml\n", note="kept"), [])
    assert built.manifest["metadata"] == {"name": "lab-a", "annotations": {"note": "kept"}}


def test_an_object_of_the_overlay_takes_the_trail_and_declaration_of_its_counterpart_in_the_plain_build(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/cm.yaml": _cm("a"), "apps/other.yaml": _cm("a", "two")})
    trail = (("apps/kustomization.yaml", "cm.yaml"),)
    declared = yaml.safe_load(_cm("a"))
    counterpart = Built(declared, "apps/cm.yaml", trail)
    built = _attributed(root, _overlay_object("configuredIn: x\n"), [counterpart])
    assert (built.origin, built.trail, built.declared) == ("apps/cm.yaml", trail, declared), \
        "no file in the annotation: the counterpart's"
    built = _attributed(root, _overlay_object("path: ../../../apps/other.yaml\n"), [counterpart])
    assert (built.origin, built.trail) == ("apps/other.yaml", trail), "the annotation's file wins over the folder's"
    same = {"kind": "ConfigMap", "metadata": {"name": "lab-a"}}
    assert _attributed(root, _overlay_object(None), [Built(same, "apps/cm.yaml", trail)]).declared is None, \
        "declared only where the Kustomization's fields changed it"


def test_of_two_counterparts_the_one_from_the_annotations_file_is_taken(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/one.yaml": _cm("a", "one"), "apps/two.yaml": _cm("a", "two")})
    one = Built(yaml.safe_load(_cm("a", "one")), "apps/one.yaml", (("apps/kustomization.yaml", "one.yaml"),))
    two = Built(yaml.safe_load(_cm("a", "two")), "apps/two.yaml", (("apps/kustomization.yaml", "two.yaml"),))
    built = _attributed(root, _overlay_object("path: ../../../apps/two.yaml\n"), [one, two])
    assert (built.origin, built.trail) == ("apps/two.yaml", two.trail)


def test_what_only_the_kustomizations_own_component_generates_is_named_at_the_folder_and_came_by_the_spec(
        tmp_path):
    root = _tree(tmp_path / "repo", {
        "apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a", "x"),
        "extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                                    "configMapGenerator: [{name: gen, namespace: x, literals: [a=b]}]\n"
                                    "generatorOptions: {disableNameSuffixHash: true}\n"})
    builder = Builder(RepoView(root))
    built = builder.flux_build("apps", {"components": ["../extra"]}, "clusters/dev/apps.yaml")
    builder.close()
    assert {ObjectId.of(b.manifest).name: (b.origin, b.trail) for b in built} == {
        "a": ("apps/cm.yaml", (("apps/kustomization.yaml", "cm.yaml"),)),
        "gen": ("apps", (("clusters/dev/apps.yaml", "spec (Flux's own fields)"),))}
    assert not (root / ".gitops-export").exists()


def test_a_builder_that_needed_no_overlay_leaves_the_repository_as_it_found_it(tmp_path):
    """Even an empty work folder of the export's stays: the walk reads, it never tidies what it did not make."""
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a")})
    (root / ".gitops-export").mkdir()
    builder = Builder(RepoView(root))
    assert [ObjectId.of(b.manifest).name for b in builder.flux_build("apps", {"commonMetadata": {}})] == ["a"]
    builder.close()
    assert (root / ".gitops-export").is_dir()


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


def test_kind_and_name_default_to_empty_where_a_manifest_lacks_them():
    from gitops.flux.build import _kind_name

    assert _kind_name({"kind": "ConfigMap", "metadata": {"name": "a"}}) == ("ConfigMap", "a")
    assert _kind_name({"metadata": "not a mapping"}) == ("", "")


def test_common_metadata_is_added_to_the_labels_and_annotations_an_object_has_and_wins_over_them(tmp_path):
    root = _tree(tmp_path / "repo", {"c/cm.yaml": _cm("a", "x", labels={"app": "a", "team": "old"},
                                                      annotations={"note": "kept"})})
    (built,) = Builder(RepoView(root)).flux_build("c", {"commonMetadata": {
        "labels": {"team": "home", "tier": 1}, "annotations": {"owner": "platform"}}})
    assert built.manifest["metadata"] == {"name": "a", "namespace": "x",
                                          "labels": {"app": "a", "team": "home", "tier": "1"},
                                          "annotations": {"note": "kept", "owner": "platform"}}
    assert built.origin == "c/cm.yaml"


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


def test_a_kustomization_of_exactly_the_expanded_size_limit_is_read_and_one_value_more_is_refused(tmp_path):
    from model.safe_yaml import MAX_EXPANDED_NODES, expanded_size

    shared = "[" + ", ".join(["0"] * 999) + "]"  # 1,000 values with the list, written 199 times through aliases

    def kustomization(extra: int) -> str:
        return f"- &s {shared}\n" + "- *s\n" * 198 + "".join("- 0\n" for _ in range(extra))
    at_limit = MAX_EXPANDED_NODES - 1 - 199 * 1000
    assert expanded_size(yaml.safe_load(kustomization(at_limit))) == MAX_EXPANDED_NODES
    root = _tree(tmp_path / "repo", {"a/kustomization.yaml": kustomization(at_limit),
                                     "b/kustomization.yaml": kustomization(at_limit + 1)})
    builder = Builder(RepoView(root))
    assert len(builder._kustomization_doc("a/kustomization.yaml", detailed=True)) == 199 + at_limit
    with pytest.raises(BuildError) as refused:
        builder._kustomization_doc("b/kustomization.yaml", detailed=True)
    assert str(refused.value) == "b/kustomization.yaml: expands to more than 200000 values through its aliases"


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

def _both_builds(root: Path, text: str) -> tuple[list | None, list | None]:
    """(the in-process build, kubectl's) of one resource file, each the objects in the order read (kubectl's with
    sortOptions fifo), or None where the build is refused."""
    for folder, extra in (("walk", ""), ("kubectl", "sortOptions:\n  order: fifo\n")):
        (root / folder).mkdir(parents=True)
        (root / folder / "r.yaml").write_bytes(text.encode())
        (root / folder / "kustomization.yaml").write_text(f"resources: [r.yaml]\n{extra}")
    builder = Builder(RepoView(root / "walk"))
    try:
        ours: list | None = [b.manifest for b in builder.kustomize("")]
    except BuildError:
        ours = None
    assert builder.kubectl_builds == 0
    result = subprocess.run(["kubectl", "kustomize", str(root / "kubectl")], capture_output=True, text=True)
    theirs = [d for d in yaml.safe_load_all(result.stdout) if d is not None] if result.returncode == 0 else None
    return ours, theirs


_A = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
_B = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"


def _item(doc: str) -> str:
    return "- " + doc.replace("\n", "\n  ").rstrip() + "\n"


def _list(*items: str, kind: str = "List", extra: str = "") -> str:
    return f"apiVersion: v1\nkind: {kind}\n{extra}items:\n" + "".join(_item(i) for i in items)


LIST_SHAPES = {
    "a v1 List": _list(_A, _B),
    "a List beside other documents": f"{_B}---\n{_list(_A)}",
    "any kind ending in List": _list(_A, _B, kind="ConfigMapList"),
    "a ResourceList": _list(_A, kind="ResourceList"),
    "nested Lists in a file of one document": _list(_list(_A, kind="ConfigMapList"), _list(_B)),
    "nested Lists beside other documents": f"{_list(_list(_A, kind='SecretList'), _list(_B))}---\n"
                                           "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: c\n",
    "a List's metadata is not its items'": _list(_A, extra="metadata:\n  name: l\n  namespace: x\n  annotations:\n"
                                                       "    config.kubernetes.io/local-config: 'true'\n"),
    "empty items": "apiVersion: v1\nkind: List\nitems: []\n",
    "null items": "apiVersion: v1\nkind: List\nitems:\n---\n" + _A,
    "null, empty mapping and empty list items": _list("null", "{}", "[]", _A) + "---\n",
    "a List without items": "apiVersion: v1\nkind: List\n",
    "a List without items beside another document": f"{_A}---\napiVersion: v1\nkind: PodList\nmetadata: null\n",
    "only functionConfig, one document": "apiVersion: v1\nkind: List\nfunctionConfig:\n  a: b\n",
    "only functionConfig, beside another document": f"{_A}---\napiVersion: v1\nkind: List\nfunctionConfig: {{}}\n",
    "scalar items, one document": "apiVersion: v1\nkind: List\nitems: text\n",
    "scalar items beside another document": f"{_A}---\napiVersion: v1\nkind: List\nitems: text\n",
    "mapping items, one document": "apiVersion: v1\nkind: ResourceList\nitems:\n  a: b\n",
    "empty mapping items, one document": "apiVersion: v1\nkind: List\nitems: {}\n",
    "an item that is text": _list(_A, "text"),
    "an item that is a list": _list("[1]"),
    "an item without kind": _list("metadata:\n  name: a\n"),
    "an item without a name": _list("apiVersion: v1\nkind: ConfigMap\n"),
    "an item of a List kind without name or items": _list("apiVersion: v1\nkind: ConfigMapList\n"),
    "a nested List with scalar items": _list(_A, "apiVersion: v1\nkind: List\nitems: 3\n") + "---\n",
    "a nested <X>List with scalar items": _list("apiVersion: v1\nkind: ConfigMapList\nitems: 3\n"),
    "two items of one id": _list(_A, _A),
    "a lowercase list": "apiVersion: v1\nkind: list\nmetadata:\n  name: l\nitems:\n- 1\n",
    "one document between separators": f"---\n{_list(_A)}---",
    "one document with CRLF line ends": _list(_A, _B).replace("\n", "\r\n"),
}


@pytest.mark.parametrize("text", LIST_SHAPES.values(), ids=LIST_SHAPES.keys())
def test_an_object_in_a_list_is_built_in_process_exactly_as_kubectl_kustomize_builds_it(tmp_path, text):
    ours, theirs = _both_builds(tmp_path, text)
    assert ours == theirs


_object = st.builds(lambda name: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
                    st.sampled_from(["a", "b", "c", "d"]))
_lists = st.recursive(_object, lambda inner: st.builds(
    lambda kind, items, extra: {"apiVersion": "v1", "kind": kind, **items, **extra},
    st.sampled_from(["List", "List", "ConfigMapList", "ResourceList"]),
    st.one_of(st.just({}), st.fixed_dictionaries({"items": st.one_of(
        st.lists(st.one_of(inner, st.sampled_from([None, {}, [], "text", {"apiVersion": "v1", "kind": "Secret"}])),
                 max_size=4), st.sampled_from([None, "text", {}]))})),
    st.sampled_from([{}, {"metadata": {"name": "l", "namespace": "x"}}, {"functionConfig": {}}])), max_leaves=6)


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(_lists, min_size=1, max_size=3), separator_after=st.booleans())
def test_any_file_of_lists_is_built_in_process_as_kubectl_kustomize_builds_it_or_refused_as_it_refuses_it(
        tmp_path_factory, docs, separator_after):
    text = yaml.safe_dump_all(docs) + ("---\n" if separator_after else "")
    ours, theirs = _both_builds(tmp_path_factory.mktemp("lists"), text)
    assert ours == theirs, text
