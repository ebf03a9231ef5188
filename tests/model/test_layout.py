"""model/layout.py: where each exported object lives in the GitOps repository, from the stack's gitops and flux config:
the default split layout, per-app and shared-base, the file of each Flux Kustomization and the folder of each
component, the folders no hand-written tier may apply, Flux paths as repository folders, and the `layout` stack output
read back as the layout it was written from."""

from __future__ import annotations

import pytest

from model.config import FluxConfig, GitopsConfig
from model.layout import LAYOUTS, Layout, PerAppLayout, SharedBaseLayout, SplitLayout, flux_path, is_within, repo_dir

FLUX = FluxConfig.model_validate({"tiers": [{"name": "cilium", "path": "./kubernetes/lab/cilium",
                                             "dependsOn": ["flux-system"]}]})


def layout(**gitops: object) -> Layout:
    return Layout.of("lab", GitopsConfig.model_validate(gitops), FLUX)


def test_the_default_layout_writes_an_entry_under_the_bootstrap_path_and_a_folder_per_component():
    split = layout()
    assert isinstance(split, SplitLayout)
    assert (split.entry_dir, split.components_dir, split.bootstrap_path) == (
        "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
    assert (split.name, split.records, split.sequence_indent) == ("split", "clusters/lab/gpu-platform", 0)
    assert split.kustomization_file("plex", "./components/lab/plex") == "clusters/lab/gpu-platform/ks.plex.yaml"
    assert split.component_dir("plex") == "components/lab/plex"
    assert split.listed_in("components/lab/plex/deployment.plex.yaml") == "components/lab/plex"
    assert split.owned_folders() == split.written_folders() == ["clusters/lab/gpu-platform", "components/lab"]
    assert (split.config_key_of("components/lab/plex/x.yaml"), split.config_key_of("clusters/lab/gpu-platform/x")) \
        == ("componentsDir", "entryDir")
    assert (split.writes_cluster_vars, split.base_group, split.repository_entry) == (True, None, "")


def test_per_app_writes_each_component_beside_its_kustomization_under_the_entry():
    per_app = layout(layout="per-app", entryDir="kubernetes/apps/gpu")
    assert isinstance(per_app, PerAppLayout) and per_app.component_dir("plex") == "kubernetes/apps/gpu/plex/app"
    assert per_app.kustomization_file("plex", "./kubernetes/apps/gpu/plex/app") == "kubernetes/apps/gpu/plex/ks.yaml"
    # a tier of the graph that applies no component folder stays in the entry, named as the split layout names it
    assert per_app.kustomization_file("gpu", "./kubernetes/apps/gpu/gpu") == "kubernetes/apps/gpu/ks.gpu.yaml"
    # the entry's kustomization.yaml lists each component's ks.yaml; the component's app/ lists its own files
    assert per_app.listed_in("kubernetes/apps/gpu/plex/ks.yaml") == "kubernetes/apps/gpu"
    assert per_app.listed_in("kubernetes/apps/gpu/plex/app/ks.yaml") == "kubernetes/apps/gpu/plex/app"
    assert per_app.owned_folders() == per_app.written_folders() == ["kubernetes/apps/gpu"]
    assert per_app.config_key_of("components/lab/plex/x.yaml") == "entryDir"  # componentsDir is not used here


def test_a_shared_base_names_each_kustomization_file_after_it_and_keeps_its_records_per_stack():
    shared = layout(layout="shared-base")
    assert isinstance(shared, SharedBaseLayout)
    assert (shared.entry_dir, shared.components_dir, shared.records) == ("clusters/base", "platform",
                                                                         "gpu-platform/lab")
    assert shared.kustomization_file("cilium", "./platform/cilium") == "clusters/base/cilium.yaml"
    assert shared.component_dir("intel-gpu-plugin") == "platform/intel-gpu-plugin"
    assert shared.owned_folders() == ["gpu-platform/lab"]  # the base and platform/ are the repository's own
    # the base's own kustomization.yaml gets lines, and every stack of the base writes one set of files
    assert (shared.writes_cluster_vars, shared.base_group, shared.repository_entry) == (
        False, "clusters/base", "clusters/base")


@pytest.mark.parametrize(("gitops", "flux", "problems"), [
    ({"recordsDir": "r"}, {}, ['gitops.recordsDir: "r": only used with layout: shared-base; the split and per-app '
                               'layouts keep their records in the entry folder; hint: remove recordsDir']),
    ({"entryDir": "a", "componentsDir": "a/b"}, {},
     ["gitops.entryDir: \"a\": overlaps componentsDir 'a/b'; hint: use two separate folders"]),
    ({"layout": "per-app", "componentsDir": "c"}, {},
     ['gitops.componentsDir: "c": not used with layout: per-app, where each component\'s folder is '
      '<entryDir>/<component>/app; hint: remove componentsDir, or use layout: split']),
    ({"layout": "shared-base", "recordsDir": "clusters"}, {"bootstrapPath": "./clusters/base/lab"},
     ["gitops.recordsDir: \"clusters\": overlaps entryDir 'clusters/base', which Flux applies; the records are "
      "never applied; hint: a folder of their own, e.g. gpu-platform",
      "flux.bootstrapPath: \"./clusters/base/lab\": inside the shared base 'clusters/base'; each stack's bootstrap "
      "path is its overlay of the base; hint: ./clusters/<stack>"]),
    ({"layout": "shared-base"}, {}, []),
], ids=["records-outside-shared-base", "overlap", "per-app-components", "shared-base", "shared-base-fine"])
def test_each_layout_refuses_the_folder_keys_it_cannot_honour(gitops, flux, problems):
    tiers = {"tiers": [{"name": "cilium", "path": "./kubernetes/lab/cilium", "dependsOn": ["flux-system"]}]}
    gitops_cfg, flux_cfg = GitopsConfig.model_validate(gitops), FluxConfig.model_validate({**tiers, **flux})
    chosen = Layout.of("lab", gitops_cfg, flux_cfg)
    assert chosen.config_problems(gitops_cfg, flux_cfg) == problems


def test_every_layout_config_may_name_has_a_class_of_its_name():
    assert {name: cls.name for name, cls in LAYOUTS.items()} == {
        "split": "split", "per-app": "per-app", "shared-base": "shared-base"}


def test_the_bootstrap_path_config_gives_is_where_the_walk_starts():
    flux = FluxConfig.model_validate({"bootstrapPath": "./kubernetes/flux/cluster", "tiers": [
        {"name": "cilium", "path": "./kubernetes/lab/cilium", "dependsOn": ["flux-system"]}]})
    assert Layout.of("lab", GitopsConfig(), flux).bootstrap_path == "./kubernetes/flux/cluster"


@pytest.mark.parametrize("gitops", [
    {}, {"sequenceIndent": 2, "entryDir": "clusters/lab/x", "componentsDir": "apps/lab"},
    {"layout": "per-app", "entryDir": "kubernetes/apps/gpu"}, {"layout": "shared-base"},
], ids=["split", "indented", "per-app", "shared-base"])
def test_the_layout_stack_output_reads_back_as_the_layout_it_was_written_from(gitops):
    written = layout(**gitops)
    assert Layout.from_output("lab", written.as_output()) == written


def test_the_layout_output_names_only_what_differs_from_the_split_layout():
    assert layout().as_output() == {"entryDir": "clusters/lab/gpu-platform", "componentsDir": "components/lab",
                                    "bootstrapPath": "./clusters/lab", "sequenceIndent": 0}
    assert layout(layout="shared-base").as_output() == {
        "entryDir": "clusters/base", "componentsDir": "platform", "bootstrapPath": "./clusters/lab",
        "sequenceIndent": 0, "layout": "shared-base", "recordsDir": "gpu-platform/lab"}
    # an output written before sequenceIndent and recordsDir existed
    old = Layout.from_output("lab", {"entryDir": "e", "componentsDir": "c", "bootstrapPath": "./b"})
    assert (old.sequence_indent, old.records_dir, old.name, old.records) == (0, "", "split", "e")


def test_a_flux_path_and_a_repository_folder():
    assert flux_path("clusters/lab") == "./clusters/lab"
    assert (repo_dir("./a/b/"), repo_dir("./"), repo_dir("."), repo_dir("a")) == ("a/b", "", "", "a")
    assert is_within("a/b", "a") and is_within("a", "a") and is_within("x", "")
    assert not is_within("ab", "a") and not is_within("a", "a/b")
