"""`make tools` (scripts/build-tools) without a usable Go: one line with a hint, exit 2, nothing built. No Go is
needed to run these: the script is given a Go that is missing or too old."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "build-tools"


def run_with(go: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={"GO": go, "PATH": "/usr/bin:/bin"})


def test_a_missing_go_is_one_line_with_a_hint_and_exit_2(tmp_path):
    done = run_with(str(tmp_path / "no-such-go"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: make tools: {tmp_path / 'no-such-go'}: not found; hint: install Go 1.26.6 or newer "
        "(https://go.dev/dl), or GO=/path/to/go make tools"]


def test_a_go_older_than_the_pinned_modules_need_is_refused_before_anything_is_built(tmp_path):
    fake = tmp_path / "go"
    log = tmp_path / "calls"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n[ "$1 $2" = "env GOVERSION" ] && echo go1.22.5\nexit 0\n')
    fake.chmod(0o755)
    done = run_with(str(fake))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: make tools: go 1.22.5: older than 1.26.6, which tools/pulumi/go.mod needs; hint: install Go 1.26.6 "
        "or newer, or GOTOOLCHAIN=go1.27.3 make tools"]
    assert Path(log).read_text().splitlines() == ["env GOVERSION"]  # asked its version, built nothing
