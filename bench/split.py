"""One cold export, timed by phase; prints JSON. Run by bench/run.py in a fresh interpreter each time.

Phases: imports (everything the export imports, pulumi_kubernetes modules the program uses included),
render (the program under the mock engine + the tree), validate (schemas, substitutions, secrets, policies),
write (atomic write of the tree into an empty folder).
"""

import gc
import json
import sys
import tempfile
import time
from pathlib import Path

started = time.perf_counter()  # the project is importable: make installs it into .venv (pip install -e .)

import pulumi_kubernetes.apiextensions  # noqa: E402,F401  (imported lazily by the program otherwise)
import pulumi_kubernetes.apps.v1  # noqa: E402,F401
import pulumi_kubernetes.core.v1  # noqa: E402,F401
import pulumi_kubernetes.networking.v1  # noqa: E402,F401

from gitops.engine import run_program  # noqa: E402
from gitops.tree import build_tree  # noqa: E402
from gitops.validate import validate_tree  # noqa: E402
from gitops.writer import write_tree  # noqa: E402

gc.disable()  # as gitops/export.py does for the run
imported = time.perf_counter()
stack = sys.argv[1]
capture = run_program(stack)
tree = build_tree(capture)
rendered = time.perf_counter()
validate_tree(tree, capture.stack_outputs.get("appPolicy"), lint=False)  # as a plain export does
validated = time.perf_counter()
with tempfile.TemporaryDirectory() as out:
    write_tree(Path(out), tree)
    written = time.perf_counter()
# Floor of the render phase: the same program again, warm, in the same process (mock engine + SDK only).
warm_start = time.perf_counter()
warm = run_program(stack)
warm_s = time.perf_counter() - warm_start
print(json.dumps({
    "imports": imported - started, "render": rendered - imported,
    "validate": validated - rendered, "write": written - validated, "objects": len(tree.objects),
    "engine_warm": warm_s, "registrations": len(warm.registrations),
}))
