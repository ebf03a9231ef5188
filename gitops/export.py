"""Export the GitOps tree of one or more stacks: `python -m gitops.export --stack dev --out build/gitops`.

Runs the real `__main__.py` under the Pulumi SDK's mock engine (no CLI, no cluster), validates every object,
walks OUT as Flux would with the export's files in place (gitops/fluxview.py, gitops/checks/delivery.py), then writes
the tree atomically. `--check` writes nothing and exits 1 when OUT differs in meaning from what would be written,
printing a unified diff per changed file.
Exit codes: 0 ok, 1 drift (with --check), 2 a user mistake or a refused export (one line per problem on stderr).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from gitops.engine import lazy_imports, levers

if __name__ == "__main__" and levers.on("gc-off"):
    gc.disable()  # before the SDK's imports below; the run itself disables it in main() in any case
lazy_imports.install()  # before anything imports the SDK: pulumi_kubernetes with postponed annotations

from gitops.engine.program import run_program  # noqa: E402
from gitops.engine.stacks import ROOT, StackFileError, available_stacks  # noqa: E402


def _fail(lines: list[str], written: bool = False) -> int:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
    if not written:
        print("nothing was written", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.export", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stack", action="append", required=True,
                        help="stack to export (repeatable; 'all' = every Pulumi.<stack>.yaml)")
    parser.add_argument("--out", default="build/gitops", help="root of the GitOps tree (default: build/gitops)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if OUT differs")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--lint", action="store_true",
                        help="also run yamllint on the tree before writing (always on with --check)")
    parser.add_argument("--project-dir", type=Path, default=ROOT,
                        help="folder holding Pulumi.yaml, __main__.py and the stack files (default: this project)")
    args = parser.parse_args(argv)
    lever_problem = levers.env_problem()
    if lever_problem is not None:
        return _fail([lever_problem])

    # The SDK allocates many cyclic objects per resource; with the collector on, each full collection scans the
    # whole growing heap and the export turns superlinear (400 apps: 13 s with it, 7 s without). An export is a
    # short-lived process, so collect nothing until it is done (~0.7 GB peak at 1,000 apps).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    from components.config import ConfigError
    from components.evidence import EvidenceError
    from components.flux import GraphError
    from gitops.checks.validate import ExportValidationError, validate_tree
    from gitops.tree import PlacementError, build_tree
    stacks = available_stacks(args.project_dir) if args.stack == ["all"] else list(dict.fromkeys(args.stack))
    out = Path(args.out)
    trees = []
    captures = []
    try:
        for stack in stacks:
            capture = run_program(stack, args.project_dir.resolve())
            tree = build_tree(capture)
            # yamllint checks the emitter, which the tests hold to it on the real tree; a plain export skips it
            # (about a third of the export's time per object), --check and --lint run it.
            validate_tree(tree, capture.stack_outputs.get("appPolicy"), lint=args.check or args.lint)
            trees.append(tree)
            captures.append(capture)
    except (ConfigError, EvidenceError, GraphError, ExportValidationError) as exc:
        return _fail(exc.lines)
    except (StackFileError, PlacementError) as exc:
        return _fail([str(exc)])

    return into_out(args, out, captures, trees)


def into_out(args: argparse.Namespace, out: Path, captures: list, trees: list) -> int:
    """The part of an export (or check) that reads and writes OUT, for trees already built and validated: one
    export at a time (a check shares the lock, so it never sees a half-written tree), every problem one line."""
    from gitops.out.writer import OwnershipError, check_out, make_out, out_lock

    created: list[Path] = []
    code = 2
    try:
        check_out(out, creating=not args.check)
        if not args.check:
            # OUT exists before the lock is taken, so every export into it locks the same folder; a refused first
            # export removes what it created here, and nothing else was written.
            created = make_out(out)
        with out_lock(out, exclusive=not args.check):
            code = _check(args, out, captures, trees) if args.check else _export(args, out, captures, trees)
            return code
    except OwnershipError as exc:
        return _fail(exc.lines, written=exc.partial)
    except OSError as exc:  # the last net: a filesystem that fails in a way no check foresaw
        where = exc.filename or out
        return _fail([f"{where}: {exc.strerror or type(exc).__name__}; hint: fix the cause and run the export again"])
    finally:
        if code != 0:
            for folder in reversed(created):
                try:
                    folder.rmdir()  # only while empty: never removes what another export wrote meanwhile
                except OSError:
                    break


def _check(args: argparse.Namespace, out: Path, captures: list, trees: list) -> int:
    from gitops.out.writer import drift, interrupted

    problems = flux_walk(out, captures, trees)
    if problems:
        return _fail(problems)
    pending = [t.stack for t in trees if interrupted(out, t.stack)]
    if pending:
        print(f"drift: an export of {', '.join(pending)} was interrupted; run `make export` to complete it")
    differences = [line for tree in trees for line in drift(out, tree)]
    if differences:
        print(f"drift: {out} differs from what `make export` would write:")
        for line in differences:
            print(f"  {line}")
    if differences or pending:
        return 1
    if not args.quiet:
        print(f"ok: {out} matches the export of {', '.join(t.stack for t in trees)}")
    return 0


def _export(args: argparse.Namespace, out: Path, captures: list, trees: list) -> int:
    from gitops.out.writer import plan_changes, recover, write_tree

    if out.is_dir():
        for tree in trees:  # an interrupted export is completed first, so the walk sees the tree it left
            done = recover(out, tree.stack, tree)
            if done and not args.quiet:
                print(f"{tree.stack}: {done}")
    problems = flux_walk(out, captures, trees)
    if problems:
        return _fail(problems)
    plans = [plan_changes(out, tree) for tree in trees]  # refuse before writing anything for any stack
    for tree, plan in zip(trees, plans, strict=True):
        write_tree(out, tree, plan)
        if not args.quiet:
            print(f"{tree.stack}: {len(plan.write)} written, {len(plan.delete)} pruned, "
                  f"{len(plan.unchanged)} unchanged -> {out}/")
    for tree in trees:  # loud, on stderr, even with --quiet: this is the gate holding Plex back
        for notice in tree.notices:
            print(f"WARNING {tree.stack}: {notice}", file=sys.stderr)
    return 0


def flux_walk(out: Path, captures: list, trees: list) -> list[str]:
    """Walk OUT as Flux would, as it is and as it will be with every stack's files written and stale ones pruned;
    the refusals, one line each (empty: go on). Completes each tree with what the walk found (DELIVERY.md)."""
    from gitops.checks.delivery import check_stack, walk_stack
    from gitops.fluxview import RepoView
    from gitops.out.writer import read_index
    from gitops.tree import finish_tree

    owned = {tree.stack: read_index(out, tree) for tree in trees}
    writes = {rel: content for tree in trees for rel, content in tree.files.items()}
    deletes = {rel for tree in trees for rel in owned[tree.stack] if rel not in tree.files}
    before, after = RepoView(out), RepoView(out, writes, deletes)
    problems: list[str] = []
    for capture, tree in zip(captures, trees, strict=True):
        outputs = capture.stack_outputs
        walked = walk_stack(tree, outputs["fluxGraph"], before, after)
        problems += check_stack(walked, outputs["fluxGraph"], after, set(owned[tree.stack]), len(outputs["nodes"]))
        tree.notices += walked.notices
        finish_tree(capture, tree, walked)
    return problems


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: unloading pulumi_kubernetes' thousands of classes and joining the SDK's idle
    # executor threads costs ~0.3 s per run. Every file is written and on disk by now; flush the streams, leave.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
