"""Where each exported object lives in the GitOps repository. The Flux graph (spec.path) and the export (file
location) both read this, so a Kustomization can never point at a folder the export did not write.

The export's OUT folder is the root of the GitOps repository Flux reconciles. Defaults (stack `prod`):

    clusters/prod/                       the bootstrap Kustomization's path (flux-system/ lives here)
      gpu-platform/                      the export's entry: its Flux Kustomizations, cluster-vars and a
                                         kustomization.yaml listing them; Flux's generated kustomization of
                                         clusters/prod lists this folder like flux-system/
    components/prod/<component>/         one folder per component, applied by that component's Kustomization

The entry never writes `clusters/<stack>/kustomization.yaml`: that file would switch Flux's generated
kustomization off for the whole folder and cut `flux-system/` out of the bootstrap build.

`gitops.layout: per-app` writes in the shape of cluster-template's namespace folders instead, all under the entry:

    <entryDir>/kustomization.yaml        lists cluster-vars and each <component>/ks.yaml
    <entryDir>/<component>/ks.yaml       the component's Flux Kustomization, path ./<entryDir>/<component>/app
    <entryDir>/<component>/app/          the component's objects and their kustomization.yaml

`gitops.layout: shared-base` fits a repository with one base for every cluster (R-ENV-02: manifests authored once,
overlays that only patch `cluster-vars`), as the repository this program was made for:

    clusters/base/kustomization.yaml     the repository's own: the export adds one line per Kustomization it writes
    clusters/base/<name>.yaml            each exported Flux Kustomization, written once for every stack of the base
    clusters/<stack>/                    each stack's overlay (bootstrapPath): only its cluster-vars values change
    <componentsDir>/<component>/         platform/intel-gpu-plugin/: the component, once; the rest of platform/ is
                                         the repository's and never touched
    <recordsDir>/<stack>/                gpu-platform/<stack>/: the index, DELIVERY.md, POST-MERGE.md; Flux never
                                         applies it
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class Layout:
    stack: str
    entry_dir: str
    components_dir: str
    bootstrap_path: str  # a Flux path, ./…
    sequence_indent: int = 0
    per_app: bool = False  # gitops.layout: per-app
    shared_base: bool = False  # gitops.layout: shared-base
    records_dir: str = ""  # the bookkeeping folder; "" = the entry folder

    @classmethod
    def of(cls, stack: str, gitops: Any, flux: Any) -> Layout:
        """From the stack's `gitops` and `flux` config (model/config.py); None means the default."""
        shared = gitops.layout == "shared-base"
        entry = gitops.entryDir or ("clusters/base" if shared else f"clusters/{stack}/{ENTRY_NAME}")
        return cls(
            stack=stack,
            entry_dir=entry,
            components_dir=gitops.componentsDir or ("platform" if shared else f"components/{stack}"),
            bootstrap_path=flux.bootstrapPath or flux_path(f"clusters/{stack}"),
            sequence_indent=gitops.sequenceIndent,
            per_app=gitops.layout == "per-app",
            shared_base=shared,
            # One folder per stack below it: the stacks of a base share every other folder.
            records_dir=f"{gitops.recordsDir or ENTRY_NAME}/{stack}" if shared else "",
        )

    @property
    def kind(self) -> str:
        return "per-app" if self.per_app else "shared-base" if self.shared_base else "split"

    @property
    def records(self) -> str:
        """The folder of the stack's index, DELIVERY.md and POST-MERGE.md."""
        return self.records_dir or self.entry_dir

    def kustomization_file(self, name: str) -> str:
        """Where an exported Flux Kustomization not in a per-app folder is written: a shared base names its files
        after the Kustomization (clusters/base/cilium.yaml), the entry folder `ks.<name>.yaml`."""
        return f"{self.entry_dir}/{name}.yaml" if self.shared_base else f"{self.entry_dir}/ks.{name}.yaml"

    def component_dir(self, component: str) -> str:
        """One folder per component and stack: dev and prod never write different content to one file."""
        if self.per_app:
            return f"{self.entry_dir}/{component}/app"
        return f"{self.components_dir}/{component}"

    def component_kustomization_file(self, component: str) -> str | None:
        """Where the component's Flux Kustomization is written when not in the entry folder itself (per-app)."""
        return f"{self.entry_dir}/{component}/ks.yaml" if self.per_app else None

    def owned_folders(self) -> list[str]:
        """The folders no hand-written tier may apply. A shared base's entry and components folders are the
        repository's own; there the export's records folder and component folders are checked by the walk."""
        if self.shared_base:
            return [self.records]
        return [self.entry_dir] if self.per_app else [self.entry_dir, self.components_dir]

    def as_output(self) -> dict[str, Any]:
        out = {"entryDir": self.entry_dir, "componentsDir": self.components_dir,
               "bootstrapPath": self.bootstrap_path, "sequenceIndent": self.sequence_indent}
        if self.kind != "split":
            out["layout"] = self.kind
        if self.records_dir and self.records_dir != self.entry_dir:
            out["recordsDir"] = self.records_dir
        return out

    @classmethod
    def from_output(cls, stack: str, out: dict[str, Any]) -> Layout:
        return cls(stack=stack, entry_dir=out["entryDir"], components_dir=out["componentsDir"],
                   bootstrap_path=out["bootstrapPath"], sequence_indent=int(out.get("sequenceIndent", 0)),
                   per_app=out.get("layout") == "per-app", shared_base=out.get("layout") == "shared-base",
                   records_dir=str(out.get("recordsDir") or ""))
