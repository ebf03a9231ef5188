"""gitops/engine/stacks.py: a stack name that names no stack file gets the stack meant (the closest name, case aside)
and the way to create one, in the one refusal line."""

from __future__ import annotations

import pytest

from conftest import EXAMPLE
from gitops.export import main as export_main


@pytest.mark.parametrize(("typed", "hint"), [
    ("Prod", '--stack prod, or make new-stack STACK=Prod NODES="<node> ..." creates it'),
    ("prd", '--stack prod, or make new-stack STACK=prd NODES="<node> ..." creates it'),
    ("DEV", '--stack dev, or make new-stack STACK=DEV NODES="<node> ..." creates it'),
    ("staging", 'make new-stack STACK=staging NODES="<node> ..." creates it'),
])
def test_an_unknown_stack_gets_the_closest_stack_case_aside_and_how_to_create_one(tmp_path, capsys, typed, hint):
    out = tmp_path / "out"
    out.mkdir()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", typed, "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: Pulumi.{typed}.yaml: no such stack file; stacks: dev, prod; hint: {hint}", "nothing was written"]
