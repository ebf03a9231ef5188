"""Pulumi.yaml is what the CLI expects, and the vendored reference data is what its SOURCE notes say."""

from __future__ import annotations

import hashlib
import json

import jsonschema
from ruamel.yaml import YAML

from conftest import ROOT


def test_pulumi_yaml_validates_against_the_pulumi_project_schema():
    schema = json.loads((ROOT / "schemas" / "pulumi" / "project.schema.json").read_text())
    project = YAML(typ="safe", pure=True).load((ROOT / "Pulumi.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)

    def errors(doc) -> list[str]:
        return sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(doc))

    assert errors(project) == []
    # the schema is the real one: it refuses a project without a name, or with a misspelt runtime option key
    assert errors({k: v for k, v in project.items() if k != "name"}) == ["$: 'name' is a required property"]
    assert errors({**project, "runtime": {**project["runtime"], "optoins": {}}}) != []


def test_pulumi_yaml_uses_pip_in_dot_venv_and_disables_the_default_kubernetes_provider():
    project = YAML(typ="safe", pure=True).load((ROOT / "Pulumi.yaml").read_text())
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    assert project["config"]["pulumi:disable-default-providers"] == ["kubernetes"]


def test_vendored_schemas_match_the_hashes_in_their_source_notes():
    for folder in ("flux", "pulumi"):
        note = (ROOT / "schemas" / folder / "SOURCE.md").read_text()
        for path in (ROOT / "schemas" / folder).glob("*.json"):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            assert digest in note, f"{path.name}: sha256 {digest} not recorded in schemas/{folder}/SOURCE.md"


def test_requirements_pin_every_package_exactly():
    lines = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert lines and all("==" in line for line in lines), [line for line in lines if "==" not in line]
    assert not any(line.lower().startswith(("pulumi-policy", "pulumi_policy")) for line in lines)
