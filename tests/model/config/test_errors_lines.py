"""How model/config/errors.py words a refusal: a key_rule at the key it names, a key as the stack file spells it,
an unknown key matched against its own section, a value as JSON cut when long."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from model.config import MISSING, StackConfig, format_validation_error, key_rule
from model.config.errors import _format_loc, _unknown_key_hint, shown_value


def test_a_key_rule_error_is_formatted_from_its_own_context_not_pydantic_s_message():
    class Inner(BaseModel):
        a: int = 0

        @model_validator(mode="after")
        def _rule(self) -> Inner:
            raise key_rule(("b", 0, "c"), MISSING if self.a else "x\ny", "the problem", "the fix", also=("a",))

    class Outer(BaseModel):
        items: list[Inner]

    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"items": [{"a": 0}, {"a": 1}]})
    assert format_validation_error("f.yaml", info.value, Outer) == [
        'f.yaml: gpu-platform:items[0].b[0].c: "x\\ny": the problem (also items[0].a); hint: the fix',
        "f.yaml: gpu-platform:items[1].b[0].c: missing: the problem (also items[1].a); hint: the fix"]


def test_a_key_is_shown_as_the_stack_file_spells_it():
    assert _format_loc(()) == "gpu-platform:(root)"
    assert _format_loc(("apps", 0, "volumes", "2", "name")) == "gpu-platform:apps[0].volumes[2].name"
    assert _format_loc(("bad\nkey", "x")) == "gpu-platform:bad\\nkey.x"


@pytest.mark.parametrize(("loc", "hint"), [
    (("plexx",), "did you mean plex?"),
    (("apps", 0, "nam"), "did you mean name?"),
    (("apps", "0", "volumes", 1, "mountpath"), "did you mean mountPath?"),
    (("flux", "tiers", 0, "dependsOn", 0, "nme"), "did you mean name?"),
    (("plex", "storage", "mediaSise"), "did you mean mediaSize?"),
    (("plex", "nowhere", "x"), "check its spelling against docs/config.md"),
    (("plex", "nowhere", "deeper", "x"), "check its spelling against docs/config.md"),
    (("plex", "timezone", "x"), "check its spelling against docs/config.md"),  # below a value, not a section
    (("apps", 0, "hardware", "gpu", "x"), "check its spelling against docs/config.md"),
    (("qqqqqq",), "check its spelling against docs/config.md"),
])
def test_an_unknown_key_is_matched_against_the_keys_of_its_own_section(loc, hint):
    assert _unknown_key_hint(StackConfig, loc) == hint


@pytest.mark.parametrize(("value", "shown"), [
    ({"a": 1}, "{…}"),
    ("é\n", '"é\\n"'),
    (3.5, "3.5"), (None, "null"), (True, "true"), (["b", "a"], '["b", "a"]'),
    ([{"b": 1, "a": 2}], '[{"a": 2, "b": 1}]'),  # keys sorted
    ([{1: "a", "b": 2}], "[{1: 'a', 'b': 2}]"),  # keys that cannot be sorted: shown as Python writes them
    ("a" * 78, '"' + "a" * 78 + '"'),  # 80 with its quotes: whole
    ("a" * 79, '"' + "a" * 79 + '…" (79 characters)'),
    (list(range(30)), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 2…"),
])
def test_a_value_is_shown_as_json_and_cut_when_long(value, shown):
    assert shown_value(value) == shown


def test_a_value_json_cannot_write_is_shown_by_its_text():
    import datetime

    assert shown_value(datetime.date(2024, 1, 31)) == '"2024-01-31"'
    assert shown_value([datetime.date(2024, 1, 31), 1]) == '["2024-01-31", 1]'


def test_a_value_is_cut_at_the_limit_asked_for():
    assert shown_value(list(range(30)), limit=10) == "[0, 1, 2, …"
    assert shown_value("abcdefghij", limit=5) == '"abcd…" (10 characters)'
