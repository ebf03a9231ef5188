"""One differential sweep (issue 30): Hypothesis draws repository trees (trees.py), each tree is judged by the walk and
by an oracle (verdicts.py), and every disagreement is kept with the tree's listing. The fast tier (`make test`), the
bounded tier (`make e2e`) and the long run (`make fuzz-walk`) are this sweep with another oracle and count.

    PYTHONPATH=tests .venv/bin/python -m differential.sweep --trees 2000 --against flux --jobs 2

prints the number of trees and of disagreements, and writes each disagreeing tree to build/fuzz-walk/<n>.txt."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from differential.trees import Tree, trees
from differential.verdicts import Build, disagreements, flux_build, kustomize_build, oracle_verdict, walk_verdict

ROOT = Path(__file__).resolve().parents[2]
FLUX = ROOT / "build" / "tools" / "bin" / "flux"


@dataclass
class Found:
    tree: Tree
    lines: list[str]


@dataclass
class Sweep:
    trees: int = 0
    found: list[Found] = field(default_factory=list)
    kustomizations: int = 0  # judged by both
    refused: int = 0  # of those, refused by both
    objects: int = 0  # objects compared

    def summary(self, against: str, seconds: float) -> str:
        return (f"walk vs {against}: {self.trees} trees, {len(self.found)} disagreements ({self.kustomizations} "
                f"Kustomizations, {self.refused} of them refused by both, {self.objects} objects compared; "
                f"{seconds:.0f} s)")

    def add(self, other: Sweep) -> None:
        self.trees += other.trees
        self.found += other.found
        self.kustomizations += other.kustomizations
        self.refused += other.refused
        self.objects += other.objects


def _snapshot(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def judge(tree: Tree, work: Path, build: Build, counts: Sweep | None = None) -> list[str]:
    """The walk's verdict and the oracle's on one tree, each in its own copy (an oracle may write a generated
    kustomization file while it builds); the walk must leave its copy as it was."""
    walk_repo, oracle_repo = work / "walk" / "repo", work / "oracle" / "repo"
    tree.write(walk_repo)
    tree.write(oracle_repo)
    before = _snapshot(walk_repo)
    walked = walk_verdict(walk_repo, tree.root, tree.relative)
    oracle = oracle_verdict(oracle_repo, tree.root, build)
    found = disagreements(walked, oracle)
    if counts is not None:
        both = [(walked.kustomizations[k], o) for k, o in oracle.kustomizations.items() if k in walked.kustomizations]
        counts.kustomizations += len(both)
        counts.refused += sum(w.objects is None and o.objects is None for w, o in both)
        counts.objects += sum(len(o.objects or {}) for _, o in both)
    if walked.applied_twice() != oracle.applied_twice():  # the README's promise: an object applied twice is refused
        found.append(f"applied twice: walk {sorted(map(str, walked.applied_twice()))}, oracle "
                     f"{sorted(map(str, oracle.applied_twice()))}")
    if _snapshot(walk_repo) != before:
        found.append("the walk changed the repository it walked")
    return found


def oracle_named(against: str, work: Path) -> Build:
    if against == "flux":
        if not FLUX.is_file():
            raise SystemExit(f"{FLUX}: not built; hint: run `make tools`")
        (work / "flux-home").mkdir(parents=True, exist_ok=True)
        return flux_build(FLUX, work / "flux-home")
    return kustomize_build


def sweep(count: int, against: str, at_seed: int) -> Sweep:
    """`count` trees drawn from a fixed seed (the same trees on every run), judged against `against`. Symlinks that
    lead out of the repository only where Flux judges: kubectl follows them, Flux's confined filesystem does not."""
    outside_links = against == "flux"
    result = Sweep()
    with tempfile.TemporaryDirectory(prefix="walk-diff-") as tmp:
        build = oracle_named(against, Path(tmp))

        @seed(at_seed)
        @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.large_base_example, HealthCheck.filter_too_much])
        @given(trees(outside_links=outside_links))
        def one(tree: Tree) -> None:
            work = Path(tempfile.mkdtemp(dir=tmp))
            result.trees += 1
            lines = judge(tree, work, build, result)
            if lines:
                result.found.append(Found(tree, lines))

        one()
    return result


def report(found: list[Found]) -> str:
    return "\n\n".join(f"{f.tree.listing()}\n=== disagreements:\n" + "\n".join(f.lines) for f in found)


def _part(args: tuple[int, str, int]) -> Sweep:
    return sweep(*args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--against", choices=("flux", "kustomize"), default="flux")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=ROOT / "build" / "fuzz-walk")
    args = parser.parse_args(argv)
    start = time.monotonic()
    shares = [args.trees // args.jobs + (1 if i < args.trees % args.jobs else 0) for i in range(args.jobs)]
    with ProcessPoolExecutor(args.jobs) as pool:
        parts = list(pool.map(_part, [(n, args.against, args.seed + i) for i, n in enumerate(shares) if n]))
    total = Sweep()
    for p in parts:
        total.add(p)
    args.keep.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(total.found):
        (args.keep / f"{i}.txt").write_text(report([f]))
    print(total.summary(args.against, time.monotonic() - start))
    if total.found:
        print(f"each disagreeing tree with its lines: {args.keep}/<n>.txt", file=sys.stderr)
    return 1 if total.found else 0


if __name__ == "__main__":
    sys.exit(main())
