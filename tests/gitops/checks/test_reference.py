"""gitops/checks/reference.py: the repository's own Plex (`plex.deliveredBy: repository`, the shared base of
examples/home-network-k3s/repo) held to the evidence gate: requesting the GPU without evidence for every stack
is refused naming its file and the command that records it; with evidence, the export and the preview print the
renderer's change (gitops/reports/renderer_change.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builders import (
    home_project as project,
    home_repo,
    refused_export as refused,
)
from conftest import evidence_for, export


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of examples/home-network-k3s/repo, committed, so `git status` shows exactly what the export
    changed."""
    return home_repo(tmp_path)


def test_the_repositorys_plex_requesting_the_gpu_without_evidence_for_one_stack_is_refused_naming_the_command_once(
        repo, tmp_path, capsys):
    plex = repo / "apps/wave-0/plex.yaml"
    docs = list(yaml.safe_load_all(plex.read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0].setdefault("resources", {}).setdefault(
        "limits", {})["gpu.intel.com/i915"] = "1"
    plex.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)})}
    verify = ("kubectl get nodes -o json > nodes-dev.json && make verify-nodes STACK=dev NODES=nodes-dev.json "
              "WRITE_EVIDENCE=1")
    assert refused(capsys, repo, project(tmp_path, evidence=evidence), "prod") == [  # prod has its evidence; dev none
        "apps/wave-0/plex.yaml: Deployment plex/plex: spec.template.spec.containers[0].resources.limits."
        "gpu.intel.com/i915: requests gpu.intel.com/i915, but the evidence does not back it for dev (plex keeps the "
        "legacy /dev/dri hostPath (a known no-op: EPERM on open) because there is no evidence that the nodes advertise "
        "gpu.intel.com/i915 (evidence/dev.yaml is missing)); the pod would be Unschedulable and "
        "flux-system/apps-wave-0 would never be Ready, stalling every Kustomization after it; hint: record dev's "
        f"evidence first (`{verify}`, then commit evidence/dev.yaml); until then keep the /dev/dri hostPath in the "
        "repository's renderer"]


def test_with_evidence_for_every_stack_the_export_prints_the_renderers_change_of_the_repositorys_plex_once(
        repo, tmp_path, capsys):
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                "dev": evidence_for("dev", {"k3s-dev-1": 1})}
    capsys.readouterr()
    assert export(repo, "prod", project=project(tmp_path, evidence=evidence)) == 0
    err = capsys.readouterr().err
    told = [line for line in err.splitlines() if line.startswith("WARNING plex: evidence for")]
    assert told == ["WARNING plex: evidence for prod, dev allows gpu.intel.com/i915, but the repository's plex "
                    "(apps/wave-0/plex.yaml) does not use it yet; the renderer's pull request makes "
                    "apps/wave-0/plex.yaml hold the diff below"]  # once for both stacks
    assert "\n  +              gpu.intel.com/i915: '1'\n" in err and "\n  -            path: /dev/dri\n" in err


def test_the_preview_says_the_host_path_stays_then_which_fields_the_repositorys_plex_must_change(repo, tmp_path):
    from gitops.preview import preview

    assert export(repo, "prod", project=project(tmp_path)) == 0
    before = preview("dev", repo, project(tmp_path))
    assert any("keeps its /dev/dri hostPath: evidence for dev does not allow" in line for _, line in before.diagnostics)
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                "dev": evidence_for("dev", {"k3s-dev-1": 1})}
    after = preview("dev", repo, project(tmp_path / "with-evidence", evidence=evidence))
    told = [line for _, line in after.diagnostics if line.startswith("plex: evidence for dev allows")]
    assert len(told) == 1 and "\n      +              gpu.intel.com/i915: '1'\n" in told[0]
    # The repository's Plex is not the export's: with or without evidence, no exported object changes.
    assert {s.op for s in before.steps} == {s.op for s in after.steps} == {"same"}


# --- the check itself, on a small walk: every branch word for word ------------------------------------------------

from gitops.checks.reference import check_references  # noqa: E402
from gitops.flux.inventory import FluxView, ObjectId  # noqa: E402
from gitops.tree import ExportedObject, Tree  # noqa: E402
from model.config import DeliveredBy  # noqa: E402
from model.evidence import RESOURCE, gpu_requests  # noqa: E402
from model.layout import SplitLayout  # noqa: E402
from model.outputs import GpuAppOutput  # noqa: E402

LAYOUT = SplitLayout("lab", "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
NEXT_STEP = ("kubectl get nodes -o json > nodes-lab.json && make verify-nodes STACK=lab NODES=nodes-lab.json "
             "WRITE_EVIDENCE=1")


def plex(*, gpu: bool = False, claims: bool = False, pod: dict | None = None) -> dict:
    container = {"name": "plex", "image": "plex:1", **({"resources": {"limits": {RESOURCE: "1"}}} if gpu else {})}
    spec = {"containers": [container], **({"resourceClaims": [{"name": "gpu"}]} if claims else {}), **(pod or {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "plex", "namespace": "plex"},
            "spec": {"template": {"spec": spec}}}


def check(theirs: dict | None, access: str, *, delivered_by: DeliveredBy = "repository", fresh: bool = False,
          reference: dict | None = None) -> tuple[list[str], list[str]]:
    program = reference if reference is not None else plex(gpu=access == "device-plugin")
    tree = Tree("lab", LAYOUT, references=[
        ExportedObject("", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "plex"}}, None,  # type: ignore[arg-type]
                       "GpuApp", "plex"),
        ExportedObject("", program, None, "GpuApp", "plex")])  # type: ignore[arg-type]
    view = FluxView(bootstrap=("flux-system", "flux-system"))
    if theirs is not None:
        oid = ObjectId.of(theirs)
        view.manifests[oid], view.origins[oid] = theirs, "apps/wave-0/plex.yaml"
        view.applied_by[oid] = [("flux-system", "apps"), ("flux-system", "more")]
    return check_references(tree, view, {"plex": GpuAppOutput(access, "no evidence", delivered_by=delivered_by)},
                            fresh)


def test_the_gpu_requests_of_a_workload_are_found_in_every_container_list_limits_and_requests_alike():
    pod = {"initContainers": [{"resources": {"limits": {RESOURCE: 1}}}],
           "containers": ["not a container", {"resources": "odd"}, {"resources": {"limits": "odd"}},
                          {"resources": {"requests": {RESOURCE: 1}, "limits": {RESOURCE: 1, "cpu": 1}}}]}
    assert gpu_requests({"spec": {"template": {"spec": pod}}}) == [
        f"spec.template.spec.initContainers[0].resources.limits.{RESOURCE}",
        f"spec.template.spec.containers[3].resources.limits.{RESOURCE}",
        f"spec.template.spec.containers[3].resources.requests.{RESOURCE}"]
    assert gpu_requests({"spec": {"template": {"spec": {"containers": {"not": "a list"}}}}}) == []
    assert gpu_requests({"spec": "odd"}) == []


def test_only_an_app_the_repository_delivers_and_whose_deployment_the_program_declares_is_checked():
    requesting = plex(gpu=True)
    assert check(requesting, "hostpath", delivered_by="export") == ([], [])
    assert check(requesting, "hostpath", reference={"kind": "Service", "metadata": {"name": "plex"}}) == ([], [])


def test_the_repositorys_app_that_flux_never_applies_is_refused_unless_the_export_makes_the_first_commit():
    assert check(None, "hostpath") == ([
        "./clusters/lab: Deployment plex/plex: plex.deliveredBy: repository, but Flux's walk from ./clusters/lab "
        "applies no Deployment plex/plex; the evidence gate cannot see the repository's plex; hint: let a "
        "Kustomization of this repository apply it, or set deliveredBy: export"], [])
    assert check(None, "hostpath", fresh=True) == ([], [])


def test_requesting_the_gpu_without_evidence_is_refused_and_with_it_is_what_the_program_declares():
    assert check(plex(gpu=True), "hostpath") == ([
        f"apps/wave-0/plex.yaml: Deployment plex/plex: spec.template.spec.containers[0].resources.limits.{RESOURCE}: "
        f"requests {RESOURCE}, but the evidence does not back it for lab (no evidence); the pod would be "
        "Unschedulable and flux-system/apps, flux-system/more would never be Ready, stalling every Kustomization "
        f"after it; hint: record lab's evidence first (`{NEXT_STEP}`, then commit evidence/lab.yaml); until then keep "
        "the /dev/dri hostPath in the repository's renderer"], [])
    assert check(plex(gpu=True), "device-plugin") == ([], [])


def test_the_host_path_kept_without_evidence_is_a_notice():
    assert check(plex(), "hostpath") == ([], [
        "plex: the repository's plex (apps/wave-0/plex.yaml, applied by flux-system/apps, flux-system/more) keeps its "
        f"/dev/dri hostPath: evidence for lab does not allow {RESOURCE} yet"])


def test_with_evidence_the_repositorys_app_not_switched_yet_is_no_notice_of_the_check_but_the_renderers_change():
    assert check(plex(), "device-plugin") == ([], [])


def test_on_the_dra_route_a_request_for_the_plugins_resource_is_refused_and_no_claim_is_left_to_the_renderers_change():
    assert check(plex(gpu=True), "dra-claim") == ([
        f"apps/wave-0/plex.yaml: Deployment plex/plex: spec.template.spec.containers[0].resources.limits.{RESOURCE}: "
        f"requests {RESOURCE}, which nothing advertises once the device plugin is removed (no evidence); the pod "
        "would be Unschedulable and flux-system/apps, flux-system/more would never be Ready, stalling every "
        "Kustomization after it; hint: switch the repository's plex to a claim of class gpu.intel.com "
        "(spec.resourceClaims and the container's resources.claims) in the same pull request"], [])
    assert check(plex(), "dra-claim") == ([], [])
    assert check(plex(claims=True), "dra-claim") == ([], [])


def test_every_app_is_checked_whatever_the_apps_before_it_gave():
    """Apps are checked in name order: one skipped, one refused or one told about never ends the check of the next."""
    def deployment(name: str, gpu: bool = False) -> dict:
        return {**plex(gpu=gpu), "metadata": {"name": name, "namespace": "media"}}

    def delivered(access: str) -> GpuAppOutput:
        return GpuAppOutput(access, "x", delivered_by="repository")

    apps = {"a-export": GpuAppOutput("hostpath", "x"), "b-no-reference": delivered("hostpath"),
            "c-not-applied": delivered("hostpath"), "d-refused": delivered("hostpath"), "e-dra": delivered("dra-claim")}
    tree = Tree("lab", LAYOUT, references=[
        ExportedObject("", deployment(name), None, "GpuApp", name)  # type: ignore[arg-type]
        for name in ("a-export", "c-not-applied", "d-refused", "e-dra")])
    view = FluxView(bootstrap=("flux-system", "flux-system"))
    for manifest in (deployment("a-export", gpu=True), deployment("d-refused", gpu=True), deployment("e-dra")):
        oid = ObjectId.of(manifest)
        view.manifests[oid], view.origins[oid], view.applied_by[oid] = manifest, "apps/media.yaml", [("x", "apps")]
    problems, notices = check_references(tree, view, apps, fresh=True)
    assert [line.split(":")[:2] for line in problems] == [["apps/media.yaml", " Deployment media/d-refused"]]
    assert notices == []  # e-dra, claiming nothing yet, is the renderer's change (gitops/reports/renderer_change.py)
