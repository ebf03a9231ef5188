"""Run one command, wait for it and report what it cost: `python -S bench/measure.py REPORT_JSON CMD [ARG...]`.

REPORT_JSON gets its wall time (spawn to exit), CPU time (user + system, of the command and of every child it
waited for: the cdk8s app's Node process included) and peak resident set (ru_maxrss, KiB: the largest of the
command and its waited-for children). Exits with the command's exit code.

bench/run.py measures every process through this small one rather than directly: on Linux, execve keeps the
high-water mark of the address space it replaces, so a process's ru_maxrss starts from the peak resident set of
the process that started it; bench/run.py is large (it builds the scale projects), this process is ~10 MB.
"""

import json
import os
import sys
import time


def main(report: str, cmd: list[str]) -> int:
    start = time.perf_counter()
    pid = os.posix_spawn(cmd[0], cmd, os.environ)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - start
    with open(report, "w") as f:
        json.dump({"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss}, f)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell reports it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
