"""renovate.json5 names files that exist: every custom manager's file pattern matches a file the project tracks (a
module that moves would otherwise leave Renovate reading nothing, which only `make e2e`'s Renovate run would see)."""

from __future__ import annotations

import re
import subprocess

from conftest import ROOT


def _patterns() -> list[str]:
    text = (ROOT / "renovate.json5").read_text(encoding="utf-8")
    lists = re.findall(r"managerFilePatterns:\s*\[([^\]]*)\]", text)
    return [p.replace("\\\\", "\\") for found in lists for p in re.findall(r'"/(.*?)/"', found)]


def test_every_custom_manager_reads_a_file_the_project_has():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    patterns = _patterns()
    assert patterns, "renovate.json5: no managerFilePatterns found"
    unmatched = [p for p in patterns if not any(re.search(p, f) for f in files)]
    assert not unmatched, f"renovate.json5: managerFilePatterns matching no file: {unmatched}"
    assert any(re.search(p, "model/images.py") for p in patterns)
    assert not any(re.search(p, "components/images.py") for p in patterns)
