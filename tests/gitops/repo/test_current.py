"""gitops/repo/current.py: what OUT holds now for a stack, read for the preview. Small hand-made trees of the "lab"
stack written by the writer (no Pulumi program); then owned files the preview cannot read as YAML, and a real export
of dev edited by hand, a file lost or one in the way, as the preview reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from builders import capture_tree, exported_dev, write_tree
from conftest import EXAMPLE, LAB_APP as APP, lab_tree
from gitops.flux.inventory import ObjectId
from gitops.index import index_json
from gitops.repo.current import OwnershipError, _load_objects, read_current, recorded_outputs
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


# --- an owned file that is no longer YAML -------------------------------------------------------------------------

HINT = "hint: restore it from git (`git checkout -- f.yaml`), then run the command again"


@pytest.mark.parametrize(("data", "line"), [
    (b"a: [", "/o/f.yaml: (root): not valid YAML (did not find expected node content); the export would refuse it "
              f"as a hand edit; {HINT}"),
    (b"a: &a [*a]\n", f"/o/f.yaml: (root): expands through its aliases beyond any manifest; {HINT}"),
    (("[" * 1100 + "]" * 1100).encode(), "/o/f.yaml: (root): not valid YAML (exceeded maximum nesting depth); the "
                                        f"export would refuse it as a hand edit; {HINT}"),
])
def test_an_owned_file_that_is_no_longer_yaml_is_one_error_line(data, line):
    with pytest.raises(OwnershipError) as caught:
        _load_objects(Path("/o"), "f.yaml", data)
    assert caught.value.lines == [line]


def test_an_owned_files_objects_are_its_documents_with_a_kind_and_metadata():
    data = b"- 1\n---\nkind: A\nmetadata: {}\n---\nkind: B\n---\nmetadata: {}\n---\nkind: C\nmetadata: x\n"
    assert _load_objects(Path("/o"), "f.yaml", data) == [{"kind": "A", "metadata": {}}]


# --- a real export of dev, as the preview reads it (function-scoped: each test runs what it needs) ----------------

def test_the_repository_as_it_is_now_hand_edits_missing_files_and_files_in_the_way(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program
    from gitops.repo.current import read_current

    out = exported_dev(tmp_path)
    tree = capture_tree(run_program("dev", EXAMPLE))
    owned = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))
    edited, missing = out / owned[0], out / owned[1]
    edited.write_text(edited.read_text() + "# a comment is no edit\n")
    missing.unlink()
    current = read_current(out, tree)
    assert f"{owned[1]}: listed in the export index but missing; the export writes it again" in current.notes
    assert current.index == tree.index_path and isinstance(current.outputs, dict)
    keys = {rel for rel, _ in current.objects.values()}
    assert owned[1] not in keys and owned[0] in keys
    plan = preview_capture(run_program("dev", EXAMPLE), out)
    assert ("warning", f"{owned[1]}: listed in the export index but missing; the export writes it again") in \
        plan.diagnostics
    assert {s.op for s in plan.steps if s.file == owned[1]} == {"create"}
    # a created object is shown with its resource's URN, as pulumi preview shows it
    assert [s.urn for s in plan.steps if s.file == owned[1]] == [o.registration.urn for o in tree.objects
                                                                  if o.path == owned[1]]


def test_a_hand_edit_of_an_owned_file_and_a_foreign_file_in_the_way_are_warnings(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    capture = run_program("dev", EXAMPLE)
    tree = capture_tree(capture)
    owned = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))
    edited = out / owned[0]
    edited.write_text(edited.read_text() + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n")
    index = json.loads((out / tree.index_path).read_text())
    del index["files"][owned[1]]
    (out / tree.index_path).write_text(json.dumps(index))
    (out / owned[1]).write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n")
    plan = preview_capture(capture, out)
    messages = [m for level, m in plan.diagnostics if level == "warning"]
    assert f"{owned[0]}: edited by hand since the last export: the export refuses to overwrite it (hint: put the " \
           "change into the program or stack config, then `git checkout` it)" in messages
    assert f"{owned[1]}: exists and was not written by this export: the export refuses to overwrite it (hint: move " \
           "it away or delete it)" in messages
    assert [s.name for s in plan.steps if s.op == "delete"] == ["extra"]


def test_a_hand_edit_or_a_loss_of_any_owned_file_is_a_warning_as_the_export_refuses_or_rewrites_it(tmp_path):
    # kustomization.yaml and DELIVERY.md hold no cluster objects, but the export guards them like every owned file.
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    capture = run_program("dev", EXAMPLE)
    tree = capture_tree(capture)
    kustomizations = sorted(p for p in tree.files if p.endswith("/kustomization.yaml"))
    delivery = f"{tree.layout.entry_dir}/DELIVERY.md"  # written by the export beside the tree, from the walk
    assert (out / delivery).is_file()
    edited, lost = out / kustomizations[0], kustomizations[1]
    edited.write_text(edited.read_text() + "metadata:\n  name: by-hand\n")  # a kustomization with metadata
    (out / delivery).write_text((out / delivery).read_text() + "\na note by hand\n")
    (out / lost).unlink()
    plan = preview_capture(capture, out)
    warnings = [m for level, m in plan.diagnostics if level == "warning"]
    for rel in (kustomizations[0], delivery):
        assert f"{rel}: edited by hand since the last export: the export refuses to overwrite it (hint: put the " \
               "change into the program or stack config, then `git checkout` it)" in warnings
    assert f"{lost}: listed in the export index but missing; the export writes it again" in warnings
    # A kustomization is never one of the plan's objects, whatever it holds.
    assert [s for s in plan.steps if s.op != "same"] == []
    from conftest import export
    assert export(out, "dev") == 2  # the export agrees: it refuses the hand edits


def test_every_missing_owned_file_is_named_not_only_the_first(tmp_path):
    from gitops.engine.program import run_program
    from gitops.repo.current import read_current

    out = exported_dev(tmp_path)
    tree = capture_tree(run_program("dev", EXAMPLE))
    gone = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))[:2]
    for rel in gone:
        (out / rel).unlink()
    notes = read_current(out, tree).notes
    assert [n for n in notes if "missing" in n] == [
        f"{rel}: listed in the export index but missing; the export writes it again" for rel in gone]


def test_an_owned_file_broken_in_the_repository_is_named_with_its_full_path(tmp_path):
    from gitops.engine.program import run_program
    from gitops.repo.current import read_current

    out = exported_dev(tmp_path)
    tree = capture_tree(run_program("dev", EXAMPLE))
    rel = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))[0]
    (out / rel).write_bytes(b"a: [\n")
    with pytest.raises(OwnershipError) as caught:
        read_current(out, tree)
    assert caught.value.lines == [
        f"{out / rel}: (root): not valid YAML (did not find expected node content); the export would refuse it as a "
        f"hand edit; hint: restore it from git (`git checkout -- {rel}`), then run the command again"]


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_a_control_character_in_an_owned_file_is_one_not_valid_yaml_line():
    with pytest.raises(OwnershipError) as caught:
        _load_objects(Path("/o"), "f.yaml", b"a: \x07\n")
    assert caught.value.lines == [
        "/o/f.yaml: (root): not valid YAML (the character U+0007 is not allowed in YAML text); the export would "
        f"refuse it as a hand edit; {HINT}"]


def test_without_libyaml_a_nesting_too_deep_for_python_is_one_not_readable_line(monkeypatch):
    import yaml

    from model import safe_yaml

    # The pure-Python loader recurses per level; a content never parsed before (the parse cache keys on it).
    monkeypatch.setattr(safe_yaml, "_BASE_LOADER", yaml.SafeLoader)
    with pytest.raises(OwnershipError) as caught:
        _load_objects(Path("/o"), "f.yaml", ("[" * 1100 + "]" * 1100).encode())
    assert caught.value.lines == [f"/o/f.yaml: (root): not readable as YAML (RecursionError); {HINT}"]
