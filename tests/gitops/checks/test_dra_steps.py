"""gitops/checks/dra_steps.py: no step of the DRA route's move skipped between two exports into one repository: the
step the repository's export is at, read only from the shape the program records in its index, and the migration
run step by step in one repository, a skip refused in one line and nothing written."""

from __future__ import annotations

import json

import pytest

from conftest import export, make_project, stack_text
from tests.model.dra.test_gate_migration import EVERY_CLAIM, EVERY_SLICE, stage


@pytest.mark.parametrize(("recorded", "step"), [
    (None, 0), ({}, 0), ({"draMigration": {"step": 3}}, 3), ({"draMigration": {"step": True}}, 0),
    ({"draMigration": {"step": 2}}, 0), ({"draMigration": {"step": "5"}}, 0), ({"draMigration": [5]}, 0),
])
def test_the_recorded_step_is_read_only_from_the_shape_the_program_writes(recorded, step):
    from gitops.checks.dra_steps import recorded_step

    assert recorded_step(recorded) == step


def test_the_migration_runs_step_by_step_in_one_repository_and_a_skip_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    project = tmp_path / "project"

    def export_at(name: str, evidence: dict[str, str]) -> int:
        make_project(project, {"prod": stage("prod", name)}, evidence)
        return export(out, "prod", project=project)

    assert export(out, "prod", project=make_project(project, {"prod": stack_text("prod")})) == 0
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    capsys.readouterr()
    assert export_at("plugin-removed", EVERY_CLAIM) == 2  # the device-plugin route straight to step 5
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error: ")]
    assert line == ('error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "plugin-removed": a step skipped: '
                    "clusters/prod/gpu-platform/export-index.json records the export in the repository at the "
                    "device-plugin route, and the next export may go to step 1 (driver-added) only; each step must be "
                    "merged and proven on the cluster before the next; hint: export step 1 (driver-added) first "
                    "(docs/dra.md)")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == before
    assert export_at("driver-added", {}) == 0
    assert export_at("plugin-removed", EVERY_CLAIM) == 2  # 1 -> 5 skips the switch to claims
    assert export_at("apps-on-claims", EVERY_SLICE) == 0
    assert list(out.rglob("resourceclaimtemplate.plex-gpu.yaml")) and list(out.rglob("daemonset.intel-gpu-plugin*"))
    assert export_at("plugin-removed", EVERY_CLAIM) == 0
    assert not list(out.rglob("*intel-gpu-plugin*")), "the plugin's files are removed with it"
    index = json.loads(next(out.rglob("export-index.json")).read_text())
    assert index["stackOutputs"]["draMigration"]["step"] == 5
    assert export_at("apps-on-claims", EVERY_CLAIM) == 0  # a rollback: the plugin comes back, the claims stay
    assert list(out.rglob("daemonset.intel-gpu-plugin*"))
