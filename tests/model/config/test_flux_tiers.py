"""The `flux:` section of model/config/flux.py: a tier declared by the repository holds none of the exported
fields, a component joins a tier or names its own dependsOn, each tier once, a Flux path inside the repository."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from builders import project_keys
from conftest import EXAMPLE
from model.config import ConfigError, parse_stack_config

DEV = project_keys(EXAMPLE / "Pulumi.dev.yaml")
SRC = "Pulumi.dev.yaml"


def refused(change: Callable[[dict[str, Any]], object]) -> list[str]:
    """The refusal lines of the shipped dev stack changed by `change`."""
    raw = copy.deepcopy(DEV)
    change(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, SRC)
    return info.value.lines


@pytest.mark.parametrize(("change", "line"), [
    (lambda r: r["flux"]["tiers"][1].update(declaredBy="repository", path=None, targetNamespace="x",
                                            decryption={"secretRef": {"name": "sops-age"}}),
     'gpu-platform:flux.tiers[1].decryption: {…}: tier \'platform\' is declared by the repository, so its '
     "hand-written Kustomization holds decryption (and targetNamespace); hint: remove them here, or set "
     "declaredBy: export"),
    (lambda r: r["plex"].update(delivery={"tier": "apps-wave-0",
                                          "dependsOn": ["cilium", {"name": "x", "namespace": "y"}]}),
     'gpu-platform:plex.delivery.dependsOn: ["cilium", {"name": "x", "namespace": "y"}]: set together with tier; a '
     "component joins a tier or names its own dependsOn, not both; hint: remove dependsOn to join the tier, or "
     "remove tier"),
    (lambda r: r["flux"].update(tiers=[*r["flux"]["tiers"], r["flux"]["tiers"][3], r["flux"]["tiers"][0]]),
     'gpu-platform:flux.tiers[5].name: "apps-wave-0": declared twice (also flux.tiers[3]); hint: one entry per tier'),
])
def test_a_rule_between_flux_keys_names_the_key_to_change(change, line):
    assert refused(change) == [f"{SRC}: {line}"]


@pytest.mark.parametrize("path", ["./kubernetes/../dev", "./kubernetes/./dev", "./..", "./kubernetes/dev/.."])
def test_a_flux_path_may_not_step_out_of_or_around_the_repository(path):
    assert refused(lambda r: r["flux"]["tiers"][1].update(path=path)) == [
        f'{SRC}: gpu-platform:flux.tiers[1].path: "{path}": \'.\' and \'..\' are not allowed: a Flux path names a '
        "folder inside the repository; hint: write it from the repository root, e.g. ./kubernetes/prod/apps"]


def test_a_repository_tier_with_health_checks_is_refused_showing_them_as_the_stack_file_wrote_them():
    def change(raw: dict[str, Any]) -> None:
        raw["flux"]["tiers"][0] = {"name": "cilium", "declaredBy": "repository", "healthChecks": [
            {"kind": "Deployment", "name": "cilium-operator", "namespace": "kube-system"}]}

    assert refused(change) == [
        f'{SRC}: gpu-platform:flux.tiers[0].healthChecks: [{{"kind": "Deployment", "name": "cilium-operator", '
        '"namespace": "kube-system"}]: tier \'cilium\' is declared by the repository, so its hand-written '
        "Kustomization holds healthChecks; hint: remove it here, or set declaredBy: export"]
