"""The repository's own yamllint configuration, and the export's files judged with it, so that a file the export
writes or edits passes the checks the user's CI runs on it. Looked for at the root, first found wins: `.yamllint`,
`.yamllint.yaml`, `.yamllint.yml`; the file a CI script names with `-c`/`--config-file[=]` (.github, .gitea and
.forgejo workflows, ci/*.sh, Makefile, in that order); the yamllint hook's `args:` in .pre-commit-config.yaml. A named
path that is absolute, climbs out with `..`, holds a variable or is missing is ignored, the reason added to `notes`.
The configuration is untrusted: read under model/safe_yaml.py's rules, `extends:` and `ignore-from-file:` read from
the repository through `read`, only yamllint's own `default` and `relaxed` taken by name. `Lint.problems` holds
errors only, as yamllint without `--strict` fails on errors only (a `--strict` in a CI script is not followed).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig, YamlLintConfigError

from gitops.repo.out_folder import OwnershipError, read_regular
from model.safe_yaml import InputFileError, decode_text, escaped, load_yaml

ROOT_FILES = (".yamllint", ".yamllint.yaml", ".yamllint.yml")
# (folder, file name pattern) in the order they are searched, then the Makefile, then pre-commit's file.
CI_FOLDERS = (
    (".github/workflows", re.compile(r".*\.ya?ml")),
    (".gitea/workflows", re.compile(r".*\.ya?ml")),
    (".forgejo/workflows", re.compile(r".+")),
    ("ci", re.compile(r".*\.sh")),
)
MAKEFILE = "Makefile"
PRE_COMMIT = ".pre-commit-config.yaml"
BUILTIN = ("default", "relaxed")  # the configurations yamllint ships
MAX_EXTENDS = 8  # a chain of `extends:` files deeper than any real one (and no loop)

_COMMAND = re.compile(r"\byamllint\b(?P<args>[^\n]*)")
_OPTION = re.compile(r"""(?:^|\s)(?:-c|--config-file)(?:\s+|=)(?P<path>"[^"\n]*"|'[^'\n]*'|[^\s;|&)]+)""")

Read = Callable[[str], "bytes | None"]


class LintConfigError(Exception):
    """A yamllint configuration that cannot be used, in the shape of EditRefused: `path` the key inside the file
    (`rules.line-length`, `extends`, `(file)`), `problem`, `hint`; `line(file)` is the project's error line."""

    def __init__(self, path: str, problem: str, hint: str) -> None:
        problem = " ".join(problem.split())  # one line, whatever yamllint's message held
        self.path, self.problem, self.hint = path, problem, hint
        super().__init__(f"{path}: {problem}; hint: {hint}")

    def line(self, file: str) -> str:
        return f"{file}: {self}"


# --- where ------------------------------------------------------------------------------------------------------------


def repo_path(named: str) -> tuple[str | None, str]:
    """A path a CI script names, as a repository-relative path, or None and why it is not one."""
    if not named or "$" in named or "\\" in named or "`" in named:
        return None, "not a literal path"
    if named.startswith("/"):
        return None, "an absolute path"
    normal = posixpath.normpath(named)
    if normal == ".." or normal.startswith("../"):
        return None, "outside the repository"
    if normal == ".":
        return None, "not a file"
    return normal, ""


def _named_in_script(text: str) -> list[str]:
    found = []
    for command in _COMMAND.finditer(text):
        option = _OPTION.search(command.group("args"))
        if option:
            found.append(option.group("path").strip("'\""))
    return found


def _named_in_pre_commit(text: str) -> list[str]:
    try:
        config = load_yaml(text)
    except InputFileError:
        return []
    repos = config.get("repos") if isinstance(config, dict) else None
    found = []
    for repo in repos if isinstance(repos, list) else []:
        hooks = repo.get("hooks") if isinstance(repo, dict) else None
        for hook in hooks if isinstance(hooks, list) else []:
            if not isinstance(hook, dict) or hook.get("id") != "yamllint" or not isinstance(hook.get("args"), list):
                continue
            args = [str(arg) for arg in hook["args"]]
            for i, arg in enumerate(args):
                if arg in ("-c", "--config-file") and i + 1 < len(args):
                    found.append(args[i + 1])
                elif arg.startswith("--config-file="):
                    found.append(arg.split("=", 1)[1])
                elif arg.startswith("-c") and not arg.startswith("--"):
                    found.append(arg[2:].removeprefix("="))
    return found


def find_config(read: Read, listdir: Callable[[str], list[str]] | None = None,
                notes: list[str] | None = None) -> tuple[str, bytes] | None:
    """The repository's yamllint configuration, `(path, content)`, or None when it has none. `read(rel)` gives a
    file's bytes (None when there is no such file), `listdir(rel)` a folder's names ([] when there is none; without
    it the CI folders are not searched). Why a named file is passed over goes to `notes`."""
    for rel in ROOT_FILES:
        content = read(rel)
        if content is not None:
            return rel, content
    scripts: list[tuple[str, Callable[[str], list[str]]]] = []
    for folder, pattern in CI_FOLDERS:
        names = sorted(name for name in (listdir(folder) if listdir else []) if pattern.fullmatch(name))
        scripts.extend((f"{folder}/{name}", _named_in_script) for name in names)
    scripts.append((MAKEFILE, _named_in_script))
    scripts.append((PRE_COMMIT, _named_in_pre_commit))
    for script, names_in in scripts:
        data = read(script)
        if data is None:
            continue
        try:
            text = decode_text(data)
        except InputFileError:
            continue
        for named in names_in(text):
            rel, why = repo_path(named)
            if rel is None:
                _note(notes, f"{script}: names the yamllint configuration {escaped(named)}: {why}; ignored")
                continue
            content = read(rel)
            if content is None:
                _note(notes, f"{script}: names the yamllint configuration {rel}, which is not in the repository; "
                      "ignored")
                continue
            return rel, content
    return None


def _note(notes: list[str] | None, line: str) -> None:
    if notes is not None:
        notes.append(line)


# --- what -------------------------------------------------------------------------------------------------------------


def _hint(rel: str) -> str:
    return f"fix {rel} (see https://yamllint.readthedocs.io/en/stable/configuration.html)"


def _raw(rel: str, content: bytes) -> dict[str, Any]:
    """The configuration's mapping, read as yamllint reads it (YAML 1.1) once the project's rules let it through."""
    try:
        text = decode_text(content.removeprefix(b"\xef\xbb\xbf"))
        load_yaml(text)  # anchors, duplicate keys, depth: refused here with the line
        conf = yaml.safe_load(text)
    except InputFileError as exc:
        raise LintConfigError(exc.where, exc.problem, _hint(rel)) from None
    except (yaml.YAMLError, RecursionError, ValueError):
        raise LintConfigError("(file)", "not valid YAML", _hint(rel)) from None
    if not isinstance(conf, dict):
        raise LintConfigError("(file)", "not a mapping of yamllint settings", _hint(rel))
    return conf


def _merged(rel: str, content: bytes, read: Read | None, depth: int = 0) -> dict[str, Any]:
    """The configuration with an `extends:` of a repository file merged in as yamllint merges it (rules: the base's
    options updated by this file's, a rule disabled or enabled wholesale replaced; `ignore`: this file's, else the
    base's) and `ignore-from-file` turned into the patterns it names: nothing left for yamllint to open."""
    conf = _raw(rel, content)
    rules = conf.get("rules", {})
    if not isinstance(rules, dict):
        raise LintConfigError("rules", "is not a mapping", _hint(rel))
    rules = {name: {} if value == "enable" else False if value == "disable" else value for name, value in rules.items()}
    for name, value in rules.items():
        if isinstance(value, dict) and "ignore-from-file" in value:
            rules[name] = _ignores_inlined(value, f"rules.{name}", rel, read)
    conf = _ignores_inlined(conf, "", rel, read)
    base_name = conf.get("extends")
    if base_name is not None and base_name not in BUILTIN:
        base_rel, why = repo_path(base_name) if isinstance(base_name, str) else (None, "not a file name")
        if base_rel is None:
            raise LintConfigError("extends", f"{escaped(str(base_name))}: {why}", _hint(rel))
        base_content = read(base_rel) if read is not None else None
        if base_content is None:
            raise LintConfigError("extends", f"{base_rel} is not in the repository", _hint(rel))
        if depth >= MAX_EXTENDS:
            raise LintConfigError("extends", f"more than {MAX_EXTENDS} files extend one another", _hint(rel))
        base = _merged(base_rel, base_content, read, depth + 1)
        base_rules = dict(base.get("rules", {}))
        for name, value in rules.items():
            if isinstance(value, dict) and isinstance(base_rules.get(name), dict):
                base_rules[name] = {**base_rules[name], **value}
            else:
                base_rules[name] = value
        rules = base_rules
        conf = {key: value for key, value in conf.items() if key != "extends"}
        if "extends" in base:
            conf["extends"] = base["extends"]
        if "ignore" not in conf and "ignore" in base:
            conf["ignore"] = base["ignore"]
    conf["rules"] = rules
    return conf


def _ignores_inlined(conf: dict[str, Any], path: str, rel: str, read: Read | None) -> dict[str, Any]:
    if "ignore-from-file" not in conf:
        return conf
    where = f"{path}.ignore-from-file" if path else "ignore-from-file"
    if "ignore" in conf:
        raise LintConfigError(where, "ignore and ignore-from-file cannot be used together", _hint(rel))
    files = conf["ignore-from-file"]
    files = [files] if isinstance(files, str) else files
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise LintConfigError(where, "should name a file or a list of files", _hint(rel))
    patterns: list[str] = []
    for name in files:
        named, why = repo_path(name)
        data = read(named) if named is not None and read is not None else None
        if data is None:
            raise LintConfigError(where, f"{escaped(name)}: {why or 'not in the repository'}", _hint(rel))
        try:
            patterns.extend(decode_text(data).splitlines())
        except InputFileError as exc:
            raise LintConfigError(where, f"{named}: {exc.problem}", _hint(rel)) from None
    inlined = {key: value for key, value in conf.items() if key != "ignore-from-file"}
    inlined["ignore"] = patterns
    return inlined


_RULE = re.compile(r'(?:rule:?|of) "(?P<rule>[a-z-]+)"|invalid config: (?P<id>[a-z-]+): ')


@dataclass(frozen=True)
class Lint:
    """What a yamllint configuration asks of a file. `line_length_max`: None when the rule is disabled;
    `indent_sequences`: the indentation rule's option (True, False, 'whatever', 'consistent'; 'whatever' when the
    rule is disabled)."""

    source: str
    line_length_max: int | None
    indent_sequences: bool | str
    config: YamlLintConfig = field(repr=False, compare=False)

    @classmethod
    def from_config(cls, rel: str, content: bytes, read: Read | None = None) -> Lint:
        """The configuration `rel` holds; `read` gives the repository's files it names. Raises LintConfigError."""
        conf = _merged(rel, content, read)
        try:
            config = YamlLintConfig(content=json.dumps(conf))
        except YamlLintConfigError as exc:
            message = str(exc).removeprefix("invalid config: ")
            rule = _RULE.search(str(exc))
            path = f"rules.{rule.group('rule') or rule.group('id')}" if rule else "(file)"
            raise LintConfigError(path, message, _hint(rel)) from None
        except (TypeError, ValueError) as exc:  # a value of a shape yamllint's own checks did not expect
            raise LintConfigError("(file)", f"not a usable configuration ({type(exc).__name__})", _hint(rel)) from None
        length = config.rules.get("line-length")
        indentation = config.rules.get("indentation")
        return cls(source=rel,
                   line_length_max=length["max"] if isinstance(length, dict) else None,
                   indent_sequences=indentation["indent-sequences"] if isinstance(indentation, dict) else "whatever",
                   config=config)

    def problems(self, rel: str, content: bytes) -> list[str]:
        """`<rel>:<line>:<col>: <message> (<rule>)` for each error yamllint finds in `content` (none when the
        configuration ignores `rel`)."""
        found = [problem for problem in linter.run(content, self.config, filepath=rel) if problem.level == "error"]
        return [_shown(rel, problem) for problem in found]


def _shown(rel: str, problem: Any) -> str:
    line = f"{rel}:{problem.line}:{problem.column}: {problem.desc}"
    return f"{line} ({problem.rule})" if problem.rule else line  # a syntax error's text ends with "(syntax)" already


def repository_lint(out: Path) -> tuple[tuple[str, Lint] | None, list[str]]:
    """The repository's own yamllint (its configuration file and the linter) read from OUT, or None with the refusal's
    line (none at all when the repository has no configuration: nothing to follow, nothing to judge)."""
    def read(rel: str) -> bytes | None:
        try:
            return read_regular(out, rel)
        except OwnershipError:
            return None

    def listdir(rel: str) -> list[str]:
        folder = out / rel
        if folder.is_symlink() or not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink())

    found = find_config(read, listdir)
    if found is None:
        return None, []
    rel, data = found
    try:
        return (rel, Lint.from_config(rel, data, read)), []
    except LintConfigError as exc:
        return None, [exc.line(str(out / rel))]
