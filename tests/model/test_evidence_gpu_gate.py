"""The evidence gate: Plex requests gpu.intel.com/i915 only with evidence that every configured node advertises it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from builders import project_keys, registration
from components.gpu_app import deployment_args
from components.plex import plex_app
from conftest import COMPLETE_PROD_EVIDENCE, EXAMPLE, PROD_NODES, evidence_for, make_project, stack_text
from gitops.export import main as export_main
from model.config import PlexConfig
from model.evidence import Evidence, EvidenceError, decide_gpu_access, parse_evidence

SRC = "evidence/prod.yaml"
REGENERATE = ("; hint: regenerate it with `kubectl get nodes -o json > nodes-prod.json && "
              "make verify-nodes STACK=prod NODES=nodes-prod.json WRITE_EVIDENCE=1`")


def decide(evidence_text: str | None, requested: str = "auto", gpu: str = "intel-quicksync"):
    from ruamel.yaml import YAML
    evidence = Evidence(SRC, None) if evidence_text is None else parse_evidence(
        YAML(typ="safe", pure=True).load(evidence_text), SRC, "prod")
    return decide_gpu_access(gpu, requested, list(PROD_NODES), evidence, "prod")


def i915_limit(capture) -> str | None:
    d = registration(capture, "kubernetes:apps/v1:Deployment", "plex-deployment").inputs
    return d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].get("gpu.intel.com/i915")


def test_missing_evidence_keeps_the_host_path_and_says_which_command_to_run():
    decision = decide(None)
    assert decision.access == "host-path"
    assert "evidence/prod.yaml is missing" in decision.reason
    assert "make verify-nodes STACK=prod" in decision.reason


def test_partial_evidence_keeps_the_host_path_naming_the_uncovered_node():
    decision = decide(evidence_for("prod", {"k3s-prod-1": 1, "k3s-prod-2": 1}))
    assert decision.access == "host-path" and "does not cover k3s-prod-3" in decision.reason


def test_complete_evidence_switches_to_the_device_plugin():
    assert decide(COMPLETE_PROD_EVIDENCE).access == "device-plugin"


def test_evidence_for_other_nodes_is_refused():
    with pytest.raises(EvidenceError) as caught:
        decide(evidence_for("prod", {**{n: 1 for n in PROD_NODES}, "k3s-old-9": 1}))
    assert caught.value.lines == [
        "evidence/prod.yaml: nodes: k3s-old-9: not in this stack's cluster.nodes (k3s-prod-1, k3s-prod-2, k3s-prod-3); "
        f"the evidence is for another cluster or an old node list{REGENERATE}"]


@pytest.mark.parametrize("text,problem", [
    ("just a string", "(root): not a mapping"),
    ("stack: prod\nresource: gpu.intel.com/i915\nnodes: []\n",
     "nodes: []: must map each node name to its allocatable gpu.intel.com/i915"),
    (evidence_for("dev", {n: 1 for n in PROD_NODES}), "stack: 'dev': evidence of another stack; expected 'prod'"),
    (evidence_for("prod", {**{n: 1 for n in PROD_NODES}, "k3s-prod-1": "one"}),
     "nodes.k3s-prod-1: 'one': not a whole number"),
    (evidence_for("prod", {"k3s-prod-1": 0, "k3s-prod-2": 1, "k3s-prod-3": 1}),
     "nodes.k3s-prod-1: 0: advertises no gpu.intel.com/i915; Plex would be Unschedulable there"),
    (COMPLETE_PROD_EVIDENCE.replace("gpu.intel.com/i915", "gpu.intel.com/xe"),
     "resource: 'gpu.intel.com/xe': must be gpu.intel.com/i915; the nodes run the xe driver, and Plex requests i915"),
    (COMPLETE_PROD_EVIDENCE + "capturedFrom: kubectl\n",
     "capturedFrom: unknown keys; evidence holds stack, resource and nodes only"),
])
def test_malformed_evidence_is_refused(text, problem):
    with pytest.raises(EvidenceError) as caught:
        decide(text)
    assert caught.value.lines == [f"{SRC}: {problem}{REGENERATE}"]


def test_an_explicit_device_plugin_request_without_evidence_is_refused():
    with pytest.raises(EvidenceError) as caught:
        decide(None, requested="device-plugin")
    assert caught.value.lines == [
        'Pulumi.prod.yaml: gpu-platform:plex.hardware.intelGpuAccess: "device-plugin": refused: there is no evidence '
        "that the nodes advertise gpu.intel.com/i915 (evidence/prod.yaml is missing); requesting it now would leave "
        "plex Unschedulable, its Kustomization never Ready, and every tier that waits for it stalled; hint: merge the "
        "plugin first, then run `kubectl get nodes -o json > nodes-prod.json && make verify-nodes STACK=prod "
        "NODES=nodes-prod.json WRITE_EVIDENCE=1`"]


def test_an_explicit_device_plugin_request_with_complete_evidence_is_granted():
    assert decide(COMPLETE_PROD_EVIDENCE, requested="device-plugin").access == "device-plugin"


def test_host_path_holds_back_even_with_complete_evidence():
    assert decide(COMPLETE_PROD_EVIDENCE, requested="host-path").access == "host-path"


def test_the_shipped_stacks_export_plex_without_the_resource_request(captures):
    for stack, capture in captures.items():
        assert i915_limit(capture) is None, f"{stack}: Plex requests i915 without evidence"


def test_the_program_requests_the_resource_once_evidence_is_complete(run_stack_text):
    assert i915_limit(run_stack_text(stack_text("prod"), stack="prod", evidence=COMPLETE_PROD_EVIDENCE)) == "1"


def test_the_export_refuses_bad_evidence_and_writes_nothing(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"prod": stack_text("prod")},
                           {"prod": evidence_for("prod", {"k3s-prod-1": 1, "k3s-prod-2": 0, "k3s-prod-3": 1})})
    out = tmp_path / "out"
    assert export_main(["--stack", "prod", "--out", str(out), "--project-dir", str(project)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: evidence/prod.yaml: nodes.k3s-prod-2: 0: advertises no gpu.intel.com/i915; Plex would be "
        f"Unschedulable there{REGENERATE}",
        "nothing was written",
    ]
    assert not out.exists()


def test_the_export_says_loudly_why_plex_keeps_the_host_path(tmp_path, capsys):
    (tmp_path / "o").mkdir()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "prod", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "WARNING prod: plex: plex keeps the legacy /dev/dri hostPath" in err
    assert "make verify-nodes STACK=prod" in err


# Every configuration reachable from a stack file: any hardware setting, any evidence state.
node_counts = st.one_of(st.integers(min_value=0, max_value=3), st.sampled_from(["1", "x"]))
evidence_states = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(PROD_NODES + ("k3s-other",)), node_counts, max_size=4),
)


@settings(max_examples=150, deadline=None)
@given(gpu=st.sampled_from(["none", "intel-quicksync"]),
       requested=st.sampled_from(["auto", "host-path", "device-plugin"]), nodes=evidence_states)
def test_no_reachable_configuration_requests_the_resource_without_complete_evidence(gpu, requested, nodes):
    if gpu == "none" and requested != "auto":
        return  # the config model refuses this combination (tests/fixtures/config/invalid)
    text = None if nodes is None else evidence_for("prod", nodes)
    try:
        decision = decide(text, requested=requested, gpu=gpu)
    except EvidenceError:
        return  # refused: nothing is exported
    raw = project_keys(EXAMPLE / "Pulumi.prod.yaml")["plex"]
    raw["hardware"] = {"gpu": gpu, "intelGpuAccess": requested}
    # Read as built: plain Args objects, no Outputs (the declared Input types allow them).
    args: Any = deployment_args(plex_app(PlexConfig.model_validate(raw)), decision.access)
    limits = args.spec.template.spec.containers[0].resources.limits
    if "gpu.intel.com/i915" in limits:
        advertising = {n for n, c in (nodes or {}).items() if str(c).isdigit() and int(c) >= 1}
        assert nodes is not None and set(PROD_NODES) <= advertising
