"""Run the real `__main__.py` offline under the Pulumi SDK's mock engine and capture what the engine receives.

No Pulumi CLI, no provider plugin, no cluster: `pulumi.runtime.set_mocks` replaces the engine, the stack's
config comes from `Pulumi.yaml` + `Pulumi.<stack>.yaml`, and a `MockMonitor` subclass records every
RegisterResource request (type, name, parent, dependencies, provider, inputs) exactly as the SDK sent it.
Each run happens in a fresh `contextvars.Context`: the SDK keeps its settings and root resource in context
variables, so two stacks can run in one process without seeing each other.
"""

from __future__ import annotations

import contextvars
import json
import logging
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await
import yaml

ROOT = Path(__file__).resolve().parent.parent
PROJECT_FILE = "Pulumi.yaml"
# The SDK marks a secret value on the wire with this signature key/value pair (pulumi/runtime/rpc.py).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


class StackFileError(Exception):
    """A stack or project file that cannot be read; the message names the file and what is wrong."""


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

    def by_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.registrations}

    def one(self, type_: str, name: str) -> Registration:
        found = [r for r in self.registrations if r.type == type_ and r.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} registrations of {type_} named {name!r}")
        return found[0]


def _secret_paths(value: Any, path: str = "") -> list[str]:
    """Where in a serialized property struct the SDK marked a value as secret."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
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
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
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
        super().__init__(_Mocks())
        self.capture = capture

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        # MockMonitor.RegisterResource, plus the capture, with one deserialization instead of two.
        from pulumi.runtime import rpc
        from pulumi.runtime.proto import resource_pb2
        from pulumi.runtime.sync_await import _ensure_event_loop

        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()
        inputs = rpc.deserialize_properties(request.object)
        id_, state = self.mocks.new_resource(pulumi_mocks.MockResourceArgs(
            typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
            resource_id=request.importId, custom=request.custom or False))
        obj_proto = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, id_, state)
        secret_paths: list[str] = []
        plain_inputs = _plain(inputs, "", secret_paths)
        if not secret_paths and _SECRET_SIG.encode() in request.object.SerializeToString():
            # Unwrapped by deserialization yet marked on the wire: find where, and drop the whole object's values.
            from google.protobuf import json_format
            secret_paths = _secret_paths(json_format.MessageToDict(request.object))
            plain_inputs = {k: v for k, v in plain_inputs.items() if k in ("apiVersion", "kind", "metadata")}
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


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StackFileError(f"{path.name}: file not found in {path.parent}") from None
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when available
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise StackFileError(f"{path.name}:{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def load_engine_config(stack: str, root: Path = ROOT) -> tuple[str, dict[str, str], list[str]]:
    """(project, config as the engine passes it: `ns:key` -> JSON text for structured values, secret keys)."""
    project_doc = _read_yaml(root / PROJECT_FILE) or {}
    if not isinstance(project_doc, dict):
        raise StackFileError(f"{PROJECT_FILE}: (root): must be a mapping with name, runtime and config")
    project = project_doc.get("name")
    if not isinstance(project, str):
        raise StackFileError(f"{PROJECT_FILE}: name: {project!r}: must be the project name")
    stack_path = root / f"Pulumi.{stack}.yaml"
    if not stack_path.exists():
        raise StackFileError(
            f"Pulumi.{stack}.yaml: no such stack file; stacks: {', '.join(available_stacks(root)) or '(none)'}"
        )
    stack_doc = _read_yaml(stack_path) or {}
    if not isinstance(stack_doc, dict) or not isinstance(stack_doc.get("config", {}), dict):
        raise StackFileError(f"{stack_path.name}: config: must be a mapping of `{project}:<key>` to values")
    merged: dict[str, Any] = {}
    for key, value in (project_doc.get("config") or {}).items():
        if ":" in key:  # project-level config of other namespaces (pulumi:disable-default-providers, …)
            merged[key] = value
    for key, value in (stack_doc.get("config") or {}).items():
        key = str(key)
        merged[key if ":" in key else f"{project}:{key}"] = value
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in merged.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(key)
            value = "[secret]"  # never decrypted here; the program refuses secret config anyway
        config[key] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return project, config, sorted(secret_keys)


def _ensure_importable() -> None:
    """The program imports `components`, which lives here whatever project folder the stack files come from."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def run_program(stack: str, root: Path = ROOT) -> Capture:
    """Run `root/__main__.py` for `stack` under mocks. Raises what the program raises (ConfigError, …)."""
    project, config, secret_keys = load_engine_config(stack, root)
    _ensure_importable()
    capture = Capture(stack=stack)

    def run() -> None:
        pulumi.runtime.set_all_config(config, secret_keys)
        monitor = CapturingMonitor(capture)
        pulumi_mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor,
                               logger=_logger_for(capture))
        main = str(root / "__main__.py")
        _sync_await(run_pulumi_func(lambda: runpy.run_path(main, run_name="__main__")))
        # set_mocks' root Stack registered its (empty) outputs before the program ran; read the exports directly.
        root_stack = pulumi.runtime.settings.get_root_resource()
        exported = _sync_await(pulumi.Output.from_input(dict(root_stack.outputs)).future())
        capture.stack_outputs = _plain(exported or {})

    contextvars.Context().run(run)
    return capture
