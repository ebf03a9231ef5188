"""`make new-stack STACK=<name> NODES="a b"`: a stack file from templates/Pulumi.stack.yaml that exports cleanly as
written, or one refusal line and nothing written."""

from __future__ import annotations

import json
import subprocess

import jsonschema
import pytest
import yaml

from conftest import ROOT, make_project, stack_text
from gitops.export import main as export_main
from gitops.new_stack import main as new_stack
from gitops.stack_schema import SCHEMA_PATH

# The first line of every Pulumi.<stack>.yaml (relative to the project root, where the stack files live).
SCHEMA_COMMENT = "# yaml-language-server: $schema=./schemas/stack/stack.schema.json"


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "project", {"dev": stack_text("dev")})


def test_a_new_stack_passes_the_schema_and_exports_cleanly(project, tmp_path, capsys):
    assert new_stack(["--stack", "lab", "--nodes", "lab-1 lab-2 123", "--project-dir", str(project)]) == 0
    text = (project / "Pulumi.lab.yaml").read_text()
    assert text.splitlines()[0] == SCHEMA_COMMENT and "${" not in text
    doc = yaml.safe_load(text)
    assert doc["config"]["gpu-platform:cluster"]["nodes"] == ["lab-1", "lab-2", "123"]
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    out = tmp_path / "out"
    out.mkdir()
    assert export_main(["--stack", "lab", "--out", str(out), "--quiet", "--project-dir", str(project)]) == 0
    assert (out / "components" / "lab" / "plex" / "deployment.plex.yaml").is_file()
    assert "wrote Pulumi.lab.yaml (3 nodes)" in capsys.readouterr().out


@pytest.mark.parametrize("stack, nodes, expected", [
    ("dev", "a", "error: Pulumi.dev.yaml: (file): exists already; hint: "),
    ("bad name", "a", "error: bad name: stack name: "),
    ("lab", "", "error: Pulumi.lab.yaml: gpu-platform:cluster.nodes: no nodes given; hint: "),
    ("lab", "Lab-1", "error: Pulumi.lab.yaml: gpu-platform:cluster.nodes[0]: \"Lab-1\": must be a DNS-1123 name"),
])
def test_a_refused_stack_is_one_line_and_nothing_is_written(project, capsys, stack, nodes, expected):
    before = sorted(p.name for p in project.iterdir())
    assert new_stack(["--stack", stack, "--nodes", nodes, "--project-dir", str(project)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(expected) and "hint: " in err[0]
    assert sorted(p.name for p in project.iterdir()) == before


def test_make_new_stack_writes_the_file_then_its_golden_tree_snapshot():
    dry = subprocess.run(["make", "-n", "-s", "new-stack", "STACK=lab", "NODES=lab-1 lab-2"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "-m gitops.new_stack --stack lab --nodes \"lab-1 lab-2\"" in dry
    assert "GOLDEN_UPDATE=1" in dry
    assert "tests/gitops/test_tree_golden.py::test_the_exported_tree_matches_its_golden_snapshot[lab]" in dry
