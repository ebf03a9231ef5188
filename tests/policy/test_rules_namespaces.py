"""The namespace policies: an app namespace carries its labels and a default-deny NetworkPolicy that really denies.

Pure: hand-written Namespaces and NetworkPolicies evaluated by the rules alone (no mock engine)."""

from __future__ import annotations

import pytest

from policy.rules import Resource, Settings, asks_admin_access, evaluate

NS = "kubernetes:core/v1:Namespace"
NP = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
DENY_SPEC = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
DEFAULT_SETTINGS = Settings()  # the default label keys (frozen, so one instance serves every call)
NO_BASELINE = ("require-default-deny-baseline",
               "app namespace {ns} has no default-deny NetworkPolicy (podSelector {{}}, Ingress+Egress, no rules)")


def namespace(name: str = "media", **labels: str) -> Resource:
    labels = {"app-namespace": "true", "egress-class": "internet", "auth-mode": "app-native", **labels}
    return Resource(NS, f"{name}-ns", f"urn:{name}-ns", {"metadata": {"name": name, "labels": labels}})


def policy(spec: dict, namespace: str = "media", name: str = "default-deny") -> Resource:
    return Resource(NP, f"{namespace}-{name}", f"urn:{namespace}-{name}",
                    {"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def found(resources: list[Resource], settings: Settings = DEFAULT_SETTINGS) -> list[tuple[str, str, str]]:
    return [(v.policy, v.resource.ref, v.problem) for v in evaluate(resources, settings)]


def no_baseline(ns: str = "media") -> tuple[str, str, str]:
    return NO_BASELINE[0], f"Namespace {ns}", NO_BASELINE[1].format(ns=ns)


def test_a_labelled_app_namespace_with_its_default_deny_passes():
    assert found([namespace(), policy(DENY_SPEC)]) == []


@pytest.mark.parametrize("spec", [
    {"podSelector": {}, "policyTypes": ["Egress", "Ingress"]},
    {"podSelector": {"matchLabels": {}}, "policyTypes": ["Ingress", "Egress"]},
    {"podSelector": {"matchExpressions": []}, "policyTypes": ["Ingress", "Egress"]},
    {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []},
    # the API stores an absent podSelector as {} (every Pod), as Kyverno judges it (test_kyverno_agreement.py)
    {"policyTypes": ["Ingress", "Egress"]},
], ids=["types-in-any-order", "empty-matchLabels", "empty-matchExpressions", "empty-rule-lists", "no-pod-selector"])
def test_a_default_deny_may_be_written_in_any_equivalent_way(spec):
    assert found([namespace(), policy(spec)]) == []


@pytest.mark.parametrize("spec", [
    {"podSelector": {"matchLabels": {"app": "plex"}}, "policyTypes": ["Ingress", "Egress"]},
    {"podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["plex"]}]},
     "policyTypes": ["Ingress", "Egress"]},
    {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}]},
    {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]},
    {"podSelector": {}, "policyTypes": ["Ingress"]},
    {"podSelector": {}, "policyTypes": ["Egress"]},
    {"podSelector": {}},
], ids=["selects-some-pods-by-label", "selects-some-pods-by-expression", "allows-all-ingress",
        "allows-egress-anywhere", "ingress-only", "egress-only", "no-policy-types"])
def test_a_policy_that_selects_some_pods_allows_traffic_or_misses_a_direction_is_not_the_baseline(spec):
    assert found([namespace(), policy(spec)]) == [no_baseline()]


def test_a_default_deny_in_another_namespace_does_not_cover_this_one():
    assert found([namespace("media"), namespace("tools"), policy(DENY_SPEC, namespace="tools")]) == [
        no_baseline("media")]


def test_a_leaky_policy_beside_the_real_default_deny_does_not_hide_it():
    allow = policy({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}, name="allow-all")
    assert found([namespace(), allow, policy(DENY_SPEC)]) == []


def test_each_app_namespace_without_a_baseline_is_named_in_order():
    assert found([namespace("tools"), namespace("media")]) == [no_baseline("media"), no_baseline("tools")]


def test_namespaces_not_labelled_as_apps_need_neither_labels_nor_a_baseline():
    system = Resource(NS, "kube-system", "urn:ks",
                      {"metadata": {"name": "kube-system", "labels": {"app-namespace": "false"}}})
    bare = Resource(NS, "bare", "urn:bare", {"metadata": {"name": "bare"}})
    assert found([system, bare]) == []


@pytest.mark.parametrize("label,policy_name", [("egress-class", "require-egress-class-label"),
                                               ("auth-mode", "require-auth-mode-label")])
@pytest.mark.parametrize("value", [None, ""], ids=["absent", "empty"])
def test_an_app_namespace_without_a_value_for_a_required_label_is_refused(label, policy_name, value):
    ns = namespace()
    labels = dict(ns.props["metadata"]["labels"])
    labels.pop(label) if value is None else labels.update({label: value})
    ns = Resource(NS, ns.name, ns.urn, {"metadata": {"name": "media", "labels": labels}})
    assert found([ns, policy(DENY_SPEC)]) == [
        (policy_name, "Namespace media", f"app namespace media has no '{label}' label")]


def test_the_required_label_keys_are_the_ones_the_settings_name():
    settings = Settings(egress_class_label="net.home.arpa/egress", auth_mode_label="net.home.arpa/auth")
    labelled = namespace(**{"net.home.arpa/egress": "internet", "net.home.arpa/auth": "sso"})
    assert found([labelled, policy(DENY_SPEC)], settings) == []
    assert found([namespace(), policy(DENY_SPEC)], settings) == [
        ("require-egress-class-label", "Namespace media", "app namespace media has no 'net.home.arpa/egress' label"),
        ("require-auth-mode-label", "Namespace media", "app namespace media has no 'net.home.arpa/auth' label")]


def _claim(*requests: object) -> Resource:
    return Resource("kubernetes:resource.k8s.io/v1:ResourceClaim", "c", "urn:c",
                    {"spec": {"devices": {"requests": list(requests)}}})


def test_a_claim_asks_admin_access_by_any_request_or_alternative_and_only_by_true():
    asks = {"exactly": {"deviceClassName": "gpu.intel.com", "adminAccess": True}}
    assert asks_admin_access(_claim("not a request", asks))  # a malformed request before it hides nothing
    assert asks_admin_access(_claim({"firstAvailable": ["odd", {"adminAccess": True}]}))
    assert not asks_admin_access(_claim({"firstAvailable": [{"adminAccess": False}, {"adminAccess": "true"}]}))
    assert not asks_admin_access(_claim({"exactly": {"adminAccess": False}}, {"firstAvailable": "not a list"}))
    template = Resource("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", "t", "urn:t",
                        {"spec": {"spec": {"devices": {"requests": [asks]}}}})
    assert asks_admin_access(template)
    assert not asks_admin_access(Resource("kubernetes:v1:ConfigMap", "m", "urn:m", {"spec": {"devices": asks}}))
