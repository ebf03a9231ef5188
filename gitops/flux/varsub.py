"""postBuild variable substitution as kustomize-controller does it (its varsub): the variables of a Kustomization
(inline `substitute`, then `substituteFrom` ConfigMaps and Secrets of its namespace; a Secret's values are unknown
here, its keys are not), `${VAR}` with bash-style defaults, and YAML's retyping of a substituted plain scalar. A
Secret is there when the repository applies it (a SOPS-encrypted one too: kustomize-controller decrypts it, its keys
are plain), when a generator of the build makes it under that name, or when an ExternalSecret the repository
applies makes it (external-secrets.io: named spec.target.name, else its own name, in its namespace)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gitops.flux.inventory import Variables, WalkedKustomization, show_key
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


# kustomize's name suffix on a generated ConfigMap or Secret (api/hasher: ten characters of the hash, encoded)
_HASH_SUFFIX = re.compile(r"-[245-9bcdfghkmt]{10}")


def variables_of(ks: WalkedKustomization, everything: list[dict[str, Any]], problems: list[str],
                 unsure: list[str] | None = None) -> Variables:
    """The variables, as above. A reference Flux would fail on is a line of `problems`; one the program cannot tell
    about (a Secret nothing in the repository makes, or an ExternalSecret may make under a name that holds a
    variable) a line of `unsure`."""
    post = as_mapping(ks.spec.get("postBuild"))
    variables, unread = Variables(), []
    at = f"{show_key(ks.key)} ({ks.declared_in or 'bootstrap'}): postBuild.substituteFrom"
    for ref in as_list(post.get("substituteFrom")):
        if not isinstance(ref, dict):
            continue
        kind, name, namespace = ref.get("kind"), ref.get("name"), ks.key[0]
        found = next((m for m in everything if _is(m, kind, namespace) and _meta(m).get("name") == name), None)
        if found is None and kind == "Secret":
            maker, certain = _external_secret_making(everything, namespace, str(name))
            if maker is not None:
                keys = external_secret_keys(maker) if certain else None
                variables.update({k: UNKNOWN for k in keys or ()})
                if keys is None:
                    unread.append(f"ExternalSecret {namespace}/{escaped(str(_meta(maker).get('name')))}")
                if not certain and unsure is not None:
                    unsure.append(f"{at}: Secret {namespace}/{escaped(str(name))}: the program cannot tell whether "
                                  f"ExternalSecret {namespace}/{escaped(str(_meta(maker).get('name')))} makes it (the "
                                  f"name it gives its Secret, {escaped(str(_secret_name(maker)))}, holds a variable); "
                                  "if nothing does, Flux would fail the build; hint: write that name out, so the walk "
                                  "can check it")
                continue
        if found is None and not ref.get("optional"):
            line = _missing(at, kind, namespace, str(name), everything)
            if line is not None:
                problems.append(line)
            else:  # a Secret is often made outside Git: by hand, by an operator the walk does not read
                unread.append(f"Secret {namespace}/{escaped(str(name))}")
                if unsure is not None:
                    unsure.append(f"{at}: Secret {namespace}/{escaped(str(name))}: nothing in this repository applies "
                                  "or makes it (no Secret, SOPS file, generator or ExternalSecret of that name in "
                                  f"{namespace}); the program cannot tell whether something outside it does (by hand, "
                                  "another operator); if nothing does, Flux would fail the build; hint: add it to the "
                                  "repository (an ExternalSecret or a SOPS-encrypted Secret) so the walk can check "
                                  "it, or mark the reference optional: true")
        if found is None:
            continue
        if kind == "ConfigMap":  # Flux takes line breaks out of every value (fluxcd/pkg/kustomize LoadVariables)
            variables.update({str(k): str(v).replace("\n", "") for k, v in as_mapping(found.get("data")).items()})
        else:  # a Secret, usually SOPS-encrypted: the keys are readable, the values are not
            keys = {**as_mapping(found.get("data")), **as_mapping(found.get("stringData"))}
            variables.update({str(k): UNKNOWN for k in keys})
    variables.update({str(k): str(v).replace("\n", "") for k, v in as_mapping(post.get("substitute")).items()})
    variables.unread = tuple(unread)
    return variables


def _meta(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(manifest.get("metadata"))


def _is(manifest: Mapping[str, Any], kind: Any, namespace: str) -> bool:
    return manifest.get("kind") == kind and (_meta(manifest).get("namespace") or "") == namespace


def _external_secret(manifest: Mapping[str, Any]) -> bool:
    return manifest.get("kind") == "ExternalSecret" and \
        str(manifest.get("apiVersion", "")).startswith("external-secrets.io/")


def _secret_name(manifest: Mapping[str, Any]) -> Any:
    """The Secret an ExternalSecret makes: spec.target.name, else its own name; None where it makes none
    (creationPolicy Merge fills a Secret something else makes, None makes nothing)."""
    target = as_mapping(as_mapping(manifest.get("spec")).get("target"))
    if target.get("creationPolicy") in ("Merge", "None"):
        return None
    return target.get("name") or _meta(manifest).get("name")


def _external_secret_making(everything: list[dict[str, Any]], namespace: str,
                            name: str) -> tuple[Mapping[str, Any] | None, bool]:
    """The ExternalSecret of `namespace` that makes the Secret `name` (True), else one whose Secret's name holds a
    variable that could make it that name once substituted (False: the program cannot tell), else none."""
    maybe = None
    for manifest in everything:
        made = _secret_name(manifest) if _external_secret(manifest) else None
        if made is None or (_meta(manifest).get("namespace") or "") != namespace:
            continue
        if made == name:
            return manifest, True
        if maybe is None and "${" in str(made) and re.fullmatch(
                ".*".join(re.escape(part) for part in VAR_REF.split(str(made))[::2]), name):
            maybe = manifest
    return maybe, False


def external_secret_keys(manifest: Mapping[str, Any]) -> list[str] | None:
    """The keys of the Secret an ExternalSecret makes, or None where they come from the secret store (`dataFrom`)
    or from a template the repository does not hold (`templateFrom`). A template with `data` replaces the fetched
    keys, unless its mergePolicy is Merge."""
    spec = as_mapping(manifest.get("spec"))
    template = as_mapping(as_mapping(spec.get("target")).get("template"))
    templated = [str(k) for k in as_mapping(template.get("data"))]
    if template.get("templateFrom"):
        return None
    if templated and template.get("mergePolicy") != "Merge":
        return templated
    if spec.get("dataFrom"):
        return None
    return [str(d["secretKey"]) for d in as_list(spec.get("data")) if isinstance(d, dict) and "secretKey" in d] + \
        templated


def _missing(at: str, kind: Any, namespace: str, name: str, everything: list[dict[str, Any]]) -> str | None:
    """The line of a reference nothing in the repository makes under its name: a generator's under a hashed name,
    or a ConfigMap; None for a Secret, which may be made outside the repository."""
    hashed = next((m for m in everything if _is(m, kind, namespace) and str(_meta(m).get("name", "")).startswith(name)
                   and _HASH_SUFFIX.fullmatch(str(_meta(m).get("name", ""))[len(name):])), None)
    if hashed is not None:
        return (f"{at}: {kind} {namespace}/{escaped(name)} is made by a generator as {kind} {namespace}/"
                f"{escaped(str(_meta(hashed).get('name')))} (kustomize's name hash), and Flux looks it up by the name "
                "as written: it would fail the build; hint: set `disableNameSuffixHash: true` in that generator's "
                "`options` (or in the kustomization's `generatorOptions`)")
    if kind == "Secret":
        return None
    return (f"{at}: {kind} {namespace}/{escaped(name)} is applied by no Kustomization in this repository; Flux would "
            "fail the build; hint: add it, or mark the reference optional: true")
