"""gitops/export.py as a command users know: `--version`, and `--help` with examples and the exit codes."""

from __future__ import annotations

import importlib.metadata

import pytest

from gitops.export import main as export_main


def test_version_prints_the_programs_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as done:
        export_main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"python -m gitops.export {importlib.metadata.version('gpu-platform')}\n"


def test_help_ends_with_two_examples_and_the_three_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        export_main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    tail = text[text.index("\nexamples:\n") + 1:].splitlines()
    assert tail == [
        "examples:",
        "  python -m gitops.export --stack prod --out ../home-network-k3s            "
        "export into your GitOps repository",
        "  python -m gitops.export --stack all --out ../home-network-k3s --check    CI: exit 1 when it drifted",
        "",
        "exit codes:",
        "  0  exported (or, with --check, the repository matches)",
        "  1  --check only: the repository differs from what the export would write",
        "  2  a mistake or a refusal: one line per problem on stderr, nothing written"]
    assert "print only errors and the gate's warnings" in text, "--quiet says what it does"
