"""gitops/export.py as a command users know: `--version`, and `--help` with examples and the exit codes."""

from __future__ import annotations

import importlib.metadata

import pytest

from conftest import EXAMPLE
from gitops.export import main as export_main


def test_version_prints_the_programs_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as done:
        export_main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"python -m gitops.export {importlib.metadata.version('gpu-platform')}\n"


def test_help_ends_with_three_examples_the_stacks_exported_together_and_the_three_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        export_main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    tail = text[text.index("\nexamples:\n") + 1:].splitlines()
    assert tail == [
        "examples:",
        "  python -m gitops.export --stack prod                             into a fresh copy of the sample, the "
        "change shown",
        "  python -m gitops.export --stack prod --out ../home-network-k3s   into your GitOps repository (a clone)",
        "  python -m gitops.export --stack prod --out ../home-network-k3s --summary build/pr.md --stage",
        "                                  the same, the pull request's description written, exactly its files staged",
        "",
        # said here once, not on every run of the stacks it concerns
        "stacks exported together:",
        "  stacks whose folders meet (the stacks of one shared base, or two stack files naming one componentsDir) are",
        "  exported, checked and removed together, whatever --stack names: one stack alone would overwrite what the "
        "other",
        "  wrote there. Each stack's DELIVERY.md names the stacks exported with it.",
        "",
        "exit codes:",
        "  0  exported (or, with --check, the repository matches)",
        "  1  --check only: the repository differs from what the export would write",
        "  2  a mistake or a refusal: one line per problem on stderr, nothing written"]
    assert "print only errors and the gate's warnings" in text, "--quiet says what it does"


def test_a_warning_is_one_line_with_its_next_step_on_the_line_below(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    at = err.index("WARNING dev: plex: plex keeps the legacy /dev/dri hostPath (a known no-op: EPERM on open) because "
                   "there is no evidence that the nodes advertise gpu.intel.com/i915 (evidence/dev.yaml is missing)")
    assert err[at + 1] == ("  next: kubectl get nodes -o json > nodes-dev.json && make verify-nodes STACK=dev "
                           "NODES=nodes-dev.json WRITE_EVIDENCE=1")


def test_remove_says_what_it_took_out_not_what_it_wrote(tmp_path, capsys):
    from builders import home_project, home_repo

    repo, project = home_repo(tmp_path), home_project(tmp_path)
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(project), "--quiet"]) == 0
    capsys.readouterr()
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(project), "--remove"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if "removed" in line] == [
        f"prod: removed from {repo}/: 9 files deleted, its lines taken out of 1 of yours",
        f"dev: removed from {repo}/: 4 files deleted, its lines taken out of 1 of yours"]


def test_json_is_one_document_of_what_the_export_wrote_and_what_it_warns(tmp_path, capsys):
    import json

    out = tmp_path / "out"
    out.mkdir()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["out", "exitCode", "stacks", "notices", "warnings", "rendererChanges", "refused"]
    assert (doc["out"], doc["exitCode"], doc["refused"]) == (str(out), 0, [])
    (stack,) = doc["stacks"]
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert (stack["stack"], stack["written"], stack["pruned"], stack["unchanged"]) == ("dev", on_disk, [], 0)
    assert doc["warnings"][0] == {"line": f"{out} is not a Git work tree: no diff will show this export",
                                  "next": "give --out the root of your GitOps repository (a git clone)"}
    assert doc["notices"][0]["stack"] == "dev" and doc["notices"][0]["next"].startswith("kubectl get nodes -o json")


def test_json_of_a_refused_export_lists_the_refusals_and_exits_2(tmp_path, capsys):
    import json

    out = tmp_path / "missing"
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out), "--json"]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    line = (f"{out}: no such folder; the export never creates a repository it was not given; hint: clone your GitOps "
            f"repository there (git clone <url> {out}) or check the path")
    assert (doc["exitCode"], doc["stacks"], doc["refused"]) == (2, [], [line])
    assert captured.err.splitlines() == [f"error: {line}", "nothing was written"]


def test_json_with_check_or_remove_is_a_usage_error(tmp_path, capsys):
    for option in ("--check", "--remove"):
        with pytest.raises(SystemExit) as done:
            export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(tmp_path), "--json", option])
        assert done.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            "python -m gitops.export: error: --json is the export's result; --check and --remove print text")
