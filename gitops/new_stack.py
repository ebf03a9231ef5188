"""A new stack: `make new-stack STACK=<name> NODES="node-1 node-2"` (`python -m gitops.new_stack`).

Writes `Pulumi.<stack>.yaml` from templates/Pulumi.stack.yaml with the stack's name and nodes filled in: the tiers
of a `flux bootstrap` repository under ./kubernetes/<stack>/, render mode, Plex with the GPU gate on `auto`. The
file is validated as the export validates it before it is written, so it exports cleanly as it is; the values
marked `change:` are the cluster's own to review. Refuses (exit 2, one line, nothing written) a name Pulumi or the
export would not take, an existing stack file, no nodes or a node name Kubernetes would not take.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from gitops.engine.stacks import ROOT, StackFileError, check_stack_name

TEMPLATE = ROOT / "templates" / "Pulumi.stack.yaml"


def render(stack: str, nodes: list[str], template: Path = TEMPLATE) -> str:
    """The stack file's text. Node names are written as JSON strings (valid YAML whatever they hold); the models
    judge them."""
    text = template.read_text(encoding="utf-8")
    items = "\n".join(f"      - {node if _plain(node) else json.dumps(node)}" for node in nodes)
    return text.replace("${nodes}", items).replace("${stack}", stack)


def _plain(node: str) -> bool:
    """Written unquoted: a name YAML cannot read as anything but that string."""
    return re.fullmatch(r"[a-z][a-z0-9.-]*", node) is not None and node not in _YAML_WORDS


_YAML_WORDS = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"}


def problems(stack: str, nodes: list[str], text: str) -> list[str]:
    """What the export would refuse in the new stack file (its config), one line each."""
    import yaml

    from model.config import PROJECT, ConfigError, parse_stack_config

    source = f"Pulumi.{stack}.yaml"
    if not nodes:
        return [f"{source}: {PROJECT}:cluster.nodes: no nodes given; "
                f"hint: NODES=\"<node> <node> …\" (kubectl get nodes)"]
    config = (yaml.safe_load(text) or {}).get("config") or {}
    raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{PROJECT}:")}
    try:
        parse_stack_config(raw, source, stack)
    except ConfigError as exc:
        return exc.lines
    return []


def _refused(lines: list[str]) -> int:
    """Every refusal the same way: one `error:` line per problem, then that nothing was written; exit 2."""
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
    print("nothing was written", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.new_stack", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stack", required=True, help="the new stack's name")
    parser.add_argument("--nodes", required=True, help="its node names, separated by spaces")
    parser.add_argument("--project-dir", type=Path, default=ROOT, help="where the stack files live (default: here)")
    args = parser.parse_args(argv)
    stack, nodes = args.stack, args.nodes.split()
    try:
        check_stack_name(stack)
    except StackFileError as exc:
        return _refused([str(exc)])
    target = args.project_dir / f"Pulumi.{stack}.yaml"
    if target.exists():
        return _refused([f"{target.name}: (file): exists already; hint: choose another STACK, or edit {target.name}"])
    text = render(stack, nodes)
    lines = problems(stack, nodes, text)
    if lines:
        return _refused(lines)
    with open(target, "x", encoding="utf-8") as handle:  # never over a file created meanwhile
        handle.write(text)
    print(f"wrote {target.name} ({len(nodes)} nodes); review the values marked `change:`, then "
          f"`make export STACK={stack}`; commit it with its tree snapshot tests/golden/tree/{stack}/ (`make new-stack` "
          f"writes that; else `make golden`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
