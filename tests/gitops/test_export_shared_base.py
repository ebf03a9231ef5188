"""The export (gitops/export.py) aimed at the user's own repository (issue 29): one base for every cluster, overlays
that only patch cluster-vars (R-ENV-02), examples/home-network-k3s/repo. The export changes exactly the files
the plugin's pull request changed, keeps every other byte, one stack named exports every stack of its base, a hand
edit of any file it writes is drift, and a forged index is refused. What the stacks of a base merge into is
tests/gitops/checks/test_shared_base.py; the repository's own Plex, tests/gitops/checks/test_reference.py; the
export's lines in the repository's own files, tests/gitops/repo/test_own_file_lines.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders import (
    HOME_PULL_REQUEST as PULL_REQUEST,
    HOME_RECORDS as RECORDS,
    HOME_REPO as REPO,
    PLUGIN_KS,
    forge_index as forge,
    git,
    git_status as status,
    home_project as project,
    home_repo,
    refused_export as refused,
)
from conftest import export, files_of, make_project, repository, stack_text
from gitops.export import main as export_main
from gitops.flux.build import RepoView
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk

UNTOUCHED = ("platform/kustomization.yaml", "apps/", "catalog/")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of the fixture, committed, so `git status` shows exactly what the export changed."""
    return home_repo(tmp_path)


# --- the pull request, and nothing else ------------------------------------------------------------------------

def test_exporting_both_stacks_changes_exactly_the_pull_requests_files_and_a_second_run_nothing(repo, tmp_path):
    proj = project(tmp_path)
    assert export(repo, "dev", "prod", project=proj) == 0
    assert status(repo) == PULL_REQUEST | {RECORDS}
    assert git(repo, "diff", "--", *UNTOUCHED) == ""
    assert git(repo, "diff", "clusters/base/kustomization.yaml").count("\n+  - intel-gpu-plugin.yaml") == 1
    assert sorted(p.name for p in (repo / "platform" / "intel-gpu-plugin").iterdir()) == [
        "daemonset.intel-gpu-plugin.yaml", "kustomization.yaml", "namespace.intel-gpu-plugin.yaml",
        "networkpolicy.default-deny.yaml"]
    assert sorted(p.relative_to(repo).as_posix() for p in (repo / "gpu-platform").rglob("*")) == [
        "gpu-platform/dev", "gpu-platform/dev/DELIVERY.md", "gpu-platform/dev/POST-MERGE.md",
        "gpu-platform/dev/export-index.json", "gpu-platform/dev/post-merge",
        "gpu-platform/dev/post-merge/chainsaw-test.yaml", "gpu-platform/prod", "gpu-platform/prod/DELIVERY.md",
        "gpu-platform/prod/POST-MERGE.md", "gpu-platform/prod/export-index.json", "gpu-platform/prod/post-merge",
        "gpu-platform/prod/post-merge/chainsaw-test.yaml"]
    checklist = (repo / "gpu-platform/prod/POST-MERGE.md").read_text()
    assert "`flux get kustomizations intel-gpu-plugin -n flux-system`" in checklist
    # Plex is the repository's: its readiness is that of the Kustomization Flux's walk found applying it.
    assert "4. `plex` exists and is Ready: `flux get kustomizations apps-wave-0 -n flux-system`" in checklist
    first = files_of(repo)
    assert export(repo, "prod", "dev", project=proj) == 0
    assert files_of(repo) == first
    assert export(repo, "dev", project=proj, check=True) == 0


TOGETHER = ("Exported together with `{other}`, which writes into `clusters/base/` too: every export, `--check` and "
            "`--remove` of `{stack}` runs it as well, since one stack alone would overwrite what the other wrote "
            "there.")


def test_one_stack_named_exports_every_stack_of_its_base_and_its_records_say_so_once(repo, tmp_path, capsys):
    proj = project(tmp_path)
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj)]) == 0
    assert (repo / "gpu-platform/dev/export-index.json").is_file()
    for stack, other in (("prod", "dev"), ("dev", "prod")):
        delivery = (repo / f"gpu-platform/{stack}/DELIVERY.md").read_text().splitlines()
        assert delivery.count(TOGETHER.format(stack=stack, other=other)) == 1
    together = files_of(repo)
    assert export(repo, "dev", project=proj) == 0
    assert files_of(repo) == together, "--stack dev after --stack prod is the same as both at once"


@pytest.mark.parametrize("flags", [[], ["--check"], ["--remove"]], ids=["export", "check", "remove"])
def test_no_run_repeats_on_the_terminal_that_the_stacks_of_a_base_go_together(repo, tmp_path, capsys, flags):
    proj = project(tmp_path)
    if flags:
        assert export(repo, "prod", project=proj) == 0
    capsys.readouterr()
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), *flags]) == 0
    printed, warned = capsys.readouterr()
    assert "together" not in printed + warned and "exported with" not in printed + warned


def test_nothing_depends_on_the_plugin_and_each_overlay_applies_it_once(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    for stack in ("dev", "prod"):
        view = walk(RepoView(repo), f"./clusters/{stack}")
        assert view.problems == []
        assert view.kustomizations[PLUGIN_KS].status == "built"
        assert not [k for k in view.kustomizations.values() if PLUGIN_KS in k.depends]
        for oid in view.kustomizations[PLUGIN_KS].objects:
            assert view.applied_by[oid] == [PLUGIN_KS], oid
        assert view.applied_by[ObjectId("apps", "Deployment", "plex", "plex")] == [("flux-system", "apps-wave-0")]
        assert len(view.kustomizations[PLUGIN_KS].objects) == 3
        # An overlay of ../base built by kustomize: each Kustomization named at the base's file that declares it.
        assert view.kustomizations[PLUGIN_KS].declared_in == "clusters/base/intel-gpu-plugin.yaml"
        assert view.kustomizations[("flux-system", "cilium")].declared_in == "clusters/base/cilium.yaml"


# --- drift -----------------------------------------------------------------------------------------------------

HAND_EDITS = {
    "clusters/base/intel-gpu-plugin.yaml": ("interval: 1h", "interval: 2h"),
    "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml": ("IfNotPresent", "Always"),
    "platform/intel-gpu-plugin/kustomization.yaml": ("- namespace.intel-gpu-plugin.yaml\n", ""),
    "platform/intel-gpu-plugin/namespace.intel-gpu-plugin.yaml": ("app-namespace: 'false'", "app-namespace: 'true'"),
    "platform/intel-gpu-plugin/networkpolicy.default-deny.yaml": ("    - Egress\n", ""),
    "clusters/base/kustomization.yaml": ("  - intel-gpu-plugin.yaml", "  # - intel-gpu-plugin.yaml"),
    "gpu-platform/prod/post-merge/chainsaw-test.yaml": ("        allocatable:\n", "        capacity:\n"),
}


def test_every_file_the_export_writes_into_the_repository_has_a_hand_edit_case(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    written = {p.relative_to(repo).as_posix() for p in [*(repo / "platform/intel-gpu-plugin").iterdir(),
                                                         repo / "clusters/base/intel-gpu-plugin.yaml",
                                                         *(repo / "gpu-platform/prod").rglob("*.yaml")]}
    assert set(HAND_EDITS) == written | {"clusters/base/kustomization.yaml"}


@pytest.mark.parametrize("rel", sorted(HAND_EDITS))
def test_a_hand_edit_of_a_written_file_or_of_the_entry_is_drift(repo, tmp_path, rel):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    old, new = HAND_EDITS[rel]
    text = (repo / rel).read_text()
    assert old in text
    (repo / rel).write_text(text.replace(old, new))
    assert export(repo, "prod", project=proj, check=True) == 1


# --- an object the repository applies too --------------------------------------------------------------------


def test_an_object_a_repository_tier_in_another_namespace_applies_too_is_refused_naming_that_file(tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(repository("flux-bootstrap"), out)
    proj = make_project(tmp_path / "project", {"prod": stack_text("prod")})
    assert export(out, "prod", project=proj) == 0
    # The repository's own media tier, in a namespace of its own, also renders Plex.
    media = out / "kubernetes/prod/media"
    media.mkdir(parents=True)
    shutil.copy(out / "components/prod/plex/deployment.plex.yaml", media / "plex.yaml")
    (media / "kustomization.yaml").write_text("resources:\n  - plex.yaml\n")
    (out / "clusters/prod/media.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "media", "namespace": "media"},
        "spec": {"interval": "10m", "path": "./kubernetes/prod/media", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}}}))
    # The repository's own Plex Deployment: the fix is most likely the stack key, so the line leads with it.
    assert refused(capsys, out, proj, "prod") == [
        "Pulumi.prod.yaml: gpu-platform:plex.deliveredBy: export (the default), but media/media (path "
        "./kubernetes/prod/media) already applies the repository's own plex (Deployment plex/plex from "
        "kubernetes/prod/media/plex.yaml) that the export writes to components/prod/plex/ for flux-system/plex; hint: "
        "set plex.deliveredBy: repository (the export then writes no Plex and holds the repository's to the GPU "
        "gate), or take plex out of kubernetes/prod/media/plex.yaml"]


# --- a forged index --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", ["apps/wave-0/kustomization.yaml", "clusters/dev/cluster-vars.yaml"])
def test_a_forged_index_never_gets_the_export_to_edit_a_file_it_does_not_keep_lines_in(repo, tmp_path, capsys, rel):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    spec = {"resources": ["plex.yaml"]} if rel.startswith("apps") else {"data": {"GPU_PLATFORM_X": "1"}}
    forge(repo, "prod", lambda d: d.setdefault("edits", {}).update({rel: spec}))
    assert refused(capsys, repo, proj, "prod") == [
        f"{repo}/gpu-platform/prod/export-index.json: edits.{rel}: not an edit the export makes (an entry of "
        "clusters/base/kustomization.yaml, or GPU_PLATFORM_ keys of the overlay's cluster-vars); hint: restore it "
        "from git, or delete it together with the stack's exported folders"]


def test_a_forged_index_entry_for_a_repository_file_is_refused_not_pruned(repo, tmp_path, capsys):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    from gitops.index import content_hash

    rel = "platform/longhorn/helmrelease.yaml"
    forge(repo, "prod", lambda d: d["files"].update({rel: content_hash(rel, (repo / rel).read_bytes())}))
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [f"{repo}/gpu-platform/prod/export-index.json: files.{rel}: a file without the export's generated "
                     "header; the export trusts no entry it could not have written; hint: restore the index from git"]


def test_the_fixture_is_what_its_renderer_and_its_own_lint_say(tmp_path):
    """The fixture holds to its own gate: catalog/render.py reproduces apps/wave-0/plex.yaml byte for byte and
    yamllint -c ci/yamllint.yaml passes on the whole repository, before any export."""
    render = subprocess.run([sys.executable, "catalog/render.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert render.returncode == 0, render.stdout + render.stderr
    lint = subprocess.run([sys.executable, "-m", "yamllint", "-f", "parsable", "-c", "ci/yamllint.yaml", "."], cwd=REPO,
                          capture_output=True, text=True)
    assert (lint.returncode, lint.stdout) == (0, "")
