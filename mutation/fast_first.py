"""A pytest plugin `make mutate` loads into each mutant's run (mutation/run.py): its tests fastest first.

mutmut runs a mutant's tests with -x in no set order, so a mutant a 0.1 s unit test kills could wait behind the whole
exports of tests/gitops/checks/test_delivery_one_line.py (37 s). Files are ordered by the time mutmut recorded for
their selected tests, and tests by their own time within a file, which keeps each file's tests together (its module
fixtures set up once). A survivor still runs every test; only the order changes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# mutmut's record of its stats run, in the folder the tests run from (mutmut.stats.save_stats writes it there);
# tests/project/test_mutation_fast_first.py holds the format to mutmut's own writer.
STATS = Path("mutmut-stats.json")


def recorded_durations(stats: Path = STATS) -> dict[str, float]:
    """Seconds per pytest node id, or nothing before mutmut's stats run has written them."""
    try:
        durations = json.loads(stats.read_text())["duration_by_test"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(k): float(v) for k, v in durations.items()} if isinstance(durations, dict) else {}


def fastest_first(node_ids: list[str], durations: dict[str, float]) -> list[str]:
    """The node ids by their file's total time, then their own (unknown: 0 s); ties keep their order."""
    per_file: dict[str, float] = {}
    for node in node_ids:
        per_file[node.split("::", 1)[0]] = per_file.get(node.split("::", 1)[0], 0.0) + durations.get(node, 0.0)
    return sorted(node_ids, key=lambda node: (per_file[node.split("::", 1)[0]], durations.get(node, 0.0)))


def pytest_collection_modifyitems(items: list[Any]) -> None:
    durations = recorded_durations()
    if durations:
        rank = {node: i for i, node in enumerate(fastest_first([item.nodeid for item in items], durations))}
        items.sort(key=lambda item: rank[item.nodeid])
