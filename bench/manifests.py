"""The exact object set the export writes for one stack of one project, as JSON for the cdk8s peer (bench/cdk8s_app.py).

`python bench/manifests.py STACK PROJECT_DIR OUT_JSON`: runs the project's program under the mock engine and builds
the tree as gitops/export.py does (`run_program` + `build_tree`), then writes the manifests of its objects grouped
by output folder. Run by bench/run.py in a process of its own, so a 1,000-app program's heap is gone afterwards.
"""

import gc
import json
import sys
from pathlib import Path

from gitops.engine.program import run_program  # installed into .venv by make (pip install -e .)
from gitops.tree import build_tree
from model.layout import Layout


def main(stack: str, project: Path, out: Path) -> None:
    gc.disable()  # as gitops/export.py does for the run (with it on, 1,000 apps turn superlinear)
    folders: dict[str, list] = {}
    capture = run_program(stack, project.resolve())
    for obj in build_tree(capture, Layout.from_output(stack, capture.stack_outputs["layout"])).objects:
        folders.setdefault(obj.path.rsplit("/", 1)[0], []).append(obj.manifest)
    out.write_text(json.dumps(folders))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
