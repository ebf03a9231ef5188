"""The speed levers (gitops/engine/levers.py): the same bytes with every lever on or off, each lever doing what it says,
and each falling back to the plain path when what it reaches into is not there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from builders import capture_tree
from conftest import COMPLETE_PROD_EVIDENCE, FIXTURES, ROOT, export, files_of, make_project, stack_text
from gitops.checks import validate
from gitops.engine import levers
from gitops.export import main as export_main
from gitops.repo import writer


def test_every_lever_on_or_off_writes_the_same_bytes(tmp_path, monkeypatch):
    # Both stacks into a Flux bootstrap repository (the walk and DELIVERY.md included), plus a stack whose GPU app
    # requests the device (evidence in place): every file compared byte for byte.
    project = make_project(tmp_path / "project", {"dev": stack_text("dev"), "prod": stack_text("prod")},
                           {"prod": COMPLETE_PROD_EVIDENCE})
    trees = {}
    for setting in ("", "all"):
        monkeypatch.setenv(levers.ENV, setting)
        out = tmp_path / f"out-{setting or 'on'}"
        shutil.copytree(FIXTURES / "repos" / "flux-bootstrap", out)
        assert export(out, "dev", "prod", project=project) == 0
        trees[setting] = files_of(out)
    assert trees[""] == trees["all"]
    assert "gpu.intel.com/i915" in trees[""]["components/prod/plex/deployment.plex.yaml"].decode()


def test_the_variable_turns_off_the_named_levers_or_all_of_them(monkeypatch):
    monkeypatch.setenv(levers.ENV, " syncfs ,validation-cache")
    assert levers.off() == {"syncfs", "validation-cache"} and not levers.on("syncfs") and levers.on("lazy-annotations")
    monkeypatch.setenv(levers.ENV, "all")
    assert levers.off() == set(levers.LEVERS)
    monkeypatch.delenv(levers.ENV)
    assert levers.off() == set() and all(levers.on(name) for name in levers.LEVERS)
    with pytest.raises(KeyError):
        levers.on("turbo")


def test_a_misspelt_lever_is_one_line_and_nothing_is_written(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(levers.ENV, "syncfs,synfcs")
    assert export_main(["--stack", "dev", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"error: {levers.ENV}: synfcs: no such lever") and "; hint: " in err[0]
    assert err[1:] == ["nothing was written"] and not (tmp_path / "out").exists()


# --- validation-cache ---------------------------------------------------------------------------------------------

@pytest.fixture
def passed_file(tmp_path, monkeypatch):
    """The cache of passed objects in a folder of this test's own (the project's build/cache stays untouched)."""
    path = tmp_path / "cache" / "schema-passed.txt"
    monkeypatch.setattr(validate, "_passed_path", lambda: path)
    monkeypatch.setenv(levers.ENV, "")
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
        assert any("spec.replicas" in line for line in err.value.lines)
    assert checked == [deployment.path, deployment.path]


def test_without_the_validation_cache_every_object_is_checked_and_nothing_is_kept(passed_file, monkeypatch,
                                                                                    captures):
    tree = capture_tree(captures["dev"])
    monkeypatch.setenv(levers.ENV, "validation-cache")
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


# --- syncfs -----------------------------------------------------------------------------------------------------

def flush_calls(monkeypatch) -> list[str]:
    """What the writer does to put bytes on disk and to commit, in order (spies; the real calls run)."""
    calls: list[str] = []
    real_fsync, real_syncfs, real_replace = os.fsync, writer._syncfs, os.replace

    def fsync(fd):
        calls.append("fsync")
        return real_fsync(fd)

    def syncfs(folder):
        calls.append("syncfs")
        return real_syncfs(folder)

    def replace(src, dst):
        calls.append(f"replace {os.path.basename(dst)}")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(writer, "_syncfs", syncfs)
    monkeypatch.setattr(os, "replace", replace)
    return calls


def test_with_syncfs_one_flush_precedes_the_commit_and_without_it_every_file_is_fsynced(tmp_path, monkeypatch):
    calls = flush_calls(monkeypatch)
    monkeypatch.setenv(levers.ENV, "")
    assert export(tmp_path / "on", "dev") == 0
    commit = calls.index("replace dev.journal")
    assert calls[:commit] == ["syncfs"]
    written = len(files_of(tmp_path / "on"))
    calls.clear()
    monkeypatch.setenv(levers.ENV, "syncfs")
    assert export(tmp_path / "off", "dev") == 0
    commit = calls.index("replace dev.journal")
    assert calls[:commit] == ["fsync"] * (written + 1)  # every staged file, then the journal
    assert files_of(tmp_path / "on") == files_of(tmp_path / "off")


def test_where_the_platform_has_no_syncfs_the_writer_fsyncs_every_file(tmp_path, monkeypatch):
    calls = flush_calls(monkeypatch)
    monkeypatch.setenv(levers.ENV, "")
    monkeypatch.setattr(writer, "_libc_syncfs", lambda: None)
    assert export(tmp_path / "out", "dev") == 0
    assert "syncfs" not in calls and calls.count("fsync") == len(files_of(tmp_path / "out")) + 1


# --- the import-time lever: lazy-annotations --------------------------------------------------

IMPORT_PROBE = """
import sys
import gitops, gitops.engine.levers  # a library import of the packages: plain imports
from gitops.engine import lazy_imports
print(lazy_imports._FINDER in sys.meta_path)
from gitops.export import main  # what `python -m gitops.export` imports, the program's SDK modules below
print(lazy_imports._FINDER in sys.meta_path)
import pulumi_kubernetes.core.v1._inputs as inputs
print(type(inputs.ContainerArgs.__init__.__annotations__["name"]).__name__)
"""


@pytest.mark.parametrize(("setting", "expected"), [
    ("", ["False", "True", "str"]),
    ("all", ["False", "True", "_UnionGenericAlias"]),
])
def test_only_the_entry_points_install_the_import_lever_which_postpones_annotations(setting, expected):
    # A fresh interpreter each: the import-time lever acts once per process.
    result = subprocess.run([sys.executable, "-c", IMPORT_PROBE], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, levers.ENV: setting})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == expected


def test_the_export_process_with_every_lever_off_writes_what_this_one_writes_with_every_lever_on(tmp_path):
    assert export(tmp_path / "on", "dev", "prod") == 0
    result = subprocess.run([sys.executable, "-m", "gitops.export", "--stack", "dev", "--stack", "prod", "--out",
                             str(tmp_path / "off"), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, levers.ENV: "all"})
    assert result.returncode == 0, result.stderr
    assert files_of(tmp_path / "off") == files_of(tmp_path / "on")


def test_a_postponed_annotations_cache_entry_for_another_source_is_compiled_again(tmp_path, monkeypatch):
    from gitops.engine import lazy_imports

    source = tmp_path / "pkg_mod.py"
    source.write_text("class A:\n    x: undefined_name_until_asked\n")
    monkeypatch.setattr(lazy_imports, "CACHE", tmp_path / "cache")
    loader = lazy_imports._PostponedAnnotationsLoader("pkg_mod", str(source))
    first = loader.get_code("pkg_mod")
    namespace: dict = {}
    exec(first, namespace)  # noqa: S102 (the code compiled above): the annotation is never evaluated
    assert namespace["A"].__annotations__ == {"x": "undefined_name_until_asked"}
    source.write_text("VALUE = 2\n")  # another size, another mtime: the cached code must not be used
    os.utime(source, ns=(1, 1))
    namespace = {}
    exec(loader.get_code("pkg_mod"), namespace)  # noqa: S102
    assert namespace["VALUE"] == 2
