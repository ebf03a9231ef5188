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

    @classmethod
    def of(cls, stack: str, gitops: Any, flux: Any) -> Layout:
        """From the stack's `gitops` and `flux` config (components/config.py); None means the default."""
        return cls(
            stack=stack,
            entry_dir=gitops.entryDir or f"clusters/{stack}/{ENTRY_NAME}",
            components_dir=gitops.componentsDir or f"components/{stack}",
            bootstrap_path=flux.bootstrapPath or flux_path(f"clusters/{stack}"),
            sequence_indent=gitops.sequenceIndent,
            per_app=gitops.layout == "per-app",
        )

    def component_dir(self, component: str) -> str:
        """One folder per component and stack: dev and prod never write different content to one file."""
        if self.per_app:
            return f"{self.entry_dir}/{component}/app"
        return f"{self.components_dir}/{component}"

    def component_kustomization_file(self, component: str) -> str | None:
        """Where the component's Flux Kustomization is written when not in the entry folder itself (per-app)."""
        return f"{self.entry_dir}/{component}/ks.yaml" if self.per_app else None

    def owned_folders(self) -> list[str]:
        return [self.entry_dir] if self.per_app else [self.entry_dir, self.components_dir]

    def as_output(self) -> dict[str, Any]:
        out = {"entryDir": self.entry_dir, "componentsDir": self.components_dir,
               "bootstrapPath": self.bootstrap_path, "sequenceIndent": self.sequence_indent}
        return {**out, "layout": "per-app"} if self.per_app else out

    @classmethod
    def from_output(cls, stack: str, out: dict[str, Any]) -> Layout:
        return cls(stack=stack, entry_dir=out["entryDir"], components_dir=out["componentsDir"],
                   bootstrap_path=out["bootstrapPath"], sequence_indent=int(out.get("sequenceIndent", 0)),
                   per_app=out.get("layout") == "per-app")
