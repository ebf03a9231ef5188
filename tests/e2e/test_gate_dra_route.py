"""gpu.route: dra judged by the real engines (docs/dra.md): kube-scheduler allocating Plex's claim from the
ResourceSlices of kwok nodes, kube-controller-manager making the claim from Plex's template, kustomize-controller
reconciling each step's export. No driver runs on kwok: the slices are made as an admin, as Intel's driver would
publish them (its doc/gpu/USAGE.md), and the evidence is read back from this cluster by `verify-nodes`. Run by
`make e2e`, on a control plane of its own (a module of its own: the scenarios run beside the other files')."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, condition
from test_export_on_a_cluster import (
    PROD_NODES,
    cluster,  # noqa: F401 (fixtures shared with the cluster tests; each module starts its own control plane)
    deploy_plex,
    exported_objects,
    first,
    flux,  # noqa: F401
    flux_repository,
    flux_test_stack,
    kustomizations,
    lb_ipam_after,
    plex_objects,
    plex_pods,
    ready_at,
    reset,
    scheduling_events,
    start_flux,
)
from test_post_merge_chainsaw import CHAINSAW, run_suite

from conftest import COMPLETE_PROD_EVIDENCE, ROOT, export, make_project, stack_text
from model.config import DRA_DRIVER_IMAGE

pytestmark = pytest.mark.e2e

GPU = "gpu.intel.com/i915"
DRA = (f"  gpu-platform:gpu:\n    route: dra\n    dra:\n      image: {DRA_DRIVER_IMAGE}\n"
       "      imageDigest: sha256:" + "ab" * 32 + "\n")  # test data: the shape of a digest (kwok pulls no image)


def at_stage(text: str, stage: str) -> str:
    return text.replace("config:\n", "config:\n" + DRA + f"      stage: {stage}\n", 1)


def resource_slice(node: str) -> dict[str, Any]:
    """What Intel's driver publishes for a node: one slice, one healthy iGPU on i915."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu.intel.com"},
            "spec": {"driver": "gpu.intel.com", "nodeName": node,
                     "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                     "devices": [{"name": "0000-00-02-0-0x7d67", "attributes": {
                         "driver": {"string": "i915"}, "health": {"string": "Healthy"},
                         "family": {"string": "Arc"}}}]}}


def clean(cluster: ControlPlane) -> None:  # noqa: F811
    reset(cluster)
    cluster.kubectl("delete", "namespace", "intel-gpu-resource-driver", "--ignore-not-found", "--wait=true",
                    "--timeout=90s")
    for kind in ("resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"):
        cluster.kubectl("delete", kind, "--all", "--wait=false", check=False)


def verify(project: Path, flag: str, listing: str) -> subprocess.CompletedProcess[str]:
    """`make verify-nodes STACK=prod SLICES=/CLAIMS= WRITE_EVIDENCE=1`, the listing from this cluster on stdin."""
    return subprocess.run([sys.executable, "-m", "gitops.verify_nodes", "--stack", "prod", flag, "-",
                           "--write-evidence", "--project-dir", str(project)], input=listing, text=True,
                          capture_output=True, cwd=ROOT, timeout=120)


def plex_claims(cluster: ControlPlane) -> list[dict[str, Any]]:  # noqa: F811
    return cluster.get("resourceclaims.resource.k8s.io", "-n", "plex")["items"]


def running_plex(cluster: ControlPlane) -> dict[str, Any] | None:  # noqa: F811
    return next((p for p in plex_pods(cluster) if p["status"].get("phase") == "Running"
                 and not p["metadata"].get("deletionTimestamp")), None)


def test_plex_s_claim_is_allocated_from_a_slice_reserved_for_its_pod_and_the_pod_bound(cluster, tmp_path):  # noqa: F811
    """Steps 2-4 on the real scheduler: the slices read back into evidence, the export switched to a claim, the
    claim KCM makes from Plex's template allocated a gpu.intel.com device on the node the pod is bound to and
    reserved for that pod, and the allocation read back into step 4's evidence."""
    clean(cluster)
    for node in PROD_NODES:
        cluster.add_node(node, gpus=None)  # no device plugin: the claim alone must place Plex
    driver = exported_objects(tmp_path / "driver", "prod", at_stage(stack_text("prod"), "driver-added"))
    cluster.apply(first(next(d for f, d in driver.items() if f.endswith("/intel-gpu-resource-driver")),
                        "DeviceClass"))
    cluster.apply([resource_slice(node) for node in PROD_NODES])
    project = make_project(tmp_path / "project", {"prod": at_stage(stack_text("prod"), "apps-on-claims")})
    slices = verify(project, "--slices", cluster.kubectl("get", "deviceclasses,resourceslices", "-o", "json").stdout)
    assert slices.returncode == 0, slices.stdout + slices.stderr
    evidence = {"dra/prod": (project / "evidence/dra/prod.yaml").read_text()}
    objects = exported_objects(tmp_path / "claims", "prod", at_stage(stack_text("prod"), "apps-on-claims"), evidence)
    docs = plex_objects(objects)
    assert GPU not in json.dumps(first(docs, "Deployment"))
    deploy_plex(cluster, docs, "claim")
    pod = cluster.wait_for("Plex Running on its claim", lambda: running_plex(cluster), timeout=120)
    (claim,) = plex_claims(cluster)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (
        "gpu.intel.com", pod["spec"]["nodeName"], "0000-00-02-0-0x7d67")
    assert [(r["resource"], r["name"], r["uid"]) for r in claim["status"]["reservedFor"]] == [
        ("pods", pod["metadata"]["name"], pod["metadata"]["uid"])]
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]  # made for this pod, by KCM
    allocated = verify(project, "--claims",
                       cluster.kubectl("get", "pods,resourceclaims", "-A", "-o", "json").stdout)
    assert allocated.returncode == 0, allocated.stdout + allocated.stderr
    assert yaml.safe_load((project / "evidence/dra/claims/prod.yaml").read_text())["apps"] == {
        "plex": pod["spec"]["nodeName"]}


def read_back(project: Path, plane: Any, flag: str, *listing: str) -> None:
    """verify-nodes reads this cluster's own listing into the evidence file of the next step."""
    done = verify(project, flag, plane.kubectl("get", *listing, "-o", "json").stdout)
    assert done.returncode == 0, done.stdout + done.stderr


def suite_passes(repo: Path, plane: Any, *passing: str, absent: str = "") -> None:
    """The export's own post-merge suite, run by Chainsaw against this cluster, passes those tests (and has no
    `absent` one). Its asserts may wait 120 s instead of Chainsaw's 30: kwok rolls the pods out on its own clock, which
    falls behind on a loaded machine (a run beside `make mutate` once timed out at 30 s); a passing assert stops
    waiting at once."""
    suite = run_suite(repo, plane.kubeconfig, "--assert-timeout", "120s")
    assert suite.returncode == 0, suite.stdout[-5000:]
    assert all(f"--- PASS: chainsaw/{name} " in suite.stdout for name in passing), suite.stdout[-5000:]
    assert not absent or f"chainsaw/{absent} " not in suite.stdout


def test_the_migration_walk_keeps_plex_on_a_gpu_at_every_step_and_removes_the_plugin_last(
        cluster, flux, tmp_path):  # noqa: F811
    """Steps 1-5 through Flux in one repository, each export allowed by the evidence read back from this cluster:
    Plex on gpu.intel.com/i915 beside the driver, then on an allocated claim with the plugin still there, then the
    plugin pruned while the same Plex pod keeps its claim; at steps 3 and 5 the suite the export wrote passes."""
    if not CHAINSAW.is_file():
        pytest.fail(f"{CHAINSAW}: not built; hint: run `make tools`")
    stack = flux_test_stack()
    project = tmp_path / "project"

    def export_step(stage: str, evidence: dict[str, str]) -> None:
        make_project(project, {"prod": at_stage(stack, stage)}, evidence)
        assert export(repo, "prod", project=project) == 0

    def settled(*names: str, absent: tuple[str, ...] = ()) -> dict[str, Any]:
        return cluster.wait_for(f"{', '.join(names)} Ready", lambda: (
            (ks := kustomizations(cluster)) and set(names) <= set(ks) and not set(absent) & set(ks)
            and all(ready_at(ks[n]) and ks[n]["status"].get("lastAppliedRevision") == revision for n in names)
            and ks), timeout=300)

    repo = flux_repository(tmp_path, at_stage(stack, "driver-added"), COMPLETE_PROD_EVIDENCE)
    clean(cluster)
    start_flux(cluster, flux, repo, gpus=1)
    revision = flux.publish(cluster, repo)
    stop = lb_ipam_after(cluster, 0)
    try:
        settled("intel-gpu-plugin", "intel-gpu-resource-driver", "plex", "apps-wave-1")
        step1 = running_plex(cluster)
        assert step1 and step1["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
        assert not step1["spec"].get("resourceClaims")

        cluster.apply([resource_slice(node) for node in PROD_NODES])  # the driver publishes
        read_back(project, cluster, "--slices", "deviceclasses,resourceslices")
        export_step("apps-on-claims", {"prod": COMPLETE_PROD_EVIDENCE})
        revision = flux.publish(cluster, repo)
        settled("intel-gpu-plugin", "intel-gpu-resource-driver", "plex", "apps-wave-1")
        step3 = cluster.wait_for("Plex Running on its claim", lambda: (
            (p := running_plex(cluster)) and p["spec"].get("resourceClaims") and p), timeout=120)
        assert GPU not in json.dumps(step3["spec"]["containers"][0]["resources"])
        (claim,) = plex_claims(cluster)
        assert claim["status"]["reservedFor"][0]["uid"] == step3["metadata"]["uid"]
        assert cluster.get("daemonset", "intel-gpu-plugin", "-n", "intel-gpu-plugin")  # the plugin still serves
        # the export's own post-merge suite of step 3, run by Chainsaw: the claim allocated, no i915, no hostPath
        suite_passes(repo, cluster, "plex", "intel-gpu-plugin")

        read_back(project, cluster, "--claims", "pods,resourceclaims", "-A")
        export_step("plugin-removed", {})
        revision = flux.publish(cluster, repo)
        settled("intel-gpu-resource-driver", "plex", "apps-wave-1", absent=("intel-gpu-plugin",))
        cluster.wait_for("the plugin's namespace pruned", lambda: cluster.kubectl(
            "get", "namespace", "intel-gpu-plugin", check=False).returncode != 0, timeout=120)
        # step 5's suite: no plugin checks, and the plugin's DaemonSet gone
        suite_passes(repo, cluster, "intel-gpu-resource-driver", absent="intel-gpu-plugin")
    finally:
        stop.set()
    step5 = running_plex(cluster)
    assert step5 and step5["metadata"]["uid"] == step3["metadata"]["uid"]  # removing the plugin restarted nothing
    (claim,) = plex_claims(cluster)
    assert claim["status"]["allocation"]["devices"]["results"][0]["driver"] == "gpu.intel.com"


# kube-scheduler's verdict on a claim no node's slice can satisfy, every node considered
ALL_NODES_REFUSE = "0/3 nodes are available: 3 cannot allocate all claims."


def test_without_slices_the_gate_refuses_and_forced_through_flux_plex_is_pending_and_apps_wave_1_waits(
        cluster, flux, tmp_path, capsys):  # noqa: F811
    """The hazard of step 3: the gate refuses the switch with no slice evidence; the same export forced past it
    (evidence written by hand) onto a cluster that publishes no slice leaves Plex Pending, in the scheduler's own
    words, and apps-wave-1 waiting on plex: the app tier stalled. Last in the module: plex's Kustomization is left
    waiting out its health check, which holds kustomize-controller's worker for that key until the module's control
    plane stops."""
    text = at_stage(flux_test_stack(), "apps-on-claims")
    out = tmp_path / "refused"
    out.mkdir()
    capsys.readouterr()
    assert export(out, "prod", project=make_project(tmp_path / "gate", {"prod": text})) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error: ")]
    assert "step 2 was skipped" in line and list(out.iterdir()) == []
    forged = "".join(f"  {n}: 1\n" for n in PROD_NODES)
    repo = flux_repository(tmp_path, at_stage(flux_test_stack(), "driver-added"))  # step 1, then step 3 forced
    project = make_project(tmp_path / "forced", {"prod": text}, {
        "dra/prod": f"stack: prod\ndriver: gpu.intel.com\nkernelDriver: i915\nnodes:\n{forged}"})
    clean(cluster)
    assert export(repo, "prod", project=project) == 0
    start_flux(cluster, flux, repo)
    stop = lb_ipam_after(cluster, 0)
    try:
        cluster.wait_for("the driver Ready", lambda: ready_at(kustomizations(cluster).get(
            "intel-gpu-resource-driver", {})), timeout=180)
        # the verdict with every node Ready: on a loaded machine kwok's heartbeat can lag and a node be tainted for a
        # moment, which the scheduler names in an earlier verdict (and retries once the taint is lifted)
        verdicts = cluster.wait_for("the scheduler's verdict on Plex", lambda: (
            (found := [m for m in scheduling_events(cluster) if "claim" in m])
            and any(m.startswith(ALL_NODES_REFUSE) for m in found) and found), timeout=180)
        # apps-wave-0 Ready, and apps-wave-1 held by plex alone (it joined wave 0, so wave 1 waits for it too)
        waiting = cluster.wait_for("apps-wave-1 waiting on plex", lambda: (
            (ks := kustomizations(cluster)) and ready_at(ks.get("apps-wave-0", {}))
            and (k := ks.get("apps-wave-1")) and condition(k).get("reason") == "DependencyNotReady"
            and "plex" in condition(k).get("message", "") and k), timeout=180)
    finally:
        stop.set()
    pod = plex_pods(cluster)[0]
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    # as kube-scheduler v1.36.3 said it here: "0/3 nodes are available: 3 cannot allocate all claims. still not
    # schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    assert all(m.startswith("0/3 nodes are available: ") and "cannot allocate all claims" in m for m in verdicts), \
        verdicts
    assert condition(waiting)["message"] == "dependency 'flux-system/plex' is not ready", condition(waiting)
    assert not ready_at(kustomizations(cluster)["plex"])
    # the export's post-merge suite fails on it: plex never Ready, and no node's slice
    suite = run_suite(repo, cluster.kubeconfig, "--assert-timeout", "5s")
    assert suite.returncode != 0 and "--- FAIL: chainsaw/plex " in suite.stdout, suite.stdout[-5000:]
    assert "--- FAIL: chainsaw/intel-gpu-resource-driver " in suite.stdout, suite.stdout[-5000:]
