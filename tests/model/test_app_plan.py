"""model/app_plan.py: the per-app decisions the program wires its components to, judged directly: the gate for each
app (Plex and the others alike), the warnings of an app held on the hostPath, the capacity check across apps, the DRA
route's stage, who delivers each app, and what each app's stack output says."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from builders import project_keys
from components.plex import plex_app
from conftest import EXAMPLE
from model.app_plan import StackPlan, plan_apps
from model.config import DRA_DRIVER_IMAGE, GpuAppConfig, StackConfig, parse_stack_config
from model.dra.evidence import next_claims_step
from model.dra.gate import EvidenceFile
from model.evidence import Evidence, EvidenceError

PROD = project_keys(EXAMPLE / "Pulumi.prod.yaml")
NODES = {"k3s-prod-1": 1, "k3s-prod-2": 1, "k3s-prod-3": 1}
NO_EVIDENCE = Evidence("evidence/prod.yaml", None)
EVERY_NODE = Evidence("evidence/prod.yaml", NODES)
JELLYFIN = {"name": "jellyfin", "image": "docker.io/jellyfin/jellyfin:10.9.0", "port": 8096,
            "egressClass": "internet", "authMode": "app-native", "hardware": {"gpu": "intel-quicksync"}}
DRA = {"route": "dra", "dra": {"stage": "driver-added", "image": DRA_DRIVER_IMAGE, "imageDigest": "sha256:" + "1" * 64}}


def config(**changes: Any) -> StackConfig:
    raw = copy.deepcopy(PROD)
    raw.update(changes)
    return parse_stack_config(raw, "Pulumi.prod.yaml", "prod")


def apps_of(cfg: StackConfig) -> list[tuple[str, GpuAppConfig]]:
    plex = [("plex", plex_app(cfg.plex))] if cfg.plex else []
    return plex + [(f"apps[{i}]", app) for i, app in enumerate(cfg.apps)]


def planned(evidence: Evidence, **changes: Any) -> StackPlan:
    cfg = config(**changes)
    return plan_apps(cfg, apps_of(cfg), evidence, None, "prod")


def test_without_evidence_every_gpu_app_keeps_the_host_path_and_each_is_named_in_a_warning():
    plan = planned(NO_EVIDENCE, apps=[JELLYFIN])
    assert [(a.key, a.name, a.decision.access) for a in plan.apps] == [
        ("plex", "plex", "host-path"), ("apps[0]", "jellyfin", "host-path")]
    why = ("keeps the legacy /dev/dri hostPath (a known no-op: EPERM on open) because there is no evidence that the "
           "nodes advertise gpu.intel.com/i915 (evidence/prod.yaml is missing); next: kubectl get nodes -o json > "
           "nodes-prod.json && make verify-nodes STACK=prod NODES=nodes-prod.json WRITE_EVIDENCE=1")
    assert plan.warnings == (f"plex: plex {why}", f"jellyfin: jellyfin {why}")
    assert (plan.dra, plan.plugin, plan.progress()) == (None, True, None)


def test_with_evidence_for_every_node_each_app_requests_the_plugin_s_resource_and_nothing_is_warned():
    plan = planned(EVERY_NODE, apps=[JELLYFIN])
    assert [a.decision.access for a in plan.apps] == ["device-plugin", "device-plugin"]
    assert plan.warnings == ()


def test_an_app_without_a_gpu_is_neither_gated_nor_warned_about():
    plan = planned(NO_EVIDENCE, apps=[{**JELLYFIN, "hardware": {"gpu": "none"}}])
    assert plan.app("jellyfin").decision.access == "none"
    assert [w.split(":")[0] for w in plan.warnings] == ["plex"]


def test_requests_that_cannot_all_fit_are_refused_at_the_key_of_the_app_that_does_not():
    with pytest.raises(EvidenceError) as refused:
        planned(Evidence("evidence/prod.yaml", {"k3s-prod-1": 1, "k3s-prod-2": 1, "k3s-prod-3": 0}),
                apps=[JELLYFIN, {**JELLYFIN, "name": "tdarr"}])
    assert refused.value.lines == [
        "Pulumi.prod.yaml: gpu-platform:apps[1].hardware.devices: 1: tdarr does not fit: the apps on the device-plugin "
        "path request 3 gpu.intel.com/i915 in all (jellyfin (1), plex (1), tdarr (1)), the nodes advertise "
        "k3s-prod-1=1, k3s-prod-2=1, k3s-prod-3=0 (evidence/prod.yaml), and a pod takes its devices from one node; "
        "tdarr would stay Unschedulable; hint: hold an app back with intelGpuAccess: host-path, request fewer devices, "
        "or raise the plugin's sharedDevNum (with its reason) and record new evidence"]


def test_an_app_the_repository_delivers_is_planned_as_a_reference_and_says_so_in_its_output():
    plan = planned(EVERY_NODE, apps=[{**JELLYFIN, "deliveredBy": "repository"}])
    plex, jellyfin = plan.apps
    assert (plex.exported, jellyfin.exported) == (True, False)
    assert jellyfin.output().as_output() == {
        "access": "device-plugin", "reason": "evidence/prod.yaml shows every node advertising gpu.intel.com/i915",
        "devices": 1, "openTestPrefix": "", "deliveredBy": "repository"}
    assert "deliveredBy" not in plex.output().as_output()  # the default is not written: outputs stay as they were


def test_the_dra_route_decides_from_its_own_evidence_and_says_where_the_stack_stands():
    cfg = config(gpu=DRA)
    plan = plan_apps(cfg, apps_of(cfg), NO_EVIDENCE, (EvidenceFile("evidence/dra/prod.yaml", None),
                                                      EvidenceFile("evidence/dra/claims/prod.yaml", None)), "prod")
    assert plan.dra is not None and plan.plugin
    assert plan.progress() == (f"gpu.route dra: step 1 of 5 (driver-added); next: {plan.dra.next}")
    assert plan.app("plex").decision.access == "host-path"  # step 1 moves no app: the device plugin's gate decides


def test_the_dra_route_is_never_planned_without_its_evidence_read():
    cfg = config(gpu=DRA)
    with pytest.raises(ValueError, match="^gpu.route: dra is planned on its slice and claim evidence"):
        plan_apps(cfg, apps_of(cfg), NO_EVIDENCE, None, "prod")


SLICES = EvidenceFile("evidence/dra/prod.yaml", {"k3s-prod-1": 1, "k3s-prod-2": 1, "k3s-prod-3": 1})
NO_CLAIMS = EvidenceFile("evidence/dra/claims/prod.yaml", None)
ON_CLAIMS = {**DRA, "dra": {**DRA["dra"], "stage": "apps-on-claims"}}


def on_claims(apps: list[dict[str, Any]], evidence: Evidence = NO_EVIDENCE, **dra: Any) -> StackPlan:
    cfg = config(gpu={**ON_CLAIMS, "dra": {**ON_CLAIMS["dra"], **dra}}, apps=apps)
    return plan_apps(cfg, apps_of(cfg), evidence, (SLICES, NO_CLAIMS), "prod")


def test_from_step_3_every_app_the_stage_moves_claims_the_igpu_and_none_is_warned_about():
    plan = on_claims([JELLYFIN])
    assert [(a.name, a.decision.access, a.claims_device, a.admin_access) for a in plan.apps] == [
        ("plex", "dra-claim", True, False), ("jellyfin", "dra-claim", True, False)]
    assert plan.warnings == ()
    assert plan.progress() == ("gpu.route dra: step 3 of 5 (apps-on-claims); next: step 4: record that every claim "
                               f"is allocated and every app runs: {next_claims_step('prod')}")


def test_an_app_sharing_the_device_through_admin_access_is_planned_so_and_the_others_are_not():
    shared = {**JELLYFIN, "hardware": {"gpu": "intel-quicksync", "draAllocation": "admin-access"}}
    plan = on_claims([shared], adminAccessNamespaces=["jellyfin"])
    assert [(a.name, a.admin_access) for a in plan.apps] == [("plex", False), ("jellyfin", True)]


def test_an_app_the_repository_delivers_is_not_moved_to_a_claim_by_the_export_at_step_3():
    plan = on_claims([{**JELLYFIN, "deliveredBy": "repository"}])
    assert [(a.name, a.decision.access) for a in plan.apps] == [("plex", "dra-claim"), ("jellyfin", "host-path")]


def test_at_step_3_an_app_still_asking_for_the_device_plugin_is_refused_at_its_own_key():
    asking = {**JELLYFIN, "hardware": {"gpu": "intel-quicksync", "intelGpuAccess": "device-plugin"}}
    with pytest.raises(EvidenceError) as refused:
        on_claims([asking])
    assert refused.value.lines == [
        'Pulumi.prod.yaml: gpu-platform:apps[0].hardware.intelGpuAccess: "device-plugin": refused at gpu.dra.stage '
        "apps-on-claims: from step 3 on every GPU app claims the iGPU, never a claim and gpu.intel.com/i915 in one "
        "export; hint: set intelGpuAccess: auto (or host-path to hold jellyfin back)"]


def test_an_app_held_on_the_host_path_stays_there_whatever_the_evidence():
    held = {**JELLYFIN, "hardware": {"gpu": "intel-quicksync", "intelGpuAccess": "host-path"}}
    plan = planned(EVERY_NODE, apps=[held])
    assert [(a.name, a.decision.access) for a in plan.apps] == [("plex", "device-plugin"), ("jellyfin", "host-path")]
    assert plan.warnings == ("jellyfin: apps[0].hardware.intelGpuAccess is host-path (held back by config)",)


def test_an_app_asking_for_the_device_plugin_without_evidence_is_refused_at_its_own_key():
    asking = {**JELLYFIN, "hardware": {"gpu": "intel-quicksync", "intelGpuAccess": "device-plugin"}}
    with pytest.raises(EvidenceError) as refused:
        planned(NO_EVIDENCE, apps=[asking])
    assert refused.value.lines == [
        'Pulumi.prod.yaml: gpu-platform:apps[0].hardware.intelGpuAccess: "device-plugin": refused: there is no '
        "evidence that the nodes advertise gpu.intel.com/i915 (evidence/prod.yaml is missing); requesting it now would "
        "leave jellyfin Unschedulable, its Kustomization never Ready, and every tier that waits for it stalled; hint: "
        "merge the plugin first, then run `kubectl get nodes -o json > nodes-prod.json && make verify-nodes "
        "STACK=prod NODES=nodes-prod.json WRITE_EVIDENCE=1`"]
