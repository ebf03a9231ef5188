"""The rules of model/config.py called directly (no Pulumi program): the value-length rule and the yamllint
line length it is measured against, and how refusals are worded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from conftest import ROOT
from model.config import EXPORT_LINE_MAX, MAX_EXPORTED_VALUE, _yamllint_line_max, fits_export_line
from model.plugin_flags import PLUGIN_VERSION


def too_long(width: int, what: str = "") -> str:
    over = width - MAX_EXPORTED_VALUE
    return (f"{width} characters as exported{what}, above the {MAX_EXPORTED_VALUE} that fit on one "
            f"{EXPORT_LINE_MAX}-character line (.yamllint.yaml) after the key the export writes before it; "
            f"hint: shorten it by {over} character" + ("s" if over > 1 else ""))


def run(rule, value: str) -> str:
    """The rule as pydantic calls it on a value."""
    return cast(Callable[[str], str], rule.func)(value)


def refusal(rule, value: str) -> str:
    with pytest.raises(ValueError) as info:
        run(rule, value)
    return str(info.value)


@pytest.mark.parametrize(("text", "line_max"), [
    ("rules:\n  line-length:\n    max: 120\n", 120),
    ("extends: default\nrules:\n  line-length: {level: warning}\n", 80),  # yamllint's default
    ("rules:\n  line-length: disable\n", 80),
    ("rules: {}\n", 80),
    ("extends: default\n", 80),
    ("", 80),
])
def test_the_line_length_comes_from_the_yamllint_config_or_yamllint_s_default(tmp_path: Path, text, line_max):
    path = tmp_path / ".yamllint.yaml"
    path.write_text(text, encoding="utf-8")
    assert _yamllint_line_max(path) == line_max


def test_the_project_s_own_yamllint_config_sets_the_line_length():
    assert _yamllint_line_max(ROOT / ".yamllint.yaml") == EXPORT_LINE_MAX


def test_a_value_that_fits_exactly_is_kept_as_it_is():
    assert run(fits_export_line(), "a" * MAX_EXPORTED_VALUE) == "a" * MAX_EXPORTED_VALUE


def test_a_value_one_character_too_long_is_refused_naming_the_one_character():
    assert refusal(fits_export_line(), "a" * (MAX_EXPORTED_VALUE + 1)) == too_long(MAX_EXPORTED_VALUE + 1)


def test_a_value_several_characters_too_long_is_refused_naming_them_all():
    assert refusal(fits_export_line(), "a" * (MAX_EXPORTED_VALUE + 3)) == too_long(MAX_EXPORTED_VALUE + 3)


def test_a_value_is_measured_as_written_with_its_quotes():
    # A value starting with a quote is written single-quoted, the quote doubled: three characters more.
    value = "'" + "a" * (MAX_EXPORTED_VALUE - 3)
    assert refusal(fits_export_line(), value) == too_long(MAX_EXPORTED_VALUE + 1)


def test_the_text_written_into_the_same_scalar_counts_with_the_value():
    rule = fits_export_line(prefix="./", suffix="/x")
    assert run(rule, "a" * (MAX_EXPORTED_VALUE - 4)) == "a" * (MAX_EXPORTED_VALUE - 4)
    assert refusal(rule, "a" * (MAX_EXPORTED_VALUE - 3)) == too_long(MAX_EXPORTED_VALUE + 1)


def test_the_characters_after_the_value_count_and_are_named():
    rule = fits_export_line(extra=10, what=" with a key")
    assert run(rule, "a" * (MAX_EXPORTED_VALUE - 10)) == "a" * (MAX_EXPORTED_VALUE - 10)
    assert refusal(rule, "a" * (MAX_EXPORTED_VALUE - 8)) == too_long(MAX_EXPORTED_VALUE + 2, " with a key")


def test_a_shorter_key_lets_the_value_use_the_difference():
    rule = fits_export_line(extra=-5)
    assert run(rule, "a" * (MAX_EXPORTED_VALUE + 5)) == "a" * (MAX_EXPORTED_VALUE + 5)
    assert refusal(rule, "a" * (MAX_EXPORTED_VALUE + 6)) == too_long(MAX_EXPORTED_VALUE + 1)


@pytest.mark.parametrize("value", ["two\nlines", "folded " * 700])
def test_a_value_the_export_could_not_write_on_one_line_is_refused(value):
    assert refusal(fits_export_line(), value) == ("must be one line of text: the export writes it on one line of "
                                                  "YAML; hint: remove the line breaks")


def test_the_yamllint_config_is_read_as_utf8_whatever_the_locale(tmp_path: Path):
    import locale

    path = tmp_path / ".yamllint.yaml"
    path.write_text("# line length for the exported tree (café-proof)\nrules:\n  line-length:\n    max: 99\n",
                    encoding="utf-8")
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: reading by the locale would fail on the é
    try:
        assert _yamllint_line_max(path) == 99
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


def plugin_refusal(args: list[str]) -> str:
    from pydantic import ValidationError

    from model.config import IntelGpuPluginConfig

    with pytest.raises(ValidationError) as info:
        IntelGpuPluginConfig(extraArgs=args)
    [error] = info.value.errors(include_url=False)
    return error["msg"].removeprefix("Value error, ")


UNKNOWN = ("'{}' is not a flag of gpu_plugin " + PLUGIN_VERSION + " (the plugin exits: 'flag provided but not "
           "defined'); hint: remove it; every flag of gpu_plugin " + PLUGIN_VERSION + " is listed in "
           "docs/plugin-flags.md")


def test_one_refused_plugin_flag_is_refused_with_its_reason():
    assert plugin_refusal(["-v=4", "-bogus"]) == UNKNOWN.format("-bogus")


@pytest.mark.parametrize("count", [2, 3])
def test_several_refused_plugin_flags_are_refused_together_in_one_message(count):
    flags = ["-bogus", "-nope", "-nada"][:count]
    assert plugin_refusal(flags) == "; ".join(UNKNOWN.format(f) for f in flags)
