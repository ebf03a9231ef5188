"""The one reader for the YAML and JSON files a person or a cluster hands the program: stack files, evidence files,
node lists. Each refusal is one `InputFileError` naming where in the file and what is wrong, never a traceback.

Rules for every such file (the cheap, safe set, not a YAML validator): a regular file of UTF-8 text, no NUL byte, at
most `max_bytes`. YAML: no anchors, aliases or merge keys (a ~500-byte alias bomb expands into gigabytes once copied or
serialized); no duplicate keys in a mapping (YAML leaves the winner to the parser: a second `plex:` would silently
replace the first); at most `MAX_DEPTH` levels; only the JSON data model (`!!binary`, `!!set`, `!!timestamp`, …
refused); scalars resolved as YAML 1.2 does (as Pulumi's reader): `yes`, `on`, dates and `1:20` stay strings. JSON:
no duplicate keys, no NaN/Infinity. libyaml parses (the pinned PyYAML wheel has it); anchors are looked for in the
event stream only when the text holds a `&` or `*` at all."""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.scanner import ScannerError


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A parsed value where a mapping is expected: the mapping, or an empty one for anything else (untrusted input,
    hand-written manifests, may hold a list or a string there)."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """A parsed value where a list is expected: the list, or an empty one for anything else."""
    return value if isinstance(value, list) else []

MAX_DEPTH = 64
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


class InputFileError(ValueError):
    """One problem of an input file: `where` (a line, a key or `(file)`), what is wrong, and how to fix it."""

    def __init__(self, where: str, problem: str, hint: str) -> None:
        problem = " ".join(problem.split())  # one line, whatever a parser's message held
        self.where, self.problem, self.hint = where, problem, hint
        super().__init__(f"{where}: {problem}; hint: {hint}")

    def line(self, source: str, hint: str | None = None) -> str:
        """`source: where: problem; hint: …`, the project's one error shape; `hint` replaces the default one."""
        return f"{source}: {self.where}: {self.problem}; hint: {hint or self.hint}"


def escaped(text: str) -> str:
    """`text` as an error line may show it: JSON string escapes, and every other non-printable character (NEL,
    U+2028, …, which terminals and str.splitlines() take as line breaks) as \\uXXXX. No quotes around it."""
    inner = json.dumps(text, ensure_ascii=False)[1:-1]
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in inner)


def decode_text(data: bytes, hint: str = "save it as UTF-8 text") -> str:
    """UTF-8 text or an InputFileError (binary data, another encoding)."""
    nul = data.find(b"\0")
    if nul != -1:
        raise InputFileError("(file)", f"binary data (a NUL byte at offset {nul}), not text", hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError("(file)", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                             hint) from None


def read_text(path: Path, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes`. FileNotFoundError passes through (callers decide
    what a missing file means); every other problem is an InputFileError."""
    try:
        info = os.stat(path)  # follows a symlink: what matters is what would be read
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputFileError("(file)", f"cannot read it: {exc.strerror}",
                             "check the path and its permissions") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputFileError("(file)", "is a folder, not a file", "point at the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError("(file)", "not a regular file (a FIFO, socket or device)", "point at a regular file")
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise InputFileError("(file)", f"cannot read it: {exc.strerror}",
                             "check the path and its permissions") from None
    if len(data) > max_bytes:
        raise InputFileError("(file)", f"larger than {max_bytes} bytes, far more than such a file ever holds",
                             "point at the right file")
    return decode_text(data)


def _resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """YAML 1.2-style implicit types, as Pulumi's YAML reader (go-yaml v3) resolves them: PyYAML's YAML 1.1 table
    without yes/no/on/off booleans, sexagesimal numbers, timestamps and the `=` value key; floats as YAML 1.2 writes
    them (`-.5`, `1e3`, `1.5e3` without the exponent sign YAML 1.1 requires); octal as `017` (kept by go-yaml v3 for
    YAML 1.1 files) and `0o17`. The merge key stays resolvable so that it can be refused by name."""
    table: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}

    def add(tag: str, pattern: str, first: list[str]) -> None:
        compiled = re.compile(pattern, re.X)
        for char in first:
            table.setdefault(char, []).append((tag, compiled))

    add("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF"))
    # A float has a dot or an exponent: `12` must stay an int, and this pattern is tried before the int one.
    add("tag:yaml.org,2002:float", r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                                        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
                                        |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                                        |[-+]?\.(?:inf|Inf|INF)
                                        |\.(?:nan|NaN|NAN))$""", list("-+0123456789."))
    add("tag:yaml.org,2002:int", r"""^(?:[-+]?0b[0-1_]+
                                      |[-+]?0o[0-7_]+
                                      |[-+]?0[0-7_]+
                                      |[-+]?(?:0|[1-9][0-9_]*)
                                      |[-+]?0x[0-9a-fA-F_]+)$""", list("-+0123456789"))
    add(_MERGE_TAG, r"^(?:<<)$", ["<"])
    add("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""])
    return table


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    # Set on each loader by load_yaml (15 µs): built when the module is imported, a change to the table would
    # escape `make mutate`, whose workers import the module before the mutant under test is chosen.
    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    string_keys = False

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep=deep)
        first: dict[Any, tuple[int, Any]] = {}  # each key: the line it was first on, and that key as written
        for key_node, _ in node.value:
            where = f"line {key_node.start_mark.line + 1}"
            if key_node.tag == _MERGE_TAG:
                raise InputFileError(where, "a merge key (<<): YAML merge keys are refused, like anchors and aliases",
                                     "write the keys out in full")
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                raise InputFileError(where, "a list or mapping used as a key", "use a plain string as the key")
            if self.string_keys and not isinstance(key, str):
                raise InputFileError(where, f"the key {json.dumps(key)} is not a string (YAML reads it as "
                                     f"{yaml_kind(key)})", f"quote it: \"{_written(key_node, key)}\"")
            if key in first:
                line, earlier = first[key]
                if type(earlier) is not type(key):
                    # 1, 1.0 and true are three YAML keys but one key of the loaded mapping: one would silently win.
                    raise InputFileError(where, f"the key {json.dumps(key)} and the key {json.dumps(earlier)} on line "
                                         f"{line + 1} are one key once read ({yaml_kind(key)} and "
                                         f"{yaml_kind(earlier)} of equal value); only one of them would be kept",
                                         "quote both keys")
                raise InputFileError(where, f"duplicate key {json.dumps(key, default=str)} (first on line {line + 1}); "
                                     "YAML would silently keep only one of them", "keep one of them")
            first[key] = (key_node.start_mark.line, key)
        return super().construct_mapping(node, deep=deep)


def _written(node: Any, value: Any) -> str:
    """A scalar key as the file writes it (`null`, `0x1`), for the hint that quotes it."""
    return node.value if isinstance(getattr(node, "value", None), str) else json.dumps(value)


def yaml_kind(value: Any) -> str:
    """What YAML calls a loaded value, for a line a user reads (never Python's type names)."""
    if value is None:
        return "null"
    for kind, words in ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
                        (list, "a list"), (dict, "a mapping")):
        if isinstance(value, kind):
            return words
    return "a value of no YAML kind"


def _refuse_tag(loader: _Loader, node: Any) -> Any:
    raise InputFileError(f"line {node.start_mark.line + 1}", f"the tag {node.tag.replace('tag:yaml.org,2002:', '!!')} "
                         "is refused: only strings, numbers, booleans, null, lists and mappings",
                         "remove the tag (quote the value to keep it a string)")


for _tag in ("binary", "set", "omap", "pairs", "timestamp"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def _check_depth(doc: Any, max_depth: int = MAX_DEPTH) -> None:
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise InputFileError("(file)", f"nested deeper than {max_depth} levels", "flatten the file")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


# The line breaks YAML 1.1 counts (PyYAML and libyaml alike): a mark's line is counted in these.
_LINE_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def _last_line(text: str) -> int:
    """The number of the text's last line (1 for an empty text); a final line break starts no line."""
    breaks = len(_LINE_BREAKS.findall(text))
    return max(1, breaks if _LINE_BREAKS.fullmatch(text[-1:]) else breaks + 1)


def _mark_line(exc: yaml.YAMLError, text: str) -> str:
    """The line a user fixes, never past the last. PyYAML's problem mark is where the parser gave up: for an unclosed
    quote or flow collection, the end of the file. Its context mark is where the unclosed thing began: taken for a
    scanner error (a quoted value, a key without its colon; a plain value aside: its problem is the exact character,
    such as a tab) and for any error found past the file's last line."""
    problem, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    last = _last_line(text)
    scanned = isinstance(exc, ScannerError) and "plain scalar" not in str(getattr(exc, "context", ""))
    mark = context if context is not None and (problem is None or scanned or problem.line >= last) else problem
    if mark is not None:
        return f"line {min(mark.line + 1, last)}"
    position = getattr(exc, "position", None)  # a ReaderError: a character YAML does not allow
    return f"line {text.count(chr(10), 0, position) + 1}" if isinstance(position, int) else "(file)"


def yaml_reason(exc: yaml.YAMLError) -> str:
    """The parser's reason on one line: PyYAML's own text spans several (marks, a snippet of the input)."""
    if isinstance(exc, yaml.reader.ReaderError):
        # PyYAML and libyaml both give the code point as an int: shown bare, 7 would read as the digit.
        return f"the character U+{exc.character:04X} is not allowed in YAML text"
    return " ".join(str(getattr(exc, "problem", None) or str(exc).splitlines()[0]).split())


def _yaml_problem(exc: yaml.YAMLError) -> str:
    return f"not valid YAML: {yaml_reason(exc)}"


def _short(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "integer string conversion" in str(exc):  # Python refuses to read integers of more than 4300 digits
        return "a number with thousands of digits"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


_YAML_HINT = "fix the line shown (YAML: indent with spaces, quote values that hold ': ' or start with a symbol)"


class _StringKeyLoader(_Loader):
    string_keys = True


def load_yaml(text: str, string_keys: bool = False) -> Any:
    """One YAML document under the rules above (None for an empty one). Raises InputFileError. `string_keys`: every
    mapping key must be a string (`123:`, `null:`, `true:` are refused), as in JSON."""
    if "&" in text or "*" in text:  # only then can there be an anchor or alias; find them in the event stream
        scanner = _BASE_LOADER(text)
        try:
            while scanner.check_event():
                event = scanner.get_event()
                anchor = getattr(event, "anchor", None)
                if isinstance(event, AliasEvent) or anchor:
                    kind = f"an alias *{anchor}" if isinstance(event, AliasEvent) else f"an anchor &{anchor}"
                    raise InputFileError(
                        f"line {event.start_mark.line + 1}",
                        f"{kind}: YAML anchors and aliases are refused (a few hundred bytes of aliases can "
                        "expand into gigabytes)", "write the value out in full where it is used")
        except yaml.YAMLError as exc:
            raise InputFileError(_mark_line(exc, text), _yaml_problem(exc), _YAML_HINT) from None
        finally:
            scanner.dispose()
    loader = (_StringKeyLoader if string_keys else _Loader)(text)
    loader.yaml_implicit_resolvers = _resolvers()
    try:
        doc = loader.get_single_data()
    except InputFileError:
        raise
    except ConstructorError as exc:  # an unknown tag such as !!python/object
        raise InputFileError(_mark_line(exc, text), str(exc.problem), "remove the tag: plain YAML data only") from None
    except yaml.YAMLError as exc:
        raise InputFileError(_mark_line(exc, text), _yaml_problem(exc), _YAML_HINT) from None
    except (ValueError, RecursionError) as exc:
        long_number = re.search(r"[0-9][0-9_]{4299,}", text) if "integer string conversion" in str(exc) else None
        if long_number is not None:  # Python reads no integer of more than 4300 digits: the line that holds it
            raise InputFileError(f"line {text.count(chr(10), 0, long_number.start()) + 1}",
                                 f"not usable YAML: {_short(exc)}", "quote it if it is text, or shorten it") from None
        raise InputFileError("(file)", f"not usable YAML: {_short(exc)}", _YAML_HINT) from None
    finally:
        loader.dispose()
    _check_depth(doc)
    return doc


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise InputFileError(json.dumps(key), "duplicate key in one JSON object",
                                 "keep one; real `kubectl ... -o json` output never repeats a key")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise InputFileError("(file)", f"{name} is not a JSON number", "use real `kubectl ... -o json` output")


def load_json(text: str) -> Any:
    """One JSON document under the rules above. Raises InputFileError."""
    try:
        doc = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)
    except InputFileError:
        raise
    except json.JSONDecodeError as exc:
        raise InputFileError(f"line {exc.lineno}", f"not JSON: {exc.msg}",
                             "use real `kubectl ... -o json` output") from None
    except (ValueError, RecursionError) as exc:
        raise InputFileError("(file)", f"not usable JSON: {_short(exc)}",
                             "use real `kubectl ... -o json` output") from None
    _check_depth(doc)
    return doc


# Files under OUT may use anchors, aliases and merge keys (cluster-template's ks.yaml does, home-ops' files define
# one anchor name twice), so they are read as kustomize reads them; what is refused is an expansion no real manifest
# reaches: a ~500-byte "billion laughs" document would otherwise blow up whatever walks it (hashing, substitution).
MAX_EXPANDED_NODES = 200_000


def expanded_size(doc: Any, limit: int = MAX_EXPANDED_NODES) -> int:
    """How many values `doc` holds once every alias is written out in full (shared values counted at each use),
    computed over the distinct values only; past `limit` it stops and returns `limit + 1`, as it does for a value
    that holds itself (`a: &a [*a]` expands without end). Iterative: any nesting, no RecursionError."""
    if not isinstance(doc, (dict, list)):
        return 1
    memo: dict[int, int] = {}
    path: list[tuple[int, Iterator[Any]]] = [(id(doc), _children(doc))]  # the values being counted, outermost first
    totals = [1]  # their counts so far, in step with `path`
    open_ids = {id(doc)}
    while path:
        key, children = path[-1]
        for child in children:
            if not isinstance(child, (dict, list)):
                totals[-1] += 1
            elif id(child) in memo:
                totals[-1] += memo[id(child)]
            elif id(child) in open_ids:
                return limit + 1  # the value holds itself
            else:
                path.append((id(child), _children(child)))
                totals.append(1)
                open_ids.add(id(child))
                break
            if totals[-1] > limit:
                return limit + 1
        else:
            path.pop()
            open_ids.remove(key)
            memo[key] = done = totals.pop()
            if totals:
                totals[-1] += done
                if totals[-1] > limit:
                    return limit + 1
    return memo[id(doc)]


def _children(value: dict[Any, Any] | list[Any]) -> Iterator[Any]:
    return iter(value.values() if isinstance(value, dict) else value)


# --- the files under OUT ---------------------------------------------------------------------------------------------
# The export reads the repository's files the way Flux does (anchors allowed), and an export reads most contents
# several times (the walk before and after, the index hash, the plan, the preview): each distinct content is parsed
# once. Enough for every file of a 1,000-app export (about nine per app) seen twice; refusals are not cached.
PARSED_CONTENTS_MAX = 32_768


class DocumentsError(ValueError):
    """Bytes that are no YAML documents the export uses: `reason` is "invalid" (the parser's `problem` says why),
    "unreadable" (`problem` is the exception's name) or "expands" (an alias bomb); each caller words its own line."""

    def __init__(self, reason: str, problem: str = "", line: int | None = None) -> None:
        super().__init__(f"{reason}: {problem}")
        self.reason = reason
        self.problem = problem
        self.line = line  # where the parser stopped, when it says


class _KyamlMerges:
    """What a loader of files under OUT adds to PyYAML's: merge keys (`<<`) merged as kyaml merges them."""

    merged_values = 0  # of the document being built: what its merge keys copied so far

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # YAML 1.1's value key `=`: go-yaml reads it as text (an AlertmanagerConfig's `matchType: =`). Left out of the
        # loader's table rather than undone per scalar, which would tax every value of every file.
        super().__init_subclass__(**kwargs)
        table: dict[Any, list[tuple[str, Any]]] = getattr(cls, "yaml_implicit_resolvers", {})
        cls.yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in pairs if tag != _VALUE_TAG]  # type: ignore
                                       for first, pairs in table.items()}

    def construct_document(self, node: Any) -> Any:
        self.merged_values = 0
        return super().construct_document(node)  # type: ignore[misc]

    def flatten_mapping(self, node: MappingNode) -> None:
        """kyaml's merge (DeAnchor's mergeAll): the mapping's own keys win, then the merged mappings in the order
        listed, the first that holds a key giving it; keys are one key when their text is (as kyaml compares them);
        a second `<<` in one mapping fails as kyaml fails it. PyYAML's own merge tells keys apart by object identity,
        so a later mapping's long key wins there. What the merges copy counts against MAX_EXPANDED_NODES as it is
        copied: merge keys over aliases are an alias bomb too, which would be built before `expanded_size` saw it."""
        if not any(key_node.tag == _MERGE_TAG for key_node, _ in node.value):
            return  # the common case, kept as cheap as PyYAML's own
        merged: dict[Any, tuple[Any, Any]] = {}
        own: list[tuple[Any, Any]] = []
        merge_key = None
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node))
                continue
            if merge_key is not None:
                raise ConstructorError("while constructing a mapping", node.start_mark,
                                       "a second merge key (<<) in one mapping; kustomize refuses it (duplicate "
                                       "merge key)", key_node.start_mark)
            merge_key = key_node
            for source in value_node.value if isinstance(value_node, SequenceNode) else [value_node]:
                if not isinstance(source, MappingNode):
                    raise ConstructorError("while constructing a mapping", node.start_mark, "expected a mapping or "
                                           f"list of mappings for merging, but found {source.id}", source.start_mark)
                self.flatten_mapping(source)
                self.merged_values += len(source.value)
                if self.merged_values > MAX_EXPANDED_NODES:
                    raise DocumentsError("expands")
                for pair in source.value:
                    merged.setdefault(_merged_key(pair[0]), pair)
        if merge_key is not None:  # the own keys dropped from what is merged: a later merge of this one sees its own
            own_keys = {_merged_key(key_node) for key_node, _ in own}
            node.value = [pair for key, pair in merged.items() if key not in own_keys] + own


def _merged_key(node: Any) -> Any:
    return node.value if isinstance(node, ScalarNode) else id(node)


class OutLoader(_KyamlMerges, _BASE_LOADER):  # type: ignore[misc, valid-type]
    """A file under OUT as kustomize reads it (go-yaml v3, then kyaml's DeAnchor): aliases written out, merge keys
    merged as kyaml merges them. Take it through `out_loader`, which adds go-yaml's anchors where needed."""


class _GoYamlAnchors(Composer):
    """go-yaml v3's anchors, which kustomize reads with: an anchor name defined again in a document is no error,
    and each alias refers to the latest definition before it. libyaml's own composer refuses the second one (YAML
    1.1 did); this is PyYAML's composer, reading libyaml's events."""

    peek_event: Callable[[], Any]  # the parser's, beside it in the loader

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if not isinstance(event, AliasEvent) and event.anchor is not None:
            self.anchors.pop(event.anchor, None)
        return super().compose_node(parent, index)


@functools.cache
def _loader(base: type, anchors: bool) -> type:
    """`base` given kyaml's merges (an OutLoader has them), and go-yaml's anchors when asked."""
    if not issubclass(base, _KyamlMerges):
        base = type("OutLoader", (_KyamlMerges, base), {})
    if not anchors:
        return base

    def init(self: Any, stream: Any) -> None:
        loader: Any = base
        loader.__init__(self, stream)  # the loader's own parser, constructor and resolver
        Composer.__init__(self)
    return type(base.__name__, (_GoYamlAnchors, base), {"__init__": init})


def out_loader(data: bytes | str, loader: type | None = None) -> type:
    """The loader to read `data` with: `loader` (an OutLoader), by default the YAML library's own with kyaml's
    merges. Only text holding a `&` can define an anchor: other text keeps libyaml's composer, which takes two
    thirds of the time PyYAML's takes."""
    return _loader(loader or _BASE_LOADER, "&" in data if isinstance(data, str) else b"&" in data)


@functools.lru_cache(maxsize=PARSED_CONTENTS_MAX)
def yaml_documents(data: bytes) -> tuple[Any, ...]:
    """Every document of `data`, None for an empty one, each within MAX_EXPANDED_NODES values through its aliases
    and merge keys. Shared between callers, who only read it. Raises DocumentsError."""
    try:
        docs = tuple(yaml.load_all(data, Loader=out_loader(data)))
    except DocumentsError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        raise DocumentsError("invalid", yaml_reason(exc), mark.line + 1 if mark else None) from None
    except (RecursionError, ValueError, UnicodeDecodeError) as exc:
        raise DocumentsError("unreadable", type(exc).__name__) from None
    if any(expanded_size(doc) > MAX_EXPANDED_NODES for doc in docs if doc is not None):
        raise DocumentsError("expands")
    return docs
