"""scripts/drift-check as a CI step runs it: its own --help (not the export's), and the export's writing options
refused, so a drift check can never change the repository."""

from __future__ import annotations

import subprocess

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "drift-check"


def test_help_is_the_drift_checks_own_with_its_exit_codes():
    run = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stderr == ""
    lines = run.stdout.splitlines()
    assert lines[0] == ("usage: scripts/drift-check --stack <stack> [--stack ...] --out <your GitOps repository> "
                        "[--quiet]")
    assert lines[-4:] == ["exit codes:", "  0  the repository matches the export",
                          "  1  drift: a changed, missing or stale file (each listed, with a diff)",
                          "  2  an error or a refusal: one line per problem on stderr"]
    assert "--remove" not in run.stdout


@pytest.mark.parametrize("option", ["--remove", "--rewrite-headers"])
def test_an_option_that_writes_is_refused_in_one_line_before_anything_runs(tmp_path, option):
    run = subprocess.run([str(SCRIPT), "--stack", "dev", "--out", str(tmp_path), option], capture_output=True,
                         text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [f"error: {option}: not an option of the drift check, which only compares; "
                                       f"hint: run python -m gitops.export {option}"]
    assert list(tmp_path.iterdir()) == []
