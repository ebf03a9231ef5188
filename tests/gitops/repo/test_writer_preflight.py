"""The preflight, called with a plan made earlier (as the export does after recovery): everything under OUT that
changed since the plan and would stop the renames is found before the commit point, every problem one line, all
of them at once. Small hand-made trees, no Pulumi program."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from builders import plan_changes, write_tree
from conftest import LAB_APP as APP, files_of, lab_tree
from gitops.repo.out_folder import OwnershipError
from gitops.repo.writer import Plan, preflight
from gitops.tree import Tree
from model.layout import WORK_DIR

CM = "components/lab/app/configmap.settings.yaml"
DB = "components/lab/db/statefulset.db.yaml"
FILES = {APP: b"kind: Deployment\n", CM: b"kind: ConfigMap\n"}


def refused(out: Path, t: Tree, plan: Plan) -> list[str]:
    before = files_of(out)
    with pytest.raises(OwnershipError) as info:
        write_tree(out, t, plan)
    assert files_of(out) == before and not (out / WORK_DIR).exists()
    assert not info.value.partial
    return info.value.lines


def test_a_symlink_put_on_the_way_after_planning_is_one_line_per_file_it_would_redirect(tmp_path):
    out = tmp_path / "out"
    write_tree(out, lab_tree(FILES))
    new = lab_tree({APP: b"kind: Job\n", CM: b"kind: Secret\n"})
    plan = plan_changes(out, new)
    (tmp_path / "elsewhere").mkdir()
    for rel in (APP, CM):
        (out / rel).unlink()
    (out / "components/lab/app").rmdir()
    (out / "components/lab/app").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    link = out / "components/lab/app"
    hint = "the export never follows links under OUT; hint: replace it with a real folder"
    assert refused(out, new, plan) == [f"{link}: a symlink on the way to {CM}; {hint}",
                                       f"{link}: a symlink on the way to {APP}; {hint}"]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_new_folder_does_not_end_the_preflight_before_the_files_after_it(tmp_path):
    out = tmp_path / "out"
    write_tree(out, lab_tree(FILES))
    (out / APP).unlink()
    (out / APP).mkdir()  # after planning, a folder took the file's place
    plan = Plan(write={DB: b"kind: StatefulSet\n", APP: b"kind: Job\n"})
    with pytest.raises(OwnershipError) as info:
        preflight(out, plan)
    assert info.value.lines == [f"{out / APP}: a folder stands where the export writes a file; hint: move it away"]


def test_every_folder_that_took_a_file_s_place_is_named(tmp_path):
    out = tmp_path / "out"
    write_tree(out, lab_tree(FILES))
    for rel in (APP, CM):
        (out / rel).unlink()
        (out / rel).mkdir()
    with pytest.raises(OwnershipError) as info:
        preflight(out, Plan(write={APP: b"kind: Job\n", CM: b"kind: Job\n"}))
    assert info.value.lines == [f"{out / rel}: a folder stands where the export writes a file; hint: move it away"
                                for rel in (APP, CM)]


def test_every_file_that_took_a_folder_s_place_is_named_once(tmp_path):
    out = tmp_path / "out"
    write_tree(out, lab_tree(FILES))
    cache = "components/lab/cache/configmap.cache.yaml"
    for folder in ("components/lab/db", "components/lab/cache"):
        (out / folder).write_text("a file")
    with pytest.raises(OwnershipError) as info:
        preflight(out, Plan(write={DB: b"kind: StatefulSet\n", cache: b"kind: ConfigMap\n"}))
    assert info.value.lines == [
        f"{out / 'components/lab/db'}: a file stands where the export needs a folder (for {DB}); hint: move it away",
        f"{out / 'components/lab/cache'}: a file stands where the export needs a folder (for {cache}); "
        "hint: move it away"]


def test_every_file_the_plan_cannot_read_is_named_with_the_refusals_after_it(tmp_path):
    out = tmp_path / "out"
    write_tree(out, lab_tree(FILES))
    (out / "components/lab/app/deployment.app.yaml").write_bytes(b"kind: Edited\n")  # a hand edit
    (out / "components/lab/a").mkdir(parents=True)
    (out / "components/lab/a/service.a.yaml").mkdir()
    (out / "components/lab/b").mkdir(parents=True)
    (out / "components/lab/b/service.b.yaml").mkdir()
    new = lab_tree({**FILES, APP: b"kind: Job\n", "components/lab/a/service.a.yaml": b"kind: Service\n",
                "components/lab/b/service.b.yaml": b"kind: Service\n"})
    with pytest.raises(OwnershipError) as info:
        plan_changes(out, new)
    folder = "not a regular file where the export reads or writes one; hint: move it away"
    assert info.value.lines == [
        f"{out / 'components/lab/a/service.a.yaml'}: {folder}",
        f"{out / APP}: edited by hand since the last export; refusing to overwrite it; hint: put the change into the "
        "program or stack config, then `git checkout` the file",
        f"{out / 'components/lab/b/service.b.yaml'}: {folder}"]


def test_every_stale_file_reached_through_a_symlink_is_named(tmp_path):
    out = tmp_path / "out"
    old = {f"components/lab/old{i}/service.s{i}.yaml": b"kind: Service\n" for i in (1, 2)}
    write_tree(out, lab_tree({**FILES, **old}))
    for i in (1, 2):
        elsewhere = tmp_path / f"elsewhere{i}"
        (out / f"components/lab/old{i}").rename(elsewhere)
        (out / f"components/lab/old{i}").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OwnershipError) as info:
        plan_changes(out, lab_tree(FILES))
    hint = ("a symlink where the export reads or writes; the export never follows links under OUT; hint: replace it "
            "with a real file or folder")
    assert info.value.lines == [f"{out / 'components/lab/old1'}: {hint}", f"{out / 'components/lab/old2'}: {hint}"]


def test_a_stale_file_already_gone_does_not_keep_the_ones_after_it(tmp_path):
    out = tmp_path / "out"
    old = {f"components/lab/old{i}/service.s{i}.yaml": b"kind: Service\n" for i in (1, 2)}
    write_tree(out, lab_tree({**FILES, **old}))
    (out / "components/lab/old1/service.s1.yaml").unlink()
    assert plan_changes(out, lab_tree(FILES)).delete == ["components/lab/old2/service.s2.yaml"]


def test_every_stale_file_edited_by_hand_is_named_and_kept(tmp_path):
    out = tmp_path / "out"
    old = {f"components/lab/old{i}/service.s{i}.yaml": b"kind: Service\n" for i in (1, 2)}
    write_tree(out, lab_tree({**FILES, **old}))
    for rel in old:
        (out / rel).write_bytes(b"kind: Service\nmetadata: {name: edited}\n")
    with pytest.raises(OwnershipError) as info:
        plan_changes(out, lab_tree(FILES))
    assert info.value.lines == [f"{out / rel}: no longer produced, but edited by hand since the last export; not "
                                "deleting it; hint: delete it yourself if the edit is not needed" for rel in old]


def test_the_write_probe_leaves_no_name_in_the_folder_it_probes(tmp_path: Path, monkeypatch):
    (tmp_path / "components").mkdir()
    mine = tmp_path / "components" / f".gitops-export-probe.{os.getpid()}"
    mine.write_text("not the export's")
    made: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open",
                        lambda path, flags, *a, **k: made.append(str(path)) or real_open(path, flags, *a, **k))
    preflight(tmp_path, Plan(write={"components/new/a.yaml": b"kind: A\n"}))
    assert made == [str(tmp_path / "components")]  # an unnamed file in the folder itself, nothing named in it
    assert os.listdir(tmp_path / "components") == [mine.name] and mine.read_text() == "not the export's"


@pytest.mark.parametrize("unnamed_files", [True, False], ids=["O_TMPFILE", "access(2) where there is none"])
def test_the_write_probe_finds_a_folder_it_cannot_write_into(tmp_path: Path, monkeypatch, unnamed_files):
    folder = tmp_path / "components"
    folder.mkdir()
    if not unnamed_files:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    preflight(tmp_path, Plan(write={"components/new/a.yaml": b"kind: A\n"}))  # writable: no line
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root, a file system with attributes) to make a folder unwritable")
    try:
        with pytest.raises(OwnershipError) as info:
            preflight(tmp_path, Plan(write={"components/new/a.yaml": b"kind: A\n"}))
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    words = "Operation not permitted" if unnamed_files else "Permission denied"
    assert info.value.lines == [f"{folder}: the export cannot write here ({words}); nothing was changed; hint: check "
                                "the folder's permissions and attributes"]
    assert os.listdir(folder) == []
