"""gitops/preview.py, `make preview`: the plan against a real export, as golden files (`make golden` regenerates
them), its JSON for CI, the replacements Kubernetes forces, and that OUT is only read; the command's options, help and
one-line errors; the preview of an interrupted export, beside another reader, of an OUT that does not exist."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest

from builders import exported_dev, preview_capture, registration
from conftest import COMPLETE_PROD_EVIDENCE, EXAMPLE, STACKS, make_project, stack_text
from gitops.plan.render import render_json, render_text
from gitops.preview import PreviewError, _use_colour, main, preview
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
    assert main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(exported), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"].startswith("Resources: 0 to create, 0 to update, 0 to replace, 0 to delete, ")
    assert snapshot(exported) == before


def test_an_error_is_one_line_and_exit_2(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"prod": stack_text("prod").replace(PLEX_TAG, "imageTag: latest")})
    assert main(["--stack", "prod", "--out", str(tmp_path / "o"), "--project-dir", str(project)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: Pulumi.prod.yaml: gpu-platform:plex.imageTag: \"latest\": the tag 'latest' is not a pin; "
        "hint: use an exact version tag"]
    assert not (tmp_path / "o").exists()


def test_a_tampered_index_is_refused_in_one_line(captures, tmp_path):
    index = tmp_path / "clusters" / "prod" / "gpu-platform" / "export-index.json"
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"files": {"../../etc/passwd": "0" * 64}}))
    with pytest.raises(PreviewError) as err:
        preview_capture(captures["prod"], tmp_path)
    assert err.value.lines == [
        f"{index}: files.../../etc/passwd: not a relative, normalized path inside the repository; the export trusts "
        "no entry it could not have written; hint: restore it from git, or delete it together with the stack's "
        "exported folders"]


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


# --- the command's pieces, called directly -------------------------------------------------------------------------

def test_a_preview_error_is_its_lines():
    error = PreviewError(["one", "two"])
    assert (error.lines, str(error)) == (["one", "two"], "one\ntwo")


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
    assert main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(tmp_path / "out"), "--color", "never"],
                out, err) == 0
    text = out.getvalue()
    assert text.startswith(f"Previewing update (dev): the export compared with {tmp_path / 'out'}, which holds no "
                           "export of dev (every object is new)\n")
    assert text.endswith(" to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged\n")
    assert "\033[" not in text and err.getvalue() == ""
    assert not (tmp_path / "out").exists()


def test_the_command_prints_json_or_colour_when_asked(tmp_path):
    from gitops.preview import main

    out = io.StringIO()
    assert main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(tmp_path / "o"), "--json"], out,
                io.StringIO()) == 0
    doc = json.loads(out.getvalue())
    assert doc["stack"] == "dev" and doc["index"] is None and doc["changeSummary"]["create"] > 0
    coloured = io.StringIO()
    assert main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(tmp_path / "o"), "--color", "always"],
                coloured, io.StringIO()) == 0
    assert "\033[32m+ \033[0m" in coloured.getvalue()


def test_a_stack_the_program_refuses_is_one_error_line_per_problem_and_exit_2(tmp_path):
    from conftest import make_project, stack_text
    from gitops.preview import main

    text = stack_text("prod").replace("imageTag: 1.42.2.10156-f737b826c", "imageTag: latest")
    project = make_project(tmp_path / "p", {"prod": text})
    out, err = io.StringIO(), io.StringIO()
    assert main(["--stack", "prod", "--out", str(tmp_path / "o"), "--project-dir", str(project)], out, err) == 2
    assert err.getvalue().splitlines() == [
        "error: Pulumi.prod.yaml: gpu-platform:plex.imageTag: \"latest\": the tag 'latest' is not a pin; "
        "hint: use an exact version tag"]
    assert out.getvalue() == ""
    assert main(["--stack", "nope", "--out", str(tmp_path / "o"), "--project-dir", str(project)], out, err) == 2


def test_an_out_that_is_a_file_is_one_error_line(tmp_path):
    from gitops.preview import preview

    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(PreviewError) as caught:
        preview("dev", tmp_path / "out", EXAMPLE)
    assert caught.value.lines == [
        f"{tmp_path / 'out'}: not a folder; hint: give --out the root folder of the GitOps repository"]


def test_after_an_export_everything_is_unchanged_and_the_outputs_are_compared(tmp_path):
    from gitops.preview import preview

    out = exported_dev(tmp_path)
    plan = preview("dev", out, EXAMPLE)
    assert {s.op for s in plan.steps} == {"same"} and plan.outputs == [] and plan.outputs_recorded
    assert plan.outputs_unchanged > 0 and plan.index is not None
    assert [level for level, _ in plan.diagnostics] == ["warning"]  # the program's own: Plex keeps the host path


HELP = """\
usage: python -m gitops.preview [-h] --stack STACK [--out OUT] [--json] [--color {auto,always,never}] \
[--project-dir PROJECT_DIR]

Preview what an export would change, shaped like `pulumi preview --diff`, without the Pulumi CLI.

options:
  -h, --help            show this help message and exit
  --stack STACK         the stack to preview (Pulumi.<stack>.yaml)
  --out OUT             root of the GitOps tree to compare with (default: build/sample/<sample>); only read
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


def test_the_command_compares_with_the_last_sample_export_and_colours_a_terminal_by_default(tmp_path, monkeypatch):
    from gitops.preview import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal = Terminal()
    assert main(["--stack", "dev", "--project-dir", str(EXAMPLE)], terminal, io.StringIO()) == 0
    text = terminal.getvalue()
    assert text.startswith("Previewing update (dev): the export compared with build/sample/flux-bootstrap, which holds "
                           "no export of dev (every object is new)\n")
    assert "\033[32m+ \033[0m" in text


# --- the repository as the preview reads it: an interrupted export, locks, an OUT not there yet ----------------------

def test_an_export_interrupted_after_its_commit_point_is_a_warning_and_the_tree_as_it_is_is_compared(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    (out / ".gitops-export").mkdir()
    (out / ".gitops-export" / "dev.journal").write_text('{"write": [], "delete": []}')
    plan = preview_capture(run_program("dev", EXAMPLE), out)
    assert ("warning", f"{out}: an export of dev was interrupted after its commit point; the next export completes "
                       "it (compared: the tree as it is now)") in plan.diagnostics
    assert {s.op for s in plan.steps} == {"same"}
    assert (out / ".gitops-export" / "dev.journal").exists()  # the preview only reads


def test_a_preview_reads_beside_another_reader_it_takes_a_shared_lock(tmp_path, monkeypatch):
    import fcntl
    import os

    import gitops.repo.out_folder
    from builders import preview_capture
    from gitops.engine.program import run_program

    out = exported_dev(tmp_path)
    monkeypatch.setattr(gitops.repo.out_folder, "LOCK_WAIT_SECONDS", 0.5)  # an exclusive lock would give up, not hang
    reader = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(reader, fcntl.LOCK_SH)  # a `--check` or another preview reading the same OUT
        plan = preview_capture(run_program("dev", EXAMPLE), out)
    finally:
        os.close(reader)
    assert {s.op for s in plan.steps} == {"same"}


def test_a_preview_of_an_out_that_does_not_exist_creates_nothing_on_the_way(tmp_path):
    from builders import preview_capture
    from gitops.engine.program import run_program

    plan = preview_capture(run_program("dev", EXAMPLE), tmp_path / "a" / "b" / "out")
    assert plan.index is None and not (tmp_path / "a").exists()


def test_a_misspelt_optimization_name_stops_the_preview_with_the_exports_own_line(tmp_path, monkeypatch):
    from gitops.engine import optimizations
    from gitops.preview import main

    monkeypatch.setenv(optimizations.ENV, "synfcs")
    out, err = io.StringIO(), io.StringIO()
    assert main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(tmp_path / "o")], out, err) == 2
    assert err.getvalue() == f"error: {optimizations.env_problem()}\n" and "synfcs" in err.getvalue()
    assert out.getvalue() == "" and not (tmp_path / "o").exists()
