"""The rollout in the user's own repository (a Git copy of examples/home-network-k3s/repo, both stacks), as the
README tells it: the first pull request (the plugin), evidence for prod and dev, the export that allows the switch
(the renderer's change printed in full; the records still say the hostPath), the renderer's change re-rendered, and
the export of the pull request that moves Plex (its Deployment named in the summary). Each stage's post-merge suite
asserts what the repository's objects hold at that stage; tests/e2e/test_post_merge_chainsaw_rollout.py runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from builders import HOME_EVIDENCE as EVIDENCE, export_prod, git, home_on_a_branch, home_project, render_the_switch

SUITE = "gpu-platform/{stack}/post-merge/chainsaw-test.yaml"
GPU_LIMIT = '(containers[0].resources.limits."gpu.intel.com/i915")'
HOST_PATH = "(contains(to_array(volumes[].hostPath.path), '/dev/dri'))"


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", message)


def plex_test(repo: Path, stack: str) -> dict:
    docs = yaml.safe_load_all((repo / SUITE.format(stack=stack)).read_text())
    return next(d for d in docs if d["metadata"]["name"] == "plex")


def asserted(test: dict) -> list[tuple[str, dict]]:
    """(operation, the Pod it asserts) of each step of a Test on the Plex pod."""
    return [(op, body["resource"]) for step in test["spec"]["steps"] for operation in step["try"]
            for op, body in operation.items() if body["resource"]["kind"] == "Pod"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return home_on_a_branch(tmp_path)


def test_the_rollout_from_the_plugin_to_plex_on_the_gpu_in_the_users_repository(repo, tmp_path, capsys):
    # Step 1: the plugin. Plex keeps its hostPath; the suite asserts it.
    code, _, _ = export_prod(capsys, repo, home_project(tmp_path / "step1"))
    assert code == 0
    assert [(op, pod.get("spec")) for op, pod in asserted(plex_test(repo, "prod"))] == [
        ("assert", None), ("assert", {HOST_PATH: True})]
    commit(repo, "the plugin")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "gpu-plugin")
    git(repo, "checkout", "-qb", "plex-on-the-gpu")

    # Step 4: evidence for both clusters. The export allows the switch and prints the renderer's change in full,
    # once for both stacks; the records say what the repository will run after this merge: still the hostPath.
    project = home_project(tmp_path / "step4", evidence=EVIDENCE)
    summary = tmp_path / "pr.md"
    code, out, err = export_prod(capsys, repo, project, "--summary", str(summary))
    assert code == 0
    warnings = [line for line in err.splitlines() if line.startswith("WARNING plex: evidence")]
    assert warnings == ["WARNING plex: evidence for prod, dev allows gpu.intel.com/i915, but the repository's plex "
                        "(apps/wave-0/plex.yaml) does not use it yet; the renderer's pull request makes "
                        "apps/wave-0/plex.yaml hold the diff below"]
    diff = err[err.index("  --- apps/wave-0/plex.yaml (repository)"):err.index("  next: change what renders")]
    diff_lines = [line.removeprefix("  ") for line in diff.splitlines()]
    assert [line for line in diff_lines if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "+              gpu.intel.com/i915: '1'", "-            - mountPath: /dev/dri", "-              name: dri",
        "-        - hostPath:", "-            path: /dev/dri", "-            type: Directory", "-          name: dri"]
    for stack in ("prod", "dev"):
        delivery = (repo / f"gpu-platform/{stack}/DELIVERY.md").read_text()
        assert "```diff\n" + "\n".join(diff_lines) + "\n```" in delivery
        checklist = (repo / f"gpu-platform/{stack}/POST-MERGE.md").read_text()
        assert "**host-path** after this merge; the gate allows **device-plugin**" in checklist
        assert [op for op, pod in asserted(plex_test(repo, stack)) if pod.get("spec") == {HOST_PATH: True}] == [
            "assert"]
    assert "gate: plex on host-path, device-plugin allowed (the renderer's change) [prod, dev]" in out
    assert "+              gpu.intel.com/i915: '1'" in summary.read_text()
    code, out, _ = export_prod(capsys, repo, project, "--json")
    (change,) = json.loads(out)["rendererChanges"]
    assert change["stacks"] == ["prod", "dev"] and change["diff"] == "\n".join(diff_lines) + "\n"

    # The renderer's change, re-rendered, is exactly the printed diff applied to the rendered file.
    expected = tmp_path / "patched.yaml"
    expected.write_bytes((repo / "apps/wave-0/plex.yaml").read_bytes())
    subprocess.run(["patch", "--quiet", str(expected)], input="\n".join(diff_lines) + "\n", text=True, check=True)
    render_the_switch(repo)
    assert (repo / "apps/wave-0/plex.yaml").read_text() == expected.read_text()

    # The pull request that moves Plex: exit 0, its Deployment in the summary with the limit added and the hostPath
    # gone; the suite asserts the limit and that no pod mounts the hostPath.
    code, out, err = export_prod(capsys, repo, project, "--summary", str(summary))
    assert code == 0 and "WARNING plex: evidence" not in err
    text = summary.read_text()
    assert "| update | `Deployment plex/plex` | `apps/wave-0/plex.yaml` | prod, dev |" in text
    assert "GPU access host-path -> device-plugin" in text
    assert "- `spec.template.spec.containers[0].resources.limits.gpu.intel.com/i915: (absent) -> '1'`" in text
    assert "- `spec.template.spec.volumes[3].hostPath.path: '/dev/dri' -> (absent)`" in text
    for stack in ("prod", "dev"):
        steps = asserted(plex_test(repo, stack))
        assert steps[0][0] == "assert" and steps[0][1]["spec"][GPU_LIMIT] == "1"
        assert steps[1] == ("error", {**steps[1][1], "spec": {HOST_PATH: True}})
        assert "**device-plugin**. evidence/" in (repo / f"gpu-platform/{stack}/POST-MERGE.md").read_text()


def test_an_export_into_a_git_work_tree_prints_every_new_and_changed_file_and_stages_nothing(repo, tmp_path, capsys):
    code, out, _ = export_prod(capsys, repo, home_project(tmp_path / "p"))
    assert code == 0
    lines = out.splitlines()
    start = lines.index(f"the change in {repo} (not staged):")
    shown = lines[start + 1:lines.index(next(line for line in lines[start:] if line.startswith("  next: ")))]
    status = git(repo, "status", "--short", "--untracked-files=all").splitlines()
    assert [line.removeprefix("  ") for line in shown] == status
    assert "  ?? clusters/base/intel-gpu-plugin.yaml" in shown and "   M clusters/base/kustomization.yaml" in shown
    assert "  ?? platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml" in shown
    paths = " ".join(sorted(line[3:] for line in status))
    assert lines[start + 1 + len(shown)] == f"  next: `git -C {repo} add -- {paths}` (new files included), then " \
                                            "commit on your branch"
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_stage_adds_exactly_the_exports_paths(repo, tmp_path, capsys):
    (repo / "notes.txt").write_text("the user's own, not the export's\n")
    code, out, _ = export_prod(capsys, repo, home_project(tmp_path / "p"), "--stage")
    assert code == 0 and f"the change in {repo} (staged):" in out
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert "notes.txt" not in staged and "clusters/base/intel-gpu-plugin.yaml" in staged
    assert git(repo, "diff", "--name-only") == ""  # nothing of the export's left unstaged
    assert git(repo, "ls-files", "--others", "--exclude-standard").split() == ["notes.txt"]


def test_a_base_that_names_no_commit_is_refused_and_nothing_is_written(repo, tmp_path, capsys):
    code, _, err = export_prod(capsys, repo, home_project(tmp_path / "p"), "--base", "no-such-branch")
    assert code == 2
    assert err.splitlines() == [
        f"error: --base no-such-branch: no such commit in {repo}; hint: name a branch, tag or commit of OUT, or leave "
        "--base out for the merge-base of HEAD with the default branch", "nothing was written"]
    assert git(repo, "status", "--short") == ""
