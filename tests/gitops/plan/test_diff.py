"""gitops/plan/diff.py, called directly: field diffs and their paths, how values are shown, Kubernetes quantities,
and what the API server refuses to change in place (the reason a change needs a replace)."""

from __future__ import annotations

from typing import Any

import pytest

from gitops.plan.diff import Change, diff, immutable_reason, join_path, quantity, shown

# --- diffs and how values are shown --------------------------------------------------------------------------------

def test_a_change_as_json_has_the_sides_it_has_and_its_replace_reason():
    assert Change("a", "add", new=1).as_json() == {"path": "a", "kind": "add", "new": 1, "replaceReason": None}
    assert Change("a", "delete", old=1).as_json() == {"path": "a", "kind": "delete", "old": 1, "replaceReason": None}
    assert Change("a", "update", 1, 2, "why").as_json() == {"path": "a", "kind": "update", "old": 1, "new": 2,
                                                            "replaceReason": "why"}


@pytest.mark.parametrize(("path", "key", "joined"), [
    ("", "spec", "spec"), ("spec", "replicas", "spec.replicas"), ("spec", 0, "spec[0]"), ("", 2, "[2]"),
    ("labels", "app.kubernetes.io/name", 'labels["app.kubernetes.io/name"]'), ("", "a b", '["a b"]'),
    ("x", "_ok9", "x._ok9"), ("x", "9no", 'x["9no"]'), ("x", 'q"\n', 'x["q\\"\\n"]'), ("x", 1.5, 'x["1.5"]')])
def test_a_field_path_is_dotted_with_brackets_for_indexes_and_keys_that_are_not_plain_names(path, key, joined):
    assert join_path(path, key) == joined


def test_a_diff_goes_key_by_key_in_order_and_index_by_index():
    old = {"b": 1, "a": {"x": [1, 2, 3], "gone": True}, 3: "n"}
    new = {"b": 2, "a": {"x": [1, 5], "new": None}, "c": [1]}
    assert [(c.path, c.kind, c.old, c.new) for c in diff(old, new)] == [
        ("[3]", "delete", "n", None),
        ("a.gone", "delete", True, None), ("a.new", "add", None, None),
        ("a.x[1]", "update", 2, 5), ("a.x[2]", "delete", 3, None),
        ("b", "update", 1, 2), ("c", "add", None, [1])]
    assert [(c.path, c.kind) for c in diff([1], [1, 2])] == [("[1]", "add")]


def test_a_value_that_changes_type_is_an_update_even_when_python_calls_it_equal():
    assert [(c.path, c.old, c.new) for c in diff({"a": True}, {"a": 1})] == [("a", True, 1)]
    assert diff({"a": 1.0}, {"a": 1}) != []
    assert diff({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "x"}]}) == []
    assert [(c.path, c.kind) for c in diff("a", "b")] == [("(root)", "update")]
    assert [(c.path, c.kind) for c in diff({"a": 1}, [1])] == [("(root)", "update")]


def test_a_value_is_shown_as_sorted_json_with_invisible_characters_escaped():
    assert shown({"b": 1, "a": "é\n\u2028"}) == '{"a": "é\\n\\u2028", "b": 1}'
    assert shown(None) == "null" and shown(float("nan")) == "NaN" and shown({1, 2}) in ('"{1, 2}"', '"{2, 1}"')


def test_a_value_that_is_not_json_is_shown_as_python_shows_it():
    loop: list = []
    loop.append(loop)
    assert shown(loop) == "[[...]]"


def test_a_long_value_is_cut_and_counted():
    assert shown("x" * 198) == '"' + "x" * 198 + '"'
    assert shown("x" * 199) == '"' + "x" * 199 + '…' + " (201 characters)"


@pytest.mark.parametrize(("value", "base"), [
    ("10Gi", 10 * 2**30), ("1.5Ki", 1536.0), ("500m", 0.5), ("2k", 2000.0), ("3", 3.0), (7, 7.0), (2.5, 2.5),
    ("1Mi", 2**20), ("1Ti", 2**40), ("1Pi", 2**50), ("1Ei", 2**60), ("1M", 1e6), ("1G", 1e9), ("1T", 1e12),
    ("1P", 1e15), ("1E", 1e18), ("10gi", None), ("-1Gi", None), ("Gi", None), ("1 Gi", None), ("10Gi\n", None),
    (None, None),
    (["1Gi"], None)])
def test_a_kubernetes_quantity_in_base_units(value, base):
    assert quantity(value) == base


# --- what Kubernetes refuses in place -----------------------------------------------------------------------------

def reason(group: str, kind: str, path: str, kind_of_change: str = "update", old: Any = None, new: Any = None,
           old_obj: dict | None = None, new_obj: dict | None = None) -> str | None:
    return immutable_reason(group, kind, Change(path, kind_of_change, old, new), old_obj or {}, new_obj or {})


@pytest.mark.parametrize(("args", "expected"), [
    (("", "PersistentVolumeClaim", "spec.resources.requests.storage", "update", "10Gi", "20Gi"), None),
    (("", "PersistentVolumeClaim", "spec.resources.requests.storage", "update", "10Gi", "10Gi"), None),
    (("", "PersistentVolumeClaim", "spec.resources.requests.storage", "update", "20Gi", "10Gi"),
     "a claim's storage request can grow, never shrink"),
    (("", "PersistentVolumeClaim", "spec.resources.requests.storage", "update", "odd", "10Gi"),
     "a claim's storage request can grow, never shrink"),
    (("", "PersistentVolumeClaim", "spec.resources.requests.storage", "update", "10Gi", "odd"),
     "a claim's storage request can grow, never shrink"),
    (("", "PersistentVolumeClaim", "spec.resources.requests.storage", "delete", "10Gi", None),
     "a bound claim's spec is immutable except a storage increase"),
    (("", "PersistentVolumeClaim", "spec.volumeAttributesClassName"), None),
    (("", "PersistentVolumeClaim", "spec.volumeAttributesClassName.x"), None),
    (("", "PersistentVolumeClaim", "spec.storageClassName"),
     "a bound claim's spec is immutable except a storage increase"),
    (("", "PersistentVolumeClaim", "spec"), "a bound claim's spec is immutable except a storage increase"),
    (("", "PersistentVolumeClaim", "metadata.labels.a"), None),
    (("", "PersistentVolumeClaim", "specx"), None),
    (("apps", "Deployment", "spec.selector.matchLabels.app"), "a Deployment's spec.selector is immutable (apps/v1)"),
    (("apps", "DaemonSet", "spec.selector"), "a DaemonSet's spec.selector is immutable (apps/v1)"),
    (("apps", "ReplicaSet", "spec.selector"), "a ReplicaSet's spec.selector is immutable (apps/v1)"),
    (("apps", "StatefulSet", "spec.selector"), "a StatefulSet's spec.selector is immutable (apps/v1)"),
    (("apps", "Deployment", "spec.template.spec.containers[0].image"), None),
    (("extensions", "Deployment", "spec.selector"), None),
    (("apps", "StatefulSet", "spec.volumeClaimTemplates[0].spec"),
     "a StatefulSet's spec.volumeClaimTemplates is immutable (only replicas, ordinals, template, updateStrategy, "
     "revisionHistoryLimit, persistentVolumeClaimRetentionPolicy, minReadySeconds change)"),
    (("apps", "StatefulSet", "spec.serviceName"),
     "a StatefulSet's spec.serviceName is immutable (only replicas, ordinals, template, updateStrategy, "
     "revisionHistoryLimit, persistentVolumeClaimRetentionPolicy, minReadySeconds change)"),
    (("apps", "StatefulSet", "spec"),
     "a StatefulSet's spec.* is immutable (only replicas, ordinals, template, updateStrategy, "
     "revisionHistoryLimit, persistentVolumeClaimRetentionPolicy, minReadySeconds change)"),
    (("apps", "StatefulSet", "spec.template.spec.containers[0].image"), None),
    (("apps", "StatefulSet", "spec.replicas"), None),
    (("apps", "StatefulSet", "spec.minReadySeconds"), None),
    (("batch", "Job", "spec.template.spec.containers[0].image"), "a Job's pod template and selector are immutable"),
    (("batch", "Job", "spec.selector"), "a Job's pod template and selector are immutable"),
    (("batch", "Job", "spec.completionMode"), "a Job's pod template and selector are immutable"),
    (("batch", "Job", "spec.backoffLimit"), None),
    (("", "Service", "spec.clusterIP"),
     "a Service's clusterIP cannot change once allocated (only by switching to or from ExternalName)"),
    (("", "Service", "spec.clusterIPs[0]", "add"),
     "a Service's clusterIP cannot change once allocated (only by switching to or from ExternalName)"),
    (("", "Service", "spec.clusterIP", "delete"), None),
    (("", "Service", "spec.ipFamilies[0]"), "a Service's primary IP family cannot change"),
    (("", "Service", "spec.ipFamilies[1]", "add"), None),
    (("", "Service", "spec.ipFamilies[0]", "add"), None),
    (("", "Service", "spec.ports[0].port"), None),
    (("", "Service", "metadata.annotations.a"), None),
    (("rbac.authorization.k8s.io", "RoleBinding", "roleRef.name"), "a RoleBinding's roleRef is immutable"),
    (("rbac.authorization.k8s.io", "ClusterRoleBinding", "roleRef"), "a ClusterRoleBinding's roleRef is immutable"),
    (("rbac.authorization.k8s.io", "RoleBinding", "subjects[0].name"), None),
    (("rbac.authorization.k8s.io", "Role", "roleRef"), None),
])
def test_what_the_api_server_refuses_to_change_in_place(args, expected):
    assert reason(*args) == expected


def test_a_services_cluster_ip_may_go_with_a_switch_to_or_from_external_name():
    for old_type, new_type in (("ExternalName", "ClusterIP"), ("ClusterIP", "ExternalName")):
        assert reason("", "Service", "spec.clusterIP", "add", None, "10.0.0.1", {"spec": {"type": old_type}},
                      {"spec": {"type": new_type}}) is None


def test_a_load_balancer_class_is_fixed_only_while_the_service_stays_a_load_balancer():
    lb = {"spec": {"type": "LoadBalancer"}}
    assert reason("", "Service", "spec.loadBalancerClass", "update", "a", "b", lb, lb) == (
        "a LoadBalancer Service's loadBalancerClass is immutable")
    assert reason("", "Service", "spec.loadBalancerClass", "update", "a", "b", lb, {"spec": {"type": "ClusterIP"}}) \
        is None
    assert reason("", "Service", "spec.loadBalancerClass", "update", "a", "b", {"spec": {"type": "ClusterIP"}}, lb) \
        is None
    assert reason("", "Service", "spec.loadBalancerClass", "update", "a", "b", {"spec": "odd"}, lb) is None


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_an_immutable_config_map_or_secret_keeps_its_data(kind):
    frozen = {"immutable": True}
    for path in ("data.a", "binaryData.b", "stringData.c", "immutable"):
        assert reason("", kind, path, "update", 1, 2, frozen) == f"the {kind} is marked immutable: true"
    assert reason("", kind, "metadata.labels.a", "update", 1, 2, frozen) is None
    assert reason("", kind, "data.a", "update", 1, 2, {"immutable": "true"}) is None
    assert reason("", kind, "data.a", "update", 1, 2, {}) is None
    assert reason("apps", kind, "data.a", "update", 1, 2, frozen) is None


def _change(path: str, old, new, kind: str = "update") -> Change:
    return Change(path, kind, old, new)


@pytest.mark.parametrize("group, kind, path, old, new, replaced", [
    ("", "PersistentVolumeClaim", "spec.resources.requests.storage", "10Gi", "20Gi", False),
    ("", "PersistentVolumeClaim", "spec.resources.requests.storage", "1Ti", "500Gi", True),
    ("", "PersistentVolumeClaim", "spec.accessModes[0]", "ReadWriteOnce", "ReadWriteMany", True),
    ("", "PersistentVolumeClaim", "metadata.labels.app", "a", "b", False),
    ("apps", "Deployment", 'spec.selector.matchLabels["app.kubernetes.io/name"]', "a", "b", True),
    ("apps", "DaemonSet", "spec.selector.matchLabels.app", "a", "b", True),
    ("apps", "Deployment", "spec.template.spec.containers[0].image", "a:1", "a:2", False),
    ("apps", "StatefulSet", "spec.serviceName", "a", "b", True),
    ("apps", "StatefulSet", "spec.replicas", 1, 2, False),
    ("batch", "Job", "spec.template.spec.containers[0].image", "a:1", "a:2", True),
    ("", "Service", "spec.clusterIP", "10.0.0.1", "10.0.0.2", True),
    ("", "Service", "spec.ports[0].port", 80, 81, False),
    ("rbac.authorization.k8s.io", "RoleBinding", "roleRef.name", "a", "b", True),
])
def test_what_kubernetes_refuses_in_place_is_a_replace(group, kind, path, old, new, replaced):
    reason = immutable_reason(group, kind, _change(path, old, new), {"spec": {"type": "ClusterIP"}},
                              {"spec": {"type": "ClusterIP"}})
    assert (reason is not None) == replaced, reason


def test_an_immutable_configmap_cannot_change_its_data_in_place():
    old = {"immutable": True, "data": {"a": "1"}}
    assert immutable_reason("", "ConfigMap", _change("data.a", "1", "2"), old, {**old, "data": {"a": "2"}})
    assert immutable_reason("", "ConfigMap", _change("data.a", "1", "2"), {"data": {"a": "1"}}, {}) is None


def test_switching_a_service_to_external_name_may_drop_its_cluster_ip():
    old, new = {"spec": {"type": "ClusterIP"}}, {"spec": {"type": "ExternalName"}}
    assert immutable_reason("", "Service", _change("spec.clusterIP", "10.0.0.1", ""), old, new) is None


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_only_a_services_cluster_ip_is_fixed_not_another_kinds_field_of_that_name():
    assert reason("example.com", "Cluster", "spec.clusterIP") is None
    assert reason("", "Pod", "spec.clusterIP") is None
    assert reason("", "Service", "spec.clusterIP") is not None


def test_a_list_item_added_carries_its_value_and_every_changed_item_of_a_list_is_listed():
    assert [(c.path, c.kind, c.new) for c in diff({"a": [1]}, {"a": [1, {"b": 2}]})] == [("a[1]", "add", {"b": 2})]
    assert [(c.path, c.old, c.new) for c in diff([{"a": 1}, {"a": 1}], [{"a": 2}, {"a": 3}])] == [
        ("[0].a", 1, 2), ("[1].a", 1, 3)]
