"""The GPU gate and its evidence, as a person meets them: the decision a stack exports (plexGpuAccess and
plexGpuReason), and the one-line refusals `<file>: <key>: <problem>; hint: <fix>` when the gate says no.

Pure and fast (no mock engine) except the last test, which runs the real program once."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from builders import registration
from model.evidence import Evidence, EvidenceError, GpuDecision, decide_gpu_access, load_evidence, parse_evidence

NODES = ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
SRC = "evidence/prod.yaml"
NEXT = ("kubectl get nodes -o json > nodes-prod.json && "
        "make verify-nodes STACK=prod NODES=nodes-prod.json WRITE_EVIDENCE=1")
REGENERATE = f"; hint: regenerate it with `{NEXT}`"

MISSING = Evidence(SRC, None)
COMPLETE_NODES = {n: 1 for n in NODES}
COMPLETE = Evidence(SRC, COMPLETE_NODES)
PARTIAL = Evidence(SRC, {"k3s-prod-1": 1})
FOREIGN = Evidence(SRC, {n: 1 for n in NODES + ["k3s-old-9"]})
EVIDENCE_STATES = {"missing": MISSING, "complete": COMPLETE, "partial": PARTIAL, "foreign": FOREIGN}
REQUESTS = ["auto", "host-path", "device-plugin"]


def evidence_text(stack: str = "prod", nodes: dict | None = None, resource: str = "gpu.intel.com/i915") -> str:
    nodes = {n: 1 for n in NODES} if nodes is None else nodes
    return f"stack: {stack}\nresource: {resource}\nnodes:\n" + "".join(f"  {k}: {v}\n" for k, v in nodes.items())


def refusal(call) -> list[str]:
    with pytest.raises(EvidenceError) as caught:
        call()
    return caught.value.lines


def load(tmp_path, content: str | bytes) -> Evidence:
    (tmp_path / "evidence").mkdir(exist_ok=True)
    path = tmp_path / "evidence" / "prod.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return load_evidence(tmp_path, "prod")


# --- the decision ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("requested", REQUESTS)
@pytest.mark.parametrize("state", sorted(EVIDENCE_STATES))
@pytest.mark.parametrize("nodes", [NODES, []], ids=["three-nodes", "no-nodes"])
def test_a_stack_with_gpu_none_never_requests_the_device_whatever_the_evidence(requested, state, nodes):
    decision = decide_gpu_access("none", requested, nodes, EVIDENCE_STATES[state], "prod")
    assert decision == GpuDecision("none", "hardware.gpu is none")


@pytest.mark.parametrize("requested", REQUESTS)
@pytest.mark.parametrize("evidence", [MISSING, Evidence(SRC, {}), COMPLETE], ids=["missing", "empty", "for-nodes"])
def test_the_gate_itself_refuses_an_empty_node_list_whatever_the_evidence_and_request(requested, evidence):
    lines = refusal(lambda: decide_gpu_access("intel-quicksync", requested, [], evidence, "prod"))
    assert lines == ["Pulumi.prod.yaml: gpu-platform:cluster.nodes: no nodes: nothing could prove that the nodes "
                     "plex runs on advertise gpu.intel.com/i915; hint: list every node of the cluster "
                     "(`kubectl get nodes`)"]


def test_complete_evidence_grants_the_device_plugin_and_says_which_file_proved_it():
    assert decide_gpu_access("intel-quicksync", "auto", NODES, COMPLETE, "prod") == GpuDecision(
        "device-plugin", "evidence/prod.yaml shows every node advertising gpu.intel.com/i915")


def test_a_host_path_request_holds_plex_back_and_says_it_was_the_config():
    for evidence in (MISSING, PARTIAL, COMPLETE):
        assert decide_gpu_access("intel-quicksync", "host-path", NODES, evidence, "prod") == GpuDecision(
            "host-path", "plex.hardware.intelGpuAccess is host-path (held back by config)")


def test_without_evidence_plex_keeps_the_host_path_and_the_reason_gives_the_next_command():
    assert decide_gpu_access("intel-quicksync", "auto", NODES, MISSING, "prod") == GpuDecision(
        "host-path", "plex keeps the legacy /dev/dri hostPath (a known no-op: EPERM on open) because there is no "
                     "evidence that the nodes advertise gpu.intel.com/i915 (evidence/prod.yaml is missing); "
                     f"next: {NEXT}")


def test_partial_evidence_keeps_the_host_path_and_names_every_uncovered_node():
    reason = decide_gpu_access("intel-quicksync", "auto", NODES, PARTIAL, "prod").reason
    assert "because evidence/prod.yaml does not cover k3s-prod-2, k3s-prod-3; next: " in reason


@pytest.mark.parametrize("evidence,why", [
    (MISSING, "there is no evidence that the nodes advertise gpu.intel.com/i915 (evidence/prod.yaml is missing)"),
    (PARTIAL, "evidence/prod.yaml does not cover k3s-prod-2, k3s-prod-3"),
], ids=["missing", "partial"])
def test_an_explicit_device_plugin_request_without_full_evidence_is_one_refusal_line(evidence, why):
    assert refusal(lambda: decide_gpu_access("intel-quicksync", "device-plugin", NODES, evidence, "prod")) == [
        f'Pulumi.prod.yaml: gpu-platform:plex.hardware.intelGpuAccess: "device-plugin": refused: {why}; requesting it '
        "now would leave plex Unschedulable, its Kustomization never Ready, and every tier that waits for it stalled; "
        f"hint: merge the plugin first, then run `{NEXT}`"]


@pytest.mark.parametrize("requested", REQUESTS)
def test_evidence_naming_nodes_outside_the_cluster_is_refused_listing_them_and_the_cluster(requested):
    evidence = Evidence(SRC, {**COMPLETE_NODES, "k3s-old-9": 1, "k3s-old-8": 2})
    assert refusal(lambda: decide_gpu_access("intel-quicksync", requested, NODES, evidence, "prod")) == [
        "evidence/prod.yaml: nodes: k3s-old-8, k3s-old-9: not in this stack's cluster.nodes (k3s-prod-1, k3s-prod-2, "
        f"k3s-prod-3); the evidence is for another cluster or an old node list{REGENERATE}"]


# --- the evidence file ----------------------------------------------------------------------------------------------

def test_no_evidence_file_means_missing_evidence_named_by_its_path(tmp_path):
    evidence = load_evidence(tmp_path, "prod")
    assert evidence == Evidence("evidence/prod.yaml", None)
    reason = decide_gpu_access("intel-quicksync", "auto", NODES, evidence, "prod").reason
    assert "(evidence/prod.yaml is missing)" in reason


def test_the_evidence_keeps_each_nodes_advertised_count(tmp_path):
    text = evidence_text(nodes={"k3s-prod-1": 2, "k3s-prod-2": '"1"', "k3s-prod-3": 1})
    assert load(tmp_path, text) == Evidence(SRC, {"k3s-prod-1": 2, "k3s-prod-2": 1, "k3s-prod-3": 1})


@pytest.mark.parametrize("content,expected", [
    ("stack: prod\nresource: gpu.intel.com/i915\nnodes: {}\n",
     "evidence/prod.yaml: nodes: {}: must map each node name to its allocatable gpu.intel.com/i915"),
    ("stack: prod\nresource: gpu.intel.com/i915\nnodes: [k3s-prod-1]\n",
     "evidence/prod.yaml: nodes: ['k3s-prod-1']: must map each node name to its allocatable gpu.intel.com/i915"),
    ("stack: prod\nresource: gpu.intel.com/i915\nnodes: k3s-prod-1\n",
     "evidence/prod.yaml: nodes: 'k3s-prod-1': must map each node name to its allocatable gpu.intel.com/i915"),
    ("stack: prod\nresource: gpu.intel.com/i915\n",
     "evidence/prod.yaml: nodes: None: must map each node name to its allocatable gpu.intel.com/i915"),
    ("- k3s-prod-1\n- k3s-prod-2\n", "evidence/prod.yaml: (root): not a mapping"),
    ("3\n", "evidence/prod.yaml: (root): not a mapping"),
    ("", "evidence/prod.yaml: (root): not a mapping"),
    (evidence_text(nodes={"k3s-prod-1": 1, "k3s-prod-2": "²", "k3s-prod-3": 1}),
     "evidence/prod.yaml: nodes.k3s-prod-2: '²': not a whole number"),
    (evidence_text(nodes={"k3s-prod-1": 1, "k3s-prod-2": "true", "k3s-prod-3": 1}),
     "evidence/prod.yaml: nodes.k3s-prod-2: True: not a whole number"),
    (evidence_text(nodes={"k3s-prod-1": 1, "k3s-prod-2": 1, "k3s-prod-3": -1}),
     "evidence/prod.yaml: nodes.k3s-prod-3: -1: advertises no gpu.intel.com/i915; Plex would be Unschedulable there"),
], ids=["nodes-empty-mapping", "nodes-list", "nodes-string", "nodes-absent", "list-root", "number-root", "empty-file",
        "superscript-count", "boolean-count", "negative-count"])
def test_a_malformed_evidence_shape_is_one_evidence_error_line_with_the_regenerate_hint(tmp_path, content, expected):
    assert refusal(lambda: load(tmp_path, content)) == [expected + REGENERATE]


@pytest.mark.parametrize("content,expected", [
    # the YAML parser's own wording after "not valid YAML: "
    ("stack: prod\nnodes: [\n", re.escape("evidence/prod.yaml: line 2: not valid YAML: ") + ".+"),
    (b"\x00\x01\x02\xff", re.escape("evidence/prod.yaml: (file): binary data (a NUL byte at offset 0), not text")),
    (b"stack: prod\nnodes:\n  k3s-prod-1: \xb2\n",
     re.escape("evidence/prod.yaml: (file): not UTF-8 text (byte 0xb2 at offset 33)")),
], ids=["invalid-yaml", "binary", "not-utf8"])
def test_an_unreadable_evidence_file_is_one_evidence_error_line_with_the_regenerate_hint(tmp_path, content, expected):
    [line] = refusal(lambda: load(tmp_path, content))
    assert re.fullmatch(expected + re.escape(REGENERATE), line), line


@pytest.mark.parametrize("key,reads_as", [("null", "null"), ("1", "an integer"), ("true", "a boolean")])
def test_a_node_name_that_yaml_does_not_read_as_a_string_is_refused_at_its_line(tmp_path, key, reads_as):
    content = f"stack: prod\nresource: gpu.intel.com/i915\nnodes:\n  {key}: 1\n  k3s-prod-1: 1\n"
    assert refusal(lambda: load(tmp_path, content)) == [
        f"evidence/prod.yaml: line 4: the key {key} is not a string (YAML reads it as {reads_as}){REGENERATE}"]


def test_an_evidence_file_removed_while_it_is_read_counts_as_missing(tmp_path, monkeypatch):
    import model.safe_yaml

    def removed_meanwhile(path, max_bytes):
        path.unlink()
        raise FileNotFoundError(path)

    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "prod.yaml").write_text(evidence_text())
    monkeypatch.setattr(model.safe_yaml, "read_text", removed_meanwhile)
    assert load_evidence(tmp_path, "prod") == Evidence("evidence/prod.yaml", None)


def test_an_evidence_file_over_one_mebibyte_is_refused_and_one_of_exactly_one_mebibyte_is_read(tmp_path):
    text = evidence_text()
    padded = text + "#" * (1024 * 1024 - len(text) - 1) + "\n"
    assert len(padded.encode()) == 1024 * 1024
    assert load(tmp_path, padded) == COMPLETE
    assert refusal(lambda: load(tmp_path, padded + "\n")) == [
        f"evidence/prod.yaml: (file): larger than 1048576 bytes, far more than such a file ever holds{REGENERATE}"]


def test_every_problem_of_a_bad_file_is_reported_at_once_one_per_line():
    doc = {"stack": "dev", "resource": "gpu.intel.com/i915", "nodes": {"k3s-prod-1": 0, "k3s-prod-2": "x"},
           "nodeCount": 2, "capturedFrom": "kubectl"}
    with pytest.raises(EvidenceError) as caught:
        parse_evidence(doc, SRC, "prod")
    assert caught.value.lines == [
        "evidence/prod.yaml: capturedFrom, nodeCount: unknown keys; evidence holds stack, resource and nodes "
        f"only{REGENERATE}",
        f"evidence/prod.yaml: stack: 'dev': evidence of another stack; expected 'prod'{REGENERATE}",
        "evidence/prod.yaml: nodes.k3s-prod-1: 0: advertises no gpu.intel.com/i915; Plex would be Unschedulable "
        f"there{REGENERATE}",
        f"evidence/prod.yaml: nodes.k3s-prod-2: 'x': not a whole number{REGENERATE}",
    ]
    assert str(caught.value).splitlines() == caught.value.lines  # what the Pulumi CLI prints: one problem per line


@pytest.mark.parametrize("resource,expected", [
    ("gpu.intel.com/xe", "resource: 'gpu.intel.com/xe': must be gpu.intel.com/i915; the nodes run the xe driver, "
                         "and Plex requests i915"),
    ("gpu.intel.com/i915-shared", "resource: 'gpu.intel.com/i915-shared': must be gpu.intel.com/i915"),
], ids=["xe-driver", "other-resource"])
def test_a_wrong_resource_is_refused_and_only_the_xe_resource_blames_the_driver(resource, expected):
    doc = {"stack": "prod", "resource": resource, "nodes": COMPLETE.nodes}
    assert refusal(lambda: parse_evidence(doc, SRC, "prod")) == [f"evidence/prod.yaml: {expected}{REGENERATE}"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["1", "0", "x", "²", "", "prod", "k3s-prod-1"]),
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.sampled_from(NODES + ["k3s-other", "1"]), inner, max_size=4)),
    max_leaves=8)
evidence_docs = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={
        "stack": st.sampled_from(["prod", "dev"]) | json_values,
        "resource": st.sampled_from(["gpu.intel.com/i915", "gpu.intel.com/xe"]) | json_values,
        "nodes": json_values,
        "extra": json_values,
        3: json_values,
    }),
)


@settings(max_examples=300, deadline=None)
@given(doc=evidence_docs)
def test_any_document_is_either_trusted_evidence_or_evidence_error_lines_never_a_crash(doc):
    try:
        evidence = parse_evidence(doc, SRC, "prod")
    except EvidenceError as exc:
        assert exc.lines and all(line.startswith("evidence/prod.yaml: ") and line.endswith(REGENERATE)
                                 for line in exc.lines)
        return
    assert doc["stack"] == "prod" and doc["resource"] == "gpu.intel.com/i915"
    assert set(doc) == {"stack", "resource", "nodes"}
    assert evidence.nodes and all(isinstance(n, str) and isinstance(c, int) and c >= 1
                                  for n, c in evidence.nodes.items())


# --- through the program --------------------------------------------------------------------------------------------

def test_a_gpu_none_stack_with_complete_evidence_exports_plex_without_the_device_request(run_stack_text):
    from conftest import stack_text

    text = stack_text("prod")
    assert "      gpu: intel-quicksync\n" in text
    capture = run_stack_text(text.replace("      gpu: intel-quicksync\n", "      gpu: none\n"), stack="prod",
                             evidence=evidence_text())
    assert capture.stack_outputs["plexGpuAccess"] == "none"
    plex = registration(capture, "kubernetes:apps/v1:Deployment", "plex-deployment").inputs
    limits = plex["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
    assert "gpu.intel.com/i915" not in limits
