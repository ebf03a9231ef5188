"""The stack file's JSON Schema and the config reference (docs/config.md) are what the models give (`make
schema`), every stack file names the schema and passes it, and schema and models judge the config fixtures alike
wherever the schema can express the rule."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, ROOT, STACKS, stack_project
from gitops.stack_schema import (
    CONFIG_REFERENCE,
    SCHEMA_PATH,
    config_reference,
    schema_text,
    undocumented,
)
from model.safe_yaml import load_yaml

VALID = sorted((FIXTURES / "config" / "valid").glob("*.yaml"))
INVALID = sorted((FIXTURES / "config" / "invalid").glob("*.yaml"))
# Invalid fixtures whose rule a JSON Schema of one file cannot state: the models refuse them, the schema lets them by.
MODEL_ONLY = {
    "cluster-var-too-long": "the export's line-length bound (YAML quoting decides the width)",
    "image-tag-too-long": "the export's line-length bound (YAML quoting decides the width)",
    "shared-dev-num-reason-too-long": "the export's line-length bound (YAML quoting decides the width)",
    "tier-path-too-long": "the export's line-length bound (YAML quoting decides the width)",
    "shared-dev-num-reason-two-lines": "one line as the YAML emitter writes it",
    "cni-tier-unknown": "a reference across list items (cniTier names one of the tiers)",
    "delivery-tier-unknown": "a reference across sections (plex.delivery.tier names a tier of flux.tiers)",
    "tier-declared-twice": "unique by one property of list items",
    "app-volume-name-twice": "unique by one property of list items",
    "entry-dir-escapes-repository": "'.' and '..' path parts, checked in code",
    "tier-path-escapes-repository": "'.' and '..' path parts, checked in code",
    "tier-path-into-exported-folder": "a comparison across sections (tier paths against the export's folders)",
    "health-management-arg": "the plugin's flag table (model/plugin_flags.py)",
    "shared-dev-num-in-extra-args": "the plugin's flag table (model/plugin_flags.py)",
    "unknown-plugin-flag": "the plugin's flag table (model/plugin_flags.py)",
    "xpumd-endpoint-arg": "the plugin's flag table (model/plugin_flags.py)",
    "digest-recorded-for-another-tag": "the digests recorded per tag in model/images.py",
}

# The first line of every Pulumi.<stack>.yaml (relative to the project root, where the stack files live).
SCHEMA_COMMENT = "# yaml-language-server: $schema=./schemas/stack/stack.schema.json"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def load(path: Path) -> dict:
    """As the engine reads a stack file (YAML 1.2 scalars: `yes` is a string, as for yaml-language-server)."""
    return load_yaml(path.read_text(encoding="utf-8"))


def test_the_committed_schema_is_what_the_models_give():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "schemas/stack/stack.schema.json is not what model/config/ gives; run `make schema`")


def test_the_config_reference_is_what_the_models_give_and_the_readme_links_it():
    assert CONFIG_REFERENCE.read_text(encoding="utf-8") == config_reference(), (
        "docs/config.md is stale; run `make schema`")
    assert "(docs/config.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


# The shipped stacks, the examples' and any `make new-stack` added: each names the schema relative to its folder.
STACK_FILES = sorted([*ROOT.glob("Pulumi.*.yaml"), *(ROOT / "examples").glob("*/Pulumi.*.yaml")])


@pytest.mark.parametrize("path", [p for p in STACK_FILES if p.name != "Pulumi.yaml"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_stack_file_names_the_schema_on_its_first_line_and_passes_it(validator, path):
    relative = os.path.relpath(SCHEMA_PATH, path.parent)
    expected = f"# yaml-language-server: $schema={relative if relative.startswith('..') else './' + relative}"
    assert path.read_text(encoding="utf-8").splitlines()[0] == expected
    errors = [e.message for e in validator.iter_errors(load(path))]
    assert not errors, f"{path.name}: {errors}"


@pytest.mark.parametrize("change", ["top-level key", "config namespace key", "section key", "tier key"])
def test_an_unknown_key_fails_the_schema(validator, change):
    doc = copy.deepcopy(load(stack_project(STACKS[0]) / f"Pulumi.{STACKS[0]}.yaml"))
    config = doc["config"]
    if change == "top-level key":
        doc["confg"] = {}
    elif change == "config namespace key":
        config["gpu-platform:plexx"] = {}
    elif change == "section key":
        config["gpu-platform:plex"]["imageTagg"] = "1.0"
    else:
        config["gpu-platform:flux"]["tiers"][0]["waits"] = True
    assert any("Additional properties" in e.message or "does not match any of the regexes" in e.message
               for e in validator.iter_errors(doc))


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_a_valid_fixture_passes_the_schema(validator, path):
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(load(path))]
    assert not errors, f"{path.name} is valid for the models, not for the schema: {errors}"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_an_invalid_fixture_fails_the_schema_where_a_schema_can_say_the_rule(validator, path):
    # The models refuse every invalid fixture (tests/model/test_config.py); the schema must too, where it can say
    # the rule.
    refused = any(True for _ in validator.iter_errors(load(path)))
    if path.stem in MODEL_ONLY:
        assert not refused, f"{path.name} is now refused by the schema: remove it from MODEL_ONLY"
    else:
        assert refused, (f"{path.name}: the models refuse it, the schema does not; state the rule in "
                         f"gitops/stack_schema.py MODEL_RULES (then `make schema`), or list it in MODEL_ONLY with why "
                         f"a schema cannot say it")


def test_every_field_has_a_default_or_is_required():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    sections = [schema["properties"]["config"], *schema["$defs"].values()]
    lacking = [f"{section.get('title', 'config')}.{name}" for section in sections
               for name, prop in section.get("properties", {}).items()
               if "default" not in prop and name not in section.get("required", [])]
    assert not lacking


def test_every_field_has_a_description():
    # From the models (a comment above the field, Field(description=...), or the docstring of the model it holds),
    # and in the committed schema, where editors show it.
    assert not undocumented(), "fields with no description (add a comment above each in model/config/)"
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    sections = {"config": schema["properties"]["config"], **schema["$defs"]}
    lacking = [f"{name}.{field}" for name, section in sections.items()
               for field, prop in section.get("properties", {}).items() if not prop.get("description")]
    assert not lacking
