"""The reading of a bjw-s app-template HelmRelease's values (model/adopt/app_template.py, issue 53) held to the chart
as Helm's own engine renders it: for each values file of the table, `helm template` (the Helm CLI `make tools`
builds, build/tools/bin/helm) renders the chart kept in tests/fixtures/charts/app-template offline, and each
rendered workload's GPU access, derived by model/evidence.py's `held_access` from the rendered pod spec, its kind,
name, device plugin requests, claims and /dev/dri volumes must be what the reader says of the same values. Run by
`make e2e`; a missing Helm fails these tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import BIN

from conftest import FIXTURES
from model.adopt.app_template import KINDS, PodClaim, Workload, pod_option, read_values
from model.evidence import RESOURCE, held_access, host_device_volumes

pytestmark = pytest.mark.e2e

HELM = BIN / "helm"
CHART = FIXTURES / "charts" / "app-template"
CHART_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
RELEASE = "plex"
KUBE_VERSION = "1.36.0"  # the nodes' minor (k3s v1.36); the chart reads it for pod-level options
CONTROLLER_LABEL = "app.kubernetes.io/controller"


@pytest.fixture(autouse=True, scope="module")
def _helm_is_built() -> None:
    """A missing Helm fails these tests (never skips them): `make e2e` builds it first."""
    if not HELM.is_file():
        pytest.fail(f"{HELM}: not built; hint: run `make tools` (make e2e does)")


def container(**more: Any) -> dict[str, Any]:
    return {"image": {"repository": "ghcr.io/home-operations/plex", "tag": "1.42.1.10054"}, **more}


def controller(**more: Any) -> dict[str, Any]:
    return {"containers": {"app": container()}, **more}


GPU = {"limits": {RESOURCE: 1, "memory": "4Gi"}}
DRI = {"type": "hostPath", "hostPath": "/dev/dri"}
CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "plex"}]

# name: the release's values. Every GPU shape the reader reads, as a home-operations repository writes it.
TABLE: dict[str, dict[str, Any]] = {
    "limits only": {"controllers": {"plex": {"containers": {"app": container(resources=GPU)}}}},
    "a DRA claim by template with the container's claim": {"controllers": {"plex": {
        "containers": {"app": container(resources={"claims": [{"name": "gpu"}]})},
        "pod": {"resourceClaims": CLAIM}}}},
    "a /dev/dri host path with global mounts": {
        "controllers": {"plex": controller()},
        "persistence": {"dri": {**DRI, "globalMounts": [{"path": "/dev/dri"}]}}},
    "advanced mounts into one controller of two": {
        "controllers": {"plex": controller(), "transcoder": controller()},
        "persistence": {"dri": {**DRI, "advancedMounts": {"transcoder": {"app": [{"path": "/dev/dri"}]}}},
                        "config": {"type": "emptyDir"}}},
    "none": {"controllers": {"plex": controller()}, "persistence": {"config": {"existingClaim": "plex"}}},
    "a disabled controller": {
        "controllers": {"plex": {"containers": {"app": container(resources=GPU)}},
                        "old": {**controller(), "enabled": False, "pod": {"resourceClaims": CLAIM}}},
        "persistence": {"dri": DRI}},
    "default pod options' claims": {
        "defaultPodOptions": {"resourceClaims": CLAIM},
        "controllers": {"plex": controller(), "worker": controller(type="statefulset")}},
    "every kind, a host path in each pod": {
        "controllers": {"a": controller(type="daemonset"), "b": controller(type="cronjob", cronjob={
            "schedule": "0 * * * *"}), "c": controller(type="job"), "d": controller(type="statefulset")},
        "persistence": {"card": {**DRI, "hostPath": "/dev/dri/card0"}}},
    "default container options, merged, and an init container": {"controllers": {"plex": {
        "defaultContainerOptionsStrategy": "merge",
        "defaultContainerOptions": {"resources": {"limits": {RESOURCE: 1}}},
        "initContainers": {"init": container()},
        "containers": {"app": container(resources={"limits": {"memory": "1Gi"}}, nameOverride="server")}}}},
    "names: global nameOverride, prefix, suffix, forceRename": {
        "global": {"nameOverride": "Jellyfin"},
        "controllers": {"main": {"containers": {"app": container(resources=GPU)}, "prefix": "media"},
                        "side": controller(suffix="gpu"),
                        "other": controller(forceRename="Plex-Server")}},
    "a custom volume of /dev/dri and a fullname override": {
        "fullnameOverride": "media-server",
        "controllers": {"plex": controller()},
        "persistence": {"dri": {"type": "custom", "volumeSpec": {"hostPath": {"path": "/dev/dri/renderD128"}}}}},
}


def render(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """`helm template` of the chart with these values, offline: no repository, no cluster, Helm's own folders empty."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    home = tmp_path / "helm-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBECONFIG"))}
    env.update(HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
               HELM_DATA_HOME=str(home / "data"))
    done = subprocess.run([str(HELM), "template", RELEASE, str(CHART), "-f", str(values_file), "--namespace",
                           "default", "--kube-version", KUBE_VERSION, "--skip-schema-validation"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if isinstance(doc, dict)]


def as_pod_owner(workload: dict[str, Any]) -> dict[str, Any]:
    """The manifest held_access reads (spec.template.spec): a CronJob's pod is under its jobTemplate."""
    if workload["kind"] == "CronJob":
        return {"spec": workload["spec"]["jobTemplate"]["spec"]}
    return workload


def rendered_reading(doc: dict[str, Any]) -> dict[str, Any]:
    """What the rendered workload's pod holds, in the reader's terms."""
    owner = as_pod_owner(doc)
    pod = owner["spec"]["template"]["spec"]
    containers = {}
    for field, init in (("containers", False), ("initContainers", True)):
        for c in pod.get(field, []):
            resources = c.get("resources", {})
            requests = tuple(kind for kind in ("limits", "requests") if RESOURCE in resources.get(kind, {}))
            claims = tuple(claim["name"] for claim in resources.get("claims", []))
            if requests or claims:
                containers[(c["name"], init)] = (requests, claims)
    return {"kind": doc["kind"], "name": doc["metadata"]["name"], "access": held_access(owner),
            "containers": containers, "host_paths": sorted(host_device_volumes(owner)),
            "pod_claims": [PodClaim(c["name"], c.get("resourceClaimTemplateName"), c.get("resourceClaimName"))
                           for c in pod.get("resourceClaims", [])]}


def reader_reading(workload: Workload) -> dict[str, Any]:
    return {"kind": workload.kind, "name": workload.name, "access": workload.access,
            "containers": {(c.name, c.init): (c.requests, c.claims) for c in workload.containers},
            "host_paths": sorted(workload.host_paths), "pod_claims": list(workload.pod_claims)}


@pytest.mark.parametrize("case", list(TABLE))
def test_the_reader_says_what_helm_renders(case, tmp_path):
    values = TABLE[case]
    reading = read_values(values, RELEASE, CHART_VERSION)
    assert not reading.unknown and all(not w.unknown for w in reading.workloads), reading
    rendered = {doc["metadata"]["labels"][CONTROLLER_LABEL]: rendered_reading(doc)
                for doc in render(values, tmp_path) if doc.get("kind") in KINDS.values()}
    assert {w.controller: reader_reading(w) for w in reading.workloads} == rendered
    assert not set(reading.disabled) & set(rendered)


def test_app_template_4_1_1_drops_pod_claims_and_the_reader_says_so(tmp_path):
    """The chart kept here renders no pod-level resourceClaims at all (a newer release does): the reader's
    'ignored' names the value, and the rendered pod holds only the container's claim, which no pod claim backs."""
    values = TABLE["a DRA claim by template with the container's claim"]
    (doc,) = [d for d in render(values, tmp_path) if d.get("kind") == "Deployment"]
    pod = doc["spec"]["template"]["spec"]
    assert "resourceClaims" not in pod
    assert pod["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    (workload,) = read_values(values, RELEASE, CHART_VERSION).workloads
    assert (workload.access, workload.ignored) == ("none", (
        "controllers.plex.pod.resourceClaims (app-template 4.1.1 renders no pod resourceClaims)",))


TOLERATE = {"key": "gpu.intel.com/i915", "operator": "Exists", "effect": "NoSchedule"}
OWN = {"key": "media", "operator": "Exists"}
# The rule the reader applies to pod-level resourceClaims (model/adopt/app_template.py's pod_option: a controller's
# non-empty list replaces the defaults', an empty one does not) is common's getOption, which 4.1.1 renders for
# tolerations through the same template: held to Helm on tolerations, since 4.1.1 renders no resourceClaims.
POD_OPTIONS: dict[str, dict[str, Any]] = {
    "the defaults reach every controller": {"defaultPodOptions": {"tolerations": [TOLERATE]},
                                            "controllers": {"plex": controller(), "worker": controller()}},
    "a controller's own list replaces the defaults": {
        "defaultPodOptions": {"tolerations": [TOLERATE]},
        "controllers": {"plex": controller(pod={"tolerations": [OWN]}), "worker": controller()}},
    "an empty list does not clear them": {"defaultPodOptions": {"tolerations": [TOLERATE]},
                                          "controllers": {"plex": controller(pod={"tolerations": []})}},
    "a controller's own without defaults": {"controllers": {"plex": controller(pod={"tolerations": [OWN]}),
                                                            "worker": controller()}},
    "none at all": {"controllers": {"plex": controller()}},
}


@pytest.mark.parametrize("case", list(POD_OPTIONS))
def test_the_pod_option_rule_the_reader_applies_to_claims_is_the_chart_s_as_it_renders_tolerations(case, tmp_path):
    values = POD_OPTIONS[case]
    docs = [doc for doc in render(values, tmp_path) if doc.get("kind") in KINDS.values()]
    assert len(docs) == len(values["controllers"])
    for doc in docs:
        key = doc["metadata"]["labels"][CONTROLLER_LABEL]
        chosen = pod_option(values, f"controllers.{key}", values["controllers"][key], "tolerations")
        assert doc["spec"]["template"]["spec"].get("tolerations") == (chosen[1] if chosen else None), key
