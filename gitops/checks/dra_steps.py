"""No step of the DRA route's move skipped between two exports into the same repository (docs/dra.md).

The evidence gate (model/dra/gate.py) proves the cluster reached the step before the one a stack asks for; this
check adds what only the repository knows: which step the export it holds is at (the last export's index records the
stack's `draMigration` output). Evidence can be stale, from before a rollback; the repository cannot. So an export
may move one export-step forward (device plugin -> 1, 1 -> 3, 3 -> 5) or any number back (a rollback), never two
forward. A repository without the stack's index (its first export) has nothing to compare: the evidence alone
decides."""

from __future__ import annotations

from typing import Any

from gitops.tree import Tree
from model.dra.gate import STEPS
from model.outputs import ProgramOutputs

_NAMES = {0: "the device-plugin route", **{step: f"step {step} ({stage})" for stage, step in STEPS.items()}}
_NEXT = {0: 1, 1: 3, 3: 5, 5: 5}


def recorded_step(outputs: dict[str, Any] | None) -> int:
    """The step the recorded outputs say the repository's export is at; 0 on the device-plugin route. An entry this
    program did not write (hand-edited, another shape) counts as none: the evidence gate still decides."""
    migration = (outputs or {}).get("draMigration")
    step = migration.get("step") if isinstance(migration, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step in _NAMES else 0


def skipped_steps(stacks: list[tuple[Tree, ProgramOutputs]], recorded: dict[str, dict[str, Any] | None]) -> list[str]:
    """One line per stack whose export would skip a step of the move. `recorded`: the outputs each stack's index in
    the repository records (None: recorded none); a stack not in it has no index there (its first export)."""
    problems = []
    for tree, outputs in stacks:
        if tree.stack not in recorded:
            continue
        before = recorded_step(recorded[tree.stack])
        migration = outputs.dra_migration
        now = migration.step if migration else 0
        if migration is None or now <= _NEXT[before]:
            continue
        allowed = _NAMES[_NEXT[before]]
        problems.append(f"Pulumi.{tree.stack}.yaml: gpu-platform:gpu.dra.stage: \"{migration.stage}\": a step skipped:"
                        f" {tree.index_path} records the export in the repository at "
                        f"{_NAMES[before]}, and the next export may go to {allowed} only; each step must be merged "
                        f"and proven on the cluster before the next; hint: export {allowed} first "
                        "(docs/dra.md)")
    return problems
