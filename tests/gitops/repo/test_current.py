"""gitops/repo/current.py: what OUT holds now for a stack, read for the preview. Small hand-made trees of the "lab"
stack written by the writer (no Pulumi program); the preview's own tests (tests/gitops/plan/, test_preview.py) read
real exports."""

from __future__ import annotations

import pytest
import yaml

from builders import write_tree
from conftest import LAB_APP as APP, lab_tree
from gitops.flux.inventory import ObjectId
from gitops.index import index_json
from gitops.repo.current import read_current, recorded_outputs
from gitops.tree import ExportedObject, Tree

DEPLOYMENT = b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: lab\n"
SECOND = "components/lab/app/deployment.copy.yaml"


def with_objects(tree: Tree) -> Tree:
    """The tree with its YAML files' objects, as build_tree lists them (no registration needed here)."""
    tree.objects = [ExportedObject(rel, doc, None, "", "")  # type: ignore[arg-type]
                    for rel, data in tree.files.items() if rel.endswith(".yaml") for doc in yaml.safe_load_all(data)]
    return tree


def test_an_empty_out_has_no_index_no_objects_and_nothing_in_the_way(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    current = read_current(out, with_objects(lab_tree({APP: DEPLOYMENT})))
    assert (current.index, current.objects, current.outputs, current.notes) == (None, {}, None, [])


def test_a_file_the_export_would_write_where_a_hand_written_one_stands_is_noted_and_the_same_bytes_are_not(tmp_path):
    out = tmp_path / "out"
    (out / APP).parent.mkdir(parents=True)
    (out / APP).write_bytes(DEPLOYMENT.replace(b"namespace: lab", b"namespace: mine"))
    tree = with_objects(lab_tree({APP: DEPLOYMENT}))
    assert read_current(out, tree).notes == [
        f"{APP}: exists and was not written by this export: the export refuses to overwrite it (hint: move it away or "
        "delete it)"]
    (out / APP).write_bytes(DEPLOYMENT)
    assert read_current(out, tree).notes == []


def test_an_object_in_two_owned_files_is_noted_and_the_last_file_compared(tmp_path):
    out = tmp_path / "out"
    tree = lab_tree({APP: DEPLOYMENT, SECOND: DEPLOYMENT})
    write_tree(out, tree)
    current = read_current(out, tree)
    assert current.notes == [f"{SECOND}: Deployment lab/app is also in {APP}; the preview compares with the last one"]
    assert current.objects[ObjectId("apps", "Deployment", "lab", "app")] == (SECOND, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app", "namespace": "lab"}})
    assert current.index == tree.index_path


def test_the_outputs_the_index_recorded_are_read_back(tmp_path):
    out = tmp_path / "out"
    tree = Tree(stack="lab", layout=lab_tree({}).layout, files={APP: DEPLOYMENT})
    tree.files[tree.index_path] = index_json(tree.stack, tree.files, tree.external_paths, tree.edits, tree.edited,
                                             {"layout": {"stack": "lab"}})
    write_tree(out, tree)
    assert read_current(out, tree).outputs == {"layout": {"stack": "lab"}}


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]", b'{"stackOutputs": [1]}', b'{"stackOutputs": "x"}',
                                  b"{}", b"[" * 100_000])
def test_an_index_without_an_object_of_outputs_records_none(data):
    assert recorded_outputs(data) is None
