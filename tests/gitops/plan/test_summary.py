"""gitops/plan/summary.py: what an export changed, object by object, with the records, the gate and the next step,
on the terminal, in `--summary FILE` (Markdown for the pull request) and in `--json`; outside a Git work tree,
against OUT as it was (tests/gitops/test_export_second_pull_request.py: against the pull request's base)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, export, files_of, make_project, repo_copy, stack_text
from gitops.export import main as export_main

TAG = "imageTag: 1.42.2.10156-f737b826c"
BUMPED = "imageTag: 1.42.2.10200-0123abcd"


def _run(out: Path, project: Path, *flags: str) -> int:
    return export_main(["--stack", "prod", "--out", str(out), "--project-dir", str(project), *flags])


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """A flux-bootstrap repository with prod exported once."""
    out = repo_copy(tmp_path, "flux-bootstrap")
    assert export(out, "prod") == 0
    return out


def test_a_first_export_lists_every_object_it_creates_the_gate_and_the_next_step(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    capsys.readouterr()
    assert _run(out, make_project(tmp_path / "p", {"prod": stack_text("prod")})) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("prod: 20 to create")
    assert lines[start + 1] == "  + ConfigMap flux-system/cluster-vars"
    assert "  + Deployment plex/plex" in lines[start:]
    assert lines[start + 21:start + 24] == [
        "  records: clusters/prod/gpu-platform (DELIVERY.md, POST-MERGE.md, its suite, the index)",
        "  gate: plex on host-path",
        "  next: after the merge, the checks of clusters/prod/gpu-platform/POST-MERGE.md; then `make verify-nodes "
        "STACK=prod` and export again to move plex onto the GPU"]


def test_a_tag_bump_is_one_update_naming_the_field_in_the_terminal_the_markdown_and_the_json(exported, tmp_path,
                                                                                            capsys):
    project = make_project(tmp_path / "bumped", {"prod": stack_text("prod").replace(TAG, BUMPED)})
    summary = tmp_path / "pr.md"
    capsys.readouterr()
    assert _run(exported, project, "--summary", str(summary)) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("prod: 1 to update")
    assert lines[start + 1] == "  ~ Deployment plex/plex (spec.template.spec.containers[0].image)"
    assert summary.read_text() == (
        "### gpu-platform: `prod`\n\n1 to update.\n\n| change | object | file |\n| --- | --- | --- |\n"
        "| update | `Deployment plex/plex` | `components/prod/plex/deployment.plex.yaml` |\n\n"
        "Records: `clusters/prod/gpu-platform` (DELIVERY.md, POST-MERGE.md, its suite, the index).\n\n"
        "GPU gate: `plex` on **host-path**.\n\n"
        "Next: after the merge, the checks of clusters/prod/gpu-platform/POST-MERGE.md; then `make verify-nodes "
        "STACK=prod` and export again to move plex onto the GPU\n")
    project = make_project(tmp_path / "again", {"prod": stack_text("prod")})  # and back, as JSON
    assert _run(exported, project, "--json") == 0
    (stack,) = json.loads(capsys.readouterr().out)["stacks"]
    assert stack["summary"]["counts"] == {"create": 0, "update": 1, "replace": 0, "delete": 0}
    assert stack["summary"]["changes"] == [{
        "op": "update", "object": "Deployment plex/plex", "file": "components/prod/plex/deployment.plex.yaml",
        "fields": ["spec.template.spec.containers[0].image"]}]


def test_an_export_that_changes_nothing_says_so(exported, tmp_path, capsys):
    capsys.readouterr()
    assert _run(exported, make_project(tmp_path / "p", {"prod": stack_text("prod")})) == 0
    assert "prod: no object changes" in capsys.readouterr().out.splitlines()


def test_an_app_taken_out_of_the_stack_is_a_delete_of_each_of_its_objects(tmp_path, capsys):
    app = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    apps = app[app.index("  gpu-platform:apps:"):]
    apps = apps[:apps.index("\n  gpu-platform:", 1) + 1] if "\n  gpu-platform:" in apps[1:] else apps
    out = repo_copy(tmp_path, "flux-bootstrap")
    with_app = make_project(tmp_path / "with", {"prod": stack_text("prod").rstrip("\n") + "\n" + apps})
    assert _run(out, with_app, "--quiet") == 0
    capsys.readouterr()
    assert _run(out, make_project(tmp_path / "without", {"prod": stack_text("prod")})) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("prod: ") and "to delete" in line)
    deleted = [line for line in lines[start + 1:] if line.startswith("  - ")]
    assert lines[start] == f"prod: {len(deleted)} to delete" and "  - Deployment jellyfin/jellyfin" in deleted


def test_a_summary_file_inside_out_is_refused_and_nothing_is_written(exported, tmp_path, capsys):
    before = files_of(exported)
    project = make_project(tmp_path / "bumped", {"prod": stack_text("prod").replace(TAG, BUMPED)})
    capsys.readouterr()
    assert _run(exported, project, "--summary", str(exported / "pr.md")) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --summary {exported / 'pr.md'}: inside OUT ({exported}), so the pull request would carry it as a "
        "file; hint: write it outside the repository, e.g. build/pr-summary.md", "nothing was written"]
    assert files_of(exported) == before


def test_a_summary_file_in_a_folder_that_does_not_exist_is_refused_in_one_line_before_anything_is_written(
        exported, tmp_path, capsys):
    before = files_of(exported)
    missing = tmp_path / "no-such-folder" / "pr.md"
    project = make_project(tmp_path / "bumped", {"prod": stack_text("prod").replace(TAG, BUMPED)})
    capsys.readouterr()
    assert _run(exported, project, "--summary", str(missing)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --summary {missing}: not a file in an existing folder; hint: name a file whose folder exists, e.g. "
        "build/pr-summary.md after `mkdir -p build`", "nothing was written"]
    assert files_of(exported) == before
