"""gitops/repo/edits.py: text edits of the user's hand-written kustomization.yaml and cluster-vars ConfigMap. What is
checked is the diff the user reviews: exactly the line added or removed, every other byte as it was, and one
refusal with the line to write by hand when the file is of a shape a text edit cannot be sure of."""

from __future__ import annotations

import json
import posixpath
import re

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from yamllint import linter
from yamllint.config import YamlLintConfig

from gitops.repo.edits import (
    EditRefused,
    add_resource,
    data_values,
    listed_resources,
    remove_data_keys,
    remove_resource,
    set_data_keys,
)

HEADER = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
KUSTOMIZATION = (HEADER + "# the apps of the lab\nresources:\n  - ./flux-system  # bootstrap\n  # later: ./extra\n"
                 "  - 'quoted'\n  - \"double\"\n# nothing below is a resource\n")
CLUSTER_VARS = ("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\n"
                "data:\n  CLUSTER_DOMAIN: lab.example  # the public one\n  TIMEZONE: 'Europe/Paris'\n"
                "  # more below\n")
ONE_LINE = re.compile(r"[^\n]+")


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode()


def inserted_once(before: bytes, after: bytes, line: bytes) -> bool:
    """`after` is `before` with `line` put at one place, nothing else changed."""
    return any(after == before[:at] + line + before[at:] for at in range(len(before) + 1))


# --- resources: the round trip ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", [
    lambda text: text.encode(),
    crlf,
    lambda text: b"\xef\xbb\xbf" + text.encode(),
    lambda text: text.rstrip("\n").encode(),
    lambda text: b"\xef\xbb\xbf" + crlf(text.rstrip("\n")),
], ids=["lf", "crlf", "bom", "no-final-newline", "bom-crlf-no-final-newline"])
def test_an_added_resource_is_one_new_line_after_the_last_item_and_removing_it_gives_back_every_byte(variant):
    before = variant(KUSTOMIZATION)
    eol = b"\r\n" if b"\r\n" in before else b"\n"
    after = add_resource(before, "./apps/lab")
    assert inserted_once(before, after, eol + b"  - ./apps/lab")
    # After the last item's line (its comment kept on it), before the comment lines that close the list.
    assert b"- \"double\"" + eol + b"  - ./apps/lab" + eol + b"# nothing below" in after
    assert listed_resources(after) == ["./flux-system", "quoted", "double", "./apps/lab"]
    assert remove_resource(after, "./apps/lab") == before


@pytest.mark.parametrize("indent", ["", "  ", "    "])
def test_the_new_item_takes_the_dash_column_of_the_items_already_there(indent):
    before = f"{HEADER}resources:\n{indent}- a\n{indent}- b\n".encode()
    assert add_resource(before, "c") == f"{HEADER}resources:\n{indent}- a\n{indent}- b\n{indent}- c\n".encode()


def test_the_new_item_goes_after_a_trailing_comment_of_the_last_item_which_stays_on_its_line():
    before = f"{HEADER}resources:\n- a  # why a\n".encode()
    assert add_resource(before, "b") == f"{HEADER}resources:\n- a  # why a\n- b\n".encode()


def test_keys_after_the_list_stay_where_they_are():
    before = f"{HEADER}resources:\n- a\nnamespace: lab\n".encode()
    assert add_resource(before, "b") == f"{HEADER}resources:\n- a\n- b\nnamespace: lab\n".encode()


def test_an_entry_listed_already_gives_back_the_same_bytes_quoted_or_not():
    before = KUSTOMIZATION.encode()
    for entry in ("./flux-system", "quoted", "double"):
        assert add_resource(before, entry) is before
    assert remove_resource(before, "./not-there") is before


def test_quoted_items_are_kept_as_written_and_removing_one_takes_its_whole_line():
    before = KUSTOMIZATION.encode()
    assert remove_resource(before, "quoted") == KUSTOMIZATION.replace("\n  - 'quoted'", "").encode()
    assert remove_resource(before, "./flux-system") == KUSTOMIZATION.replace(
        "\n  - ./flux-system  # bootstrap", "").encode()


def test_an_entry_that_would_not_read_back_as_itself_is_written_quoted():
    before = f"{HEADER}resources:\n- a\n".encode()
    assert add_resource(before, "yes").endswith(b'- "yes"\n')
    assert add_resource(before, "a: b").endswith(b'- "a: b"\n')
    assert listed_resources(add_resource(before, "# x")) == ["a", "# x"]


@pytest.mark.parametrize("before", [b"", b"# only a comment\n", b"# only a comment", b"\n\n", crlf("# c\n# d\n"),
                                    b"\xef\xbb\xbf# c\n"])
def test_an_empty_or_comments_only_file_gets_the_key_and_the_item_and_loses_them_again(before):
    after = add_resource(before, "./apps")
    eol = b"\r\n" if b"\r\n" in before else b"\n"
    assert after.startswith(before)
    final = eol if before in (b"", b"\xef\xbb\xbf") or before.endswith(b"\n") else b""
    assert after.endswith(b"resources:" + eol + b"- ./apps" + final)
    assert yaml.safe_load(after.removeprefix(b"\xef\xbb\xbf")) == {"resources": ["./apps"]}
    assert remove_resource(after, "./apps") == before


def test_a_file_without_a_final_newline_keeps_it_missing_when_the_key_is_added():
    assert add_resource(b"# c", "x") == b"# c\nresources:\n- x"


def test_removing_the_last_item_of_a_list_the_user_wrote_leaves_the_key():
    before = f"{HEADER}resources:\n- a\n".encode()
    assert remove_resource(before, "a") == f"{HEADER}resources:\n".encode()


def test_listed_resources_reads_flow_style_lists_and_a_file_without_resources():
    assert listed_resources(f"{HEADER}resources: [a, 'b']\n".encode()) == ["a", "b"]
    assert listed_resources(HEADER.encode()) == []
    assert listed_resources(b"") == []


@pytest.mark.parametrize("spelling", ["./b.yaml", "'b.yaml'", '"./b.yaml"', "b.yaml  # why", "b.yaml/", "x/../b.yaml"])
def test_the_entry_in_another_spelling_of_the_same_file_is_the_entry_kept_as_written_and_removed_whole(spelling):
    before = f"{HEADER}resources:\n  - a\n  - {spelling}\n".encode()
    assert add_resource(before, "b.yaml") is before
    assert remove_resource(before, "b.yaml") == f"{HEADER}resources:\n  - a\n".encode()


def test_a_remote_resource_is_never_taken_for_a_local_one():
    before = f"{HEADER}resources:\n  - https://example.org//b.yaml\n".encode()
    assert add_resource(before, "b.yaml").endswith(b"  - b.yaml\n")
    assert remove_resource(before, "b.yaml") is before


def test_the_entry_listed_in_two_spellings_is_refused_naming_both_with_their_lines():
    before = f"{HEADER}resources:\n  - b.yaml\n  - \"./b.yaml\"  # mine\n".encode()
    for edit in (add_resource, remove_resource):
        with pytest.raises(EditRefused) as refused:
            edit(before, "b.yaml")
        assert refused.value.line("clusters/base/kustomization.yaml") == (
            'clusters/base/kustomization.yaml: resources: `b.yaml` (line 4) and `"./b.yaml"` (line 5) name one file, '
            "which kustomize refuses to list twice; hint: delete one of the two lines")


# --- resources: refusals ----------------------------------------------------------------------------------------------


GENERATOR = "a generator: the export does not edit a kustomization whose output depends on generator options"
REFUSED = [  # (text, the line's key, its problem, what the hint asks before the line to add or delete)
    (b"resources:\n- a\n  b: [\n", "(file)", "not valid YAML (line 3): mapping values are not allowed in this context",
     ""),
    (b"resources:\n- a\n---\nresources:\n- b\n", "(file)", "2 YAML documents where a kustomization is one", ""),
    (b"- a\n", "(file)", "the top level is a list, not the mapping of a kustomization", ""),
    (b"resources: [a, b]\n", "resources", "is a list in flow style ([...]), not a list in block style (one `- item` a "
     "line)", ""),
    (b"resources:\n", "resources", "is empty (null), not a list in block style (one `- item` a line)", ""),
    (b"resources: ./a\n", "resources", "is a single value, not a list in block style (one `- item` a line)", ""),
    (b"resources:\n  ./a: x\n", "resources", "is a mapping, not a list in block style (one `- item` a line)", ""),
    (b"resources:\n- a\n- {path: b}\n", "resources", "the item on line 3 is a mapping in flow style ({...}), not a "
     "plain one-line value", ""),
    (b"resources:\n- |\n  a\n", "resources", "the item on line 2 is a block scalar (| or >), not a plain one-line "
     "value", ""),
    (b"resources:\n- a\n  b\n", "resources", "the item on line 2 is a value over several lines, not a plain one-line "
     "value", ""),
    (b"resources:\n-\n  a\n", "resources", "the item on line 3 does not start its line as `- item`", ""),
    (b"resources:\n- \n", "resources", "the item on line 2 is empty", ""),
    (b"resources:\n- 12\n", "resources", "the item on line 2 is not a string (YAML reads `12` as int)", "quote it; "),
    (b"resources:\n- &first a\n", "(file)", "an anchor &first on line 2: anchors, aliases and tags are refused in a "
     "file edited as text", ""),
    (b"base: &b a\nresources:\n- *b\n", "(file)", "an anchor &b on line 1: anchors, aliases and tags are refused in "
     "a file edited as text", ""),
    (b"resources:\n- !!str a\n", "(file)", "the tag !!str on line 2: anchors, aliases and tags are refused in a file "
     "edited as text", ""),
    (b"resources: !custom\n- a\n", "(file)", "the tag !custom on line 1: anchors, aliases and tags are refused in a "
     "file edited as text", ""),
    (b"resources:\n- a\nconfigMapGenerator:\n- name: x\n", "configMapGenerator", GENERATOR, ""),
    (b"secretGenerator: []\nresources:\n- a\n", "secretGenerator", GENERATOR, ""),
    (b"generators:\n- g.yaml\nresources:\n- a\n", "generators", GENERATOR, ""),
    (b"helmCharts: []\nresources:\n- a\n", "helmCharts", GENERATOR, ""),
    (b"resources:\n- a\nresources:\n- b\n", "resources", "the key resources is there twice (lines 1 and 3); YAML "
     "readers silently keep one of them", "keep one; "),
    (b"\xffresources:\n- a\n", "(file)", "not UTF-8 text (byte 0xff at offset 0)", ""),
    (b"resources:\n- a\x00\n", "(file)", "not valid YAML: unacceptable character #x0000: control characters are not "
     "allowed", ""),
    ("# a\u2028b\nresources:\n- a\n".encode(), "(file)", "the character U+2028 at offset 3, a line break to some YAML "
     "readers and not to others", "remove it; "),
    (b"resources:\n- " + b"[" * 100 + b"]" * 100 + b"\n", "(file)", "nested deeper than 64 levels (line 2)", ""),
    (b"[" * 5000 + b"]" * 5000, "(file)", "not valid YAML (line 1): exceeded maximum nesting depth", ""),
    (b"# " + b"x" * (1 << 20) + b"\nresources:\n- a\n", "(file)", "larger than 1048576 bytes, far more than a "
     "hand-written file of this kind holds", ""),
    (b"? [a]\n: b\n", "(file)", "a list in flow style ([...]) used as a key on line 1", ""),
]


@pytest.mark.parametrize("text,path,problem,fix", REFUSED, ids=[f"{path}-{problem[:40]}" for _, path, problem, _ in
                                                                  REFUSED])
def test_a_kustomization_of_a_shape_a_text_edit_cannot_be_sure_of_is_refused_with_the_line_to_add(text, path,
                                                                                                   problem, fix):
    with pytest.raises(EditRefused) as refused:
        add_resource(text, "./apps/lab")
    assert (refused.value.path, refused.value.problem) == (path, problem)
    assert refused.value.line("clusters/lab/kustomization.yaml") == (
        f"clusters/lab/kustomization.yaml: {path}: {problem}; hint: {fix}add the line `- ./apps/lab` to the "
        "`resources:` list by hand")
    with pytest.raises(EditRefused) as refused:
        remove_resource(text, "./apps/lab")
    assert refused.value.line("clusters/lab/kustomization.yaml") == (
        f"clusters/lab/kustomization.yaml: {path}: {problem}; hint: {fix}delete the line `- ./apps/lab` from the "
        "`resources:` list by hand")


def test_a_kustomization_with_other_keys_and_no_resources_key_is_refused_with_both_lines_to_add():
    with pytest.raises(EditRefused) as refused:
        add_resource(HEADER.encode(), "./apps")
    assert str(refused.value) == ("resources: no `resources:` key in a kustomization that has other keys; hint: add "
                                  "the lines `resources:` and `- ./apps` by hand")
    assert remove_resource(HEADER.encode(), "./apps") == HEADER.encode()  # nothing listed, nothing to remove


def test_reading_refuses_what_cannot_be_read_but_not_what_only_an_edit_avoids():
    assert listed_resources(b"resources:\n- a\nhelmCharts: []\n") == ["a"]
    with pytest.raises(EditRefused) as refused:
        listed_resources(b"a: 1\n---\nb: 2\n")
    assert refused.value.line("clusters/lab/kustomization.yaml") == (
        "clusters/lab/kustomization.yaml: (file): 2 YAML documents where a kustomization is one; hint: fix the "
        "kustomization by hand")


# --- resources: properties --------------------------------------------------------------------------------------------

NAMES = st.text(alphabet="abc", min_size=1, max_size=2).flatmap(
    lambda head: st.text(alphabet="abc./-", max_size=3).map(lambda tail: head + tail))
COMMENTS = st.lists(st.text(alphabet="ab -", max_size=6).map(lambda words: f"# {words}".rstrip()), max_size=2)


@st.composite
def kustomizations(draw) -> tuple[bytes, list[str], str]:
    """A kustomization as people write them (bytes, its items, the line ending), yamllint-clean often enough."""
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    indent = " " * draw(st.sampled_from([0, 2, 4]))
    items = draw(st.lists(NAMES, min_size=1, max_size=5))
    lines = [*draw(COMMENTS), "apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization",
             *draw(COMMENTS), "resources:"]
    for item in items:
        lines += [indent + comment for comment in draw(COMMENTS)]
        quote = draw(st.sampled_from(["", "'", '"']))
        trailing = draw(st.sampled_from(["", "  # why", "   #"]))
        lines.append(f"{indent}- {quote}{item}{quote}{trailing}")
    lines += [indent + comment for comment in draw(COMMENTS)]
    lines += draw(st.sampled_from([[], ["namespace: lab"], ["namespace: lab", "# end"]]))
    text = eol.join(lines) + (eol if draw(st.booleans()) else "")
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + text.encode(), items, eol


LINT = YamlLintConfig("{extends: default, rules: {indentation: {indent-sequences: consistent}, "
                      "document-start: disable}}")


def lint_errors(data: bytes) -> list[str]:
    return [f"{p.line}:{p.column} {p.desc}" for p in linter.run(data, LINT) if p.level == "error"]


@settings(max_examples=150, deadline=None)
@given(kustomization=kustomizations(), entry=NAMES)
def test_adding_any_entry_to_any_kustomization_adds_exactly_one_line_and_removing_it_restores_every_byte(
        kustomization, entry):
    before, items, eol = kustomization
    assert listed_resources(before) == items
    # kustomize resolves each item against the kustomization's folder: `./a`, `a/` and `b/../a` are one file.
    spellings = [item for item in items if posixpath.normpath(item) == posixpath.normpath(entry)]
    if len(spellings) > 1:
        with pytest.raises(EditRefused):
            add_resource(before, entry)
        return
    after = add_resource(before, entry)
    if spellings:
        assert after == before
        return
    assert yaml.safe_load(after.removeprefix(b"\xef\xbb\xbf"))["resources"] == [*items, entry]
    indent = re.search(rb"^( *)- ", before.removeprefix(b"\xef\xbb\xbf"), re.M)
    assert indent is not None
    assert inserted_once(before, after, f"{eol}{indent.group(1).decode()}- {entry}".encode())
    assert remove_resource(after, entry) == before
    if not lint_errors(before):
        assert lint_errors(after) == []


def test_a_file_that_passes_yamllint_still_passes_once_an_item_is_added():
    for before in (KUSTOMIZATION.encode(), f"{HEADER}resources:\n- a\n- b  # two\n".encode()):
        assert lint_errors(before) == []
        assert lint_errors(add_resource(before, "./apps/lab")) == []


# --- data keys --------------------------------------------------------------------------------------------------------


def test_a_missing_key_is_added_after_the_last_entry_double_quoted_and_removing_it_gives_back_every_byte():
    before = CLUSTER_VARS.encode()
    after = set_data_keys(before, {"SECRET_DOMAIN": "lab.example.org"})
    assert after == CLUSTER_VARS.replace("'Europe/Paris'\n", "'Europe/Paris'\n  SECRET_DOMAIN: \"lab.example.org\"\n"
                                         ).encode()
    assert data_values(after) == {"CLUSTER_DOMAIN": "lab.example", "TIMEZONE": "Europe/Paris",
                                  "SECRET_DOMAIN": "lab.example.org"}
    assert remove_data_keys(after, ["SECRET_DOMAIN"]) == before


def test_an_existing_value_is_replaced_in_place_and_the_rest_of_its_line_kept():
    before = CLUSTER_VARS.encode()
    after = set_data_keys(before, {"CLUSTER_DOMAIN": "home.example", "TIMEZONE": "UTC"})
    assert after == CLUSTER_VARS.replace("lab.example  #", '"home.example"  #').replace(
        "'Europe/Paris'", '"UTC"').encode()


def test_equal_values_give_back_the_same_bytes_and_absent_keys_remove_nothing():
    before = CLUSTER_VARS.encode()
    assert set_data_keys(before, {"CLUSTER_DOMAIN": "lab.example", "TIMEZONE": "Europe/Paris"}) is before
    assert remove_data_keys(before, ["NOT_THERE"]) is before


def test_several_new_keys_go_in_sorted_order_and_a_value_that_is_not_a_string_is_replaced_by_one():
    before = b"kind: ConfigMap\nmetadata:\n  name: cluster-vars\ndata:\n  PORT: 8080\n  EMPTY:\n"
    after = set_data_keys(before, {"Z": "z", "A": "a", "PORT": "8080", "EMPTY": ""})
    assert after == (b'kind: ConfigMap\nmetadata:\n  name: cluster-vars\ndata:\n  PORT: "8080"\n  EMPTY: ""\n'
                     b'  A: "a"\n  Z: "z"\n')


def test_values_are_escaped_so_that_they_read_back_as_given():
    values = {"A": 'quote " and \\ and \n and \u2028 and \x85 and \t', "B": "# not a comment", "C": "true",
              "D": "\U0001f600 \x7f"}
    after = set_data_keys(CLUSTER_VARS.encode(), values)
    assert all(ONE_LINE.fullmatch(line) for line in after.decode().split("\n")[:-1])
    assert yaml.safe_load(after)["data"] == {"CLUSTER_DOMAIN": "lab.example", "TIMEZONE": "Europe/Paris", **values}
    assert data_values(after) == {"CLUSTER_DOMAIN": "lab.example", "TIMEZONE": "Europe/Paris", **values}


def test_a_key_that_would_not_read_back_as_a_string_is_quoted():
    after = set_data_keys(CLUSTER_VARS.encode(), {"123": "x", "on": "y", "y": "z"})
    assert b'\n  "123": "x"\n  "on": "y"\n  "y": "z"\n' in after
    assert yaml.safe_load(after)["data"]["on"] == "y"


def test_a_document_without_data_gets_the_block_at_its_end_with_its_indentation_and_loses_it_again():
    before = crlf("kind: ConfigMap\nmetadata:\n    name: cluster-vars\n    labels: {a: b}\n---\nkind: Other\n")
    after = set_data_keys(before, {"B": "2", "A": "1"})
    assert after == crlf('kind: ConfigMap\nmetadata:\n    name: cluster-vars\n    labels: {a: b}\ndata:\n    A: "1"\n'
                         '    B: "2"\n---\nkind: Other\n')
    assert remove_data_keys(after, ["A", "B"]) == before


def test_the_document_is_found_by_kind_and_name_among_others_and_a_patch_of_it_counts():
    before = (b"kind: ConfigMap\nmetadata:\n  name: other\ndata:\n  A: '1'\n---\n"
              b"kind: ConfigMap\nmetadata: {name: cluster-vars}\ndata:\n  A: '2'\n")
    assert data_values(before) == {"A": "2"}
    assert data_values(before, name="other") == {"A": "1"}
    assert set_data_keys(before, {"A": "3"}).endswith(b'data:\n  A: "3"\n')
    assert data_values(b"kind: ConfigMap\nmetadata:\n  name: cluster-vars\n") == {}


CM = b"kind: ConfigMap\nmetadata:\n  name: cluster-vars\n"
BLOCK = "not a mapping in block style (one `KEY: value` a line)"
NO_MARKS = "anchors, aliases and tags are refused in a file edited as text"
NO_EDIT = "and the export edits no document with anchors, aliases or tags"
REWRITE = "which the export cannot edit without rewriting your lines"
# What a refusal of the edit adds after the lines to set: read back in any style, they ask for no edit.
THEN = "; the next export finds them there and edits nothing"
DATA_REFUSED = [  # (text, the line's key, its problem, what the hint asks before the lines to set, and after them)
    (b"kind: ConfigMap\nmetadata:\n  name: other\n", "(file)", "no document of kind ConfigMap cluster-vars (kind: and "
     "metadata.name:)", "", ""),
    (CM + b"---\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n", "(file)",
     "2 documents of kind ConfigMap cluster-vars (lines 1 and 5)", "keep one; ", ""),
    (CM + b"data: {A: '1'}\n", "data (line 4)", f"in flow style ({{...}}), {REWRITE}", "", THEN),
    (CM + b"data:\n", "data", f"is empty (null), {BLOCK}", "", ""),
    (CM + b"data:\n- a\n", "data", f"is a list, {BLOCK}", "", ""),
    (CM + b"data:\n  A: |\n    x\n", "data.A", "the value on line 5 is a block scalar (| or >), not a one-line value",
     "", THEN),
    (CM + b"data:\n  A: 'x\n    y'\n", "data.A", "the value on line 5 is a value over several lines, not a one-line "
     "value", "", THEN),
    (CM + b"data:\n  A:\n    x\n", "data.A", "the entry on line 5 is not one `KEY: value` line", "", THEN),
    (CM + b"data:\n  1: x\n", "data.1", "the key on line 5 is not a string (YAML reads it as int)", "quote it; ",
     THEN),
    (CM + b"data:\n  A: &a x\n", "data (line 4)", f"its document holds an anchor &a on line 5, {NO_EDIT}", "", THEN),
    (CM + b"data:\n  A: !!str x\n", "data (line 4)", f"its document holds the tag !!str on line 5, {NO_EDIT}", "",
     THEN),
    (b"kind: ConfigMap\nmetadata: &m\n  name: cluster-vars\n", "(file)",
     f"the ConfigMap cluster-vars document (line 1) holds an anchor &m on line 2, {NO_EDIT}", "", THEN),
    (CM + b"data:\n  A: x\n  A: y\n", "data.A", "the key A is there twice (lines 5 and 6); YAML readers silently keep "
     "one of them", "keep one; ", ""),
    (CM + b"data:\n  A: x\ndata:\n  B: y\n", "data", "the key data is there twice (lines 4 and 6); YAML readers "
     "silently keep one of them", "keep one; ", ""),
    (b"{kind: ConfigMap, metadata: {name: cluster-vars}}\n", "(file)", "the ConfigMap cluster-vars document (line 1) "
     "is a mapping in flow style ({...}), which the export cannot add a `data:` block to without rewriting your lines",
     "", THEN),
    (CM + b"note: |\n  x\n", "(file)", "the document ends with a block scalar (| or >, line 4), after which a new "
     "key's place is not certain", "", THEN),
    (CM + b"data:\n  A: [\n", "(file)", "not valid YAML (line 6): did not find expected node content", "", ""),
]


@pytest.mark.parametrize("text,path,problem,fix,then", DATA_REFUSED,
                         ids=[f"{path}-{problem[:40]}" for _, path, problem, _, _ in DATA_REFUSED])
def test_a_configmap_of_a_shape_a_text_edit_cannot_be_sure_of_is_refused_with_the_lines_to_set(text, path, problem,
                                                                                                fix, then):
    with pytest.raises(EditRefused) as refused:
        set_data_keys(text, {"NEW": "v", "B": "w"})
    assert (refused.value.path, refused.value.problem) == (path, problem)
    assert refused.value.line("kubernetes/flux/vars/cluster-vars.yaml") == (
        f"kubernetes/flux/vars/cluster-vars.yaml: {path}: {problem}; hint: {fix}set `B: \"w\"`, `NEW: \"v\"` under "
        f"`data:` of ConfigMap cluster-vars by hand{then}")


@pytest.mark.parametrize("text", [
    CM + b'data: {A: x, B: "w", NEW: v}\n',
    CM + b"data:\n  A: &a x\n  B: *a\n  NEW: v\n",
    CM + b"data:\n  A: |\n    x\n  B: w\n  NEW: v\n",
], ids=["flow style", "an anchor", "a block scalar"])
def test_lines_set_by_hand_where_the_edit_was_refused_are_read_back_and_need_no_edit(text):
    values = {"NEW": "v", "B": "x" if b"*a" in text else "w"}
    assert set_data_keys(text, values) is text
    assert {key: data_values(text)[key] for key in values} == values


def test_a_refusal_of_the_edit_names_only_the_values_still_to_set():
    with pytest.raises(EditRefused) as refused:
        set_data_keys(CM + b'data: {B: "w", NEW: old}\n', {"NEW": "v", "B": "w"})
    assert refused.value.line("clusters/prod/cluster-vars.yaml") == (
        f"clusters/prod/cluster-vars.yaml: data (line 4): in flow style ({{...}}), {REWRITE}; hint: set `NEW: \"v\"` "
        f"under `data:` of ConfigMap cluster-vars by hand{THEN}")


def test_an_anchor_in_another_document_does_not_stop_an_edit_of_this_one():
    before = b"kind: Other\nbase: &b x\nuse: *b\n---\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\ndata:\n  A: x\n"
    assert set_data_keys(before, {"A": "y"}).endswith(b'  A: "y"\n')


UPPER = st.text(alphabet="ABC_", min_size=1, max_size=4)


@st.composite
def configmaps(draw) -> tuple[bytes, dict[str, str], str]:
    """A file with the cluster-vars ConfigMap among other documents (bytes, its data, the line ending)."""
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    step = " " * draw(st.sampled_from([2, 4]))
    data = draw(st.dictionaries(UPPER, st.text(alphabet="ab x:#'", max_size=5), max_size=4))
    lines = [*draw(COMMENTS), "apiVersion: v1", "kind: ConfigMap", "metadata:", f"{step}name: cluster-vars"]
    if data:  # an empty `data:` is null, refused: see DATA_REFUSED
        lines.append("data:")
        for key, value in data.items():
            lines += [step + comment for comment in draw(COMMENTS)]
            written = json.dumps(value) if draw(st.booleans()) else "'" + value.replace("'", "''") + "'"
            lines.append(f"{step}{key}: {written}{draw(st.sampled_from(['', '  # why']))}")
        lines += [step + comment for comment in draw(COMMENTS)]
    documents = [eol.join(lines)]
    if draw(st.booleans()):
        documents.insert(draw(st.integers(0, 1)), eol.join(["kind: Other", "metadata:", f"{step}name: x"]))
    text = f"{eol}---{eol}".join(documents) + (eol if draw(st.booleans()) else "")
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + text.encode(), data, eol


@settings(max_examples=150, deadline=None)
@given(configmap=configmaps(), values=st.dictionaries(UPPER, st.text(max_size=6).filter(
    lambda text: not any(0xD800 <= ord(c) <= 0xDFFF for c in text)), min_size=1, max_size=3))
def test_setting_new_keys_in_any_configmap_adds_one_block_of_lines_and_removing_them_restores_every_byte(
        configmap, values):
    before, data, eol = configmap
    assert data_values(before) == data
    new = {key: value for key, value in values.items() if key not in data}
    after = set_data_keys(before, new)
    assert data_values(after) == {**data, **new}
    if not new:
        assert after == before
        return
    docs = list(yaml.safe_load_all(after.removeprefix(b"\xef\xbb\xbf")))
    assert [doc["data"] for doc in docs if doc["kind"] == "ConfigMap"] == [{**data, **new}]
    assert remove_data_keys(after, list(new)) == before
    # The new lines are one block: the file with it taken out is the file as it was.
    added = [line for line in after.split(eol.encode()) if line not in before.split(eol.encode())]
    assert added and all(re.fullmatch(rb' *(data:|[A-C_]+: ".*")', line) for line in added)
    block = eol.encode() + eol.encode().join(added)
    assert inserted_once(before, after, block)


# --- each refusal word for word: the substring checks above name the case, these hold every word of it -----------

EXACT = [
    (add_resource, b"%TAG !e! tag:example.com,2000:\n---\nresources:\n- a\n", "(file)",
     f"a %TAG directive on line 1: {NO_MARKS}"),
    (add_resource, b"resources:\n- *x\n", "(file)", "not valid YAML (line 2): found undefined alias 'x'"),
    (add_resource, b"resources:\n- a\x00\n", "(file)",
     "not valid YAML: unacceptable character #x0000: control characters are not allowed"),
    (add_resource, b"resources:\n- " + b"[" * 63 + b"]" * 63 + b"\n", "(file)",
     "nested deeper than 64 levels (line 2)"),
    (add_resource, b"resources:\n- " + b"[" * 62 + b"]" * 62 + b"\n", "resources",
     "the item on line 2 is a list in flow style ([...]), not a plain one-line value"),
    (add_resource, b"resources:\n- a\nconfigMapGenerator:\n- name: x\n", "configMapGenerator",
     "a generator: the export does not edit a kustomization whose output depends on generator options"),
    (set_data_keys, CM + b"data:\n  12: x\n", "data.12", "the key on line 5 is not a string (YAML reads it as int)"),
    (set_data_keys, CM + b"data:\n  A: >\n    x\n", "data.A",
     "the value on line 5 is a block scalar (| or >), not a one-line value"),
    (set_data_keys, CM + b"note: >\n  x\n", "(file)",
     "the document ends with a block scalar (| or >, line 4), after which a new key's place is not certain"),
    (set_data_keys, CM + b"data:\n  A: x\n  x: [1]\n", "data.x",
     "the value on line 6 is a list in flow style ([...]), not a one-line value"),
    (set_data_keys, CM + b"data:\n  A: &a x\n", "data (line 4)",
     f"its document holds an anchor &a on line 5, {NO_EDIT}"),
    (remove_data_keys, CM + b"data: {B: x}\n", "data (line 4)", f"in flow style ({{...}}), {REWRITE}"),
]


@pytest.mark.parametrize(("edit", "text", "path", "problem"), EXACT, ids=[p for _, _, _, p in EXACT])
def test_each_refusal_names_its_key_and_says_every_word_of_its_problem(edit, text, path, problem):
    with pytest.raises(EditRefused) as refused:
        edit(text, {"B": "b"} if edit is set_data_keys else ["B"] if edit is remove_data_keys else "./b")
    assert refused.value.path == path
    assert refused.value.problem == problem


def test_a_character_that_does_not_print_is_escaped_in_its_shortest_form():
    after = set_data_keys(CM + b"data:\n  A: x\n", {"B": "a\u200bb\U000e0001"})
    assert after.endswith(b'  B: "a\\u200bb\\U000e0001"\n')


def test_nesting_is_counted_per_branch_so_many_lists_side_by_side_are_not_too_deep():
    assert listed_resources(b"resources:\n- a\nx: [" + b"[], " * 80 + b"]\n") == ["a"]
