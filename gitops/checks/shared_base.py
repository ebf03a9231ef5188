"""Stacks that share one base (`gitops.layout: shared-base`) become one set of files (`merge`), or a refusal.

The repository this layout fits (R-ENV-02) authors every manifest once: `clusters/dev` and `clusters/prod` are
overlays of `clusters/base` that differ only in the values they patch into `cluster-vars`. How each file merges is
base_merge.py's; refused here: a key the base holds once set differently (componentsDir, sequenceIndent: one line at
the stack files, not one per file it makes differ), a component in one stack only, a GPU app on the device plugin in
one stack only, a different DRA route or stage. A refusal is led by what the user changes: the stack file and each
key of the stacks' config that differs and could shape the object (the component that declared it says which), then
the file and field it makes differ. Stacks not sharing a base that write one file (two naming one componentsDir) must
write it alike: `conflicts` refuses the rest, naming both stacks and the first field that differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.flux import FluxDeliveryGraph
from components.gpu_app import GpuApp
from components.intel_gpu_dra import IntelGpuResourceDriver
from components.intel_gpu_plugin import IntelGpuPlugin
from components.plex import NAME as PLEX
from gitops.checks.base_merge import (
    AS_WRITTEN,
    SHAPE_HINT,
    Refused,
    StackTreesMerger,
    dotted,
    first_difference,
    shown_value,
    value_at,
)
from gitops.flux.inventory import is_flux_kustomization
from gitops.index import content_hash
from gitops.tree import ExportedObject, Tree, render_files
from model.config import PROJECT
from model.flux_graph import KIND as FLUX_KIND
from model.layout import Layout
from model.outputs import ProgramOutputs


@dataclass
class SharedBase:
    """What the stacks of one base write: every stack's tree carries the merged files; `tokens[stack]` the values its
    overlay's cluster-vars must hold."""

    tokens: dict[str, dict[str, str]] = field(default_factory=dict)


def conflicts(trees: Sequence[Tree]) -> list[str]:
    """One line per pair of stacks of this run and folder they both write with different meaning (every layout),
    naming the later stack's file and key first: the stack file is what to change, the files are its consequence.
    Two stacks keeping their records in one folder are refused too (each index would overwrite the other). A file
    the stacks write with the same meaning (only its generated header names each stack) is written as the first
    stack, in name order, writes it, so every run writes the same bytes."""
    ordered = sorted(trees, key=lambda t: t.stack)
    problems, same_entry = _shared_records(ordered)
    first: dict[str, Tree] = {}
    differing: dict[tuple[str, str, str], list[str]] = {}  # (other stack, stack, folder key) -> the first difference
    for tree in ordered:
        objects = {o.path: o.manifest for o in tree.objects}
        for rel, content in sorted(tree.files.items()):
            if rel in tree.edited:
                continue
            other = first.setdefault(rel, tree)
            if other is tree or other.files[rel] == content:
                continue
            theirs = {o.path: o.manifest for o in other.objects}.get(rel)
            mine = objects.get(rel)
            if content_hash(rel, other.files[rel]) == content_hash(rel, content) or (
                    theirs is not None and theirs == mine):
                tree.files[rel] = other.files[rel]
                continue
            if theirs is None or mine is None:
                shown = rel
            else:
                where = first_difference(theirs, mine)
                shown = (f"{rel}: {dotted(where)}: {other.stack} has {shown_value(value_at(theirs, where))}, "
                         f"{tree.stack} {shown_value(value_at(mine, where))}")
            differing.setdefault((other.stack, tree.stack, tree.layout.config_key_of(rel)), []).append(shown)
    by_name = {t.stack: t for t in ordered}
    for (other, stack, key), shown in differing.items():
        if key == "entryDir" and (other, stack) in same_entry:
            continue  # one cause, one line: the shared entry folder is refused already
        if _names_stack(by_name[stack], key) and not _names_stack(by_name[other], key):
            other, stack = stack, other  # the stack that named the other's folder is the one to change
        folder = _folder(by_name[stack], key)
        count = f"{len(shown)} files there differ" if len(shown) > 1 else "a file there differs"
        problems.append(f"Pulumi.{stack}.yaml: gpu-platform:gitops.{key}: {json.dumps(folder)}: {other} writes "
                        f"there too (Pulumi.{other}.yaml), and {count} between the two stacks (first: {shown[0]}); "
                        f"one stack would overwrite the other; hint: {_APART}")
    return problems


def note_together(trees: Sequence[Tree]) -> None:
    """Each tree's `together`: the other stacks of the run whose folders meet its own, and the folder (the export runs
    them together, gitops/engine/stacks.py stacks_together; DELIVERY.md says so)."""
    for tree in trees:
        tree.together = {other.stack: folder for other in sorted(trees, key=lambda t: t.stack)
                         if other is not tree and (folder := tree.layout.folder_shared_with(other.layout)) is not None}


def _names_stack(tree: Tree, key: str) -> bool:
    """The folder names the stack (components/prod for prod, the default): then it is that stack's own."""
    return tree.stack in _folder(tree, key).split("/")


def _folder(tree: Tree, key: str) -> str:
    return tree.layout.components_dir if key == "componentsDir" else tree.layout.entry_dir


def _shared_records(trees: Sequence[Tree]) -> tuple[list[str], set[tuple[str, str]]]:
    """Stacks whose index, DELIVERY.md and POST-MERGE.md land in one folder: the later would overwrite the earlier's
    on every run, and `--check` after any export would report drift. A shared base keeps one records folder per
    stack, so only the split and per-app layouts can meet here (their records are in the entry folder). Returns the
    lines and the pairs of stacks (in name order)."""
    problems: list[str] = []
    pairs: set[tuple[str, str]] = set()
    seen: dict[str, Tree] = {}
    for tree in trees:
        other = seen.setdefault(tree.layout.records, tree)
        if other is not tree:
            pairs.add((other.stack, tree.stack))
            problems.append(f"Pulumi.{tree.stack}.yaml: gpu-platform:gitops.entryDir: "
                            f"{json.dumps(tree.layout.entry_dir)}: {other.stack}'s entry folder too "
                            f"(Pulumi.{other.stack}.yaml), where each stack keeps its own export-index.json, "
                            f"DELIVERY.md and POST-MERGE.md; one stack's records would overwrite the other's; hint: "
                            "give each stack its own gitops.entryDir, or use layout: shared-base, whose records are "
                            "kept per stack")
    return problems, pairs


_APART = ("give each stack a folder of its own (gitops.entryDir, gitops.componentsDir), or make the values equal, or "
          "use layout: shared-base for one base every cluster's overlay includes")


def merge(group: Sequence[tuple[Tree, ProgramOutputs]]) -> tuple[SharedBase, list[str]]:
    """The one set of files of a shared base's stacks; their trees are re-rendered with it. Returns the tokens and the
    refusals (empty: merged)."""
    trees = [t for t, _ in group]
    stacks = [t.stack for t in trees]
    entry_dir = trees[0].layout.entry_dir
    problems = _disagreements(trees, entry_dir)
    if problems:  # every file of the base would be named otherwise, twice
        return SharedBase(), problems
    problems = _route_problems(group, entry_dir)
    if problems:  # every file of the driver would be named otherwise
        return SharedBase(), problems
    problems = _switch_problems(group)
    paths = {t.stack: {o.path for o in t.objects} for t in trees}
    every = sorted(set().union(*paths.values()))
    problems += _one_sided(trees, every, paths, entry_dir)
    if problems:
        return SharedBase(), problems
    m = StackTreesMerger(stacks)
    merged: dict[str, Any] = {}
    for rel in every:
        manifests = {t.stack: next(o.manifest for o in t.objects if o.path == rel) for t in trees}
        first = next(iter(manifests.values()))
        is_ks = is_flux_kustomization(first) and first.get("kind") == FLUX_KIND
        merged[rel] = m.flux_kustomization(rel, manifests) if is_ks else m.component(rel, manifests)
    if m.problems:
        return SharedBase(), _explained(m, trees)
    for tree in trees:
        for obj in tree.objects:
            obj.manifest = merged[obj.path]
        render_files(tree)
    return SharedBase(m.tokens), []


def _one_sided(trees: Sequence[Tree], every: list[str], paths: dict[str, set[str]], entry_dir: str) -> list[str]:
    """Files some stacks of the base write and others not: one line per cause (the differing config that declares
    the component, when one explains it) and pair of stack sets, its first file named and the rest counted."""
    configs = {t.stack: _stack_config(t) for t in sorted(trees, key=lambda t: t.stack)}
    stacks = [t.stack for t in trees]
    groups: dict[tuple[tuple[ConfigPath, ...], tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for rel in every:
        missing = tuple(s for s in stacks if rel not in paths[s])
        if not missing:
            continue
        has = tuple(s for s in stacks if s not in missing)
        obj = next(o for t in trees if t.stack == has[0] for o in t.objects if o.path == rel)
        groups.setdefault((tuple(_cause(obj, configs)), has, missing), []).append(rel)
    lines = []
    for (keys, has, missing), rels in groups.items():
        files = rels[0] + (f" and {len(rels) - 1} more file{'s' if len(rels) > 2 else ''}" if len(rels) > 1 else "")
        written = (f"written for {', '.join(has)} but not for {', '.join(missing)}, which share the base {entry_dir}; "
                   "the base holds one set of components for every cluster; hint: give every stack of the base the "
                   "same components")
        lines.append(f"{_cause_text(keys, configs)}: so {files} {'is' if len(rels) == 1 else 'are'} {written}"
                     if keys else f"{files}: {written}")
    return lines


# The keys every stack of one base must set alike, and what the base holds once because of it: a difference is one
# line at the stack file, never the files it would make differ (each of them, for each stack).
_AGREED: tuple[tuple[str, str, Callable[[Layout], object]], ...] = (
    ("componentsDir", "one set of components, so one folder for them", lambda layout: layout.components_dir),
    ("sequenceIndent", "one set of files, so one style for them", lambda layout: layout.sequence_indent),
)


def _disagreements(trees: Sequence[Tree], entry_dir: str) -> list[str]:
    """One line per key of _AGREED the stacks of the base set differently, naming the stack file that stands out:
    the one whose value fewest stacks share, one that sets the key before one that leaves it to its default, the
    later by name before the earlier."""
    problems = []
    ordered = sorted(trees, key=lambda t: t.stack)
    for key, shared, value_of in _AGREED:
        values = {t.stack: value_of(t.layout) for t in ordered}
        if len(set(map(json.dumps, values.values()))) == 1:
            continue
        written = {t.stack: key in (_stack_config(t).get("gitops") or {}) for t in ordered}
        stack = min(reversed(values), key=lambda s: (list(values.values()).count(values[s]), not written[s]))
        others = " and ".join(f"Pulumi.{other}.yaml's {json.dumps(value)}{'' if written[other] else ' (the default)'}"
                              for other, value in values.items() if value != values[stack])
        problems.append(f"Pulumi.{stack}.yaml: {PROJECT}:gitops.{key}: {json.dumps(values[stack])} differs from "
                        f"{others}; the stacks sharing the base {entry_dir} write {shared}; hint: set the same "
                        f"gitops.{key} in every stack file of the base")
    return problems


def _route_problems(group: Sequence[tuple[Tree, ProgramOutputs]], entry_dir: str) -> list[str]:
    """The DRA driver (the export's, or the repository's the stack adopts) in one stack of the base and not in
    another: its Kustomization in the base applies to every overlay, so the base holds one route."""
    dra = [t.stack for t, o in group if o.flux_graph.driver is not None or o.flux_graph.adopted_driver is not None]
    others = [t.stack for t, _ in group if t.stack not in dra]
    if dra and others:
        return [f"Pulumi.{dra[0]}.yaml: gpu-platform:gpu.route: \"dra\", while {', '.join(others)} "
                f"{'says' if len(others) == 1 else 'say'} device-plugin: the stacks of the base {entry_dir} share one "
                "set of components, and so one route; hint: set the same gpu.route in every stack of the base"]
    stages = {t.stack: o.dra_migration.stage for t, o in group if o.dra_migration is not None}
    first = next(iter(stages.values()), None)
    ahead = [s for s, stage in stages.items() if stage != first]
    if not ahead:
        return []
    return [f"Pulumi.{ahead[0]}.yaml: gpu-platform:gpu.dra.stage: \"{stages[ahead[0]]}\", while "
            f"{next(iter(stages))} says \"{first}\": the stacks of the base {entry_dir} share one set of components, "
            "so the move to DRA takes each step for all of them at once; hint: set the same gpu.dra.stage in every "
            "stack of the base, with each stack's evidence"]


def _switch_problems(group: Sequence[tuple[Tree, ProgramOutputs]]) -> list[str]:
    """A GPU app on the device plugin in one stack of the base and not in another: the base's file can say one."""
    problems = []
    # An app the repository delivers is not in the base's files: the gate holds the repository's own copy instead.
    apps = sorted({name for _, outputs in group for name, app in outputs.gpu_apps.items()
                   if not app.by_repository})
    for name in apps:
        access = {t.stack: o.gpu_apps[name].access for t, o in sorted(group, key=lambda g: g[0].stack)
                  if name in o.gpu_apps}
        if len(set(access.values())) > 1:
            each = ", ".join(f"{s}: {a}" for s, a in access.items())
            lacking = [s for s, a in access.items() if a != "device-plugin"]
            # the evidence of the stack behind leads: recording it is the fix the hint names first
            problems.append(f"evidence/{lacking[0]}.yaml: {name}: GPU access differs between the stacks of the "
                            f"shared base ({each}); the base "
                            f"holds one {name} for every cluster, so the switch to the device plugin needs evidence "
                            f"for every stack that shares it; hint: record it for {', '.join(lacking)} "
                            f"(make verify-nodes STACK={lacking[0]} NODES=nodes.json WRITE_EVIDENCE=1), or pin "
                            "intelGpuAccess: host-path in the others until then")
    return problems


# --- what in the stack files causes a refusal of merge -------------------------------------------------------------

ConfigPath = tuple[str | int, ...]  # a key of the project's config: its section, then keys and list indices
_UNSET: Any = object()  # a key the stack file leaves out: its default applies
# Each overlay's own (its bootstrap folder, its cluster-vars): keys that differ between the stacks of every base and
# shape none of its files.
_PER_OVERLAY: tuple[ConfigPath, ...] = (("flux", "bootstrapPath"), ("flux", "clusterVars"))


def _explained(m: StackTreesMerger, trees: Sequence[Tree]) -> list[str]:
    """The merge's refusals led by what the user changes: the stack file and each key of the stacks' config that
    differs and could shape the object (one line per cause, then the files and fields it makes differ). A refusal
    no such key explains keeps naming the file and field first."""
    configs = {t.stack: _stack_config(t) for t in sorted(trees, key=lambda t: t.stack)}
    objects = {o.path: o for o in trees[0].objects}
    entry_dir = trees[0].layout.entry_dir
    lines: list[str | tuple[ConfigPath, ...]] = []
    shapes: dict[tuple[ConfigPath, ...], list[Refused]] = {}
    for refused, line in zip(m.refused, m.problems, strict=True):
        keys = tuple(_cause(objects[refused.rel], configs))
        if not keys:
            lines.append(line)
        elif not refused.shape:
            lines.append(f"{_cause_text(keys, configs)}: so {refused.rel} differs at {refused.where} "
                         f"({refused.detail}) between the stacks of the shared base {entry_dir}; {AS_WRITTEN}")
        else:
            if keys not in shapes:
                lines.append(keys)
            shapes.setdefault(keys, []).append(refused)
    return [line if isinstance(line, str) else _shape_line(line, shapes[line], configs, entry_dir)
            for line in lines]


def _shape_line(keys: tuple[ConfigPath, ...], refused: list[Refused], configs: dict[str, dict[str, Any]],
                entry_dir: str) -> str:
    """The cause, then each file it makes differ in shape with its fields, in the order merge met them."""
    fields: dict[str, list[str]] = {}
    for r in refused:
        fields.setdefault(r.rel, []).append(f"{r.where} ({r.detail})")
    where = ", and ".join(f"{rel}{' differs in shape' if i == 0 else ''} at {' and at '.join(at)}"
                          for i, (rel, at) in enumerate(fields.items()))
    return f"{_cause_text(keys, configs)}: so {where} between the stacks of the shared base {entry_dir}; {SHAPE_HINT}"


def _stack_config(tree: Tree) -> dict[str, Any]:
    """The project's keys of the stack's config as the program read them (`gpu-platform:<section>` of
    Pulumi.<stack>.yaml), each value decoded: the engine passes a structured value as JSON text."""
    config: dict[str, Any] = {}
    for key, text in tree.config.items():
        namespace, _, name = key.partition(":")
        if namespace == PROJECT:
            try:
                config[name] = json.loads(text)
            except ValueError:
                config[name] = text
    return config


def _differing(values: dict[str, Any], path: ConfigPath = ()) -> list[ConfigPath]:
    """Where the stacks' config differs: a mapping key by key (a mapping a stack leaves out sets none of its keys), a
    list of mappings of one length item by item, anything else as one key."""
    every = list(values.values())
    if all(v == every[0] for v in every):
        return []
    if all(isinstance(v, dict) or v is _UNSET for v in every):
        keys = sorted(set().union(*(v for v in every if isinstance(v, dict))), key=str)
        return [p for k in keys for p in _differing(
            {s: v.get(k, _UNSET) if isinstance(v, dict) else _UNSET for s, v in values.items()}, (*path, k))]
    if (all(isinstance(v, list) for v in every) and len({len(v) for v in every}) == 1
            and any(isinstance(item, dict) for v in every for item in v)):
        return [p for i in range(len(every[0])) for p in _differing({s: v[i] for s, v in values.items()}, (*path, i))]
    return [path]


def _shaped_by(obj: ExportedObject, configs: dict[str, dict[str, Any]]) -> list[ConfigPath]:
    """The config that could shape an object, by the component that declared it: the plugin's section, the DRA
    driver's, a GPU app's own entry with the app policy and the DRA settings, and for a Flux Kustomization the flux
    section with the delivery of the component it applies."""
    if obj.component_type == IntelGpuPlugin.TYPE:
        return [("intelGpuPlugin",)]
    if obj.component_type == IntelGpuResourceDriver.TYPE:
        return [("gpu", "dra")]
    if obj.component_type == GpuApp.TYPE:
        return [*_app_entries(obj.component_name, configs), ("appPolicy",), ("gpu", "dra")]
    if obj.component_type == FluxDeliveryGraph.TYPE:
        return [("flux",), *((*entry, "delivery") for entry in _app_entries(obj.name, configs))]
    return []


def _app_entries(name: str, configs: dict[str, dict[str, Any]]) -> list[ConfigPath]:
    """Where a GPU app is configured: `plex`, or the `apps` items of that name (at one index or another per stack)."""
    if name == PLEX:
        return [("plex",)]
    return [("apps", i) for i in sorted({i for config in configs.values()
                                         for i, app in enumerate(config.get("apps") or [])
                                         if isinstance(app, dict) and app.get("name") == name})]


def _cause(obj: ExportedObject, configs: dict[str, dict[str, Any]]) -> list[ConfigPath]:
    """The keys of the stacks' config that differ and could shape the object (a key listed whole where one stack's
    list is longer matches the items below it)."""
    shaping = _shaped_by(obj, configs)
    return [key for key in _differing(configs)
            if any(key[:len(s)] == s or s[:len(key)] == key for s in shaping)
            and not any(key[:len(o)] == o for o in _PER_OVERLAY)]


def _lookup(config: Any, key: ConfigPath) -> Any:
    for part in key:
        if isinstance(part, int):
            config = config[part] if isinstance(config, list) and part < len(config) else _UNSET
        else:
            config = config.get(part, _UNSET) if isinstance(config, dict) else _UNSET
    return config


def _setting(value: Any) -> str:
    return "(not set)" if value is _UNSET else "null" if value is None else shown_value(value)


def _cause_text(keys: tuple[ConfigPath, ...], configs: dict[str, dict[str, Any]]) -> str:
    """`Pulumi.<stack>.yaml: gpu-platform:<key>: <value>, while <others> say <theirs>` for each key. The stack named
    is the first (in name order) that sets a key another leaves unset, else the last whose value differs from the
    first's: the later stack, as `conflicts` names it."""
    stacks = list(configs)
    values = {s: [_lookup(configs[s], key) for key in keys] for s in stacks}
    stack = next((s for s in stacks if any(v is not _UNSET and any(values[o][i] is _UNSET for o in stacks)
                                           for i, v in enumerate(values[s]))),
                 None) or next(s for s in reversed(stacks) if values[s][0] != values[stacks[0]][0])
    parts = []
    for i, key in enumerate(keys):
        others: dict[str, list[str]] = {}
        for other in stacks:
            if other != stack:
                others.setdefault(_setting(values[other][i]), []).append(other)
        said = " and ".join(f"{', '.join(names)} {'says' if len(names) == 1 else 'say'} {value}"
                            for value, names in others.items())
        parts.append(f"{PROJECT}:{dotted(key)}: {_setting(values[stack][i])}, while {said}")
    return f"Pulumi.{stack}.yaml: " + "; ".join(parts)
