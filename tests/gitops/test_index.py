"""gitops/index.py: the export index as the writer reads it back from OUT (small hand-made trees of the "lab" stack,
no Pulumi program): two indexes the same whatever their layout, one that is not JSON or has no `files` mapping a clear
error, no entry trusted that the export could not have written, the plain sha256 of older exports still proving
ownership, and the index of the older layout counted and pruned."""

from __future__ import annotations

import hashlib
import json

import pytest

from builders import (
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
from gitops.index import edit_is_the_exports, owned_folders, same_index as _same_index
from gitops.repo.out_folder import OwnershipError, read_index
from model.layout import PerAppLayout, SharedBaseLayout, SplitLayout


def test_an_index_that_is_not_json_is_never_the_same_as_another():
    assert _same_index(b'{"files": {}}', b'{ "files" : {} }')
    assert not _same_index(b'{"files": {}}', b"{")
    assert not _same_index(b"{", b'{"files": {}}')
    assert not _same_index(b"[" * 100_000, b"[]")  # too deep to parse: not the same either


def test_check_of_an_index_that_differs_only_in_layout_is_clean(tmp_path):
    out = exported(tmp_path)
    (out / INDEX).write_text(json.dumps(json.loads((out / INDEX).read_text())))
    assert drift(out, tree()) == []
    assert write_tree(out, tree()).empty


def test_check_of_a_broken_index_is_a_clear_error(tmp_path):
    out = exported(tmp_path)
    (out / INDEX).write_text("{")
    with pytest.raises(OwnershipError) as info:
        drift(out, tree())
    assert info.value.lines == [f"{out / INDEX}: (root): not a valid export index (not JSON); hint: restore it from "
                                "git, or delete it together with the stack's exported folders"]


@pytest.mark.parametrize(("doc", "why"), [
    ({"files": {"../etc/passwd.yaml": "0" * 64}}, "not a relative, normalized path inside the repository"),
    ({"files": {"components/labx/a.yaml": "0" * 64}},
     "outside this stack's folders (clusters/lab/gpu-platform, clusters/lab/gpu-platform/post-merge, components/lab)"),
    ({"files": {"clusters/lab/gpu-platform/sub/a.yaml": "0" * 64}},
     "outside this stack's folders (clusters/lab/gpu-platform, clusters/lab/gpu-platform/post-merge, components/lab)"),
    ({"files": {"components/lab/a/NOTES.md": "0" * 64}}, "not a name the export gives its files"),
    ({"files": {"components/lab/a/A.yaml": "0" * 64}}, "not a name the export gives its files"),
    ({"files": {"components/lab/a/x.yaml\n": "0" * 64}}, "not a name the export gives its files"),
    ({"files": {"components/lab/a/x.yaml": "0" * 63}}, "not a content hash"),
    ({"files": {"components/lab/a/x.yaml": "yaml:" + "0" * 64 + "\n"}}, "not a content hash"),
    ({"files": {"components/lab/a/x.yaml": None}}, "not a content hash"),
])
def test_an_index_entry_the_export_could_not_have_written_is_refused(tmp_path, doc, why):
    out = tmp_path / "out"
    (out / "clusters/lab/gpu-platform").mkdir(parents=True)
    (out / INDEX).write_text(json.dumps(doc))
    [entry] = doc["files"]
    with pytest.raises(OwnershipError) as info:
        plan_changes(out, tree())
    assert info.value.lines == [
        f"{out / INDEX}: files.{entry}: {why}; the export trusts no entry it could not have written; hint: restore it "
        "from git, or delete it together with the stack's exported folders"]


@pytest.mark.parametrize("doc", ["[]", '{"files": []}', '{"nothing": 1}'])
def test_an_index_without_a_files_mapping_is_refused(tmp_path, doc):
    out = tmp_path / "out"
    (out / "clusters/lab/gpu-platform").mkdir(parents=True)
    (out / INDEX).write_text(doc)
    with pytest.raises(OwnershipError) as info:
        plan_changes(out, tree())
    assert info.value.lines == [f"{out / INDEX}: files: not a valid export index (no `files` mapping); hint: restore "
                                "it from git, or delete it together with the stack's exported folders"]


def test_an_index_recording_plain_sha256_hashes_still_proves_ownership(tmp_path):
    out = exported(tmp_path)
    index = json.loads((out / INDEX).read_text())
    index["files"] = {rel: hashlib.sha256((out / rel).read_bytes()).hexdigest() for rel in index["files"]}
    (out / INDEX).write_text(json.dumps(index))
    new = {**FILES, APP: b"kind: Deployment\nmetadata:\n  name: app2\n"}
    write_tree(out, tree(new))
    assert files_of(out) == tree(new).files


def test_with_a_plain_sha256_record_any_byte_change_is_a_hand_edit(tmp_path):
    out = exported(tmp_path)
    index = json.loads((out / INDEX).read_text())
    index["files"] = {rel: hashlib.sha256((out / rel).read_bytes()).hexdigest() for rel in index["files"]}
    (out / INDEX).write_text(json.dumps(index))
    (out / APP).write_bytes((out / APP).read_bytes() + b"# a comment\n")
    lines = refusal(out, tree({**FILES, APP: b"kind: Job\n"}))
    assert lines == [f"{out / APP}: edited by hand since the last export; refusing to overwrite it; hint: put the "
                     "change into the program or stack config, then `git checkout` the file"]


def test_the_index_of_the_older_layout_counts_and_is_pruned_with_what_it_owned(tmp_path):
    out = tmp_path / "out"
    legacy_files = {"clusters/lab/kustomization.yaml": b"resources: []\n", APP: FILES[APP]}
    for rel, data in legacy_files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    index = {"files": {rel: hashlib.sha256(data).hexdigest() for rel, data in legacy_files.items()}}
    (out / "clusters/lab/export-index.json").write_text(json.dumps(index))
    owned = read_index(out, tree())
    assert set(owned) == {"clusters/lab/kustomization.yaml", APP, "clusters/lab/export-index.json"}
    plan = write_tree(out, tree())
    assert sorted(plan.delete) == ["clusters/lab/export-index.json", "clusters/lab/kustomization.yaml"]
    assert files_of(out) == tree().files


def test_the_older_layout_s_index_may_not_name_files_below_the_stack_folder(tmp_path):
    out = tmp_path / "out"
    (out / "clusters/lab").mkdir(parents=True)
    rel = "clusters/lab/flux-system/gotk-sync.yaml"
    (out / "clusters/lab/export-index.json").write_text(json.dumps({"files": {rel: "0" * 64}}))
    with pytest.raises(OwnershipError) as caught:
        plan_changes(out, tree())
    assert caught.value.lines == [f"{out}/clusters/lab/export-index.json: files.{rel}: outside this stack's folders "
                                  "(clusters/lab, components/lab); the export trusts no entry it could not have "
                                  "written; hint: restore it from git, or delete it together with the stack's "
                                  "exported folders"]


# --- the index's own functions, directly ----------------------------------------------------------------------

def _index(files: dict[str, str], **other: object) -> bytes:
    return json.dumps({"stack": "lab", "files": files, **other}).encode()


def test_two_indexes_differing_only_in_a_hash_the_caller_settles_are_the_same_and_only_then():
    settled_calls: list[tuple[str, str, str]] = []

    def settled(rel: str, recorded: str, digest: str) -> bool:
        settled_calls.append((rel, recorded, digest))
        return rel == "a.md"

    old = _index({"a.md": "1" * 64, "b.yaml": "yaml:" + "2" * 64})
    assert _same_index(old, _index({"a.md": "3" * 64, "b.yaml": "yaml:" + "2" * 64}), settled)
    assert settled_calls == [("a.md", "1" * 64, "3" * 64)]  # the equal hash is never asked about
    assert not _same_index(old, _index({"a.md": "1" * 64, "b.yaml": "yaml:" + "4" * 64}), settled)
    assert not _same_index(old, _index({"a.md": "3" * 64, "b.yaml": "yaml:" + "2" * 64}), None)  # nobody settles
    assert not _same_index(old, _index({"a.md": "1" * 64}), settled)  # a file less
    assert not _same_index(old, _index({"a.md": "3" * 64, "b.yaml": "yaml:" + "2" * 64}, edits={}), settled)


def test_an_index_of_another_shape_is_the_same_as_none_whoever_settles():
    def settled(rel: str, recorded: str, digest: str) -> bool:
        return True

    assert not _same_index(_index({}), b"[]", settled)
    assert not _same_index(b"[]", _index({}), settled)
    assert not _same_index(_index({}), json.dumps({"stack": "lab", "files": []}).encode(), settled)
    assert not _same_index(json.dumps({"stack": "lab", "files": []}).encode(), _index({}), settled)
    assert _same_index(b'{"files": []}', b'{"files": []}', settled)  # equal is the same, whatever the shape


def test_the_index_records_the_exports_lines_in_own_files_and_never_hashes_the_file_that_holds_them():
    from gitops.index import index_json

    kept = {"clusters/lab/cluster-vars.yaml": {"data": {"GPU_PLATFORM_X": "1"}}}
    files = {APP: b"kind: Deployment\n", "clusters/lab/cluster-vars.yaml": b"data: {GPU_PLATFORM_X: '1'}\n"}
    doc = json.loads(index_json("lab", files, {}, kept, ["clusters/lab/cluster-vars.yaml"]))
    assert doc["edits"] == kept
    assert sorted(doc["files"]) == [APP]
    assert "edits" not in json.loads(index_json("lab", files, {}, {}, []))
    # a file whose lines are kept but that this run does not write is listed under edits alone
    unwritten = json.loads(index_json("lab", {APP: b"kind: Deployment\n"}, {}, kept, list(kept)))
    assert (unwritten["edits"], sorted(unwritten["files"])) == (kept, [APP])


def test_the_edits_of_an_index_are_read_only_from_an_object_with_them():
    from gitops.index import edits_doc

    assert edits_doc(b'{"edits": {"a.yaml": {"data": {}}}}') == {"a.yaml": {"data": {}}}
    assert edits_doc(b'{"files": {}}') is None
    assert edits_doc(b'[{"edits": 1}]') is None
    assert edits_doc(b"{not json") is None


def test_the_shared_mark_is_found_however_the_header_is_wrapped_and_whatever_bytes_follow_it():
    from gitops.headers import SHARED_MARK
    from gitops.index import has_shared_mark

    mark = SHARED_MARK.strip()
    assert has_shared_mark(f"# {mark} clusters/base.\nkind: A\n".encode())
    words = mark.split(" ")
    wrapped = f"# {' '.join(words[:3])}\n#   {' '.join(words[3:])} clusters/base.\n"
    assert has_shared_mark(wrapped.encode() + b"kind: A\n")
    assert has_shared_mark(f"\n---\n# {mark} x.\n".encode() + b"kind: \xff\xfe\n")  # not UTF-8 below the header
    assert not has_shared_mark(f"kind: A\n# {mark} x.\n".encode())  # a comment below the first line of YAML
    assert not has_shared_mark(b"# another header\nkind: A\n")


def test_the_shared_mark_counts_only_within_the_first_2000_bytes():
    from gitops.headers import SHARED_MARK
    from gitops.index import has_shared_mark

    mark = SHARED_MARK.strip().encode()
    def header_ending_at(size: int) -> bytes:
        return b"#" + b" " * (size - 4 - len(mark)) + b"\n# " + mark

    assert len(header_ending_at(2000)) == 2000
    assert has_shared_mark(header_ending_at(2000) + b"\nkind: A\n")
    assert not has_shared_mark(header_ending_at(2001) + b"\nkind: A\n")  # its last byte is the 2001st


# --- which folders a stack's index may name, and which `edits` entries are the export's, judged directly ------------

SPLIT = SplitLayout("lab", "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
SHARED = SharedBaseLayout("lab", "kubernetes/base/gpu-platform", "kubernetes/base/components",
                          "./kubernetes/overlays/lab/", records_dir=".gpu-platform/lab")


def test_each_layout_owns_its_entry_its_suite_and_only_the_components_folder_with_subfolders():
    assert owned_folders(SPLIT, "lab", legacy=False) == [
        ("clusters/lab/gpu-platform", False), ("clusters/lab/gpu-platform/post-merge", False), ("components/lab", True)]
    per_app = PerAppLayout("lab", "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
    assert owned_folders(per_app, "lab", legacy=False) == [("clusters/lab/gpu-platform", True)]
    assert owned_folders(SHARED, "lab", legacy=False) == [
        (".gpu-platform/lab", False), (".gpu-platform/lab/post-merge", False), ("kubernetes/base/gpu-platform", False),
        ("kubernetes/base/components", True), ("kubernetes/overlays/lab", False)]
    assert owned_folders(SPLIT, "old", legacy=True) == [("clusters/old", False), ("components/old", True)]


# an overlay folder that ends in a letter, to be sure only the slashes around it are taken off
OVERLAY_X = SharedBaseLayout("lab", "base/gpu-platform", "base/components", "./overlays/X/",
                             records_dir=".gpu-platform/lab")


def test_the_overlay_s_folder_loses_only_the_slashes_around_it():
    assert owned_folders(OVERLAY_X, "lab", legacy=False)[-1] == ("overlays/X", False)


def test_the_overlay_s_keys_are_the_export_s_in_a_folder_that_ends_in_a_letter():
    assert edit_is_the_exports("overlays/X/cluster-vars.yaml", {"data": {"GPU_PLATFORM_A": "1"}}, OVERLAY_X)


@pytest.mark.parametrize(("rel", "spec", "mine"), [
    ("kubernetes/base/gpu-platform/kustomization.yaml", {"resources": ["plex.yaml", "intel-gpu-plugin.yaml"]}, True),
    ("kubernetes/base/gpu-platform/kustomization.yml", {"resources": ["plex.yaml"]}, True),
    ("kubernetes/base/gpu-platform/kustomization.yaml", {"resources": []}, True),
    ("kubernetes/base/gpu-platform/kustomization.yaml", {"resources": ["../apps"]}, False),
    ("kubernetes/base/gpu-platform/kustomization.yaml", {"resources": [7]}, False),
    ("kubernetes/base/gpu-platform/plex.yaml", {"resources": ["plex.yaml"]}, False),
    ("kubernetes/base/kustomization.yaml", {"resources": ["plex.yaml"]}, False),
    ("kubernetes/base/gpu-platform/sub/kustomization.yaml", {"resources": ["plex.yaml"]}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"data": {"GPU_PLATFORM_PLEX_IP": "10.0.0.5"}}, True),
    ("kubernetes/overlays/lab/cluster-vars.yml", {"data": {}}, True),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"data": {"TIMEZONE": "UTC"}}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"data": {"GPU_PLATFORM_X": 5}}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"data": {7: "x"}}, False),
    ("kubernetes/overlays/other/cluster-vars.yaml", {"data": {"GPU_PLATFORM_X": "y"}}, False),
    ("kubernetes/overlays/lab/sub/cluster-vars.yaml", {"data": {"GPU_PLATFORM_X": "y"}}, False),
    ("kubernetes/overlays/lab/cluster-vars.json", {"data": {"GPU_PLATFORM_X": "y"}}, False),
    ("../kubernetes/overlays/lab/cluster-vars.yaml", {"data": {"GPU_PLATFORM_X": "y"}}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"data": {"GPU_PLATFORM_X": "y"}, "resources": []}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"data": ["GPU_PLATFORM_X"]}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", {"patches": []}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", "data", False),
    (7, {"data": {"GPU_PLATFORM_X": "y"}}, False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", "d", False),
    ("kubernetes/overlays/lab/cluster-vars.yaml", 7, False),
])
def test_an_edits_entry_is_the_export_s_only_for_its_base_listing_or_its_overlay_keys(rel, spec, mine):
    assert edit_is_the_exports(rel, spec, SHARED) is mine
