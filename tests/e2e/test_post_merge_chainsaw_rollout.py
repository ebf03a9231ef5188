"""The post-merge suite of each stage of the rollout in the user's repository (gitops/reports/post_merge.py), run by
Kyverno Chainsaw against the cluster tests' control plane holding exactly what the repository holds at that stage, as
Flux's walk of its prod overlay applies it: the plugin (its DaemonSet's pods run on kwok nodes that each advertise the
GPU), the Kustomizations that apply it and Plex (Ready, as kustomize-controller reports them), and Plex's own
Deployment from `apps/wave-0/plex.yaml`. Each stage's suite passes on its own stage; the suite of the export that
allows the switch (the hostPath still there) fails once Plex has moved, and the suite of the export after the
renderer's change fails on a Plex that still has the hostPath: merged in either order, a suite that passes is one
that tells the truth. The stages themselves: tests/gitops/test_export_second_pull_request.py. Run by `make e2e`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from controlplane import BIN, ControlPlane, condition
from test_export_on_a_cluster import (
    PROD_NODES,
    cluster,  # noqa: F401 (each module starts its own control plane)
    storage_class,
    volume,
)

from builders import HOME_EVIDENCE as EVIDENCE, home_project, home_repo, render_the_switch
from conftest import export
from gitops.flux.build import RepoView
from gitops.flux.walk import walk_from_bootstrap

pytestmark = pytest.mark.e2e

CHAINSAW = BIN / "chainsaw"
SUITE = "gpu-platform/prod/post-merge"
KUSTOMIZATIONS = ("intel-gpu-plugin", "apps-wave-0")  # the plugin's, and the tier that applies Plex
NAMESPACES = ("intel-gpu-plugin", "plex")


def stage_objects(repo: Path) -> list[dict[str, Any]]:
    """What Flux's walk of the prod overlay applies that the suite reads: the two Kustomizations, the plugin's and
    Plex's namespaces with everything in them."""
    view = walk_from_bootstrap(RepoView(repo), "./clusters/prod")
    return [m for oid, m in sorted(view.manifests.items(), key=lambda kv: str(kv[0]))
            if (oid.kind == "Kustomization" and oid.name in KUSTOMIZATIONS)
            or (oid.kind == "Namespace" and oid.name in NAMESPACES) or oid.namespace in NAMESPACES]


def kept_suite(repo: Path, into: Path) -> Path:
    shutil.copytree(repo / SUITE, into)
    return into


def plex_deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "plex")


def hold(plane: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """The cluster as the stage's merge leaves it, once Flux reconciled: its objects applied, the Kustomizations Ready,
    Plex's pod the one of this stage's template, Running."""
    plane.apply([o for o in objects if o["kind"] == "Namespace"])
    for claim in (o for o in objects if o["kind"] == "PersistentVolumeClaim"):
        name = f"{claim['metadata']['namespace']}-{claim['metadata']['name']}"
        if plane.kubectl("get", "pv", name, check=False).returncode != 0:
            spec = claim["spec"]
            plane.apply(volume(name, spec["storageClassName"], spec["resources"]["requests"]["storage"]))
    plane.apply([o for o in objects if o["kind"] != "Namespace"])
    for name in KUSTOMIZATIONS:
        plane.kubectl("patch", "kustomization", name, "-n", "flux-system", "--subresource=status", "--type=merge",
                      "-p", json.dumps({"status": {"conditions": [{
                          "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "stage",
                          "lastTransitionTime": "2026-12-07T00:00:00Z"}]}}))
    wanted = plex_deployment(objects)["spec"]["template"]["spec"]

    def of_this_stage(pod: dict[str, Any]) -> bool:
        # limits as written (the API server defaults an extended resource's request to its limit)
        return [c.get("resources", {}).get("limits") for c in pod["spec"]["containers"]] == \
            [c.get("resources", {}).get("limits") for c in wanted["containers"]] and \
            sorted(v["name"] for v in pod["spec"].get("volumes", []) if "hostPath" in v) == \
            sorted(v["name"] for v in wanted.get("volumes", []) if "hostPath" in v)

    def settled() -> bool:
        pods = plane.get("pods", "-n", "plex", "-l", "app.kubernetes.io/name=plex")["items"]
        if len(pods) != 1 or not of_this_stage(pods[0]) or pods[0]["status"].get("phase") != "Running":
            return False
        if condition(pods[0]).get("status") != "True" and all(ready(n) for n in plane.get("nodes")["items"]):
            # kwok's node heartbeat can lag on a loaded machine: the node controller then marks the pod unready,
            # and kwok never makes a running pod Ready again; its ReplicaSet's next pod is
            plane.kubectl("delete", "pod", "-n", "plex", pods[0]["metadata"]["name"], "--wait=false")
            return False
        return condition(pods[0]).get("status") == "True"

    plane.wait_for("Plex's pod of this stage Running and Ready", settled, timeout=180)
    plane.wait_for("the plugin on every node", lambda: plane.get(
        "daemonset", "intel-gpu-plugin", "-n", "intel-gpu-plugin")["status"].get("numberReady") == len(PROD_NODES))


def ready(node: dict[str, Any]) -> bool:
    return condition(node).get("status") == "True" and not node["spec"].get("taints")


def run_suite(plane: ControlPlane, suite: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CHAINSAW), "test", "--test-dir", str(suite), "--no-color", "--assert-timeout", "10s",
                           "--error-timeout", "10s"], cwd=suite.parent,
                          env={**os.environ, "KUBECONFIG": str(plane.kubeconfig)}, capture_output=True, text=True,
                          timeout=600)


def passes(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 0 and all(f"--- PASS: chainsaw/{name} " in done.stdout
                                        for name in ("intel-gpu-plugin", "gpu-advertised", "plex"))


def fails_on_plex_alone(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode != 0 and "--- FAIL: chainsaw/plex " in done.stdout and all(
        f"--- PASS: chainsaw/{name} " in done.stdout for name in ("intel-gpu-plugin", "gpu-advertised"))


def test_each_stages_suite_passes_on_its_stage_and_fails_on_the_stage_it_does_not_describe(
        cluster, tmp_path):  # noqa: F811 (the fixture imported above)
    if not CHAINSAW.is_file():
        pytest.fail(f"{CHAINSAW}: not built; hint: run `make tools`")
    repo = home_repo(tmp_path)
    assert export(repo, "prod", project=home_project(tmp_path / "first")) == 0
    first, first_objects = kept_suite(repo, tmp_path / "suite-1"), stage_objects(repo)
    assert export(repo, "prod", project=home_project(tmp_path / "allowed", evidence=EVIDENCE)) == 0
    allowed, allowed_objects = kept_suite(repo, tmp_path / "suite-2"), stage_objects(repo)
    assert plex_deployment(allowed_objects) == plex_deployment(first_objects)  # the evidence moves no object
    render_the_switch(repo)
    assert export(repo, "prod", project=home_project(tmp_path / "switched", evidence=EVIDENCE)) == 0
    switched, switched_objects = kept_suite(repo, tmp_path / "suite-3"), stage_objects(repo)

    cluster.apply([storage_class("longhorn"), {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": "flux-system"}}])
    for node in PROD_NODES:
        cluster.add_node(node, gpus=1)
    hold(cluster, allowed_objects)
    for suite in (first, allowed):
        done = run_suite(cluster, suite)
        assert passes(done), done.stdout[-4000:] + done.stderr[-2000:]
    hold(cluster, switched_objects)
    done = run_suite(cluster, switched)
    assert passes(done), done.stdout[-4000:] + done.stderr[-2000:]
    done = run_suite(cluster, allowed)  # the hostPath it asserts is gone
    assert fails_on_plex_alone(done), done.stdout[-4000:]
    hold(cluster, allowed_objects)
    done = run_suite(cluster, switched)  # the limit it asserts is not there yet
    assert fails_on_plex_alone(done), done.stdout[-4000:]
