"""The resource graph a program run declares: every resource with its parent, provider and dependencies, keyed by
(type, name). Read from the mock capture (tests/test_main_resource_graph.py, against a golden snapshot) and from the
real engine's `pulumi stack export` (tests/e2e), so a `depends_on` lost on either side, or anywhere in between,
shows."""

from __future__ import annotations

from typing import Any, NamedTuple

from gitops.engine.program import Capture

ROOT_TYPE = "pulumi:pulumi:Stack"
Key = tuple[str, str]


class Node(NamedTuple):
    parent: Key | None  # None: the root stack
    provider: Key | None
    dependencies: tuple[Key, ...]


def key_of_urn(urn: str) -> Key:
    """(type, name) of a URN. The mock engine's URNs carry only the parent's type, the engine's the whole chain of the
    ancestors' types, so URNs are compared by the resource they name, not as strings."""
    parts = urn.split("::")
    return parts[2].split("$")[-1], parts[3]


def _parent(urn: str | None) -> Key | None:
    key = key_of_urn(urn) if urn else None
    return None if key is None or key[0] == ROOT_TYPE else key


def _provider(reference: str | None) -> Key | None:
    return key_of_urn(reference.rsplit("::", 1)[0]) if reference else None  # a reference is "<urn>::<id>"


def graph_of_capture(capture: Capture) -> dict[Key, Node]:
    return {(r.type, r.name): Node(_parent(r.parent), _provider(r.provider),
                                   tuple(sorted(key_of_urn(d) for d in r.dependencies)))
            for r in capture.registrations if r.type != ROOT_TYPE}


def graph_of_deployment(deployment: dict[str, Any]) -> dict[Key, Node]:
    return {key_of_urn(r["urn"]): Node(_parent(r.get("parent")), _provider(r.get("provider")),
                                       tuple(sorted(key_of_urn(d) for d in r.get("dependencies") or [])))
            for r in deployment["resources"] if r["type"] != ROOT_TYPE}


def render(graph: dict[Key, Node]) -> str:
    """One stanza per resource, sorted: the golden snapshot's text (a review reads a lost edge as one line)."""
    def shown(key: Key | None) -> str:
        return "(stack)" if key is None else f"{key[0]} {key[1]}"

    lines = []
    for key, node in sorted(graph.items()):
        lines.append(shown(key))
        lines.append(f"  parent: {shown(node.parent)}")
        if node.provider:
            lines.append(f"  provider: {shown(node.provider)}")
        lines.extend(f"  dependsOn: {shown(d)}" for d in node.dependencies)
    return "\n".join(lines) + "\n"
