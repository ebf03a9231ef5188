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


@pytest.mark.parametrize("type_,name", [(DEPLOY, "plex-deployment"), (DS, "intel-gpu-plugin-daemonset")])
def test_a_mounted_service_account_token_fails_the_export(captures, type_, name):
    lines = violations_after(captures["prod"], type_, name,
                             lambda m: m["spec"]["template"]["spec"].pop("automountServiceAccountToken"))
    assert any("policy no-service-account-token" in line for line in lines), lines


def test_default_capabilities_or_net_raw_back_fail_the_export(captures):
    kept = violations_after(captures["prod"], DEPLOY, "plex-deployment",
                            lambda m: container(m)["securityContext"].pop("capabilities"))
    assert any("policy drop-all-capabilities" in line and "no drop: [ALL]" in line for line in kept), kept
    raw = violations_after(captures["prod"], DEPLOY, "plex-deployment",
                           lambda m: container(m)["securityContext"]["capabilities"]["add"].append("NET_RAW"))
    assert any("policy drop-all-capabilities" in line and "adds back NET_RAW" in line for line in raw), raw


def test_a_probe_with_the_default_one_second_timeout_fails_the_export(captures):
    lines = violations_after(captures["prod"], DEPLOY, "plex-deployment",
                             lambda m: container(m)["livenessProbe"].pop("timeoutSeconds"))
    assert any("policy probe-timeouts" in line and "livenessProbe has timeoutSeconds 1 (default)" in line
               for line in lines), lines


def test_the_plugin_namespace_without_its_deny_all_fails_the_export(captures):
    lines = violations_after(captures["prod"], "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                             "intel-gpu-plugin-default-deny", lambda m: m["spec"].update(egress=[{}]))
    assert any("policy intel-gpu-plugin-namespace-default-deny" in line for line in lines), lines
