"""The post-merge suite the export writes beside POST-MERGE.md (gitops/reports/post_merge.py), run by Kyverno
Chainsaw from
`make tools` against the cluster tests' control plane, kustomize-controller reconciling the exported repository: it
passes on the healthy rollout, fails naming the node that does not advertise the GPU, and only reads: judged by the
API server's own audit log of the user it runs as, who RBAC lets read and nothing else. Run by `make e2e`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from controlplane import AUDITED_USER, BIN, ControlPlane
from test_export_on_a_cluster import (
    GPU,
    PROD_NODES,
    cluster,  # noqa: F401 (fixtures shared with the cluster tests; each module starts its own control plane)
    flux,  # noqa: F401
    flux_repository,
    flux_test_stack,
    kustomizations,
    lb_ipam_after,
    ready_at,
    start_flux,
)

from conftest import COMPLETE_PROD_EVIDENCE, LAYOUT_REPOSITORIES, export, make_project, repo_copy
from gitops.index import SUITE_FILE
from model.config import DRA_DRIVER_IMAGE

pytestmark = pytest.mark.e2e

CHAINSAW = BIN / "chainsaw"
SUITE = "clusters/prod/gpu-platform/post-merge"
# What the suite's user may do: read the kinds it asserts on, and namespaces (Chainsaw gets the Test's namespace to
# learn it exists). No verb that writes: a suite that tried would be refused, and fail.
READER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": AUDITED_USER},
          "rules": [{"apiGroups": [""], "resources": ["namespaces", "nodes", "pods"],
                     "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["apps"], "resources": ["daemonsets", "deployments"],
                     "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["kustomize.toolkit.fluxcd.io"], "resources": ["kustomizations"],
                     "verbs": ["get", "list", "watch"]}]}
READ_VERBS = {"get", "list", "watch"}


@pytest.fixture(scope="module")
def rolled_out(cluster, flux, tmp_path_factory):  # noqa: F811 (the fixtures imported above)
    """The prod export with evidence (Plex on the device-plugin resource), reconciled by Flux onto nodes that each
    advertise one GPU, every Kustomization Ready; the suite's reader user. Returns (repository, its kubeconfig)."""
    if not CHAINSAW.is_file():
        pytest.fail(f"{CHAINSAW}: not built; hint: run `make tools`")
    repo = flux_repository(tmp_path_factory.mktemp("post-merge"), flux_test_stack(), COMPLETE_PROD_EVIDENCE)
    start_flux(cluster, flux, repo, gpus=1)
    stop = lb_ipam_after(cluster, 0)
    try:
        cluster.wait_for("every Kustomization Ready", lambda: (
            (ks := kustomizations(cluster)) and {"intel-gpu-plugin", "plex"} <= set(ks)
            and all(ready_at(k) for k in ks.values())), timeout=300)
    finally:
        stop.set()
    cluster.apply([READER, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                            "metadata": {"name": AUDITED_USER},
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                        "name": AUDITED_USER},
                            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                          "name": AUDITED_USER}]}])
    return repo, cluster.user_kubeconfig(AUDITED_USER)


def run_suite(repo: Path, kubeconfig: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`chainsaw test` on the folder the export wrote, as a user runs it after the merge."""
    return subprocess.run([str(CHAINSAW), "test", "--test-dir", str(repo / SUITE), "--no-color", *flags],
                          cwd=repo.parent, env={**os.environ, "KUBECONFIG": str(kubeconfig)}, capture_output=True,
                          text=True, timeout=600)


def requests_made(plane: ControlPlane) -> list[dict[str, Any]]:
    """One audit event per request of the suite's user (the last stage the server logged of it)."""
    return list({e["auditID"]: e for e in plane.read_audit()}.values())


def namespaces(plane: ControlPlane) -> list[str]:
    return sorted(n["metadata"]["name"] for n in plane.get("namespaces")["items"])


def test_the_suite_passes_on_the_healthy_rollout_and_only_reads(cluster, rolled_out, record_property):  # noqa: F811
    repo, kubeconfig = rolled_out
    before, seen = namespaces(cluster), len(requests_made(cluster))
    done = run_suite(repo, kubeconfig)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for name in ("intel-gpu-plugin", "gpu-advertised", "plex"):
        assert f"--- PASS: chainsaw/{name} " in done.stdout, done.stdout[-4000:]
    requests = requests_made(cluster)[seen:]
    verbs = sorted({e["verb"] for e in requests})
    assert requests and set(verbs) <= READ_VERBS, verbs
    assert not [e for e in requests if e.get("responseStatus", {}).get("code") == 403]
    assert namespaces(cluster) == before
    kinds = sorted({e["objectRef"]["resource"] for e in requests if e.get("objectRef")})
    record_property("figures", f"post-merge suite (chainsaw): 3 Tests passed with {len(requests)} requests to the API "
                    f"server, verbs {verbs}, on {kinds}; namespaces unchanged ({len(before)})")


def test_the_suite_fails_naming_the_node_that_does_not_advertise_the_gpu(cluster, rolled_out):  # noqa: F811
    repo, kubeconfig = rolled_out
    broken = PROD_NODES[1]
    path = "/status/allocatable/" + GPU.replace("/", "~1")
    cluster.kubectl("patch", "node", broken, "--subresource=status", "--type=json", "-p",
                    json.dumps([{"op": "remove", "path": path}, {"op": "remove", "path": path.replace(
                        "allocatable", "capacity")}]))
    try:
        done = run_suite(repo, kubeconfig, "--assert-timeout", "5s")
    finally:
        cluster.kubectl("patch", "node", broken, "--subresource=status", "--type=merge", "-p",
                        json.dumps({"status": {"allocatable": {GPU: "1"}, "capacity": {GPU: "1"}}}))
    assert done.returncode != 0
    # as Chainsaw says it: "| ASSERT | ERROR | v1/Node @ k3s-prod-2", then "v1/Node/k3s-prod-2" and
    # "* status.allocatable.gpu.intel.com/i915: Required value: field not found in the input object"
    failed = re.findall(r"\| ASSERT +\| ERROR +\| v1/Node @ (\S+)", done.stdout)
    assert failed == [broken], done.stdout[-6000:]
    assert f"v1/Node/{broken}\n" in done.stdout and f"* status.allocatable.{GPU}: Required value" in done.stdout
    checked = re.findall(r"\| ASSERT +\| DONE +\| v1/Node @ (\S+)", done.stdout)
    assert sorted(checked) == sorted(set(PROD_NODES) - {broken})  # the nodes after it were still checked
    assert "--- FAIL: chainsaw/gpu-advertised " in done.stdout
    assert "--- PASS: chainsaw/intel-gpu-plugin " in done.stdout and "--- PASS: chainsaw/plex " in done.stdout


@pytest.mark.parametrize("layout", LAYOUT_REPOSITORIES)
def test_chainsaw_loads_every_layout_s_suite_with_its_strict_schema(tmp_path, layout):
    """Chainsaw refuses a document with an unknown field when it loads a suite ("failed to parse document"), before
    any cluster is asked: each layout's suites, loaded and filtered out, so no cluster is needed."""
    name, stacks, _ = LAYOUT_REPOSITORIES[layout]
    out = repo_copy(tmp_path, name)
    assert export(out, *stacks, project=make_project(tmp_path / "project", stacks)) == 0
    suites = sorted(p.parent for p in out.rglob(SUITE_FILE))
    assert len(suites) == len(stacks)
    for suite in suites:
        done = subprocess.run([str(CHAINSAW), "test", "--test-dir", str(suite), "--no-cluster", "--no-color",
                               "--exclude-test-regex", "chainsaw/.*"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        loaded = re.findall(r"^- (\S+) \(", done.stdout.split("Loading tests...", 1)[1], re.M)
        assert loaded[:2] == ["intel-gpu-plugin", "gpu-advertised"] and len(loaded) >= 3, done.stdout


def test_the_suite_fails_naming_a_pod_of_plex_that_still_mounts_the_host_path(cluster, rolled_out):  # noqa: F811
    """The `error` step's expression on the pods Chainsaw lists: a pod of Plex with the /dev/dri hostPath (what an
    old ReplicaSet's pod or a hand edit leaves) is named; the rest of the suite still passes."""
    repo, kubeconfig = rolled_out
    stray = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "plex-stray", "namespace": "plex", "labels": {"app.kubernetes.io/name": "plex"}},
             "spec": {"automountServiceAccountToken": False,
                      "containers": [{"name": "plex", "image": "docker.io/plexinc/pms-docker:1.41.6.9685-d301f511a",
                                      "volumeMounts": [{"name": "dri", "mountPath": "/dev/dri"}]}],
                      "volumes": [{"name": "dri", "hostPath": {"path": "/dev/dri"}}]}}
    cluster.apply(stray)
    try:
        done = run_suite(repo, kubeconfig, "--error-timeout", "5s")
    finally:
        cluster.kubectl("delete", "pod", "plex-stray", "-n", "plex", "--wait=false")
    assert done.returncode != 0
    # as Chainsaw says it: "v1/Pod/plex/plex-stray - resource matches expectation"
    assert "v1/Pod/plex/plex-stray - resource matches expectation" in done.stdout, done.stdout[-6000:]
    assert "--- FAIL: chainsaw/plex " in done.stdout
    assert "--- PASS: chainsaw/intel-gpu-plugin " in done.stdout and "--- PASS: chainsaw/gpu-advertised " in done.stdout


DRA_DIGEST = "sha256:" + "ab" * 32  # test data: the shape of a digest (kwok pulls no image)
DRA = (f"  gpu-platform:gpu:\n    route: dra\n    dra:\n      image: {DRA_DRIVER_IMAGE}\n"
       f"      imageDigest: {DRA_DIGEST}\n")


def resource_slice(node: str, kernel_driver: str = "i915") -> dict[str, Any]:
    """What Intel's driver publishes for a node (its doc/gpu/USAGE.md): one slice, one iGPU. Made here as an admin,
    as no driver runs on kwok's nodes."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu.intel.com"},
            "spec": {"driver": "gpu.intel.com", "nodeName": node,
                     "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                     "devices": [{"name": "0000-00-02-0-0x7d67",
                                  "attributes": {"driver": {"string": kernel_driver}, "family": {"string": "Arc"}}}]}}


def test_on_the_dra_route_the_suite_checks_the_driver_and_names_the_node_without_a_slice(cluster, flux,  # noqa: F811
                                                                                          tmp_path):
    """gpu.route: dra, its first step, reconciled by Flux: the driver's Kustomization Ready beside the plugin's and
    its DaemonSet on every node; the suite fails naming the node whose slice is missing, and passes once every node
    publishes one (the slices made as an admin: no driver runs on kwok)."""
    text = flux_test_stack().replace("config:\n", "config:\n" + DRA, 1)
    repo = flux_repository(tmp_path, text)
    start_flux(cluster, flux, repo, gpus=1)
    stop = lb_ipam_after(cluster, 0)
    try:
        cluster.wait_for("every Kustomization Ready", lambda: (
            (ks := kustomizations(cluster)) and {"intel-gpu-plugin", "intel-gpu-resource-driver", "plex"} <= set(ks)
            and all(ready_at(k) for k in ks.values())), timeout=300)
    finally:
        stop.set()
    assert cluster.get("deviceclass.resource.k8s.io", "gpu.intel.com")["spec"]["selectors"]
    admin = cluster.kubeconfig
    cluster.apply([resource_slice(node) for node in PROD_NODES[:2]])
    try:
        done = run_suite(repo, admin, "--assert-timeout", "5s")
        assert done.returncode != 0
        assert "--- FAIL: chainsaw/intel-gpu-resource-driver " in done.stdout, done.stdout[-5000:]
        assert f"nodeName: {PROD_NODES[2]}" in done.stdout, done.stdout[-5000:]
        assert "--- PASS: chainsaw/intel-gpu-plugin " in done.stdout
        cluster.apply(resource_slice(PROD_NODES[2]))
        healed = run_suite(repo, admin)
        assert healed.returncode == 0, healed.stdout[-5000:]
        assert "--- PASS: chainsaw/intel-gpu-resource-driver " in healed.stdout
    finally:
        cluster.kubectl("delete", "resourceslices.resource.k8s.io", "--all", "--wait=false", check=False)
