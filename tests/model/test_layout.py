"""model/layout.py: where each exported object lives in the GitOps repository, from the stack's gitops and flux config:
the default split layout, per-app and shared-base, the file of each Flux Kustomization and the folder of each
component, the folders no hand-written tier may apply, Flux paths as repository folders, and the `layout` stack output
read back as the layout it was written from."""

from __future__ import annotations

import pytest

from model.config import FluxConfig, GitopsConfig
from model.layout import Layout, flux_path, is_within, repo_dir

FLUX = FluxConfig.model_validate({"tiers": [{"name": "cilium", "path": "./kubernetes/lab/cilium",
                                             "dependsOn": ["flux-system"]}]})


def layout(**gitops: object) -> Layout:
    return Layout.of("lab", GitopsConfig.model_validate(gitops), FLUX)


def test_the_default_layout_writes_an_entry_under_the_bootstrap_path_and_a_folder_per_component():
    split = layout()
    assert (split.entry_dir, split.components_dir, split.bootstrap_path) == (
        "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
    assert (split.kind, split.records, split.sequence_indent) == ("split", "clusters/lab/gpu-platform", 0)
    assert split.kustomization_file("plex") == "clusters/lab/gpu-platform/ks.plex.yaml"
    assert (split.component_dir("plex"), split.component_kustomization_file("plex")) == ("components/lab/plex", None)
    assert split.owned_folders() == ["clusters/lab/gpu-platform", "components/lab"]


def test_per_app_writes_each_component_beside_its_kustomization_under_the_entry():
    per_app = layout(layout="per-app", entryDir="kubernetes/apps/gpu")
    assert per_app.kind == "per-app" and per_app.component_dir("plex") == "kubernetes/apps/gpu/plex/app"
    assert per_app.component_kustomization_file("plex") == "kubernetes/apps/gpu/plex/ks.yaml"
    assert per_app.owned_folders() == ["kubernetes/apps/gpu"]


def test_a_shared_base_names_each_kustomization_file_after_it_and_keeps_its_records_per_stack():
    shared = layout(layout="shared-base")
    assert (shared.entry_dir, shared.components_dir, shared.records) == ("clusters/base", "platform",
                                                                         "gpu-platform/lab")
    assert shared.kustomization_file("cilium") == "clusters/base/cilium.yaml"
    assert shared.component_dir("intel-gpu-plugin") == "platform/intel-gpu-plugin"
    assert shared.owned_folders() == ["gpu-platform/lab"]  # the base and platform/ are the repository's own


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
    assert (old.sequence_indent, old.records_dir, old.kind, old.records) == (0, "", "split", "e")


def test_a_flux_path_and_a_repository_folder():
    assert flux_path("clusters/lab") == "./clusters/lab"
    assert (repo_dir("./a/b/"), repo_dir("./"), repo_dir("."), repo_dir("a")) == ("a/b", "", "", "a")
    assert is_within("a/b", "a") and is_within("a", "a") and is_within("x", "")
    assert not is_within("ab", "a") and not is_within("a", "a/b")
