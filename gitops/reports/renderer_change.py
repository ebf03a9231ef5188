"""Step 4 of the rollout for an app the repository renders itself (`deliveredBy: repository`): once the gate allows
the switch, the change the gate needs in the rendered object, as a unified diff of the rendered file (repository ->
needed) that the renderer's pull request must produce. Only the gate's fields: the GPU container's limit of the
device plugin's resource (or, on the DRA route, the pod's claim), the /dev/dri hostPath volumes and their mounts
gone. Where the rest of the object differs from the program's (hardening, names) is listed apart, as optional.

The diff is a text edit of the file as the repository holds it (whole lines removed, lines inserted at the
indentation of their siblings), so every other byte of the render stays and the reviewer sees only the gate's lines.
Where a text edit cannot be sure (flow style, an anchor, a file it cannot parse), the change is given as its fields
alone; the edited text is parsed again and must hold exactly the needed access, or it is not shown.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gitops.flux.inventory import FluxView, ObjectId
from gitops.tree import Tree
from model.dra.evidence import DEVICE_CLASS as DRA_CLASS
from model.evidence import RESOURCE, GpuAccess, held_access, host_device_volumes
from model.outputs import GpuAppOutput

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class RendererChange:
    """What the renderer's pull request changes in one app's rendered file, for the stacks that need it."""

    app: str
    file: str  # the rendered file, relative to the repository's root
    to: GpuAccess  # what the change moves the app onto: device-plugin or dra-claim
    needed: tuple[str, ...]  # the gate's fields, `path: repository -> needed`
    diff: tuple[str, ...]  # the unified diff of the file, repository -> needed; () where no text edit is sure
    optional: tuple[str, ...]  # where the needed object still differs from the program's: the gate does not need it
    stacks: tuple[str, ...]

    def line(self) -> str:
        """The one line of the warning (the diff, the optional fields and the next step follow it)."""
        on = f"a claim of class {DRA_CLASS}" if self.to == "dra-claim" else RESOURCE
        shown = "the diff below" if self.diff else "these fields: " + "; ".join(self.needed)
        return (f"{self.app}: evidence for {', '.join(self.stacks)} allows {on}, but the repository's {self.app} "
                f"({self.file}) does not use it yet; the renderer's pull request makes {self.file} hold {shown}")

    def next_step(self) -> str:
        return (f"change what renders {self.file} to write this, re-render it, and export again on the same branch: "
                f"the post-merge checks then expect {self.to}")

    def optional_line(self) -> str:
        return (f"optional (the program's object, not needed by the gate): {'; '.join(self.optional)}"
                if self.optional else "")

    def markdown(self) -> list[str]:
        lines = [f"### `{self.app}`: the renderer's change ({', '.join(self.stacks)})", "",
                 f"The gate allows it; `{self.file}` must hold "
                 + ("this change (repository -> needed):" if self.diff else "these fields (repository -> needed):"),
                 ""]
        lines += ["```diff", *self.diff, "```"] if self.diff else [f"- `{field}`" for field in self.needed]
        if self.optional:
            lines += ["", "Optional, where it still differs from the program's object (the gate does not need it):",
                      "", *(f"- `{field}`" for field in self.optional)]
        return [*lines, ""]

    def as_json(self) -> dict[str, Any]:
        return {"app": self.app, "file": self.file, "to": self.to, "stacks": list(self.stacks), "line": self.line(),
                "needed": list(self.needed), "diff": "\n".join(self.diff) + "\n" if self.diff else "",
                "optional": list(self.optional)}


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return [leaf for key in sorted(value, key=str) for leaf in _leaves(value[key], f"{path}.{key}")]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, f"{path}[{i}]")]
    return [(path, value)]


def differing_fields(wanted: Mapping[str, Any], repository: Mapping[str, Any]) -> list[str]:
    """Every leaf field of the spec where the repository's object differs from `wanted`: `path: repo -> wanted`."""
    mine, theirs = dict(_leaves(wanted.get("spec"), "spec")), dict(_leaves(repository.get("spec"), "spec"))
    return [f"{path}: {_shown(theirs, path)} -> {_shown(mine, path)}"
            for path in sorted(set(mine) | set(theirs)) if mine.get(path) != theirs.get(path)]


def _shown(values: Mapping[str, Any], path: str) -> str:
    return repr(values[path]) if path in values else "(absent)"


def _pod(manifest: Mapping[str, Any]) -> dict[str, Any]:
    spec = manifest.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    return pod if isinstance(pod, dict) else {}


def _well_formed(manifest: Mapping[str, Any]) -> bool:
    """A pod template whose lists are lists of maps: the only shape the change is made for (the repository's object
    is untrusted; Flux itself would refuse anything else)."""
    pod = _pod(manifest)
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
        return False
    lists = [pod.get("volumes"), pod.get("initContainers"), *(c.get("volumeMounts") for c in containers)]
    resources = [c.get("resources") for c in containers]
    return all(v is None or (isinstance(v, list) and all(isinstance(i, dict) for i in v)) for v in lists) and all(
        r is None or (isinstance(r, dict) and all(isinstance(r.get(k), (dict, type(None))) for k in ("limits",
                                                                                                   "requests")))
        for r in resources)


def _gpu_container(pod: Mapping[str, Any], program_pod: Mapping[str, Any], dropped: list[str]) -> int:
    """The container that gets the GPU: the one named as the program's, else the one mounting /dev/dri, else the
    first."""
    containers = pod.get("containers") or []
    wanted = ((program_pod.get("containers") or [{}])[0]).get("name")
    for i, c in enumerate(containers):
        if c.get("name") == wanted:
            return i
    for i, c in enumerate(containers):
        if any(m.get("name") in dropped for m in c.get("volumeMounts") or []):
            return i
    return 0


def needed_object(theirs: Mapping[str, Any], program: Mapping[str, Any], to: GpuAccess) -> dict[str, Any]:
    """The repository's object with only the gate's fields changed to the program's: `to`'s request added (taken
    from the program's object), every other GPU access and the /dev/dri hostPath gone."""
    needed = copy.deepcopy(dict(theirs))
    pod, program_pod = _pod(needed), _pod(program)
    dropped = host_device_volumes(needed)
    index = _gpu_container(pod, program_pod, dropped)
    pod["volumes"] = [v for v in pod.get("volumes") or [] if v.get("name") not in dropped] or None
    for list_name in ("initContainers", "containers"):
        for c in pod.get(list_name) or []:
            c["volumeMounts"] = [m for m in c.get("volumeMounts") or [] if m.get("name") not in dropped] or None
            for kind in ("limits", "requests"):
                values = (c.get("resources") or {}).get(kind)
                if isinstance(values, dict):
                    values.pop(RESOURCE, None)
    program_container = (program_pod.get("containers") or [{}])[0].get("resources") or {}
    resources = pod["containers"][index].setdefault("resources", {})
    if to == "device-plugin":
        resources.setdefault("limits", {})[RESOURCE] = program_container.get("limits", {}).get(RESOURCE, "1")
    else:
        pod["resourceClaims"] = program_pod.get("resourceClaims")
        resources["claims"] = program_container.get("claims")
    return _pruned(needed)


def _pruned(value: Any) -> Any:
    """Empty lists, maps and None dropped, as the field comparison and a renderer see them."""
    if isinstance(value, dict):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def renderer_change(app: str, stacks: tuple[str, ...], theirs: Mapping[str, Any], program: Mapping[str, Any],
                    to: GpuAccess, file: str, text: bytes | None) -> RendererChange:
    """The change of `file` (its bytes: `text`) that moves the repository's object `theirs` (as Flux's walk applies
    it) onto `to`, the program's object `program` being the reference."""
    needed = needed_object(theirs, program, to)
    fields = differing_fields(needed, _pruned(dict(theirs)))
    diff = _text_diff(file, text, theirs, program, to) if text is not None else ()
    return RendererChange(app, file, to, tuple(fields), diff, tuple(differing_fields(_pruned(dict(program)), needed)),
                          stacks)


# --- the text edit -------------------------------------------------------------------------------------------------

def _key(node: MappingNode, name: str) -> tuple[Node, Node] | None:
    return next(((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == name), None)


def _get(node: Node | None, *path: str) -> Node | None:
    for name in path:
        if not isinstance(node, MappingNode):
            return None
        pair = _key(node, name)
        node = pair[1] if pair else None
    return node


def _last_line(node: Node) -> int:
    """The last line holding any of the node's text."""
    if isinstance(node, ScalarNode):
        end = node.end_mark
        return end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line
    children = [n for pair in node.value for n in pair] if isinstance(node, MappingNode) else list(node.value)
    return max((_last_line(c) for c in children), default=node.start_mark.line)


class _UnsureError(Exception):
    """The file's shape is one a line edit cannot be sure of: give the fields instead."""


def _block(node: Node | None) -> Node:
    if node is None or getattr(node, "flow_style", False) or not node.tag.startswith("tag:yaml.org,2002:"):
        raise _UnsureError
    return node


def _value_lines(key: str, value: Any, column: int, indented_seqs: bool) -> list[str]:
    class _Dumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            return super().increase_indent(flow, False if indented_seqs else indentless)

    text = yaml.dump({key: value}, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=1000)
    return [" " * column + line for line in text.splitlines()]


def _insert_at(mapping: MappingNode, key: str) -> int:
    """The line before which `key` goes: in key order where the keys are sorted, else after the last."""
    keys = [k.value for k, _ in mapping.value]
    if keys == sorted(keys):
        for k, _ in mapping.value:
            if k.value > key:
                return k.start_mark.line
    return _last_line(mapping) + 1


def _edits(root: MappingNode, theirs: Mapping[str, Any], program: Mapping[str, Any], to: GpuAccess,
           indented_seqs: bool) -> list[tuple[int, int, list[str]]]:
    """(first line, end line, lines to put there) of each edit: a removal where the lines are none, an insertion where
    first == end."""
    pod = _block(_get(root, "spec", "template", "spec"))
    dropped = set(host_device_volumes(theirs))
    edits: list[tuple[int, int, list[str]]] = []

    def drop_items(mapping: Node, key: str) -> None:
        """The items of `mapping[key]` named in `dropped`; the key too where no item is left."""
        pair = _key(mapping, key) if isinstance(mapping, MappingNode) else None
        if pair is None:
            return
        items = _block(pair[1]).value
        gone = [item for item in items if isinstance(_get(item, "name"), ScalarNode)
                and _get(item, "name").value in dropped]  # type: ignore[union-attr]
        if gone and len(gone) == len(items):
            edits.append((pair[0].start_mark.line, _last_line(pair[1]) + 1, []))
            return
        edits.extend((item.start_mark.line, _last_line(item) + 1, []) for item in gone)

    drop_items(pod, "volumes")
    containers = _block(_get(pod, "containers"))
    for list_name in ("initContainers", "containers"):
        listed = _get(pod, list_name)
        for c in _block(listed).value if listed is not None else []:
            drop_items(c, "volumeMounts")
            for kind in ("limits", "requests"):
                values = _get(c, "resources", kind)
                pair = _key(values, RESOURCE) if values is not None and isinstance(_block(values), MappingNode) \
                    and isinstance(values, MappingNode) else None
                if pair is not None:
                    edits.append((pair[0].start_mark.line, _last_line(pair[1]) + 1, []))
    index = _gpu_container(_pod(theirs), _pod(program), sorted(dropped))
    container = _block(containers.value[index])
    wanted = (_pod(program).get("containers") or [{}])[0].get("resources") or {}
    if to == "device-plugin":
        edits.append(_set(container, ("resources", "limits", RESOURCE),
                          wanted.get("limits", {}).get(RESOURCE, "1"), indented_seqs))
    else:
        edits.append(_set(container, ("resources", "claims"), wanted.get("claims"), indented_seqs))
        edits.append(_set(pod, ("resourceClaims",), _pod(program).get("resourceClaims"), indented_seqs))
    return edits


def _set(mapping: Node, path: tuple[str, ...], value: Any, indented_seqs: bool) -> tuple[int, int, list[str]]:
    """An insertion of `path` = value under `mapping`, at the deepest part of the path that exists."""
    node = _block(mapping)
    for depth, name in enumerate(path):
        child = _get(node, name)
        if child is None:
            for outer in reversed(path[depth + 1:]):
                value = {outer: value}
            assert isinstance(node, MappingNode)
            if not node.value:
                raise _UnsureError
            line = _insert_at(node, name)
            return line, line, _value_lines(name, value, node.value[0][0].start_mark.column, indented_seqs)
        node = _block(child)
    raise _UnsureError  # the key is there already: nothing a line edit should do


def _text_diff(file: str, text: bytes, theirs: Mapping[str, Any], program: Mapping[str, Any],
               to: GpuAccess) -> tuple[str, ...]:
    try:
        source = text.decode("utf-8")
        lines = source.splitlines()
        roots = [d for d in yaml.compose_all(source, Loader=_LOADER) if isinstance(d, MappingNode)]
        root = next(d for d in roots if same_object(yaml.load(yaml.serialize(d), Loader=_LOADER), theirs))
        indented_seqs = _indented_sequences(root)
        changed = list(lines)
        for first, end, new in sorted(_edits(root, theirs, program, to, indented_seqs), reverse=True):
            changed[first:end] = new
        edited = "\n".join(changed) + "\n"
        again = next(d for d in yaml.safe_load_all(edited) if isinstance(d, dict) and same_object(d, theirs))
        if held_access(again) != to or host_device_volumes(again):
            return ()
    except (_UnsureError, StopIteration, yaml.YAMLError, UnicodeDecodeError, AttributeError, IndexError, KeyError,
            TypeError, ValueError, RecursionError):  # a file of another shape: the fields say it instead
        return ()
    return tuple(difflib.unified_diff(lines, changed, f"{file} (repository)", f"{file} (needed)", lineterm=""))


def same_object(doc: Any, theirs: Mapping[str, Any]) -> bool:
    """The document Flux's walk made `theirs` from: its kind and name (a namespace may come from a kustomization)."""
    meta, wanted = (doc or {}).get("metadata") or {}, theirs.get("metadata") or {}
    return isinstance(doc, dict) and doc.get("kind") == theirs.get("kind") and meta.get("name") == wanted.get("name") \
        and meta.get("namespace") in (None, wanted.get("namespace"))


def _indented_sequences(root: MappingNode) -> bool:
    """Whether the file indents a sequence's items under their key (`key:\\n  - a`), as the first one shows."""
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if isinstance(value, SequenceNode) and value.value and not value.flow_style:
                    return value.value[0].start_mark.column - 2 > key.start_mark.column
                stack.append(value)
    return True




# --- per stack, then once per export ---------------------------------------------------------------------------------

def held_of(tree: Tree, after: FluxView | None, app: str) -> str:
    """What the repository's own object of an app holds after the merge, as Flux's walk applies it; "" where the walk
    did not find it (then the gate's access stands)."""
    reference = tree.reference_deployment(app)
    theirs = after.manifests.get(ObjectId.of(reference)) if after is not None and reference is not None else None
    return held_access(theirs) if theirs is not None else ""


def changes_of(tree: Tree, gpu_apps: Mapping[str, GpuAppOutput], after: FluxView,
               read: Callable[[str], bytes | None]) -> list[RendererChange]:
    """Every app the repository delivers that the gate allows onto the GPU while the repository's object (as Flux's
    walk applies it after this export) does not use it yet: the renderer's change. `read`: a repository file's bytes,
    None where it cannot be read."""
    found = []
    for name, app in sorted(gpu_apps.items()):
        if not app.by_repository or app.access not in ("device-plugin", "dra-claim"):
            continue
        reference = tree.reference_deployment(name)
        theirs = after.manifests.get(ObjectId.of(reference)) if reference is not None else None
        if reference is None or theirs is None or held_access(theirs) == app.access or not _well_formed(theirs):
            continue
        origin = after.origins[ObjectId.of(reference)]
        to: GpuAccess = "dra-claim" if app.access == "dra-claim" else "device-plugin"
        found.append(renderer_change(name, (tree.stack,), theirs, reference, to, origin, read(origin)))
    return found


def once_per_export(changes: list[RendererChange]) -> list[RendererChange]:
    """The same change of stacks that share the rendered file (a shared base), once, naming them all."""
    merged: dict[tuple[object, ...], RendererChange] = {}
    for change in changes:
        key = (change.app, change.file, change.to, change.needed, change.diff, change.optional)
        seen = merged.get(key)
        merged[key] = change if seen is None else replace(seen, stacks=(*seen.stacks, *change.stacks))
    return list(merged.values())


__all__ = ["RendererChange", "changes_of", "differing_fields", "held_of", "needed_object", "once_per_export",
           "renderer_change", "same_object"]
