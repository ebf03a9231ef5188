"""Advertisement evidence from real node status: `python -m gitops.verify_nodes --stack prod nodes.json`.

Reads `kubectl get nodes -o json` output (a file, or `-` for stdin), prints one line per configured node with its
allocatable gpu.intel.com/i915 or ABSENT, and exits 0 only when every node of the stack's `cluster.nodes`
advertises at least 1. `--write-evidence` then stores `evidence/<stack>.yaml`: node names and counts, nothing else
from the input. Exit codes: 0 all advertise, 1 some do not (nothing written), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gitops.engine.stacks import ROOT, StackFileError, load_engine_config
from model.dra.evidence import (
    DEVICE_CLASS,
    DRA_EVIDENCE_DIR,
    DRIVER,
    SliceInputError,
    claim_report,
    claims_evidence_path,
    claims_evidence_text,
    dra_evidence_path,
    dra_evidence_text,
    read_claims,
    read_slices,
    slice_report,
)
from model.evidence import EVIDENCE_DIR, RESOURCE, WRONG_DRIVER_RESOURCE, evidence_path, parse_count
from model.safe_yaml import InputFileError, decode_text, escaped, load_json, load_yaml, read_text
from policy.rules import DRA_DRIVER_NAMESPACE

# `kubectl get nodes -o json` is ~10 KB per node; this bounds what an untrusted input may make the tool read.
MAX_NODES_BYTES = 64 * 1024 * 1024
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HINT = "use the output of `kubectl get nodes -o json` as it is"
_TTY_HINT = "NODES=<file of kubectl get nodes -o json>"


T = TypeVar("T")


class InputError(Exception):
    pass


def stack_config(stack: str, project_dir: Path) -> Any:
    from model.config import ConfigError, parse_stack_config, project_config

    _, config, secret_keys = load_engine_config(stack, project_dir)
    source = f"Pulumi.{stack}.yaml"
    try:
        return parse_stack_config(project_config(config, secret_keys, source), source)
    except ConfigError as exc:
        raise InputError("\n".join(exc.lines)) from None


def configured_nodes(stack: str, project_dir: Path) -> list[str]:
    return list(stack_config(stack, project_dir).cluster.nodes)


def _mapping(item: dict[str, Any], key: str, where: str, source: str) -> dict[str, Any]:
    """`item[key]` as a mapping; absent or null is empty; anything else is refused."""
    value = item.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}.get(
            type(value), type(value).__name__)
        raise InputError(f"{source}: {where}.{key}: {kind}, not a mapping; hint: {_HINT}")
    return value


def allocatable_by_node(doc: Any, source: str) -> dict[str, dict[str, Any]]:
    """Node name -> its status.allocatable. The input is untrusted: every shape is checked, one line per refusal.
    A node without status (or without allocatable) advertises nothing."""
    if (not isinstance(doc, dict) or doc.get("kind") not in ("List", "NodeList")
            or not isinstance(doc.get("items"), list)):
        raise InputError(f"{source}: (root): not the output of `kubectl get nodes -o json` (expected kind List with "
                         f"items); hint: {_HINT}")
    nodes: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(doc["items"]):
        where = f"items[{i}]"
        if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
            raise InputError(f"{source}: {where}: not a Node; hint: {_HINT}")
        metadata = _mapping(item, "metadata", where, source)
        name = metadata.get("name")
        if name is None:  # absent, or null
            raise InputError(f"{source}: {where}.metadata.name: missing; hint: {_HINT}")
        if not isinstance(name, str):
            raise InputError(f"{source}: {where}.metadata.name: {_shown(json.dumps(name), escape=False)}: "
                             f"{_json_kind(name)}, not a name; hint: {_HINT}")
        if len(name) > 253 or not NODE_NAME.match(name):
            raise InputError(f"{source}: {where}.metadata.name: \"{_shown(name)}\": not a Kubernetes node name "
                             f"(lowercase letters, digits, '-' and '.', at most 253); hint: {_HINT}")
        if name in nodes:
            raise InputError(f"{source}: {where}.metadata.name: {json.dumps(name)}: a second node of this name; "
                             f"hint: {_HINT}")
        status = _mapping(item, "status", where, source)
        nodes[name] = dict(_mapping(status, "allocatable", f"{where}.status", source))
    return nodes


def _shown(text: str, limit: int = 80, escape: bool = True) -> str:
    """A value as a line shows it: control characters escaped (JSON text is already), cut after `limit` characters
    with its length."""
    shown = escaped(text) if escape else text
    return shown if len(shown) <= limit else f"{shown[:limit]}… ({len(text)} characters)"


def _json_kind(value: Any) -> str:
    """What JSON calls a value that is not a string, for a line a user reads."""
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, (int, float)) else "a list" if isinstance(value, list) else "an object"


def _again(args: argparse.Namespace, input_var: str) -> str:
    """The command that checks again, with the input the user gave (a placeholder for stdin)."""
    given = args.nodes_json if args.nodes_json != "-" else "<file>"
    return (f"`make verify-nodes STACK={args.stack} {input_var}={given}"
            + (" WRITE_EVIDENCE=1`" if args.write_evidence else "`"))


MAX_COUNT = 10**6  # devices per node: anything above is not a count (and a 5,000-digit one would not even parse)


def _count(value: Any) -> int | None:
    # parse_count after a guard: str.isdigit() also takes '²' and other digits int() refuses.
    if isinstance(value, str) and not (value.isascii() and value.isdigit() and len(value) <= 7):
        return None
    count = parse_count(value)
    return count if count is None or 0 <= count <= MAX_COUNT else None


def read_nodes(path_arg: str) -> str:
    """The text of the node list: a file, or standard input for `-` (never a terminal: nobody types JSON)."""
    source = path_arg
    try:
        if path_arg != "-":
            return read_text(Path(path_arg), MAX_NODES_BYTES)
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError(f"-: standard input is a terminal; hint: {_TTY_HINT}")
        raw = getattr(sys.stdin, "buffer", None)
        if raw is None:  # a text stream (tests)
            text = sys.stdin.read(MAX_NODES_BYTES + 1)
            data = text.encode("utf-8", "surrogatepass")
        else:
            data = raw.read(MAX_NODES_BYTES + 1)
        if len(data) > MAX_NODES_BYTES:
            raise InputError(f"-: (file): larger than {MAX_NODES_BYTES} bytes; hint: {_HINT}")
        return decode_text(data)
    except FileNotFoundError:
        raise InputError(f"{source}: (file): no such file; hint: {_TTY_HINT}") from None
    except InputFileError as exc:
        raise InputError(exc.line(source)) from None
    except OSError as exc:
        raise InputError(f"{source}: (file): cannot read it: {exc.strerror or exc}; hint: {_HINT}") from None


def report(stack: str, configured: list[str],
           allocatable: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, int]]:
    lines, proven = [], {}
    width = max(len(n) for n in configured + list(allocatable))
    for name in configured:
        if name not in allocatable:
            lines.append(f"{name:<{width}}  ABSENT (node not in the input)")
            continue
        alloc = allocatable[name]
        count = _count(alloc.get(RESOURCE, "0"))
        if count is None:
            value = alloc.get(RESOURCE)  # untrusted: escaped, and cut short
            shown = f'"{escaped(value)}"' if isinstance(value, str) else json.dumps(value)  # ASCII: safe
            shown = shown if len(shown) <= 40 else shown[:40] + "…"
            lines.append(f"{name:<{width}}  ABSENT ({RESOURCE}={shown} is not a device count)")
        elif count >= 1:
            lines.append(f"{name:<{width}}  {RESOURCE}={count}")
            proven[name] = count
        elif WRONG_DRIVER_RESOURCE in alloc:
            xe = _count(alloc[WRONG_DRIVER_RESOURCE])
            lines.append(f"{name:<{width}}  ABSENT (advertises {WRONG_DRIVER_RESOURCE}={'?' if xe is None else xe} "
                         f"instead: the iGPU is bound to the xe driver; Plex requests i915)")
        else:
            lines.append(f"{name:<{width}}  ABSENT")
    for name in sorted(set(allocatable) - set(configured)):
        lines.append(f"{name:<{width}}  (not in Pulumi.{stack}.yaml cluster.nodes; ignored)")
    return lines, proven


def _yaml_str(text: str) -> str:
    # A node or a stack may be named `123`, `null` or `true` (valid names YAML would read as a number, null or a
    # boolean): quoted then, so that the evidence reads back as written.
    try:
        plain = load_yaml(f"{text}: {text}", string_keys=True) == {text: text}
    except InputFileError:
        plain = False
    return text if plain else json.dumps(text)


def evidence_text(stack: str, proven: dict[str, int]) -> str:
    body = "".join(f"  {_yaml_str(name)}: {count}\n" for name, count in sorted(proven.items()))
    return (f"# Advertisement evidence for the GPU gate, written by "
            f"`make verify-nodes STACK={stack} ... WRITE_EVIDENCE=1`\n"
            f"# from `kubectl get nodes -o json`. Node names and allocatable counts only.\n"
            f"stack: {_yaml_str(stack)}\nresource: {RESOURCE}\nnodes:\n{body}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.verify_nodes",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("nodes_json", help="`kubectl get nodes -o json` output (with --slices: `kubectl get "
                                           "deviceclasses,resourceslices -o json`), or - for stdin")
    parser.add_argument("--write-evidence", action="store_true",
                        help=f"store {EVIDENCE_DIR}/<stack>.yaml when all advertise")
    parser.add_argument("--project-dir", type=Path, default=ROOT)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--slices", action="store_true",
                      help="the input is `kubectl get deviceclasses,resourceslices -o json` (gpu.route: dra, step 2): "
                           f"store {DRA_EVIDENCE_DIR}/<stack>.yaml when every node publishes a healthy device")
    what.add_argument("--claims", action="store_true",
                      help="the input is `kubectl get pods,resourceclaims -A -o json` (gpu.route: dra, step 4): store "
                           f"{DRA_EVIDENCE_DIR}/claims/<stack>.yaml when every GPU app runs on an allocated claim")
    args = parser.parse_args(argv)
    if args.slices:
        return verify_slices(args)
    if args.claims:
        return verify_claims(args)
    source = args.nodes_json
    try:
        configured = configured_nodes(args.stack, args.project_dir)
        text = read_nodes(args.nodes_json)
        try:
            doc = load_json(text)
        except InputFileError as exc:
            raise InputError(exc.line(source)) from None
        allocatable = allocatable_by_node(doc, source)
    except (InputError, StackFileError) as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    lines, proven = report(args.stack, configured, allocatable)
    print("\n".join(lines))
    missing = [n for n in configured if n not in proven]
    if missing:
        print(f"not ready: {len(missing)} of {len(configured)} nodes do not advertise {RESOURCE}: {', '.join(missing)}"
              + ("; no evidence written" if args.write_evidence else ""), file=sys.stderr)
        for line in _next_steps(args, missing, allocatable):
            print(f"  next: {line}", file=sys.stderr)
        return 1
    print(f"ready: all {len(configured)} nodes advertise {RESOURCE}")
    if args.write_evidence:
        _write(evidence_path(args.project_dir, args.stack), evidence_text(args.stack, proven), args.project_dir)
    return 0


def _next_steps(args: argparse.Namespace, missing: list[str], allocatable: dict[str, dict[str, Any]]) -> list[str]:
    """What to do about the nodes that do not advertise. A node the input does not hold is no plugin problem, and the
    same file run again cannot find it: its name in the stack file, or the cluster the list came from, is wrong."""
    unseen = [name for name in missing if name not in allocatable]
    seen = [name for name in missing if name in allocatable]
    steps = []
    if unseen:
        given = "standard input" if args.nodes_json == "-" else args.nodes_json
        verb, whose = ("is", "its name") if len(unseen) == 1 else ("are", "their names")
        steps.append(f"{', '.join(unseen)} {verb} not in {given}: check {whose} in Pulumi.{args.stack}.yaml "
                     "(`gpu-platform:cluster` nodes), or the kubeconfig context the `kubectl get nodes -o json` was "
                     "taken from (`kubectl config current-context`)")
    if seen:
        steps.append(f"check the plugin's pods on {', '.join(seen) if unseen else 'those nodes'} (`kubectl -n "
                     f"intel-gpu-plugin get pods -o wide`), then run {_again(args, 'NODES')} again")
    return steps


def _read_json(path_arg: str) -> Any:
    try:
        return load_json(read_nodes(path_arg))
    except InputFileError as exc:
        raise InputError(exc.line(path_arg)) from None


def _dra_input(args: argparse.Namespace, refuse: Callable[[Any], str | None],
               read: Callable[[Any, str], T]) -> tuple[Any, T] | None:
    """The stack's config and the kubectl listing read by `read`; None once the refusal is printed (one line per
    problem: the caller exits 2). `refuse` says why this stack has nothing to prove, or None."""
    try:
        cfg = stack_config(args.stack, args.project_dir)
        problem = refuse(cfg)
        if problem:
            raise InputError(problem)
        return cfg, read(_read_json(args.nodes_json), args.nodes_json)
    except SliceInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except (InputError, StackFileError) as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
    return None


def verify_slices(args: argparse.Namespace) -> int:
    """The DRA route's step 2: every node's slice, printed; the evidence written when all have a healthy device."""
    def refuse(cfg: Any) -> str | None:
        return None if cfg.gpu.route == "dra" else (
            f"Pulumi.{args.stack}.yaml: gpu-platform:gpu.route: {json.dumps(cfg.gpu.route)}: slice evidence is for "
            "the DRA route; hint: set gpu.route: dra (docs/dra.md), or give `kubectl get nodes -o json` to NODES for "
            "the device plugin")

    read = _dra_input(args, refuse, read_slices)
    if read is None:
        return 2
    cfg, slices = read
    nodes, kernel = list(cfg.cluster.nodes), cfg.gpu.dra.kernelDriver
    lines, proven = slice_report(args.stack, nodes, kernel, slices)
    print("\n".join(lines))
    missing = [n for n in nodes if n not in proven]
    if not slices.device_class or missing:
        why = [f"no DeviceClass {DEVICE_CLASS}"] if not slices.device_class else []
        why += [f"{len(missing)} of {len(nodes)} nodes publish no healthy {kernel} device: {', '.join(missing)}"] \
            if missing else []
        print(f"not ready: {'; '.join(why)}" + ("; no evidence written" if args.write_evidence else ""),
              file=sys.stderr)
        print("  next: list the slices (`kubectl get resourceslices`) and check the DRA driver's pods "
              f"(`kubectl -n {DRA_DRIVER_NAMESPACE} get pods -o wide`), then run {_again(args, 'SLICES')} again",
              file=sys.stderr)
        return 1
    print(f"ready: all {len(nodes)} nodes publish a healthy {kernel} device of driver {DRIVER}")
    if args.write_evidence:
        _write(dra_evidence_path(args.project_dir, args.stack), dra_evidence_text(args.stack, kernel, proven),
               args.project_dir)
    return 0


def claiming_apps(cfg: Any) -> list[str]:
    """The GPU apps the DRA route moves to claims (model/dra/gate.py): every app with a GPU not held back on the
    hostPath, the repository's included (the plugin's removal needs them on claims too)."""
    from model.config import keyed_apps  # the config models load only where a stack file is read

    return [name for _, name, app in keyed_apps(cfg)
            if app.hardware.gpu != "none" and app.hardware.intelGpuAccess != "host-path"]


def verify_claims(args: argparse.Namespace) -> int:
    """The DRA route's step 4: each GPU app's pod on an allocated, reserved claim, printed; the evidence written when
    every app has one, and only once the stack is at step 3 (the evidence is what step 5 reads)."""
    def refuse(cfg: Any) -> str | None:
        if cfg.gpu.route == "dra" and cfg.gpu.dra.stage != "driver-added":
            return None
        return (f"Pulumi.{args.stack}.yaml: gpu-platform:gpu.dra.stage: "
                f"{json.dumps(cfg.gpu.dra.stage if cfg.gpu.route == 'dra' else None)}: allocation evidence proves step "
                "3 (apps-on-claims), which this stack has not exported; hint: export and merge gpu.dra.stage: "
                "apps-on-claims first (docs/dra.md)")

    read = _dra_input(args, refuse, read_claims)
    if read is None:
        return 2
    cfg, found = read
    apps = claiming_apps(cfg)
    lines, proven = claim_report(apps, list(cfg.cluster.nodes), found)
    print("\n".join(lines))
    missing = [a for a in apps if a not in proven]
    if missing or not apps:
        why = (f"{len(missing)} of {len(apps)} GPU apps not proven on an allocated claim: {', '.join(missing)}"
               if apps else "no GPU app claims a device")
        print(f"not ready: {why}" + ("; no evidence written" if args.write_evidence else ""), file=sys.stderr)
        print("  next: check the apps' claims (`kubectl get resourceclaims -A`) and their pods, then run "
              f"{_again(args, 'CLAIMS')} again", file=sys.stderr)
        return 1
    print(f"ready: all {len(apps)} GPU apps run on an allocated {DRIVER} claim")
    if args.write_evidence:
        _write(claims_evidence_path(args.project_dir, args.stack), claims_evidence_text(args.stack, proven),
               args.project_dir)
    return 0


def _write(path: Path, text: str, project_dir: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    project = project_dir.resolve()
    print(f"wrote {path.relative_to(project) if path.is_relative_to(project) else path}")


if __name__ == "__main__":
    sys.exit(main())
