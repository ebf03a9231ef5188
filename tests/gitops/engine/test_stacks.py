"""gitops/engine/stacks.py: the project's stack files as the engine reads them: a stack name checked before it names
any folder, a stack file that is missing or not YAML and a project file that is not a mapping refused in one line, and
the stacks an export must run with because they write into the same folders."""

from __future__ import annotations

import re

import pytest

from conftest import EXAMPLE, ROOT, STACKS, make_project, stack_text
from gitops.engine.stacks import (
    PULUMI_STACK_NAME_MAX,
    StackFileError,
    check_stack_name,
    max_stack_name_length,
    stack_name_problem,
    stacks_together,
)


def test_a_stack_name_is_pulumis_and_short_enough_for_the_header_line_naming_it():
    assert stack_name_problem("prod") is None and stack_name_problem("dev.eu-1_a") is None
    assert stack_name_problem("") == "empty; Pulumi needs a name"
    assert stack_name_problem("a/b") == ('"/" at position 1: Pulumi allows only letters, digits, \'-\', \'_\' and '
                                         "'.' in a stack name")
    assert stack_name_problem("prød") == ('"ø" at position 2: Pulumi allows only letters, digits, \'-\', \'_\' and '
                                          "'.' in a stack name")
    assert stack_name_problem(".x") == ("starts with '.': the export uses the name as a folder (clusters/<stack>, "
                                        "components/<stack>), where '.', '..' and hidden names would land elsewhere")
    assert stack_name_problem("x" * (PULUMI_STACK_NAME_MAX + 1)) == "101 characters: Pulumi allows at most 100"
    bound = max_stack_name_length()
    assert bound < PULUMI_STACK_NAME_MAX and stack_name_problem("s" * bound) is None
    assert stack_name_problem("s" * (bound + 1)) == (
        f"{bound + 1} characters: at most {bound}, so that the header line naming it in every exported file stays "
        "within yamllint's line length")


def test_a_bad_stack_name_is_one_line_showing_the_name_escaped_with_the_hint():
    check_stack_name("dev")
    with pytest.raises(StackFileError) as caught:
        check_stack_name("prod\n")
    assert caught.value.lines == [
        '--stack "prod\\n": stack name: "\\n" at position 4: Pulumi allows only letters, digits, \'-\', \'_\' and '
        "'.' in a stack name; hint: name the stack file Pulumi.<stack>.yaml with a short name such as dev or prod, and "
        "pass that name"]


def test_stacks_writing_into_one_folder_are_exported_together(tmp_path):
    shared = "  gpu-platform:gitops:\n    componentsDir: components/shared\n"
    project = make_project(tmp_path / "p", {"dev": stack_text("dev").rstrip("\n") + "\n" + shared,
                                            "prod": stack_text("prod").rstrip("\n") + "\n" + shared,
                                            "lab": stack_text("dev")})
    assert stacks_together(["prod"], project) == ["prod", "dev"]
    assert stacks_together(["lab"], project) == ["lab"]  # lab writes into components/lab only
    assert stacks_together(["dev", "prod"], project) == ["dev", "prod"]


# --- the stack and project files, through the export -----------------------------------------------------------------

def test_an_unknown_stack_names_the_stacks_that_exist(tmp_path, capsys):
    from gitops.export import main as export_main
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "staging", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: Pulumi.staging.yaml: no such stack file; stacks: {', '.join(STACKS)}; "
        'hint: make new-stack STACK=staging NODES="<node> ..." creates it',
        "nothing was written",
    ]


def test_a_stack_file_that_is_not_yaml_is_refused_naming_file_and_line(tmp_path, capsys):
    from gitops.export import main as export_main
    project = make_project(tmp_path / "p", {"broken": "config:\n  gpu-platform:cluster: [unclosed\n"})
    assert export_main(["--stack", "broken", "--out", str(tmp_path / "o"), "--project-dir", str(project)]) == 2
    first, *rest = capsys.readouterr().err.splitlines()
    assert re.fullmatch(  # the parser's own wording in the middle
        re.escape("error: Pulumi.broken.yaml: line 2: not valid YAML: ") + ".+"
        + re.escape("; hint: fix the line shown (YAML: indent with spaces, quote values that hold ': ' or start "
                    "with a symbol)"), first), first
    assert rest == ["nothing was written"]
    assert not (tmp_path / "o").exists()


def test_an_unclosed_quote_in_a_stack_file_is_refused_on_the_line_that_opens_it_not_past_the_end(tmp_path, capsys):
    from gitops.export import main as export_main
    lines = (ROOT / "Pulumi.prod.yaml").read_text().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if line.strip().startswith("timezone:")) + 1
    assert 10 < number < len(lines) - 10  # a middle line: the parser gives up only at the end of the file
    key, value = lines[number - 1].split(": ", 1)
    lines[number - 1] = f'{key}: "{value}'
    project = make_project(tmp_path / "p", {"prod": "".join(lines)})
    assert export_main(["--stack", "prod", "--out", str(tmp_path / "o"), "--project-dir", str(project)]) == 2
    first, *rest = capsys.readouterr().err.splitlines()
    assert first.startswith(f"error: Pulumi.prod.yaml: line {number}: not valid YAML: "), first
    assert first.endswith("; hint: fix the line shown (YAML: indent with spaces, quote values that hold ': ' or "
                          "start with a symbol)"), first
    assert rest == ["nothing was written"]


def test_a_project_file_that_is_not_a_mapping_is_refused(tmp_path, capsys):
    from gitops.export import main as export_main
    project = make_project(tmp_path / "p", {"dev": stack_text("dev")})
    (project / "Pulumi.yaml").write_text("- just\n- a list\n")
    assert export_main(["--stack", "dev", "--out", str(tmp_path / "o"), "--project-dir", str(project)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: Pulumi.yaml: (root): must be a mapping with name, runtime and config; hint: restore it from git",
        "nothing was written",
    ]
