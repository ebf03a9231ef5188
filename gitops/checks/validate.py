"""Validate the whole tree before a single byte is written.

- Kubernetes objects: the Kubernetes 1.36 strict schemas shipped with kubernetes-validate.
- Flux Kustomizations: the vendored Kustomization v1 JSON Schema (schemas/flux/), plus what it misses: exact
  apiVersion/kind, metadata.name, unknown spec fields (durations are pattern-checked by the schema itself).
- `${VAR}`: every variable defined in the cluster's `cluster-vars` (Flux's strict substitution fails the reconcile
  otherwise); every `cluster-vars` key a valid Flux variable name.
- Secrets: no `Secret` object and no value that came from a Pulumi secret; secrets are referenced by name.
- yamllint with the project's `.yamllint.yaml`. Each problem is one line: `file (Kind ns/name): field: rule`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from components.flux import FluxDeliveryGraph
from components.gpu_app import GpuApp
from components.intel_gpu_dra import IntelGpuResourceDriver
from components.intel_gpu_plugin import IntelGpuPlugin
from gitops.engine import optimizations
from gitops.engine.stacks import ROOT
from gitops.flux.inventory import is_flux_kustomization
from gitops.flux.varsub import DEFAULT_OPERATORS, VAR_REF
from gitops.tree import ExportedObject, Tree
from model import flux_graph as flux_mod
from model.config import FLUX_VAR_NAME_PATTERN
from model.errors import RefusalError
from model.outputs import AppPolicy

KUBERNETES_VERSION = "1.36.0"
FLUX_SCHEMA = ROOT / "schemas" / "flux" / "kustomization-v1.schema.json"
YAMLLINT_CONFIG = ROOT / ".yamllint.yaml"
# The same rule as the config model's: Flux's ^[_[:alpha:]][_[:alpha:][:digit:]]*$ in ASCII classes.
FLUX_VAR_NAME = re.compile(FLUX_VAR_NAME_PATTERN)


class ExportValidationError(RefusalError):
    """An object or the tree breaks a schema, a policy or a substitution rule (one line each)."""


@lru_cache(maxsize=1)
def _flux_validator():
    import jsonschema

    schema = json.loads(FLUX_SCHEMA.read_text())
    return jsonschema.Draft7Validator(schema), schema


@lru_cache(maxsize=1)
def _yamllint_config():
    from yamllint.config import YamlLintConfig

    return YamlLintConfig(file=str(YAMLLINT_CONFIG))


def _where(obj: ExportedObject) -> str:
    return f"{obj.path} ({obj.id})"


_COMPONENT_FILES = {c.TYPE: f"{c.__module__.replace('.', '/')}.py"
                    for c in (FluxDeliveryGraph, GpuApp, IntelGpuResourceDriver, IntelGpuPlugin)}


def _program_hint(obj: ExportedObject) -> str:
    """The hint of an object the program generated: the fix is in its component, never in the exported file."""
    kind = obj.component_type.rsplit(":", 1)[-1]
    where = _COMPONENT_FILES.get(obj.component_type, "components/")
    return (f"hint: the program generates this object: fix it in its component ({kind} {obj.component_name}, "
            f"{where}), then run the export again")


def _json_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


_DEFS_PREFIXES = ("/api/_definitions.json#/$defs/", "#/$defs/")  # from a kind schema, within the definitions
_DEFS_ID = "https://kubernetes.io/api/_definitions.json"
_SCHEMA_CACHE = ROOT / "build" / "cache"


@lru_cache(maxsize=1)
def _schema_cache_path() -> Path:
    from importlib.metadata import version

    return _SCHEMA_CACHE / f"kubernetes-validate-{version('kubernetes-validate')}-k8s-{KUBERNETES_VERSION}-strict.json"


@lru_cache(maxsize=1)
def _full_definitions() -> dict[str, Any]:
    from kubernetes_validate.utils import schema_contents

    return schema_contents(f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict/_definitions.json",
                           KUBERNETES_VERSION)["$defs"]


@lru_cache(maxsize=1)
def _schema_bundle() -> dict[str, Any]:
    """The kind schemas used so far and the definitions they reach, cut from kubernetes-validate's 1.6 MB
    `_definitions.json` (parsing it costs more than validating the whole tree). Cached under build/cache, keyed by
    the library's version; derived data only, rebuilt from the library whenever a kind is missing."""
    try:
        return json.loads(_schema_cache_path().read_text())
    except (OSError, ValueError):
        return {"kinds": {}, "defs": {}}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        for prefix in _DEFS_PREFIXES:
            if isinstance(ref, str) and ref.startswith(prefix):
                yield ref[len(prefix):]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _kind_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    bundle = _schema_bundle()
    key = f"{api_version} {kind}"
    if key not in bundle["kinds"]:
        from kubernetes_validate.utils import schema_contents

        api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # as kubernetes_validate.validate names files
        try:
            schema = schema_contents(
                f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict/{kind.lower()}-{api}.json",
                KUBERNETES_VERSION)
        except FileNotFoundError:
            return None
        full, pending = _full_definitions(), list(_refs(schema))
        while pending:
            name = pending.pop()
            if name not in bundle["defs"]:
                bundle["defs"][name] = full[name]
                pending.extend(_refs(full[name]))
        bundle["kinds"][key] = schema
        try:
            path = _schema_cache_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(bundle, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only checkout validates from the library every time; slower, same answers
    return bundle["kinds"][key]


@cache
def _k8s_validator(api_version: str, kind: str):
    """Validator for the schema `kubernetes_validate.validate(..., strict=True)` would pick, built once per kind."""
    import jsonschema
    from referencing import Registry, Resource

    schema = _kind_schema(api_version, kind)
    if schema is None:
        return None
    defs = Resource.from_contents({"$id": _DEFS_ID, "$schema": "https://json-schema.org/draft/2020-12/schema",
                                   "$defs": _schema_bundle()["defs"]})
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ (defs @ Registry()))


def check_kubernetes(obj: ExportedObject) -> list[str]:
    api_version, kind = str(obj.manifest.get("apiVersion")), str(obj.manifest.get("kind"))
    validator = _k8s_validator(api_version, kind)
    if validator is None:
        return [f"{_where(obj)}: apiVersion/kind: no Kubernetes {KUBERNETES_VERSION} schema for {kind} {api_version}; "
                f"{_program_hint(obj)}"]
    err = next(iter(sorted(validator.iter_errors(obj.manifest), key=lambda e: list(map(str, e.absolute_path)))), None)
    if err is not None:
        return [f"{_where(obj)}: {_json_path(err.absolute_path)}: {err.message} "
                f"(Kubernetes {KUBERNETES_VERSION} strict schema); {_program_hint(obj)}"]
    return []


def _unknown_fields(value: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    if isinstance(value, dict) and "properties" in schema and not schema.get("additionalProperties") \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        for key, sub in value.items():
            if key not in schema["properties"]:
                yield f"{path}.{key}"
            else:
                yield from _unknown_fields(sub, schema["properties"][key], f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _unknown_fields(item, schema["items"], f"{path}[{i}]")


def check_flux_kustomization(obj: ExportedObject) -> list[str]:
    m = obj.manifest
    where = _where(obj)
    problems: list[str] = []
    if m.get("apiVersion") != flux_mod.API_VERSION:
        problems.append(f"{where}: apiVersion: {m.get('apiVersion')!r}: must be {flux_mod.API_VERSION}")
    if m.get("kind") != flux_mod.KIND:
        problems.append(f"{where}: kind: {m.get('kind')!r}: must be {flux_mod.KIND}")
    if not (m.get("metadata") or {}).get("name"):
        problems.append(f"{where}: metadata.name: missing: every Kustomization needs a name")
    validator, schema = _flux_validator()
    for err in sorted(validator.iter_errors(m), key=lambda e: list(map(str, e.absolute_path))):
        problems.append(f"{where}: {_json_path(err.absolute_path)}: {err.message} (Flux Kustomization v1 schema)")
    # Durations need no check of their own: the schema carries Flux's duration pattern for all three fields.
    for unknown in _unknown_fields(m.get("spec", {}), schema["properties"]["spec"], "spec"):
        problems.append(f"{where}: {unknown}: unknown field; the Kustomization v1 API has no such field")
    return [f"{line}; {_program_hint(obj)}" for line in problems]


def check_secrets(obj: ExportedObject) -> list[str]:
    problems = []
    if obj.manifest.get("kind") == "Secret":
        problems.append(f"{_where(obj)}: kind: Secret objects are never exported; hint: keep the Secret "
                        "SOPS-encrypted in the GitOps repo and reference it by name")
    for path in obj.registration.secret_paths:
        problems.append(f"{_where(obj)}: {path}: holds a Pulumi secret value, which would land in plaintext; "
                        "hint: reference a Secret by name instead")
    return problems


def _stack_cluster_vars(tree: Tree) -> tuple[str, dict[str, Any]]:
    """Where the stack file sets `flux.clusterVars` (`Pulumi.<stack>.yaml: <project>:flux.clusterVars`) and its
    values, as the program read them; empty when the stack sets none."""
    for key, text in tree.config.items():
        if key.endswith(":flux"):
            try:
                flux = json.loads(text)
            except ValueError:
                continue
            found = flux.get("clusterVars") if isinstance(flux, dict) else None
            if isinstance(found, dict):
                return f"Pulumi.{tree.stack}.yaml: {key}.clusterVars", found
    return f"Pulumi.{tree.stack}.yaml: flux.clusterVars", {}


def _cluster_vars_object(tree: Tree) -> ExportedObject | None:
    return next((o for o in tree.objects if o.manifest.get("kind") == "ConfigMap"
                 and (o.manifest.get("metadata") or {}).get("name") == flux_mod.CLUSTER_VARS), None)


def _stack_key_of(line: str, stack_vars: dict[str, Any]) -> str | None:
    """The clusterVars key a line of the generated cluster-vars ConfigMap writes, when the stack file sets it."""
    key = line.strip().split(":", 1)[0].strip("'\"")
    return key if key in stack_vars and VAR_REF.search(str(stack_vars[key])) else None


def check_substitutions(tree: Tree, cluster_vars: dict[str, str]) -> list[str]:
    problems = []
    stack_at, stack_vars = _stack_cluster_vars(tree)
    holder = _cluster_vars_object(tree)
    for key in sorted(cluster_vars):
        if not FLUX_VAR_NAME.match(key):
            rule = "not a Flux variable name (^[_[:alpha:]][_[:alpha:][:digit:]]*$)"
            if key in stack_vars:
                problems.append(f"{stack_at}.{key}: {rule}; hint: rename it: letters, digits and '_', not starting "
                                "with a digit")
            elif holder is not None:
                problems.append(f"{_where(holder)}: data.{key}: {rule}; {_program_hint(holder)}")
            else:
                problems.append(f"{flux_mod.CLUSTER_VARS}: data.{key}: {rule}; hint: rename it in flux.clusterVars")
    for path, content in sorted(tree.files.items()):
        if not path.endswith(".yaml"):
            continue
        for lineno, line in enumerate(content.decode().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            stack_key = _stack_key_of(line, stack_vars) if holder is not None and path == holder.path else None
            at = f"{stack_at}.{stack_key}" if stack_key else f"{path}:{lineno}"
            for match in VAR_REF.finditer(line):
                body = match.group(1)
                name = re.split(r"[^_A-Za-z0-9]", body, maxsplit=1)[0]
                rest = body[len(name):]
                if not FLUX_VAR_NAME.match(name):
                    problems.append(f"{at}: ${{{body}}}: not a Flux variable name; hint: use letters, digits and "
                                    "'_', not starting with a digit, or write $${...} for a literal")
                elif name not in cluster_vars and not rest.startswith(DEFAULT_OPERATORS):
                    problems.append(f"{at}: ${{{name}}}: not defined in {flux_mod.CLUSTER_VARS} "
                                    f"(defined: {', '.join(sorted(cluster_vars)) or 'none'}); Flux's strict "
                                    "substitution would fail the reconcile; hint: add it to flux.clusterVars")
    return problems


@lru_cache(maxsize=4096)
def _lint_findings(text: str) -> tuple[tuple[int, int, str, str], ...]:
    """yamllint's findings for one file's text. The shipped config is fixed for the process and yamllint depends on
    nothing else, so the same text always gives the same findings: `--stack all --check` and the test suite lint
    the same files many times (~8 ms each), and a repeat is a lookup."""
    from yamllint import linter

    return tuple((p.line, p.column, str(p.rule), p.desc) for p in linter.run(text, _yamllint_config()))


def check_lint(tree: Tree) -> list[str]:
    problems = []
    for path, content in sorted(tree.files.items()):
        if path.endswith(".yaml"):
            for line, column, rule, desc in _lint_findings(content.decode()):
                problems.append(f"{path}:{line}:{column}: yamllint {rule}: {desc}")
    return problems


def cluster_vars_of(tree: Tree) -> dict[str, str]:
    for obj in tree.objects:
        if obj.manifest.get("kind") == "ConfigMap" and obj.manifest["metadata"]["name"] == flux_mod.CLUSTER_VARS:
            return dict(obj.manifest.get("data") or {})
    return {}


def check_policies(tree: Tree, app_policy: AppPolicy) -> list[str]:
    """The policy pack's rules (policy/rules.py), run offline over every exported object."""
    from policy.rules import Resource, Settings, evaluate

    settings = Settings(egress_class_label=app_policy.egress_class_label, auth_mode_label=app_policy.auth_mode_label)
    resources = [Resource(o.registration.type, o.registration.name, o.registration.urn, o.manifest)
                 for o in tree.objects]
    by_ref = {o.registration.urn: o.path for o in tree.objects}
    return [f"{by_ref[v.resource.urn]}: {v}" for v in evaluate(resources, settings)]


# --- the validation-cache optimization (gitops/engine/optimizations.py) ----------------------------------------------
# A schema verdict depends on the object's content and the schemas only, so an object whose exact content passed
# before passes again: its content hash is kept under build/cache/ (the project's own folder, never OUT), in a file
# named by a fingerprint of the schemas and of this file. Only passes are kept: a refused object is checked anew.
_PASSED_LIMIT = 50_000  # hashes kept at most (3.3 MB); past it the file starts afresh
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@lru_cache(maxsize=1)
def _passed_path() -> Path:
    from importlib.metadata import version

    digest = hashlib.sha256()
    for part in (KUBERNETES_VERSION, version("kubernetes-validate"), version("jsonschema")):
        digest.update(part.encode() + b"\0")
    digest.update(FLUX_SCHEMA.read_bytes())
    digest.update(Path(__file__).read_bytes())  # a change to the checks themselves invalidates every verdict
    return _SCHEMA_CACHE / f"schema-passed-{digest.hexdigest()[:16]}.txt"


def _content_key(manifest: dict[str, Any]) -> str:
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _passed_before() -> set[str]:
    if not optimizations.on("validation-cache"):
        return set()
    try:
        lines = _passed_path().read_text(encoding="ascii").splitlines()
    except (OSError, ValueError):
        return set()
    return {line for line in lines if _SHA256_HEX.fullmatch(line)}


def _remember_passed(known: set[str], passed: set[str]) -> None:
    if not passed or not optimizations.on("validation-cache"):
        return
    keep = known | passed if len(known) + len(passed) <= _PASSED_LIMIT else passed
    path = _passed_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text("".join(f"{key}\n" for key in sorted(keep)), encoding="ascii")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only checkout validates every object every time; slower, same answers


def check_schema(obj: ExportedObject) -> list[str]:
    """The object against its schema: Flux's Kustomization v1 for a Flux Kustomization, Kubernetes' otherwise."""
    if is_flux_kustomization(obj.manifest):
        return check_flux_kustomization(obj)
    return check_kubernetes(obj)


def validate_tree(tree: Tree, app_policy: AppPolicy | None = None, lint: bool = True) -> None:
    problems: list[str] = []
    known = _passed_before()
    passed: set[str] = set()
    for obj in tree.objects:
        secrets = check_secrets(obj)
        problems += secrets
        key = _content_key(obj.manifest)
        if key in known or secrets:  # a secret's placeholder fails the schema too: the same cause, one line
            continue
        found = check_schema(obj)
        problems += found
        if not found:
            passed.add(key)
    _remember_passed(known, passed)
    problems += check_substitutions(tree, cluster_vars_of(tree))
    if lint:
        problems += check_lint(tree)
    problems += check_policies(tree, app_policy or AppPolicy())
    if problems:
        raise ExportValidationError(problems)


__all__ = ["ExportValidationError", "validate_tree"]
