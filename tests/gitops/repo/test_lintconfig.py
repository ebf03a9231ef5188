"""gitops/repo/lintconfig.py: the repository's own yamllint configuration, found where its CI names it, and the
export's files judged by it. The repository is a dict of files; nothing is read from the disk."""

from __future__ import annotations

import posixpath

import pytest

from gitops.repo.lintconfig import Lint, LintConfigError, find_config

SCHEMA_LINE = b"# yaml-language-server: $schema=https://kubernetes-schemas.example.org/kustomize.toolkit.fluxcd.io/" \
              b"kustomization_v1.json\n"


def repository(files: dict[str, bytes]):
    """`read` and `listdir` over a repository held as {path: bytes}."""

    def listdir(folder: str) -> list[str]:
        return sorted({rel[len(folder) + 1:].split("/")[0] for rel in files if rel.startswith(folder + "/")})

    return files.get, listdir


def found(files: dict[str, bytes], notes: list[str] | None = None) -> str | None:
    read, listdir = repository(files)
    result = find_config(read, listdir, notes)
    return result[0] if result else None


CONFIG = b"extends: default\n"


@pytest.mark.parametrize("files,where", [
    ({".yamllint": CONFIG}, ".yamllint"),
    ({".yamllint.yaml": CONFIG}, ".yamllint.yaml"),
    ({".yamllint.yml": CONFIG}, ".yamllint.yml"),
    ({".github/workflows/lint.yml": b"jobs:\n  lint:\n    steps:\n      - run: yamllint -c ci/lint.yaml .\n",
      "ci/lint.yaml": CONFIG}, "ci/lint.yaml"),
    ({".github/workflows/lint.yaml": b"      - run: yamllint --strict --config-file .config/yl.yml k8s\n",
      ".config/yl.yml": CONFIG}, ".config/yl.yml"),
    ({".gitea/workflows/ci.yaml": b"run: yamllint --config-file=./lint/y.yaml .\n", "lint/y.yaml": CONFIG},
     "lint/y.yaml"),
    ({".forgejo/workflows/check": b"run: yamllint -c 'quoted.yaml' .\n", "quoted.yaml": CONFIG}, "quoted.yaml"),
    ({"ci/lint.sh": b"#!/bin/sh\nset -e\nyamllint -s -c \"ci/y.yaml\" kubernetes\n", "ci/y.yaml": CONFIG},
     "ci/y.yaml"),
    ({"Makefile": b"lint:\n\tyamllint -c hack/yamllint.yaml .\n", "hack/yamllint.yaml": CONFIG},
     "hack/yamllint.yaml"),
    ({".pre-commit-config.yaml": b"repos:\n  - repo: https://github.com/adrienverge/yamllint\n    rev: v1.35.1\n"
      b"    hooks:\n      - id: yamllint\n        args: [-c, .yamllint-ci.yaml]\n", ".yamllint-ci.yaml": CONFIG},
     ".yamllint-ci.yaml"),
    ({".pre-commit-config.yaml": b"repos:\n- hooks:\n  - id: yamllint\n    args: ['--config-file=lint.yaml']\n",
      "lint.yaml": CONFIG}, "lint.yaml"),
])
def test_the_configuration_is_found_at_the_root_or_where_a_ci_script_names_it(files, where):
    assert found(files) == where


def test_a_repository_without_one_has_none():
    assert found({}) is None
    assert found({".github/workflows/ci.yml": b"run: yamllint .\n", "Makefile": b"all:\n\techo\n"}) is None


def test_the_root_files_come_first_then_the_ci_places_in_the_documented_order():
    everything = {
        ".yamllint.yml": CONFIG, ".yamllint.yaml": CONFIG, ".yamllint": CONFIG,
        ".github/workflows/b.yml": b"yamllint -c gh-b.yaml .\n", ".github/workflows/a.yml": b"yamllint -c gh-a.yaml\n",
        ".gitea/workflows/ci.yml": b"yamllint -c gitea.yaml\n", ".forgejo/workflows/ci": b"yamllint -c forgejo.yaml\n",
        "ci/lint.sh": b"yamllint -c ci.yaml\n", "Makefile": b"\tyamllint -c make.yaml\n",
        ".pre-commit-config.yaml": b"repos:\n- hooks:\n  - id: yamllint\n    args: [-c, pre-commit.yaml]\n",
        **{name: CONFIG for name in ("gh-a.yaml", "gh-b.yaml", "gitea.yaml", "forgejo.yaml", "ci.yaml", "make.yaml",
                                    "pre-commit.yaml")},
    }
    order = []
    while (where := found(everything)) is not None:
        order.append(where)
        del everything[where]
    assert order == [".yamllint", ".yamllint.yaml", ".yamllint.yml", "gh-a.yaml", "gh-b.yaml", "gitea.yaml",
                     "forgejo.yaml", "ci.yaml", "make.yaml", "pre-commit.yaml"]


def test_only_workflow_files_and_shell_scripts_are_read_in_those_folders():
    files = {".github/workflows/notes.md": b"yamllint -c a.yaml\n", "ci/lint.py": b"yamllint -c a.yaml\n",
             "a.yaml": CONFIG}
    assert found(files) is None


@pytest.mark.parametrize("named,why", [
    ("/etc/yamllint.yaml", "an absolute path"),
    ("../outside.yaml", "outside the repository"),
    ("a/../../outside.yaml", "outside the repository"),
    ("$(CONFIG)", "not a literal path"),
    ("${{ github.workspace }}/.yamllint.yaml", "not a literal path"),
])
def test_a_named_path_outside_the_repository_or_not_a_literal_one_is_ignored_with_the_reason(named, why):
    notes: list[str] = []
    files = {"ci/lint.sh": f"yamllint -c {named} .\nyamllint -c ok.yaml .\n".encode(), "ok.yaml": CONFIG,
             posixpath.normpath(named.lstrip("/")): CONFIG}
    assert found(files, notes) == "ok.yaml"
    assert len(notes) == 1 and notes[0].startswith("ci/lint.sh: names the yamllint configuration ")
    assert notes[0].endswith(f": {why}; ignored")


def test_a_named_file_that_is_not_there_is_passed_over_with_a_note():
    notes: list[str] = []
    assert found({"Makefile": b"\tyamllint -c missing.yaml .\n"}, notes) is None
    assert notes == ["Makefile: names the yamllint configuration missing.yaml, which is not in the repository; "
                     "ignored"]


# --- what the configuration asks --------------------------------------------------------------------------------------


def test_extends_default_gives_80_columns_and_the_indentation_setting():
    lint = Lint.from_config(".yamllint", b"extends: default\n")
    assert (lint.line_length_max, lint.indent_sequences) == (80, True)
    lint = Lint.from_config(".yamllint", b"extends: default\nrules:\n  indentation: {indent-sequences: consistent}\n")
    assert lint.indent_sequences == "consistent"


def test_a_disabled_rule_asks_nothing():
    lint = Lint.from_config(".yamllint", b"extends: default\nrules:\n  line-length: disable\n  indentation: disable\n")
    assert (lint.line_length_max, lint.indent_sequences) == (None, "whatever")
    assert lint.problems("a.yaml", b"---\n" + SCHEMA_LINE + b"a: 1\n") == []


def test_a_too_long_schema_comment_line_is_a_line_length_problem():
    lint = Lint.from_config(".yamllint", b"extends: default\n")
    assert lint.problems("apps/ks.yaml", b"---\n" + SCHEMA_LINE + b"a: 1\n") == [
        "apps/ks.yaml:2:81: line too long (120 > 80 characters) (line-length)"]


def test_warnings_are_not_problems_and_syntax_errors_are():
    lint = Lint.from_config(".yamllint", b"extends: default\n")  # document-start is a warning there
    assert lint.problems("a.yaml", b"a: 1\n") == []
    assert lint.problems("a.yaml", b"a: [\n") == [
        "a.yaml:2:1: syntax error: expected the node content, but found '<stream end>' (syntax)"]


def test_a_config_extending_a_repository_file_and_ignoring_from_a_file_is_read_through_the_repository():
    read, _ = repository({"base.yaml": b"extends: relaxed\nrules:\n  line-length: {max: 100}\n",
                          ".yamllintignore": b"generated/\n"})
    lint = Lint.from_config(".yamllint", b"extends: base.yaml\nignore-from-file: .yamllintignore\n"
                                         b"rules:\n  line-length: {level: error}\n", read)
    assert lint.line_length_max == 100
    long = b"a: " + b" ".join([b"word"] * 30) + b"\n"
    assert lint.problems("generated/a.yaml", long) == []
    assert lint.problems("b.yaml", long) == ["b.yaml:1:101: line too long (152 > 100 characters) (line-length)"]


YAMLLINT_DOCS = "https://yamllint.readthedocs.io/en/stable/configuration.html"


@pytest.mark.parametrize("config,path,problem", [
    (b"rules:\n  no-such-rule: enable\n", "rules.no-such-rule", 'no such rule: "no-such-rule"'),
    (b"rules:\n  line-length: {max: eighty}\n", "rules.line-length", 'option "max" of "line-length" should be int'),
    (b"rules: [line-length]\n", "rules", "is not a mapping"),
    (b"- extends\n", "(file)", "not a mapping of yamllint settings"),
    (b"rules: {a: [\n", "line 1", "not valid YAML: did not find expected node content"),
    (b"extends: /etc/yamllint.yaml\n", "extends", "/etc/yamllint.yaml: an absolute path"),
    (b"extends: ../shared.yaml\n", "extends", "../shared.yaml: outside the repository"),
    (b"extends: base.yaml\n", "extends", "base.yaml is not in the repository"),
    (b"ignore-from-file: /etc/passwd\n", "ignore-from-file", "/etc/passwd: an absolute path"),
    (b"base: &b {}\nrules: *b\n", "line 1", "an anchor &b: YAML anchors and aliases are refused (a few hundred bytes "
     "of aliases can expand into gigabytes)"),
    (b"\xff\n", "(file)", "not UTF-8 text (byte 0xff at offset 0)"),
])
def test_a_configuration_yamllint_would_not_take_is_refused_in_one_line(config, path, problem):
    with pytest.raises(LintConfigError) as refused:
        Lint.from_config(".yamllint", config)
    assert (refused.value.path, refused.value.problem) == (path, problem)
    assert refused.value.line(".yamllint") == (
        f".yamllint: {path}: {problem}; hint: fix .yamllint (see {YAMLLINT_DOCS})")


def test_a_loop_of_extends_is_refused_not_followed_forever():
    read, _ = repository({"a.yaml": b"extends: b.yaml\n", "b.yaml": b"extends: a.yaml\n"})
    with pytest.raises(LintConfigError) as refused:
        Lint.from_config("a.yaml", read("a.yaml") or b"", read)
    assert refused.value.line("a.yaml") == (
        f"a.yaml: extends: more than 8 files extend one another; hint: fix a.yaml (see {YAMLLINT_DOCS})")
