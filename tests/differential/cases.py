"""The trees the differential sweeps found the walk and Flux parting on, kept as fixed cases
(tests/fixtures/walk-cases/<case>/, each a repository whose Flux root is ./clusters/home). Judged against kustomize by
`make test` and against `flux build` by `make e2e`; each case's test failed on the walk before its fix."""

from __future__ import annotations

from pathlib import Path

from differential.trees import ROOT_PATH, Tree

CASES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "walk-cases"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir())
# Where the walk knowingly differs from Flux (docs/flux-walk.md says why): each a repository, judged by a test that
# holds the difference to exactly the one documented.
DIFFERENCES_DIR = CASES_DIR.parent / "walk-differences"


def case_tree(name: str, where: Path = CASES_DIR) -> Tree:
    """The case as a Tree (files and symlinks as they are in git), so it is judged as a generated tree is."""
    tree = Tree(root=ROOT_PATH)
    base = where / name
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.is_symlink():
            tree.links[rel] = str(path.readlink())
        elif path.is_file():
            tree.files[rel] = path.read_bytes()
    return tree
