"""Golden files: what a test compares its output with, byte for byte. `make golden` (GOLDEN_UPDATE=1) rewrites
them from the current program instead of comparing; review the diff of tests/golden/ like any other change."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from conftest import EXAMPLE

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("GOLDEN_UPDATE") == "1"
REGENERATE = "if the change is intended, run `make golden` and review the diff of tests/golden/"


def assert_golden(rel: str, actual: bytes | str) -> None:
    """`actual` equals tests/golden/<rel>; with GOLDEN_UPDATE=1 the file is (re)written instead."""
    data = actual.encode() if isinstance(actual, str) else actual
    path = GOLDEN / rel
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        return
    assert path.exists(), f"tests/golden/{rel} does not exist; {REGENERATE}"
    expected = path.read_bytes()
    if isinstance(actual, str):
        assert actual == expected.decode(), f"differs from tests/golden/{rel}; {REGENERATE}"
    else:
        assert data == expected, f"differs from tests/golden/{rel}; {REGENERATE}"


def assert_golden_tree(rel: str, files: dict[str, bytes]) -> None:
    """Every file of `files` (path -> content) equals tests/golden/<rel>/<path>, and the folder holds no other file."""
    folder = GOLDEN / rel
    if UPDATE:
        if folder.exists():
            for stale in sorted(p for p in folder.rglob("*") if p.is_file() and
                                p.relative_to(folder).as_posix() not in files):
                stale.unlink()
    for path, content in sorted(files.items()):
        assert_golden(f"{rel}/{path}", content)
    if UPDATE:
        for empty in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
            if not any(empty.iterdir()):
                empty.rmdir()
        return
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    extra = sorted(set(present) - set(files))
    assert not extra, f"tests/golden/{rel}: no longer exported: {', '.join(extra)}; {REGENERATE}"


_REPOSITORY: list[Path] = []


def exported_repository() -> Path:
    """Every stack exported into one fresh repository, as `make export-all` leaves it: once per test run, shared by
    the golden tests (read only; copy it to change it)."""
    if not _REPOSITORY:
        from gitops.export import main as export_main

        out = Path(tempfile.mkdtemp(prefix="golden-repository-"))
        atexit.register(shutil.rmtree, out, True)
        assert export_main(["--project-dir", str(EXAMPLE), "--stack", "all", "--out", str(out), "--quiet"]) == 0
        _REPOSITORY.append(out)
    return _REPOSITORY[0]
