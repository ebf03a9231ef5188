"""The writer on a small hand-made tree (no Pulumi program): what it writes, replaces, prunes and refuses in OUT,
what `--check` reports, and how an interrupted export is finished or discarded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from builders import (
    LAB_CM as CM,
    LAB_ENTRY as ENTRY,
    LAB_FILES as FILES,
    LAB_INDEX as INDEX,
    drift,
    lab_exported as exported,
    lab_files_tree as tree,
    lab_refusal as refusal,
    plan_changes,
    write_tree,
)
from conftest import LAB_APP as APP, files_of
from gitops.index import normalized
from gitops.repo.out_folder import OwnershipError, check_out, interrupted, make_out, read_index, recover
from model.layout import WORK_DIR


def test_a_first_export_writes_every_file_and_an_index_of_their_hashes(tmp_path):
    out = exported(tmp_path)
    t = tree()
    assert files_of(out) == t.files
    assert read_index(out, t) == json.loads(t.files[INDEX])["files"]
    assert not (out / WORK_DIR).exists()


def test_exporting_the_same_tree_again_changes_nothing(tmp_path):
    out = exported(tmp_path)
    plan = write_tree(out, tree())
    assert plan.empty and not plan.write and not plan.delete
    assert sorted(plan.unchanged) == sorted(tree().files)
    assert drift(out, tree()) == []


def test_a_reformatted_file_with_the_same_meaning_is_kept_as_the_formatter_left_it(tmp_path):
    out = exported(tmp_path)
    (out / APP).write_bytes(b"kind: Deployment\nmetadata: {name: app}  # formatted\n")
    plan = write_tree(out, tree())
    assert plan.empty and APP in plan.unchanged
    assert (out / APP).read_bytes() == b"kind: Deployment\nmetadata: {name: app}  # formatted\n"
    assert drift(out, tree()) == []


def test_a_changed_program_replaces_the_files_it_owns(tmp_path):
    out = exported(tmp_path)
    new = {**FILES, APP: b"kind: Deployment\nmetadata:\n  name: app2\n"}
    plan = write_tree(out, tree(new))
    assert set(plan.write) == {APP, INDEX} and plan.delete == []
    assert files_of(out) == tree(new).files


def test_a_file_the_export_does_not_own_is_never_overwritten(tmp_path):
    out = tmp_path / "out"
    (out / "components/lab/app").mkdir(parents=True)
    (out / APP).write_bytes(b"kind: Deployment\nmetadata:\n  name: mine\n")
    assert refusal(out, tree()) == [
        f"{out / APP}: exists and was not written by this export (not in {INDEX}); refusing to overwrite a "
        "hand-written file; hint: move it away or delete it"]


def test_an_owned_file_edited_by_hand_is_not_overwritten(tmp_path):
    out = exported(tmp_path)
    (out / APP).write_bytes(b"kind: Deployment\nmetadata:\n  name: edited\n")
    assert refusal(out, tree({**FILES, APP: b"kind: Deployment\nmetadata:\n  name: app2\n"})) == [
        f"{out / APP}: edited by hand since the last export; refusing to overwrite it; hint: put the change into "
        "the program or stack config, then `git checkout` the file"]


def test_an_owned_file_broken_by_hand_counts_as_edited(tmp_path):
    out = exported(tmp_path)
    (out / APP).write_bytes(b"kind: [Deployment\n")
    assert "edited by hand since the last export" in refusal(out, tree({**FILES, APP: b"kind: Job\n"}))[0]


def test_every_refusal_is_reported_at_once(tmp_path):
    out = exported(tmp_path)
    (out / APP).write_bytes(b"kind: Deployment\nmetadata:\n  name: edited\n")
    (out / CM).write_bytes(b"kind: ConfigMap\ndata:\n  a: '2'\n")
    lines = refusal(out, tree({**FILES, APP: b"kind: Job\n", CM: b"kind: Job\n"}))
    assert [line.split(": ", 1)[0] for line in lines] == [str(out / CM), str(out / APP)]


def test_a_file_the_program_no_longer_produces_is_deleted_with_its_emptied_folder(tmp_path):
    out = exported(tmp_path, {**FILES, "components/lab/old/service.old.yaml": b"kind: Service\n"})
    (out / "components/lab/keep").mkdir()
    plan = write_tree(out, tree())
    assert plan.delete == ["components/lab/old/service.old.yaml"]
    assert files_of(out) == tree().files
    assert not (out / "components/lab/old").exists()
    assert (out / "components/lab/keep").is_dir() and (out / "components/lab/app").is_dir()


def test_a_reformatted_file_no_longer_produced_is_still_deleted(tmp_path):
    out = exported(tmp_path, {**FILES, "components/lab/old/service.old.yaml": b"kind: Service\n"})
    (out / "components/lab/old/service.old.yaml").write_bytes(b"---\nkind: Service  # formatted\n")
    write_tree(out, tree())
    assert not (out / "components/lab/old/service.old.yaml").exists()


def test_a_file_no_longer_produced_but_edited_by_hand_is_kept(tmp_path):
    old = "components/lab/old/service.old.yaml"
    out = exported(tmp_path, {**FILES, old: b"kind: Service\n"})
    (out / old).write_bytes(b"kind: Service\nspec: {}\n")
    assert refusal(out, tree()) == [
        f"{out / old}: no longer produced, but edited by hand since the last export; not deleting it; hint: delete "
        "it yourself if the edit is not needed"]


def test_a_file_no_longer_produced_and_already_gone_is_simply_forgotten(tmp_path):
    old = "components/lab/old/service.old.yaml"
    out = exported(tmp_path, {**FILES, old: b"kind: Service\n"})
    (out / old).unlink()
    plan = write_tree(out, tree())
    assert plan.delete == [] and files_of(out) == tree().files
    assert drift(out, tree()) == []


def test_check_compares_a_hand_written_file_the_export_keeps_lines_in_byte_for_byte(tmp_path):
    # A file of the repository's own (`edited`) is written as the pipeline computed it from OUT: any byte that differs
    # is drift, even where the YAML means the same; the same bytes are none.
    out = exported(tmp_path)
    kept = "clusters/lab/cluster-vars.yaml"
    (out / kept).parent.mkdir(parents=True, exist_ok=True)
    (out / kept).write_bytes(b"data: {KEY: value}  # the user's\n")
    same = tree()
    same.files[kept] = b"data: {KEY: value}  # the user's\n"
    same.edited.add(kept)
    assert drift(out, same) == []
    restyled = tree()
    restyled.files[kept] = b"data:\n  KEY: value\n"
    restyled.edited.add(kept)
    assert drift(out, restyled)[0] == f"changed  {kept}"


def test_check_reports_missing_changed_and_stale_files_with_a_diff_and_writes_nothing(tmp_path):
    old = "components/lab/old/service.old.yaml"
    out = exported(tmp_path, {**FILES, old: b"kind: Service\n"})
    (out / ENTRY).unlink()
    before = files_of(out)
    new = {**FILES, APP: b"kind: Deployment\nmetadata:\n  name: app2\n"}
    lines = drift(out, tree(new))
    at = lines.index(f"changed  {APP}")
    assert lines[at:at + 8] == [
        f"changed  {APP}",
        f"  --- a/{APP}", f"  +++ b/{APP}", "  @@ -1,3 +1,3 @@", "   kind: Deployment", "   metadata:",
        "  -  name: app", "  +  name: app2"]
    assert f"missing  {ENTRY}" in lines and f"stale    {old}" in lines and f"changed  {INDEX}" in lines
    assert [line for line in lines if not line.startswith("  ")] == [
        f"changed  {INDEX}", f"missing  {ENTRY}", f"changed  {APP}", f"stale    {old}"]
    assert files_of(out) == before


def test_an_index_entry_naming_a_folder_is_refused(tmp_path):
    out = exported(tmp_path)
    (out / "components/lab/x.yaml").mkdir()
    index = json.loads((out / INDEX).read_text())
    index["files"]["components/lab/x.yaml"] = "0" * 64
    (out / INDEX).write_text(json.dumps(index))
    with pytest.raises(OwnershipError) as refused:
        plan_changes(out, tree())
    assert refused.value.lines == [
        f"{out}/{INDEX}: files.components/lab/x.yaml: not a regular file; the export trusts no entry it could not "
        "have written; hint: restore it from git, or delete it together with the stack's exported folders"]


def test_a_folder_where_the_export_writes_a_file_is_found_before_anything_changes(tmp_path):
    out = exported(tmp_path)
    new_rel = "components/lab/app/service.app.yaml"
    (out / new_rel).mkdir()
    (out / new_rel / "x").write_text("x")
    with pytest.raises(OwnershipError) as info:
        write_tree(out, tree({**FILES, new_rel: b"kind: Service\n"}))
    assert f"{out / new_rel}: not a regular file where the export reads or writes one; hint: move it away" in \
        info.value.lines


def test_a_file_where_the_export_needs_a_folder_is_found_before_anything_changes(tmp_path):
    out = exported(tmp_path)
    (out / "components/lab/db").write_text("a file")
    new = {**FILES, "components/lab/db/statefulset.db.yaml": b"kind: StatefulSet\n", APP: b"kind: Job\n"}
    assert refusal(out, tree(new)) == [f"{out / 'components/lab/db'}: a file stands where the export needs a folder "
                                       "(for components/lab/db/statefulset.db.yaml); hint: move it away"]


def test_a_symlink_on_the_way_is_never_followed(tmp_path):
    out = exported(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "components/lab/db").symlink_to(elsewhere, target_is_directory=True)
    new = {**FILES, "components/lab/db/statefulset.db.yaml": b"kind: StatefulSet\n"}
    with pytest.raises(OwnershipError) as info:
        write_tree(out, tree(new))
    assert info.value.lines == [f"{out / 'components/lab/db'}: a symlink where the export reads or writes; the "
                                "export never follows links under OUT; hint: replace it with a real file or folder"]
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_folder_the_export_cannot_write_is_found_before_anything_changes(tmp_path):
    out = exported(tmp_path)
    folder = out / "components/lab/app"
    folder.chmod(0o555)
    try:
        lines = refusal(out, tree({**FILES, "components/lab/app/service.app.yaml": b"kind: Service\n"}))
    finally:
        folder.chmod(0o755)
    assert lines == [f"{folder}: the export cannot write here (Permission denied); nothing was changed; hint: check "
                     "the folder's permissions and attributes"]


def test_out_that_is_a_file_is_refused_in_one_line(tmp_path):
    out = tmp_path / "out"
    out.write_text("not a folder")
    with pytest.raises(OwnershipError) as info:
        write_tree(out, tree())
    assert info.value.lines == [f"{out}: not a folder; hint: give --out the root folder of the GitOps repository"]


def test_out_below_a_file_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "a" / "out"
    with pytest.raises(OwnershipError) as info:
        check_out(out, creating=True)
    assert info.value.lines == [f"{tmp_path / 'file'}: not a folder, so {out} cannot be created; hint: choose "
                                "another --out"]
    check_out(out, creating=False)  # a check of a missing OUT has nothing to refuse


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_work_folder_that_is_not_a_real_folder_is_refused(tmp_path, kind):
    out = exported(tmp_path)
    if kind == "symlink":
        (out / WORK_DIR).symlink_to(tmp_path, target_is_directory=True)
    else:
        (out / WORK_DIR).write_text("x")
    with pytest.raises(OwnershipError) as info:
        write_tree(out, tree())
    assert info.value.lines == [f"{out / WORK_DIR}: not a real folder; the export keeps its work there and never "
                                "follows a link; hint: delete it"]


def test_creating_out_reports_the_folders_it_made_outermost_first(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    assert make_out(out) == [tmp_path / "a", tmp_path / "a" / "b", out]
    assert out.is_dir() and make_out(out) == []


def staged(out: Path, stack: str, write: dict[str, bytes], delete: list[str]) -> None:
    """What an export leaves when it is cut off right after its commit point."""
    work = out / WORK_DIR
    for rel, data in write.items():
        (work / f"{stack}.staging" / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / f"{stack}.staging" / rel).write_bytes(data)
    (work / f"{stack}.journal").write_text(json.dumps({"write": list(write), "delete": delete}))


def test_an_export_cut_off_after_its_commit_point_is_completed_before_anything_else(tmp_path):
    old = "components/lab/old/service.old.yaml"
    out = exported(tmp_path, {**FILES, old: b"kind: Service\n"})
    new = tree({**FILES, APP: b"kind: Job\n"})
    staged(out, "lab", {APP: new.files[APP], INDEX: new.files[INDEX]}, [old])
    assert interrupted(out, "lab")
    assert recover(out, "lab", new) == "completed an interrupted export"
    assert files_of(out) == new.files
    assert not interrupted(out, "lab") and not (out / WORK_DIR).exists()
    assert not (out / "components/lab/old").exists()


def test_an_export_cut_off_before_its_commit_point_is_discarded(tmp_path):
    out = exported(tmp_path)
    (out / WORK_DIR / "lab.staging/components/lab/app").mkdir(parents=True)
    (out / WORK_DIR / "lab.staging" / APP).write_text("kind: Job\n")
    assert not interrupted(out, "lab")
    assert recover(out, "lab") == "discarded an interrupted export that had not reached its commit point"
    assert files_of(out) == tree().files and not (out / WORK_DIR).exists()
    assert recover(out, "lab") is None


def test_another_stack_s_work_in_progress_is_left_alone(tmp_path):
    out = exported(tmp_path)
    (out / WORK_DIR / "other.staging").mkdir(parents=True)
    (out / WORK_DIR / "lab.staging").mkdir()
    recover(out, "lab")
    assert (out / WORK_DIR / "other.staging").is_dir() and not (out / WORK_DIR / "lab.staging").exists()


def test_a_write_export_runs_the_recovery_first(tmp_path):
    out = exported(tmp_path)
    new = tree({**FILES, APP: b"kind: Job\n"})
    staged(out, "lab", {APP: new.files[APP], INDEX: new.files[INDEX]}, [])
    assert write_tree(out, new).empty
    assert files_of(out) == new.files and not (out / WORK_DIR).exists()


@pytest.mark.parametrize(("journal", "why"), [
    ("{", "(root): not a journal the export wrote"),
    ('{"write": []}', "write/delete: not a journal the export wrote"),
    ('{"write": ["../x.yaml"], "delete": []}', "write: '../x.yaml': not a relative, normalized path"),
    ('{"write": [], "delete": ["/etc/passwd"]}', "delete: '/etc/passwd': not a relative, normalized path"),
])
def test_a_journal_the_export_did_not_write_is_refused_and_kept(tmp_path, journal, why):
    out = exported(tmp_path)
    path = out / WORK_DIR / "lab.journal"
    path.parent.mkdir()
    path.write_text(journal)
    with pytest.raises(OwnershipError) as info:
        recover(out, "lab")
    assert info.value.lines == [f"{path}: {why}; hint: delete {path} and run the export again"]
    assert path.read_text() == journal


def test_with_the_tree_the_journal_is_held_to_the_stack_s_folders(tmp_path):
    out = exported(tmp_path)
    path = out / WORK_DIR / "lab.journal"
    path.parent.mkdir()
    path.write_text('{"write": [], "delete": ["components/other/a.yaml"]}')
    with pytest.raises(OwnershipError) as info:
        recover(out, "lab", tree())
    journal = out / WORK_DIR / "lab.journal"
    assert info.value.lines == [
        f"{journal}: delete: 'components/other/a.yaml': outside this stack's folders (clusters/lab/gpu-platform, "
        f"clusters/lab/gpu-platform/post-merge, components/lab, clusters/lab); hint: delete {journal} and run the "
        "export again"]
    assert (out / "components/lab/app").is_dir()


def test_a_symlinked_journal_is_refused(tmp_path):
    out = exported(tmp_path)
    (out / WORK_DIR).mkdir()
    (out / WORK_DIR / "lab.journal").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OwnershipError) as info:
        recover(out, "lab")
    assert info.value.lines == [f"{out / WORK_DIR}: holds a symlink; hint: delete the folder and run the export again"]


@pytest.mark.parametrize(("rel", "ok"), [
    ("components/lab/a.yaml", True), ("a", True),
    ("", False), ("/abs/a.yaml", False), ("a//b.yaml", False), ("a/./b.yaml", False), ("a/../b.yaml", False),
    ("a/", False), ("a\\b.yaml", False), ("a\0b", False), (7, False), (None, False), ("./a", False), ("..", False),
    # "." alone is what normpath leaves unchanged: only the part check refuses it (it would name OUT itself).
    (".", False), ("a/.", False), ("/", False),
])
def test_only_relative_normalized_slash_paths_are_accepted(rel, ok):
    assert normalized(rel) == (rel if ok else None)


def test_while_an_export_holds_out_no_other_export_or_check_can_take_it(tmp_path):
    import fcntl

    from gitops.repo.out_folder import out_lock

    out = exported(tmp_path)
    other = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with out_lock(out, exclusive=True):
            for mode in (fcntl.LOCK_EX, fcntl.LOCK_SH):
                with pytest.raises(BlockingIOError):
                    fcntl.flock(other, mode | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on the way out
        fcntl.flock(other, fcntl.LOCK_UN)
        with out_lock(out, exclusive=False):
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # two checks may run together
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)


def test_a_check_of_a_missing_out_locks_its_nearest_existing_parent(tmp_path):
    import fcntl

    from gitops.repo.out_folder import out_lock

    other = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with out_lock(tmp_path / "a" / "out", exclusive=False):
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
    assert not (tmp_path / "a").exists()


def test_a_symlink_that_appears_after_the_commit_point_stops_the_export_and_keeps_the_journal(tmp_path):
    out = exported(tmp_path)
    new = tree({**FILES, "components/lab/db/statefulset.db.yaml": b"kind: StatefulSet\n"})
    staged(out, "lab", {"components/lab/db/statefulset.db.yaml": b"kind: StatefulSet\n", INDEX: new.files[INDEX]}, [])
    (tmp_path / "elsewhere").mkdir()
    (out / "components/lab/db").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(OwnershipError) as info:
        recover(out, "lab", new)
    assert info.value.partial
    assert info.value.lines == [f"{out / 'components/lab/db/statefulset.db.yaml'}: a symlink appeared on the way "
                                "since the export began; hint: remove it, then run the export again to complete"]
    assert interrupted(out, "lab") and list((tmp_path / "elsewhere").iterdir()) == []


def test_check_shows_a_file_that_is_not_utf8_with_replacement_characters_instead_of_failing(tmp_path):
    out = exported(tmp_path)
    (out / APP).write_bytes(b"kind: Deployment\nmetadata:\n  name: \xff\xfe\n")
    lines = drift(out, tree({**FILES, APP: b"kind: Deployment\nmetadata:\n  name: \xc3\xa9\n"}))
    assert f"changed  {APP}" in lines
    assert "  -  name: \ufffd\ufffd" in lines and "  +  name: \u00e9" in lines


def test_completing_an_interrupted_export_never_deletes_a_folder_that_took_a_file_s_place(tmp_path):
    old = "components/lab/old/service.old.yaml"
    out = exported(tmp_path, {**FILES, old: b"kind: Service\n"})
    (out / old).unlink()
    (out / old).mkdir()
    (out / old / "mine.txt").write_text("kept")
    staged(out, "lab", {INDEX: tree().files[INDEX]}, [old])
    assert recover(out, "lab", tree()) == "completed an interrupted export"
    assert (out / old / "mine.txt").read_text() == "kept"
