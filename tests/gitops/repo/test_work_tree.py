"""gitops/repo/work_tree.py: OUT as the user's Git work tree: the pull request's base (the merge-base of HEAD with
the default branch, or a named ref), its files read outside OUT, the export's paths as `git status --short` shows
them, and exactly those staged when asked; nothing of Git where OUT is no work tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitops.repo.work_tree import BaseError, files_at, is_work_tree, pull_request_base, stage, status


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    out = tmp_path / "repo"
    out.mkdir()
    git(out, "init", "-q", "-b", "main")
    (out / "a.yaml").write_text("a: 1\n")
    git(out, "add", "-A")
    git(out, "commit", "-qm", "one")
    return out


def test_the_base_is_the_merge_base_of_head_with_the_default_branch_however_far_the_branch_went(repo):
    start = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "feature")
    (repo / "a.yaml").write_text("a: 2\n")
    git(repo, "commit", "-qam", "two")
    base = pull_request_base(repo, None)
    assert base is not None and (base.ref, base.commit) == ("main", start)
    assert base.shown() == f"main at {start[:7]}"
    git(repo, "checkout", "-q", "main")
    (repo / "b.yaml").write_text("b: 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main moved on")
    git(repo, "checkout", "-q", "feature")
    assert pull_request_base(repo, None).commit == start  # type: ignore[union-attr]


def test_origins_head_is_the_default_branch_where_the_clone_knows_it(repo, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-qb", "feature")
    assert pull_request_base(clone, None).ref == "origin/main"  # type: ignore[union-attr]


def test_a_named_base_is_that_commit_and_one_that_names_nothing_is_refused(repo):
    assert pull_request_base(repo, "HEAD").commit == git(repo, "rev-parse", "HEAD")  # type: ignore[union-attr]
    with pytest.raises(BaseError, match="--base nope: no such commit in"):
        pull_request_base(repo, "nope")
    with pytest.raises(BaseError):
        pull_request_base(repo, "--output=/tmp/x")  # an option is never passed on to git as one


def test_a_folder_that_is_no_work_tree_or_inside_someone_elses_has_no_base_status_or_stage(repo, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (repo / "sub").mkdir()
    for folder in (plain, repo / "sub"):
        assert not is_work_tree(folder)
        assert pull_request_base(folder, None) is None and status(folder, ["x"]) == []
    with pytest.raises(BaseError, match="is not a Git work tree"):
        pull_request_base(plain, "main")


def test_the_bases_files_are_read_in_a_folder_outside_out_that_is_gone_afterwards(repo):
    base = pull_request_base(repo, None)
    (repo / "a.yaml").write_text("a: changed\n")
    assert base is not None
    with files_at(repo, base) as root:
        assert not root.is_relative_to(repo) and (root / "a.yaml").read_text() == "a: 1\n"
    assert not root.exists()


def test_status_shows_each_new_file_and_stage_adds_exactly_the_paths_given(repo):
    (repo / "new").mkdir()
    (repo / "new" / "one.yaml").write_text("x: 1\n")
    (repo / "new" / "two.yaml").write_text("x: 2\n")
    (repo / "a.yaml").write_text("a: 3\n")
    (repo / "mine.txt").write_text("the user's\n")
    paths = ["a.yaml", "new/one.yaml", "new/two.yaml"]
    assert status(repo, paths) == [" M a.yaml", "?? new/one.yaml", "?? new/two.yaml"]
    assert stage(repo, paths)
    assert status(repo, paths) == ["M  a.yaml", "A  new/one.yaml", "A  new/two.yaml"]
    assert git(repo, "status", "--short", "--", "mine.txt") == "?? mine.txt"
