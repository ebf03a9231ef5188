"""The `lazy-annotations` optimization (gitops/engine/optimizations.py), installed by the command-line entry points
(gitops/export.py, gitops/preview.py) before anything imports the SDK; a library user of the packages gets plain
imports. pulumi_kubernetes' modules are compiled as if they began with `from __future__ import annotations` (PEP 563):
their thousands of typed-Args annotations stay strings instead of being evaluated at import (most of the ~250 ms
`core.v1` and friends take); the SDK reads them only through `typing.get_type_hints`, which evaluates strings alike,
when a type is first translated. The compiled code is cached under build/cache/lazy-annotations/ (never beside the
library's .pyc files, which stay as pip wrote them), keyed by the interpreter's magic number and the source's size and
mtime. Public import machinery only (importlib.abc.MetaPathFinder, compile's future flag); a module the hook cannot
handle falls through to the normal import.
"""

from __future__ import annotations
import __future__

import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from typing import Any

from gitops.engine import optimizations
from gitops.engine.stacks import ROOT

CACHE = ROOT / "build" / "cache" / "lazy-annotations"
LAZY_ANNOTATION_PACKAGES = ("pulumi_kubernetes",)
_HEADER = importlib.util.MAGIC_NUMBER + b"lazy-annotations\0"


class _PostponedAnnotationsLoader(importlib.machinery.SourceFileLoader):
    """A source loader that compiles with PEP 563's flag and keeps its own bytecode cache."""

    def _cache_path(self) -> Path:
        tag = sys.implementation.cache_tag or "python"
        relative = Path(self.path).resolve().as_posix().lstrip("/")
        return CACHE / tag / (relative + ".pyc")

    def get_code(self, fullname: str) -> Any:
        source_path = self.get_filename(fullname)
        stat = os.stat(source_path)
        stamp = _HEADER + f"{stat.st_mtime_ns}:{stat.st_size}\0".encode()
        cached = self._cache_path()
        try:
            data = cached.read_bytes()
            if data.startswith(stamp):
                return marshal.loads(data[len(stamp):])
        except (OSError, ValueError, EOFError, TypeError):
            pass
        code = compile(self.get_data(source_path), source_path, "exec", dont_inherit=True,
                       flags=__future__.annotations.compiler_flag)
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
            tmp.write_bytes(stamp + marshal.dumps(code))
            os.replace(tmp, cached)
        except OSError:
            pass  # a read-only checkout compiles every time: slower, the same code
        return code


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".", 1)[0] not in LAZY_ANNOTATION_PACKAGES or not optimizations.on("lazy-annotations"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec  # a compiled-only or extension module: imported as it is
        spec.loader = _PostponedAnnotationsLoader(fullname, spec.loader.path)
        return spec


_FINDER = _Finder()


def install() -> None:
    """Put the finder first on sys.meta_path (once). Modules already imported stay as they are."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
