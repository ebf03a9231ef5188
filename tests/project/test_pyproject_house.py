"""The house rules of the packages pyproject.toml declares (docs/architecture.md): no folder above ten modules, no
function above sixty lines, and every test module named for the source module it judges. The direction of imports,
the core's purity and the absence of import circles are import-linter's contracts in pyproject.toml (`make test`)."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

from conftest import ROOT

MAX_MODULES = 10
MAX_FUNCTION_LINES = 60
# Test folders that do not mirror a package: each of their modules names the source module it judges by any module
# of the project (the real engines, untrusted input, the walk against kustomize, the project's own files).
CROSS_CUTTING = {"e2e", "hostile", "differential", "project"}


def _tracked(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines()]


def _packages() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def _modules_of(package: str) -> list[str]:
    folder = ROOT / package.replace(".", "/")
    return sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")


def _source_names() -> dict[str, set[str]]:
    """Each package folder (`gitops/flux`) and the project root (`""`: __main__ as `main`, the scripts, the project's
    files: Makefile, Pulumi.yaml, pyproject.toml, renovate.json5), with the module names a test there may be named
    for: its modules and its subpackages."""
    names: dict[str, set[str]] = {"": {"main", "makefile", "pulumi", "pyproject", "readme", "renovate", *(
        p.name.replace("-", "_") for p in (ROOT / "scripts").iterdir())}}
    for package in _packages():
        folder = package.replace(".", "/")
        names[folder] = set(_modules_of(package)) | {p.split(".")[-1] for p in _packages()
                                                      if p.rpartition(".")[0] == package}
        names[folder].add(package.split(".")[-1])  # the package itself (its components judged together)
    return names


def _maps(name: str, candidates: set[str]) -> bool:
    stem = name.removeprefix("test_")
    return any(stem == c or stem.startswith(c + "_") for c in candidates)


def test_no_source_folder_holds_more_than_ten_modules():
    crowded = {p: len(_modules_of(p)) for p in _packages() if len(_modules_of(p)) > MAX_MODULES}
    assert not crowded, crowded


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
    for path in _tracked("tests/*test_*.py"):
        folder = path.parent.relative_to(ROOT / "tests").as_posix()
        folder = "" if folder == "." else folder
        candidates = everything if folder.split("/")[0] in CROSS_CUTTING else names.get(folder, set())
        if not _maps(path.stem, candidates):
            unmapped.append(path.relative_to(ROOT).as_posix())
    assert not unmapped, unmapped


def test_the_rules_themselves_catch_what_they_are_for():
    # the mapping: a test named for a module of another folder, or for none, does not map
    assert _maps("test_writer_hostile", {"writer"}) and _maps("test_flux", {"flux"})
    assert not _maps("test_fluxview", {"flux"}) and not _maps("test_misc", {"writer", "flux"})
    tree = ast.parse("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef) and node.end_lineno is not None
    assert node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
