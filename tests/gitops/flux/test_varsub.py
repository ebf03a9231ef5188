"""gitops/flux/varsub.py, called directly: Flux's postBuild substitution (known values, defaults, escapes, a
disabled object), the variables left unresolved at their field paths, and the YAML type a whole substituted variable
takes again, as `flux build` prints it."""

from __future__ import annotations

import pytest

from gitops.flux.varsub import substitute, unresolved_variables

# --- substitution and unresolved variables -------------------------------------------------------------------------

def test_known_values_are_substituted_and_defaults_apply_only_to_undefined_variables():
    variables = {"A": "1", "SECRET": None, "EMPTY": ""}
    doc = {"a": "${A}-${A:=9}", "b": ["${B:=2}", "${B:-3}", "${B=4}", "${B-5}"], "c": "${SECRET}", "d": "${UNSET}",
           "e": "$${A}", "f": 7, "g": "${EMPTY}x", "h": "${SECRET:=d}"}
    assert substitute(doc, variables) == {"a": "1-1", "b": ["2", "3", "4", "5"], "c": "${SECRET}", "d": "${UNSET}",
                                          "e": "$${A}", "f": 7, "g": "x", "h": "${SECRET:=d}"}


def test_a_variable_without_a_value_or_a_default_is_unresolved_at_its_field_path():
    doc = {"metadata": {"name": "${NAME}"}, "data": {"a": "${A:=1} ${B}", "list": ["x", "${C}"]},
           "spec": {"known": "${K}", "secret": "${S}", "escaped": "$${E}", "odd": "${9X}"}}
    assert unresolved_variables(doc, {"K": "v", "S": None}) == [
        ("metadata.name", "NAME"), ("data.a", "B"), ("data.list[1]", "C"), ("spec.odd", "9X")]


def test_a_disabled_substitution_leaves_variables_alone():
    doc = {"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/substitute": "disabled"}}, "data": "${X}"}
    assert unresolved_variables(doc, {}) == []
    doc["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/substitute"] = "enabled"
    assert unresolved_variables(doc, {}) == [("data", "X")]


def test_variables_without_a_value_or_default_are_unresolved_and_disabled_objects_are_skipped():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
           "data": {"a": "${KNOWN}", "b": "${MISSING}", "c": "${DEFAULTED:=1}", "d": "$${ESCAPED}"}}
    assert unresolved_variables(obj, {"KNOWN": "1"}) == [("data.b", "MISSING")]
    obj["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/substitute": "disabled"}
    assert unresolved_variables(obj, {}) == []


def test_a_reference_that_is_not_a_variable_name_is_left_as_written():
    assert substitute("${9X} ${-}", {"X": "1"}) == "${9X} ${-}"


# --- a whole variable typed again after substitution --------------------------------------------------------------

def test_a_whole_variable_is_typed_again_after_substitution_quoted_or_not_as_flux_build_prints_it():
    """kustomize writes `"${N}"` without its quotes, Flux substitutes that text and reads it with go-yaml v2's YAML
    1.1 types: flux build 2.9.5 prints `2` for plain and quoted alike, `true` for `yes` (tests/differential found the
    walk keeping the quoted one a string). A line break in the value is taken out, as Flux's LoadVariables does."""
    from gitops.flux.documents import load_docs
    from gitops.flux.varsub import substitute

    doc = load_docs(b"apiVersion: v1\nkind: ConfigMap\nplain: ${N}\nquoted: \"${N}\"\nsingle: '${N}'\n"
                     b"inside: x${N}\nword: ${W}\nflag: ${B}\n", "f.yaml")[0]
    assert substitute(doc, {"N": "2", "W": "yes", "B": "true"}) == {
        "apiVersion": "v1", "kind": "ConfigMap", "plain": 2, "quoted": 2, "single": 2, "inside": "x2",
        "word": True, "flag": True}
    assert substitute(doc, {}) == doc  # nothing known: every value as written


@pytest.mark.parametrize(("text", "value"), [
    # as `flux build kustomization --dry-run` 2.9.5 prints a ConfigMap whose `a: ${A}` was given each text
    ("true", True), ("True", True), ("no", False), ("off", False), ("y", True), ("n", False), ("yes", True),
    ("null", None), ("NULL", None), ("~", None), ("", None), ("0777", 511), ("0x1F", 31), ("0o17", 15),
    ("1e3", 1000.0), ("1.5", 1.5), ("2020-01-01", "2020-01-01"), ("eu-west", "eu-west"), ("-3", -3)])
def test_a_substituted_plain_scalar_takes_go_yaml_v2_s_type_as_flux_build_prints_it(text, value):
    from gitops.flux.varsub import _retyped

    assert _retyped(text) == value and type(_retyped(text)) is type(value)
