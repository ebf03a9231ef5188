"""gitops/sample.py: `make export` without OUT exports the shipped stacks into a fresh copy of the sample of the
user's repository (examples/home-network-k3s/repo) and ends with the change, as the pull request would hold it."""

from __future__ import annotations

import subprocess
import sys

from builders import HOME_PULL_REQUEST, HOME_RECORDS, git_status, home_repo
from conftest import EXAMPLE, ROOT, export
from gitops import sample

SAMPLE_OUT = ROOT / "build" / "sample" / "home-network-k3s"


def test_the_export_without_out_changes_the_sample_exactly_as_the_plugins_pull_request_did():
    result = subprocess.run([sys.executable, "-m", "gitops.export", "--stack", "prod"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # the shipped stacks share the base: prod brings dev along, and their records are the one folder added (the
    # summary marked the new files intent-to-add so that `git diff` shows them: unmark them to read the status)
    subprocess.run(["git", "-C", str(SAMPLE_OUT), "reset", "-q"], check=True)
    assert git_status(SAMPLE_OUT) == HOME_PULL_REQUEST | {HOME_RECORDS}
    tail = result.stdout.splitlines()[-17:]
    assert tail[0] == ("the change in build/sample/home-network-k3s, a fresh copy of the sample repository (what your "
                       "pull request would hold):")
    changed = [line.split("|")[0].strip() for line in tail[1:-2]]
    assert [f for f in changed if not f.startswith("gpu-platform/")] == [
        "clusters/base/intel-gpu-plugin.yaml", "clusters/base/kustomization.yaml",
        "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml", "platform/intel-gpu-plugin/kustomization.yaml",
        "platform/intel-gpu-plugin/namespace.intel-gpu-plugin.yaml",
        "platform/intel-gpu-plugin/networkpolicy.default-deny.yaml"]
    assert tail[-2].startswith(f"   {len(changed)} files changed, ") and tail[-2].endswith(" insertions(+)")
    assert "kustomization.yaml" in tail[2] and tail[2].endswith("|   1 +")  # the one line the base gains
    assert tail[-1] == ("  next: `git -C build/sample/home-network-k3s diff` shows it line by line; OUT=<your "
                        "repository> exports into yours")


def test_a_second_export_without_out_starts_again_from_the_sample_as_committed(tmp_path):
    out = sample.fresh_copy(sample.HOME_SAMPLE, tmp_path)
    (out / "stray.txt").write_text("left by an earlier run\n")
    again = sample.fresh_copy(sample.HOME_SAMPLE, tmp_path)
    assert again == out and not (out / "stray.txt").exists()
    assert git_status(out) == set()


def test_the_same_stacks_into_a_fresh_copy_of_the_repository_give_the_same_change(tmp_path):
    repo = home_repo(tmp_path)
    assert export(repo, "prod", project=ROOT) == 0
    assert git_status(repo) == HOME_PULL_REQUEST | {HOME_RECORDS}


def test_an_example_project_exports_into_its_own_sample():
    assert sample.sample_of(EXAMPLE) == EXAMPLE / "repo"
    assert sample.sample_of(ROOT) == sample.HOME_SAMPLE


def test_check_and_remove_without_out_are_refused_with_the_reason():
    for flag in ("--check", "--remove"):
        result = subprocess.run([sys.executable, "-m", "gitops.export", "--stack", "prod", flag], cwd=ROOT,
                                capture_output=True, text=True)
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1] == (
            "python -m gitops.export: error: --check and --remove need --out, the repository to compare or clean")
