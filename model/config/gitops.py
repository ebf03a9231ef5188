"""The stack's `gitops:` section: where the export writes inside the GitOps repository, in which layout, and
how its YAML is indented."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, StringConstraints, WithJsonSchema

from model.config.line_width import fits_export_line
from model.config.values import ObjectRef, Strict
from model.layout import LAYOUTS


def _exact_int(value: Any) -> Any:
    # Literal[0, 2] alone would take false as 0 and 2.0 as 2.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be the number 0 or 2; hint: write 0 or 2, unquoted")
    return value


def _relative_folder(path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("must be a folder relative to the repository root, without '.', '..' or '//'")
    return path


def _known_layout(name: str) -> str:
    # Checked against the layouts model/layout.py defines, so a new layout is one class there (and `make schema`).
    if name not in LAYOUTS:
        raise ValueError(f"no such layout; the layouts are {', '.join(LAYOUTS)}; hint: write one of them")
    return name


LayoutName = Annotated[str, AfterValidator(_known_layout),
                       WithJsonSchema({"enum": list(LAYOUTS), "type": "string"})]
RepoFolder = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]+$", max_length=200),
                       AfterValidator(_relative_folder)]
# A component's Kustomization is written with `path: ./<componentsDir>/<component>`, the component a DNS label.
ComponentsFolder = Annotated[RepoFolder, fits_export_line(prefix="./", suffix="/" + "c" * 63,
                                                          what=" as './<folder>/<63-character component>'")]


class GitopsConfig(Strict):
    """Where the export writes inside the GitOps repository, and how its YAML is formatted."""

    # The export's Flux entry point (Kustomizations, cluster-vars, its own kustomization.yaml). It must lie inside
    # the bootstrap path so the bootstrap Kustomization reaches it. Default clusters/<stack>/gpu-platform; with
    # layout: shared-base, the base folder every cluster's overlay includes (default clusters/base), whose
    # hand-written kustomization.yaml gets one entry per exported Kustomization.
    entryDir: RepoFolder | None = None
    # One folder per component below this one. Default components/<stack>; with layout: shared-base, the folder of
    # components authored once (default platform), where the export owns only its components' own folders.
    componentsDir: ComponentsFolder | None = None
    # 0 (default): list items unindented under their key, as kubectl and flux write them. 2: indented by two
    # spaces, as prettier and oxfmt write them; pick what the repository's formatter writes.
    sequenceIndent: Annotated[Literal[0, 2], BeforeValidator(_exact_int)] = 0
    # split (default): the entry holds every Kustomization, each component its own folder under componentsDir.
    # per-app: the shape of cluster-template's namespace folders: <entryDir>/<component>/ks.yaml beside
    # <entryDir>/<component>/app/, listed by <entryDir>/kustomization.yaml; componentsDir is then not used.
    # shared-base: one base for every cluster (R-ENV-02 of the repository the program was made for): every stack
    # naming the same entryDir exports together, its files written once; a value that differs between them becomes
    # a ${TOKEN} each overlay's cluster-vars sets; the entry's kustomization.yaml is the repository's, edited by one
    # line per Kustomization; the index, DELIVERY.md and POST-MERGE.md go to recordsDir.
    layout: LayoutName = "split"
    # The export's bookkeeping (per stack: export-index.json, DELIVERY.md, POST-MERGE.md), a folder Flux never
    # applies. Only with layout: shared-base (split and per-app keep it in the entry folder): default gpu-platform,
    # one subfolder per stack.
    recordsDir: RepoFolder | None = None
    # Objects the export may replace on purpose (`PersistentVolumeClaim plex/plex-config`): a change Kubernetes will
    # not make in place (a claim's storage class, a selector, a Service's clusterIP, …) is refused unless its object
    # is listed here; listed, the export writes it and DELIVERY.md warns the reviewer. Remove the entry after the
    # merge: the next export says when one no longer replaces anything. Default: none.
    acceptReplacement: list[ObjectRef] = []
