"""The export's default OUT: a fresh copy of a sample repository, so a first `make export` shows the main job.

The sample is the project's `repo/` when it has one (examples/<name>/, whose stacks are made for it), else
examples/home-network-k3s/repo, the repository the shipped stacks describe. It is copied into build/sample/<name>/
as a Git work tree with one commit, so `git diff` there is the pull request the export would open, and the export
ends by printing that change. Git is the tool users review with; without it the copy is exported all the same.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from gitops.engine.stacks import ROOT

HOME_SAMPLE = ROOT / "examples" / "home-network-k3s" / "repo"
SAMPLES = ROOT / "build" / "sample"
# A commit that needs no user configuration, signs nothing and runs no hook of the machine's.
_GIT = ["git", "-c", "user.name=gpu-platform sample", "-c", "user.email=sample@gpu-platform.invalid",
        "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "init.defaultBranch=main"]


def sample_of(project_dir: Path) -> Path:
    """The sample repository for the stacks of `project_dir`."""
    own = project_dir / "repo"
    return own if own.is_dir() else HOME_SAMPLE


def _name(sample: Path) -> str:
    return sample.parent.name if sample.name == "repo" else sample.name


def last_out(project_dir: Path) -> Path:
    """Where an export without --out last wrote for the stacks of `project_dir`, as a relative path (from the
    project root, where make runs): the preview's default OUT."""
    return Path("build", "sample", _name(sample_of(project_dir)))


def fresh_copy(sample: Path, into: Path = SAMPLES) -> Path:
    """build/sample/<name>/: the sample as committed, whatever an earlier run left there."""
    name = _name(sample)
    out = into / name
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(sample, out, symlinks=True)
    if shutil.which("git"):
        for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"{name}, as the sample holds it"]):
            subprocess.run([*_GIT, "-C", str(out), *step], check=True, capture_output=True)
    return out


def change(out: Path) -> list[str]:
    """What the export changed in the fresh copy, one line per file as `git diff --stat` shows a pull request
    (new files included), and its summary line; empty without git."""
    if not (out / ".git").is_dir() or not shutil.which("git"):
        return []
    subprocess.run([*_GIT, "-C", str(out), "add", "-A", "--intent-to-add"], check=True, capture_output=True)
    shown = subprocess.run([*_GIT, "-C", str(out), "diff", "--stat=120", "--no-color"], check=True,
                           capture_output=True, text=True)
    return [line.rstrip() for line in shown.stdout.splitlines() if line.strip()]
