"""The export's speed levers: each one named, documented, and switched off by naming it in one environment variable.

`GPU_PLATFORM_LEVERS_OFF=echo-state,syncfs` turns those two off; `GPU_PLATFORM_LEVERS_OFF=all` turns every
lever off (the plain path). The output is byte-identical either way (tests/gitops/engine/test_levers.py exports
with all on and all off and compares every byte); `make bench` prints what each one saves.

A lever that reaches into SDK internals checks, when it is used, that what it takes is still there with the shape
it expects (`LEVER_CONTRACT`); when it is not, the export takes the plain path for that lever and says nothing (the
SDK-contract test, tests/gitops/engine/test_sdk.py, is what fails loudly, naming the lever and the SDK version).
"""

from __future__ import annotations

import os

ENV = "GPU_PLATFORM_LEVERS_OFF"

# name -> what it does, where it reaches, its fallback. The order is the order `make bench` measures them in.
# Not a lever, on purpose: running the mock monitor's calls inline on the event loop instead of the SDK's thread
# hop (~10 ms of ~130 for prod) hung the engine now and then in the test suite, for a reason not found.
LEVERS: dict[str, str] = {
    "lazy-annotations": (
        "pulumi_kubernetes' modules compiled with their annotations postponed (PEP 563), so its thousands of typed "
        "Args annotations are not evaluated at import; compiled code cached under build/cache/; public import "
        "machinery (gitops/engine/lazy_imports.py), a module it cannot handle imports as usual"),
    "gc-off": (
        "the cyclic garbage collector off from the first line of the export process (the imports allocate "
        "thousands of objects it would scan for nothing); the run itself always runs without it"),
    "echo-state": (
        "the capturing monitor answers RegisterResource with the request's own property struct (the mocks return "
        "the inputs as the state) instead of deserializing and serializing it again; the SDK's own wire format, "
        "pinned by the SDK-contract test"),
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
    """The levers switched off by the environment (read at each use: tests and the bench flip it per run)."""
    raw = os.environ.get(ENV, "")
    names = {part.strip() for part in raw.split(",") if part.strip()}
    return frozenset(LEVERS) if _ALL in names else frozenset(names & set(LEVERS))


def on(name: str) -> bool:
    if name not in LEVERS:
        raise KeyError(f"no lever named {name!r}; levers: {', '.join(LEVERS)}")
    return name not in off()


def unknown_names() -> list[str]:
    """Names in the variable that are no lever (a typo would silently leave the lever on)."""
    raw = os.environ.get(ENV, "")
    return sorted({part.strip() for part in raw.split(",") if part.strip()} - set(LEVERS) - {_ALL})


def env_problem() -> str | None:
    """The one error line for names in the variable that are no lever (a typo would silently leave it on), or None.
    The export and the preview refuse to start on it."""
    unknown = unknown_names()
    if not unknown:
        return None
    return (f"{ENV}: {', '.join(unknown)}: no such lever, so nothing would be switched off; hint: name levers from "
            f"{', '.join(LEVERS)} (or all), separated by commas")
