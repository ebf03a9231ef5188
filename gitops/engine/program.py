"""Run the real `__main__.py` offline under the Pulumi SDK's mock engine and capture what the engine receives.

No Pulumi CLI, no provider plugin, no cluster: `pulumi.runtime.set_mocks` replaces the engine, the stack's
config comes from `Pulumi.yaml` + `Pulumi.<stack>.yaml` (gitops/engine/stacks.py), and a `MockMonitor` subclass
records every RegisterResource request (type, name, parent, dependencies, provider, inputs) exactly as the SDK sent
it. Each run happens in a fresh `contextvars.Context`: the SDK keeps its settings and root resource in context
variables, so two stacks can run in one process without seeing each other.
"""

from __future__ import annotations

import contextvars
import logging
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks

from gitops.engine.sdk import SECRET_SIG, SECRET_SIG_KEY, check_sdk
from gitops.engine.stacks import ROOT, load_engine_config


@dataclass(frozen=True)
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    dependencies: tuple[str, ...]
    provider: str
    custom: bool
    inputs: dict[str, Any]
    secret_paths: tuple[str, ...]


@dataclass
class Capture:
    stack: str
    registrations: list[Registration] = field(default_factory=list)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    stack_outputs: dict[str, Any] = field(default_factory=dict)
    logs: list[tuple[str, str]] = field(default_factory=list)
    # The config the engine passed the program (`namespace:key` -> text, JSON for a structured value, a secret's
    # value a placeholder): the stack file as the program read it, which a refusal can name the cause in.
    config: dict[str, str] = field(default_factory=dict)

    def by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.registrations}


def _secret_paths(value: Any, path: str = "") -> list[str]:
    """Where in a serialized property struct the SDK marked a value as secret."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return [path or "(root)"]
        return [p for k, v in sorted(value.items()) for p in _secret_paths(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _secret_paths(v, f"{path}[{i}]")]
    return []


SECRET_PLACEHOLDER = "[secret]"


def _plain(value: Any, path: str = "", secrets: list[str] | None = None) -> Any:
    """Struct numbers travel as doubles; Kubernetes objects only ever hold integers there. A secret-wrapped value
    becomes a placeholder (its path recorded in `secrets`), so no later step can print or write the plaintext."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            if secrets is not None:
                secrets.append(path or "(root)")
            return SECRET_PLACEHOLDER
        return {k: _plain(v, f"{path}.{k}" if path else k, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]", secrets) for i, v in enumerate(value)]
    return value


class _Mocks(pulumi_mocks.Mocks):
    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict, None]:
        return {}, None


class CapturingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, capture: Capture) -> None:
        self.capturing_mocks = _Mocks()  # self.mocks, typed as ours: its ids are never None
        super().__init__(self.capturing_mocks)
        self.capture = capture

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        # MockMonitor.RegisterResource, plus the capture, with one deserialization instead of two.
        from pulumi.runtime import rpc, sync_await
        from pulumi.runtime.proto import resource_pb2

        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        inputs = rpc.deserialize_properties(request.object)
        id_, state = self.capturing_mocks.new_resource(pulumi_mocks.MockResourceArgs(
            typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
            resource_id=request.importId, custom=request.custom or False))
        sync_await._ensure_event_loop()
        obj_proto = sync_await._sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, id_, state)
        plain_inputs, secret_paths = _captured_inputs(request.object, inputs)
        self.capture.registrations.append(Registration(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            dependencies=tuple(request.dependencies),
            provider=request.provider,
            custom=bool(request.custom),
            inputs=plain_inputs,
            secret_paths=tuple(secret_paths),
        ))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj_proto)

    def RegisterResourceOutputs(self, request):  # noqa: N802
        from pulumi.runtime import rpc

        outputs = _plain(rpc.deserialize_properties(request.outputs))
        if request.urn.split("::")[2] == "pulumi:pulumi:Stack":
            self.capture.stack_outputs = outputs
        else:
            self.capture.outputs[request.urn] = outputs
        return super().RegisterResourceOutputs(request)


def _captured_inputs(wire: Any, inputs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The inputs as the capture keeps them: plain values, every secret a placeholder, and where the secrets were."""
    secret_paths: list[str] = []
    plain_inputs = _plain(inputs, "", secret_paths)
    if not secret_paths and SECRET_SIG.encode() in wire.SerializeToString():
        # Unwrapped by deserialization yet marked on the wire: find where, and drop the whole object's values.
        from google.protobuf import json_format
        secret_paths = _secret_paths(json_format.MessageToDict(wire))
        plain_inputs = {k: v for k, v in plain_inputs.items() if k in ("apiVersion", "kind", "metadata")}
    return plain_inputs, secret_paths


class _CapturingLogHandler(logging.Handler):
    """The program's pulumi.log.* messages, kept for the export to show (the CLI would print them)."""

    def __init__(self, capture: Capture) -> None:
        super().__init__(level=logging.INFO)
        self.capture = capture

    def emit(self, record: logging.LogRecord) -> None:
        self.capture.logs.append((record.levelname.lower(), record.getMessage()))


def _logger_for(capture: Capture) -> logging.Logger:
    logger = logging.Logger(f"gitops.engine.{capture.stack}", level=logging.INFO)  # not registered, not propagated
    logger.propagate = False
    logger.addHandler(_CapturingLogHandler(capture))
    return logger


def run_program(stack: str, root: Path = ROOT) -> Capture:
    """Run `root/__main__.py` for `stack` under mocks. Raises what the program raises (ConfigError, …), SdkError
    for an SDK outside the supported range. The program imports `components` as installed (`pip install -e .`)."""
    check_sdk()
    project, config, secret_keys = load_engine_config(stack, root)
    capture = Capture(stack=stack, config=config)

    def run() -> None:
        from pulumi.runtime import stack as sdk_stack, sync_await

        sync_await._ensure_event_loop()  # set_mocks makes futures at once: a loop must be current
        pulumi.runtime.set_all_config(config, secret_keys)
        monitor = CapturingMonitor(capture)
        pulumi_mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor,
                               logger=_logger_for(capture))
        main = str(root / "__main__.py")

        def program() -> None:
            runpy.run_path(main, run_name="__main__")

        sync_await._sync_await(sdk_stack.run_pulumi_func(program))
        # set_mocks' root Stack registered its (empty) outputs before the program ran; read the exports directly.
        root_stack = pulumi.runtime.settings.get_root_resource()
        assert isinstance(root_stack, sdk_stack.Stack), "set_mocks makes the root resource a pulumi Stack"
        exported = sync_await._sync_await(pulumi.Output.from_input(dict(root_stack.outputs)).future())
        capture.stack_outputs = _plain(exported or {})

    contextvars.Context().run(run)
    return capture
