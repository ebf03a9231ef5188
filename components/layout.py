"""Where each exported object lives in the GitOps tree. The Flux graph (spec.path) and the export (file
location) both read these functions, so a Kustomization can never point at a folder the export did not write.

The export's OUT folder is the root of the GitOps repository Flux reconciles.
"""

from __future__ import annotations


def cluster_dir(stack: str) -> str:
    """The cluster's Flux entry point: Flux Kustomizations and `cluster-vars`, no workload."""
    return f"clusters/{stack}"


def component_dir(stack: str, component: str) -> str:
    """One folder per component and stack: dev and prod never write different content to one file."""
    return f"components/{stack}/{component}"


def flux_path(directory: str) -> str:
    """Flux's `spec.path` is relative to the repository root and must start with `./`."""
    return f"./{directory}"
