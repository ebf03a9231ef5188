"""Preview what an export would change, shaped like `pulumi preview --diff`, without the Pulumi CLI.

`python -m gitops.preview --stack prod --out <repository>` (`make preview STACK=prod OUT=...`) runs the program as the
export does (gitops/pipeline.py), reads the owned files the last export's index lists in OUT (read only, under the
shared lock) and prints per resource (Stack -> components -> objects, matched by API group, kind, namespace and name,
not by a Flux walk): `+` create, `~` update with each changed field's path, `-` delete, `+-` replace where Kubernetes
will not change a field in place (loud, with what Flux will do and the safe path), unchanged ones counted; then output
changes, warnings and `Resources: N to create, ...`. Colour on a terminal only; `--json` for CI. Exit 0 when it ran; 2
on an error (one line each) and when the export would refuse a replacement the stack file does not accept (the plan is
printed first). This module parses and prints; the plan is gitops/plan/, what OUT holds gitops/repo/current.py."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO

from gitops.engine import lazy_imports, optimizations
from model.errors import RefusalError

lazy_imports.install()  # before anything imports the SDK (as the export does)

# isort: split
from gitops import pipeline, sample  # noqa: E402
from gitops.engine.stacks import ROOT, add_project_dir_argument, stacks_together  # noqa: E402
from gitops.plan.plan import Plan, make_plan  # noqa: E402
from gitops.plan.render import render_json, render_text  # noqa: E402


class PreviewError(RefusalError):
    """What the preview cannot compare: the export would refuse, or OUT cannot be read (one line each)."""


def preview(stack: str, out: Path, project_dir: Path = ROOT) -> Plan:
    """Run the program for `stack` as the export does and compare it with OUT. Raises PreviewError (one line per
    problem) for everything the export would refuse before writing, and for an OUT it cannot read."""
    try:
        # The stacks that write into the same folders (a shared base) are built with it, as the export builds them:
        # the base's files are theirs together (tokens, the longest timeout).
        names = stacks_together([stack], project_dir)
        built = [pipeline.build(name, project_dir, lint=False) for name in names]
        pipeline.combine(built)
        return plan_for(built[0], out)
    except RefusalError as exc:
        raise PreviewError(exc.lines) from None


def plan_for(stack: pipeline.Stack, out: Path) -> Plan:
    """The plan of one stack already built (pipeline.build) against what OUT holds."""
    compared = pipeline.compare(stack, out)
    plan = make_plan(stack.capture, stack.tree, compared.current, str(out), stack.outputs.flux_graph.bootstrap.key)
    for level, line in pipeline.references(stack, out):  # an app the repository delivers, held to the gate
        plan.diagnostics.append((level, line))
    plan.refused, notices = pipeline.replacement_verdicts(stack, [s for s in plan.steps if s.op == "replace"], out)
    plan.diagnostics += [("warning", notice) for notice in notices]
    if compared.pending:
        plan.diagnostics.append(("warning", f"{out}: an export of {stack.name} was interrupted after its commit "
                                            f"point; the next export completes it (compared: the tree as it is now)"))
    return plan


def _use_colour(choice: str, stream: IO[str]) -> bool:
    if choice != "auto":
        return choice == "always"
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def main(argv: list[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    out: IO[str] = stdout or sys.stdout
    err: IO[str] = stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m gitops.preview", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stack", required=True, help="the stack to preview (Pulumi.<stack>.yaml)")
    # default: where `make export` without OUT wrote
    parser.add_argument("--out", help="root of the GitOps tree to compare with (default: build/sample/<sample>); "
                                      "only read")
    parser.add_argument("--json", action="store_true", help="one JSON document (for CI) instead of the text plan")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the plan: auto (default) on a terminal only, unless NO_COLOR is set")
    add_project_dir_argument(parser)
    args = parser.parse_args(argv)
    optimization_problem = optimizations.env_problem()
    if optimization_problem is not None:
        print(f"error: {optimization_problem}", file=err)
        return 2
    try:
        compared = Path(args.out) if args.out is not None else sample.last_out(Path(args.project_dir))
        plan = preview(args.stack, compared, args.project_dir)
    except PreviewError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=err)
        return 2
    if args.json:
        out.write(render_json(plan))
    else:
        out.write(render_text(plan, _use_colour(args.color, out)))
    for line in plan.refused:  # the export would refuse these: the preview fails as the export would
        print(f"error: {line}", file=err)
    return 2 if plan.refused else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as the export: no interpreter teardown of the SDK's modules and threads
