"""Completing an export cut off after its commit point (the journal), file by file: what was already renamed or
deleted before the cut is skipped, what changed under OUT since is never followed or removed, and a failure half-way
is one line that keeps the journal. Small hand-made trees, no Pulumi program."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from builders import write_tree
from conftest import LAB_APP as APP, files_of, lab_tree
from gitops.repo.out_folder import OwnershipError, interrupted, recover, recover_runs
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


# --- one commit for the stacks of a run ---------------------------------------------------------------------------

def stack_tree(stack: str, files: dict[str, bytes]) -> Tree:
    """A tree of another stack beside "lab", in folders of its own."""
    from gitops.index import index_json
    from model.layout import SplitLayout

    layout = SplitLayout(stack, f"clusters/{stack}/gpu-platform", f"components/{stack}", f"./clusters/{stack}")
    made = Tree(stack=stack, layout=layout, files=dict(files))
    made.files[made.index_path] = index_json(made.stack, made.files, made.external_paths, made.edits, made.edited)
    return made


OTHER_APP = "components/wall/app/deployment.app.yaml"


def test_the_stacks_of_one_run_share_one_journal_and_a_kill_after_it_completes_both(tmp_path, monkeypatch):
    from gitops.repo.writer import Plan, write_trees

    out = tmp_path / "out"
    lab, wall = tree(), stack_tree("wall", {OTHER_APP: b"kind: Deployment\n"})
    staged: list[str] = []
    real_replace = os.replace

    def cut_after_the_commit(src, dst):  # the journal in place, then the kill: no rename of a file happens
        staged.append(str(dst))
        real_replace(src, dst)
        if str(dst).endswith(".journal"):
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", cut_after_the_commit)
    with pytest.raises(KeyboardInterrupt):
        write_trees(out, [(lab, Plan(write=dict(lab.files))), (wall, Plan(write=dict(wall.files)))])
    monkeypatch.undo()
    assert [Path(p).name for p in staged] == ["lab+wall.journal"]  # one commit point for both stacks
    assert interrupted(out, "lab") and interrupted(out, "wall")
    recovered: list[tuple[str, str]] = []
    recover_runs(out, [lab, wall], recovered)
    assert recovered == [("lab", "completed an interrupted export"), ("wall", "completed an interrupted export")]
    assert files_of(out) == {**lab.files, **wall.files} and not (out / WORK_DIR).exists()


def test_a_joint_journal_is_completed_only_by_a_run_holding_all_its_stacks(tmp_path):
    out = tmp_path / "out"
    (out / WORK_DIR / "lab+wall.staging").mkdir(parents=True)
    (out / WORK_DIR / "lab+wall.journal").write_text(json.dumps({"write": [], "delete": []}))
    with pytest.raises(OwnershipError) as info:
        recover_runs(out, [tree()], [])
    assert info.value.lines == [f"{out / WORK_DIR / 'lab+wall.journal'}: an export of lab, wall stopped after its "
                                "commit point; hint: run the export with --stack lab --stack wall to complete it"]
    recover_runs(out, [stack_tree("other", {})], [])  # a run of neither stack leaves it alone
    assert (out / WORK_DIR / "lab+wall.journal").exists()


def test_an_entry_of_a_joint_journal_is_held_to_the_folders_of_the_stack_it_names(tmp_path):
    out = tmp_path / "out"
    journal = out / WORK_DIR / "lab+wall.journal"
    journal.parent.mkdir(parents=True)
    journal.write_text(json.dumps({"write": [APP], "delete": [], "owners": {APP: "wall"}}))
    with pytest.raises(OwnershipError) as info:
        recover_runs(out, [tree(), stack_tree("wall", {})], [])
    assert info.value.lines == [f"{journal}: write: {APP!r}: outside this stack's folders (clusters/wall/gpu-platform, "
                                "clusters/wall/gpu-platform/post-merge, components/wall, clusters/wall); hint: delete "
                                f"{journal} and run the export again"]


def test_folders_a_removal_emptied_are_removed_by_the_run_completing_it_though_their_files_went_before(tmp_path):
    out = tmp_path / "out"
    deep = "components/lab/old/deeper/service.deep.yaml"
    write_tree(out, tree({deep: b"kind: Service\n"}))
    (out / deep).unlink()  # the removal was cut off after the file and its folder went, before their parent
    (out / deep).parent.rmdir()
    cut_off(out, {}, [deep])
    assert recover(out, "lab", tree({deep: b"kind: Service\n"})) == "completed an interrupted export"
    assert not (out / "components/lab/old").exists() and not (out / WORK_DIR).exists()
    assert (out / "components/lab").is_dir()  # still holds the app
