"""gitops/flux/documents.py: resource files read as kustomize reads them (Lists taken apart in its order, refused
as it refuses them, plain `${VAR}` scalars kept apart), a kustomization file's one document, and which kustomizations
list only local resources. The Lists are held to `kubectl kustomize` itself."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import dump
from gitops.flux.build import Builder, RepoView
from gitops.flux.documents import BuildError, kind_name, load_docs, plain_resources, read_kustomization


def a_list(*items: Any, kind: str = "List", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "items": list(items), **fields}


@pytest.mark.parametrize(("doc", "plain"), [
    ({"resources": ["a.yaml", "b"]}, ["a.yaml", "b"]),
    ({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["a"]}, ["a"]),
    ({}, []), ({"resources": None}, []),
    ({"resources": ["a"], "namePrefix": "x-"}, None),
    ({"kind": "Component", "resources": []}, None),
    ({"apiVersion": "kustomize.config.k8s.io/v1alpha1"}, None),
    ({"resources": "a"}, None), ({"resources": ["a", 1]}, None),
    ({"resources": ["https://example.com/x"]}, None), ({"resources": ["github.com/org/repo"]}, None),
    ({"resources": ["git@github.com:org/repo"]}, None), ({"resources": ["base?ref=v1"]}, None),
    (["resources"], None), ("text", None)])
def test_only_a_plain_list_of_local_resources_is_built_in_process(doc, plain):
    assert plain_resources(doc) == plain


@pytest.mark.parametrize(("data", "problem"), [
    (b"a: [", "f.yaml: not valid YAML (line 2: did not find expected node content)"),  # the end, as PyYAML counts
    (b"- 1\n", "f.yaml: failed to decode Kubernetes YAML: a document without apiVersion and kind"),
    (b"kind: X\n", "f.yaml: failed to decode Kubernetes YAML: a document without apiVersion and kind"),
    (b"apiVersion: v1\n", "f.yaml: failed to decode Kubernetes YAML: a document without apiVersion and kind"),
    (b"apiVersion: v1\nkind: ''\n", "f.yaml: failed to decode Kubernetes YAML: a document without apiVersion and kind"),
    (b"a: &a [*a]\n", "f.yaml: a document that expands to more than 200000 values through its aliases; no manifest "
                      "needs that (a YAML alias bomb?)"),
    (b"a: " + b"9" * 5000 + b"\n", "f.yaml: not readable as YAML (ValueError)"),
])
def test_a_file_flux_cannot_decode_is_a_build_error_naming_it(data, problem):
    with pytest.raises(BuildError) as caught:
        load_docs(data, "f.yaml")
    assert str(caught.value) == problem


def test_empty_documents_are_skipped():
    assert load_docs(b"---\n---\napiVersion: v1\nkind: A\n---\n", "f.yaml") == [{"apiVersion": "v1", "kind": "A"}]


def test_a_variable_that_kustomize_must_quote_stays_a_string():
    from gitops.flux.varsub import PlainVar

    doc = load_docs(b'apiVersion: v1\nkind: ConfigMap\na: "${A}"\nb: "${A}: x"\nc: "x\\n${A}"\nd: "\\a${A}"\n',
                     "f.yaml")[0]
    assert [isinstance(doc[k], PlainVar) for k in "abcd"] == [True, False, False, False]  # d: written "\a${A}"


def test_kind_and_name_default_to_empty_where_a_manifest_lacks_them():
    assert kind_name({"kind": "ConfigMap", "metadata": {"name": "a"}}) == ("ConfigMap", "a")
    assert kind_name({"metadata": "not a mapping"}) == ("", "")


def test_a_kustomization_of_exactly_the_expanded_size_limit_is_read_and_one_value_more_is_refused():
    from model.safe_yaml import MAX_EXPANDED_NODES, expanded_size

    shared = "[" + ", ".join(["0"] * 999) + "]"  # 1,000 values with the list, written 199 times through aliases

    def kustomization(extra: int) -> bytes:
        return (f"- &s {shared}\n" + "- *s\n" * 198 + "".join("- 0\n" for _ in range(extra))).encode()
    at_limit = MAX_EXPANDED_NODES - 1 - 199 * 1000
    assert expanded_size(yaml.safe_load(kustomization(at_limit))) == MAX_EXPANDED_NODES
    assert len(read_kustomization(kustomization(at_limit), "a/kustomization.yaml", detailed=True)) == 199 + at_limit
    with pytest.raises(BuildError) as refused:
        read_kustomization(kustomization(at_limit + 1), "b/kustomization.yaml", detailed=True)
    assert str(refused.value) == "b/kustomization.yaml: expands to more than 200000 values through its aliases"


# --- Lists: kustomize reads a `kind: List` (any kind ending in List) as its items ----------------------------------

def _named(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


@pytest.mark.parametrize(("data", "names"), [
    (dump(a_list(_named("a"), _named("b"))), ["a", "b"]),
    (dump(a_list(_named("a"), kind="ConfigMapList")), ["a"]),
    (dump(a_list(_named("a"), kind="ResourceList")), ["a"]),
    (dump(a_list(_named("a"), kind="Foo.List")), ["a"]),
    # a List beside other documents: its items come after them (kustomize queues them at the end)
    (dump(_named("first"), a_list(_named("x")), _named("last")), ["first", "last", "x"]),
    # nested, in a file of one List: its items are the file's documents, each List among them taken apart in turn
    (dump(a_list(a_list(_named("inner1"), kind="ConfigMapList"), a_list(_named("inner2")), _named("outer"))),
     ["outer", "inner1", "inner2"]),
    # nested, beside other documents: an item of kind `List` is unwrapped where it stands, an `<X>List` item later
    (dump(_named("first"), a_list(a_list(_named("inner1"), kind="ConfigMapList"), a_list(_named("inner2")),
                                  _named("outer")), _named("last")), ["first", "last", "inner2", "outer", "inner1"]),
    (dump(a_list(None, {}, [], _named("a"))), ["a"]),
    (dump(a_list()), []), (b"apiVersion: v1\nkind: List\nitems:\n", []),
    (b"apiVersion: v1\nkind: List\nitems:\n---\n", []),
    # a file of one document: kyaml's reader takes a List's items, whatever they are
    (b"apiVersion: v1\nkind: List\nitems: text\n", []), (b"apiVersion: v1\nkind: List\nitems: {}\n", []),
    (b"apiVersion: v1\nkind: List\nfunctionConfig: {}\n", []),
    (dump(a_list({"apiVersion": "v1", "kind": "List", "functionConfig": {}}, a_list(items="text"))) + b"---\n", []),
    (b"---\n" + dump(a_list(_named("a"))) + b"---", ["a"]),
    (b"apiVersion: v1\nkind: List\r\nitems: text\r\n", []),
])
def test_a_list_is_read_as_the_objects_kustomize_takes_from_it_in_its_order(data, names):
    assert [d["metadata"]["name"] for d in load_docs(data, "f.yaml")] == names


@pytest.mark.parametrize(("data", "kept"), [
    # without items a List is an object of its own; kustomize gives it the metadata it lacks
    (b"apiVersion: v1\nkind: List\n", {"apiVersion": "v1", "kind": "List", "metadata": {}}),
    (b"apiVersion: v1\nkind: ConfigMapList\nmetadata: null\n", {"apiVersion": "v1", "kind": "ConfigMapList",
                                                                 "metadata": None}),
    (b"apiVersion: v1\nkind: List\nfunctionConfig: {}\n---\n", {"apiVersion": "v1", "kind": "List",
                                                                 "functionConfig": {}, "metadata": {}}),
    # `list` does not end in List: an object with items, as written
    (b"apiVersion: v1\nkind: list\nitems: [1]\n", {"apiVersion": "v1", "kind": "list", "items": [1]}),
])
def test_a_list_without_items_is_kept_as_one_object(data, kept):
    assert load_docs(data, "f.yaml") == [kept]


@pytest.mark.parametrize(("data", "problem"), [
    (dump(a_list(_named("a"), "text")), "f.yaml: items[1]: a string, not an object; kustomize refuses it "
                                        "(missing Resource metadata)"),
    (dump(a_list([1])), "f.yaml: items[0]: a list, not an object; kustomize refuses it (missing Resource metadata)"),
    (b"apiVersion: v1\nkind: List\nitems: {a: 1}\n", "f.yaml: items: a string, not an object; kustomize refuses it "
                                                      "(missing Resource metadata)"),
    (dump(a_list({"metadata": {"name": "a"}})), "f.yaml: items[0]: an object without kind; kustomize refuses it"),
    (dump(a_list({"apiVersion": "v1", "kind": "ConfigMap"})),
     "f.yaml: items[0] (ConfigMap): an object without metadata.name; kustomize refuses it"),
    (dump(a_list({"kind": "ConfigMap", "metadata": {"name": "a"}})),
     "f.yaml: items[0] (ConfigMap a): an object without apiVersion; Flux cannot apply it"),
    (dump(_named("z"), a_list(a_list(kind="ConfigMapList", items=7))),
     "f.yaml: document 2: items[0]: items: a number where kustomize expects a list of objects; it refuses the "
     "build"),
    (b"apiVersion: v1\nkind: List\nitems: text\n---\n",
     "f.yaml: document 1: items: a string where kustomize expects a list of objects; it refuses the build"),
    (dump(a_list(_named("a")), _named("b"), a_list(kind="XList", items={})),
     "f.yaml: document 3: items: a mapping where kustomize expects a list of objects; it refuses the build"),
    (dump(a_list(a_list(_named("a"), {"kind": "Secret", "metadata": {}}))),
     "f.yaml: items[0].items[1] (Secret): an object without metadata.name; kustomize refuses it"),
])
def test_a_list_kustomize_refuses_is_a_build_error_naming_the_item(data, problem):
    with pytest.raises(BuildError) as caught:
        load_docs(data, "f.yaml")
    assert str(caught.value) == problem


def test_kustomizes_own_output_is_read_as_it_is_a_list_it_kept_stays_one_object():
    kept = b"apiVersion: v1\nkind: List\nfunctionConfig: {}\n"
    assert load_docs(kept, "c (kustomize output)", lists=False) == [
        {"apiVersion": "v1", "kind": "List", "functionConfig": {}}]
    assert load_docs(kept, "f.yaml") == []


# --- Lists: the in-process build takes a List apart exactly as kubectl kustomize does ------------------------------

def _both_builds(root: Path, text: str) -> tuple[list | None, list | None]:
    """(the in-process build, kubectl's) of one resource file, each the objects in the order read (kubectl's with
    sortOptions fifo), or None where the build is refused."""
    for folder, extra in (("walk", ""), ("kubectl", "sortOptions:\n  order: fifo\n")):
        (root / folder).mkdir(parents=True)
        (root / folder / "r.yaml").write_bytes(text.encode())
        (root / folder / "kustomization.yaml").write_text(f"resources: [r.yaml]\n{extra}")
    builder = Builder(RepoView(root / "walk"))
    try:
        ours: list | None = [b.manifest for b in builder.kustomize("")]
    except BuildError:
        ours = None
    assert builder.kubectl_builds == 0
    result = subprocess.run(["kubectl", "kustomize", str(root / "kubectl")], capture_output=True, text=True)
    theirs = [d for d in yaml.safe_load_all(result.stdout) if d is not None] if result.returncode == 0 else None
    return ours, theirs


_A = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"


_B = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"


def _item(doc: str) -> str:
    return "- " + doc.replace("\n", "\n  ").rstrip() + "\n"


def _list(*items: str, kind: str = "List", extra: str = "") -> str:
    return f"apiVersion: v1\nkind: {kind}\n{extra}items:\n" + "".join(_item(i) for i in items)


LIST_SHAPES = {
    "a v1 List": _list(_A, _B),
    "a List beside other documents": f"{_B}---\n{_list(_A)}",
    "any kind ending in List": _list(_A, _B, kind="ConfigMapList"),
    "a ResourceList": _list(_A, kind="ResourceList"),
    "nested Lists in a file of one document": _list(_list(_A, kind="ConfigMapList"), _list(_B)),
    "nested Lists beside other documents": f"{_list(_list(_A, kind='SecretList'), _list(_B))}---\n"
                                           "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: c\n",
    "a List's metadata is not its items'": _list(_A, extra="metadata:\n  name: l\n  namespace: x\n  annotations:\n"
                                                       "    config.kubernetes.io/local-config: 'true'\n"),
    "empty items": "apiVersion: v1\nkind: List\nitems: []\n",
    "null items": "apiVersion: v1\nkind: List\nitems:\n---\n" + _A,
    "null, empty mapping and empty list items": _list("null", "{}", "[]", _A) + "---\n",
    "a List without items": "apiVersion: v1\nkind: List\n",
    "a List without items beside another document": f"{_A}---\napiVersion: v1\nkind: PodList\nmetadata: null\n",
    "only functionConfig, one document": "apiVersion: v1\nkind: List\nfunctionConfig:\n  a: b\n",
    "only functionConfig, beside another document": f"{_A}---\napiVersion: v1\nkind: List\nfunctionConfig: {{}}\n",
    "scalar items, one document": "apiVersion: v1\nkind: List\nitems: text\n",
    "scalar items beside another document": f"{_A}---\napiVersion: v1\nkind: List\nitems: text\n",
    "mapping items, one document": "apiVersion: v1\nkind: ResourceList\nitems:\n  a: b\n",
    "empty mapping items, one document": "apiVersion: v1\nkind: List\nitems: {}\n",
    "an item that is text": _list(_A, "text"),
    "an item that is a list": _list("[1]"),
    "an item without kind": _list("metadata:\n  name: a\n"),
    "an item without a name": _list("apiVersion: v1\nkind: ConfigMap\n"),
    "an item of a List kind without name or items": _list("apiVersion: v1\nkind: ConfigMapList\n"),
    "a nested List with scalar items": _list(_A, "apiVersion: v1\nkind: List\nitems: 3\n") + "---\n",
    "a nested <X>List with scalar items": _list("apiVersion: v1\nkind: ConfigMapList\nitems: 3\n"),
    "two items of one id": _list(_A, _A),
    "a lowercase list": "apiVersion: v1\nkind: list\nmetadata:\n  name: l\nitems:\n- 1\n",
    "one document between separators": f"---\n{_list(_A)}---",
    "one document with CRLF line ends": _list(_A, _B).replace("\n", "\r\n"),
}


@pytest.mark.parametrize("text", LIST_SHAPES.values(), ids=LIST_SHAPES.keys())
def test_an_object_in_a_list_is_built_in_process_exactly_as_kubectl_kustomize_builds_it(tmp_path, text):
    ours, theirs = _both_builds(tmp_path, text)
    assert ours == theirs


_object = st.builds(lambda name: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
                    st.sampled_from(["a", "b", "c", "d"]))


_lists = st.recursive(_object, lambda inner: st.builds(
    lambda kind, items, extra: {"apiVersion": "v1", "kind": kind, **items, **extra},
    st.sampled_from(["List", "List", "ConfigMapList", "ResourceList"]),
    st.one_of(st.just({}), st.fixed_dictionaries({"items": st.one_of(
        st.lists(st.one_of(inner, st.sampled_from([None, {}, [], "text", {"apiVersion": "v1", "kind": "Secret"}])),
                 max_size=4), st.sampled_from([None, "text", {}]))})),
    st.sampled_from([{}, {"metadata": {"name": "l", "namespace": "x"}}, {"functionConfig": {}}])), max_leaves=6)


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(_lists, min_size=1, max_size=3), separator_after=st.booleans())
def test_any_file_of_lists_is_built_in_process_as_kubectl_kustomize_builds_it_or_refused_as_it_refuses_it(
        tmp_path_factory, docs, separator_after):
    text = yaml.safe_dump_all(docs) + ("---\n" if separator_after else "")
    ours, theirs = _both_builds(tmp_path_factory.mktemp("lists"), text)
    assert ours == theirs, text


# --- anchors, aliases and merge keys: read as kustomize reads them (go-yaml v3, then kyaml's DeAnchor) --------------

def test_an_anchor_name_defined_twice_is_read_each_alias_taking_the_latest_definition_before_it():
    """home-ops' files define one anchor name twice in a document; go-yaml, and so kustomize and Flux, allow it."""
    data = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &name first\n  labels:\n    app: *name\n"
            b"data:\n  other: &name second\n  again: *name\n")
    assert load_docs(data, "f.yaml") == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "first", "labels": {"app": "first"}}, "data": {"other": "second", "again": "second"}}]


def test_a_merge_key_copies_the_anchored_mappings_keys():
    data = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: &labels\n    app: plex\n"
            b"  annotations:\n    <<: *labels\n    team: media\n")
    assert load_docs(data, "f.yaml")[0]["metadata"] == {"name": "a", "labels": {"app": "plex"},
                                                        "annotations": {"app": "plex", "team": "media"}}


def test_a_mappings_own_key_wins_over_a_merged_one_written_before_or_after_the_merge_key():
    data = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  base: &base {retries: '3', mode: fast}\n"
            b"  after:\n    <<: *base\n    retries: '5'\n  before:\n    mode: slow\n    <<: *base\n")
    data_ = load_docs(data, "f.yaml")[0]["data"]
    assert (data_["after"], data_["before"]) == ({"retries": "5", "mode": "fast"}, {"mode": "slow", "retries": "3"})


def test_of_mappings_merged_from_a_list_the_first_that_holds_a_key_gives_it_as_kustomize_merges():
    """PyYAML's own merge tells long keys apart by object identity and lets the later mapping win; kustomize (kyaml's
    DeAnchor) gives the first mapping's value, as YAML's merge key type says."""
    data = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n"
            b"  <<: [{first-only: '1', shared-long-key: first}, {shared-long-key: second, second-only: '2'}]\n")
    assert load_docs(data, "f.yaml")[0]["data"] == {"first-only": "1", "shared-long-key": "first",
                                                     "second-only": "2"}


def test_a_second_merge_key_in_one_mapping_is_refused_as_kustomize_refuses_it():
    with pytest.raises(BuildError) as caught:
        load_docs(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  <<: {a: '1'}\n  <<: {b: '2'}\n",
                  "f.yaml")
    assert str(caught.value) == ("f.yaml: not valid YAML (line 7: a second merge key (<<) in one mapping; kustomize "
                                 "refuses it (duplicate merge key))")


def test_merge_keys_that_copy_past_the_expansion_bound_are_refused_as_an_alias_bomb_before_they_are_built():
    """Each mapping merges the one before and adds a key: 700 lines copy 245,000 keys (a 1 MB file of them, 800
    million, which PyYAML's merge would build before anything measured it)."""
    lines = ["a0: &a0 {k0: 1}"] + [f"a{i}: &a{i} {{<<: *a{i - 1}, k{i}: 1}}" for i in range(1, 700)]
    with pytest.raises(BuildError) as caught:
        load_docs(("\n".join(lines) + "\n").encode(), "f.yaml")
    assert str(caught.value) == ("f.yaml: a document that expands to more than 200000 values through its aliases; "
                                 "no manifest needs that (a YAML alias bomb?)")
    with pytest.raises(BuildError) as kustomization:
        read_kustomization(("\n".join(lines) + "\n").encode(), "k/kustomization.yaml", detailed=True)
    assert str(kustomization.value) == "k/kustomization.yaml: expands to more than 200000 values through its aliases"


def test_an_alias_bomb_with_an_anchor_name_defined_again_is_still_refused():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]", "z: &a0 [y]", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(BuildError) as caught:
        load_docs(("\n".join(lines) + "\n").encode(), "f.yaml")
    assert str(caught.value) == ("f.yaml: a document that expands to more than 200000 values through its aliases; "
                                 "no manifest needs that (a YAML alias bomb?)")


def test_an_alias_to_an_anchor_of_an_earlier_document_is_refused_as_kustomize_refuses_it():
    with pytest.raises(BuildError) as caught:
        load_docs(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n a\n---\napiVersion: v1\n"
                  b"kind: ConfigMap\nmetadata:\n  name: *n\n", "f.yaml")
    assert str(caught.value) == "f.yaml: not valid YAML (line 9: found undefined alias 'n')"


def test_a_kustomization_file_may_define_an_anchor_name_twice():
    doc = read_kustomization(b"resources: &r [a.yaml]\nnameSuffix: &r -x\nnamePrefix: *r\n", "k/kustomization.yaml",
                             detailed=True)
    assert doc == {"resources": ["a.yaml"], "nameSuffix": "-x", "namePrefix": "-x"}


ANCHOR_SHAPES = {
    "an anchor name defined twice": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n a\n  labels:\n"
                                    "    first: *n\n    again: &n b\n    second: *n\n",
    "a merge key of an alias": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  base: &b {x: '1'}\n"
                               "  merged:\n    <<: *b\n    z: '2'\n",
    "a merge key overridden by the mapping's own key": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
                                                       "data:\n  q: '3'\n  <<: {p: '1', q: '2'}\n",
    "a merge of a list, the first mapping winning": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n"
                                                    "  <<: [{qqqq-long: '9', rrrr-long: '4'}, {rrrr-long: '5'}]\n",
    "a merged mapping that merges in turn": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n"
                                            "  one: &one {a: '1', b: '1'}\n  two: &two {<<: *one, b: '2', c: '2'}\n"
                                            "  three: {<<: [*two, {d: '3'}], a: '3'}\n",
    "anchors in the items of a List": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n"
                                      "  metadata: &m\n    name: a\n- apiVersion: v1\n  kind: ConfigMap\n"
                                      "  metadata:\n    <<: *m\n    name: b\n  data: &m {k: v}\n",
    "a repeated anchor beside a variable": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n a\ndata:\n"
                                           "  zone: &n ${ZONE}\n  again: *n\n",
}


@pytest.mark.parametrize("text", ANCHOR_SHAPES.values(), ids=ANCHOR_SHAPES.keys())
def test_anchors_aliases_and_merge_keys_are_built_in_process_exactly_as_kubectl_kustomize_builds_them(tmp_path, text):
    ours, theirs = _both_builds(tmp_path, text)
    assert ours is not None and ours == theirs


def test_a_plain_equals_sign_is_text_as_go_yaml_reads_it_not_yaml_1_1s_value_key(tmp_path):
    """home-ops' AlertmanagerConfig writes `matchType: =`; PyYAML's YAML 1.1 tables make it a type without a
    constructor ("not valid YAML"), go-yaml and kustomize read the text."""
    text = ("apiVersion: monitoring.coreos.com/v1alpha1\nkind: AlertmanagerConfig\nmetadata:\n  name: a\nspec:\n"
            "  inhibitRules:\n    - sourceMatch:\n        - {name: severity, value: critical, matchType: =}\n"
            "      =: also-a-key\n")
    assert load_docs(text.encode(), "f.yaml")[0]["spec"]["inhibitRules"] == [
        {"sourceMatch": [{"name": "severity", "value": "critical", "matchType": "="}], "=": "also-a-key"}]
    (tmp_path / "r.yaml").write_text(text)
    (tmp_path / "kustomization.yaml").write_text("resources: [r.yaml]\n")
    built = subprocess.run(["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, check=True).stdout
    # kustomize writes both as the plain text `=` (PyYAML and ruamel.yaml would refuse to read its output back)
    assert "\n  - =: also-a-key\n" in built and "\n    - matchType: =\n" in built, built
