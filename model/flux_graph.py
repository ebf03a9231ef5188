"""The Flux delivery graph's rules and the start-budget arithmetic, on plain data (no config, no Pulumi).

The program runs them on what its stack config declares (components/flux.py) and the export runs them again on
every Flux Kustomization that Flux's walk of the real repository reaches, hand-written ones included
(gitops/checks/delivery.py). The rules (`check_graph`, `check_wait_timeout`):
- every dependsOn target exists; no cycle;
- nothing depends on the GPU plugin; the plugin depends on the CNI tier only;
- a Kustomization others depend on waits (without wait, Ready says nothing about its workloads);
- a Kustomization that waits has a timeout above the worst-case start of the workloads it waits for.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Any

from model.safe_yaml import as_mapping

API_VERSION = "kustomize.toolkit.fluxcd.io/v1"
KIND = "Kustomization"
CLUSTER_VARS = "cluster-vars"
PLUGIN_KUSTOMIZATION = "intel-gpu-plugin"
# Intel's GPU resource driver for DRA (gpu.route: dra, components/intel_gpu_dra.py): its own Kustomization, after the
# CNI only, as the plugin's; nothing depends on it while no app claims a device (the first step of the move).
DRIVER_KUSTOMIZATION = "intel-gpu-resource-driver"

# Time a node may need to pull an image on a home uplink before its container starts (the plugin's ~30 MB and
# Plex's ~350 MB alike), on top of any startup probe budget.
IMAGE_PULL_MARGIN_SECONDS = 180
# Workload kinds whose readiness `wait: true` waits for, and whose start can be bounded from the pod template.
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


# --- worst-case start of a workload -------------------------------------------------------------------------

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def duration_seconds(value: str) -> float:
    """A Flux/Go duration such as `5m` or `1h30m` in seconds (0 for anything else)."""
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(str(value)))


def _whole(value: Any, default: int) -> int:
    """A probe's number as written in a manifest that may be hand-written and wrong: anything else is the default."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default



def minutes_above(seconds: float) -> str:
    """The smallest whole-minute Flux duration strictly above `seconds`."""
    return f"{math.floor(seconds / 60) + 1}m"


def _pod_spec(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(as_mapping(manifest.get("spec")).get("template")).get("spec"))


def probe_budget_seconds(probe: Mapping[str, Any] | None) -> int:
    """How long kubelet lets a probe fail before giving up: initialDelay + period × failureThreshold (Kubernetes'
    defaults 0, 10 and 3 where a field is unset)."""
    if not probe:
        return 0
    return _whole(probe.get("initialDelaySeconds"), 0) + _whole(probe.get("periodSeconds"), 10) * _whole(
        probe.get("failureThreshold"), 3)


@dataclass(frozen=True)
class StartBudget:
    """The worst-case time from apply to Ready of one workload, and how it was reached (for messages)."""

    seconds: int
    explanation: str


def worst_case_start(manifest: Mapping[str, Any], node_count: int) -> StartBudget:
    """Image pull margin plus the slowest container's startup probe budget (else its readiness probe's first
    pass). A DaemonSet rolls node by node (maxUnavailable 1), so its budget is paid once per node."""
    per_pod, slowest = IMAGE_PULL_MARGIN_SECONDS, f"{IMAGE_PULL_MARGIN_SECONDS} s image pull margin"
    worst_probe, probe_text = 0, ""
    containers = _pod_spec(manifest).get("containers")
    for c in containers if isinstance(containers, list) else []:
        c = as_mapping(c)
        startup = as_mapping(c.get("startupProbe"))
        budget = probe_budget_seconds(startup) if startup else _whole(
            as_mapping(c.get("readinessProbe")).get("initialDelaySeconds"), 0)
        if budget > worst_probe:
            worst_probe = budget
            if startup:
                probe_text = (f"startupProbe {_whole(startup.get('failureThreshold'), 3)} × "
                              f"{_whole(startup.get('periodSeconds'), 10)} s")
                if _whole(startup.get("initialDelaySeconds"), 0):
                    probe_text += f" + {_whole(startup.get('initialDelaySeconds'), 0)} s delay"
            else:
                probe_text = f"readinessProbe delay {budget} s"
    per_pod += worst_probe
    if probe_text:
        slowest = f"{probe_text} + {slowest}"
    if manifest.get("kind") == "DaemonSet" and node_count > 1:
        return StartBudget(per_pod * node_count, f"{node_count} nodes × ({slowest})")
    return StartBudget(per_pod, slowest)


# --- the graph rules -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GraphNode:
    """A Flux Kustomization as the rules see it. `key` and `depends` are (namespace, name)."""

    key: tuple[str, str]
    depends: tuple[tuple[str, str], ...]
    wait: bool
    where: str = ""  # the file that declares it, for messages
    # "export": the program declares it, so its spec is ours to get right; "repository": hand-written, the
    # repository's own choice (the wait rule below only warns about it)
    declared_by: str = "export"


def display(key: tuple[str, str], default_namespace: str = "flux-system") -> str:
    namespace, name = key
    return name if namespace == default_namespace else f"{namespace}/{name}"


Show = Callable[[tuple[str, str]], str]  # a Kustomization's key as a problem line names it


def check_graph(nodes: Sequence[GraphNode], roots: Iterable[tuple[str, str]], plugin: tuple[str, str] | None,
                cni: tuple[str, str], default_namespace: str = "flux-system",
                warnings: list[str] | None = None, driver: tuple[str, str] | None = None,
                driver_dependents: Iterable[tuple[str, str]] = (), repository_unseen: bool = False,
                adopted_driver: tuple[str, str] | None = None) -> list[str]:
    """The graph rules; one line per problem, empty when the graph is safe. What is the repository's own choice and
    stalls nothing is not a problem: it goes to `warnings` (when given), one line each. `plugin` is None once the
    DRA route removed it; `driver_dependents`: the Kustomizations of apps that claim a device, the only ones that
    may depend on the DRA driver's. `repository_unseen`: the nodes are only what the stack declares (the program,
    before any walk), so a dependsOn on another Kustomization may be the repository's: the export's walk judges it.
    `adopted_driver`: the repository's Kustomization installing the DRA driver the stack adopts
    (gpu.dra.deliveredBy: repository), held to the driver's dependents rule as the export's own is; whether it
    exists and installs a driver is said once at the stack key by the export's walk (gitops/checks/delivery.py),
    not here for each Kustomization that depends on it."""
    def show(key: tuple[str, str]) -> str:
        return display(key, default_namespace)

    problems, by_key = _declared_once(nodes, show)
    # The export's own names stay judged: the repository may not hold a Kustomization of that key beside it
    owned = {(default_namespace, PLUGIN_KUSTOMIZATION), (default_namespace, DRIVER_KUSTOMIZATION)} - {adopted_driver}
    problems += _dependencies_exist(nodes, set(by_key) | set(roots) | ({adopted_driver} if adopted_driver else set()),
                                    plugin, show, driver, set(driver_dependents),
                                    unseen=(lambda dep: dep not in owned) if repository_unseen else None,
                                    adopted_driver=adopted_driver)
    if plugin is not None:
        problems += _plugin_depends_on_cni_only(by_key.get(plugin), plugin, cni, show)
    if driver is not None:
        problems += _plugin_depends_on_cni_only(by_key.get(driver), driver, cni, show, what="the DRA driver")
    problems += _waited_for(nodes, show, warnings)
    problems += _acyclic(nodes, by_key, show)
    return problems


def _at(node: GraphNode) -> str:
    return f"{node.where}: " if node.where else ""


def _declared_once(nodes: Sequence[GraphNode],
                   show: Show) -> tuple[list[str], dict[tuple[str, str], GraphNode]]:
    """Each Kustomization once; the nodes by key (the last of a twice-declared one)."""
    problems: list[str] = []
    by_key: dict[tuple[str, str], GraphNode] = {}
    for n in nodes:
        if n.key in by_key:
            problems.append(f"flux: {_at(n)}Kustomization {show(n.key)} is declared twice "
                            f"(also in {by_key[n.key].where or 'the program'}); hint: keep one")
        by_key[n.key] = n
    return problems, by_key


def _dependencies_exist(nodes: Sequence[GraphNode], known: set[tuple[str, str]], plugin: tuple[str, str] | None,
                        show: Show, driver: tuple[str, str] | None = None,
                        driver_dependents: set[tuple[str, str]] | None = None,
                        unseen: Callable[[tuple[str, str]], bool] | None = None,
                        adopted_driver: tuple[str, str] | None = None) -> list[str]:
    """Every dependsOn target exists, save one `unseen` says may be the repository's, and none is the GPU plugin or
    the DRA driver (the export's, or the repository's the stack adopts), save an app that claims a device depending
    on the driver."""
    problems: list[str] = []
    drivers = {d for d in (driver, adopted_driver) if d is not None}
    for n in nodes:
        for dep in n.depends:
            # the plugin and the driver have a line of their own below
            if dep not in known and dep not in (plugin, driver) and not (unseen and unseen(dep)):
                problems.append(f"flux: {_at(n)}{show(n.key)}.spec.dependsOn: {show(dep)!r}: no such Kustomization; "
                                "Flux would wait for it forever; hint: "
                                + other_target(dep, known, show, n.key, plugin, driver, adopted_driver))
            if dep == plugin:
                problems.append(f"flux: {_at(n)}{show(n.key)}.spec.dependsOn: {show(dep)!r}: nothing may depend on "
                                "the GPU plugin; a failed plugin rollout would stall that tier; hint: remove the "
                                "dependency")
            if dep in drivers and n.key not in (driver_dependents or set()):
                problems.append(f"flux: {_at(n)}{show(n.key)}.spec.dependsOn: {show(dep)!r}: nothing may depend on "
                                "the DRA driver but the Kustomization of an app that claims a device; a failed "
                                "driver rollout would stall that tier; hint: remove the dependency")
    return problems


def other_target(dep: tuple[str, str], known: set[tuple[str, str]], show: Show, *never: tuple[str, str] | None,
                 depends_on: bool = True) -> str:
    """What to name instead: the same name in another namespace (a dependsOn without one means the
    Kustomization's own), else the names closest to it (a typo), else every allowed target while they are few,
    else where to see them. The plugin and the DRA driver are never offered: nothing may depend on them.
    `depends_on` False: `dep` is not a dependsOn entry (a stack key naming a Kustomization), so no word of one."""
    allowed = sorted(known - set(never), key=show)
    elsewhere = [k for k in allowed if k[1] == dep[1]]
    if elsewhere:
        note = (f" (a dependsOn without a namespace names one in the Kustomization's own, {dep[0]})" if depends_on
                else "")
        return f"did you mean {' or '.join(map(show, elsewhere))}?{note}"
    # by name alone: a shared namespace prefix would make any two look close
    close = difflib.get_close_matches(dep[1], sorted({k[1] for k in allowed}), n=3, cutoff=0.6)
    if close:
        found = [show(k) for name in close for k in allowed if k[1] == name]
        return f"did you mean {found[0]}?" if len(found) == 1 else f"the closest that exist: {', '.join(found)}"
    if len(allowed) <= _LISTED:
        return f"use one of {', '.join(map(show, allowed))}"
    return (f"none of the {len(allowed)} Kustomizations there are has a name close to it; the last export's "
            "DELIVERY.md lists those Flux's walk reaches, `flux get kustomizations -A` those on the cluster")


_LISTED = 12  # past this many, a hint naming every Kustomization is no longer read


def _plugin_depends_on_cni_only(plugin_node: GraphNode | None, plugin: tuple[str, str], cni: tuple[str, str],
                                show: Show, what: str = "the plugin") -> list[str]:
    if plugin_node is None or not set(plugin_node.depends) - {cni}:
        return []
    extra = sorted(show(d) for d in set(plugin_node.depends) - {cni})
    return [f"flux: {_at(plugin_node)}{show(plugin)}.spec.dependsOn: {extra}: {what} may depend on "
            f"the CNI ({show(cni)}) only; hint: remove the others"]


def _waited_for(nodes: Sequence[GraphNode], show: Show, warnings: list[str] | None) -> list[str]:
    """The wait rule, the one place it is said. A dependency on a Kustomization without `wait` means "after it was
    applied", not "after its workloads are healthy": weaker, but it stalls nothing. The export's own
    Kustomizations promise the stronger order, so there it is a refusal; a Kustomization the repository declares
    (cluster-template's apps all say wait: false) is the repository's choice, so there it is a warning."""
    problems: list[str] = []
    for n in nodes:
        dependents = sorted(show(x.key) for x in nodes if n.key in x.depends)
        if not dependents or n.wait:
            continue
        if n.declared_by == "export":
            problems.append(f"flux: {_at(n)}{show(n.key)}.spec.wait: false: {', '.join(dependents)} dependsOn it, "
                            "and without wait 'Ready' does not mean its workloads are healthy; hint: set wait: true")
        elif warnings is not None:
            warnings.append(f"{_at(n)}{show(n.key)}.spec.wait: false (the repository's choice): "
                            f"{', '.join(dependents)} dependsOn it, so they start once it is applied, not once its "
                            "workloads are healthy; wait: true there would hold them until its workloads are Ready")
    return problems


def _acyclic(nodes: Sequence[GraphNode], by_key: Mapping[tuple[str, str], GraphNode], show: Show) -> list[str]:
    try:
        TopologicalSorter({n.key: [d for d in n.depends if d in by_key] for n in nodes}).prepare()
    except CycleError as exc:
        cycle = [show(k) for k in reversed(exc.args[1])]  # graphlib lists it against the edges; show dependsOn order
        return [f"flux: dependsOn cycle: {' -> '.join(cycle)}; Flux would never reconcile these; "
                "hint: remove one of these dependencies"]
    return []


def check_wait_timeout(name: str, timeout: str | None, interval: str,
                       workloads: Sequence[tuple[str, StartBudget]]) -> str | None:
    """A Kustomization that waits fails when its workloads are not Ready within `timeout` (Flux's default is
    the interval): refuse a timeout not above the slowest workload's worst-case start."""
    if not workloads:
        return None
    ref, slowest = max(workloads, key=lambda w: w[1].seconds)
    effective = str(timeout or interval)
    if duration_seconds(effective) > slowest.seconds:
        return None
    return (f"flux: {name}.spec.timeout: {effective} ({int(duration_seconds(effective))} s) is not above the "
            f"worst-case start of {ref}: {slowest.seconds} s ({slowest.explanation}); a slow start fails the "
            f"Kustomization and holds back everything that depends on it; hint: set timeout: "
            f"{minutes_above(slowest.seconds)} or more")

