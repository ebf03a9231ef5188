"""The speed optimizations (gitops/engine/optimizations.py): the same bytes with every optimization on or off, the
variable that turns them off, and the syncfs optimization doing what it says and falling back to fsync where the
platform has no syncfs. The validation cache's own tests are tests/gitops/checks/test_validate_cache.py; the
import-time optimization's, tests/gitops/engine/test_lazy_imports.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import COMPLETE_PROD_EVIDENCE, EXAMPLE, ROOT, export, files_of, make_project, repository, stack_text
from gitops.engine import optimizations
from gitops.export import main as export_main
from gitops.repo import writer


def test_every_optimization_on_or_off_writes_the_same_bytes(tmp_path, monkeypatch):
    # Both stacks into a Flux bootstrap repository (the walk and DELIVERY.md included), plus a stack whose GPU app
    # requests the device (evidence in place): every file compared byte for byte.
    project = make_project(tmp_path / "project", {"dev": stack_text("dev"), "prod": stack_text("prod")},
                           {"prod": COMPLETE_PROD_EVIDENCE})
    trees = {}
    for setting in ("", "all"):
        monkeypatch.setenv(optimizations.ENV, setting)
        out = tmp_path / f"out-{setting or 'on'}"
        shutil.copytree(repository("flux-bootstrap"), out)
        assert export(out, "dev", "prod", project=project) == 0
        trees[setting] = files_of(out)
    assert trees[""] == trees["all"]
    assert "gpu.intel.com/i915" in trees[""]["components/prod/plex/deployment.plex.yaml"].decode()


def test_the_variable_turns_off_the_named_optimizations_or_all_of_them(monkeypatch):
    monkeypatch.setenv(optimizations.ENV, " syncfs ,validation-cache")
    assert optimizations.off() == {"syncfs", "validation-cache"}
    assert not optimizations.on("syncfs") and optimizations.on("lazy-annotations")
    monkeypatch.setenv(optimizations.ENV, "all")
    assert optimizations.off() == set(optimizations.OPTIMIZATIONS)
    monkeypatch.delenv(optimizations.ENV)
    assert optimizations.off() == set() and all(optimizations.on(name) for name in optimizations.OPTIMIZATIONS)
    with pytest.raises(KeyError):
        optimizations.on("turbo")


def test_a_misspelt_optimization_is_one_line_and_nothing_is_written(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(optimizations.ENV, "syncfs,synfcs")
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {optimizations.ENV}: synfcs: no such optimization, so nothing would be switched off; "
                   "hint: name optimizations from lazy-annotations, validation-cache, syncfs (or all), separated by "
                   "commas",
                   "nothing was written"]
    assert not (tmp_path / "out").exists()


# --- syncfs -----------------------------------------------------------------------------------------------------

def flush_calls(monkeypatch) -> list[str]:
    """What the writer does to put bytes on disk and to commit, in order (spies; the real calls run)."""
    calls: list[str] = []
    real_fsync, real_syncfs, real_replace = os.fsync, writer._syncfs, os.replace

    def fsync(fd):
        calls.append("fsync")
        return real_fsync(fd)

    def syncfs(folder):
        calls.append("syncfs")
        return real_syncfs(folder)

    def replace(src, dst):
        calls.append(f"replace {os.path.basename(dst)}")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(writer, "_syncfs", syncfs)
    monkeypatch.setattr(os, "replace", replace)
    return calls


def test_with_syncfs_one_flush_precedes_the_commit_and_without_it_every_file_is_fsynced(tmp_path, monkeypatch):
    calls = flush_calls(monkeypatch)
    monkeypatch.setenv(optimizations.ENV, "")
    assert export(tmp_path / "on", "dev") == 0
    commit = calls.index("replace dev.journal")
    assert calls[:commit] == ["syncfs"]
    written = len(files_of(tmp_path / "on"))
    calls.clear()
    monkeypatch.setenv(optimizations.ENV, "syncfs")
    assert export(tmp_path / "off", "dev") == 0
    commit = calls.index("replace dev.journal")
    assert calls[:commit] == ["fsync"] * (written + 1)  # every staged file, then the journal
    assert files_of(tmp_path / "on") == files_of(tmp_path / "off")


def test_where_the_platform_has_no_syncfs_the_writer_fsyncs_every_file(tmp_path, monkeypatch):
    calls = flush_calls(monkeypatch)
    monkeypatch.setenv(optimizations.ENV, "")
    monkeypatch.setattr(writer, "_libc_syncfs", lambda: None)
    assert export(tmp_path / "out", "dev") == 0
    assert "syncfs" not in calls and calls.count("fsync") == len(files_of(tmp_path / "out")) + 1


# --- every optimization off in an export process of its own, the import-time optimization included -------------

def test_the_export_process_with_every_optimization_off_writes_what_this_one_writes_with_all_on(tmp_path):
    assert export(tmp_path / "on", "dev", "prod") == 0
    (tmp_path / "off").mkdir()
    result = subprocess.run([sys.executable, "-m", "gitops.export", "--project-dir", str(EXAMPLE), "--stack", "dev",
                             "--stack", "prod", "--out",
                             str(tmp_path / "off"), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, optimizations.ENV: "all"})
    assert result.returncode == 0, result.stderr
    assert files_of(tmp_path / "off") == files_of(tmp_path / "on")
