"""gitops/checks/applied_specs.py, through delivery.check_stack on small repositories (walk_repositories.py) and
directly: what a parent's patch takes from the export's Kustomizations (substituteFrom, suspend, prune, wait, the
plugin's CNI dependency, `$patch: delete`), the graph rules, wait timeouts and tiers, each line naming the patch or
file to change."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from walk_repositories import (
    EVERY_KS,
    FLUX,
    checker,
    exported,
    graph,
    parent_patching,
    repository,
    resources,
)

from builders import cm, dump, ks
from gitops.flux.inventory import FluxView, WalkedKustomization


@pytest.fixture
def check(tmp_path):
    return checker(tmp_path)


def deployment(name: str, namespace: str, failures: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [
                {"name": name, "startupProbe": {"periodSeconds": 10, "failureThreshold": failures}}]}}}}


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
    from gitops.flux.inventory import FluxView

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
    from gitops.flux.inventory import FluxView

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
    from gitops.flux.inventory import FluxView

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



@pytest.mark.parametrize("daemon, what", [("intel-gpu-plugin", "plugin"), ("intel-gpu-resource-driver", "DRA driver")])
def test_a_parent_patch_removing_the_cni_dependency_of_the_plugin_or_driver_is_one_line_through_the_stacks_check(
        check, daemon, what):
    """check_stack hands the CNI, the DRA driver and the patch's fold to the parent-patch rules: the patch's one line
    names what its dependsOn takes away."""
    flux_graph = plugin_graph()
    files = with_plugin()
    if daemon != "intel-gpu-plugin":
        flux_graph.update(plugin=None, pluginFolder="", driver=["flux-system", daemon],
                          driverFolder=f"components/dev/{daemon}")
        flux_graph["kustomizations"][-1]["name"] = daemon
        files = {rel.replace("intel-gpu-plugin", daemon): data.replace(b"intel-gpu-plugin", daemon.encode())
                 for rel, data in files.items()}
    remove = {"patch": "- op: remove\n  path: /spec/dependsOn", "target": {"kind": "Kustomization", "name": daemon}}
    assert check(repo=patching(remove), files=files, flux_graph=flux_graph).problems == [
        f"{FROM_PARENT}: sets spec.dependsOn of the Kustomizations it patches, which breaks 1 rule of Flux's order: "
        f"flux-system/{daemon} loses its dependency on the CNI flux-system/cilium, so the {what} would roll out "
        "before pods have a network; hint: take dependsOn out of that patch, or give the patch a target that leaves "
        "those Kustomizations out"]

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


def test_a_kustomization_inside_a_list_that_depends_on_the_plugin_is_refused_as_flux_applies_it(check):
    """kustomize takes a `kind: List` apart into its items, so Flux applies the Kustomization inside it: the walk
    sees it, and the graph rule names the List's file."""
    inside = ks("apps", "./kubernetes/dev/apps", **EVERY_KS, wait=True, dependsOn=[{"name": "intel-gpu-plugin"}])
    repo = {**repository(), "clusters/dev/apps.yaml": dump({"apiVersion": "v1", "kind": "List", "items": [inside]}),
            "kubernetes/dev/apps/cm.yaml": dump(cm("app", "default"))}
    assert check(repo=repo).problems == [
        "clusters/dev/apps.yaml: apps.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU plugin; a "
        "failed plugin rollout would stall that tier; hint: remove the dependency"]


def test_a_parent_patch_suspending_two_exported_kustomizations_is_one_line_naming_both(check):
    suspend = {"patch": yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                        "metadata": {"name": "any"}, "spec": {"suspend": True}}),
               "target": {"kind": "Kustomization"}}
    assert check(repo=patching(suspend), files=with_plugin(), flux_graph=plugin_graph()).problems == [
        f"{FROM_PARENT}: sets spec.suspend: true on the export's flux-system/intel-gpu-plugin and flux-system/plex: "
        "Flux would never apply them, while the export, its checklist and its evidence gate take them as delivered; "
        "hint: take suspend out of the repository (`flux suspend kustomization` on the cluster is the emergency "
        "valve, not git)"]


# --- one patch, several of the export's Kustomizations: each counted in that patch's one line -----------------------

def test_a_patch_setting_a_timeout_too_short_for_two_exported_kustomizations_asks_for_the_larger_need(check):
    """The plugin needs 6m, Plex 10m: the hint asks for the larger (by duration: "6m" sorts after "10m" as text)."""
    files = with_plugin(**{"components/dev/intel-gpu-plugin/cm.yaml": dump(deployment("plugin", "intel-gpu-plugin",
                                                                                      15)),
                           "components/dev/plex/cm.yaml": dump(deployment("plex", "plex", 41))})
    short = {"patch": yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                      "metadata": {"name": "any"}, "spec": {"timeout": "1m"}}),
             "target": {"kind": "Kustomization"}}
    assert check(repo=patching(short), files=files, flux_graph=plugin_graph()).problems == [
        f"{FROM_PARENT}: sets spec.timeout: 1m (60 s), not above the worst-case start of the workloads of 2 "
        "Kustomizations (flux-system/intel-gpu-plugin (Deployment intel-gpu-plugin/plugin: 330 s), flux-system/plex "
        "(Deployment plex/plex: 590 s)) it patches; a slow start fails them and holds back everything that depends "
        "on them; hint: set timeout: 10m or more in that patch, or leave timeout out of that patch, or give the patch "
        "a target that leaves flux-system/intel-gpu-plugin and flux-system/plex out"]


def test_a_patch_dropping_different_references_of_two_exported_kustomizations_names_each_once():
    from gitops.checks.applied_specs import check_parent_patches

    view, plex = _patched_view(VARS, {}, [SUBST])
    plugin = WalkedKustomization(key=PLUGIN, path="kubernetes/plugin", declared_in="ks.plugin.yaml",
                                 parent=plex.parent, spec={}, declared_spec=SECRETS)
    view.kustomizations[PLUGIN] = plugin
    assert check_parent_patches(view, {plex.key, PLUGIN}) == [
        "kubernetes/flux/cluster/ks.yaml: spec.patches[0] of flux-system/cluster-apps: changes "
        "spec.postBuild.substituteFrom of the export's 2 Kustomizations flux-system/plex and "
        "flux-system/intel-gpu-plugin, dropping ConfigMap cluster-vars, Secret cluster-secrets (a patch on a Flux "
        "Kustomization replaces a list, it does not merge it): their objects' variables would go undefined; hint: "
        "give the patch a target that leaves flux-system/plex and flux-system/intel-gpu-plugin out (e.g. a "
        "labelSelector), or list ConfigMap cluster-vars, Secret cluster-secrets in the patch too"]


def test_prune_false_in_an_exported_kustomizations_own_file_asks_for_prune_true_as_the_export_writes_it(check):
    """A hand edit of the exported file (no parent's patch): the hint is about the file, not a patch."""
    plex = ks("plex", "./components/dev/plex", **{**EVERY_KS, "prune": False}, dependsOn=[{"name": "cilium"}],
              wait=True, timeout="10m")
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(plex)})
    assert check(files=files).problems == [
        "clusters/dev/gpu-platform/plex.yaml: sets the export's flux-system/plex.spec.prune: false: Flux would leave "
        "on the cluster whatever a later export removes or renames in ./components/dev/plex, and after `--remove` "
        "all it applied (Flux deletes a Kustomization's objects with it only when it prunes); hint: leave prune: true "
        "as the export writes it"]


def test_a_deleting_patch_reaching_a_hand_written_kustomization_too_names_only_the_exports(check):
    repo = patching({**DELETE, "target": {"kind": "Kustomization", "name": "(intel-gpu-plugin|mine)"}})
    repo["clusters/dev/gpu-platform/mine.yaml"] = dump(ks("mine", "./kubernetes/dev/mine", **EVERY_KS))
    repo["kubernetes/dev/mine/cm.yaml"] = dump(cm("mine", "default"))
    files = with_plugin(**{"clusters/dev/gpu-platform/kustomization.yaml": resources(
        "intel-gpu-plugin.yaml", "mine.yaml", "plex.yaml")})
    (line,) = check(repo=repo, files=files, flux_graph=plugin_graph()).problems
    assert line.startswith("clusters/dev/apps.yaml: spec.patches[0] of flux-system/apps: deletes the export's "
                           "flux-system/intel-gpu-plugin (`$patch: delete`)"), line


def test_a_missing_tier_two_kustomizations_depend_on_names_both_in_its_line(check):
    repo = {rel: data for rel, data in repository().items() if "cilium" not in rel}
    repo["clusters/dev/later.yaml"] = dump(ks("later", "./kubernetes/dev/later", **EVERY_KS, wait=True,
                                              dependsOn=[{"name": "cilium"}]))
    repo["kubernetes/dev/later/cm.yaml"] = dump(cm("later", "default"))
    assert check(repo=repo).problems == [
        "Pulumi.dev.yaml: gpu-platform:flux.tiers[0]: flux-system/cilium: the stack says the repository declares "
        "this Kustomization (declaredBy: repository) but Flux's walk does not reach it; flux-system/later "
        "(clusters/dev/later.yaml) and flux-system/plex (clusters/dev/gpu-platform/plex.yaml) depend on it, and Flux "
        "would wait for it forever; hint: fix its name or namespace there, or declare it in the repository"]


def test_only_a_strategic_merge_patch_saying_patch_delete_deletes():
    from gitops.checks.applied_specs import _deletes

    assert _deletes({"patch": "$patch: delete\nkind: Kustomization"}) is True
    assert [_deletes(p) for p in ("$patch: delete", {"target": {"kind": "Kustomization"}},
                                  {"patch": "kind: Kustomization\nspec: [unclosed"},
                                  {"patch": "kind: Kustomization\nspec:\n  suspend: true"},
                                  {"patch": "- op: remove\n  path: /spec"})] == [False] * 5


def test_a_kustomization_another_parent_still_applies_is_not_said_deleted_by_the_patch(check):
    """The bootstrap lists the entry folder too: its own applying is the refusal, not a deletion."""
    repo = patching(DELETE)
    repo["clusters/dev/kustomization.yaml"] = resources("flux-system", "apps.yaml", "cilium.yaml", "gpu-platform")
    problems = check(repo=repo, files=with_plugin(), flux_graph=plugin_graph()).problems
    assert problems and not [p for p in problems if "$patch: delete" in p], problems
