"""OUT as the Git work tree the user reviews the export in: the pull request's base (what its summary compares
with), the export's change as `git status --short` shows it, and, when asked, exactly those paths staged.

Git is the tool the user reviews with, so the export asks it rather than reading `.git` itself. Every command runs
with `-C OUT`, no hook, no pager, no configured external diff and no optional lock (`--no-optional-locks`, so a
status never rewrites the user's index); without git, or where OUT is no work tree, each answer is empty and the
export says nothing of Git. The base's files are read into a private temporary folder outside OUT, removed on exit.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_GIT = ["git", "--no-optional-locks", "-c", "core.hooksPath=/dev/null", "-c", "core.quotePath=false",
        "-c", "color.ui=false"]
_DEFAULT_BRANCHES = ("main", "master")


@dataclass(frozen=True)
class Base:
    """The commit the pull request is measured against: `ref` as the user knows it, `commit` its hash."""

    ref: str
    commit: str

    def shown(self) -> str:
        return f"{self.ref} at {self.commit[:7]}" if self.ref != self.commit else self.commit[:7]


class BaseError(Exception):
    """--base names nothing this work tree holds."""


def _git(out: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes] | None:
    if shutil.which("git") is None:
        return None
    env = {**os.environ, "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        return subprocess.run([*_GIT, "-C", str(out), *args], input=stdin, capture_output=True, env=env, check=False,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None


def is_work_tree(out: Path) -> bool:
    """OUT is the top of a Git work tree (a folder inside someone else's repository is not the user's clone)."""
    done = _git(out, "rev-parse", "--show-toplevel")
    return done is not None and done.returncode == 0 and Path(done.stdout.decode().strip()).resolve() == out.resolve()


def _commit(out: Path, ref: str) -> str | None:
    done = _git(out, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    return done.stdout.decode().strip() if done is not None and done.returncode == 0 else None


def _default_branch(out: Path) -> str | None:
    """The branch pull requests go into: origin's HEAD where the clone knows it, else a local main or master."""
    done = _git(out, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return done.stdout.decode().strip()
    return next((b for b in _DEFAULT_BRANCHES if _commit(out, f"refs/heads/{b}")), None)


def pull_request_base(out: Path, ref: str | None) -> Base | None:
    """The base of the pull request: `ref` where given (BaseError where OUT holds no such commit), else the merge-base
    of HEAD with the default branch; None where OUT is no work tree or holds no commit yet."""
    if not is_work_tree(out):
        if ref is not None:
            raise BaseError(f"--base {ref}: {out} is not a Git work tree")
        return None
    if ref is not None:
        commit = _commit(out, ref)
        if commit is None:
            raise BaseError(f"--base {ref}: no such commit in {out}")
        return Base(ref, commit)
    branch, head = _default_branch(out), _commit(out, "HEAD")
    if head is None:
        return None
    if branch is None:
        return Base("HEAD", head)
    done = _git(out, "merge-base", "HEAD", branch)
    if done is None or done.returncode != 0:
        return Base("HEAD", head)
    return Base(branch, done.stdout.decode().strip())


@contextmanager
def files_at(out: Path, base: Base) -> Iterator[Path]:
    """The base commit's files, in a private temporary folder outside OUT (removed on exit); links and special
    files are left out (the `data` filter), so nothing read there leads back into OUT or elsewhere."""
    with tempfile.TemporaryDirectory(prefix="gpu-platform-base-") as scratch:
        root = Path(scratch, "tree")
        root.mkdir()
        done = _git(out, "archive", "--format=tar", base.commit)
        if done is not None and done.returncode == 0:
            with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
                archive.extractall(root, members=[m for m in archive.getmembers() if m.isfile() or m.isdir()],
                                   filter="data")
        yield root


def status(out: Path, paths: list[str]) -> list[str]:
    """`git status --short` of `paths` (new files each on its own line); empty without git or a work tree."""
    if not paths or not is_work_tree(out):
        return []
    done = _git(out, "status", "--short", "--untracked-files=all", "--", *paths)
    return done.stdout.decode(errors="replace").splitlines() if done is not None and done.returncode == 0 else []


def stage(out: Path, paths: list[str]) -> bool:
    """`git add` of exactly `paths` (a deleted one staged as deleted); False where Git refused."""
    done = _git(out, "add", "--all", "--", *paths) if paths else None
    return done is not None and done.returncode == 0


__all__ = ["Base", "BaseError", "files_at", "is_work_tree", "pull_request_base", "stage", "status"]
