"""gitops/checks/shared_base.py: the stacks of one base (tests/fixtures/repos/home-network-k3s, issue 29) exported
as one set of files: a base Kustomization's timeout the largest stack needs, a value that differs between the stacks
a token each overlay's cluster-vars sets, each overlay's walk yielding exactly that stack's own objects; and refused,
one line each and nothing written, what one base cannot say (a GPU switch, a component or a shape in one stack only,
a base field no value of makes safe for both), and two stacks writing one file with different content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from builders import (
    HOME_DEV as DEV,
    HOME_PROD as PROD,
    HOME_PULL_REQUEST as PULL_REQUEST,
    HOME_RECORDS as RECORDS,
    PLUGIN_KS,
    git,
    git_status as status,
    home_project as project,
    home_repo,
    refused_export as refused,
    with_plugin,
)
from conftest import FIXTURES, evidence_for, export, make_project, stack_text
from gitops.export import main as export_main
from gitops.flux.build import RepoView
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk
from gitops.repo import edits


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of tests/fixtures/repos/home-network-k3s, committed, so `git status` shows exactly what the export
    changed."""
    return home_repo(tmp_path)


def test_the_plugins_kustomization_is_the_seeds_with_the_timeout_the_largest_stack_needs(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    ks = yaml.safe_load((repo / "clusters/base/intel-gpu-plugin.yaml").read_text())
    assert ks["spec"]["path"] == "./platform/intel-gpu-plugin"
    assert ks["spec"]["dependsOn"] == [{"name": "cilium"}]
    assert ks["spec"]["wait"] is True
    assert ks["spec"]["timeout"] == "10m"  # prod's three nodes (dev's one would need 4m): safe for both
    text = (repo / "clusters/base/intel-gpu-plugin.yaml").read_text()
    assert "STACK=" not in text, "a file of the base names no single stack"


def test_a_value_that_differs_between_the_stacks_becomes_a_token_each_overlays_cluster_vars_sets(repo, tmp_path):
    proj = project(tmp_path, dev=with_plugin(DEV, 2, "two transcoders on dev"),
                   prod=with_plugin(PROD, 3, "three transcoders on prod"))
    assert export(repo, "prod", project=proj) == 0
    overlays = {"M clusters/dev/cluster-vars.yaml", "M clusters/prod/cluster-vars.yaml"}
    assert status(repo) == PULL_REQUEST | {RECORDS} | overlays
    ds = (repo / "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml").read_text()
    assert "${GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0}" in ds
    dev_vars = edits.data_values((repo / "clusters/dev/cluster-vars.yaml").read_bytes())
    prod_vars = edits.data_values((repo / "clusters/prod/cluster-vars.yaml").read_bytes())
    assert dev_vars["GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0"] == "-shared-dev-num=2"
    assert prod_vars["GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0"] == "-shared-dev-num=3"
    diff = git(repo, "diff", "clusters/prod/cluster-vars.yaml")
    assert [line for line in diff.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))] \
        == [f'+  {k}: "{v}"' for k, v in sorted(prod_vars.items()) if k.startswith("GPU_PLATFORM_")]
    for stack, reason in (("dev", "two transcoders on dev"), ("prod", "three transcoders on prod")):
        view = walk(RepoView(repo), f"./clusters/{stack}")
        assert view.problems == []
        applied = view.manifests[ObjectId("apps", "DaemonSet", "intel-gpu-plugin", "intel-gpu-plugin")]
        assert applied["spec"]["template"]["spec"]["containers"][0]["args"] == [
            f"-shared-dev-num={2 if stack == 'dev' else 3}"]
        assert reason in applied["metadata"]["annotations"].values()
    assert export(repo, "dev", project=proj, check=True) == 0
    assert export_main(["--stack", "dev", "--out", str(repo), "--project-dir", str(proj), "--remove", "--quiet"]) == 0
    assert status(repo) == set()


@pytest.mark.parametrize("plugins", [None, ((2, "two transcoders on dev"), (3, "three transcoders on prod"))],
                         ids=["same", "tokens"])
def test_flux_s_walk_of_each_overlay_applies_exactly_that_stack_s_own_program_objects(repo, tmp_path, plugins):
    """The fast model of `make e2e`'s Flux build: each overlay, its cluster-vars substituted, yields field for field
    the plugin's objects that stack's program declares on its own (before the stacks were merged into one base)."""
    from gitops import pipeline

    dev, prod = (DEV, PROD) if plugins is None else (with_plugin(DEV, *plugins[0]), with_plugin(PROD, *plugins[1]))
    proj = project(tmp_path, dev=dev, prod=prod)
    assert export(repo, "prod", project=proj) == 0
    for stack in ("dev", "prod"):
        own = pipeline.build(stack, proj, lint=False).tree  # this stack alone: no token, its own values
        expected = {ObjectId.of(o.manifest): o.manifest for o in own.objects
                    if o.path.startswith("platform/intel-gpu-plugin/")}
        view = walk(RepoView(repo), f"./clusters/{stack}")
        assert sorted(view.kustomizations[PLUGIN_KS].objects) == sorted(expected)
        for oid, manifest in expected.items():
            assert view.manifests[oid] == manifest, oid


# --- what a shared base cannot say -----------------------------------------------------------------------------

def delivered_by_export(text: str) -> str:
    return text.replace("    deliveredBy: repository\n", "")


def test_the_gpu_switch_in_one_stack_of_a_shared_base_is_refused(repo, tmp_path, capsys):
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)})}
    proj = project(tmp_path, dev=delivered_by_export(DEV), prod=delivered_by_export(PROD), evidence=evidence)
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [line for line in lines if line.startswith("plex: GPU access differs")] and len(lines) == 1
    assert "(dev: host-path, prod: device-plugin)" in lines[0]
    assert "hint: record it for dev" in lines[0]


def test_a_component_in_one_stack_only_is_refused(repo, tmp_path, capsys):
    app = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    apps = app[app.index("  gpu-platform:apps:"):]
    apps = apps[:apps.index("\n  gpu-platform:", 1) + 1] if "\n  gpu-platform:" in apps[1:] else apps
    proj = project(tmp_path, dev=DEV.rstrip("\n") + "\n" + apps)
    lines = refused(capsys, repo, proj, "prod")
    assert lines and all("written for dev but not for prod, which share the base clusters/base" in line
                         for line in lines)
    assert lines[0].startswith("clusters/base/jellyfin.yaml: ") or lines[0].startswith("platform/jellyfin/")


def test_a_base_field_no_value_of_makes_safe_for_both_stacks_is_refused_naming_each_value(repo, tmp_path, capsys):
    proj = project(tmp_path, prod=PROD.replace("  gpu-platform:flux:\n", "  gpu-platform:flux:\n"
                                                                        "    gitRepository: home\n", 1))
    lines = refused(capsys, repo, proj, "dev")
    assert lines == ['clusters/base/intel-gpu-plugin.yaml: spec.sourceRef.name: differs between the stacks of the '
                     'shared base (dev: "flux-system", prod: "home"); a Flux Kustomization in the base is applied as '
                     'written (the overlay\'s root Kustomization substitutes no variable) and no value is safe for '
                     'every stack; hint: make the stacks\' config agree there']


def test_a_plugin_shared_in_one_stack_only_differs_in_shape_and_is_refused_naming_what_one_stack_lacks(
        repo, tmp_path, capsys):
    lines = refused(capsys, repo, project(tmp_path, dev=with_plugin(DEV, 2, "two on dev")), "prod")
    assert lines == [
        f"platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml: {where}: differs in shape between the stacks of "
        f"the shared base (prod lacks {lacks}); one file in the base cannot be both; hint: make the stacks' config "
        "agree there, or give each cluster its own layout"
        for where, lacks in (("metadata", "annotations"), ("spec.template.spec.containers[0]", "args"))]


# --- every layout: stacks that share a folder ------------------------------------------------------------------

@pytest.mark.parametrize(("shared", "deployment"), [
    ("  gpu-platform:gitops:\n    componentsDir: components/shared\n", "components/shared/plex/deployment.plex.yaml"),
    ("  gpu-platform:gitops:\n    layout: per-app\n    entryDir: clusters/shared\n",
     "clusters/shared/plex/app/deployment.plex.yaml"),
], ids=["split", "per-app"])
def test_two_stacks_writing_one_object_with_different_content_are_refused_naming_both_and_the_field(tmp_path, capsys,
                                                                                                    shared, deployment):
    dev = stack_text("dev").rstrip("\n") + "\n" + shared
    prod = stack_text("prod").rstrip("\n") + "\n" + shared
    proj = make_project(tmp_path / "project", {"dev": dev, "prod": prod})
    out = tmp_path / "out"
    shutil.copytree(FIXTURES / "repos" / "flux-bootstrap", out)
    lines = refused(capsys, out, proj, "dev")
    assert any(line.startswith(f"{deployment}: spec.template.spec.containers[0].env[") and "stacks dev and prod "
               "both write this file, with" in line for line in lines), lines


# --- the helpers behind each line and each token, judged directly: a token's name lands in every overlay's -----------
# --- cluster-vars, so a change of name is a change in the user's repository ----------------------------------------

def test_a_token_is_named_for_the_object_and_the_last_key_with_the_indices_after_it_and_numbered_when_taken():
    from gitops.checks.shared_base import _token_name

    taken: set[str] = set()
    plex = {"metadata": {"name": "plex"}}
    assert [_token_name(plex, path, taken) for path in (
        "spec.replicas", "spec.template.spec.containers[0].env[2].value", "metadata.annotations.lb.cilium.io/ips",
        "spec.ports[1]", "[0]", "spec.replicas", "spec.replicas")] == [
        "GPU_PLATFORM_PLEX_REPLICAS", "GPU_PLATFORM_PLEX_VALUE", "GPU_PLATFORM_PLEX_IPS", "GPU_PLATFORM_PLEX_PORTS_1",
        "GPU_PLATFORM_PLEX_VALUE_2", "GPU_PLATFORM_PLEX_REPLICAS_2", "GPU_PLATFORM_PLEX_REPLICAS_3"]
    assert _token_name({}, "data.x", set()) == "GPU_PLATFORM_OBJECT_X"
    assert _token_name({"metadata": {"name": "intel-gpu.plugin"}}, "spec.a-b", set()) == \
        "GPU_PLATFORM_INTEL_GPU_PLUGIN_A_B"


def test_the_first_difference_is_found_key_by_key_and_item_by_item_and_shown_dotted():
    from gitops.checks.shared_base import _dotted, _first_difference

    assert _first_difference({"a": 1, "b": [1, {"c": 2}]}, {"a": 1, "b": [1, {"c": 3}]}) == ("b", 1, "c")
    assert _first_difference({"a": [1]}, {"a": [1, 2]}) == ("a",)  # lists of other lengths differ as a whole
    assert _first_difference({1: "x", "b": 1}, {1: "y", "b": 2}) == (1,)  # keys in the order of their text
    assert _first_difference({"z": 1, "a": 1}, {"z": 2, "a": 2}) == ("a",)
    assert _first_difference("x", "y") == ()
    assert [_dotted(p) for p in (("spec", "containers", 0, "image"), (), (0, "a"), ("a",))] == [
        "spec.containers[0].image", "(root)", "[0].a", "a"]


def test_a_value_is_looked_up_along_its_path_and_a_path_that_leaves_the_document_is_absent():
    from gitops.checks.shared_base import _at

    doc = {"a": [{"b": 1}], "c": "x"}
    assert [_at(doc, p) for p in (("a", 0, "b"), ("a", 1), ("c", "d"), ("a", "b"), ())] == [1, None, None, None, doc]
    assert _at([5, 6], (1,)) == 6 and _at({"a": 1}, (0,)) is None


def test_a_value_is_shown_as_json_cut_at_eighty_characters_and_absence_says_so():
    from gitops.checks.shared_base import _shown

    assert _shown(None) == "(absent)"
    assert _shown({"b": 1, "a": "x"}) == '{"a": "x", "b": 1}'
    assert _shown("x" * 78) == '"' + "x" * 78 + '"'  # 80 characters: whole
    assert _shown("x" * 79) == '"' + "x" * 78 + "…"  # 81: cut to 79 and the ellipsis
    assert _shown("abcdef", limit=5) == '"abc…'


@pytest.mark.parametrize(("text", "other"), [
    ("2", True), ("yes", True), ("null", True), ("1.5", True), ("~", True), ("a: b", True),
    ("abc", False), ("[a", False), ("plex", False), ("", True),
])
def test_a_string_yaml_would_read_as_another_type_is_quoted(text, other):
    from gitops.checks.shared_base import _reads_as_other_type

    assert _reads_as_other_type(text) is other


def test_differences_of_shape_name_what_each_stack_lacks_or_holds():
    from gitops.checks.shared_base import _Merge

    merge = _Merge(["dev", "prod"])
    assert merge._shapes({"dev": {"a": 1, "b": 2}, "prod": {"a": 1, "c": 3}}) == "dev lacks c; prod lacks b"
    assert merge._shapes({"dev": [1], "prod": [1, 2]}) == "dev: 1 items, prod: 2 items"
    assert merge._shapes({"dev": "x", "prod": {"a": 1}}) == 'dev: "x", prod: (dict)'
    assert merge._each({"dev": None, "prod": [1]}) == "dev: (absent), prod: (list)"


def test_a_component_s_differing_scalars_become_tokens_each_stack_s_value_kept_and_shapes_refused():
    from gitops.checks.shared_base import _Merge

    merge = _Merge(["dev", "prod"])
    dev = {"metadata": {"name": "plex"}, "spec": {"replicas": 1, "ip": "10.0.0.1", "on": True, "same": "x"}}
    prod = {"metadata": {"name": "plex"}, "spec": {"replicas": 2, "ip": "10.0.0.2", "on": True, "same": "x"}}
    out = merge.component("c/plex.yaml", {"dev": dev, "prod": prod})
    assert out["spec"]["same"] == "x" and out["spec"]["on"] is True
    assert (out["spec"]["replicas"].name, out["spec"]["replicas"].quoted) == ("GPU_PLATFORM_PLEX_REPLICAS", False)
    assert merge.tokens == {"dev": {"GPU_PLATFORM_PLEX_REPLICAS": "1", "GPU_PLATFORM_PLEX_IP": "10.0.0.1"},
                            "prod": {"GPU_PLATFORM_PLEX_REPLICAS": "2", "GPU_PLATFORM_PLEX_IP": "10.0.0.2"}}
    quoted = merge.component("c/x.yaml", {"dev": {"metadata": {"name": "x"}, "v": "2"},
                                          "prod": {"metadata": {"name": "x"}, "v": "abc"}})
    assert quoted["v"].quoted is True
    assert merge.problems == []
    named = merge.component("c/y.yaml", {"dev": {"metadata": {"name": "a"}}, "prod": {"metadata": {"name": "b"}}})
    assert named == {"metadata": {"name": "a"}}
    assert merge.problems == [
        "c/y.yaml: metadata.name: differs in shape between the stacks of the shared base (dev: \"a\", prod: \"b\"); "
        "one file in the base cannot be both; hint: make the stacks' config agree there, or give each cluster its "
        "own layout"]
