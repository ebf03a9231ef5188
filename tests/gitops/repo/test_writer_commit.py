"""What is on disk at the commit point: the journal (the renames, the index last, and the deletions) and the
flushes that make every staged byte durable before it: one syncfs of the work folder with the `syncfs` optimization,
else an fsync of every staged file and of the journal. Small hand-made trees, no Pulumi program."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import gitops.repo.writer
from builders import write_tree
from conftest import LAB_APP as APP, lab_tree
from gitops.engine import optimizations
from gitops.tree import Tree
from model.layout import WORK_DIR

INDEX = "clusters/lab/gpu-platform/export-index.json"
ZZ = "components/lab/zz/service.zz.yaml"
OLD = "components/lab/old/service.old.yaml"


def journal_at_commit(monkeypatch, out: Path) -> list[dict]:
    """The journal each recovery after a commit finds (write_tree's own recovery, right after its commit point)."""
    seen: list[dict] = []
    real = gitops.repo.writer.recover

    def recover(out_: Path, run: str, *trees: Tree) -> str | None:
        journal = out_ / WORK_DIR / f"{run}.journal"
        if journal.exists():
            seen.append(json.loads(journal.read_bytes()))
        return real(out_, run, *trees)

    monkeypatch.setattr(gitops.repo.writer, "recover", recover)
    return seen


def test_the_journal_renames_every_changed_file_the_index_last_and_deletes_what_is_no_longer_produced(
        tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_tree(out, lab_tree({APP: b"kind: Deployment\n", OLD: b"kind: Service\n"}))
    seen = journal_at_commit(monkeypatch, out)
    write_tree(out, lab_tree({APP: b"kind: Job\n", ZZ: b"kind: Service\n"}))
    assert seen == [{"write": [APP, ZZ, INDEX], "delete": [OLD]}]  # the index sorts before ZZ, but goes last


def flushes(monkeypatch) -> tuple[list[int], list[Path]]:
    fsyncs: list[int] = []
    syncs: list[Path] = []
    real_fsync, real_syncfs = os.fsync, gitops.repo.writer._syncfs

    def fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    def syncfs(folder: Path) -> None:
        syncs.append(folder)
        real_syncfs(folder)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(gitops.repo.writer, "_syncfs", syncfs)
    return fsyncs, syncs


FILES = {APP: b"kind: Deployment\n", ZZ: b"kind: Service\n"}  # with the index: three staged files and the journal


@pytest.mark.skipif(gitops.repo.writer._libc_syncfs() is None, reason="no syncfs(2) on this platform")
def test_with_the_syncfs_optimization_the_work_folder_is_flushed_once_and_no_file_on_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv(optimizations.ENV, raising=False)
    fsyncs, syncs = flushes(monkeypatch)
    write_tree(tmp_path / "out", lab_tree(FILES))
    assert syncs == [tmp_path / "out" / WORK_DIR] and fsyncs == []


def test_with_the_optimization_off_every_staged_file_and_the_journal_is_fsynced(tmp_path, monkeypatch):
    monkeypatch.setenv(optimizations.ENV, "syncfs")
    fsyncs, syncs = flushes(monkeypatch)
    write_tree(tmp_path / "out", lab_tree(FILES))
    assert len(fsyncs) == 4 and syncs == []


def test_without_syncfs_on_the_platform_every_staged_file_and_the_journal_is_fsynced(tmp_path, monkeypatch):
    monkeypatch.delenv(optimizations.ENV, raising=False)
    monkeypatch.setattr(gitops.repo.writer, "_libc_syncfs", lambda: None)
    fsyncs, syncs = flushes(monkeypatch)
    write_tree(tmp_path / "out", lab_tree(FILES))
    assert len(fsyncs) == 4 and syncs == []


class Killed(BaseException):
    """The process dying at that instant (a BaseException: nothing in the writer catches it)."""


def test_an_export_killed_at_its_commit_point_is_discarded_whole_by_the_next_run(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_tree(out, lab_tree(FILES))
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith(".journal"):
            raise Killed
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(Killed):
        write_tree(out, lab_tree({**FILES, APP: b"kind: Job\n"}))
    monkeypatch.setattr(os, "replace", real_replace)
    assert (out / WORK_DIR).is_dir()  # the staged files and the journal written aside, not yet committed
    assert gitops.repo.writer.recover(out, "lab") == ("discarded an interrupted export that had not reached its commit "
                                                 "point")
    assert not (out / WORK_DIR).exists()
    assert (out / APP).read_bytes() == FILES[APP]


def test_staging_that_fails_on_the_first_file_is_one_line_and_leaves_no_work_folder(tmp_path, monkeypatch):
    import errno

    monkeypatch.setenv(optimizations.ENV, "syncfs")  # an fsync per file: the first one fails, before any journal exists

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "out"
    with pytest.raises(gitops.repo.writer.OwnershipError) as info:
        write_tree(out, lab_tree(FILES))
    assert info.value.lines == [f"{out / WORK_DIR}: staging the export failed (No space left on device) (the disk is "
                                "full); nothing was changed; hint: fix the cause and run the export again"]
    assert not (out / WORK_DIR).exists()


def test_a_full_disk_before_the_staging_folder_exists_is_one_line(tmp_path, monkeypatch):
    import errno

    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args, **kwargs) -> None:
        if WORK_DIR in self.parts:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    out = tmp_path / "out"
    with pytest.raises(gitops.repo.writer.OwnershipError) as info:
        write_tree(out, lab_tree(FILES))
    assert info.value.lines == [f"{out / WORK_DIR}: staging the export failed (No space left on device) (the disk is "
                                "full); nothing was changed; hint: fix the cause and run the export again"]
    assert list(out.iterdir()) == []
