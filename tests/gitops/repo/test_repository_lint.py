"""gitops/repo/repository_lint.py: every YAML file the run writes, judged by the repository's own yamllint after the
reports; what the export would add is refused in one line per problem, a hand-written file's older problems are not
the export's, and a repository without a configuration is not judged. Small hand-made trees in a temporary OUT."""

from __future__ import annotations

from pathlib import Path

from conftest import lab_tree
from gitops.repo.repository_lint import lint_problems

STRICT = b"extends: default\nrules:\n  line-length: {max: 40}\n  document-start: disable\n"
LONG = b"data:\n  key: " + b"x" * 60 + b"\n"
SHORT = b"data:\n  key: value\n"


def repository(tmp_path: Path, files: dict[str, bytes]) -> Path:
    out = tmp_path / "out"
    for rel, content in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(content)
    out.mkdir(exist_ok=True)
    return out


def test_a_repository_without_a_yamllint_configuration_judges_nothing(tmp_path):
    out = repository(tmp_path, {})
    assert lint_problems([lab_tree({"apps/lab/long.yaml": LONG})], out) == []


def test_a_line_the_repository_s_lint_refuses_is_one_line_naming_the_file_the_rule_and_the_configuration(tmp_path):
    out = repository(tmp_path, {".yamllint": STRICT})
    problems = lint_problems([lab_tree({"apps/lab/long.yaml": LONG, "apps/lab/short.yaml": SHORT})], out)
    assert problems == [f"{out}/apps/lab/long.yaml: line too long (67 > 40 characters) (line-length), by the "
                        "repository's own .yamllint; hint: the export must write what the repository's lint accepts: "
                        "report it, and set gitops.sequenceIndent to the repository's style meanwhile"]


def test_only_yaml_files_are_judged_and_a_file_two_trees_write_is_judged_once(tmp_path):
    out = repository(tmp_path, {".yamllint": STRICT})
    files = {"apps/lab/long.yaml": LONG, "apps/lab/NOTES.md": b"x" * 80 + b"\n", "apps/lab/long.yml": LONG}
    problems = lint_problems([lab_tree(files), lab_tree(files)], out)
    assert [p.split(":")[0] for p in problems] == [f"{out}/apps/lab/long.yaml", f"{out}/apps/lab/long.yml"]


def test_a_hand_written_file_keeps_its_older_problems_but_may_not_gain_one(tmp_path):
    edited = "clusters/lab/cluster-vars.yaml"
    out = repository(tmp_path, {".yamllint": STRICT, edited: LONG})
    moved = b"data:\n  other: value\n" + LONG.removeprefix(b"data:\n")  # the long line one down: the same problem
    keeps = lab_tree({edited: moved})
    keeps.edited.add(edited)
    assert lint_problems([keeps], out) == []
    gains = lab_tree({edited: LONG + b"more: " + b"y" * 60 + b"\n"})
    gains.edited.add(edited)
    assert [p.split(": ", 1)[1].split(",")[0] for p in lint_problems([gains], out)] == [
        "line too long (66 > 40 characters) (line-length)"]
    owned = lab_tree({edited: LONG})  # the same bytes in a file the export owns: its problem is the export's
    assert len(lint_problems([owned], out)) == 1


def test_a_configuration_the_lint_cannot_use_is_the_refusal_itself(tmp_path):
    out = repository(tmp_path, {".yamllint": b"rules: [not, a, mapping]\n"})
    problems = lint_problems([lab_tree({"apps/lab/short.yaml": SHORT})], out)
    assert problems == [f"{out}/.yamllint: rules: is not a mapping; hint: fix .yamllint (see "
                        "https://yamllint.readthedocs.io/en/stable/configuration.html)"]
