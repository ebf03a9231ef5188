"""The DRA route's allocation evidence (docs/dra.md, step 4): `make verify-nodes STACK=… CLAIMS=…` reads
`kubectl get pods,resourceclaims -A -o json` (model/dra/evidence.py), prints one line per GPU app, and writes
evidence/dra/claims/<stack>.yaml only when every app's pod is Running and Ready on a claim that is allocated a device
of Intel's driver and reserved for that pod. The input is untrusted: one line per refusal, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import make_project, stack_text
from gitops.verify_nodes import main as verify
from model.dra.evidence import claims_evidence_path
from tests.components.test_intel_gpu_dra import with_dra
from tests.gitops.test_verify_nodes_slices import DRA, listing

ON_CLAIMS = DRA + "      stage: apps-on-claims\n"
CLAIMS_AS_IT_IS = "hint: use the output of `kubectl get pods,resourceclaims -A -o json` as it is"


def pod(app: str = "plex", node: str = "k3s-prod-2", phase: str = "Running", ready: str = "True",
        claim: str | None = "plex-7c9-gpu-abcde", uid: str = "uid-1") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}
    if claim:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{app}-7c9", "namespace": app, "uid": uid,
                         "labels": {"app.kubernetes.io/name": app}},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"{app}-gpu"}]},
            "status": status}


def claim(app: str = "plex", name: str = "plex-7c9-gpu-abcde", reserved: str | None = "uid-1",
          driver: str = "gpu.intel.com", allocated: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {"devices": {"results": [
            {"request": "gpu", "driver": driver, "pool": "k3s-prod-2", "device": "0000-00-02-0-0x7d67"}]}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": f"{app}-7c9", "uid": reserved}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": app}, "status": status}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project", {"prod": with_dra(stack_text("prod"), ON_CLAIMS)})


def run(project: Path, tmp_path: Path, doc: Any, *flags: str) -> int:
    path = tmp_path / "claims.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return verify(["--stack", "prod", "--project-dir", str(project), "--claims", str(path), *flags])


def test_plex_running_on_an_allocated_reserved_claim_writes_only_the_app_and_its_node(project, tmp_path, capsys):
    assert run(project, tmp_path, listing(pod(), claim()), "--write-evidence") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("plex  pod plex-7c9 Running on k3s-prod-2, claim plex-7c9-gpu-abcde allocated "
                                   "k3s-prod-2/0000-00-02-0-0x7d67 and reserved for it")
    assert yaml.safe_load(claims_evidence_path(project, "prod").read_text()) == {
        "stack": "prod", "driver": "gpu.intel.com", "apps": {"plex": "k3s-prod-2"}}


@pytest.mark.parametrize(("items", "says"), [
    ([], "NOT PROVEN: no pod labelled app.kubernetes.io/name=plex in namespace plex"),
    ([pod(phase="Pending", ready="False"), claim()], "pod plex-7c9 not Running and Ready"),
    ([pod(claim=None)], "pod plex-7c9 has no `gpu` claim (is step 3's export reconciled?)"),
    ([pod(), claim(allocated=False)], "claim plex-7c9-gpu-abcde of pod plex-7c9 not allocated a gpu.intel.com device"),
    ([pod(), claim(driver="gpu.nvidia.com")], "not allocated a gpu.intel.com device"),
    ([pod(), claim(reserved="uid-other")], "claim plex-7c9-gpu-abcde not reserved for pod plex-7c9"),
    ([pod(node="k3s-old-9"), claim()], "pod plex-7c9 runs on k3s-old-9, not a node of the stack"),
])
def test_an_app_not_proven_on_its_claim_exits_1_and_writes_nothing(project, tmp_path, capsys, items, says):
    assert run(project, tmp_path, listing(*items), "--write-evidence") == 1
    captured = capsys.readouterr()
    assert says in captured.out
    assert captured.err == (
        "not ready: 1 of 1 GPU apps not proven on an allocated claim: plex; no evidence written\n"
        "  next: check the apps' claims (`kubectl get resourceclaims -A`) and their pods, then run "
        f"`make verify-nodes STACK=prod CLAIMS={tmp_path / 'claims.json'} WRITE_EVIDENCE=1` again\n")
    assert not claims_evidence_path(project, "prod").exists()


@pytest.mark.parametrize(("doc", "says"), [
    ({"kind": "NodeList", "items": []}, "(root): not the output of `kubectl get pods,resourceclaims -A -o json` "
                                        f"(expected kind List with items); {CLAIMS_AS_IT_IS}"),
    ({"kind": "List", "items": [{"kind": "ResourceSlice"}]},
     f'items[0].kind: "ResourceSlice": neither a Pod nor a ResourceClaim; {CLAIMS_AS_IT_IS}'),
    ({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "x"}}]},
     f"items[0].metadata.namespace: missing; {CLAIMS_AS_IT_IS}"),
    ({"kind": "List", "items": [{**claim(), "status": {"allocation": {"devices": {"results": "all"}}}}]},
     f"items[0].status.allocation.devices.results: a string, not a list; {CLAIMS_AS_IT_IS}"),
    ("{not json", "line 1: not JSON: Expecting property name enclosed in double quotes; hint: use real `kubectl ... "
                  "-o json` output"),
])
def test_input_that_is_not_kubectl_s_is_one_line_and_exit_2(project, tmp_path, capsys, doc, says):
    assert run(project, tmp_path, doc, "--write-evidence") == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'claims.json'}: {says}\n"
    assert not claims_evidence_path(project, "prod").exists()


def test_a_stack_before_step_3_has_no_claims_to_prove(tmp_path, capsys):
    project = make_project(tmp_path / "project", {"prod": with_dra(stack_text("prod"), DRA)})
    assert run(project, tmp_path, listing(pod(), claim()), "--write-evidence") == 2
    assert capsys.readouterr().err == (
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "driver-added": allocation evidence proves step 3 '
        "(apps-on-claims), which this stack has not exported; hint: export and merge gpu.dra.stage: apps-on-claims "
        "first (docs/dra.md)\n")
