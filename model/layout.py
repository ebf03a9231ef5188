"""Where each exported object lives in the GitOps repository: one class per `gitops.layout`, each answering everything
its layout decides (folders, file names, what the export owns, its config rules). The Flux graph (spec.path) and the
export (file location) both read it, so a Kustomization can never point at a folder the export did not write.

Supporting a new layout is one class here, its entry in `LAYOUTS`, and `make schema`; the shapes of the three are in
docs/exported-tree.md ("Layouts").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

# The name of the export's entry folder and of its objects' Pulumi project.
ENTRY_NAME = "gpu-platform"
# The export's work folder at the root of OUT (staging, journal, the walk's scratch copies); never part of the
# repository Flux sees.
WORK_DIR = ".gitops-export"


def flux_path(directory: str) -> str:
    """Flux's `spec.path` is relative to the repository root and must start with `./`."""
    return f"./{directory}"


def repo_dir(path: str) -> str:
    """A Flux path as a repository folder: `./a/b` -> `a/b`, `./` -> ``."""
    return path.removeprefix("./").strip("/") if path not in (".", "./") else ""


def is_within(path: str, folder: str) -> bool:
    """`path` is `folder` or lies below it (both repository-relative, no `./`)."""
    return folder == "" or path == folder or path.startswith(folder + "/")


def _overlap(layout: Layout) -> list[str]:
    if is_within(layout.entry_dir, layout.components_dir) or is_within(layout.components_dir, layout.entry_dir):
        return [f"gitops.entryDir: {json.dumps(layout.entry_dir)}: overlaps componentsDir "
                f"{layout.components_dir!r}; hint: use two separate folders"]
    return []


@dataclass(frozen=True)
class Layout:
    """What every layout answers. The defaults are the split layout's: subclasses override what differs."""

    name: ClassVar[str]
    stack: str
    entry_dir: str
    components_dir: str
    bootstrap_path: str  # a Flux path, ./…
    sequence_indent: int = 0
    records_dir: str = ""  # the bookkeeping folder; "" = the entry folder

    @staticmethod
    def of(stack: str, gitops: Any, flux: Any) -> Layout:
        """The stack's layout, from its `gitops` and `flux` config (model/config); None means the default."""
        return LAYOUTS[gitops.layout].from_config(stack, gitops, flux)

    @classmethod
    def from_config(cls, stack: str, gitops: Any, flux: Any) -> Layout:
        return cls(stack=stack, entry_dir=gitops.entryDir or f"clusters/{stack}/{ENTRY_NAME}",
                   components_dir=gitops.componentsDir or f"components/{stack}",
                   bootstrap_path=flux.bootstrapPath or flux_path(f"clusters/{stack}"),
                   sequence_indent=gitops.sequenceIndent)

    def config_problems(self, gitops: Any, flux: Any) -> list[str]:
        """The layout's own refusals of the stack's `gitops` and `flux` keys, `<key>: <value>: <problem>; hint:`."""
        if gitops.recordsDir is not None:
            return [f"gitops.recordsDir: {json.dumps(gitops.recordsDir)}: only used with layout: shared-base; the "
                    "split and per-app layouts keep their records in the entry folder; hint: remove recordsDir"]
        return _overlap(self)

    @property
    def records(self) -> str:
        """The folder of the stack's index, DELIVERY.md and POST-MERGE.md."""
        return self.records_dir or self.entry_dir

    @property
    def overlay(self) -> str:
        """The stack's bootstrap folder, as a repository folder."""
        return repo_dir(self.bootstrap_path)

    def component_dir(self, component: str) -> str:
        """One folder per component and stack: dev and prod never write different content to one file."""
        return f"{self.components_dir}/{component}"

    def kustomization_file(self, name: str, spec_path: str) -> str:
        """Where the delivery graph's Flux Kustomization `name` (applying `spec_path`) is written."""
        return f"{self.entry_dir}/ks.{name}.yaml"

    def listed_in(self, path: str) -> str:
        """The folder whose kustomization.yaml lists the exported file `path`."""
        return path.rsplit("/", 1)[0]

    @property
    def repository_entry(self) -> str:
        """The folder whose kustomization.yaml is the repository's own, where the export asks for one line per file
        it writes (""= none: every folder's kustomization.yaml is the export's)."""
        return ""

    @property
    def base_group(self) -> str | None:
        """Stacks with the same group write one set of files (their differing values become tokens); None: alone."""
        return None

    @property
    def writes_cluster_vars(self) -> bool:
        """The export writes its own cluster-vars ConfigMap (else the repository's holds every variable)."""
        return True

    def owned_folders(self) -> list[str]:
        """The folders no hand-written Flux Kustomization may apply."""
        return [self.entry_dir, self.components_dir]

    def written_folders(self) -> list[str]:
        """The folders the export writes into: two stacks whose folders meet are exported together."""
        return [self.entry_dir, self.components_dir]

    def folder_shared_with(self, other: Layout) -> str | None:
        """The first of this stack's written folders that meets one of `other`'s (one inside the other), or None:
        the two stacks are then exported together."""
        return next((mine for mine in self.written_folders() for theirs in other.written_folders()
                     if is_within(mine, theirs) or is_within(theirs, mine)), None)

    def index_folders(self, suite: str) -> list[tuple[str, bool]]:
        """(folder, whole subtree?) the stack's index may name files in; `suite`: the post-merge suite's folder."""
        return [(self.entry_dir, False), (suite, False), (self.components_dir, True)]

    def config_key_of(self, path: str) -> str:
        """The stack key that chose the folder of the exported file `path`."""
        return "componentsDir" if is_within(path, self.components_dir) else "entryDir"

    def as_output(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entryDir": self.entry_dir, "componentsDir": self.components_dir,
                               "bootstrapPath": self.bootstrap_path, "sequenceIndent": self.sequence_indent}
        if self.name != SplitLayout.name:
            out["layout"] = self.name
        if self.records_dir and self.records_dir != self.entry_dir:
            out["recordsDir"] = self.records_dir
        return out

    @staticmethod
    def from_output(stack: str, out: dict[str, Any]) -> Layout:
        return LAYOUTS[str(out.get("layout") or SplitLayout.name)](
            stack=stack, entry_dir=out["entryDir"], components_dir=out["componentsDir"],
            bootstrap_path=out["bootstrapPath"], sequence_indent=int(out.get("sequenceIndent", 0)),
            records_dir=str(out.get("recordsDir") or ""))


@dataclass(frozen=True)
class SplitLayout(Layout):
    """`clusters/<stack>/gpu-platform/` holds the Flux Kustomizations (`ks.<name>.yaml`), cluster-vars and their
    kustomization.yaml; `components/<stack>/<component>/` each component's objects."""

    name: ClassVar[str] = "split"


@dataclass(frozen=True)
class PerAppLayout(Layout):
    """cluster-template's namespace folders, all under the entry: `<entry>/<component>/ks.yaml` and
    `<entry>/<component>/app/`, the entry's kustomization.yaml listing each `<component>/ks.yaml`."""

    name: ClassVar[str] = "per-app"

    def config_problems(self, gitops: Any, flux: Any) -> list[str]:
        if gitops.recordsDir is None and gitops.componentsDir is not None:
            return [f"gitops.componentsDir: {json.dumps(gitops.componentsDir)}: not used with layout: per-app, "
                    "where each component's folder is <entryDir>/<component>/app; hint: remove componentsDir, or "
                    "use layout: split"]
        return super().config_problems(gitops, flux)

    def component_dir(self, component: str) -> str:
        return f"{self.entry_dir}/{component}/app"

    def kustomization_file(self, name: str, spec_path: str) -> str:
        if spec_path == flux_path(self.component_dir(name)):
            return f"{self.entry_dir}/{name}/ks.yaml"
        return super().kustomization_file(name, spec_path)

    def listed_in(self, path: str) -> str:
        # A component's ks.yaml is listed by the entry's kustomization.yaml, as a namespace folder lists <app>/ks.yaml
        folder = path.rsplit("/", 1)[0]
        if path.endswith("/ks.yaml") and folder.rsplit("/", 1)[0] == self.entry_dir:
            return self.entry_dir
        return folder

    def owned_folders(self) -> list[str]:
        return [self.entry_dir]

    def written_folders(self) -> list[str]:
        return [self.entry_dir]

    def index_folders(self, suite: str) -> list[tuple[str, bool]]:
        return [(self.entry_dir, True)]  # every component lives below the entry

    def config_key_of(self, path: str) -> str:
        return "entryDir"


@dataclass(frozen=True)
class SharedBaseLayout(Layout):
    """One base for every cluster (manifests authored once, overlays that only patch cluster-vars): each Flux
    Kustomization once in `clusters/base/<name>.yaml`, listed by the base's own kustomization.yaml; components in
    `platform/<component>/`; each stack's records in `gpu-platform/<stack>/`, which Flux never applies."""

    name: ClassVar[str] = "shared-base"

    @classmethod
    def from_config(cls, stack: str, gitops: Any, flux: Any) -> Layout:
        return cls(stack=stack, entry_dir=gitops.entryDir or "clusters/base",
                   components_dir=gitops.componentsDir or "platform",
                   bootstrap_path=flux.bootstrapPath or flux_path(f"clusters/{stack}"),
                   sequence_indent=gitops.sequenceIndent,
                   # One folder per stack below it: the stacks of a base share every other folder.
                   records_dir=f"{gitops.recordsDir or ENTRY_NAME}/{stack}")

    def config_problems(self, gitops: Any, flux: Any) -> list[str]:
        """The repository's cluster-vars is the only one, the folders apart, the overlay outside the base."""
        problems = []
        if flux.clusterVars:
            problems.append(f"flux.clusterVars: {json.dumps(sorted(flux.clusterVars))}: with layout: shared-base "
                            "the repository's own cluster-vars (its base and each overlay's patch) holds every "
                            "cluster variable, and the export writes only the keys it owns there; a second "
                            "cluster-vars would collide with it; hint: remove flux.clusterVars and keep those values "
                            "in the overlays")
        records = repo_dir(gitops.recordsDir or ENTRY_NAME)
        for key, folder in (("entryDir", self.entry_dir), ("componentsDir", self.components_dir)):
            if is_within(records, folder) or is_within(folder, records):
                problems.append(f"gitops.recordsDir: {json.dumps(records)}: overlaps {key} {folder!r}, which Flux "
                                "applies; the records are never applied; hint: a folder of their own, e.g. "
                                "gpu-platform")
        problems += _overlap(self)
        if is_within(self.overlay, self.entry_dir):
            problems.append(f"flux.bootstrapPath: {json.dumps(self.bootstrap_path)}: inside the shared base "
                            f"{self.entry_dir!r}; each stack's bootstrap path is its overlay of the base; hint: "
                            "./clusters/<stack>")
        return problems

    def kustomization_file(self, name: str, spec_path: str) -> str:
        return f"{self.entry_dir}/{name}.yaml"  # as the base names its own: clusters/base/cilium.yaml

    @property
    def repository_entry(self) -> str:
        return self.entry_dir

    @property
    def base_group(self) -> str | None:
        return self.entry_dir

    @property
    def writes_cluster_vars(self) -> bool:
        return False  # a second cluster-vars would collide with the repository's; the export keeps its keys there

    def owned_folders(self) -> list[str]:
        # The entry and components folders are the repository's own; the walk checks the export's folders there.
        return [self.records]

    def index_folders(self, suite: str) -> list[tuple[str, bool]]:
        # The base and the components folder are the repository's own: an entry there must also be the export's by
        # its content (its generated header), see out_folder's check of foreign entries. The overlay: where its
        # cluster-vars patch gets the keys the export owns (a kept line, never an owned file).
        return [(self.records, False), (suite, False), (self.entry_dir, False), (self.components_dir, True),
                (self.overlay, False)]


# Every layout `gitops.layout` may name (model/config validates against it, `make schema` lists it).
LAYOUTS: dict[str, type[Layout]] = {cls.name: cls for cls in (SplitLayout, PerAppLayout, SharedBaseLayout)}
