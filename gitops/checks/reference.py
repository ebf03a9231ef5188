"""An app the repository delivers (`deliveredBy: repository`: Plex or any GPU app its own renderer writes), held to
the evidence gate all the same. The export writes none of its objects; the program's are the reference. On Flux's walk
of each stack's repository: the repository's app (the reference's Deployment, found where the walk applies it)
requesting gpu.intel.com/i915 while this stack's evidence does not allow the device plugin is refused, naming the
file (the pod would be Unschedulable and, through `wait: true`, stall every tier after it); otherwise the stack is told
where things stand: the hostPath stays until evidence exists, or which fields the renderer's pull request must change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitops.flux.inventory import FluxView, ObjectId, show_key
from gitops.tree import Tree
from model.evidence import RESOURCE, gpu_requests, next_step
from model.outputs import GpuAppOutput


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
        reference = tree.reference_deployment(name)
        if reference is None:
            continue
        oid = ObjectId.of(reference)
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
            problems += _claim_reference(name, app, requested, theirs, origin, appliers)
        elif requested and app.access != "device-plugin":
            why = app.reason.partition("; next: ")[0]  # the command is the hint, once
            problems.append(f"{origin}: {oid}: {requested[0]}: requests {RESOURCE}, but the evidence does not back it "
                            f"for {tree.stack} ({why}); the pod would be Unschedulable and {appliers} would never be "
                            f"Ready, stalling every Kustomization after it; hint: record {tree.stack}'s evidence first "
                            f"(`{next_step(tree.stack)}`, then commit evidence/{tree.stack}.yaml); until then keep "
                            "the /dev/dri hostPath in the repository's renderer")
        elif not requested and app.access != "device-plugin":  # allowed: the renderer's change says the rest
            notices.append(f"{name}: the repository's {name} ({origin}, applied by {appliers}) keeps its /dev/dri "
                           f"hostPath: evidence for {tree.stack} does not allow {RESOURCE} yet")
    return problems, notices


def _claim_reference(name: str, app: GpuAppOutput, requested: list[str], theirs: Mapping[str, Any],
                     origin: str, appliers: str) -> list[str]:
    """gpu.route: dra, step 5: the device plugin is removed, so a request for its resource in the repository's app can
    never be scheduled. An app that does not claim the iGPU yet runs without it: the renderer's change says so."""
    if requested:
        return [f"{origin}: {ObjectId.of(theirs)}: {requested[0]}: requests {RESOURCE}, which nothing advertises once "
                f"the device plugin is removed ({app.reason}); the pod would be Unschedulable and {appliers} would "
                f"never be Ready, stalling every Kustomization after it; hint: switch the repository's {name} to a "
                "claim of class gpu.intel.com (spec.resourceClaims and the container's resources.claims) in the same "
                "pull request"]
    return []
