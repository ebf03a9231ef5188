"""The export's speed optimizations: each named, documented, and switched off by naming it in one environment variable.

`GPU_PLATFORM_OPTIMIZATIONS_OFF=syncfs,validation-cache` turns those two off, `=all` every one (the plain path). The
output is byte-identical either way (tests/gitops/engine/test_optimizations.py compares every byte of both); `make
bench` prints what each one saves.

No optimization reaches into the SDK's internals: the two that did (`echo-state`, `no-source-trace`) were removed, with
`gc-off` and `lazy-sdk-parts`, whose savings were within the machine's noise or changed sign between bench runs
(docs/performance.md).
"""

from __future__ import annotations

import os

ENV = "GPU_PLATFORM_OPTIMIZATIONS_OFF"

# name -> what it does, where it reaches, its fallback. The order is the order `make bench` measures them in.
# Not an optimization, on purpose: running the mock monitor's calls inline on the event loop instead of the SDK's thread
# hop (~10 ms of ~130 for prod) hung the engine now and then in the test suite, for a reason not found.
OPTIMIZATIONS: dict[str, str] = {
    "lazy-annotations": (
        "pulumi_kubernetes' modules compiled with their annotations postponed (PEP 563), so its thousands of typed "
        "Args annotations are not evaluated at import; compiled code cached under build/cache/; public import "
        "machinery (gitops/engine/lazy_imports.py), a module it cannot handle imports as usual"),
    "validation-cache": (
        "an object whose exact bytes passed the Kubernetes and Flux schemas before (a content hash under "
        "build/cache/) is not validated again, so an unchanged export never imports jsonschema; policies, "
        "substitutions and secrets are still checked every time"),
    "syncfs": (
        "the writer flushes its staging folder with one syncfs(2) of the file system before the commit rename, "
        "instead of one fsync per file; fallback: fsync per file where syncfs is unavailable"),
}

_ALL = "all"


def off() -> frozenset[str]:
    """The optimizations switched off by the environment (read at each use: tests and the bench flip it per run)."""
    raw = os.environ.get(ENV, "")
    names = {part.strip() for part in raw.split(",") if part.strip()}
    return frozenset(OPTIMIZATIONS) if _ALL in names else frozenset(names & set(OPTIMIZATIONS))


def on(name: str) -> bool:
    if name not in OPTIMIZATIONS:
        raise KeyError(f"no optimization named {name!r}; optimizations: {', '.join(OPTIMIZATIONS)}")
    return name not in off()


def unknown_names() -> list[str]:
    """Names in the variable that are no optimization (a typo would silently leave the optimization on)."""
    raw = os.environ.get(ENV, "")
    return sorted({part.strip() for part in raw.split(",") if part.strip()} - set(OPTIMIZATIONS) - {_ALL})


def env_problem() -> str | None:
    """The one error line for names in the variable that are no optimization (a typo would silently leave it on), or
    None. The export and the preview refuse to start on it."""
    unknown = unknown_names()
    if not unknown:
        return None
    return (f"{ENV}: {', '.join(unknown)}: no such optimization, so nothing would be switched off; hint: name "
            f"optimizations from {', '.join(OPTIMIZATIONS)} (or all), separated by commas")
