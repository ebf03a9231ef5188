"""The DRA route's evidence (model/dra/evidence.py), read directly: slices (`kubectl get deviceclasses,resourceslices
-o json`) and claims (`kubectl get pods,resourceclaims -A -o json`) parsed into what the report needs, the report's
lines, and the evidence files written and read back. Through `make verify-nodes`:
tests/gitops/test_verify_nodes_slices.py and test_verify_nodes_claims.py, whose inputs these reuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from model.dra.evidence import (
    AppPod,
    Claim,
    Claims,
    SliceDevice,
    SliceInputError,
    Slices,
    claim_report,
    claims_evidence_path,
    claims_evidence_text,
    dra_evidence_path,
    dra_evidence_text,
    parse_claims_evidence,
    parse_dra_evidence,
    read_claims,
    read_slices,
    slice_report,
)
from tests.gitops.test_verify_nodes_claims import claim, pod
from tests.gitops.test_verify_nodes_slices import DEVICE_CLASS, listing, resource_slice

DEVICE = "0000-00-02-0-0x7d67"  # the one device of test_verify_nodes_slices' resource_slice
SLICES_AS_IT_IS = "hint: use the output of `kubectl get deviceclasses,resourceslices -o json` as it is"
CLAIMS_AS_IT_IS = "hint: use the output of `kubectl get pods,resourceclaims -A -o json` as it is"
REGENERATE = ("hint: regenerate it with `kubectl get deviceclasses,resourceslices -o json > slices-prod.json && make "
              "verify-nodes STACK=prod SLICES=slices-prod.json WRITE_EVIDENCE=1`")
REGENERATE_CLAIMS = ("hint: regenerate it with `kubectl get pods,resourceclaims -A -o json > claims-prod.json && make "
                     "verify-nodes STACK=prod CLAIMS=claims-prod.json WRITE_EVIDENCE=1`")


def refused(read, *args: Any) -> str:
    with pytest.raises(SliceInputError) as info:
        read(*args)
    return str(info.value)


# --- where the evidence lives ------------------------------------------------------------------------------------

def test_each_stack_keeps_its_slice_and_its_allocation_evidence_in_folders_of_their_own():
    assert dra_evidence_path(Path("/p"), "prod") == Path("/p/evidence/dra/prod.yaml")
    assert claims_evidence_path(Path("/p"), "prod") == Path("/p/evidence/dra/claims/prod.yaml")


# --- slices ------------------------------------------------------------------------------------------------------

def test_the_slices_of_intel_s_driver_are_read_by_node_and_other_drivers_are_passed_over():
    bare = resource_slice("k3s-prod-3")
    del bare["spec"]["devices"]
    doc = listing(DEVICE_CLASS, resource_slice("k3s-prod-1"),
                  resource_slice("k3s-prod-1", driver="xe", health="Unknown"),
                  resource_slice("k3s-prod-2", slice_driver="gpu.nvidia.com"), bare)
    assert read_slices(doc, "slices.json") == Slices(True, {
        "k3s-prod-1": [SliceDevice(DEVICE, "i915", "Healthy"), SliceDevice(DEVICE, "xe", "Unknown")],
        "k3s-prod-3": []})


def test_a_device_class_of_another_name_is_not_intel_s():
    other = {**DEVICE_CLASS, "metadata": {"name": "gpu.nvidia.com"}}
    assert read_slices(listing(other), "slices.json") == Slices(False, {})


def test_a_device_of_unknown_health_is_usable_and_only_an_unhealthy_or_unreported_one_is_not():
    assert [SliceDevice("d", "i915", h).healthy for h in ("Healthy", "Unknown", "Unhealthy", None)] == [
        True, True, False, False]


@pytest.mark.parametrize(("doc", "problem"), [
    ([], "(root): not the output of `kubectl get deviceclasses,resourceslices -o json` (expected kind List with "
         "items)"),
    ({"kind": "List", "items": {}}, "(root): not the output of `kubectl get deviceclasses,resourceslices -o json` "
                                    "(expected kind List with items)"),
    ({"kind": "List", "items": ["a string"]}, 'items[0].kind: "None": neither a DeviceClass nor a ResourceSlice'),
    (listing({"kind": "DeviceClass"}), "items[0].metadata: missing"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": 7}}), "items[0].spec.driver: a number, not a string"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com"}}), "items[0].spec.nodeName: missing"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com", "nodeName": "a" * 254}}),
     f'items[0].spec.nodeName: "{"a" * 80}": not a Kubernetes node name (lowercase letters, digits, \'-\' and \'.\', '
     "at most 253)"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com", "nodeName": "n",
                                                "devices": [{"attributes": {}}]}}),
     "items[0].spec.devices[0].name: missing"),
    (listing({"kind": "ResourceSlice", "spec": {"driver": "gpu.intel.com", "nodeName": "n",
                                                "devices": [{"name": "d", "attributes": {"health": True}}]}}),
     "items[0].spec.devices[0].attributes.health: a boolean, not a mapping"),
], ids=["not-a-mapping", "items-not-a-list", "item-not-a-mapping", "device-class-without-metadata",
        "driver-not-a-string", "no-node-name", "node-name-too-long", "device-without-name", "attribute-not-a-mapping"])
def test_slices_not_as_kubectl_writes_them_are_refused_in_one_line_naming_the_path(doc, problem):
    assert refused(read_slices, doc, "slices.json") == f"slices.json: {problem}; {SLICES_AS_IT_IS}"


def test_the_slice_report_gives_each_configured_node_a_line_and_proves_those_with_usable_devices():
    slices = Slices(True, {
        "k3s-prod-1": [SliceDevice("a", "i915", "Healthy"), SliceDevice("b", "i915", "Unknown")],
        "k3s-prod-2": [SliceDevice("c", "xe", "Healthy"), SliceDevice("d", "i915", "Unhealthy"),
                       SliceDevice("e", None, None)],
        "k3s-prod-4": [SliceDevice("f", "i915", "Healthy")],
        "k3s-prod-5": []})
    lines, proven = slice_report("prod", ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3", "k3s-prod-5"], "i915", slices)
    assert lines == [
        "k3s-prod-1  gpu.intel.com: 2 healthy devices on i915",
        "k3s-prod-2  NO healthy device on i915 (the slice has: c (xe, Healthy), d (i915, Unhealthy), e (?, ?))",
        "k3s-prod-3  NO SLICE of driver gpu.intel.com",
        "k3s-prod-5  NO healthy device on i915 (the slice has: no device)",
        "k3s-prod-4  (not in Pulumi.prod.yaml cluster.nodes; ignored)"]
    assert proven == {"k3s-prod-1": 2}


def test_slice_evidence_holds_only_node_names_and_counts_and_reads_back_as_written():
    text = dra_evidence_text("prod", "i915", {"k3s-prod-2": 1, "k3s-prod-1": 2})
    assert text == (
        "# Slice evidence for the DRA route, written by `make verify-nodes STACK=prod SLICES=... WRITE_EVIDENCE=1`\n"
        "# from `kubectl get deviceclasses,resourceslices -o json`. Node names and healthy device counts only.\n"
        'stack: "prod"\ndriver: gpu.intel.com\nkernelDriver: i915\nnodes:\n  "k3s-prod-1": 2\n  "k3s-prod-2": 1\n')
    assert parse_dra_evidence(yaml.safe_load(text), "evidence/dra/prod.yaml", "prod", "i915") == {
        "k3s-prod-1": 2, "k3s-prod-2": 1}


@pytest.mark.parametrize(("doc", "problem"), [
    ({"stack": "dev", "driver": "gpu.intel.com", "kernelDriver": "i915", "nodes": {"a": 1}},
     'stack: "dev": expected "prod"'),
    ({"stack": "prod", "driver": "gpu.intel.com", "kernelDriver": "xe", "nodes": {"a": 1}},
     'kernelDriver: "xe": expected "i915"'),
    ({"stack": "prod", "driver": "gpu.intel.com", "kernelDriver": "i915", "nodes": {"a": 0}},
     "nodes.a: 0: not a count of 1 or more"),
    ({"stack": "prod", "driver": "gpu.intel.com", "kernelDriver": "i915", "nodes": {"a": 1}, "x": 1},
     "x: unknown keys; slice evidence holds stack, driver, kernelDriver and nodes only"),
])
def test_slice_evidence_of_another_stack_driver_or_count_is_refused(doc, problem):
    with pytest.raises(SliceInputError) as info:
        parse_dra_evidence(doc, "evidence/dra/prod.yaml", "prod", "i915")
    assert str(info.value) == f"evidence/dra/prod.yaml: {problem}; {REGENERATE}"


def test_slice_evidence_refuses_every_problem_at_once_one_line_each():
    doc = {"stack": "prod", "driver": "gpu.amd.com", "kernelDriver": "i915", "nodes": {}}
    assert refused(parse_dra_evidence, doc, "evidence/dra/prod.yaml", "prod", "i915").splitlines() == [
        f'evidence/dra/prod.yaml: driver: "gpu.amd.com": expected "gpu.intel.com"; {REGENERATE}',
        f"evidence/dra/prod.yaml: nodes: must map each node name to its healthy device count; {REGENERATE}"]


def test_slice_evidence_that_is_not_a_mapping_is_refused_before_anything_else():
    assert refused(parse_dra_evidence, ["stack"], "evidence/dra/prod.yaml", "prod", "i915") == (
        f"evidence/dra/prod.yaml: (root): not a mapping; {REGENERATE}")


# --- claims ------------------------------------------------------------------------------------------------------

def test_the_pods_and_claims_are_read_with_only_what_the_proof_needs():
    other_driver = claim(name="other", driver="gpu.nvidia.com", reserved=None)
    doc = listing(pod(), claim(), pod(app="jellyfin", phase="Pending", ready="False", claim=None, uid="uid-2"),
                  other_driver)
    assert read_claims(doc, "claims.json") == Claims(
        (AppPod("plex", "plex-7c9", "uid-1", "plex", "k3s-prod-2", True, True, "plex-7c9-gpu-abcde"),
         AppPod("jellyfin", "jellyfin-7c9", "uid-2", "jellyfin", "k3s-prod-2", False, False, None)),
        {("plex", "plex-7c9-gpu-abcde"): Claim("plex", "plex-7c9-gpu-abcde", (f"k3s-prod-2/{DEVICE}",), ("uid-1",)),
         ("plex", "other"): Claim("plex", "other", (), ())})


@pytest.mark.parametrize(("doc", "problem"), [
    ({"kind": "PodList", "items": []}, "(root): not the output of `kubectl get pods,resourceclaims -A -o json` "
                                       "(expected kind List with items)"),
    (listing(DEVICE_CLASS), 'items[0].kind: "DeviceClass": neither a Pod nor a ResourceClaim'),
    (listing({"kind": "ResourceClaim", "metadata": {"namespace": "plex"}}), "items[0].metadata.name: missing"),
    (listing({**claim(), "status": {"reservedFor": [{"uid": 1}]}}),
     "items[0].status.reservedFor[0].uid: a number, not a string"),
    (listing({**pod(), "spec": {"nodeName": ["k3s-prod-2"]}}), "items[0].spec.nodeName: a list, not a string"),
], ids=["not-a-list", "a-slice-listing", "claim-without-name", "uid-not-a-string", "node-name-not-a-string"])
def test_claims_not_as_kubectl_writes_them_are_refused_in_one_line_naming_the_path(doc, problem):
    assert refused(read_claims, doc, "claims.json") == f"claims.json: {problem}; {CLAIMS_AS_IT_IS}"


def test_the_claim_report_proves_an_app_by_its_first_pod_running_on_an_allocated_claim_reserved_for_it():
    found = read_claims(listing(pod(app="plex", phase="Pending", ready="False"), claim(),
                                {**pod(app="plex"), "metadata": {**pod()["metadata"], "name": "plex-8d0"}}),
                        "claims.json")
    lines, proven = claim_report(["plex", "jellyfin"], ["k3s-prod-2"], found)
    assert lines == [
        "plex      pod plex-8d0 Running on k3s-prod-2, claim plex-7c9-gpu-abcde allocated k3s-prod-2/"
        f"{DEVICE} and reserved for it",
        "jellyfin  NOT PROVEN: no pod labelled app.kubernetes.io/name=jellyfin in namespace jellyfin"]
    assert proven == {"plex": "k3s-prod-2"}


def test_an_app_not_proven_lists_at_most_three_of_its_pods_problems():
    pods = [{**pod(claim=None), "metadata": {**pod()["metadata"], "name": f"plex-{n}"}} for n in range(4)]
    lines, proven = claim_report(["plex"], ["k3s-prod-2"], read_claims(listing(*pods), "claims.json"))
    no_claim = "has no `gpu` claim (is step 3's export reconciled?)"
    assert lines == [f"plex  NOT PROVEN: pod plex-0 {no_claim}; pod plex-1 {no_claim}; pod plex-2 {no_claim}"]
    assert proven == {}


def test_allocation_evidence_holds_only_apps_and_nodes_and_reads_back_as_written():
    text = claims_evidence_text("prod", {"plex": "k3s-prod-2", "jellyfin": "k3s-prod-1"})
    assert text == (
        "# Allocation evidence for the DRA route, written by `make verify-nodes STACK=prod CLAIMS=... "
        "WRITE_EVIDENCE=1`\n# from `kubectl get pods,resourceclaims -A -o json`: each GPU app and the node its "
        'allocated claim runs it on.\nstack: "prod"\ndriver: gpu.intel.com\napps:\n  "jellyfin": "k3s-prod-1"\n'
        '  "plex": "k3s-prod-2"\n')
    assert parse_claims_evidence(yaml.safe_load(text), "evidence/dra/claims/prod.yaml", "prod") == {
        "jellyfin": "k3s-prod-1", "plex": "k3s-prod-2"}


def test_allocation_evidence_of_another_stack_or_naming_no_node_is_refused_one_line_a_problem():
    doc = {"stack": "dev", "driver": "gpu.intel.com", "apps": {"plex": "K3S", "jellyfin": 3}, "nodes": {}}
    not_a_node = "not a Kubernetes node name (lowercase letters, digits, '-' and '.', at most 253)"
    assert refused(parse_claims_evidence, doc, "evidence/dra/claims/prod.yaml", "prod").splitlines() == [
        "evidence/dra/claims/prod.yaml: nodes: unknown keys; allocation evidence holds stack, driver and apps only; "
        + REGENERATE_CLAIMS,
        f'evidence/dra/claims/prod.yaml: stack: "dev": expected "prod"; {REGENERATE_CLAIMS}',
        f'evidence/dra/claims/prod.yaml: apps.plex: "K3S": {not_a_node}; {REGENERATE_CLAIMS}',
        f"evidence/dra/claims/prod.yaml: apps.jellyfin: 3: {not_a_node}; {REGENERATE_CLAIMS}"]


def test_allocation_evidence_without_apps_is_refused():
    doc = {"stack": "prod", "driver": "gpu.intel.com", "apps": {}}
    assert refused(parse_claims_evidence, doc, "evidence/dra/claims/prod.yaml", "prod") == (
        "evidence/dra/claims/prod.yaml: apps: must map each GPU app to the node its allocated claim runs it on; "
        + REGENERATE_CLAIMS)
