"""Minimal text edits of the user's hand-written files: an entry added to (removed from) a kustomization's
`resources:`, keys set in (removed from) a ConfigMap's `data:` (cluster-vars). Every other byte stays: comments, key
order, indentation, quoting, LF or CRLF, a byte order mark, a missing final newline. No YAML round trip (ruamel,
PyYAML, `kustomize edit`): it rewrites the whole file, and the user reviews each change as a diff. libyaml's parser
and PyYAML's composer (character offsets) find where each value stands; whole lines are spliced there, at the
column of the block's items or keys, with the file's first line ending, so each removal undoes its addition exactly.
The files are untrusted: the answer is the edited bytes or one `EditRefused` (its hint quotes the lines to write by
hand), never a traceback. Refused where a text edit cannot be sure: not UTF-8, over MAX_BYTES, NEL/LS/PS, invalid
YAML, deeper than MAX_DEPTH, anchors/aliases/tags, flow style, a value not one plain line, a duplicate key, a
kustomization with a generator (its output depends on files and options the export does not read), and the export's
entry listed twice in two spellings (`./a.yaml` and `a.yaml`: kustomize refuses the base)."""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass

import yaml
from yaml.events import CollectionEndEvent, CollectionStartEvent, DocumentStartEvent, NodeEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from model.safe_yaml import MAX_DEPTH, InputFileError, escaped, load_yaml

GENERATORS = ("configMapGenerator", "secretGenerator", "generators", "helmCharts")
# Far more than a hand-written kustomization or ConfigMap holds; PyYAML's composer takes about 3 s a megabyte.
MAX_BYTES = 1 << 20
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOM = "\ufeff"
_BREAK_CHARS = "\r\n"  # and NEL, LS, PS, refused (see _text)
_BREAK = re.compile("\r\n|[\r\n]")
_STR = "tag:yaml.org,2002:str"
_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./-]*")
# go-yaml v2 (older Flux and kustomize) reads these as booleans; PyYAML does not.
_GO_BOOLEANS = {"y", "n"}
_BEFORE_ITEM = re.compile(r" *-[ \t]+")


class EditRefused(Exception):  # noqa: N818 - the name the callers and the brief use: a refusal, not an error
    """One refused edit: `path` is the key path inside the file (`resources`, `data`, `data.KEY`, `(file)`),
    `problem` what is wrong, `hint` the lines to write by hand. The caller names the file: `line(file)`."""

    def __init__(self, path: str, problem: str, hint: str) -> None:
        self.path, self.problem, self.hint = path, problem, hint
        super().__init__(f"{path}: {problem}; hint: {hint}")

    def line(self, file: str) -> str:
        """`<file>: <path>: <problem>; hint: <hint>`, the project's one error shape."""
        return f"{file}: {self}"



@dataclass
class _Text:
    bom: str
    body: str  # without the byte order mark: PyYAML's offsets count from here
    eol: str

    def encoded(self, body: str) -> bytes:
        return (self.bom + body).encode("utf-8")


def _text(data: bytes, hint: str) -> _Text:
    if len(data) > MAX_BYTES:
        raise EditRefused("(file)", f"larger than {MAX_BYTES} bytes, far more than a hand-written file of this kind "
                          "holds", hint)
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditRefused("(file)", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                          hint) from None
    odd = re.search("[\x85\u2028\u2029]", decoded)
    if odd:
        # A line break to YAML 1.1 (PyYAML, libyaml) and not to YAML 1.2 (kustomize, Flux): where a line ends would
        # be a guess.
        raise EditRefused("(file)", f"the character U+{ord(odd.group()):04X} at offset {odd.start()}, a line break "
                          "to some YAML readers and not to others", f"remove it; {hint}")
    bom = _BOM if decoded.startswith(_BOM) else ""
    body = decoded[len(bom):]
    first = _BREAK.search(body)
    eol = first.group() if first else "\n"
    return _Text(bom, body, eol)


def _line_start(body: str, index: int) -> int:
    while index > 0 and body[index - 1] not in _BREAK_CHARS:
        index -= 1
    return index


def _line_end(body: str, index: int) -> int:
    while index < len(body) and body[index] not in _BREAK_CHARS:
        index += 1
    return index


def _break_before(body: str, line_start: int) -> int:
    """Where the line ending before the line starting at `line_start` (> 0) begins."""
    return line_start - 2 if body.startswith("\r\n", line_start - 2) else line_start - 1


def _line_span(body: str, index: int) -> tuple[int, int]:
    """The span that removing the line holding `index` takes out: the line and the line ending before it (after
    it, for the first line)."""
    start, end = _line_start(body, index), _line_end(body, index)
    if start > 0:
        return _break_before(body, start), end
    after = _BREAK.match(body, end)
    return 0, after.end() if after else end


def _splice(body: str, edits: list[tuple[int, int, str]]) -> str:
    """`body` with each span (start, end) replaced by its text; spans do not overlap, and texts put at one offset
    land in the order listed."""
    for _, (start, end, new) in sorted(enumerate(edits), key=lambda edit: (edit[1][0], edit[0]), reverse=True):
        body = body[:start] + new + body[end:]
    return body


def _line_no(node: Node) -> int:
    return node.start_mark.line + 1


def _as_written(source: str) -> str:
    """A spelling from the file, quotes and all, escaped only where it holds what a terminal would not show."""
    return source if source.isprintable() else escaped(source)



def _documents(text: _Text, hint: str) -> list[tuple[Node, str | None]]:
    """Each document's root node, and the first anchor, alias or tag in it (None when there is none). libyaml reads
    the events first (fast, and it finds syntax errors and too deep a nesting, which PyYAML's own parser takes
    seconds over); PyYAML's composer then gives the nodes and their marks."""
    body = text.body
    marks: list[str | None] = []
    depth = 0
    try:
        for event in yaml.parse(body, Loader=_FAST_LOADER):
            if isinstance(event, DocumentStartEvent):
                marks.append(f"a %TAG directive on line {event.start_mark.line + 1}" if event.tags else None)
            elif isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise EditRefused("(file)", f"nested deeper than {MAX_DEPTH} levels (line "
                                      f"{event.start_mark.line + 1})", hint)
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
            if not marks or marks[-1] is not None or not isinstance(event, NodeEvent):
                continue
            line = event.start_mark.line + 1
            tag = str(getattr(event, "tag", None) or "").replace("tag:yaml.org,2002:", "!!")
            # No alias branch: an alias is read after its anchor in the same document, which is marked already, and
            # one without an anchor there fails to compose below.
            if event.anchor:
                marks[-1] = f"an anchor &{escaped(event.anchor)} on line {line}"
            elif tag:
                marks[-1] = f"the tag {escaped(tag)} on line {line}"
        roots = [root for root in yaml.compose_all(body, Loader=yaml.SafeLoader) if root is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EditRefused("(file)", f"not valid YAML{where}: {escaped(str(problem))}", hint) from None
    except (RecursionError, ValueError) as exc:
        raise EditRefused("(file)", f"not usable YAML: {type(exc).__name__}", hint) from None
    return list(zip(roots, marks, strict=False))


def _what(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping in flow style ({...})" if node.flow_style else "a mapping"
    if isinstance(node, SequenceNode):
        return "a list in flow style ([...])" if node.flow_style else "a list"
    if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        return "empty (null)"
    if isinstance(node, ScalarNode) and node.style in ("|", ">"):
        return "a block scalar (| or >)"
    if isinstance(node, ScalarNode) and node.start_mark.line != node.end_mark.line:
        return "a value over several lines"
    return "a single value"


def _one_line(node: Node) -> bool:
    return (isinstance(node, ScalarNode) and node.style not in ("|", ">")
            and node.start_mark.line == node.end_mark.line)


def _entries(mapping: MappingNode, path: str, hint: str) -> dict[str, tuple[Node, Node]]:
    """The mapping's string keys and their nodes; a duplicate key is refused (YAML leaves the winner to the
    reader, and an edit of one of the two would be a guess)."""
    entries: dict[str, tuple[Node, Node]] = {}
    for key, value in mapping.value:
        if not isinstance(key, ScalarNode):
            raise EditRefused(path or "(file)", f"{_what(key)} used as a key on line {_line_no(key)}", hint)
        name = key.value
        if name in entries:
            where = f"{path}.{escaped(name)}" if path else escaped(name)
            raise EditRefused(where, f"the key {escaped(name)} is there twice (lines {_line_no(entries[name][0])} and "
                              f"{_line_no(key)}); YAML readers silently keep one of them", f"keep one; {hint}")
        entries[name] = (key, value)
    return entries


def _reads_back(text: str) -> bool:
    """`text` written plain reads back as itself in YAML 1.1 (PyYAML, go-yaml v2) and 1.2 (go-yaml v3)."""
    if not _PLAIN.fullmatch(text) or text.lower() in _GO_BOOLEANS:
        return False
    try:
        return yaml.safe_load(text) == text and load_yaml(text) == text
    except (yaml.YAMLError, InputFileError):
        return False


def _quoted(value: str) -> str:
    """A YAML double-quoted string: JSON's escapes, and \\u or \\U for every other non-printable character (U+2028
    raw would be a line break inside the quotes)."""
    inner = json.dumps(value, ensure_ascii=False)[1:-1]
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
                         for c in inner) + '"'


def _scalar(value: str) -> str:
    """`value` as a list item or key is written: plain when that reads back as the same string, quoted otherwise."""
    return value if _reads_back(value) else _quoted(value)



@dataclass
class _Kustomization:
    text: _Text
    root: MappingNode | None  # None: the file is empty or comments only
    key: Node | None  # the `resources` key
    items: list[ScalarNode]


def _kustomization(data: bytes, hint: str, edit: bool) -> _Kustomization:
    """The kustomization's resources. `edit`: refuse what a text edit cannot change with certainty too (flow style,
    generators); reading only needs one readable list."""
    text = _text(data, hint)
    docs = _documents(text, hint)
    if len(docs) > 1:
        raise EditRefused("(file)", f"{len(docs)} YAML documents where a kustomization is one", hint)
    if not docs:
        return _Kustomization(text, None, None, [])
    root, mark = docs[0]
    if mark:
        raise EditRefused("(file)", f"{mark}: anchors, aliases and tags are refused in a file edited as text", hint)
    if not isinstance(root, MappingNode):
        raise EditRefused("(file)", f"the top level is {_what(root)}, not the mapping of a kustomization", hint)
    entries = _entries(root, "", hint)
    if edit:
        for name in GENERATORS:
            if name in entries:
                raise EditRefused(name, "a generator: the export does not edit a kustomization whose output depends "
                                  "on generator options", hint)
    if "resources" not in entries:
        return _Kustomization(text, root, None, [])
    key, value = entries["resources"]
    if not isinstance(value, SequenceNode) or (edit and value.flow_style):
        raise EditRefused("resources", f"is {_what(value)}, not a list in block style (one `- item` a line)", hint)
    items: list[ScalarNode] = []
    for item in value.value:
        where = f"the item on line {_line_no(item)}"
        if not isinstance(item, ScalarNode) or (edit and not _one_line(item)):
            raise EditRefused("resources", f"{where} is {_what(item)}, not a plain one-line value", hint)
        if item.tag != _STR and not item.value:
            raise EditRefused("resources", f"{where} is empty", hint)
        if item.tag != _STR:
            raise EditRefused("resources", f"{where} is not a string (YAML reads `{escaped(item.value)}` as "
                              f"{item.tag.rsplit(':', 1)[-1]})", f"quote it; {hint}")
        line = _line_start(text.body, item.start_mark.index)
        if edit and not _BEFORE_ITEM.fullmatch(text.body, line, item.start_mark.index):
            raise EditRefused("resources", f"{where} does not start its line as `- item`", hint)
        items.append(item)
    return _Kustomization(text, root, key, items)


def same_resource(listed: str, entry: str) -> bool:
    """`listed` names the file `entry` names, as kustomize resolves both against the kustomization's folder
    (`./a.yaml`, `a.yaml/` and `b/../a.yaml` are `a.yaml`): kustomize refuses a file listed twice, so a spelling of
    the user's is the export's line, never a reason for a second one. A remote resource is compared as written."""
    if listed == entry:
        return True
    if "://" in listed + entry or "?" in listed + entry:
        return False
    return posixpath.normpath(listed) == posixpath.normpath(entry)


def listed_resources(text: bytes) -> list[str]:
    """The string items of the kustomization's `resources:` ([] when it has none). Raises EditRefused."""
    return [item.value for item in _kustomization(text, "fix the kustomization by hand", edit=False).items]


def _spelled(found: _Kustomization, entry: str) -> list[ScalarNode]:
    """The items naming the file `entry` names. Two of them (the export's line and the user's spelling, or two of
    the user's) are refused: kustomize fails the whole base on a file listed twice, and which line is the export's
    would be a guess."""
    items = [item for item in found.items if same_resource(item.value, entry)]
    if len(items) > 1:
        shown = " and ".join(f"`{_as_written(found.text.body[i.start_mark.index:i.end_mark.index])}` (line "
                             f"{_line_no(i)})" for i in items)
        raise EditRefused("resources", f"{shown} name one file, which kustomize refuses to list twice",
                          "delete one of the two lines" if len(items) == 2 else "delete all of these lines but one")
    return items


def add_resource(text: bytes, entry: str) -> bytes:
    """`text` with `entry` added to its `resources:` list; the same bytes when it is listed already, in any spelling
    naming that file (`same_resource`). An empty or comments-only file gets `resources:<eol>- <entry><eol>` at its
    end (without the final line ending when the file has none). Raises EditRefused."""
    item = f"- {_scalar(entry)}"
    hint = f"add the line `{item}` to the `resources:` list by hand"
    found = _kustomization(text, hint, edit=True)
    body, eol = found.text.body, found.text.eol
    if found.root is None:
        if body and body[-1] not in _BREAK_CHARS:
            return found.text.encoded(f"{body}{eol}resources:{eol}{item}")
        return found.text.encoded(f"{body}resources:{eol}{item}{eol}")
    if found.key is None:
        raise EditRefused("resources", "no `resources:` key in a kustomization that has other keys",
                          f"add the lines `resources:` and `{item}` by hand")
    if not found.items:
        raise EditRefused("resources", "is an empty list", hint)
    if _spelled(found, entry):
        return text
    last = found.items[-1]
    line = _line_start(body, last.start_mark.index)
    indent = body[line:body.index("-", line)]
    at = _line_end(body, last.end_mark.index)
    return found.text.encoded(_splice(body, [(at, at, f"{eol}{indent}{item}")]))


def remove_resource(text: bytes, entry: str) -> bytes:
    """`text` without the `resources:` item naming the file `entry` names (in the user's spelling too), its line with
    the line ending before it; the same bytes when it is not listed. A `resources:` key as add_resource writes it
    into an empty file goes with its one item, so that removing undoes the addition. Raises EditRefused."""
    hint = f"delete the line `- {_scalar(entry)}` from the `resources:` list by hand"
    found = _kustomization(text, hint, edit=True)
    body = found.text.body
    matching = _spelled(found, entry)
    if not matching:
        return text
    if found.root is not None and found.key is not None and len(found.root.value) == 1 and len(found.items) == 1:
        created = _created_block(body, found.key, found.items[0])
        if created is not None:
            return found.text.encoded(body[:created])
    edits = [(*_line_span(body, item.start_mark.index), "") for item in matching]
    return found.text.encoded(_splice(body, edits))


def _created_block(body: str, key: Node, item: ScalarNode) -> int | None:
    """Where the `resources:` block add_resource appends to an empty or comments-only file starts (with the line
    ending before it when the file had no final one), if the file ends with exactly that block."""
    start = key.start_mark.index
    if start > 0 and body[start - 1] not in _BREAK_CHARS:
        return None
    written = body[item.start_mark.index:item.end_mark.index]
    for eol in ("\r\n", "\n", "\r"):
        if body[start:] == f"resources:{eol}- {written}{eol}":
            return start
        if start > 0 and body[start:] == f"resources:{eol}- {written}" and body.endswith(eol, 0, start):
            return start - len(eol)
    return None



@dataclass
class _Data:
    text: _Text
    root: MappingNode
    key: Node | None  # the `data` key; None when the document has none
    block: MappingNode | None  # the `data` mapping
    entries: dict[str, tuple[Node, Node]]
    mark: str | None  # the document's first anchor, alias or tag


def _data(data: bytes, kind: str, name: str, hint: str) -> _Data:
    """The one document of that kind and name, and its `data:` as far as reading needs it: a mapping of distinct
    keys, in any style. What an edit needs on top is `_editable`'s."""
    text = _text(data, hint)
    docs = _documents(text, hint)
    where = f"{escaped(kind)} {escaped(name)}"
    found = [(root, mark) for root, mark in docs if _is_named(root, kind, name)]
    if not found:
        raise EditRefused("(file)", f"no document of kind {where} (kind: and metadata.name:)", hint)
    if len(found) > 1:
        lines = " and ".join(str(_line_no(root)) for root, _ in found)
        raise EditRefused("(file)", f"{len(found)} documents of kind {where} (lines {lines})", f"keep one; {hint}")
    root, mark = found[0]
    assert isinstance(root, MappingNode)  # _is_named
    entries = _entries(root, "", hint)
    if "data" not in entries:
        return _Data(text, root, None, None, {}, mark)
    key, value = entries["data"]
    if not isinstance(value, MappingNode):
        raise EditRefused("data", f"is {_what(value)}, not a mapping in block style (one `KEY: value` a line)", hint)
    return _Data(text, root, key, value, _entries(value, "data", hint), mark)


def _editable(found: _Data, kind: str, name: str, hint: str) -> None:
    """Refuse a `data:` a text edit cannot change with certainty: the user adds the lines by hand instead, and the
    next export, reading them there, edits nothing."""
    where = f"{escaped(kind)} {escaped(name)}"
    at = f"data (line {_line_no(found.key)})" if found.key is not None else "(file)"
    if found.mark:
        # An edit beside an anchor can change what its aliases copy; a tag can change how a line is read.
        doc = "its document" if found.key is not None else f"the {where} document (line {_line_no(found.root)})"
        raise EditRefused(at, f"{doc} holds {found.mark}, and the export edits no document with anchors, "
                          "aliases or tags", hint)
    if found.key is None:
        if found.root.flow_style:
            raise EditRefused(at, f"the {where} document (line {_line_no(found.root)}) is a mapping in flow "
                              "style ({...}), which the export cannot add a `data:` block to without rewriting your "
                              "lines", hint)
        return
    if found.block is not None and found.block.flow_style:
        raise EditRefused(at, "in flow style ({...}), which the export cannot edit without rewriting your lines",
                          hint)
    for key_name, (key_node, value_node) in found.entries.items():
        path = f"data.{escaped(key_name)}"
        if key_node.tag != _STR:
            raise EditRefused(path, f"the key on line {_line_no(key_node)} is not a string (YAML reads it as "
                              f"{key_node.tag.rsplit(':', 1)[-1]})", f"quote it; {hint}")
        if not _one_line(value_node):
            raise EditRefused(path, f"the value on line {_line_no(value_node)} is {_what(value_node)}, not a "
                              "one-line value", hint)
        line = _line_start(found.text.body, key_node.start_mark.index)
        if (value_node.end_mark.line != key_node.start_mark.line
                or found.text.body[line:key_node.start_mark.index].strip(" ")):
            raise EditRefused(path, f"the entry on line {_line_no(key_node)} is not one `KEY: value` line", hint)


def _is_named(root: Node, kind: str, name: str) -> bool:
    if not isinstance(root, MappingNode):
        return False
    fields = {key.value: value for key, value in root.value if isinstance(key, ScalarNode)}
    metadata = fields.get("metadata")
    names = [value for key, value in metadata.value if isinstance(key, ScalarNode) and key.value == "name"] \
        if isinstance(metadata, MappingNode) else []
    found_kind, found_name = fields.get("kind"), names[0] if names else None
    return (isinstance(found_kind, ScalarNode) and found_kind.value == kind
            and isinstance(found_name, ScalarNode) and found_name.value == name)


def _set_hint(values: dict[str, str], kind: str, name: str) -> str:
    lines = ", ".join(f"`{_scalar(key)}: {_quoted(value)}`" for key, value in sorted(values.items()))
    return f"set {lines} under `data:` of {kind} {name} by hand"


def _holds(found: _Data, key: str, value: str) -> bool:
    node = found.entries.get(key, (None, None))[1]
    return isinstance(node, ScalarNode) and node.tag == _STR and node.value == value


def data_values(text: bytes, kind: str = "ConfigMap", name: str = "cluster-vars") -> dict[str, str]:
    """The `data:` of the one document of that kind and metadata.name, each one-line value as written (without
    quotes), in any style (flow, anchors: read, not edited); {} when it has no `data:`. Raises EditRefused."""
    found = _data(text, kind, name, f"fix the {kind} {name} by hand")
    return {key: value.value for key, (_, value) in found.entries.items() if isinstance(value, ScalarNode)}


def set_data_keys(text: bytes, values: dict[str, str], kind: str = "ConfigMap", name: str = "cluster-vars") -> bytes:
    """`text` with each of `values` set in the `data:` of the one document of that kind and metadata.name: an
    existing value replaced on its line (the rest of the line kept), a missing key added after the block's last
    entry, several in sorted order; a document without `data:` gets the block after its last line. The same bytes
    when every value is already equal, whatever the block's style. A refusal's hint names only the values still to
    set. Raises EditRefused."""
    found = _data(text, kind, name, _set_hint(values, kind, name))
    wanted = {key: value for key, value in values.items() if not _holds(found, key, value)}
    if not wanted:
        return text
    # Whatever stops the edit, the lines written by hand are read back (in any style) and ask for no edit.
    by_hand = f"{_set_hint(wanted, kind, name)}; the next export finds them there and edits nothing"
    _editable(found, kind, name, by_hand)
    body, eol = found.text.body, found.text.eol
    edits: list[tuple[int, int, str]] = []
    missing = sorted(key for key in wanted if key not in found.entries)
    for key in sorted(wanted):
        if key not in found.entries:
            continue
        node = found.entries[key][1]
        start, end = node.start_mark.index, node.end_mark.index
        # An empty value's mark is right after the colon: the space keeps `KEY: "v"` a key and its value.
        edits.append((start, end, _quoted(wanted[key]) if end > start else f" {_quoted(wanted[key])}"))
    if missing:
        if found.key is None:
            column = found.root.start_mark.column
            indent, block = " " * column, " " * (column + _step(found.root))
            at = _line_end(body, _content_end(found.root, by_hand))
            lines = f"{eol}{indent}data:" + "".join(f"{eol}{block}{_scalar(key)}: {_quoted(wanted[key])}"
                                                    for key in missing)
        else:
            pairs = list(found.entries.values())
            indent = " " * pairs[0][0].start_mark.column  # the first key's column is the block's
            at = _line_end(body, pairs[-1][1].end_mark.index)
            lines = "".join(f"{eol}{indent}{_scalar(key)}: {_quoted(wanted[key])}" for key in missing)
        edits.append((at, at, lines))
    return found.text.encoded(_splice(body, edits))


def remove_data_keys(text: bytes, keys: list[str], kind: str = "ConfigMap", name: str = "cluster-vars") -> bytes:
    """`text` without those keys' lines in the `data:` of the one document of that kind and metadata.name, each with
    the line ending before it; the same bytes when none is there. A `data:` left empty goes too when its line holds
    nothing else (as set_data_keys writes it). Raises EditRefused."""
    named = ", ".join(f"`{escaped(key)}`" for key in sorted(set(keys)))
    hint = f"delete the lines of {named} under `data:` of {kind} {name} by hand"
    found = _data(text, kind, name, hint)
    body = found.text.body
    gone = [key for key in found.entries if key in keys]
    if not gone:
        return text
    _editable(found, kind, name, hint)
    edits = [(*_line_span(body, found.entries[key][0].start_mark.index), "") for key in gone]
    if len(gone) == len(found.entries) and found.key is not None:
        start = _line_start(body, found.key.start_mark.index)
        if body[start:_line_end(body, start)] == " " * found.key.start_mark.column + "data:":
            edits.append((*_line_span(body, start), ""))
    return found.text.encoded(_splice(body, edits))


def _step(root: MappingNode) -> int:
    """The document's indentation step: how far its first nested block mapping is indented (2 when none is)."""
    for _, value in root.value:
        if isinstance(value, MappingNode) and not value.flow_style and value.start_mark.column > root.start_mark.column:
            return value.start_mark.column - root.start_mark.column
    return 2


def _content_end(node: Node, hint: str) -> int:
    """Where the last character of the node's content is: the end of its last scalar or flow collection."""
    while isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    if isinstance(node, ScalarNode) and node.style in ("|", ">"):
        raise EditRefused("(file)", f"the document ends with a block scalar (| or >, line {_line_no(node)}), after "
                          "which a new key's place is not certain", hint)
    return max(node.start_mark.index, node.end_mark.index)

