"""An app the repository delivers (`deliveredBy: repository`: Plex or any GPU app its own renderer writes), held to
the evidence gate all the same. The export writes none of its objects; the program's are the reference. On Flux's walk
of each stack's repository: the repository's app (the reference's Deployment, found where the walk applies it)
requesting gpu.intel.com/i915 while this stack's evidence does not allow the device plugin is refused, naming the
file (the pod would be Unschedulable and, through `wait: true`, stall every tier after it); otherwise the stack is told
where things stand: the hostPath stays until evidence exists, or which fields the renderer's pull request must change.

An app adopted from the repository's Flux HelmRelease (`helmRelease:` beside `deliveredBy: repository`) has no
reference objects: the release is found where Flux applies it, its pod is read from its values as bjw-s app-template
renders them (model/adopt/app_template.py), and what the pod holds is judged against what the gate allows for this
stack: a GPU request or claim the evidence does not back is refused naming the release's file, as is a pod that
reaches no GPU at all while the stack says the app transcodes on it. Where the gate allows more than the release holds
yet, the values to change are told (the renderer's change, on the release's values). Where the export cannot read the
pod (another chart, `valuesFrom`, `postRenderers`, a field the proven release renders differently), it says so in one
line, and the stack's `helmRelease.gpuAccess` states it instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from gitops.flux.helm import PodReading, helm_release_id, read_release
from gitops.flux.inventory import FluxView, ObjectId, show_key
from gitops.tree import Tree
from model.dra.evidence import DEVICE_CLASS
from model.evidence import RESOURCE, gpu_requests, next_step
from model.outputs import AdoptedRelease, GpuAppOutput
from model.safe_yaml import escaped


def check_references(tree: Tree, after: FluxView, gpu_apps: Mapping[str, GpuAppOutput], fresh: bool,
                     refused_walk: bool = False, app_keys: Mapping[str, str] | None = None
                     ) -> tuple[list[str], list[str]]:
    """(refusals, notices) for every app the repository delivers, on the walk of the repository as it will be.
    `refused_walk`: the walk's own refusals stand already, so an app the walk does not reach is their consequence,
    not a line of its own (one problem, one line). `app_keys`: each app's key in the stack file, where not its name."""
    problems, notices = check_adopted(tree, after, gpu_apps, fresh, refused_walk)
    for name, app in sorted(gpu_apps.items()):
        if not app.by_repository or app.adopted is not None:  # adopted from a HelmRelease: judged above
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


# --- an app adopted from the repository's HelmRelease -----------------------------------------------------------------

ON_THE_GPU = ("device-plugin", "dra-claim")


def check_adopted(tree: Tree, after: FluxView, gpu_apps: Mapping[str, GpuAppOutput], fresh: bool,
                  refused_walk: bool = False) -> tuple[list[str], list[str]]:
    """(refusals, notices) for every app adopted from a HelmRelease, on the walk of the repository as it will be."""
    problems: list[str] = []
    notices: list[str] = []
    for name, app in sorted(gpu_apps.items()):
        adopted = app.adopted
        if adopted is None:
            continue
        oid = helm_release_id(adopted.namespace, adopted.name)
        release = after.manifests.get(oid)
        if release is None:
            if not fresh and not refused_walk:
                problems.append(_not_applied(tree, after, adopted, oid))
            continue
        origin = after.origins[oid]
        read = read_release(release, adopted, after.manifests)
        if isinstance(read, str):
            problems.append(f"{origin}: {oid}: {read}")
            continue
        held, told = _held(read, adopted, origin, oid)
        if held is None:
            problems.append(told)
            continue
        notices += [told] if told else []
        workload = f"{adopted.workload_kind} {adopted.namespace}/{adopted.workload_name}"
        # what the stack states is refused at its key, what the values say at the release's file
        where = f"{origin}: {oid}: {workload}"
        if read.access == "cannot-tell":
            where = (f"Pulumi.{tree.stack}.yaml: gpu-platform:{adopted.key}.helmRelease.gpuAccess: {held}: {workload} "
                     f"(of {oid}, {origin}), as stated,")
        problem, notice = _judged(tree.stack, name, app, adopted, held, read, where, origin,
                                  ", ".join(show_key(k) for k in after.applied_by[oid]))
        problems += [problem] if problem else []
        notices += [notice] if notice else []
    return problems, notices


def _not_applied(tree: Tree, after: FluxView, adopted: AdoptedRelease, oid: ObjectId) -> str:
    start = tree.layout.bootstrap_path
    releases = sorted(f"{o.namespace}/{o.name}" for o in after.manifests if o.kind == "HelmRelease")
    close = difflib.get_close_matches(f"{adopted.namespace}/{adopted.name}", releases, n=3, cutoff=0.5)
    hint = (f"did you mean {', '.join(escaped(c) for c in close)}?" if close else
            "let a Kustomization of this repository apply it, or set deliveredBy: export")
    return (f"Pulumi.{tree.stack}.yaml: gpu-platform:{adopted.key}.helmRelease: "
            f"{escaped(adopted.namespace + '/' + adopted.name)}: Flux's walk from {start} applies no {oid}, so the "
            f"evidence gate cannot see the repository's app; hint: {hint}")


def _held(read: PodReading, adopted: AdoptedRelease, origin: str, oid: ObjectId) -> tuple[str | None, str]:
    """(what the pod holds, a notice) or (None, the refusal): the values' reading, the stack's assertion where the
    values cannot say, and never both disagreeing."""
    key = f"{adopted.key}.helmRelease.gpuAccess"
    if read.access == "cannot-tell":
        if adopted.asserted is None:
            return None, (f"{origin}: {oid}: the export cannot tell how its pod reaches the GPU ({read.unreadable}); "
                          f"hint: state it in {key}: device-plugin, dra-claim, host-path or none (the post-merge "
                          "checks test it on the cluster)")
        return adopted.asserted, (f"{adopted.key}: how {oid} reaches the GPU is stated by {key} "
                                  f"({adopted.asserted}): its values cannot say ({read.unreadable})")
    if adopted.asserted is not None and adopted.asserted != read.access:
        return None, (f"{origin}: {oid}: its values give {read.access}, but {key} states {adopted.asserted}; hint: "
                      f"remove {key} (the values say it), or change the values")
    return read.access, ""


def _judged(stack: str, name: str, app: GpuAppOutput, adopted: AdoptedRelease, held: str,
            read: PodReading, where: str, origin: str, appliers: str) -> tuple[str, str]:
    """(refusal, notice): what the pod holds against what the gate allows this stack; `where` starts a refusal."""
    allowed, why = app.access, app.reason.partition("; next: ")[0]  # the command is the hint, once
    stall = (f"the pod would be Unschedulable and {appliers} would never be Ready, stalling every Kustomization "
             "after it")
    if held == allowed:
        return "", ""
    if held == "device-plugin":
        if allowed == "dra-claim":
            return (f"{where} requests {RESOURCE}, which nothing advertises once the device "
                    f"plugin is removed ({app.reason}); {stall}; hint: switch its values to the claim of class "
                    f"{DEVICE_CLASS} in the same pull request"), ""
        return (f"{where} requests {RESOURCE}, but the evidence does not back it for {stack} "
                f"({why}); {stall}; hint: record {stack}'s evidence first (`{next_step(stack)}`, then commit "
                f"evidence/{stack}.yaml); until then take the request out of the release's values"), ""
    if held == "dra-claim":
        command = app.reason.partition("; next: ")[2]
        fix = (f"record the evidence first (`{command}`, then commit what it writes)" if command else
               "set gpu.route: dra with the stage the evidence allows")
        return (f"{where} claims a device of class {DEVICE_CLASS}, but the DRA gate does not "
                f"allow a claim for {stack} ({why}); the claim would leave the pod Pending and {appliers} never "
                f"Ready, stalling every Kustomization after it; hint: {fix}, or take the claim out of the release's "
                "values"), ""
    if allowed == "none":  # the stack says the app uses no GPU; a hostPath it keeps is the repository's own
        return "", ""
    if held == "none":
        return (f"{where} reaches no GPU (no {RESOURCE}, no claim, no /dev/dri hostPath in its "
                f"values), but {adopted.key}.hardware.gpu is intel-quicksync and the gate allows {allowed} for "
                f"{stack}: {name} would transcode on the CPU; hint: give the values {_what(allowed, read)}, or set "
                f"{adopted.key}.hardware.gpu: none"), ""
    # the /dev/dri hostPath, where the gate allows the device plugin's resource or a claim: the renderer's change
    if allowed in ON_THE_GPU:
        return "", (f"{name}: evidence for {stack} allows {allowed}, but the repository's {name} ({origin}) keeps "
                    f"its /dev/dri hostPath; the release's values need {_what(allowed, read)}, its "
                    "hostPath persistence removed, in the same pull request")
    return "", (f"{name}: the repository's {name} ({origin}, applied by {appliers}) keeps its /dev/dri hostPath: "
                f"evidence for {stack} does not allow {RESOURCE} yet")


def _what(allowed: str, read: PodReading | None = None) -> str:
    """The values that give a pod what the gate allows, at the workload's own keys where they are known (its
    container where it has one)."""
    controller = read.workload.controller if read and read.workload else "<controller>"
    container = read.containers[0] if read and len(read.containers) == 1 else "<container>"
    at = f"controllers.{controller}.containers.{container}.resources"
    if allowed == "device-plugin":
        return f"{at}.limits: {{{RESOURCE}: 1}}"
    if allowed == "dra-claim":
        return (f"{at}.claims: [{{name: gpu}}] and defaultPodOptions.resourceClaims: [{{name: gpu, "
                f"resourceClaimTemplateName: <a ResourceClaimTemplate of class {DEVICE_CLASS}>}}]")
    return "the /dev/dri hostPath persistence"
