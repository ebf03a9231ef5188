"""Write a stack's tree into OUT: ownership-checked, pruning, atomic; or compare it (`--check`).

Ownership: `<entryDir>/export-index.json` lists every file the stack's last export wrote, hashed; a re-export replaces
or deletes only those and refuses a file it does not own or one edited by hand since. Ownership and drift compare
meaning, not bytes (a merely reformatted YAML file is unchanged); a file equal to its target is done whatever the index
says, so a run after any interruption converges. OUT (opened by out_folder.py) is untrusted: nothing through a symlink,
every obstacle found before the commit point, every failure one line. Atomic, one commit for every stack of a run:
files staged in OUT/.gitops-export/ as `<run>.staging/` (`prod`, or `dev+prod`), the journal beside as `<run>.tmp`,
all flushed (one syncfs(2), the `syncfs` optimization, else an fsync each); `os.replace` puts the journal in place
(the commit point); then the renames (`out_folder.recover`), the indexes last. A kill before the commit point leaves
the old tree whole; after it, the next run rolls forward."""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops import headers, index
from gitops.engine import optimizations
from gitops.index import matches_record, normalized, same_content
from gitops.repo.out_folder import (
    OwnershipError,
    journal_paths,
    read_regular,
    recover,
    remove_work_dir,
    run_name,
    symlink_in,
    why,
)
from gitops.tree import Tree
from model.layout import WORK_DIR


@dataclass
class Plan:
    write: dict[str, bytes] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.write and not self.delete


# --- planning ------------------------------------------------------------------------------------------------

def _read_owned(out: Path, rel: str) -> tuple[bytes | None, list[str]]:
    """The file's bytes (None: absent), or the lines saying why it cannot be read safely."""
    try:
        return read_regular(out, rel), []
    except OwnershipError as exc:
        return None, exc.lines


def _unchanged(out: Path, tree: Tree, rel: str, current: bytes, content: bytes) -> bool:
    if rel == tree.index_path:  # read_index() accepted it: the index is the export's own
        def settled(file: str, recorded: str, digest: str) -> bool:
            data = read_regular(out, file) if normalized(file) else None
            return (data is not None and matches_record(file, data, recorded)
                    and index.comparable_hash(file, data) == digest)

        return index.same_index(current, content, settled)
    return same_content(rel, current, content)


def _overwrite_problem(out: Path, tree: Tree, owned: dict[str, str], rel: str, current: bytes) -> str | None:
    """Why the export may not replace the file that stands at `rel`, or None."""
    if rel == tree.index_path:
        return None
    if rel not in owned:
        return (f"{out / rel}: exists and was not written by this export (not in {tree.index_path}); "
                "refusing to overwrite a hand-written file; hint: move it away or delete it")
    if not matches_record(rel, current, owned[rel]):
        return (f"{out / rel}: edited by hand since the last export; refusing to overwrite it; "
                "hint: put the change into the program or stack config, then `git checkout` the file")
    return None


def plan_changes(out: Path, tree: Tree, owned: dict[str, str], siblings: dict[str, str] | None = None,
                 kept: set[str] | frozenset[str] = frozenset(), rewrite_headers: bool = False) -> Plan:
    """What writing `tree` changes in OUT, given the files its last export owns (`read_index`); refuses, one line
    per file, to overwrite or delete what the export does not own or what was edited by hand since. `siblings`: the
    files the other stacks of this run own (a shared base's files are every stack's); `kept`: files another stack of
    this run writes, never pruned. A hand-written file the export keeps lines in (`tree.edited`) is written as the
    pipeline computed it from what OUT holds: only those lines change. `rewrite_headers`: a file unchanged but for the
    header an older export wrote gets the current header, and nothing else of it changes (gitops/headers.py)."""
    plan = Plan()
    problems: list[str] = []
    for rel, content in sorted(tree.files.items()):
        current, unreadable = _read_owned(out, rel)
        if unreadable:
            problems += unreadable
        elif current is None:
            plan.write[rel] = content
        elif current == content or (rel not in tree.edited and _unchanged(out, tree, rel, current, content)):
            if rewrite_headers and rel != tree.index_path and headers.is_legacy(current):
                plan.write[rel] = headers.with_header_of(current, content)
            else:
                plan.unchanged.append(rel)  # equal in meaning: a formatter's layout is kept, adopting it loses nothing
        elif rel in tree.edited:
            plan.write[rel] = content
        elif (problem := _overwrite_problem(out, tree, {**(siblings or {}), **owned}, rel, current)) is not None:
            problems.append(problem)
        else:
            plan.write[rel] = content
    if plan.write and tree.index_path in plan.unchanged:  # a rewritten header changes a report's recorded hash
        plan.unchanged.remove(tree.index_path)
        plan.write[tree.index_path] = tree.files[tree.index_path]
    for rel in sorted(set(owned) - set(tree.files) - set(kept)):
        current, unreadable = _read_owned(out, rel)
        if unreadable:
            problems += unreadable
        elif current is not None and not matches_record(rel, current, owned[rel]):
            problems.append(f"{out / rel}: no longer produced, but edited by hand since the last export; not "
                            "deleting it; hint: delete it yourself if the edit is not needed")
        elif current is not None:
            plan.delete.append(rel)
    if problems:
        raise OwnershipError(list(dict.fromkeys(problems)))  # one link under many files is one line
    return plan


def preflight(out: Path, plan: Plan) -> None:
    """Every obstacle the renames and deletions could meet, found before the commit point: a symlink or a file on
    the way, a folder at a file's place, a folder that cannot be written (read-only, immutable, not ours)."""
    problems: list[str] = []
    probe_dirs: set[Path] = set()
    blocked: dict[Path, list[str]] = {}  # a file where a folder is needed: one line, however many files are below it
    for rel in [*plan.write, *plan.delete]:
        link = symlink_in(out, rel)
        if link is not None:
            problems.append(f"{out / link}: a symlink on the way to {rel}; the export never follows links under OUT; "
                            "hint: replace it with a real folder")
            continue
        current = out
        parts = rel.split("/")
        for part in parts[:-1]:
            current = current / part
            if current.exists() and not current.is_dir():
                if current not in blocked:
                    problems.append(str(current))  # its place among the lines; filled in below
                blocked.setdefault(current, []).append(rel)
                break
            if not current.exists():
                break
        else:
            target = out / rel
            if target.is_dir():
                problems.append(f"{target}: a folder stands where the export writes a file; hint: move it away")
                continue
        if current.exists() and not current.is_dir():
            continue  # reported above; probing a file as a folder would only add a second, misleading line
        existing = (out / rel).parent
        while not existing.exists():
            existing = existing.parent
        probe_dirs.add(existing)
    for folder in sorted(probe_dirs):
        try:
            _probe_writable(folder)
        except OSError as exc:
            problems.append(f"{folder}: the export cannot write here ({why(exc)}); nothing was changed; "
                            "hint: check the folder's permissions and attributes")
    problems = [_blocked_line(Path(p), blocked[Path(p)]) if Path(p) in blocked else p for p in problems]
    if problems:
        raise OwnershipError(list(dict.fromkeys(problems)))  # one link under many files is one line


def _probe_writable(folder: Path) -> None:
    """Create a file in `folder` as the renames will, or raise the OSError they would meet. An unnamed file
    (O_TMPFILE): the kernel checks exactly what a create checks (permissions, a read-only mount, the immutable
    attribute), and a run killed here leaves no name behind in the user's repository. Where the file system has no
    unnamed files, access(2) asks the same of the folder."""
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            os.close(os.open(folder, tmpfile | os.O_WRONLY, 0o600))
            return
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))


def _blocked_line(current: Path, rels: list[str]) -> str:
    """One line for a file standing where a folder is needed, the files the export needs below it counted."""
    below = rels[0] if len(rels) == 1 else f"{len(rels)} files, e.g. {sorted(rels)[0]}"
    return f"{current}: a file stands where the export needs a folder (for {below}); hint: move it away"


# --- writing -------------------------------------------------------------------------------------------------

def _stage_write(path: Path, data: bytes, flush_each: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        if flush_each:
            os.fsync(f.fileno())


@functools.cache
def _libc_syncfs() -> Any:
    """syncfs(2) from the C library (Linux), or None where there is none: the writer then fsyncs every file."""
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def _syncfs(folder: Path) -> None:
    """Flush every dirty page of the file system holding `folder` to disk; OSError as fsync would raise it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if _libc_syncfs()(fd) != 0:
            import ctypes

            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    finally:
        os.close(fd)



def write_tree(out: Path, tree: Tree, plan: Plan) -> Plan:
    """Carry out `plan` (plan_changes, after recover) in OUT, which exists and is locked (gitops/pipeline.py)."""
    write_trees(out, [(tree, plan)])
    return plan


def write_trees(out: Path, plans: list[tuple[Tree, Plan]]) -> None:
    """Carry out every stack's plan of a run with one commit point: the stacks of a shared base write one set of
    files and each keeps its lines, so a kill between two stacks' commits would leave a tree neither before nor after.
    A file two stacks write is staged once (their plans agree on it), a file two delete is deleted once, every
    index last."""
    plans = [(tree, plan) for tree, plan in plans if not plan.empty]
    if not plans:
        return
    writes: dict[str, bytes] = {}
    deletes: dict[str, None] = {}
    owners: dict[str, str] = {}
    for tree, plan in plans:
        writes.update(plan.write)
        deletes.update(dict.fromkeys(plan.delete))
        for rel in [*plan.write, *plan.delete]:
            owners.setdefault(rel, tree.stack)
    preflight(out, Plan(write=writes, delete=list(deletes)))
    trees = [tree for tree, _ in plans]
    run = run_name([tree.stack for tree in trees])
    staging, journal = journal_paths(out, run)
    pending = journal.with_suffix(".tmp")
    indexes = {tree.index_path for tree in trees}
    try:
        shutil.rmtree(staging, ignore_errors=True)
        one_flush = optimizations.on("syncfs") and _libc_syncfs() is not None
        for rel, content in writes.items():
            _stage_write(staging / rel, content, flush_each=not one_flush)
        # The indexes go last: cut off mid-way, the old index still describes every file not yet replaced.
        order = sorted(writes, key=lambda rel: (rel in indexes, rel))
        doc: dict[str, Any] = {"write": order, "delete": list(deletes)}
        if len(trees) > 1:
            doc["owners"] = dict(sorted(owners.items()))  # each entry held to its own stack's folders on recovery
        _stage_write(pending, json.dumps(doc).encode(), flush_each=not one_flush)
        if one_flush:
            _syncfs(pending.parent)  # the staged files and the pending journal, on disk before the commit rename
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        pending.unlink(missing_ok=True)
        remove_work_dir(out)
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        raise OwnershipError([f"{out / WORK_DIR}: staging the export failed ({why(exc)}){full}; nothing was "
                              "changed; hint: fix the cause and run the export again"]) from None
    os.replace(pending, journal)  # commit point
    recover(out, run, *trees)


# --- comparing -----------------------------------------------------------------------------------------------

def drift(out: Path, tree: Tree, owned: dict[str, str]) -> list[str]:
    """What differs in meaning between OUT and the tree (`owned`: its index, read_index): a line per file and, for a
    changed one, a unified diff of the file against what the export would write. Empty when equal. Writes nothing."""
    lines = []
    for rel, content in sorted(tree.files.items()):
        current = read_regular(out, rel)
        if current is None:
            lines.append(f"missing  {rel}")
            continue
        if current != content if rel in tree.edited else not _unchanged(out, tree, rel, current, content):
            lines.append(f"changed  {rel}")
            lines += ["  " + line for line in _unified(rel, current, content)]
    for rel in sorted(set(owned) - set(tree.files)):
        if read_regular(out, rel) is not None:
            lines.append(f"stale    {rel}")
    return lines


def _unified(rel: str, current: bytes, content: bytes) -> list[str]:
    import difflib

    old = current.decode("utf-8", errors="replace").splitlines()
    new = content.decode("utf-8", errors="replace").splitlines()
    return list(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}", lineterm=""))
