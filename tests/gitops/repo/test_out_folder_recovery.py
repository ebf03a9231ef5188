"""Completing an export cut off after its commit point (the journal), file by file: what was already renamed or
deleted before the cut is skipped, what changed under OUT since is never followed or removed, and a failure half-way
is one line that keeps the journal. Small hand-made trees, no Pulumi program."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import write_tree
from conftest import LAB_APP as APP, files_of, lab_tree
from gitops.repo.out_folder import OwnershipError, interrupted, recover
from gitops.tree import Tree
from model.layout import WORK_DIR

INDEX = "clusters/lab/gpu-platform/export-index.json"
OLD = "components/lab/old/service.old.yaml"
GONE = "components/lab/gone/service.gone.yaml"
FILES = {
    APP: b"kind: Deployment\nmetadata:\n  name: app\n",
    "clusters/lab/gpu-platform/kustomization.yaml": b"resources:\n- ../../../components/lab/app\n",
}


def tree(extra: dict[str, bytes] | None = None, **changed: bytes) -> Tree:
    files = {**FILES, **(extra or {})}
    if "app" in changed:
        files[APP] = changed["app"]
    return lab_tree(files)


def cut_off(out: Path, write: dict[str, bytes | None], delete: list[str]) -> Path:
    """The journal of an export cut off after its commit point; a write given as None was renamed before the cut
    (its staged file is gone). Returns the staging folder."""
    staging = out / WORK_DIR / "lab.staging"
    staging.mkdir(parents=True, exist_ok=True)
    for rel, data in write.items():
        if data is not None:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_bytes(data)
    (out / WORK_DIR / "lab.journal").write_text(json.dumps({"write": list(write), "delete": delete}))
    return staging


def test_a_file_renamed_before_the_cut_is_not_renamed_again(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree())
    new = tree(app=b"kind: Job\n")
    (out / APP).write_bytes(new.files[APP])  # renamed into place before the cut: its staged copy is gone
    cut_off(out, {APP: None, INDEX: new.files[INDEX]}, [])
    assert recover(out, "lab", new) == "completed an interrupted export"
    assert files_of(out) == new.files
    assert not interrupted(out, "lab") and not (out / WORK_DIR).exists()


def test_a_journal_whose_staging_folder_is_gone_completes_all_the_same(tmp_path):
    # Every staged file was renamed before the cut, and the emptied staging folder was cleaned away by hand.
    out = tmp_path / "out"
    write_tree(out, tree())
    new = tree(app=b"kind: Job\n")
    (out / APP).write_bytes(new.files[APP])
    (out / INDEX).write_bytes(new.files[INDEX])
    staging = cut_off(out, {APP: None, INDEX: None}, [])
    staging.rmdir()
    assert recover(out, "lab", new) == "completed an interrupted export"
    assert files_of(out) == new.files and not (out / WORK_DIR).exists()


def test_a_symlink_in_the_staging_folder_is_never_moved_into_out(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree())
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_bytes(b"kind: Secret\n")
    new = tree(app=b"kind: Job\n")
    staging = cut_off(out, {APP: None, INDEX: new.files[INDEX]}, [])
    (staging / APP).parent.mkdir(parents=True)
    (staging / APP).symlink_to(elsewhere)
    recover(out, "lab", new)
    assert not (out / APP).is_symlink()
    assert (out / APP).read_bytes() == FILES[APP]
    assert elsewhere.read_bytes() == b"kind: Secret\n"


def test_every_deletion_after_one_done_before_the_cut_still_runs(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree({GONE: b"kind: Service\n", OLD: b"kind: Service\n"}))
    (out / GONE).unlink()  # deleted before the cut
    (out / GONE).parent.rmdir()
    cut_off(out, {INDEX: tree().files[INDEX]}, [GONE, OLD])
    assert recover(out, "lab", tree()) == "completed an interrupted export"
    assert files_of(out) == tree().files
    assert not (out / "components/lab/old").exists() and not interrupted(out, "lab")


def test_a_symlink_that_took_a_deleted_file_s_place_is_left_alone(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree({OLD: b"kind: Service\n"}))
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_bytes(b"kind: Service\n")
    (out / OLD).unlink()
    (out / OLD).symlink_to(elsewhere)
    cut_off(out, {INDEX: tree().files[INDEX]}, [OLD])
    assert recover(out, "lab", tree()) == "completed an interrupted export"
    assert (out / OLD).is_symlink() and elsewhere.read_bytes() == b"kind: Service\n"


def test_a_rename_that_fails_half_way_is_one_line_and_keeps_the_journal(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree())
    new_file = "components/lab/db/statefulset.db.yaml"
    new = tree({new_file: b"kind: StatefulSet\n"})
    cut_off(out, {new_file: b"kind: StatefulSet\n", INDEX: new.files[INDEX]}, [])
    (out / "components/lab/db").write_text("a file where the export needs a folder")
    with pytest.raises(OwnershipError) as info:
        recover(out, "lab", new)
    assert info.value.partial is True
    assert info.value.lines == [f"{out}: the export stopped half-way (File exists); the journal is kept and the "
                                "next run completes it; hint: fix the cause, then run the export again"]
    assert interrupted(out, "lab")


def test_a_journal_path_that_is_not_normalized_is_named_so_even_when_held_to_the_stack_s_folders(tmp_path):
    out = tmp_path / "out"
    write_tree(out, tree())
    journal = out / WORK_DIR / "lab.journal"
    journal.parent.mkdir()
    journal.write_text('{"write": ["components/lab/../../x.yaml"], "delete": []}')
    with pytest.raises(OwnershipError) as info:
        recover(out, "lab", tree())
    assert info.value.lines == [f"{journal}: write: 'components/lab/../../x.yaml': not a relative, normalized "
                                f"path; hint: delete {journal} and run the export again"]
    assert not info.value.partial
