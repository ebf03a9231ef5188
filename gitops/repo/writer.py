"""Write a stack's tree into OUT: ownership-checked, pruning, atomic; or compare it (`--check`).

Ownership: `<entryDir>/export-index.json` lists every file the stack's last export wrote, with a hash of its
content. A re-export replaces or deletes only those files, and refuses to overwrite a file it does not own or one
edited by hand since (a hand-written file never silently disappears).

Ownership and drift compare meaning, not bytes: a YAML file whose documents equal what the export would write is
unchanged whatever a formatter did to its indentation, quoting or comments, and is left as it is on disk. A file
already equal to its target counts as done whatever the index says, so a run after any interruption converges.

Everything under OUT is untrusted (docs/threat-model.md): index and journal entries must be relative,
normalized paths inside this stack's owned folders, named as the export names its files; no path is read, written
or deleted through a symlink; every obstacle (a file where a folder must be, a folder that cannot be written) is
found before the commit point; every failure is one line, never a traceback.

Atomicity: every new or changed file is first written under `OUT/.gitops-export/<stack>.staging/`, and the journal
naming the renames and deletions beside it as `<stack>.tmp`; all of it is flushed to disk, by one
`syncfs(2)` of OUT's file system (the `syncfs` lever, gitops/engine/levers.py: one flush instead of an fsync per file,
the same guarantee: nothing is renamed into place before every staged byte is durable) or, with the lever off or no
syncfs on the platform, by an fsync of each file; then the journal is put in place with one `os.replace` (the
commit point); then the renames run,
the index last. A kill before the commit point leaves the previous tree whole (the next run discards the staging
folder); a kill after it is rolled forward by the next run before it does anything else. One export at a time per
OUT: `out_lock` holds an exclusive `flock` on the OUT folder itself (nothing written for it), `--check` a shared one.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops import headers, index
from gitops.engine import levers
from gitops.index import HINT, has_shared_mark, normalized, sha as _sha
from gitops.tree import Tree
from model.errors import RefusalError
from model.layout import WORK_DIR

LOCK_WAIT_SECONDS = 120


class OwnershipError(RefusalError):
    """One line per problem. `partial`: raised after the commit point, the tree is half-way (the journal stays)."""

    def __init__(self, lines: list[str], partial: bool = False) -> None:
        super().__init__(lines)
        self.partial = partial


@dataclass
class Plan:
    write: dict[str, bytes] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.write and not self.delete


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


# --- paths under OUT -----------------------------------------------------------------------------------------

def _symlink_in(out: Path, rel: str) -> str | None:
    """The first component of `rel` under OUT that is a symlink (never followed), else None."""
    current = out
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            return current.relative_to(out).as_posix()
        if not current.exists():
            return None
    return None


def read_regular(out: Path, rel: str) -> bytes | None:
    """The bytes of OUT/rel, or None when nothing is there. A symlink on the way, a folder or an unreadable file
    is an OwnershipError naming it: the export never reads through a link."""
    link = _symlink_in(out, rel)
    if link is not None:
        raise OwnershipError([f"{out / link}: a symlink where the export reads or writes; the export never follows "
                              "links under OUT; hint: replace it with a real file or folder"])
    path = out / rel
    if not path.exists():
        return None
    if not path.is_file():
        raise OwnershipError([f"{path}: not a regular file where the export reads or writes one; hint: move it away"])
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OwnershipError([f"{path}: cannot be read ({_why(exc)}); hint: check its permissions"]) from None


def check_out(out: Path, creating: bool) -> None:
    """OUT must be a folder (or, when `creating`, creatable): one line otherwise."""
    try:
        _check_out(out, creating)
    except OSError as exc:  # a name longer than the file system allows, a folder that cannot be searched, …
        raise OwnershipError([f"{out}: cannot be used ({_why(exc)}); hint: choose another --out"]) from None


def _check_out(out: Path, creating: bool) -> None:
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise OwnershipError([f"{out}: not a folder; hint: give --out the root folder of the GitOps repository"])
        work = out / WORK_DIR
        if work.is_symlink() or (work.exists() and not work.is_dir()):
            raise OwnershipError([f"{work}: not a real folder; the export keeps its work there and never follows a "
                                  "link; hint: delete it"])
        return
    if not creating:
        return
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OwnershipError([f"{parent}: not a folder, so {out} cannot be created; hint: choose another --out"])


def make_out(out: Path) -> list[Path]:
    """Create OUT (and missing parents); the folders created, outermost first."""
    missing = []
    current = out
    while not current.exists() and not current.is_symlink():
        missing.append(current)
        current = current.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OwnershipError([f"{out}: cannot be created ({_why(exc)}); hint: choose another --out"]) from None
    return list(reversed(missing))


@contextmanager
def out_lock(out: Path, exclusive: bool) -> Iterator[None]:
    """Hold a lock on OUT for the whole export (exclusive) or check (shared); an export creates OUT first
    (`make_out`), a check of a missing OUT locks its nearest existing parent. A second export waits, saying so on
    stderr, and gives up with one line after LOCK_WAIT_SECONDS. Advisory (`flock`): it orders this program's
    runs, nothing else is kept out."""
    target = out
    while not target.is_dir() and target != target.parent:
        target = target.parent
    try:
        fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise OwnershipError([f"{out}: cannot be opened ({_why(exc)}); hint: check its permissions"]) from None
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline, told = time.monotonic() + LOCK_WAIT_SECONDS, False
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    print(f"waiting: another export into {out} is running", file=sys.stderr)
                    told = True
                if time.monotonic() > deadline:
                    raise OwnershipError([f"{out}: another export has held it for {LOCK_WAIT_SECONDS} s; hint: let it "
                                          "finish, or stop it, then run again"]) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# --- the index -----------------------------------------------------------------------------------------------

def _hash(rel: str, data: bytes) -> str:
    try:
        return index.compared_hash(rel, data)
    except ValueError:
        return "unparsable:" + _sha(data)  # equals no recorded hash: a broken file counts as edited by hand


def same_content(rel: str, current: bytes, content: bytes) -> bool:
    return current == content or _hash(rel, current) == _hash(rel, content)


def matches_record(rel: str, current: bytes, recorded: str) -> bool:
    """The file is as the last export left it. Indexes written before content hashes recorded plain sha256."""
    return _hash(rel, current) == recorded or (not recorded.startswith("yaml:") and _sha(current) == recorded)


def _index_files(out: Path, rel: str, allowed: list[tuple[str, bool]]) -> dict[str, str]:
    data = read_regular(out, rel)
    if data is None:
        return {}
    files, problem = index.files_doc(data)
    if files is None:
        raise OwnershipError([f"{out / rel}: {problem}; {HINT}"])
    problems = []
    for entry, digest in files.items():
        why = index.entry_problem(entry, digest, allowed)
        if why is None and (out / entry).exists() and not (out / entry).is_file():
            why = "not a regular file"
        if why is not None:
            problems.append(f"{out / rel}: files.{entry}: {why}; the export trusts no entry it could not have "
                            f"written; {HINT}")
    if problems:
        raise OwnershipError(list(dict.fromkeys(problems)))  # one link under many files is one line
    return {str(k): str(v) for k, v in files.items()}


def _foreign_entries(out: Path, index: str, tree: Tree, owned: dict[str, str]) -> list[str]:
    """A shared base's index may only name files the export writes now or that carry its generated header: the base
    and platform/ hold the repository's own files, which a forged index entry must never get pruned."""
    if not tree.layout.shared_base:
        return []
    problems = []
    for rel in owned:
        if rel in tree.files or rel.startswith(tree.layout.records + "/"):
            continue
        data = read_regular(out, rel)
        if data is not None and not has_shared_mark(data):
            problems.append(f"{out / index}: files.{rel}: a file without the export's generated header; the export "
                            "trusts no entry it could not have written; hint: restore the index from git")
    return problems


def read_edits(out: Path, tree: Tree) -> dict[str, dict[str, Any]]:
    """The lines the stack's last export keeps in hand-written files (`edits` of its index): a shared base's
    kustomization.yaml entries, an overlay's cluster-vars keys. Each must be a YAML file of the repository and a
    shape the export writes."""
    data = read_regular(out, tree.index_path)
    edits = None if data is None else index.edits_doc(data)
    if edits is None:
        return {}
    problems, result = [], {}
    for rel, spec in (edits.items() if isinstance(edits, dict) else [("(root)", None)]):
        if index.edit_is_the_exports(rel, spec, tree.layout):
            result[str(rel)] = spec
        else:
            problems.append(f"{out / tree.index_path}: edits.{rel}: not an edit the export makes (an entry of "
                            f"{tree.layout.entry_dir}/kustomization.yaml, or GPU_PLATFORM_ keys of the overlay's "
                            f"cluster-vars); {HINT}")
    if problems:
        raise OwnershipError(problems)
    return result


def read_index(out: Path, tree: Tree) -> dict[str, str]:
    """The files the stack's last export owns; an index at the legacy place counts too (and is itself owned)."""
    owned = _index_files(out, tree.index_path, index.owned_folders(tree.layout, tree.stack, legacy=False))
    foreign = _foreign_entries(out, tree.index_path, tree, owned)
    if foreign:
        raise OwnershipError(foreign)
    legacy = index.legacy_index_path(tree.stack)
    if legacy != tree.index_path:
        data = read_regular(out, legacy)
        if data is not None:
            old = _index_files(out, legacy, index.owned_folders(tree.layout, tree.stack, legacy=True))
            owned = {**old, **owned, legacy: _sha(data)}
    return owned


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
            return data is not None and matches_record(file, data, recorded) and _hash(file, data) == digest

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
    for rel in [*plan.write, *plan.delete]:
        link = _symlink_in(out, rel)
        if link is not None:
            problems.append(f"{out / link}: a symlink on the way to {rel}; the export never follows links under OUT; "
                            "hint: replace it with a real folder")
            continue
        current = out
        parts = rel.split("/")
        for part in parts[:-1]:
            current = current / part
            if current.exists() and not current.is_dir():
                problems.append(f"{current}: a file stands where the export needs a folder (for {rel}); "
                                "hint: move it away")
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
        probe = folder / f".gitops-export-probe.{os.getpid()}"
        try:
            os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
            os.unlink(probe)
        except OSError as exc:
            problems.append(f"{folder}: the export cannot write here ({_why(exc)}); nothing was changed; "
                            "hint: check the folder's permissions and attributes")
    if problems:
        raise OwnershipError(list(dict.fromkeys(problems)))  # one link under many files is one line


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


def _paths(out: Path, stack: str) -> tuple[Path, Path]:
    work = out / WORK_DIR
    return work / f"{stack}.staging", work / f"{stack}.journal"


def interrupted(out: Path, stack: str) -> bool:
    """True when a committed export of `stack` was cut off mid-swap (leftover staging alone changes nothing)."""
    return _paths(out, stack)[1].exists()


def _read_journal(journal: Path, allowed: list[tuple[str, bool]] | None) -> dict:
    hint = f"hint: delete {journal} and run the export again"
    try:
        doc = json.loads(journal.read_bytes())
    except (OSError, ValueError, RecursionError):
        raise OwnershipError([f"{journal}: (root): not a journal the export wrote; {hint}"]) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in ("write", "delete")):
        raise OwnershipError([f"{journal}: write/delete: not a journal the export wrote; {hint}"])
    for key in ("write", "delete"):
        for rel in doc[key]:
            why = "not a relative, normalized path" if normalized(rel) is None else None
            if why is None and allowed is not None:
                why = index.entry_problem(rel, "0" * 64, allowed)
            if why is not None:
                raise OwnershipError([f"{journal}: {key}: {rel!r}: {why}; {hint}"])
    return doc


def recover(out: Path, stack: str, tree: Tree | None = None) -> str | None:
    """Finish or discard an interrupted export of `stack`. Returns what it did, for the log. With `tree`, the
    journal's entries are held to the stack's owned folders."""
    staging, journal = _paths(out, stack)
    if journal.is_symlink() or staging.is_symlink():
        raise OwnershipError([f"{out / WORK_DIR}: holds a symlink; hint: delete the folder and run the export again"])
    if journal.exists():
        allowed = None if tree is None else (index.owned_folders(tree.layout, tree.stack, False)
                                             + index.owned_folders(tree.layout, tree.stack, True))
        doc = _read_journal(journal, allowed)
        _apply(out, staging, doc)
        journal.unlink()
        shutil.rmtree(staging, ignore_errors=True)
        _remove_work_dir(out)
        return "completed an interrupted export"
    pending = journal.with_suffix(".tmp")  # the journal written aside, not yet put in place by the commit
    if staging.exists() or pending.is_file() or pending.is_symlink():
        shutil.rmtree(staging, ignore_errors=True)
        pending.unlink(missing_ok=True)  # a symlink there is removed, never followed
        _remove_work_dir(out)
        return "discarded an interrupted export that had not reached its commit point"
    return None


def _remove_work_dir(out: Path) -> None:
    try:
        (out / WORK_DIR).rmdir()
    except OSError:
        pass  # another stack's export is in flight, or it never existed


def _apply(out: Path, staging: Path, journal: dict) -> None:
    try:
        for rel in journal["write"]:
            if _symlink_in(out, rel) is not None:
                raise OwnershipError([f"{out / rel}: a symlink appeared on the way since the export began; "
                                      "hint: remove it, then run the export again to complete"], partial=True)
            staged = staging / rel
            if staged.is_file() and not staged.is_symlink():  # else: renamed before the interruption
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, out / rel)
        for rel in journal["delete"]:
            target = out / rel
            if _symlink_in(out, rel) is not None or not target.is_file():
                continue  # deleted before the interruption, or no longer a file we may delete
            target.unlink()
            parent = target.parent
            while parent != out and parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    except OSError as exc:
        raise OwnershipError([f"{out}: the export stopped half-way ({_why(exc)}); the journal is kept and the next "
                              "run completes it; hint: fix the cause, then run the export again"],
                             partial=True) from None


def write_tree(out: Path, tree: Tree, plan: Plan) -> Plan:
    """Carry out `plan` (plan_changes, after recover) in OUT, which exists and is locked (gitops/pipeline.py)."""
    if plan.empty:
        return plan
    preflight(out, plan)
    staging, journal = _paths(out, tree.stack)
    pending = journal.with_suffix(".tmp")
    try:
        shutil.rmtree(staging, ignore_errors=True)
        one_flush = levers.on("syncfs") and _libc_syncfs() is not None
        for rel, content in plan.write.items():
            _stage_write(staging / rel, content, flush_each=not one_flush)
        # The index goes last: cut off mid-way, the old index still describes every file not yet replaced.
        order = sorted(plan.write, key=lambda rel: (rel == tree.index_path, rel))
        _stage_write(pending, json.dumps({"write": order, "delete": plan.delete}).encode(), flush_each=not one_flush)
        if one_flush:
            _syncfs(pending.parent)  # the staged files and the pending journal, on disk before the commit rename
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        pending.unlink(missing_ok=True)
        _remove_work_dir(out)
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        raise OwnershipError([f"{out / WORK_DIR}: staging the export failed ({_why(exc)}){full}; nothing was "
                              "changed; hint: fix the cause and run the export again"]) from None
    os.replace(pending, journal)  # commit point
    recover(out, tree.stack, tree)
    return plan


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
