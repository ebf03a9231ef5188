"""gitops/repo/out_folder.py `remove_stale_scratch` and `remove_legacy_probes`: what an earlier version's run killed
mid-walk left under OUT's work folder (the walk's mirror with its links into OUT, its overlays, the Kyverno check's
input; this version keeps them outside OUT) and the empty write probes it left in the folders it writes into are
removed by the next export, `--check` and `--remove`, so the user's repository holds nothing but the export's own
files and lines: the work tree clean after the commit, `--remove` back to the original commit. A check leaves a running
process's scratch alone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from builders import git, home_project, home_repo
from gitops.export import main as export_main
from gitops.repo.out_folder import remove_stale_scratch
from model.layout import WORK_DIR


def dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def plant(out: Path, pid: int) -> list[Path]:
    """What a walk killed at `pid` leaves: the mirror (real folders, links into OUT, a written file), an overlay,
    the Kyverno check's input."""
    mirror = out / WORK_DIR / f"flux-view.{pid}"
    (mirror / "clusters" / "base").mkdir(parents=True)
    os.symlink(out / "clusters/base/kustomization.yaml", mirror / "clusters/base/kustomization.yaml")
    os.symlink(out / "apps", mirror / "apps")
    (mirror / "clusters/base/intel-gpu-plugin.yaml").write_text("kind: Kustomization\n")
    overlay = out / WORK_DIR / f"flux-overlay.{pid}" / "0"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text("resources: []\n")
    kyverno = out / WORK_DIR / f"kyverno.{pid}.prod"
    kyverno.mkdir(parents=True)
    (kyverno / "resources.yaml").write_text("kind: Pod\n")
    return [mirror.parent / mirror.name, overlay.parent, kyverno]


def run(out: Path, project: Path, *flags: str) -> int:
    return export_main(["--stack", "prod", "--out", str(out), "--project-dir", str(project), "--quiet", *flags])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return home_repo(tmp_path)


def test_the_scratch_of_a_killed_walk_is_gone_after_the_next_export_check_and_remove(repo, tmp_path):
    original = git(repo, "rev-parse", "HEAD^{tree}")
    project = home_project(tmp_path / "p")
    plant(repo, dead_pid())
    assert run(repo, project) == 0
    assert not (repo / WORK_DIR).exists()
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "the plugin")
    plant(repo, dead_pid())
    assert run(repo, project, "--check") == 0
    assert not (repo / WORK_DIR).exists() and git(repo, "status", "--porcelain") == ""
    plant(repo, dead_pid())
    assert run(repo, project, "--remove") == 0
    assert not (repo / WORK_DIR).exists()
    git(repo, "add", "-A")
    assert git(repo, "write-tree") == original  # byte for byte the repository before the first export


def test_a_check_leaves_a_running_processs_scratch_and_an_export_takes_all(repo, tmp_path):
    work = repo / WORK_DIR
    running = plant(repo, os.getppid())  # a live process: a concurrent check's, in use
    (work / "prod.journal.notes").write_text("not scratch\n")  # not a scratch name: never touched here
    remove_stale_scratch(repo, exclusive=False)
    assert all(p.is_dir() for p in running)
    remove_stale_scratch(repo, exclusive=True)  # under the exclusive lock no other run can be using any
    assert sorted(p.name for p in work.iterdir()) == ["prod.journal.notes"]


def test_a_link_in_the_work_folder_is_removed_never_followed(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's\n")
    (repo / WORK_DIR).mkdir()
    os.symlink(outside, repo / WORK_DIR / f"flux-view.{dead_pid()}")
    remove_stale_scratch(repo, exclusive=True)
    assert (outside / "keep.txt").read_text() == "the user's\n" and not (repo / WORK_DIR).exists()


@pytest.mark.plants_work_names("a user's files of the probe's name, which the export must keep")
def test_an_earlier_versions_empty_write_probes_are_removed_by_the_next_export_and_nothing_else(repo, tmp_path):
    project = home_project(tmp_path / "p")
    probes = [repo / f".gitops-export-probe.{dead_pid()}", repo / "clusters/base" / ".gitops-export-probe.41"]
    for probe in probes:
        probe.touch()
    kept = [repo / "clusters/base/.gitops-export-probe.42", repo / "clusters/base/.gitops-export-probe.x"]
    kept[0].write_text("the user's\n")  # not empty: not a probe
    kept[1].touch()  # not a pid
    assert run(repo, project) == 0
    assert [p.exists() for p in probes] == [False, False]
    assert [p.exists() for p in kept] == [True, True]
