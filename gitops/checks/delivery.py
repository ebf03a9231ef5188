"""Refusals from Flux's walk of the repository (gitops/flux/), before anything is written.

Each stack's repository is walked as it is (`before`) and as it will be (`after`). `check_stack` refuses, one line per
cause with the file to change first (issue 43): failed builds (walk_builds.py); an exported object applied by no
Flux Kustomization, by two, or by another than its component's own; an object the repository applied before that
nothing applies after (with prune: true Flux would delete it: `flux-system/` cut out of the bootstrap build is the
classic); what parents' patches take from the export's Kustomizations, the graph rules, timeouts and tiers
(applied_specs.py); build and `${VAR}` problems new since `before` or about the export's files (older ones are
notices); an exported Kustomization in a namespace nothing creates; a second Intel GPU plugin.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from gitops.checks.applied_specs import (
    check_parent_patches,
    deleted_by_patch,
    depends_patches,
    graph_rules,
    tier_members,
    wait_timeouts,
)
from gitops.checks.walk_builds import (
    Failures,
    StackWalk,
    applied_as_written,
    build_problems,
    failures_of,
    is_pathless,
    links_on_the_way,
    listed,
)
from gitops.flux.build import RepoView
from gitops.flux.helm import chart_source
from gitops.flux.inventory import FluxView, KsKey, ObjectId, is_flux_kustomization, show_key
from gitops.flux.walk import walk_from_bootstrap
from gitops.tree import Tree
from model.flux_graph import WORKLOAD_KINDS, other_target
from model.layout import is_within
from model.outputs import FluxGraph, GpuAppOutput
from model.safe_yaml import as_mapping, escaped


def before_and_after(tree: Tree, graph: FluxGraph, before_view: RepoView, after_view: RepoView,
                     gpu_apps: Mapping[str, GpuAppOutput] | None = None,
                     app_keys: Mapping[str, str] | None = None) -> StackWalk:
    """Flux's walk of the repository from the stack's bootstrap, as it is (none when the bootstrap folder is not there
    yet: a first export) and as it will be. `gpu_apps`, `app_keys`: to name the key of an app the repository holds."""
    def walk_view(view: RepoView) -> FluxView:
        return walk_from_bootstrap(view, tree.layout.bootstrap_path, graph.bootstrap.key, graph.bootstrap.source_key)

    boot_dir = tree.layout.bootstrap_path.removeprefix("./")
    fresh = not before_view.is_dir(boot_dir)
    before = walk_view(before_view) if not fresh else FluxView(bootstrap=graph.bootstrap.key)
    return StackWalk(tree=tree, before=before, after=walk_view(after_view), fresh=fresh, gpu_apps=gpu_apps or {},
                     app_keys=app_keys or {})


def check_stack(sw: StackWalk, graph: FluxGraph, view: RepoView, old_owned: set[str],
                node_count: int) -> list[str]:
    """Every refusal of the stack's walk, one line each, in the order of the module's list; notices (problems the
    repository had before this export) go to `sw.notices`."""
    deleted = deleted_by_patch(sw, graph.exported, view)
    links = links_on_the_way(sw, view)
    failures = failures_of(sw, graph, view, links)
    applied_as_written(sw, graph, links)
    second: set[tuple[KsKey, ObjectId]] = set()  # (Kustomization, exported object) it applies a second time
    applied = _applied_once(sw, graph, view, set(deleted), failures, links, second)
    folds: dict[str, list[str]] = {}  # a parent's patch -> what its dependsOn breaks, said in one line
    rules = graph_rules(sw, graph, failures, folds)  # before the failures' lines: a tier it cannot reach folds in
    parents = check_parent_patches(sw.after, graph.exported, graph.plugin, graph.cni, graph.driver, folds)
    return [
        *failures.lines(sw),
        *applied,
        *_nothing_dropped(sw, view, old_owned),
        *deleted.values(),
        *depends_patches(folds),
        *parents,
        *build_problems(sw, graph, links),
        *rules,
        *wait_timeouts(sw.after, node_count, links, second),
        *tier_members(sw.after, graph),
        *_namespaces_created(sw),
        *_adopted_driver(sw, graph),
        *_second_plugin(sw, graph),
    ]


def deciding_file(view: RepoView, after: FluxView, folder: str) -> tuple[str | None, str | None]:
    """(the kustomization file whose `resources` decide whether `folder` is built, the entry to list there).
    (None, None) when no walked Kustomization's path contains `folder`."""
    containing = [k for k in after.kustomizations.values() if k.status == "built" and is_within(folder, k.path)
                  and k.path != folder]
    if not containing:
        return None, None
    base = max(containing, key=lambda k: len(k.path)).path
    parts = folder.split("/")
    start = len(base.split("/")) if base else 0
    deciding = None
    for i in range(len(parts) - 1, start - 1, -1):
        d = "/".join(parts[:i])
        kfile = view.kustomization_file(d)
        if kfile:
            deciding = (kfile, d)
            break
    if deciding is None:
        return None, None
    kfile, d = deciding
    return kfile, posixpath.relpath(folder, d or ".")


def _entry_into(trail: tuple[tuple[str, str], ...], folder: str) -> tuple[str | None, str | None]:
    """The outermost (kustomization file, entry) of a build trail whose entry leads into `folder`."""
    for kfile, entry in trail:
        if is_within(posixpath.dirname(kfile), folder):
            break  # the exported folder's own kustomization.yaml: the way in was a generated walk, not an entry
        target = posixpath.normpath(posixpath.join(posixpath.dirname(kfile), entry))
        if is_within(target, folder) or is_within(folder, target):
            return kfile, entry
    return None, None


def _applier(after: FluxView, key: KsKey) -> str:
    ks = after.kustomizations.get(key)
    path = ks.shown_path if ks is not None else "?"
    return f"{show_key(key)} (path {path})"


# What installs Intel's GPU device plugin or DRA driver besides the export's own: their Helm charts (by
# `chart.spec.chart`, or by `chartRef` to the OCIRepository or HelmChart naming the chart, as the home-operations
# repositories write every release), the operator's custom resource, or a DaemonSet running their image.
PLUGIN_CHARTS = ("intel-device-plugins-gpu", "intel-device-plugins-operator")
PLUGIN_IMAGE = "intel/intel-gpu-plugin"
DRIVER_CHARTS = ("intel-gpu-resource-driver", "intel-gpu-resource-driver-chart")
DRIVER_IMAGE = "/intel-gpu-resource-driver:"


def _installs(manifest: dict[str, Any], manifests: Mapping[ObjectId, dict[str, Any]]) -> tuple[str, str] | None:
    """("plugin" or "driver", what installs it) for an object that installs Intel's GPU device plugin or DRA
    driver, else None."""
    m = as_mapping
    kind, spec = manifest.get("kind"), m(manifest.get("spec"))
    if kind == "HelmRelease":
        found = chart_source(manifest, manifests)
        if found is None:
            return None
        chart, by = found.chart, found.by
        what = "plugin" if chart in PLUGIN_CHARTS else "driver" if chart in DRIVER_CHARTS else None
        return (what, f"the Helm chart {escaped(chart)}{by}") if what else None
    if kind == "GpuDevicePlugin":
        return "plugin", "the operator's GpuDevicePlugin"
    if kind in WORKLOAD_KINDS:
        containers = m(m(spec.get("template")).get("spec")).get("containers")
        for c in containers if isinstance(containers, list) else []:
            image = str(m(c).get("image", ""))
            if PLUGIN_IMAGE in image:
                return "plugin", f"the image {escaped(image)}"
            if DRIVER_IMAGE in image:
                return "driver", f"the image {escaped(image)}"
    return None


def _drivers_applied(after: FluxView) -> dict[KsKey, str]:
    """Each Kustomization of the walk that applies an Intel GPU DRA driver -> what installs it (the first found)."""
    found: dict[KsKey, str] = {}
    for oid, appliers in sorted(after.applied_by.items()):
        manifest = after.manifests.get(oid)
        installs = _installs(manifest, after.manifests) if manifest is not None else None
        if installs is not None and installs[0] == "driver":
            for key in appliers:
                found.setdefault(key, installs[1])
    return found


def _adopted_driver(sw: StackWalk, graph: FluxGraph) -> list[str]:
    """gpu.dra.deliveredBy: repository: the Kustomization the stack adopts is one Flux's walk applies, and it applies
    Intel's GPU DRA driver; else one line at that stack key. A first export into a repository whose bootstrap folder
    is not there yet assumes it, as it assumes the tiers the stack says the repository declares; one the walk cannot
    build (another source, a path outside the repository) is a notice, and a failed build has its own line."""
    adopted = graph.adopted_driver
    if adopted is None or sw.fresh:
        return []
    after = sw.after
    at = f"Pulumi.{sw.tree.stack}.yaml: gpu-platform:gpu.dra.kustomization: {show_key(adopted)}"
    drivers = _drivers_applied(after)
    others = [k for k in drivers if k != adopted]
    hint = f"did you mean {show_key(others[0])}, which applies {drivers[others[0]]}?" if others else ""
    ks = after.kustomizations.get(adopted)
    if ks is None:
        waiting = (f", and {listed([show_key(k) for k in graph.driver_dependents])} would wait for it forever"
                   if graph.driver_dependents else "")
        theirs = set(after.kustomizations) - {after.bootstrap} - graph.exported  # the repository's, the candidates
        hint = hint or other_target(adopted, theirs, show_key, depends_on=False)
        return [f"{at}: Flux's walk from {sw.tree.layout.bootstrap_path} applies no such Kustomization, so nothing "
                f"would install the DRA driver the stack adopts{waiting}; hint: {hint}"]
    if ks.status in ("external", "other-source"):
        sw.notices.append(f"{at}: its path {ks.shown_path} is not built from this repository (its status: "
                          f"{ks.status}), so the walk cannot see that it installs Intel's GPU DRA driver; step 2's "
                          "slice evidence is what shows it does")
        return []
    if ks.status == "failed" or adopted in drivers:
        return []
    count = len(ks.objects)
    applied = (f"it applies {count} object{'s' if count != 1 else ''} from {ks.shown_path}, e.g. {ks.objects[0]}"
               if count else f"it applies nothing from {ks.shown_path}")
    return [f"{at}: applies no Intel GPU DRA driver ({applied}), so nothing would publish the ResourceSlices the "
            "apps' claims are allocated from; hint: " + (hint or "name the Kustomization that applies the driver (a "
                                                          "HelmRelease of Intel's intel-gpu-resource-driver chart, or "
                                                          "a DaemonSet running its image), or set gpu.dra.deliveredBy: "
                                                          "export to have the export write the driver")]


def _second_plugin(sw: StackWalk, graph: FluxGraph) -> list[str]:
    """Another Intel GPU plugin or DRA driver the repository installs. Two plugins on one node each advertise
    gpu.intel.com/i915, so the scheduler counts every device twice and the evidence and capacity checks count wrong;
    two drivers publish each device twice and claim one DeviceClass. A plugin beside a driver (the repository's or the
    export's, once the DRA route removed the export's plugin at step 5) hands out the same iGPU as the driver without
    counting the other's use, which the move exists to end; only the DRA stages where both run allow it, and those
    are the export's own plugin and the export's driver, or the repository's driver the stack adopts
    (gpu.dra.deliveredBy: repository), which is the one driver allowed in the repository then. While the adopted
    Kustomization applies no driver, `_adopted_driver` says so and names any driver found elsewhere: that one is not
    called a second."""
    ours = {ObjectId.of(o.manifest) for o in sw.tree.objects}
    adopted = graph.adopted_driver
    adopted_applies = adopted is not None and adopted in _drivers_applied(sw.after)
    problems = []
    for oid, manifest in sorted(sw.after.manifests.items()):
        found = None if oid in ours else _installs(manifest, sw.after.manifests)
        if not found:
            continue
        daemon, what = found
        origin = sw.after.origins.get(oid, "?")
        if daemon == "driver" and adopted is not None and adopted in sw.after.applied_by.get(oid, []):
            continue  # the driver the stack adopts, beside the export's plugin until step 5 as the stages allow
        if daemon == "driver" and graph.driver is not None:
            problems.append(f"{origin}: {oid}: installs a second Intel GPU DRA driver ({what}) beside the export's "
                            "intel-gpu-resource-driver; two drivers publish every iGPU twice and own one DeviceClass "
                            "gpu.intel.com; hint: remove one of them")
        elif daemon == "driver" and adopted is not None and adopted_applies:
            problems.append(f"{origin}: {oid}: installs a second Intel GPU DRA driver ({what}) beside the repository's "
                            f"{show_key(adopted)} that the stack adopts (gpu.dra.kustomization); two drivers publish "
                            "every iGPU twice and own one DeviceClass gpu.intel.com; hint: remove one of them")
        elif daemon == "driver" and adopted is not None:
            continue  # the adopted Kustomization applies no driver: its line names this one as the likely target
        elif daemon == "driver" and graph.plugin is not None:
            problems.append(f"{origin}: {oid}: installs Intel's GPU DRA driver ({what}) beside the export's "
                            "intel-gpu-plugin DaemonSet: both would hand out the same iGPU, neither counting the "
                            "other's use; hint: remove one of them")
        elif daemon == "driver":
            continue  # the stack exports no GPU daemon of its own: nothing to hand the iGPU out twice
        elif graph.plugin is None and graph.driver is not None:
            problems.append(f"{origin}: {oid}: installs an Intel GPU device plugin ({what}) beside the DRA driver "
                            f"after gpu.dra.stage plugin-removed: both would hand out the same iGPU, neither counting "
                            "the other's use; hint: remove it from the repository in the same pull request")
        elif graph.plugin is None and adopted is not None:
            problems.append(f"{origin}: {oid}: installs an Intel GPU device plugin ({what}) beside the DRA driver of "
                            f"the repository's {show_key(adopted)} that the stack adopts, after gpu.dra.stage "
                            "plugin-removed: both would hand out the same iGPU, neither counting the other's use; "
                            "hint: remove it from the repository in the same pull request")
        elif graph.plugin is None:
            continue  # the stack exports no GPU daemon and adopts none: nothing to hand the iGPU out twice
        else:
            problems.append(f"{origin}: {oid}: installs a second Intel GPU plugin ({what}) beside the export's "
                            "intel-gpu-plugin DaemonSet; two plugins on one node each advertise gpu.intel.com/i915, "
                            "so every device is counted twice; hint: remove one of them")
    return problems


def _namespaces_created(sw: StackWalk) -> list[str]:
    """Each exported Kustomization lives in the bootstrap's namespace or one something applies: in
    a namespace nothing creates, the API server refuses it and nothing the export delivers ever reconciles."""
    if sw.fresh:
        return []
    # The bootstrap Kustomization's own namespace exists wherever Flux was installed from (bootstrap, Helm, operator).
    created = {oid.name for oid in sw.after.applied_by if oid.kind == "Namespace"} | {sw.after.bootstrap[0]}
    problems = []
    for obj in sw.tree.objects:
        namespace = str((obj.manifest.get("metadata") or {}).get("namespace") or "")
        if obj.manifest.get("kind") == "Kustomization" and namespace and namespace not in created:
            problems.append(f"{obj.path}: {ObjectId.of(obj.manifest)}: its namespace {namespace!r} is created by "
                            "nothing Flux's walk applies; the API server refuses the object and nothing the export "
                            "delivers would reconcile; hint: set flux.namespace to Flux's own namespace (flux-system), "
                            f"or add a Namespace {namespace} to the repository")
    return problems


def _applied_once(sw: StackWalk, graph: FluxGraph, view: RepoView, deleted: set[KsKey], failures: Failures,
                  hidden: list[str], second: set[tuple[KsKey, ObjectId]]) -> list[str]:
    """1. Every exported object is applied exactly once, by the Kustomization meant for its folder (the export's
    Kustomizations a parent's patch deletes are said by that refusal, and are not looked for; what a failed build
    leaves unapplied folds into its cause's line; what lies below a link is left to OUT's guard, which names it).
    `second` gains each Kustomization that applies an exported object a second time, with the object."""
    tree, after = sw.tree, sw.after
    expected: dict[str, KsKey] = {c.folder: c.kustomization for c in graph.components.values()}
    if graph.plugin is not None:
        expected[graph.plugin_folder] = graph.plugin
    if graph.driver is not None:
        expected[graph.driver_folder] = graph.driver
    problems: list[str] = []
    unapplied: dict[str, ObjectId] = {}
    waiting: dict[KsKey, list[tuple[str, ObjectId]]] = {}  # its own Kustomization is not applied either
    twice: dict[tuple[KsKey, str | None, str | None, str], list] = {}
    elsewhere: dict[tuple[KsKey, str], list[tuple[str, ObjectId]]] = {}  # applied only by another Kustomization
    own_file: dict[tuple[KsKey, str, str, KsKey | None], list[Any]] = {}  # a file of the repository's holds them too
    for obj in tree.objects:
        oid = ObjectId.of(obj.manifest)
        folder = posixpath.dirname(obj.path)
        appliers = after.applied_by.get(oid, [])
        if any(is_within(obj.path, link) for link in hidden):
            continue
        if not appliers:
            if is_flux_kustomization(obj.manifest) and (oid.namespace, oid.name) in deleted:
                continue
            own = expected.get(folder)
            if own is not None and own not in after.kustomizations and own in graph.exported:
                waiting.setdefault(own, []).append((folder, oid))  # the line about its Kustomization names the cause
            elif folder not in unapplied and not failures.take(after, folder, oid, own):
                unapplied[folder] = oid
        elif len(appliers) > 1:
            want = expected.get(folder)
            extra = [a for a in appliers if a != want] if want in appliers else appliers[1:]
            for a in extra:
                second.add((a, oid))
                source = after.sources.get((oid, a), "")
                if source and not is_within(source, folder):  # the repository's own file holds the object too
                    own_file.setdefault((a, source, folder, want), []).append(obj)
                    continue
                kfile, entry = _entry_into(after.trails.get((oid, a), ()), folder)
                twice.setdefault((a, kfile, entry, folder), []).append((obj, appliers))
        elif folder in expected and appliers[0] != expected[folder]:
            elsewhere.setdefault((appliers[0], folder), []).append((obj.path, oid))
    problems += [_applied_from_own_file(sw, graph, key, objs) for key, objs in own_file.items()]
    problems += [_applied_by_another(sw, graph, applier, folder, expected[folder], objs)
                 for (applier, folder), objs in elsewhere.items()]
    failures.follow(waiting)
    pathless = {key: objs for key, objs in twice.items() if is_pathless(after.kustomizations[key[0]])}
    return [*problems, *_not_applied(sw, view, unapplied),
            *_applied_twice_by_applier(after, {key: objs for key, objs in twice.items() if key not in pathless}),
            *_applied_by_a_pathless(after, pathless)]


def _applied_by_another(sw: StackWalk, graph: FluxGraph, applier: KsKey, folder: str, own: KsKey,
                        objs: list[tuple[str, ObjectId]]) -> str:
    """Objects of an exported folder that another Kustomization applies instead of the folder's own, one line per
    applier and folder. Where the repository holds the objects itself (their origin outside the export's folder),
    the repository delivers the app: the fix is the app's stack key, and the line leads with it."""
    after = sw.after
    path, oid = objs[0]
    more = f" and {len(objs) - 1} more" if len(objs) > 1 else ""
    declared = after.kustomizations[applier].declared_in or "that Kustomization"
    origin = after.origins.get(oid, "")
    app = next((name for name, c in graph.components.items() if c.folder == folder), None)
    key = sw.repository_app(app)
    if origin and not is_within(origin, folder) and key and any(o.kind == "Deployment" for _, o in objs):
        return _delivered_by_the_repository(sw, key, str(app), applier, f"{oid}{more} from {origin}",
                                            f"{folder}/ for {show_key(own)}", declared)
    ks = after.kustomizations[applier]
    kfile, entry = _entry_into(after.trails.get((oid, applier), ()), folder)
    if kfile in sw.tree.files:
        kfile = entry = None  # the export's own listing: the fix is where the applier reaches in
    where = f"{kfile}: resources: `{entry}`" if kfile else ks.declared_in or ks.shown_path
    what = (f"the {len(objs)} objects of {folder}/ (e.g. {oid}, written to {path})" if more
            else f"{oid} (written to {path})")
    return (f"{where}: {_applier(after, applier)} applies {what}, which only its own Kustomization {show_key(own)} "
            "should apply; hint: " + (f"remove `{entry}` from its resources" if kfile
                                      else f"stop {show_key(applier)} from reaching {folder}/"))


def _delivered_by_the_repository(sw: StackWalk, key: str, app: str, applier: KsKey, theirs: str, ours: str,
                                  declared: str) -> str:
    """The repository applies its own copy of a GPU app the export writes: it delivers that app, and the line leads
    with the stack key that says so."""
    return (f"Pulumi.{sw.tree.stack}.yaml: gpu-platform:{key}.deliveredBy: export (the default), but "
            f"{_applier(sw.after, applier)} already applies the repository's own {app} ({theirs}) that the export "
            f"writes to {ours}; hint: set {key}.deliveredBy: repository (the export then writes no "
            f"{app.capitalize()} and holds the repository's to the GPU gate), or take {app} out of {declared}")


def _not_applied(sw: StackWalk, view: RepoView, unapplied: dict[str, ObjectId]) -> list[str]:
    """What no Kustomization applies and no failed build holds, one line per cause: the entry a listing lacks (the
    folders it leaves out counted together), or the walk that never reaches the export (named at its first folder)."""
    tree, after = sw.tree, sw.after
    lacking: dict[tuple[str, str], list[str]] = {}
    unreached: list[str] = []
    for folder in sorted(unapplied, key=lambda f: f.count("/")):
        if any(is_within(folder, top) for top in [*unreached, *(f[0] for f in lacking.values())]):
            continue  # below a folder said already, and counted with it
        kfile, entry = deciding_file(view, after, folder)
        if kfile is not None and entry is not None:
            lacking.setdefault((kfile, entry), []).append(folder)
        else:
            unreached.append(folder)
    lines = []
    for (kfile, entry), folders in lacking.items():
        count = sum(1 for o in tree.objects if any(o.path.startswith(f + "/") for f in folders))
        objects = f"the {count} objects" if count != 1 else "the object"
        lines.append(f"{kfile}: resources: lacks {entry!r}, so nothing applies {objects} the export writes "
                     f"to {listed([f'{f}/' for f in folders])} (e.g. {unapplied[folders[0]]}); hint: add "
                     f"`- {entry}` to its resources")
    for folder in unreached[:1]:
        lines.append(f"{folder}: {unapplied[folder]}: no Flux Kustomization applies it; Flux's walk starts at "
                     f"{tree.layout.bootstrap_path} ({show_key(after.bootstrap)}); hint: set gitops.entryDir to a "
                     "folder inside the bootstrap path")
    return lines


def _applied_from_own_file(sw: StackWalk, graph: FluxGraph, key: tuple[KsKey, str, str, KsKey | None],
                           objs: list[Any]) -> str:
    """The clash named at its file, one line per file and folder: a hand-written file the repository applies holds
    objects the export writes. When that is a GPU app, the repository delivers it: the line leads with its key."""
    applier, source, folder, own = key
    after, obj = sw.after, objs[0]
    oid = ObjectId.of(obj.manifest)
    more = f" and {len(objs) - 1} more" if len(objs) > 1 else ""
    mine = f" for {show_key(own)}" if own else ""
    app = next((name for name, c in graph.components.items() if c.folder == folder), None)
    app_key = sw.repository_app(app)
    if app_key and any(ObjectId.of(o.manifest).kind == "Deployment" for o in objs):  # its own app, not a stray
        return _delivered_by_the_repository(sw, app_key, str(app), applier, f"{oid}{more} from {source}",
                                            f"{folder}/{mine}", source)
    # A cluster-scoped object (no namespace: a DeviceClass, a policy) is no app's to hand over: only one side keeps it
    handover = ", or, for an app the repository delivers, set its deliveredBy: repository" if oid.namespace else ""
    return (f"{source}: {oid}{more}: applied by {_applier(after, applier)} from this file, and written by the export "
            f"to {obj.path if not more else folder + '/'}{mine}; two Kustomizations applying one object fight over it "
            f"and each prunes it when the other changes; hint: take {oid.kind} {oid.name}{more} out of {source}"
            f"{handover}")


def _applied_twice_by_applier(after: FluxView,
                              twice: dict[tuple[KsKey, str | None, str | None, str], list]) -> list[str]:
    """One line per cause: an entry of a kustomization listing one folder, or a Kustomization whose own path reaches
    several of the export's folders (its folders counted in one line)."""
    by_path: dict[KsKey, list[tuple[tuple[KsKey, str | None, str | None, str], list]]] = {}
    lines: list[str] = []
    for key, objs in twice.items():
        if key[1]:  # a kustomization's entry: the fix is that entry, one per entry
            lines.append(_applied_twice(after, key, objs))
        else:
            by_path.setdefault(key[0], []).append((key, objs))
    for a, folders in by_path.items():
        if len(folders) == 1:
            lines.append(_applied_twice(after, *folders[0]))
            continue
        ks = after.kustomizations[a]
        obj = folders[0][1][0][0]
        others = list(dict.fromkeys(show_key(x) for _, objs in folders for _, appliers in objs
                                    for x in appliers if x != a))
        shown = ", ".join(f"{key[3]}/" for key, _ in folders)
        count = sum(len(o) for _, o in folders)
        lines.append(f"{ks.declared_in or ks.shown_path}: {show_key(a)} applies the {count} objects of {shown} (e.g. "
                     f"{ObjectId.of(obj.manifest)}, written to {obj.path}), which {', '.join(others)} apply too; two "
                     "Kustomizations applying one object fight over it and each prunes it when the other changes; "
                     f"hint: stop {show_key(a)} from reaching {shown}")
    return lines


def _applied_twice(after: FluxView, key: tuple[KsKey, str | None, str | None, str], objs: list) -> str:
    a, kfile, entry, folder = key
    ks = after.kustomizations[a]
    obj, appliers = objs[0]
    where = kfile or ks.declared_in or ks.shown_path
    what = f"resources: `{entry}`: " if kfile else ""
    others = [_applier(after, x) for x in appliers if x != a]
    objects = (f"{ObjectId.of(obj.manifest)} (written to {obj.path})" if len(objs) == 1 else
               f"the {len(objs)} objects of {folder}/ (e.g. {ObjectId.of(obj.manifest)}, written to {obj.path})")
    return (f"{where}: {what}{show_key(a)} applies {objects}, which {' and '.join(others)} "
            f"{'apply' if len(others) > 1 else 'applies'} too; two Kustomizations applying one object fight over it "
            "and each prunes it when the other changes; "
            "hint: " + (f"remove `{entry}` from its resources" if kfile
                        else f"stop {show_key(a)} from reaching {folder}/"))


def _applied_by_a_pathless(after: FluxView, twice: dict[tuple[KsKey, str | None, str | None, str], list]) -> list[str]:
    """What a Kustomization without spec.path applies a second time, one line for each such Kustomization: its
    file first, every folder of the export it reaches folded in."""
    by_applier: dict[KsKey, list[tuple[str, list]]] = {}
    for (a, _, _, folder), objs in twice.items():
        by_applier.setdefault(a, []).append((folder, objs))
    lines = []
    for a, found in by_applier.items():
        ks = after.kustomizations[a]
        obj, _ = found[0][1][0]
        count = sum(len(objs) for _, objs in found)
        lines.append(f"{ks.declared_in or show_key(a)}: spec.path: not set, so Flux builds the whole repository (./) "
                     f"for {show_key(a)}, which applies the {count} object{'s' if count != 1 else ''} of "
                     f"{listed([f'{folder}/' for folder, _ in found])} (e.g. {ObjectId.of(obj.manifest)}, written to "
                     f"{obj.path}) that their own Kustomizations apply too; two Kustomizations applying one object "
                     "fight over it and each prunes it when the other changes; hint: set spec.path to the folder this "
                     "Kustomization is meant to apply")
    return lines


def _nothing_dropped(sw: StackWalk, view: RepoView, old_owned: set[str]) -> list[str]:
    """2. Nothing the repository applied before is applied by nothing after (with prune: true Flux deletes it)."""
    tree, after, before = sw.tree, sw.after, sw.before
    cut: dict[str, list[tuple[str, ObjectId, KsKey]]] = {}  # the export's own kustomization file -> what it cuts out
    dropped: dict[tuple[str, str], list[tuple[str, ObjectId, KsKey]]] = {}  # one cause (head, hint) -> its objects
    for oid, appliers in sorted(before.applied_by.items()):
        if oid in after.applied_by:
            continue
        origin = before.origins.get(oid, "")
        if origin in old_owned or any(posixpath.dirname(f) == origin for f in old_owned):
            continue  # the export's own object from an earlier export: pruning it is the export's job
        folder = posixpath.dirname(origin) if origin.endswith((".yaml", ".yml")) else origin
        own = view.kustomization_file(folder)  # the export's own listing in the folder itself leaves the file out
        kfile, entry = (own, None) if own in tree.files else deciding_file(view, after, folder)
        if kfile in tree.files and posixpath.dirname(kfile) in (tree.layout.entry_dir, tree.layout.components_dir):
            cut.setdefault(kfile, []).append((origin, oid, appliers[0]))
            continue
        if kfile in tree.files:
            cause = (f"{kfile}: the export writes this file and lists only its own files in it",
                     f"set gitops.entryDir to a folder of its own, such as "
                     f"{tree.layout.bootstrap_path.removeprefix('./')}/gpu-platform, so the export writes no "
                     "kustomization file where the repository's files are")
        elif kfile and entry:
            cause = (f"{kfile}: resources: lacks {entry!r}", f"add `- {entry}` to its resources")
        else:
            cause = (f"{folder}/: no Kustomization reaches this folder after this export",
                     f"make {folder}/ reachable from {tree.layout.bootstrap_path} again")
        dropped.setdefault(cause, []).append((origin, oid, appliers[0]))
    return [*(_cut_out_by_the_export(tree, kfile, found) for kfile, found in cut.items()),
            *(_dropped(head, hint, found) for (head, hint), found in dropped.items())]


def _dropped(head: str, hint: str, found: list[tuple[str, ObjectId, KsKey]]) -> str:
    """The repository's objects no Kustomization applies after the export, one line per cause (its head: the file
    to change first), the objects counted."""
    origin, oid, _ = found[0]
    appliers = listed(list(dict.fromkeys(show_key(a) for _, _, a in found)))
    objects = (f"{oid} (from {origin})" if len(found) == 1
               else f"the {len(found)} objects of {listed(list(dict.fromkeys(o for o, _, _ in found)))} (e.g. {oid} "
                    f"from {origin})")
    return (f"{head}, so {objects}, applied by {appliers} before this export, would be applied by no Kustomization "
            f"after it; with prune: true Flux would delete {'them' if len(found) != 1 else 'it'} from the cluster; "
            f"hint: {hint}")


def _cut_out_by_the_export(tree: Tree, kfile: str, found: list[tuple[str, ObjectId, KsKey]]) -> str:
    """The repository's objects the export's own kustomization file leaves out of a folder they were built from,
    one line at the stack key that put the export's folder there, the objects counted."""
    layout, folder = tree.layout, posixpath.dirname(kfile)
    key, value = ("entryDir", layout.entry_dir) if folder == layout.entry_dir else ("componentsDir", folder)
    origin, oid, applier = found[0]
    files = sorted({o for o, _, _ in found})
    objects = f"the {len(found)} objects" if len(found) != 1 else "the object"
    # A folder nothing else uses: beside the bootstrap's folders for the entry, inside the user's for the components
    own = f"{layout.bootstrap_path.removeprefix('./') if key == 'entryDir' else folder}/gpu-platform"
    hint = (f"set gitops.{key} to a folder of its own, such as {own}" if own != value else
            f"move {listed(files)} out of {folder}/, or set gitops.{key} to a folder of its own")
    return (f"Pulumi.{tree.stack}.yaml: gpu-platform:gitops.{key}: \"{value}\": the export's own {kfile} lists only "
            f"the export's files, so {objects} {show_key(applier)} applied from {listed(files)} before this export "
            f"(e.g. {oid} from {origin}) would be applied by no Kustomization after it; with prune: true Flux would "
            f"delete {'them' if len(found) != 1 else 'it'} from the cluster; hint: {hint}")
