"""gitops/preview.py's pieces, called directly: field diffs, how values are shown, what Kubernetes refuses to change
in place, what Flux then does, the plan from a program run and the repository, and the text and JSON renderings."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builders import capture_tree, cm, ks
from gitops.flux.inventory import ObjectId
from gitops.plan.diff import Change, diff, immutable_reason, join_path, quantity, shown
from gitops.plan.plan import (
    Plan,
    Step,
    _type_of,
    flux_consequences,
    make_plan,
    shown_object as shown_ref,
    step_object as object_ref,
)
from gitops.plan.render import render_json, render_text, shown_pair
from gitops.preview import PreviewError, _use_colour
from gitops.repo.current import Current, OwnershipError, _load_objects
from gitops.tree import Tree
from model.layout import Layout

ROOT = "urn:pulumi:dev::gpu-platform::pulumi:pulumi:Stack::gpu-platform-dev"
APP = "urn:pulumi:dev::gpu-platform::gpu-platform:components:GpuApp::plex"
QUIET = "urn:pulumi:dev::gpu-platform::gpu-platform:components:Quiet::quiet"


def tree_of(objects: list[Any]) -> Tree:
    """A tree of just these objects (stand-ins with the fields the plan reads; no files)."""
    layout = Layout(stack="dev", entry_dir="clusters/dev/gpu-platform", components_dir="components/dev",
                    bootstrap_path="./clusters/dev")
    return Tree(stack="dev", layout=layout, objects=objects)


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


def test_two_long_strings_differing_late_are_shown_from_just_before_the_difference():
    assert shown_pair("a" * 300 + "X", "a" * 300 + "Y") == ('"…' + "a" * 40 + 'X"', '"…' + "a" * 40 + 'Y"')
    assert shown_pair("ab", "ac") == ('"ab"', '"ac"')
    assert shown_pair(["a" * 300], ["a" * 300]) == (shown(["a" * 300]),) * 2


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


# --- the plan ------------------------------------------------------------------------------------------------------

def test_a_plan_counts_its_steps_by_operation_and_names_the_stack_resource():
    plan = Plan("dev", "gpu-platform", "/repo", None, steps=[
        Step(op, f"u{i}", "t", "n", ROOT) for i, op in enumerate(["create", "create", "update", "same", "delete"])])
    assert plan.root_urn == ROOT
    assert plan.summary() == {"create": 2, "update": 1, "replace": 0, "delete": 1, "same": 1}
    assert plan.summary_line() == "Resources: 2 to create, 1 to update, 0 to replace, 1 to delete, 1 unchanged"


def test_a_step_lists_the_reasons_of_its_changes_that_need_a_replace():
    step = Step("replace", "u", "t", "n", ROOT, changes=[Change("a", "update", replace="why"), Change("b", "add")])
    assert step.replace_reasons == ["a: why"]


def test_a_preview_error_is_its_lines():
    error = PreviewError(["one", "two"])
    assert (error.lines, str(error)) == (["one", "two"], "one\ntwo")


def test_an_objects_reference_and_type():
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p", "namespace": "n"}}
    assert object_ref(manifest) == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "p", "namespace": "n"}
    assert object_ref({"metadata": "odd"}) == {"apiVersion": "", "kind": "", "name": ""}
    assert shown_ref(object_ref(manifest)) == "Deployment n/p"
    assert shown_ref({"kind": "Namespace", "name": "a\nb"}) == "Namespace a\\nb"
    assert _type_of({"apiVersion": "apps/v1", "kind": "Deployment"}) == "kubernetes:apps/v1:Deployment"
    assert _type_of({"apiVersion": "v1", "kind": "Service"}) == "kubernetes:core/v1:Service"


HINT = "hint: restore it from git (`git checkout -- f.yaml`), then run the preview again"


@pytest.mark.parametrize(("data", "line"), [
    (b"a: [", "/o/f.yaml: (root): not valid YAML (did not find expected node content); the export would refuse it "
              f"as a hand edit; {HINT}"),
    (b"a: &a [*a]\n", f"/o/f.yaml: (root): expands through its aliases beyond any manifest; {HINT}"),
    (("[" * 1100 + "]" * 1100).encode(), "/o/f.yaml: (root): not valid YAML (exceeded maximum nesting depth); the "
                                        f"export would refuse it as a hand edit; {HINT}"),
])
def test_an_owned_file_that_is_no_longer_yaml_is_one_error_line(data, line):
    with pytest.raises(OwnershipError) as caught:
        _load_objects(Path("/o"), "f.yaml", data)
    assert caught.value.lines == [line]


def test_an_owned_files_objects_are_its_documents_with_a_kind_and_metadata():
    data = b"- 1\n---\nkind: A\nmetadata: {}\n---\nkind: B\n---\nmetadata: {}\n---\nkind: C\nmetadata: x\n"
    assert _load_objects(Path("/o"), "f.yaml", data) == [{"kind": "A", "metadata": {}}]


# --- what Flux does with a replacement -----------------------------------------------------------------------------

def kustomization(name: str, path: str, namespace: str | None = "flux-system", **spec: Any) -> Any:
    return SimpleNamespace(manifest=ks(name, path, namespace, source_ref=False, **spec))


def replace_step(kind: str = "PersistentVolumeClaim", name: str = "plex-config") -> Step:
    return Step("replace", "u", "t", name, ROOT, object={"kind": kind, "name": name, "namespace": "plex"},
                changes=[Change("spec.storageClassName", "update", "a", "b", replace="immutable")])


def test_a_refused_change_says_which_kustomization_stops_whom_and_the_safe_path():
    tree = tree_of([
        kustomization("plex", "./components/dev/plex", wait=True),
        kustomization("apps", "./apps", dependsOn=[{"name": "plex"}, "odd", {"name": "plex", "namespace": "other"}]),
        kustomization("other", "./other", namespace="media", dependsOn=[{"name": "plex", "namespace": "flux-system"}]),
        SimpleNamespace(manifest={"apiVersion": "v1", "kind": "Kustomization", "metadata": {"name": "x"}}),
        SimpleNamespace(manifest={"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Other"})])
    assert flux_consequences(tree, "components/dev/plex", replace_step(), ("flux-system", "flux-system")) == [
        "Kubernetes will not change PersistentVolumeClaim plex/plex-config in place: spec.storageClassName: "
        "immutable.",
        "Flux: the server-side apply fails (field is immutable), so Kustomization flux-system/plex goes not Ready "
        "and with wait: true it holds back its dependents (flux-system/apps, media/other); the change never lands.",
        "`force: true` on that Kustomization would delete and recreate the object: every file on the volume is lost.",
        "Safe path: create a claim under a new name with the new spec, copy the data into it (a one-off Job mounting "
        "both), point the workload at it, then remove the old claim; or revert this change."]


def test_without_wait_the_dependents_wait_and_without_dependents_nothing_does():
    tree = tree_of([kustomization("plex", "components/dev/plex", namespace=None),
                                    kustomization("apps", "./apps", dependsOn=[{"name": "plex"}])])
    lines = flux_consequences(tree, "components/dev/plex", replace_step("Deployment", "plex"), ("flux-system", "x"))
    assert lines[1] == ("Flux: the server-side apply fails (field is immutable), so Kustomization flux-system/plex "
                        "goes not Ready and its dependents (flux-system/apps) wait for it; the change never lands.")
    assert lines[2] == "`force: true` on that Kustomization would delete and recreate the object (the workload " \
                       "restarts from scratch)."
    assert lines[3] == ("Safe path: give the object a new name (a new object; with prune: true Flux removes the old "
                        "one), or delete it by hand once in a maintenance window so the next reconcile creates it.")
    alone = tree_of([kustomization("plex", "./components/dev/plex", wait=True)])
    lines = flux_consequences(alone, "components/dev/plex", replace_step("Service", "plex"), ("flux-system", "x"))
    assert "goes not Ready and nothing depends on it;" in lines[1]
    assert lines[2].endswith("would delete and recreate the object.")
    assert lines[3].startswith("Safe path: leave clusterIP out and keep the allocated one")


def test_an_object_no_exported_kustomization_applies_is_the_bootstraps():
    step = Step("replace", "u", "t", "job", ROOT, changes=[Change("spec.template", "update", replace="why")])
    lines = flux_consequences(tree_of([]), "elsewhere", step, ("flux-system", "boot"))
    assert lines[0] == "Kubernetes will not change  job in place: spec.template: why."
    assert lines[1] == ("Flux: the server-side apply fails (field is immutable), so Kustomization flux-system/boot "
                        "goes not Ready and with wait: true it holds back its dependents (every other Kustomization); "
                        "the change never lands.")
    job = replace_step("Job", "migrate")
    assert flux_consequences(tree_of([]), "x", job, ("a", "b"))[3].startswith(
        "Safe path: Jobs run once: give the changed Job a new name")


# --- the plan from a run and the repository ------------------------------------------------------------------------

def registration(urn: str, name: str, parent: str, custom: bool = True, type_: str = "t") -> Any:
    return SimpleNamespace(urn=urn, name=name, parent=parent, custom=custom, type=type_)


def capture(registrations: list[Any], outputs: dict[str, Any], logs: tuple[tuple[str, str], ...] = ()) -> Any:
    by = {r.urn: r for r in registrations}
    return SimpleNamespace(stack="dev", registrations=registrations, stack_outputs=outputs, logs=list(logs),
                           by_urn=lambda: by)


def exported(path: str, manifest: dict[str, Any], reg: Any) -> Any:
    return SimpleNamespace(path=path, manifest=manifest, registration=reg)


def pvc(storage_class: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "plex"},
            "spec": {"storageClassName": storage_class}}


def test_the_plan_compares_each_exported_object_with_the_one_in_the_repository():
    app = registration(APP, "plex", ROOT, custom=False, type_="gpu-platform:components:GpuApp")
    orphan = registration(QUIET, "quiet", "urn:gone", custom=False)
    regs = [app, orphan] + [registration(f"{APP}$k::{n}", n, APP) for n in ("same", "changed", "new", "claim")]
    regs.append(registration("urn:x::loose", "loose", "urn:unknown"))
    tree = tree_of([
        exported("components/dev/plex/same.yaml", cm("same", "plex", a="1"), regs[2]),
        exported("components/dev/plex/changed.yaml", cm("changed", "plex", a="2"), regs[3]),
        exported("components/dev/plex/new.yaml", cm("new", "plex", empty_data=True), regs[4]),
        exported("components/dev/plex/claim.yaml", pvc("b"), regs[5]),
        exported("loose/loose.yaml", cm("loose", "plex", empty_data=True), regs[6])])
    current = Current(index="clusters/dev/gpu-platform/.gitops-export.json", objects={
        ObjectId("", "ConfigMap", "plex", "same"): ("components/dev/plex/same.yaml", cm("same", "plex", a="1")),
        ObjectId("", "ConfigMap", "plex", "changed"): ("components/dev/plex/changed.yaml",
                                                       cm("changed", "plex", a="1")),
        ObjectId("", "PersistentVolumeClaim", "plex", "c"): ("components/dev/plex/claim.yaml", pvc("a")),
        ObjectId("", "ConfigMap", "plex", "gone"): ("components/dev/plex/gone.yaml",
                                                    cm("gone", "plex", empty_data=True)),
        ObjectId("", "Namespace", "", "old"): ("elsewhere/ns.yaml", {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": "old"}})},
        outputs={"a": 1, "b": {"x": 1}, "c": 3}, notes=["hand edit"])
    run = capture(regs, {"a": 1, "b": {"x": 2}, "d": 4, "fluxGraph": {"bootstrap": {"namespace": "fs", "name": "b"}}},
                  logs=(("info", "hello"), ("warning", "careful"), ("error", "bad")))
    run.stack_outputs["c"] = 3
    plan = make_plan(run, tree, current, "/repo", bootstrap=("fs", "b"))
    assert (plan.stack, plan.project, plan.out, plan.index) == ("dev", "gpu-platform", "/repo", current.index)
    assert [(s.urn, s.parent) for s in plan.components] == [(APP, ROOT), (QUIET, ROOT)]
    assert [(s.op, s.name, s.parent, s.file) for s in plan.steps] == [
        ("same", "same", APP, "components/dev/plex/same.yaml"),
        ("update", "changed", APP, "components/dev/plex/changed.yaml"),
        ("create", "new", APP, "components/dev/plex/new.yaml"),
        ("replace", "claim", APP, "components/dev/plex/claim.yaml"),
        ("create", "loose", ROOT, "loose/loose.yaml"),
        ("delete", "plex/gone", APP, "components/dev/plex/gone.yaml"),
        ("delete", "old", ROOT, "elsewhere/ns.yaml")]
    assert plan.steps[6].urn == f"{ROOT}::kubernetes:core/v1:Namespace::old"
    assert plan.steps[5].urn == f"{APP}::kubernetes:core/v1:ConfigMap::plex/gone"
    assert plan.steps[5].object == {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "namespace": "plex"}
    assert [(c.path, c.kind, c.old, c.new) for c in plan.steps[1].changes] == [("data.a", "update", "1", "2")]
    assert plan.steps[3].replace_reasons == [
        "spec.storageClassName: a bound claim's spec is immutable except a storage increase"]
    assert "Kustomization fs/b goes not Ready" in plan.steps[3].flux[1]  # no exported Kustomization: the bootstrap's
    assert plan.steps[0].flux == plan.steps[1].flux == []
    assert [(c.path, c.kind) for c in plan.outputs] == [("b.x", "update"), ("d", "add"), ("fluxGraph", "add")]
    assert plan.outputs_unchanged == 2 and plan.outputs_recorded
    # info passes too: the DRA route says there which step the stack is at and what the next needs
    assert plan.diagnostics == [("info", "hello"), ("warning", "careful"), ("error", "bad"), ("warning", "hand edit")]


def test_a_first_preview_creates_everything_and_every_output():
    reg = registration("urn:pulumi:dev::gpu-platform::t::x", "x", ROOT)
    tree = tree_of([exported("a/x.yaml", cm("x", "plex", empty_data=True), reg)])
    plan = make_plan(capture([reg], {"b": 2, "a": 1}), tree, Current(index=None), "/repo")
    assert [s.op for s in plan.steps] == ["create"] and plan.project == "gpu-platform"
    assert [(c.path, c.kind, c.new) for c in plan.outputs] == [("a", "add", 1), ("b", "add", 2)]
    assert plan.outputs_recorded and plan.outputs_unchanged == 0
    plan = make_plan(capture([], {"a": 1}), tree_of([]), Current(index="i.json"), "/repo")
    assert plan.outputs == [] and not plan.outputs_recorded and plan.project == "project"


# --- rendering -----------------------------------------------------------------------------------------------------

def sample_plan(index: str | None = "clusters/dev/gpu-platform/.gitops-export.json") -> Plan:
    plan = Plan(stack="dev", project="gpu-platform", out="/repo", index=index)
    plan.components = [Step("same", APP, "gpu-platform:components:GpuApp", "plex", ROOT),
                       Step("same", QUIET, "gpu-platform:components:Quiet", "quiet", ROOT)]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "plex", "namespace": "plex"}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "plex-config", "namespace": "plex"}
    plan.steps = [
        Step("same", APP + "$ns", "kubernetes:core/v1:Namespace", "plex-namespace", APP, "c/plex/ns.yaml",
             {"apiVersion": "v1", "kind": "Namespace", "name": "plex"}),
        Step("same", QUIET + "$cm", "kubernetes:core/v1:ConfigMap", "quiet-cm", QUIET, "c/quiet/cm.yaml",
             {"apiVersion": "v1", "kind": "ConfigMap", "name": "q"}),
        Step("update", APP + "$dep", "kubernetes:apps/v1:Deployment", "plex-deployment", APP, "c/plex/deployment.yaml",
             dep, [Change("spec.template.spec.containers[0].image", "update", "plex:1", "plex:2"),
                   Change("metadata.labels.x", "add", new="y"), Change("metadata.labels.z", "delete", old="w")]),
        Step("replace", APP + "$pvc", "kubernetes:core/v1:PersistentVolumeClaim", "plex-config", APP, "c/plex/pvc.yaml",
             claim, [Change("spec.storageClassName", "update", "a", "b", replace="immutable")], flux=["one", "two"]),
        Step("create", ROOT + "$new", "kubernetes:v1:ConfigMap", "new", ROOT, "x.yaml",
             {"apiVersion": "v1", "kind": "ConfigMap", "name": "new", "namespace": "n"}),
        Step("delete", ROOT + "$old", "kubernetes:v1:ConfigMap", "n/old", ROOT, "y.yaml",
             {"apiVersion": "v1", "kind": "ConfigMap", "name": "old", "namespace": "n"}),
    ]
    plan.outputs = [Change("plexGpuAccess", "update", "host-path", "device-plugin")]
    plan.outputs_unchanged = 3
    plan.diagnostics = [("warning", "careful"), ("error", "bad"), ("warning", "again")]
    return plan


EXPECTED_TEXT = """\
Previewing update (dev): the export compared with the tree the last export left in /repo \
(clusters/dev/gpu-platform/.gitops-export.json)

     Type                                            Name              Plan
     pulumi:pulumi:Stack                             gpu-platform-dev  1 error, 2 warnings
     ├─ gpu-platform:components:GpuApp               plex
 ~   │  ├─ kubernetes:apps/v1:Deployment             plex-deployment   update
     │  │      ~ spec.template.spec.containers[0].image: "plex:1" => "plex:2"
     │  │      + metadata.labels.x: "y"
     │  │      - metadata.labels.z: "w"
 +-  │  ├─ kubernetes:core/v1:PersistentVolumeClaim  plex-config       replace
     │  │      +- spec.storageClassName: "a" => "b"
     │  │      !! one
     │  │      !! two
     │  └─ 1 unchanged
     ├─ gpu-platform:components:Quiet                quiet             1 unchanged
 -   ├─ kubernetes:v1:ConfigMap                      n/old             delete
 +   └─ kubernetes:v1:ConfigMap                      new               create

Outputs:
  ~ plexGpuAccess: "host-path" => "device-plugin"
    3 unchanged

Diagnostics:
  pulumi:pulumi:Stack (gpu-platform-dev):
    warning: careful
    error: bad
    warning: again

!! 1 to replace (PersistentVolumeClaim plex/plex-config): Kubernetes refuses these changes in place; see what Flux \
will do and the safe path above.

Resources: 1 to create, 1 to update, 1 to replace, 1 to delete, 2 unchanged
"""


def test_the_text_plan_is_the_resource_tree_with_diffs_outputs_diagnostics_and_the_summary():
    assert render_text(sample_plan()) == EXPECTED_TEXT


def test_colour_marks_each_operation_and_diff_line_and_nothing_else():
    text = render_text(sample_plan(), colour=True)
    assert " \033[33m~ \033[0m  │  ├─ kubernetes:apps/v1:Deployment             plex-deployment   " \
           "\033[33mupdate\033[0m\n" in text
    assert "     │  │      \033[1;35m+- spec.storageClassName: \"a\" => \"b\"\033[0m\n" in text
    assert "     │  │      \033[1;31m!! one\033[0m\n" in text
    assert "     │  │      \033[32m+ metadata.labels.x: \"y\"\033[0m\n" in text
    assert "     │  │      \033[31m- metadata.labels.z: \"w\"\033[0m\n" in text
    assert " \033[31m- \033[0m  ├─ kubernetes:v1:ConfigMap" in text and " \033[32m+ \033[0m  └─ " in text
    assert "    \033[33mwarning:\033[0m careful\n    \033[31merror:\033[0m bad\n" in text
    assert "\n\033[1;31m!! 1 to replace (PersistentVolumeClaim plex/plex-config)" in text
    assert "  \033[33m~ plexGpuAccess: \"host-path\" => \"device-plugin\"\033[0m\n" in text
    assert "\033[" not in text.split("\n")[3]  # an unchanged row is never painted
    assert text.replace("\033[33m", "").replace("\033[32m", "").replace("\033[31m", "").replace(
        "\033[1;35m", "").replace("\033[1;31m", "").replace("\033[0m", "") == EXPECTED_TEXT


def test_a_plan_with_nothing_to_do_folds_everything_and_says_so():
    plan = Plan(stack="dev", project="p", out="/new", index=None)
    plan.components = [Step("same", APP, "gpu-platform:components:GpuApp", "plex", ROOT.replace("gpu-platform", "p"))]
    plan.steps = [Step("same", f"{APP}$a", "kubernetes:v1:ConfigMap", "a", APP, "a.yaml", {"kind": "ConfigMap"}),
                  Step("same", f"{APP}$b", "kubernetes:v1:ConfigMap", "b", APP, "b.yaml", {"kind": "ConfigMap"})]
    plan.diagnostics = [("warning", "only one")]
    text = render_text(plan)
    assert text.startswith("Previewing update (dev): the export compared with /new, which holds no export of dev "
                           "(every object is new)\n")
    assert "     └─ gpu-platform:components:GpuApp  plex   2 unchanged\n" in text
    assert "     pulumi:pulumi:Stack                p-dev  1 warning\n" in text
    assert "Outputs:\n\nDiagnostics:" in text
    plan.index, plan.outputs_recorded = "i.json", False
    not_compared = "Outputs:\n    (not compared: i.json records no outputs; the next export records them)\n"
    assert not_compared in render_text(plan)
    assert "to replace" not in text.split("Resources:")[0]
    assert text.endswith("\nResources: 0 to create, 0 to update, 0 to replace, 0 to delete, 2 unchanged\n")


def test_the_json_plan_carries_steps_in_file_order_with_their_diffs_and_flux_lines():
    doc = json.loads(render_json(sample_plan()))
    assert [s["file"] for s in doc["steps"]] == ["c/plex/deployment.yaml", "c/plex/ns.yaml", "c/plex/pvc.yaml",
                                                 "c/quiet/cm.yaml", "x.yaml", "y.yaml"]
    deployment, namespace, claim = doc["steps"][:3]
    assert set(namespace) == {"op", "urn", "type", "name", "parent", "file", "object"}
    assert deployment["diffs"][1] == {"path": "metadata.labels.x", "kind": "add", "new": "y", "replaceReason": None}
    assert "replaceReasons" not in deployment
    assert (claim["replaceReasons"], claim["flux"]) == (["spec.storageClassName: immutable"], ["one", "two"])
    assert doc["outputs"] == {"recorded": True, "unchanged": 3, "changes": [
        {"path": "plexGpuAccess", "kind": "update", "old": "host-path", "new": "device-plugin", "replaceReason": None}]}
    assert doc["diagnostics"][1] == {"severity": "error", "message": "bad"}
    assert doc["changeSummary"] == {"create": 1, "update": 1, "replace": 1, "delete": 1, "same": 2}
    assert doc["summary"] == "Resources: 1 to create, 1 to update, 1 to replace, 1 to delete, 2 unchanged"
    assert (doc["stack"], doc["out"], doc["index"]) == ("dev", "/repo", "clusters/dev/gpu-platform/.gitops-export.json")
    assert render_json(sample_plan()).endswith("}\n") and "é" in render_json(Plan("é", "p", "/o", None))


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_is_on_for_a_terminal_unless_no_color_or_a_dumb_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert _use_colour("auto", Terminal()) and not _use_colour("auto", io.StringIO())
    assert _use_colour("always", io.StringIO()) and not _use_colour("never", Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _use_colour("auto", Terminal())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not _use_colour("auto", Terminal())


# --- the command, on a real program run and a real export (function-scoped: each test runs what it needs) ---------

def test_the_command_against_an_empty_out_creates_everything_and_writes_nothing(tmp_path):
    from gitops.preview import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["--stack", "dev", "--out", str(tmp_path / "out"), "--color", "never"], out, err) == 0
    text = out.getvalue()
    assert text.startswith(f"Previewing update (dev): the export compared with {tmp_path / 'out'}, which holds no "
                           "export of dev (every object is new)\n")
    assert text.endswith(" to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged\n")
    assert "\033[" not in text and err.getvalue() == ""
    assert not (tmp_path / "out").exists()


def test_the_command_prints_json_or_colour_when_asked(tmp_path):
    from gitops.preview import main

    out = io.StringIO()
    assert main(["--stack", "dev", "--out", str(tmp_path / "o"), "--json"], out, io.StringIO()) == 0
    doc = json.loads(out.getvalue())
    assert doc["stack"] == "dev" and doc["index"] is None and doc["changeSummary"]["create"] > 0
    coloured = io.StringIO()
    assert main(["--stack", "dev", "--out", str(tmp_path / "o"), "--color", "always"], coloured, io.StringIO()) == 0
    assert "\033[32m+ \033[0m" in coloured.getvalue()


def test_a_stack_the_program_refuses_is_one_error_line_per_problem_and_exit_2(tmp_path):
    from conftest import make_project, stack_text
    from gitops.preview import main

    text = stack_text("prod").replace("imageTag: 1.42.2.10156-f737b826c", "imageTag: latest")
    project = make_project(tmp_path / "p", {"prod": text})
    out, err = io.StringIO(), io.StringIO()
    assert main(["--stack", "prod", "--out", str(tmp_path / "o"), "--project-dir", str(project)], out, err) == 2
    (line,) = err.getvalue().splitlines()
    assert line.startswith('error: Pulumi.prod.yaml: gpu-platform:plex.imageTag: "latest": ') and out.getvalue() == ""
    assert main(["--stack", "nope", "--out", str(tmp_path / "o"), "--project-dir", str(project)], out, err) == 2


def test_an_out_that_is_a_file_is_one_error_line(tmp_path):
    from gitops.preview import preview

    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(PreviewError) as caught:
        preview("dev", tmp_path / "out")
    (line,) = caught.value.lines
    assert str(tmp_path / "out") in line


def exported_dev(tmp_path: Path) -> Path:
    from conftest import export

    out = tmp_path / "out"
    assert export(out, "dev") == 0
    return out


def test_after_an_export_everything_is_unchanged_and_the_outputs_are_compared(tmp_path):
    from gitops.preview import preview

    out = exported_dev(tmp_path)
    plan = preview("dev", out)
    assert {s.op for s in plan.steps} == {"same"} and plan.outputs == [] and plan.outputs_recorded
    assert plan.outputs_unchanged > 0 and plan.index is not None
    assert [level for level, _ in plan.diagnostics] == ["warning"]  # the program's own: Plex keeps the host path


def test_the_repository_as_it_is_now_hand_edits_missing_files_and_files_in_the_way(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program
    from gitops.repo.current import read_current

    out = exported_dev(tmp_path)
    tree = capture_tree(run_program("dev"))
    owned = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))
    edited, missing = out / owned[0], out / owned[1]
    edited.write_text(edited.read_text() + "# a comment is no edit\n")
    missing.unlink()
    current = read_current(out, tree)
    assert f"{owned[1]}: listed in the export index but missing; the export writes it again" in current.notes
    assert current.index == tree.index_path and isinstance(current.outputs, dict)
    keys = {rel for rel, _ in current.objects.values()}
    assert owned[1] not in keys and owned[0] in keys
    plan = preview_capture(run_program("dev"), out)
    assert ("warning", f"{owned[1]}: listed in the export index but missing; the export writes it again") in \
        plan.diagnostics
    assert {s.op for s in plan.steps if s.file == owned[1]} == {"create"}
    # a created object is shown with its resource's URN, as pulumi preview shows it
    assert [s.urn for s in plan.steps if s.file == owned[1]] == [o.registration.urn for o in tree.objects
                                                                  if o.path == owned[1]]


def test_a_hand_edit_of_an_owned_file_and_a_foreign_file_in_the_way_are_warnings(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    capture = run_program("dev")
    tree = capture_tree(capture)
    owned = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))
    edited = out / owned[0]
    edited.write_text(edited.read_text() + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n")
    index = json.loads((out / tree.index_path).read_text())
    del index["files"][owned[1]]
    (out / tree.index_path).write_text(json.dumps(index))
    (out / owned[1]).write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n")
    plan = preview_capture(capture, out)
    messages = [m for level, m in plan.diagnostics if level == "warning"]
    assert f"{owned[0]}: edited by hand since the last export: the export refuses to overwrite it (hint: put the " \
           "change into the program or stack config, then `git checkout` it)" in messages
    assert f"{owned[1]}: exists and was not written by this export: the export refuses to overwrite it (hint: move " \
           "it away or delete it)" in messages
    assert [s.name for s in plan.steps if s.op == "delete"] == ["extra"]


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_only_a_services_cluster_ip_is_fixed_not_another_kinds_field_of_that_name():
    assert reason("example.com", "Cluster", "spec.clusterIP") is None
    assert reason("", "Pod", "spec.clusterIP") is None
    assert reason("", "Service", "spec.clusterIP") is not None


def test_a_date_read_back_from_the_repository_against_the_same_text_is_shown_as_it_is():
    import datetime

    assert shown_pair(datetime.date(2024, 1, 1), "2024-01-01") == ('"2024-01-01"', '"2024-01-01"')


def test_only_flux_kustomizations_of_the_export_decide_who_applies_and_who_depends():
    tree = tree_of([
        SimpleNamespace(manifest={"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                  "metadata": {"name": "decoy"}, "spec": {"path": "./components/dev/plex"}}),
        SimpleNamespace(manifest={"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Other",
                                  "metadata": {"name": "odd", "namespace": "flux-system"},
                                  "spec": {"path": "./x", "dependsOn": [{"name": "plex"}]}}),
        kustomization("plex", "./components/dev/plex"),
        kustomization("unrelated", "./u", dependsOn=[{"name": "cilium"}]),
        kustomization("other-ns", "./o", namespace="media", dependsOn=[{"name": "plex"}])])
    lines = flux_consequences(tree, "components/dev/plex", replace_step(), ("flux-system", "boot"))
    assert lines[1] == ("Flux: the server-side apply fails (field is immutable), so Kustomization flux-system/plex "
                        "goes not Ready and nothing depends on it; the change never lands.")


def test_several_dependents_and_several_reasons_are_listed_in_full():
    tree = tree_of([kustomization("plex", "./components/dev/plex"),
                                    kustomization("b", "./b", dependsOn=[{"name": "plex"}]),
                                    kustomization("a", "./a", dependsOn=[{"name": "plex"}])])
    step = replace_step()
    step.changes.append(Change("spec.accessModes[0]", "update", "x", "y", replace="also immutable"))
    lines = flux_consequences(tree, "components/dev/plex", step, ("flux-system", "boot"))
    assert lines[0] == ("Kubernetes will not change PersistentVolumeClaim plex/plex-config in place: "
                        "spec.storageClassName: immutable; spec.accessModes[0]: also immutable.")
    assert "its dependents (flux-system/a, flux-system/b) wait for it;" in lines[1]


@pytest.mark.parametrize("kind", ["Deployment", "DaemonSet", "StatefulSet"])
def test_forcing_a_workloads_replacement_restarts_it_from_scratch(kind):
    lines = flux_consequences(tree_of([]), "x", replace_step(kind, "w"), ("a", "b"))
    assert lines[2] == ("`force: true` on that Kustomization would delete and recreate the object (the workload "
                        "restarts from scratch).")


def nested_plan(inner_op: str = "same") -> Plan:
    """Stack -> outer component -> inner component -> two objects, and an empty component beside the outer one."""
    plan = Plan(stack="dev", project="p", out="/o", index="i.json")
    root = plan.root_urn
    plan.components = [Step("same", "A", "c", "outer", root), Step("same", "B", "c", "inner", "A"),
                       Step("same", "E", "c", "empty", root)]
    plan.steps = [Step("same", "B$1", "k", "one", "B", "a.yaml", {"kind": "ConfigMap", "name": "one"}),
                  Step(inner_op, "B$2", "k", "two", "B", "b.yaml", {"kind": "ConfigMap", "name": "two"},
                       [Change("data.a", "update", "1", "2")] if inner_op == "update" else [])]
    return plan


def test_a_component_whose_whole_subtree_is_unchanged_is_one_folded_row_counting_its_objects():
    lines = render_text(nested_plan()).splitlines()
    assert lines[2:6] == ["     Type                 Name   Plan",
                          "     pulumi:pulumi:Stack  p-dev",
                          "     ├─ c                 empty  0 unchanged",
                          "     └─ c                 outer  2 unchanged"]


def test_a_change_deep_in_a_subtree_unfolds_every_component_above_it():
    lines = render_text(nested_plan("update")).splitlines()
    assert lines[4:10] == ["     ├─ c                 empty  0 unchanged",
                           "     └─ c                 outer",
                           "        └─ c              inner",
                           " ~         ├─ k           two    update",
                           "           │      ~ data.a: \"1\" => \"2\"",
                           "           └─ 1 unchanged"]


def test_a_fold_row_deeper_than_any_type_does_not_widen_the_type_column():
    plan = Plan(stack="dev", project="p", out="/o", index="i.json")
    parents = [plan.root_urn, "A", "B", "C", "D"]
    plan.components = [Step("same", urn, "c", f"n{i}", parents[i]) for i, urn in enumerate(parents[1:])]
    plan.steps = [Step("update", "D$1", "k", "x", "D", "x.yaml", {"kind": "ConfigMap", "name": "x"}),
                  Step("same", "D$2", "k", "y", "D", "y.yaml", {"kind": "ConfigMap", "name": "y"})]
    lines = render_text(plan).splitlines()
    assert lines[2] == "     Type                 Name   Plan"
    assert lines[-5] == "                 └─ 1 unchanged"


def test_the_json_plan_is_indented_by_two_and_shows_dates_as_text():
    import datetime

    plan = Plan(stack="dev", project="p", out="/o", index=None)
    plan.outputs = [Change("since", "update", datetime.date(2024, 1, 1), "2024-01-02")]
    text = render_json(plan)
    assert text.startswith('{\n  "stack": "dev",\n  "out": "/o",\n')
    assert json.loads(text)["outputs"]["changes"][0]["old"] == "2024-01-01"


def test_a_plan_of_an_empty_program_is_the_stack_row_alone():
    text = render_text(Plan(stack="dev", project="p", out="/o", index=None))
    assert text.splitlines()[2:4] == ["     Type                 Name   Plan", "     pulumi:pulumi:Stack  p-dev"]


def test_several_replacements_are_named_in_the_closing_warning():
    plan = Plan(stack="dev", project="p", out="/o", index=None)
    plan.steps = [Step("replace", f"u{i}", "t", n, plan.root_urn, f"{n}.yaml", {"kind": "Job", "name": n},
                       [Change("spec.template", "update", 1, 2, replace="why")]) for i, n in enumerate("ab")]
    assert "\n!! 2 to replace (Job a, Job b): Kubernetes refuses these changes in place; " in render_text(plan)


HELP = """\
usage: python -m gitops.preview [-h] --stack STACK [--out OUT] [--json] [--color {auto,always,never}] \
[--project-dir PROJECT_DIR]

Preview what an export would change, shaped like `pulumi preview --diff`, without the Pulumi CLI.

options:
  -h, --help            show this help message and exit
  --stack STACK         the stack to preview (Pulumi.<stack>.yaml)
  --out OUT             root of the GitOps tree to compare with (default: build/gitops); only read
  --json                one JSON document (for CI) instead of the text plan
  --color {auto,always,never}
                        colour the plan: auto (default) on a terminal only, unless NO_COLOR is set
  --project-dir PROJECT_DIR
                        folder holding Pulumi.yaml, __main__.py and the stack files (default: this project)
"""


def test_the_commands_help_names_every_option_and_its_default(capsys, monkeypatch):
    from gitops.preview import main

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0 and capsys.readouterr().out == HELP


@pytest.mark.parametrize(("argv", "problem"), [
    ([], "the following arguments are required: --stack"),
    (["--stack", "dev", "--color", "sometimes"], "argument --color: invalid choice: 'sometimes'")])
def test_the_command_refuses_a_missing_stack_or_an_unknown_colour_choice(capsys, argv, problem):
    from gitops.preview import main

    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2 and problem in capsys.readouterr().err


def test_the_command_compares_with_build_gitops_and_colours_a_terminal_by_default(tmp_path, monkeypatch):
    from gitops.engine.stacks import ROOT
    from gitops.preview import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal = Terminal()
    assert main(["--stack", "dev", "--project-dir", str(ROOT)], terminal, io.StringIO()) == 0
    text = terminal.getvalue()
    assert text.startswith("Previewing update (dev): the export compared with build/gitops, which holds no export "
                           "of dev (every object is new)\n")
    assert "\033[32m+ \033[0m" in text


# --- the repository as the preview reads it: every owned file, locks, an interrupted export -------------------------

def test_a_hand_edit_or_a_loss_of_any_owned_file_is_a_warning_as_the_export_refuses_or_rewrites_it(tmp_path):
    # kustomization.yaml and DELIVERY.md hold no cluster objects, but the export guards them like every owned file.
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    capture = run_program("dev")
    tree = capture_tree(capture)
    kustomizations = sorted(p for p in tree.files if p.endswith("/kustomization.yaml"))
    delivery = f"{tree.layout.entry_dir}/DELIVERY.md"  # written by the export beside the tree, from the walk
    assert (out / delivery).is_file()
    edited, lost = out / kustomizations[0], kustomizations[1]
    edited.write_text(edited.read_text() + "metadata:\n  name: by-hand\n")  # a kustomization with metadata
    (out / delivery).write_text((out / delivery).read_text() + "\na note by hand\n")
    (out / lost).unlink()
    plan = preview_capture(capture, out)
    warnings = [m for level, m in plan.diagnostics if level == "warning"]
    for rel in (kustomizations[0], delivery):
        assert f"{rel}: edited by hand since the last export: the export refuses to overwrite it (hint: put the " \
               "change into the program or stack config, then `git checkout` it)" in warnings
    assert f"{lost}: listed in the export index but missing; the export writes it again" in warnings
    # A kustomization is never one of the plan's objects, whatever it holds.
    assert [s for s in plan.steps if s.op != "same"] == []
    from conftest import export
    assert export(out, "dev") == 2  # the export agrees: it refuses the hand edits


def test_every_missing_owned_file_is_named_not_only_the_first(tmp_path):
    from gitops.engine.program import run_program
    from gitops.repo.current import read_current

    out = exported_dev(tmp_path)
    tree = capture_tree(run_program("dev"))
    gone = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))[:2]
    for rel in gone:
        (out / rel).unlink()
    notes = read_current(out, tree).notes
    assert [n for n in notes if "missing" in n] == [
        f"{rel}: listed in the export index but missing; the export writes it again" for rel in gone]


def test_an_owned_file_broken_in_the_repository_is_named_with_its_full_path(tmp_path):
    from gitops.engine.program import run_program
    from gitops.repo.current import read_current

    out = exported_dev(tmp_path)
    tree = capture_tree(run_program("dev"))
    rel = sorted(p for p in tree.files if p.endswith(".yaml") and not p.endswith("kustomization.yaml"))[0]
    (out / rel).write_bytes(b"a: [\n")
    with pytest.raises(OwnershipError) as caught:
        read_current(out, tree)
    assert caught.value.lines[0].startswith(f"{out / rel}: (root): not valid YAML (")


def test_an_export_interrupted_after_its_commit_point_is_a_warning_and_the_tree_as_it_is_is_compared(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    (out / ".gitops-export").mkdir()
    (out / ".gitops-export" / "dev.journal").write_text('{"write": [], "delete": []}')
    plan = preview_capture(run_program("dev"), out)
    assert ("warning", f"{out}: an export of dev was interrupted after its commit point; the next export completes "
                       "it (compared: the tree as it is now)") in plan.diagnostics
    assert {s.op for s in plan.steps} == {"same"}
    assert (out / ".gitops-export" / "dev.journal").exists()  # the preview only reads


def test_a_preview_reads_beside_another_reader_it_takes_a_shared_lock(tmp_path, monkeypatch):
    import fcntl
    import os

    import gitops.repo.writer
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    monkeypatch.setattr(gitops.repo.writer, "LOCK_WAIT_SECONDS", 0.5)  # an exclusive lock would give up, not hang
    reader = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(reader, fcntl.LOCK_SH)  # a `--check` or another preview reading the same OUT
        plan = preview_capture(run_program("dev"), out)
    finally:
        os.close(reader)
    assert {s.op for s in plan.steps} == {"same"}


def test_a_preview_of_an_out_that_does_not_exist_creates_nothing_on_the_way(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program

    plan = preview_capture(run_program("dev"), tmp_path / "a" / "b" / "out")
    assert plan.index is None and not (tmp_path / "a").exists()


def test_a_misspelt_lever_name_stops_the_preview_with_the_exports_own_line(tmp_path, monkeypatch):
    from gitops.engine import levers
    from gitops.preview import main

    monkeypatch.setenv(levers.ENV, "synfcs")
    out, err = io.StringIO(), io.StringIO()
    assert main(["--stack", "dev", "--out", str(tmp_path / "o")], out, err) == 2
    assert err.getvalue() == f"error: {levers.env_problem()}\n" and "synfcs" in err.getvalue()
    assert out.getvalue() == "" and not (tmp_path / "o").exists()


def test_a_list_item_added_carries_its_value_and_every_changed_item_of_a_list_is_listed():
    assert [(c.path, c.kind, c.new) for c in diff({"a": [1]}, {"a": [1, {"b": 2}]})] == [("a[1]", "add", {"b": 2})]
    assert [(c.path, c.old, c.new) for c in diff([{"a": 1}, {"a": 1}], [{"a": 2}, {"a": 3}])] == [
        ("[0].a", 1, 2), ("[1].a", 1, 3)]


def test_a_control_character_in_an_owned_file_is_one_not_valid_yaml_line():
    with pytest.raises(OwnershipError) as caught:
        _load_objects(Path("/o"), "f.yaml", b"a: \x07\n")
    assert caught.value.lines == [
        '/o/f.yaml: (root): not valid YAML (unacceptable character #x0007: control characters are not allowed in '
        f'\\"<byte string>\\", position 3); the export would refuse it as a hand edit; {HINT}']


def test_without_libyaml_a_nesting_too_deep_for_python_is_one_not_readable_line(monkeypatch):
    import yaml

    from model import safe_yaml

    # The pure-Python loader recurses per level; a content never parsed before (the parse cache keys on it).
    monkeypatch.setattr(safe_yaml, "_BASE_LOADER", yaml.SafeLoader)
    with pytest.raises(OwnershipError) as caught:
        _load_objects(Path("/o"), "f.yaml", ("[" * 1100 + "]" * 1100).encode())
    assert caught.value.lines == [f"/o/f.yaml: (root): not readable as YAML (RecursionError); {HINT}"]
