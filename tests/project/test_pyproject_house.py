"""The house rules of the source packages (components/, model/, gitops/, policy/, docs/architecture.md): no folder above
ten modules, no function above sixty lines, every package declared in pyproject.toml, and tests and sources named for
each other both ways: every test module for the source module it judges, every source module judged by a test module
of its own (`tests/<its folder>/test_<module>[_<feature>].py`). The direction of imports, the core's purity and the
absence of import circles are import-linter's contracts in pyproject.toml (`make test`)."""

from __future__ import annotations

import ast
import posixpath
import subprocess
import tomllib
from pathlib import Path

from conftest import ROOT

MAX_MODULES = 10
MAX_FUNCTION_LINES = 60
SOURCE_ROOTS = ("components", "gitops", "model", "policy")
# Test folders that do not mirror a package: each of their modules names the source module it judges by any module
# of the project (the real engines, untrusted input, the walk against kustomize, the project's own files).
CROSS_CUTTING = {"e2e", "hostile", "differential", "project"}
# Source modules no test module of their folder can import, and the test that judges them instead.
JUDGED_ELSEWHERE = {
    # pulumi-policy lives in policy/.venv, which only `make e2e` builds: the pack runs under `pulumi preview`
    "policy/__main__": "tests/e2e/test_pulumi_cli_engine.py",
}


def _tracked(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines()]


def _files(*patterns: str) -> list[str]:
    """The files matching these git pathspecs, tracked or new (not ignored), that exist: a module added or moved is
    judged before its first commit."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return sorted({line for line in out.splitlines() if (ROOT / line).is_file()})


def _packages() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def _package_folders() -> list[str]:
    """Every folder of the source roots holding an __init__.py (`gitops/flux`), declared or not."""
    return sorted({posixpath.dirname(p) for p in _files(*(f"{r}/*__init__.py" for r in SOURCE_ROOTS))})


def _modules_of(folder: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py")


def _source_modules() -> list[str]:
    """Every source module as its path without `.py` (`gitops/flux/walk`), __init__.py aside."""
    return [p.removesuffix(".py") for p in _files(*(f"{r}/*.py" for r in SOURCE_ROOTS))
            if posixpath.basename(p) != "__init__.py"]


def _test_modules() -> list[str]:
    return [p.removesuffix(".py") for p in _files("tests/*test_*.py")]


def _source_names() -> dict[str, set[str]]:
    """Each package folder (`gitops/flux`) and the project root (`""`: __main__ as `main`, the scripts, the project's
    files: Makefile, mutation/, Pulumi.yaml, pyproject.toml, renovate.json5), with the module names a test there may
    be named for: its modules (__main__ as `main`), its subfolders (a subpackage, or the files of another kind it holds:
    policy/kyverno/, the Kyverno twins of policy/rules.py) and the package itself."""
    names: dict[str, set[str]] = {"": {"main", "makefile", "mutation", "pulumi", "pyproject", "readme", "renovate", *(
        p.name.replace("-", "_") for p in (ROOT / "scripts").iterdir())}}
    for folder in _package_folders():
        subfolders = {p.name for p in (ROOT / folder).iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
        names[folder] = {_test_name(m) for m in _modules_of(folder)} | subfolders
        names[folder].add(posixpath.basename(folder))  # the package itself (its components judged together)
    return names


def _test_name(module: str) -> str:
    return "main" if module == "__main__" else module


def _maps(name: str, candidates: set[str]) -> bool:
    stem = name.removeprefix("test_")
    return any(stem == c or stem.startswith(c + "_") for c in candidates)


def _judged_by(module: str, tests: list[str]) -> list[str]:
    """The test modules named for `module` (`gitops/flux/walk`): tests/gitops/flux/test_walk[_<feature>]."""
    folder, name = posixpath.split(module)
    return [t for t in tests if posixpath.dirname(t) == f"tests/{folder}"
            and _maps(posixpath.basename(t), {_test_name(name)})]


def test_no_source_folder_holds_more_than_ten_modules():
    crowded = {p: len(_modules_of(p)) for p in _package_folders() if len(_modules_of(p)) > MAX_MODULES}
    assert not crowded, crowded


def test_every_source_package_is_declared_in_pyproject():
    # setuptools installs the packages it is told: an undeclared one is missing from the built package
    declared = {p.replace(".", "/") for p in _packages()}
    assert sorted(set(_package_folders()) - declared) == []


def test_no_function_is_longer_than_sixty_lines():
    long = [f"{path.relative_to(ROOT)}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in _tracked("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


def test_every_test_module_is_named_for_the_source_module_it_judges():
    names = _source_names()
    everything = set().union(*names.values())
    unmapped = []
    for test in _test_modules():
        folder = posixpath.dirname(test).removeprefix("tests").removeprefix("/")
        candidates = everything if folder.split("/")[0] in CROSS_CUTTING else names.get(folder, set())
        # the harness a cross-cutting folder keeps beside its tests (tests/e2e/controlplane.py) is judged there too
        candidates = candidates | {p.stem for p in (ROOT / "tests" / folder).glob("*.py")
                                   if folder.split("/")[0] in CROSS_CUTTING and not p.stem.startswith("test_")}
        if not _maps(posixpath.basename(test), candidates):
            unmapped.append(f"{test}.py")
    assert not unmapped, unmapped


def test_every_source_module_is_judged_by_a_test_module_named_for_it():
    tests = _test_modules()
    unjudged = [f"{m}.py: no tests/{posixpath.dirname(m)}/test_{_test_name(posixpath.basename(m))}[_<feature>].py"
                for m in _source_modules() if m not in JUDGED_ELSEWHERE and not _judged_by(m, tests)]
    assert not unjudged, unjudged
    assert all((ROOT / test).is_file() for test in JUDGED_ELSEWHERE.values())


def test_no_two_test_modules_share_a_name():
    # pytest imports a test module by its file name (tests/ has no __init__.py): a second module of the same name
    # anywhere under tests/ stops the collection of the run with "import file mismatch"
    seen: dict[str, list[str]] = {}
    for test in _test_modules():
        seen.setdefault(posixpath.basename(test), []).append(f"{test}.py")
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_the_rules_themselves_catch_what_they_are_for():
    # the mapping: a test named for a module of another folder, or for none, does not map
    assert _maps("test_writer_hostile", {"writer"}) and _maps("test_flux", {"flux"})
    assert not _maps("test_fluxview", {"flux"}) and not _maps("test_misc", {"writer", "flux"})
    # the other way: a source module is judged by a test of its own folder named for it, a package's by a test in
    # the package's folder of tests
    tests = ["tests/gitops/flux/test_walk_cases", "tests/gitops/test_walk", "tests/model/config/test_stack",
             "tests/model/test_config_stack", "tests/policy/test_main"]
    assert _judged_by("gitops/flux/walk", tests) == ["tests/gitops/flux/test_walk_cases"]
    assert _judged_by("model/config/stack", tests) == ["tests/model/config/test_stack"]
    assert _judged_by("policy/__main__", tests) == ["tests/policy/test_main"]
    assert _judged_by("gitops/flux/walker", tests) == []
    tree = ast.parse("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef) and node.end_lineno is not None
    assert node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
