"""Write a stack's tree into OUT: ownership-checked, pruning, atomic; or compare it (`--check`).

Ownership: `clusters/<stack>/export-index.json` lists every file the stack's last export wrote, with its sha256.
A re-export replaces or deletes only those files, and refuses to overwrite a file it does not own or one edited by
hand since (a hand-written file never silently disappears).

Atomicity: every new or changed file is first written under `OUT/.gitops-export/<stack>.staging/`; then a journal
naming the renames and deletions is put in place with one `os.replace` (the commit point); then the renames run.
A kill before the commit point leaves the previous tree whole (the next run discards the staging folder); a kill
after it is rolled forward by the next run before it does anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from components.layout import cluster_dir
from gitops.tree import INDEX_FILE, Tree

WORK_DIR = ".gitops-export"


class OwnershipError(Exception):
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


@dataclass
class Plan:
    write: dict[str, bytes] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.write and not self.delete


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def index_path(stack: str) -> str:
    return f"{cluster_dir(stack)}/{INDEX_FILE}"


def read_index(out: Path, stack: str) -> dict[str, str]:
    path = out / index_path(stack)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        files = doc["files"]
        assert isinstance(files, dict)
        return {str(k): str(v) for k, v in files.items()}
    except (ValueError, KeyError, AssertionError):
        raise OwnershipError([f"{path}: not a valid export index; hint: restore it from git or delete the "
                              "stack's generated folders"]) from None


def plan_changes(out: Path, tree: Tree) -> Plan:
    owned = read_index(out, tree.stack)
    plan = Plan()
    problems: list[str] = []
    for rel, content in sorted(tree.files.items()):
        target = out / rel
        if target.is_dir():
            problems.append(f"{target}: a folder stands where the export writes a file")
            continue
        if not target.exists():
            plan.write[rel] = content
            continue
        current = target.read_bytes()
        if rel == index_path(tree.stack):  # read_index() accepted it: the index is the export's own
            if current == content:
                plan.unchanged.append(rel)
            else:
                plan.write[rel] = content
            continue
        if rel not in owned:
            if current == content:
                plan.unchanged.append(rel)  # byte-identical: adopting it loses nothing
                continue
            problems.append(f"{target}: exists and was not written by this export (not in {index_path(tree.stack)}); "
                            "refusing to overwrite a hand-written file; hint: move it away or delete it")
            continue
        if _sha(current) != owned[rel]:
            problems.append(f"{target}: edited by hand since the last export; refusing to overwrite it; "
                            "hint: put the change into the program or stack config, then `git checkout` the file")
            continue
        if current == content:
            plan.unchanged.append(rel)
        else:
            plan.write[rel] = content
    for rel in sorted(set(owned) - set(tree.files)):
        target = out / rel
        if not target.exists():
            continue
        if _sha(target.read_bytes()) != owned[rel]:
            problems.append(f"{target}: no longer produced, but edited by hand since the last export; not "
                            "deleting it; hint: delete it yourself if the edit is not needed")
            continue
        plan.delete.append(rel)
    if problems:
        raise OwnershipError(problems)
    return plan


def _fsync_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _paths(out: Path, stack: str) -> tuple[Path, Path]:
    work = out / WORK_DIR
    return work / f"{stack}.staging", work / f"{stack}.journal"


def interrupted(out: Path, stack: str) -> bool:
    """True when a committed export of `stack` was cut off mid-swap (leftover staging alone changes nothing)."""
    return _paths(out, stack)[1].exists()


def recover(out: Path, stack: str) -> str | None:
    """Finish or discard an interrupted export of `stack`. Returns what it did, for the log."""
    staging, journal = _paths(out, stack)
    if journal.exists():
        _apply(out, staging, json.loads(journal.read_text()))
        journal.unlink()
        shutil.rmtree(staging, ignore_errors=True)
        _remove_work_dir(out)
        return "completed an interrupted export"
    if staging.exists():
        shutil.rmtree(staging)
        _remove_work_dir(out)
        return "discarded an interrupted export that had not reached its commit point"
    return None


def _remove_work_dir(out: Path) -> None:
    try:
        (out / WORK_DIR).rmdir()
    except OSError:
        pass  # another stack's export is in flight, or it never existed


def _apply(out: Path, staging: Path, journal: dict) -> None:
    for rel in journal["write"]:
        staged = staging / rel
        if staged.exists():  # else: renamed before the interruption
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, out / rel)
    for rel in journal["delete"]:
        target = out / rel
        if target.exists():
            target.unlink()
        parent = target.parent
        while parent != out and parent.exists() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def write_tree(out: Path, tree: Tree, plan: Plan | None = None) -> Plan:
    """Write `tree` into `out`. `plan`: from plan_changes() after recover(), when the caller has one already."""
    out.mkdir(parents=True, exist_ok=True)
    if plan is None:
        recover(out, tree.stack)
        plan = plan_changes(out, tree)
    if plan.empty:
        return plan
    staging, journal = _paths(out, tree.stack)
    shutil.rmtree(staging, ignore_errors=True)
    for rel, content in plan.write.items():
        _fsync_write(staging / rel, content)
    pending = journal.with_suffix(".tmp")
    _fsync_write(pending, json.dumps({"write": sorted(plan.write), "delete": plan.delete}).encode())
    os.replace(pending, journal)  # commit point
    recover(out, tree.stack)
    return plan


def drift(out: Path, tree: Tree) -> list[str]:
    """What differs between OUT and the tree, one line per file; empty when equal. Writes nothing."""
    owned = read_index(out, tree.stack)
    lines = []
    for rel, content in sorted(tree.files.items()):
        target = out / rel
        if not target.is_file():
            lines.append(f"missing  {rel}")
        elif target.read_bytes() != content:
            lines.append(f"changed  {rel}")
    for rel in sorted(set(owned) - set(tree.files)):
        if (out / rel).exists():
            lines.append(f"stale    {rel}")
    return lines
