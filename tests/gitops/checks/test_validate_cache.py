"""gitops/checks/validate.py's cache of objects that passed their schemas (the `validation-cache` optimization): an
object that passed before is not checked again, a changed or refused one every time, nothing is kept with the
optimization off, a cache of garbage only means checking again, and the cache lives in the project's build/cache."""

from __future__ import annotations

import re

import pytest

from builders import capture_tree
from conftest import ROOT
from gitops.checks import validate
from gitops.engine import optimizations


@pytest.fixture
def passed_file(tmp_path, monkeypatch):
    """The cache of passed objects in a folder of this test's own (the project's build/cache stays untouched)."""
    path = tmp_path / "cache" / "schema-passed.txt"
    monkeypatch.setattr(validate, "_passed_path", lambda: path)
    monkeypatch.setenv(optimizations.ENV, "")
    return path


def schema_checks(monkeypatch) -> list[str]:
    checked: list[str] = []
    real = validate.check_schema

    def spy(obj):
        checked.append(obj.path)
        return real(obj)

    monkeypatch.setattr(validate, "check_schema", spy)
    return checked


def test_an_object_that_passed_before_is_not_checked_against_its_schema_again(passed_file, monkeypatch, captures):
    tree = capture_tree(captures["dev"])
    checked = schema_checks(monkeypatch)
    validate.validate_tree(tree, lint=False)
    assert len(checked) == len(tree.objects)
    assert len(passed_file.read_text().split()) == len({validate._content_key(o.manifest) for o in tree.objects})
    checked.clear()
    validate.validate_tree(tree, lint=False)
    assert checked == []


def test_a_changed_or_refused_object_is_checked_every_time(passed_file, monkeypatch, captures):
    tree = capture_tree(captures["dev"])
    validate.validate_tree(tree, lint=False)
    deployment = next(o for o in tree.objects if o.manifest["kind"] == "Deployment")
    deployment.manifest["spec"]["replicas"] = "two"  # the schema wants an integer
    checked = schema_checks(monkeypatch)
    for _ in range(2):
        with pytest.raises(validate.ExportValidationError) as err:
            validate.validate_tree(tree, lint=False)
        (line,) = err.value.lines
        expected = (re.escape("components/dev/plex/deployment.plex.yaml (Deployment plex/plex): spec.replicas: ")
                    + ".+"  # the schema validator's wording
                    + re.escape(" (Kubernetes 1.36.0 strict schema); hint: the program generates this object: fix it "
                                "in its component (GpuApp plex, components/gpu_app.py), then run the export again"))
        assert re.fullmatch(expected, line), line
    assert checked == [deployment.path, deployment.path]


def test_without_the_validation_cache_every_object_is_checked_and_nothing_is_kept(passed_file, monkeypatch,
                                                                                    captures):
    tree = capture_tree(captures["dev"])
    monkeypatch.setenv(optimizations.ENV, "validation-cache")
    checked = schema_checks(monkeypatch)
    validate.validate_tree(tree, lint=False)
    validate.validate_tree(tree, lint=False)
    assert len(checked) == 2 * len(tree.objects) and not passed_file.exists()


def test_a_cache_file_of_garbage_only_means_checking_again(passed_file, monkeypatch, captures):
    tree = capture_tree(captures["dev"])
    passed_file.parent.mkdir(parents=True)
    passed_file.write_bytes(b"\xff\xfe not hashes\n" + b"z" * 64 + b"\n")
    checked = schema_checks(monkeypatch)
    validate.validate_tree(tree, lint=False)
    assert len(checked) == len(tree.objects)


def test_the_cache_is_named_by_the_schemas_and_the_checks_and_lives_in_the_project():
    path = validate._passed_path()
    assert path.parent == ROOT / "build" / "cache" and path.name.startswith("schema-passed-")
