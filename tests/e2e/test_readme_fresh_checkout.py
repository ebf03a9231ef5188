"""The README's first command on a fresh checkout: no .venv, no build/, only what git holds. `make export STACK=prod`
creates .venv from PyPI, exports the shipped stacks into a fresh copy of the sample repository and ends with the
change, which is exactly the plugin's pull request plus the records folder (issue 44)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.e2e


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a newcomer: a home of their own, nothing of this checkout's."""
    keep = ("PATH", "LANG", "LC_ALL", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT", "SSL_CERT_FILE", "TMPDIR",
            "PIP_CACHE_DIR", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k in keep}
    # The machine's pip cache stays: a newcomer's second install would have one too, and PyPI is the same.
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    return {**env, "HOME": str(home)}


def test_the_readmes_first_command_on_a_fresh_checkout_ends_with_the_plugins_pull_request(tmp_path):
    checkout = tmp_path / "gpu-platform"
    # What git holds of this commit, as a clone would (a file the working tree has but git does not is no part of it)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"], check=True,
                             capture_output=True).stdout
    checkout.mkdir()
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive, check=True)
    assert not (checkout / ".venv").exists() and not (checkout / "build").exists()
    (tmp_path / "home").mkdir()
    # ../shared beside the checkout is what CI has; the export needs none of it
    done = subprocess.run(["make", "export", "STACK=prod"], cwd=checkout, capture_output=True, text=True,
                          env=_clean_env(tmp_path / "home"), timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    start = lines.index("the change in build/sample/home-network-k3s, a fresh copy of the sample repository (what "
                        "your pull request would hold):")
    files = [line.split("|")[0].strip() for line in lines[start + 1:-2]]
    assert [f for f in files if not f.startswith("gpu-platform/")] == [
        "clusters/base/intel-gpu-plugin.yaml", "clusters/base/kustomization.yaml",
        "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml", "platform/intel-gpu-plugin/kustomization.yaml",
        "platform/intel-gpu-plugin/namespace.intel-gpu-plugin.yaml",
        "platform/intel-gpu-plugin/networkpolicy.default-deny.yaml"]
    assert {f.split("/")[1] for f in files if f.startswith("gpu-platform/")} == {"dev", "prod"}  # the records
    assert re.fullmatch(r"   clusters/base/kustomization\.yaml +\| +1 \+", lines[start + 2])  # one line added
    assert re.fullmatch(rf"   {len(files)} files changed, \d+ insertions\(\+\)", lines[-2])
    assert lines[-1] == ("  next: `git -C build/sample/home-network-k3s diff` shows it line by line; OUT=<your "
                         "repository> exports into yours")
