"""The DRA route's slice evidence (docs/dra.md, step 2): `make verify-nodes STACK=… SLICES=…` reads
`kubectl get deviceclasses,resourceslices -o json` (model/dra/evidence.py), prints one line per node, and writes
evidence/dra/<stack>.yaml only when the DeviceClass exists and every node publishes a healthy device on the stack's
kernel driver. The input is untrusted: one line per refusal, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import PROD_NODES, make_project, stack_text
from gitops.verify_nodes import main as verify
from model.config import DRA_DRIVER_IMAGE
from model.dra.evidence import dra_evidence_path, parse_dra_evidence

DRA = (f"  gpu-platform:gpu:\n    route: dra\n    dra:\n      image: {DRA_DRIVER_IMAGE}\n"
       "      imageDigest: sha256:" + "ab" * 32 + "\n")
SLICES_AS_IT_IS = "hint: use the output of `kubectl get deviceclasses,resourceslices -o json` as it is"
DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.intel.com"}}


def resource_slice(node: str, driver: str = "i915", health: str = "Healthy", slice_driver: str = "gpu.intel.com",
                   ) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-x"},
            "spec": {"driver": slice_driver, "nodeName": node,
                     "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                     "devices": [{"name": "0000-00-02-0-0x7d67", "attributes": {
                         "driver": {"string": driver}, "health": {"string": health}, "sriov": {"bool": True}}}]}}


def listing(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project", {"prod": stack_text("prod").replace("config:\n", "config:\n" + DRA, 1)})


def next_step(tmp_path: Path) -> str:
    """The line under every `not ready:` of the slices: what to look at, and the command that checks again."""
    return ("  next: list the slices (`kubectl get resourceslices`) and check the DRA driver's pods (`kubectl -n "
            "intel-gpu-resource-driver get pods -o wide`), then run `make verify-nodes STACK=prod "
            f"SLICES={tmp_path / 'slices.json'} WRITE_EVIDENCE=1` again\n")


def run(project: Path, tmp_path: Path, doc: Any, *flags: str) -> int:
    path = tmp_path / "slices.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return verify(["--stack", "prod", "--project-dir", str(project), "--slices", str(path), *flags])


def test_every_node_with_a_healthy_i915_device_and_the_device_class_is_ready_and_writes_only_counts(
        project, tmp_path, capsys):
    doc = listing(DEVICE_CLASS, *(resource_slice(n) for n in PROD_NODES),
                  resource_slice("k3s-prod-1", slice_driver="gpu.nvidia.com"))  # another driver's: passed over
    assert run(project, tmp_path, doc, "--write-evidence") == 0
    out = capsys.readouterr().out
    assert [line.split()[1:] for line in out.splitlines()[:3]] == [
        ["gpu.intel.com:", "1", "healthy", "device", "on", "i915"]] * 3
    assert "ready: all 3 nodes publish a healthy i915 device of driver gpu.intel.com" in out
    written = yaml.safe_load(dra_evidence_path(project, "prod").read_text())
    assert written == {"stack": "prod", "driver": "gpu.intel.com", "kernelDriver": "i915",
                       "nodes": {n: 1 for n in PROD_NODES}}
    assert parse_dra_evidence(written, "evidence/dra/prod.yaml", "prod", "i915") == {n: 1 for n in PROD_NODES}


def test_devices_of_unknown_health_count_as_the_driver_without_health_monitoring_publishes_every_device(
        project, tmp_path, capsys):
    # Upstream's newDriver (cmd/kubelet-gpu-plugin/driver.go) sets every device's health to "Unknown" when `-m` is
    # off, and the exported driver runs without it (no xpumd): "Healthy" would never come.
    doc = listing(DEVICE_CLASS, *(resource_slice(n, health="Unknown") for n in PROD_NODES))
    assert run(project, tmp_path, doc, "--write-evidence") == 0
    assert "ready: all 3 nodes publish a healthy i915 device of driver gpu.intel.com" in capsys.readouterr().out
    assert yaml.safe_load(dra_evidence_path(project, "prod").read_text())["nodes"] == {n: 1 for n in PROD_NODES}


@pytest.mark.parametrize(("slices", "says"), [
    ([resource_slice("k3s-prod-1"), resource_slice("k3s-prod-2")], "k3s-prod-3  NO SLICE of driver gpu.intel.com"),
    ([resource_slice("k3s-prod-1"), resource_slice("k3s-prod-2"), resource_slice("k3s-prod-3", driver="xe")],
     "k3s-prod-3  NO healthy device on i915 (the slice has: 0000-00-02-0-0x7d67 (xe, Healthy))"),
    ([resource_slice("k3s-prod-1"), resource_slice("k3s-prod-2"), resource_slice("k3s-prod-3", health="Unhealthy")],
     "k3s-prod-3  NO healthy device on i915 (the slice has: 0000-00-02-0-0x7d67 (i915, Unhealthy))"),
])
def test_a_node_without_a_healthy_device_on_the_kernel_driver_is_named_and_nothing_is_written(
        project, tmp_path, capsys, slices, says):
    assert run(project, tmp_path, listing(DEVICE_CLASS, *slices), "--write-evidence") == 1
    captured = capsys.readouterr()
    assert says in captured.out
    assert captured.err == (
        "not ready: 1 of 3 nodes publish no healthy i915 device: k3s-prod-3; no evidence written\n"
        + next_step(tmp_path))
    assert not dra_evidence_path(project, "prod").exists()


def test_without_the_device_class_nothing_is_proven(project, tmp_path, capsys):
    assert run(project, tmp_path, listing(*(resource_slice(n) for n in PROD_NODES)), "--write-evidence") == 1
    assert capsys.readouterr().err == (
        "not ready: no DeviceClass gpu.intel.com; no evidence written\n" + next_step(tmp_path))
    assert not dra_evidence_path(project, "prod").exists()


def test_a_stack_on_the_device_plugin_route_is_refused_in_one_line(tmp_path, capsys):
    project = make_project(tmp_path / "plugin", {"prod": stack_text("prod")})
    assert run(project, tmp_path, listing(DEVICE_CLASS), "--write-evidence") == 2
    assert capsys.readouterr().err == (
        'error: Pulumi.prod.yaml: gpu-platform:gpu.route: "device-plugin": slice evidence is for the DRA route; hint: '
        "set gpu.route: dra (docs/dra.md), or give `kubectl get nodes -o json` to NODES for the device plugin\n")


@pytest.mark.parametrize(("content", "message"), [
    ("{", "line 1: not JSON: Expecting property name enclosed in double quotes; hint: use real `kubectl ... -o json` "
          "output"),
    ({"kind": "NodeList", "items": []}, "(root): not the output of `kubectl get deviceclasses,resourceslices -o json` "
                                        f"(expected kind List with items); {SLICES_AS_IT_IS}"),
    (listing({"kind": "Node", "metadata": {"name": "k3s-prod-1"}}),
     f'items[0].kind: "Node": neither a DeviceClass nor a ResourceSlice; {SLICES_AS_IT_IS}'),
    (listing({"kind": "ResourceSlice"}), f"items[0].spec: missing; {SLICES_AS_IT_IS}"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com", "nodeName": "K3S_PROD"}}),
     'items[0].spec.nodeName: "K3S_PROD": not a Kubernetes node name (lowercase letters, digits, \'-\' and \'.\', '
     f"at most 253); {SLICES_AS_IT_IS}"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com", "nodeName": "k3s-prod-1",
                                                "devices": {"a": 1}}}),
     f"items[0].spec.devices: a mapping, not a list; {SLICES_AS_IT_IS}"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com", "nodeName": "k3s-prod-1",
                                                "devices": [{"name": "d", "attributes": {"driver": {"string": 7}}}]}}),
     f"items[0].spec.devices[0].attributes.driver.string: a number, not a string; {SLICES_AS_IT_IS}"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(project, tmp_path, capsys, content, message):
    assert run(project, tmp_path, content, "--write-evidence") == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'slices.json'}: {message}\n"
    assert not dra_evidence_path(project, "prod").exists()
