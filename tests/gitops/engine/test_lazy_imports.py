"""gitops/engine/lazy_imports.py, the import-time optimization `lazy-annotations`: only the entry points install it, it
compiles pulumi_kubernetes' modules with their annotations postponed, and a cached compilation of another source is
never used."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from gitops.engine import optimizations

IMPORT_PROBE = """
import sys
import gitops, gitops.engine.optimizations  # a library import of the packages: plain imports
from gitops.engine import lazy_imports
print(lazy_imports._FINDER in sys.meta_path)
from gitops.export import main  # what `python -m gitops.export` imports, the program's SDK modules below
print(lazy_imports._FINDER in sys.meta_path)
import pulumi_kubernetes.core.v1._inputs as inputs
print(type(inputs.ContainerArgs.__init__.__annotations__["name"]).__name__)
"""


@pytest.mark.parametrize(("setting", "expected"), [
    ("", ["False", "True", "str"]),
    ("all", ["False", "True", "_UnionGenericAlias"]),
])
def test_only_the_entry_points_install_the_import_optimization_which_postpones_annotations(setting, expected):
    # A fresh interpreter each: the import-time optimization acts once per process.
    result = subprocess.run([sys.executable, "-c", IMPORT_PROBE], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, optimizations.ENV: setting})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == expected


def test_a_postponed_annotations_cache_entry_for_another_source_is_compiled_again(tmp_path, monkeypatch):
    from gitops.engine import lazy_imports

    source = tmp_path / "pkg_mod.py"
    source.write_text("class A:\n    x: undefined_name_until_asked\n")
    monkeypatch.setattr(lazy_imports, "CACHE", tmp_path / "cache")
    loader = lazy_imports._PostponedAnnotationsLoader("pkg_mod", str(source))
    first = loader.get_code("pkg_mod")
    namespace: dict = {}
    exec(first, namespace)  # noqa: S102 (the code compiled above): the annotation is never evaluated
    assert namespace["A"].__annotations__ == {"x": "undefined_name_until_asked"}
    source.write_text("VALUE = 2\n")  # another size, another mtime: the cached code must not be used
    os.utime(source, ns=(1, 1))
    namespace = {}
    exec(loader.get_code("pkg_mod"), namespace)  # noqa: S102
    assert namespace["VALUE"] == 2
