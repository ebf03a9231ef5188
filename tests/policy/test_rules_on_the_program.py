"""The hardening the GPU-app issue asks for is held by policy rules: a regression fails the export."""

from __future__ import annotations

import pytest

from builders import mutated
from gitops import pipeline
from gitops.checks.validate import ExportValidationError
from policy.rules import Resource, Settings, evaluate

DEPLOY = "kubernetes:apps/v1:Deployment"
DS = "kubernetes:apps/v1:DaemonSet"


def violations_after(capture, type_: str, name: str, mutate) -> list[str]:
    with pytest.raises(ExportValidationError) as caught:
        pipeline.from_capture(mutated(capture, type_, name, mutate), lint=False)
    return caught.value.lines


def container(m: dict) -> dict:
    return m["spec"]["template"]["spec"]["containers"][0]


def test_the_shipped_stacks_pass_every_hardening_rule(captures):
    for capture in captures.values():
        resources = [Resource(r.type, r.name, r.urn, r.inputs) for r in capture.registrations if r.custom]
        assert evaluate(resources, Settings()) == []


@pytest.mark.parametrize("type_,name,where", [
    (DEPLOY, "plex-deployment", "components/prod/plex/deployment.plex.yaml: policy no-service-account-token: "
                                "Deployment plex/plex"),
    (DS, "intel-gpu-plugin-daemonset", "components/prod/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml: policy "
                                       "no-service-account-token: DaemonSet intel-gpu-plugin/intel-gpu-plugin"),
])
def test_a_mounted_service_account_token_fails_the_export(captures, type_, name, where):
    lines = violations_after(captures["prod"], type_, name,
                             lambda m: m["spec"]["template"]["spec"].pop("automountServiceAccountToken"))
    assert lines == [f"{where} ({name}): the pod mounts a service-account token it never uses "
                     "(automountServiceAccountToken is not false); hint: set automountServiceAccountToken: false on "
                     "the pod (components/gpu_app.py, components/intel_gpu_plugin.py)"]


def test_default_capabilities_or_net_raw_back_fail_the_export(captures):
    kept = violations_after(captures["prod"], DEPLOY, "plex-deployment",
                            lambda m: container(m)["securityContext"].pop("capabilities"))
    where = ("components/prod/plex/deployment.plex.yaml: policy drop-all-capabilities: Deployment plex/plex "
             "(plex-deployment)")
    hint = "hint: keep drop: [ALL] and add back only what the image's init needs (the app's capabilities)"
    assert kept == [f"{where}: container plex keeps the runtime's default capabilities (no drop: [ALL]); {hint}"]
    raw = violations_after(captures["prod"], DEPLOY, "plex-deployment",
                           lambda m: container(m)["securityContext"]["capabilities"]["add"].append("NET_RAW"))
    assert raw == [f"{where}: container plex adds back NET_RAW; {hint}"]


def test_a_probe_with_the_default_one_second_timeout_fails_the_export(captures):
    lines = violations_after(captures["prod"], DEPLOY, "plex-deployment",
                             lambda m: container(m)["livenessProbe"].pop("timeoutSeconds"))
    assert lines == ["components/prod/plex/deployment.plex.yaml: policy probe-timeouts: Deployment plex/plex "
                     "(plex-deployment): container plex livenessProbe has timeoutSeconds 1 (default), below 2: a busy "
                     "but healthy app fails it; hint: set the app's probe.timeoutSeconds"]


def test_the_plugin_namespace_without_its_deny_all_fails_the_export(captures):
    lines = violations_after(captures["prod"], "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                             "intel-gpu-plugin-default-deny", lambda m: m["spec"].update(egress=[{}]))
    assert lines == [
        "components/prod/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml: policy intel-gpu-plugin-namespace-default-"
        "deny: DaemonSet intel-gpu-plugin/intel-gpu-plugin (intel-gpu-plugin-daemonset): namespace intel-gpu-plugin of "
        "the GPU plugin has no default-deny NetworkPolicy (it needs no network); hint: declare a default-deny "
        "NetworkPolicy in the plugin's namespace (components/intel_gpu_plugin.py)"]
