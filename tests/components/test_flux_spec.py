"""What a Flux Kustomization says, field by field, and how long a workload may take to start: the pure pieces of
components/flux.py, called directly so each behaviour is pinned by a test of its own."""

from __future__ import annotations

import pytest

from components.flux import KustomizationSpec, kustomization_spec_dict, plugin_rollout_timeout
from model.config import DecryptionConfig, DependsOnRef, HealthCheckConfig
from model.flux_graph import duration_seconds, minutes_above, probe_budget_seconds, worst_case_start


def test_a_minimal_spec_writes_only_the_required_fields_and_a_git_repository_source():
    spec = KustomizationSpec(path="./kubernetes/dev/cilium", interval="10m", wait=True)
    assert kustomization_spec_dict(spec) == {
        "interval": "10m",
        "path": "./kubernetes/dev/cilium",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        "wait": True,
    }


def test_every_optional_field_set_in_config_reaches_the_flux_spec_under_its_api_name():
    spec = KustomizationSpec(
        path="./kubernetes/dev/apps/wave-0", interval="15m", timeout="7m", retryInterval="2m",
        dependsOn=(DependsOnRef(name="platform"), DependsOnRef(name="cni", namespace="networking")),
        wait=False, prune=False, sourceRef="cluster-repo", sourceNamespace="flux-system",
        substituteFrom=("cluster-vars", "extra-vars"),
        decryption=DecryptionConfig.model_validate({"provider": "sops", "secretRef": {"name": "sops-age"}}),
        healthChecks=(HealthCheckConfig(apiVersion="apps/v1", kind="Deployment", name="plex", namespace="plex"),
                      HealthCheckConfig(kind="Namespace", name="plex")),
        targetNamespace="apps",
    )
    assert kustomization_spec_dict(spec) == {
        "interval": "15m",
        "path": "./kubernetes/dev/apps/wave-0",
        "prune": False,
        "sourceRef": {"kind": "GitRepository", "name": "cluster-repo", "namespace": "flux-system"},
        "wait": False,
        "dependsOn": [{"name": "platform"}, {"name": "cni", "namespace": "networking"}],
        "timeout": "7m",
        "retryInterval": "2m",
        "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"},
                                         {"kind": "ConfigMap", "name": "extra-vars"}]},
        "decryption": {"provider": "sops", "secretRef": {"name": "sops-age"}},
        "healthChecks": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "plex", "namespace": "plex"},
                         {"kind": "Namespace", "name": "plex"}],
        "targetNamespace": "apps",
    }


@pytest.mark.parametrize(("text", "seconds"), [
    ("5m", 300), ("1h30m", 5400), ("90s", 90), ("1.5m", 90), ("500ms", 0.5), ("2h", 7200),
    ("", 0), ("soon", 0), ("10", 0),
])
def test_a_go_duration_is_read_in_seconds_and_anything_else_is_zero(text, seconds):
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("seconds", "text"), [(0, "1m"), (59, "1m"), (60, "2m"), (119.5, "2m"), (480, "9m")])
def test_the_timeout_suggested_is_the_first_whole_minute_strictly_above(seconds, text):
    assert minutes_above(seconds) == text


def test_the_plugin_rollout_allows_one_image_pull_per_node():
    assert plugin_rollout_timeout(1) == "4m"  # 180 s -> strictly above: 4m
    assert plugin_rollout_timeout(2) == "7m"
    assert plugin_rollout_timeout(3) == "10m"


@pytest.mark.parametrize(("probe", "seconds"), [
    (None, 0),
    ({}, 0),
    ({"periodSeconds": 5}, 15),  # Kubernetes' defaults: no delay, 3 failures
    ({"failureThreshold": 6}, 60),  # default period 10 s
    ({"initialDelaySeconds": 20}, 50),
    ({"initialDelaySeconds": 10, "periodSeconds": 5, "failureThreshold": 2}, 20),
    ({"periodSeconds": 0, "failureThreshold": 0, "initialDelaySeconds": 0}, 0),  # zero is a value, not unset
])
def test_a_probe_may_fail_for_its_delay_plus_period_times_threshold(probe, seconds):
    assert probe_budget_seconds(probe) == seconds


@pytest.mark.parametrize("wrong", [True, False, -1, "30", 2.5, None, [3]])
def test_a_probe_number_that_is_not_a_whole_number_counts_as_the_kubernetes_default(wrong):
    probe = {"initialDelaySeconds": wrong, "periodSeconds": wrong, "failureThreshold": wrong}
    assert probe_budget_seconds(probe) == 0 + 10 * 3


def deployment(*containers: object, kind: str = "Deployment") -> dict:
    return {"kind": kind, "spec": {"template": {"spec": {"containers": list(containers)}}}}


def test_a_workload_without_probes_needs_only_the_image_pull_margin():
    start = worst_case_start(deployment({"name": "a"}, {"name": "b", "readinessProbe": {"periodSeconds": 5}}), 3)
    assert (start.seconds, start.explanation) == (180, "180 s image pull margin")


@pytest.mark.parametrize("manifest", [
    {}, {"spec": None}, {"spec": {"template": {"spec": {"containers": "app"}}}}, deployment("not a container"),
])
def test_a_manifest_of_the_wrong_shape_still_gets_the_image_pull_margin(manifest):
    start = worst_case_start(manifest, 1)
    assert (start.seconds, start.explanation) == (180, "180 s image pull margin")


def test_a_startup_probe_budget_is_added_to_the_pull_margin_and_explained():
    probe = {"startupProbe": {"failureThreshold": 30, "periodSeconds": 10}}
    start = worst_case_start(deployment({"name": "app", **probe}), 1)
    assert (start.seconds, start.explanation) == (480, "startupProbe 30 × 10 s + 180 s image pull margin")


def test_a_startup_probe_delay_is_named_in_the_explanation():
    probe = {"startupProbe": {"failureThreshold": 4, "periodSeconds": 5, "initialDelaySeconds": 15}}
    start = worst_case_start(deployment({"name": "app", **probe}), 1)
    assert (start.seconds, start.explanation) == (215, "startupProbe 4 × 5 s + 15 s delay + 180 s image pull margin")


def test_a_startup_probe_with_kubernetes_defaults_is_explained_with_them():
    start = worst_case_start(deployment({"name": "app", "startupProbe": {"httpGet": {"path": "/"}}}), 1)
    assert (start.seconds, start.explanation) == (210, "startupProbe 3 × 10 s + 180 s image pull margin")


def test_without_a_startup_probe_the_readiness_delay_counts():
    start = worst_case_start(deployment({"name": "app", "readinessProbe": {"initialDelaySeconds": 40}}), 1)
    assert (start.seconds, start.explanation) == (220, "readinessProbe delay 40 s + 180 s image pull margin")


def test_the_startup_probe_wins_over_the_readiness_delay_of_the_same_container():
    container = {"name": "app", "startupProbe": {"failureThreshold": 2, "periodSeconds": 10},
                 "readinessProbe": {"initialDelaySeconds": 100}}
    assert worst_case_start(deployment(container), 1).seconds == 200


@pytest.mark.parametrize("order", [1, -1])
def test_the_slowest_container_decides_whichever_comes_first(order):
    slow = {"name": "slow", "startupProbe": {"failureThreshold": 30, "periodSeconds": 10}}
    fast = {"name": "fast", "readinessProbe": {"initialDelaySeconds": 5}}
    start = worst_case_start(deployment(*[slow, fast][::order]), 1)
    assert (start.seconds, start.explanation) == (480, "startupProbe 30 × 10 s + 180 s image pull margin")


def test_of_two_equally_slow_containers_the_first_is_named():
    ready = {"name": "a", "readinessProbe": {"initialDelaySeconds": 30}}
    startup = {"name": "b", "startupProbe": {"failureThreshold": 3, "periodSeconds": 10}}
    explanation = worst_case_start(deployment(ready, startup), 1).explanation
    assert explanation == "readinessProbe delay 30 s + 180 s image pull margin"


def test_a_daemonset_on_one_node_pays_its_start_once():
    start = worst_case_start(deployment({"name": "x"}, kind="DaemonSet"), 1)
    assert (start.seconds, start.explanation) == (180, "180 s image pull margin")


def test_a_daemonset_rolls_node_by_node_and_says_so():
    container = {"name": "x", "readinessProbe": {"initialDelaySeconds": 20}}
    start = worst_case_start(deployment(container, kind="DaemonSet"), 3)
    assert start.seconds == 600
    assert start.explanation == "3 nodes × (readinessProbe delay 20 s + 180 s image pull margin)"


def test_a_daemonset_on_two_nodes_pays_its_start_twice():
    start = worst_case_start(deployment({"name": "x"}, kind="DaemonSet"), 2)
    assert (start.seconds, start.explanation) == (360, "2 nodes × (180 s image pull margin)")


def test_a_deployment_is_not_multiplied_by_the_nodes():
    assert worst_case_start(deployment({"name": "x"}), 5).seconds == 180


def test_decryption_without_a_secret_uses_the_controller_s_own_identity_and_names_no_secret():
    spec = KustomizationSpec(path="./k/apps", interval="10m", wait=True,
                             decryption=DecryptionConfig.model_validate({"provider": "sops"}))
    assert kustomization_spec_dict(spec)["decryption"] == {"provider": "sops"}
