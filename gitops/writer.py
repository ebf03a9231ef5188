"""Write a stack's tree into OUT: ownership-checked, pruning, atomic; or compare it (`--check`).

Ownership: `<entryDir>/export-index.json` lists every file the stack's last export wrote, with a hash of its
content. A re-export replaces or deletes only those files, and refuses to overwrite a file it does not own or one
edited by hand since (a hand-written file never silently disappears).

Ownership and drift compare meaning, not bytes: a YAML file whose documents equal what the export would write is
unchanged whatever a formatter did to its indentation, quoting or comments, and is left as it is on disk.

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

from gitops.tree import INDEX_FILE, Tree, content_hash

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


def legacy_index_path(stack: str) -> str:
    """Where exports before the entry folder kept the index (clusters/<stack>/export-index.json)."""
    return f"clusters/{stack}/{INDEX_FILE}"


def _hash(rel: str, data: bytes) -> str:
    try:
        return content_hash(rel, data)
    except ValueError:
        return "unparsable:" + _sha(data)  # equals no recorded hash: a broken file counts as edited by hand


def same_content(rel: str, current: bytes, content: bytes) -> bool:
    return current == content or _hash(rel, current) == _hash(rel, content)


def matches_record(rel: str, current: bytes, recorded: str) -> bool:
    """The file is as the last export left it. Indexes written before content hashes recorded plain sha256."""
    return _hash(rel, current) == recorded if recorded.startswith("yaml:") else _sha(current) == recorded


def _index_files(out: Path, rel: str) -> dict[str, str]:
    path = out / rel
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        files = doc["files"]
        assert isinstance(files, dict)
        return {str(k): str(v) for k, v in files.items()}
    except (ValueError, KeyError, AssertionError, TypeError):
        raise OwnershipError([f"{path}: not a valid export index; hint: restore it from git or delete the "
                              "stack's generated folders"]) from None


def read_index(out: Path, tree: Tree) -> dict[str, str]:
    """The files the stack's last export owns; an index at the legacy place counts too (and is itself owned)."""
    owned = _index_files(out, tree.index_path)
    legacy = legacy_index_path(tree.stack)
    if legacy != tree.index_path and (out / legacy).is_file():
        old = _index_files(out, legacy)
        owned = {**old, **owned, legacy: _sha((out / legacy).read_bytes())}
    return owned


def _same_index(current: bytes, content: bytes) -> bool:
    try:
        return json.loads(current) == json.loads(content)
    except ValueError:
        return False


def plan_changes(out: Path, tree: Tree) -> Plan:
    owned = read_index(out, tree)
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
        if rel == tree.index_path:  # read_index() accepted it: the index is the export's own
            if _same_index(current, content):
                plan.unchanged.append(rel)
            else:
                plan.write[rel] = content
            continue
        if same_content(rel, current, content):
            plan.unchanged.append(rel)  # equal in meaning: a formatter's layout is kept, adopting it loses nothing
            continue
        if rel not in owned:
            problems.append(f"{target}: exists and was not written by this export (not in {tree.index_path}); "
                            "refusing to overwrite a hand-written file; hint: move it away or delete it")
            continue
        if not matches_record(rel, current, owned[rel]):
            problems.append(f"{target}: edited by hand since the last export; refusing to overwrite it; "
                            "hint: put the change into the program or stack config, then `git checkout` the file")
            continue
        plan.write[rel] = content
    for rel in sorted(set(owned) - set(tree.files)):
        target = out / rel
        if not target.exists():
            continue
        if not matches_record(rel, target.read_bytes(), owned[rel]):
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
    """What differs in meaning between OUT and the tree: a line per file and, for a changed one, a unified diff
    of the file against what the export would write. Empty when equal. Writes nothing."""
    owned = read_index(out, tree)
    lines = []
    for rel, content in sorted(tree.files.items()):
        target = out / rel
        if not target.is_file():
            lines.append(f"missing  {rel}")
            continue
        current = target.read_bytes()
        equal = _same_index(current, content) if rel == tree.index_path else same_content(rel, current, content)
        if not equal:
            lines.append(f"changed  {rel}")
            lines += ["  " + line for line in _unified(rel, current, content)]
    for rel in sorted(set(owned) - set(tree.files)):
        if (out / rel).exists():
            lines.append(f"stale    {rel}")
    return lines


def _unified(rel: str, current: bytes, content: bytes) -> list[str]:
    import difflib

    old = current.decode("utf-8", errors="replace").splitlines()
    new = content.decode("utf-8", errors="replace").splitlines()
    return list(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}", lineterm=""))
