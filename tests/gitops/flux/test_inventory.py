"""gitops/flux/inventory.py, called directly: an object's identity (ObjectId) and a Kustomization's key, a walked
Kustomization's dependencies, its path as shown and the fields its parent changed, and an empty view of the walk."""

from __future__ import annotations

from gitops.flux.inventory import FluxView, ObjectId, WalkedKustomization, show_key

FLUX = ("flux-system", "flux-system")


def test_an_object_is_identified_by_group_kind_namespace_and_name():
    oid = ObjectId.of({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p", "namespace": "n"}})
    assert oid == ObjectId("apps", "Deployment", "n", "p") and str(oid) == "Deployment n/p"
    assert ObjectId.of({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}) == \
        ObjectId("", "Namespace", "", "n")
    assert str(ObjectId("", "Namespace", "", "n")) == "Namespace n"
    assert ObjectId.of({"metadata": "not a mapping"}) == ObjectId("", "", "", "")
    assert ObjectId.of({"kind": 3, "metadata": {"name": 5, "namespace": None}}) == ObjectId("", "3", "", "5")
    assert show_key(("ns", "name")) == "ns/name"


def test_a_path_is_shown_normalised_once_whether_the_walk_built_it_or_not():
    from gitops.flux.inventory import WalkedKustomization

    for path in ("./platform/cilium", "platform/cilium", "././platform/cilium"):
        ks = WalkedKustomization(key=("flux-system", "x"), path=path, declared_in="", parent=None, spec={},
                                 status="other-source")
        assert ks.shown_path == "./platform/cilium"
    assert WalkedKustomization(key=("a", "b"), path="", declared_in="", parent=None, spec={}).shown_path == "./"


def test_a_walked_kustomizations_dependencies_ignore_entries_without_a_name():
    ks_ = WalkedKustomization(("ns", "k"), "p", "", None, {"dependsOn": [{"name": "a"}, {"namespace": "x"}, "b",
                                                                         {"name": ""}, {"name": "c", "namespace": ""}]})
    assert ks_.depends == (("ns", "a"), ("ns", "c"))
    assert WalkedKustomization(("ns", "k"), "p", "", None, {"dependsOn": "a"}).depends == ()


def test_an_empty_view_has_only_its_bootstrap():
    view = FluxView(bootstrap=FLUX)
    assert (view.bootstrap, view.kustomizations, view.applied_by, view.origins, view.problems) == (FLUX, {}, {}, {}, [])


# --- a parent's fields on its child Kustomizations -----------------------------------------------------------------

def test_changed_paths_name_each_field_that_differs_one_level_below_spec_and_lists_wholesale():
    from gitops.flux.inventory import _changed_paths

    assert _changed_paths({"timeout": "9m", "wait": True}, {"timeout": "9m", "wait": True}) == []
    assert _changed_paths("same", "same") == []
    assert _changed_paths({"timeout": "9m"}, {"timeout": "2m"}) == ["timeout"]
    assert _changed_paths({}, {"wait": False}) == ["wait"]  # added
    assert _changed_paths({"wait": True, "prune": True}, {"prune": True}) == ["wait"]  # taken away
    assert _changed_paths({"dependsOn": [{"name": "a"}]}, {"dependsOn": [{"name": "a"}, {"name": "b"}]}) == \
        ["dependsOn"]
    declared = {"postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}],
                              "substitute": {"A": "1"}}}
    applied = {"postBuild": {"substituteFrom": [], "substitute": {"A": "2", "B": "3"}}}
    assert _changed_paths(declared, applied) == ["postBuild.substitute", "postBuild.substituteFrom"]
    assert _changed_paths({"postBuild": {"substitute": {"A": "1"}}}, {"postBuild": "replaced"}) == ["postBuild"]
    assert _changed_paths({"postBuild": "declared"}, {"postBuild": {"substitute": {}}}) == ["postBuild"]
