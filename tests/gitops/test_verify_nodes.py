"""`verify-nodes` on realistic `kubectl get nodes -o json` output."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, ROOT, make_project, stack_text
from gitops.verify_nodes import main as verify

NODES = FIXTURES / "nodes"


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "p", {"prod": stack_text("prod")})


def run(project, fixture: str, *extra: str) -> int:
    return verify(["--stack", "prod", str(NODES / f"{fixture}.json"), "--project-dir", str(project), *extra])


def test_all_nodes_advertising_exits_0_with_one_line_per_node(project, capsys):
    assert run(project, "prod-all-advertise") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"k3s-prod-{i}  gpu.intel.com/i915=1" for i in (1, 2, 3)]


def test_a_node_without_the_plugin_is_absent_and_exits_1(project, capsys):
    assert run(project, "prod-one-without-plugin") == 1
    captured = capsys.readouterr()
    assert "k3s-prod-3  ABSENT" in captured.out
    assert captured.err == (
        "not ready: 1 of 3 nodes do not advertise gpu.intel.com/i915: k3s-prod-3\n"
        "  next: check the plugin's pods on those nodes (`kubectl -n intel-gpu-plugin get pods -o wide`), then run "
        f"`make verify-nodes STACK=prod NODES={NODES / 'prod-one-without-plugin.json'}` again\n")


def test_xe_instead_of_i915_is_absent_and_says_why(project, capsys):
    assert run(project, "prod-xe-instead-of-i915") == 1
    assert "k3s-prod-2  ABSENT (advertises gpu.intel.com/xe=1 instead" in capsys.readouterr().out


def test_zero_allocatable_is_absent(project, capsys):
    assert run(project, "prod-zero-allocatable") == 1
    assert "k3s-prod-1  ABSENT" in capsys.readouterr().out


def test_extra_nodes_are_listed_and_ignored(project, capsys):
    assert run(project, "prod-plus-extra-node") == 0
    assert "k3s-prod-4  (not in Pulumi.prod.yaml cluster.nodes; ignored)" in capsys.readouterr().out


def test_a_configured_node_missing_from_the_input_points_at_its_name_and_the_kubeconfig_context(project, capsys):
    assert run(project, "prod-node-missing-from-input") == 1
    captured = capsys.readouterr()
    assert "k3s-prod-3  ABSENT (node not in the input)" in captured.out
    assert captured.err == (  # running again on the same file cannot help: the name or the cluster is wrong
        "not ready: 1 of 3 nodes do not advertise gpu.intel.com/i915: k3s-prod-3\n"
        f"  next: k3s-prod-3 is not in {NODES / 'prod-node-missing-from-input.json'}: check its name in "
        "Pulumi.prod.yaml (`gpu-platform:cluster` nodes), or the kubeconfig context the `kubectl get nodes -o json` "
        "was taken from (`kubectl config current-context`)\n")


def test_a_node_missing_from_the_input_and_one_without_the_plugin_each_get_their_own_next_step(
        project, tmp_path, capsys):
    doc = json.loads((NODES / "prod-node-missing-from-input.json").read_text())
    del doc["items"][1]["status"]["allocatable"]["gpu.intel.com/i915"]  # k3s-prod-2: in the input, no plugin
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(doc))
    assert verify(["--stack", "prod", str(nodes), "--project-dir", str(project)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "not ready: 2 of 3 nodes do not advertise gpu.intel.com/i915: k3s-prod-2, k3s-prod-3",
        f"  next: k3s-prod-3 is not in {nodes}: check its name in Pulumi.prod.yaml (`gpu-platform:cluster` nodes), "
        "or the kubeconfig context the `kubectl get nodes -o json` was taken from (`kubectl config current-context`)",
        "  next: check the plugin's pods on k3s-prod-2 (`kubectl -n intel-gpu-plugin get pods -o wide`), then run "
        f"`make verify-nodes STACK=prod NODES={nodes}` again"]


def test_write_evidence_stores_only_names_and_counts(project):
    assert run(project, "prod-plus-extra-node", "--write-evidence") == 0
    text = (project / "evidence" / "prod.yaml").read_text()
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["stack: prod", "resource: gpu.intel.com/i915", "nodes:",
                    "  k3s-prod-1: 1", "  k3s-prod-2: 1", "  k3s-prod-3: 1"]
    assert "192.168" not in text and "k3s-prod-4" not in text and "kubeletVersion" not in text


def test_write_evidence_writes_nothing_when_a_node_is_absent(project, capsys):
    assert run(project, "prod-one-without-plugin", "--write-evidence") == 1
    assert capsys.readouterr().err == (
        "not ready: 1 of 3 nodes do not advertise gpu.intel.com/i915: k3s-prod-3; no evidence written\n"
        "  next: check the plugin's pods on those nodes (`kubectl -n intel-gpu-plugin get pods -o wide`), then run "
        f"`make verify-nodes STACK=prod NODES={NODES / 'prod-one-without-plugin.json'} WRITE_EVIDENCE=1` again\n")
    assert not (project / "evidence").exists()


def test_written_evidence_unlocks_the_gate(project):
    from gitops.engine.program import run_program
    assert run(project, "prod-all-advertise", "--write-evidence") == 0
    assert run_program("prod", project).stack_outputs["plexGpuAccess"] == "device-plugin"


@pytest.mark.parametrize("content,message", [
    ("{not json", "line 1: not JSON: Expecting property name enclosed in double quotes; hint: use real `kubectl ... "
                  "-o json` output"),
    ('{"kind": "Pod"}', "(root): not the output of `kubectl get nodes -o json` (expected kind List with items); "
                        "hint: use the output of `kubectl get nodes -o json` as it is"),
    ('{"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}',
     "items[0].metadata.name: missing; hint: use the output of `kubectl get nodes -o json` as it is"),
])
def test_bad_input_exits_2_with_a_clear_error(project, tmp_path, capsys, content, message):
    bad = tmp_path / "nodes.json"
    bad.write_text(content)
    assert verify(["--stack", "prod", str(bad), "--project-dir", str(project)]) == 2
    assert capsys.readouterr().err == f"error: {bad}: {message}\n"


def test_reads_stdin(project, capsys, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO((NODES / "prod-all-advertise.json").read_text()))
    assert verify(["--stack", "prod", "-", "--project-dir", str(project)]) == 0


def test_shipped_project_has_no_evidence_yet():
    assert not (ROOT / "evidence" / "prod.yaml").exists() and not (ROOT / "evidence" / "dev.yaml").exists()
