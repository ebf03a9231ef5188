"""Run the real `__main__.py` offline under the Pulumi SDK's mock engine and capture what the engine receives.

No Pulumi CLI, no provider plugin, no cluster: `pulumi.runtime.set_mocks` replaces the engine, the stack's
config comes from `Pulumi.yaml` + `Pulumi.<stack>.yaml`, and a `MockMonitor` subclass records every
RegisterResource request (type, name, parent, dependencies, provider, inputs) exactly as the SDK sent it.
Each run happens in a fresh `contextvars.Context`: the SDK keeps its settings and root resource in context
variables, so two stacks can run in one process without seeing each other.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import importlib.metadata
import inspect
import json
import logging
import re
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks

from components.safe_yaml import InputFileError, escaped, load_yaml, read_text
from gitops import levers

ROOT = Path(__file__).resolve().parent.parent
PROJECT_FILE = "Pulumi.yaml"
# The SDK marks a secret value on the wire with this signature key/value pair (pulumi/runtime/rpc.py).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

# The Pulumi SDK releases this engine was checked against: it runs on SDK internals (below), so each new release
# is run through tests/test_sdk_contract.py before this range is widened.
SUPPORTED_PULUMI = ((3, 272, 0), (3, 273, 0))  # at least, below


class StackFileError(Exception):
    """A stack or project file that cannot be read; the message names the file and what is wrong."""


class SdkError(StackFileError):
    """The installed Pulumi SDK is not one this engine supports; one line naming its version."""


# --- what the engine takes from the SDK --------------------------------------------------------------------------
# Private names and shapes, pinned by tests/test_sdk_contract.py: `_sync_await` and `run_pulumi_func` run the program
# to completion like the language host, the wire secret signature marks secret values, MockMonitor's RegisterResource
# shape is what CapturingMonitor extends, `set_mocks`/`MockResourceArgs` take these keywords.
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
    "pulumi.runtime.config.CONFIG": (),  # read by components/config.py (every key, so unknown ones are caught)
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
        if signature != (_SECRET_SIG_KEY, _SECRET_SIG):
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
        raise SdkError(f"requirements.txt: pulumi=={version}: outside the SDK range gitops/engine.py supports "
                       f"({supported}): it runs on SDK internals that change without notice; hint: pin pulumi in "
                       f"that range (make lock), or run tests/test_sdk_contract.py with {version} and widen "
                       f"SUPPORTED_PULUMI in gitops/engine.py")
    problems = sdk_contract_problems()
    if problems:
        raise SdkError(f"requirements.txt: pulumi=={version}: lacks what gitops/engine.py takes from the SDK: "
                       f"{'; '.join(problems)}; hint: pin the SDK back (make lock) or adapt gitops/engine.py to it")


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
        if levers.on("echo-state"):
            # _Mocks.new_resource returns the inputs as the state, so the state's struct is the request's own
            # (secret markers included: deserialization keeps them as marker dicts, which serialize back the same).
            obj_proto = request.object
        else:
            sync_await._ensure_event_loop()
            obj_proto = sync_await._sync_await(rpc.serialize_properties(state, {}))
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


# Stack and project files are small; anything larger is the wrong file (and is not read into memory whole).
MAX_STACK_FILE_BYTES = 1024 * 1024
# The top-level keys of a stack file: `config`, and Pulumi's own (encryption settings, ESC environments), which
# the offline export does not use. Anything else is a typo or a key Pulumi would not read either.
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")
# Config namespaces besides the project's own: Pulumi's and the kubernetes provider's.
OTHER_CONFIG_NAMESPACES = ("pulumi", "kubernetes")

# Pulumi's stack-name rule (sdk/go/common/tokens ParseStackName, the same in the service): 1 to 100 characters,
# each an ASCII letter, digit, '-', '_' or '.'.
PULUMI_STACK_NAME_MAX = 100
_PULUMI_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]*")


def _shown(text: str, limit: int = 60) -> str:
    """A name as an error line may show it: control characters escaped, cut after `limit` characters."""
    shown = escaped(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}… ({len(text)} characters)"


@functools.cache
def max_stack_name_length() -> int:
    """Pulumi's 100, or less: the export writes the stack name into the first comment line of every file
    ("# Generated by `make export STACK=<stack>` from <module>. …", gitops/tree.py), and that line must stay
    within the line length of the export's own yamllint (.yamllint.yaml)."""
    from components.config import EXPORT_LINE_MAX
    from gitops import tree

    longest = max(len(line) for placement in tree.PLACEMENTS.values()
                  for line in tree._header("", None, tree._source_of(placement.component.TYPE)))
    return min(PULUMI_STACK_NAME_MAX, EXPORT_LINE_MAX - longest)


def stack_name_problem(stack: str) -> str | None:
    """What is wrong with a stack name, or None. Checked before the name is used in any path."""
    if stack == "":
        return "empty; Pulumi needs a name"
    match = _PULUMI_STACK_NAME.match(stack)
    end = match.end() if match else 0  # `[…]*` matches at the start of any string: match is never None
    if end != len(stack):
        return (f"{json.dumps(stack[end], ensure_ascii=False)} at position {end}: Pulumi allows only "
                "letters, digits, '-', '_' and '.' in a stack name")
    if len(stack) > PULUMI_STACK_NAME_MAX:
        return f"{len(stack)} characters: Pulumi allows at most {PULUMI_STACK_NAME_MAX}"
    if stack.startswith("."):
        return ("starts with '.': the export uses the name as a folder (clusters/<stack>, components/<stack>), "
                "where '.', '..' and hidden names would land elsewhere")
    if len(stack) > max_stack_name_length():
        return (f"{len(stack)} characters: at most {max_stack_name_length()}, so that the header line naming it in "
                f"every exported file stays within yamllint's line length")
    return None


def check_stack_name(stack: str) -> None:
    problem = stack_name_problem(stack)
    if problem is not None:
        shown = _shown(stack) or '""'
        raise StackFileError(f"{shown}: stack name: {problem}; hint: name the stack file "
                             f"Pulumi.<stack>.yaml with a short name such as dev or prod, and pass that name")


def _read_yaml(path: Path) -> Any:
    try:
        return load_yaml(read_text(path, MAX_STACK_FILE_BYTES))
    except FileNotFoundError:
        raise StackFileError(f"{path.name}: file not found in {path.parent}") from None
    except InputFileError as exc:
        raise StackFileError(exc.line(path.name)) from None


def available_stacks(root: Path = ROOT) -> list[str]:
    """Every `Pulumi.<stack>.yaml` in `root`, bad names included: loading one refuses it with its reason."""
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def _did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def _key_problems(value: Any, key: str, source: str) -> list[str]:
    """Mapping keys inside a config value must be strings: the engine hands values over as JSON."""
    problems: list[str] = []
    todo = [(value, key)]
    while todo:
        current, where = todo.pop()
        if isinstance(current, dict):
            for k, v in current.items():
                if not isinstance(k, str):
                    problems.append(f"{source}: {where}.{_shown(str(k))}: the key {json.dumps(k)} is not a string; "
                                    f"hint: quote it")
                else:
                    todo.append((v, f"{where}.{escaped(k)}"))
        elif isinstance(current, list):
            todo.extend((v, f"{where}[{i}]") for i, v in enumerate(current))
    return problems


def _stack_config(stack_doc: Any, source: str, project: str) -> dict[str, Any]:
    """The stack file's `config`, every key `namespace:key`; unknown top-level keys and namespaces refused."""
    if stack_doc is None:
        return {}
    if not isinstance(stack_doc, dict):
        raise StackFileError(f"{source}: (root): must be a mapping with `config:`; hint: start the file with "
                             f"`config:` and indent `{project}:<key>: value` under it")
    problems: list[str] = []
    for key in stack_doc:
        if key not in STACK_FILE_KEYS:
            guess = _did_you_mean(str(key), STACK_FILE_KEYS)
            problems.append(f"{source}: {_shown(str(key))}: unknown top-level key of a stack file (Pulumi reads "
                            f"{', '.join(STACK_FILE_KEYS)}); hint: "
                            + (f"did you mean {guess}?" if guess
                               else f"put settings under `config:` as {project}:<key>"))
    config = stack_doc.get("config")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        problems.append(f"{source}: config: must be a mapping of `{project}:<key>` to values; hint: indent "
                        f"`{project}:<key>: value` lines under `config:`")
        raise StackFileError("\n".join(problems))
    namespaces = (project, *OTHER_CONFIG_NAMESPACES)
    result: dict[str, Any] = {}
    for key, value in config.items():
        if not isinstance(key, str):
            problems.append(f"{source}: config.{_shown(str(key))}: the key {json.dumps(key)} is not a string; "
                            f"hint: config keys are `{project}:<key>`")
            continue
        namespace, colon, name = key.partition(":")
        if not colon:
            namespace, name, key = project, key, f"{project}:{key}"  # Pulumi reads a bare key as the project's
        if namespace not in namespaces:
            guess = _did_you_mean(namespace, namespaces)
            problems.append(f"{source}: {_shown(key)}: unknown config namespace {json.dumps(namespace)} (known: "
                            f"{', '.join(namespaces)}); its settings would be silently ignored; hint: "
                            + (f"did you mean {guess}:{_shown(name)}?" if guess else f"use {project}:{_shown(name)}"))
            continue
        problems += _key_problems(value, key, source)
        result[key] = value
    if problems:
        raise StackFileError("\n".join(problems))
    return result


def load_engine_config(stack: str, root: Path = ROOT) -> tuple[str, dict[str, str], list[str]]:
    """(project, config as the engine passes it: `ns:key` -> JSON text for structured values, secret keys)."""
    check_stack_name(stack)
    project_doc = _read_yaml(root / PROJECT_FILE) or {}
    if not isinstance(project_doc, dict):
        raise StackFileError(f"{PROJECT_FILE}: (root): must be a mapping with name, runtime and config; "
                             "hint: restore it from git")
    project = project_doc.get("name")
    if not isinstance(project, str):
        raise StackFileError(f"{PROJECT_FILE}: name: {_shown(repr(project))}: must be the project name; "
                             "hint: restore it from git")
    project_config = project_doc.get("config") or {}
    if not isinstance(project_config, dict):
        raise StackFileError(f"{PROJECT_FILE}: config: must be a mapping; hint: restore it from git")
    stack_path = root / f"Pulumi.{stack}.yaml"
    if not stack_path.exists():
        stacks = available_stacks(root)
        raise StackFileError(
            f"Pulumi.{stack}.yaml: no such stack file; stacks: {', '.join(map(_shown, stacks)) or '(none)'}; hint: "
            + (f"--stack {stacks[0]}, or create Pulumi.{stack}.yaml" if stacks else f"create Pulumi.{stack}.yaml"))
    stack_config = _stack_config(_read_yaml(stack_path), stack_path.name, project)
    merged: dict[str, Any] = {}
    for key, value in project_config.items():
        if isinstance(key, str) and ":" in key:  # project-level config of other namespaces (pulumi:disable-…)
            merged[key] = value
    merged.update(stack_config)
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in merged.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(key)
            value = "[secret]"  # never decrypted here; the program refuses secret config anyway
        config[key] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return project, config, sorted(secret_keys)


# What the `no-source-trace` lever replaces: module globals of pulumi.runtime.resource that register_resource calls
# by name for every resource. Checked at each use; anything else and the lever stays off (the SDK-contract test fails).
SOURCE_TRACE_FUNCTIONS = {"_get_stack_trace": (), "_get_source_position": ("stack",)}


def source_trace_contract_problems() -> list[str]:
    from pulumi.runtime import resource as sdk_resource

    problems = []
    for name, params in SOURCE_TRACE_FUNCTIONS.items():
        function = getattr(sdk_resource, name, None)
        if not callable(function):
            problems.append(f"pulumi.runtime.resource.{name} is gone")
            continue
        try:
            found = tuple(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            found = None
        if found != params:
            problems.append(f"pulumi.runtime.resource.{name} takes {found}, not {params}")
    return problems


def _no_stack_trace() -> Any:
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


def _no_source_position(stack: Any) -> None:
    return None


@contextlib.contextmanager
def _source_trace_skipped() -> Any:
    """While the program runs, the SDK does not walk the Python stack for every resource (the trace only ever goes
    to the Pulumi engine's diagnostics, which the mock engine drops)."""
    from pulumi.runtime import resource as sdk_resource

    if not levers.on("no-source-trace") or source_trace_contract_problems():
        yield
        return
    saved = {name: getattr(sdk_resource, name) for name in SOURCE_TRACE_FUNCTIONS}
    sdk_resource._get_stack_trace = _no_stack_trace  # type: ignore[attr-defined]
    sdk_resource._get_source_position = _no_source_position  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(sdk_resource, name, function)


def run_program(stack: str, root: Path = ROOT) -> Capture:
    """Run `root/__main__.py` for `stack` under mocks. Raises what the program raises (ConfigError, …), SdkError
    for an SDK outside the supported range. The program imports `components` as installed (`pip install -e .`)."""
    check_sdk()
    project, config, secret_keys = load_engine_config(stack, root)
    capture = Capture(stack=stack)

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

    with _source_trace_skipped():
        contextvars.Context().run(run)
    return capture
