"""Shared fixtures. The real `__main__.py` runs under the Pulumi mock engine once per stack per session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gitops.engine import Capture, run_program  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
STACKS = ("dev", "prod")


@pytest.fixture(scope="session")
def captures() -> dict[str, Capture]:
    """The one owner of set_mocks for the shipped stacks: each stack's program runs once."""
    return {stack: run_program(stack) for stack in STACKS}


def make_project(directory: Path, stack_files: dict[str, str]) -> Path:
    """A project folder with the real Pulumi.yaml and __main__.py and the given stack files."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, directory / name)
    for stack, text in stack_files.items():
        (directory / f"Pulumi.{stack}.yaml").write_text(text)
    return directory


def stack_text(stack: str) -> str:
    return (ROOT / f"Pulumi.{stack}.yaml").read_text()


@pytest.fixture
def run_stack_text(tmp_path):
    """Run the real program for a stack file given as text (a variant of a shipped one)."""

    def run(text: str, stack: str = "variant") -> Capture:
        return run_program(stack, make_project(tmp_path / "project", {stack: text}))

    return run
