"""One cold prod export, timed by phase; prints JSON. Run by bench/run.py in a fresh interpreter each time.

Phases, in the export's order (gitops/pipeline.py `build`, then `export`):
imports (everything the export imports, the pulumi_kubernetes modules the program uses and the walk's modules
included), render (the program under the mock engine + the tree), validate (schemas, substitutions, secrets,
policies), walk (`gitops.pipeline.walk`: OUT walked as Flux would, before and after, and the tree finished with
what it found), write (plan and atomic write of the tree). OUT is a fresh copy of examples/flux-bootstrap/repo
(a repository as `flux bootstrap` leaves it: the realistic case), copied outside the timed phases.
"""

import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

started = time.perf_counter()  # the project is importable: make installs it into .venv (pip install -e .)

from gitops.engine import lazy_imports  # noqa: E402  (first, as in the export: the import-time optimization)

lazy_imports.install()

# isort: split
import pulumi_kubernetes.apiextensions  # noqa: E402,F401  (imported lazily by the program otherwise)
import pulumi_kubernetes.apps.v1  # noqa: E402,F401
import pulumi_kubernetes.core.v1  # noqa: E402,F401
import pulumi_kubernetes.networking.v1  # noqa: E402,F401

from gitops import pipeline  # noqa: E402
from gitops.checks.validate import validate_tree  # noqa: E402
from gitops.engine.program import run_program  # noqa: E402
from gitops.engine.stacks import ROOT  # noqa: E402
from gitops.repo import out_folder  # noqa: E402
from gitops.repo.writer import plan_changes, write_tree  # noqa: E402
from gitops.tree import build_tree  # noqa: E402
from model.outputs import ProgramOutputs  # noqa: E402

EXAMPLE = ROOT / "examples" / "flux-bootstrap"  # its stacks and, in repo/, the repository they export into
BOOTSTRAP = EXAMPLE / "repo"

gc.disable()  # as gitops/export.py does for the run
imported = time.perf_counter()
stack = sys.argv[1]
capture = run_program(stack, EXAMPLE)
outputs = ProgramOutputs.from_output(stack, capture.stack_outputs)
tree = build_tree(capture, outputs.layout)
rendered = time.perf_counter()
validate_tree(tree, outputs.app_policy, lint=False)  # as a plain export does
validated = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "out"
    shutil.copytree(BOOTSTRAP, out)
    walk_start = time.perf_counter()
    try:
        records = {stack: out_folder.Records(owned=out_folder.read_index(out, tree))}
        pipeline.against_repository(out, [pipeline.Stack(capture, outputs, tree)], records)
    except pipeline.OutRefusedError as exc:
        sys.exit("\n".join(exc.lines))
    walked = time.perf_counter()
    write_tree(out, tree, plan_changes(out, tree, records[stack].owned))
    written = time.perf_counter()
# Floor of the render phase: the same program again, warm, in the same process (mock engine + SDK only).
warm_start = time.perf_counter()
warm = run_program(stack, EXAMPLE)
warm_s = time.perf_counter() - warm_start
print(json.dumps({
    "imports": imported - started, "render": rendered - imported, "validate": validated - rendered,
    "walk": walked - walk_start, "write": written - walked, "objects": len(tree.objects),
    "engine_warm": warm_s, "registrations": len(warm.registrations),
}))
