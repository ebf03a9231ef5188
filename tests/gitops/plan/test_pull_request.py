"""gitops/plan/pull_request.py: the summary is the pull request's, measured against its base where OUT is a Git
work tree (the same text however often the branch is exported; an object of a shared base once, with its clusters;
the export's lines in the user's files and the records each one line), against OUT as it was where it is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from builders import export_prod, git, home_on_a_branch, home_project


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return home_on_a_branch(tmp_path)


def test_two_exports_on_one_branch_give_the_same_summary_and_a_shared_base_object_is_listed_once(
        repo, tmp_path, capsys):
    project = home_project(tmp_path / "p")
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    assert export_prod(capsys, repo, project, "--summary", str(first))[0] == 0
    assert export_prod(capsys, repo, project, "--summary", str(second))[0] == 0
    assert first.read_text() == second.read_text()
    text = first.read_text()
    assert text.count("`Kustomization flux-system/intel-gpu-plugin`") == 1
    assert "| create | `Kustomization flux-system/intel-gpu-plugin` | `clusters/base/intel-gpu-plugin.yaml` | " \
           "prod, dev |" in text
    assert ("Lines the export keeps in your files: `clusters/base/kustomization.yaml`: `- intel-gpu-plugin.yaml`."
            in text)
    assert "Records: `gpu-platform/prod`, `gpu-platform/dev`" in text


def test_a_commit_on_the_branch_does_not_change_the_summary_but_a_named_base_does(repo, tmp_path, capsys):
    project = home_project(tmp_path / "p")
    first, second, named = tmp_path / "first.md", tmp_path / "second.md", tmp_path / "named.md"
    assert export_prod(capsys, repo, project, "--summary", str(first))[0] == 0
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "the plugin")
    assert export_prod(capsys, repo, project, "--summary", str(second))[0] == 0
    assert first.read_text() == second.read_text()
    assert export_prod(capsys, repo, project, "--summary", str(named), "--base", "HEAD")[0] == 0
    assert named.read_text().splitlines()[2] == "no object changes."


def test_outside_a_git_work_tree_the_summary_is_against_out_as_it_was(repo, tmp_path, capsys):
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
    project = home_project(tmp_path / "p")
    code, out, _ = export_prod(capsys, plain, project)
    assert code == 0 and "prod, dev: 4 to create\n" in out and "against" not in out.splitlines()[2]
    code, out, _ = export_prod(capsys, plain, project)
    assert code == 0 and "prod, dev: no object changes\n" in out and "the change in" not in out
