"""The merge of the trees of the stacks of one shared base (for shared_base.py's `merge`), file by file:
- equal in every stack: written as it is;
- a scalar that differs in a component's object (applied by a Kustomization that substitutes from `cluster-vars`):
  a `${TOKEN}` in the file, and each stack's value goes into its overlay's `cluster-vars` (`tokens`);
- a field of a Flux Kustomization in the base, which the overlay's root Kustomization applies without substituting:
  `spec.timeout` takes the largest of the stacks' values (a longer wait is safe for every stack, a shorter one is
  not), anything else is refused naming the field and each stack's value;
- a difference of shape (a key or list item in one stack only) is refused: the base cannot say both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from gitops.tree import Token
from model.flux_graph import duration_seconds

TOKEN_PREFIX = "GPU_PLATFORM_"
# What names an object: never a token (Flux substitutes after the build, which needs these to place the object).
_IDENTITY = ("apiVersion", "kind", "metadata.name", "metadata.namespace")
_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")


Path = tuple[str | int, ...]  # keys and list indices, as first_difference finds them


def first_difference(a: Any, b: Any, path: Path = ()) -> Path:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                return first_difference(a.get(key), b.get(key), (*path, key))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, (*path, i))
    return path


def dotted(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


def value_at(doc: Any, path: Path) -> Any:
    for part in path:
        if isinstance(part, int):
            doc = doc[part] if isinstance(doc, list) and part < len(doc) else None
        else:
            doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def shown_value(value: Any, limit: int = 80) -> str:
    if value is None:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


SHAPE_HINT = ("one file in the base cannot be both; hint: make the stacks' config agree there, or give each cluster "
               "its own layout")
AS_WRITTEN = ("a Flux Kustomization in the base is applied as written (the overlay's root Kustomization substitutes "
               "no variable) and no value is safe for every stack; hint: make the stacks' config agree there")


def _token_name(manifest: dict[str, Any], path: str, taken: set[str]) -> str:
    name = str((manifest.get("metadata") or {}).get("name", "object"))
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    last = next((p for p in reversed(parts) if not p.startswith("[")), "value").rsplit("/", 1)[-1]
    index = "".join(f"_{p[1:-1]}" for p in parts[parts.index(last) + 1:] if p.startswith("[")) \
        if last in parts else ""
    base = _NOT_NAME.sub("_", f"{TOKEN_PREFIX}{name}_{last}{index}").strip("_").upper()
    token, n = base, 2
    while token in taken:
        token, n = f"{base}_{n}", n + 1
    taken.add(token)
    return token


def _reads_as_other_type(text: str) -> bool:
    """YAML 1.1's reading, the widest (`yes` a boolean too): quoting more than Flux needs is never wrong."""
    try:
        return not isinstance(yaml.safe_load(text), str)
    except yaml.YAMLError:
        return False


@dataclass(frozen=True)
class Refused:
    """A field of a file the stacks of a base cannot share: `detail` says how each stack's differs; `shape`: a
    component's object that differs in shape (else a Flux Kustomization's field no value is safe for)."""

    rel: str
    where: str
    detail: str
    shape: bool


class StackTreesMerger:
    def __init__(self, stacks: list[str]) -> None:
        self.tokens: dict[str, dict[str, str]] = {s: {} for s in stacks}
        self.taken: set[str] = set()
        self.problems: list[str] = []  # the lines naming the files (merge names the stack file first when it can)
        self.refused: list[Refused] = []  # what each line of `problems` says, for merge to find its cause

    def component(self, rel: str, manifests: dict[str, Any], path: str = "", top: Any = None) -> Any:
        """A component's object: scalars that differ become tokens, shapes that differ are refused."""
        top = top if top is not None else next(iter(manifests.values()))
        values = list(manifests.values())
        if all(v == values[0] for v in values):
            return values[0]
        if all(isinstance(v, dict) for v in values):
            keys = [set(v) for v in values]
            if all(k == keys[0] for k in keys):
                return {k: self.component(rel, {s: v[k] for s, v in manifests.items()}, f"{path}.{k}" if path else k,
                                          top) for k in values[0]}
        elif all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
            return [self.component(rel, {s: v[i] for s, v in manifests.items()}, f"{path}[{i}]", top)
                    for i in range(len(values[0]))]
        elif all(isinstance(v, (str, int, float, bool)) for v in values) and path not in _IDENTITY:
            name = _token_name(top, path, self.taken)
            for stack, value in manifests.items():
                self.tokens[stack][name] = value if isinstance(value, str) else json.dumps(value)
            # A string some stack holds as "2" is quoted in the file, so the substituted value stays a string.
            return Token(name, quoted=any(isinstance(v, str) and _reads_as_other_type(v) for v in values))
        shapes = self._shapes(manifests)
        self.refused.append(Refused(rel, path or "(root)", shapes, shape=True))
        self.problems.append(f"{rel}: {path or '(root)'}: differs in shape between the stacks of the shared base "
                             f"({shapes}); {SHAPE_HINT}")
        return values[0]

    def flux_kustomization(self, rel: str, manifests: dict[str, Any]) -> Any:
        """A Kustomization in the base: applied by each overlay's root Kustomization, which substitutes nothing."""
        values = list(manifests.values())
        timeouts = {s: (m.get("spec") or {}).get("timeout") for s, m in manifests.items()}
        if all(isinstance(t, str) for t in timeouts.values()):
            longest = max(timeouts.values(), key=lambda t: duration_seconds(str(t)))
            values = [{**m, "spec": {**(m.get("spec") or {}), "timeout": longest}} for m in values]
        for m in values[1:]:
            if m != values[0]:
                where = first_difference(values[0], m)
                each = self._each({s: value_at(v, where) for s, v in zip(manifests, values, strict=True)})
                self.refused.append(Refused(rel, dotted(where), each, shape=False))
                self.problems.append(f"{rel}: {dotted(where)}: differs between the stacks of the shared base "
                                     f"({each}); {AS_WRITTEN}")
                break
        return values[0]

    def _shapes(self, manifests: dict[str, Any]) -> str:
        """What differs in shape: the keys one stack has and another lacks, list lengths, or the values' types."""
        values = list(manifests.values())
        if all(isinstance(v, dict) for v in values):
            every = set().union(*values)
            return "; ".join(f"{s} lacks {', '.join(sorted(map(str, every - set(v))))}"
                             for s, v in manifests.items() if every - set(v))
        if all(isinstance(v, list) for v in values):
            return ", ".join(f"{s}: {len(v)} items" for s, v in manifests.items())
        return self._each(manifests)

    def _each(self, manifests: dict[str, Any]) -> str:
        return ", ".join(f"{s}: {shown_value(v) if not isinstance(v, dict | list) else '(' + type(v).__name__ + ')'}"
                         for s, v in manifests.items())
