"""gitops/checks/delivery.py, called directly on small repositories: each refusal of Flux's view, with the line a user
reads (the file to change and the entry to add or remove), and what is shown as a notice instead of refused.

Each test writes a bootstrap repository to its own folder, takes the export's files as a RepoView's pending writes
(as gitops/export.py does), walks it before and after, and checks the stack."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import cm, dump, ks
from gitops.checks.delivery import before_and_after, check_stack, deciding_file
from gitops.flux.build import RepoView
from gitops.flux.inventory import FluxView, ObjectId, WalkedKustomization
from gitops.tree import ExportedObject, Tree
from model.layout import Layout
from model.outputs import FluxGraph

FLUX = ("flux-system", "flux-system")
LAYOUT = Layout(stack="dev", entry_dir="clusters/dev/gpu-platform", components_dir="components/dev",
                bootstrap_path="./clusters/dev")


# What every Kustomization of these repositories sets besides its path: its source's namespace, prune, and a 10m
# interval (the deadline of one that sets no timeout).
EVERY_KS = {"source_namespace": "flux-system", "prune": True, "interval": "10m"}


def resources(*entries: str) -> bytes:
    return dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": list(entries)})


def deployment(name: str, namespace: str, failures: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [
                {"name": name, "startupProbe": {"periodSeconds": 10, "failureThreshold": failures}}]}}}}


def repository() -> dict[str, bytes]:
    """flux bootstrap's layout: clusters/dev with flux-system/ and the CNI tier, no kustomization.yaml of its own."""
    return {
        "clusters/dev/flux-system/kustomization.yaml": resources("gotk-sync.yaml"),
        "clusters/dev/flux-system/gotk-sync.yaml": dump(
            {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
             "metadata": {"name": "flux-system", "namespace": "flux-system"}, "spec": {"url": "ssh://git@x/repo"}},
            ks("flux-system", "./clusters/dev", **EVERY_KS)),
        "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS, wait=True)),
        "kubernetes/dev/cilium/cm.yaml": dump(cm("cilium-config", "kube-system")),
    }


def exported(**changes: bytes | None) -> dict[str, bytes]:
    """The export's files: its entry folder with Plex's Kustomization, and Plex's folder."""
    files: dict[str, bytes | None] = {
        "clusters/dev/gpu-platform/kustomization.yaml": resources("plex.yaml"),
        "clusters/dev/gpu-platform/plex.yaml": dump(ks("plex", "./components/dev/plex", **EVERY_KS,
                                                       dependsOn=[{"name": "cilium"}], wait=True, timeout="10m")),
        "components/dev/plex/kustomization.yaml": resources("cm.yaml"),
        "components/dev/plex/cm.yaml": dump(cm("plex-config", "plex")),
        **changes,
    }
    return {rel: data for rel, data in files.items() if data is not None}


def graph(**changes: Any) -> dict[str, Any]:
    """The program's fluxGraph output for this stack: cilium is the repository's, plex the export's."""
    return {
        "namespace": "flux-system",
        "bootstrap": {"name": "flux-system", "namespace": "flux-system", "gitRepository": "flux-system",
                      "path": "./clusters/dev"},
        "plugin": ["flux-system", "intel-gpu-plugin"], "cni": ["flux-system", "cilium"],
        "pluginFolder": "components/dev/intel-gpu-plugin",
        "kustomizations": [{"name": "cilium", "namespace": "flux-system", "declared": False},
                           {"name": "plex", "namespace": "flux-system", "declared": True}],
        "components": {"plex": {"kustomization": ["flux-system", "plex"], "folder": "components/dev/plex",
                                "tier": None}},
        **changes,
    }


def tree_of(files: dict[str, bytes]) -> Tree:
    objects = [ExportedObject(rel, doc, None, "", "")  # type: ignore[arg-type]  # no registration needed here
               for rel, data in files.items() if not rel.endswith("kustomization.yaml")
               for doc in yaml.safe_load_all(data)]
    return Tree(stack="dev", layout=LAYOUT, files=dict(files), objects=objects)


class Stack:
    """One stack's check: the walk before and after the export's files, and the problems and notices."""

    def __init__(self, root: Path, repo: dict[str, bytes], files: dict[str, bytes], flux_graph: dict[str, Any],
                 old_owned: set[str] | None = None, node_count: int = 2) -> None:
        for rel, data in repo.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        self.tree = tree_of(files)
        self.after_view = RepoView(root, files, set())
        typed = FluxGraph.from_output(flux_graph)  # the fluxGraph stack output, read as the pipeline reads it
        self.walked = before_and_after(self.tree, typed, RepoView(root), self.after_view)
        self.problems = check_stack(self.walked, typed, self.after_view, old_owned or set(), node_count)
        self.notices = self.walked.notices


@pytest.fixture
def check(tmp_path):
    def run(repo: dict[str, bytes] | None = None, files: dict[str, bytes] | None = None,
            flux_graph: dict[str, Any] | None = None, **kwargs: Any) -> Stack:
        return Stack(tmp_path / "repo", repository() if repo is None else repo,
                     exported() if files is None else files, graph() if flux_graph is None else flux_graph, **kwargs)
    return run


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


def test_a_repository_without_the_bootstrap_folder_is_fresh_and_its_declared_tiers_are_assumed(check):
    stack = check(repo={"README.md": b"nothing here yet\n"})
    assert stack.walked.fresh is True
    assert stack.walked.before == FluxView(bootstrap=FLUX)
    assert stack.problems == []  # plex dependsOn cilium, which the stack says the repository declares


def test_a_declared_tier_the_walk_does_not_find_is_refused_once_the_repository_exists(check):
    repo = {rel: data for rel, data in repository().items() if "cilium" not in rel}
    assert check(repo=repo).problems == [
        # the stack's entry leads the line; what depends on the missing tier is folded into it
        "Pulumi.dev.yaml: gpu-platform:flux.tiers[0]: flux-system/cilium: the stack says the repository declares "
        "this Kustomization (declaredBy: repository) but Flux's walk does not reach it; flux-system/plex "
        "(clusters/dev/gpu-platform/plex.yaml) depends on it, and Flux would wait for it forever; hint: fix its name "
        "or namespace there, or declare it in the repository"]


def test_a_tier_declared_by_the_export_is_not_looked_for_in_the_repository(check):
    flux_graph = graph(kustomizations=[{"name": "cilium", "namespace": "flux-system", "declared": True},
                                       {"name": "plex", "namespace": "flux-system", "declared": True}])
    repo = {rel: data for rel, data in repository().items() if "cilium" not in rel}
    assert "declaredBy: repository" not in "\n".join(check(repo=repo, flux_graph=flux_graph).problems)


# --- 1. every exported object applied exactly once, by its own Kustomization ---------------------------------------

def test_an_entry_folder_the_bootstraps_kustomization_does_not_list_names_the_entry_to_add(check):
    repo = {**repository(), "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml")}
    assert check(repo=repo).problems == [
        "clusters/dev/kustomization.yaml: resources: lacks 'gpu-platform', so nothing applies the 1 objects the "
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


def test_an_object_inside_a_failing_build_is_one_line_naming_the_file_at_fault_first(check):
    """The failed build, the export's objects it leaves unapplied and the tier the walk cannot reach behind it: one
    cause, one line."""
    repo = {**repository(),
            "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml", "gpu-platform", "gone.yaml")}
    assert check(repo=repo).problems == [
        "clusters/dev/kustomization.yaml: resources: 'gone.yaml': no such file or folder; flux-system/flux-system "
        "(bootstrap) fails to build because of it, and Flux holds back whatever depends on it; nothing applies the 2 "
        "objects the export writes to clusters/dev/gpu-platform/ and components/dev/plex/ (e.g. Kustomization "
        "flux-system/plex); Flux's walk cannot reach flux-system/cilium, which the stack says the repository "
        "declares (flux.tiers); hint: fix the file named; see kustomize's own answer with `kubectl kustomize "
        "--load-restrictor LoadRestrictionsNone ./clusters/dev`"]


def test_a_folder_reached_by_a_generated_build_too_is_refused_naming_the_kustomization_to_stop(check):
    repo = {**repository(), "clusters/dev/cilium.yaml": dump(ks("cilium", "./components/dev", **EVERY_KS, wait=True))}
    assert check(repo=repo).problems == [
        "clusters/dev/cilium.yaml: flux-system/cilium applies the 1 objects of components/dev/plex/ (e.g. "
        "ConfigMap plex/plex-config, written to components/dev/plex/cm.yaml), which flux-system/plex (path "
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
        "clusters/dev/cilium.yaml: flux-system/cilium applies the 1 objects of components/dev/plex/ (e.g. ConfigMap "
        "plex/plex-config, written to components/dev/plex/cm.yaml), which flux-system/apps (path ./components) and "
        "flux-system/plex (path ./components/dev/plex) apply too; two Kustomizations applying one object fight over it "
        "and each prunes it when the other changes; hint: stop flux-system/cilium from reaching components/dev/plex/",
        "clusters/dev/gpu-platform/plex.yaml: flux-system/plex applies the 1 objects of components/dev/plex/ (e.g. "
        "ConfigMap plex/plex-config, written to components/dev/plex/cm.yaml), which flux-system/apps (path "
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


# --- 3. builds and substitutions -----------------------------------------------------------------------------------

# Flux substitutes only where a Kustomization has variables: the Kustomizations applying ${MISSING} here have one.
VARIABLES = {"substitute": {"CLUSTER": "dev"}}
PLEX_WITH_VARIABLES = {"clusters/dev/gpu-platform/plex.yaml": dump(ks(
    "plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m",
    postBuild=VARIABLES))}
UNRESOLVED = ("{file} ({oid}): data.a: ${{MISSING}} is not defined for {ks}, which applies it (its variables: "
              "CLUSTER); Flux's strict substitution would fail the whole Kustomization; hint: define it in the "
              "ConfigMap or Secret that Kustomization substitutes from, or give it a default (${{VAR:=value}})")


def test_an_unresolved_variable_in_an_exported_file_is_refused(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        **PLEX_WITH_VARIABLES})
    assert check(files=files).problems == [UNRESOLVED.format(
        file="components/dev/plex/cm.yaml", oid="ConfigMap plex/plex-config", ks="flux-system/plex")]


def test_a_problem_the_repository_already_had_is_a_notice_not_a_refusal(check):
    repo = {**repository(), "kubernetes/dev/cilium/cm.yaml": dump(cm("cilium-config", "kube-system", a="${MISSING}")),
            "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS, wait=True,
                                                postBuild=VARIABLES))}
    stack = check(repo=repo)
    assert stack.problems == []
    assert stack.notices == ["already in the repository before this export: " + UNRESOLVED.format(
        file="kubernetes/dev/cilium/cm.yaml", oid="ConfigMap kube-system/cilium-config", ks="flux-system/cilium")]


def test_a_problem_of_a_repository_file_that_the_export_brings_in_is_refused(check):
    repo = {**repository(), "kubernetes/dev/extra/cm.yaml": dump(cm("extra", "default", a="${MISSING}")),
            "kubernetes/dev/extra/kustomization.yaml": resources("cm.yaml")}
    listing = resources("cm.yaml", "../../../kubernetes/dev/extra")
    files = exported(**{"components/dev/plex/kustomization.yaml": listing, **PLEX_WITH_VARIABLES})
    stack = check(repo=repo, files=files)
    assert stack.problems == [UNRESOLVED.format(file="kubernetes/dev/extra/cm.yaml", oid="ConfigMap default/extra",
                                                ks="flux-system/plex")]
    assert stack.notices == []


def test_a_problem_naming_an_exported_kustomization_is_refused_even_if_it_was_there_before(check):
    bad = exported(**{"components/dev/plex/kustomization.yaml": resources("cm.yaml", "gone.yaml")})
    repo = {**repository(), **bad}
    stack = check(repo=repo, files=bad)
    assert stack.notices == []
    assert stack.problems == [
        "components/dev/plex/kustomization.yaml: resources: 'gone.yaml': no such file or folder; flux-system/plex "
        "(clusters/dev/gpu-platform/plex.yaml) fails to build because of it, and Flux holds back whatever depends on "
        "it; nothing applies the 1 object the export writes to components/dev/plex/ (e.g. ConfigMap plex/plex-config); "
        "hint: fix the file named; see kustomize's own answer with `kubectl kustomize --load-restrictor "
        "LoadRestrictionsNone ./components/dev/plex`"]


# --- 4. graph rules ------------------------------------------------------------------------------------------------

def test_a_graph_rule_broken_by_a_hand_written_kustomization_leads_with_its_file(check):
    repo = {**repository(), "clusters/dev/apps.yaml": dump(ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True,
                                                                dependsOn=[{"name": "intel-gpu-plugin"}])),
            "kubernetes/dev/apps/cm.yaml": dump(cm("app", "default"))}
    assert check(repo=repo).problems == [
        "clusters/dev/apps.yaml: apps.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; a "
        "failed plugin rollout would stall that tier; hint: remove the dependency"]


def test_a_graph_rule_about_no_file_keeps_the_flux_prefix(check):
    flux_graph = graph(namespace="apps")  # the bootstrap's namespace is then shown in full
    assert check(flux_graph=flux_graph).problems == []
    repo = {**repository(), "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS,
                                                                  wait=True, dependsOn=[{"name": "nosuch"}]))}
    assert check(repo=repo).problems == [
        "clusters/dev/cilium.yaml: cilium.spec.dependsOn: 'nosuch': no such Kustomization; Flux would wait for it "
        "forever; hint: use one of flux-system, plex"]


def test_wait_false_on_a_kustomization_the_repository_declares_is_a_warning_saying_what_it_means(check):
    """cluster-template's apps all say wait: false: a dependency on one means 'after it was applied'. That stalls
    nothing, so it is the repository's choice: a warning, not a refusal."""
    repo = {**repository(), "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS))}
    stack = check(repo=repo)
    assert stack.problems == []
    assert stack.notices == [
        "clusters/dev/cilium.yaml: cilium.spec.wait: false (the repository's choice): plex dependsOn it, so they "
        "start once it is applied, not once its workloads are healthy; wait: true there would hold them until its "
        "workloads are Ready"]


def test_wait_false_on_a_kustomization_the_export_declares_is_still_refused():
    from model.flux_graph import GraphNode, check_graph

    nodes = [GraphNode(("flux-system", "plex"), (), wait=False, where="ks.plex.yaml"),
             GraphNode(("flux-system", "apps"), (("flux-system", "plex"),), wait=True, where="apps.yaml",
                       declared_by="repository")]
    warnings: list[str] = []
    assert check_graph(nodes, [("flux-system", "flux-system")], ("flux-system", "intel-gpu-plugin"),
                       ("flux-system", "cilium"), warnings=warnings) == [
        "flux: ks.plex.yaml: plex.spec.wait: false: apps dependsOn it, and without wait 'Ready' does not mean its "
        "workloads are healthy; hint: set wait: true"]
    assert warnings == []


# --- 5. a waiting Kustomization outlasts its slowest workload ------------------------------------------------------

def test_a_timeout_below_the_slowest_workloads_start_names_the_numbers_and_the_file(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(deployment("plex", "plex", 60))})
    assert check(files=files).problems == [
        "clusters/dev/gpu-platform/plex.yaml: flux-system/plex.spec.timeout: 10m (600 s) is not above the "
        "worst-case start of Deployment plex/plex: 780 s (startupProbe 60 × 10 s + 180 s image pull margin); a slow "
        "start fails the Kustomization and holds back everything that depends on it; hint: set timeout: 14m or more"]


def test_a_start_that_fits_the_timeout_passes(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(deployment("plex", "plex", 41))})
    assert check(files=files).problems == []


def test_the_bootstraps_own_timeout_is_checked_too_and_named_bootstrap(check):
    repo = {**repository(), "clusters/dev/slow.yaml": dump(deployment("slow", "default", 60))}
    repo["clusters/dev/flux-system/gotk-sync.yaml"] = repo["clusters/dev/flux-system/gotk-sync.yaml"].replace(
        b"path: ./clusters/dev\n", b"path: ./clusters/dev\n  wait: true\n")
    assert check(repo=repo).problems == [
        "clusters/dev/flux-system/gotk-sync.yaml: flux-system/flux-system.spec.timeout: 10m (600 s) is not above the "
        "worst-case start of Deployment default/slow: 780 s (startupProbe 60 × 10 s + 180 s image pull margin); a slow "
        "start fails the Kustomization and holds back everything that depends on it; hint: set timeout: 14m or more"]


def test_without_wait_only_the_health_checked_workloads_count(check):
    slow = dump(deployment("plex", "plex", 60), deployment("other", "plex", 60), deployment("plex", "elsewhere", 60))
    health = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "plex", "namespace": "plex"}]
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], timeout="10m",
              healthChecks=health)
    files = exported(**{"components/dev/plex/cm.yaml": slow, "clusters/dev/gpu-platform/plex.yaml": dump(plex)})
    (line,) = check(files=files).problems
    assert "worst-case start of Deployment plex/plex: 780 s" in line
    for checks in ([{"kind": "Deployment", "name": "other-name", "namespace": "plex"}],
                   [{"kind": "ConfigMap", "name": "plex", "namespace": "plex"}], ["Deployment"], "Deployment"):
        plex["spec"]["healthChecks"] = checks
        files["clusters/dev/gpu-platform/plex.yaml"] = dump(plex)
        assert check(files=files).problems == [], checks


def test_a_health_check_without_a_namespace_means_the_kustomizations_own(check):
    slow = dump(deployment("plex", "flux-system", 60))
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], timeout="10m",
              healthChecks=[{"kind": "Deployment", "name": "plex"}])
    files = exported(**{"components/dev/plex/cm.yaml": slow, "clusters/dev/gpu-platform/plex.yaml": dump(plex)})
    (line,) = check(files=files).problems
    assert "worst-case start of Deployment flux-system/plex: 780 s" in line


def test_a_daemonsets_start_is_paid_once_per_node(check):
    daemonset = {**deployment("plugin", "plex", 30), "kind": "DaemonSet"}
    files = exported(**{"components/dev/plex/cm.yaml": dump(daemonset)})
    assert check(files=files, node_count=1).problems == []
    (line,) = check(files=files, node_count=2).problems
    assert "DaemonSet plex/plugin: 960 s (2 nodes × (startupProbe 30 × 10 s + 180 s image pull margin))" in line


# --- 6. a component that joined a tier is waited for by whatever waits for the tier -------------------------------

def test_whatever_waits_for_a_tier_a_component_joined_must_wait_for_the_component_too(check):
    flux_graph = graph()
    flux_graph["components"]["plex"]["tier"] = ["flux-system", "cilium"]
    repo = {**repository(),
            "clusters/dev/apps.yaml": dump(ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True,
                                              dependsOn=[{"name": "cilium"}])),
            "kubernetes/dev/apps/cm.yaml": dump(cm("x", "default")),
            "clusters/dev/other.yaml": dump(ks("other", "./kubernetes/dev/other", **EVERY_KS, namespace="apps",
                                               wait=True, dependsOn=[{"name": "cilium", "namespace": "flux-system"}])),
            "kubernetes/dev/other/cm.yaml": dump(cm("y", "default")),
            "clusters/dev/fine.yaml": dump(ks("fine", "./kubernetes/dev/fine", **EVERY_KS, wait=True,
                                              dependsOn=[{"name": "cilium"}, {"name": "plex"}])),
            "kubernetes/dev/fine/cm.yaml": dump(cm("z", "default"))}
    lacks = "plex joined the tier flux-system/cilium, and whatever waits for that tier must wait for plex too; hint:"
    assert check(repo=repo, flux_graph=flux_graph).problems == [
        f"clusters/dev/apps.yaml: flux-system/apps.spec.dependsOn: lacks flux-system/plex: {lacks} add "
        "`- name: plex` to its dependsOn",
        f"clusters/dev/other.yaml: apps/other.spec.dependsOn: lacks flux-system/plex: {lacks} add "
        "`- name: plex, namespace: flux-system` to its dependsOn",
    ]


def test_a_component_that_joined_no_tier_adds_no_dependency(check):
    repo = {**repository(),
            "clusters/dev/apps.yaml": dump(ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True,
                                              dependsOn=[{"name": "cilium"}])),
            "kubernetes/dev/apps/cm.yaml": dump(cm("x", "default"))}
    assert check(repo=repo).problems == []
    flux_graph = graph()
    del flux_graph["components"]["plex"]["tier"]
    assert check(repo=repo, flux_graph=flux_graph).problems == []


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
        "the 1 objects of components/dev/plex/ (e.g. ConfigMap plex/plex-config, written to components/dev/plex/"
        "cm.yaml), which flux-system/plex (path ./components/dev/plex) applies too; two Kustomizations applying one "
        "object fight over it and each prunes it when the other changes; hint: remove `../../../components/dev` from "
        "its resources"]


def test_after_an_object_whose_own_kustomization_is_missing_the_next_objects_are_still_checked(check):
    repo = {**repository(), "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml")}
    files = exported(**{"elsewhere/x.yaml": dump(cm("x", "default"))})
    assert [p.split(":")[0] for p in check(repo=repo, files=files).problems] == [
        "clusters/dev/kustomization.yaml", "elsewhere"]


def test_of_several_failing_kustomizations_holding_a_folder_the_deepest_is_named(check):
    repo = {**repository(),
            "clusters/dev/outer.yaml": dump(ks("outer", "./components", **EVERY_KS, wait=True)),
            "components/kustomization.yaml": resources("gone-outer.yaml"),
            "clusters/dev/inner.yaml": dump(ks("inner", "./components/dev", **EVERY_KS, wait=True)),
            "components/dev/kustomization.yaml": resources("gone-inner.yaml")}
    files = {"components/dev/extra/cm.yaml": dump(cm("extra", "default"))}
    stack = check(repo=repo, files=files, flux_graph=graph(components={}))
    assert stack.problems == [
        "components/dev/kustomization.yaml: resources: 'gone-inner.yaml': no such file or folder; flux-system/inner "
        "(clusters/dev/inner.yaml) fails to build because of it, and Flux holds back whatever depends on it; nothing "
        "applies the 1 object the export writes to components/dev/extra/ (e.g. ConfigMap default/extra); hint: fix the "
        "file named; see kustomize's own answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone "
        "./components/dev`"]
    # The outer one's failure takes nothing of the export down and was there before: a notice
    assert [n for n in stack.notices if "gone-outer.yaml" in n] == [
        "already in the repository before this export: components/kustomization.yaml: resources: 'gone-outer.yaml': "
        "no such file or folder; flux-system/outer (clusters/dev/outer.yaml) fails to build because of it, and Flux "
        "holds back whatever depends on it; hint: fix the file named; see kustomize's own answer with `kubectl "
        "kustomize --load-restrictor LoadRestrictionsNone ./components`"]


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


def test_a_problem_about_an_exported_file_is_refused_even_when_the_last_export_had_it_too(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        **PLEX_WITH_VARIABLES})
    stack = check(repo={**repository(), **files}, files=files)
    assert stack.notices == []
    assert stack.problems == [UNRESOLVED.format(
        file="components/dev/plex/cm.yaml", oid="ConfigMap plex/plex-config", ks="flux-system/plex")]


def test_graph_lines_name_kustomizations_outside_the_stacks_flux_namespace_with_their_namespace(check):
    repo = {**repository(), "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS,
                                                                  wait=True, dependsOn=[{"name": "nosuch"}]))}
    assert check(repo=repo, flux_graph=graph(namespace="gitops")).problems == [
        "clusters/dev/cilium.yaml: flux-system/cilium.spec.dependsOn: 'flux-system/nosuch': no such Kustomization; "
        "Flux would wait for it forever; hint: use one of flux-system/flux-system, flux-system/plex"]


def test_a_graph_line_about_no_single_file_keeps_its_flux_prefix(check):
    repo = {**repository(),
            "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS, wait=True,
                                           dependsOn=[{"name": "b"}])),
            "kubernetes/dev/a/cm.yaml": dump(cm("a", "default")),
            "clusters/dev/b.yaml": dump(ks("b", "./kubernetes/dev/b", **EVERY_KS, wait=True,
                                           dependsOn=[{"name": "a"}])),
            "kubernetes/dev/b/cm.yaml": dump(cm("b", "default"))}
    assert check(repo=repo).problems == [
        "flux: dependsOn cycle: a -> b -> a; Flux would never reconcile these; hint: remove one of these dependencies"]


def test_the_plugin_depending_on_the_cni_alone_passes(check):
    files = exported(**{
        "clusters/dev/gpu-platform/kustomization.yaml": resources("plex.yaml", "plugin.yaml"),
        "clusters/dev/gpu-platform/plugin.yaml": dump(ks("intel-gpu-plugin", "./components/dev/intel-gpu-plugin",
                                                         **EVERY_KS, dependsOn=[{"name": "cilium"}])),
        "components/dev/intel-gpu-plugin/kustomization.yaml": resources("cm.yaml"),
        "components/dev/intel-gpu-plugin/cm.yaml": dump(cm("plugin", "intel-gpu-plugin"))})
    assert check(files=files).problems == []


def test_in_a_fresh_repository_the_bootstrap_stays_a_root_beside_the_assumed_tiers(check):
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}, {"name": "flux-system"}],
              wait=True, timeout="10m")
    assert check(repo={"README.md": b"x"}, files=exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex)})
                 ).problems == []


def test_a_waiting_kustomization_without_timeout_or_interval_has_no_time_at_all(check):
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True)
    del plex["spec"]["interval"]
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex),
                        "components/dev/plex/cm.yaml": dump(deployment("plex", "plex", 1))})
    assert check(files=files).problems == [
        "clusters/dev/gpu-platform/plex.yaml: flux-system/plex.spec.timeout: 0s (0 s) is not above the worst-case "
        "start of Deployment plex/plex: 190 s (startupProbe 1 × 10 s + 180 s image pull margin); a slow start fails "
        "the Kustomization and holds back everything that depends on it; hint: set timeout: 4m or more"]


def test_the_timeout_not_the_interval_is_the_deadline_when_both_are_set(check):
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m")
    plex["spec"]["interval"] = "1h"
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex),
                        "components/dev/plex/cm.yaml": dump(deployment("plex", "plex", 60))})
    (line,) = check(files=files).problems
    assert "flux-system/plex.spec.timeout: 10m (600 s) is not above" in line


def test_every_health_checked_workload_counts_not_only_the_last(check):
    slow = dump(deployment("plex", "plex", 60), deployment("fast", "plex", 1))
    health = [{"kind": "Deployment", "name": "plex", "namespace": "plex"},
              {"kind": "Deployment", "name": "fast", "namespace": "plex"}]
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], timeout="10m",
              healthChecks=health)
    files = exported(**{"components/dev/plex/cm.yaml": slow, "clusters/dev/gpu-platform/plex.yaml": dump(plex)})
    (line,) = check(files=files).problems
    assert "worst-case start of Deployment plex/plex: 780 s" in line


def test_a_component_that_joined_no_tier_does_not_stop_the_check_of_those_that_did(check):
    flux_graph = graph()
    flux_graph["components"] = {"alpha": {"kustomization": ["flux-system", "alpha"], "folder": "components/dev/alpha",
                                          "tier": None},
                                "plex": {**flux_graph["components"]["plex"], "tier": ["flux-system", "cilium"]}}
    repo = {**repository(),
            "clusters/dev/apps.yaml": dump(ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True,
                                              dependsOn=[{"name": "cilium"}])),
            "kubernetes/dev/apps/cm.yaml": dump(cm("x", "default"))}
    assert check(repo=repo, flux_graph=flux_graph).problems == [
        "clusters/dev/apps.yaml: flux-system/apps.spec.dependsOn: lacks flux-system/plex: plex joined the tier "
        "flux-system/cilium, and whatever waits for that tier must wait for plex too; hint: add `- name: plex` to its "
        "dependsOn"]


# --- 2b. a parent's patch takes away what an exported Kustomization relies on --------------------------------------

def _patched_view(declared: dict[str, Any], applied: dict[str, Any], patches: list[dict[str, Any]]):
    from gitops.flux.inventory import FluxView, WalkedKustomization

    parent = WalkedKustomization(key=("flux-system", "cluster-apps"), path="kubernetes/apps",
                                 declared_in="kubernetes/flux/cluster/ks.yaml", parent=FLUX,
                                 spec={"patches": patches})
    child = WalkedKustomization(key=("flux-system", "plex"), path="kubernetes/plex", declared_in="ks.plex.yaml",
                                parent=parent.key, spec=applied, declared_spec=declared)
    return FluxView(bootstrap=FLUX, kustomizations={parent.key: parent, child.key: child}), child


VARS = {"postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]}}
SECRETS = {"postBuild": {"substituteFrom": [{"kind": "Secret", "name": "cluster-secrets"}]}}
OTHER = {"patch": "kind: Kustomization\nspec:\n  deletionPolicy: Orphan", "target": {"kind": "Kustomization"}}
SUBST = {"patch": "kind: Kustomization\nspec:\n  postBuild:\n    substituteFrom: []",
         "target": {"kind": "Kustomization"}}


def test_a_parent_patch_replacing_an_exported_substitute_from_is_refused_naming_the_patch_that_does_it():
    from gitops.checks.applied_specs import check_parent_patches

    view, _ = _patched_view(VARS, SECRETS, [OTHER, SUBST])
    assert check_parent_patches(view, {("flux-system", "plex")}) == [
        "kubernetes/flux/cluster/ks.yaml: spec.patches[1] of flux-system/cluster-apps: changes the export's "
        "flux-system/plex.spec.postBuild.substituteFrom, dropping ConfigMap cluster-vars (a patch on a Flux "
        "Kustomization replaces a list, it does not merge it): its objects' variables would go undefined; hint: give "
        "the patch a target that leaves flux-system/plex out (e.g. a labelSelector), or list ConfigMap cluster-vars "
        "in the patch too"]


def test_a_parent_patch_that_keeps_substitute_from_or_a_repository_kustomization_is_not_refused():
    from gitops.checks.applied_specs import check_parent_patches

    view, _ = _patched_view(VARS, {**VARS, "deletionPolicy": "Orphan"}, [OTHER])
    assert check_parent_patches(view, {("flux-system", "plex")}) == []
    view, _ = _patched_view(VARS, SECRETS, [SUBST])
    assert check_parent_patches(view, set()) == []  # the repository's own Kustomization: its choice


def test_patched_by_names_the_patches_that_mention_the_field_or_all_of_them():
    from gitops.checks.applied_specs import patched_by

    view, child = _patched_view({"timeout": "9m"}, {"timeout": "2m"}, [OTHER, {"patch": "spec:\n  timeout: 2m"}])
    assert patched_by(view, child, "timeout") == ("kubernetes/flux/cluster/ks.yaml: spec.patches[1] of "
                                                  "flux-system/cluster-apps")
    assert patched_by(view, child, "dependsOn") is None  # a field the parent left as declared
    view, child = _patched_view({"timeout": "9m"}, {"timeout": "2m"}, [OTHER, SUBST])
    assert patched_by(view, child, "timeout") == ("kubernetes/flux/cluster/ks.yaml: spec.patches[0], "
                                                  "spec.patches[1] of flux-system/cluster-apps")


def test_a_dotted_field_is_named_by_its_last_part_and_a_parent_that_replaced_its_whole_section_counts():
    from gitops.checks.applied_specs import patched_by

    view, child = _patched_view({}, VARS, [OTHER, SUBST])  # the parent set postBuild where the file had none
    assert child.changed_by_parent == ["postBuild"]
    assert patched_by(view, child, "postBuild.substituteFrom") == ("kubernetes/flux/cluster/ks.yaml: spec.patches[1] "
                                                                   "of flux-system/cluster-apps")


def test_a_parent_that_changed_the_spec_without_patches_is_named_by_its_spec():
    """A parent's `components` can change a child's spec as well as its patches can."""
    from gitops.checks.applied_specs import patched_by

    view, child = _patched_view({"timeout": "9m"}, {"timeout": "2m"}, [])
    assert patched_by(view, child, "timeout") == "kubernetes/flux/cluster/ks.yaml: its spec of flux-system/cluster-apps"


def test_a_parent_patch_dropping_several_references_names_each_and_an_unreadable_list_as_its_list():
    from gitops.checks.applied_specs import check_parent_patches

    both = {"postBuild": {"substituteFrom": [*VARS["postBuild"]["substituteFrom"],
                                             *SECRETS["postBuild"]["substituteFrom"]]}}
    view, _ = _patched_view(both, {"postBuild": {"substituteFrom": []}}, [SUBST])
    assert check_parent_patches(view, {("flux-system", "plex")}) == [
        "kubernetes/flux/cluster/ks.yaml: spec.patches[0] of flux-system/cluster-apps: changes the export's "
        "flux-system/plex.spec.postBuild.substituteFrom, dropping ConfigMap cluster-vars, Secret cluster-secrets (a "
        "patch on a Flux Kustomization replaces a list, it does not merge it): its objects' variables would go "
        "undefined; hint: give the patch a target that leaves flux-system/plex out (e.g. a labelSelector), or list "
        "ConfigMap cluster-vars, Secret cluster-secrets in the patch too"]
    view, _ = _patched_view({"postBuild": {"substituteFrom": ["odd"]}}, {"postBuild": {"substituteFrom": []}}, [SUBST])
    assert check_parent_patches(view, {("flux-system", "plex")}) == [
        "kubernetes/flux/cluster/ks.yaml: spec.patches[0] of flux-system/cluster-apps: changes the export's "
        "flux-system/plex.spec.postBuild.substituteFrom, dropping its list (a patch on a Flux Kustomization replaces a "
        "list, it does not merge it): its objects' variables would go undefined; hint: give the patch a target that "
        "leaves flux-system/plex out (e.g. a labelSelector), or list its list in the patch too"]


def test_a_parent_patch_that_keeps_every_declared_reference_is_not_refused():
    """The refusal's own hint: list the export's references in the patch too. Done, nothing is dropped, even though
    the patch changed postBuild (more references, or other postBuild fields)."""
    from gitops.checks.applied_specs import check_parent_patches

    more = {"postBuild": {"substituteFrom": [*VARS["postBuild"]["substituteFrom"],
                                             *SECRETS["postBuild"]["substituteFrom"]]}}
    view, child = _patched_view(VARS, more, [SUBST])
    assert child.changed_by_parent == ["postBuild.substituteFrom"]
    assert check_parent_patches(view, {("flux-system", "plex")}) == []
    view, child = _patched_view(VARS, {"postBuild": {**VARS["postBuild"], "substitute": {"A": "b"}}}, [SUBST])
    assert child.changed_by_parent == ["postBuild.substitute"]
    assert check_parent_patches(view, {("flux-system", "plex")}) == []


# --- a parent's patch behind a rule of the walk: the line names the patch to change ---------------------------------

FROM_PARENT = "clusters/dev/apps.yaml: spec.patches[0] of flux-system/apps"


def parent_patching(name: str, spec: dict[str, Any], repo: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The repository with the export's entry folder applied by its Kustomization `apps` (as cluster-template's
    cluster-apps applies kubernetes/apps), which patches the child Kustomization `name` with `spec`."""
    patch = yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                            "metadata": {"name": name}, "spec": spec}, sort_keys=False)
    repo = repository() if repo is None else repo
    listed = sorted(rel.split("/")[2] for rel in repo if rel.startswith("clusters/dev/") and rel.count("/") == 2)
    return {**repo,
            "clusters/dev/kustomization.yaml": resources("flux-system", *listed, "apps.yaml"),
            "clusters/dev/apps.yaml": dump(ks("apps", "./clusters/dev/gpu-platform", **EVERY_KS, wait=True, patches=[
                {"patch": patch, "target": {"kind": "Kustomization", "name": name}}]))}


def later() -> dict[str, bytes]:
    """The repository with a Kustomization that depends on plex."""
    return {**repository(),
            "clusters/dev/later.yaml": dump(ks("later", "./kubernetes/dev/later", **EVERY_KS, wait=True,
                                               dependsOn=[{"name": "plex"}])),
            "kubernetes/dev/later/cm.yaml": dump(cm("later", "default"))}


def test_a_dependency_a_parent_patch_adds_is_refused_naming_the_patch_not_the_file(check):
    repo = parent_patching("plex", {"dependsOn": [{"name": "cilium"}, {"name": "intel-gpu-plugin"}]})
    assert check(repo=repo).problems == [
        f"{FROM_PARENT}: sets spec.dependsOn of the Kustomizations it patches, which breaks 1 rule of Flux's order: "
        "plex depends on 'intel-gpu-plugin': nothing may depend on the GPU plugin; a failed plugin rollout would "
        "stall that tier; hint: take dependsOn out of that patch, or give the patch a target that leaves those "
        "Kustomizations out"]


def test_wait_false_a_parent_patch_sets_on_an_exported_kustomization_names_the_patch(check):
    repo = parent_patching("plex", {"wait": False}, later())
    assert check(repo=repo).problems == [
        "clusters/dev/gpu-platform/plex.yaml: plex.spec.wait: false: later dependsOn it, and without wait 'Ready' does "
        f"not mean its workloads are healthy; wait: false comes from {FROM_PARENT}; hint: leave wait out of that "
        "patch or set it to true there, or give the patch a target that leaves this Kustomization out"]


def test_a_rule_about_one_field_is_not_pinned_on_a_patch_that_changed_another(check):
    """The patch changed plex's dependsOn, harmlessly; the wait rule is about plex's own file."""
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], timeout="10m")
    repo = parent_patching("plex", {"dependsOn": [{"name": "cilium"}, {"name": "flux-system"}]},
                              later())
    assert check(repo=repo, files=exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex)})).problems == [
        "clusters/dev/gpu-platform/plex.yaml: plex.spec.wait: false: later dependsOn it, and without wait 'Ready' does "
        "not mean its workloads are healthy; hint: set wait: true"]


@pytest.mark.parametrize("field_name", ["timeout", "interval"])
def test_a_deadline_a_parent_patch_sets_below_the_slowest_start_names_the_patch(check, field_name):
    """Without a timeout, the interval is the deadline: a patch setting either is the one to change."""
    plex = ks("plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True)
    if field_name == "timeout":
        plex["spec"]["timeout"] = "10m"
    files = exported(**{"components/dev/plex/cm.yaml": dump(deployment("plex", "plex", 41)),
                        "clusters/dev/gpu-platform/plex.yaml": dump(plex)})
    assert check(files=files).problems == []  # 590 s fits the 10m the file says
    assert check(repo=parent_patching("plex", {field_name: "2m"}), files=files).problems == [
        f"{FROM_PARENT}: sets spec.timeout: 2m (120 s), not above the worst-case start of the workloads of "
        "flux-system/plex (Deployment plex/plex: 590 s) it patches; a slow start fails it and holds back everything "
        "that depends on it; hint: set timeout: 10m or more in that patch, or leave timeout out of that patch, or give "
        "the patch a target that leaves flux-system/plex out"]


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


def test_a_dependency_the_bootstraps_own_patch_adds_names_that_patch_in_gotk_sync(check):
    """Flux builds the bootstrap's path with its own spec: a patch there reaches the export's Kustomizations too."""
    patch = yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                            "metadata": {"name": "plex"},
                            "spec": {"dependsOn": [{"name": "cilium"}, {"name": "intel-gpu-plugin"}]}})
    repo = {**repository(), "clusters/dev/flux-system/gotk-sync.yaml": dump(
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "flux-system", "namespace": "flux-system"}, "spec": {"url": "ssh://git@x/repo"}},
        ks("flux-system", "./clusters/dev", **EVERY_KS,
           patches=[{"patch": patch, "target": {"kind": "Kustomization", "name": "plex"}}]))}
    problems = check(repo=repo).problems
    assert (
        "clusters/dev/flux-system/gotk-sync.yaml: spec.patches[0] of flux-system/flux-system: sets spec.dependsOn of "
        "the Kustomizations it patches, which breaks 1 rule of Flux's order: plex depends on 'intel-gpu-plugin': "
        "nothing may depend on the GPU plugin; a failed plugin rollout would stall that tier; hint: take dependsOn "
        "out of that patch, or give the patch a target that leaves those Kustomizations out") in problems


def test_a_parent_patch_suspending_an_exported_kustomization_is_refused_naming_the_patch(check):
    assert check(repo=parent_patching("plex", {"suspend": True})).problems == [
        f"{FROM_PARENT}: sets spec.suspend: true on the export's flux-system/plex: Flux would never apply it, while "
        "the export, its checklist and its evidence gate take it as delivered; hint: take suspend out of the "
        "repository (`flux suspend kustomization` on the cluster is the emergency valve, not git)"]
    assert check(repo=parent_patching("plex", {"suspend": False})).problems == []


def test_a_json6902_patch_removing_the_plugin_s_cni_dependency_is_refused_naming_the_patch():
    from gitops.checks.applied_specs import check_parent_patches
    from gitops.flux.inventory import FluxView, WalkedKustomization

    plugin, cni = ("flux-system", "intel-gpu-plugin"), ("flux-system", "cilium")
    remove = {"patch": "- op: remove\n  path: /spec/dependsOn", "target": {"kind": "Kustomization"}}
    parent = WalkedKustomization(key=("flux-system", "apps"), path="clusters/dev", declared_in="clusters/dev/apps.yaml",
                                 parent=FLUX, spec={"patches": [remove]})
    declared = {"dependsOn": [{"name": "cilium"}], "wait": True}
    child = WalkedKustomization(key=plugin, path="components/dev/intel-gpu-plugin", declared_in="ks.yaml",
                                parent=parent.key, spec={"wait": True}, declared_spec=declared)
    view = FluxView(bootstrap=FLUX, kustomizations={parent.key: parent, child.key: child})
    assert check_parent_patches(view, {plugin}, plugin, cni) == [
        "clusters/dev/apps.yaml: spec.patches[0] of flux-system/apps: flux-system/intel-gpu-plugin.spec.dependsOn: "
        "lacks the CNI flux-system/cilium as Flux applies it: the plugin would roll out before pods have a network; "
        "hint: leave dependsOn of the plugin's Kustomization as the export writes it"]
    child.spec = declared
    assert check_parent_patches(view, {plugin}, plugin, cni) == []


def test_the_dra_driver_s_kustomization_is_held_to_the_plugin_s_cni_and_wait_rules_against_a_parent_patch():
    from gitops.checks.applied_specs import check_parent_patches
    from gitops.flux.inventory import FluxView, WalkedKustomization

    plugin, driver = ("flux-system", "intel-gpu-plugin"), ("flux-system", "intel-gpu-resource-driver")
    cni = ("flux-system", "cilium")
    off = {"patch": "- op: replace\n  path: /spec/wait\n  value: false\n- op: remove\n  path: /spec/dependsOn",
           "target": {"kind": "Kustomization", "name": "intel-gpu-resource-driver"}}
    parent = WalkedKustomization(key=("flux-system", "apps"), path="clusters/dev", declared_in="clusters/dev/apps.yaml",
                                 parent=FLUX, spec={"patches": [off]})
    declared = {"dependsOn": [{"name": "cilium"}], "wait": True}
    child = WalkedKustomization(key=driver, path="components/dev/intel-gpu-resource-driver", declared_in="ks.yaml",
                                parent=parent.key, spec={"wait": False}, declared_spec=declared)
    view = FluxView(bootstrap=FLUX, kustomizations={parent.key: parent, child.key: child})
    at = "clusters/dev/apps.yaml: spec.patches[0] of flux-system/apps"
    assert check_parent_patches(view, {driver}, plugin, cni, driver) == [
        f"{at}: flux-system/intel-gpu-resource-driver.spec.dependsOn: lacks the CNI flux-system/cilium as Flux applies "
        "it: the DRA driver would roll out before pods have a network; hint: leave dependsOn of the DRA driver's "
        "Kustomization as the export writes it",
        f"{at}: sets the export's flux-system/intel-gpu-resource-driver.spec.wait: false: Flux would call the DRA "
        "driver's Kustomization Ready once it is applied, not once the DRA driver's DaemonSet runs, so a failed "
        "rollout would go unseen; hint: leave wait out of that patch or set it to true there, or give the patch a "
        "target that leaves flux-system/intel-gpu-resource-driver out"]
    child.spec = declared
    assert check_parent_patches(view, {driver}, plugin, cni, driver) == []


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


def test_a_parent_patch_that_is_not_yaml_is_named_at_the_file_that_holds_it(check):
    repo = parent_patching("plex", {"timeout": "10m"})
    doc = yaml.safe_load(repo["clusters/dev/apps.yaml"])
    doc["spec"]["patches"][0]["patch"] = "kind: Kustomization\nspec: [unclosed\n"
    repo["clusters/dev/apps.yaml"] = dump(doc)
    assert check(repo=repo).problems == [
        "clusters/dev/apps.yaml: spec.patches[0].patch: not valid YAML (line 3 of the patch): did not find expected "
        "',' or ']'; flux-system/apps (clusters/dev/apps.yaml) fails to build because of it, and Flux holds back "
        "whatever depends on it; nothing applies the 2 objects the export writes to clusters/dev/gpu-platform/ and "
        "components/dev/plex/ (e.g. Kustomization flux-system/plex); hint: fix the file named; see kustomize's own "
        "answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone ./clusters/dev/gpu-platform`"]


# --- a parent's patch on the plugin's Kustomization: prune, wait, `$patch: delete` ---------------------------------

PLUGIN = ("flux-system", "intel-gpu-plugin")


def with_plugin(**changes: bytes | None) -> dict[str, bytes]:
    """The export's files with the plugin's Kustomization too, depending on the CNI tier, as the export writes it."""
    return exported(**{
        "clusters/dev/gpu-platform/kustomization.yaml": resources("intel-gpu-plugin.yaml", "plex.yaml"),
        "clusters/dev/gpu-platform/intel-gpu-plugin.yaml": dump(ks(
            "intel-gpu-plugin", "./components/dev/intel-gpu-plugin", **EVERY_KS, dependsOn=[{"name": "cilium"}],
            wait=True, timeout="10m")),
        "components/dev/intel-gpu-plugin/kustomization.yaml": resources("cm.yaml"),
        "components/dev/intel-gpu-plugin/cm.yaml": dump(cm("plugin", "intel-gpu-plugin")),
        **changes})


def plugin_graph() -> dict[str, Any]:
    """The graph with the plugin's Kustomization declared by the export."""
    flux_graph = graph()
    flux_graph["kustomizations"] = [*flux_graph["kustomizations"],
                                    {"name": "intel-gpu-plugin", "namespace": "flux-system", "declared": True}]
    return flux_graph


def patching(*patches: dict[str, Any], repo: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The repository with the export's entry folder applied by `apps`, which carries these patches."""
    repo = parent_patching("plex", {}, repo)
    doc = yaml.safe_load(repo["clusters/dev/apps.yaml"])
    doc["spec"]["patches"] = list(patches)
    return {**repo, "clusters/dev/apps.yaml": dump(doc)}


def strategic(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"patch": yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                     "metadata": {"name": name}, "spec": spec}, sort_keys=False),
            "target": {"kind": "Kustomization", "name": name}}


DELETE = {"patch": yaml.safe_dump({"$patch": "delete", "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                                   "kind": "Kustomization",
                                   "metadata": {"name": "intel-gpu-plugin", "namespace": "flux-system"}}),
          "target": {"kind": "Kustomization", "name": "intel-gpu-plugin"}}


def no_prune(name: str) -> str:
    return (f"{FROM_PARENT}: sets the export's flux-system/{name}.spec.prune: false: Flux would leave on the cluster "
            f"whatever a later export removes or renames in ./components/dev/{name}, and after `--remove` all it "
            "applied (Flux deletes a Kustomization's objects with it only when it prunes); hint: leave prune out of "
            f"that patch or set it to true there, or give the patch a target that leaves flux-system/{name} out")


@pytest.mark.parametrize(("patch", "name"), [
    (strategic("intel-gpu-plugin", {"prune": False}), "intel-gpu-plugin"),
    (strategic("plex", {"prune": False}), "plex"),
    ({"patch": "- op: replace\n  path: /spec/prune\n  value: false",
      "target": {"kind": "Kustomization", "name": "intel-gpu-plugin"}}, "intel-gpu-plugin"),
], ids=["plugin", "plex", "json6902"])
def test_a_parent_patch_turning_prune_off_on_an_exported_kustomization_is_refused_naming_the_patch(check, patch,
                                                                                                    name):
    """Without prune, what a later export removes or renames stays on the cluster, and so does everything after
    `--remove`: Flux deletes a Kustomization's objects with it only when it prunes."""
    assert check(repo=patching(patch), files=with_plugin(), flux_graph=plugin_graph()).problems == [no_prune(name)]
    assert check(repo=patching(strategic(name, {"prune": True})), files=with_plugin(),
                 flux_graph=plugin_graph()).problems == []


def test_wait_false_a_parent_patch_sets_on_the_plugins_kustomization_is_refused_naming_the_patch(check):
    """Nothing may depend on the plugin, so the graph's wait rule never speaks for it: its own rule does."""
    assert check(repo=patching(strategic("intel-gpu-plugin", {"wait": False})), files=with_plugin(),
                 flux_graph=plugin_graph()).problems == [
        f"{FROM_PARENT}: sets the export's flux-system/intel-gpu-plugin.spec.wait: false: Flux would call the "
        "plugin's Kustomization Ready once it is applied, not once the plugin's DaemonSet runs, so a failed rollout "
        "would go unseen; hint: leave wait out of that patch or set it to true there, or give the patch a target "
        "that leaves flux-system/intel-gpu-plugin out"]
    assert check(repo=patching(strategic("intel-gpu-plugin", {"wait": True})), files=with_plugin(),
                 flux_graph=plugin_graph()).problems == []


def test_wait_false_on_the_plugin_with_a_dependent_is_said_once_by_the_graphs_rule(check):
    repo = patching(strategic("intel-gpu-plugin", {"wait": False}), repo={
        **repository(), "clusters/dev/later.yaml": dump(ks("later", "./kubernetes/dev/later", **EVERY_KS, wait=True,
                                                           dependsOn=[{"name": "intel-gpu-plugin"}])),
        "kubernetes/dev/later/cm.yaml": dump(cm("later", "default"))})
    problems = check(repo=repo, files=with_plugin(), flux_graph=plugin_graph()).problems
    assert [line for line in problems if "intel-gpu-plugin.spec.wait: false" in line] == [
        "clusters/dev/gpu-platform/intel-gpu-plugin.yaml: intel-gpu-plugin.spec.wait: false: later dependsOn it, and "
        "without wait 'Ready' does not mean its workloads are healthy; wait: false comes from "
        f"{FROM_PARENT}; hint: leave wait out of that patch or set it to true there, or give the patch a target that "
        "leaves this Kustomization out"]


@pytest.mark.parametrize("name", ["intel-gpu-plugin", "plex"])
def test_a_parent_patch_deleting_an_exported_kustomization_is_refused_naming_the_patch_and_nothing_else(check,
                                                                                                        name):
    """`$patch: delete` takes the Kustomization out of what the parent applies: the one line names that patch, not
    the entry folder (which the parent does reach) nor the objects of the deleted Kustomization's folder."""
    delete = yaml.safe_load(yaml.safe_dump(DELETE).replace("intel-gpu-plugin", name))
    repo = patching(strategic("plex", {"timeout": "10m"}), delete)
    assert check(repo=repo, files=with_plugin(), flux_graph=plugin_graph()).problems == [
        f"clusters/dev/apps.yaml: spec.patches[1] of flux-system/apps: deletes the export's flux-system/{name} "
        "(`$patch: delete`) from what flux-system/apps applies: Flux would never apply it nor the objects of "
        f"./components/dev/{name}, while the export, its checklist and its evidence gate take them as delivered; "
        f"hint: remove that patch, or give it a target that leaves flux-system/{name} out"]


def test_a_deleting_patch_whose_target_leaves_the_export_out_passes(check):
    """The refusal's hint, followed: a target that names another Kustomization."""
    aimed = {**DELETE, "target": {"kind": "Kustomization", "name": "old-gpu-plugin"}}
    stack = check(repo=patching(aimed), files=with_plugin(), flux_graph=plugin_graph())
    assert (stack.problems, stack.notices) == ([], [])


def test_an_undefined_variable_the_bootstrap_already_had_is_one_notice_and_what_it_applies_is_still_judged(check):
    """Flux's default substitution applies the empty text and goes on to the Kustomizations the bootstrap applies: the
    walk says the variable once, and the CNI tier below it is still reached (no follow-on refusal about it)."""
    repo = repository()
    repo["clusters/dev/flux-system/gotk-sync.yaml"] = dump(
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "flux-system", "namespace": "flux-system"}, "spec": {"url": "ssh://git@x/repo"}},
        ks("flux-system", "./clusters/dev", **EVERY_KS, postBuild=VARIABLES))
    repo["clusters/dev/cm.yaml"] = dump(cm("root-config", "default", a="${MISSING}"))
    stack = check(repo=repo, files=exported())
    assert stack.problems == []
    assert stack.notices == ["already in the repository before this export: " + UNRESOLVED.format(
        file="clusters/dev/cm.yaml", oid="ConfigMap default/root-config", ks="flux-system/flux-system")]


# --- a plugin beside the DRA driver, the namespace of an exported Kustomization, `${VAR}` applied as written, an -----
# --- exported object a hand-written file holds too ------------------------------------------------------------------

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


@pytest.mark.parametrize("doc", [
    {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"chart": {"spec": {"chart": "intel-device-plugins-sgx"}}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"template": {"spec": {"containers": [{"name": "x", "image": "nginx:1.27"}]}}}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "namespace": "a"},
     "spec": {"template": {"spec": {"containers": "intel/intel-gpu-plugin"}}}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"},
     "data": {"image": "intel/intel-gpu-plugin"}},
], ids=["other-chart", "other-image", "containers-not-a-list", "not-a-workload"])
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


def test_a_variable_under_an_exported_kustomization_without_variables_is_a_notice_that_it_is_applied_as_written(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", url="http://${HOST}/"))})
    stack = check(files=files)
    assert stack.problems == []
    assert stack.notices == [
        "components/dev/plex/cm.yaml (ConfigMap plex/plex-config): data.url: ${HOST} is applied as written: "
        "flux-system/plex has no variables (no postBuild, or a substituteFrom out of its namespace's reach), and "
        "Flux substitutes only where a Kustomization has some; hint: give flux-system/plex the variables it needs "
        "(cluster-vars lives in flux-system), or write $${HOST} if the text is meant"]


def test_one_notice_per_object_applied_as_written_after_an_exported_kustomization_the_walk_did_not_build(check):
    two = cm("plex-config", "plex", a="${FIRST}", b="${SECOND}")
    flux_graph = graph(kustomizations=[*graph()["kustomizations"],
                                       {"name": "absent", "namespace": "flux-system", "declared": True}])
    stack = check(files=exported(**{"components/dev/plex/cm.yaml": dump(two)}), flux_graph=flux_graph)
    (notice,) = stack.notices
    assert notice.startswith("components/dev/plex/cm.yaml (ConfigMap plex/plex-config): data.a: ${FIRST} is applied")


def test_an_object_the_export_writes_that_a_hand_written_file_applies_too_is_refused_at_that_file(check):
    repo = {**repository(), "kubernetes/dev/cilium/plex.yaml": dump(cm("plex-config", "plex"))}
    (line,) = check(repo=repo).problems
    assert line == (
        "kubernetes/dev/cilium/plex.yaml: ConfigMap plex/plex-config: applied by flux-system/cilium "
        "(path ./kubernetes/dev/cilium) from this file, and written by the export to components/dev/plex/cm.yaml for "
        "flux-system/plex; two Kustomizations applying one object fight over it and each prunes it when the other "
        "changes; hint: take ConfigMap plex-config out of kubernetes/dev/cilium/plex.yaml, or, for an app the "
        "repository delivers, set its deliveredBy: repository")


def test_a_kustomization_inside_a_list_that_depends_on_the_plugin_is_refused_as_flux_applies_it(check):
    """kustomize takes a `kind: List` apart into its items, so Flux applies the Kustomization inside it: the walk
    sees it, and the graph rule names the List's file."""
    inside = ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True, dependsOn=[{"name": "intel-gpu-plugin"}])
    repo = {**repository(), "clusters/dev/apps.yaml": dump({"apiVersion": "v1", "kind": "List", "items": [inside]}),
            "kubernetes/dev/apps/cm.yaml": dump(cm("app", "default"))}
    assert check(repo=repo).problems == [
        "clusters/dev/apps.yaml: apps.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; a "
        "failed plugin rollout would stall that tier; hint: remove the dependency"]


# --- one cause, one line (issue 43): the file at fault first, what it takes down folded in ----------------------------

def test_a_cycle_two_kustomizations_build_is_one_line_naming_the_entry_that_closes_it(check):
    repo = {**repository(), "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS)),
            "clusters/dev/b.yaml": dump(ks("b", "./kubernetes/dev/b", **EVERY_KS)),
            "kubernetes/dev/a/kustomization.yaml": resources("../b"),
            "kubernetes/dev/b/kustomization.yaml": resources("../a")}
    stack = check(repo=repo)
    assert stack.problems == []  # the repository's own, there before, taking nothing of the export down
    assert stack.notices == [
        "already in the repository before this export: kubernetes/dev/b/kustomization.yaml: resources: '../a': a cycle "
        "of kustomizations (kubernetes/dev/a/ -> kubernetes/dev/b/ -> kubernetes/dev/a/); kustomize refuses to build "
        "it; 2 Kustomizations fail to build because of it (flux-system/a, flux-system/b), and Flux holds back "
        "whatever depends on them; hint: remove '../a' from the resources of kubernetes/dev/b/kustomization.yaml"]


def test_an_exported_kustomization_whose_path_leaves_the_repository_is_named_at_its_spec_path(check):
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(ks(
        "plex", "./../../elsewhere", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m"))})
    assert check(files=files).problems == [
        "clusters/dev/gpu-platform/plex.yaml: spec.path: './../../elsewhere': leaves the repository, and Flux reads "
        "only its source; flux-system/plex (clusters/dev/gpu-platform/plex.yaml) fails to build because of it, and "
        "Flux holds back whatever depends on it; nothing applies the 1 object the export writes to "
        "components/dev/plex/ (e.g. ConfigMap plex/plex-config); hint: set spec.path to a folder of the repository "
        "(./…)"]


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


def test_a_second_kustomization_file_names_the_hand_written_one_and_between_two_hand_written_keeps_either(check):
    beside = check(repo={**repository(), "components/dev/plex/Kustomization": resources("cm.yaml")})
    assert beside.problems == [
        "components/dev/plex/Kustomization: a second kustomization file beside the export's "
        "components/dev/plex/kustomization.yaml: kustomize and Flux refuse to build components/dev/plex/ with more "
        "than one; flux-system/plex (clusters/dev/gpu-platform/plex.yaml) fails to build because of it, and Flux holds "
        "back whatever depends on it; nothing applies the 1 object the export writes to components/dev/plex/ (e.g. "
        "ConfigMap plex/plex-config); hint: delete components/dev/plex/Kustomization; the export's "
        "components/dev/plex/kustomization.yaml lists what components/dev/plex/ holds"]
    repo = {**repository(), "clusters/dev/x.yaml": dump(ks("x", "./kubernetes/dev/x", **EVERY_KS)),
            "kubernetes/dev/x/kustomization.yaml": resources("cm.yaml"),
            "kubernetes/dev/x/kustomization.yml": resources("cm.yaml"),
            "kubernetes/dev/x/cm.yaml": dump(cm("x", "default"))}
    assert check(repo=repo).notices == [
        "already in the repository before this export: kubernetes/dev/x/kustomization.yml: a second kustomization "
        "file beside kubernetes/dev/x/kustomization.yaml: kustomize and Flux refuse to build kubernetes/dev/x/ with "
        "more than one; flux-system/x (clusters/dev/x.yaml) fails to build because of it, and Flux holds back "
        "whatever depends on it; hint: keep one of them"]


def test_kustomizes_own_refusal_is_named_at_the_kustomization_it_was_building(check):
    """A kustomization that does more than list resources is built by kubectl: its last words, after the file."""
    repo = {**repository(), "clusters/dev/kustomization.yaml": dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "flux-system",
        "resources": ["flux-system", "cilium.yaml", "gpu-platform", "gone.yaml"]})}
    (line,) = check(repo=repo).problems
    # kustomize's own words (they change between its versions) sit between the two fixed ends: `.+`, on one line
    assert re.fullmatch(re.escape(
        "clusters/dev/kustomization.yaml: kustomize refuses to build clusters/dev/: accumulating resources: ") + ".+"
        + re.escape(
        "; flux-system/flux-system (bootstrap) fails to build because of it, and Flux holds back whatever depends on "
        "it; nothing applies the 2 objects the export writes to clusters/dev/gpu-platform/ and components/dev/plex/ "
        "(e.g. Kustomization flux-system/plex); Flux's walk cannot reach flux-system/cilium, which the stack says the "
        "repository declares (flux.tiers); hint: see kustomize's own answer with `kubectl kustomize "
        "--load-restrictor LoadRestrictionsNone ./clusters/dev`"), line), line


def test_a_parent_patch_suspending_two_exported_kustomizations_is_one_line_naming_both(check):
    suspend = {"patch": yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                        "metadata": {"name": "any"}, "spec": {"suspend": True}}),
               "target": {"kind": "Kustomization"}}
    assert check(repo=patching(suspend), files=with_plugin(), flux_graph=plugin_graph()).problems == [
        f"{FROM_PARENT}: sets spec.suspend: true on the export's flux-system/intel-gpu-plugin and flux-system/plex: "
        "Flux would never apply them, while the export, its checklist and its evidence gate take them as delivered; "
        "hint: take suspend out of the repository (`flux suspend kustomization` on the cluster is the emergency "
        "valve, not git)"]


def test_nothing_below_a_link_the_export_would_write_through_is_judged_by_the_walk(check, tmp_path):
    """The walk sees there only what the export writes (a timeout, a second applier: all wrong); OUT's own guard
    (gitops/repo/out_folder.py) refuses the link, naming it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "repo" / "components").mkdir(parents=True)
    (tmp_path / "repo" / "components" / "dev").symlink_to(elsewhere)
    repo = {**repository(), "clusters/dev/all.yaml": dump(ks("all", "./components", **EVERY_KS, wait=True))}
    stack = check(repo=repo)
    assert (stack.problems, stack.notices) == ([], [])
