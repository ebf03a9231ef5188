"""An app the repository delivers (`deliveredBy: repository`: Plex or any GPU app its own renderer writes), held to
the evidence gate all the same. The export writes none of its objects; the program's are the reference. On Flux's walk
of each stack's repository: the repository's app (the reference's Deployment, found where the walk applies it)
requesting gpu.intel.com/i915 while this stack's evidence does not allow the device plugin is refused, naming the
file (the pod would be Unschedulable and, through `wait: true`, stall every tier after it); otherwise the stack is told
where things stand: the hostPath stays until evidence exists, or which fields the renderer's pull request must change.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gitops.flux.inventory import FluxView, ObjectId, show_key
from gitops.tree import Tree
from model.evidence import RESOURCE, next_step
from model.outputs import GpuAppOutput
from model.safe_yaml import as_mapping

MAX_FIELDS = 12  # a notice lists this many differing fields, then says how many more


def _pod_spec(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(as_mapping(manifest.get("spec")).get("template")).get("spec"))


def gpu_requests(manifest: Mapping[str, Any]) -> list[str]:
    """The paths where the workload's containers request or limit the device plugin's resource."""
    found = []
    for list_name in ("initContainers", "containers"):
        containers = _pod_spec(manifest).get(list_name)
        for i, c in enumerate(containers if isinstance(containers, list) else []):
            resources = c.get("resources") if isinstance(c, Mapping) else None
            for kind in ("limits", "requests"):
                values = resources.get(kind) if isinstance(resources, Mapping) else None
                if isinstance(values, Mapping) and RESOURCE in values:
                    found.append(f"spec.template.spec.{list_name}[{i}].resources.{kind}.{RESOURCE}")
    return found


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from _leaves(value[key], f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value


def differing_fields(program: Mapping[str, Any], repository: Mapping[str, Any]) -> list[str]:
    """Every leaf field where the repository's object differs from the program's: `path: repo -> program`."""
    mine, theirs = dict(_leaves(program.get("spec"), "spec")), dict(_leaves(repository.get("spec"), "spec"))
    lines = []
    for path in sorted(set(mine) | set(theirs)):
        if mine.get(path) != theirs.get(path):
            lines.append(f"{path}: {_shown(theirs, path)} -> {_shown(mine, path)}")
    return lines


def _shown(values: Mapping[str, Any], path: str) -> str:
    return repr(values[path]) if path in values else "(absent)"


def check_references(tree: Tree, after: FluxView, gpu_apps: Mapping[str, GpuAppOutput], fresh: bool,
                     refused_walk: bool = False, app_keys: Mapping[str, str] | None = None
                     ) -> tuple[list[str], list[str]]:
    """(refusals, notices) for every app the repository delivers, on the walk of the repository as it will be.
    `refused_walk`: the walk's own refusals stand already, so an app the walk does not reach is their consequence,
    not a line of its own (one problem, one line). `app_keys`: each app's key in the stack file, where not its name."""
    problems: list[str] = []
    notices: list[str] = []
    for name, app in sorted(gpu_apps.items()):
        if not app.by_repository:
            continue
        reference = next((o for o in tree.references if o.component_name == name
                          and o.manifest.get("kind") == "Deployment"), None)
        if reference is None:
            continue
        oid = ObjectId.of(reference.manifest)
        theirs = after.manifests.get(oid)
        if theirs is None:
            if not fresh and not refused_walk:
                start, key = tree.layout.bootstrap_path, (app_keys or {}).get(name, name)
                problems.append(f"{start}: {oid}: {key}.deliveredBy: repository, but Flux's walk "
                                f"from {start} applies no {oid}; the evidence gate cannot see the repository's "
                                f"{name}; hint: let a Kustomization of this repository apply it, or set deliveredBy: "
                                "export")
            continue
        origin = after.origins[oid]  # the walk records an object's manifest, origin and appliers together
        appliers = ", ".join(show_key(k) for k in after.applied_by[oid])
        requested = gpu_requests(theirs)
        if app.access == "dra-claim":
            problems += _claim_reference(tree, name, app, requested, theirs, origin, appliers, notices)
        elif requested and app.access != "device-plugin":
            problems.append(f"{origin}: {oid}: {requested[0]}: requests {RESOURCE}, but the evidence does not back it "
                            f"for {tree.stack} ({app.reason}); the pod would be Unschedulable and {appliers} would "
                            f"never be Ready, stalling every Kustomization after it; hint: keep the /dev/dri hostPath "
                            f"in the repository's renderer until `{next_step(tree.stack)}` records the evidence")
        elif not requested and app.access == "device-plugin":
            fields = differing_fields(reference.manifest, theirs)
            shown = "; ".join(fields[:MAX_FIELDS]) + (f"; and {len(fields) - MAX_FIELDS} more"
                                                       if len(fields) > MAX_FIELDS else "")
            notices.append(f"{name}: evidence allows the switch to {RESOURCE} for {tree.stack}; the repository "
                           f"delivers {name} ({origin}, applied by {appliers}), which still does not request it: "
                           f"its renderer's pull request makes these fields match the program's (repository -> "
                           f"program): {shown}")
        elif not requested:
            notices.append(f"{name}: the repository's {name} ({origin}, applied by {appliers}) keeps its /dev/dri "
                           f"hostPath: evidence for {tree.stack} does not allow {RESOURCE} yet")
    return problems, notices


def _claim_reference(tree: Tree, name: str, app: GpuAppOutput, requested: list[str], theirs: Mapping[str, Any],
                     origin: str, appliers: str, notices: list[str]) -> list[str]:
    """gpu.route: dra, step 5: the device plugin is removed, so a request for its resource in the repository's app can
    never be scheduled; an app that does not claim the iGPU yet only gets a notice (it runs, without the GPU)."""
    if requested:
        return [f"{origin}: {ObjectId.of(theirs)}: {requested[0]}: requests {RESOURCE}, which nothing advertises once "
                f"the device plugin is removed ({app.reason}); the pod would be Unschedulable and {appliers} would "
                f"never be Ready, stalling every Kustomization after it; hint: switch the repository's {name} to a "
                "claim of class gpu.intel.com (spec.resourceClaims and the container's resources.claims) in the same "
                "pull request"]
    pod = ((theirs.get("spec") or {}).get("template") or {}).get("spec") or {}
    if not pod.get("resourceClaims"):
        notices.append(f"{name}: the repository's {name} ({origin}, applied by {appliers}) claims no device: it runs "
                       f"without the iGPU on the DRA route for {tree.stack}; its renderer's pull request adds "
                       "spec.resourceClaims and the container's resources.claims (docs/dra.md)")
    return []
