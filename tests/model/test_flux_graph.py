"""The cluster's Flux delivery graph: the five tiers from config, the plugin's own Kustomization and Plex's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from builders import registration, registrations
from components.flux import KustomizationSpec, plugin_rollout_timeout
from components.plex import start_budget

KS = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
EXPECTED_DEPENDS_ON = {
    "cilium": ["flux-system"],
    "platform": ["cilium"],
    "platform-config": ["platform"],
    "apps-wave-0": ["platform-config"],
    # Plex joined wave 0: whatever waits for wave 0 waits for Plex too.
    "apps-wave-1": ["apps-wave-0", "plex"],
    "intel-gpu-plugin": ["cilium"],
    "plex": ["platform-config"],
}


def kustomizations(capture) -> dict[str, dict]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in registrations(capture, KS)}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_seven_kustomizations_and_their_depends_on(captures, stack):
    ks = kustomizations(captures[stack])
    assert sorted(ks) == sorted(EXPECTED_DEPENDS_ON)
    for name, spec in ((n, k["spec"]) for n, k in ks.items()):
        assert [d["name"] for d in spec.get("dependsOn", [])] == EXPECTED_DEPENDS_ON[name], name
        assert ks[name]["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" and ks[name]["kind"] == "Kustomization"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_nothing_depends_on_intel_gpu_plugin(captures, stack):
    for name, k in kustomizations(captures[stack]).items():
        assert "intel-gpu-plugin" not in [d["name"] for d in k["spec"].get("dependsOn", [])], name


def test_plugin_kustomization_points_at_the_exported_plugin_folder_and_waits(captures):
    spec = kustomizations(captures["prod"])["intel-gpu-plugin"]["spec"]
    assert spec["path"] == "./components/prod/intel-gpu-plugin"
    assert spec["wait"] is True and spec["prune"] is True
    assert spec["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}
    assert spec["postBuild"] == {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]}


def test_plugin_timing_is_sized_for_the_rollout_not_the_platform_tier(captures):
    plugin = kustomizations(captures["prod"])["intel-gpu-plugin"]["spec"]
    platform = kustomizations(captures["prod"])["platform"]["spec"]
    assert (platform["interval"], platform["timeout"]) == ("10m", "5m")
    assert (plugin["interval"], plugin["timeout"]) != ("10m", "5m")
    assert plugin["timeout"] == plugin_rollout_timeout(3) == "10m"
    assert kustomizations(captures["dev"])["intel-gpu-plugin"]["spec"]["timeout"] == plugin_rollout_timeout(2) == "7m"


def test_platform_and_apps_wave_0_wait(captures):
    ks = kustomizations(captures["prod"])
    assert ks["platform"]["spec"]["wait"] is True
    assert ks["apps-wave-0"]["spec"]["wait"] is True


def test_external_kustomizations_point_at_the_configured_paths(captures):
    ks = kustomizations(captures["prod"])
    assert ks["cilium"]["spec"]["path"] == "./kubernetes/prod/cilium"
    assert ks["apps-wave-0"]["spec"]["path"] == "./kubernetes/prod/apps/wave-0"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_tier_prunes_and_the_plugin_retries_every_two_minutes(captures, stack):
    ks = kustomizations(captures[stack])
    for name in ("cilium", "platform", "platform-config", "apps-wave-0", "apps-wave-1", "plex"):
        assert ks[name]["spec"]["prune"] is True, name
    assert ks["intel-gpu-plugin"]["spec"]["retryInterval"] == "2m"


def test_tier_fields_from_config_reach_the_exported_tier(captures):
    wave0 = kustomizations(captures["prod"])["apps-wave-0"]["spec"]
    assert wave0["decryption"] == {"provider": "sops", "secretRef": {"name": "sops-age"}}
    assert "decryption" not in kustomizations(captures["prod"])["platform"]["spec"]


def test_plex_has_a_kustomization_of_its_own_that_waits_longer_than_its_worst_start(captures):
    plex = kustomizations(captures["prod"])["plex"]["spec"]
    assert plex["path"] == "./components/prod/plex" and plex["wait"] is True
    # 30 × 10 s startup probe + 180 s image pull margin = 480 s; the timeout must be above it.
    assert start_budget().seconds == 480
    assert plex["timeout"] == "9m"


def test_cluster_vars_configmap_comes_from_stack_config(captures):
    cm = registration(captures["prod"], "kubernetes:core/v1:ConfigMap", "flux-cluster-vars").inputs
    assert cm["metadata"] == {"name": "cluster-vars", "namespace": "flux-system"}
    assert cm["data"]["CLUSTER_NAME"] == "prod"


@pytest.mark.parametrize("field,value", [
    ("interval", "1d"), ("interval", "-5m"), ("timeout", "5"), ("retryInterval", "five minutes"),
])
def test_kustomization_spec_refuses_durations_flux_does_not_accept(field, value):
    fields = {"path": "./x", "interval": "10m", "wait": True, field: value}
    with pytest.raises(ValidationError, match=field):
        KustomizationSpec(**fields)


def test_kustomization_spec_refuses_a_path_without_dot_slash():
    with pytest.raises(ValidationError, match="path"):
        KustomizationSpec(path="components/prod/x", interval="10m", wait=True)


def test_kustomization_spec_refuses_unknown_fields():
    with pytest.raises(ValidationError, match="wiat"):
        KustomizationSpec.model_validate({"path": "./x", "interval": "10m", "wait": True, "wiat": True})


def test_every_tier_field_in_config_reaches_the_exported_kustomization(run_stack_text):
    from conftest import FIXTURES
    text = (FIXTURES / "config" / "valid" / "tiers-with-decryption-and-health-checks.yaml").read_text()
    text = text.replace("        dependsOn: [apps-wave-0]\n",
                        "        dependsOn: [apps-wave-0, {name: storage, namespace: flux-system}]\n").replace(
        "    tiers:\n", "    tiers:\n      - name: storage\n        path: ./kubernetes/dev/storage\n"
                       "        interval: 30m\n        timeout: 15m\n        prune: false\n"
                       "        dependsOn: [cilium]\n")
    ks = kustomizations(run_stack_text(text))
    wave0 = ks["apps-wave-0"]["spec"]
    assert wave0["decryption"] == {"provider": "sops", "secretRef": {"name": "sops-age"}}
    assert wave0["healthChecks"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "home-assistant",
                                      "namespace": "home-automation"}]
    assert wave0["targetNamespace"] == "home-automation" and wave0["retryInterval"] == "2m"
    storage = ks["storage"]["spec"]
    assert (storage["interval"], storage["timeout"], storage["prune"]) == ("30m", "15m", False)
    assert ks["apps-wave-1"]["spec"]["dependsOn"] == [
        {"name": "apps-wave-0"}, {"name": "storage", "namespace": "flux-system"}, {"name": "plex"}]


# --- the wait rule: a refusal for the export's own Kustomizations, a warning for the repository's ---------------

def _wait_case(declared_by: str, wait: bool, with_dependent: bool = True) -> tuple[list[str], list[str]]:
    from model.flux_graph import GraphNode, check_graph

    nodes = [GraphNode(("kube-system", "cilium"), (), wait=wait, where="cilium/ks.yaml", declared_by=declared_by)]
    if with_dependent:
        nodes.append(GraphNode(("flux-system", "plex"), (("kube-system", "cilium"),), wait=True, where="ks.plex.yaml"))
    warnings: list[str] = []
    problems = check_graph(nodes, [("flux-system", "flux-system")], ("flux-system", "intel-gpu-plugin"),
                           ("kube-system", "cilium"), warnings=warnings)
    return problems, warnings


def test_wait_false_that_something_depends_on_is_refused_on_the_exports_own_kustomization():
    assert _wait_case("export", wait=False) == ([
        "flux: cilium/ks.yaml: kube-system/cilium.spec.wait: false: plex dependsOn it, and without wait 'Ready' does "
        "not mean its workloads are healthy; hint: set wait: true"], [])


def test_wait_false_that_something_depends_on_is_a_warning_on_the_repositorys_own():
    assert _wait_case("repository", wait=False) == ([], [
        "cilium/ks.yaml: kube-system/cilium.spec.wait: false (the repository's choice): plex dependsOn it, so they "
        "start once it is applied, not once its workloads are healthy; wait: true there would hold them until its "
        "workloads are Ready"])


@pytest.mark.parametrize("declared_by", ["export", "repository"])
def test_wait_true_or_no_dependent_is_neither_refused_nor_warned(declared_by):
    assert _wait_case(declared_by, wait=True) == ([], [])
    assert _wait_case(declared_by, wait=False, with_dependent=False) == ([], [])


def test_without_a_warnings_list_the_repositorys_choice_is_dropped_not_refused():
    from model.flux_graph import GraphNode, check_graph

    nodes = [GraphNode(("kube-system", "cilium"), (), wait=False, declared_by="repository"),
             GraphNode(("flux-system", "plex"), (("kube-system", "cilium"),), wait=True)]
    assert check_graph(nodes, [("flux-system", "flux-system")], ("flux-system", "intel-gpu-plugin"),
                       ("kube-system", "cilium")) == []
