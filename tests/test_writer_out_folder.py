"""OUT itself: when it may be created, what creating it reports, and a file under it that cannot be read, each
problem one line. Direct calls, no Pulumi program."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from gitops.writer import OwnershipError, check_out, make_out, read_regular


def test_a_check_accepts_an_out_that_does_not_exist_even_below_a_file(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    check_out(tmp_path / "file" / "out", creating=False)  # --check of a missing OUT: nothing to compare, no error
    with pytest.raises(OwnershipError):
        check_out(tmp_path / "file" / "out", creating=True)


def test_an_out_below_missing_folders_may_be_created(tmp_path: Path):
    check_out(tmp_path / "a" / "b" / "out", creating=True)
    assert not (tmp_path / "a").exists()


def test_an_out_that_cannot_be_made_is_one_line_naming_why(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "out"
    with pytest.raises(OwnershipError) as info:
        make_out(out)
    assert info.value.lines == [f"{out}: cannot be created (Not a directory); hint: choose another --out"]


def test_a_file_that_cannot_be_read_is_one_line_naming_why(tmp_path: Path, monkeypatch):
    (tmp_path / "a.yaml").write_text("kind: x\n")

    def unreadable(self: Path) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    with pytest.raises(OwnershipError) as info:
        read_regular(tmp_path, "a.yaml")
    assert info.value.lines == [f"{tmp_path / 'a.yaml'}: cannot be read (Input/output error); hint: check its "
                                "permissions"]


def test_a_missing_file_reads_as_nothing_and_a_present_one_as_its_bytes(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.yaml").write_bytes(b"kind: x\n")
    assert read_regular(tmp_path, "a/b.yaml") == b"kind: x\n"
    assert read_regular(tmp_path, "a/c.yaml") is None
    assert read_regular(tmp_path, "missing/c.yaml") is None
