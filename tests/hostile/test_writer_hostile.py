"""Everything under OUT is untrusted: a tampered index, symlinks, obstacles, a full disk, a second export at
the same time. Each case: one line (`error: <file>: <key or path>: <problem>; hint: <fix>`), exit 2, nothing
changed, nothing outside OUT touched, never a traceback."""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import EXAMPLE, export, files_of
from gitops.export import into_out, main as export_main

INDEX = "clusters/dev/gpu-platform/export-index.json"






@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict[str, bytes]:
    """What a clean export of dev writes."""
    out = tmp_path_factory.mktemp("clean")
    assert export(out, "dev") == 0
    return files_of(out)


def place(tmp_path: Path, clean: dict[str, bytes]) -> Path:
    out = tmp_path / "out"
    for rel, data in clean.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    return out


def one_line_refusal(capsys, out: Path, *watch: Path, check: bool = False) -> list[str]:
    """Export expecting exit 2: returns the error lines; OUT and every watched folder unchanged."""
    before = {p: files_of(p) if p.is_dir() else None for p in (out, *watch)}
    capsys.readouterr()
    assert export(out, "dev", check=check) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line.removeprefix("error: ") for line in err.splitlines() if line.startswith("error: ")]
    assert lines and all(": " in line for line in lines), err
    for p, files in before.items():
        assert (files_of(p) if p.is_dir() else None) == files, f"{p} changed"
    return lines


def tamper(out: Path, entries: dict[str, str] | None = None, raw: str | None = None) -> None:
    index = out / INDEX
    if raw is not None:
        index.write_text(raw)
        return
    doc = json.loads(index.read_text())
    doc["files"].update(entries or {})
    index.write_text(json.dumps(doc))


# --- a tampered index ------------------------------------------------------------------------------------------

RESTORE = "hint: restore it from git, or delete it together with the stack's exported folders"
UNTRUSTED = f"the export trusts no entry it could not have written; {RESTORE}"
DEV_FOLDERS = ("outside this stack's folders (clusters/dev/gpu-platform, clusters/dev/gpu-platform/post-merge, "
               "components/dev)")


@pytest.mark.parametrize("entry,why", [
    ("{victim}", "not a relative, normalized path inside the repository"),
    ("../victim.yaml", "not a relative, normalized path inside the repository"),
    ("components/dev/../../victim.yaml", "not a relative, normalized path inside the repository"),
    ("components/prod/plex/deployment.plex.yaml", DEV_FOLDERS),
    ("kubernetes/dev/cilium/helmrelease.yaml", DEV_FOLDERS),
    ("components/dev/plex/NOTES.md", "not a name the export gives its files"),
])
def test_an_index_entry_the_export_could_not_have_written_is_refused_and_its_file_survives(
        tmp_path, capsys, clean, entry, why):
    victim_dir = tmp_path / "outside"
    victim_dir.mkdir()
    victim = victim_dir / "victim.yaml"
    victim.write_text("precious: true\n")
    out = place(tmp_path, clean)
    for rel in ("components/prod/plex/deployment.plex.yaml", "kubernetes/dev/cilium/helmrelease.yaml",
                "components/dev/plex/NOTES.md"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("precious: true\n")
    entry = entry.format(victim=victim)
    tamper(out, {entry: hashlib.sha256(b"precious: true\n").hexdigest()})
    lines = one_line_refusal(capsys, out, victim_dir)
    assert lines == [f"{out}/{INDEX}: files.{entry}: {why}; {UNTRUSTED}"]
    assert victim.read_text() == "precious: true\n"


@pytest.mark.parametrize("raw,where", [
    ("[]", f"files: not a valid export index (no `files` mapping); {RESTORE}"),
    ("[" * 100000 + "]" * 100000, f"(root): not a valid export index (not JSON); {RESTORE}"),
    ('{"files": {"components/dev/plex": "' + "0" * 64 + '"}}',
     f"files.components/dev/plex: not a name the export gives its files; {UNTRUSTED}"),
    ('{"files": {"components/dev/plex/a.yaml": 7}}',
     f"files.components/dev/plex/a.yaml: not a content hash; {UNTRUSTED}"),
    ("\udcff not utf-8", f"(root): not a valid export index (not JSON); {RESTORE}"),
])
def test_an_index_of_the_wrong_shape_is_one_line(tmp_path, capsys, clean, raw, where):
    out = place(tmp_path, clean)
    (out / INDEX).write_bytes(raw.encode("utf-8", "surrogateescape"))
    assert one_line_refusal(capsys, out) == [f"{out}/{INDEX}: {where}"]
    assert one_line_refusal(capsys, out, check=True) == [f"{out}/{INDEX}: {where}"]


@pytest.fixture(scope="module")
def dev_capture():
    from gitops.engine.program import run_program
    return run_program("dev", EXAMPLE)


def fresh_stack(capture):
    """The stack an export of `capture` builds (the program's run is shared; everything after it is not)."""
    from gitops import pipeline
    return pipeline.from_capture(capture, lint=False)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                                  st.sampled_from(["../x.yaml", "/etc/passwd", "components/dev/plex/a.yaml",
                                                   "0" * 64, "yaml:" + "0" * 64])),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(st.text(max_size=30), inner, max_size=3)),
                        max_leaves=10))
def test_any_json_in_the_index_is_an_answer_not_a_crash(tmp_path_factory, capsys, clean, dev_capture, doc):
    root = tmp_path_factory.mktemp("fuzz-index")
    neighbour = root / "neighbour"
    neighbour.mkdir()
    (neighbour / "x.yaml").write_text("keep: me\n")
    out = place(root, clean)
    (out / INDEX).write_text(json.dumps({"files": doc} if isinstance(doc, dict) else doc))
    before = files_of(out)
    capsys.readouterr()
    code = into_out(argparse.Namespace(check=False, quiet=True), out, [fresh_stack(dev_capture)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert files_of(out) == before and all(": " in line for line in err.splitlines() if line.startswith("error:"))
    assert files_of(neighbour) == {"x.yaml": b"keep: me\n"}


# --- symlinks ----------------------------------------------------------------------------------------------------

SYMLINK = ("a symlink where the export reads or writes; the export never follows links under OUT; hint: replace it "
           "with a real file or folder")


def test_a_symlinked_folder_under_out_is_never_written_through(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(outside, out / "components")
    lines = one_line_refusal(capsys, out, outside)
    assert lines == [f"{out}/components: {SYMLINK}"]
    assert list(outside.iterdir()) == []


def test_a_symlinked_work_folder_is_refused_and_what_it_points_at_survives(tmp_path, capsys, clean):
    outside = tmp_path / "outside"
    (outside / "dev.staging").mkdir(parents=True)
    (outside / "dev.staging" / "keep.txt").write_text("mine\n")
    out = place(tmp_path, clean)
    os.symlink(outside, out / ".gitops-export")
    lines = one_line_refusal(capsys, out, outside)
    assert lines == [f"{out}/.gitops-export: not a real folder; the export keeps its work there and never follows a "
                     "link; hint: delete it"]
    assert (outside / "dev.staging" / "keep.txt").read_text() == "mine\n"


def test_a_symlinked_file_at_an_owned_path_is_not_read_or_replaced(tmp_path, capsys, clean):
    outside = tmp_path / "outside.yaml"
    outside.write_text("precious: true\n")
    out = place(tmp_path, clean)
    target = out / "components/dev/plex/service.plex.yaml"
    target.unlink()
    os.symlink(outside, target)
    lines = one_line_refusal(capsys, out)
    assert lines == [f"{target}: {SYMLINK}"]
    assert outside.read_text() == "precious: true\n"


# --- obstacles, found before the commit point --------------------------------------------------------------------

def test_out_that_is_a_file_or_under_a_file_is_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    for out, line in ((afile, f"{afile}: not a folder; hint: give --out the root folder of the GitOps repository"),
                      (afile / "sub", f"{afile}: not a folder, so {afile}/sub cannot be created; hint: choose "
                                      "another --out")):
        capsys.readouterr()
        assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out), "--quiet"]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {line}", "nothing was written"]
    assert afile.read_text() == "x\n"


def test_a_file_where_the_export_needs_a_folder_is_refused_before_anything_changes(tmp_path, capsys, clean):
    out = place(tmp_path, clean)
    shutil.rmtree(out / "components/dev/plex")
    (out / "components/dev/plex").write_text("I am a file\n")
    lines = one_line_refusal(capsys, out)
    assert lines == [f"{out}/components/dev/plex: a file stands where the export needs a folder (for 10 files, e.g. "
                     "components/dev/plex/deployment.plex.yaml); hint: move it away"], lines


def _immutable(path: Path, on: bool) -> bool:
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


def test_a_folder_that_cannot_be_written_is_found_before_the_commit_point(tmp_path, capsys, clean):
    out = place(tmp_path, clean)
    svc = out / "components/dev/plex/service.plex.yaml"
    svc.write_text(svc.read_text().replace("# Generated", "# Generated (older)"))  # comments only: not a change
    dep = out / "components/dev/intel-gpu-plugin/namespace.intel-gpu-plugin.yaml"
    dep.unlink()  # something to write in a writable folder
    (out / "components/dev/plex/deployment.plex.yaml").unlink()  # and in the immutable one
    folder = out / "components/dev/plex"
    if os.geteuid() != 0 or not _immutable(folder, True):
        pytest.skip("needs root and chattr +i to make a folder unwritable")
    try:
        lines = one_line_refusal(capsys, out)
    finally:
        _immutable(folder, False)
    # the OS's words for the refused write (EPERM on an immutable folder) are the one part left open
    assert len(lines) == 1 and re.fullmatch(
        rf"{re.escape(str(folder))}: the export cannot write here \([^()\n]+\); nothing was changed; hint: check the "
        "folder's permissions and attributes", lines[0]), lines
    assert not dep.exists(), "a file was written although another folder could not be"
    assert not (out / ".gitops-export").exists()


@pytest.mark.parametrize("optimizations_off", ["", "syncfs"])
def test_a_full_disk_while_staging_is_one_line_and_the_tree_is_unchanged(tmp_path, capsys, clean, monkeypatch,
                                                                          optimizations_off):
    import gitops.repo.writer

    out = place(tmp_path, clean)
    (out / "components/dev/plex/deployment.plex.yaml").unlink()
    before = files_of(out)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setenv("GPU_PLATFORM_OPTIMIZATIONS_OFF", optimizations_off)
    # The flush is where a full disk (or any write-back error) shows: one syncfs, or an fsync per file.
    if optimizations_off:
        monkeypatch.setattr(os, "fsync", full)
    else:
        monkeypatch.setattr(gitops.repo.writer, "_syncfs", full)
    capsys.readouterr()
    assert export(out, "dev") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {out}/.gitops-export: staging the export failed ({os.strerror(errno.ENOSPC)}) (the disk is full); "
        "nothing was changed; hint: fix the cause and run the export again", "nothing was written"]
    assert files_of(out) == before and not (out / ".gitops-export").exists()


# --- interruption and concurrency --------------------------------------------------------------------------------

def test_after_a_commit_the_tree_converges_even_when_the_work_folder_is_lost(tmp_path, clean):
    from builders import export_an_older_tree, killed_export

    out = tmp_path / "out"
    export_an_older_tree(out)
    assert killed_export(["--stack", "dev", "--out", str(out), "--quiet"], "replace", 10) == -9
    shutil.rmtree(out / ".gitops-export")  # `git clean -fdx` between the kill and the next run
    assert export(out, "dev") == 0
    assert export(out, "dev", check=True) == 0
    assert files_of(out) == clean


def forked_export(argv: list[str], stderr: Path) -> int:
    """Start the export in a forked child (everything already imported); returns the child's pid."""
    import asyncio

    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            asyncio.set_event_loop(asyncio.new_event_loop())
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
            sys.stderr = open(2, "w", closefd=False)
            code = export_main(argv)
        finally:
            sys.stderr.flush()
            os._exit(code)
    return pid


@pytest.mark.stress
def test_two_exports_into_one_out_at_once_end_in_a_clean_tree(tmp_path, clean):
    import asyncio

    out = tmp_path / "out"
    argv = ["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out), "--quiet"]
    for round_ in range(20):
        if round_ % 5 == 0:  # an empty repository: both exports write every file
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
        elif round_ % 5 == 2:  # an older tree under both, so both have work to do
            for rel in ("components/dev/plex/service.plex.yaml", "clusters/dev/gpu-platform/ks.plex.yaml"):
                if (out / rel).exists():
                    (out / rel).unlink()
        errs = [tmp_path / f"stderr.{i}" for i in range(2)]
        pids = [forked_export(argv, err) for err in errs]
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
        asyncio.set_event_loop(asyncio.new_event_loop())
        assert codes == [0, 0], f"round {round_}: exit codes {codes}: {[e.read_text() for e in errs]}"
        assert not any("Traceback" in e.read_text() for e in errs)
        assert files_of(out) == clean, f"round {round_}: the tree differs from a clean export"
    assert export(out, "dev", check=True) == 0


BOMB = ("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol, namespace: plex}\n"
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n") + "".join(
    f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 10))


def test_an_alias_bomb_in_a_repository_file_is_one_line_in_the_walk_and_as_an_owned_file(tmp_path, capsys, clean):
    out = place(tmp_path, clean)
    (out / "clusters/dev/bomb.yaml").write_text(BOMB)  # walked by flux-system's generated kustomization
    lines = one_line_refusal(capsys, out)
    assert lines == [
        "clusters/dev/bomb.yaml: a document that expands to more than 200000 values through its aliases; no manifest "
        "needs that (a YAML alias bomb?); flux-system/flux-system (bootstrap) fails to build because of it, and Flux "
        "holds back whatever depends on it; nothing applies the 20 objects the export writes to "
        "clusters/dev/gpu-platform/, components/dev/intel-gpu-plugin/ and components/dev/plex/ (e.g. ConfigMap "
        "flux-system/cluster-vars); hint: fix the file named; see kustomize's own answer with `kubectl kustomize "
        "--load-restrictor LoadRestrictionsNone ./clusters/dev`"]
    (out / "clusters/dev/bomb.yaml").unlink()
    (out / "components/dev/plex/service.plex.yaml").write_text(BOMB)  # an owned file, hashed for ownership
    lines = one_line_refusal(capsys, out)
    assert lines == [f"{out}/components/dev/plex/service.plex.yaml: (root): expands through its aliases beyond any "
                     "manifest; hint: restore it from git (`git checkout -- components/dev/plex/service.plex.yaml`), "
                     "then run the command again"]


def test_a_symlinked_component_folder_is_one_line_not_one_per_file(tmp_path, capsys, clean):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = place(tmp_path, clean)
    shutil.rmtree(out / "components/dev/plex")
    os.symlink(outside, out / "components/dev/plex")
    lines = one_line_refusal(capsys, out, outside)
    assert lines == [
        f"{out}/components/dev/plex: a symlink where the export reads or writes; the export never follows links "
        "under OUT; hint: replace it with a real file or folder"]
    assert list(outside.iterdir()) == []


def test_an_out_whose_name_the_file_system_cannot_hold_is_one_line_naming_it(tmp_path, capsys):
    from gitops.repo.out_folder import OwnershipError, check_out

    out = tmp_path / ("a" * 300) / "gitops"  # one path component past NAME_MAX (255 on Linux file systems)
    with pytest.raises(OwnershipError) as err:
        check_out(out, creating=True)
    (line,) = err.value.lines
    # the OS's words for a name past NAME_MAX are the one part left open
    assert re.fullmatch(rf"{re.escape(str(out))}: cannot be used \([^()\n]+\); hint: choose another --out", line), line
    capsys.readouterr()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {line}", "nothing was written"]
    assert list(tmp_path.iterdir()) == []
