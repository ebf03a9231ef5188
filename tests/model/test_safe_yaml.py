"""model/safe_yaml.py, called directly: the one reader of stack files, evidence and node lists refuses each
unsafe or ambiguous input with one `where: problem; hint: …` error, resolves scalars as YAML 1.2 does, and the
alias-expansion measure used for files under OUT terminates on any document."""

from __future__ import annotations

import math
import os
import re
import time
from typing import Any

import pytest

from model import safe_yaml
from model.safe_yaml import (
    MAX_DEPTH,
    InputFileError,
    decode_text,
    escaped,
    expanded_size,
    load_json,
    load_yaml,
    read_text,
)

YAML_HINT = "fix the line shown (YAML: indent with spaces, quote values that hold ': ' or start with a symbol)"
JSON_HINT = "use real `kubectl ... -o json` output"


def refusal(load, text: Any, **kwargs) -> InputFileError:
    with pytest.raises(InputFileError) as caught:
        load(text, **kwargs)
    return caught.value


def parts(error: InputFileError) -> tuple[str, str, str]:
    return error.where, error.problem, error.hint


# --- the error shape -------------------------------------------------------------------------------------------------

def test_an_input_file_error_is_one_line_where_problem_and_hint():
    error = InputFileError("line 3", "first part\n  second\tpart ", "do this")
    assert parts(error) == ("line 3", "first part second part", "do this")
    assert str(error) == "line 3: first part second part; hint: do this"


def test_an_error_line_names_the_source_and_a_caller_may_replace_the_hint():
    error = InputFileError("(file)", "broken", "the default hint")
    assert error.line("Pulumi.dev.yaml") == "Pulumi.dev.yaml: (file): broken; hint: the default hint"
    assert error.line("nodes.json", "run kubectl again") == "nodes.json: (file): broken; hint: run kubectl again"


def test_escaped_text_shows_quotes_backslashes_and_line_breaks_as_escapes_without_surrounding_quotes():
    assert escaped('say "hi"\\\n\t') == 'say \\"hi\\"\\\\\\n\\t'
    assert escaped("plain") == "plain"


def test_escaped_text_keeps_printable_unicode_and_escapes_every_other_line_break():
    assert escaped("Zürich é") == "Zürich é"
    assert escaped("a\u0085b\u2028c\x7f") == "a\\u0085b\\u2028c\\u007f"


# --- bytes to text ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "offset"), [(b"\0abc", 0), (b"a\0", 1), (b"ab\0\0", 2)])
def test_a_nul_byte_is_binary_data_at_its_offset(data, offset):
    error = refusal(decode_text, data)
    assert parts(error) == ("(file)", f"binary data (a NUL byte at offset {offset}), not text", "save it as UTF-8 text")


def test_text_in_another_encoding_names_the_first_bad_byte_and_its_offset():
    error = refusal(decode_text, "Zürich".encode("latin-1"), hint="re-save it")
    assert parts(error) == ("(file)", "not UTF-8 text (byte 0xfc at offset 1)", "re-save it")


def test_binary_data_takes_the_callers_hint_too():
    assert refusal(decode_text, b"\0", hint="re-save it").hint == "re-save it"


def test_utf8_text_is_decoded():
    assert decode_text("Zürich\n".encode()) == "Zürich\n"


# --- reading a file --------------------------------------------------------------------------------------------------

def test_a_file_at_the_size_bound_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a: 12345\n")
    assert read_text(path, 9) == "a: 12345\n"
    error = refusal(read_text, path, max_bytes=8)
    assert parts(error) == ("(file)", "larger than 8 bytes, far more than such a file ever holds",
                            "point at the right file")


def test_a_missing_file_is_left_to_the_caller(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "missing.yaml", 100)


def test_a_path_through_a_file_is_one_error_with_the_systems_reason(tmp_path):
    (tmp_path / "file").write_text("x")
    error = refusal(read_text, tmp_path / "file" / "child.yaml", max_bytes=100)
    assert parts(error) == ("(file)", "cannot read it: Not a directory", "check the path and its permissions")


def test_a_folder_is_refused_as_a_folder(tmp_path):
    assert parts(refusal(read_text, tmp_path, max_bytes=100)) == (
        "(file)", "is a folder, not a file", "point at the file itself")


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert parts(refusal(read_text, fifo, max_bytes=100)) == (
        "(file)", "not a regular file (a FIFO, socket or device)", "point at a regular file")


def test_a_file_that_cannot_be_opened_is_one_error_with_the_systems_reason(tmp_path, monkeypatch):
    path = tmp_path / "f.yaml"
    path.write_text("a: 1\n")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(safe_yaml, "open", denied, raising=False)
    assert parts(refusal(read_text, path, max_bytes=100)) == (
        "(file)", "cannot read it: Permission denied", "check the path and its permissions")


def test_a_file_that_is_not_utf8_is_refused_as_such(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a: \xff\n")
    assert refusal(read_text, path, max_bytes=100).problem == "not UTF-8 text (byte 0xff at offset 3)"


# --- YAML 1.2 scalars ------------------------------------------------------------------------------------------------

def test_only_true_and_false_spellings_are_booleans():
    doc = load_yaml("a: true\nb: True\nc: TRUE\nd: false\ne: False\nf: FALSE\ng: tRUE\nh: yes\ni: off\nj: n\n")
    assert doc == {"a": True, "b": True, "c": True, "d": False, "e": False, "f": False,
                   "g": "tRUE", "h": "yes", "i": "off", "j": "n"}
    assert all(type(doc[k]) is bool for k in "abcdef")


def test_integers_in_decimal_hex_binary_and_octal_and_sexagesimal_stays_a_string():
    doc = load_yaml("a: 12\nb: -7\nc: +3\nd: 0x1f\ne: 0b101\nf: 017\ng: 1_000\nh: 1:20\ni: 0\n")
    assert doc == {"a": 12, "b": -7, "c": 3, "d": 31, "e": 5, "f": 15, "g": 1000, "h": "1:20", "i": 0}
    assert all(type(doc[k]) is int for k in "abcdefgi")


def test_yaml_1_2_floats_without_a_leading_digit_or_a_dot_or_an_exponent_sign_are_floats():
    # What go-yaml v3 (Pulumi's reader) reads as floats; YAML 1.1 (PyYAML's table) left all of these strings.
    doc = load_yaml("a: -.5\nb: +.5\nc: 1e3\nd: -2E-2\ne: 1.5e3\nf: .5e1\ng: 1.\n")
    assert doc == {"a": -0.5, "b": 0.5, "c": 1000.0, "d": -0.02, "e": 1500.0, "f": 5.0, "g": 1.0}
    assert all(type(v) is float for v in doc.values())


def test_what_is_not_a_number_in_yaml_1_2_stays_a_string():
    doc = load_yaml("a: 1e\nb: e3\nc: 1.2.3\nd: -.\ne: 1e3.5\nf: 0o8\ng: .e3\nh: '1e3'\n")
    assert doc == {"a": "1e", "b": "e3", "c": "1.2.3", "d": "-.", "e": "1e3.5", "f": "0o8", "g": ".e3", "h": "1e3"}


def test_the_yaml_1_2_octal_spelling_is_an_integer_like_the_yaml_1_1_one():
    assert load_yaml("a: 0o17\nb: -0o17\nc: 017\n") == {"a": 15, "b": -15, "c": 15}


def test_floats_infinities_and_nan_are_floats_and_dates_stay_strings():
    doc = load_yaml("a: 1.5\nb: -2.5\nc: .25\nd: 1.5e+3\ne: -.inf\nf: +.Inf\ng: .nan\ni: 2024-01-01\n"
                    "j: 2024-01-01T10:00:00Z\n")
    assert doc["a"] == 1.5 and doc["b"] == -2.5 and doc["c"] == 0.25 and doc["d"] == 1500.0
    assert doc["e"] == -math.inf and doc["f"] == math.inf and math.isnan(doc["g"])
    assert doc["i"] == "2024-01-01" and doc["j"] == "2024-01-01T10:00:00Z"


def test_the_null_spellings_are_null_and_nothing_else_is():
    doc = load_yaml("a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: nULL\ng: none\n")
    assert doc == {"a": None, "b": None, "c": None, "d": None, "e": None, "f": "nULL", "g": "none"}


def test_an_equals_sign_is_a_plain_string():
    assert load_yaml("a: =\n") == {"a": "="}


def test_an_empty_document_is_none():
    assert load_yaml("") is None
    assert load_yaml("# only a comment\n") is None


# --- refusals in YAML ------------------------------------------------------------------------------------------------

def test_keys_of_two_kinds_that_are_one_key_once_read_are_refused_naming_both_kinds_not_as_duplicates():
    error = refusal(load_yaml, "1: a\ntrue: b\n")
    assert parts(error) == ("line 2", "the key true and the key 1 on line 1 are one key once read (a boolean and an "
                            "integer of equal value); only one of them would be kept", "quote both keys")
    assert refusal(load_yaml, "0.0: a\n0: b\n").problem == (
        "the key 0 and the key 0.0 on line 1 are one key once read (an integer and a float of equal value); only one "
        "of them would be kept")


def test_the_same_key_written_twice_is_still_a_duplicate():
    for text, key in (("1: a\n1: b\n", "1"), ("true: a\nTrue: b\n", "true")):
        assert parts(refusal(load_yaml, text)) == (
            "line 2", f"duplicate key {key} (first on line 1); YAML would silently keep only one of them",
            "keep one of them")


def test_quoted_keys_that_look_alike_are_distinct_strings():
    assert load_yaml("'1': a\n'true': b\n'1.0': c\n") == {"1": "a", "true": "b", "1.0": "c"}


def test_an_anchor_is_refused_on_its_line_even_without_an_alias():
    error = refusal(load_yaml, "a: 1\nb: &x [1, 2]\n")
    assert parts(error) == ("line 2", "an anchor &x: YAML anchors and aliases are refused (a few hundred bytes of "
                            "aliases can expand into gigabytes)", "write the value out in full where it is used")


def test_an_alias_is_refused_on_its_line_even_without_an_anchor():
    error = refusal(load_yaml, "a: 1\nb:\n  c: *x\n")
    assert (error.where, error.problem.split(":")[0]) == ("line 3", "an alias *x")


def test_ampersands_and_stars_in_values_are_just_text():
    assert load_yaml("a: b & c\nd: '*e'\nf: 2 * 3\n") == {"a": "b & c", "d": "*e", "f": "2 * 3"}


def test_broken_yaml_around_an_ampersand_is_not_valid_yaml_on_its_line():
    error = refusal(load_yaml, "a: b & c\nd: [1\n")
    assert parts(error) == ("line 2", "not valid YAML: did not find expected ',' or ']'", YAML_HINT)


def test_broken_yaml_is_not_valid_yaml_on_its_line():
    error = refusal(load_yaml, "a:\n  - b\n c: d\n")
    assert parts(error) == ("line 3", "not valid YAML: did not find expected key", YAML_HINT)


def test_an_unclosed_quote_is_refused_on_the_line_that_opens_it():
    error = refusal(load_yaml, 'a: 1\nb: "two\nc: 3\nd: 4\n')
    assert parts(error) == ("line 2", "not valid YAML: found unexpected end of stream", YAML_HINT)


def test_a_key_without_its_colon_is_refused_on_its_own_line():
    assert refusal(load_yaml, "a: b\nfoo\nc: d\n").where == "line 2"


def test_a_tab_that_breaks_a_plain_value_is_refused_on_the_tab_s_line():
    assert refusal(load_yaml, "a: b\n\tc: d\n").where == "line 2"


@pytest.mark.parametrize("text,line", [("a: [\n", "line 1"), ("a: [", "line 1"), ("a: 1\nb: [1\n\n", "line 2"),
                                       ("a: 1\r\nb: [1\r\n", "line 2")])
def test_an_error_the_parser_finds_at_the_end_is_refused_on_the_file_s_last_line(text, line):
    assert refusal(load_yaml, text).where == line


def test_a_control_character_is_named_by_its_code_point_on_its_line():
    error = refusal(load_yaml, "a: b\nc: \x07\n")
    assert parts(error) == ("line 2", "not valid YAML: the character U+0007 is not allowed in YAML text", YAML_HINT)
    assert refusal(load_yaml, "a: \x07").where == "line 1"


def test_a_merge_key_is_refused_on_its_line():
    error = refusal(load_yaml, "a:\n  b: 1\n  <<: {c: 2}\n")
    assert parts(error) == ("line 3", "a merge key (<<): YAML merge keys are refused, like anchors and aliases",
                            "write the keys out in full")


@pytest.mark.parametrize("text", ["? [a, b]\n: 1\n", "x: 1\n? {a: b}\n: 1\n"])
def test_a_list_or_mapping_as_a_key_is_refused_on_its_line(text):
    error = refusal(load_yaml, text)
    assert parts(error) == (f"line {text.count(chr(10)) - 1}", "a list or mapping used as a key",
                            "use a plain string as the key")


def test_a_duplicate_key_names_both_lines():
    error = refusal(load_yaml, "top:\n  a: 1\n  b: 2\n  a: 3\n")
    assert parts(error) == ("line 4", 'duplicate key "a" (first on line 2); YAML would silently keep only one of them',
                            "keep one of them")


def test_keys_that_read_as_the_same_number_are_duplicates():
    assert parts(refusal(load_yaml, "1: a\n0x1: b\n")) == (
        "line 2", "duplicate key 1 (first on line 1); YAML would silently keep only one of them", "keep one of them")


def test_non_string_keys_are_kept_unless_string_keys_are_asked_for():
    assert load_yaml("1: a\nnull: b\n") == {1: "a", None: "b"}
    error = refusal(load_yaml, "a: 1\n2: b\n", string_keys=True)
    assert parts(error) == ("line 2", "the key 2 is not a string (YAML reads it as an integer)", 'quote it: "2"')
    # YAML's own words for what it read, and the key as the file writes it in the hint
    assert parts(refusal(load_yaml, "a:\n  null: b\n", string_keys=True)) == (
        "line 2", "the key null is not a string (YAML reads it as null)", 'quote it: "null"')
    assert parts(refusal(load_yaml, "True: b\n", string_keys=True)) == (
        "line 1", "the key true is not a string (YAML reads it as a boolean)", 'quote it: "True"')
    assert parts(refusal(load_yaml, "1.5: b\n", string_keys=True)) == (
        "line 1", "the key 1.5 is not a string (YAML reads it as a float)", 'quote it: "1.5"')
    assert load_yaml('"2": b\n', string_keys=True) == {"2": "b"}


@pytest.mark.parametrize("tag", ["binary", "set", "omap", "pairs", "timestamp"])
def test_yaml_types_outside_json_are_refused_by_tag(tag):
    error = refusal(load_yaml, f"a: 1\nb: !!{tag} x\n")
    assert parts(error) == ("line 2", f"the tag !!{tag} is refused: only strings, numbers, booleans, null, lists "
                            "and mappings", "remove the tag (quote the value to keep it a string)")


def test_an_unknown_tag_is_refused_with_the_parsers_reason():
    error = refusal(load_yaml, "a: 1\nb: !!python/object/apply:os.system [id]\n")
    assert error.where == "line 2" and error.hint == "remove the tag: plain YAML data only"
    # the problem is the YAML library's wording, naming the tag
    assert re.fullmatch(".*'tag:yaml.org,2002:python/object/apply:os.system'", error.problem), error.problem


def test_a_number_with_thousands_of_digits_is_refused_for_the_file():
    error = refusal(load_yaml, "a: 1\nb: " + "9" * 5000 + "\n")
    assert parts(error) == ("line 2", "not usable YAML: a number with thousands of digits",
                            "quote it if it is text, or shorten it")


def test_nesting_up_to_the_bound_is_read_and_one_level_more_is_refused():
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    error = refusal(load_yaml, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert parts(error) == ("(file)", f"nested deeper than {MAX_DEPTH} levels", "flatten the file")


def test_nesting_counts_mapping_values_and_list_items_alike():
    text = "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH - 1)) + "  " * (MAX_DEPTH - 1) + "- [x]\n"
    assert refusal(load_yaml, text).problem == f"nested deeper than {MAX_DEPTH} levels"
    assert load_yaml(text.replace("- [x]", "- x")) is not None


# --- JSON ------------------------------------------------------------------------------------------------------------

def test_json_reads_as_json():
    assert load_json('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


def test_a_duplicate_json_key_is_refused_by_name():
    error = refusal(load_json, '{"items": [{"name": "a", "name": "b"}]}')
    assert parts(error) == ('"name"', "duplicate key in one JSON object",
                            "keep one; real `kubectl ... -o json` output never repeats a key")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant):
    error = refusal(load_json, f'{{"a": {constant}}}')
    assert parts(error) == ("(file)", f"{constant} is not a JSON number", JSON_HINT)


def test_text_that_is_not_json_names_its_line():
    error = refusal(load_json, '{\n  "a": 1,\n}')
    assert parts(error) == ("line 3", "not JSON: Expecting property name enclosed in double quotes", JSON_HINT)


def test_json_too_deep_for_the_parser_is_nested_too_deeply():
    error = refusal(load_json, "[" * 100_000 + "]" * 100_000)
    assert parts(error) == ("(file)", "not usable JSON: nested too deeply", JSON_HINT)


def test_a_json_number_with_thousands_of_digits_is_refused():
    assert refusal(load_json, "9" * 5000).problem == "not usable JSON: a number with thousands of digits"


def test_json_nesting_has_the_same_bound_as_yaml():
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert refusal(load_json, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).problem == (
        f"nested deeper than {MAX_DEPTH} levels")


# --- alias expansion of files under OUT --------------------------------------------------------------------------

def test_expanded_size_counts_every_value_once_per_use():
    shared = [1, 2]
    assert expanded_size("x") == 1
    assert expanded_size([]) == 1
    assert expanded_size({"a": [1, 2]}) == 4
    assert expanded_size([shared, shared, {"k": shared}]) == 1 + 3 + 3 + 4


def test_expanded_size_stops_counting_past_the_limit():
    assert expanded_size([0] * 10, limit=10) == 11
    assert expanded_size([0] * 9, limit=10) == 10
    assert expanded_size([[0] * 9], limit=10) == 11
    assert expanded_size([[0] * 8], limit=10) == 10
    assert expanded_size([[0] * 8, 1], limit=10) == 11


def test_an_alias_bomb_expands_past_the_limit_without_being_expanded():
    level: list = ["x"] * 10
    for _ in range(9):
        level = [level] * 10  # ten uses of the same list: 10**10 values once written out
    assert expanded_size(level) == safe_yaml.MAX_EXPANDED_NODES + 1


def test_a_value_that_holds_itself_expands_without_end_and_is_measured_as_past_the_limit():
    loop: list = [1]
    loop.append(loop)
    assert expanded_size({"a": loop}, limit=50) == 51
    mapping: dict = {}
    mapping["self"] = {"back": mapping}
    assert expanded_size(mapping) == safe_yaml.MAX_EXPANDED_NODES + 1


def test_nesting_far_deeper_than_pythons_recursion_limit_is_measured():
    doc: list = []
    inner = doc
    for _ in range(5000):
        inner.append([])
        inner = inner[0]
    assert expanded_size(doc) == 5001


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_a_file_is_read_one_byte_past_the_bound_and_no_further(tmp_path, monkeypatch):
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a" * 100)
    asked: list[int | None] = []
    real_open = open

    class Handle:
        def __init__(self, *args):
            self.inner = real_open(*args)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

        def read(self, size=None):
            asked.append(size)
            return self.inner.read(size)

    monkeypatch.setattr(safe_yaml, "open", Handle, raising=False)
    assert parts(refusal(read_text, path, max_bytes=10)) == (
        "(file)", "larger than 10 bytes, far more than such a file ever holds", "point at the right file")
    assert asked == [11]


def test_mappings_nested_hundreds_deep_are_refused_by_the_nesting_bound_not_by_python():
    error = refusal(load_yaml, "{a: " * 500 + "1" + "}" * 500)
    assert parts(error) == ("(file)", f"nested deeper than {MAX_DEPTH} levels", "flatten the file")


def test_the_mapping_constructor_given_another_node_fails_as_pyyaml_does():
    from yaml.constructor import ConstructorError
    from yaml.nodes import ScalarNode

    with pytest.raises(ConstructorError, match="expected a mapping node, but found scalar"):
        safe_yaml._Loader("").construct_mapping(ScalarNode("tag:yaml.org,2002:str", "x"))


@pytest.mark.parametrize(("text", "line"), [("a\nb\nc: \x07", "line 3"), ("\na: \x07", "line 2"),
                                            ("a: b & c\nd: \x07\n", "line 2")])
def test_a_character_yaml_refuses_is_placed_on_its_line_by_its_offset(text, line):
    assert refusal(load_yaml, text).where == line


def test_an_error_placed_only_by_its_context_names_that_line():
    import yaml

    mark = yaml.Mark("f", 0, 4, 2, None, None)  # pyright: ignore[reportArgumentType]  # no buffer: no snippet
    assert safe_yaml._mark_line(yaml.MarkedYAMLError(context="while parsing", context_mark=mark),
                                "a\nb\nc\nd\ne\nf\n") == "line 5"


def test_an_error_without_a_place_is_about_the_file_and_shows_its_first_line():
    import yaml

    assert safe_yaml._mark_line(yaml.YAMLError("first\nsecond"), "a\nb\n") == "(file)"
    assert safe_yaml._yaml_problem(yaml.YAMLError("first\nsecond")) == "not valid YAML: first"


def test_a_short_reason_is_the_first_line_or_the_errors_type():
    assert safe_yaml._short(ValueError("first\nsecond")) == "first"
    assert safe_yaml._short(ValueError()) == "ValueError"


def test_an_alias_bombs_full_size_is_counted_from_its_distinct_values_without_expanding_it():
    level: list = ["x"] * 10
    for _ in range(9):
        level = [level] * 10
    assert expanded_size(level, limit=10**12) == 11_111_111_111  # 1 + 10 + … + 10**10, in microseconds


def test_a_documents_error_carries_its_reason_and_problem_for_each_caller_to_word_its_own_line():
    from model.safe_yaml import DocumentsError, yaml_documents

    with pytest.raises(DocumentsError) as invalid:
        yaml_documents(b"a: [\n")
    assert (invalid.value.reason, invalid.value.problem) == ("invalid", "did not find expected node content")
    assert str(invalid.value) == "invalid: did not find expected node content"
    bomb = [b"l0: &l0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]".encode() for i in range(1, 9)]
    with pytest.raises(DocumentsError) as expands:
        yaml_documents(b"\n".join(bomb))
    assert (expands.value.reason, expands.value.problem, str(expands.value)) == ("expands", "", "expands: ")


@pytest.mark.parametrize("value", [None, "text", 3, ["a"], ("a",)])
def test_where_a_mapping_is_expected_anything_else_reads_as_an_empty_one(value):
    from model.safe_yaml import as_mapping

    assert as_mapping(value) == {}


@pytest.mark.parametrize("value", [None, "text", 3, {"a": 1}, ("a",)])
def test_where_a_list_is_expected_anything_else_reads_as_an_empty_one(value):
    from model.safe_yaml import as_list

    assert as_list(value) == []


def test_a_mapping_or_a_list_where_one_is_expected_is_itself():
    from model.safe_yaml import as_list, as_mapping

    mapping, items = {"a": [1]}, [{"a": 1}]
    assert as_mapping(mapping) is mapping and as_list(items) is items


# --- files under OUT: anchors, aliases and merge keys as kustomize reads them --------------------------------------

OUT_ANCHORS = (b"name: &n first\nagain: *n\nother: &n second\nlatest: *n\n"
               b"merged:\n  <<: [{own: merged, first-long-key: a}, {first-long-key: b, later: c}]\n  own: kept\n")


@pytest.mark.parametrize("library", ["libyaml", "pure-python"])
def test_a_file_under_out_reads_redefined_anchors_and_merge_keys_alike_with_or_without_libyaml(monkeypatch, library):
    import yaml

    from model.safe_yaml import yaml_documents

    if library == "pure-python":
        monkeypatch.setattr(safe_yaml, "_BASE_LOADER", yaml.SafeLoader)
    text = OUT_ANCHORS + f"# {library}\n".encode()  # a content of its own: the parse cache keys on it
    assert yaml_documents(text) == ({"name": "first", "again": "first", "other": "second", "latest": "second",
                                     "merged": {"own": "kept", "first-long-key": "a", "later": "c"}},)


def test_merge_keys_copying_past_the_bound_are_refused_before_the_document_is_built():
    from model.safe_yaml import DocumentsError, yaml_documents

    chain = ["a0: &a0 {k0: 1}"] + [f"a{i}: &a{i} {{<<: *a{i - 1}, k{i}: 1}}" for i in range(1, 40_000)]
    started = time.perf_counter()
    with pytest.raises(DocumentsError) as expands:
        yaml_documents(("\n".join(chain) + "\n").encode())
    assert expands.value.reason == "expands"
    assert time.perf_counter() - started < 10, "refused as it copies, not after building 800 million keys"


def test_the_pyyaml_internals_the_out_loader_builds_on_are_still_there_as_it_calls_them():
    # A contract with PyYAML's undocumented API (safe_yaml's _KyamlMerges and _GoYamlAnchors override or call these):
    # a release that renames or reshapes one fails here, by name, before any reading of a user's file goes wrong.
    import inspect

    import yaml
    from yaml.composer import Composer
    from yaml.constructor import BaseConstructor, SafeConstructor
    from yaml.resolver import BaseResolver

    def parameters(function: Any) -> list[str]:
        return list(inspect.signature(function).parameters)

    assert parameters(Composer.compose_node) == ["self", "parent", "index"]
    assert parameters(SafeConstructor.flatten_mapping) == ["self", "node"]
    assert parameters(BaseConstructor.construct_document) == ["self", "node"]
    assert parameters(BaseResolver.resolve) == ["self", "kind", "value", "implicit"]
    composer = Composer.__new__(Composer)
    Composer.__init__(composer)
    assert composer.anchors == {}  # the table of anchors a document defined so far, emptied per document
    loader = yaml.CSafeLoader("a: 1") if yaml.__with_libyaml__ else yaml.SafeLoader("a: 1")
    assert callable(loader.peek_event)
    assert yaml.SafeLoader.yaml_implicit_resolvers["="][0][0] == "tag:yaml.org,2002:value"  # read as text instead
