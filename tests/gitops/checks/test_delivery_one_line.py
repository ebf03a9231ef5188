"""gitops/checks/delivery.py in real exports (issue 43, "a refusal is one line naming the file to change"): one
problem, one line, the file at fault first, what the same cause takes down folded into that line.

Each test copies a layout's fixture repository (tests/conftest.py LAYOUT_REPOSITORIES), plants one problem, runs the
export in-process and reads its `error:` lines (builders.refused_export: exit 2, nothing written, no traceback). The
cases first, each line whole; then every planted problem in every layout where it reaches the export, counted."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from builders import refused_export
from conftest import LAYOUT_REPOSITORIES, export, make_project, repo_copy

FB, SPLIT, PER_APP, SHARED = "flux-bootstrap's default", "split", "per-app", "shared-base"
Plant = Callable[[Path], None]


def refusal(tmp_path: Path, capsys, layout: str, plant: Plant, exported_first: bool = False) -> list[str]:
    """The error lines of the layout's export with `plant` done to its repository (after a first export when
    `exported_first`: the problem sits beside files the export already wrote)."""
    name, stacks, _ = LAYOUT_REPOSITORIES[layout]
    out = repo_copy(tmp_path, name)
    project = make_project(tmp_path / "project", stacks)
    if exported_first:
        assert export(out, *stacks, project=project) == 0
    plant(out)
    return refused_export(capsys, out, project, *stacks)


# --- what each case plants -----------------------------------------------------------------------------------------

def appended(rel: str, text: str) -> Plant:
    """`text` added at the end of the repository's file `rel`."""
    def plant(out: Path) -> None:
        path = out / rel
        path.write_text(path.read_text().rstrip("\n") + "\n" + text)
    return plant


def both(*plants: Plant) -> Plant:
    def plant(out: Path) -> None:
        for p in plants:
            p(out)
    return plant


def written(rel: str, text: str) -> Plant:
    def plant(out: Path) -> None:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return plant


def linked_out(rel: str) -> Plant:
    """The folder `rel` moved out of the repository (beside it) and replaced by a symlink to where it went."""
    def plant(out: Path) -> None:
        target = out.parent / f"outside-{rel.replace('/', '-')}"
        if (out / rel).exists():
            shutil.move(out / rel, target)
        else:
            target.mkdir()
        os.symlink(target, out / rel)
    return plant


def edited(rel: str, old: str, new: str) -> Plant:
    def plant(out: Path) -> None:
        text = (out / rel).read_text()
        assert old in text, rel
        (out / rel).write_text(text.replace(old, new, 1))
    return plant


def flow_data(rel: str) -> Plant:
    """The `data:` block that ends the ConfigMap file `rel` written in flow style (as JSON), every value kept."""
    def plant(out: Path) -> None:
        head, _, block = (out / rel).read_text().partition("\ndata:\n")
        (out / rel).write_text(f"{head}\ndata: {json.dumps(yaml.safe_load(block))}\n")
    return plant


def in_stack_file(stack: str, old: str, new: str) -> Plant:
    """A change of the project's stack file, not of the repository: `refusal` makes the project beside OUT."""
    def plant(out: Path) -> None:
        path = out.parent / "project" / f"Pulumi.{stack}.yaml"
        text = path.read_text()
        assert old in text, path
        path.write_text(text.replace(old, new, 1))
    return plant


CLUSTER_APPS = "kubernetes/flux/cluster/ks.yaml"  # cluster-template's Kustomization of kubernetes/apps
KUBE_SYSTEM = "kubernetes/apps/kube-system/kustomization.yaml"  # one of its namespace folders, cilium's
FB_PLATFORM = "kubernetes/prod/platform/kustomization.yaml"  # the platform tier the prod stack's export declares
BASE = "clusters/base/kustomization.yaml"  # the shared base every overlay includes
CHILDREN = "          deletionPolicy: WaitForTermination\n"  # in cluster-apps' patch of every child Kustomization
SUSPEND_EVERY_CHILD = edited(CLUSTER_APPS, CHILDREN, CHILDREN + "          suspend: true\n")
SUSPEND_IN_GOTK_SYNC = appended("clusters/prod/flux-system/gotk-sync.yaml", (
    "  patches:\n    - patch: |\n        apiVersion: kustomize.toolkit.fluxcd.io/v1\n        kind: Kustomization\n"
    "        metadata:\n          name: all\n        spec:\n          suspend: true\n      target:\n"
    "        kind: Kustomization\n        name: (plex|intel-gpu-plugin)\n"))
FB_CYCLE = both(appended(FB_PLATFORM, "- ../platform-config\n"),
                appended("kubernetes/prod/platform-config/kustomization.yaml", "- ../platform\n"))
TEMPLATE_CYCLE = both(appended("kubernetes/apps/default/kustomization.yaml", "  - ../kube-system\n"),
                      appended(KUBE_SYSTEM, "  - ../default\n"))
BASE_CYCLE = both(appended("platform-config/kustomization.yaml", "  - ../clusters/base\n"),
                  edited(BASE, "  - cluster-vars.yaml\n",
                         "  - cluster-vars.yaml\n  - ../../platform-config\n"))
NO_PATH = edited(CLUSTER_APPS, "  path: ./kubernetes/apps\n", "")
# Issue 54: the export's line in the base beside the user's spelling of it; a cluster-vars patch in flow style where
# the stacks' values differ (so the export has keys to set there); a componentsDir the stacks of the base disagree on.
GITOPS = "  gpu-platform:gitops:\n"
SHARED_PLUGIN = "  gpu-platform:intelGpuPlugin:\n    sharedDevNum: {n}\n    sharedDevNumReason: {n} apps\n" + GITOPS
TWO_SPELLINGS = appended(BASE, "  - ./intel-gpu-plugin.yaml\n")
FLOW_CLUSTER_VARS = both(in_stack_file("dev", GITOPS, SHARED_PLUGIN.format(n=2)),
                         in_stack_file("prod", GITOPS, SHARED_PLUGIN.format(n=3)),
                         flow_data("clusters/prod/cluster-vars.yaml"))
COMPONENTS_DIR = in_stack_file("prod", "    componentsDir: platform\n", "    componentsDir: comps\n")
SECOND = "resources:\n  - service.plex.yaml\n"  # a hand-written kustomization file beside the export's


def component(entry: str) -> Plant:
    """`entry` first in the components of cluster-template's kube-system folder (which lists one already)."""
    return edited(KUBE_SYSTEM, "components:\n", f"components:\n  - {entry}\n")


# The files and messages the whole-line cases share.
TIER = "Flux's walk cannot reach kube-system/cilium, which the stack says the repository declares (flux.tiers)"
# cluster-apps failing takes down the export's entry folder and, with the Kustomizations listed there, every object
# the export writes: its component folders (split) or the entry's own sub-folders (per-app, said with the entry).
FAILS_CLUSTER_APPS = ("flux-system/cluster-apps (kubernetes/flux/cluster/ks.yaml) fails to build because of it, and "
                      "Flux holds back whatever depends on it; nothing applies the 15 objects the export writes to ")
SPLIT_TAKEN = (f"{FAILS_CLUSTER_APPS}kubernetes/apps/gpu-platform/, kubernetes/gpu-platform/intel-gpu-plugin/ and "
               f"kubernetes/gpu-platform/plex/ (e.g. ConfigMap flux-system/cluster-vars); {TIER}")
PER_APP_TAKEN = f"{FAILS_CLUSTER_APPS}kubernetes/apps/gpu-platform/ (e.g. ConfigMap flux-system/cluster-vars); {TIER}"


# --- the cases, each one line, whole -------------------------------------------------------------------------------

def test_a_kustomization_cycle_is_one_line_naming_the_file_that_closes_it(tmp_path, capsys):
    """Was one line per Kustomization that builds the cycle, each led by that Kustomization."""
    assert refusal(tmp_path, capsys, FB, FB_CYCLE) == [
        "kubernetes/prod/platform/kustomization.yaml: resources: '../platform-config': a cycle of kustomizations "
        "(kubernetes/prod/platform-config/ -> kubernetes/prod/platform/ -> kubernetes/prod/platform-config/); "
        "kustomize refuses to build it; 2 Kustomizations fail to build because of it (flux-system/platform-config, "
        "flux-system/platform), and Flux holds back whatever depends on them; hint: remove '../platform-config' from "
        "the resources of kubernetes/prod/platform/kustomization.yaml"]


def test_a_cycle_kustomize_finds_is_one_line_naming_the_file_that_closes_it_and_what_it_takes_down(tmp_path,
                                                                                                    capsys):
    """kubectl's words for a cycle (a kustomization that does more than list resources), read back into the entry
    that closes it."""
    assert refusal(tmp_path, capsys, SPLIT, TEMPLATE_CYCLE) == [
        f"{KUBE_SYSTEM}: resources: '../default': a cycle of kustomizations (kubernetes/apps/default/ -> "
        f"kubernetes/apps/kube-system/ -> kubernetes/apps/default/); kustomize refuses to build it; {SPLIT_TAKEN}; "
        f"hint: remove '../default' from the resources of {KUBE_SYSTEM}"]


def test_a_parent_patch_suspending_two_exported_kustomizations_is_one_line_naming_the_patch(tmp_path, capsys):
    """Was one line per exported Kustomization the patch reaches."""
    assert refusal(tmp_path, capsys, SPLIT, SUSPEND_EVERY_CHILD) == [
        "kubernetes/flux/cluster/ks.yaml: spec.patches[0] of flux-system/cluster-apps: sets spec.suspend: true on the "
        "export's flux-system/intel-gpu-plugin and flux-system/plex: Flux would never apply them, while the export, "
        "its checklist and its evidence gate take them as delivered; hint: take suspend out of the repository (`flux "
        "suspend kustomization` on the cluster is the emergency valve, not git)"]


def test_a_components_entry_that_is_a_file_is_one_line_naming_the_kustomization_that_lists_it(tmp_path, capsys):
    """Was led by the entry folder's ConfigMap 'not applied', the cause in the middle, and a second line for the
    tier the failed build hid."""
    assert refusal(tmp_path, capsys, SPLIT, component("./namespace.yaml")) == [
        f"{KUBE_SYSTEM}: components: './namespace.yaml': a file; kustomize takes a component from a folder holding "
        f"its kustomization.yaml (kind: Component); {SPLIT_TAKEN}; hint: list the component's folder, not a file in it"]


def test_a_components_entry_escaping_the_repository_is_one_line_naming_the_kustomization_that_lists_it(tmp_path,
                                                                                                        capsys):
    assert refusal(tmp_path, capsys, SPLIT, component("../../../../elsewhere")) == [
        f"{KUBE_SYSTEM}: components: '../../../../elsewhere': leaves the repository; {SPLIT_TAKEN}; hint: point it "
        "inside the repository, or take it out"]


def test_a_second_kustomization_file_beside_an_exported_one_is_one_line_naming_the_file_to_delete(tmp_path, capsys):
    """Was the folder's 'not applied' line and the Kustomization's 'build fails' line, both led by what it broke."""
    plant = written("kubernetes/gpu-platform/plex/kustomization.yml", SECOND)
    assert refusal(tmp_path, capsys, SPLIT, plant, exported_first=True) == [
        "kubernetes/gpu-platform/plex/kustomization.yml: a second kustomization file beside the export's "
        "kubernetes/gpu-platform/plex/kustomization.yaml: kustomize and Flux refuse to build "
        "kubernetes/gpu-platform/plex/ with more than one; flux-system/plex "
        "(kubernetes/apps/gpu-platform/ks.plex.yaml) fails to build because of it, and Flux holds back whatever "
        "depends on it; nothing applies the 9 objects the "
        "export writes to kubernetes/gpu-platform/plex/ (e.g. Deployment plex/plex); hint: delete "
        "kubernetes/gpu-platform/plex/kustomization.yml; the export's kubernetes/gpu-platform/plex/kustomization.yaml "
        "lists what kubernetes/gpu-platform/plex/ holds"]


def test_a_kustomization_without_spec_path_is_one_line_naming_its_file(tmp_path, capsys):
    """Was one 'not applied' line per folder of the export (per-app: the entry and each component's), and one for
    the tier."""
    assert refusal(tmp_path, capsys, PER_APP, NO_PATH) == [
        f"{CLUSTER_APPS}: spec.path: not set, so Flux builds the whole repository (./), and that build fails: . "
        "(Flux's generated kustomization): Secret cluster-secrets comes from both kubernetes/apps/default and "
        "kubernetes/components/sops/cluster-secrets.sops.yaml; kustomize refuses an object twice in one build; "
        f"{PER_APP_TAKEN}; hint: set spec.path to the folder this Kustomization is meant to apply"]


def test_a_components_dir_linked_out_of_the_repository_is_one_line_naming_the_link(tmp_path, capsys):
    """The shared base's platform/: was the platform tier applying the export's folder (once per stack) and a timeout
    too short for its DaemonSet, none naming the link. The walk sees below a link only what the export writes, so
    it judges nothing there and OUT's own guard (gitops/repo/out_folder.py) names the link, once for the run."""
    name, _, _ = LAYOUT_REPOSITORIES[SHARED]
    assert refusal(tmp_path, capsys, SHARED, linked_out("platform"), exported_first=True) == [
        f"{tmp_path / name / 'platform'}: a symlink where the export reads or writes; the export never follows links "
        "under OUT; hint: replace it with a real file or folder"]


# --- every planted problem, in every layout where it reaches the export, counted -----------------------------------

PLANTED = [
    pytest.param(FB, FB_CYCLE, False, id="cycle-flux-bootstrap"),
    pytest.param(SPLIT, TEMPLATE_CYCLE, False, id="cycle-split"),
    pytest.param(PER_APP, TEMPLATE_CYCLE, False, id="cycle-per-app"),
    pytest.param(SHARED, BASE_CYCLE, False, id="cycle-shared-base"),
    pytest.param(FB, SUSPEND_IN_GOTK_SYNC, False, id="suspend-flux-bootstrap"),
    pytest.param(SPLIT, SUSPEND_EVERY_CHILD, False, id="suspend-split"),
    pytest.param(PER_APP, SUSPEND_EVERY_CHILD, False, id="suspend-per-app"),
    pytest.param(SHARED, SUSPEND_IN_GOTK_SYNC, False, id="suspend-shared-base"),
    pytest.param(FB, appended(FB_PLATFORM, "components:\n- ./namespace.cert-manager.yaml\n"), False,
                 id="component-file-flux-bootstrap"),
    pytest.param(SPLIT, component("./namespace.yaml"), False, id="component-file-split"),
    pytest.param(PER_APP, component("./namespace.yaml"), False, id="component-file-per-app"),
    pytest.param(SHARED, appended(BASE, "components:\n  - ./cilium.yaml\n"), False, id="component-file-shared-base"),
    pytest.param(FB, appended(FB_PLATFORM, "components:\n- ../../../../x\n"), False,
                 id="component-escape-flux-bootstrap"),
    pytest.param(SPLIT, component("../../../../x"), False, id="component-escape-split"),
    pytest.param(PER_APP, component("../../../../x"), False, id="component-escape-per-app"),
    pytest.param(SHARED, appended(BASE, "components:\n  - ../../../x\n"), False, id="component-escape-shared-base"),
    pytest.param(FB, written("components/prod/plex/kustomization.yml", SECOND), True, id="second-file-flux-bootstrap"),
    pytest.param(SPLIT, written("kubernetes/gpu-platform/plex/kustomization.yml", SECOND), True,
                 id="second-file-split"),
    pytest.param(PER_APP, written("kubernetes/apps/gpu-platform/plex/app/Kustomization", SECOND), True,
                 id="second-file-per-app"),
    pytest.param(SHARED, written("platform/intel-gpu-plugin/kustomization.yml", SECOND), True,
                 id="second-file-shared-base"),
    # Without spec.path a Kustomization builds the whole repository: it reaches the export only where the export's
    # folders hang below it (cluster-template's cluster-apps); elsewhere its failure is the repository's own notice.
    pytest.param(SPLIT, NO_PATH, False, id="no-path-split"),
    pytest.param(PER_APP, NO_PATH, False, id="no-path-per-app"),
    pytest.param(FB, linked_out("components/prod"), True, id="link-flux-bootstrap"),
    pytest.param(SPLIT, linked_out("kubernetes/gpu-platform"), True, id="link-split"),
    pytest.param(PER_APP, linked_out("kubernetes/apps/gpu-platform"), True, id="link-per-app"),
    pytest.param(SHARED, linked_out("platform"), True, id="link-shared-base"),
    pytest.param(SHARED, TWO_SPELLINGS, True, id="entry-in-two-spellings-shared-base"),
    pytest.param(SHARED, FLOW_CLUSTER_VARS, False, id="cluster-vars-in-flow-style-shared-base"),
    pytest.param(SHARED, COMPONENTS_DIR, False, id="components-dir-differs-shared-base"),
]


@pytest.mark.parametrize(("layout", "plant", "exported_first"), PLANTED)
def test_no_planted_problem_gives_more_than_one_line(tmp_path, capsys, layout, plant, exported_first):
    lines = refusal(tmp_path, capsys, layout, plant, exported_first)
    assert len(lines) == 1, "\n".join(lines)


def test_the_repositorys_own_plex_beside_the_exported_one_is_one_line_per_stack_led_by_plex_delivered_by(tmp_path,
                                                                                                        capsys):
    from builders import HOME_DEV, HOME_PROD, home_project, home_repo

    repo = home_repo(tmp_path)
    exported_plex = {s: text.replace("    deliveredBy: repository\n", "") for s, text in
                     (("dev", HOME_DEV), ("prod", HOME_PROD))}
    lines = refused_export(capsys, repo, home_project(tmp_path, dev=exported_plex["dev"], prod=exported_plex["prod"]),
                           "prod")
    assert [line for line in lines if "plex.deliveredBy" in line] == [
        f"Pulumi.{stack}.yaml: gpu-platform:plex.deliveredBy: export (the default), but flux-system/apps-wave-0 (path "
        "./apps/wave-0) already applies the repository's own plex (Deployment plex/plex and 8 more from "
        "apps/wave-0/plex.yaml) that the export writes to platform/plex/ for flux-system/plex; hint: set "
        "plex.deliveredBy: repository (the export then writes no Plex and holds the repository's to the GPU gate), "
        "or take plex out of apps/wave-0/plex.yaml" for stack in ("prod", "dev")]
    assert len(lines) == 3, lines  # and apps-wave-1's dependsOn, which plex joining wave 0 would need


# --- a folder the export writes, applied by a second Kustomization too (an entry in a hand-written kustomization's
# resources, or a hand-written Flux Kustomization of it), in every layout, counted ---------------------------------

def extra_ks(path: str) -> str:
    """A hand-written Flux Kustomization of `path`, beside the bootstrap's other Kustomizations."""
    return ("---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: extra\n"
            f"  namespace: flux-system\nspec:\n  interval: 1h\n  path: {path}\n  prune: true\n"
            "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")


APPLIED_TWICE = [
    # The entry also puts plex under apps-wave-0's wait and 5m timeout: that is the same cause, not a second line.
    pytest.param(FB, appended("kubernetes/prod/apps/wave-0/kustomization.yaml", "- ../../../../components/prod/plex\n"),
                 id="applied-twice-flux-bootstrap"),
    pytest.param(SPLIT, written("kubernetes/flux/cluster/ks.extra.yaml", extra_ks("./kubernetes/gpu-platform/plex")),
                 id="applied-twice-split"),
    pytest.param(PER_APP, written("kubernetes/flux/cluster/ks.extra.yaml",
                                  extra_ks("./kubernetes/apps/gpu-platform/plex/app")), id="applied-twice-per-app"),
    pytest.param(SHARED, appended("apps/wave-0/kustomization.yaml", "  - ../../platform/intel-gpu-plugin\n"),
                 id="applied-twice-shared-base"),
]


@pytest.mark.parametrize(("layout", "plant"), APPLIED_TWICE)
def test_an_exported_folder_applied_by_a_second_kustomization_is_one_line(tmp_path, capsys, layout, plant):
    lines = refusal(tmp_path, capsys, layout, plant)
    assert len(lines) == 1, "\n".join(lines)
