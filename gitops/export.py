"""Export the GitOps tree of one or more stacks: `python -m gitops.export --stack dev [--out <repository>]`.

Runs the real `__main__.py` under the Pulumi SDK's mock engine (no CLI, no cluster), validates every object,
walks OUT as Flux would with the export's files in place, then writes the tree atomically: gitops/pipeline.py does
it all, this module parses the arguments and prints. `--check` writes nothing and exits 1 when OUT differs in
meaning from what would be written, printing a unified diff per changed file.
Exit codes: 0 ok, 1 drift (with --check), 2 a user mistake or a refused export (one line per problem on stderr).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import sys
from pathlib import Path

from gitops.engine import lazy_imports, optimizations

lazy_imports.install()  # before anything imports the SDK: pulumi_kubernetes with postponed annotations

from gitops import pipeline, sample  # noqa: E402
from gitops.checks.kyverno import kyverno_on_path  # noqa: E402
from gitops.engine.stacks import ROOT, add_project_dir_argument, available_stacks, stacks_together  # noqa: E402
from gitops.headers import program_version  # noqa: E402
from model.errors import RefusalError  # noqa: E402

_EPILOG = """examples:
  python -m gitops.export --stack prod                             into a fresh copy of the sample, the change shown
  python -m gitops.export --stack prod --out ../home-network-k3s   into your GitOps repository (a clone)
  python -m gitops.export --stack prod --out ../home-network-k3s --summary build/pr.md --stage
                                  the same, the pull request's description written, exactly its files staged

stacks exported together:
  stacks whose folders meet (the stacks of one shared base, or two stack files naming one componentsDir) are
  exported, checked and removed together, whatever --stack names: one stack alone would overwrite what the other
  wrote there. Each stack's DELIVERY.md names the stacks exported with it.

exit codes:
  0  exported (or, with --check, the repository matches)
  1  --check only: the repository differs from what the export would write
  2  a mistake or a refusal: one line per problem on stderr, nothing written"""


def _fail(lines: list[str], written: bool = False) -> int:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
    if not written:
        print("nothing was written", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.export", description=(__doc__ or "").splitlines()[0],
                                     epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {program_version()}")
    parser.add_argument("--stack", action="append", required=True,
                        help="stack to export (repeatable; 'all' = every Pulumi.<stack>.yaml)")
    parser.add_argument("--out", help="root of your GitOps repository (a clone); default: a fresh copy of the sample "
                                      "repository under build/sample/, the change printed at the end")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if OUT differs")
    parser.add_argument("--remove", action="store_true",
                        help="take the stacks' export out of OUT: the files it owns, the lines it keeps in "
                             "hand-written files, its index")
    parser.add_argument("--rewrite-headers", action="store_true",
                        help="give the files an older export wrote the current header, and change nothing else in "
                             "them (an older header is never drift)")
    parser.add_argument("--quiet", action="store_true",
                        help="print only errors and the gate's warnings (nothing on what was written)")
    parser.add_argument("--lint", action="store_true",
                        help="also run yamllint on the tree before writing (always on with --check)")
    parser.add_argument("--summary", metavar="FILE",
                        help="also write what the pull request changes (objects created, updated, replaced, deleted, "
                             "the repository's own objects the GPU gate judges, the lines in your files, the records; "
                             "the GPU gate; the next step) as Markdown to FILE, for its description; FILE must be "
                             "outside OUT")
    parser.add_argument("--base", metavar="REF",
                        help="measure the summary against REF of OUT's Git work tree (default: the merge-base of HEAD "
                             "with the default branch, so exporting twice on a branch says the same)")
    parser.add_argument("--stage", action="store_true",
                        help="after the export, `git add` exactly the paths it wrote or pruned in OUT (nothing else)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout instead of the text (an export's result: each "
                             "stack's files written, pruned and unchanged, the warnings, the refusals; the shape is in "
                             "docs/exported-tree.md)")
    add_project_dir_argument(parser)
    args = parser.parse_args(argv)
    if args.json and (args.check or args.remove):
        parser.error("--json is the export's result; --check and --remove print text")
    if args.out is None and (args.check or args.remove):
        parser.error("--check and --remove need --out, the repository to compare or clean")
    if (args.summary or args.base or args.stage) and (args.check or args.remove):
        parser.error("--summary, --base and --stage are an export's; --check and --remove write no change")
    args.quiet = args.quiet or args.json  # the document is the output
    optimization_problem = optimizations.env_problem()
    if optimization_problem is not None:
        return _fail([optimization_problem])

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
    stacks = available_stacks(args.project_dir) if args.stack == ["all"] else list(dict.fromkeys(args.stack))
    # Stacks that write into one folder (a shared base) export together, whatever the command line names: one alone
    # would overwrite the other's files or fork the base. Said once, in --help and in each stack's DELIVERY.md: a
    # line on every run would be noise.
    stacks = stacks_together(stacks, args.project_dir)
    out = Path(args.out) if args.out is not None else None
    try:
        built = [pipeline.build(stack, args.project_dir, lint=args.check or args.lint) for stack in stacks]
        pipeline.combine(built)
    except RefusalError as exc:
        _print_json(args, out or Path("build/sample"), refused=exc.lines)
        return _fail(exc.lines)
    if out is not None:
        return into_out(args, out, built)
    return _into_sample(args, built)


def _into_sample(args: argparse.Namespace, built: list[pipeline.Stack]) -> int:
    """No --out: export into a fresh copy of the sample repository and end with the change it made there."""
    out = sample.fresh_copy(sample.sample_of(Path(args.project_dir)))
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    code = into_out(args, shown if Path.cwd() == ROOT else out, built)
    if code == 0 and not args.quiet:
        lines = sample.change(out)
        print(f"the change in {shown}, a fresh copy of the sample repository (what your pull request would hold):")
        print("\n".join(f"  {line}" for line in lines) if lines else "  (git is not installed: no diff to show)")
        print(f"  next: `git -C {shown} diff` shows it line by line; OUT=<your repository> exports into yours")
    return code


def into_out(args: argparse.Namespace, out: Path, built: list[pipeline.Stack]) -> int:
    """The part of an export (or check) that reads and writes OUT, for stacks already built: what it did or why it
    refused, printed."""
    try:
        pipeline.out_placement(out, list(dict.fromkeys([getattr(args, "project_dir", ROOT), ROOT])))
        summary = getattr(args, "summary", None)
        if summary and Path(summary).resolve().is_relative_to(out.resolve()):
            return _fail([f"--summary {summary}: inside OUT ({out}), so the pull request would carry it as a file; "
                          "hint: write it outside the repository, e.g. build/pr-summary.md"])
        if summary and (not Path(summary).resolve().parent.is_dir() or Path(summary).is_dir()):
            return _fail([f"--summary {summary}: not a file in an existing folder; hint: name a file whose folder "
                          "exists, e.g. build/pr-summary.md after `mkdir -p build`"])
        if args.check:
            cli = kyverno_on_path()  # opt-in: the repository's own policies judge the objects when the CLI is there
            return _print_check(args, out, pipeline.check(built, out, cli), [s.name for s in built])
        if getattr(args, "remove", False):
            return _print_removed(args, out, pipeline.remove(built, out))
        exported = pipeline.export(built, out, getattr(args, "rewrite_headers", False), getattr(args, "base", None),
                                   getattr(args, "stage", False))
        return _print_export(args, out, exported)
    except pipeline.OutRefusedError as exc:
        _print_recovered(args, exc.recovered)
        _print_json(args, out, refused=exc.lines)
        return _fail(exc.lines, written=exc.written)


def _print_check(args: argparse.Namespace, out: Path, checked: pipeline.Checked, stacks: list[str]) -> int:
    if checked.pending:
        print(f"drift: an export of {', '.join(checked.pending)} was interrupted; run `make export` to complete it")
    if checked.differences:
        print(f"drift: {out} differs from what `make export` would write:")
        for line in checked.differences:
            print(f"  {line}")
    if not args.quiet:
        for line in checked.judged:
            print(f"kyverno: {line}, none refused")
    if checked.differences or checked.pending:
        return 1
    if not args.quiet:
        print(f"ok: {out} matches the export of {', '.join(stacks)}")
    return 0


def _print_recovered(args: argparse.Namespace, recovered: list[tuple[str, str]]) -> None:
    if not args.quiet:
        for stack, what in recovered:
            print(f"{stack}: {what}")


def _print_removed(args: argparse.Namespace, out: Path, removed: pipeline.Exported) -> int:
    _print_recovered(args, removed.recovered)
    if not args.quiet:
        for stack, plan in removed.written:  # what is written back is a file of yours with the export's lines out
            files = f"{len(plan.delete)} file{'s' if len(plan.delete) != 1 else ''} deleted"
            yours = f", its lines taken out of {len(plan.write)} of yours" if plan.write else ""
            print(f"{stack}: removed from {out}/: {files}{yours}")
    return 0


def _print_json(args: argparse.Namespace, out: Path, exported: pipeline.Exported | None = None,
                refused: list[str] | None = None) -> None:
    """`--json`: the export's result as one document (its shape: docs/exported-tree.md, "The export's --json")."""
    if not getattr(args, "json", False):
        return
    done = exported or pipeline.Exported()
    summaries = {s.stack: s.as_json() for s in done.pull_request.summaries}
    doc = {
        "out": str(out),
        "exitCode": 2 if refused else 0,
        "stacks": [{"stack": stack, "written": sorted(plan.write), "pruned": sorted(plan.delete),
                    "unchanged": len(plan.unchanged), "summary": summaries[stack]} for stack, plan in done.written],
        "notices": [{"stack": stack, "line": line, "next": step or None}
                    for stack, notice in done.notices for line, _, step in [notice.partition("; next: ")]],
        "warnings": [{"line": w.line, "next": w.next_step} for w in done.warnings],
        "rendererChanges": [change.as_json() for change in done.pull_request.renderer_changes],
        "refused": refused or [],
    }
    print(json.dumps(doc, indent=2, sort_keys=False))


def _print_export(args: argparse.Namespace, out: Path, exported: pipeline.Exported) -> int:
    _print_json(args, out, exported)
    _print_recovered(args, exported.recovered)
    if not args.quiet:
        for stack, plan in exported.written:
            print(f"{stack}: {len(plan.write)} written, {len(plan.delete)} pruned, "
                  f"{len(plan.unchanged)} unchanged -> {out}/")
        print("\n".join(exported.pull_request.text()))
    if getattr(args, "summary", None):
        try:
            Path(args.summary).write_text(exported.pull_request.markdown(), encoding="utf-8")
        except OSError as exc:  # the export is written: only its description is missing
            print(f"error: --summary {args.summary}: cannot be written ({exc.strerror or type(exc).__name__}); hint: "
                  "export again with a file you can write (the repository is exported; nothing more changes)",
                  file=sys.stderr)
            return 2
    for stack, notice in exported.notices:  # loud, on stderr, even with --quiet: this is the gate holding Plex back
        line, _, next_step = notice.partition("; next: ")  # the warning's one line, its next step below it
        print(f"WARNING {stack}: {line}" + (f"\n  next: {next_step}" if next_step else ""), file=sys.stderr)
    for change in exported.pull_request.renderer_changes:  # step 4, the change a reviewer must see: in full, once
        shown = [*change.diff, *([change.optional_line()] if change.optional else []), f"next: {change.next_step()}"]
        print(f"WARNING {change.line()}\n" + "\n".join(f"  {line}" for line in shown), file=sys.stderr)
    if not args.quiet:
        for warning in exported.warnings:
            print(f"warning: {warning.line}\n  next: {warning.next_step}", file=sys.stderr)
        if getattr(args, "out", None) is not None and exported.status:  # the sample prints its own diff stat
            _print_status(out, exported, getattr(args, "stage", False))
    return 0


def _print_status(out: Path, exported: pipeline.Exported, staged: bool) -> None:
    """The change in OUT's work tree as `git status --short` shows it, new files each on a line, and the next step:
    `git add` of exactly those paths (a `git commit -a` would leave the new files out)."""
    print(f"the change in {out} ({'staged' if staged else 'not staged'}):")
    print("\n".join(f"  {line}" for line in exported.status))
    if staged:
        print(f"  next: `git -C {out} diff --cached` shows it line by line; commit it on your branch")
    else:
        paths = " ".join(shlex.quote(p) for p in exported.paths)
        print(f"  next: `git -C {out} add -- {paths}` (new files included), then commit on your branch")


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: unloading pulumi_kubernetes' thousands of classes and joining the SDK's idle
    # executor threads costs ~0.3 s per run. Every file is written and on disk by now; flush the streams, leave.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
