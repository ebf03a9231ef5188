"""The stack file's JSON Schema and the config reference (docs/config.md), both generated from the pydantic models of
model/config/: `make schema` (`python -m gitops.stack_schema`) writes them, `--check` says whether they are current
(tests/gitops/test_stack_schema.py keeps them so).

- schemas/stack/stack.schema.json: `Pulumi.<stack>.yaml` as the engine reads it (gitops/engine/stacks.py), named on
  each stack file's first line (`# yaml-language-server: $schema=...`) so editors complete and check keys; what a
  schema cannot say (cross-field rules, the export's line-length bound, `latest`) the models still refuse in one line.
- docs/config.md: one row per key, the whole file generated; the README links it (a user's README stays short).
Descriptions: a field's `Field(description=...)`, else the comment lines right above it (or ending its line) in
model/config/, else the docstring of the model the field holds; `undocumented()` lists the fields with none."""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tokenize
import typing
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gitops.engine.stacks import OTHER_CONFIG_NAMESPACES, ROOT, STACK_FILE_KEYS
from model.config.apps import APP_WRITTEN_KEYS, EXPORT_ONLY_APP_KEYS, EXPORT_ONLY_PLEX_KEYS, PLEX_WRITTEN_KEYS
from model.plugin_flags import flags_table_markdown

SCHEMA_PATH = ROOT / "schemas" / "stack" / "stack.schema.json"
CONFIG_REFERENCE = ROOT / "docs" / "config.md"
PLUGIN_FLAGS_REFERENCE = ROOT / "docs" / "plugin-flags.md"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
_STACK_FILE_DOCS = {
    "secretsprovider": "Pulumi's secrets provider for this stack (not used by the offline export).",
    "encryptedkey": "Pulumi's encrypted data key for this stack (not used by the offline export).",
    "encryptionsalt": "Pulumi's encryption salt for this stack (not used by the offline export).",
    "environment": "Pulumi ESC environments imported by this stack (not used by the offline export).",
}


# --- descriptions from the source ----------------------------------------------------------------------------

def _clean(text: str) -> str:
    return " ".join(text.split())


@cache
def _field_comments(source_file: str) -> dict[tuple[str, str], str]:
    """(class, field) -> the comment block right above the field, or the comment at the end of its line."""
    source = Path(source_file).read_text(encoding="utf-8")
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number (1-based) -> comment text
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    found: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            above: list[str] = []
            number = item.lineno - 1
            while number >= 1 and lines[number - 1].strip().startswith("#"):
                above.insert(0, comments.get(number, ""))
                number -= 1
            trailing = [comments[n] for n in range(item.lineno, (item.end_lineno or item.lineno) + 1) if n in comments
                        and not lines[n - 1].strip().startswith("#")]
            text = _clean(" ".join(above or trailing))
            if text:
                found[(node.name, item.target.id)] = text
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _is_list(annotation: Any) -> bool:
    if typing.get_origin(annotation) is list:
        return True
    return any(_is_list(arg) for arg in typing.get_args(annotation))


def _first_sentence(doc: str | None) -> str:
    text = _clean(doc or "")
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


def field_description(model: type[BaseModel], name: str) -> str:
    info = model.model_fields[name]
    if info.description:
        return _clean(info.description)
    for cls in model.__mro__:  # a field inherited from a base model is documented there
        if cls is BaseModel or not (isinstance(cls, type) and issubclass(cls, BaseModel)) or name not in getattr(
                cls, "__annotations__", {}):
            continue
        comment = _field_comments(sys.modules[cls.__module__].__file__ or "").get((cls.__name__, name))
        if comment:
            return comment
    held = _models_in(info.annotation)
    return _first_sentence(held[0].__doc__) if held and held[0].__doc__ else ""


def _all_models() -> dict[str, type[BaseModel]]:
    from model.config import StackConfig

    found: dict[str, type[BaseModel]] = {}
    todo: list[type[BaseModel]] = [StackConfig]
    while todo:
        model = todo.pop()
        if model.__name__ in found:
            continue
        found[model.__name__] = model
        for info in model.model_fields.values():
            todo += _models_in(info.annotation)
    return found


def undocumented() -> list[str]:
    """`Model.field` for every field of the stack config with no description."""
    return sorted(f"{name}.{field}" for name, model in _all_models().items() for field in model.model_fields
                  if not field_description(model, field))


# --- the schema ----------------------------------------------------------------------------------------------

def _strip_titles(node: Any, top: bool = True) -> None:
    """Pydantic titles each property with its capitalised name ("Egressclasslabel"): noise in an editor."""
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict):
            for prop in props.values():
                if isinstance(prop, dict):
                    prop.pop("title", None)
        for value in node.values():
            _strip_titles(value, False)
    elif isinstance(node, list):
        for value in node:
            _strip_titles(value, False)


def _allow_name_shorthand(node: Any) -> None:
    """`dependsOn: [cilium]` is shorthand for `[{name: cilium}]` (model/config/flux.py _as_refs, a BeforeValidator
    the generated schema cannot see): accept a bare name wherever a DependsOnRef is."""
    from model.config import DNS1123_LABEL

    if isinstance(node, dict):
        if node.get("items") == {"$ref": "#/$defs/DependsOnRef"}:
            node["items"] = {"anyOf": [{"$ref": "#/$defs/DependsOnRef"},
                                       {"type": "string", "pattern": DNS1123_LABEL,
                                        "description": "shorthand for {name: <this>}"}]}
        for value in node.values():
            _allow_name_shorthand(value)
    elif isinstance(node, list):
        for value in node:
            _allow_name_shorthand(value)


# Model validators the generated schema cannot see, restated for editors where JSON Schema can say them (each is
# held to the fixtures of tests/fixtures/config by tests/gitops/test_stack_schema.py). What stays in the models only:
# rules across sections, the export's line-length bound, the plugin's flag table, '.'/'..' in paths, unique names.
def _adopted_or_written(export_only: tuple[str, ...], written: tuple[str, ...]) -> dict[str, Any]:
    adopted = {"properties": {"helmRelease": {"type": "object"}}, "required": ["helmRelease"]}
    return {"if": adopted,
            "then": {"required": ["deliveredBy"],
                     "properties": {"deliveredBy": {"const": "repository"}, **{k: False for k in export_only}}},
            "else": {"required": list(written), "properties": {"workload": {"type": "null"}}}}


MODEL_RULES: dict[str, dict[str, Any]] = {
    "ClusterConfig": {"properties": {"nodes": {"uniqueItems": True}}},
    "KubernetesConfig": {
        "if": {"properties": {"mode": {"const": "cluster"}}, "required": ["mode"]},
        "then": {"required": ["context", "fluxManagesCluster"],
                 "properties": {"context": {"type": "string", "minLength": 1}, "fluxManagesCluster": {"const": False}}},
        "else": {"properties": {"context": {"enum": [None, ""]}}},
    },
    "IntelGpuPluginConfig": {
        "if": {"properties": {"sharedDevNum": {"minimum": 2}}, "required": ["sharedDevNum"]},
        "then": {"required": ["sharedDevNumReason"], "properties": {"sharedDevNumReason": {"pattern": "\\S"}}},
    },
    "TierConfig": {
        "if": {"properties": {"declaredBy": {"const": "repository"}}, "required": ["declaredBy"]},
        "then": {"properties": {k: {"type": "null"} for k in ("path", "decryption", "targetNamespace", "retryInterval")}
                 | {"healthChecks": {"maxItems": 0}}},
        "else": {"required": ["path"], "properties": {"path": {"type": "string"}}},
    },
    "DeliveryConfig": {"oneOf": [{"required": ["tier"], "properties": {"tier": {"type": "string"}}},
                                 {"required": ["dependsOn"], "properties": {"dependsOn": {"type": "array"}}}]},
    "GpuHardwareConfig": {
        "if": {"not": {"properties": {"gpu": {"const": "intel-quicksync"}}, "required": ["gpu"]}},
        "then": {"properties": {"intelGpuAccess": {"const": "auto"}}},
    },
    # An app is written by the export (its keys required) or adopted from the repository's HelmRelease (the keys of
    # what the export writes refused, deliveredBy: repository required): model/config/apps.py.
    "PlexConfig": {"properties": {"imageTag": {"not": {"const": "latest"}}},
                   **_adopted_or_written(EXPORT_ONLY_PLEX_KEYS, PLEX_WRITTEN_KEYS)},
    "GpuAppConfig": {"dependentRequired": {"runAsGroup": ["runAsUser"]},
                     **_adopted_or_written(EXPORT_ONLY_APP_KEYS, APP_WRITTEN_KEYS)},
    "GpuConfig": {
        "if": {"properties": {"route": {"const": "dra"}}, "required": ["route"]},
        "then": {"required": ["dra"], "properties": {"dra": {
            "if": {"properties": {"deliveredBy": {"const": "repository"}}, "required": ["deliveredBy"]},
            "else": {"required": ["image", "imageDigest"]}}}},
    },
    "DraDriverConfig": {
        "if": {"properties": {"deliveredBy": {"const": "repository"}}, "required": ["deliveredBy"]},
        "then": {"required": ["kustomization"], "properties": {"kustomization": {"type": "object"},
                                                               "image": {"type": "null"},
                                                               "imageDigest": {"type": "null"}}},
        "else": {"properties": {"kustomization": {"type": "null"}}},
    },
}


def _add_rules(defs: dict[str, Any]) -> None:
    for name, rule in MODEL_RULES.items():
        if name not in defs:
            raise KeyError(f"gitops/stack_schema.py: MODEL_RULES: {name}: no such model in model/config/; "
                           f"hint: update MODEL_RULES to the models")
        definition = defs[name]
        for field, extra in rule.get("properties", {}).items():
            definition["properties"][field].update(extra)
        conditional = {k: v for k, v in rule.items() if k != "properties"}
        if conditional:
            definition.setdefault("allOf", []).append(conditional)


def _key_patterns(defs: dict[str, Any], models: dict[str, type[BaseModel]]) -> None:
    """A mapping whose keys are constrained (`clusterVars: dict[FluxVarName, …]`): pydantic's schema leaves the keys
    free; `propertyNames` says what they must be."""
    from pydantic import TypeAdapter

    for name, model in models.items():
        for field, info in model.model_fields.items():
            annotation = info.annotation
            if typing.get_origin(annotation) is not dict:
                continue
            key_type = typing.get_args(annotation)[0]
            key_schema = TypeAdapter(key_type).json_schema()
            if key_schema.get("pattern") and name in defs:
                defs[name]["properties"][field]["propertyNames"] = {"pattern": key_schema["pattern"]}


def stack_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a `Pulumi.<stack>.yaml` of this project."""
    from model.config import PROJECT, StackConfig

    base = StackConfig.model_json_schema(mode="validation")
    defs = base.pop("$defs", {})
    models = _all_models()
    for name, definition in defs.items():
        model = models.get(name)
        if model is None:
            continue
        if definition.get("description"):
            definition["description"] = _clean(definition["description"])
        for field, prop in definition.get("properties", {}).items():
            text = field_description(model, field)
            if text:
                prop["description"] = text
    config_properties: dict[str, Any] = {}
    for field, prop in base["properties"].items():
        text = field_description(StackConfig, field)
        refs = [choice for choice in prop.get("anyOf", []) if choice != {"type": "null"}]
        if len(refs) == 1 and len(prop["anyOf"]) == 2:  # an optional section (plex): absent, never `null`, so an
            prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **refs[0]}  # editor names its unknown keys
        config_properties[f"{PROJECT}:{field}"] = {**({"description": text} if text else {}), **prop}
    _key_patterns(defs, models)
    _add_rules(defs)
    _strip_titles(defs)
    for prop in config_properties.values():
        prop.pop("title", None)
    _allow_name_shorthand(defs)
    namespaces = "|".join(re.escape(ns) for ns in OTHER_CONFIG_NAMESPACES)
    return {
        "$schema": DRAFT,
        "title": f"Pulumi.<stack>.yaml of {PROJECT}",
        "description": (f"A stack file of the {PROJECT} Pulumi project. Generated by `make schema` from "
                        f"model/config/; do not edit. What a schema cannot say (cross-field rules, line "
                        f"lengths of exported values) the program still refuses, one line each."),
        "type": "object",
        "properties": {
            "config": {
                "description": (f"The stack's configuration: the project's keys as `{PROJECT}:<section>`, and "
                                f"the {', '.join(OTHER_CONFIG_NAMESPACES)} namespaces."),
                "type": "object",
                "properties": config_properties,
                "required": [f"{PROJECT}:{f}" for f in base.get("required", [])],
                "patternProperties": {f"^({namespaces}):": {}},
                "additionalProperties": False,
            },
            **{key: {"description": _STACK_FILE_DOCS[key], **({} if key == "environment" else
                                                                        {"type": "string"})}
               for key in STACK_FILE_KEYS if key != "config"},
        },
        "additionalProperties": False,
        "$defs": defs,
    }


def schema_text() -> str:
    return json.dumps(stack_schema(), indent=2, ensure_ascii=False) + "\n"


# --- the config reference -------------------------------------------------------------------------------------

def _type_text(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "anyOf" in prop:
        kinds = [_type_text(p, defs) for p in prop["anyOf"] if p.get("type") != "null"]
        optional = any(p.get("type") == "null" for p in prop["anyOf"])
        return " or ".join(kinds) + (" (optional)" if optional else "")
    if "$ref" in prop:
        return "mapping"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" if not isinstance(v, str) else f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        item = prop.get("items", {})
        return f"list of {_type_text(item, defs)}" if item else "list"
    if kind == "object":
        values = prop.get("additionalProperties")
        return f"mapping of {_type_text(values, defs)}" if isinstance(values, dict) and values else "mapping"
    if kind == "string" and prop.get("pattern"):
        from model.config import PATTERN_MEANING as _PATTERN_MEANING

        meaning = _PATTERN_MEANING.get(prop["pattern"], "")
        return f"string: {meaning.split(':')[0]}" if meaning else "string (pattern)"
    if kind == "integer":
        low, high = prop.get("minimum"), prop.get("maximum")
        return f"integer {low}–{high}" if low is not None and high is not None else "integer"
    return str(kind)


def _default_text(model: type[BaseModel], field: str) -> str:
    info = model.model_fields[field]
    if info.is_required():
        return "**required**"
    default = info.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        default = default.model_dump(mode="json", exclude_none=True)
    text = json.dumps(default, ensure_ascii=False, default=str)
    return f"`{text}`" if len(text) <= 40 else "see the section"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_rows() -> list[tuple[str, str, str, str]]:
    """(key, type, default, description) for every key of the stack config, depth first."""
    from model.config import PROJECT, StackConfig

    schema = stack_schema()
    defs = schema["$defs"]
    rows: list[tuple[str, str, str, str]] = []

    def walk(model: type[BaseModel], properties: dict[str, Any], prefix: str) -> None:
        for field in model.model_fields:
            prop = properties.get(field, {})
            key = f"{prefix}{field}"
            rows.append((f"`{key}`", _type_text(prop, defs), _default_text(model, field),
                         _cell(field_description(model, field))))
            annotation = model.model_fields[field].annotation
            held = _models_in(annotation)
            if held:
                inner = held[0]
                walk(inner, defs.get(inner.__name__, {}).get("properties", {}),
                     f"{key}{'[]' if _is_list(annotation) else ''}.")

    config = schema["properties"]["config"]["properties"]
    walk(StackConfig, {k.split(":", 1)[1]: v for k, v in config.items()}, f"{PROJECT}:")
    return rows


def config_reference() -> str:
    """docs/config.md, whole."""
    lines = [
        "<!-- Generated by `make schema` from model/config/ (gitops/stack_schema.py); do not edit by hand. -->",
        "# Stack config: every key",
        "",
        "Every key of `Pulumi.<stack>.yaml` under `config:`, its type, default and meaning, from the models that "
        "also give `schemas/stack/stack.schema.json` (which editors use to complete and check a stack file). A "
        "mistake fails before any resource is declared, one line each. Back to the "
        "[README](../README.md#every-key).",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {' | '.join(row)} |" for row in reference_rows()]
    return "\n".join(lines) + "\n"


def plugin_flags_reference() -> str:
    """docs/plugin-flags.md, whole: every flag the pinned plugin registers, allowed or refused in
    intelGpuPlugin.extraArgs, with the reason."""
    lines = [
        "<!-- Generated by `make schema` from model/plugin_flags.py (gitops/stack_schema.py); do not edit by hand. -->",
        "# The plugin's flags",
        "",
        "Every flag the pinned plugin registers (its own and klog's), and whether `intelGpuPlugin.extraArgs` may set "
        "it, with the reason. How the table is refreshed on a tag bump: [plugin.md](plugin.md). Back to the "
        "[README](../README.md).",
        "",
    ]
    return "\n".join(lines) + flags_table_markdown()


# --- the command ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.stack_schema", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is not current")
    args = parser.parse_args(argv)
    wanted = {SCHEMA_PATH: schema_text(), CONFIG_REFERENCE: config_reference(),
              PLUGIN_FLAGS_REFERENCE: plugin_flags_reference()}
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)}; run `make schema`")
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    missing = undocumented()
    if missing:
        print(f"{len(missing)} fields have no description (add a comment above each in model/config/): "
              f"{', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
