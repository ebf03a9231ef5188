"""The drift check runs the repository's own Kyverno policies on what the export would write, with the Kyverno CLI
from `make tools`, when the CLI is on PATH (gitops/checks/kyverno.py): silent without it, a line per stack when it
passes, and a refusal naming the file, the object, the policy and the rule when the repository's admission would
refuse an object. Run by `make e2e`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, files_of, make_project, repo_copy, repository, stack_text
from gitops.export import main as export_main

pytestmark = pytest.mark.e2e

KYVERNO = Path(__file__).resolve().parents[2] / "build" / "tools" / "bin" / "kyverno"
HOME_POLICIES = repository("home-network-k3s") / "platform" / "kyverno"
HOME_STACKS = {s: (ROOT / f"Pulumi.{s}.yaml").read_text() for s in ("dev", "prod")}  # the shipped stacks


@pytest.fixture
def kyverno_on_path(tmp_path, monkeypatch) -> None:
    """The CLI, and nothing else of build/tools/bin, first on PATH: how a user opts in."""
    if not KYVERNO.is_file():
        pytest.fail(f"{KYVERNO}: not built; hint: run `make tools` (make e2e does)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "kyverno").symlink_to(KYVERNO)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def check(out: Path, project: Path, *stacks: str) -> int:
    argv = [a for s in stacks for a in ("--stack", s)]
    return export_main([*argv, "--out", str(out), "--project-dir", str(project), "--check"])


def test_without_the_cli_on_path_the_check_runs_no_policy(tmp_path, capsys):
    assert shutil.which("kyverno") is None, "a kyverno on this machine's PATH: the opt-in cannot be tested"
    repo = repo_copy(tmp_path, "home-network-k3s")
    project = make_project(tmp_path / "project", HOME_STACKS)
    assert export_main(["--stack", "dev", "--stack", "prod", "--out", str(repo), "--project-dir", str(project),
                        "--quiet"]) == 0
    capsys.readouterr()
    assert check(repo, project, "prod") == 0
    assert "kyverno" not in capsys.readouterr().out


def test_the_user_s_repository_passes_its_own_four_policies(tmp_path, capsys, kyverno_on_path):
    repo = repo_copy(tmp_path, "home-network-k3s")
    project = make_project(tmp_path / "project", HOME_STACKS)
    assert export_main(["--stack", "dev", "--stack", "prod", "--out", str(repo), "--project-dir", str(project),
                        "--quiet"]) == 0
    before = files_of(repo)
    capsys.readouterr()
    assert check(repo, project, "prod") == 0
    out = capsys.readouterr().out
    for stack in ("dev", "prod"):
        assert f"kyverno: {stack}: the repository's 4 Kyverno policies judged " in out, out
    assert files_of(repo) == before  # the CLI's scratch files were under OUT's work folder, and are gone


def test_an_object_the_repository_s_admission_refuses_is_refused_naming_file_object_policy_and_rule(
        tmp_path, capsys, kyverno_on_path):
    """The stack names its egress label `egress` where the repository's policy reads `egress-class`: the program's
    own rules (policy/rules.py, which read the configured key) pass it, the repository's Kyverno refuses Plex."""
    repo = repo_copy(tmp_path, "flux-bootstrap")
    shutil.copytree(HOME_POLICIES, repo / "infrastructure" / "kyverno")
    text = stack_text("prod")
    assert "gpu-platform:appPolicy:" not in text
    text = text.replace("  gpu-platform:plex:\n", "  gpu-platform:appPolicy:\n    egressClassLabel: egress\n"
                                                   "  gpu-platform:plex:\n")
    project = make_project(tmp_path / "project", {"prod": text})
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(project), "--quiet"]) == 0
    before = files_of(repo)
    capsys.readouterr()
    assert check(repo, project, "prod") == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: components/prod/plex/deployment.plex.yaml: Deployment plex/plex: refused by Kyverno policy "
        "require-egress-class-label (infrastructure/kyverno/require-egress-class-label.yaml), rule "
        "namespace-has-egress-class (fail); hint: change the stack config so the object passes, or the policy if it "
        "is wrong; the export writes nothing the cluster's admission would refuse"], errors
    assert files_of(repo) == before


def test_a_policy_in_audit_reports_but_never_refuses(tmp_path, capsys, kyverno_on_path):
    repo = repo_copy(tmp_path, "flux-bootstrap")
    shutil.copytree(HOME_POLICIES, repo / "infrastructure" / "kyverno")
    policy = repo / "infrastructure" / "kyverno" / "require-egress-class-label.yaml"
    policy.write_text(policy.read_text().replace("validationFailureAction: Enforce", "validationFailureAction: Audit"))
    text = stack_text("prod").replace("  gpu-platform:plex:\n", "  gpu-platform:appPolicy:\n    egressClassLabel: "
                                      "egress\n  gpu-platform:plex:\n")
    project = make_project(tmp_path / "project", {"prod": text})
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(project), "--quiet"]) == 0
    capsys.readouterr()
    assert check(repo, project, "prod") == 0
    assert "kyverno: prod: the repository's 4 Kyverno policies judged " in capsys.readouterr().out
