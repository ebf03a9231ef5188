"""gitops/checks/base_merge.py judged directly: a token's name lands in every overlay's cluster-vars, so a change of
name is a change in the user's repository; each difference of shape and each base Kustomization no value makes safe
is one line naming the file, the field and each stack's value."""

from __future__ import annotations

import pytest

from gitops.checks.base_merge import (
    StackTreesMerger,
    _reads_as_other_type,
    _token_name,
    dotted,
    first_difference,
    shown_value,
    value_at,
)


def test_a_token_is_named_for_the_object_and_the_last_key_with_the_indices_after_it_and_numbered_when_taken():
    taken: set[str] = set()
    plex = {"metadata": {"name": "plex"}}
    assert [_token_name(plex, path, taken) for path in (
        "spec.replicas", "spec.template.spec.containers[0].env[2].value", "metadata.annotations.lb.cilium.io/ips",
        "spec.ports[1]", "[0]", "spec.replicas", "spec.replicas")] == [
        "GPU_PLATFORM_PLEX_REPLICAS", "GPU_PLATFORM_PLEX_VALUE", "GPU_PLATFORM_PLEX_IPS", "GPU_PLATFORM_PLEX_PORTS_1",
        "GPU_PLATFORM_PLEX_VALUE_2", "GPU_PLATFORM_PLEX_REPLICAS_2", "GPU_PLATFORM_PLEX_REPLICAS_3"]
    assert _token_name({}, "data.x", set()) == "GPU_PLATFORM_OBJECT_X"
    assert _token_name({"metadata": {"name": "intel-gpu.plugin"}}, "spec.a-b", set()) == \
        "GPU_PLATFORM_INTEL_GPU_PLUGIN_A_B"


def test_the_first_difference_is_found_key_by_key_and_item_by_item_and_shown_dotted():
    assert first_difference({"a": 1, "b": [1, {"c": 2}]}, {"a": 1, "b": [1, {"c": 3}]}) == ("b", 1, "c")
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == ("a",)  # lists of other lengths differ as a whole
    assert first_difference({1: "x", "b": 1}, {1: "y", "b": 2}) == (1,)  # keys in the order of their text
    assert first_difference({"z": 1, "a": 1}, {"z": 2, "a": 2}) == ("a",)
    assert first_difference("x", "y") == ()
    assert [dotted(p) for p in (("spec", "containers", 0, "image"), (), (0, "a"), ("a",))] == [
        "spec.containers[0].image", "(root)", "[0].a", "a"]


def test_a_value_is_looked_up_along_its_path_and_a_path_that_leaves_the_document_is_absent():
    doc = {"a": [{"b": 1}], "c": "x"}
    paths = (("a", 0, "b"), ("a", 1), ("c", "d"), ("a", "b"), ())
    assert [value_at(doc, p) for p in paths] == [1, None, None, None, doc]
    assert value_at([5, 6], (1,)) == 6 and value_at({"a": 1}, (0,)) is None


def test_a_value_is_shown_as_json_cut_at_eighty_characters_and_absence_says_so():
    assert shown_value(None) == "(absent)"
    assert shown_value({"b": 1, "a": "x"}) == '{"a": "x", "b": 1}'
    assert shown_value("x" * 78) == '"' + "x" * 78 + '"'  # 80 characters: whole
    assert shown_value("x" * 79) == '"' + "x" * 78 + "…"  # 81: cut to 79 and the ellipsis
    assert shown_value("abcdef", limit=5) == '"abc…'


@pytest.mark.parametrize(("text", "other"), [
    ("2", True), ("yes", True), ("null", True), ("1.5", True), ("~", True), ("a: b", True),
    ("abc", False), ("[a", False), ("plex", False), ("", True),
])
def test_a_string_yaml_would_read_as_another_type_is_quoted(text, other):
    assert _reads_as_other_type(text) is other


def test_differences_of_shape_name_what_each_stack_lacks_or_holds():
    merge = StackTreesMerger(["dev", "prod"])
    assert merge._shapes({"dev": {"a": 1, "b": 2}, "prod": {"a": 1, "c": 3}}) == "dev lacks c; prod lacks b"
    assert merge._shapes({"dev": [1], "prod": [1, 2]}) == "dev: 1 items, prod: 2 items"
    assert merge._shapes({"dev": "x", "prod": {"a": 1}}) == 'dev: "x", prod: (dict)'
    assert merge._each({"dev": None, "prod": [1]}) == "dev: (absent), prod: (list)"


def test_a_component_s_differing_scalars_become_tokens_each_stack_s_value_kept_and_shapes_refused():
    merge = StackTreesMerger(["dev", "prod"])
    dev = {"metadata": {"name": "plex"}, "spec": {"replicas": 1, "ip": "10.0.0.1", "on": True, "same": "x"}}
    prod = {"metadata": {"name": "plex"}, "spec": {"replicas": 2, "ip": "10.0.0.2", "on": True, "same": "x"}}
    out = merge.component("c/plex.yaml", {"dev": dev, "prod": prod})
    assert out["spec"]["same"] == "x" and out["spec"]["on"] is True
    assert (out["spec"]["replicas"].name, out["spec"]["replicas"].quoted) == ("GPU_PLATFORM_PLEX_REPLICAS", False)
    assert merge.tokens == {"dev": {"GPU_PLATFORM_PLEX_REPLICAS": "1", "GPU_PLATFORM_PLEX_IP": "10.0.0.1"},
                            "prod": {"GPU_PLATFORM_PLEX_REPLICAS": "2", "GPU_PLATFORM_PLEX_IP": "10.0.0.2"}}
    quoted = merge.component("c/x.yaml", {"dev": {"metadata": {"name": "x"}, "v": "2"},
                                          "prod": {"metadata": {"name": "x"}, "v": "abc"}})
    assert quoted["v"].quoted is True
    assert merge.problems == []
    named = merge.component("c/y.yaml", {"dev": {"metadata": {"name": "a"}}, "prod": {"metadata": {"name": "b"}}})
    assert named == {"metadata": {"name": "a"}}
    assert merge.problems == [
        "c/y.yaml: metadata.name: differs in shape between the stacks of the shared base (dev: \"a\", prod: \"b\"); "
        "one file in the base cannot be both; hint: make the stacks' config agree there, or give each cluster its "
        "own layout"]


def test_the_first_difference_reaches_a_key_one_side_lacks_and_stops_where_the_types_part():
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ("b",)
    assert first_difference({"a": {"x": 1}}, {"a": 5}) == ("a",)
    assert first_difference({"a": 5}, {"a": {"x": 1}}) == ("a",)


def test_a_value_json_cannot_hold_is_shown_as_its_text():
    import datetime

    assert shown_value({"since": datetime.date(2026, 12, 5)}) == '{"since": "2026-12-05"}'  # YAML reads dates as dates


def test_a_token_name_takes_the_last_part_of_a_slashed_key_every_index_after_it_and_no_edge_underscore():
    plex = {"metadata": {"name": "plex"}}
    assert [_token_name(plex, path, set()) for path in (
        "metadata.annotations.example.com/a/b", "spec.matrix[1][2]", "data.key-", "data.indeX")] == [
        "GPU_PLATFORM_PLEX_B", "GPU_PLATFORM_PLEX_MATRIX_1_2", "GPU_PLATFORM_PLEX_KEY", "GPU_PLATFORM_PLEX_INDEX"]


def test_one_stack_merges_to_itself_and_a_root_that_differs_in_shape_is_named_root():
    alone = StackTreesMerger(["dev"])
    doc = {"kind": "Kustomization", "spec": {"timeout": "5m"}}
    assert alone.component("c/a.yaml", {"dev": {"a": 1}}) == {"a": 1}
    assert alone.flux_kustomization("clusters/base/ks.yaml", {"dev": doc}) == doc
    assert alone.problems == []
    merge = StackTreesMerger(["dev", "prod", "test"])
    assert merge.component("c/a.yaml", {"dev": {"a": 1}, "prod": {"b": 1}, "test": {"a": 1}}) == {"a": 1}
    assert merge.problems == [
        "c/a.yaml: (root): differs in shape between the stacks of the shared base (dev lacks b; prod lacks a; test "
        "lacks b); one file in the base cannot be both; hint: make the stacks' config agree there, or give each "
        "cluster its own layout"]
    assert merge._shapes({"dev": {"a": 1}, "prod": {"a": 1, "b": 2, "c": 3}}) == "dev lacks b, c"


def test_a_base_kustomization_no_value_of_makes_safe_is_refused_once_and_the_first_stacks_stands():
    merge = StackTreesMerger(["dev", "prod", "test"])
    docs = {s: {"kind": "Kustomization", "spec": {"timeout": t, "path": p}}
            for s, t, p in (("dev", "4m", "./a"), ("prod", "10m", "./b"), ("test", "1m", "./c"))}
    assert merge.flux_kustomization("clusters/base/ks.yaml", docs) == {
        "kind": "Kustomization", "spec": {"timeout": "10m", "path": "./a"}}
    assert merge.problems == [
        'clusters/base/ks.yaml: spec.path: differs between the stacks of the shared base (dev: "./a", prod: "./b", '
        'test: "./c"); a Flux Kustomization in the base is applied as written (the overlay\'s root Kustomization '
        "substitutes no variable) and no value is safe for every stack; hint: make the stacks' config agree there"]
