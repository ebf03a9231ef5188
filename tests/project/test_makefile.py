"""The Makefile as a user meets it: `make` alone lists every target with one line, as CLIs users know do."""

from __future__ import annotations

import re
import subprocess

from conftest import ROOT


def _targets() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    return [m.group(1) for m in re.finditer(r"^([a-z][a-z0-9-]*):(?!=)", text, re.MULTILINE) if m.group(1) != "help"]


def test_make_alone_lists_every_target_with_one_line_and_exits_0():
    run = subprocess.run(["make", "--no-print-directory"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "usage: make <target> [STACK=<stack>] [OUT=<your GitOps repository>]"
    assert lines[-1] == "start with: make export STACK=prod (into a copy of the sample repository), then make test"
    listed = [line.split()[0] for line in lines[1:-1]]
    assert listed == _targets(), "every target, in the Makefile's order"
    assert all(len(line.split(None, 1)) == 2 and len(line) <= 120 for line in lines[1:-1]), lines


def test_every_target_echoes_clean_commands_whatever_optional_variables_are_unset():
    """An optional flag that expands to nothing on a continued recipe line would echo a dangling `\\` and an empty
    line, or trailing blanks (`make -n`: the commands as `make` shows them, none run)."""
    for target in _targets():
        run = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=ROOT, capture_output=True, text=True)
        lines = run.stdout.splitlines()
        dangling = [line for line, after in zip(lines, [*lines[1:], ""], strict=True)
                    if line.endswith("\\") and not after.strip() or line != line.rstrip()]
        assert dangling == [], (target, lines)
