"""What a Flux HelmRelease installs: the chart its own spec names (`chart.spec.chart`), or the one its `chartRef` points
at (an OCIRepository's URL ends in the chart, a HelmChart names it), as the home-operations repositories write every
release. Read by the walk's checks of Intel's plugin and driver and of an adopted app, and by the reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops.flux.inventory import ObjectId
from model.safe_yaml import as_mapping

HELM_GROUP = "helm.toolkit.fluxcd.io"
SOURCE_GROUP = "source.toolkit.fluxcd.io"


def helm_release_id(namespace: str, name: str) -> ObjectId:
    return ObjectId(HELM_GROUP, "HelmRelease", namespace, name)


@dataclass(frozen=True)
class ChartSource:
    """The chart a HelmRelease installs, as its own spec or the source its chartRef points at says it."""

    chart: str
    version: str | None  # the release's version or tag, where one is pinned
    by: str  # how the release names it: "" (chart.spec.chart), or ", by chartRef <source>"


def chart_source(release: Mapping[str, Any], manifests: Mapping[ObjectId, dict[str, Any]]) -> ChartSource | None:
    """The chart of a HelmRelease, or None where the release does not say (a chartRef to an object the walk does not
    apply, an OCIRepository without a path)."""
    m = as_mapping
    spec = m(release.get("spec"))
    chart_spec = m(m(spec.get("chart")).get("spec"))
    chart = chart_spec.get("chart")
    if isinstance(chart, str) and chart:
        version = chart_spec.get("version")
        return ChartSource(chart, str(version) if isinstance(version, str | int | float) else None, "")
    ref = m(spec.get("chartRef"))
    kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
    namespace = str(ref.get("namespace") or m(release.get("metadata")).get("namespace") or "")
    oid = ObjectId(SOURCE_GROUP, kind, namespace, name)
    source = manifests.get(oid)
    if source is None:
        return None
    by, source_spec = f", by chartRef {oid}", m(source.get("spec"))
    if kind == "OCIRepository":  # oci://ghcr.io/bjw-s-labs/helm/app-template: the chart is the last part
        url = str(source_spec.get("url") or "").rstrip("/")
        tag = m(source_spec.get("ref")).get("tag")
        return ChartSource(url.rpartition("/")[2], str(tag) if isinstance(tag, str) else None, by) \
            if "/" in url else None
    chart, version = source_spec.get("chart"), source_spec.get("version")
    if kind == "HelmChart" and isinstance(chart, str) and chart:
        return ChartSource(chart, str(version) if isinstance(version, str) else None, by)
    return None
