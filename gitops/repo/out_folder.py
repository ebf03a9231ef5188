"""OUT as the export finds it, before anything is computed against it: checked, created, locked, an interrupted
export completed, and what each stack's last export left there read once (`opened`). The writer (gitops/repo/writer.py)
plans and writes afterwards under the same lock; both read OUT only through `read_regular` and the journal here.

Everything under OUT is untrusted (docs/threat-model.md): index and journal entries must be relative, normalized paths
inside this stack's owned folders, named as the export names its files; no path is read, written or deleted through a
symlink; every failure is one line, never a traceback. The journal (`OUT/.gitops-export/<stack>.journal`) is the
writer's commit point: once it is in place, `recover` rolls its renames and deletions forward (the export itself, or,
if it was killed, the next run before it reads anything); a staging folder or journal without a commit is discarded.
One export at a time per OUT: `out_lock` flocks the OUT folder itself (no lock file), exclusive; `--check` shared."""

from __future__ import annotations

import fcntl
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

from gitops import index, sample
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



def why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__

# --- paths under OUT -----------------------------------------------------------------------------------------

def symlink_in(out: Path, rel: str) -> str | None:
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
    link = symlink_in(out, rel)
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
        raise OwnershipError([f"{path}: cannot be read ({why(exc)}); hint: check its permissions"]) from None


def check_out(out: Path, creating: bool) -> None:
    """OUT must be a folder (or, when `creating`, creatable): one line otherwise."""
    try:
        _check_out(out, creating)
    except OSError as exc:  # a name longer than the file system allows, a folder that cannot be searched, …
        raise OwnershipError([f"{out}: cannot be used ({why(exc)}); hint: choose another --out"]) from None


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


# The program's own scratch folder in its checkout (git-ignored): the only place an export may create OUT.
SCRATCH_DIR = "build"


def placement(out: Path, checkouts: list[Path]) -> bool:
    """Where OUT may be, checked before anything is read or written: never the program's checkout or a folder in it
    (its `build/` aside), and an existing folder unless it lies in that `build/`, where the export creates it. Returns
    whether the export may create OUT; raises OwnershipError (one line) otherwise."""
    check_out(out, creating=True)  # a file where a folder is needed, a name the file system cannot hold
    try:
        target = out.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise OwnershipError([f"{out}: cannot be resolved ({type(exc).__name__}); hint: choose another --out"]) \
            from None
    for checkout in checkouts:
        root = checkout.resolve()
        if target.is_relative_to(root / SCRATCH_DIR):
            return True
        if target.is_relative_to(root):
            raise OwnershipError([f"{out}: inside this program's own checkout, where the export would write beside "
                                  "its Python packages; hint: give --out the root of your GitOps repository, or leave "
                                  "--out out to export into a fresh copy of the sample repository, "
                                  f"{sample.last_out(checkouts[0])}"])
    if not out.exists() and not out.is_symlink():
        raise OwnershipError([f"{out}: no such folder; the export never creates a repository it was not given; hint: "
                              f"clone your GitOps repository there (git clone <url> {out}) or check the path"])
    return False


def is_work_tree(out: Path) -> bool:
    """OUT is the root of a Git work tree (its `.git`, a folder or a worktree's file): a change shows as a diff."""
    return (out / ".git").exists()


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
        raise OwnershipError([f"{out}: cannot be created ({why(exc)}); hint: choose another --out"]) from None
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
        raise OwnershipError([f"{out}: cannot be opened ({why(exc)}); hint: check its permissions"]) from None
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


# --- the journal ---------------------------------------------------------------------------------------------

def run_name(stacks: list[str]) -> str:
    """The name of one commit of several stacks (`dev+prod`), a stack's own name when it is alone: one journal
    and one commit point for every stack of a run, so a kill never leaves one stack of a shared base written and
    the other not. Stack names hold no `+` (Pulumi's)."""
    return "+".join(sorted(set(stacks)))


def journal_paths(out: Path, run: str) -> tuple[Path, Path]:
    work = out / WORK_DIR
    return work / f"{run}.staging", work / f"{run}.journal"


def _runs_in_work(out: Path) -> list[str]:
    """The runs with a staging folder, a journal or a pending journal in OUT's work folder."""
    work = out / WORK_DIR
    if work.is_symlink() or not work.is_dir():
        return []
    return sorted({entry.name.rsplit(".", 1)[0] for entry in work.iterdir()
                   if entry.name.endswith((".staging", ".journal", ".tmp"))})


def interrupted(out: Path, stack: str) -> bool:
    """True when a committed export of `stack` (alone or with others) was cut off mid-swap (leftover staging alone
    changes nothing)."""
    return any(stack in run.split("+") and journal_paths(out, run)[1].exists() for run in _runs_in_work(out))


def _read_journal(journal: Path, allowed: dict[str, list[tuple[str, bool]]] | None) -> dict:
    """The journal, every entry a relative, normalized path; with `allowed` (each stack's owned folders), each
    entry inside the folders of the stack it belongs to (`owners`, or the journal's one stack)."""
    hint = f"hint: delete {journal} and run the export again"
    try:
        doc = json.loads(journal.read_bytes())
    except (OSError, ValueError, RecursionError):
        raise OwnershipError([f"{journal}: (root): not a journal the export wrote; {hint}"]) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in ("write", "delete")):
        raise OwnershipError([f"{journal}: write/delete: not a journal the export wrote; {hint}"])
    owners = doc.get("owners", {})
    if not isinstance(owners, dict):
        raise OwnershipError([f"{journal}: owners: not a journal the export wrote; {hint}"])
    alone = journal.name.removesuffix(".journal")
    for key in ("write", "delete"):
        for rel in doc[key]:
            why = "not a relative, normalized path" if normalized(rel) is None else None
            if why is None and allowed is not None:
                owner = owners.get(rel, alone) if isinstance(rel, str) else alone
                why = (index.entry_problem(rel, "0" * 64, allowed[owner]) if owner in allowed
                       else f"belongs to {owner!r}, not a stack of this journal")
            if why is not None:
                raise OwnershipError([f"{journal}: {key}: {rel!r}: {why}; {hint}"])
    return doc


def _each_once(folders: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The owned folders of both layouts, each folder once in its first place (whole subtree if either says so)."""
    merged: dict[str, bool] = {}
    for folder, deep in folders:
        merged[folder] = merged.get(folder, False) or deep
    return list(merged.items())


def owned_by_each(trees: list[Tree]) -> dict[str, list[tuple[str, bool]]]:
    return {tree.stack: _each_once(index.owned_folders(tree.layout, tree.stack, False)
                                   + index.owned_folders(tree.layout, tree.stack, True)) for tree in trees}


def recover(out: Path, run: str, *trees: Tree) -> str | None:
    """Finish or discard an interrupted export of `run` (a stack, or several: run_name). Returns what it did, for
    the log. With `trees` (every stack of the run), the journal's entries are held to their stack's owned folders."""
    staging, journal = journal_paths(out, run)
    if journal.is_symlink() or staging.is_symlink():
        raise OwnershipError([f"{out / WORK_DIR}: holds a symlink; hint: delete the folder and run the export again"])
    if journal.exists():
        doc = _read_journal(journal, owned_by_each(list(trees)) if trees else None)
        _apply(out, staging, doc)
        journal.unlink()
        shutil.rmtree(staging, ignore_errors=True)
        remove_work_dir(out)
        return "completed an interrupted export"
    pending = journal.with_suffix(".tmp")  # the journal written aside, not yet put in place by the commit
    if staging.exists() or pending.is_file() or pending.is_symlink():
        shutil.rmtree(staging, ignore_errors=True)
        pending.unlink(missing_ok=True)  # a symlink there is removed, never followed
        remove_work_dir(out)
        return "discarded an interrupted export that had not reached its commit point"
    return None


def recover_runs(out: Path, trees: list[Tree], recovered: list[tuple[str, str]]) -> None:
    """Every interrupted export of these stacks finished or discarded, alone or with others, before anything is
    read: (stack, what it did) appended to `recovered` as it goes. A committed export of these stacks with another
    stack this run does not hold is refused (its entries could not be checked): the run that holds them all
    completes it."""
    mine = {tree.stack: tree for tree in trees}
    for run in _runs_in_work(out):
        members = run.split("+")
        if not set(members) & set(mine):
            continue  # another stack's (the split layout exports stacks apart)
        missing = [m for m in members if m not in mine]
        if missing and journal_paths(out, run)[1].exists():
            stacks = " ".join(f"--stack {m}" for m in members)
            raise OwnershipError([f"{journal_paths(out, run)[1]}: an export of {', '.join(members)} stopped after its "
                                  f"commit point; hint: run the export with {stacks} to complete it"])
        what = recover(out, run, *[mine[m] for m in members if m in mine])
        if what:
            recovered += [(m, what) for m in members if m in mine]


# Where an earlier version kept the walk's mirror and overlays and the Kyverno check's input, each named for the
# process that made it (they now live in private temporary folders outside OUT); what its killed run left behind is
# removed by the next run.
_SCRATCH = ("flux-view.", "flux-overlay.", "kyverno.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process: never ours to judge
    return True


def remove_stale_scratch(out: Path, exclusive: bool) -> None:
    """The scratch an earlier version's killed run left under OUT's work folder, removed: all of it under the
    exclusive lock (no other run can be using any), only that of processes no longer running under the shared one (a
    concurrent check's is in use). A link there is removed, never followed."""
    work = out / WORK_DIR
    if work.is_symlink() or not work.is_dir():
        return
    for entry in sorted(work.iterdir()):
        name = entry.name
        prefix = next((p for p in _SCRATCH if name.startswith(p)), None)
        pid = name[len(prefix):].split(".")[0] if prefix else ""
        if not pid.isdigit() or (not exclusive and _alive(int(pid)) and int(pid) != os.getpid()):
            continue
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink(missing_ok=True)
        else:
            shutil.rmtree(entry, ignore_errors=True)
    remove_work_dir(out)


# The name an earlier version probed a folder's writability with (gitops/repo/writer.py now leaves no name): a run
# killed between its create and its unlink left it behind, empty.
LEGACY_PROBE = ".gitops-export-probe."


def remove_legacy_probes(out: Path, trees: list[Tree]) -> None:
    """The empty probes an earlier version's killed run left in OUT and the folders the export writes into, removed
    (under the exclusive lock no run of the program can be using one): only an empty regular file of that exact name,
    in a folder reached without a link."""
    folders = {""}
    for tree in trees:
        for rel in tree.files:
            parts = rel.split("/")[:-1]
            folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    for rel in sorted(folders):
        folder = out / rel if rel else out
        if (rel and symlink_in(out, rel) is not None) or not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            stale = [e for e in entries if e.name.startswith(LEGACY_PROBE) and e.name[len(LEGACY_PROBE):].isdigit()
                     and e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_size == 0]
        for entry in stale:
            os.unlink(entry.path)


def remove_work_dir(out: Path) -> None:
    try:
        (out / WORK_DIR).rmdir()
    except OSError:
        pass  # another stack's export is in flight, or it never existed


def _apply(out: Path, staging: Path, journal: dict) -> None:
    try:
        for rel in journal["write"]:
            if symlink_in(out, rel) is not None:
                raise OwnershipError([f"{out / rel}: a symlink appeared on the way since the export began; "
                                      "hint: remove it, then run the export again to complete"], partial=True)
            staged = staging / rel
            if staged.is_file() and not staged.is_symlink():  # else: renamed before the interruption
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, out / rel)
        for rel in journal["delete"]:
            target = out / rel
            if symlink_in(out, rel) is not None or target.is_dir():
                continue  # no longer a file we may delete, nor a way to its folders we may follow
            if target.is_file():
                target.unlink()
            # else deleted before the interruption, which may have come before its emptied folders went
            parent = target.parent
            while parent != out and not parent.is_symlink():
                if parent.is_dir():
                    if any(parent.iterdir()):
                        break
                    parent.rmdir()
                elif parent.exists():
                    break  # a file where the folder was: not ours to judge
                parent = parent.parent  # gone before the interruption: its parent may be left, emptied
    except OSError as exc:
        raise OwnershipError([f"{out}: the export stopped half-way ({why(exc)}); the journal is kept and the next "
                              "run completes it; hint: fix the cause, then run the export again"],
                             partial=True) from None

# --- what the last export left --------------------------------------------------------------------------------

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
    if tree.layout.base_group is None:
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


# --- opening -------------------------------------------------------------------------------------------------

@dataclass
class Records:
    """What one stack's last export left in OUT, read once after any interrupted export was completed."""

    owned: dict[str, str] = field(default_factory=dict)  # the files its index owns, with their recorded hashes
    edits: dict[str, dict[str, Any]] = field(default_factory=dict)  # the lines it keeps in hand-written files
    index: bytes | None = None  # its index as it stands (the stack outputs it recorded), None when there is none
    interrupted: bool = False  # a committed export of it is still to be completed (a check completes nothing)


@contextmanager
def opened(out: Path, trees: list[Tree], exclusive: bool,
           recovered: list[tuple[str, str]]) -> Iterator[dict[str, Records]]:
    """OUT checked, created for an export (a refused first export removes the folders it created) and locked for the
    whole block: one export at a time, a check sharing the lock so it never sees a half-written tree. An export first
    completes every interrupted export of its stacks, appending (stack, what it did) to `recovered` as it goes (a later
    refusal still reports it), so that what it reads is the tree they left. Yields each stack's Records by name."""
    check_out(out, creating=exclusive)
    # OUT exists before the lock is taken, so every export into it locks the same folder.
    created = make_out(out) if exclusive else []
    ok = False
    try:
        with out_lock(out, exclusive=exclusive):
            if out.is_dir():
                remove_stale_scratch(out, exclusive)
            if exclusive:
                remove_legacy_probes(out, trees)
                recover_runs(out, trees, recovered)
            yield {tree.stack: _records(out, tree) for tree in trees}
        ok = True
    finally:
        if not ok:
            for folder in reversed(created):
                try:
                    folder.rmdir()  # only while empty: never removes what another export wrote meanwhile
                except OSError:
                    break


def _records(out: Path, tree: Tree) -> Records:
    if not out.is_dir():  # a check of an OUT not made yet
        return Records()
    return Records(owned=read_index(out, tree), edits=read_edits(out, tree), index=read_regular(out, tree.index_path),
                   interrupted=interrupted(out, tree.stack))
