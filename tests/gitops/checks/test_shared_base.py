"""gitops/checks/shared_base.py: the stacks of one base (examples/home-network-k3s/repo, issue 29) exported
as one set of files: a base Kustomization's timeout the largest stack needs, a value that differs between the stacks
a token each overlay's cluster-vars sets, each overlay's walk yielding exactly that stack's own objects; and refused,
one line each and nothing written, what one base cannot say (a GPU switch, a component or a shape in one stack only,
a base field no value of makes safe for both), and two stacks writing one file with different content."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

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
from conftest import FIXTURES, evidence_for, export, files_of, make_project, repository, stack_text
from gitops.export import main as export_main
from gitops.flux.build import RepoView
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk
from gitops.repo import edits

APART = ("hint: give each stack a folder of its own (gitops.entryDir, gitops.componentsDir), or make the values equal, "
         "or use layout: shared-base for one base every cluster's overlay includes")



@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of examples/home-network-k3s/repo, committed, so `git status` shows exactly what the export
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
    assert refused(capsys, repo, proj, "prod") == [
        "evidence/dev.yaml: plex: GPU access differs between the stacks of the shared base (dev: host-path, prod: "
        "device-plugin); the base holds one plex for every cluster, so the switch to the device plugin needs evidence "
        "for every stack that shares it; hint: record it for dev (make verify-nodes STACK=dev NODES=nodes.json "
        "WRITE_EVIDENCE=1), or pin intelGpuAccess: host-path in the others until then"]


def test_a_component_in_one_stack_only_is_one_line_naming_the_stack_key_that_declares_it(repo, tmp_path, capsys):
    app = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    apps = app[app.index("  gpu-platform:apps:"):]
    apps = apps[:apps.index("\n  gpu-platform:", 1) + 1] if "\n  gpu-platform:" in apps[1:] else apps
    proj = project(tmp_path, dev=DEV.rstrip("\n") + "\n" + apps)
    assert refused(capsys, repo, proj, "prod") == [
        'Pulumi.dev.yaml: gpu-platform:apps: [{"authMode": "app-native", "delivery": {"tier": "apps-wave-1"}, '
        '"egressClass":…, while prod says (not set): so clusters/base/jellyfin.yaml and 9 more files are written for '
        "dev but not for prod, which share the base clusters/base; the base holds one set of components for every "
        "cluster; hint: give every stack of the base the same components"]


def test_a_base_field_no_value_of_makes_safe_for_both_stacks_is_refused_naming_the_key_and_each_value(
        repo, tmp_path, capsys):
    proj = project(tmp_path, prod=PROD.replace("  gpu-platform:flux:\n", "  gpu-platform:flux:\n"
                                                                        "    gitRepository: home\n", 1))
    lines = refused(capsys, repo, proj, "dev")
    # flux.bootstrapPath differs too (each overlay's own folder), and shapes no file of the base: not named
    assert lines == ['Pulumi.prod.yaml: gpu-platform:flux.gitRepository: "home", while dev says (not set): so '
                     'clusters/base/intel-gpu-plugin.yaml differs at spec.sourceRef.name (dev: "flux-system", prod: '
                     '"home") between the stacks of the shared base clusters/base; a Flux Kustomization in the base '
                     'is applied as written (the overlay\'s root Kustomization substitutes no variable) and no value '
                     'is safe for every stack; hint: make the stacks\' config agree there']


def test_a_plugin_shared_in_one_stack_only_is_refused_in_one_line_naming_the_stack_file_s_keys_then_each_field(
        repo, tmp_path, capsys):
    lines = refused(capsys, repo, project(tmp_path, dev=with_plugin(DEV, 2, "two on dev")), "prod")
    assert lines == [
        "Pulumi.dev.yaml: gpu-platform:intelGpuPlugin.sharedDevNum: 2, while prod says (not set); "
        'gpu-platform:intelGpuPlugin.sharedDevNumReason: "two on dev", while prod says (not set): so '
        "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml differs in shape at metadata (prod lacks "
        "annotations) and at spec.template.spec.containers[0] (prod lacks args) between the stacks of the shared base "
        "clusters/base; one file in the base cannot be both; hint: make the stacks' config agree there, or give each "
        "cluster its own layout"]


def plugin_args(text: str, *args: str) -> str:
    """A stack file with the device plugin's extraArgs set."""
    listed = "".join(f"      - {a}\n" for a in args)
    return text.replace("  gpu-platform:gitops:\n", f"  gpu-platform:intelGpuPlugin:\n    extraArgs:\n{listed}"
                        "  gpu-platform:gitops:\n", 1)


def test_plugin_flags_in_one_stack_only_are_refused_naming_that_stack_file_and_key_first(repo, tmp_path, capsys):
    lines = refused(capsys, repo, project(tmp_path, prod=plugin_args(PROD, "-v=4")), "dev")
    assert lines == [
        'Pulumi.prod.yaml: gpu-platform:intelGpuPlugin.extraArgs: ["-v=4"], while dev says (not set): so '
        "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml differs in shape at "
        "spec.template.spec.containers[0] (dev lacks args) between the stacks of the shared base clusters/base; one "
        "file in the base cannot be both; hint: make the stacks' config agree there, or give each cluster its own "
        "layout"]


def test_plugin_flags_both_stacks_set_but_not_alike_are_refused_naming_the_later_stack_file(repo, tmp_path, capsys):
    proj = project(tmp_path, dev=plugin_args(DEV, "-v=4"), prod=plugin_args(PROD, "-v=4", "-allocation-policy=packed"))
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [
        'Pulumi.prod.yaml: gpu-platform:intelGpuPlugin.extraArgs: ["-v=4", "-allocation-policy=packed"], while dev '
        'says ["-v=4"]: so platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml differs in shape at '
        "spec.template.spec.containers[0].args (dev: 1 items, prod: 2 items) between the stacks of the shared base "
        "clusters/base; one file in the base cannot be both; hint: make the stacks' config agree there, or give each "
        "cluster its own layout"]


AGREE = "hint: set the same gitops.{key} in every stack file of the base"


@pytest.mark.parametrize(("dev", "prod", "line"), [
    (DEV, PROD.replace("    componentsDir: platform\n", "    componentsDir: comps\n"),
     'Pulumi.prod.yaml: gpu-platform:gitops.componentsDir: "comps" differs from Pulumi.dev.yaml\'s "platform"; the '
     "stacks sharing the base clusters/base write one set of components, so one folder for them; "
     + AGREE.format(key="componentsDir")),
    (DEV.replace("    componentsDir: platform\n", "    componentsDir: comps\n"),
     PROD.replace("    componentsDir: platform\n", ""),
     'Pulumi.dev.yaml: gpu-platform:gitops.componentsDir: "comps" differs from Pulumi.prod.yaml\'s "platform" (the '
     "default); the stacks sharing the base clusters/base write one set of components, so one folder for them; "
     + AGREE.format(key="componentsDir")),
    (DEV, PROD.replace("    sequenceIndent: 2\n", ""),
     "Pulumi.dev.yaml: gpu-platform:gitops.sequenceIndent: 2 differs from Pulumi.prod.yaml's 0 (the default); the "
     "stacks sharing the base clusters/base write one set of files, so one style for them; "
     + AGREE.format(key="sequenceIndent")),
], ids=["componentsDir", "componentsDir left to its default", "sequenceIndent"])
def test_stacks_of_one_base_setting_a_key_they_must_share_differently_is_one_line_naming_both_stack_files(
        repo, tmp_path, capsys, dev, prod, line):
    assert refused(capsys, repo, project(tmp_path, dev=dev, prod=prod), "prod") == [line]


# --- every layout: stacks that share a folder ------------------------------------------------------------------

@pytest.mark.parametrize(("shared", "line"), [
    ("  gpu-platform:gitops:\n    componentsDir: components/shared\n",
     'Pulumi.prod.yaml: gpu-platform:gitops.componentsDir: "components/shared": dev writes there too '
     "(Pulumi.dev.yaml), and 4 files there differ between the two stacks (first: "
     "components/shared/plex/deployment.plex.yaml: "
     'spec.template.spec.containers[0].env[3].value: dev has "http://192.168.20.40:32400/", prod '
     f'"http://192.168.10.40:32400/"); one stack would overwrite the other; {APART}'),
    ("  gpu-platform:gitops:\n    layout: per-app\n    entryDir: clusters/shared\n",
     'Pulumi.prod.yaml: gpu-platform:gitops.entryDir: "clusters/shared": dev\'s entry folder too (Pulumi.dev.yaml), '
     "where each stack keeps its own export-index.json, DELIVERY.md and POST-MERGE.md; one stack's records would "
     "overwrite the other's; hint: give each stack its own gitops.entryDir, or use layout: shared-base, whose records "
     "are kept per stack"),
], ids=["split", "per-app"])
def test_two_stacks_writing_one_folder_differently_are_refused_in_one_line_naming_the_stack_file_and_key(
        tmp_path, capsys, shared, line):
    dev = stack_text("dev").rstrip("\n") + "\n" + shared
    prod = stack_text("prod").rstrip("\n") + "\n" + shared
    proj = make_project(tmp_path / "project", {"dev": dev, "prod": prod})
    out = tmp_path / "out"
    shutil.copytree(repository("flux-bootstrap"), out)
    assert refused(capsys, out, proj, "dev") == [line]


def _sharing(layout: str, tmp_path: Path) -> tuple[Path, Path, tuple[str, str]]:
    """A repository and a project of two stacks that share a folder, as each layout allows: a shared base's two
    overlays, or a split stack whose componentsDir is another stack's (the same values, so the same files)."""
    if layout == "shared-base":
        from builders import home_project, home_repo

        return home_repo(tmp_path), home_project(tmp_path), ("dev", "prod")
    out = tmp_path / "repo"
    shutil.copytree(repository("flux-bootstrap"), out)
    twin = stack_text("prod").rstrip("\n") + "\n  gpu-platform:gitops:\n    componentsDir: components/prod\n"
    return out, make_project(tmp_path / "project", {"prod": stack_text("prod"), "twin": twin}), ("prod", "twin")


@pytest.mark.parametrize("layout", ["shared-base", "split"])
def test_two_stacks_sharing_a_folder_end_byte_identical_in_every_order_and_check_passes_after_each(tmp_path, layout):
    out, proj, (a, b) = _sharing(layout, tmp_path)
    first: dict[str, bytes] | None = None
    for order in ((a, b), (b, a), (a,), (b,), (a, b)):
        assert export(out, *order, project=proj) == 0, order
        now = files_of(out)
        first = first if first is not None else now
        assert now == first, f"{order}: {sorted(k for k in set(now) | set(first) if now.get(k) != first.get(k))}"
        for stack in (a, b):
            assert export(out, stack, project=proj, check=True) == 0, (order, stack)


# --- files two stacks write: one meaning, or a refusal naming both (conflicts) ------------------------------------

def _stack_tree(stack: str, files: dict[str, str], objects: dict[str, dict] | None = None,
                edited: set[str] | None = None, entry: str = "clusters/base", records: str = "") -> Any:
    from gitops.engine.program import Registration
    from gitops.tree import ExportedObject, Tree
    from model.layout import SplitLayout

    tree = Tree(stack, SplitLayout(stack, entry, "components", "./clusters/base", records_dir=records),
                files={rel: text.encode() for rel, text in files.items()}, edited=edited or set())
    tree.objects = [ExportedObject(rel, doc, Registration(f"urn:{rel}", "test", rel, "", (), "", True, {}, ()), "", "")
                    for rel, doc in (objects or {}).items()]
    return tree


def test_files_two_stacks_write_are_one_where_they_mean_the_same_and_one_line_per_folder_where_not():
    from gitops.checks.shared_base import conflicts

    plex = {"kind": "Deployment", "metadata": {"name": "plex"}, "spec": {"replicas": 1, "image": "plex:1"}}
    dev = _stack_tree("dev", {
        "clusters/base/a-kept-lines.yaml": "x: dev\n", "components/b-same.yaml": "same: 1\n",
        "components/c-header.yaml": "# dev\nx: 1\n", "components/d-object.yaml": "# written by dev\nkind: Deployment\n",
        "clusters/base/e-notes.txt": "dev\n", "components/f-one-side.yaml": "x: 1\n",
        "components/g-plex.yaml": "plex: dev\n"},
        {"components/d-object.yaml": plex, "components/f-one-side.yaml": plex, "components/g-plex.yaml": plex},
        records="gpu-platform/dev")
    prod = _stack_tree("prod", {
        "clusters/base/a-kept-lines.yaml": "x: prod\n", "components/b-same.yaml": "same: 1\n",
        "components/c-header.yaml": "# prod\nx: 1\n",
        "components/d-object.yaml": "# written by prod\nkind: Deployment\n",
        "clusters/base/e-notes.txt": "prod\n", "components/f-one-side.yaml": "x: 2\n",
        "components/g-plex.yaml": "plex: prod\n"},
        {"components/d-object.yaml": plex,
         "components/g-plex.yaml": {**plex, "spec": {"replicas": 3, "image": "plex:1"}}},
        edited={"clusters/base/a-kept-lines.yaml"}, records="gpu-platform/prod")
    assert conflicts([prod, dev]) == [
        'Pulumi.prod.yaml: gpu-platform:gitops.entryDir: "clusters/base": dev writes there too (Pulumi.dev.yaml), and '
        "a file there differs between the two stacks (first: clusters/base/e-notes.txt); one stack would overwrite the "
        f"other; {APART}",
        'Pulumi.prod.yaml: gpu-platform:gitops.componentsDir: "components": dev writes there too (Pulumi.dev.yaml), '
        "and 2 files there differ between the two stacks (first: components/f-one-side.yaml); one stack would "
        f"overwrite the other; {APART}"]
    # the same meaning is written as the first stack (in name order) writes it, so every run writes the same bytes
    assert prod.files["components/c-header.yaml"] == b"# dev\nx: 1\n"
    assert prod.files["components/d-object.yaml"] == dev.files["components/d-object.yaml"]
    assert prod.files["clusters/base/a-kept-lines.yaml"] == b"x: prod\n", "a file the export keeps lines in is its own"


def test_a_field_two_stacks_write_differently_names_each_stacks_value_and_the_stack_that_named_the_others_folder():
    from gitops.checks.shared_base import conflicts

    plex = {"kind": "Deployment", "metadata": {"name": "plex"}, "spec": {"replicas": 1}}
    lab = _stack_tree("lab", {"components/prod/plex.yaml": "plex: lab\n"}, {"components/prod/plex.yaml": plex},
                      entry="clusters/lab/gpu-platform")
    lab.layout = type(lab.layout)("lab", "clusters/lab/gpu-platform", "components/prod", "./clusters/lab")
    prod = _stack_tree("prod", {"components/prod/plex.yaml": "plex: prod\n"},
                       {"components/prod/plex.yaml": {**plex, "spec": {"replicas": 3}}},
                       entry="clusters/prod/gpu-platform")
    prod.layout = type(prod.layout)("prod", "clusters/prod/gpu-platform", "components/prod", "./clusters/prod")
    assert conflicts([prod, lab]) == [
        'Pulumi.lab.yaml: gpu-platform:gitops.componentsDir: "components/prod": prod writes there too '
        "(Pulumi.prod.yaml), and a file there differs between the two stacks (first: components/prod/plex.yaml: "
        f"spec.replicas: lab has 1, prod 3); one stack would overwrite the other; {APART}"]


def test_two_stacks_keeping_their_records_in_one_entry_folder_are_refused_in_one_line_naming_the_key():
    from gitops.checks.shared_base import conflicts

    same = {"clusters/prod/gpu-platform/ks.plex.yaml": "x: 1\n"}
    prod = _stack_tree("prod", same, entry="clusters/prod/gpu-platform")
    copy = _stack_tree("prod2", same, entry="clusters/prod/gpu-platform")
    assert conflicts([copy, prod]) == [
        'Pulumi.prod2.yaml: gpu-platform:gitops.entryDir: "clusters/prod/gpu-platform": prod\'s entry folder too '
        "(Pulumi.prod.yaml), where each stack keeps its own export-index.json, DELIVERY.md and POST-MERGE.md; one "
        "stack's records would overwrite the other's; hint: give each stack its own gitops.entryDir, or use layout: "
        "shared-base, whose records are kept per stack"]
    # a shared base keeps one records folder per stack: the same entry is no conflict there
    dev = _stack_tree("dev", same, records="gpu-platform/dev")
    assert conflicts([dev, _stack_tree("prod", same, records="gpu-platform/prod")]) == []


# --- what one base cannot say about the route and the GPU switch (merge refuses before it merges a file) ------------

def _outputs(*, dra: bool = False, stage: str | None = None, **access: str) -> Any:
    from model.layout import SplitLayout
    from model.outputs import AppPolicy, BootstrapRef, DraMigrationOutput, FluxGraph, GpuAppOutput, ProgramOutputs

    graph = FluxGraph(namespace="flux-system", bootstrap=BootstrapRef("flux-system", "flux-system", "flux-system",
                                                                      "./clusters/base"),
                      plugin=None if dra else ("flux-system", "intel-gpu-plugin"), cni=("flux-system", "cilium"),
                      kustomizations=(), components={}, plugin_folder="",
                      driver=("flux-system", "intel-gpu-dra") if dra else None)
    migration = DraMigrationOutput(stage, 1, True, (), (), "") if stage else None
    apps = {name: GpuAppOutput(a.removesuffix("@repository"), "x",
                               delivered_by="repository" if a.endswith("@repository") else "export")
            for name, a in access.items()}
    return ProgramOutputs(layout=SplitLayout("x", "clusters/base", "components", "./clusters/base"), flux_graph=graph,
                          app_policy=AppPolicy(), nodes=(), gpu_apps=apps, dra_migration=migration)


def _merged(**outputs: Any) -> list[str]:
    from gitops.checks.shared_base import merge

    return merge([(_stack_tree(stack, {}), out) for stack, out in outputs.items()])[1]


def test_the_dra_route_in_some_stacks_of_a_base_only_is_refused_before_any_file_is_merged():
    assert _merged(dev=_outputs(dra=True, stage="plugin-kept"), prod=_outputs(), test=_outputs()) == [
        'Pulumi.dev.yaml: gpu-platform:gpu.route: "dra", while prod, test say device-plugin: the stacks of the base '
        "clusters/base share one set of components, and so one route; hint: set the same gpu.route in every stack of "
        "the base"]
    assert _merged(dev=_outputs(), prod=_outputs(dra=True)) == [
        'Pulumi.prod.yaml: gpu-platform:gpu.route: "dra", while dev says device-plugin: the stacks of the base '
        "clusters/base share one set of components, and so one route; hint: set the same gpu.route in every stack of "
        "the base"]


def test_stacks_of_a_base_at_different_steps_of_the_move_to_dra_are_refused():
    assert _merged(dev=_outputs(dra=True, stage="plugin-kept"), prod=_outputs(dra=True, stage="claims"),
                   test=_outputs(dra=True, stage="plugin-kept")) == [
        'Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "claims", while dev says "plugin-kept": the stacks of the base '
        "clusters/base share one set of components, so the move to DRA takes each step for all of them at once; hint: "
        "set the same gpu.dra.stage in every stack of the base, with each stack's evidence"]
    assert _merged(dev=_outputs(dra=True, stage="claims"), prod=_outputs(dra=True, stage="claims")) == []


def test_a_gpu_switch_in_some_stacks_of_a_base_only_is_refused_naming_each_stack_to_record_evidence_for():
    assert _merged(dev=_outputs(plex="hostpath", jelly="device-plugin", own="hostpath@repository"),
                   prod=_outputs(plex="device-plugin", jelly="device-plugin", own="device-plugin@repository",
                                 alone="device-plugin"),
                   test=_outputs(plex="hostpath", jelly="device-plugin")) == [
        "evidence/dev.yaml: plex: GPU access differs between the stacks of the shared base (dev: hostpath, prod: "
        "device-plugin, test: "
        "hostpath); the base holds one plex for every cluster, so the switch to the device plugin needs evidence for "
        "every stack that shares it; hint: record it for dev, test (make verify-nodes STACK=dev NODES=nodes.json "
        "WRITE_EVIDENCE=1), or pin intelGpuAccess: host-path in the others until then"]


def test_a_base_of_one_stack_merges_as_it_is():
    assert _merged(dev=_outputs()) == []


def test_a_file_some_stacks_of_a_base_write_and_others_do_not_is_refused_naming_both_sides():
    from gitops.checks.shared_base import merge

    plex = {"kind": "Deployment", "metadata": {"name": "plex"}}
    objects = {"dev": {"c/plex.yaml": plex, "c/only-dev.yaml": plex}, "prod": {"c/plex.yaml": plex},
               "test": {}}
    problems = merge([(_stack_tree(s, {}, o), _outputs()) for s, o in objects.items()])[1]
    assert problems == [
        "c/only-dev.yaml: written for dev but not for prod, test, which share the base clusters/base; the base holds "
        "one set of components for every cluster; hint: give every stack of the base the same components",
        "c/plex.yaml: written for dev, prod but not for test, which share the base clusters/base; the base holds one "
        "set of components for every cluster; hint: give every stack of the base the same components"]


def test_only_a_flux_kustomization_takes_the_longest_timeout_a_kustomize_one_is_a_component():
    from gitops.checks.shared_base import merge

    def kustomization(api: str, timeout: str) -> dict:
        return {"apiVersion": api, "kind": "Kustomization", "metadata": {"name": "k"}, "spec": {"timeout": timeout}}

    trees = {s: _stack_tree(s, {}, {"c/flux.yaml": kustomization("kustomize.toolkit.fluxcd.io/v1", t),
                                    "c/kustomize.yaml": kustomization("kustomize.config.k8s.io/v1beta1", t)})
             for s, t in (("dev", "4m"), ("prod", "10m"))}
    base, problems = merge([(tree, _outputs()) for tree in trees.values()])
    assert problems == []
    objects = {o.path: o.manifest for o in trees["dev"].objects}
    assert objects["c/flux.yaml"]["spec"]["timeout"] == "10m"
    assert objects["c/kustomize.yaml"]["spec"]["timeout"].name == "GPU_PLATFORM_K_TIMEOUT"
    assert base.tokens == {"dev": {"GPU_PLATFORM_K_TIMEOUT": "4m"}, "prod": {"GPU_PLATFORM_K_TIMEOUT": "10m"}}


# --- the cause of merge's refusals: the stack files' keys -----------------------------------------------------------

def _configured(stack: str, config: dict[str, Any], objects: dict[str, tuple[str, str, dict]]) -> Any:
    """A stack's tree whose objects (rel -> component type, component name, manifest) were declared under `config`
    (`gpu-platform:<section>` -> value, as the engine passes it: JSON text)."""
    import json

    from gitops.engine.program import Registration
    from gitops.tree import ExportedObject

    tree = _stack_tree(stack, {})
    tree.config = {f"gpu-platform:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    tree.config["pulumi:disable-default-providers"] = '["kubernetes"]'  # another namespace: never a cause
    tree.objects = [ExportedObject(rel, doc, Registration(f"urn:{rel}", "test", rel, "", (), "", True, {}, ()), kind,
                                   name) for rel, (kind, name, doc) in objects.items()]
    return tree


PLUGIN_TYPE, APP_TYPE, GRAPH_TYPE = ("gpu-platform:components:IntelGpuPlugin", "gpu-platform:components:GpuApp",
                                     "gpu-platform:components:FluxDeliveryGraph")


def test_the_stacks_config_differs_key_by_key_an_unset_mapping_sets_no_key_and_a_list_of_mappings_item_by_item():
    from gitops.checks.shared_base import _UNSET, _differing

    assert _differing({"dev": {"a": {"x": 1, "y": 2}}, "prod": {"a": {"x": 1, "y": 3, "z": 0}}}) == [
        ("a", "y"), ("a", "z")]
    assert _differing({"dev": {"a": {"x": 1}}, "prod": {}}) == [("a", "x")]  # no section: none of its keys set
    assert _differing({"dev": {"a": {}}, "prod": {}}) == []
    assert _differing({"dev": {"l": [{"n": 1}, {"n": 2}]}, "prod": {"l": [{"n": 1}, {"n": 3}]}}) == [("l", 1, "n")]
    assert _differing({"dev": {"l": [{"n": 1}]}, "prod": {"l": [{"n": 1}, {"n": 3}]}}) == [("l",)]  # lengths: whole
    assert _differing({"dev": {"l": ["a", "b"]}, "prod": {"l": ["a", "c"]}}) == [("l",)]  # scalars: the list whole
    assert _differing({"dev": {"a": 1}, "prod": {"a": {"x": 1}}}) == [("a",)]
    assert _differing({"dev": _UNSET, "prod": _UNSET}) == []


def test_the_stack_named_sets_what_another_leaves_unset_else_it_is_the_last_that_differs_from_the_first():
    from gitops.checks.shared_base import _cause_text

    configs = {"a": {"p": {"x": 1}}, "b": {"p": {"x": 2}}, "c": {"p": {"x": 1}}, "d": {"p": {"x": 3}}}
    assert _cause_text((("p", "x"),), configs) == (
        "Pulumi.d.yaml: gpu-platform:p.x: 3, while a, c say 1 and b says 2")
    configs = {"a": {}, "b": {"p": {"x": None}}, "c": {}}
    assert _cause_text((("p", "x"),), configs) == "Pulumi.b.yaml: gpu-platform:p.x: null, while a, c say (not set)"
    configs = {"a": {"p": {"x": "long " * 20}}, "b": {"p": {"y": [1]}}}
    assert _cause_text((("p", "x"), ("p", "y")), configs) == (
        f'Pulumi.a.yaml: gpu-platform:p.x: "{("long " * 20)[:78]}…, while b says (not set); gpu-platform:p.y: '
        "(not set), while b says [1]")


def test_a_refusal_names_only_keys_that_could_shape_its_object_and_keeps_the_file_first_when_none_differs():
    from gitops.checks.shared_base import merge

    def ds(args: list[str] | None) -> dict:
        return {"kind": "DaemonSet", "metadata": {"name": "p"}, "spec": {"c": {"args": args} if args else {}}}

    def trees(dev: dict, prod: dict, kind: str = PLUGIN_TYPE) -> list:
        return [_configured(stack, config, {"c/p.yaml": (kind, "p", ds(args))})
                for stack, config, args in (("dev", dev, ["-v=4"]), ("prod", prod, None))]

    fallback = ("c/p.yaml: spec.c: differs in shape between the stacks of the shared base (prod lacks args); one file "
                "in the base cannot be both; hint: make the stacks' config agree there, or give each cluster its own "
                "layout")
    # what each overlay holds on its own, and a section no object of the plugin reads, are no cause of the plugin's
    unrelated = ({"flux": {"bootstrapPath": "./clusters/dev", "clusterVars": {"A": "1"}}, "plex": {"uid": 1}},
                 {"flux": {"bootstrapPath": "./clusters/prod"}, "plex": {"uid": 2}})
    assert merge([(t, _outputs()) for t in trees(*unrelated)])[1] == [fallback]
    assert merge([(t, _outputs()) for t in trees(*unrelated, kind="")])[1] == [fallback]  # no component: no section
    named = merge([(t, _outputs()) for t in trees({"intelGpuPlugin": '{"extraArgs": ["-v=4"]}', **unrelated[0]},
                                                  {"intelGpuPlugin": "{}", **unrelated[1]})])[1]
    assert named == [
        'Pulumi.dev.yaml: gpu-platform:intelGpuPlugin.extraArgs: ["-v=4"], while prod says (not set): so c/p.yaml '
        "differs in shape at spec.c (prod lacks args) between the stacks of the shared base clusters/base; one file "
        "in the base cannot be both; hint: make the stacks' config agree there, or give each cluster its own layout"]


def test_one_cause_is_one_line_for_every_file_it_shapes_and_an_app_is_shaped_by_its_own_entry_and_the_app_policy():
    from gitops.checks.shared_base import merge

    def app(stack: str, labels: dict, extra: dict) -> dict[str, tuple[str, str, dict]]:
        return {"c/jelly/ns.yaml": (APP_TYPE, "jelly", {"kind": "Namespace", "metadata": {"labels": labels}}),
                "c/jelly/deploy.yaml": (APP_TYPE, "jelly", {"kind": "Deployment", "spec": extra}),
                "c/plex/deploy.yaml": (APP_TYPE, "plex", {"kind": "Deployment", "spec": extra})}

    dev = _configured("dev", {"apps": [{"name": "other", "port": 1}, {"name": "jelly", "volumes": [1]}],
                              "appPolicy": {"egressClassLabel": "egress"}},
                      app("dev", {"egress": "x"}, {"volumes": [1]}))
    prod = _configured("prod", {"apps": [{"name": "other", "port": 2}, {"name": "jelly"}]},
                       app("prod", {"egress-class": "x"}, {}))
    assert merge([(dev, _outputs()), (prod, _outputs())])[1] == [
        'Pulumi.dev.yaml: gpu-platform:appPolicy.egressClassLabel: "egress", while prod says (not set); '
        "gpu-platform:apps[1].volumes: [1], while prod says (not set): so c/jelly/deploy.yaml differs in shape at "
        "spec (prod lacks volumes), and c/jelly/ns.yaml at metadata.labels (dev lacks egress-class; prod lacks "
        "egress) between the stacks of the shared base clusters/base; one file in the base cannot be both; hint: "
        "make the stacks' config agree there, or give each cluster its own layout",
        # plex has no entry in apps: its own section (unset in both) and the app policy
        'Pulumi.dev.yaml: gpu-platform:appPolicy.egressClassLabel: "egress", while prod says (not set): so '
        "c/plex/deploy.yaml differs in shape at spec (prod lacks volumes) between the stacks of the shared base "
        "clusters/base; one file in the base cannot be both; hint: make the stacks' config agree there, or give each "
        "cluster its own layout"]


def test_a_flux_kustomization_is_shaped_by_the_flux_section_and_the_delivery_of_the_app_it_applies():
    from gitops.checks.shared_base import merge

    def ks(depends: str) -> dict[str, tuple[str, str, dict]]:
        doc = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
               "metadata": {"name": "jelly"}, "spec": {"dependsOn": [{"name": depends}]}}
        return {"clusters/base/jelly.yaml": (GRAPH_TYPE, "flux", doc)}

    dev = _configured("dev", {"apps": [{"name": "jelly", "delivery": {"tier": "a"}, "port": 1}]}, ks("a"))
    prod = _configured("prod", {"apps": [{"name": "jelly", "delivery": {"tier": "b"}, "port": 2}]}, ks("b"))
    assert merge([(dev, _outputs()), (prod, _outputs())])[1] == [
        'Pulumi.prod.yaml: gpu-platform:apps[0].delivery.tier: "b", while dev says "a": so clusters/base/jelly.yaml '
        'differs at spec.dependsOn[0].name (dev: "a", prod: "b") between the stacks of the shared base '
        "clusters/base; a Flux Kustomization in the base is applied as written (the overlay's root Kustomization "
        "substitutes no variable) and no value is safe for every stack; hint: make the stacks' config agree there"]


def test_the_stack_config_is_the_project_s_keys_each_value_decoded_as_the_engine_passed_it():
    from gitops.checks.shared_base import _stack_config

    tree = _stack_tree("dev", {})
    tree.config = {"gpu-platform:a": '{"x": [1]}', "gpu-platform:b": "plain text", "gpu-platform:c": "2",
                   "kubernetes:context": "k3s"}
    assert _stack_config(tree) == {"a": {"x": [1]}, "b": "plain text", "c": 2}
