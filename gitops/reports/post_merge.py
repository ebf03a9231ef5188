"""What proves the rollout on the cluster after the merge, with this stack's names filled in, in two forms of one list:
POST-MERGE.md for a person, and `post-merge/chainsaw-test.yaml` beside it, a Kyverno Chainsaw suite the user's
conformance job (or the user) runs against the cluster.

The export writes the suite (not the project) because every assertion is the stack's data (node names, the plugin's
share count, which apps the gate moved to the device-plugin resource and how many devices each asks, the Kustomization
applying each app) and Chainsaw has no loop over nodes; so it changes in the same reviewed diff as what it checks.
Read-only (tests/gitops/reports/test_post_merge_suite.py; tests/e2e/test_post_merge_chainsaw.py): `assert` and `error`
only; every Test names an existing namespace (Flux's), so no `chainsaw-*` one is created; in the records folder no Flux
Kustomization applies, under the file name Chainsaw looks for, so no step-file discovery applies its other files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.intel_gpu_dra import NAME as DRIVER_NAME, NAMESPACE as DRIVER_NAMESPACE
from components.intel_gpu_plugin import NAME as PLUGIN_NAME, NAMESPACE as PLUGIN_NAMESPACE
from gitops.flux.helm import PodReading, helm_release_id, read_release
from gitops.flux.inventory import FluxView, ObjectId, is_flux_kustomization
from gitops.headers import markdown_generated_line
from gitops.index import CHECKLIST_FILE, SUITE_DIR, SUITE_FILE, suite_path
from gitops.reports.renderer_change import held_of
from gitops.tree import Tree, dump_documents, file_header
from model import flux_graph as flux_mod
from model.dra.evidence import CLAIM_NAME, DRIVER as DRA_DRIVER, next_claims_step, next_dra_step
from model.evidence import RESOURCE, next_step
from model.outputs import AdoptedRelease, GpuAppOutput, ProgramOutputs

CHAINSAW_API = "chainsaw.kyverno.io/v1alpha1"
_CHAINSAW_SCHEMA = ("https://raw.githubusercontent.com/kyverno/chainsaw/v0.2.15/.schemas/json/"
                    "test-chainsaw-v1alpha1.json")
_PLUGIN_LABELS = {"app": PLUGIN_NAME}  # the DaemonSet's pod labels (components/intel_gpu_plugin.py)
_READY = "(conditions[?type == 'Ready'] | [0].status)"


@dataclass(frozen=True)
class AppCheck:
    """One GPU app as the checks see it; its namespace and Deployment carry its name (components/gpu_app.py)."""

    name: str
    access: str  # what the gate allows
    reason: str
    devices: int
    open_test_prefix: str
    by_repository: bool  # deliveredBy: repository: the repository's own renderer writes it
    kustomization: tuple[str, str] | None  # (namespace, name) of the Flux Kustomization applying it; None: not found
    # What the cluster runs after this merge: the gate's access for an app the export writes; for one the repository
    # delivers, what its object holds (the hostPath until the renderer's change lands, whatever the gate allows)
    held: str = ""
    # An app adopted from the repository's HelmRelease: its namespace, workload (`deployment/plex`) and its pods'
    # labels as the release renders them; otherwise the program's own (the app's name for all three).
    namespace: str = ""
    workload: str = ""
    pod_labels: tuple[tuple[str, str], ...] = ()

    @property
    def runs(self) -> str:
        return self.held or self.access

    @property
    def ns(self) -> str:
        return self.namespace or self.name

    @property
    def target(self) -> str:
        return self.workload or f"deployment/{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.pod_labels) or {"app.kubernetes.io/name": self.name}


@dataclass(frozen=True)
class PostMerge:
    """Everything both forms say, read once from the tree, the stack outputs and Flux's walk of the repository."""

    stack: str
    nodes: tuple[str, ...]
    shares_per_node: int
    flux_namespace: str
    apps: tuple[AppCheck, ...]
    dra_kernel_driver: str | None = None  # gpu.route: dra: the kernel driver each node's slice must report
    plugin: bool = True  # the device plugin is exported (until the DRA route's step 5)
    dra_step: int | None = None  # gpu.route: dra: the step of the move this export is
    # gpu.route: dra: (namespace, name) of the Flux Kustomization applying the driver: the export's own, or the
    # repository's the stack adopts (`driver_adopted`, gpu.dra.deliveredBy: repository), whose DaemonSet its own
    # release names
    driver_kustomization: tuple[str, str] | None = None
    driver_adopted: bool = False

    @classmethod
    def of(cls, tree: Tree, outputs: ProgramOutputs, after: FluxView | None) -> PostMerge:
        ours = (flux_mod.PLUGIN_KUSTOMIZATION, flux_mod.DRIVER_KUSTOMIZATION)
        plugin_ks = next((o for o in tree.objects if is_flux_kustomization(o.manifest)
                          and (o.manifest.get("metadata") or {}).get("name") in ours), None)
        flux_ns = str((plugin_ks.manifest.get("metadata") or {}).get("namespace", "flux-system")) if plugin_ks \
            else outputs.flux_graph.namespace
        apps = tuple(_adopted_check(name, app, after) if app.adopted else
                     AppCheck(name, app.access, app.reason, app.devices, app.open_test_prefix, app.by_repository,
                              _applier_of(tree, after, name) if app.by_repository else (flux_ns, name),
                              held_of(tree, after, name) if app.by_repository else app.access)
                     for name, app in sorted(outputs.gpu_apps.items()))
        migration = outputs.dra_migration
        graph = outputs.flux_graph
        driver_ks = graph.driver or graph.adopted_driver
        return cls(tree.stack, outputs.nodes, outputs.gpu_shares_per_node, flux_ns, apps,
                   outputs.dra_kernel_driver if driver_ks is not None else None,
                   plugin=graph.plugin is not None, dra_step=migration.step if migration else None,
                   driver_kustomization=driver_ks, driver_adopted=graph.adopted_driver is not None)


def _adopted_check(name: str, app: GpuAppOutput, after: FluxView | None) -> AppCheck:
    """An app adopted from a HelmRelease: the release's Kustomization, namespace and workload; the pods by the
    release's instance label, which app-template (its common library) sets on every pod it renders. The gate's
    access is what the walk held the release's values to (gitops/checks/adopted.py refuses anything else)."""
    adopted = app.adopted
    assert adopted is not None
    oid = helm_release_id(adopted.namespace, adopted.name)
    appliers = after.applied_by.get(oid, []) if after is not None else []
    return AppCheck(name, app.access, app.reason, app.devices, app.open_test_prefix, True,
                    appliers[0] if appliers else None, _held_by_release(app, adopted, after), adopted.namespace,
                    f"{adopted.workload_kind.lower()}/{adopted.workload_name}",
                    (("app.kubernetes.io/instance", adopted.name),))


def _held_by_release(app: GpuAppOutput, adopted: AdoptedRelease, after: FluxView | None) -> str:
    """What the adopted release's pod holds after the merge, as its values say (or the stack states where they cannot):
    the hostPath until the renderer's change lands, whatever the gate allows; the gate's access where not read."""
    release = after.manifests.get(helm_release_id(adopted.namespace, adopted.name)) if after is not None else None
    read = read_release(release, adopted, after.manifests) if release is not None and after is not None else None
    if not isinstance(read, PodReading):
        return app.access
    return adopted.asserted or app.access if read.access == "cannot-tell" else read.access


def _applier_of(tree: Tree, after: FluxView | None, app: str) -> tuple[str, str] | None:
    """(namespace, name) of the repository's Kustomization that applies an app the repository delivers."""
    if after is None:
        return None
    ref = tree.reference_deployment(app)
    appliers = after.applied_by.get(ObjectId.of(ref), []) if ref is not None else []
    return appliers[0] if appliers else None


def add_post_merge(tree: Tree, outputs: ProgramOutputs, after: FluxView | None = None) -> None:
    """POST-MERGE.md and the Chainsaw suite into the stack's records folder."""
    checks = PostMerge.of(tree, outputs, after)
    records = tree.layout.records
    tree.files[f"{records}/{CHECKLIST_FILE}"] = checklist_markdown(checks).encode()
    header = file_header(tree, _CHAINSAW_SCHEMA)
    tree.files[suite_path(tree.layout)] = dump_documents(chainsaw_suite(checks), header, tree)


def checklist_markdown(pm: PostMerge) -> str:
    """What to check on the cluster after the merge, in order: the plugin, the nodes' advertisement, then for every
    GPU app its Kustomization, its rollout and the uid-1000 device test."""
    jsonpath = "{.status.allocatable.gpu\\.intel\\.com/i915}"
    suite = f"{SUITE_DIR}/{SUITE_FILE}"
    lines = [
        markdown_generated_line(pm.stack),
        f"# Post-merge checklist: `{pm.stack}` ({len(pm.nodes)} nodes: {', '.join(pm.nodes)})",
        "",
        f"{'Steps 1-3' if pm.plugin else 'The driver, its slices'} and each app's rollout are also a read-only "
        f"Chainsaw suite beside this file (`{suite}`): "
        f"`chainsaw test --test-dir <this folder>/{SUITE_DIR}` runs it against the cluster of your "
        "current kubeconfig context (Chainsaw v0.2.15 or newer).",
        "",
        "GPU access in this export:",
    ]
    for app in pm.apps:
        by = " (delivered by the repository; the export holds it to this gate)" if app.by_repository else ""
        if app.runs == app.access:
            lines.append(f"- `{app.name}`{by}: **{app.access}**. {app.reason}")
        else:  # the gate allows more than the repository's object holds yet: the list checks what will run
            lines.append(f"- `{app.name}`{by}: **{app.runs}** after this merge; the gate allows **{app.access}** "
                         f"({app.reason}): the renderer's pull request in DELIVERY.md moves it, and the export after "
                         f"it checks {app.access} here.")
    lines.append("")
    step = 1
    if pm.plugin:
        lines += [
            "1. The plugin's Flux Kustomization is Ready:",
            f"   `flux get kustomizations {flux_mod.PLUGIN_KUSTOMIZATION} -n {pm.flux_namespace}` shows READY True.",
            f"2. The DaemonSet runs on every node: `kubectl -n {PLUGIN_NAMESPACE} get daemonset {PLUGIN_NAME}` shows "
            f"DESIRED = CURRENT = READY = {len(pm.nodes)}.",
            f"3. Every node advertises `{RESOURCE}` (each line {pm.shares_per_node}: one iGPU, shared "
            f"{pm.shares_per_node} way{'s' if pm.shares_per_node > 1 else ''}):",
        ]
        lines += [f"   - `kubectl get node {node} -o jsonpath='{jsonpath}'`" for node in pm.nodes]
        if pm.dra_step is None or pm.dra_step == 1:  # from step 3 on, no app asks for the plugin's resource
            lines.append("   Then record the evidence that unlocks the device-plugin request: "
                         f"`{next_step(pm.stack)}`.")
        step = 4
    if pm.dra_kernel_driver is not None:
        lines += _driver_lines(pm, step)
        step += 2
    for app in pm.apps:
        lines += _app_lines(step, app, pm)
        step += 2
    if any(app.access == "dra-claim" for app in pm.apps) and pm.plugin:
        lines.append(f"{step}. Then record that every claim is allocated and every app runs, the evidence the "
                     f"plugin's removal needs: `{next_claims_step(pm.stack)}`.")
    lines.append("")
    return "\n".join(lines)


def _driver_lines(pm: PostMerge, step: int) -> list[str]:
    """gpu.route: dra: the driver runs (beside the plugin until step 5) and every node publishes its slice."""
    ks_ns, ks_name = pm.driver_kustomization or (pm.flux_namespace, flux_mod.DRIVER_KUSTOMIZATION)
    delivered = f"`flux get kustomizations {ks_name} -n {ks_ns}` shows READY True"
    lines = [
        f"{step}. The DRA driver the repository installs (the stack adopts it: gpu.dra.deliveredBy: repository) is "
        f"delivered: {delivered}, and its DaemonSet (named by the repository's release) shows DESIRED = CURRENT = "
        f"READY = {len(pm.nodes)} in `kubectl get daemonsets -A`." if pm.driver_adopted else
        f"{step}. The DRA driver is delivered: {delivered}, and `kubectl -n {DRIVER_NAMESPACE} get daemonset "
        f"{DRIVER_NAME}` shows DESIRED = CURRENT = READY = {len(pm.nodes)}.",
        f"{step + 1}. Every node publishes a ResourceSlice of driver `{DRA_DRIVER}` with a device on "
        f"`{pm.dra_kernel_driver}`: `kubectl get resourceslices --field-selector spec.driver={DRA_DRIVER} -o wide` "
        f"lists each of {', '.join(pm.nodes)}."
        + (" Nothing claims a device yet: the apps stay on the route above until the next step."
           if pm.dra_step == 1 else ""),
    ]
    if pm.dra_step == 1:
        lines.append(f"   Then record the slice evidence the switch to claims needs: `{next_dra_step(pm.stack)}`.")
    return lines


def _app_lines(step: int, app: AppCheck, pm: PostMerge) -> list[str]:
    prefix = f"{app.open_test_prefix} " if app.open_test_prefix else ""
    ks_ns, ks_name = app.kustomization or ("flux-system", "<the repository's Kustomization of it>")
    on = "its claim" if app.runs == "dra-claim" else "the device-plugin resource"
    ready = (f"`flux get kustomizations {ks_name} -n {ks_ns}` shows READY True, and `kubectl -n {app.ns} rollout "
             f"status {app.target} --timeout=10m` reports it rolled out")
    if app.runs == "dra-claim":
        ready += (f"; `kubectl -n {app.ns} get resourceclaims` shows its pod's claim `allocated,reserved` (a "
                  f"`{DRA_DRIVER}` device in `status.allocation`, the pod in `status.reservedFor`)")
    return [
        f"{step}. `{app.name}` exists and is Ready: {ready}.",
        f"{step + 1}. The decisive test for `{app.name}`, once it runs with {on}: open the "
        "render node read-write as uid 1000, not uid 0 (root would pass where the app fails):",
        f"   `kubectl -n {app.ns} exec {app.workload or 'deploy/' + app.name} -- {prefix}sh -c "
        "'id -u && exec 3<>/dev/dri/renderD128 && echo OPEN-RW-OK'`",
        "   prints `1000` and `OPEN-RW-OK`. `Operation not permitted` means the device cgroup still denies it ("
        + ("the driver's CDI spec did not add the device" if app.runs == "dra-claim" else
           "the plugin did not allocate the device")
        + "); `Permission denied` means file mode or group, not the cgroup.",
    ]


# --- the Chainsaw suite --------------------------------------------------------------------------------------------

def chainsaw_suite(pm: PostMerge) -> list[dict[str, Any]]:
    """One Test for the plugin, one for the nodes' advertisement, one per GPU app, in the checklist's order. A check
    that must name what failed (a node, a node's plugin pod) is an operation of its own that lets the next run
    (`continueOnError`), so one run names every node that fails, not only the first."""
    plugin = [_plugin_test(pm), _advertised_test(pm)] if pm.plugin else []
    driver = [_driver_test(pm)] if pm.dra_kernel_driver is not None else []
    return [*plugin, *driver, *(_app_test(pm, app) for app in pm.apps)]


def _test(pm: PostMerge, name: str, description: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": CHAINSAW_API, "kind": "Test", "metadata": {"name": name},
            # an existing namespace: Chainsaw creates (and deletes) one only when the Test names none or a missing one
            "spec": {"description": description, "namespace": pm.flux_namespace, "steps": steps}}


def _step(name: str, *operations: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "try": list(operations)}


def _assert(resource: dict[str, Any], keep_going: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"assert": {"resource": resource}}
    return {**op, "continueOnError": True} if keep_going else op


def _kustomization_ready(namespace: str, name: str) -> dict[str, Any]:
    return _assert({"apiVersion": flux_mod.API_VERSION, "kind": flux_mod.KIND,
                    "metadata": {"name": name, "namespace": namespace}, "status": {_READY: "True"}})


def _plugin_test(pm: PostMerge) -> dict[str, Any]:
    count = len(pm.nodes)
    ready = {"desiredNumberScheduled": count, "currentNumberScheduled": count, "updatedNumberScheduled": count,
             "numberReady": count, "numberAvailable": count}
    per_node = [_assert({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": PLUGIN_NAMESPACE, "labels": _PLUGIN_LABELS},
        "spec": {"nodeName": node}, "status": {"phase": "Running", _READY: "True"}}, keep_going=True)
        for node in pm.nodes]
    return _test(pm, flux_mod.PLUGIN_KUSTOMIZATION, "The GPU plugin is delivered and runs on every node.", [
        _step("the plugin's Kustomization is Ready",
              _kustomization_ready(pm.flux_namespace, flux_mod.PLUGIN_KUSTOMIZATION)),
        _step(f"the DaemonSet is ready on every node ({count})", _assert(
            {"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": PLUGIN_NAME, "namespace": PLUGIN_NAMESPACE}, "status": ready}), *per_node)])


def _advertised_test(pm: PostMerge) -> dict[str, Any]:
    shares = str(pm.shares_per_node)
    per_node = [_assert({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
        "status": {"allocatable": {RESOURCE: shares}}}, keep_going=True) for node in pm.nodes]
    return _test(pm, "gpu-advertised", f"Every node advertises {RESOURCE}: the share count.",
                 [_step(f"every node advertises {RESOURCE} = {shares}", *per_node)])


def _driver_test(pm: PostMerge) -> dict[str, Any]:
    """The DRA driver delivered, ready on every node, and each node's slice: what the gate's DRA evidence reads."""
    count = len(pm.nodes)
    ready = {"desiredNumberScheduled": count, "numberReady": count, "numberAvailable": count}
    kernel = f"(devices[?attributes.driver.string == '{pm.dra_kernel_driver}'] | length(@) > `0`)"
    per_node = [_assert({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                         "spec": {"driver": DRA_DRIVER, "nodeName": node, kernel: True}}, keep_going=True)
                for node in pm.nodes]
    ks_ns, ks_name = pm.driver_kustomization or (pm.flux_namespace, flux_mod.DRIVER_KUSTOMIZATION)
    # the DaemonSet of a driver the repository installs is named by its release: its slices are what the test reads
    daemonset = [] if pm.driver_adopted else [_step(f"the driver's DaemonSet is ready on every node ({count})", _assert(
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": DRIVER_NAME, "namespace": DRIVER_NAMESPACE}, "status": ready}))]
    return _test(pm, ks_name, "The DRA driver runs on every node and publishes its slice.", [
        _step("the driver's Kustomization is Ready", _kustomization_ready(ks_ns, ks_name)),
        *daemonset,
        _step(f"every node publishes a {DRA_DRIVER} slice with a {pm.dra_kernel_driver} device", *per_node),
        # After step 5 the plugin's DaemonSet is pruned: one left would hand out the iGPU beside the driver.
        *([] if pm.plugin else [_step("the device plugin's DaemonSet is gone", {"error": {"resource": {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": PLUGIN_NAME, "namespace": PLUGIN_NAMESPACE}}}})])])


def _app_test(pm: PostMerge, app: AppCheck) -> dict[str, Any]:
    """The app delivered and running; on the device-plugin resource, its pod requests it, mounts no /dev/dri
    hostPath and is scheduled. Before the switch (host-path: the gate's, or the repository's object not changed yet),
    that it runs with the hostPath."""
    labels = app.labels
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": app.ns, "labels": labels},
                           "status": {"phase": "Running", _READY: "True"}}
    steps = []
    if app.kustomization is not None:
        steps.append(_step(f"{app.name}'s Kustomization is Ready", _kustomization_ready(*app.kustomization)))
    with_host_path = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": app.ns, "labels": labels},
                      "spec": {"(contains(to_array(volumes[].hostPath.path), '/dev/dri'))": True}}
    no_host_path = _step(f"no pod of {app.name} mounts the /dev/dri hostPath", {"error": {"resource": with_host_path}})
    if app.runs == "dra-claim":
        return _claim_test(pm, app, pod, steps, no_host_path)
    if app.runs != "device-plugin":
        steps.append(_step(f"a pod of {app.name} is Running and Ready", _assert(pod)))
        if app.runs == "host-path":  # what the cluster holds until the switch: its suite fails once the pod moves
            steps.append(_step(f"a pod of {app.name} mounts the /dev/dri hostPath", _assert(with_host_path)))
        return _test(pm, app.name, f"{app.name} is delivered and runs (GPU access: {app.runs}).", steps)
    devices = str(app.devices)
    # Keys short enough for a repository's 80-column lint at any indentation the export writes; the app's container
    # is the first (components/gpu_app.py)
    on_gpu = {**pod, "spec": {"(nodeName != `null`)": True, f'(containers[0].resources.limits."{RESOURCE}")': devices}}
    steps += [_step(f"{app.name} is scheduled with {RESOURCE} = {devices}", _assert(on_gpu)), no_host_path]
    return _test(pm, app.name, f"{app.name} runs on {RESOURCE}, no hostPath.", steps)


def _claim_test(pm: PostMerge, app: AppCheck, pod: dict[str, Any], steps: list[dict[str, Any]],
                no_host_path: dict[str, Any]) -> dict[str, Any]:
    """gpu.route: dra, from step 3: the app's pod runs on its claim, and a claim in its namespace is allocated a
    device of Intel's driver and reserved (what step 4's evidence reads); no pod asks for the plugin's resource."""
    on_claim = {**pod, "spec": {"(nodeName != `null`)": True,
                                f"(resourceClaims[?name == '{CLAIM_NAME}'] | length(@) > `0`)": True}}
    allocated = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"namespace": app.ns},
                 "status": {"allocation": {"devices": {
                     f"(results[?driver == '{DRA_DRIVER}'] | length(@) > `0`)": True}},
                     "(length(reservedFor || `[]`) > `0`)": True}}
    with_i915 = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": app.ns,
                                                                  "labels": pod["metadata"]["labels"]},
                 "spec": {f'(containers[0].resources.limits."{RESOURCE}" != `null`)': True}}
    steps += [_step(f"{app.name} runs on its claim", _assert(on_claim)),
              _step(f"a claim in {app.ns} is allocated a {DRA_DRIVER} device and reserved", _assert(allocated)),
              _step(f"no pod of {app.name} requests {RESOURCE}", {"error": {"resource": with_i915}}), no_host_path]
    return _test(pm, app.name, f"{app.name} runs on a {DRA_DRIVER} claim, no {RESOURCE}, no hostPath.", steps)
