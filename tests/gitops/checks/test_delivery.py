"""gitops/checks/delivery.py, called directly on small repositories (walk_repositories.py): the walk before and
after, each exported object applied once by its own Kustomization, nothing the repository applied dropped, the
deciding kustomization file, a namespace nothing creates and a second Intel GPU plugin, with the line a user reads
(the file to change and the entry to add or remove)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from walk_repositories import (
    EVERY_KS,
    FLUX,
    checker,
    exported,
    graph,
    repository,
    resources,
)

from builders import cm, dump, ks
from gitops.checks.delivery import deciding_file
from gitops.flux.build import RepoView
from gitops.flux.inventory import FluxView, ObjectId, WalkedKustomization


@pytest.fixture
def check(tmp_path):
    return checker(tmp_path)


# --- the walk itself -----------------------------------------------------------------------------------------------

def test_an_export_in_its_own_entry_folder_of_a_bootstrap_repository_passes(check):
    stack = check()
    assert (stack.problems, stack.notices) == ([], [])
    assert stack.walked.fresh is False
    assert set(stack.walked.before.kustomizations) == {FLUX, ("flux-system", "cilium")}
    assert set(stack.walked.after.kustomizations) == {FLUX, ("flux-system", "cilium"), ("flux-system", "plex")}
    assert stack.walked.after.applied_by[ObjectId("", "ConfigMap", "plex", "plex-config")] == [("flux-system", "plex")]


def test_the_walk_starts_at_the_graphs_bootstrap_and_follows_only_its_git_repository(check):
    flux_graph = graph(bootstrap={"name": "flux-system", "namespace": "flux-system", "gitRepository": "other",
                                  "path": "./clusters/dev"})
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m")
    plex["spec"]["sourceRef"]["name"] = "other"
    stack = check(flux_graph=flux_graph, files=exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex)}))
    assert stack.walked.after.kustomizations[("flux-system", "plex")].status == "other-source"


def test_the_bootstrap_objects_own_source_is_the_repository_whatever_the_stack_file_says(check):
    # The stack file names another GitRepository; the bootstrap object (gotk-sync.yaml) reads flux-system, so every
    # Kustomization of that source reads this repository and is followed, as Flux does.
    flux_graph = graph(bootstrap={"name": "flux-system", "namespace": "flux-system", "gitRepository": "gitops",
                                  "path": "./clusters/dev"})
    after = check(flux_graph=flux_graph).walked.after
    assert after.kustomizations[("flux-system", "cilium")].status == "built"
    assert after.kustomizations[("flux-system", "plex")].status == "built"
    renamed = graph(bootstrap={"name": "root", "namespace": "flux-system", "gitRepository": "flux-system",
                               "path": "./clusters/dev"})
    assert check(flux_graph=renamed).walked.after.bootstrap == ("flux-system", "root")


# --- 1. every exported object applied exactly once, by its own Kustomization ---------------------------------------

def test_an_entry_folder_the_bootstraps_kustomization_does_not_list_names_the_entry_to_add(check):
    repo = {**repository(), "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml")}
    assert check(repo=repo).problems == [
        "clusters/dev/kustomization.yaml: resources: lacks 'gpu-platform', so nothing applies the object the "
        "export writes to clusters/dev/gpu-platform/ (e.g. Kustomization flux-system/plex); hint: add "
        "`- gpu-platform` to its resources"]


def test_an_unlisted_folder_counts_every_object_the_export_writes_below_it(check):
    repo = {**repository(), "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml")}
    files = exported(**{"clusters/dev/gpu-platform/kustomization.yaml": resources("plex.yaml", "more.yaml"),
                        "clusters/dev/gpu-platform/more.yaml": dump(cm("a", "plex"), cm("b", "plex"))})
    (line,) = check(repo=repo, files=files).problems
    assert "so nothing applies the 3 objects the export writes to clusters/dev/gpu-platform/ " in line


def test_an_entry_folder_outside_the_bootstrap_path_is_applied_by_nothing(check):
    files = {rel.replace("clusters/dev/gpu-platform", "elsewhere/gpu-platform"): data
             for rel, data in exported().items()}
    assert check(files=files).problems == [
        "elsewhere/gpu-platform: Kustomization flux-system/plex: no Flux Kustomization applies it; Flux's walk "
        "starts at ./clusters/dev (flux-system/flux-system); hint: set gitops.entryDir to a folder inside the "
        "bootstrap path"]


def test_a_folder_reached_by_a_generated_build_too_is_refused_naming_the_kustomization_to_stop(check):
    repo = {**repository(), "clusters/dev/cilium.yaml": dump(ks("cilium", "./components/dev", **EVERY_KS, wait=True))}
    assert check(repo=repo).problems == [
        "clusters/dev/cilium.yaml: flux-system/cilium applies ConfigMap plex/plex-config (written to "
        "components/dev/plex/cm.yaml), which flux-system/plex (path "
        "./components/dev/plex) applies too; two Kustomizations applying one object fight over it and each prunes "
        "it when the other changes; hint: stop flux-system/cilium from reaching components/dev/plex/"]


def test_a_folder_listed_as_an_entry_elsewhere_too_is_refused_naming_the_entry_to_remove(check):
    repo = {**repository(),
            "kubernetes/dev/cilium/kustomization.yaml": resources("cm.yaml", "../../../components/dev/plex")}
    files = exported(**{"components/dev/plex/kustomization.yaml": resources("cm.yaml", "more.yaml"),
                        "components/dev/plex/more.yaml": dump(cm("more", "plex"))})
    assert check(repo=repo, files=files).problems == [
        "kubernetes/dev/cilium/kustomization.yaml: resources: `../../../components/dev/plex`: flux-system/cilium "
        "applies the 2 objects of components/dev/plex/ (e.g. ConfigMap plex/plex-config, written to "
        "components/dev/plex/cm.yaml), which flux-system/plex (path ./components/dev/plex) applies too; two "
        "Kustomizations applying one object fight over it and each prunes it when the other changes; hint: remove "
        "`../../../components/dev/plex` from its resources"]


def test_a_folder_applied_twice_by_others_than_its_own_names_every_extra_applier(check):
    repo = {**repository(),
            "clusters/dev/cilium.yaml": dump(ks("cilium", "./components/dev", **EVERY_KS, wait=True)),
            "clusters/dev/apps.yaml": dump(ks("apps", "./components", **EVERY_KS, wait=True))}
    flux_graph = graph(components={})  # no component owns the folder: every applier but the first is extra
    assert check(repo=repo, flux_graph=flux_graph).problems == [
        "clusters/dev/cilium.yaml: flux-system/cilium applies ConfigMap plex/plex-config (written to "
        "components/dev/plex/cm.yaml), which flux-system/apps (path ./components) and "
        "flux-system/plex (path ./components/dev/plex) apply too; two Kustomizations applying one object fight over it "
        "and each prunes it when the other changes; hint: stop flux-system/cilium from reaching components/dev/plex/",
        "clusters/dev/gpu-platform/plex.yaml: flux-system/plex applies ConfigMap plex/plex-config (written to "
        "components/dev/plex/cm.yaml), which flux-system/apps (path "
        "./components) and flux-system/cilium (path ./components/dev) apply too; two Kustomizations applying one "
        "object fight over it and each prunes it when the other changes; hint: stop flux-system/plex from reaching "
        "components/dev/plex/"]


def test_a_component_folder_applied_by_another_kustomization_only_names_the_folder_to_remove(check):
    flux_graph = graph(kustomizations=[{"name": "cilium", "namespace": "flux-system", "declared": False},
                                       {"name": "plex", "namespace": "flux-system", "declared": False}])
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./components/dev", **EVERY_KS, wait=True))}
    files = {rel: data for rel, data in exported().items() if "gpu-platform" not in rel}
    assert check(repo=repo, files=files, flux_graph=flux_graph).problems == [
        "clusters/dev/apps.yaml: flux-system/apps (path ./components/dev) applies ConfigMap plex/plex-config "
        "(written to components/dev/plex/cm.yaml), which only its own Kustomization flux-system/plex should apply; "
        "hint: stop flux-system/apps from reaching components/dev/plex/",
        "Pulumi.dev.yaml: gpu-platform:flux.tiers[1]: flux-system/plex: the stack says the repository declares this "
        "Kustomization (declaredBy: repository) but Flux's walk does not reach it; hint: fix its name or namespace "
        "there, or declare it in the repository"]


def test_the_plugins_folder_belongs_to_the_plugins_kustomization(check):
    files = exported(**{"components/dev/intel-gpu-plugin/kustomization.yaml": resources("cm.yaml"),
                        "components/dev/intel-gpu-plugin/cm.yaml": dump(cm("plugin", "intel-gpu-plugin"))})
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./components/dev/intel-gpu-plugin", **EVERY_KS))}
    assert check(repo=repo, files=files).problems == [
        "clusters/dev/apps.yaml: flux-system/apps (path ./components/dev/intel-gpu-plugin) applies ConfigMap "
        "intel-gpu-plugin/plugin (written to components/dev/intel-gpu-plugin/cm.yaml), which only its own "
        "Kustomization flux-system/intel-gpu-plugin should apply; hint: stop flux-system/apps from reaching "
        "components/dev/intel-gpu-plugin/"]


def test_objects_of_a_folder_another_kustomization_applies_are_counted_in_one_line_at_its_file(check):
    files = exported(**{"components/dev/intel-gpu-plugin/kustomization.yaml": resources("cm.yaml", "more.yaml"),
                        "components/dev/intel-gpu-plugin/cm.yaml": dump(cm("plugin", "intel-gpu-plugin")),
                        "components/dev/intel-gpu-plugin/more.yaml": dump(cm("more", "intel-gpu-plugin"))})
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./components/dev/intel-gpu-plugin", **EVERY_KS))}
    assert check(repo=repo, files=files).problems == [
        "clusters/dev/apps.yaml: flux-system/apps (path ./components/dev/intel-gpu-plugin) applies the 2 objects of "
        "components/dev/intel-gpu-plugin/ (e.g. ConfigMap intel-gpu-plugin/plugin, written to "
        "components/dev/intel-gpu-plugin/cm.yaml), which only its own Kustomization flux-system/intel-gpu-plugin "
        "should apply; hint: stop flux-system/apps from reaching components/dev/intel-gpu-plugin/"]


# --- 2. nothing the repository applied before is dropped -----------------------------------------------------------

def test_an_export_that_writes_the_bootstrap_folders_kustomization_would_prune_the_repositorys_objects(check):
    files = exported(**{"clusters/dev/kustomization.yaml": resources("gpu-platform")})
    problems = check(files=files).problems
    assert problems[:2] == [
        "kubernetes/dev/cilium/: no Kustomization reaches this folder after this export, so ConfigMap "
        "kube-system/cilium-config (from kubernetes/dev/cilium/cm.yaml), applied by flux-system/cilium before this "
        "export, would be applied by no Kustomization after it; with prune: true Flux would delete it from the "
        "cluster; hint: make kubernetes/dev/cilium/ reachable from ./clusters/dev again",
        "clusters/dev/kustomization.yaml: the export writes this file and lists only its own files in it, so the 3 "
        "objects of clusters/dev/cilium.yaml and clusters/dev/flux-system/gotk-sync.yaml (e.g. Kustomization "
        "flux-system/cilium from clusters/dev/cilium.yaml), applied by flux-system/flux-system before this export, "
        "would be applied by no Kustomization after it; with prune: true Flux would delete them from the cluster; "
        "hint: set gitops.entryDir to a folder of its own, such as clusters/dev/gpu-platform, so the export writes no "
        "kustomization file where the repository's files are",
    ]


def test_a_repository_file_left_out_by_the_exports_own_listing_in_its_folder_names_that_listing(check):
    # An earlier export wrote clusters/dev/tiers/kustomization.yaml into a folder that holds a repository file;
    # this export lists nothing there, so the repository's tier and its objects would be pruned.
    repo = {**repository(), **exported(),
            "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml", "gpu-platform", "tiers"),
            "clusters/dev/tiers/kustomization.yaml": resources("apps.yaml"),
            "clusters/dev/tiers/apps.yaml": dump(ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True)),
            "kubernetes/dev/apps/kustomization.yaml": resources("cm.yaml"),
            "kubernetes/dev/apps/cm.yaml": dump(cm("app", "default"))}
    assert check(repo=repo, files=exported(**{"clusters/dev/tiers/kustomization.yaml": resources()})).problems == [
        "kubernetes/dev/apps/: no Kustomization reaches this folder after this export, so ConfigMap default/app (from "
        "kubernetes/dev/apps/cm.yaml), applied by flux-system/apps before this export, would be applied by no "
        "Kustomization after it; with prune: true Flux would delete it from the cluster; hint: make "
        "kubernetes/dev/apps/ reachable from ./clusters/dev again",
        "clusters/dev/tiers/kustomization.yaml: the export writes this file and lists only its own files in it, so "
        "Kustomization flux-system/apps (from clusters/dev/tiers/apps.yaml), applied by flux-system/flux-system before "
        "this export, would be applied by no Kustomization after it; with prune: true Flux would delete it from the "
        "cluster; hint: set gitops.entryDir to a folder of its own, such as clusters/dev/gpu-platform, so the export "
        "writes no kustomization file where the repository's files are"]


def old_export_with_a_tier(**files: bytes) -> dict[str, bytes]:
    """A repository where an earlier export declared the Kustomization `extra` for a repository folder, and the
    repository's `k8s` Kustomization lists only other folders below ./kubernetes."""
    return {**repository(), **exported(),
            "clusters/dev/gpu-platform/kustomization.yaml": resources("plex.yaml", "extra.yaml"),
            "clusters/dev/gpu-platform/extra.yaml": dump(ks("extra", "./kubernetes/dev/extra", **EVERY_KS)),
            "kubernetes/dev/extra/cm.yaml": dump(cm("extra", "default")),
            "clusters/dev/k8s.yaml": dump(ks("k8s", "./kubernetes", **EVERY_KS, wait=True)),
            "kubernetes/kustomization.yaml": resources("dev/other"),
            "kubernetes/dev/other/kustomization.yaml": resources("cm.yaml"),
            "kubernetes/dev/other/cm.yaml": dump(cm("other", "default")), **files}


def test_a_repository_folder_only_a_pruned_kustomization_applied_names_the_listing_that_could_take_it(check):
    old_owned = {"clusters/dev/gpu-platform/kustomization.yaml", "clusters/dev/gpu-platform/extra.yaml"}
    assert check(repo=old_export_with_a_tier(), old_owned=old_owned).problems == [
        "kubernetes/kustomization.yaml: resources: lacks 'dev/extra', so ConfigMap default/extra (from "
        "kubernetes/dev/extra/cm.yaml), applied by flux-system/extra before this export, would be applied by no "
        "Kustomization after it; with prune: true Flux would delete it from the cluster; hint: add `- dev/extra` to "
        "its resources"]


def test_objects_dropped_for_one_missing_entry_are_one_line_at_the_listing_that_lacks_it(check):
    old_owned = {"clusters/dev/gpu-platform/kustomization.yaml", "clusters/dev/gpu-platform/extra.yaml"}
    repo = old_export_with_a_tier(**{"kubernetes/dev/extra/more.yaml": dump(cm("more", "default"))})
    assert check(repo=repo, old_owned=old_owned).problems == [
        "kubernetes/kustomization.yaml: resources: lacks 'dev/extra', so the 2 objects of kubernetes/dev/extra/cm.yaml "
        "and kubernetes/dev/extra/more.yaml (e.g. ConfigMap default/extra from kubernetes/dev/extra/cm.yaml), applied "
        "by flux-system/extra before this export, would be applied by no Kustomization after it; with prune: true "
        "Flux would delete them from the cluster; hint: add `- dev/extra` to its resources"]


def test_objects_of_files_the_last_export_owned_are_the_exports_to_prune(check):
    repo = old_export_with_a_tier(**{"kubernetes/kustomization.yaml": resources("dev/other", "dev/extra"),
                                     "kubernetes/dev/extra/kustomization.yaml": resources("cm.yaml")})
    # kubernetes/dev/extra is applied by k8s after: only the pruned Kustomization object itself is gone
    assert check(repo=repo, old_owned={"clusters/dev/gpu-platform/extra.yaml"}).problems == []
    assert check(repo=repo, old_owned=set()).problems == [
        'Pulumi.dev.yaml: gpu-platform:gitops.entryDir: "clusters/dev/gpu-platform": the export\'s own '
        "clusters/dev/gpu-platform/kustomization.yaml lists only the export's files, so the object "
        "flux-system/flux-system applied from clusters/dev/gpu-platform/extra.yaml before this export (e.g. "
        "Kustomization flux-system/extra from clusters/dev/gpu-platform/extra.yaml) would be applied by no "
        "Kustomization after it; with prune: true Flux would delete it from the cluster; hint: move "
        "clusters/dev/gpu-platform/extra.yaml out of clusters/dev/gpu-platform/, or set gitops.entryDir to a folder of "
        "its own"]


# --- the pieces ----------------------------------------------------------------------------------------------------

def test_the_deciding_file_is_the_nearest_kustomization_below_the_containing_path(tmp_path):
    files = {"a/kustomization.yaml": b"", "a/b/kustomization.yaml": b"", "a/b/c/d/x.yaml": b""}
    view = RepoView(tmp_path, files)
    after = FluxView(bootstrap=FLUX, kustomizations={
        FLUX: WalkedKustomization(FLUX, "", "", None, {}),
        ("f", "a"): WalkedKustomization(("f", "a"), "a", "", FLUX, {}),
        ("f", "gone"): WalkedKustomization(("f", "gone"), "a/b", "", FLUX, {}, status="failed")})
    assert deciding_file(view, after, "a/b/c/d") == ("a/b/kustomization.yaml", "c/d")
    assert deciding_file(view, after, "a/b") == ("a/kustomization.yaml", "b")
    assert deciding_file(view, after, "a") == (None, None)  # the root has no kustomization file in this view
    assert deciding_file(view, after, "z/y") == (None, None)  # the root: no kustomization file
    files["kustomization.yaml"] = b""
    assert deciding_file(RepoView(tmp_path, files), after, "z/y") == ("kustomization.yaml", "z/y")


def test_no_deciding_file_below_a_kustomization_whose_path_is_the_folder_itself(tmp_path):
    view = RepoView(tmp_path, {"a/kustomization.yaml": b""})
    after = FluxView(bootstrap=FLUX, kustomizations={("f", "a"): WalkedKustomization(("f", "a"), "a", "", FLUX, {})})
    assert deciding_file(view, after, "a") == (None, None)
    assert deciding_file(view, after, "a/b") == ("a/kustomization.yaml", "b")


def test_the_graph_is_not_changed_by_the_check(check):
    flux_graph = graph()
    before = copy.deepcopy(flux_graph)
    check(flux_graph=flux_graph)
    assert flux_graph == before


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_no_deciding_file_is_looked_for_above_the_containing_kustomizations_path(tmp_path):
    view = RepoView(tmp_path, {"a/kustomization.yaml": b"", "a/b/c/x.yaml": b""})
    after = FluxView(bootstrap=FLUX, kustomizations={("f", "b"): WalkedKustomization(("f", "b"), "a/b", "", FLUX, {})})
    assert deciding_file(view, after, "a/b/c") == (None, None)


def test_an_entry_that_lists_a_parent_of_the_exported_folder_is_the_entry_to_remove(check):
    repo = {**repository(),
            "kubernetes/dev/cilium/kustomization.yaml": resources("cm.yaml", "../../../components/dev"),
            "components/dev/kustomization.yaml": resources("plex")}
    assert check(repo=repo).problems == [
        "kubernetes/dev/cilium/kustomization.yaml: resources: `../../../components/dev`: flux-system/cilium applies "
        "ConfigMap plex/plex-config (written to components/dev/plex/cm.yaml), which flux-system/plex (path "
        "./components/dev/plex) applies too; two Kustomizations applying one object fight over it and each prunes it "
        "when the other changes; hint: remove `../../../components/dev` from its resources"]


def test_after_an_object_whose_own_kustomization_is_missing_the_next_objects_are_still_checked(check):
    repo = {**repository(), "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml")}
    files = exported(**{"elsewhere/x.yaml": dump(cm("x", "default"))})
    assert [p.split(":")[0] for p in check(repo=repo, files=files).problems] == [
        "clusters/dev/kustomization.yaml", "elsewhere"]


def test_a_folder_applied_by_the_bootstrap_declared_nowhere_says_that_kustomization(check):
    flux_graph = graph(kustomizations=[{"name": "cilium", "namespace": "flux-system", "declared": False},
                                       {"name": "plex", "namespace": "flux-system", "declared": False}])
    repo = {"clusters/dev/kustomization.yaml": resources("../../components/dev/plex"),
            "kubernetes/dev/cilium/cm.yaml": dump(cm("cilium-config", "kube-system"))}
    files = {rel: data for rel, data in exported().items() if "gpu-platform" not in rel}
    problems = check(repo=repo, files=files, flux_graph=flux_graph).problems
    assert problems[0] == (
        "clusters/dev/kustomization.yaml: resources: `../../components/dev/plex`: flux-system/flux-system (path "
        "./clusters/dev) applies ConfigMap plex/plex-config (written to components/dev/plex/cm.yaml), which only its "
        "own Kustomization flux-system/plex should apply; hint: remove `../../components/dev/plex` from its resources")


def test_after_an_object_the_last_export_owned_the_next_dropped_objects_are_still_refused(check):
    repo = old_export_with_a_tier(**{
        "clusters/dev/gpu-platform/kustomization.yaml": resources("plex.yaml", "extra.yaml", "old.yaml"),
        "clusters/dev/gpu-platform/old.yaml": dump(cm("aaa", "default"))})
    old_owned = {"clusters/dev/gpu-platform/extra.yaml", "clusters/dev/gpu-platform/old.yaml"}
    problems = check(repo=repo, old_owned=old_owned).problems
    assert problems == [
        "kubernetes/kustomization.yaml: resources: lacks 'dev/extra', so ConfigMap default/extra (from "
        "kubernetes/dev/extra/cm.yaml), applied by flux-system/extra before this export, would be applied by no "
        "Kustomization after it; with prune: true Flux would delete it from the cluster; hint: add `- dev/extra` to "
        "its resources"]


def test_a_dropped_object_from_a_yml_file_names_its_folder(check):
    repo = {rel: data for rel, data in old_export_with_a_tier().items() if rel != "kubernetes/dev/extra/cm.yaml"}
    repo["kubernetes/dev/extra/cm.yml"] = dump(cm("extra", "default"))
    assert check(repo=repo, old_owned={"clusters/dev/gpu-platform/extra.yaml"}).problems == [
        "kubernetes/kustomization.yaml: resources: lacks 'dev/extra', so ConfigMap default/extra (from "
        "kubernetes/dev/extra/cm.yml), applied by flux-system/extra before this export, would be applied by no "
        "Kustomization after it; with prune: true Flux would delete it from the cluster; hint: add `- dev/extra` to "
        "its resources"]


# --- 2, again: an object a generator made has its folder for origin ------------------------------------------------

def test_a_dropped_object_a_generator_made_names_the_entry_for_its_own_folder(check):
    generated = dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                      "generatorOptions": {"disableNameSuffixHash": True},
                      "configMapGenerator": [{"name": "extra", "namespace": "default", "literals": ["a=b"]}]})
    repo = {rel: data for rel, data in old_export_with_a_tier().items() if rel != "kubernetes/dev/extra/cm.yaml"}
    repo["kubernetes/dev/extra/kustomization.yaml"] = generated
    assert check(repo=repo, old_owned={"clusters/dev/gpu-platform/extra.yaml"}).problems == [
        "kubernetes/kustomization.yaml: resources: lacks 'dev/extra', so ConfigMap default/extra (from "
        "kubernetes/dev/extra), applied by flux-system/extra before this export, would be applied by no "
        "Kustomization after it; with prune: true Flux would delete it from the cluster; hint: add `- dev/extra` to "
        "its resources"]


@pytest.mark.parametrize(("doc", "what"), [
    ({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
      "metadata": {"name": "gpu", "namespace": "kube-system"},
      "spec": {"chart": {"spec": {"chart": "intel-device-plugins-gpu"}}}}, "the Helm chart intel-device-plugins-gpu"),
    ({"apiVersion": "deviceplugin.intel.com/v1", "kind": "GpuDevicePlugin", "metadata": {"name": "gpu"},
      "spec": {"sharedDevNum": 1}}, "the operator's GpuDevicePlugin"),
    ({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "gpu", "namespace": "kube-system"},
      "spec": {"template": {"spec": {"containers": [{"name": "p", "image": "intel/intel-gpu-plugin:0.30.0"}]}}}},
     "the image intel/intel-gpu-plugin:0.30.0"),
], ids=["chart", "operator", "daemonset"])
def test_a_second_intel_gpu_plugin_the_repository_installs_is_refused_naming_its_file(check, doc, what):
    repo = {**repository(), "kubernetes/dev/cilium/gpu.yaml": dump(doc)}
    namespace = doc["metadata"].get("namespace")
    shown = f"{doc['kind']} {namespace + '/' if namespace else ''}{doc['metadata']['name']}"
    assert check(repo=repo).problems == [
        f"kubernetes/dev/cilium/gpu.yaml: {shown}: installs a second Intel GPU plugin ({what}) beside the export's "
        "intel-gpu-plugin DaemonSet; two plugins on one node each advertise gpu.intel.com/i915, so every device is "
        "counted twice; hint: remove one of them"]


# --- a plugin beside the DRA driver, the namespace of an exported Kustomization, an exported object a hand-written ----
# --- file holds too -------------------------------------------------------------------------------------------------

DAEMONSET_PLUGIN = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "gpu", "namespace": "kube-system"},
    "spec": {"template": {"spec": {"containers": [{"name": "p", "image": "intel/intel-gpu-plugin:0.30"}]}}}}


def test_a_second_plugin_line_says_what_two_plugins_do_and_which_to_remove(check):
    (line,) = check(repo={**repository(), "kubernetes/dev/cilium/gpu.yaml": dump(DAEMONSET_PLUGIN)}).problems
    assert line == (
        "kubernetes/dev/cilium/gpu.yaml: DaemonSet kube-system/gpu: installs a second Intel GPU plugin (the image "
        "intel/intel-gpu-plugin:0.30) beside the export's intel-gpu-plugin DaemonSet; two plugins on one node each "
        "advertise gpu.intel.com/i915, so every device is counted twice; hint: remove one of them")


def test_once_the_dra_route_removed_the_plugin_any_plugin_left_is_refused_beside_the_driver(check):
    dra = graph(plugin=None, pluginFolder="", driver=["flux-system", "intel-gpu-resource-driver"],
                driverFolder="components/dev/intel-gpu-resource-driver")
    (line,) = check(repo={**repository(), "kubernetes/dev/cilium/gpu.yaml": dump(DAEMONSET_PLUGIN)},
                    flux_graph=dra).problems
    assert line == (
        "kubernetes/dev/cilium/gpu.yaml: DaemonSet kube-system/gpu: installs an Intel GPU device plugin (the image "
        "intel/intel-gpu-plugin:0.30) beside the DRA driver after gpu.dra.stage plugin-removed: both would hand out "
        "the same iGPU, neither counting the other's use; hint: remove it from the repository in the same pull request")
    beside = graph(driver=["flux-system", "intel-gpu-resource-driver"],
                   driverFolder="components/dev/intel-gpu-resource-driver")
    (first_step,) = check(repo={**repository(), "kubernetes/dev/cilium/gpu.yaml": dump(DAEMONSET_PLUGIN)},
                          flux_graph=beside).problems
    assert "installs a second Intel GPU plugin" in first_step  # the driver beside the export's plugin: step 1


def release_by_chart_ref(name: str, namespace: str, kind: str, source_spec: dict[str, Any]) -> bytes:
    """A HelmRelease whose chartRef names a source object beside it, as the home-operations repositories write them."""
    return dump({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                 "metadata": {"name": name, "namespace": namespace},
                 "spec": {"chartRef": {"kind": kind, "name": name}, "interval": "1h"}},
                {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": kind,
                 "metadata": {"name": name, "namespace": namespace}, "spec": source_spec})


PLUGIN_OCI = {"url": "oci://ghcr.io/example/charts/intel-device-plugins-gpu", "ref": {"tag": "0.37.0"}}
DRIVER_OCI = {"url": "oci://ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver-chart",
              "ref": {"tag": "0.11.0"}}
DRIVER = ["flux-system", "intel-gpu-resource-driver"]


@pytest.mark.parametrize(("kind", "source"), [
    ("OCIRepository", PLUGIN_OCI),
    ("HelmChart", {"chart": "intel-device-plugins-gpu", "sourceRef": {"kind": "HelmRepository", "name": "intel"}}),
], ids=["oci-repository", "helm-chart"])
def test_a_plugin_release_by_chart_ref_is_a_second_plugin_named_with_its_source(check, kind, source):
    repo = {**repository(), "kubernetes/dev/cilium/gpu.yaml": release_by_chart_ref("gpu", "tools", kind, source)}
    assert check(repo=repo).problems == [
        "kubernetes/dev/cilium/gpu.yaml: HelmRelease tools/gpu: installs a second Intel GPU plugin (the Helm chart "
        f"intel-device-plugins-gpu, by chartRef {kind} tools/gpu) beside the export's intel-gpu-plugin DaemonSet; two "
        "plugins on one node each advertise gpu.intel.com/i915, so every device is counted twice; hint: remove one of "
        "them"]


def test_a_release_by_chart_ref_to_a_source_nothing_applies_is_not_judged(check):
    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": "gpu", "namespace": "tools"},
               "spec": {"chartRef": {"kind": "OCIRepository", "name": "elsewhere", "namespace": "flux-system"}}}
    assert check(repo={**repository(), "kubernetes/dev/cilium/gpu.yaml": dump(release)}).problems == []


def test_the_repositorys_dra_driver_by_chart_ref_beside_the_exports_plugin_is_refused_naming_its_file(check):
    repo = {**repository(), "kubernetes/dev/cilium/driver.yaml": release_by_chart_ref(
        "intel-gpu-resource-driver", "kube-system", "OCIRepository", DRIVER_OCI)}
    assert check(repo=repo).problems == [
        "kubernetes/dev/cilium/driver.yaml: HelmRelease kube-system/intel-gpu-resource-driver: installs Intel's GPU "
        "DRA driver (the Helm chart intel-gpu-resource-driver-chart, by chartRef OCIRepository "
        "kube-system/intel-gpu-resource-driver) beside the export's intel-gpu-plugin DaemonSet: both would hand out "
        "the same iGPU, neither counting the other's use; hint: remove one of them"]


# A DRA driver the repository runs by its image (not by a chart).
DRIVER_DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "drv", "namespace": "dra"},
                    "spec": {"template": {"spec": {"containers": [{"name": "d", "image": (
                        "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.10.0")}]}}}}


def test_the_repositorys_dra_driver_beside_the_exports_driver_is_a_second_driver(check):
    daemonset = DRIVER_DAEMONSET
    dra = graph(plugin=None, pluginFolder="", driver=DRIVER, driverFolder="components/dev/intel-gpu-resource-driver")
    (line,) = check(repo={**repository(), "kubernetes/dev/cilium/drv.yaml": dump(daemonset)}, flux_graph=dra).problems
    assert line == (
        "kubernetes/dev/cilium/drv.yaml: DaemonSet dra/drv: installs a second Intel GPU DRA driver (the image "
        "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.10.0) beside the export's "
        "intel-gpu-resource-driver; two drivers publish every iGPU twice and own one DeviceClass gpu.intel.com; hint: "
        "remove one of them")


# --- gpu.dra.deliveredBy: repository: the driver the repository installs, adopted (issue 53) --------------------------

ADOPTED = ["kube-system", "intel-gpu-resource-driver"]
PLEX_ON_ADOPTED = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(ks(
    "plex", "./components/dev/plex", **EVERY_KS, wait=True, timeout="10m",
    dependsOn=[{"name": "cilium"}, {"name": "intel-gpu-resource-driver", "namespace": "kube-system"}]))})


def adopting(**changes: Any) -> dict[str, Any]:
    """The fluxGraph of a stack adopting kube-system/intel-gpu-resource-driver, plex claiming a device (step 3)."""
    return graph(**{"adoptedDriver": ADOPTED, "driverDependents": [["flux-system", "plex"]], **changes})


def with_driver(name: str = "intel-gpu-resource-driver", *docs: dict[str, Any]) -> dict[str, bytes]:
    """The repository installing the driver as onedr0p/home-ops does: its Kustomization kube-system/<name> (no wait,
    a health check on the release) applying a HelmRelease of Intel's chart by chartRef, or `docs` instead."""
    body = dump(*docs) if docs else release_by_chart_ref("intel-gpu-resource-driver", "kube-system", "OCIRepository",
                                                         DRIVER_OCI)
    return {**repository(),
            "clusters/dev/intel-gpu-resource-driver.yaml": dump(ks(
                name, "./kubernetes/dev/intel-gpu-resource-driver", "kube-system", **EVERY_KS, healthChecks=[
                    {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                     "name": "intel-gpu-resource-driver", "namespace": "kube-system"}])),
            "kubernetes/dev/intel-gpu-resource-driver/driver.yaml": body}


@pytest.mark.parametrize("flux_graph", [adopting(), adopting(plugin=None, pluginFolder="")],
                         ids=["beside-the-export-s-plugin", "after-plugin-removed"])
def test_the_adopted_driver_found_in_flux_s_walk_is_no_second_driver_and_the_export_checks_clean(check, flux_graph):
    stack = check(repo=with_driver(), files=PLEX_ON_ADOPTED, flux_graph=flux_graph)
    assert stack.problems == []
    assert ("kube-system", "intel-gpu-resource-driver") in stack.walked.after.kustomizations


def test_an_adopted_kustomization_flux_s_walk_does_not_apply_is_one_line_at_the_stack_key_naming_the_closest(check):
    typo = adopting(adoptedDriver=["kube-system", "intel-gpu-resource-drivr"])
    plex = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(ks(
        "plex", "./components/dev/plex", **EVERY_KS, wait=True, timeout="10m",
        dependsOn=[{"name": "cilium"}, {"name": "intel-gpu-resource-drivr", "namespace": "kube-system"}]))})
    assert check(repo=with_driver(), files=plex, flux_graph=typo).problems == [
        "Pulumi.dev.yaml: gpu-platform:gpu.dra.kustomization: kube-system/intel-gpu-resource-drivr: Flux's walk from "
        "./clusters/dev applies no such Kustomization, so nothing would install the DRA driver the stack adopts, and "
        "flux-system/plex would wait for it forever; hint: did you mean kube-system/intel-gpu-resource-driver, which "
        "applies the Helm chart intel-gpu-resource-driver-chart, by chartRef OCIRepository "
        "kube-system/intel-gpu-resource-driver?"]


def test_an_adopted_kustomization_missing_where_no_name_is_close_lists_those_the_walk_applies(check):
    # step 1: nothing claims a device yet, so nothing waits for it
    assert check(repo=repository(), files=exported(), flux_graph=adopting(driverDependents=[])).problems == [
        "Pulumi.dev.yaml: gpu-platform:gpu.dra.kustomization: kube-system/intel-gpu-resource-driver: Flux's walk from "
        "./clusters/dev applies no such Kustomization, so nothing would install the DRA driver the stack adopts; hint: "
        "use one of flux-system/cilium"]  # the repository's: none of the export's own is offered


def test_an_adopted_kustomization_that_applies_no_driver_is_one_line_at_the_stack_key(check):
    repo = with_driver("intel-gpu-resource-driver", cm("driver-values", "kube-system"))
    assert check(repo=repo, files=PLEX_ON_ADOPTED, flux_graph=adopting()).problems == [
        "Pulumi.dev.yaml: gpu-platform:gpu.dra.kustomization: kube-system/intel-gpu-resource-driver: applies no Intel "
        "GPU DRA driver (it applies 1 object from ./kubernetes/dev/intel-gpu-resource-driver, e.g. ConfigMap "
        "kube-system/driver-values), so nothing would publish the ResourceSlices the apps' claims are allocated from; "
        "hint: name the Kustomization that applies the driver (a HelmRelease of Intel's intel-gpu-resource-driver "
        "chart, or a DaemonSet running its image), or set gpu.dra.deliveredBy: export to have the export write the "
        "driver"]


def test_another_driver_beside_the_adopted_one_is_a_second_driver_named_at_its_file(check):
    daemonset = DRIVER_DAEMONSET
    repo = {**with_driver(), "kubernetes/dev/cilium/drv.yaml": dump(daemonset)}
    assert check(repo=repo, files=PLEX_ON_ADOPTED, flux_graph=adopting()).problems == [
        "kubernetes/dev/cilium/drv.yaml: DaemonSet dra/drv: installs a second Intel GPU DRA driver (the image "
        "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.10.0) beside the "
        "repository's kube-system/intel-gpu-resource-driver that the stack adopts (gpu.dra.kustomization); two drivers "
        "publish every iGPU twice and own one DeviceClass gpu.intel.com; hint: remove one of them"]


def test_a_plugin_by_chart_ref_beside_the_adopted_driver_after_plugin_removed_is_refused_naming_its_file(check):
    repo = {**with_driver(), "kubernetes/dev/cilium/gpu.yaml": release_by_chart_ref(
        "gpu", "tools", "OCIRepository", PLUGIN_OCI)}
    assert check(repo=repo, files=PLEX_ON_ADOPTED, flux_graph=adopting(plugin=None, pluginFolder="")).problems == [
        "kubernetes/dev/cilium/gpu.yaml: HelmRelease tools/gpu: installs an Intel GPU device plugin (the Helm chart "
        "intel-device-plugins-gpu, by chartRef OCIRepository tools/gpu) beside the DRA driver of the repository's "
        "kube-system/intel-gpu-resource-driver that the stack adopts, after gpu.dra.stage plugin-removed: both would "
        "hand out the same iGPU, neither counting the other's use; hint: remove it from the repository in the same "
        "pull request"]


def test_only_an_app_that_claims_a_device_may_depend_on_the_adopted_driver(check):
    repo = {**with_driver(), "kubernetes/dev/tools/cm.yaml": dump(cm("tools", "tools")),
            "clusters/dev/tools.yaml": dump(ks("tools", "./kubernetes/dev/tools", **EVERY_KS, wait=True, dependsOn=[
                {"name": "intel-gpu-resource-driver", "namespace": "kube-system"}]))}
    assert check(repo=repo, files=PLEX_ON_ADOPTED, flux_graph=adopting()).problems == [
        "clusters/dev/tools.yaml: tools.spec.dependsOn: 'kube-system/intel-gpu-resource-driver': nothing may "
        "depend on the DRA driver but the Kustomization of an app that claims a device; a failed driver rollout would "
        "stall that tier; hint: remove the dependency"]


@pytest.mark.parametrize("doc", [
    {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"chart": {"spec": {"chart": "intel-device-plugins-sgx"}}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"template": {"spec": {"containers": [{"name": "x", "image": "nginx:1.27"}]}}}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"template": {"spec": {"containers": "intel/intel-gpu-plugin"}}}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"template": {"spec": {}}}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"},
     "data": {"image": "intel/intel-gpu-plugin"}},
], ids=["other-chart", "other-image", "containers-not-a-list", "no-containers", "not-a-workload"])
def test_what_installs_no_intel_gpu_plugin_is_not_a_second_plugin(check, doc):
    assert check(repo={**repository(), "kubernetes/dev/cilium/x.yaml": dump(doc)}).problems == []


def test_the_export_s_own_plugin_daemonset_is_not_a_second_plugin(check):
    own = {**DAEMONSET_PLUGIN, "metadata": {"name": "intel-gpu-plugin", "namespace": "plex"}}
    files = exported(**{"components/dev/plex/ds.yaml": dump(own),
                        "components/dev/plex/kustomization.yaml": resources("cm.yaml", "ds.yaml")})
    assert check(files=files).problems == []


def exported_in(namespace: str) -> dict[str, Any]:
    """The export's files and graph with Plex's Kustomization in `namespace`."""
    cilium = {"name": "cilium", "namespace": "flux-system"}
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(ks(
        "plex", "./components/dev/plex", namespace, **EVERY_KS, dependsOn=[cilium], wait=True, timeout="10m"))})
    flux_graph = graph(kustomizations=[{"name": "cilium", "namespace": "flux-system", "declared": False},
                                       {"name": "plex", "namespace": namespace, "declared": True}],
                       components={"plex": {"kustomization": [namespace, "plex"], "folder": "components/dev/plex",
                                            "tier": None}})
    return {"files": files, "flux_graph": flux_graph}


def test_an_exported_kustomization_in_a_namespace_nothing_creates_is_refused_naming_both_fixes(check):
    (line,) = check(**exported_in("apps")).problems
    assert line == (
        "clusters/dev/gpu-platform/plex.yaml: Kustomization apps/plex: its namespace 'apps' is created by nothing "
        "Flux's walk applies; the API server refuses the object and nothing the export delivers would reconcile; "
        "hint: set flux.namespace to Flux's own namespace (flux-system), or add a Namespace apps to the repository")


def test_a_namespace_the_repository_applies_or_the_bootstrap_s_own_is_created(check):
    apps = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    assert check(repo={**repository(), "kubernetes/dev/cilium/ns.yaml": dump(apps)},
                 **exported_in("apps")).problems == []
    assert check(**exported_in("flux-system")).problems == []


def test_in_a_fresh_repository_no_namespace_is_looked_for(check):
    assert check(repo={}, **exported_in("apps")).problems == []


def test_an_object_the_export_writes_that_a_hand_written_file_applies_too_is_refused_at_that_file(check):
    repo = {**repository(), "kubernetes/dev/cilium/plex.yaml": dump(cm("plex-config", "plex"))}
    (line,) = check(repo=repo).problems
    assert line == (
        "kubernetes/dev/cilium/plex.yaml: ConfigMap plex/plex-config: applied by flux-system/cilium "
        "(path ./kubernetes/dev/cilium) from this file, and written by the export to components/dev/plex/cm.yaml for "
        "flux-system/plex; two Kustomizations applying one object fight over it and each prunes it when the other "
        "changes; hint: take ConfigMap plex-config out of kubernetes/dev/cilium/plex.yaml, or, for an app the "
        "repository delivers, set its deliveredBy: repository")


@pytest.mark.parametrize(("kind", "api"), [("DeviceClass", "resource.k8s.io/v1"),
                                           ("ValidatingAdmissionPolicy", "admissionregistration.k8s.io/v1")])
def test_a_cluster_scoped_object_the_export_writes_that_the_repository_applies_too_is_refused_at_that_file(
        check, kind, api):
    # One name, one owner: two Flux inventories holding one cluster-scoped object would each prune it on a rollback
    obj = {"apiVersion": api, "kind": kind, "metadata": {"name": "gpu.intel.com"}}
    files = exported(**{"components/dev/plex/kustomization.yaml": resources("cm.yaml", "owned.yaml"),
                        "components/dev/plex/owned.yaml": dump(obj)})
    (line,) = check(repo={**repository(), "kubernetes/dev/cilium/owned.yaml": dump(obj)}, files=files).problems
    assert line == (
        f"kubernetes/dev/cilium/owned.yaml: {kind} gpu.intel.com: applied by flux-system/cilium (path "
        "./kubernetes/dev/cilium) from this file, and written by the export to components/dev/plex/owned.yaml for "
        "flux-system/plex; two Kustomizations applying one object fight over it and each prunes it when the other "
        f"changes; hint: take {kind} gpu.intel.com out of kubernetes/dev/cilium/owned.yaml")


def test_a_kustomization_without_spec_path_applying_the_export_again_is_one_line_naming_its_file(check):
    """Its build of the whole repository succeeds here: every folder of the export it reaches, in one line."""
    nopath = ks("nopath", "unused", **EVERY_KS)
    del nopath["spec"]["path"]
    assert check(repo={**repository(), "clusters/dev/nopath.yaml": dump(nopath)}).problems == [
        "clusters/dev/nopath.yaml: spec.path: not set, so Flux builds the whole repository (./) for "
        "flux-system/nopath, which applies the 2 objects of clusters/dev/gpu-platform/ and components/dev/plex/ (e.g. "
        "Kustomization flux-system/plex, written to clusters/dev/gpu-platform/plex.yaml) that their own "
        "Kustomizations apply too; two Kustomizations applying one object fight over it and each prunes it when the "
        "other changes; hint: set spec.path to the folder this Kustomization is meant to apply"]


# --- an exported app's objects reached only through the repository's own copy of the app -------------------------

def deployment(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [{"name": name, "image": "docker.io/plexinc/pms-docker:1"}]}}}}


def repository_holding(*docs: dict[str, Any]) -> dict[str, Any]:
    """The repository applying its own `docs` from apps/plex.yaml (Kustomization `apps`), and the export writing Plex's
    ConfigMap and Deployment with Plex's Kustomization left to the repository (declared: False), which never has it."""
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./apps", **EVERY_KS, wait=True)),
            "apps/plex.yaml": dump(*docs)}
    files = {**{rel: data for rel, data in exported().items() if "gpu-platform" not in rel},
             "components/dev/plex/kustomization.yaml": resources("cm.yaml", "deploy.yaml"),
             "components/dev/plex/deploy.yaml": dump(deployment("plex", "plex"))}
    flux_graph = graph(kustomizations=[{"name": "cilium", "namespace": "flux-system", "declared": False},
                                       {"name": "plex", "namespace": "flux-system", "declared": False}])
    return {"repo": repo, "files": files, "flux_graph": flux_graph}


NOT_REACHED = (
    "Pulumi.dev.yaml: gpu-platform:flux.tiers[1]: flux-system/plex: the stack says the repository declares this "
    "Kustomization (declaredBy: repository) but Flux's walk does not reach it; hint: fix its name or namespace there, "
    "or declare it in the repository")


def test_the_repositorys_own_app_applied_instead_of_the_exported_one_leads_with_the_apps_deliveredby_key(check):
    from model.outputs import GpuAppOutput

    stack = check(**repository_holding(deployment("plex", "plex"), cm("plex-config", "plex")),
                  gpu_apps={"plex": GpuAppOutput("hostpath", "x")}, app_keys={"plex": "apps[0]"})
    assert stack.problems == [
        "Pulumi.dev.yaml: gpu-platform:apps[0].deliveredBy: export (the default), but flux-system/apps (path ./apps) "
        "already applies the repository's own plex (ConfigMap plex/plex-config and 1 more from apps/plex.yaml) that "
        "the export writes to components/dev/plex/ for flux-system/plex; hint: set apps[0].deliveredBy: repository "
        "(the export then writes no Plex and holds the repository's to the GPU gate), or take plex out of "
        "clusters/dev/apps.yaml", NOT_REACHED]


def test_the_repository_holding_only_an_apps_configmap_is_a_stray_object_not_the_app(check):
    from model.outputs import GpuAppOutput

    stack = check(**repository_holding(cm("plex-config", "plex")), gpu_apps={"plex": GpuAppOutput("hostpath", "x")})
    assert stack.problems == [
        "clusters/dev/apps.yaml: flux-system/apps (path ./apps) applies ConfigMap plex/plex-config (written to "
        "components/dev/plex/cm.yaml), which only its own Kustomization flux-system/plex should apply; hint: stop "
        "flux-system/apps from reaching components/dev/plex/",
        "components/dev/plex: Deployment plex/plex: no Flux Kustomization applies it; Flux's walk starts at "
        "./clusters/dev (flux-system/flux-system); hint: set gitops.entryDir to a folder inside the bootstrap path",
        NOT_REACHED]


def test_an_app_the_repository_already_delivers_is_not_named_by_its_key(check):
    from model.outputs import GpuAppOutput

    apps = {"plex": GpuAppOutput("hostpath", "x", delivered_by="repository")}
    (line, _, not_reached) = check(**repository_holding(deployment("plex", "plex")), gpu_apps=apps).problems
    assert line == (
        "clusters/dev/apps.yaml: flux-system/apps (path ./apps) applies Deployment plex/plex (written to "
        "components/dev/plex/deploy.yaml), which only its own Kustomization flux-system/plex should apply; hint: stop "
        "flux-system/apps from reaching components/dev/plex/")
    assert not_reached == NOT_REACHED


def test_the_dra_drivers_folder_belongs_to_the_drivers_kustomization(check):
    driver = "intel-gpu-resource-driver"
    flux_graph = graph(plugin=None, pluginFolder="", driver=["flux-system", driver],
                       driverFolder=f"components/dev/{driver}")
    flux_graph["kustomizations"].append({"name": driver, "namespace": "flux-system", "declared": True})
    files = exported(**{
        "clusters/dev/gpu-platform/kustomization.yaml": resources(f"{driver}.yaml", "plex.yaml"),
        f"clusters/dev/gpu-platform/{driver}.yaml": dump(ks(driver, f"./components/dev/{driver}", **EVERY_KS,
                                                           dependsOn=[{"name": "cilium"}], wait=True, timeout="10m")),
        f"components/dev/{driver}/kustomization.yaml": resources("cm.yaml"),
        f"components/dev/{driver}/cm.yaml": dump(cm("driver", driver))})
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", f"./components/dev/{driver}", **EVERY_KS))}
    assert check(repo=repo, files=files, flux_graph=flux_graph).problems == [
        f"clusters/dev/apps.yaml: flux-system/apps applies ConfigMap {driver}/driver (written to "
        f"components/dev/{driver}/cm.yaml), which flux-system/{driver} (path "
        f"./components/dev/{driver}) applies too; two Kustomizations applying one object fight over it and each prunes "
        f"it when the other changes; hint: stop flux-system/apps from reaching components/dev/{driver}/"]


def test_a_folder_behind_a_link_is_left_to_outs_guard_and_the_folders_after_it_are_still_judged(tmp_path):
    (tmp_path / "repo/components/dev").mkdir(parents=True)
    (tmp_path / "repo/elsewhere").mkdir()
    (tmp_path / "repo/components/dev/plex").symlink_to("../../elsewhere")
    files = exported(**{"components/dev/intel-gpu-plugin/kustomization.yaml": resources("cm.yaml"),
                        "components/dev/intel-gpu-plugin/cm.yaml": dump(cm("plugin", "intel-gpu-plugin"))})
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./components/dev/intel-gpu-plugin", **EVERY_KS))}
    assert checker(tmp_path)(repo=repo, files=files).problems == [
        "clusters/dev/apps.yaml: flux-system/apps (path ./components/dev/intel-gpu-plugin) applies ConfigMap "
        "intel-gpu-plugin/plugin (written to components/dev/intel-gpu-plugin/cm.yaml), which only its own "
        "Kustomization flux-system/intel-gpu-plugin should apply; hint: stop flux-system/apps from reaching "
        "components/dev/intel-gpu-plugin/"]


def test_a_bootstrap_named_apart_from_its_namespace_still_creates_that_namespace(check):
    repo = repository()
    source = next(yaml.safe_load_all(repo["clusters/dev/flux-system/gotk-sync.yaml"]))
    repo["clusters/dev/flux-system/gotk-sync.yaml"] = dump(source, ks("cluster", "./clusters/dev", **EVERY_KS))
    flux_graph = graph(bootstrap={"name": "cluster", "namespace": "flux-system", "gitRepository": "flux-system",
                                  "path": "./clusters/dev"})
    stack = check(repo=repo, flux_graph=flux_graph)
    assert (stack.problems, stack.notices) == ([], [])
    assert stack.walked.after.bootstrap == ("flux-system", "cluster")


def test_without_its_own_object_in_its_path_the_bootstrap_reads_the_git_repository_the_stack_names(check):
    repo = repository()
    repo["clusters/dev/flux-system/gotk-sync.yaml"] = dump({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "gitops", "namespace": "flux-system"}, "spec": {"url": "ssh://git@x/repo"}})
    cilium = ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS, wait=True)
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m")
    for k in (cilium, plex):
        k["spec"]["sourceRef"]["name"] = "gitops"
    repo["clusters/dev/cilium.yaml"] = dump(cilium)
    flux_graph = graph(bootstrap={"name": "flux-system", "namespace": "flux-system", "gitRepository": "gitops",
                                  "path": "./clusters/dev"})
    stack = check(repo=repo, files=exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex)}),
                  flux_graph=flux_graph)
    assert stack.problems == []
    assert {key: k.status for key, k in stack.walked.after.kustomizations.items()} == {
        FLUX: "built", ("flux-system", "cilium"): "built", ("flux-system", "plex"): "built"}


def test_repository_files_the_exports_components_listing_leaves_out_are_one_line_at_components_dir(check):
    repo = {**repository(), "clusters/dev/mine.yaml": dump(ks("mine", "./components/dev", **EVERY_KS)),
            "components/dev/kustomization.yaml": resources("mine.yaml"),
            "components/dev/mine.yaml": dump(cm("a", "default"), cm("b", "default"))}
    problems = check(repo=repo, files=exported(**{"components/dev/kustomization.yaml": resources("plex")})).problems
    assert problems[1:] == [
        'Pulumi.dev.yaml: gpu-platform:gitops.componentsDir: "components/dev": the export\'s own '
        "components/dev/kustomization.yaml lists only the export's files, so the 2 objects flux-system/mine applied "
        "from components/dev/mine.yaml before this export (e.g. ConfigMap default/a from components/dev/mine.yaml) "
        "would be applied by no Kustomization after it; with prune: true Flux would delete them from the cluster; "
        "hint: set gitops.componentsDir to a folder of its own, such as components/dev/gpu-platform"]
    assert problems[0].startswith("components/dev/kustomization.yaml: resources: `plex`: flux-system/mine applies")


# --- a hand-written file of the repository holding what the export writes ------------------------------------------

def own_copy() -> dict[str, Any]:
    """The repository's own Plex (Deployment and ConfigMap) in a file its cilium tier applies, beside the export's."""
    files = exported(**{"components/dev/plex/kustomization.yaml": resources("cm.yaml", "deploy.yaml"),
                        "components/dev/plex/deploy.yaml": dump(deployment("plex", "plex"))})
    repo = {**repository(),
            "kubernetes/dev/cilium/plex.yaml": dump(deployment("plex", "plex"), cm("plex-config", "plex"))}
    return {"repo": repo, "files": files}


def test_the_repositorys_own_copy_of_a_gpu_app_in_a_file_it_applies_leads_with_the_apps_key(check):
    from model.outputs import GpuAppOutput

    assert check(**own_copy(), gpu_apps={"plex": GpuAppOutput("hostpath", "x")}).problems == [
        "Pulumi.dev.yaml: gpu-platform:plex.deliveredBy: export (the default), but flux-system/cilium (path "
        "./kubernetes/dev/cilium) already applies the repository's own plex (ConfigMap plex/plex-config and 1 more "
        "from kubernetes/dev/cilium/plex.yaml) that the export writes to components/dev/plex/ for flux-system/plex; "
        "hint: set plex.deliveredBy: repository (the export then writes no Plex and holds the repository's to the "
        "GPU gate), or take plex out of kubernetes/dev/cilium/plex.yaml"]


def test_several_objects_a_hand_written_file_holds_too_are_one_line_naming_the_exports_folder(check):
    assert check(**own_copy()).problems == [
        "kubernetes/dev/cilium/plex.yaml: ConfigMap plex/plex-config and 1 more: applied by flux-system/cilium (path "
        "./kubernetes/dev/cilium) from this file, and written by the export to components/dev/plex/ for "
        "flux-system/plex; two Kustomizations applying one object fight over it and each prunes it when the other "
        "changes; hint: take ConfigMap plex-config and 1 more out of kubernetes/dev/cilium/plex.yaml, or, for an app "
        "the repository delivers, set its deliveredBy: repository"]


def test_a_kustomization_whose_path_reaches_several_exported_folders_is_one_line_naming_them_all(check):
    from test_applied_specs import plugin_graph, with_plugin

    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./components/dev", **EVERY_KS))}
    assert check(repo=repo, files=with_plugin(), flux_graph=plugin_graph()).problems == [
        "clusters/dev/apps.yaml: flux-system/apps applies the 2 objects of components/dev/plex/, "
        "components/dev/intel-gpu-plugin/ (e.g. ConfigMap plex/plex-config, written to components/dev/plex/cm.yaml), "
        "which flux-system/plex, flux-system/intel-gpu-plugin apply too; two Kustomizations applying one object fight "
        "over it and each prunes it when the other changes; hint: stop flux-system/apps from reaching "
        "components/dev/plex/, components/dev/intel-gpu-plugin/"]
