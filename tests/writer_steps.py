"""The writer's steps for one stack, in the order gitops/pipeline.py runs them (OUT checked and created, an
interrupted export completed, the index read once, the plan, the write), for the writer's own tests: they write
hand-made trees, with no program run and no walk of the repository in between."""

from __future__ import annotations

from pathlib import Path

from gitops.out import writer
from gitops.tree import Tree


def write_tree(out: Path, tree: Tree, plan: writer.Plan | None = None) -> writer.Plan:
    writer.check_out(out, creating=True)
    writer.make_out(out)
    if plan is None:
        writer.recover(out, tree.stack, tree)
        plan = plan_changes(out, tree)
    return writer.write_tree(out, tree, plan)


def plan_changes(out: Path, tree: Tree) -> writer.Plan:
    return writer.plan_changes(out, tree, writer.read_index(out, tree))


def drift(out: Path, tree: Tree) -> list[str]:
    return writer.drift(out, tree, writer.read_index(out, tree))
