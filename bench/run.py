"""`make bench`: the figures of docs/performance.md's table (issue 12), measured on the machine it runs on.

1. Export vs the cdk8s peer (bench/cdk8s_app.py, own venv under build/bench/) on the same objects (bench/manifests.py)
   for dev, prod, and prod plus 10, 100, 1,000 Plex-like apps: wall and CPU time, their ratio, peak memory (the
   export's max RSS under bench/measure.py, not run.py's high-water mark; cdk8s's Python + Node peaks summed, an upper
   bound), each tool's per-app slope. 2. The split of a cold prod export (bench/split.py). 3. Floors: importing pulumi
   and the modules used, the mock engine per resource. 4. What each speed optimization saves, off alone vs all on
   (gitops/engine/optimizations.py). 5. The test suite's wall time, as `make test` runs it and in one process.
Medians of --runs runs after a warm-up, compared runs interleaved in rotated order (1,000 apps: one run); `--quick`:
3 runs, 10 and 100 apps. Nothing asserts a figure: it prints them and writes build/bench/results.json."""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# installed into .venv by make (pip install -e .); OPTIMIZATIONS read when measured
from gitops.engine import optimizations

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "bench"
CDK8S_VENV = BENCH / "cdk8s-venv"
PY = sys.executable
# Every measured process runs with all optimizations on unless it says otherwise: the variable is never inherited.
BASE_ENV = {**{k: v for k, v in os.environ.items() if k != optimizations.ENV},
            "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
MIB = 1024  # ru_maxrss is in KiB on Linux


@dataclass
class Job:
    """One measured process: its command, environment, and what it leaves behind (removed after it ran)."""

    cmd: list[str]
    env: dict[str, str] = field(default_factory=lambda: dict(BASE_ENV))
    out: Path | None = None  # the folder it writes into
    rusage: Path | None = None  # where it reports its own peaks (the cdk8s app), instead of os.wait4's


@dataclass
class Sample:
    seconds: float  # wall time
    cpu_s: float  # user + system time of the process and of the children it waited for (cdk8s: Node's included)
    peaks_mib: dict[str, float]  # max RSS: {"process": …} (os.wait4) or, for cdk8s, {"python": …, "node": …}


class NoReportError(Exception):
    """The cdk8s app exited without writing its peaks."""


def measure(job: Job) -> Sample:
    """Run `job` once, through bench/measure.py: its wall time, CPU time and peak memory."""
    fd, name = tempfile.mkstemp(prefix="bench-measure-", suffix=".json", dir=BENCH)
    os.close(fd)
    report = Path(name)
    try:
        with tempfile.TemporaryFile() as stderr:
            done = subprocess.run([PY, "-S", str(ROOT / "bench" / "measure.py"), str(report), *job.cmd], cwd=ROOT,
                                  env=job.env, stdout=subprocess.DEVNULL, stderr=stderr)
            if done.returncode != 0 or (job.rusage is not None and not job.rusage.exists()):
                stderr.seek(0)
                sys.stderr.write(stderr.read().decode(errors="replace")[-4000:])
                if done.returncode != 0:
                    raise subprocess.CalledProcessError(done.returncode, job.cmd)
                raise NoReportError(f"{job.rusage}: not written by {' '.join(job.cmd)}")
        measured = json.loads(report.read_text())
    finally:
        report.unlink(missing_ok=True)
    if job.rusage is not None:
        reported = json.loads(job.rusage.read_text())
        peaks = {"python": reported["python_kib"] / MIB, "node": reported["node_kib"] / MIB}
        job.rusage.unlink()
    else:
        peaks = {"process": measured["maxrss_kib"] / MIB}
    if job.out is not None:
        shutil.rmtree(job.out, ignore_errors=True)
    return Sample(measured["seconds"], measured["cpu_s"], peaks)


def interleaved(jobs: dict[str, Callable[[], Job]], runs: int) -> dict[str, list[Sample]]:
    """One warm-up round (page cache, .pyc files, the validation cache), then `runs` rounds of every job once, the
    order rotated each round; the samples of each job."""
    names = list(jobs)
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for round_no in range(runs + 1):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            try:
                sample = measure(jobs[name]())
            except NoReportError as exc:  # seen once on the shared machine, never reproduced: once more, loudly
                print(f"warning: {exc}; measuring that run again", file=sys.stderr)
                sample = measure(jobs[name]())
            if round_no:
                samples[name].append(sample)
    return samples


def median_s(samples: list[Sample]) -> float:
    return statistics.median(s.seconds for s in samples)


def median_cpu_s(samples: list[Sample]) -> float:
    return statistics.median(s.cpu_s for s in samples)


def median_peaks(samples: list[Sample]) -> dict[str, float]:
    return {name: statistics.median(s.peaks_mib[name] for s in samples) for name in samples[0].peaks_mib}


# dev and prod of the flux-bootstrap example (split layout): the stacks every earlier figure was measured with
EXAMPLE = ROOT / "examples" / "flux-bootstrap"


def export_job(stack: str, project: Path | None = None, env: dict[str, str] | None = None) -> Job:
    out = Path(tempfile.mkdtemp(prefix="bench-export-", dir=BENCH))
    cmd = [PY, "-m", "gitops.export", "--stack", stack, "--out", str(out), "--quiet"]
    cmd += ["--project-dir", str(project or EXAMPLE)]
    return Job(cmd, env if env is not None else dict(BASE_ENV), out=out)


def cdk8s_job(cdk8s_python: Path, manifests: Path) -> Job:
    out = Path(tempfile.mkdtemp(prefix="bench-cdk8s-", dir=BENCH))
    rusage = out.with_name(out.name + ".rusage.json")  # next to its out folder: unique, and not synthesised into
    return Job([str(cdk8s_python), str(ROOT / "bench" / "cdk8s_app.py"), str(manifests), str(out)],
               {**BASE_ENV, "BENCH_RUSAGE_OUT": str(rusage)}, out=out, rusage=rusage)


def ensure_cdk8s_venv() -> Path:
    python = CDK8S_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(CDK8S_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(ROOT / "bench" / "requirements-cdk8s.txt")], check=True)
    return python


def dump_manifests(name: str, stack: str, project: Path = ROOT) -> tuple[Path, int]:
    """The exact object set the export writes for `stack` of `project`, grouped by folder, for the cdk8s app; and
    how many objects. In a process of its own (bench/manifests.py), as the export runs."""
    path = BENCH / f"manifests-{name}.json"
    subprocess.run([PY, str(ROOT / "bench" / "manifests.py"), stack, str(project), str(path)], cwd=ROOT,
                   env=BASE_ENV, check=True)
    return path, sum(len(objs) for objs in json.loads(path.read_text()).values())


def scale_project(apps: int) -> Path:
    """A project of the real program whose prod stack has `apps` more GPU apps, each Plex's own app config (the same
    objects, and a Flux Kustomization of its own) under another name, in wave 1 (which nothing waits for) and
    without Plex's LAN address (one address serves one Service)."""
    import yaml

    from components.plex import plex_app
    from model.config import PlexConfig
    from model.safe_yaml import load_yaml

    project = BENCH / f"scale-project-{apps}"
    project.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, project / name)
    # the flux-bootstrap example's prod (split layout) grown by `apps`: the scale the bench has always measured
    doc = load_yaml((ROOT / "examples" / "flux-bootstrap" / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    plex = plex_app(PlexConfig.model_validate(doc["config"]["gpu-platform:plex"]))
    template = plex.model_dump(mode="json", exclude_defaults=True, exclude={"loadBalancerIp", "delivery"})
    # Each app its own copy (json round trip): shared objects would be dumped as YAML aliases, which are refused.
    doc["config"]["gpu-platform:apps"] = [
        {**json.loads(json.dumps(template)), "name": f"app-{i:04d}", "delivery": {"tier": "apps-wave-1"}}
        for i in range(apps)]
    (project / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return project


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def slope_line(label: str, times: dict[int, float]) -> tuple[str, float, float | None]:
    """The per-app slope over the whole range and, with three sizes, the ratio of the upper to the lower slope."""
    ns = sorted(times)
    slope = (times[ns[-1]] - times[ns[0]]) / (ns[-1] - ns[0])
    line = f"slope  {label:<6} {slope * 1000:.1f} ms per app ({ns[0]}→{ns[-1]})"
    if len(ns) < 3:
        return line, slope, None
    low = (times[ns[1]] - times[ns[0]]) / (ns[1] - ns[0])
    high = (times[ns[2]] - times[ns[1]]) / (ns[2] - ns[1])
    return (line + f"; {low * 1000:.1f} ms/app for {ns[0]}→{ns[1]}, {high * 1000:.1f} ms/app for {ns[1]}→{ns[2]} "
            f"(ratio {high / low:.2f})"), slope, high / low


def bench_scales(args: argparse.Namespace, results: dict) -> None:
    """Export and cdk8s at every scale, interleaved per scale: time, ratio, peak memory."""
    cdk8s_python = None if args.skip_cdk8s else ensure_cdk8s_venv()
    apps = [int(x) for x in args.apps.split(",") if x]
    scales: list[tuple[str, str, Path | None, int]] = [(stack, stack, EXAMPLE, args.runs) for stack in ("dev", "prod")]
    scales += [(f"{n} apps", "prod", scale_project(n), 1 if n >= 1000 else min(args.runs, 3)) for n in apps]
    export_s: dict[str, float] = {}
    cdk8s_s: dict[str, float] = {}
    cpu_s: dict[str, dict[str, float]] = {"export": {}, "cdk8s": {}}
    peaks: dict[str, dict[str, dict[str, float]]] = {"export": {}, "cdk8s": {}}
    objects: dict[str, int] = {}
    print(f"{'scale':<10} {'objects':>7} {'export':>10} {'cdk8s':>10} {'export/cdk8s':>12} {'CPU ratio':>9}   "
          f"{'export MiB':>10}   cdk8s MiB (python + node)")
    for label, stack, project, runs in scales:
        key = label.removesuffix(" apps")
        jobs: dict[str, Callable[[], Job]] = {
            "export": lambda stack=stack, project=project: export_job(stack, project)}
        if cdk8s_python is not None:
            manifests, objects[key] = dump_manifests(key, stack, project or EXAMPLE)
            jobs["cdk8s"] = lambda manifests=manifests, python=cdk8s_python: cdk8s_job(python, manifests)
        samples = interleaved(jobs, runs)
        export_s[key] = median_s(samples["export"])
        cpu_s["export"][key] = median_cpu_s(samples["export"])
        peaks["export"][key] = median_peaks(samples["export"])
        row = f"{label:<10} {format(objects[key], ',') if key in objects else '':>7} {ms(export_s[key]):>10}"
        row_mem = f"{peaks['export'][key]['process']:>10.0f}"
        if "cdk8s" in samples:
            cdk8s_s[key] = median_s(samples["cdk8s"])
            cpu_s["cdk8s"][key] = median_cpu_s(samples["cdk8s"])
            peaks["cdk8s"][key] = median_peaks(samples["cdk8s"])
            cdk8s_mem = peaks["cdk8s"][key]
            row += (f" {ms(cdk8s_s[key]):>10} {export_s[key] / cdk8s_s[key]:>12.2f}"
                    f" {cpu_s['export'][key] / cpu_s['cdk8s'][key]:>9.2f}")
            row_mem += (f"   {sum(cdk8s_mem.values()):>4.0f} ({cdk8s_mem['python']:.0f} + "
                        f"{cdk8s_mem['node']:.0f})")
        else:
            row += f" {'':>10} {'':>12} {'':>9}"
        print(f"{row}   {row_mem}" + (f"   ({runs} run{'s' if runs > 1 else ''})" if runs != args.runs else ""))
    print("CPU ratio: of the medians of user + system time (cdk8s: Python's and Node's), which other processes on "
          "the machine disturb far less than wall time")
    print("MiB: peak resident set (ru_maxrss), median over the runs; export: its one process (os.wait4); cdk8s: "
          "its Python process's peak plus its Node child's, read by the app at exit; each process started by the "
          "~10 MB bench/measure.py, not by run.py (execve keeps the starter's high-water mark)")

    _record_scales(results, apps, export_s, cdk8s_s, cpu_s, peaks, objects)


def _record_scales(results: dict, apps: list[int], export_s: dict[str, float], cdk8s_s: dict[str, float],
                   cpu_s: dict[str, dict[str, float]], peaks: dict[str, dict[str, dict[str, float]]],
                   objects: dict[str, int]) -> None:
    """The figures of bench_scales into `results` (docs/performance.md reads them), and the per-app slopes printed."""
    stacks = ("dev", "prod")
    results["export_s"] = {k: export_s[k] for k in stacks}
    results["scale_s"] = {k: v for k, v in export_s.items() if k not in stacks}
    results["objects"] = objects
    results["cpu_s"] = {**cpu_s, "what": "median user + system time of the process and the children it waited for"}
    results["max_rss_mib"] = {
        "export": {k: v["process"] for k, v in peaks["export"].items()},
        "cdk8s": {k: sum(v.values()) for k, v in peaks["cdk8s"].items()},
        "cdk8s_python": {k: v["python"] for k, v in peaks["cdk8s"].items()},
        "cdk8s_node": {k: v["node"] for k, v in peaks["cdk8s"].items()},
        "what": "median over the runs of each process's peak resident set (ru_maxrss): the export's one process; "
                "cdk8s: its Python process plus its Node child (sum of the two peaks)"}
    if cdk8s_s:
        results["cdk8s_s"] = {k: cdk8s_s[k] for k in stacks}
        results["ratio"] = {k: export_s[k] / cdk8s_s[k] for k in stacks}
        results["scale_cdk8s_s"] = {k: v for k, v in cdk8s_s.items() if k not in stacks}
        results["scale_ratio"] = {k: export_s[k] / v for k, v in cdk8s_s.items() if k not in stacks}

    if len(apps) >= 2:
        line, slope, linearity = slope_line("export", {n: export_s[str(n)] for n in apps})
        results["per_app_ms"] = slope * 1000
        if linearity is not None:
            results["linearity"] = linearity
        print(line)
        if cdk8s_s:
            line, slope, linearity = slope_line("cdk8s", {n: cdk8s_s[str(n)] for n in apps})
            results["cdk8s_per_app_ms"] = slope * 1000
            if linearity is not None:
                results["cdk8s_linearity"] = linearity
            print(line)



def bench_split(args: argparse.Namespace, results: dict) -> list[dict]:
    splits = []
    for _ in range(args.runs):
        out = subprocess.run([PY, str(ROOT / "bench" / "split.py"), "prod"], cwd=ROOT, env=BASE_ENV, check=True,
                             capture_output=True, text=True).stdout
        splits.append(json.loads(out.strip().splitlines()[-1]))
    split = {k: statistics.median(s[k] for s in splits) for k in ("imports", "render", "validate", "walk", "write")}
    results["split_prod_objects"] = splits[0]["objects"]
    results["split_prod_s"] = split
    beyond = split["render"] + split["validate"] + split["walk"] + split["write"]
    print("split  prod  " + "  ".join(f"{k} {v * 1000:.0f} ms" for k, v in split.items())
          + f"   render+validate+walk+write {beyond * 1000:.0f} ms   (walk and write into a copy of the "
          "flux-bootstrap fixture)")
    return splits


def bench_floors(args: argparse.Namespace, results: dict, splits: list[dict]) -> None:
    """What no change to this project's code can go below."""
    imports = [PY, "-c", "import os, pulumi, pulumi.runtime.mocks, pulumi_kubernetes.core.v1, "
               "pulumi_kubernetes.apps.v1, pulumi_kubernetes.networking.v1, pulumi_kubernetes.apiextensions; "
               "os._exit(0)"]
    floor_imports = median_s(interleaved({"imports": lambda: Job(imports)}, args.runs)["imports"])
    per_resource = statistics.median(s["engine_warm"] / s["registrations"] for s in splits)
    results["floor"] = {"imports_s": floor_imports, "engine_per_resource_ms": per_resource * 1000}
    print(f"floor  importing pulumi + the pulumi_kubernetes modules used: {ms(floor_imports)} (whole process, no work)")
    engine_warm = statistics.median(s["engine_warm"] for s in splits)
    print(f"floor  mock engine, warm: {per_resource * 1000:.2f} ms per registered resource "
          f"({splits[0]['registrations']} for prod: {ms(engine_warm)})")


def saving_interval_ms(off: list[Sample], on: list[Sample], rounds: int = 4000) -> tuple[float, float]:
    """The 95% bootstrap interval of (median CPU time with the optimization off - median with every optimization on),
    in ms: an optimization saves time above the machine's noise when the interval's low end is above zero. Resampled
    with a fixed seed, so the same samples give the same interval."""
    rng = random.Random(0)
    off_cpu, on_cpu = [s.cpu_s for s in off], [s.cpu_s for s in on]
    diffs = sorted((statistics.median(rng.choices(off_cpu, k=len(off_cpu)))
                    - statistics.median(rng.choices(on_cpu, k=len(on_cpu)))) * 1000 for _ in range(rounds))
    return diffs[int(rounds * 0.025)], diffs[int(rounds * 0.975) - 1]


def bench_optimizations(args: argparse.Namespace, results: dict) -> None:
    """Whole-process prod export with every optimization on, all off, and each one off alone, interleaved round by
    round."""
    settings = {"all on": "", "all off": "all", **{name: name for name in optimizations.OPTIMIZATIONS}}
    samples = interleaved({label: lambda value=value: export_job("prod", env={**BASE_ENV, optimizations.ENV: value})
                           for label, value in settings.items()}, args.runs)
    medians = {label: median_s(s) for label, s in samples.items()}
    cpu = {label: median_cpu_s(s) for label, s in samples.items()}
    on = medians["all on"]
    saving_ms = {label: (seconds - on) * 1000 for label, seconds in medians.items() if label != "all on"}
    cpu_saving_ms = {label: (seconds - cpu["all on"]) * 1000 for label, seconds in cpu.items() if label != "all on"}
    results["optimizations"] = {"export_prod_s": medians, "saving_ms": saving_ms, "export_prod_cpu_s": cpu,
                                "cpu_saving_ms": cpu_saving_ms,
                                "what": "whole-process prod export into an empty folder; saving = median with the "
                                        "optimization off minus median with every optimization on, of wall time and "
                                        "of user + system time"}
    spread = max(s.seconds for s in samples["all on"]) - min(s.seconds for s in samples["all on"])
    results["optimizations"]["all_on_spread_ms"] = spread * 1000
    cpu_times = [s.cpu_s for s in samples["all on"]]
    results["optimizations"]["all_on_cpu_spread_ms"] = (max(cpu_times) - min(cpu_times)) * 1000
    print(f"optimizations noise: the all-on runs' CPU times spread over {ms(max(cpu_times) - min(cpu_times))}")
    print(f"optimizations prod export, whole process: all on {ms(on)}, all off {ms(medians['all off'])}: "
          f"together they save {saving_ms['all off']:,.0f} ms wall, {cpu_saving_ms['all off']:,.0f} ms CPU "
          f"(noise: the all-on runs' wall times spread over {ms(spread)})")
    intervals = {name: saving_interval_ms(samples[name], samples["all on"]) for name in optimizations.OPTIMIZATIONS}
    results["optimizations"]["cpu_saving_interval_ms"] = intervals
    for name in optimizations.OPTIMIZATIONS:
        low, high = intervals[name]
        verdict = "above noise" if low > 0 else "within noise"
        print(f"optimization  {name:<20} off alone {ms(medians[name]):>9}   saves {saving_ms[name]:6,.0f} ms wall, "
              f"{cpu_saving_ms[name]:6,.0f} ms CPU (95% interval {low:,.0f} to {high:,.0f} ms: {verdict})")
    wall_sum, cpu_sum = (sum(saved[n] for n in optimizations.OPTIMIZATIONS) for saved in (saving_ms, cpu_saving_ms))
    print(f"optimization  {'(sum of the above)':<20} {'':>19}   saves {wall_sum:6,.0f} ms wall, {cpu_sum:6,.0f} ms CPU")


def bench_suite(results: dict) -> None:
    """The suite's wall time as `make test` runs it (every core, pytest's rewritten modules kept) and in one process
    (as mutmut runs it); a failing suite is reported with its summary line, not raised (the figure stands)."""
    env = {k: v for k, v in BASE_ENV.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # The one-process run carries bench/suite_split.py (timers, a few microseconds per timed call): where its time goes.
    split_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench"), env.get("PYTHONPATH")]))}
    for key, label, extra, run_env in (("test_suite_s", "make test: pytest -n auto", ["-n", "auto"], env),
                                       ("test_suite_one_process_s", "pytest, one process", ["-p", "suite_split"],
                                        split_env)):
        start = time.perf_counter()
        done = subprocess.run([PY, "-m", "pytest", "-q", *extra], cwd=ROOT, env=run_env, capture_output=True,
                              text=True)
        seconds = time.perf_counter() - start
        # The project's addopts hold -q already, so -q -q: no summary line; count the progress characters instead.
        progress = "".join(line.rsplit("[", 1)[0] for line in done.stdout.splitlines()
                           if line.rstrip().endswith("%]"))
        counts = {word: progress.count(char) for char, word in
                  ((".", "passed"), ("F", "failed"), ("E", "errors"), ("s", "skipped"), ("x", "xfailed"))}
        summary = ", ".join(f"{n} {word}" for word, n in counts.items() if n or word == "passed")
        results[key] = seconds
        results[key.removesuffix("_s") + "_summary"] = summary
        print(f"tests  {seconds:8.1f} s   ({label}: {summary})"
              + ("" if done.returncode == 0 else f"   exit code {done.returncode}"))
        split = done.stdout.partition("\nsuite split, one process:")[2]
        if split:
            results["test_suite_split"] = ("suite split, one process:" + split.rstrip()).splitlines()
            print("\n".join(results["test_suite_split"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, help="whole-process runs per figure (default 5; 3 with --quick)")
    parser.add_argument("--apps", help="app counts of the scale projects (default 10,100,1000; 10,100 with --quick)")
    parser.add_argument("--quick", action="store_true", help="3 runs, 10 and 100 apps: for trying it out")
    parser.add_argument("--skip-cdk8s", action="store_true")
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--only", choices=("optimizations",),
                        help="just this figure (the optimizations: what each one saves)")
    args = parser.parse_args()
    args.runs = args.runs or (3 if args.quick else 5)
    args.apps = args.apps or ("10,100" if args.quick else "10,100,1000")
    shutil.rmtree(BENCH / "tmp", ignore_errors=True)
    BENCH.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                     "runs": args.runs, "load_average_start": os.getloadavg()[0]}
    print(f"machine: {results['machine']}, load average {os.getloadavg()[0]:.1f}; medians of {args.runs} "
          "whole-process runs after a warm-up round (1,000 apps: 1 run), interleaved")
    try:
        if args.only == "optimizations":
            bench_optimizations(args, results)
            return 0
        bench_scales(args, results)
        splits = bench_split(args, results)
        bench_floors(args, results, splits)
        bench_optimizations(args, results)
        if not args.skip_suite:
            bench_suite(results)
    finally:
        for leftover in [*BENCH.glob("bench-*"), *BENCH.glob("scale-project-*"), *BENCH.glob("manifests-*.json")]:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
    results["load_average_end"] = os.getloadavg()[0]
    results["bench_s"] = time.perf_counter() - started
    (BENCH / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"bench  {results['bench_s']:.0f} s in all, load average {os.getloadavg()[0]:.1f} at the end; "
          f"results: {(BENCH / 'results.json').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
