"""Shared fixtures. The real `__main__.py` runs under the Pulumi mock engine once per stack per session."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops.engine.program import Capture, run_program  # the project is installed: `pip install -e .`
from gitops.engine.stacks import available_stacks
from gitops.index import index_json
from gitops.repo import out_folder
from gitops.tree import Tree
from model.layout import WORK_DIR, SplitLayout

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"
# The project most tests vary: the flux-bootstrap example (examples/flux-bootstrap/: the split layout's dev and prod,
# with the program's own Pulumi.yaml and __main__.py linked in). The shipped stacks (the project root's) are the
# shared-base layout of examples/home-network-k3s/repo, tested with that repository (HOME_* in builders.py).
EXAMPLE = EXAMPLES / "flux-bootstrap"
# Its stacks, and any stack `make new-stack` added to the project root: each is tested like dev and prod.
STACKS = tuple(available_stacks(EXAMPLE))
NEW_STACKS = tuple(s for s in available_stacks(ROOT) if s not in ("dev", "prod"))


def stack_project(stack: str) -> Path:
    """The project folder a test stack is read from."""
    return ROOT if stack in NEW_STACKS else EXAMPLE


@pytest.fixture(scope="session")
def captures() -> dict[str, Capture]:
    """The one owner of set_mocks for the tested stacks: each stack's program runs once."""
    return {stack: run_program(stack, stack_project(stack)) for stack in STACKS + NEW_STACKS}


def make_project(directory: Path, stack_files: dict[str, str], evidence: dict[str, str] | None = None) -> Path:
    """A project folder with the real Pulumi.yaml and __main__.py, the given stack files and evidence files."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, directory / name)
    for stack, text in stack_files.items():
        (directory / f"Pulumi.{stack}.yaml").write_text(text)
    for stack, text in (evidence or {}).items():  # "prod", or "dra/prod" and "dra/claims/prod" for the DRA route's
        path = directory / "evidence" / f"{stack}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return directory


def evidence_for(stack: str, nodes: dict[str, object]) -> str:
    body = "".join(f"  {name}: {count}\n" for name, count in nodes.items())
    return f"stack: {stack}\nresource: gpu.intel.com/i915\nnodes:\n{body}"


PROD_NODES = ("k3s-prod-1", "k3s-prod-2", "k3s-prod-3")
COMPLETE_PROD_EVIDENCE = evidence_for("prod", {n: 1 for n in PROD_NODES})


def stack_text(stack: str) -> str:
    return (stack_project(stack) / f"Pulumi.{stack}.yaml").read_text()


REPOS = FIXTURES / "repos"
# The sample repositories of examples/ (each beside its stacks) are fixtures too; the rest live in tests/fixtures/repos.
_SAMPLES = {"home-network-k3s": EXAMPLES / "home-network-k3s" / "repo", "flux-bootstrap": EXAMPLE / "repo",
            "cluster-template-generated": EXAMPLES / "cluster-template" / "repo",
            "home-ops": EXAMPLES / "home-ops" / "repo"}


def repository(name: str) -> Path:
    """The fixture repository `name`: a sample of examples/, or one of tests/fixtures/repos/."""
    return _SAMPLES.get(name, REPOS / name)


def repo_copy(tmp_path: Path, name: str) -> Path:
    """A copy of the fixture repository `name` at tmp_path/name."""
    out = tmp_path / name
    shutil.copytree(repository(name), out)
    return out


_GENERATED = (EXAMPLES / "cluster-template" / "Pulumi.home.yaml").read_text()
_HOME = {s: (ROOT / f"Pulumi.{s}.yaml").read_text() for s in ("dev", "prod")}  # the shipped stacks
# Every layout, each in the repository shape it is made for: (fixture repository, its stacks, the bootstrap
# Kustomization's path, `{stack}` for each stack's)
LAYOUT_REPOSITORIES = {
    "split": ("cluster-template-generated", {"home": _GENERATED}, "./kubernetes/flux/cluster"),
    "per-app": ("cluster-template-generated", {"home": _GENERATED.replace(
        "    componentsDir: kubernetes/gpu-platform\n", "    layout: per-app\n")}, "./kubernetes/flux/cluster"),
    "shared-base": ("home-network-k3s", _HOME, "./clusters/{stack}"),
    "flux-bootstrap's default": ("flux-bootstrap", {"dev": stack_text("dev"), "prod": stack_text("prod")},
                                 "./clusters/{stack}"),
}


@pytest.fixture
def run_stack_text(tmp_path):
    """Run the real program for a stack file given as text (a variant of a shipped one)."""

    def run(text: str, stack: str = "variant", evidence: str | None = None) -> Capture:
        project = make_project(tmp_path / "project", {stack: text}, {stack: evidence} if evidence else None)
        return run_program(stack, project)

    return run


def cluster_documents(out: Path, folder: Path | None = None) -> list[tuple[Path, dict]]:
    """(file, object) for every object the export wrote for the cluster under `folder` (default OUT): kustomize's own
    kustomization.yaml files and the post-merge Chainsaw suite (no cluster objects) left out."""
    import yaml

    from gitops.index import SUITE_FILE

    found = []
    for path in sorted((folder or out).rglob("*.yaml")):
        if path.name == SUITE_FILE:
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and not str(doc.get("apiVersion", "")).startswith("kustomize.config.k8s.io/"):
                found.append((path, doc))
    return found


def files_of(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` (symlinks are not followed) with its bytes: what an export may have changed."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def export(out: Path, *stacks: str, project: Path | None = None, check: bool = False) -> int:
    """The export command in-process, quiet, as a user runs it: `--stack … --out OUT --project-dir [--check]`, the
    project by default the flux-bootstrap example's."""
    from gitops.export import main as export_main

    out.mkdir(parents=True, exist_ok=True)  # the user's repository exists: the export never creates one
    argv = [a for s in stacks for a in ("--stack", s)] + ["--out", str(out), "--quiet"]
    argv += ["--project-dir", str(project or EXAMPLE)]
    return export_main(argv + (["--check"] if check else []))


# The writer's own tests (tests/gitops/repo/test_writer_*.py) write trees of a small stack "lab" built by hand: what
# write_tree needs, without a program run.
LAB_LAYOUT = SplitLayout("lab", "clusters/lab/gpu-platform", "components/lab", "./clusters/lab")
LAB_APP = "components/lab/app/deployment.app.yaml"


def lab_tree(files: dict[str, bytes]) -> Tree:
    """A tree of the "lab" stack holding these files and the index an export writes beside them."""
    tree = Tree(stack="lab", layout=LAB_LAYOUT, files=dict(files))
    tree.files[tree.index_path] = index_json(tree.stack, tree.files, tree.external_paths, tree.edits, tree.edited)
    return tree


def pytest_terminal_summary(terminalreporter) -> None:
    """Figures a test records with `record_property("figures", text)` (the differential sweeps' trees and
    disagreements, the gate tools' counts), printed even when xdist ran the test in a worker."""
    for report in [*terminalreporter.stats.get("passed", []), *terminalreporter.stats.get("failed", [])]:
        for key, value in getattr(report, "user_properties", []):
            if key == "figures":
                terminalreporter.write_line(str(value))


# --- nothing of the export's work left in OUT (issue 54) ----------------------------------------------------------

def work_names(out: Path) -> set[str]:
    """`find OUT -name '.gitops-export*'`: every path under OUT named like the export's work, links not followed."""
    found: set[str] = set()
    if not out.is_dir():
        return found
    for folder, dirs, files in os.walk(out):
        for name in dirs + files:
            if name.startswith(WORK_DIR):
                found.add(os.path.relpath(os.path.join(folder, name), out))
        dirs[:] = [d for d in dirs if d != ".git" and not d.startswith(WORK_DIR)]
    return found


@contextlib.contextmanager
def _settled(out: Path) -> Iterator[None]:
    """OUT with no run in flight: a concurrent export's staging is its own, not a leftover."""
    target = out if out.is_dir() else None
    if target is None:
        yield
        return
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


@pytest.fixture(autouse=True)
def nothing_of_the_work_is_left_in_out(request, monkeypatch):
    """Every export, `--check` and `--remove` the suite runs (each opens OUT through out_folder.opened) is held to the
    trust contract: afterwards OUT holds no path named `.gitops-export*` that was not there before, and none at all
    after an export or removal that succeeded. The one exception is the journal a failure after the commit point
    keeps by design (the next run completes it). A test that plants such names itself says so with
    `plants_work_names`."""
    planted = request.node.get_closest_marker("plants_work_names") is not None
    real = out_folder.opened

    @contextlib.contextmanager
    def opened(out: Path, trees: list[Tree], exclusive: bool, recovered: list[tuple[str, str]]):
        before = work_names(out)
        ok = partial = False
        try:
            with real(out, trees, exclusive, recovered) as records:
                yield records
            ok = True
        except out_folder.OwnershipError as exc:
            partial = exc.partial
            raise
        finally:
            with _settled(out):
                left = work_names(out)
            if not partial:
                new = left - before
                assert not new, f"a run left {sorted(new)} in {out}"
                if ok and exclusive and not planted:
                    assert not left, f"an export that succeeded left {sorted(left)} in {out}"

    monkeypatch.setattr(out_folder, "opened", opened)
