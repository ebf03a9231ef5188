"""`make preview`: the plan against a real export, as golden files (`make golden` regenerates them), its JSON for CI,
the replacements Kubernetes forces, and that OUT is only read."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest

from builders import preview_capture, registration
from conftest import COMPLETE_PROD_EVIDENCE, STACKS, make_project, stack_text
from gitops.plan.diff import Change, immutable_reason
from gitops.plan.render import render_json, render_text, shown_pair
from gitops.preview import PreviewError, main, preview
from golden_files import assert_golden, exported_repository

PLEX_TAG = "imageTag: 1.42.2.10156-f737b826c"
# The four scripted edits of issue 10, each a variant of the prod stack file (plus evidence for the GPU switch).
VARIANTS = {
    "plex-tag-bump": (stack_text("prod").replace(PLEX_TAG, "imageTag: 1.42.3.10200-abcdef123"), None),
    "gpu-switch-after-evidence": (stack_text("prod"), COMPLETE_PROD_EVIDENCE),
    "pvc-storage-class": (stack_text("prod").replace("configStorageClass: local-path",
                                                     "configStorageClass: ceph-block"), None),
}


@pytest.fixture(scope="module")
def exported() -> Path:
    """Every stack exported into one repository, as `make export-all` leaves it (shared with the tree snapshots)."""
    return exported_repository()


@pytest.fixture(scope="module")
def plans(exported, tmp_path_factory):
    """The preview of each variant against the export of the shipped stack files (each program runs once)."""
    cache = {}

    def plan(name: str):
        if name not in cache:
            text, evidence = VARIANTS[name]
            evidence_files = {"prod": evidence} if evidence else None
            project = make_project(tmp_path_factory.mktemp(name), {"prod": text}, evidence_files)
            cache[name] = preview("prod", exported, project)
        return cache[name]

    return plan


def text_of(plan, out: Path) -> str:
    return render_text(plan).replace(str(out), "<OUT>")


def snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(out).as_posix(): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
            for p in sorted(out.rglob("*"))}


def test_no_change_prints_every_resource_unchanged(captures, exported):
    plan = preview_capture(captures["prod"], exported)
    unchanged = len(plan.steps)
    assert plan.summary_line() == f"Resources: 0 to create, 0 to update, 0 to replace, 0 to delete, {unchanged} " \
                                  "unchanged"
    assert not plan.outputs and plan.outputs_unchanged == len(captures["prod"].stack_outputs)
    assert_golden("preview/no-change.txt", text_of(plan, exported))


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_previews_unchanged_against_its_own_export(captures, exported, stack):
    summary = preview_capture(captures[stack], exported).summary()
    assert summary["same"] > 0 and summary["same"] == sum(summary.values())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_scripted_edit_matches_its_golden_plan(plans, exported, name):
    assert_golden(f"preview/{name}.txt", text_of(plans(name), exported))


def test_a_plex_tag_bump_is_one_field_of_one_update(plans):
    plan = plans("plex-tag-bump")
    (step,) = [s for s in plan.steps if s.op != "same"]
    assert (step.op, step.name) == ("update", "plex-deployment")
    assert [(c.path, c.new) for c in step.changes] == [
        ("spec.template.spec.containers[0].image", "docker.io/plexinc/pms-docker:1.42.3.10200-abcdef123")]


def test_the_gpu_switch_requests_the_device_drops_the_host_path_and_changes_the_outputs(plans):
    plan = plans("gpu-switch-after-evidence")
    (step,) = [s for s in plan.steps if s.op != "same"]
    paths = {c.path: c.kind for c in step.changes}
    assert paths['spec.template.spec.containers[0].resources.limits["gpu.intel.com/i915"]'] == "add"
    assert "delete" in {paths.get("spec.template.spec.volumes[3]"), paths.get("spec.template.spec.volumeMounts[3]")}
    assert {c.path: c.new for c in plan.outputs}["plexGpuAccess"] == "device-plugin"
    assert not plan.diagnostics, "the gate's warning is gone once the evidence is complete"


def test_a_storage_class_change_is_a_loud_replace_saying_what_flux_does_and_the_safe_path(plans, exported):
    plan = plans("pvc-storage-class")
    (step,) = [s for s in plan.steps if s.op != "same"]
    assert (step.op, step.name) == ("replace", "plex-plex-config")
    text = render_text(plan)
    assert "+- spec.storageClassName: \"local-path\" => \"ceph-block\"" in text
    assert "goes not Ready" in text and "flux-system/apps-wave-1" in text and "every file on the volume is lost" in text
    assert "Safe path:" in text
    assert plan.summary_line().startswith("Resources: 0 to create, 0 to update, 1 to replace, 0 to delete")


def test_json_for_ci_parses_and_carries_the_steps_diffs_and_summary(plans):
    doc = json.loads(render_json(plans("pvc-storage-class")))
    assert doc["changeSummary"] == {"create": 0, "update": 0, "replace": 1, "delete": 0,
                                    "same": len(doc["steps"]) - 1}
    (replace,) = [s for s in doc["steps"] if s["op"] == "replace"]
    assert replace["object"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "plex-config",
                                 "namespace": "plex"}
    assert replace["diffs"] == [{"path": "spec.storageClassName", "kind": "update", "old": "local-path",
                                 "new": "ceph-block", "replaceReason": replace["diffs"][0]["replaceReason"]}]
    assert replace["replaceReasons"] and replace["flux"]


def test_the_command_prints_json_for_ci_exits_0_and_never_writes(exported, capsys):
    before = snapshot(exported)
    assert main(["--stack", "dev", "--out", str(exported), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"].startswith("Resources: 0 to create, 0 to update, 0 to replace, 0 to delete, ")
    assert snapshot(exported) == before


def test_an_error_is_one_line_and_exit_2(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"prod": stack_text("prod").replace(PLEX_TAG, "imageTag: latest")})
    assert main(["--stack", "prod", "--out", str(tmp_path / "o"), "--project-dir", str(project)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("error: Pulumi.prod.yaml: gpu-platform:plex.imageTag: \"latest\": ") and "; hint: " in line
    assert not (tmp_path / "o").exists()


def test_a_tampered_index_is_refused_in_one_line(captures, tmp_path):
    index = tmp_path / "clusters" / "prod" / "gpu-platform" / "export-index.json"
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"files": {"../../etc/passwd": "0" * 64}}))
    with pytest.raises(PreviewError) as err:
        preview_capture(captures["prod"], tmp_path)
    (line,) = err.value.lines
    assert line.startswith(f"{index}: files.../../etc/passwd: ") and "hint: " in line


def test_a_fresh_out_creates_everything_and_every_output(captures, tmp_path):
    plan = preview_capture(captures["prod"], tmp_path / "nothing-here")
    assert {s.op for s in plan.steps} == {"create"}
    assert {c.path for c in plan.outputs} == set(captures["prod"].stack_outputs)
    assert not (tmp_path / "nothing-here").exists()


def test_an_object_the_program_no_longer_declares_is_a_delete_under_its_component(captures, exported):
    capture = captures["prod"]
    regs = [r for r in capture.registrations if r.name != "plex-allow-dns-egress"]
    plan = preview_capture(dataclasses.replace(capture, registrations=regs), exported)
    (step,) = [s for s in plan.steps if s.op != "same"]
    assert (step.op, step.name, step.type) == ("delete", "plex/allow-dns-egress",
                                               "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    plex = registration(capture, "kubernetes:apps/v1:Deployment", "plex-deployment")
    assert step.parent == plex.parent  # Plex's component
    (line,) = [line for line in render_text(plan).splitlines() if line.startswith(" -  ")]
    assert "─ kubernetes:networking.k8s.io/v1:NetworkPolicy" in line and line.endswith("plex/allow-dns-egress  delete")


def test_a_hand_edit_in_out_shows_as_a_change_and_a_warning(captures, exported, tmp_path):
    out = tmp_path / "repo"
    shutil.copytree(exported, out)
    service = out / "components" / "prod" / "plex" / "service.plex.yaml"
    service.write_text(service.read_text().replace("port: 32400", "port: 32401"))
    plan = preview_capture(captures["prod"], out)
    (step,) = [s for s in plan.steps if s.op != "same"]
    assert [(c.path, c.old, c.new) for c in step.changes] == [("spec.ports[0].port", 32401, 32400)]
    assert any("service.plex.yaml: edited by hand since the last export" in m for _, m in plan.diagnostics)


def test_colour_only_on_a_terminal(captures, exported, monkeypatch):
    from gitops.preview import _use_colour

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert _use_colour("auto", Tty()) and not _use_colour("auto", io.StringIO())
    assert _use_colour("always", io.StringIO()) and not _use_colour("never", Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _use_colour("auto", Tty())
    regs = [r for r in captures["prod"].registrations if r.name != "plex-service"]
    plan = preview_capture(dataclasses.replace(captures["prod"], registrations=regs), exported)
    assert "\033[31m" in render_text(plan, colour=True) and "\033[" not in render_text(plan)


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


def test_the_programs_warnings_are_diagnostics(captures, exported):
    plan = preview_capture(captures["prod"], exported)
    assert [level for level, _ in plan.diagnostics] == ["warning"]
    assert "Diagnostics:\n  pulumi:pulumi:Stack (gpu-platform-prod):\n    warning: plex: " in render_text(plan)


def test_an_index_from_before_previews_says_the_outputs_were_not_recorded(captures, exported, tmp_path):
    out = tmp_path / "repo"
    shutil.copytree(exported, out)
    index = out / "clusters" / "prod" / "gpu-platform" / "export-index.json"
    doc = json.loads(index.read_text())
    del doc["stackOutputs"]
    index.write_text(json.dumps(doc))
    plan = preview_capture(captures["prod"], out)
    assert not plan.outputs_recorded and not plan.outputs
    assert "(not compared: clusters/prod/gpu-platform/export-index.json records no outputs;" in render_text(plan)


def test_two_long_strings_that_differ_late_are_shown_from_the_difference():
    old, new = "x" * 300 + "old tail", "x" * 300 + "new tail"
    before, after = shown_pair(old, new)
    assert before != after and "old tail" in before and "new tail" in after
