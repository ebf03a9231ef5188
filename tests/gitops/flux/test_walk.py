"""gitops/flux/build.py and gitops/flux/walk.py, called directly on small repositories: the view of OUT as it will
be, the in-process build and the walk from the bootstrap Kustomization. A hand-written kustomization needs kubectl."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from builders import cm, dump, ks
from conftest import FIXTURES
from gitops.flux.build import SCRATCH_PREFIX, Builder, RepoView, join_path as _join
from gitops.flux.documents import BuildError
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk

FLUX = ("flux-system", "flux-system")


def resources(*entries: str) -> bytes:
    return dump({"resources": list(entries)})


def repo(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


# --- the view ------------------------------------------------------------------------------------------------------

def test_the_view_lists_disk_and_pending_writes_without_deleted_files_linked_folders_or_git(tmp_path):
    """A linked file is listed (Flux's generated kustomization reads it through its link); a linked folder is not
    (filepath.Walk never enters one), though a kustomization may still name it."""
    repo(tmp_path, {"a/x.yaml": b"x", "a/notes.txt": b"n", ".git/config": b"", ".gitops-export/j": b"",
                    "a/.git/keep": b""})
    os.symlink(tmp_path / "a", tmp_path / "link")
    os.symlink(tmp_path / "a" / "x.yaml", tmp_path / "a" / "linked.yaml")
    view = RepoView(tmp_path, {"b/c/new.yaml": b"n", "a/w.yaml": b"w", "top.yaml": b"t"}, {"a/x.yaml", "b/c/new.yaml"})
    assert view.listdir("") == (["a", "b"], ["top.yaml"])
    assert view.listdir("a") == ([".git"], ["linked.yaml", "notes.txt", "w.yaml"])
    assert view.is_dir("link") and view.listdir("", linked_dirs=True)[0] == ["a", "b", "link"]
    assert view.listdir("b") == (["c"], [])
    assert view.listdir("b/c") == ([], ["new.yaml"])  # a write wins over a delete of the same path
    assert view.listdir("missing") == ([], [])
    assert view.changed


def test_the_view_answers_files_and_folders_as_they_will_be(tmp_path):
    repo(tmp_path, {"a/x.yaml": b"x", "a/y.yaml": b"y"})
    os.symlink(tmp_path / "a", tmp_path / "link")
    view = RepoView(tmp_path, {"b/c/new.yaml": b"new", "a/y.yaml": b"y2"}, {"a/x.yaml"})
    assert [view.is_file(p) for p in ("a/x.yaml", "a/y.yaml", "b/c/new.yaml", "link/y.yaml", "a", "nope")] == [
        False, True, True, True, False, False]
    assert [view.is_dir(p) for p in ("", "a", "b", "b/c", "link", "a/y.yaml", "nope")] == [
        True, True, True, True, True, False, False]
    assert view.read("a/y.yaml") == b"y2" and view.read("b/c/new.yaml") == b"new"
    assert view.read("link/y.yaml") == b"y"  # through the link, inside the repository: the file on disk
    for rel in ("a/x.yaml", "nope.yaml"):
        with pytest.raises(FileNotFoundError):
            view.read(rel)
    assert RepoView(tmp_path).read("a/x.yaml") == b"x"
    assert not RepoView(tmp_path).changed
    assert RepoView(tmp_path, deletes={"a/x.yaml"}).changed


def test_a_folders_kustomization_file_is_found_by_kustomizes_names_in_its_order(tmp_path):
    repo(tmp_path, {"a/Kustomization": b"", "b/kustomization.yml": b"", "b/Kustomization": b"",
                    "c/kustomization.yaml": b"", "c/kustomization.yml": b"", "kustomization.yml": b""})
    view = RepoView(tmp_path)
    assert [view.kustomization_file(p) for p in ("a", "b", "c", "", "d")] == [
        "a/Kustomization", "b/kustomization.yml", "c/kustomization.yaml", "kustomization.yml", None]


def test_an_unchanged_view_is_the_folder_itself_for_kubectl(tmp_path):
    with RepoView(tmp_path).on_disk() as root:
        assert root == tmp_path


def test_a_changed_view_is_mirrored_outside_the_repository_for_kubectl_and_the_mirror_removed_after(tmp_path):
    repo(tmp_path, {"a/old.yaml": b"old", "a/gone.yaml": b"gone"})
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    view = RepoView(tmp_path, {"a/new.yaml": b"new", "b/c.yaml": b"c", "b/d/e.yaml": b"e"}, {"a/gone.yaml"})
    with view.on_disk() as mirror:
        assert not mirror.resolve().is_relative_to(tmp_path.resolve())
        assert mirror.parent.name.startswith(SCRATCH_PREFIX)
        assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
        assert sorted(p.relative_to(mirror).as_posix() for p in mirror.rglob("*")) == [
            "a", "a/new.yaml", "a/old.yaml", "b", "b/c.yaml", "b/d", "b/d/e.yaml"]
        assert (mirror / "a" / "old.yaml").is_symlink() and (mirror / "a" / "old.yaml").read_bytes() == b"old"
        assert not (mirror / "a" / "new.yaml").is_symlink() and (mirror / "a" / "new.yaml").read_bytes() == b"new"
    assert not mirror.parent.exists()
    assert not (tmp_path / ".gitops-export").exists()


def test_the_mirror_leaves_the_work_folder_of_an_export_in_flight(tmp_path):
    repo(tmp_path, {".gitops-export/journal": b"j"})
    with RepoView(tmp_path, {"a.yaml": b"a"}).on_disk() as mirror:
        assert (mirror / "a.yaml").read_bytes() == b"a"
    assert os.listdir(tmp_path / ".gitops-export") == ["journal"]


# --- paths ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("folder", "relative", "joined"), [
    ("a", "b", "a/b"), ("a", "../b", "b"), ("a/b", "../../c", "c"), ("a", "..", ""), ("", ".", ""), ("", "b", "b"),
    ("a", "b/../c", "a/c"), ("a", "../../b", None), ("", "..", None), ("a", "/etc", None), ("", "../x", None)])
def test_a_relative_path_is_resolved_inside_the_repository_or_refused(folder, relative, joined):
    assert _join(folder, relative) == joined


# --- parsing -------------------------------------------------------------------------------------------------------


# --- building one path in process ----------------------------------------------------------------------------------

def test_flux_generates_a_build_of_every_yaml_file_below_a_folder_without_a_kustomization(tmp_path):
    repo(tmp_path, {"c/a.yaml": dump(cm("a")), "c/b.yml": dump(cm("b"), cm("b2")), "c/notes.txt": b"x",
                    "c/sub/d.yaml": dump(cm("d")), "c/k/kustomization.yaml": resources("e.yaml"),
                    "c/k/e.yaml": dump(cm("e")), "c/k/ignored.yaml": dump(cm("ignored"))})
    built = Builder(RepoView(tmp_path)).flux_path("c")
    assert [(b.manifest["metadata"]["name"], b.origin, b.trail) for b in built] == [
        ("a", "c/a.yaml", ()), ("b", "c/b.yml", ()), ("b2", "c/b.yml", ()),
        ("e", "c/k/e.yaml", (("c/k/kustomization.yaml", "e.yaml"),)), ("d", "c/sub/d.yaml", ())]


def test_the_repository_root_is_built_like_any_folder(tmp_path):
    repo(tmp_path, {"a.yaml": dump(cm("a")), "sub/b.yaml": dump(cm("b"))})
    assert [b.origin for b in Builder(RepoView(tmp_path)).flux_path("")] == ["a.yaml", "sub/b.yaml"]
    repo(tmp_path, {"kustomization.yaml": resources("a.yaml")})
    assert [b.origin for b in Builder(RepoView(tmp_path)).flux_path("")] == ["a.yaml"]


def test_a_kustomization_builds_its_files_and_folders_recording_the_entries_that_led_there(tmp_path):
    repo(tmp_path, {"c/kustomization.yaml": resources("a.yaml", "sub", "../other"),
                    "c/a.yaml": dump(cm("a")), "c/sub/kustomization.yaml": resources("b.yaml"),
                    "c/sub/b.yaml": dump(cm("b")), "other/kustomization.yaml": resources("o.yaml"),
                    "other/o.yaml": dump(cm("o"))})
    built = Builder(RepoView(tmp_path)).flux_path("c")
    assert [(b.origin, b.trail) for b in built] == [
        ("c/a.yaml", (("c/kustomization.yaml", "a.yaml"),)),
        ("c/sub/b.yaml", (("c/kustomization.yaml", "sub"), ("c/sub/kustomization.yaml", "b.yaml"))),
        ("other/o.yaml", (("c/kustomization.yaml", "../other"), ("other/kustomization.yaml", "o.yaml")))]


@pytest.mark.parametrize(("files", "problem"), [
    ({"c/kustomization.yaml": resources("../../x")}, "c/kustomization.yaml: resources: '../../x': leaves the "
                                                     "repository"),
    ({"c/kustomization.yaml": resources("gone.yaml")}, "c/kustomization.yaml: resources: 'gone.yaml': no such file "
                                                       "or folder"),
    ({"c/kustomization.yaml": resources("d"), "c/d/a.yaml": dump(cm("a"))},
     "c/d: kustomize needs a kustomization.yaml in a folder it is asked to build"),
    ({"c/kustomization.yaml": resources("a.yaml", "b.yaml"), "c/a.yaml": dump(cm("x")), "c/b.yaml": dump(cm("x"))},
     "c/kustomization.yaml: ConfigMap x comes from both c/a.yaml and c/b.yaml; kustomize refuses an object twice "
     "in one build"),
    ({"c/a.yaml": dump(cm("x")), "c/b.yaml": dump(cm("x"))},
     "c (Flux's generated kustomization): ConfigMap x comes from both c/a.yaml and c/b.yaml; kustomize refuses an "
     "object twice in one build"),
    ({"c/kustomization.yaml": b"resources: [\n"}, "c/kustomization.yaml: not valid YAML (line 2: did not find "
                                                  "expected node content)"),
    ({"c/kustomization.yaml": b"resources: " + b"9" * 5000 + b"\n"},
     "c/kustomization.yaml: not readable as YAML (ValueError)"),
    ({"c/kustomization.yaml": b"a: &a [*a]\n"},
     "c/kustomization.yaml: expands to more than 200000 values through its aliases"),
])
def test_a_build_kustomize_would_refuse_is_one_error_naming_the_file_and_the_cause(tmp_path, files, problem):
    repo(tmp_path, files)
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path)).flux_path("c")
    assert str(caught.value) == problem


def test_the_root_folder_is_named_dot_in_a_generated_builds_error(tmp_path):
    repo(tmp_path, {"a.yaml": dump(cm("x")), "b.yaml": dump(cm("x"))})
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path)).flux_path("")
    assert str(caught.value) == (". (Flux's generated kustomization): ConfigMap x comes from both a.yaml and b.yaml; "
                                 "kustomize refuses an object twice in one build")


def test_a_folder_without_a_kustomization_file_cannot_be_kustomized(tmp_path):
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path)).kustomize("c")
    assert str(caught.value) == "c: kustomize needs a kustomization.yaml in a folder it is asked to build"


def test_a_file_that_cannot_be_read_is_a_build_error_with_the_reason(tmp_path):
    repo(tmp_path, {"c/kustomization.yaml": resources("a.yaml")})
    (tmp_path / "c" / "a.yaml").mkdir()  # listed as a file, a folder on disk: reading it fails
    builder = Builder(RepoView(tmp_path))
    with pytest.raises(BuildError) as caught:
        builder._read("c/a.yaml")
    assert str(caught.value) == "c/a.yaml: cannot be read (Is a directory)"
    with pytest.raises(BuildError) as caught:
        builder._read("gone.yaml")
    assert str(caught.value) == "gone.yaml: cannot be read (No such file or directory)"
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "kustomization.yaml").write_text("resources: []\n")
    os.symlink(outside, tmp_path / "link")
    with pytest.raises(BuildError) as caught:
        builder._read("link/kustomization.yaml")
    assert str(caught.value) == ("link/kustomization.yaml: cannot be read (a symlink that leads out of the repository "
                                 "or to nothing)")


# --- what kubectl would be asked to read ---------------------------------------------------------------------------

REMOTE = "a remote resource; the walk reads only this repository"


@pytest.mark.parametrize(("kustomization", "problem"), [
    ({"resources": ["https://github.com/x/y//base"]},
     f"c/kustomization.yaml: 'https://github.com/x/y//base': {REMOTE}"),
    ({"bases": ["github.com/x/y"]}, f"c/kustomization.yaml: 'github.com/x/y': {REMOTE}"),
    ({"resources": ["git@github.com:x/y"]}, f"c/kustomization.yaml: 'git@github.com:x/y': {REMOTE}"),
    ({"resources": ["gitlab.com/x/y"]}, f"c/kustomization.yaml: 'gitlab.com/x/y': {REMOTE}"),
    ({"resources": ["bitbucket.org/x/y"]}, f"c/kustomization.yaml: 'bitbucket.org/x/y': {REMOTE}"),
    ({"patches": [{"path": "../../../etc/passwd"}]},
     "c/kustomization.yaml: '../../../etc/passwd': leaves the repository"),
    ({"resources": ["sub"]}, "c/sub/kustomization.yaml: '../../../../outside': leaves the repository"),
])
def test_kubectl_is_never_asked_to_fetch_or_read_outside_the_repository(tmp_path, kustomization, problem):
    files = {"c/kustomization.yaml": dump({"namePrefix": "x-", **kustomization}),
             "c/sub/kustomization.yaml": resources("../../../../outside")}
    repo(tmp_path / "repo", files)
    builder = Builder(RepoView(tmp_path / "repo"))
    with pytest.raises(BuildError) as caught:
        builder.flux_path("c")
    assert str(caught.value) == problem
    assert builder.kubectl_builds == 0


def test_a_string_that_is_no_path_or_a_long_text_is_left_to_kustomize(tmp_path):
    files = {"c/kustomization.yaml": dump({"namePrefix": "x-", "commonAnnotations": {"a": "not/a/path",
                                                                                      "b": "x\n../../../../y",
                                                                                      "c": "../" * 400}})}
    repo(tmp_path, files)
    seen: set[str] = set()
    Builder(RepoView(tmp_path))._confine("c", seen)  # no error: kustomize decides what these strings mean
    assert seen == {"c"}, "none of the strings was followed as a folder"
    for text in ("../../../../y", "../" * 300):  # the same climb as one short line of text is a path, and refused
        repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "commonAnnotations": {"a": text}})})
        with pytest.raises(BuildError) as caught:
            Builder(RepoView(tmp_path))._confine("c")
        assert str(caught.value) == f"c/kustomization.yaml: '{text}': leaves the repository"


def test_a_kustomization_reached_twice_is_confined_once(tmp_path, monkeypatch):
    files = {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": ["a", "a"]}),
             "c/a/kustomization.yaml": resources("../a")}  # listed twice, and it lists itself
    repo(tmp_path, files)
    builder = Builder(RepoView(tmp_path))
    read: list[str] = []
    real_read = builder._read
    monkeypatch.setattr(builder, "_read", lambda rel: read.append(rel) or real_read(rel))
    seen: set[str] = set()
    builder._confine("c", seen)
    assert read == ["c/kustomization.yaml", "c/a/kustomization.yaml"]
    assert seen == {"c", "c/a"}


def test_a_hand_written_kustomization_is_built_by_kubectl_on_the_view(tmp_path):
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": ["a.yaml"]})})
    view = RepoView(tmp_path, {"c/a.yaml": dump(cm("a", "n"))})
    builder = Builder(view)
    try:
        built = builder.flux_path("c")
    finally:
        builder.close()
    assert [(b.manifest["metadata"]["name"], b.origin, b.trail) for b in built] == [
        ("x-a", "c", (("c/kustomization.yaml", "(kustomize build)"),))]
    assert builder.kubectl_builds == 1
    assert not (tmp_path / ".gitops-export").exists()


# --- the walk ------------------------------------------------------------------------------------------------------

def bootstrap(**extra: bytes) -> dict[str, bytes]:
    return {"clusters/dev/flux-system/gotk-sync.yaml": dump(
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "flux-system", "namespace": "flux-system"}},
        ks("flux-system", "./clusters/dev", interval="10m")), **extra}


def test_the_walk_follows_each_kustomization_to_its_path_and_records_who_applies_what(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/apps.yaml": dump(ks("apps", "./apps", dependsOn=[{"name": "infra"}, {"name": "x",
                                                                                          "namespace": "o"}])),
        "clusters/dev/infra.yaml": dump(ks("infra", "./infra")),
        "apps/a.yaml": dump(cm("a", "default")), "infra/i.yaml": dump(cm("i", "kube-system"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert list(view.kustomizations) == [FLUX, ("flux-system", "apps"), ("flux-system", "infra")]
    boot, apps, infra = view.kustomizations.values()
    assert (boot.path, boot.declared_in, boot.parent, boot.spec["interval"]) == (
        "clusters/dev", "clusters/dev/flux-system/gotk-sync.yaml", None, "10m")
    assert (apps.path, apps.declared_in, apps.parent, apps.status) == ("apps", "clusters/dev/apps.yaml", FLUX, "built")
    assert apps.depends == (("flux-system", "infra"), ("o", "x"))
    assert apps.objects == [ObjectId("", "ConfigMap", "default", "a")]
    assert view.applied_by[ObjectId("", "ConfigMap", "kube-system", "i")] == [("flux-system", "infra")]
    assert view.origins[ObjectId("", "ConfigMap", "default", "a")] == "apps/a.yaml"
    assert view.trails[(ObjectId("", "ConfigMap", "default", "a"), ("flux-system", "apps"))] == ()
    assert view.problems == [] and view.kubectl_builds == 0


def test_kustomizations_the_walk_cannot_build_are_marked_and_their_failures_reported(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/ext.yaml": dump(ks("ext", "./not-yet")),
        "clusters/dev/out.yaml": dump(ks("out", "../../elsewhere")),
        "clusters/dev/bad.yaml": dump(ks("bad", "./bad")), "bad/kustomization.yaml": resources("gone.yaml"),
        "clusters/dev/helm.yaml": dump(ks("helm", "./apps", sourceRef={"kind": "OCIRepository", "name": "x"})),
        "clusters/dev/other.yaml": dump(ks("other", "./apps", sourceRef={"kind": "GitRepository", "name": "other"})),
        "clusters/dev/nopath.yaml": dump({**ks("nopath", "x"), "spec": {"sourceRef": {"name": "flux-system"}}}),
        "apps/a.yaml": dump(cm("a"))}))
    view = walk(RepoView(root), "./clusters/dev")
    status = {k[1]: (w.status, w.path, w.error) for k, w in view.kustomizations.items()}
    assert status["ext"] == ("external", "not-yet", "")
    assert status["out"] == ("failed", "../../elsewhere", "spec.path '../../elsewhere' leaves the repository")
    assert status["bad"] == ("failed", "bad", "bad/kustomization.yaml: resources: 'gone.yaml': no such file or folder")
    assert status["helm"][0] == status["other"][0] == "other-source"
    assert status["nopath"][1] == ""  # no path: the repository root, as Flux reads it
    assert [line for line in view.problems if line.startswith(("flux-system/out ", "flux-system/bad "))] == [
        "flux-system/bad (clusters/dev/bad.yaml): build fails: bad/kustomization.yaml: resources: 'gone.yaml': no "
        "such file or folder; Flux would fail this Kustomization and everything that depends on it; hint: fix the "
        "file named, and see kustomize's own answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone "
        "./bad`",
        "flux-system/out (clusters/dev/out.yaml): build fails: spec.path '../../elsewhere' leaves the repository; "
        "Flux would fail this Kustomization and everything that depends on it; hint: fix the file named, and see "
        "kustomize's own answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone ./../../elsewhere`"]


def test_a_source_in_another_namespace_or_a_named_git_repository_is_followed_only_when_it_is_the_bootstraps(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/same.yaml": dump(ks("same", "./apps", namespace="apps",
                                          sourceRef={"kind": "GitRepository", "name": "flux-system",
                                                     "namespace": "flux-system"})),
        "clusters/dev/local.yaml": dump(ks("local", "./apps2", namespace="apps",
                                           sourceRef={"name": "flux-system"})),
        "apps/a.yaml": dump(cm("a")), "apps2/b.yaml": dump(cm("b"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.kustomizations[("apps", "same")].status == "built"
    assert view.kustomizations[("apps", "local")].status == "other-source"  # apps/flux-system: another source


def test_the_bootstrap_path_or_name_given_is_where_the_walk_starts(tmp_path):
    root = repo(tmp_path, {"clusters/prod/a.yaml": dump(cm("a"))})
    view = walk(RepoView(root), "./clusters/prod", ("gitops", "root"))
    assert view.bootstrap == ("gitops", "root")
    assert view.kustomizations[("gitops", "root")].path == "clusters/prod"
    assert walk(RepoView(root), "./").kustomizations[FLUX].path == ""


def test_a_kustomization_applied_twice_is_walked_once_and_both_appliers_recorded(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/apps.yaml": dump(ks("apps", "./apps")),
        "clusters/dev/again.yaml": dump(ks("again", "./again")),
        "again/apps.yaml": dump(ks("apps", "./elsewhere")), "apps/a.yaml": dump(cm("a"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.kustomizations[("flux-system", "apps")].path == "apps"
    assert view.applied_by[ObjectId("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps")] == [
        FLUX, ("flux-system", "again")]


def test_target_namespace_moves_objects_as_kustomize_moves_them(tmp_path):
    """kustomize's namespace transformer, not a field set by hand: a Namespace object is renamed to the target
    (tests/differential found the walk keeping its name)."""
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/apps.yaml": dump(ks("apps", "./apps", targetNamespace="media")),
        "clusters/dev/odd.yaml": dump(ks("odd", "./odd", targetNamespace=["not", "a", "string"])),
        "apps/a.yaml": dump(cm("a", "default"), {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "media"}}, cm("b")),
        "odd/c.yaml": dump(cm("c", "x"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.kustomizations[("flux-system", "apps")].objects == [
        ObjectId("", "Namespace", "", "media"), ObjectId("", "ConfigMap", "media", "a"),
        ObjectId("", "ConfigMap", "media", "b")]
    assert view.kustomizations[("flux-system", "odd")].objects == [ObjectId("", "ConfigMap", "x", "c")]


def test_variables_come_from_config_maps_and_secrets_in_the_kustomizations_namespace_then_inline(tmp_path):
    post = {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "secret"},
                               {"kind": "ConfigMap", "name": "elsewhere"}, "not a mapping",
                               {"kind": "ConfigMap", "name": "optional", "optional": True}],
            "substitute": {"INLINE": "i", "A": "overridden"}}
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/vars.yaml": dump(cm("vars", "flux-system", A="1", B="2"), cm("elsewhere", "other", C="3"),
                                       {"apiVersion": "v1", "kind": "Secret",
                                        "metadata": {"name": "secret", "namespace": "flux-system"},
                                        "data": {"S": "c2VjcmV0"}, "stringData": {"T": "t"}}),
        "clusters/dev/apps.yaml": dump(ks("apps", "./apps", postBuild=post)),
        "apps/a.yaml": dump(cm("a", "default", x="${A}${B}${INLINE}", s="${S}", t="${T:=d}", c="${C}"))}))
    view = walk(RepoView(root), "./clusters/dev")
    apps = view.kustomizations[("flux-system", "apps")]
    assert apps.variables == {"A": "overridden", "B": "2", "S": None, "T": None, "INLINE": "i"}
    assert view.manifests[ObjectId("", "ConfigMap", "default", "a")]["data"] == {
        "x": "overridden2i", "s": "${S}", "t": "${T:=d}", "c": "${C}"}
    assert view.problems == [
        "flux-system/apps (clusters/dev/apps.yaml): postBuild.substituteFrom: ConfigMap flux-system/elsewhere is "
        "applied by no Kustomization in this repository; Flux would fail the build; hint: add it, or mark the "
        "reference optional: true",
        "apps/a.yaml (ConfigMap default/a): data.c: ${C} is not defined for flux-system/apps, which applies it (its "
        "variables: A, B, INLINE, S, T); Flux's strict substitution would fail the whole Kustomization; hint: define "
        "it in the ConfigMap or Secret that Kustomization substitutes from, or give it a default (${VAR:=value})"]


def test_a_variable_under_a_kustomization_without_variables_stays_as_written_as_flux_leaves_it(tmp_path):
    """Flux substitutes only where a Kustomization has variables (a Grafana dashboard's `${DS}` is applied as
    written): tests/differential found the walk refusing it."""
    root = repo(tmp_path, bootstrap(**{"clusters/dev/a.yaml": dump(cm("a", "default", x="${X}"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.problems == []
    assert view.manifests[ObjectId("", "ConfigMap", "default", "a")]["data"] == {"x": "${X}"}


def test_a_kustomization_two_builds_declare_is_walked_from_the_first_declaration(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/a.yaml": dump(ks("a", "./a")), "clusters/dev/b.yaml": dump(ks("b", "./b")),
        "a/x.yaml": dump(ks("x", "./from-a")), "b/x.yaml": dump(ks("x", "./from-b")),
        "from-a/cm.yaml": dump(cm("a")), "from-b/cm.yaml": dump(cm("b"))}))
    view = walk(RepoView(root), "./clusters/dev")
    x = view.kustomizations[("flux-system", "x")]
    assert (x.path, x.declared_in, x.parent) == ("from-a", "a/x.yaml", ("flux-system", "a"))
    assert list(view.kustomizations).count(("flux-system", "x")) == 1


def test_a_source_reference_without_a_kind_is_a_git_repository(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/apps.yaml": dump({**ks("apps", "./apps"), "spec": {"path": "./apps",
                                                                        "sourceRef": {"name": "flux-system"}}}),
        "apps/a.yaml": dump(cm("a"))}))
    assert walk(RepoView(root), "./clusters/dev").kustomizations[("flux-system", "apps")].status == "built"


def test_target_namespace_on_an_object_whose_metadata_is_no_mapping_fails_as_kustomize_fails_it(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/apps.yaml": dump(ks("apps", "./apps", targetNamespace="media")),
        "apps/a.yaml": dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "odd"})}))
    apps = walk(RepoView(root), "./clusters/dev").kustomizations[("flux-system", "apps")]
    assert apps.status == "failed", apps
    # kustomize's own words after its reason change between its versions: `.+`, on one line
    assert re.fullmatch(re.escape("apps: kustomize build failed: accumulating resources: accumulation "
                                  "err='accumulating resources from 'apps/a.yaml': missing metadata.name") + ".+",
                        apps.error), apps.error


def test_the_bootstraps_own_object_elsewhere_in_its_build_is_its_spec_only_when_it_is_the_bootstrap(tmp_path):
    root = repo(tmp_path, bootstrap(**{"clusters/dev/apps.yaml": dump(ks("apps", "./apps")),
                                       "apps/again.yaml": dump(ks("flux-system", "./elsewhere", wait=True))}))
    view = walk(RepoView(root), "./clusters/dev")
    boot = view.kustomizations[FLUX]
    assert (boot.spec.get("wait"), boot.declared_in, boot.path) == (None, "clusters/dev/flux-system/gotk-sync.yaml",
                                                                    "clusters/dev")


def test_a_configmap_in_another_namespace_or_of_another_kind_is_not_a_variables_source(tmp_path):
    post = {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "vars2"}]}
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/vars.yaml": dump(cm("vars", "other", A="1"), cm("vars2", "flux-system", B="2")),
        "clusters/dev/apps.yaml": dump(ks("apps", "./apps", postBuild=post)),
        "apps/a.yaml": dump(cm("a"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.kustomizations[("flux-system", "apps")].variables == {}
    assert [p.split(": ")[2].split(" is ")[0] for p in view.problems] == ["ConfigMap flux-system/vars"]
    assert [p.split(": ")[2] for p in view.unsure] == ["Secret flux-system/vars2"]  # made outside the repository?


def test_the_view_remembers_which_paths_are_real(tmp_path):
    repo(tmp_path, {"a/b/c.yaml": b"x"})
    view = RepoView(tmp_path)
    assert view.is_file("a/b/c.yaml")
    (tmp_path / "a" / "b" / "c.yaml").unlink()
    os.symlink(tmp_path.parent, tmp_path / "a" / "b" / "c.yaml")
    assert view.is_dir("a/b/c.yaml")  # the path was checked once: its answer is kept for the walk
    assert not RepoView(tmp_path).is_dir("a/b/c.yaml")


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_only_flux_kustomizations_are_walked_not_kustomizes_own_or_other_flux_kinds(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/odd.yaml": dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                       "metadata": {"name": "odd", "namespace": "flux-system"},
                                       "spec": {"path": "./x"}},
                                      {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Other",
                                       "metadata": {"name": "other", "namespace": "flux-system"},
                                       "spec": {"path": "./x"}})}))
    assert list(walk(RepoView(root), "./clusters/dev").kustomizations) == [FLUX]


def test_a_failing_bootstrap_without_its_own_object_is_named_bootstrap(tmp_path):
    root = repo(tmp_path, {"clusters/dev/kustomization.yaml": resources("gone.yaml")})
    view = walk(RepoView(root), "./clusters/dev")
    assert view.kustomizations[FLUX].declared_in == ""
    assert view.problems == [
        "flux-system/flux-system (bootstrap): build fails: clusters/dev/kustomization.yaml: resources: 'gone.yaml': no "
        "such file or folder; Flux would fail this Kustomization and everything that depends on it; hint: fix the file "
        "named, and see kustomize's own answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone "
        "./clusters/dev`"]


def test_after_a_kustomization_whose_path_leaves_the_repository_the_walk_goes_on(tmp_path):
    root = repo(tmp_path, bootstrap(**{"clusters/dev/a-out.yaml": dump(ks("a-out", "../../x")),
                                       "clusters/dev/b.yaml": dump(ks("b", "./b")), "b/cm.yaml": dump(cm("b"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.kustomizations[("flux-system", "b")].objects == [ObjectId("", "ConfigMap", "", "b")]


def test_the_bootstraps_own_object_first_in_its_build_does_not_end_the_build(tmp_path):
    root = repo(tmp_path, {"clusters/dev/a-sync.yaml": dump(ks("flux-system", "./clusters/dev")),
                           "clusters/dev/b.yaml": dump(ks("b", "./b")), "b/cm.yaml": dump(cm("b"))})
    assert ("flux-system", "b") in walk(RepoView(root), "./clusters/dev").kustomizations


def test_a_kustomization_declared_again_does_not_end_the_build_that_declares_it(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/a.yaml": dump(ks("a", "./a")), "a/x.yaml": dump(ks("a", "./elsewhere")),
        "a/y.yaml": dump(ks("y", "./y")), "y/cm.yaml": dump(cm("y"))}))
    assert ("flux-system", "y") in walk(RepoView(root), "./clusters/dev").kustomizations


def test_target_namespace_keeps_each_objects_trail(tmp_path):
    root = repo(tmp_path, bootstrap(**{"clusters/dev/apps.yaml": dump(ks("apps", "./apps", targetNamespace="media")),
                                       "apps/kustomization.yaml": resources("a.yaml"), "apps/a.yaml": dump(cm("a"))}))
    view = walk(RepoView(root), "./clusters/dev")
    assert view.trails[(ObjectId("", "ConfigMap", "media", "a"), ("flux-system", "apps"))] == (
        ("apps/kustomization.yaml", "a.yaml"),)


def test_a_kustomization_without_namespace_or_name_is_keyed_by_empty_strings(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/a.yaml": dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                     "metadata": {"name": "bare"}, "spec": {"path": "./x"}},
                                    {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                     "metadata": {"namespace": "flux-system"}, "spec": {"path": "./y"}})}))
    keys = set(walk(RepoView(root), "./clusters/dev").kustomizations)
    assert keys == {FLUX, ("", "bare"), ("flux-system", "")}


def test_a_source_of_another_kind_under_the_bootstraps_name_is_another_source(tmp_path):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/oci.yaml": dump(ks("oci", "./apps", sourceRef={"kind": "OCIRepository", "name": "flux-system",
                                                                     "namespace": "flux-system"})),
        "apps/a.yaml": dump(cm("a"))}))
    assert walk(RepoView(root), "./clusters/dev").kustomizations[("flux-system", "oci")].status == "other-source"


def test_a_substitute_from_entry_that_is_not_a_mapping_does_not_end_the_list(tmp_path):
    post = {"substituteFrom": ["odd", {"kind": "ConfigMap", "name": "vars"}]}
    root = repo(tmp_path, bootstrap(**{"clusters/dev/vars.yaml": dump(cm("vars", "flux-system", A="1")),
                                       "clusters/dev/apps.yaml": dump(ks("apps", "./apps", postBuild=post)),
                                       "apps/a.yaml": dump(cm("a"))}))
    assert walk(RepoView(root), "./clusters/dev").kustomizations[("flux-system", "apps")].variables == {"A": "1"}


@pytest.mark.parametrize("files", [{"c/a.yaml": b"a: \x07\n"},
                                   {"c/kustomization.yaml": resources("a.yaml"), "c/a.yaml": b"a: \x07\n"}])
def test_a_resource_file_that_is_not_yaml_is_named_with_the_parsers_reason(tmp_path, files):
    repo(tmp_path, files)
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path)).flux_path("c")
    # one line (PyYAML's own text spans two), the character named as Unicode does
    assert str(caught.value) == "c/a.yaml: not valid YAML (the character U+0007 is not allowed in YAML text)"


def test_a_kustomization_file_that_is_not_yaml_is_named_with_the_parsers_reason(tmp_path):
    repo(tmp_path, {"c/kustomization.yaml": b"resources: [\x07]\n"})
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path)).flux_path("c")
    # one line (PyYAML's own text spans three), the character named as Unicode does
    assert str(caught.value) == ("c/kustomization.yaml: not valid YAML (the character U+0007 is not allowed in "
                                 "YAML text)")


def test_a_nested_kustomization_kubectl_would_read_that_is_not_yaml_is_refused(tmp_path):
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": ["sub"]}),
                    "c/sub/kustomization.yaml": b"resources: [\n"})
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path))._confine("c")
    assert str(caught.value) == "c/sub/kustomization.yaml: not valid YAML"


def test_kubectl_is_never_asked_to_read_through_a_symlink(tmp_path):
    (tmp_path / "outside").mkdir()
    repo(tmp_path / "repo", {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": ["linked", "cm.yaml"]}),
                             "c/cm.yaml": dump(cm("a"))})
    os.symlink(tmp_path / "outside", tmp_path / "repo" / "c" / "linked")
    builder = Builder(RepoView(tmp_path / "repo"))
    with pytest.raises(BuildError) as caught:
        builder.flux_path("c")
    assert str(caught.value) == ("c/kustomization.yaml: 'linked': a symlink that leads out of the repository (or to "
                                 "nothing); Flux's confined filesystem refuses to read it")
    assert builder.kubectl_builds == 0


def test_a_kustomization_and_a_config_map_without_a_namespace_share_the_empty_one(tmp_path):
    post = {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/vars.yaml": dump(cm("vars", None, A="1")),
        "clusters/dev/apps.yaml": dump({**ks("apps", "./apps", postBuild=post,
                                             sourceRef={"name": "flux-system", "namespace": "flux-system"}),
                                        "metadata": {"name": "apps"}}),
        "apps/a.yaml": dump(cm("a"))}))
    assert walk(RepoView(root), "./clusters/dev").kustomizations[("", "apps")].variables == {"A": "1"}


def test_an_alias_bomb_in_a_nested_kustomization_is_refused_before_kubectl(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]"
                                                        for i in range(1, 9)]
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": ["sub"]}),
                    "c/sub/kustomization.yaml": ("\n".join(lines) + "\n").encode()})
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path))._confine("c")
    assert str(caught.value) == "c/sub/kustomization.yaml: expands to more than 200000 values through its aliases"


def test_a_path_of_exactly_1024_characters_is_still_checked(tmp_path):
    text = "../" * 341 + "x"
    assert len(text) == 1024
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "commonAnnotations": {"a": text}})})
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path))._confine("c")
    assert str(caught.value) == f"c/kustomization.yaml: '{text}': leaves the repository"
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "commonAnnotations": {"a": text + "/"}})})
    Builder(RepoView(tmp_path))._confine("c")  # longer: a text, not a path


def test_the_walk_builds_a_kustomization_with_every_field_flux_adds_to_its_build():
    """tests/fixtures/repos/flux-fields: what kustomize-controller does with a Kustomization's own fields (make e2e
    holds this to `flux build`): prefix and suffix, target namespace, images, the JSON6902 patch, a component from
    outside the path, commonMetadata on every object, then the inline substitution."""
    repo = FIXTURES / "repos" / "flux-fields"
    view = walk(RepoView(repo), "./clusters/lab")
    assert view.problems == []
    apps = view.kustomizations[("flux-system", "apps")]
    assert sorted(str(o) for o in apps.objects) == ["ConfigMap shop/lab-extra-v1", "Deployment shop/lab-web-v1",
                                                    "Service shop/lab-web-v1"]
    # the bootstrap's own patch reaches its child, as in Flux's build of the bootstrap's path
    assert (apps.spec["timeout"], apps.changed_by_parent, apps.parent) == ("3m", ["timeout"], FLUX)
    assert apps.declared_spec is not None and "timeout" not in apps.declared_spec
    assert view.kustomizations[FLUX].declared_in == "clusters/lab/flux-system/gotk-sync.yaml"
    deployment = next(view.manifests[o] for o in apps.objects if o.kind == "Deployment")
    assert deployment["metadata"] == {"name": "lab-web-v1", "namespace": "shop", "labels": {"team": "home"},
                                      "annotations": {"owner": "platform"}}
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "docker.io/library/nginx:1.27.3"
    assert container["env"] == [{"name": "GREETING", "value": "hello"}]
    # each object keeps the file it came from, as the plain build names it
    assert view.origins[next(o for o in apps.objects if o.kind == "ConfigMap")] == "components/extra/configmap.yaml"
    assert view.origins[next(o for o in apps.objects if o.kind == "Deployment")] == "apps/deployment.yaml"
    # what only the Kustomization's own fields bring in (its component) came by its spec, not by an entry of a file
    assert {str(o): view.trails.get((o, apps.key)) for o in apps.objects} == {
        "ConfigMap shop/lab-extra-v1": (("clusters/lab/apps.yaml", "spec (Flux's own fields)"),),
        "Deployment shop/lab-web-v1": (), "Service shop/lab-web-v1": ()}


# --- a parent's fields on its child Kustomizations: what the child declares, and what Flux applies ----------------


def test_a_child_kustomization_a_parent_patches_keeps_what_its_file_declares_beside_what_flux_applies(tmp_path):
    patch = dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                  "metadata": {"name": "_"}, "spec": {"timeout": "2m"}}).decode()
    root = repo(tmp_path, {
        "clusters/dev/flux-system/gotk-sync.yaml": dump(ks("flux-system", "./clusters/dev")),
        "clusters/dev/apps.yaml": dump(ks("apps", "./kubernetes/apps", patches=[
            {"patch": patch, "target": {"kind": "Kustomization", "labelSelector": "patched=yes"}}])),
        "kubernetes/apps/ks.plex.yaml": dump(
            {**ks("plex", "./kubernetes/plex", timeout="9m", wait=True),
             "metadata": {"name": "plex", "namespace": "flux-system", "labels": {"patched": "yes"}}}),
        "kubernetes/apps/ks.other.yaml": dump(ks("other", "./kubernetes/other", timeout="9m")),
        "kubernetes/apps/cm.yaml": dump(cm("apps", "default")),
        "kubernetes/plex/cm.yaml": dump(cm("plex", "plex")),
        "kubernetes/other/cm.yaml": dump(cm("other", "default")),
    })
    view = walk(RepoView(root), "./clusters/dev")
    assert view.problems == []
    plex, other = view.kustomizations[("flux-system", "plex")], view.kustomizations[("flux-system", "other")]
    assert (plex.spec["timeout"], plex.declared_spec) == ("2m", {**plex.spec, "timeout": "9m"})
    assert plex.changed_by_parent == ["timeout"]
    assert (plex.parent, plex.declared_in) == (("flux-system", "apps"), "kubernetes/apps/ks.plex.yaml")
    assert (other.spec["timeout"], other.declared_spec, other.changed_by_parent) == ("9m", None, [])
    assert other.declared_in == "kubernetes/apps/ks.other.yaml"
    # every object of the patched build keeps the file it came from and the trail of its plain build
    apps = view.kustomizations[("flux-system", "apps")]
    assert {str(o): view.origins[o] for o in apps.objects} == {
        "ConfigMap default/apps": "kubernetes/apps/cm.yaml",
        "Kustomization flux-system/other": "kubernetes/apps/ks.other.yaml",
        "Kustomization flux-system/plex": "kubernetes/apps/ks.plex.yaml"}


@pytest.mark.parametrize(("fields", "name"), [({"namePrefix": "lab-"}, "lab-plex"), ({"nameSuffix": "-v1"}, "plex-v1"),
                                              ({"namePrefix": "lab-", "nameSuffix": "-v1"}, "lab-plex-v1")])
def test_a_child_renamed_by_its_parents_prefix_or_suffix_is_still_matched_to_what_its_file_declares(tmp_path, fields,
                                                                                                    name):
    patch = dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                  "metadata": {"name": "_"}, "spec": {"timeout": "2m"}}).decode()
    root = repo(tmp_path, {
        "clusters/dev/flux-system/gotk-sync.yaml": dump(ks("flux-system", "./clusters/dev")),
        "clusters/dev/apps.yaml": dump(ks("apps", "./kubernetes/apps", **fields, patches=[
            {"patch": patch, "target": {"kind": "Kustomization"}}])),
        "kubernetes/apps/ks.plex.yaml": dump(ks("plex", "./kubernetes/plex", timeout="9m")),
        "kubernetes/plex/cm.yaml": dump(cm("plex", "plex")),
    })
    view = walk(RepoView(root), "./clusters/dev")
    child = view.kustomizations[("flux-system", name)]
    assert (child.spec["timeout"], child.changed_by_parent) == ("2m", ["timeout"])
    assert child.declared_spec == {**child.spec, "timeout": "9m"}
    assert child.declared_in == "kubernetes/apps/ks.plex.yaml"


@pytest.mark.parametrize(("fields", "expected"), [
    ({"targetNamespace": "shop"}, {"name": "a", "namespace": "shop"}),
    ({"commonMetadata": {"labels": {"team": "home"}}}, {"name": "a", "namespace": "default",
                                                         "labels": {"team": "home"}}),
])
def test_the_bootstraps_own_target_namespace_and_common_metadata_shape_its_build(tmp_path, fields, expected):
    gotk_sync = dump(ks("flux-system", "./clusters/dev", **fields))
    root = repo(tmp_path, {"clusters/dev/flux-system/gotk-sync.yaml": gotk_sync,
                           "clusters/dev/cm.yaml": dump(cm("a", "default"))})
    view = walk(RepoView(root), "./clusters/dev")
    (config,) = [view.manifests[o] for o in view.kustomizations[FLUX].objects if o.kind == "ConfigMap"]
    assert config["metadata"] == expected


# --- Lists: kustomize reads a `kind: List` (any kind ending in List) as its items ----------------------------------

def a_list(*items: Any, kind: str = "List", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "items": list(items), **fields}


@pytest.mark.parametrize("listed", [False, True], ids=["generated", "listed"])
def test_a_kustomization_inside_a_list_is_walked_to_its_path_and_named_at_the_lists_file(tmp_path, listed):
    root = repo(tmp_path, bootstrap(**{
        "clusters/dev/tiers.yaml": dump(a_list(ks("apps", "./apps", dependsOn=[{"name": "infra"}]))),
        "apps/a.yaml": dump(a_list(cm("a", "default"), metadata={"name": "apps", "namespace": "other"})),
        **({"clusters/dev/kustomization.yaml": resources("flux-system/gotk-sync.yaml", "tiers.yaml")} if listed
           else {})}))
    view = walk(RepoView(root), "./clusters/dev")
    apps = view.kustomizations[("flux-system", "apps")]
    assert (apps.path, apps.declared_in, apps.parent, apps.status) == ("apps", "clusters/dev/tiers.yaml", FLUX, "built")
    assert apps.depends == (("flux-system", "infra"),)
    # the List's own metadata is not its items': the ConfigMap keeps its namespace
    assert apps.objects == [ObjectId("", "ConfigMap", "default", "a")]
    assert view.origins[ObjectId("", "ConfigMap", "default", "a")] == "apps/a.yaml"
    assert ObjectId("", "List", "", "") not in view.applied_by and view.kubectl_builds == 0


# --- Secrets a substituteFrom reads: applied, made by an ExternalSecret or a generator, or not to be told ----------

SECRETS = {"substituteFrom": [{"kind": "Secret", "name": "cluster-secrets"}]}


def _external_secret(name: str, namespace: str = "flux-system", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"secretStoreRef": {"kind": "ClusterSecretStore", "name": "onepassword"}, **spec}}


def _walk_secrets(tmp_path: Path, source: dict[str, bytes], x: str = "${SECRET_DOMAIN}"):
    root = repo(tmp_path, bootstrap(**{"clusters/dev/apps.yaml": dump(ks("apps", "./apps", postBuild=SECRETS)),
                                       "apps/a.yaml": dump(cm("a", "default", x=x)), **source}))
    return walk(RepoView(root), "./clusters/dev")


def test_a_secret_an_external_secret_makes_is_read_with_the_keys_its_spec_lists(tmp_path):
    """home-ops' cluster-secrets: an ExternalSecret makes the Secret (spec.target.name, else its own name), in its
    namespace, once Flux applies it; the keys are its spec.data's secretKeys."""
    named = _external_secret("cluster-secrets", data=[{"secretKey": "SECRET_DOMAIN", "remoteRef": {"key": "d"}}])
    targeted = _external_secret("from-the-store", target={"name": "cluster-secrets"},
                                data=[{"secretKey": "SECRET_DOMAIN", "remoteRef": {"key": "d"}}])
    for source in (named, targeted):
        view = _walk_secrets(tmp_path / source["metadata"]["name"], {"clusters/dev/es.yaml": dump(source)})
        assert (view.problems, view.unsure) == ([], [])
        assert view.kustomizations[("flux-system", "apps")].variables == {"SECRET_DOMAIN": None}


def test_an_external_secret_with_a_template_gives_the_templates_keys_or_both_when_it_merges(tmp_path):
    from gitops.flux.varsub import external_secret_keys

    data = [{"secretKey": "fetched", "remoteRef": {"key": "k"}}]
    template = {"data": {"SECRET_DOMAIN": "{{ .fetched }}"}}
    assert external_secret_keys(_external_secret("s", data=data, target={"template": template})) == ["SECRET_DOMAIN"]
    assert external_secret_keys(_external_secret("s", data=data, target={"template": {
        **template, "mergePolicy": "Merge"}})) == ["fetched", "SECRET_DOMAIN"]
    assert external_secret_keys(_external_secret("s", data=data, target={"template": {"type": "Opaque"}})) == [
        "fetched"]
    assert external_secret_keys(_external_secret("s", dataFrom=[{"extract": {"key": "k"}}], target={
        "template": template})) == ["SECRET_DOMAIN"]
    assert external_secret_keys(_external_secret("s", dataFrom=[{"extract": {"key": "k"}}])) is None
    assert external_secret_keys(_external_secret("s", target={"template": {"templateFrom": [
        {"configMap": {"name": "t", "items": [{"key": "k"}]}}]}})) is None


def test_a_variable_an_external_secret_may_fetch_from_its_store_is_said_to_be_unknowable_not_refused(tmp_path):
    view = _walk_secrets(tmp_path, {"clusters/dev/es.yaml": dump(_external_secret(
        "cluster-secrets", dataFrom=[{"extract": {"key": "cluster"}}]))})
    assert view.problems == []
    assert view.unsure == [
        "apps/a.yaml (ConfigMap default/a): data.x: ${SECRET_DOMAIN} is not among the variables the repository shows "
        "for flux-system/apps, which applies it (none); the program cannot tell whether ExternalSecret "
        "flux-system/cluster-secrets gives it (its keys are not in the repository); if not, Flux's strict "
        "substitution would fail the whole Kustomization; hint: give the variable a default (${VAR:=value}), or list "
        "the key in an ExternalSecret's spec.data so the walk can check it"]
    unread = view.kustomizations[("flux-system", "apps")].variables.unread
    assert unread == ("ExternalSecret flux-system/cluster-secrets",)


def test_an_external_secret_whose_secret_name_holds_a_variable_is_said_to_be_unknowable_not_refused(tmp_path):
    view = _walk_secrets(tmp_path, {"clusters/dev/es.yaml": dump(_external_secret(
        "cluster", target={"name": "cluster-${KIND}"}, data=[{"secretKey": "SECRET_DOMAIN", "remoteRef": {
            "key": "d"}}]))}, x="${SECRET_DOMAIN:=home.arpa}")
    assert view.problems == []
    assert view.unsure == [
        "flux-system/apps (clusters/dev/apps.yaml): postBuild.substituteFrom: Secret flux-system/cluster-secrets: the "
        "program cannot tell whether ExternalSecret flux-system/cluster makes it (the name it gives its Secret, "
        "cluster-${KIND}, holds a variable); if nothing does, Flux would fail the build; hint: write that name out, "
        "so the walk can check it"]


def test_a_secret_nothing_in_the_repository_makes_is_said_to_be_unknowable_not_refused(tmp_path):
    """home-ops' cloudflare-tunnel substitutes from a Secret made outside Git: the program cannot tell whether it
    exists, and walks on as Flux does once it does."""
    view = _walk_secrets(tmp_path, {})
    assert view.problems == []
    assert view.unsure == [
        "flux-system/apps (clusters/dev/apps.yaml): postBuild.substituteFrom: Secret flux-system/cluster-secrets: "
        "nothing in this repository applies or makes it (no Secret, SOPS file, generator or ExternalSecret of that "
        "name in flux-system); the program cannot tell whether something outside it does (by hand, another "
        "operator); if nothing does, Flux would fail the build; hint: add it to the repository (an ExternalSecret "
        "or a SOPS-encrypted Secret) so the walk can check it, or mark the reference optional: true",
        "apps/a.yaml (ConfigMap default/a): data.x: ${SECRET_DOMAIN} is not among the variables the repository shows "
        "for flux-system/apps, which applies it (none); the program cannot tell whether Secret "
        "flux-system/cluster-secrets gives it (its keys are not in the repository); if not, Flux's strict "
        "substitution would fail the whole Kustomization; hint: give the variable a default (${VAR:=value}), or list "
        "the key in an ExternalSecret's spec.data so the walk can check it"]
    assert view.applied_by[ObjectId("", "ConfigMap", "default", "a")] == [("flux-system", "apps")]


def test_an_external_secret_that_only_merges_or_lives_in_another_namespace_makes_no_secret_here(tmp_path):
    missing = _walk_secrets(tmp_path / "none", {}).unsure
    for i, source in enumerate((_external_secret("cluster-secrets", target={"creationPolicy": "Merge"}),
                                _external_secret("cluster-secrets", target={"creationPolicy": "None"}),
                                _external_secret("cluster-secrets", "media"),
                                {**_external_secret("cluster-secrets"), "apiVersion": "example.com/v1"})):
        view = _walk_secrets(tmp_path / str(i), {"clusters/dev/es.yaml": dump(source)})
        assert (view.problems, view.unsure) == ([], missing)


def test_a_sops_encrypted_secret_is_read_as_the_secret_it_is_its_keys_known_its_values_not(tmp_path):
    """kustomize-controller decrypts it when it applies it; SOPS leaves the keys and the metadata plain."""
    sops = (b"apiVersion: v1\nkind: Secret\nmetadata:\n  name: cluster-secrets\n  namespace: flux-system\n"
            b"stringData:\n  SECRET_DOMAIN: ENC[AES256_GCM,data:abc,iv:x,tag:y,type:str]\nsops:\n  age:\n"
            b"    - recipient: age1example\n      enc: x\n  mac: ENC[AES256_GCM,data:m,type:str]\n  version: 3.9.0\n"
            b"  encrypted_regex: ^(data|stringData)$\n")
    view = _walk_secrets(tmp_path, {"clusters/dev/cluster-secrets.sops.yaml": sops})
    assert (view.problems, view.unsure) == ([], [])
    assert view.kustomizations[("flux-system", "apps")].variables == {"SECRET_DOMAIN": None}
    assert view.applied_by[ObjectId("", "Secret", "flux-system", "cluster-secrets")] == [FLUX]


def _generating(options: dict[str, Any]) -> dict[str, bytes]:
    return {"clusters/dev/kustomization.yaml": dump({
        "resources": ["flux-system/gotk-sync.yaml", "apps.yaml"], **options,
        "secretGenerator": [{"name": "cluster-secrets", "namespace": "flux-system", "envs": ["secrets.env"]}]}),
        "clusters/dev/secrets.env": b"SECRET_DOMAIN=home.arpa\n"}


def test_a_secret_a_generator_makes_under_its_name_is_read_with_its_keys(tmp_path):
    view = _walk_secrets(tmp_path, _generating({"generatorOptions": {"disableNameSuffixHash": True}}))
    assert (view.problems, view.unsure) == ([], [])
    assert view.kustomizations[("flux-system", "apps")].variables == {"SECRET_DOMAIN": None}


def test_a_secret_a_generator_makes_under_a_hashed_name_is_refused_saying_how_to_keep_the_name(tmp_path):
    view = _walk_secrets(tmp_path, _generating({}))
    (line,) = view.problems
    assert re.fullmatch(
        r"flux-system/apps \(clusters/dev/apps\.yaml\): postBuild\.substituteFrom: Secret flux-system/cluster-secrets "
        r"is made by a generator as Secret flux-system/cluster-secrets-[245-9bcdfghkmt]{10} \(kustomize's name "
        r"hash\), and Flux looks it up by the name as written: it would fail the build; hint: set "
        r"`disableNameSuffixHash: true` in that generator's `options` \(or in the kustomization's "
        r"`generatorOptions`\)", line), line
    assert ("flux-system", "apps") in view.kustomizations and view.unsure == []
