"""The value-length rule of model/config/line_width.py called directly (no Pulumi program): the yamllint line
length it is measured against, how a value is measured as written, and how a refusal is worded."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import yaml

from conftest import ROOT
from model.config.line_width import EXPORT_LINE_MAX, MAX_EXPORTED_VALUE, fits_export_line
from model.labels import SHARED_DEV_NUM_REASON_ANNOTATION


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


def test_the_line_length_is_the_one_the_export_s_yamllint_config_sets():
    # EXPORT_LINE_MAX is a constant so that the core reads no file on import: this holds it to .yamllint.yaml.
    rules = yaml.safe_load((ROOT / ".yamllint.yaml").read_text(encoding="utf-8"))["rules"]
    assert rules["line-length"]["max"] == EXPORT_LINE_MAX


def test_the_longest_key_before_a_value_is_the_shared_dev_num_reason_annotation_s():
    assert MAX_EXPORTED_VALUE == EXPORT_LINE_MAX - len(f"    {SHARED_DEV_NUM_REASON_ANNOTATION}: ")


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
