"""The repository's own yamllint (gitops/repo/lintconfig.py says where it is looked for) judges every YAML file the
run writes, after the reports: a problem the export would add to the repository is refused; a hand-written file's own
older problems are not the export's.
"""

from __future__ import annotations

from pathlib import Path

from gitops.repo import lintconfig
from gitops.repo.out_folder import OwnershipError, read_regular
from gitops.tree import Tree


def lint_problems(trees: list[Tree], out: Path) -> list[str]:
    """Every YAML file the run writes, by the repository's own yamllint configuration (none: nothing to judge)."""
    found, refused = lintconfig.repository_lint(out)
    if found is None:
        return refused
    config, lint = found
    problems: list[str] = []
    seen: set[str] = set()
    for tree in trees:
        for rel, content in sorted(tree.files.items()):
            if rel in seen or not rel.endswith((".yaml", ".yml")):
                continue
            seen.add(rel)
            older: set[str] = set()
            if rel in tree.edited:  # a hand-written file: its own older problems are not the export's to fix
                before = _read(out, rel)
                older = {_rule_of(p) for p in lint.problems(rel, before)} if before is not None else set()
            for problem in lint.problems(rel, content):
                if _rule_of(problem) not in older:
                    problems.append(f"{out / rel}: {problem.split(': ', 1)[-1]}, by the repository's own {config}; "
                                    "hint: the export must write what the repository's lint accepts: report it, and "
                                    "set gitops.sequenceIndent to the repository's style meanwhile")
    return problems


def _rule_of(problem: str) -> str:
    """A problem without its position, so a line moved by an insertion is still the same older problem."""
    return problem.split(": ", 1)[-1]


def _read(out: Path, rel: str) -> bytes | None:
    try:
        return read_regular(out, rel)
    except OwnershipError:
        return None  # the export refused it before: own_file_lines reads every file it edits
