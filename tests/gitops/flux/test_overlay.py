"""gitops/flux/overlay.py and the Builder's overlay: a Flux Kustomization's own fields (patches, images,
namePrefix/nameSuffix, components, targetNamespace, commonMetadata) added to its path's build, each field Flux would
refuse named at the file declaring it, and each object of the overlay's build named at the file it came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.flux.build import Builder, RepoView
from gitops.flux.documents import BuildError, Built
from gitops.flux.inventory import ObjectId
from gitops.flux.overlay import ORIGIN_ANNOTATION, counterpart


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _cm(name: str, namespace: str = "", **meta: object) -> str:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **meta}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})


def _overlay_doc(root: Path, folder: str, fields: dict, target: str | None = None) -> dict:
    here = root / ".gitops-export" / "flux-overlay" / "0"
    return Builder(RepoView(root))._overlay_doc(folder, fields, target, "clusters/dev/apps.yaml", root, here)


def test_the_overlay_names_the_folder_from_the_work_folder_and_carries_each_field_flux_adds(tmp_path):
    patch = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n"
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a"),
                                     "extra/kustomization.yaml": "kind: Component\n"})
    fields = {"namePrefix": "lab-", "nameSuffix": "-v1", "images": [{"name": "nginx", "newTag": "1.27"}],
              "patches": [{"patch": patch, "target": {"kind": "ConfigMap"}, "options": {"allowNameChange": True}}],
              "components": ["../extra"]}
    assert _overlay_doc(root, "apps", fields, "shop") == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["../../../apps"],
        "buildMetadata": ["originAnnotations"], "namespace": "shop", "namePrefix": "lab-", "nameSuffix": "-v1",
        "images": [{"name": "nginx", "newTag": "1.27"}],
        "patches": [{"patch": patch, "target": {"kind": "ConfigMap"}}],  # what Flux takes of a patch, no more
        "components": ["../../../extra"]}
    assert _overlay_doc(root, "", {}) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["../../../apps",
                                                                                              "../../../extra"],
        "buildMetadata": ["originAnnotations"]}, "the repository's root, which has no kustomization: what Flux lists"


def test_where_flux_generates_the_kustomization_the_overlay_lists_what_it_would_read(tmp_path):
    root = _tree(tmp_path / "repo", {"a.yaml": _cm("a"), "b.yml": _cm("b"), "NOTES.md": "not yaml\n",
                                     "deep/x/c.yaml": _cm("c"), "sub/kustomization.yaml": "resources: [d.yaml]\n",
                                     "sub/d.yaml": _cm("d"), "sub/not-listed.yaml": _cm("e")})
    assert _overlay_doc(root, "", {"namePrefix": "p-"})["resources"] == [
        "../../../a.yaml", "../../../b.yml", "../../../deep/x/c.yaml", "../../../sub"]
    assert _overlay_doc(root, "deep", {"namePrefix": "p-"})["resources"] == ["../../../deep/x/c.yaml"]


@pytest.mark.parametrize(("spec", "problem"), [
    ({"patches": ["a string"]},
     "spec.patches[0]: Flux takes an inline `patch` string (and an optional target) only"),
    ({"patches": [{"patch": "kind: ConfigMap\n"}, {"path": "patch.yaml"}]},
     "spec.patches[1]: Flux takes an inline `patch` string (and an optional target) only"),
    ({"patches": [{"patch": "a: 1\nb: [1"}]},
     "spec.patches[0].patch: not valid YAML (line 3 of the patch): did not find expected ',' or ']'"),
    ({"patches": [{"patch": "a: \x07"}]}, "spec.patches[0].patch: not valid YAML: unreadable"),
    ({"patches": [{"patch": "a: !!int x"}]}, "spec.patches[0].patch: not readable as YAML"),
    ({"patches": [{"patch": "just text"}]}, "spec.patches[0].patch: neither a strategic merge patch (a mapping) "
                                            "nor a JSON6902 patch (a list of operations)"),
    ({"components": ["../../elsewhere"]}, "spec.components: '../../elsewhere': leaves the repository"),
    ({"components": ["../missing"]}, "spec.components: '../missing': no such folder"),
], ids=["not-a-mapping", "a-patch-file", "invalid-yaml", "unreadable", "a-bad-tag", "a-scalar", "leaves", "missing"])
@pytest.mark.parametrize("declared_in", ["clusters/dev/apps.yaml", ""])
def test_a_kustomization_field_flux_would_refuse_is_named_at_the_file_declaring_it(tmp_path, spec, problem,
                                                                                   declared_in):
    """Before kubectl runs: kustomize's own error would name the walk's overlay, not the file the user wrote (or the
    folder, where the caller knows no file)."""
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a")})
    builder = Builder(RepoView(root))
    with pytest.raises(BuildError) as refused:
        builder.flux_build("apps", spec, declared_in) if declared_in else builder.flux_build("apps", spec)
    builder.close()
    assert str(refused.value) == f"{declared_in or 'apps'}: {problem}"
    assert builder.kubectl_builds == 0
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "apps", "apps/cm.yaml", "apps/kustomization.yaml"], "the overlay's folder is gone once the builder closes"


def _attributed(root: Path, manifest: dict, plain: list[Built]) -> Built:
    here = root / ".gitops-export" / "flux-overlay" / "0"
    return Builder(RepoView(root))._attributed(manifest, "apps", plain, "lab-", "", "clusters/dev/apps.yaml", root,
                                               here)


def _overlay_object(origin: str | None, name: str = "lab-a", **annotations: str) -> dict:
    if origin is not None:
        annotations[ORIGIN_ANNOTATION] = origin
    return {"kind": "ConfigMap", "metadata": {"name": name, **({"annotations": annotations} if annotations else {})}}


@pytest.mark.parametrize(("annotation", "origin"), [
    ("path: ../../../apps/cm.yaml\n", "apps/cm.yaml"),
    ("path: '../../../apps/a: b.yaml'\n", "apps/a: b.yaml"),  # a path kustomize must quote
    ("configuredIn: ../../../apps/kustomization.yaml\nconfiguredBy:\n  kind: ConfigMapGenerator\n", "apps"),
    ("path: ../../../apps/gone.yaml\n", "apps"),
    ("path: [unclosed\n", "apps"),
    ("path: 5\n", "apps"),
    (None, "apps"),
], ids=["a-file", "quoted", "a-generator", "no-such-file", "not-yaml", "not-a-string", "none"])
def test_an_object_of_the_overlay_is_named_at_the_file_its_origin_annotation_gives_or_else_at_the_folder(
        tmp_path, annotation, origin):
    root = _tree(tmp_path / "repo", {"apps/cm.yaml": _cm("a"), "apps/a: b.yaml": _cm("b")})
    built = _attributed(root, _overlay_object(annotation), [])
    assert (built.origin, built.trail, built.declared) == (
        origin, (("clusters/dev/apps.yaml", "spec (Flux's own fields)"),), None)
    assert built.manifest == {"kind": "ConfigMap", "metadata": {"name": "lab-a"}}, "the annotation is taken off"


def test_the_origin_annotation_is_taken_off_and_every_other_annotation_kept(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/cm.yaml": _cm("a")})
    built = _attributed(root, _overlay_object("path: ../../../apps/cm.yaml\n", note="kept"), [])
    assert built.manifest["metadata"] == {"name": "lab-a", "annotations": {"note": "kept"}}


def test_an_object_of_the_overlay_takes_the_trail_and_declaration_of_its_counterpart_in_the_plain_build(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/cm.yaml": _cm("a"), "apps/other.yaml": _cm("a", "two")})
    trail = (("apps/kustomization.yaml", "cm.yaml"),)
    declared = yaml.safe_load(_cm("a"))
    counterpart = Built(declared, "apps/cm.yaml", trail)
    built = _attributed(root, _overlay_object("configuredIn: x\n"), [counterpart])
    assert (built.origin, built.trail, built.declared) == ("apps/cm.yaml", trail, declared), \
        "no file in the annotation: the counterpart's"
    built = _attributed(root, _overlay_object("path: ../../../apps/other.yaml\n"), [counterpart])
    assert (built.origin, built.trail) == ("apps/other.yaml", trail), "the annotation's file wins over the folder's"
    same = {"kind": "ConfigMap", "metadata": {"name": "lab-a"}}
    assert _attributed(root, _overlay_object(None), [Built(same, "apps/cm.yaml", trail)]).declared is None, \
        "declared only where the Kustomization's fields changed it"


def test_of_two_counterparts_the_one_from_the_annotations_file_is_taken(tmp_path):
    root = _tree(tmp_path / "repo", {"apps/one.yaml": _cm("a", "one"), "apps/two.yaml": _cm("a", "two")})
    one = Built(yaml.safe_load(_cm("a", "one")), "apps/one.yaml", (("apps/kustomization.yaml", "one.yaml"),))
    two = Built(yaml.safe_load(_cm("a", "two")), "apps/two.yaml", (("apps/kustomization.yaml", "two.yaml"),))
    built = _attributed(root, _overlay_object("path: ../../../apps/two.yaml\n"), [one, two])
    assert (built.origin, built.trail) == ("apps/two.yaml", two.trail)


def test_what_only_the_kustomizations_own_component_generates_is_named_at_the_folder_and_came_by_the_spec(
        tmp_path):
    root = _tree(tmp_path / "repo", {
        "apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a", "x"),
        "extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                                    "configMapGenerator: [{name: gen, namespace: x, literals: [a=b]}]\n"
                                    "generatorOptions: {disableNameSuffixHash: true}\n"})
    builder = Builder(RepoView(root))
    built = builder.flux_build("apps", {"components": ["../extra"]}, "clusters/dev/apps.yaml")
    builder.close()
    assert {ObjectId.of(b.manifest).name: (b.origin, b.trail) for b in built} == {
        "a": ("apps/cm.yaml", (("apps/kustomization.yaml", "cm.yaml"),)),
        "gen": ("apps", (("clusters/dev/apps.yaml", "spec (Flux's own fields)"),))}
    assert not (root / ".gitops-export").exists()


def test_a_builder_that_needed_no_overlay_leaves_the_repository_as_it_found_it(tmp_path):
    """Even an empty work folder of the export's stays: the walk reads, it never tidies what it did not make."""
    root = _tree(tmp_path / "repo", {"apps/kustomization.yaml": "resources: [cm.yaml]\n", "apps/cm.yaml": _cm("a")})
    (root / ".gitops-export").mkdir()
    builder = Builder(RepoView(root))
    assert [ObjectId.of(b.manifest).name for b in builder.flux_build("apps", {"commonMetadata": {}})] == ["a"]
    builder.close()
    assert (root / ".gitops-export").is_dir()


def test_common_metadata_is_added_to_the_labels_and_annotations_an_object_has_and_wins_over_them(tmp_path):
    root = _tree(tmp_path / "repo", {"c/cm.yaml": _cm("a", "x", labels={"app": "a", "team": "old"},
                                                      annotations={"note": "kept"})})
    (built,) = Builder(RepoView(root)).flux_build("c", {"commonMetadata": {
        "labels": {"team": "home", "tier": 1}, "annotations": {"owner": "platform"}}})
    assert built.manifest["metadata"] == {"name": "a", "namespace": "x",
                                          "labels": {"app": "a", "team": "home", "tier": "1"},
                                          "annotations": {"note": "kept", "owner": "platform"}}
    assert built.origin == "c/cm.yaml"


# --- the counterpart in the plain build of an object the overlay renamed -----------------------------------------

def built(kind: str, name: str, origin: str, namespace: str = "shop") -> Any:
    return Built({"kind": kind, "metadata": {"name": name, "namespace": namespace}}, origin)


def test_the_counterpart_of_an_object_is_of_its_kind_and_name_without_prefix_and_suffix():
    web, service = built("ConfigMap", "web", "apps/cm.yaml"), built("Service", "web", "apps/svc.yaml")
    plain = [web, service]
    assert counterpart({"kind": "Service", "metadata": {"name": "lab-web-v1"}}, "apps", plain, "lab-", "-v1") is \
        service
    assert counterpart({"kind": "ConfigMap", "metadata": {"name": "web-v1"}}, "apps", plain, "", "-v1") is web
    assert counterpart({"kind": "ConfigMap", "metadata": {"name": "lab-web"}}, "apps", plain, "lab-", "") is web
    assert counterpart({"kind": "ConfigMap", "metadata": {"name": "web"}}, "apps", plain, "", "") is web
    assert counterpart({"kind": "Secret", "metadata": {"name": "web"}}, "apps", plain, "", "") is None
    assert counterpart({"kind": "ConfigMap", "metadata": {"name": "lab-other-v1"}}, "apps", plain, "lab-",
                        "-v1") is None
    assert counterpart({"kind": "ConfigMap"}, "apps", [built("ConfigMap", "", "apps/x.yaml")], "", "") is not None
    # a name that does not carry both the prefix and the suffix is compared whole, never cut
    assert counterpart({"kind": "ConfigMap", "metadata": {"name": "abcdweb"}}, "apps", plain, "lab-", "") is None
    assert counterpart({"kind": "ConfigMap", "metadata": {"name": "lab-web-v2"}}, "apps", plain, "lab-",
                        "-v1") is None


def test_of_several_counterparts_the_one_from_the_same_file_is_taken_and_none_when_that_is_unknown():
    here, there = built("ConfigMap", "web", "apps/a.yaml", "one"), built("ConfigMap", "web", "apps/b.yaml", "two")
    manifest = {"kind": "ConfigMap", "metadata": {"name": "lab-web"}}
    assert counterpart(manifest, "apps/b.yaml", [here, there], "lab-", "") is there
    assert counterpart(manifest, "apps/a.yaml", [here, there], "lab-", "") is here
    assert counterpart(manifest, "apps", [here, there], "lab-", "") is None  # a folder: no file to tell them apart
