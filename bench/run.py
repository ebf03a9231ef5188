"""`make bench`: the figures of the README's performance table, measured on the machine it runs on.

1. Whole-process export of each stack (median of --runs after one warm-up), into an empty folder each time.
2. The same objects synthesised by cdk8s (bench/cdk8s_app.py, its own venv under build/bench/), and the ratio.
3. The in-process split of one cold export (imports, render, validate, write), medians of --runs processes.
4. Export time for 10, 100 and 1,000 generated Plex-like apps (prod's stack file plus N copies of Plex's app config
   under `gpu-platform:apps`), the per-app slope and how linear it is.
5. The test suite's wall time (`python -m pytest`).
Nothing here asserts a time; it prints figures (and writes build/bench/results.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "bench"
CDK8S_VENV = BENCH / "cdk8s-venv"
PY = sys.executable
QUIET_NODE = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}


def timed(cmd: list[str], env: dict | None = None, cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def median_of(runs: int, make_cmd, env: dict | None = None) -> float:
    make_cmd_result = make_cmd()
    timed(make_cmd_result, env)  # warm-up: page cache, .pyc files
    samples = []
    for _ in range(runs):
        samples.append(timed(make_cmd(), env))
    return statistics.median(samples)


def export_cmd(stack: str, project: Path | None = None) -> list[str]:
    out = tempfile.mkdtemp(prefix="bench-export-", dir=BENCH)
    cmd = [PY, "-m", "gitops.export", "--stack", stack, "--out", out, "--quiet"]
    return cmd + (["--project-dir", str(project)] if project else [])


def ensure_cdk8s_venv() -> Path:
    python = CDK8S_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(CDK8S_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(ROOT / "bench" / "requirements-cdk8s.txt")], check=True)
    return python


def dump_manifests(stack: str) -> Path:
    """The exact object set our export writes, grouped by folder, for the cdk8s app to synthesise."""
    from gitops.engine import run_program  # installed into .venv by make (pip install -e .)
    from gitops.tree import build_tree

    folders: dict[str, list] = {}
    for obj in build_tree(run_program(stack)).objects:
        folders.setdefault(obj.path.rsplit("/", 1)[0], []).append(obj.manifest)
    path = BENCH / f"manifests-{stack}.json"
    path.write_text(json.dumps(folders))
    return path


def scale_project(apps: int) -> Path:
    """A project of the real program whose prod stack has `apps` more GPU apps, each Plex's own app config (the same
    objects, and a Flux Kustomization of its own) under another name, in wave 1 (which nothing waits for) and
    without Plex's LAN address (one address serves one Service)."""
    import yaml

    from components.config import PlexConfig
    from components.plex import plex_app
    from components.safe_yaml import load_yaml

    project = BENCH / f"scale-project-{apps}"
    project.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, project / name)
    doc = load_yaml((ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8"))  # as the engine reads it
    plex = plex_app(PlexConfig.model_validate(doc["config"]["gpu-platform:plex"]))
    template = plex.model_dump(mode="json", exclude_defaults=True, exclude={"loadBalancerIp", "delivery"})
    # Each app its own copy (json round trip): shared objects would be dumped as YAML aliases, which are refused.
    doc["config"]["gpu-platform:apps"] = [
        {**json.loads(json.dumps(template)), "name": f"app-{i:04d}", "delivery": {"tier": "apps-wave-1"}}
        for i in range(apps)]
    (project / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return project


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--apps", default="10,100,1000")
    parser.add_argument("--skip-cdk8s", action="store_true")
    parser.add_argument("--skip-suite", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(BENCH / "tmp", ignore_errors=True)
    BENCH.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                     "runs": args.runs}
    print(f"machine: {results['machine']}; medians of {args.runs} whole-process runs after a warm-up")

    export_s = {s: median_of(args.runs, lambda s=s: export_cmd(s)) for s in ("dev", "prod")}
    results["export_s"] = export_s
    for stack, seconds in export_s.items():
        print(f"export {stack:<5} {seconds * 1000:8.0f} ms")

    if not args.skip_cdk8s:
        cdk8s_python = ensure_cdk8s_venv()
        results["cdk8s_s"], results["ratio"] = {}, {}
        for stack in ("dev", "prod"):
            manifests = dump_manifests(stack)
            # Bound now (a default argument): median_of calls it within this iteration, each call a new out folder.
            seconds = median_of(args.runs, lambda manifests=manifests: [
                str(cdk8s_python), str(ROOT / "bench" / "cdk8s_app.py"), str(manifests),
                tempfile.mkdtemp(prefix="bench-cdk8s-", dir=BENCH)], QUIET_NODE)
            results["cdk8s_s"][stack] = seconds
            results["ratio"][stack] = export_s[stack] / seconds
            print(f"cdk8s  {stack:<5} {seconds * 1000:8.0f} ms   export/cdk8s = {export_s[stack] / seconds:.2f}")

    splits = []
    for _ in range(args.runs):
        out = subprocess.run([PY, str(ROOT / "bench" / "split.py"), "prod"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        splits.append(json.loads(out.strip().splitlines()[-1]))
    split = {k: statistics.median(s[k] for s in splits) for k in ("imports", "render", "validate", "write")}
    results["split_prod_objects"] = splits[0]["objects"]
    results["split_prod_s"] = split
    beyond = split["render"] + split["validate"] + split["write"]
    print("split  prod  " + "  ".join(f"{k} {v * 1000:.0f} ms" for k, v in split.items())
          + f"   render+validate+write {beyond * 1000:.0f} ms")

    # Floors: what no change to this project's code can go below.
    floor_imports = median_of(args.runs, lambda: [PY, "-c", "import os, pulumi, pulumi.runtime.mocks, "
                                                  "pulumi_kubernetes.core.v1, pulumi_kubernetes.apps.v1, "
                                                  "pulumi_kubernetes.networking.v1, pulumi_kubernetes.apiextensions; "
                                                  "os._exit(0)"])
    per_resource = statistics.median(s["engine_warm"] / s["registrations"] for s in splits)
    results["floor"] = {"imports_s": floor_imports, "engine_per_resource_ms": per_resource * 1000}
    print(f"floor  importing pulumi + the pulumi_kubernetes modules used: {floor_imports * 1000:.0f} ms "
          f"(whole process, no work)")
    engine_warm = statistics.median(s["engine_warm"] for s in splits)
    print(f"floor  mock engine, warm: {per_resource * 1000:.2f} ms per registered resource "
          f"({splits[0]['registrations']} for prod: {engine_warm * 1000:.0f} ms)")

    scale = {}
    for n in [int(x) for x in args.apps.split(",")]:
        project = scale_project(n)
        runs = 1 if n >= 1000 else min(args.runs, 3)
        scale[n] = median_of(runs, lambda project=project: export_cmd("prod", project))
        print(f"scale  {n:>5} apps {scale[n]:8.2f} s")
    ns = sorted(scale)
    if len(ns) >= 2:
        slope = (scale[ns[-1]] - scale[ns[0]]) / (ns[-1] - ns[0])
        results["per_app_ms"] = slope * 1000
        line = f"slope  {slope * 1000:.1f} ms per app ({ns[0]}→{ns[-1]})"
        if len(ns) >= 3:
            low = (scale[ns[1]] - scale[ns[0]]) / (ns[1] - ns[0])
            high = (scale[ns[2]] - scale[ns[1]]) / (ns[2] - ns[1])
            results["linearity"] = high / low
            line += (f"; {low * 1000:.1f} ms/app for {ns[0]}→{ns[1]}, {high * 1000:.1f} ms/app for {ns[1]}→{ns[2]} "
                     f"(ratio {high / low:.2f})")
        print(line)
    results["scale_s"] = scale

    if not args.skip_suite:
        seconds = timed([PY, "-m", "pytest", "-q"])
        results["test_suite_s"] = seconds
        print(f"tests  {seconds:8.1f} s   (python -m pytest)")

    (BENCH / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(BENCH / "scale-project", ignore_errors=True)
    for leftover in BENCH.glob("bench-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
