"""The fast tier of the differential test (issue 30): generated repository trees, and the cases earlier sweeps found,
judged by the walk and by kustomize's own build of the kustomization Flux's generator writes (verdicts.py). The
bounded tier against `flux build` is tests/e2e/test_walk_agrees_with_flux.py; the long run `make fuzz-walk`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from differential.cases import CASES, case_tree
from differential.sweep import judge, report, sweep
from differential.trees import Tree, from_listing, trees
from differential.verdicts import BOOTSTRAP, kustomize_build, walk_verdict
from gitops.flux.inventory import ObjectId

# Trees and seed: the same trees on every run, about 30 s on one core.
FAST_TREES = 50
FAST_SEED = 30


def test_the_walk_agrees_with_kustomize_on_every_generated_tree(record_property):
    result = sweep(FAST_TREES, "kustomize", FAST_SEED)
    record_property("figures", result.summary("kustomize", 0).rsplit(";", 1)[0] + ")")
    assert result.trees == FAST_TREES
    assert result.kustomizations > result.refused > 0, "the trees build, and some are refused: both sides judged"
    assert not result.found, report(result.found[:1])


@pytest.mark.parametrize("case", CASES)
def test_the_walk_agrees_with_kustomize_on_each_case_an_earlier_sweep_found(tmp_path, case):
    assert not judge(case_tree(case), tmp_path, kustomize_build)


def _walked(tmp_path, case: str):
    tree: Tree = case_tree(case)
    tree.write(tmp_path / "repo")
    return walk_verdict(tmp_path / "repo", tree.root)


def test_a_symlink_inside_the_repository_is_built_as_flux_builds_it(tmp_path):
    walked = _walked(tmp_path, "symlinks-inside-the-repository")
    apps = walked.kustomizations[("flux-system", "apps")].objects
    generated = walked.kustomizations[("flux-system", "generated")].objects
    assert apps is not None and sorted(map(str, apps)) == ["ConfigMap default/shared", "Service default/app"]
    # Flux's generated kustomization reads a linked file and never enters a linked folder
    assert generated is not None and sorted(map(str, generated)) == ["ConfigMap default/generated",
                                                                    "ConfigMap default/shared"]


def test_a_namespace_object_takes_the_target_namespace_s_name(tmp_path):
    apps = _walked(tmp_path, "target-namespace-renames-a-namespace").kustomizations[("flux-system", "apps")]
    assert apps.objects is not None and ObjectId("", "Namespace", "", "media") in apps.objects


def test_quoted_variables_are_typed_again_and_line_breaks_taken_out(tmp_path):
    apps = _walked(tmp_path, "quoted-variables-are-typed-again").kustomizations[("flux-system", "apps")].objects
    assert apps is not None
    assert apps[ObjectId("", "ConfigMap", "default", "settings")]["data"] == {
        "replicas": 2, "multi": "ab", "enabled": True, "text": "2: replicas"}
    assert apps[ObjectId("apps", "Deployment", "default", "web")]["spec"]["replicas"] == 2


def test_an_undefined_variable_refuses_its_kustomization_and_what_it_applies_is_still_walked(tmp_path):
    """Flux's default substitution applies the empty text and goes on: the walk says the variable once (its own
    stance is strict) and judges the Kustomizations it applies, so nothing below it is a follow-on line."""
    walked = _walked(tmp_path, "undefined-variable-refused-its-children-walked")
    assert walked.kustomizations[("flux-system", "apps")].objects is None
    web = walked.kustomizations[("flux-system", "web")].objects
    assert web is not None and list(map(str, web)) == ["ConfigMap default/web"]


def test_a_substitute_from_that_names_nothing_applies_no_children(tmp_path):
    """Flux fails such a Kustomization before it builds, strict or not: nothing it holds is applied."""
    walked = _walked(tmp_path, "missing-substitute-from-applies-no-children")
    assert walked.kustomizations[("flux-system", "apps")].objects is None
    assert ("flux-system", "web") not in walked.kustomizations
    assert BOOTSTRAP in walked.kustomizations


def test_an_object_without_a_namespace_and_its_twin_in_default_are_one_object_to_kustomize(tmp_path):
    """Flux's generated kustomization lists both folders; kustomize takes no namespace and `default` as one id and
    refuses the build ("may not add resource with an already registered id"): the long run found the walk building
    it."""
    media = _walked(tmp_path, "no-namespace-and-default-are-one-id").kustomizations[("flux-system", "media")]
    assert media.objects is None
    assert "ConfigMap settings comes from both kubernetes/media/a/cm.yaml and kubernetes/media/b/cm.yaml" \
        in media.reason, media.reason


@settings(max_examples=40, database=None, deadline=None, derandomize=True)
@given(tree=trees())
def test_a_kept_disagreement_s_listing_reads_back_into_the_same_tree(tree):
    """build/fuzz-walk/<n>.txt is how a disagreement becomes a case: its listing must give the tree back."""
    assert from_listing(tree.listing()) == tree
