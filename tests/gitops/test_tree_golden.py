"""Golden snapshots of the whole exported tree of each stack (tests/golden/tree/<stack>/): any change to an emitter,
a component or a stack file shows as a reviewable diff of those files. `make golden` rewrites them."""

from __future__ import annotations

import json

import pytest

from conftest import STACKS
from golden_files import assert_golden_tree, exported_repository


@pytest.mark.parametrize("stack", STACKS)
def test_the_exported_tree_matches_its_golden_snapshot(captures, stack):
    out = exported_repository()
    entry = captures[stack].stack_outputs["layout"]["entryDir"]
    index_path = f"{entry}/export-index.json"
    index = json.loads((out / index_path).read_text(encoding="utf-8"))
    files = {rel: (out / rel).read_bytes() for rel in [*index["files"], index_path]}
    assert_golden_tree(f"tree/{stack}", files)
