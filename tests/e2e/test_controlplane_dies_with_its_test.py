"""Servers die with the tests that started them (issue 54): a test process killed before its fixtures' teardown runs
(SIGTERM from a CI time limit, SIGKILL of pytest or of an xdist worker) takes the control plane's servers with it
(tests/e2e/controlplane.py, spawn_server: the kernel's parent-death signal). A child Python process starts the real
ControlPlane, as a fixture does, and is killed; every server it started must be gone within seconds. Run by
`make e2e`."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from controlplane import BIN, TOOLS

pytestmark = pytest.mark.e2e

E2E = Path(__file__).resolve().parent
STARTED_WITHIN = 300.0  # the whole control plane, on a loaded 2-core machine
GONE_WITHIN = 15.0

# The stand-in for a test process: starts the control plane, prints its servers' pids as one JSON line, then waits
# (until the test kills it, or, should the test process itself die first, until it has no parent any more).
CHILD = """
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from controlplane import ControlPlane
parent = os.getppid()
plane = ControlPlane(Path(sys.argv[2]))
plane.start()
print(json.dumps({name: proc.pid for name, proc in plane.processes.items()}), flush=True)
while os.getppid() == parent:
    time.sleep(0.5)
"""


def stat(pid: int) -> tuple[str, str] | None:
    """The state and start time (in clock ticks since boot) of `pid` from /proc/<pid>/stat; None: no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": the command name may hold spaces
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def running(pid: int, started: str) -> bool:
    """The process started at `started` still runs as `pid`: a zombie is gone, and so is a pid reused since."""
    now = stat(pid)
    return now is not None and now[0] != "Z" and now[1] == started


def read_pids(child: subprocess.Popen[str], errors: Path) -> dict[str, int]:
    deadline = time.monotonic() + STARTED_WITHIN
    while (left := deadline - time.monotonic()) > 0:
        assert child.stdout is not None
        if select.select([child.stdout], [], [], left)[0]:
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"the child exited ({child.wait()}) before the control plane was ready:\n"
                            f"{errors.read_text(errors='replace')[-3000:]}")
            return json.loads(line)
    pytest.fail(f"the control plane not ready within {STARTED_WITHIN:.0f} s:\n{errors.read_text(errors='replace')}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_every_server_dies_within_seconds_when_the_test_process_that_started_it_is_killed(tmp_path, signum):
    missing = [t for t in TOOLS if not (BIN / t).is_file()]
    if missing:
        pytest.fail(f"{BIN}: {', '.join(missing)} not built; hint: run `make tools` (make e2e does)")
    errors = tmp_path / "child.stderr"
    with errors.open("wb") as err:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(E2E), str(tmp_path / "control-plane")],
                                 stdout=subprocess.PIPE, stderr=err, text=True)
    started: dict[int, str] = {}
    try:
        pids = read_pids(child, errors)
        assert sorted(pids) == sorted(TOOLS), pids
        for pid in pids.values():
            now = stat(pid)
            assert now is not None and now[0] != "Z", f"{pid} not running before the kill"
            started[pid] = now[1]
        child.send_signal(signum)
        assert child.wait(timeout=10) == -signum  # killed by the signal, no handler, no teardown
        killed = time.monotonic()
        while (alive := {n: p for n, p in pids.items() if running(p, started[p])}) and \
                time.monotonic() - killed < GONE_WITHIN:
            time.sleep(0.1)
        assert not alive, (f"still running {time.monotonic() - killed:.0f} s after the test process's "
                           f"{signum.name}: {alive}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid, start in started.items():  # what a failing run left behind, by pid, never a reused one
            if running(pid, start):
                os.kill(pid, signal.SIGKILL)
