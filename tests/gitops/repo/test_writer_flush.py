"""The flush before the commit point (the `syncfs` optimization): it opens the work folder itself, never a link or a
file, and a flush that fails is the OS error it reports, so the export stops before its commit point and changes
nothing. Small hand-made trees, no Pulumi program."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

import gitops.repo.writer
from builders import write_tree
from conftest import LAB_APP as APP, files_of, lab_tree
from gitops.engine import optimizations
from gitops.repo.out_folder import OwnershipError, interrupted
from gitops.repo.writer import _syncfs
from gitops.tree import Tree
from model.layout import WORK_DIR


def tree(app: bytes) -> Tree:
    return lab_tree({APP: app})


def failing_syncfs(code: int):
    def syncfs(fd: int) -> int:
        assert os.path.isdir(f"/proc/self/fd/{fd}")
        ctypes.set_errno(code)
        return -1
    return syncfs


@pytest.mark.skipif(gitops.repo.writer._libc_syncfs() is None, reason="no syncfs(2) on this platform")
def test_the_flush_opens_a_real_folder_only(tmp_path: Path):
    _syncfs(tmp_path)  # a folder: flushed
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(OSError) as info:
        _syncfs(tmp_path / "file")
    assert info.value.errno == errno.ENOTDIR
    with pytest.raises(OSError):  # never followed (Linux says ENOTDIR for a link opened as a folder, no-follow)
        _syncfs(tmp_path / "link")


def test_a_failed_flush_raises_the_os_error_it_reports(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(gitops.repo.writer, "_libc_syncfs", lambda: failing_syncfs(errno.EIO))
    with pytest.raises(OSError) as info:
        _syncfs(tmp_path)
    assert (info.value.errno, info.value.strerror) == (errno.EIO, "Input/output error")


@pytest.mark.parametrize(("code", "why"), [(errno.EIO, "Input/output error"),
                                           (errno.ENOSPC, "No space left on device) (the disk is full")])
def test_an_export_whose_flush_fails_stops_before_its_commit_point_and_changes_nothing(tmp_path, monkeypatch,
                                                                                      code, why):
    monkeypatch.delenv(optimizations.ENV, raising=False)
    out = tmp_path / "out"
    write_tree(out, tree(b"kind: Deployment\n"))
    before = files_of(out)
    monkeypatch.setattr(gitops.repo.writer, "_libc_syncfs", lambda: failing_syncfs(code))
    with pytest.raises(OwnershipError) as info:
        write_tree(out, tree(b"kind: Job\n"))
    assert info.value.lines == [f"{out / WORK_DIR}: staging the export failed ({why}); nothing was changed; hint: fix "
                                "the cause and run the export again"]
    assert files_of(out) == before and not interrupted(out, "lab") and not (out / WORK_DIR).exists()
