"""What the mock engine (gitops/engine/program.py) takes from the Pulumi SDK: the supported release range and the
private names and shapes it runs on, checked at the start of every run (tests/gitops/engine/test_sdk.py pins them).
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from typing import Any

from pulumi.runtime import mocks as pulumi_mocks

from gitops.engine.stacks import StackFileError

# The SDK marks a secret value on the wire with this signature key/value pair (pulumi/runtime/rpc.py).
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

# The Pulumi SDK releases this engine was checked against: it runs on SDK internals (below), so each new release
# is run through tests/gitops/engine/test_sdk.py before this range is widened.
SUPPORTED_PULUMI = ((3, 272, 0), (3, 273, 0))  # at least, below


class SdkError(StackFileError):
    """The installed Pulumi SDK is not one this engine supports; one line naming its version."""


# --- what the engine takes from the SDK --------------------------------------------------------------------------
# Private names and shapes, pinned by tests/gitops/engine/test_sdk.py: `_sync_await` and `run_pulumi_func` run the
# program to completion like the language host, the wire secret signature marks secret values, MockMonitor's
# RegisterResource shape is what CapturingMonitor extends, `set_mocks`/`MockResourceArgs` take these keywords.
SDK_CONTRACT: dict[str, tuple[str, ...]] = {
    "pulumi.runtime.sync_await._sync_await": ("awaitable",),
    "pulumi.runtime.sync_await._ensure_event_loop": (),
    "pulumi.runtime.stack.run_pulumi_func": ("func",),
    "pulumi.runtime.rpc.deserialize_properties": ("props_struct",),
    "pulumi.runtime.rpc.serialize_properties": ("inputs", "property_deps"),
    "pulumi.runtime.mocks.set_mocks": ("mocks", "project", "stack", "preview", "logger", "monitor"),
    "pulumi.runtime.mocks.MockResourceArgs": ("typ", "name", "inputs", "provider", "resource_id", "custom"),
    "pulumi.runtime.mocks.MockMonitor.__init__": ("mocks",),
    "pulumi.runtime.mocks.MockMonitor.make_urn": ("parent", "type_", "name"),
    "pulumi.runtime.mocks.MockMonitor.RegisterResource": ("request",),
    "pulumi.runtime.mocks.MockMonitor.RegisterResourceOutputs": ("request",),
    "pulumi.runtime.set_all_config": ("config", "secret_keys"),
    "pulumi.runtime.settings.get_root_resource": (),
    "pulumi.runtime.stack.Stack": (),  # the root resource; run_program reads its `outputs`
    "pulumi.runtime.config.CONFIG": (),  # read by __main__.py for model/config/ (every key, so unknown ones are caught)
    "pulumi.runtime.is_config_secret": ("k",),
}
# Fields of the gRPC messages CapturingMonitor reads and answers with.
SDK_MESSAGES: dict[str, tuple[str, ...]] = {
    "RegisterResourceRequest": ("type", "name", "parent", "custom", "object", "dependencies", "provider", "importId"),
    "RegisterResourceResponse": ("urn", "id", "object"),
    "RegisterResourceOutputsRequest": ("urn", "outputs"),
}


def sdk_version() -> str:
    try:
        return importlib.metadata.version("pulumi")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown)"


def _resolve(dotted: str) -> Any:
    """The object at `pulumi.a.b.c`, or AttributeError/ImportError naming the first part that is missing."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            value = getattr(value, part)
        return value
    raise ImportError(dotted)


def sdk_contract_problems() -> list[str]:
    """What of SDK_CONTRACT and SDK_MESSAGES the installed SDK lacks, one phrase each (empty: all there)."""
    problems: list[str] = []
    for dotted, params in SDK_CONTRACT.items():
        try:
            value = _resolve(dotted)
        except (AttributeError, ImportError):
            problems.append(f"{dotted} is gone")
            continue
        if params:
            try:
                names = inspect.signature(value).parameters
            except (TypeError, ValueError):
                problems.append(f"{dotted} is no longer callable")
                continue
            missing = [p for p in params if p not in names]
            if missing:
                problems.append(f"{dotted} takes no {', '.join(missing)}")
    try:
        from pulumi.runtime import rpc

        signature = (getattr(rpc, "_special_sig_key", None), getattr(rpc, "_special_secret_sig", None))
        if signature != (SECRET_SIG_KEY, SECRET_SIG):
            problems.append("the wire secret signature (pulumi.runtime.rpc._special_sig_key/_special_secret_sig) "
                            "changed")
        from pulumi.runtime.proto import resource_pb2

        for message, fields in SDK_MESSAGES.items():
            descriptor = getattr(resource_pb2, message).DESCRIPTOR
            missing = [f for f in fields if f not in descriptor.fields_by_name]
            if missing:
                problems.append(f"resource_pb2.{message} has no {', '.join(missing)}")
    except (ImportError, AttributeError) as exc:
        problems.append(f"pulumi.runtime.rpc / resource_pb2: {exc}")
    registration = getattr(pulumi_mocks.MockMonitor, "ResourceRegistration", None)
    if getattr(registration, "_fields", None) != ("urn", "id", "state"):
        problems.append("pulumi.runtime.mocks.MockMonitor.ResourceRegistration is not (urn, id, state)")
    return problems


def _version_tuple(text: str) -> tuple[int, ...] | None:
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(g) for g in match.groups()) if match else None


def _shown_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def check_sdk() -> None:
    """At the start of every run: the installed SDK is in SUPPORTED_PULUMI and offers what the engine takes from it.
    Raises SdkError, one line naming the SDK version."""
    version = sdk_version()
    low, below = SUPPORTED_PULUMI
    supported = f">={_shown_version(low)},<{_shown_version(below)}"
    parsed = _version_tuple(version)
    if parsed is None or not low <= parsed < below:
        raise SdkError(f"requirements.txt: pulumi=={version}: outside the SDK range gitops/engine/sdk.py supports "
                       f"({supported}): it runs on SDK internals that change without notice; hint: pin pulumi in "
                       f"that range (make lock), or run tests/gitops/engine/test_sdk.py with {version} and widen "
                       f"SUPPORTED_PULUMI in gitops/engine/sdk.py")
    problems = sdk_contract_problems()
    if problems:
        raise SdkError(f"requirements.txt: pulumi=={version}: lacks what gitops/engine/sdk.py takes from the SDK: "
                       f"{'; '.join(problems)}; hint: pin the SDK back (make lock) or adapt gitops/engine/sdk.py to it")

