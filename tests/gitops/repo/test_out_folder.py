"""OUT itself: when it may be created, what creating it reports, a file under it that cannot be read, each problem one
line; and `opened`, which an export and a check go through before anything is computed against OUT. Direct calls, no
Pulumi program."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from gitops.repo.out_folder import (
    OwnershipError,
    _each_once,
    check_out,
    is_work_tree,
    make_out,
    opened,
    placement,
    read_regular,
)
from gitops.tree import Tree


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


def small_tree():
    from conftest import LAB_APP, lab_tree

    return lab_tree({LAB_APP: b"kind: Deployment\n"})


def test_an_export_creates_out_with_its_missing_parents(tmp_path: Path):

    from builders import write_tree

    out = tmp_path / "a" / "b" / "out"
    write_tree(out, small_tree())
    assert (out / "components/lab/app/deployment.app.yaml").read_bytes() == b"kind: Deployment\n"


def test_an_export_into_an_out_below_a_file_names_the_file(tmp_path: Path):

    from builders import write_tree

    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "a" / "out"
    with pytest.raises(OwnershipError) as info:
        write_tree(out, small_tree())
    assert info.value.lines == [f"{tmp_path / 'file'}: not a folder, so {out} cannot be created; hint: choose "
                                "another --out"]


def test_an_export_whose_out_cannot_be_made_is_one_line_naming_why(tmp_path: Path, monkeypatch):

    from builders import write_tree

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "mkdir", read_only)
    out = tmp_path / "out"
    with pytest.raises(OwnershipError) as info:
        write_tree(out, small_tree())
    assert info.value.lines == [f"{out}: cannot be created (Read-only file system); hint: choose another --out"]


def test_an_export_holds_a_journal_it_finds_to_the_stack_s_folders(tmp_path: Path):
    from builders import write_tree
    from model.layout import WORK_DIR

    out = tmp_path / "out"
    write_tree(out, small_tree())
    journal = out / WORK_DIR / "lab.journal"
    journal.parent.mkdir()
    journal.write_text('{"write": [], "delete": ["components/other/service.x.yaml"]}')
    with pytest.raises(OwnershipError) as info:
        write_tree(out, small_tree())
    assert info.value.lines == [f"{journal}: delete: 'components/other/service.x.yaml': outside this stack's folders "
                                "(clusters/lab/gpu-platform, clusters/lab/gpu-platform/post-merge, components/lab, "
                                "clusters/lab); "
                                f"hint: delete {journal} and run the export again"]


def test_an_export_opening_out_completes_an_interrupted_export_before_it_reads_the_index(tmp_path: Path):
    import json

    from builders import write_tree
    from conftest import LAB_APP
    from gitops.index import sha
    from model.layout import WORK_DIR

    out = tmp_path / "out"
    tree = small_tree()
    write_tree(out, tree)
    staged = out / WORK_DIR / "lab.staging" / "components/lab/new/service.new.yaml"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"kind: Service\n")
    index = json.loads((out / tree.index_path).read_text())
    index["files"]["components/lab/new/service.new.yaml"] = sha(b"kind: Service\n")
    (out / WORK_DIR / "lab.staging" / tree.index_path).parent.mkdir(parents=True)
    (out / WORK_DIR / "lab.staging" / tree.index_path).write_text(json.dumps(index))
    (out / WORK_DIR / "lab.journal").write_text(json.dumps(
        {"write": ["components/lab/new/service.new.yaml", tree.index_path], "delete": []}))
    recovered: list[tuple[str, str]] = []
    with opened(out, [tree], exclusive=True, recovered=recovered) as records:
        assert recovered == [("lab", "completed an interrupted export")]
        assert sorted(records["lab"].owned) == sorted([LAB_APP, "components/lab/new/service.new.yaml"])
        assert records["lab"].index == (out / tree.index_path).read_bytes()
        assert not records["lab"].interrupted and records["lab"].edits == {}


def test_a_check_opening_out_completes_nothing_and_says_what_is_pending(tmp_path: Path):
    from builders import write_tree
    from model.layout import WORK_DIR

    out = tmp_path / "out"
    tree = small_tree()
    write_tree(out, tree)
    journal = out / WORK_DIR / "lab.journal"
    journal.parent.mkdir()
    journal.write_text('{"write": [], "delete": []}')
    recovered: list[tuple[str, str]] = []
    with opened(out, [tree], exclusive=False, recovered=recovered) as records:
        assert records["lab"].interrupted and recovered == [] and journal.exists()


def test_a_check_of_an_out_not_made_yet_finds_no_records_and_creates_nothing(tmp_path: Path):
    out = tmp_path / "not" / "yet"
    with opened(out, [small_tree()], exclusive=False, recovered=[]) as records:
        assert records["lab"].owned == {} and records["lab"].index is None and not records["lab"].interrupted
    assert not (tmp_path / "not").exists()


def test_a_first_export_refused_while_out_is_open_removes_the_folders_it_created_and_nothing_else(tmp_path: Path):
    (tmp_path / "kept").mkdir()
    out = tmp_path / "kept" / "new" / "out"
    with pytest.raises(RuntimeError), opened(out, [small_tree()], exclusive=True, recovered=[]):
        assert out.is_dir()
        raise RuntimeError("refused")
    assert not (tmp_path / "kept" / "new").exists() and (tmp_path / "kept").is_dir()


def _index_with_edits(tmp_path: Path, edits: object) -> tuple[Path, Tree]:
    import json

    tree = small_tree()
    out = tmp_path / "out"
    (out / tree.index_path).parent.mkdir(parents=True)
    doc = json.loads(tree.files[tree.index_path])
    if edits is not None:
        doc["edits"] = edits
    (out / tree.index_path).write_text(json.dumps(doc))
    return out, tree


def test_the_lines_the_last_export_kept_are_read_back_as_its_index_records_them(tmp_path: Path):
    from gitops.repo.out_folder import read_edits

    kept = {"clusters/lab/gpu-platform/kustomization.yaml": {"resources": ["intel-gpu-plugin.yaml"]},
            "clusters/lab/cluster-vars.yaml": {"data": {"GPU_PLATFORM_TIMEOUT": "5m"}}}
    out, tree = _index_with_edits(tmp_path, kept)
    assert read_edits(out, tree) == kept
    assert read_edits(*_index_with_edits(tmp_path / "none", None)) == {}
    assert read_edits(tmp_path / "empty", tree) == {}


def test_opening_out_gives_each_stack_the_lines_its_last_export_kept(tmp_path: Path):
    kept = {"clusters/lab/gpu-platform/kustomization.yaml": {"resources": ["intel-gpu-plugin.yaml"]}}
    out, tree = _index_with_edits(tmp_path, kept)
    with opened(out, [tree], exclusive=False, recovered=[]) as records:
        assert records["lab"].edits == kept


@pytest.mark.parametrize(("edits", "where"), [
    ({"clusters/lab/gpu-platform/kustomization.yaml": {"resources": ["../escape.yaml"]}},
     "edits.clusters/lab/gpu-platform/kustomization.yaml"),
    ({"clusters/other/cluster-vars.yaml": {"data": {"GPU_PLATFORM_X": "1"}}}, "edits.clusters/other/cluster-vars.yaml"),
    ({"clusters/lab/cluster-vars.yaml": {"data": {"PATH": "/tmp"}}}, "edits.clusters/lab/cluster-vars.yaml"),
    (["not", "a", "mapping"], "edits.(root)"),
])
def test_a_kept_line_the_export_could_not_have_written_is_refused_naming_its_entry(tmp_path: Path, edits, where):
    from gitops.repo.out_folder import read_edits

    out, tree = _index_with_edits(tmp_path, edits)
    with pytest.raises(OwnershipError) as info:
        read_edits(out, tree)
    assert info.value.lines == [
        f"{out / tree.index_path}: {where}: not an edit the export makes (an entry of clusters/lab/gpu-platform/"
        "kustomization.yaml, or GPU_PLATFORM_ keys of the overlay's cluster-vars); hint: restore it from git, or "
        "delete it together with the stack's exported folders"]


def test_every_kept_line_the_export_could_not_have_written_is_a_line_of_its_own(tmp_path: Path):
    from gitops.repo.out_folder import read_edits

    out, tree = _index_with_edits(tmp_path, {"a.yaml": {"resources": []}, "b.yaml": {"data": {}}})
    with pytest.raises(OwnershipError) as info:
        read_edits(out, tree)
    assert info.value.lines == [
        f"{out / tree.index_path}: edits.{rel}: not an edit the export makes (an entry of clusters/lab/gpu-platform/"
        "kustomization.yaml, or GPU_PLATFORM_ keys of the overlay's cluster-vars); hint: restore it from git, or "
        "delete it together with the stack's exported folders" for rel in ("a.yaml", "b.yaml")]


def _shared_base_export(tmp_path: Path, on_disk: dict[str, bytes], owned: list[str]):
    """OUT holding `on_disk`, and a shared base's tree (stack lab) whose index owns `owned`."""
    import json

    from gitops.headers import shared_generated_line
    from gitops.index import index_json, sha
    from gitops.tree import Tree
    from model.layout import SharedBaseLayout

    layout = SharedBaseLayout("lab", "clusters/base", "components/base", "./clusters/lab",
                    records_dir="gpu-platform/lab")
    header = shared_generated_line("clusters/base").encode()
    written = {"components/base/app/deployment.app.yaml": header + b"\nkind: A\n"}
    tree = Tree(stack="lab", layout=layout, files=dict(written))
    out = tmp_path / "out"
    for rel, content in {**on_disk, **written}.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(content)
    doc = json.loads(index_json("lab", written, {}, {}, []))
    doc["files"].update({rel: sha(b"x") for rel in owned})
    (out / tree.index_path).parent.mkdir(parents=True, exist_ok=True)
    (out / tree.index_path).write_text(json.dumps(doc))
    return out, tree


def test_a_shared_base_s_index_may_not_own_a_file_of_the_repository_s_own(tmp_path: Path):
    from gitops.repo.out_folder import read_index

    mine = "clusters/base/kustomization.yaml"
    out, tree = _shared_base_export(tmp_path, {mine: b"resources: [a.yaml]\n"}, [mine])
    with pytest.raises(OwnershipError) as info:
        read_index(out, tree)
    assert info.value.lines == [
        f"{out / tree.index_path}: files.{mine}: a file without the export's generated header; the export trusts no "
        "entry it could not have written; hint: restore the index from git"]


def test_a_shared_base_s_index_may_own_what_the_export_writes_its_records_or_a_file_with_its_header(tmp_path: Path):
    from gitops.headers import shared_generated_line
    from gitops.repo.out_folder import read_index

    stale = "components/base/old/service.old.yaml"  # no longer written, but it carries the export's header
    report = "gpu-platform/lab/DELIVERY.md"  # the records folder is the export's own, header or not
    gone = "components/base/gone/service.gone.yaml"  # owned, already deleted: nothing to judge
    header = shared_generated_line("clusters/base").encode()
    out, tree = _shared_base_export(tmp_path, {stale: header + b"\nkind: Service\n", report: b"# report\n"},
                                    [stale, report, gone])
    assert {stale, report, gone, *tree.files} <= set(read_index(out, tree))


def test_only_a_shared_base_s_index_is_held_to_the_header(tmp_path: Path):
    from gitops.repo.out_folder import read_index
    from model.layout import SplitLayout

    mine = "clusters/base/kustomization.yaml"
    out, tree = _shared_base_export(tmp_path, {mine: b"resources: [a.yaml]\n"}, [mine])
    shared = tree.layout
    tree.layout = SplitLayout(shared.stack, shared.entry_dir, shared.components_dir, shared.bootstrap_path,
                              records_dir="gpu-platform/lab")
    assert mine in read_index(out, tree)


# --- where OUT may be, before anything is read or written (placement) ----------------------------------------------

def test_an_out_in_the_checkouts_build_folder_may_be_created_and_anywhere_else_in_it_is_refused(tmp_path: Path):
    checkout = tmp_path / "checkout"
    (checkout / "components").mkdir(parents=True)
    assert placement(checkout / "build" / "gitops", [checkout]) is True
    with pytest.raises(OwnershipError) as info:
        placement(checkout / "components", [checkout])
    assert info.value.lines == [
        f"{checkout / 'components'}: inside this program's own checkout, where the export would write beside its "
        "Python packages; hint: give --out the root of your GitOps repository, or leave --out out to export into "
        "a fresh copy of the sample repository, build/sample/home-network-k3s"]


def test_a_refused_out_names_the_copy_of_the_checkouts_own_sample_that_an_export_without_out_writes(tmp_path: Path):
    checkout = tmp_path / "my-cluster"
    (checkout / "repo").mkdir(parents=True)  # an example project: its own sample repository beside its stacks
    with pytest.raises(OwnershipError) as info:
        placement(checkout, [checkout])
    assert info.value.lines[0].endswith(
        "hint: give --out the root of your GitOps repository, or leave --out out to export into a fresh copy of the "
        "sample repository, build/sample/my-cluster")


def test_an_out_elsewhere_must_exist_and_a_link_to_nowhere_is_not_a_folder(tmp_path: Path):
    with pytest.raises(OwnershipError) as info:
        placement(tmp_path / "missing", [tmp_path / "checkout"])
    assert info.value.lines == [
        f"{tmp_path / 'missing'}: no such folder; the export never creates a repository it was not given; hint: clone "
        f"your GitOps repository there (git clone <url> {tmp_path / 'missing'}) or check the path"]
    (tmp_path / "repo").mkdir()
    assert placement(tmp_path / "repo", [tmp_path / "checkout"]) is False
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OwnershipError) as info:
        placement(tmp_path / "dangling", [tmp_path / "checkout"])
    assert info.value.lines == [
        f"{tmp_path / 'dangling'}: not a folder; hint: give --out the root folder of the GitOps repository"]


def test_an_out_behind_a_symlink_loop_is_one_line_naming_the_loop(tmp_path: Path):
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OwnershipError) as info:
        placement(tmp_path / "loop" / "out", [tmp_path / "checkout"])
    assert info.value.lines == [f"{tmp_path / 'loop' / 'out'}: cannot be resolved (RuntimeError); hint: choose "
                                "another --out"]


def test_out_is_a_work_tree_when_it_holds_git_s_folder_or_a_worktrees_file(tmp_path: Path):
    assert is_work_tree(tmp_path) is False
    (tmp_path / ".git").mkdir()
    assert is_work_tree(tmp_path) is True
    (tmp_path / "worktree").mkdir()
    (tmp_path / "worktree" / ".git").write_text("gitdir: ../.git/worktrees/w\n")
    assert is_work_tree(tmp_path / "worktree") is True


def test_each_owned_folder_is_kept_once_in_its_first_place_and_whole_if_either_layout_says_so():
    assert _each_once([("a", False), ("b", True), ("c", False), ("a", True), ("b", False)]) == [
        ("a", True), ("b", True), ("c", False)]
