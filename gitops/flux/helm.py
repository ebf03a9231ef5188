"""What a Flux HelmRelease installs: the chart its own spec names (`chart.spec.chart`), or the one its `chartRef` points
at (an OCIRepository's URL ends in the chart, a HelmChart names it), as the home-operations repositories write every
release; and, for a bjw-s app-template release an app is adopted from, the pod of its workload, read from its values
as the chart renders them (model/adopt/app_template.py). Read by the walk's checks of Intel's plugin and driver and of
an adopted app, and by the post-merge checks (what the adopted pod holds after the merge)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops.flux.inventory import ObjectId
from model.adopt.app_template import AccessReading, Workload, read_values
from model.outputs import AdoptedRelease
from model.safe_yaml import as_mapping, escaped

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


APP_TEMPLATE = "app-template"


@dataclass(frozen=True)
class PodReading:
    """What the adopted release's workload holds: read from the values, or asserted by the stack where it cannot be."""

    access: AccessReading
    workload: Workload | None  # as app-template renders it (None: not read)
    unreadable: str  # why the values cannot say, "" where they do
    containers: tuple[str, ...] = ()  # the workload's container keys in the values, where it was read


def read_release(release: Mapping[str, Any], adopted: AdoptedRelease,
                 manifests: Mapping[ObjectId, dict[str, Any]]) -> PodReading | str:
    """The pod of the adopted workload, or the problem (a workload the release does not render) as a line's tail."""
    m = as_mapping
    spec = m(release.get("spec"))
    source = chart_source(release, manifests)
    if source is None or source.chart != APP_TEMPLATE:
        shown = f"the chart {escaped(source.chart)}{source.by}" if source else "a chart the walk cannot see"
        return PodReading("cannot-tell", None, f"it installs {shown}, not bjw-s {APP_TEMPLATE}, whose values are "
                                               "the only ones the export reads")
    for key, what in (("valuesFrom", "takes values from a ConfigMap or Secret the export does not read"),
                      ("postRenderers", "changes what the chart renders after it")):
        if spec.get(key):
            return PodReading("cannot-tell", None, f"spec.{key}: the release {what}")
    name = str(m(release.get("metadata")).get("name") or adopted.name)
    reading = read_values(spec.get("values"), name, source.version)
    if reading.unknown:
        return PodReading("cannot-tell", None, "; ".join(reading.unknown))
    workload = next((w for w in reading.workloads if w.kind == adopted.workload_kind
                     and w.name == adopted.workload_name), None)
    if workload is None:
        rendered = ", ".join(escaped(f"{w.kind} {w.name}") for w in reading.workloads if w.kind and w.name)
        return (f"renders no {adopted.workload_kind} {escaped(adopted.workload_name)} (it renders "
                f"{rendered or 'no workload'}); hint: name the one whose pod holds the iGPU in "
                f"{adopted.key}.workload: {{kind: <kind>, name: <name>}}")
    keys = m(m(m(m(spec.get("values")).get("controllers")).get(workload.controller)).get("containers"))
    containers = tuple(str(k) for k in keys)
    if workload.access == "cannot-tell":
        return PodReading("cannot-tell", workload, "; ".join(workload.unknown), containers)
    return PodReading(workload.access, workload, "", containers)
