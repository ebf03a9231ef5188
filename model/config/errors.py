"""Refusals of stack config: each pydantic error as one line, `file: key: value: problem; hint: fix`.

ConfigError carries the lines to the user; key_rule is how a model validator refuses the key to change rather than
its whole model. Lines are shaped like onedr0p/cluster-template's.
"""

from __future__ import annotations

import difflib
import enum
import json
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from model.config.values import PATTERN_MEANING, PROJECT
from model.errors import RefusalError
from model.safe_yaml import escaped


class ConfigError(RefusalError):
    """A user mistake in stack config (the program raises it to the Pulumi CLI as a RunError: no traceback)."""


# A rule between keys of one model (a model_validator) is refused at the key the user must change, not at the model:
# pydantic would place a plain ValueError at the model's own location and show its value as `{…}`. A validator
# raises key_rule(...), and format_validation_error extends the model's location by `key`.
KeyPath = tuple[str | int, ...]


class _Missing(enum.Enum):
    KEY = "missing"


MISSING = _Missing.KEY  # the value of a key the stack file does not set: the line shows `missing`


def key_rule(key: KeyPath, value: Any, problem: str, hint: str, also: KeyPath | None = None) -> PydanticCustomError:
    """The error a model validator raises for `key` (relative to its model) holding `value` (or MISSING): the line
    reads `<key>: <value>: <problem>[ (also <also>)]; hint: <hint>`; `also` names a second key of the same model."""
    return PydanticCustomError("key_rule", "{problem}",
                               {"key": key, "value": value, "problem": problem, "hint": hint, "also": also})


def first_repeat(items: list[Any]) -> tuple[int, int] | None:
    """(first index, index of its first repeat) of the earliest item that repeats, or None."""
    seen: dict[Any, int] = {}
    for j, item in enumerate(items):
        if item in seen:
            return seen[item], j
        seen[item] = j
    return None


def _pattern_problem(pattern: str) -> str:
    meaning = PATTERN_MEANING.get(pattern)
    return f"must be {meaning} ({pattern})" if meaning else f"must match {pattern}"


def _key_path(loc: tuple[Any, ...]) -> str:
    # A key from the file is shown escaped: a line break or control character in it must not break the line.
    head, *rest = [escaped(str(part)) for part in loc] or ["(root)"]
    key = head
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def _format_loc(loc: tuple[Any, ...]) -> str:
    return f"{PROJECT}:{_key_path(loc)}"


def _key_rule_line(source: str, loc: tuple[Any, ...], ctx: dict[str, Any]) -> str:
    """A key_rule error: at the key the rule names below the model that raised it, in the rule's own words."""
    value = "missing" if ctx["value"] is MISSING else shown_value(ctx["value"])
    also = f" (also {_key_path(loc + tuple(ctx['also']))})" if ctx.get("also") else ""
    return f"{source}: {_format_loc(loc + tuple(ctx['key']))}: {value}: {ctx['problem']}{also}; hint: {ctx['hint']}"


def shown_value(value: Any, limit: int = 80) -> str:
    """A value as an error line shows it: JSON, cut after `limit` characters (a value may be kilobytes long)."""
    if isinstance(value, dict):
        return "{…}"
    # A string keeps its printable characters (é, ²) and escapes the rest; anything else is ASCII JSON.
    try:
        text = f'"{escaped(value)}"' if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):  # keys of mixed types, a structure too deep
        text = escaped(repr(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…\" ({len(value)} characters)" if isinstance(value, str) else f"{text[:limit]}…"


# Where strict types refuse a look-alike (`true` for a number, "1000" for 1000), say what to write instead.
_TYPE_PROBLEMS = {
    "int_type": "must be a whole number, not a string, a boolean or a decimal; hint: write the number unquoted",
    "bool_type": "must be true or false; hint: write true or false unquoted",
}


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose field `loc[-1]` would be (for "did you mean" on an unknown key)."""
    from typing import get_args

    def find(annotation: Any) -> type[BaseModel] | None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        return next((m for m in map(find, get_args(annotation)) if m is not None), None)

    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if isinstance(part, int) or str(part).isdigit():
            continue
        field = model.model_fields.get(str(part)) if model is not None else None
        model = find(field.annotation) if field is not None else None
    return model


def _unknown_key_hint(root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    model = _model_at(root, loc)
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1) if model and loc else []
    return f"did you mean {close[0]}?" if close else "check its spelling against docs/config.md"


def format_validation_error(source: str, error: ValidationError, root: type[BaseModel]) -> list[str]:
    """One refusal line per error of `root`'s validation (the model an unknown key is matched against)."""
    lines = []
    for err in error.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if not str(part).startswith("function-") and part != "[key]")
        if err["type"] == "key_rule":
            lines.append(_key_rule_line(source, loc, err.get("ctx", {})))
            continue
        if err["type"] == "missing":
            lines.append(f"{source}: {_format_loc(loc)}: missing: this key is required; hint: add it (every key, "
                         "its type and default: docs/config.md)")
            continue
        value = err.get("input")
        shown = shown_value(value)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; hint: {_unknown_key_hint(root, loc)}"
        elif err["type"] == "string_pattern_mismatch":
            msg = f"{_pattern_problem(err.get('ctx', {}).get('pattern', ''))}; hint: write a value of that form"
        elif err["type"] in _TYPE_PROBLEMS:
            msg = _TYPE_PROBLEMS[err["type"]]
        if "; hint: " not in msg:
            msg += "; hint: see the key's type in docs/config.md"
        lines.append(f"{source}: {_format_loc(loc)}: {shown}: {msg}")
    return lines
