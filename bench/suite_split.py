"""Where the test suite's time goes (issues 9 and 12: "the suite ≤ 15 s"): a pytest plugin that times, inside each
test, the mock-engine program runs (gitops.engine.program.run_program), the waits for child processes (kubectl,
fresh Python interpreters, forked exports) and the rest, in one process. Prints one table; asserts nothing.

    PYTHONPATH=bench .venv/bin/python -m pytest -p suite_split -q      (or: make bench, which runs it)

Timers, not a profiler: each wrapped call adds a few microseconds, so the figures are the suite's own. The plugin is
imported before conftest.py and the test modules, so every `from gitops.engine import run_program` gets the timed one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import gitops.engine.program as engine

_timed_so_far: dict[str, tuple[int, float]] = {}  # category: (calls, seconds)
_timing = False  # a timed call inside another (subprocess.run waits with os.waitpid) is counted once, by the outer


def _timed(category: Callable[..., str], function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _timing
        if _timing:
            return function(*args, **kwargs)
        name = category(*args, **kwargs)
        _timing = True
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            calls, seconds = _timed_so_far.get(name, (0, 0.0))
            _timed_so_far[name] = (calls + 1, seconds + time.perf_counter() - start)
            _timing = False
    return wrapper


def _child_kind(args: Any = None, *_: Any, **kwargs: Any) -> str:
    argv = args if args is not None else kwargs.get("args")
    first = os.path.basename(str(argv[0] if isinstance(argv, list | tuple) and argv else argv))
    if first == "kubectl":
        return "child: kubectl"
    return "child: Python interpreter" if first.startswith("python") else f"child: {first}"


engine.run_program = _timed(lambda *a, **k: "mock-engine program runs", engine.run_program)
subprocess.run = _timed(_child_kind, subprocess.run)
# The forked, killed exports; a Popen waited for outside subprocess.run would land here too (none in the suite).
os.waitpid = _timed(lambda *a, **k: "child: forked exports (os.waitpid)", os.waitpid)


def pytest_runtest_call(item: Any) -> None:
    item.user_properties.append(("hypothesis", bool(getattr(item.obj, "is_hypothesis_test", False))))


_per_test: dict[str, float] = {}


def pytest_runtest_logreport(report: Any) -> None:
    names = ["all test phases (setup, call, teardown)"]
    if report.when == "call" and dict(report.user_properties).get("hypothesis"):
        names.append("hypothesis tests (whole calls)")
    for name in names:
        _per_test[name] = _per_test.get(name, 0.0) + report.duration


_started = time.perf_counter()


def pytest_unconfigure(config: Any) -> None:
    wall = time.perf_counter() - _started
    rows: list[tuple[str, int | None, float]] = sorted(((name, calls, seconds) for name, (calls, seconds)
                                                      in _timed_so_far.items()), key=lambda row: -row[2])
    rows += [(name, None, seconds) for name, seconds in _per_test.items()]
    stream = sys.__stdout__ or sys.stdout  # pytest captures sys.stdout; the table goes to the real one
    write = stream.write
    write(f"\nsuite split, one process: {wall:.1f} s from plugin import to the end\n")
    for name, calls, seconds in rows:
        count = f"{calls:5d} calls" if calls is not None else " " * 11
        write(f"  {name:45s} {count} {seconds:7.1f} s  {100 * seconds / wall:5.1f}%\n")
