"""gitops/plan/plan.py, called directly: a plan's steps and summary, an object's reference and type, what Flux
does with a change Kubernetes refuses in place, and the plan made from a program run and the repository as it is."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from builders import APP_URN as APP, QUIET_URN as QUIET, STACK_URN as ROOT, cm, ks
from gitops.flux.inventory import ObjectId
from gitops.plan.diff import Change
from gitops.plan.plan import (
    Plan,
    Step,
    _type_of,
    flux_consequences,
    make_plan,
    shown_object as shown_ref,
    step_object as object_ref,
)
from gitops.repo.current import Current
from gitops.tree import Tree
from model.layout import SplitLayout


def tree_of(objects: list[Any]) -> Tree:
    """A tree of just these objects (stand-ins with the fields the plan reads; no files)."""
    layout = SplitLayout(stack="dev", entry_dir="clusters/dev/gpu-platform", components_dir="components/dev",
                    bootstrap_path="./clusters/dev")
    return Tree(stack="dev", layout=layout, objects=objects)


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


def test_an_objects_reference_and_type():
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p", "namespace": "n"}}
    assert object_ref(manifest) == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "p", "namespace": "n"}
    assert object_ref({"metadata": "odd"}) == {"apiVersion": "", "kind": "", "name": ""}
    assert shown_ref(object_ref(manifest)) == "Deployment n/p"
    assert shown_ref({"kind": "Namespace", "name": "a\nb"}) == "Namespace a\\nb"
    assert _type_of({"apiVersion": "apps/v1", "kind": "Deployment"}) == "kubernetes:apps/v1:Deployment"
    assert _type_of({"apiVersion": "v1", "kind": "Service"}) == "kubernetes:core/v1:Service"


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


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

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
