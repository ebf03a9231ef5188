"""postBuild variable substitution as kustomize-controller does it (its varsub): the variables of a Kustomization
(inline `substitute`, then `substituteFrom` ConfigMaps and Secrets of its namespace; a Secret's values are unknown
here, its keys are not), `${VAR}` with bash-style defaults, and YAML's retyping of a substituted plain scalar."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gitops.flux.inventory import WalkedKustomization, show_key
from model.safe_yaml import as_list, as_mapping, escaped


class PlainVar(str):
    """A scalar holding `${VAR}` that kustomize writes plain. Flux substitutes the YAML text of each object as
    kustomize wrote it and reads it again, so `id: ${CLUSTER_ID}` becomes the number 2. Quotes in the repository do
    not keep it a string: kustomize drops the quotes of `"${CLUSTER_ID}"` (nothing there needs them), so it becomes 2
    as well (flux build 2.9.5 prints `id: 2` for both). Only what kustomize must quote (`${A}: b`, a line break)
    stays a string."""
SUBSTITUTE_ANNOTATION = "kustomize.toolkit.fluxcd.io/substitute"
# ${NAME} or ${NAME<operator>…}; `$${…}` is Flux's escape for a literal.
VAR_REF = re.compile(r"(?<!\$)\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*")
DEFAULT_OPERATORS = (":=", ":-", "=", "-")
UNKNOWN = None  # a variable whose value lives in a Secret: its name is known, its value is not


def string_values(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            key = escaped(str(k))  # a key from the repository: never a line break in a problem line
            yield from string_values(v, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from string_values(v, f"{path}[{i}]")


def unresolved_variables(manifest: Mapping[str, Any], variables: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(field path, variable) for each `${VAR}` without a value or a default: Flux's strict substitution fails."""
    annotations = as_mapping(as_mapping(manifest.get("metadata")).get("annotations"))
    if annotations.get(SUBSTITUTE_ANNOTATION) == "disabled":
        return []
    out = []
    for path, text in string_values(manifest):
        for match in VAR_REF.finditer(text):
            body = match.group(1)
            m = _VAR_NAME.match(body)
            name = m.group(0) if m else body
            if name not in variables and not body[len(name):].startswith(DEFAULT_OPERATORS):
                out.append((path, name))
    return out
_GO_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_GO_TRUE = frozenset({"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"})
_GO_FALSE = frozenset({"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"})
_GO_INT = re.compile(r"[-+]?(0b[01_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _retyped(text: str) -> Any:
    """A plain scalar's substituted text as Flux reads it again: sigs.k8s.io/yaml's YAMLToJSON, go-yaml v2's YAML 1.1
    types (`2` and `0x1F` numbers, `yes`, `on` and `y` booleans, `~` and the empty text null), as flux build 2.9.5
    prints them; anything else, a date included, stays the text."""
    if text in _GO_NULL:
        return None
    if text in _GO_TRUE or text in _GO_FALSE:
        return text in _GO_TRUE
    if _GO_INT.fullmatch(text):
        digits = text.replace("_", "")
        sign, body = (-1 if digits.startswith("-") else 1), digits.lstrip("+-")
        base = {"0b": 2, "0o": 8, "0x": 16}.get(body[:2].lower())
        if base:
            return sign * int(body[2:], base)
        return sign * int(body, 8 if len(body) > 1 and body.startswith("0") else 10)
    if _GO_FLOAT.fullmatch(text):
        return float(text)
    return text


def substitute(value: Any, variables: Mapping[str, str | None]) -> Any:
    """Known values replaced; unknown ones (Secret) and undefined ones left as written."""
    if isinstance(value, str):
        def one(match: re.Match) -> str:
            body = match.group(1)
            m = _VAR_NAME.match(body)
            name = m.group(0) if m else body
            known = variables.get(name)
            if known is not None:
                return known
            for op in DEFAULT_OPERATORS:
                if body[len(name):].startswith(op) and name not in variables:
                    return body[len(name) + len(op):]
            return match.group(0)
        result = VAR_REF.sub(one, value)
        return _retyped(result) if isinstance(value, PlainVar) and result != value else result
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    return value


def variables_of(ks: WalkedKustomization, everything: list[dict[str, Any]],
                 problems: list[str]) -> dict[str, str | None]:
    post = as_mapping(ks.spec.get("postBuild"))
    variables: dict[str, str | None] = {}
    for ref in as_list(post.get("substituteFrom")):
        if not isinstance(ref, dict):
            continue
        kind, name = ref.get("kind"), ref.get("name")
        found = next((m for m in everything if m.get("kind") == kind
                      and as_mapping(m.get("metadata")).get("name") == name
                      and (as_mapping(m.get("metadata")).get("namespace") or "") == ks.key[0]), None)
        if found is None:
            if not ref.get("optional"):
                problems.append(f"{show_key(ks.key)} ({ks.declared_in or 'bootstrap'}): postBuild.substituteFrom: "
                                f"{kind} {ks.key[0]}/{name} is applied by no Kustomization in this repository; "
                                "Flux would fail the build; hint: add it, or mark the reference optional: true")
            continue
        if kind == "ConfigMap":  # Flux takes line breaks out of every value (fluxcd/pkg/kustomize LoadVariables)
            variables.update({str(k): str(v).replace("\n", "") for k, v in as_mapping(found.get("data")).items()})
        else:  # a Secret, usually SOPS-encrypted: the keys are readable, the values are not
            keys = {**as_mapping(found.get("data")), **as_mapping(found.get("stringData"))}
            variables.update({str(k): UNKNOWN for k in keys})
    variables.update({str(k): str(v).replace("\n", "") for k, v in as_mapping(post.get("substitute")).items()})
    return variables
