"""The post-merge Chainsaw suite the export writes beside POST-MERGE.md (gitops/reports/post_merge.py): what it asserts,
from the stack's own data, and that it can only read. Chainsaw itself runs it against a control plane in
tests/e2e/test_post_merge_chainsaw.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from builders import capture_tree
from conftest import COMPLETE_PROD_EVIDENCE, FIXTURES, stack_text
from gitops.index import suite_path
from gitops.reports.post_merge import add_post_merge
from model.outputs import ProgramOutputs

# The operations that only read (Chainsaw v0.2.15's `assert` and `error`), and the one flag an operation carries
READ_ONLY = {"assert", "error"}
OPERATION_FLAGS = {"continueOnError"}
GPU = "gpu.intel.com/i915"


def suite_of(capture) -> list[dict[str, Any]]:
    tree = capture_tree(capture)
    add_post_merge(tree, ProgramOutputs.from_output(capture.stack, capture.stack_outputs))
    return list(yaml.safe_load_all(tree.files[suite_path(tree.layout)]))


def suite_by_name(capture) -> dict[str, dict[str, Any]]:
    return {t["metadata"]["name"]: t for t in suite_of(capture)}


def operations(test: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for step in test["spec"]["steps"] for op in step["try"]]


def asserted(test: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [op["assert"]["resource"] for op in operations(test) if "assert" in op
            and op["assert"]["resource"]["kind"] == kind]


@pytest.fixture(scope="module")
def switched(tmp_path_factory):
    """prod with evidence that every node advertises one GPU: Plex on the device-plugin resource."""
    from conftest import make_project
    from gitops.engine.program import run_program

    project = make_project(tmp_path_factory.mktemp("switched"), {"prod": stack_text("prod")},
                           {"prod": COMPLETE_PROD_EVIDENCE})
    return run_program("prod", project)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_test_only_reads_and_runs_in_the_namespace_flux_already_has(captures, stack):
    for test in suite_of(captures[stack]):
        assert test["apiVersion"] == "chainsaw.kyverno.io/v1alpha1" and test["kind"] == "Test"
        # a Test without a namespace gets a chainsaw-<petname> one created (and deleted) for it
        assert test["spec"]["namespace"] == "flux-system"
        for step in test["spec"]["steps"]:
            assert set(step) == {"name", "try"}, step  # no catch, finally or cleanup that could act
            for op in step["try"]:
                assert len(set(op) & READ_ONLY) == 1 and set(op) <= READ_ONLY | OPERATION_FLAGS, op
                resource = next(op[k] for k in READ_ONLY if k in op)["resource"]
                if resource["kind"] != "Node":  # every namespaced object says where it is
                    assert resource["metadata"]["namespace"], resource


def test_the_suite_is_the_checklist_s_order_plugin_nodes_then_each_app(captures):
    assert [t["metadata"]["name"] for t in suite_of(captures["prod"])] == ["intel-gpu-plugin", "gpu-advertised",
                                                                          "plex"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_node_of_the_stack_is_asserted_to_advertise_exactly_one_gpu_by_default(captures, stack):
    nodes = asserted(suite_by_name(captures[stack])["gpu-advertised"], "Node")
    assert [n["metadata"]["name"] for n in nodes] == captures[stack].stack_outputs["nodes"]
    assert all(n["status"]["allocatable"] == {GPU: "1"} for n in nodes)
    # each its own operation that lets the next run: one run names every node that fails
    assert all(op.get("continueOnError") is True for op in operations(suite_by_name(captures[stack])[
        "gpu-advertised"]))


def test_a_shared_plugin_is_asserted_at_its_share_count(run_stack_text):
    text = (FIXTURES / "config" / "valid" / "shared-devices-with-reason.yaml").read_text()
    nodes = asserted(suite_by_name(run_stack_text(text, stack="dev"))["gpu-advertised"], "Node")
    assert [(n["metadata"]["name"], n["status"]["allocatable"][GPU]) for n in nodes] == [("k3s-dev-1", "2"),
                                                                                         ("k3s-dev-2", "2")]


def test_the_plugin_is_its_kustomization_ready_its_daemonset_ready_on_every_node_and_a_running_pod_on_each(captures):
    test = suite_by_name(captures["prod"])["intel-gpu-plugin"]
    [ks] = asserted(test, "Kustomization")
    assert ks["metadata"] == {"name": "intel-gpu-plugin", "namespace": "flux-system"}
    [ds] = asserted(test, "DaemonSet")
    assert set(ds["status"].values()) == {3} and "numberReady" in ds["status"]
    pods = asserted(test, "Pod")
    assert [p["spec"]["nodeName"] for p in pods] == ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
    assert all(p["metadata"]["labels"] == {"app": "intel-gpu-plugin"} and p["status"]["phase"] == "Running"
               for p in pods)


def test_before_the_switch_plex_is_checked_to_run_with_its_host_path_and_no_gpu_request(captures):
    test = suite_by_name(captures["prod"])["plex"]
    assert not [op for op in operations(test) if "error" in op]
    assert GPU not in yaml.safe_dump(test)
    running, with_host_path = asserted(test, "Pod")
    assert running["metadata"] == with_host_path["metadata"] == {"namespace": "plex",
                                                                  "labels": {"app.kubernetes.io/name": "plex"}}
    assert running["status"] == {"phase": "Running", "(conditions[?type == 'Ready'] | [0].status)": "True"}
    assert with_host_path["spec"] == {"(contains(to_array(volumes[].hostPath.path), '/dev/dri'))": True}


def test_after_the_switch_plex_is_scheduled_with_its_request_and_no_pod_of_it_mounts_the_host_path(switched):
    test = suite_by_name(switched)["plex"]
    [ks] = asserted(test, "Kustomization")
    assert ks["metadata"] == {"name": "plex", "namespace": "flux-system"}
    [pod] = asserted(test, "Pod")
    assert pod["spec"] == {"(nodeName != `null`)": True, f'(containers[0].resources.limits."{GPU}")': "1"}
    [error] = [op["error"]["resource"] for op in operations(test) if "error" in op]
    assert error["metadata"] == {"namespace": "plex", "labels": {"app.kubernetes.io/name": "plex"}}
    assert error["spec"] == {"(contains(to_array(volumes[].hostPath.path), '/dev/dri'))": True}


def test_the_suite_is_the_same_whatever_the_hash_seed(captures):
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import sys; sys.path.insert(0, 'tests'); from gitops.engine.program import run_program; "
            "from gitops.index import suite_path; from gitops.reports.post_merge import add_post_merge; "
            "from builders import capture_tree; "
            "from model.outputs import ProgramOutputs; c = run_program('prod'); t = capture_tree(c); "
            "add_post_merge(t, ProgramOutputs.from_output('prod', c.stack_outputs)); "
            "sys.stdout.buffer.write(t.files[suite_path(t.layout)])")
    runs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=True, timeout=300,
                           env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and b"kind: Test" in next(iter(runs))
