"""What a Flux HelmRelease installs (gitops/flux/helm.py): the chart by its own spec, or by chartRef to the source
the walk applies; None where the release does not say, never a guess."""

from __future__ import annotations

from gitops.flux.helm import SOURCE_GROUP, ChartSource, chart_source, helm_release_id
from gitops.flux.inventory import ObjectId


def release(spec: dict) -> dict:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "plex", "namespace": "default"}, "spec": spec}


def test_a_release_naming_its_chart_in_its_own_spec_gives_that_chart_and_version():
    found = chart_source(release({"chart": {"spec": {"chart": "app-template", "version": "4.1.1"}}}), {})
    assert found == ChartSource("app-template", "4.1.1", "")


def test_a_chart_ref_to_an_oci_repository_gives_the_urls_last_part_and_its_tag():
    oci = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
           "metadata": {"name": "plex", "namespace": "default"},
           "spec": {"url": "oci://ghcr.io/bjw-s-labs/helm/app-template/", "ref": {"tag": "5.1.0"}}}
    sources = {ObjectId(SOURCE_GROUP, "OCIRepository", "default", "plex"): oci}
    found = chart_source(release({"chartRef": {"kind": "OCIRepository", "name": "plex"}}), sources)
    assert found == ChartSource("app-template", "5.1.0", ", by chartRef OCIRepository default/plex")


def test_a_chart_ref_to_a_helm_chart_in_another_namespace_gives_its_chart():
    chart = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart",
             "metadata": {"name": "gpu", "namespace": "flux-system"},
             "spec": {"chart": "intel-device-plugins-gpu", "version": "0.34.0"}}
    sources = {ObjectId(SOURCE_GROUP, "HelmChart", "flux-system", "gpu"): chart}
    found = chart_source(release({"chartRef": {"kind": "HelmChart", "name": "gpu", "namespace": "flux-system"}}),
                         sources)
    assert found == ChartSource("intel-device-plugins-gpu", "0.34.0", ", by chartRef HelmChart flux-system/gpu")


def test_a_chart_ref_the_walk_does_not_apply_or_a_url_without_a_path_says_nothing():
    ref = release({"chartRef": {"kind": "OCIRepository", "name": "plex"}})
    assert chart_source(ref, {}) is None
    bare = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
            "metadata": {"name": "plex", "namespace": "default"}, "spec": {"url": "registry"}}
    assert chart_source(ref, {ObjectId(SOURCE_GROUP, "OCIRepository", "default", "plex"): bare}) is None
    assert chart_source(release({"chart": "not a mapping"}), {}) is None


def test_a_helm_release_is_identified_by_its_group_kind_namespace_and_name():
    assert helm_release_id("default", "plex") == ObjectId.of(release({}))
