"""A change Flux cannot apply in place (gitops/pipeline.py `check_replacements`, over gitops/plan/plan.py
`replacements`): refused in one line per object naming the field, old -> new, what Flux would do and the safe path,
unless the stack file accepts the replacement (gitops.acceptReplacement), which DELIVERY.md and the terminal then
say; the preview exits 2 in the same case. In every layout that writes a claim (Plex exported, not the repository's)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from conftest import LAYOUT_REPOSITORIES, export, files_of, make_project, repo_copy
from gitops.export import main as export_main
from gitops.preview import main as preview_main
from model.config import OBJECT_REF_PATTERN

CLAIM = "PersistentVolumeClaim plex/plex-config"
# Plex is written by the export in these layouts (the shared base's repository delivers its own Plex).
LAYOUTS = ["split", "per-app", "flux-bootstrap's default"]
BOOTSTRAP = "flux-bootstrap's default"
# What a failing Plex Kustomization holds back in each layout's repository.
HELD = {"split": "nothing depends on it", "per-app": "nothing depends on it",
        "flux-bootstrap's default": "with wait: true it holds back its dependents (flux-system/apps-wave-1)"}


def _exported(tmp_path: Path, layout: str) -> tuple[Path, str, str]:
    """OUT after a first export of the layout's first stack: (OUT, stack, stack file text)."""
    repo, stacks, _ = LAYOUT_REPOSITORIES[layout]
    stack, text = next(iter(stacks.items()))
    out = repo_copy(tmp_path, repo)
    assert export(out, stack, project=make_project(tmp_path / "first", {stack: text})) == 0
    return out, stack, text


def _changed(text: str, old: str, new: str, accept: str | None = None) -> str:
    assert old in text
    text = text.replace(old, new, 1)
    if accept:
        section = "  gpu-platform:gitops:\n"
        if section not in text:
            text = text.replace("config:\n", f"config:\n{section}", 1)
        text = text.replace(section, f"{section}    acceptReplacement:\n      - {accept}\n", 1)
    return text


def _claim_file(out: Path) -> str:
    (found,) = [p.relative_to(out).as_posix() for p in out.rglob("persistentvolumeclaim.plex-config.yaml")]
    return found


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_claims_new_storage_class_is_refused_in_one_line_with_the_safe_path_and_nothing_is_written(
        tmp_path, capsys, layout):
    out, stack, text = _exported(tmp_path, layout)
    before = files_of(out)
    project = make_project(tmp_path / "changed", {stack: _changed(text, "configStorageClass: local-path",
                                                                  "configStorageClass: nfs-fast")})
    capsys.readouterr()
    assert export(out, stack, project=project) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: {out}/{_claim_file(out)}: {CLAIM}: spec.storageClassName: \"local-path\" -> \"nfs-fast\" (a bound "
        "claim's spec is immutable except a storage increase); the server-side apply fails (field is immutable), so "
        f"Kustomization flux-system/plex goes not Ready and {HELD[layout]}; hint: create a claim under a new name with "
        "the new spec, copy the data into it (a one-off Job mounting both), point the workload at it, then remove the "
        f"old claim; or revert this change; or, to replace it on purpose, add `{CLAIM}` to gitops.acceptReplacement in "
        f"Pulumi.{stack}.yaml"]
    assert files_of(out) == before


def test_a_claim_that_shrinks_is_refused_and_one_that_grows_is_an_update(tmp_path, capsys):
    out, stack, text = _exported(tmp_path, "flux-bootstrap's default")
    smaller = make_project(tmp_path / "smaller", {stack: _changed(text, "configSize: 10Gi", "configSize: 5Gi")})
    capsys.readouterr()
    assert export(out, stack, project=smaller) == 2
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")] == [
        f"error: {out}/{_claim_file(out)}: {CLAIM}: spec.resources.requests.storage: \"10Gi\" -> \"5Gi\" (a claim's "
        "storage request can grow, never shrink); the server-side apply fails (field is immutable), so Kustomization "
        f"flux-system/plex goes not Ready and {HELD[BOOTSTRAP]}; hint: create a claim under a new "
        "name with the new spec, copy the data into it (a one-off Job mounting both), point the workload at it, then "
        f"remove the old claim; or revert this change; or, to replace it on purpose, add `{CLAIM}` to "
        f"gitops.acceptReplacement in Pulumi.{stack}.yaml"]
    larger = make_project(tmp_path / "larger", {stack: _changed(text, "configSize: 10Gi", "configSize: 50Gi")})
    assert export(out, stack, project=larger) == 0


def test_an_accepted_replacement_is_written_and_delivery_md_and_the_terminal_warn_the_reviewer(tmp_path, capsys):
    out, stack, text = _exported(tmp_path, "flux-bootstrap's default")
    accepted = _changed(text, "configStorageClass: local-path", "configStorageClass: nfs-fast", accept=CLAIM)
    project = make_project(tmp_path / "accepted", {stack: accepted})
    capsys.readouterr()
    assert export_main(["--stack", stack, "--out", str(out), "--project-dir", str(project)]) == 0
    notice = (f"{CLAIM} is replaced on purpose (gitops.acceptReplacement): spec.storageClassName: \"local-path\" -> "
              "\"nfs-fast\" (a bound claim's spec is immutable except a storage increase); Flux's apply fails until "
              "the object is deleted and created again, by hand or with `force: true` (every file on the volume is "
              f"lost); remove the entry from Pulumi.{stack}.yaml after the merge")
    assert f"WARNING {stack}: {notice}" in capsys.readouterr().err.splitlines()
    assert f"> {notice}" in (out / f"clusters/{stack}/gpu-platform/DELIVERY.md").read_text().splitlines()
    assert "storageClassName: nfs-fast" in (out / _claim_file(out)).read_text()
    # The next export replaces nothing: the entry is to go, and the export says so.
    assert export_main(["--stack", stack, "--out", str(out), "--project-dir", str(project)]) == 0
    assert (f"WARNING {stack}: gitops.acceptReplacement: {CLAIM}: nothing of this export replaces it; remove the entry "
            f"from Pulumi.{stack}.yaml") in capsys.readouterr().err.splitlines()


def test_the_preview_exits_2_on_a_replacement_the_export_would_refuse_and_json_lists_it(tmp_path, capsys):
    out, stack, text = _exported(tmp_path, "flux-bootstrap's default")
    project = make_project(tmp_path / "changed", {stack: _changed(text, "configStorageClass: local-path",
                                                                  "configStorageClass: nfs-fast")})
    stdout, stderr = io.StringIO(), io.StringIO()
    assert preview_main(["--stack", stack, "--out", str(out), "--project-dir", str(project), "--json"],
                        stdout, stderr) == 2
    doc = json.loads(stdout.getvalue())
    assert doc["changeSummary"]["replace"] == 1
    (line,) = doc["refused"]
    assert line == (
        f"{out}/{_claim_file(out)}: {CLAIM}: spec.storageClassName: \"local-path\" -> \"nfs-fast\" (a bound claim's "
        "spec is immutable except a storage increase); the server-side apply fails (field is immutable), so "
        f"Kustomization flux-system/plex goes not Ready and {HELD[BOOTSTRAP]}; hint: create a claim under a new name "
        "with the new spec, copy the data into it (a one-off Job mounting both), point the workload at it, then remove "
        f"the old claim; or revert this change; or, to replace it on purpose, add `{CLAIM}` to "
        f"gitops.acceptReplacement in Pulumi.{stack}.yaml")
    assert stderr.getvalue().splitlines() == [f"error: {line}"]
    accepted = make_project(tmp_path / "accepted", {stack: _changed(
        text, "configStorageClass: local-path", "configStorageClass: nfs-fast", accept=CLAIM)})
    stdout = io.StringIO()
    assert preview_main(["--stack", stack, "--out", str(out), "--project-dir", str(accepted), "--json"],
                        stdout, io.StringIO()) == 0
    assert json.loads(stdout.getvalue())["refused"] == []


def test_an_accept_entry_that_names_no_object_is_a_config_error_naming_the_key(tmp_path, capsys):
    out, stack, text = _exported(tmp_path, "flux-bootstrap's default")
    project = make_project(tmp_path / "bad", {stack: _changed(text, "configSize: 10Gi", "configSize: 10Gi",
                                                              accept="plex-config")})
    capsys.readouterr()  # what the first export printed
    assert export(out, stack, project=project) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: Pulumi.{stack}.yaml: gpu-platform:gitops.acceptReplacement[0]: \"plex-config\": must be an object as "
        "`Kind namespace/name` (`Kind name` when cluster-scoped), e.g. PersistentVolumeClaim plex/plex-config "
        f"({OBJECT_REF_PATTERN}); hint: write a value of that form", "nothing was written"]
