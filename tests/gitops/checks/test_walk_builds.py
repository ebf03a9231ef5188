"""gitops/checks/walk_builds.py, through delivery.check_stack on small repositories (walk_repositories.py): a failed
build said once per cause at the file at fault, with what it takes down folded in; build and `${VAR}` problems refused
when new or about the export's files, else notices; a `${VAR}` applied as written; nothing judged below a link."""

from __future__ import annotations

import re

import pytest
import yaml
from walk_repositories import (
    EVERY_KS,
    checker,
    exported,
    graph,
    parent_patching,
    repository,
    resources,
)

from builders import cm, dump, ks


@pytest.fixture
def check(tmp_path):
    return checker(tmp_path)


def test_an_object_inside_a_failing_build_is_one_line_naming_the_file_at_fault_first(check):
    """The failed build, the export's objects it leaves unapplied and the tier the walk cannot reach behind it: one
    cause, one line."""
    repo = {**repository(),
            "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml", "gpu-platform", "gone.yaml")}
    assert check(repo=repo).problems == [
        "clusters/dev/kustomization.yaml: resources: 'gone.yaml': no such file or folder; flux-system/flux-system "
        "(bootstrap) fails to build because of it, and Flux holds back whatever depends on it; nothing applies the 2 "
        "objects the export writes to clusters/dev/gpu-platform/ and components/dev/plex/ (e.g. Kustomization "
        "flux-system/plex); Flux's walk cannot reach flux-system/cilium, which the stack says the repository "
        "declares (flux.tiers); hint: fix the file named; see kustomize's own answer with `kubectl kustomize "
        "--load-restrictor LoadRestrictionsNone ./clusters/dev`"]


# --- 3. builds and substitutions -----------------------------------------------------------------------------------

# Flux substitutes only where a Kustomization has variables: the Kustomizations applying ${MISSING} here have one.
VARIABLES = {"substitute": {"CLUSTER": "dev"}}


PLEX_WITH_VARIABLES = {"clusters/dev/gpu-platform/plex.yaml": dump(ks(
    "plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m",
    postBuild=VARIABLES))}


UNRESOLVED = ("{file} ({oid}): data.a: ${{MISSING}} is not defined for {ks}, which applies it (its variables: "
              "CLUSTER); Flux's strict substitution would fail the whole Kustomization; hint: define it in the "
              "ConfigMap or Secret that Kustomization substitutes from, or give it a default (${{VAR:=value}})")


def test_an_unresolved_variable_in_an_exported_file_is_refused(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        **PLEX_WITH_VARIABLES})
    assert check(files=files).problems == [UNRESOLVED.format(
        file="components/dev/plex/cm.yaml", oid="ConfigMap plex/plex-config", ks="flux-system/plex")]


def test_a_variable_of_an_exported_file_that_an_external_secrets_store_may_hold_is_a_notice_not_a_refusal(check):
    """The repository's ExternalSecret fetches cluster-secrets' keys from its store (dataFrom): the walk cannot tell
    whether ${MISSING} is among them, so it says so instead of refusing."""
    store = {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
             "metadata": {"name": "cluster-secrets", "namespace": "flux-system"},
             "spec": {"secretStoreRef": {"kind": "ClusterSecretStore", "name": "vault"},
                      "dataFrom": [{"extract": {"key": "cluster"}}]}}
    post = {"substituteFrom": [{"kind": "Secret", "name": "cluster-secrets"}]}
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        "clusters/dev/gpu-platform/plex.yaml": dump(ks(
                            "plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True,
                            timeout="10m", postBuild=post))})
    stack = check(repo={**repository(), "clusters/dev/cluster-secrets.yaml": dump(store)}, files=files)
    assert stack.problems == []
    assert stack.notices == [
        "components/dev/plex/cm.yaml (ConfigMap plex/plex-config): data.a: ${MISSING} is not among the variables the "
        "repository shows for flux-system/plex, which applies it (none); the program cannot tell whether "
        "ExternalSecret flux-system/cluster-secrets gives it (its keys are not in the repository); if not, Flux's "
        "strict substitution would fail the whole Kustomization; hint: give the variable a default (${VAR:=value}), "
        "or list the key in an ExternalSecret's spec.data so the walk can check it"]


def test_a_problem_the_repository_already_had_is_a_notice_not_a_refusal(check):
    repo = {**repository(), "kubernetes/dev/cilium/cm.yaml": dump(cm("cilium-config", "kube-system", a="${MISSING}")),
            "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS, wait=True,
                                                postBuild=VARIABLES))}
    stack = check(repo=repo)
    assert stack.problems == []
    assert stack.notices == ["already in the repository before this export: " + UNRESOLVED.format(
        file="kubernetes/dev/cilium/cm.yaml", oid="ConfigMap kube-system/cilium-config", ks="flux-system/cilium")]


def test_a_problem_of_a_repository_file_that_the_export_brings_in_is_refused(check):
    repo = {**repository(), "kubernetes/dev/extra/cm.yaml": dump(cm("extra", "default", a="${MISSING}")),
            "kubernetes/dev/extra/kustomization.yaml": resources("cm.yaml")}
    listing = resources("cm.yaml", "../../../kubernetes/dev/extra")
    files = exported(**{"components/dev/plex/kustomization.yaml": listing, **PLEX_WITH_VARIABLES})
    stack = check(repo=repo, files=files)
    assert stack.problems == [UNRESOLVED.format(file="kubernetes/dev/extra/cm.yaml", oid="ConfigMap default/extra",
                                                ks="flux-system/plex")]
    assert stack.notices == []


def test_a_problem_naming_an_exported_kustomization_is_refused_even_if_it_was_there_before(check):
    bad = exported(**{"components/dev/plex/kustomization.yaml": resources("cm.yaml", "gone.yaml")})
    repo = {**repository(), **bad}
    stack = check(repo=repo, files=bad)
    assert stack.notices == []
    assert stack.problems == [
        "components/dev/plex/kustomization.yaml: resources: 'gone.yaml': no such file or folder; flux-system/plex "
        "(clusters/dev/gpu-platform/plex.yaml) fails to build because of it, and Flux holds back whatever depends on "
        "it; nothing applies the 1 object the export writes to components/dev/plex/ (e.g. ConfigMap plex/plex-config); "
        "hint: fix the file named; see kustomize's own answer with `kubectl kustomize --load-restrictor "
        "LoadRestrictionsNone ./components/dev/plex`"]


def test_of_several_failing_kustomizations_holding_a_folder_the_deepest_is_named(check):
    repo = {**repository(),
            "clusters/dev/outer.yaml": dump(ks("outer", "./components", **EVERY_KS, wait=True)),
            "components/kustomization.yaml": resources("gone-outer.yaml"),
            "clusters/dev/inner.yaml": dump(ks("inner", "./components/dev", **EVERY_KS, wait=True)),
            "components/dev/kustomization.yaml": resources("gone-inner.yaml")}
    files = {"components/dev/extra/cm.yaml": dump(cm("extra", "default"))}
    stack = check(repo=repo, files=files, flux_graph=graph(components={}))
    assert stack.problems == [
        "components/dev/kustomization.yaml: resources: 'gone-inner.yaml': no such file or folder; flux-system/inner "
        "(clusters/dev/inner.yaml) fails to build because of it, and Flux holds back whatever depends on it; nothing "
        "applies the 1 object the export writes to components/dev/extra/ (e.g. ConfigMap default/extra); hint: fix the "
        "file named; see kustomize's own answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone "
        "./components/dev`"]
    # The outer one's failure takes nothing of the export down and was there before: a notice
    assert [n for n in stack.notices if "gone-outer.yaml" in n] == [
        "already in the repository before this export: components/kustomization.yaml: resources: 'gone-outer.yaml': "
        "no such file or folder; flux-system/outer (clusters/dev/outer.yaml) fails to build because of it, and Flux "
        "holds back whatever depends on it; hint: fix the file named; see kustomize's own answer with `kubectl "
        "kustomize --load-restrictor LoadRestrictionsNone ./components`"]


def test_a_problem_about_an_exported_file_is_refused_even_when_the_last_export_had_it_too(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        **PLEX_WITH_VARIABLES})
    stack = check(repo={**repository(), **files}, files=files)
    assert stack.notices == []
    assert stack.problems == [UNRESOLVED.format(
        file="components/dev/plex/cm.yaml", oid="ConfigMap plex/plex-config", ks="flux-system/plex")]


def test_a_parent_patch_that_is_not_yaml_is_named_at_the_file_that_holds_it(check):
    repo = parent_patching("plex", {"timeout": "10m"})
    doc = yaml.safe_load(repo["clusters/dev/apps.yaml"])
    doc["spec"]["patches"][0]["patch"] = "kind: Kustomization\nspec: [unclosed\n"
    repo["clusters/dev/apps.yaml"] = dump(doc)
    assert check(repo=repo).problems == [
        "clusters/dev/apps.yaml: spec.patches[0].patch: not valid YAML (line 3 of the patch): did not find expected "
        "',' or ']'; flux-system/apps (clusters/dev/apps.yaml) fails to build because of it, and Flux holds back "
        "whatever depends on it; nothing applies the 2 objects the export writes to clusters/dev/gpu-platform/ and "
        "components/dev/plex/ (e.g. Kustomization flux-system/plex); hint: fix the file named; see kustomize's own "
        "answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone ./clusters/dev/gpu-platform`"]


def test_an_undefined_variable_the_bootstrap_already_had_is_one_notice_and_what_it_applies_is_still_judged(check):
    """Flux's default substitution applies the empty text and goes on to the Kustomizations the bootstrap applies: the
    walk says the variable once, and the CNI tier below it is still reached (no follow-on refusal about it)."""
    repo = repository()
    repo["clusters/dev/flux-system/gotk-sync.yaml"] = dump(
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "flux-system", "namespace": "flux-system"}, "spec": {"url": "ssh://git@x/repo"}},
        ks("flux-system", "./clusters/dev", **EVERY_KS, postBuild=VARIABLES))
    repo["clusters/dev/cm.yaml"] = dump(cm("root-config", "default", a="${MISSING}"))
    stack = check(repo=repo, files=exported())
    assert stack.problems == []
    assert stack.notices == ["already in the repository before this export: " + UNRESOLVED.format(
        file="clusters/dev/cm.yaml", oid="ConfigMap default/root-config", ks="flux-system/flux-system")]


def test_a_variable_under_an_exported_kustomization_without_variables_is_a_notice_that_it_is_applied_as_written(check):
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", url="http://${HOST}/"))})
    stack = check(files=files)
    assert stack.problems == []
    assert stack.notices == [
        "components/dev/plex/cm.yaml (ConfigMap plex/plex-config): data.url: ${HOST} is applied as written: "
        "flux-system/plex has no variables (no postBuild, or a substituteFrom out of its namespace's reach), and "
        "Flux substitutes only where a Kustomization has some; hint: give flux-system/plex the variables it needs "
        "(cluster-vars lives in flux-system), or write $${HOST} if the text is meant"]


def test_one_notice_per_object_applied_as_written_after_an_exported_kustomization_the_walk_did_not_build(check):
    two = cm("plex-config", "plex", a="${FIRST}", b="${SECOND}")
    flux_graph = graph(kustomizations=[*graph()["kustomizations"],
                                       {"name": "absent", "namespace": "flux-system", "declared": True}])
    stack = check(files=exported(**{"components/dev/plex/cm.yaml": dump(two)}), flux_graph=flux_graph)
    (notice,) = stack.notices
    assert notice.startswith("components/dev/plex/cm.yaml (ConfigMap plex/plex-config): data.a: ${FIRST} is applied")


# --- one cause, one line (issue 43): the file at fault first, what it takes down folded in ----------------------------

def test_a_cycle_two_kustomizations_build_is_one_line_naming_the_entry_that_closes_it(check):
    repo = {**repository(), "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS)),
            "clusters/dev/b.yaml": dump(ks("b", "./kubernetes/dev/b", **EVERY_KS)),
            "kubernetes/dev/a/kustomization.yaml": resources("../b"),
            "kubernetes/dev/b/kustomization.yaml": resources("../a")}
    stack = check(repo=repo)
    assert stack.problems == []  # the repository's own, there before, taking nothing of the export down
    assert stack.notices == [
        "already in the repository before this export: kubernetes/dev/b/kustomization.yaml: resources: '../a': a cycle "
        "of kustomizations (kubernetes/dev/a/ -> kubernetes/dev/b/ -> kubernetes/dev/a/); kustomize refuses to build "
        "it; 2 Kustomizations fail to build because of it (flux-system/a, flux-system/b), and Flux holds back "
        "whatever depends on them; hint: remove '../a' from the resources of kubernetes/dev/b/kustomization.yaml"]


def test_an_exported_kustomization_whose_path_leaves_the_repository_is_named_at_its_spec_path(check):
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(ks(
        "plex", "./../../elsewhere", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m"))})
    assert check(files=files).problems == [
        "clusters/dev/gpu-platform/plex.yaml: spec.path: './../../elsewhere': leaves the repository, and Flux reads "
        "only its source; flux-system/plex (clusters/dev/gpu-platform/plex.yaml) fails to build because of it, and "
        "Flux holds back whatever depends on it; nothing applies the 1 object the export writes to "
        "components/dev/plex/ (e.g. ConfigMap plex/plex-config); hint: set spec.path to a folder of the repository "
        "(./…)"]


def test_a_second_kustomization_file_names_the_hand_written_one_and_between_two_hand_written_keeps_either(check):
    beside = check(repo={**repository(), "components/dev/plex/Kustomization": resources("cm.yaml")})
    assert beside.problems == [
        "components/dev/plex/Kustomization: a second kustomization file beside the export's "
        "components/dev/plex/kustomization.yaml: kustomize and Flux refuse to build components/dev/plex/ with more "
        "than one; flux-system/plex (clusters/dev/gpu-platform/plex.yaml) fails to build because of it, and Flux holds "
        "back whatever depends on it; nothing applies the 1 object the export writes to components/dev/plex/ (e.g. "
        "ConfigMap plex/plex-config); hint: delete components/dev/plex/Kustomization; the export's "
        "components/dev/plex/kustomization.yaml lists what components/dev/plex/ holds"]
    repo = {**repository(), "clusters/dev/x.yaml": dump(ks("x", "./kubernetes/dev/x", **EVERY_KS)),
            "kubernetes/dev/x/kustomization.yaml": resources("cm.yaml"),
            "kubernetes/dev/x/kustomization.yml": resources("cm.yaml"),
            "kubernetes/dev/x/cm.yaml": dump(cm("x", "default"))}
    assert check(repo=repo).notices == [
        "already in the repository before this export: kubernetes/dev/x/kustomization.yml: a second kustomization "
        "file beside kubernetes/dev/x/kustomization.yaml: kustomize and Flux refuse to build kubernetes/dev/x/ with "
        "more than one; flux-system/x (clusters/dev/x.yaml) fails to build because of it, and Flux holds back "
        "whatever depends on it; hint: keep one of them"]


def test_kustomizes_own_refusal_is_named_at_the_kustomization_it_was_building(check):
    """A kustomization that does more than list resources is built by kubectl: its last words, after the file."""
    repo = {**repository(), "clusters/dev/kustomization.yaml": dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "flux-system",
        "resources": ["flux-system", "cilium.yaml", "gpu-platform", "gone.yaml"]})}
    (line,) = check(repo=repo).problems
    # kustomize's own words (they change between its versions) sit between the two fixed ends: `.+`, on one line
    assert re.fullmatch(re.escape(
        "clusters/dev/kustomization.yaml: kustomize refuses to build clusters/dev/: accumulating resources: ") + ".+"
        + re.escape(
        "; flux-system/flux-system (bootstrap) fails to build because of it, and Flux holds back whatever depends on "
        "it; nothing applies the 2 objects the export writes to clusters/dev/gpu-platform/ and components/dev/plex/ "
        "(e.g. Kustomization flux-system/plex); Flux's walk cannot reach flux-system/cilium, which the stack says the "
        "repository declares (flux.tiers); hint: see kustomize's own answer with `kubectl kustomize "
        "--load-restrictor LoadRestrictionsNone ./clusters/dev`"), line), line


def test_nothing_below_a_link_the_export_would_write_through_is_judged_by_the_walk(check, tmp_path):
    """The walk sees there only what the export writes (a timeout, a second applier: all wrong); OUT's own guard
    (gitops/repo/out_folder.py) refuses the link, naming it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "repo" / "components").mkdir(parents=True)
    (tmp_path / "repo" / "components" / "dev").symlink_to(elsewhere)
    repo = {**repository(), "clusters/dev/all.yaml": dump(ks("all", "./components", **EVERY_KS, wait=True))}
    stack = check(repo=repo)
    assert (stack.problems, stack.notices) == ([], [])


# --- each cause the build can give, named at its file, with its own fix (issue 46: the walk's refusals split out) ----

def kustomization(**fields) -> bytes:
    return dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", **fields})


def hand_written(name: str, **files: bytes) -> dict[str, bytes]:
    """The repository with a hand-written Kustomization `name` of ./kubernetes/dev/<name>, and `files`."""
    return {**repository(), f"clusters/dev/{name}.yaml": dump(ks(name, f"./kubernetes/dev/{name}", **EVERY_KS)),
            **files}


ALREADY = "already in the repository before this export: "
FAILS_X = ("flux-system/x (clusters/dev/x.yaml) fails to build because of it, and Flux holds back whatever depends on "
           "it")


def test_a_component_that_leaves_the_repository_is_named_at_the_components_key_of_its_kustomization(check):
    repo = hand_written("x", **{
        "kubernetes/dev/x/kustomization.yaml": kustomization(resources=["cm.yaml"],
                                                             components=["../../../../elsewhere"]),
        "kubernetes/dev/x/cm.yaml": dump(cm("x", "default"))})
    assert check(repo=repo).notices == [
        f"{ALREADY}kubernetes/dev/x/kustomization.yaml: components: '../../../../elsewhere': leaves the repository; "
        f"{FAILS_X}; hint: point it inside the repository, or take it out"]


def test_a_component_linked_out_of_the_repository_is_named_with_the_fix_for_a_link(check, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "kustomization.yaml").write_bytes(kustomization(kind="Component"))
    (tmp_path / "repo" / "kubernetes" / "dev" / "x").mkdir(parents=True)
    (tmp_path / "repo" / "kubernetes" / "dev" / "x" / "comp").symlink_to(tmp_path / "elsewhere")
    repo = hand_written("x", **{"kubernetes/dev/x/kustomization.yaml": kustomization(resources=["cm.yaml"],
                                                                                     components=["comp"]),
                                "kubernetes/dev/x/cm.yaml": dump(cm("x", "default"))})
    assert check(repo=repo).notices == [
        f"{ALREADY}kubernetes/dev/x/kustomization.yaml: components: 'comp': a symlink that leads out of the "
        "repository (or to nothing); Flux's confined filesystem refuses to read it; "
        f"{FAILS_X}; hint: replace the link with the folder it stands for, inside the repository"]


def test_a_component_listed_as_a_file_is_named_by_its_entry_as_written(check):
    """kubectl says the path it resolved; the line gives the entry as the kustomization writes it."""
    repo = hand_written("x", **{
        "kubernetes/dev/x/kustomization.yaml": kustomization(resources=["cm.yaml"], components=["./cm.yaml"]),
        "kubernetes/dev/x/cm.yaml": dump(cm("x", "default"))})
    assert check(repo=repo).notices == [
        f"{ALREADY}kubernetes/dev/x/kustomization.yaml: components: './cm.yaml': a file; kustomize takes a component "
        "from a folder holding its kustomization.yaml (kind: Component); "
        f"{FAILS_X}; hint: list the component's folder, not a file in it"]


def test_a_cycle_kustomize_finds_through_three_folders_is_one_line_at_the_file_that_closes_it(check):
    """Each kustomization sets a namespace, so kubectl builds them and says the cycle in its own words."""
    repo = repository()
    for name, next_one in (("a", "b"), ("b", "c"), ("c", "a")):
        repo |= hand_written(name, **{f"kubernetes/dev/{name}/kustomization.yaml": kustomization(
            namespace="default", resources=[f"../{next_one}"])})
    assert check(repo=repo).notices == [
        f"{ALREADY}kubernetes/dev/c/kustomization.yaml: resources: '../a': a cycle of kustomizations "
        "(kubernetes/dev/a/ -> kubernetes/dev/b/ -> kubernetes/dev/c/ -> kubernetes/dev/a/); kustomize refuses to "
        "build it; 3 "
        "Kustomizations fail to build because of it (flux-system/a, flux-system/b, flux-system/c), and Flux holds back "
        "whatever depends on them; hint: remove '../a' from the resources of kubernetes/dev/c/kustomization.yaml"]


def test_a_kustomization_without_spec_path_is_named_at_its_file_with_the_whole_repositorys_build_failure(check):
    pathless = ks("x", "./unused", **EVERY_KS)
    del pathless["spec"]["path"]
    repo = {**repository(), "clusters/dev/x.yaml": dump(pathless),
            "dup/a.yaml": dump(cm("same", "default")), "dup/b.yaml": dump(cm("same", "default"))}
    assert check(repo=repo).notices == [
        f"{ALREADY}clusters/dev/x.yaml: spec.path: not set, so Flux builds the whole repository (./), and that build "
        "fails: . (Flux's generated kustomization): ConfigMap default/same comes from both dup/a.yaml and dup/b.yaml; "
        f"kustomize refuses an object twice in one build; {FAILS_X}; hint: set spec.path to the folder this "
        "Kustomization is meant to apply"]


def test_three_kustomization_files_in_one_folder_name_the_last_beside_the_other_two(check):
    repo = hand_written("x", **{name: resources("cm.yaml") for name in (
        "kubernetes/dev/x/kustomization.yaml", "kubernetes/dev/x/kustomization.yml", "kubernetes/dev/x/Kustomization")},
        **{"kubernetes/dev/x/cm.yaml": dump(cm("x", "default"))})
    assert check(repo=repo).notices == [
        f"{ALREADY}kubernetes/dev/x/Kustomization: a second kustomization file beside "
        "kubernetes/dev/x/kustomization.yaml and kubernetes/dev/x/kustomization.yml: kustomize and Flux refuse to "
        f"build kubernetes/dev/x/ with more than one; {FAILS_X}; hint: keep one of them"]


@pytest.mark.parametrize("link", ["components", "components/dev/plex"])
def test_a_link_at_any_depth_on_the_way_to_an_exported_file_hides_what_lies_below_it(check, tmp_path, link):
    """The export's ${MISSING} below the link would be refused, and the repository's own failed build beside it is
    still said (as a notice)."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "repo" / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "repo" / link).symlink_to(tmp_path / "elsewhere")
    repo = hand_written("x", **{"kubernetes/dev/x/kustomization.yaml": resources("gone.yaml")})
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        **PLEX_WITH_VARIABLES})
    stack = check(repo=repo, files=files)
    assert stack.problems == []
    assert [n.split(";")[0] for n in stack.notices] == [
        f"{ALREADY}kubernetes/dev/x/kustomization.yaml: resources: 'gone.yaml': no such file or folder"]


def test_a_failed_build_of_the_repository_does_not_take_the_exports_objects_it_does_not_hold(check):
    """The Kustomization the entry folder leaves out is said on its own line; the unrelated failure stays a notice."""
    repo = {**repository(), "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS)),
            "kubernetes/dev/a/kustomization.yaml": resources("gone.yaml")}
    stack = check(repo=repo, files=exported(**{"clusters/dev/gpu-platform/kustomization.yaml": resources()}))
    assert stack.problems == [
        "clusters/dev/gpu-platform: Kustomization flux-system/plex: no Flux Kustomization applies it; Flux's walk "
        "starts at ./clusters/dev (flux-system/flux-system); hint: set gitops.entryDir to a folder inside the "
        "bootstrap path"]
    assert [n.split(";")[0] for n in stack.notices] == [
        f"{ALREADY}kubernetes/dev/a/kustomization.yaml: resources: 'gone.yaml': no such file or folder"]


def test_after_a_failed_builds_line_the_walks_later_problems_are_still_judged(check):
    repo = {**repository(), "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS)),
            "kubernetes/dev/a/kustomization.yaml": resources("gone.yaml")}
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", a="${MISSING}")),
                        **PLEX_WITH_VARIABLES})
    assert check(repo=repo, files=files).problems == [UNRESOLVED.format(
        file="components/dev/plex/cm.yaml", oid="ConfigMap plex/plex-config", ks="flux-system/plex")]


def test_a_problem_led_by_an_exported_kustomization_is_refused_even_if_it_was_there_before(check):
    files = exported(**{"clusters/dev/gpu-platform/plex.yaml": dump(ks(
        "plex", "./components/dev/plex", **EVERY_KS, dependsOn=[{"name": "cilium"}], wait=True, timeout="10m",
        postBuild={"substituteFrom": [{"kind": "ConfigMap", "name": "gone"}]}))})
    stack = check(repo={**repository(), **files}, files=files)
    assert stack.notices == []
    assert stack.problems == [
        "flux-system/plex (clusters/dev/gpu-platform/plex.yaml): postBuild.substituteFrom: ConfigMap flux-system/gone "
        "is applied by no Kustomization in this repository; Flux would fail the build; hint: add it, or mark the "
        "reference optional: true"]


def test_a_failed_build_whose_error_the_export_changes_is_refused(check):
    """Before the export the first entry is missing; after it, the second: a new failure, though of an old build."""
    repo = {**repository(), "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS)),
            "kubernetes/dev/a/kustomization.yaml": resources("../../../components/dev/plex/cm.yaml", "gone.yaml")}
    assert check(repo=repo).problems == [
        "kubernetes/dev/a/kustomization.yaml: resources: 'gone.yaml': no such file or folder; flux-system/a "
        "(clusters/dev/a.yaml) fails to build because of it, and Flux holds back whatever depends on it; hint: fix the "
        "file named; see kustomize's own answer with `kubectl kustomize --load-restrictor LoadRestrictionsNone "
        "./kubernetes/dev/a`"]


def test_a_variable_applied_as_written_is_named_in_the_file_the_exported_kustomization_applies(check):
    """The repository applies the same ConfigMap from its own file first (a refusal of its own): the notice names
    the export's file, the one flux-system/plex reads."""
    repo = {**repository(), "clusters/dev/a.yaml": dump(ks("a", "./kubernetes/dev/a", **EVERY_KS)),
            "kubernetes/dev/a/cm.yaml": dump(cm("plex-config", "plex", url="http://${HOST}/"))}
    files = exported(**{"components/dev/plex/cm.yaml": dump(cm("plex-config", "plex", url="http://${HOST}/"))})
    stack = check(repo=repo, files=files)
    assert [p.split(":")[0] for p in stack.problems] == ["kubernetes/dev/a/cm.yaml"]
    assert [n.split(": data.url")[0] for n in stack.notices] == [
        "components/dev/plex/cm.yaml (ConfigMap plex/plex-config)"]


def test_three_exported_folders_a_failed_bootstrap_leaves_unapplied_are_listed_in_one_line(check):
    repo = {**repository(),
            "clusters/dev/kustomization.yaml": resources("flux-system", "cilium.yaml", "gpu-platform", "gone.yaml")}
    files = exported(**{
        "clusters/dev/gpu-platform/kustomization.yaml": resources("intel-gpu-plugin.yaml", "plex.yaml"),
        "clusters/dev/gpu-platform/intel-gpu-plugin.yaml": dump(ks(
            "intel-gpu-plugin", "./components/dev/intel-gpu-plugin", **EVERY_KS, dependsOn=[{"name": "cilium"}],
            wait=True, timeout="10m")),
        "components/dev/intel-gpu-plugin/kustomization.yaml": resources("cm.yaml"),
        "components/dev/intel-gpu-plugin/cm.yaml": dump(cm("plugin", "intel-gpu-plugin"))})
    flux_graph = graph(kustomizations=[*graph()["kustomizations"],
                                       {"name": "intel-gpu-plugin", "namespace": "flux-system", "declared": True}])
    (line,) = check(repo=repo, files=files, flux_graph=flux_graph).problems
    assert ("nothing applies the 4 objects the export writes to clusters/dev/gpu-platform/, components/dev/plex/ and "
            "components/dev/intel-gpu-plugin/ (e.g. Kustomization flux-system/plex)") in line
