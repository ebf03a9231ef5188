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
import sys
from pathlib import Path
from typing import Any

from components.evidence import EVIDENCE_DIR, RESOURCE, WRONG_DRIVER_RESOURCE, evidence_path, parse_count
from gitops.engine import ROOT, StackFileError, load_engine_config


class InputError(Exception):
    pass


def configured_nodes(stack: str, project_dir: Path) -> list[str]:
    from components.config import ConfigError, parse_stack_config, project_config

    _, config, secret_keys = load_engine_config(stack, project_dir)
    source = f"Pulumi.{stack}.yaml"
    try:
        return list(parse_stack_config(project_config(config, secret_keys, source), source).cluster.nodes)
    except ConfigError as exc:
        raise InputError("\n".join(exc.lines)) from None


def allocatable_by_node(doc: Any, source: str) -> dict[str, dict[str, Any]]:
    if not isinstance(doc, dict) or doc.get("kind") not in ("List", "NodeList") or not isinstance(doc.get("items"), list):
        raise InputError(f"{source}: not the output of `kubectl get nodes -o json` (expected kind List with items)")
    nodes: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(doc["items"]):
        if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
            raise InputError(f"{source}: items[{i}]: not a Node")
        name = (item.get("metadata") or {}).get("name")
        if not isinstance(name, str):
            raise InputError(f"{source}: items[{i}].metadata.name: missing")
        nodes[name] = dict((item.get("status") or {}).get("allocatable") or {})
    return nodes


def report(stack: str, configured: list[str], allocatable: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, int]]:
    lines, proven = [], {}
    width = max(len(n) for n in configured + list(allocatable))
    for name in configured:
        if name not in allocatable:
            lines.append(f"{name:<{width}}  ABSENT (node not in the input)")
            continue
        alloc = allocatable[name]
        count = parse_count(alloc.get(RESOURCE, "0"))
        if count is None:
            lines.append(f"{name:<{width}}  ABSENT ({RESOURCE}={alloc.get(RESOURCE)!r} is not a whole number)")
        elif count >= 1:
            lines.append(f"{name:<{width}}  {RESOURCE}={count}")
            proven[name] = count
        elif WRONG_DRIVER_RESOURCE in alloc:
            lines.append(f"{name:<{width}}  ABSENT (advertises {WRONG_DRIVER_RESOURCE}={alloc[WRONG_DRIVER_RESOURCE]} "
                         f"instead: the iGPU is bound to the xe driver; Plex requests i915)")
        else:
            lines.append(f"{name:<{width}}  ABSENT")
    for name in sorted(set(allocatable) - set(configured)):
        lines.append(f"{name:<{width}}  (not in Pulumi.{stack}.yaml cluster.nodes; ignored)")
    return lines, proven


def evidence_text(stack: str, proven: dict[str, int]) -> str:
    body = "".join(f"  {name}: {count}\n" for name, count in sorted(proven.items()))
    return (f"# Advertisement evidence for the GPU gate, written by `make verify-nodes STACK={stack} ... WRITE_EVIDENCE=1`\n"
            f"# from `kubectl get nodes -o json`. Node names and allocatable counts only.\n"
            f"stack: {stack}\nresource: {RESOURCE}\nnodes:\n{body}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.verify_nodes", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("nodes_json", help="`kubectl get nodes -o json` output, or - for stdin")
    parser.add_argument("--write-evidence", action="store_true", help=f"store {EVIDENCE_DIR}/<stack>.yaml when all advertise")
    parser.add_argument("--project-dir", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    source = "stdin" if args.nodes_json == "-" else args.nodes_json
    try:
        configured = configured_nodes(args.stack, args.project_dir)
        try:
            text = sys.stdin.read() if args.nodes_json == "-" else Path(args.nodes_json).read_text()
        except OSError as exc:
            raise InputError(f"{source}: cannot read: {exc.strerror}") from None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InputError(f"{source}: not JSON ({exc.msg} at line {exc.lineno})") from None
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
        return 1
    print(f"ready: all {len(configured)} nodes advertise {RESOURCE}")
    if args.write_evidence:
        path = evidence_path(args.project_dir, args.stack)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(evidence_text(args.stack, proven))
        os.replace(tmp, path)
        print(f"wrote {path.relative_to(args.project_dir.resolve()) if path.is_relative_to(args.project_dir.resolve()) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
