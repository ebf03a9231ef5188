"""The hazard observed, not argued (issue 21): the exported objects on a real API server, scheduled by the real
kube-scheduler onto kwok nodes named as the prod stack's nodes (tests/e2e/controlplane.py). Each scenario asserts
on the cluster's own state: events, pod phases and conditions, the API server's answers. Run by `make e2e`."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import BIN, TOOLS, ControlPlane

from conftest import ROOT, make_project, stack_text

pytestmark = pytest.mark.e2e

GPU = "gpu.intel.com/i915"
PROD_NODES = ("k3s-prod-1", "k3s-prod-2", "k3s-prod-3")
FLUX_CRDS = ROOT / "tests" / "fixtures" / "flux-crds"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = [t for t in TOOLS if not (BIN / t).is_file()]
    if missing:
        pytest.fail(f"{BIN}: {', '.join(missing)} not built; hint: run `make tools` (make e2e does)")
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    try:
        plane.start()
        plane.kubectl("apply", "--server-side", "-f", str(FLUX_CRDS))
        # Plex's claims bind to volumes of these classes (no provisioner: the volumes are made here)
        plane.apply([storage_class(name) for name in ("local-path", "nfs-media")])
        yield plane
    finally:
        plane.stop()


def storage_class(name: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"}


def volume(name: str, storage_class_name: str, size: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                     "storageClassName": storage_class_name, "hostPath": {"path": f"/srv/{name}"},
                     "persistentVolumeReclaimPolicy": "Retain"}}


def exported_objects(tmp_path: Path, stack: str, text: str, evidence: str | None = None,
                     ) -> dict[str, list[dict[str, Any]]]:
    """Export the stack into a fresh OUT; every object of it by component folder (kustomize's own files left out)."""
    from conftest import export

    project = make_project(tmp_path / "project", {stack: text}, {stack: evidence} if evidence else None)
    out = tmp_path / "out"
    assert export(out, stack, project=project) == 0
    objects: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and not doc["apiVersion"].startswith("kustomize.config.k8s.io/"):
                objects.setdefault(path.parent.relative_to(out).as_posix(), []).append(doc)
    return objects


def plex_objects(objects: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return next(docs for folder, docs in objects.items() if folder.endswith("/plex"))


def first(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind)


def deploy_plex(cluster: ControlPlane, docs: list[dict[str, Any]], tag: str) -> None:
    """Plex's namespace, its claims bound to volumes made for them, then everything else of its folder: so what the
    scheduler says about the pod is about the pod, not about a claim still binding."""
    cluster.apply([d for d in docs if d["kind"] == "Namespace"])
    claims = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    for claim in claims:
        spec = claim["spec"]
        cluster.apply(volume(f"{tag}-{claim['metadata']['name']}", spec["storageClassName"],
                             spec["resources"]["requests"]["storage"]))
    cluster.apply(claims)
    cluster.wait_for("Plex's claims bound", lambda: all(
        c["status"].get("phase") == "Bound" for c in cluster.get("pvc", "-n", "plex")["items"]))
    cluster.apply([d for d in docs if d["kind"] not in ("Namespace", "PersistentVolumeClaim")])


def plex_pods(cluster: ControlPlane) -> list[dict[str, Any]]:
    return cluster.get("pods", "-n", "plex", "-l", "app.kubernetes.io/name=plex")["items"]


def scheduling_events(cluster: ControlPlane) -> list[str]:
    events = cluster.get("events", "-n", "plex", "--field-selector", "reason=FailedScheduling")["items"]
    return [e.get("message", "") for e in events]


def reset(cluster: ControlPlane) -> None:
    """The next scenario starts without the exported objects and without nodes."""
    cluster.kubectl("delete", "kustomizations.kustomize.toolkit.fluxcd.io", "--all", "-n", "flux-system",
                    "--ignore-not-found", check=False)
    for namespace in ("plex", "intel-gpu-plugin"):
        cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=90s")
    cluster.kubectl("delete", "pv", "--all", "--wait=false")
    cluster.kubectl("delete", "nodes", "--all")


def test_requesting_the_gpu_before_any_node_advertises_it_leaves_plex_unschedulable(cluster, tmp_path):
    """Scenario 2, around the gate on purpose: the Deployment the export writes once evidence exists, applied to
    nodes that advertise no gpu.intel.com/i915. The scheduler refuses it for exactly that reason."""
    from conftest import COMPLETE_PROD_EVIDENCE

    reset(cluster)
    for node in PROD_NODES:
        cluster.add_node(node, gpus=None)
    docs = plex_objects(exported_objects(tmp_path, "prod", stack_text("prod"), COMPLETE_PROD_EVIDENCE))
    deployment = first(docs, "Deployment")
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits[GPU] == "1"
    deploy_plex(cluster, docs, "outage")
    pod = cluster.wait_for("a Plex pod", lambda: (plex_pods(cluster) or [None])[0])
    cluster.wait_for("the scheduler's verdict", lambda: [m for m in scheduling_events(cluster) if GPU in m])
    pod = cluster.get("pod", "-n", "plex", pod["metadata"]["name"])
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    condition = next(c for c in cluster.get("pod", "-n", "plex", pod["metadata"]["name"])["status"]["conditions"]
                     if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert f"Insufficient {GPU}" in condition["message"]
    # as the scheduler said it here: "0/3 nodes are available: 3 Insufficient gpu.intel.com/i915. no new claims to
    # deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    verdicts = [m for m in scheduling_events(cluster) if GPU in m]
    assert verdicts and all(m.startswith(f"0/3 nodes are available: 3 Insufficient {GPU}.") for m in verdicts)


def test_the_same_request_through_the_program_is_refused_by_the_gate_before_anything_is_written(tmp_path, capsys):
    """Scenario 2, through the gate: device-plugin access asked for with no evidence: exit 2, one line, OUT empty."""
    from conftest import export

    gpu = "    hardware:\n      gpu: intel-quicksync\n"
    text = stack_text("prod").replace(gpu, gpu + "      intelGpuAccess: device-plugin\n")
    assert "intelGpuAccess: device-plugin" in text
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    assert export(out, "prod", project=make_project(tmp_path / "project", {"prod": text})) == 2
    assert list(out.iterdir()) == []
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "plex.hardware.intelGpuAccess" in errors[0] and GPU in errors[0], errors


def test_the_legacy_host_path_export_schedules_where_no_node_advertises(cluster, tmp_path):
    """The control of scenario 2: without evidence the export keeps the hostPath and requests nothing, so the same
    nodes take it: the refusal above is the GPU request's, not a broken Deployment's."""
    reset(cluster)
    for node in PROD_NODES:
        cluster.add_node(node, gpus=None)
    docs = plex_objects(exported_objects(tmp_path, "prod", stack_text("prod")))
    assert GPU not in json.dumps(first(docs, "Deployment"))
    deploy_plex(cluster, docs, "legacy")
    pod = cluster.wait_for("Plex Running", lambda: next((p for p in plex_pods(cluster)
                                                          if p["status"].get("phase") == "Running"), None))
    assert pod["spec"]["nodeName"] in PROD_NODES


def test_the_safe_order_evidence_from_this_cluster_lets_plex_request_the_gpu_and_it_is_scheduled(cluster, tmp_path):
    """Scenario 3: the nodes advertise; `verify-nodes` reads `kubectl get nodes -o json` from this cluster and
    writes the evidence; the export then requests the resource and Plex is scheduled, counted on its node."""
    reset(cluster)
    for node in PROD_NODES:
        cluster.add_node(node, gpus=1)
    project = make_project(tmp_path / "project", {"prod": stack_text("prod")})
    nodes_json = cluster.kubectl("get", "nodes", "-o", "json").stdout
    done = subprocess.run([sys.executable, "-m", "gitops.verify_nodes", "--stack", "prod", "-", "--write-evidence",
                           "--project-dir", str(project)], input=nodes_json, text=True, capture_output=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    evidence = (project / "evidence" / "prod.yaml").read_text()
    assert all(node in evidence for node in PROD_NODES)
    docs = plex_objects(exported_objects(tmp_path / "with-evidence", "prod", stack_text("prod"), evidence))
    assert first(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
    deploy_plex(cluster, docs, "safe")
    pod = cluster.wait_for("Plex Running", lambda: next((p for p in plex_pods(cluster)
                                                          if p["status"].get("phase") == "Running"), None))
    described = cluster.kubectl("describe", "node", pod["spec"]["nodeName"]).stdout
    allocated = described.split("Allocated resources:", 1)[1]
    assert any(line.split()[:2] == [GPU, "1"] for line in allocated.splitlines() if line.strip()), allocated


def test_a_second_gpu_app_beyond_capacity_is_refused_by_the_capacity_check_and_pending_when_forced(cluster,
                                                                                                   tmp_path):
    """Scenario 3, beyond capacity: with one GPU per node and Plex on one, an app asking for all three is refused by
    the export's capacity check; forced onto the cluster anyway, the scheduler leaves it Pending."""
    from conftest import COMPLETE_PROD_EVIDENCE, export

    extra = stack_text("prod") + EXTRA_APP
    out = tmp_path / "refused"
    out.mkdir()
    project = make_project(tmp_path / "project", {"prod": extra}, {"prod": COMPLETE_PROD_EVIDENCE})
    assert export(out, "prod", project=project) == 2
    assert list(out.iterdir()) == []
    # forced: Plex's own Deployment, renamed, asking for 3 of the 3 the nodes have while Plex holds one
    if not any(p["status"].get("phase") == "Running" for p in plex_pods(cluster)):
        pytest.fail("runs after the safe-order scenario, which leaves Plex Running on a GPU")
    forced = copy.deepcopy(cluster.get("deployment", "-n", "plex", "plex"))
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "annotations"):
        forced["metadata"].pop(key, None)
    forced.pop("status", None)
    forced["metadata"]["name"] = "transcoder"
    forced["spec"]["selector"]["matchLabels"] = {"app": "transcoder"}
    forced["spec"]["template"]["metadata"]["labels"] = {"app": "transcoder"}
    forced["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "3"
    forced["spec"]["template"]["spec"]["containers"][0]["resources"].setdefault("requests", {})[GPU] = "3"
    cluster.apply(forced)
    pod = cluster.wait_for("the transcoder pod", lambda: next(iter(
        cluster.get("pods", "-n", "plex", "-l", "app=transcoder")["items"]), None))
    cluster.wait_for("the scheduler's verdict", lambda: [m for m in scheduling_events(cluster) if GPU in m])
    pod = cluster.get("pod", "-n", "plex", pod["metadata"]["name"])
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")


# A second GPU app asking for all three devices (tests/fixtures/config/valid/plex-and-jellyfin.yaml's app, resized)
EXTRA_APP = """  gpu-platform:apps:
    - name: jellyfin
      image: docker.io/jellyfin/jellyfin:10.10.7
      port: 8096
      volumes:
        - name: config
          mountPath: /config
          storageClass: local-path
          size: 10Gi
      probe:
        path: /health
      runAsUser: 1000
      runAsGroup: 1000
      egressClass: internet
      authMode: app-native
      loadBalancerIp: 192.168.20.41
      hardware:
        gpu: intel-quicksync
        devices: 3
      delivery:
        tier: apps-wave-1
"""


def test_every_exported_object_of_both_stacks_is_accepted_by_the_api_server(cluster, tmp_path):
    """Scenario 4: `kubectl apply --server-side --dry-run=server` of every object of both stacks: admission,
    defaulting and the CRDs' own validation, which the schema checks never ran."""
    for stack in ("dev", "prod"):
        reset(cluster)  # each stack onto a cluster that holds none of the other's objects
        objects = [d for docs in exported_objects(tmp_path / stack, stack, stack_text(stack)).values() for d in docs]
        namespaces = [d for d in objects if d["kind"] == "Namespace"]
        flux_system = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}}
        cluster.apply([*namespaces, flux_system], "--server-side")
        done = cluster.apply([d for d in objects if d["kind"] != "Namespace"], "--server-side", "--dry-run=server")
        assert done.returncode == 0
        assert done.stdout.count("(server dry run)") == len(objects) - len(namespaces), done.stdout


def test_a_storage_class_change_the_offline_preview_calls_a_replace_is_refused_in_place_by_the_api_server(
        cluster, tmp_path):
    """Scenario 4: the PVC storage-class change of the golden preview: the API server refuses it in place."""
    from gitops.preview import preview

    reset(cluster)
    before = plex_objects(exported_objects(tmp_path / "before", "prod", stack_text("prod")))
    changed_text = stack_text("prod").replace("configStorageClass: local-path", "configStorageClass: ceph-block")
    after = plex_objects(exported_objects(tmp_path / "after", "prod", changed_text))
    out = tmp_path / "before" / "out"
    plan = preview("prod", out, make_project(tmp_path / "changed", {"prod": changed_text}))
    assert [s.op for s in plan.steps if s.name == "plex-plex-config"] == ["replace"]
    cluster.apply([d for d in before if d["kind"] == "Namespace"])
    claim = next(d for d in before if d["kind"] == "PersistentVolumeClaim" and "config" in d["metadata"]["name"])
    cluster.apply(volume("replace-config", "local-path", claim["spec"]["resources"]["requests"]["storage"]))
    cluster.apply(claim)
    cluster.wait_for("the claim bound", lambda: cluster.get("pvc", "-n", "plex", claim["metadata"]["name"])
                     ["status"].get("phase") == "Bound")
    changed = next(d for d in after if d["kind"] == "PersistentVolumeClaim" and "config" in d["metadata"]["name"])
    assert changed["spec"]["storageClassName"] == "ceph-block"
    done = cluster.kubectl("apply", "-f", "-", input=json.dumps(changed), check=False)
    assert done.returncode != 0
    assert "spec is immutable" in done.stderr or "Forbidden" in done.stderr, done.stderr
    shutil.rmtree(tmp_path / "changed", ignore_errors=True)


CLUSTER_MODE = "    mode: cluster\n    context: test\n    fluxManagesCluster: false\n"
RENDER_MODE = "    mode: render\n    renderDirectory: build/pulumi-render\n"


def test_pulumi_up_in_cluster_mode_applies_the_export_s_objects_previews_no_change_and_destroys_them(cluster,
                                                                                                   tmp_path):
    """Scenario 5: `pulumi up` with `mode: cluster` against this API server (the CLI and provider from `make tools`):
    the same objects as the export, a second preview with no change, then `pulumi destroy` removes them."""
    reset(cluster)
    for node in PROD_NODES:
        cluster.add_node(node, gpus=None)
    text = stack_text("prod").replace(RENDER_MODE, CLUSTER_MODE)
    assert CLUSTER_MODE in text
    for claim, cls, size in (("plex-config", "local-path", "30Gi"), ("plex-media", "nfs-media", "4Ti")):
        cluster.apply(volume(f"up-{claim}", cls, size))
    project = make_project(tmp_path / "project", {"prod": text})
    site = tmp_path / "site"

    def engine(action: str) -> dict[str, Any]:
        result = tmp_path / f"{action}.json"
        done = subprocess.run([sys.executable, "-m", "gitops.pulumi_engine", action, "--stack", "prod", "--site",
                               str(site), "--source", str(project), "--json", str(result), "--kubeconfig",
                               str(cluster.kubeconfig)], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return json.loads(result.read_text())

    # No Cilium here: what its LB-IPAM does for the LoadBalancer Service (the address the Service asks for), so the
    # provider's await of the Service completes
    import threading

    stop = threading.Event()

    def lb_ipam() -> None:
        while not stop.wait(1.0):
            svc = cluster.kubectl("get", "service", "plex", "-n", "plex", "-o", "json", check=False)
            if svc.returncode == 0:
                spec = json.loads(svc.stdout)["spec"]
                ip = (spec.get("loadBalancerIP") or (spec.get("externalIPs") or ["192.0.2.10"])[0])
                cluster.kubectl("patch", "service", "plex", "-n", "plex", "--subresource=status", "--type=merge",
                                "-p", json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}),
                                check=False)

    watcher = threading.Thread(target=lb_ipam, daemon=True)
    watcher.start()
    try:
        up = engine("up")
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert up["summary"]["create"] == 25
    exported = [d for docs in exported_objects(tmp_path / "export", "prod", stack_text("prod")).values()
                for d in docs]
    for obj in exported:
        meta = obj["metadata"]
        args = [obj["kind"].lower() + "." + obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"]
                else obj["kind"].lower(), meta["name"]]
        live = cluster.get(*args, *(["-n", meta["namespace"]] if meta.get("namespace") else []))
        assert live["metadata"]["name"] == meta["name"]
        if obj["kind"] == "Deployment":
            assert live["spec"]["template"]["spec"]["containers"][0]["image"] == \
                obj["spec"]["template"]["spec"]["containers"][0]["image"]
    second = engine("preview")
    assert {op for op, n in second["summary"].items() if n} == {"same"}
    engine("destroy")
    assert cluster.kubectl("get", "namespace", "plex", check=False).returncode != 0 or \
        cluster.get("namespace", "plex")["status"].get("phase") == "Terminating"
    assert cluster.kubectl("get", "kustomization.kustomize.toolkit.fluxcd.io", "plex", "-n", "flux-system",
                           check=False).returncode != 0
