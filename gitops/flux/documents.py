"""Resource files read as kustomize reads them (resource.Factory, kyaml's kio.ByteReader): each document a Kubernetes
object, a `kind: List` taken apart into its items, which `${VAR}` scalars are written plain (varsub.PlainVar); a
kustomization file's one document, and whether it only lists local resources (built in this process) or needs
kubectl. `BuildError` is a refusal of the build naming the file and the cause; `Built` is one object a build gives."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gitops.flux.varsub import PlainVar
from model.safe_yaml import (
    MAX_EXPANDED_NODES,
    DocumentsError,
    OutLoader,
    as_mapping,
    expanded_size,
    out_loader,
    yaml_documents,
    yaml_reason,
)


class BuildError(Exception):
    """kustomize or Flux's generator would fail on this folder; the message names the file and the cause."""


@dataclass
class Built:
    manifest: dict[str, Any]
    origin: str  # the file it came from, or the folder kubectl built
    # The (kustomization file, resources entry) pairs that brought it into the build, outermost first.
    trail: tuple[tuple[str, str], ...] = ()
    # The object as its file declares it, where the applying Kustomization's own fields (patches, …) changed it
    declared: dict[str, Any] | None = None


class PlainVarLoader(OutLoader):
    pass


def _construct_str(loader: Any, node: Any) -> str:
    value = loader.construct_scalar(node)
    return PlainVar(value) if "${" in value and _written_plain(value) else value


def _written_plain(text: str) -> bool:
    """kustomize (go-yaml v3, a port of libyaml as PyYAML's emitter is) writes this string without quotes. Neither
    emitter picks a block style (`|`, `>`) unless asked to, nor does the line width change the style it picks."""
    return not yaml.safe_dump(text).startswith(("'", '"'))


PlainVarLoader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def _marked(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return f"line {mark.line + 1}: " if mark is not None else ""


def load_docs(data: bytes, where: str, lists: bool = True) -> list[dict[str, Any]]:
    """The objects of a resource file as kustomize reads them (resource.Factory.SliceFromBytes), its Lists taken
    apart into their items (`_list_items`). `lists=False` for kustomize's own output: no List is left in it to take
    apart, and one it kept (without items) is an object of its own."""
    try:
        docs = yaml_documents(data)  # the checked reader: sizes, aliases, errors as one line
        if b"${" in data:  # read again, the same way, keeping which `${VAR}` scalars are plain
            docs = tuple(yaml.load_all(data, Loader=out_loader(data, PlainVarLoader)))
    except DocumentsError as exc:
        raise BuildError({
            "invalid": f"{where}: not valid YAML ({f'line {exc.line}: ' if exc.line else ''}{exc.problem})",
            "unreadable": f"{where}: not readable as YAML ({exc.problem})",
        }.get(exc.reason, f"{where}: a document that expands to more than {MAX_EXPANDED_NODES} values through its "
                          "aliases; no manifest needs that (a YAML alias bomb?)")) from None
    if lists and docs and _unwrapped_by_reader(docs[0]) and not _SEPARATOR.search(data.replace(b"\r\n", b"\n")):
        # kyaml's reader (kio.ByteReader) takes the items out of a file that is one List, before anything is checked
        return _list_items([node for path, item in _wrapped("", docs[0]) for node in _checked(path, item, where)],
                           where)
    out = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
            raise BuildError(f"{where}: failed to decode Kubernetes YAML: a document without apiVersion and kind")
        out.append(doc)
    if lists and any(str(doc.get("kind")).endswith("List") for doc in out):
        return _list_items([(f"document {n}", doc) for n, doc in enumerate(docs, 1) if doc is not None], where)
    return out


# Where kyaml's reader splits a file into documents: a line that starts with `---` (kio's splitDocuments)
_SEPARATOR = re.compile(rb"\n---.*\n")


def _unwrapped_by_reader(doc: Any) -> bool:
    """kyaml's reader unwraps this document where it is a file's only one (kio.ByteReader.Read): kind exactly `List`
    or `ResourceList`, with `items` or `functionConfig`, whatever they hold."""
    return isinstance(doc, dict) and doc.get("kind") in ("List", "ResourceList") and \
        ("items" in doc or "functionConfig" in doc)


def _wrapped(path: str, doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """What kyaml's reader takes out of such a document, each node with its path: the items of a list, the keys and
    values of a mapping in turn (a key is no object: kustomize refuses it), nothing of a scalar or null."""
    items = doc.get("items")
    if isinstance(items, list):
        return [(_below(path, f"items[{i}]"), item) for i, item in enumerate(items)]
    if isinstance(items, dict):
        return [(_below(path, "items"), node) for pair in items.items() for node in pair]
    return []


def _below(path: str, step: str) -> str:
    """Where `step` is in the file: `items[0].items[1]`, or after the number of its document, `document 2: items`."""
    if not path:
        return step
    return f"{path}: {step}" if path.startswith("document ") else f"{path}.{step}"


def _list_items(queue: list[tuple[str, dict[str, Any]]], where: str) -> list[dict[str, Any]]:
    """The objects kustomize takes from these documents (each with where it is in the file), in its order
    (resource.Factory.RNodesFromBytes): a document whose kind ends in List and that has `items` is taken apart, each
    item read again as a file of one document (so an item of kind `List` is unwrapped where it stands) and checked
    (`_checked`), and the objects it gives queued after the rest; a List without items is an object of its own."""
    pending, out = deque(queue), []
    while pending:
        path, doc = pending.popleft()
        if not str(doc.get("kind")).endswith("List") or "items" not in doc:
            # kustomize writes the metadata a List it keeps lacks as `metadata: {}`
            out.append(doc if "metadata" in doc or not str(doc.get("kind")).endswith("List")
                       else {**doc, "metadata": {}})
            if not doc.get("apiVersion"):  # kustomize builds it; Flux's apply refuses it
                raise BuildError(f"{where}: {path} ({' '.join(filter(None, kind_name(doc)))}): an object without "
                                 "apiVersion; Flux cannot apply it")
            continue
        items = doc["items"]
        if items is None:
            continue  # an empty List
        if not isinstance(items, list):
            raise BuildError(f"{where}: {_below(path, 'items')}: {_shape(items)} where kustomize expects a list of "
                             "objects; it refuses the build")
        for i, item in enumerate(items):
            at = _below(path, f"items[{i}]")
            nodes = _wrapped(at, item) if _unwrapped_by_reader(item) else [(at, item)]
            pending += [node for p, n in nodes for node in _checked(p, n, where)]
    return out


def _checked(path: str, node: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """kustomize's check of a node it reads (resource.Factory's dropBadNodes): null, `{}` and `[]` are skipped;
    anything else is an object with a kind, and a name unless its kind ends in List. (A file's own documents keep
    the walk's older check, which leaves out the name.)"""
    if node is None or node == {} or node == []:
        return []
    if not isinstance(node, dict):
        raise BuildError(f"{where}: {path}: {_shape(node)}, not an object; kustomize refuses it (missing Resource "
                         "metadata)")
    kind = node.get("kind")
    if kind is None or kind == "" or isinstance(kind, (dict, list)):
        raise BuildError(f"{where}: {path}: an object without kind; kustomize refuses it")
    name = as_mapping(node.get("metadata")).get("name")
    if not str(kind).endswith("List") and (name is None or name == "" or isinstance(name, (dict, list))):
        raise BuildError(f"{where}: {path} ({kind}): an object without metadata.name; kustomize refuses it")
    return [(path, node)]


def _shape(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return {dict: "a mapping", list: "a list"}.get(type(value), f"a {type(value).__name__}")


def plain_resources(doc: Any) -> list[str] | None:
    """The resources of a kustomization that only lists local files and folders, else None (kubectl builds it)."""
    if not isinstance(doc, dict) or set(doc) - {"apiVersion", "kind", "resources"}:
        return None
    if doc.get("kind", "Kustomization") != "Kustomization" or \
            str(doc.get("apiVersion", "kustomize.config.k8s.io/v1beta1")) != "kustomize.config.k8s.io/v1beta1":
        return None
    resources = doc.get("resources") or []
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        return None
    if any("://" in r or r.startswith(("github.com/", "git@")) or "?ref=" in r for r in resources):
        return None
    return resources


def kind_name(manifest: Mapping[str, Any]) -> tuple[str, str]:
    return str(manifest.get("kind", "")), str(as_mapping(manifest.get("metadata")).get("name", ""))


def read_kustomization(data: bytes, kfile: str, detailed: bool) -> Any:
    """The one document of a kustomization file (kustomize reads one): a second document is a YAML error, as
    is an alias bomb. `detailed`: the parser's reason in the line (kubectl's own error names it otherwise)."""
    expands = f"{kfile}: expands to more than {MAX_EXPANDED_NODES} values through its aliases"
    try:
        doc = yaml.load(data, Loader=out_loader(data))
    except DocumentsError:  # its merge keys copied past the bound
        raise BuildError(expands) from None
    except yaml.YAMLError as exc:
        raise BuildError(f"{kfile}: not valid YAML" + (f" ({_marked(exc)}{yaml_reason(exc)})" if detailed
                                                        else "")) from None
    except (RecursionError, ValueError, UnicodeDecodeError) as exc:
        raise BuildError(f"{kfile}: not readable as YAML ({type(exc).__name__})" if detailed
                         else f"{kfile}: not valid YAML") from None
    if expanded_size(doc) > MAX_EXPANDED_NODES:
        raise BuildError(expands)
    return doc
