"""Every rule of the policy mirror (policy/rules.py) has its Kyverno twin: the repository's four app-scoped policies
(examples/home-network-k3s/repo/platform/kyverno/) and `policy/kyverno/`, a Kyverno version of every rule (or part
of one) those four do not express. MIRROR_TO_KYVERNO is the one table of which Kyverno rules state each rule of the
mirror; these tests hold it to both sides by reading the files, with no Kyverno CLI. That Kyverno's verdicts agree
with the mirror's, object by object, is tests/e2e/test_kyverno_agreement.py (`make e2e`), which judges by this table."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conftest import ROOT, repository
from policy.rules import DANGEROUS_CAPABILITIES, RULES

REPOSITORY_POLICIES = repository("home-network-k3s") / "platform" / "kyverno"
OWN_POLICIES = ROOT / "policy" / "kyverno"


@dataclass(frozen=True)
class Counterpart:
    scope: str  # "workload": every Pod or Pod template; "app": those in app namespaces; "plugin": those running the
    #             GPU plugin's image; "app-or-plugin": either; "admin-claim": a DRA claim or template asking for
    #             adminAccess
    kyverno: tuple[tuple[str, str], ...]  # (policy, rule); the rule as written on Pod (auto-generated names aside)
    on_namespace: bool = False  # rules.py reports the app Namespace; Kyverno refuses each Pod in it


MIRROR_TO_KYVERNO: dict[str, Counterpart] = {
    "restrict-host-namespaces": Counterpart("app", (
        ("restrict-host-namespaces", "host-namespaces"),
        ("restrict-host-namespaces", "privileged-containers"),
        ("restrict-privileged-ephemeral-containers", "privileged-ephemeral-containers"))),
    "require-egress-class-label": Counterpart("app", (
        ("require-egress-class-label", "namespace-has-egress-class"),), on_namespace=True),
    "require-auth-mode-label": Counterpart("app", (
        ("require-auth-mode-label", "namespace-has-auth-mode"),), on_namespace=True),
    "require-default-deny-baseline": Counterpart("app", (
        ("require-default-deny-baseline", "default-deny-networkpolicy"),
        ("default-deny-baseline-denies-all", "default-deny-has-no-allow-rules")), on_namespace=True),
    "intel-gpu-plugin-no-health-management": Counterpart("plugin", (
        ("intel-gpu-plugin-no-health-management", "no-health-management"),)),
    "intel-gpu-plugin-read-only-device-mounts": Counterpart("plugin", (
        ("intel-gpu-plugin-read-only-device-mounts", "read-only-device-mounts"),)),
    "intel-gpu-plugin-shared-dev-num-reason": Counterpart("plugin", (
        ("intel-gpu-plugin-shared-dev-num-reason", "shared-dev-num-reason-pod"),
        ("intel-gpu-plugin-shared-dev-num-reason", "shared-dev-num-reason-pod-template"),
        ("intel-gpu-plugin-shared-dev-num-reason", "shared-dev-num-reason-cronjob"))),
    "pinned-image-tags": Counterpart("workload", (("pinned-image-tags", "pinned-image-tags"),)),
    "no-service-account-token": Counterpart("app-or-plugin", (
        ("no-service-account-token", "app-workloads"),
        ("no-service-account-token", "gpu-plugin"))),
    "drop-all-capabilities": Counterpart("app", (("drop-all-capabilities", "drop-all-capabilities"),)),
    "probe-timeouts": Counterpart("app", (("probe-timeouts", "probe-timeouts"),)),
    "intel-gpu-plugin-namespace-default-deny": Counterpart("plugin", (
        ("intel-gpu-plugin-namespace-default-deny", "plugin-namespace-default-deny"),)),
    "intel-gpu-plugin-not-beside-dra-driver": Counterpart("plugin", (
        ("intel-gpu-plugin-not-beside-dra-driver", "plugin-not-beside-dra-driver"),)),
    "dra-admin-access-labelled-namespace": Counterpart("admin-claim", (
        ("dra-admin-access-labelled-namespace", "admin-access-in-labelled-namespace"),)),
}


def policy_files() -> list[Path]:
    return sorted(REPOSITORY_POLICIES.glob("*.yaml")) + sorted(OWN_POLICIES.glob("*.yaml"))


def load_policies() -> dict[str, dict[str, Any]]:
    """Every ClusterPolicy of both sets by name (the repository's kustomization.yaml is not one)."""
    policies = {}
    for path in policy_files():
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "ClusterPolicy":
                assert doc["metadata"]["name"] not in policies, f"{path}: policy {doc['metadata']['name']} twice"
                policies[doc["metadata"]["name"]] = {**doc, "_path": path}
    return policies


def test_the_table_maps_every_rule_of_the_mirror_and_every_kyverno_rule():
    assert set(MIRROR_TO_KYVERNO) == {r.name for r in RULES}
    written = {(name, r["name"]) for name, p in load_policies().items() for r in p["spec"]["rules"]}
    mapped = {pair for m in MIRROR_TO_KYVERNO.values() for pair in m.kyverno}
    assert mapped == written, (f"in the table, not in a policy: {sorted(mapped - written)}; "
                               f"in a policy, not in the table: {sorted(written - mapped)}")


def test_each_own_policy_names_the_rule_it_mirrors_and_enforces():
    for path in sorted(OWN_POLICIES.glob("*.yaml")):
        text = path.read_text()
        policy = yaml.safe_load(text)
        mirrored = [rule for rule, m in MIRROR_TO_KYVERNO.items()
                    if any(p == policy["metadata"]["name"] for p, _ in m.kyverno)]
        assert mirrored and f"policy/rules.py `{mirrored[0]}`" in text, f"{path.name}: no comment naming its rule"
        assert all(r["validate"]["failureAction"] == "Enforce" for r in policy["spec"]["rules"]), path.name


def test_the_capability_list_is_the_mirrors():
    text = (OWN_POLICIES / "drop-all-capabilities.yaml").read_text()
    (listed,) = re.findall(r"contains\(`(\[[^`]*\])`, @\)", text)
    assert set(json.loads(listed)) == DANGEROUS_CAPABILITIES
