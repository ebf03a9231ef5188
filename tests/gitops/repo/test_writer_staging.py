"""Staging, before the commit point: the files the export writes (their mode), and the journal's temporary file
(`<stack>.tmp` beside the journal), which an export killed just before its commit point leaves behind. Small
hand-made trees, no Pulumi program."""

from __future__ import annotations

import os
import stat

from builders import write_tree
from conftest import LAB_APP as APP, files_of, lab_tree
from gitops.repo.out_folder import OwnershipError, interrupted, recover
from gitops.tree import Tree
from model.layout import WORK_DIR

FILES = {APP: b"kind: Deployment\nmetadata:\n  name: app\n"}


def tree(files: dict[str, bytes] | None = None) -> Tree:
    return lab_tree(FILES if files is None else files)


def test_exported_files_are_readable_by_all_and_executable_by_none_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        write_tree(tmp_path / "out", tree())
    finally:
        os.umask(old)
    for rel in tree().files:
        assert stat.S_IMODE((tmp_path / "out" / rel).stat().st_mode) == 0o644, rel


def test_a_journal_left_half_written_before_the_commit_point_is_replaced_whole(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree())
    (out / WORK_DIR).mkdir()
    (out / WORK_DIR / "lab.tmp").write_text('{"write": [], "delete": []}' + " " * 4000 + "cut off here")
    new = tree({APP: b"kind: Job\n"})
    assert set(write_tree(out, new).write) == {APP, new.index_path}
    assert files_of(out) == new.files
    assert not interrupted(out, "lab") and not (out / WORK_DIR / "lab.tmp").exists()


def test_a_symlink_where_the_journal_is_staged_is_never_followed(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree())
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not the export's")
    (out / WORK_DIR).mkdir()
    (out / WORK_DIR / "lab.tmp").symlink_to(elsewhere)
    before = files_of(out)
    new = tree({APP: b"kind: Job\n"})
    try:
        write_tree(out, new)
    except OwnershipError as exc:  # refused before the commit point: nothing changed
        assert exc.lines == [f"{out / WORK_DIR}: staging the export failed (Too many levels of symbolic links); "
                             "nothing was changed; hint: fix the cause and run the export again"]
        assert not exc.partial and files_of(out) == before
    else:  # or the link was removed as a leftover, never written through
        assert files_of(out) == new.files
    assert elsewhere.read_text() == "not the export's"
    assert not interrupted(out, "lab")


def test_a_journal_left_aside_alone_is_discarded_by_recovery_and_the_work_folder_goes_with_it(tmp_path):
    # Killed after the staged files were moved away and before the commit rename: only `<stack>.tmp` is left.
    out = tmp_path / "out"
    write_tree(out, tree())
    before = files_of(out)
    (out / WORK_DIR).mkdir()
    (out / WORK_DIR / "lab.tmp").write_text('{"write": [], "delete": []}')
    assert recover(out, "lab") == "discarded an interrupted export that had not reached its commit point"
    assert not (out / WORK_DIR).exists() and files_of(out) == before
