"""gitops/checks/reference.py: the repository's own Plex (`plex.deliveredBy: repository`, the shared base of
tests/fixtures/repos/home-network-k3s) held to the evidence gate: requesting the GPU without evidence for every stack
is refused naming its file; with evidence, the export and the preview list the fields its renderer must change."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builders import (
    home_project as project,
    home_repo,
    refused_export as refused,
)
from conftest import evidence_for, export


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of tests/fixtures/repos/home-network-k3s, committed, so `git status` shows exactly what the export
    changed."""
    return home_repo(tmp_path)


def test_the_repositorys_plex_requesting_the_gpu_without_evidence_for_every_stack_is_refused_naming_its_file(
        repo, tmp_path, capsys):
    plex = repo / "apps/wave-0/plex.yaml"
    docs = list(yaml.safe_load_all(plex.read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0].setdefault("resources", {}).setdefault(
        "limits", {})["gpu.intel.com/i915"] = "1"
    plex.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)})}
    lines = refused(capsys, repo, project(tmp_path, evidence=evidence), "prod")
    assert len(lines) == 1, lines  # prod has its evidence; dev has none
    assert lines[0].startswith("apps/wave-0/plex.yaml: Deployment plex/plex: spec.template.spec.containers[0]."
                               "resources.limits.gpu.intel.com/i915: requests gpu.intel.com/i915, but the evidence "
                               "does not back it for dev")
    assert "make verify-nodes STACK=dev" in lines[0]


def test_with_evidence_for_every_stack_the_export_lists_the_fields_the_repositorys_plex_must_change(
        repo, tmp_path, capsys):
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                "dev": evidence_for("dev", {"k3s-dev-1": 1})}
    capsys.readouterr()
    assert export(repo, "prod", project=project(tmp_path, evidence=evidence)) == 0
    err = capsys.readouterr().err
    told = [line for line in err.splitlines() if "evidence allows the switch" in line]
    assert len(told) == 2
    assert "apps/wave-0/plex.yaml" in told[0]
    assert "resources.limits.gpu.intel.com/i915: (absent) -> '1'" in told[0]
    assert "spec.template.spec.volumes" in told[0] and "/dev/dri" in told[0]


def test_the_preview_says_the_host_path_stays_then_which_fields_the_repositorys_plex_must_change(repo, tmp_path):
    from gitops.preview import preview

    assert export(repo, "prod", project=project(tmp_path)) == 0
    before = preview("dev", repo, project(tmp_path))
    assert any("keeps its /dev/dri hostPath: evidence for dev does not allow" in line for _, line in before.diagnostics)
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                "dev": evidence_for("dev", {"k3s-dev-1": 1})}
    after = preview("dev", repo, project(tmp_path / "with-evidence", evidence=evidence))
    told = [line for _, line in after.diagnostics if "evidence allows the switch" in line]
    assert len(told) == 1 and "resources.limits.gpu.intel.com/i915: (absent) -> '1'" in told[0]
    # The repository's Plex is not the export's: with or without evidence, no exported object changes.
    assert {s.op for s in before.steps} == {s.op for s in after.steps} == {"same"}
