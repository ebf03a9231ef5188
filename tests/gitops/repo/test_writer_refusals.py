"""How the writer's refusals read: every problem one line, the message the lines joined, a refusal before the
commit point never marked as a half-way export, an OS error named by its reason or, without one, its type."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from builders import write_tree
from conftest import LAB_APP as APP, lab_tree
from gitops.repo.out_folder import OwnershipError, why as _why

CM = "components/lab/app/configmap.settings.yaml"


def test_two_hand_written_files_are_two_lines_and_the_message_is_those_lines(tmp_path: Path):
    out = tmp_path / "out"
    (out / "components/lab/app").mkdir(parents=True)
    (out / APP).write_bytes(b"kind: Deployment\n")
    (out / CM).write_bytes(b"kind: ConfigMap\n")
    with pytest.raises(OwnershipError) as info:
        write_tree(out, lab_tree({APP: b"kind: Job\n", CM: b"kind: Job\n"}))
    assert len(info.value.lines) == 2
    assert str(info.value) == f"{info.value.lines[0]}\n{info.value.lines[1]}"
    assert info.value.partial is False  # refused before the commit point: nothing half-way to complete


def test_an_ownership_error_is_not_partial_unless_raised_after_the_commit_point():
    assert OwnershipError(["one"]).partial is False
    assert OwnershipError(["one"], partial=True).partial is True


def test_an_os_error_is_named_by_its_reason_or_without_one_by_its_type():
    assert _why(OSError(errno.ENOSPC, "No space left on device")) == "No space left on device"
    assert _why(FileNotFoundError()) == "FileNotFoundError"
    assert _why(OSError()) == "OSError"


