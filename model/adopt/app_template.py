"""How the pods of a bjw-s `app-template` HelmRelease reach the GPU, read from the release's `spec.values` as the chart
renders them, without Helm and without a network (issue 53).

The rules are app-template 4.1.1's (its `common` library 4.1.1: `tests/fixtures/charts/app-template`), held to Helm's
own rendering by tests/e2e/test_app_template_rendered_by_helm.py. The fields read, and nothing else:

- the workload's name: `global.nameOverride` (app-template sets it to the release name when it is unset, so the
  top-level `nameOverride` never counts), `global.fullnameOverride` and `fullnameOverride`,
  `global.alwaysAppendIdentifierToResourceName`, a controller's `forceRename`, `prefix` and `suffix`;
- `controllers.<c>`: `enabled`, `type` (deployment, statefulset, daemonset, cronjob, job; deployment when empty),
  `containers.<k>` and `initContainers.<k>` (`enabled`, `nameOverride`, `resources`: the device plugin's
  `gpu.intel.com/i915` under `limits` or `requests`, and `claims`), `defaultContainerOptions.resources` with
  `defaultContainerOptionsStrategy` and `applyDefaultContainerOptionsToInitContainers`, and `pod.resourceClaims`;
- `defaultPodOptions.resourceClaims`: a controller's non-empty `pod.resourceClaims` replaces it (an empty list does
  not), as the chart's pod options do;
- `persistence.<p>`: `enabled`, `type` (`hostPath` with its `hostPath`; `custom` with `volumeSpec.hostPath.path`; the
  other types hold no host device), `globalMounts` (every controller's pod), `advancedMounts.<controller>` (that
  controller's pod only); an item with neither is in every controller's pod.

The access is `model/evidence.py`'s vocabulary and order (`held_access`): device-plugin, else dra-claim (a pod-level
resource claim), else host-path (a hostPath volume of /dev/dri or below), else none. A value the chart would render
differently from what it says (a `{{ }}` template), or that its schema refuses (a string where a mapping belongs, an
unknown `type`, an `enabled` that is not true or false), makes the answer "cannot-tell" with the value's path: never a
guess, never a traceback.

Pod-level `resourceClaims` depend on the chart's release: 4.1.1 renders none (its pod options have no such field and
its schema refuses one), the common library 5.3.0 renders them (for Kubernetes 1.32 or newer); for a release between
the two, or an unknown one, a pod claim in the values is "cannot-tell". Everything else is read by 4.1.1's rules
whatever the release. What a HelmRelease adds around its values (`valuesFrom`, `postRenderers`) is the caller's to
judge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from model.evidence import RESOURCE, GpuAccess, is_host_device_path

AccessReading = GpuAccess | Literal["cannot-tell"]

KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet", "daemonset": "DaemonSet", "cronjob": "CronJob",
         "job": "Job"}
# The chart release these rules are proven on, and the releases known to render pod-level resourceClaims or not.
PROVEN_VERSION = "4.1.1"
NO_POD_CLAIMS_UP_TO = (4, 1, 1)
POD_CLAIMS_FROM = (5, 3, 0)
# The persistence types that hold no hostPath (4.1.1's templates/lib/pod/fields/_volumes.tpl).
OTHER_PERSISTENCE = ("persistentVolumeClaim", "configMap", "secret", "emptyDir", "nfs")
# The signals in held_access's order: the first one found decides; one that cannot be told before it undecides.
SIGNALS: tuple[GpuAccess, ...] = ("device-plugin", "dra-claim", "host-path")
MAX_MERGE_DEPTH = 32


@dataclass(frozen=True)
class PodClaim:
    """One entry of the pod's `resourceClaims`."""

    name: str
    template: str | None  # resourceClaimTemplateName
    claim: str | None  # resourceClaimName


@dataclass(frozen=True)
class ContainerGpu:
    """A container that requests the device plugin's resource or names a resource claim."""

    key: str  # its key under containers/initContainers
    name: str | None  # the container's name as rendered (None: a templated nameOverride)
    init: bool
    requests: tuple[str, ...]  # "limits" and/or "requests", where gpu.intel.com/i915 is named
    claims: tuple[str, ...]  # resources.claims names


@dataclass(frozen=True)
class Workload:
    """One enabled controller: the workload the chart renders for it and how its pod reaches the GPU."""

    controller: str  # the key under controllers
    kind: str | None  # Deployment, StatefulSet, DaemonSet, CronJob, Job (None: cannot tell)
    name: str | None  # metadata.name (None: cannot tell)
    access: AccessReading
    containers: tuple[ContainerGpu, ...] = ()
    pod_claims: tuple[PodClaim, ...] = ()  # as rendered: empty where the release renders none
    host_paths: tuple[str, ...] = ()  # persistence items (the volumes' names) of /dev/dri
    ignored: tuple[str, ...] = ()  # values paths the chart's release does not render
    unknown: tuple[str, ...] = ()  # why the access, the kind or the name cannot be told


@dataclass(frozen=True)
class AppTemplateReading:
    """A release's workloads; `unknown` says why the whole release cannot be read."""

    release: str
    chart_version: str | None
    workloads: tuple[Workload, ...] = ()
    disabled: tuple[str, ...] = ()  # controllers the chart renders nothing for
    unknown: tuple[str, ...] = ()


def pod_claims_rendered(chart_version: str | None) -> bool | None:
    """Whether the chart's release renders pod-level resourceClaims (None: not known here)."""
    found = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", chart_version.strip()) if isinstance(chart_version, str) else None
    if found is None:
        return None
    version = tuple(int(part) for part in found.groups())
    if version <= NO_POD_CLAIMS_UP_TO:
        return False
    return True if version >= POD_CLAIMS_FROM else None


def read_values(values: Any, release: str, chart_version: str | None = None) -> AppTemplateReading:
    """The workloads an app-template release of these values renders, and each pod's GPU access."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        return AppTemplateReading(release, chart_version, unknown=(f"values: {_shown(values)}, not a mapping",))
    controllers = values.get("controllers") or {}
    if not isinstance(controllers, Mapping):
        return AppTemplateReading(release, chart_version,
                                  unknown=(f"controllers: {_shown(controllers)}, not a mapping",))
    enabled: dict[str, Mapping[str, Any]] = {}
    disabled: list[str] = []
    undecided: list[Workload] = []
    for key in sorted(controllers, key=str):
        item = controllers[key]
        if not isinstance(item, Mapping):  # the chart skips a controller that is not a mapping
            disabled.append(str(key))
            continue
        reasons: list[str] = []
        on = _enabled(item, f"controllers.{key}", reasons)
        if on is None:
            undecided.append(Workload(str(key), None, None, "cannot-tell", unknown=tuple(reasons)))
        elif on:
            enabled[str(key)] = item
        else:
            disabled.append(str(key))
    names = _Names(values, release, len(enabled), bool(undecided))
    workloads = [_workload(values, key, item, names, chart_version) for key, item in enabled.items()]
    return AppTemplateReading(release, chart_version, tuple(sorted([*workloads, *undecided],
                                                                   key=lambda w: w.controller)), tuple(disabled))


class _Names:
    """The chart's naming rules (common's lib/chart/_names.tpl and lib/common/_determineResourceNameFromValues.tpl)."""

    def __init__(self, values: Mapping[str, Any], release: str, count: int, count_unknown: bool) -> None:
        self.count = count
        # how many controllers render decides whether each name ends in its controller's key
        self.reasons = ["controllers: an enabled that is not true or false (how many controllers render)"] \
            if count_unknown else []
        glob = values.get("global") or {}
        if not isinstance(glob, Mapping):
            self.reasons.append(f"global: {_shown(glob)}, not a mapping")
            glob = {}
        self.append = bool(glob.get("alwaysAppendIdentifierToResourceName"))
        self.fullname = self._fullname(glob, values, release)

    def _fullname(self, glob: Mapping[str, Any], values: Mapping[str, Any], release: str) -> str | None:
        name = glob.get("nameOverride") or release  # app-template's own default: the release name
        override_path = "global.fullnameOverride" if glob.get("fullnameOverride") else "fullnameOverride"
        override = glob.get("fullnameOverride") or values.get("fullnameOverride")
        for path, value in (("global.nameOverride", name), (override_path, override)):
            if value and not _plain(value):
                self.reasons.append(f"{path}: {_shown(value)}, not a plain string")
                return None
        name = _trunc(name)
        if override:
            return _trunc(override)
        return _trunc(release if name in release else f"{release}-{name}")

    def of(self, key: str, item: Mapping[str, Any], reasons: list[str]) -> str | None:
        if self.reasons or self.fullname is None:
            reasons.extend(self.reasons)
            return None
        force, prefix, suffix = item.get("forceRename"), item.get("prefix"), item.get("suffix")
        for field, value in (("forceRename", force), ("prefix", prefix), ("suffix", suffix)):
            if value and not _plain(value):
                reasons.append(f"controllers.{key}.{field}: {_shown(value)}, not a plain string")
                return None
        if force:
            return str(force).lower()
        name = self.fullname
        if prefix and prefix != name:
            name = f"{prefix}-{name}"
        if (self.count > 1 or self.append) and not name.endswith(f"-{key}") and key != name:
            name = f"{name}-{key}"
        if suffix and not name.endswith(f"-{suffix}"):
            name = f"{name}-{suffix}"
        return name.lower()


def _workload(values: Mapping[str, Any], key: str, item: Mapping[str, Any], names: _Names,
              chart_version: str | None) -> Workload:
    reasons: list[str] = []
    path = f"controllers.{key}"
    name = names.of(key, item, reasons)
    kind_value = item.get("type") or "deployment"
    kind = KINDS.get(kind_value) if isinstance(kind_value, str) else None
    if kind is None:
        reasons.append(f"{path}.type: {_shown(kind_value)}, not one of {', '.join(KINDS)}")
        return Workload(key, None, name, "cannot-tell", unknown=tuple(reasons))
    unknown: dict[GpuAccess, list[str]] = {signal: [] for signal in SIGNALS}
    containers = _containers(item, path, unknown["device-plugin"])
    ignored: list[str] = []
    claims = _rendered_claims(values, item, path, chart_version, unknown["dra-claim"], ignored)
    host_paths = _host_paths(values, key, unknown["host-path"])
    found = {"device-plugin": any(c.requests for c in containers), "dra-claim": bool(claims),
             "host-path": bool(host_paths)}
    access: AccessReading = "none"
    for signal in SIGNALS:
        if found[signal] or unknown[signal]:
            access = signal if found[signal] else "cannot-tell"
            break
    told = [] if access != "cannot-tell" else [r for signal in SIGNALS for r in unknown[signal]]
    return Workload(key, kind, name, access, containers, claims, host_paths, tuple(ignored), tuple(reasons + told))


def _containers(item: Mapping[str, Any], path: str, both: list[str]) -> tuple[ContainerGpu, ...]:
    """The containers and init containers that request the GPU or name a claim, their resources as the chart merges
    the controller's defaultContainerOptions into them. A container that cannot be read could hide a device plugin
    request (`both`: the device plugin's unknowns)."""
    found: list[ContainerGpu] = []
    main_count = 0
    for field, init in (("containers", False), ("initContainers", True)):
        listed = item.get(field) or {}
        if not isinstance(listed, Mapping):
            both.append(f"{path}.{field}: {_shown(listed)}, not a mapping")
            continue
        for key in sorted(listed, key=str):
            container, where = listed[key], f"{path}.{field}.{key}"
            if not isinstance(container, Mapping):
                if init:  # the chart fails on an init container that is not a mapping, skips a container
                    both.append(f"{where}: {_shown(container)}, not a mapping")
                continue
            on = _enabled(container, where, both)
            if not on:
                continue
            main_count += 0 if init else 1
            resources = _resources(item, container, init, path, where, both)
            if resources is not None:
                read = _container_gpu(str(key), container, init, resources, where, both)
                if read is not None and (read.requests or read.claims):
                    found.append(read)
    if main_count == 0 and not both:
        both.append(f"{path}.containers: no container enabled (the chart refuses to render)")
    return tuple(found)


def _resources(item: Mapping[str, Any], container: Mapping[str, Any], init: bool, path: str, where: str,
               reasons: list[str]) -> Mapping[str, Any] | None:
    """A container's resources with the controller's defaultContainerOptions.resources merged as the chart merges
    them (common's lib/container/_valuesToObject.tpl); None when that cannot be told."""
    own = container.get("resources")
    defaults = item.get("defaultContainerOptions") or {}
    default = defaults.get("resources") if isinstance(defaults, Mapping) else None
    strategy = item.get("defaultContainerOptionsStrategy", "overwrite")
    apply = item.get("applyDefaultContainerOptionsToInitContainers", True) if init else True
    if not isinstance(defaults, Mapping):
        reasons.append(f"{path}.defaultContainerOptions: {_shown(defaults)}, not a mapping")
        return None
    if default and (strategy not in ("overwrite", "merge") or not isinstance(apply, bool)):
        bad = ("defaultContainerOptionsStrategy", strategy) if strategy not in ("overwrite", "merge") else (
            "applyDefaultContainerOptionsToInitContainers", apply)
        reasons.append(f"{path}.{bad[0]}: {_shown(bad[1])}, not one the chart knows")
        return None
    if default and apply:
        if strategy == "overwrite" or not own:
            own = own or default
        elif isinstance(own, Mapping) and isinstance(default, Mapping):
            own = _merge(own, default, 0)
    if own is None or own == {}:
        return {}
    if not isinstance(own, Mapping):
        reasons.append(f"{where}.resources: {_shown(own)}, not a mapping")
        return None
    return own


def _container_gpu(key: str, container: Mapping[str, Any], init: bool, resources: Mapping[str, Any], where: str,
                   reasons: list[str]) -> ContainerGpu | None:
    requests = []
    for field in ("limits", "requests"):
        listed = resources.get(field)
        if isinstance(listed, Mapping):
            if RESOURCE in listed:
                requests.append(field)
        elif listed is not None:
            reasons.append(f"{where}.resources.{field}: {_shown(listed)}, not a mapping")
            return None
    claims = resources.get("claims") or []
    if not isinstance(claims, list) or not all(isinstance(c, Mapping) and _plain(c.get("name")) for c in claims):
        reasons.append(f"{where}.resources.claims: {_shown(claims)}, not a list of claims by name")
        return None
    override = container.get("nameOverride")
    name = str(override or key)
    return ContainerGpu(key, None if "{{" in name or (override and not _plain(override)) else name, init,
                        tuple(requests), tuple(str(c["name"]) for c in claims))


def _rendered_claims(values: Mapping[str, Any], item: Mapping[str, Any], path: str, chart_version: str | None,
                     reasons: list[str], ignored: list[str]) -> tuple[PodClaim, ...]:
    """The pod's resourceClaims: defaultPodOptions' unless the controller's pod options name a non-empty list (common's
    lib/pod/_getOption.tpl), as the chart's release renders them."""
    for where, options in (("defaultPodOptions", values.get("defaultPodOptions")), (f"{path}.pod", item.get("pod"))):
        if options and not isinstance(options, Mapping):
            reasons.append(f"{where}: {_shown(options)}, not a mapping")
            return ()
    chosen = pod_option(values, path, item, "resourceClaims")
    if chosen is None:
        return ()
    where, value = chosen
    rendered = pod_claims_rendered(chart_version)
    if rendered is False:
        ignored.append(f"{where} (app-template {chart_version} renders no pod resourceClaims)")
        return ()
    if rendered is None:
        reasons.append(f"{where}: whether app-template {chart_version or '(release unknown)'} renders pod "
                       f"resourceClaims is not known here ({PROVEN_VERSION} does not, 5.3.0 does)")
        return ()
    claims = _pod_claims(value)
    if claims is None:
        reasons.append(f"{where}: {_shown(value)}, not a list of claims by name and template or claim")
        return ()
    return claims


def pod_option(values: Mapping[str, Any], path: str, item: Mapping[str, Any], option: str) -> tuple[str, Any] | None:
    """A pod option that is not a mapping (a list: resourceClaims, tolerations) as common's lib/pod/_getOption.tpl
    resolves it for the controller `item` at `path`: the controller's `pod.<option>` when it is a boolean or not empty,
    else `defaultPodOptions.<option>` when it is, else None; with the values path it comes from. An empty list in the
    controller's pod options does not clear the defaults'."""
    defaults, pod = values.get("defaultPodOptions"), item.get("pod")
    for where, options in ((f"{path}.pod", pod), ("defaultPodOptions", defaults)):
        value = options.get(option) if isinstance(options, Mapping) else None
        if isinstance(value, bool) or value:
            return f"{where}.{option}", value
    return None


def _pod_claims(value: Any) -> tuple[PodClaim, ...] | None:
    if not isinstance(value, list):
        return None
    claims = []
    for entry in value:
        if not isinstance(entry, Mapping) or not _plain(entry.get("name")):
            return None
        template, claim = entry.get("resourceClaimTemplateName"), entry.get("resourceClaimName")
        if any(v is not None and not _plain(v) for v in (template, claim)):
            return None
        claims.append(PodClaim(str(entry["name"]), template, claim))
    return tuple(claims)


def _host_paths(values: Mapping[str, Any], controller: str, reasons: list[str]) -> tuple[str, ...]:
    """The persistence items of /dev/dri (or below) whose volume the chart puts in this controller's pod (common's
    lib/pod/fields/_volumes.tpl)."""
    persistence = values.get("persistence") or {}
    if not isinstance(persistence, Mapping):
        reasons.append(f"persistence: {_shown(persistence)}, not a mapping")
        return ()
    found = []
    for key in sorted(persistence, key=str):
        item, where = persistence[key], f"persistence.{key}"
        if not isinstance(item, Mapping):
            reasons.append(f"{where}: {_shown(item)}, not a mapping")
            continue
        if _enabled(item, where, reasons) and _in_pod(item, controller, where, reasons):
            held = _host_device(item, where, reasons)
            if held:
                found.append(str(key))
    return tuple(found)


def _in_pod(item: Mapping[str, Any], controller: str, where: str, reasons: list[str]) -> bool:
    global_mounts, advanced = item.get("globalMounts"), item.get("advancedMounts")
    for field, value, shape in (("globalMounts", global_mounts, list), ("advancedMounts", advanced, Mapping)):
        if value and not isinstance(value, shape):
            reasons.append(f"{where}.{field}: {_shown(value)}, not a {'list' if shape is list else 'mapping'}")
            return False
    mine = advanced.get(controller) if isinstance(advanced, Mapping) else None
    return bool(global_mounts) or (bool(advanced) and bool(mine)) or (not global_mounts and not advanced)


def _host_device(item: Mapping[str, Any], where: str, reasons: list[str]) -> bool:
    kind = item.get("type") or "persistentVolumeClaim"
    if kind == "hostPath":
        path, at = item.get("hostPath"), f"{where}.hostPath"
    elif kind == "custom":
        spec = item.get("volumeSpec")
        host = spec.get("hostPath") if isinstance(spec, Mapping) else None
        if not isinstance(spec, Mapping) or (host is not None and not isinstance(host, Mapping)):
            bad = ("volumeSpec", spec) if not isinstance(spec, Mapping) else ("volumeSpec.hostPath", host)
            reasons.append(f"{where}.{bad[0]}: {_shown(bad[1])}, not a mapping")
            return False
        if host is None:
            return False
        path, at = host.get("path"), f"{where}.volumeSpec.hostPath.path"
    elif kind in OTHER_PERSISTENCE:
        return False
    else:
        reasons.append(f"{where}.type: {_shown(kind)}, not a persistence type the chart knows")
        return False
    if not _plain(path) or not path:
        reasons.append(f"{at}: {_shown(path)}, not a plain path")
        return False
    return is_host_device_path(path)


def _enabled(item: Mapping[str, Any], path: str, reasons: list[str]) -> bool | None:
    """`enabled`, true when absent (the chart's default); None when it is not true or false."""
    value = item.get("enabled", True)
    if isinstance(value, bool):
        return value
    reasons.append(f"{path}.enabled: {_shown(value)}, not true or false")
    return None


def _merge(own: Mapping[str, Any], default: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
    """sprig's `merge`: the container's values first, the defaults filling what is missing or empty, maps merged."""
    merged = dict(own)
    if depth > MAX_MERGE_DEPTH:
        return merged
    for key, value in default.items():
        mine = merged.get(key)
        if not mine:
            merged[key] = value
        elif isinstance(mine, Mapping) and isinstance(value, Mapping):
            merged[key] = _merge(mine, value, depth + 1)
    return merged


def _plain(value: Any) -> bool:
    """A string the chart renders as it is written (no Helm template in it)."""
    return isinstance(value, str) and "{{" not in value


def _trunc(name: str) -> str:
    """`trunc 63 | trimSuffix "-"`."""
    name = name[:63]
    return name[:-1] if name.endswith("-") else name


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else type(value).__name__ if isinstance(value, Mapping | list) \
        else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
