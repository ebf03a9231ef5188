"""Turn what the mock engine captured into the GitOps tree: one YAML file per object, a kustomization.yaml per
folder, the cluster's Flux entry point. The reports and the index are the run's last step (gitops/reports/,
gitops/index.py).

Key order (documented in README "Exported tree"): apiVersion, kind, metadata, then the remaining top-level keys
sorted; every nested mapping sorted by key (as `flux export` and `kubectl get -o yaml` do); list order kept.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.flux import FluxDeliveryGraph
from components.gpu_app import GpuApp
from components.intel_gpu_dra import IntelGpuResourceDriver
from components.intel_gpu_plugin import IntelGpuPlugin
from gitops.engine.program import Capture, Registration
from gitops.engine.stacks import generated_line
from gitops.flux.inventory import ObjectId, is_flux_kustomization
from gitops.headers import shared_generated_line
from gitops.index import index_path
from model import flux_graph as flux_mod
from model.config import EXPORT_LINE_MAX
from model.errors import RefusalError
from model.layout import Layout

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the C emitter when PyYAML was built with libyaml
_OVERSHOOT = 44


class _IndentedSequenceDumper(yaml.SafeDumper):
    """List items indented under their key, as prettier and oxfmt write them (gitops.sequenceIndent: 2). The pure
    Python emitter: libyaml has no switch for it, and only repositories that ask pay for it."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)

class Token(str):
    """`${NAME}` in an exported file, in place of a value that differs between the stacks of a shared base
    (gitops/checks/shared_base.py). `quoted`: written in double quotes, so what Flux substitutes stays a string."""

    quoted: bool

    def __new__(cls, name: str, quoted: bool = False) -> Token:
        token = super().__new__(cls, f"${{{name}}}")
        token.quoted = quoted
        return token

    @property
    def name(self) -> str:
        return self[2:-1]


def _represent_token(dumper: yaml.SafeDumper, token: Token) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(token), style='"' if token.quoted else None)


class Folded(str):
    """A long value with no space (an image pinned by digest) on a line of its own (`>-`), so a repository whose
    yamllint allows long unbreakable words (the default) accepts it however long its line length."""


def _represent_folded(dumper: yaml.SafeDumper, value: Folded) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style=">")


for _dumper in {_DUMPER, _IndentedSequenceDumper}:
    _dumper.add_representer(Token, _represent_token)
    _dumper.add_representer(Folded, _represent_folded)


def _folded(value: Any, limit: int, key: str = "", depth: int = 0) -> Any:
    """`value` with every string that could not fit `key: value` on a `limit`-character line Folded (indentation
    counted at its worst, four columns per level)."""
    if isinstance(value, dict):
        return {k: _folded(v, limit, str(k), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_folded(v, limit, key, depth + 1) for v in value]
    if isinstance(value, str) and not isinstance(value, Token) and not any(c.isspace() for c in value) \
            and 4 * depth + len(key) + 2 + len(value) > limit:
        return Folded(value)
    return value

KUSTOMIZE_FILE = "kustomization.yaml"

# yaml-language-server schema hints (editor aids only; validation uses the vendored schemas).
_K8S_SCHEMA = "https://raw.githubusercontent.com/yannh/kubernetes-json-schema/master/master-standalone-strict/{}.json"
_FLUX_KS_SCHEMA = "https://raw.githubusercontent.com/fluxcd-community/flux2-schemas/main/kustomization-kustomize-v1.json"
_KUSTOMIZE_SCHEMA = "https://json.schemastore.org/kustomization"

# Files are named `<short kind>.<metadata.name>.yaml`; Flux Kustomizations use Flux's short name `ks` so they are
# never confused with kustomize's own kustomization.yaml.
_SHORT_KIND = {"Kustomization": "ks"}


@dataclass(frozen=True)
class Placement:
    """Where a top-level component's objects go. Which Flux Kustomization applies the folder is not declared
    here: the export's walk of the repository finds it (gitops/flux/walk.py)."""

    component: type  # the ComponentResource class: its TYPE keys the placement
    directory: Callable[[Layout, str], str]  # (layout, component name) -> folder


PLACEMENTS: dict[str, Placement] = {p.component.TYPE: p for p in (
    Placement(FluxDeliveryGraph, lambda layout, _: layout.entry_dir),
    Placement(IntelGpuPlugin, lambda layout, _: layout.component_dir(flux_mod.PLUGIN_KUSTOMIZATION)),
    Placement(IntelGpuResourceDriver, lambda layout, _: layout.component_dir(flux_mod.DRIVER_KUSTOMIZATION)),
    Placement(GpuApp, lambda layout, name: layout.component_dir(name)),
)}


class PlacementError(RefusalError):
    """An object the tree has no place for, or two objects for one file."""

    def __init__(self, message: str) -> None:
        super().__init__([message])


@dataclass(frozen=True)
class HeaderStyle:
    """How the exported files' comment header and lists are written, from the repository's own yamllint
    configuration when it has one (gitops/repo/lintconfig.py): a line above `line_length` is wrapped (the generated
    line) or left out (the schema modeline, which cannot be wrapped)."""

    line_length: int | None = None
    sequence_indent: int | None = None  # None: the stack's gitops.sequenceIndent


@dataclass
class ExportedObject:
    path: str  # relative to OUT
    manifest: dict[str, Any]
    registration: Registration
    component_type: str
    component_name: str

    @property
    def name(self) -> str:
        return str((self.manifest.get("metadata") or {}).get("name", self.registration.name))

    @property
    def id(self) -> ObjectId:
        return ObjectId.of(self.manifest)


@dataclass
class Tree:
    stack: str
    layout: Layout
    files: dict[str, bytes] = field(default_factory=dict)
    objects: list[ExportedObject] = field(default_factory=list)
    external_paths: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # the folders the export writes, each with kustomization.yaml
    # Lines the export keeps in hand-written files (a shared base's kustomization.yaml, an overlay's cluster-vars):
    # {file: {"resources": [entry, …]} | {"data": {key: value}}}. The pipeline turns them into `files` (the file as
    # it is in OUT with these lines in place, `edited`), the index records them apart from the files it owns.
    edits: dict[str, dict[str, Any]] = field(default_factory=dict)
    edited: set[str] = field(default_factory=set)
    # The objects of an app the repository delivers (its deliveredBy: repository): declared and checked, never
    # written; the reference its repository's objects are compared with.
    references: list[ExportedObject] = field(default_factory=list)
    style: HeaderStyle | None = None
    config: dict[str, str] = field(default_factory=dict)  # the stack's config as the program read it (Capture.config)
    # The other stacks of the run writing into a folder this one writes (a shared base), and that folder: DELIVERY.md
    # says once that they are exported together, and why.
    together: dict[str, str] = field(default_factory=dict)

    @property
    def index_path(self) -> str:
        return index_path(self.layout)

    def reference_deployment(self, app: str) -> dict[str, Any] | None:
        """The program's Deployment of an app the repository delivers: what the gate holds the repository's to."""
        return next((o.manifest for o in self.references if o.component_name == app
                     and o.manifest.get("kind") == "Deployment"), None)


def sort_keys(value: Any, top: bool = False) -> Any:
    if isinstance(value, dict):
        if top:
            head = [k for k in ("apiVersion", "kind", "metadata") if k in value]
            rest = sorted(k for k in value if k not in head)
            return {k: sort_keys(value[k]) for k in head + rest}
        return {k: sort_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(v) for v in value]
    return value


def dump_yaml(doc: Any, header: list[str], sequence_indent: int = 0, width: int = 4096) -> bytes:
    # PyYAML's libyaml emitter: ~8x faster than a pure-Python one on this tree. Keys arrive pre-sorted
    # (sort_keys); sequences come out kubectl-style, unindented under their key, in every file alike
    # (yamllint indent-sequences: consistent), unless the repository's formatter indents them.
    # width: a text with spaces longer than the line (a CEL message) is broken at its spaces, the emitter's own
    # folding; one without (an image digest) is never broken, but put on a line of its own (Folded).
    dumper = _IndentedSequenceDumper if sequence_indent else _DUMPER
    body = yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=width, allow_unicode=True)
    return ("---\n" + "".join(f"{line}\n" for line in header) + body).encode()


def _header(stack: str, schema: str | None, style: HeaderStyle | None = None, shared: str = "") -> list[str]:
    """The comment lines under `---`. `shared`: the base folder whose stacks all write this file, which then names no
    single stack."""
    lines = [f"# yaml-language-server: $schema={schema}"] if schema else []
    lines.append(shared_generated_line(shared) if shared else generated_line(stack))
    limit = style.line_length if style else None
    if limit is None:  # the export's own lint (.yamllint.yaml): a shared base's line names a folder of any length
        kept = [line for line in lines[:-1] if len(line) <= EXPORT_LINE_MAX]  # a modeline too long is left out
        return [*kept, *_wrapped_comment(lines[-1], EXPORT_LINE_MAX)] if shared else [*kept, lines[-1]]
    out: list[str] = []
    for line in lines:
        if len(line) <= limit:
            out.append(line)
        elif not line.startswith("# yaml-language-server:"):
            out += _wrapped_comment(line, limit)
        # the modeline is one unbreakable word: too long for the repository's line length, it is left out
    return out


def file_header(tree: Tree, schema: str | None) -> list[str]:
    """The header of a file of the stack's own (never one a shared base's stacks share), in the tree's style."""
    return _header(tree.stack, schema, tree.style)


def dump_documents(docs: list[Any], header: list[str], tree: Tree) -> bytes:
    """Several documents in one file, the header above the first, keys sorted and lines folded as every exported
    object's are."""
    style, layout = tree.style, tree.layout
    indent = style.sequence_indent if style and style.sequence_indent is not None else layout.sequence_indent
    parts = []
    for i, doc in enumerate(docs):
        doc = sort_keys(doc, top=True)
        doc = _folded(doc, style.line_length) if style and style.line_length else doc
        parts.append(dump_yaml(doc, header if i == 0 else [], indent))
    return b"".join(parts)


def _wrapped_comment(line: str, limit: int) -> list[str]:
    words, out, current = line.removeprefix("# ").split(" "), [], "#"
    for word in words:
        if current != "#" and len(current) + 1 + len(word) > limit:
            out.append(current)
            current = "#"
        current += " " + word
    return [*out, current]


def _schema_for(manifest: dict[str, Any]) -> str:
    api, kind = manifest["apiVersion"], manifest["kind"]
    if api == flux_mod.API_VERSION and kind == flux_mod.KIND:
        return _FLUX_KS_SCHEMA
    group, _, version = api.rpartition("/")  # core kinds have no group: namespace-v1.json
    return _K8S_SCHEMA.format("-".join(filter(None, (kind.lower(), group.split(".")[0], version))))


def _top_component(reg: Registration, by_urn: dict[str, Registration]) -> Registration:
    current = reg
    while current.parent in by_urn:
        current = by_urn[current.parent]
    return current


def collect_objects(capture: Capture, layout: Layout) -> list[ExportedObject]:
    by_urn = capture.by_urn()
    objects: list[ExportedObject] = []
    for reg in capture.registrations:
        if not reg.custom or not reg.type.startswith("kubernetes:"):
            continue
        top = _top_component(reg, by_urn)
        placement = PLACEMENTS.get(top.type)
        if placement is None:
            raise PlacementError(f"{reg.type} {reg.name}: its component {top.type} has no export folder in "
                                 "gitops/tree.py")
        manifest = sort_keys(reg.inputs, top=True)
        kind = manifest.get("kind", "")
        name = manifest.get("metadata", {}).get("name", reg.name)
        short = _SHORT_KIND.get(kind, kind.lower())
        path = f"{placement.directory(layout, top.name)}/{short}.{name}.yaml"
        spec_path = str((manifest.get("spec") or {}).get("path", "")) if kind == flux_mod.KIND else ""
        if kind == flux_mod.KIND and top.type == FluxDeliveryGraph.TYPE:
            path = layout.kustomization_file(name, spec_path)
        objects.append(ExportedObject(path, manifest, reg, top.type, top.name))
    objects.sort(key=lambda o: o.path)
    seen: dict[str, ExportedObject] = {}
    for obj in objects:
        if obj.path in seen:
            raise PlacementError(f"{obj.path}: both {seen[obj.path].id} and {obj.id} would be written here")
        seen[obj.path] = obj
    return objects


def build_tree(capture: Capture, layout: Layout, reference_apps: frozenset[str] = frozenset(),
               style: HeaderStyle | None = None) -> Tree:
    """The exported YAML: one file per object and a kustomization.yaml per folder. What depends on Flux's walk of the
    repository (DELIVERY.md, POST-MERGE.md, the suite) and the index are added after the walk (gitops/pipeline.py
    `finish`). `reference_apps`: apps the repository delivers, whose objects become `references`, never files."""
    stack = capture.stack
    tree = Tree(stack=stack, layout=layout, style=style, config=dict(capture.config))
    every = collect_objects(capture, layout)
    tree.objects = [o for o in every if not _is_reference(o, reference_apps)]
    tree.references = [o for o in every if _is_reference(o, reference_apps)]
    tree.notices = [message for level, message in capture.logs if level in ("warning", "error")]
    render_files(tree)
    return tree


def _is_reference(obj: ExportedObject, reference_apps: frozenset[str]) -> bool:
    return obj.component_type == GpuApp.TYPE and obj.component_name in reference_apps


def render_files(tree: Tree) -> None:
    """Every object's file and each folder's kustomization.yaml, in the tree's style. A shared base's entry folder
    keeps the repository's own kustomization.yaml: the export asks for one line per file there (`edits`)."""
    layout, stack, style = tree.layout, tree.stack, tree.style
    indent = style.sequence_indent if style and style.sequence_indent is not None else layout.sequence_indent
    shared = layout.repository_entry
    tree.files = {}
    folders: dict[str, list[ExportedObject]] = {}
    for obj in tree.objects:
        limit = style.line_length if style and style.line_length else EXPORT_LINE_MAX
        # The emitter breaks a long text at the first space past its width, so the width leaves room for the
        # longest run between spaces the program writes (a quoted name in the DRA driver's CEL, 43 characters)
        tree.files[obj.path] = dump_yaml(_folded(obj.manifest, limit), _header(
            stack, _schema_for(obj.manifest), style, shared), indent, max(limit - _OVERSHOOT, 40))
        folders.setdefault(layout.listed_in(obj.path), []).append(obj)
    for folder, objs in sorted(folders.items()):
        names = sorted(posixpath.relpath(o.path, folder) for o in objs)
        if shared and folder == shared:
            tree.edits[f"{folder}/{KUSTOMIZE_FILE}"] = {"resources": names}
            continue
        tree.files[f"{folder}/{KUSTOMIZE_FILE}"] = dump_yaml(
            {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": names},
            _header(stack, _KUSTOMIZE_SCHEMA, style, shared), indent)
    tree.folders = sorted(folders)
    # A Kustomization is owned when its path is a folder this export writes; the rest point at hand-written paths.
    tree.external_paths = {}
    for o in tree.objects:  # tolerant of broken objects: validation reports them, the tree must still build
        if is_flux_kustomization(o.manifest):
            path = str(_spec(o).get("path", ""))
            if path.removeprefix("./") not in folders:
                tree.external_paths[o.name] = path


def _spec(obj: ExportedObject) -> dict[str, Any]:
    return obj.manifest.get("spec") or {}
