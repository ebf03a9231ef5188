"""`make mutate`: mutation testing of the safety modules with mutmut, one module at a time, each against its own tests.

For every module in mutation/modules.toml: the working tree (tracked and untracked files git does not ignore) is
copied to build/mutate/<module>/ with a setup.cfg that mutates that module only and runs only its listed tests;
`mutmut run` copies it again into mutants/ there (mutmut 3 never touches the sources it mutates), isolating the run
from edits made meanwhile. Results: killed (a test failed or timed out), survived (every test passed, or none ran the
code), equivalent (a survivor listed in mutation/equivalent.toml, left out of the score). Score = killed / (mutants -
equivalent). Exit 0 when every module meets its target, 1 when one does not, 2 on error. The table, the survivors with
their diffs and a JSON report are written under build/mutate/.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
OUT = ROOT / "build" / "mutate"

# mutmut's verdicts (mutmut.stats.status_by_exit_code) and how the score counts them.
KILLED = {"killed", "timeout", "segfault", "caught by type check"}
SURVIVED = {"survived", "no tests"}
INCOMPLETE = {"not checked", "skipped", "check was interrupted by user", "suspicious"}


TIMEOUT_MULTIPLIER = 2.0
TIMEOUT_CONSTANT_S = 10.0


class MutateError(Exception):
    pass


@dataclass(frozen=True)
class Module:
    path: str
    tests: tuple[str, ...]
    target: float

    @property
    def slug(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")


@dataclass(frozen=True)
class Equivalent:
    module: str
    mutant: str
    change: tuple[str, ...]
    reason: str

    @property
    def function(self) -> str:
        return function_of(self.mutant)


@dataclass
class Result:
    module: Module
    tests: list[str]
    seconds: float = 0.0
    status: dict[str, str] = field(default_factory=dict)  # mutant -> mutmut verdict
    diffs: dict[str, str] = field(default_factory=dict)  # survivor -> diff
    equivalent: dict[str, Equivalent] = field(default_factory=dict)  # survivor -> entry

    @property
    def total(self) -> int:
        return len(self.status)

    @property
    def killed(self) -> int:
        return sum(s in KILLED for s in self.status.values())

    @property
    def timeouts(self) -> int:
        return sum(s == "timeout" for s in self.status.values())

    @property
    def survivors(self) -> list[str]:
        return sorted((m for m, s in self.status.items() if s in SURVIVED and m not in self.equivalent), key=natural)

    @property
    def score(self) -> float:
        counted = self.total - len(self.equivalent)
        return 100.0 * self.killed / counted if counted else 100.0


def natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def function_of(mutant: str) -> str:
    """`model.evidence.x_load_evidence__mutmut_16` -> `model.evidence.x_load_evidence`."""
    return re.sub(r"__mutmut_\d+$", "", mutant)


def changed_lines(diff: str) -> tuple[str, ...]:
    """The removed and added lines of a unified diff, whitespace collapsed: what an equivalent entry is matched on."""
    return tuple(normal(line) for line in diff.splitlines()
                 if line[:1] in "+-" and not line.startswith(("+++", "---")))


def normal(line: str) -> str:
    return line[0] + " ".join(line[1:].split())


def load_modules(path: Path) -> list[Module]:
    table = tomllib.loads(path.read_text()).get("modules", {})
    modules = []
    for name, spec in table.items():
        if not isinstance(spec, dict) or not spec.get("tests"):
            raise MutateError(f"{path.relative_to(ROOT)}: {name}: needs tests = [...]")
        modules.append(Module(name, tuple(spec["tests"]), float(spec.get("target", 95))))
    return modules


def load_equivalents(path: Path) -> list[Equivalent]:
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    out = []
    for i, e in enumerate(entries):
        missing = {"module", "mutant", "change", "reason"} - set(e)
        if missing:
            raise MutateError(f"{path.relative_to(ROOT)}: equivalent[{i}]: missing {', '.join(sorted(missing))}")
        out.append(Equivalent(e["module"], e["mutant"], tuple(normal(c) for c in e["change"]), e["reason"]))
    return out


def project_files() -> list[str]:
    """The working tree as git sees it: tracked and untracked files, minus what .gitignore excludes."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                                capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as exc:
        raise MutateError(f"cannot list the project's files with git: {exc}") from None
    return sorted(f for f in listed if f and not f.startswith(("mutants/", "build/")) and (ROOT / f).is_file())


def stage(module: Module, files: list[str], resume: bool = False,
          recheck: bool = False) -> tuple[Path, list[str], bool]:
    """A copy of the working tree for this module, with the mutmut config that runs its tests only, its tests, and
    whether an earlier run was resumed. `resume`: keep the copy an interrupted run left (the tree as it was when that
    run started) and mutmut's results in it. `recheck` (with `resume`): see recheck_survivors."""
    work = OUT / module.slug
    if module.path not in files:
        raise MutateError(f"mutation/modules.toml: {module.path}: no such file in the project")
    resumed = resume and (work / "setup.cfg").is_file() and (work / "mutants").is_dir()
    if resumed and recheck:
        recheck_survivors(module, work, files)
    elif not resumed:
        shutil.rmtree(work, ignore_errors=True)
        for f in files:
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, work / f)
    tests = []
    for pattern in module.tests:
        matched = sorted(f for f in files if fnmatch.fnmatch(f, pattern)) if glob.has_magic(pattern) else \
            ([pattern] if pattern in files else [])
        if not matched and not glob.has_magic(pattern):
            raise MutateError(f"mutation/modules.toml: {module.path}: test file {pattern} does not exist")
        tests += [t for t in matched if t not in tests]
    pyproject = work / "pyproject.toml"
    if pyproject.exists() and "mutmut" in tomllib.loads(pyproject.read_text()).get("tool", {}):
        raise MutateError("pyproject.toml: [tool.mutmut] would override the per-module settings this runner writes "
                          "(mutmut reads pyproject.toml before setup.cfg); configure modules in mutation/modules.toml")
    top = sorted({f.split("/", 1)[0] for f in files} - {"tests", "setup.cfg", "pyproject.toml"})
    (work / "setup.cfg").write_text("\n".join([
        "# Written by mutation/run.py for one module; see mutation/modules.toml.",
        "[mutmut]",
        f"source_paths={module.path}",
        f"only_mutate={module.path}",
        "also_copy=", *(f"    {t}" for t in top),
        "pytest_add_cli_args_test_selection=", *(f"    {t}" for t in tests),
        # A mutant's tests fastest first (mutation/fast_first.py): a unit test kills it before any whole export runs.
        "pytest_add_cli_args=", "    -p", "    mutation.fast_first",
        # The tests run the Pulumi program under the SDK's mock engine (grpc), which does not survive a fork from a
        # process that has run it: workers are forked from a server that has only collected the tests.
        "process_isolation=forkserver",
        # A mutant's CPU-time limit is (its tests' time + constant) x multiplier x 2. mutmut's defaults (1 s, 15)
        # let a mutant that loops forever in the writer hold a worker for 38 min; (time + 10 s) x 4 still leaves a
        # surviving mutant, which runs each of its tests once, ample room (the 10 s: a child also collects its
        # tests, which took a 0.9 s selection past 8 s of CPU). A change here re-runs timeouts only.
        f"timeout_multiplier={TIMEOUT_MULTIPLIER}",
        f"timeout_constant={TIMEOUT_CONSTANT_S}",
        "",
    ]))
    return work, tests, resumed


def recheck_survivors(module: Module, work: Path, files: list[str]) -> None:
    """The survivors of a finished run checked again against the tests as they are now: the working tree's files
    (the tests, and the other modules, whose wording the tests may have followed) replace the copy's, and only the
    survivors lose their verdict, so mutmut runs those alone (new tests get their coverage recorded first). Sound
    only while the module itself is unchanged (refused otherwise) and tests were added or refactored, not removed: a
    killed mutant stays killed. A changed test list in modules.toml makes mutmut reset every verdict: a full run."""
    try:
        changed = (work / module.path).read_bytes() != (ROOT / module.path).read_bytes()
    except OSError as exc:
        raise MutateError(f"{module.path}: cannot compare with its run's copy ({exc.strerror}): "
                          "run it afresh") from None
    if changed:
        raise MutateError(f"{module.path} changed since its run in {work.relative_to(ROOT)}: run it afresh")
    for f in files:
        if f != module.path and f != "setup.cfg":
            for copy in (work / f, work / "mutants" / f):
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, copy)
    meta = work / "mutants" / f"{module.path}.meta"
    try:
        data = json.loads(meta.read_text())
        verdicts = data["exit_code_by_key"]
    except (OSError, ValueError, KeyError) as exc:
        raise MutateError(f"{meta.relative_to(ROOT)}: no verdicts to re-check ({exc}): run it afresh") from None
    from mutmut.stats import status_by_exit_code
    for name, code in verdicts.items():
        if status_by_exit_code[code] in SURVIVED:
            verdicts[name] = None
    meta.write_text(json.dumps(data))


def run_mutmut(module: Module, work: Path, jobs: int) -> float:
    mutmut = Path(sys.executable).parent / "mutmut"
    log = work / "mutmut.log"
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run([str(mutmut), "run", "--max-children", str(jobs)], cwd=work, stdout=out,
                              stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - start
    if code != 0:
        tail = log.read_text(errors="replace").replace("\r", "\n").splitlines()[-15:]
        raise MutateError(f"{module.path}: mutmut exited {code} (the module's tests must pass unmutated); "
                          f"see {log.relative_to(ROOT)}:\n    " + "\n    ".join(tail))
    return seconds


def read_results(result: Result, work: Path, equivalents: list[Equivalent]) -> None:
    from mutmut.stats import status_by_exit_code

    meta = work / "mutants" / (result.module.path + ".meta")
    if not meta.exists():
        raise MutateError(f"{result.module.path}: mutmut left no results ({meta.relative_to(ROOT)})")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    result.status = {name: status_by_exit_code[code] for name, code in codes.items()}
    incomplete = sorted(m for m, s in result.status.items() if s in INCOMPLETE)
    if incomplete:
        raise MutateError(f"{result.module.path}: {len(incomplete)} mutants without a verdict "
                          f"({result.status[incomplete[0]]}: {incomplete[0]}, ...)")
    survivors = [m for m, s in result.status.items() if s in SURVIVED]
    result.diffs = diffs(work, result.module.path, survivors)
    mine = [e for e in equivalents if e.module == result.module.path]
    for name in survivors:
        for e in mine:
            if e.function == function_of(name) and e.change == changed_lines(result.diffs[name]):
                result.equivalent[name] = e
                break


def diffs(work: Path, path: str, names: list[str]) -> dict[str, str]:
    from mutmut.configuration import reset_config
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    here = Path.cwd()
    os.chdir(work)
    reset_config()
    try:
        return {name: get_diff_for_mutant(name, path=path) for name in names}
    finally:
        os.chdir(here)
        reset_config()


def table(results: list[Result]) -> list[str]:
    rows = [("module", "mutants", "killed", "survived", "equivalent", "score", "target", "time")]
    for r in results:
        rows.append((r.module.path, str(r.total), str(r.killed), str(len(r.survivors)), str(len(r.equivalent)),
                     f"{r.score:.1f}%", f"{r.module.target:g}% " + ("met" if r.score >= r.module.target else "MISSED"),
                     f"{r.seconds:.0f} s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i in (0, 6) else c.rjust(w)
                      for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in rows]


def report(results: list[Result], equivalents: list[Equivalent]) -> None:
    """The table, the survivors with their changed lines and the stale equivalent entries: printed, and kept in
    build/mutate/report.txt and report.json."""
    lines = [""] + table(results)
    timeouts = sum(r.timeouts for r in results)
    if timeouts:
        lines.append(f"(killed includes {timeouts} timed out)")
    for r in results:
        if r.survivors:
            mutmut = Path(sys.executable).parent / "mutmut"
            lines += ["", f"{r.module.path}: {len(r.survivors)} survived (the whole diff: "
                          f"`cd {(OUT / r.module.slug).relative_to(ROOT)} && {mutmut} show <id>`):"]
            for name in r.survivors:
                lines += [f"  {name}"] + [f"    {line}" for line in changed_lines(r.diffs[name])]
        matched = set(r.equivalent.values())
        stale = [e for e in equivalents if e.module == r.module.path and e not in matched]
        for e in stale:
            lines.append(f"{r.module.path}: equivalent entry {e.mutant} matches no survivor (killed now, or the "
                         f"code changed): review mutation/equivalent.toml")
    print("\n".join(lines))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.txt").write_text("\n".join(lines[1:]) + "\n")
    (OUT / "report.json").write_text(json.dumps({r.module.path: {
        "tests": r.tests, "mutants": r.total, "killed": r.killed, "timeouts": r.timeouts,
        "survived": r.survivors, "equivalent": sorted(r.equivalent, key=natural), "score": round(r.score, 2),
        "target": r.module.target, "seconds": round(r.seconds, 1),
    } for r in results}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make mutate", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--module", action="append", help="only this module (repeatable); default: all in modules.toml")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", "2")), help="mutmut workers")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run of each module where it stopped: its copy of the tree (as "
                             "it was when that run started) and the verdicts mutmut kept are reused")
    parser.add_argument("--recheck", action="store_true",
                        help="with --resume: check a finished run's survivors again against the current tests")
    args = parser.parse_args(argv)
    args.resume = args.resume or args.recheck
    try:
        from importlib.metadata import version
        modules = load_modules(HERE / "modules.toml")
        equivalents = load_equivalents(HERE / "equivalent.toml")
        if args.module:
            unknown = sorted(set(args.module) - {m.path for m in modules})
            if unknown:
                raise MutateError(f"not in mutation/modules.toml: {', '.join(unknown)}")
            modules = [m for m in modules if m.path in args.module]
        print(f"mutmut {version('mutmut')}, {args.jobs} workers, one module at a time; work in "
              f"{OUT.relative_to(ROOT)}/", flush=True)
        files = project_files()
        results = []
        for module in modules:
            work, tests, resumed = stage(module, files, args.resume, args.recheck)
            what = ("re-checking the survivors of its run" if args.recheck else "resuming an interrupted run") \
                if resumed else "mutating"
            print(f"{module.path}: {what}, against {' '.join(tests)} ...", flush=True)
            result = Result(module, tests)
            result.seconds = run_mutmut(module, work, args.jobs)
            read_results(result, work, equivalents)
            results.append(result)
    except MutateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    report(results, equivalents)
    return 0 if all(r.score >= r.module.target for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
