"""The small repositories the tests of gitops/checks/delivery.py, walk_builds.py and applied_specs.py check: each
test writes a bootstrap repository to its own folder, takes the export's files as a RepoView's pending writes (as
gitops/export.py does), walks it before and after, and checks the stack (`checker`, each module's `check` fixture)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from builders import cm, dump, ks
from gitops.checks.delivery import before_and_after, check_stack
from gitops.flux.build import RepoView
from gitops.tree import ExportedObject, Tree
from model.layout import SplitLayout
from model.outputs import FluxGraph

FLUX = ("flux-system", "flux-system")


LAYOUT = SplitLayout(stack="dev", entry_dir="clusters/dev/gpu-platform", components_dir="components/dev",
                bootstrap_path="./clusters/dev")


# What every Kustomization of these repositories sets besides its path: its source's namespace, prune, and a 10m
# interval (the deadline of one that sets no timeout).
EVERY_KS = {"source_namespace": "flux-system", "prune": True, "interval": "10m"}


def resources(*entries: str) -> bytes:
    return dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": list(entries)})


def repository() -> dict[str, bytes]:
    """flux bootstrap's layout: clusters/dev with flux-system/ and the CNI tier, no kustomization.yaml of its own."""
    return {
        "clusters/dev/flux-system/kustomization.yaml": resources("gotk-sync.yaml"),
        "clusters/dev/flux-system/gotk-sync.yaml": dump(
            {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
             "metadata": {"name": "flux-system", "namespace": "flux-system"}, "spec": {"url": "ssh://git@x/repo"}},
            ks("flux-system", "./clusters/dev", **EVERY_KS)),
        "clusters/dev/cilium.yaml": dump(ks("cilium", "./kubernetes/dev/cilium", **EVERY_KS, wait=True)),
        "kubernetes/dev/cilium/cm.yaml": dump(cm("cilium-config", "kube-system")),
    }


def exported(**changes: bytes | None) -> dict[str, bytes]:
    """The export's files: its entry folder with Plex's Kustomization, and Plex's folder."""
    files: dict[str, bytes | None] = {
        "clusters/dev/gpu-platform/kustomization.yaml": resources("plex.yaml"),
        "clusters/dev/gpu-platform/plex.yaml": dump(ks("plex", "./components/dev/plex", **EVERY_KS,
                                                       dependsOn=[{"name": "cilium"}], wait=True, timeout="10m")),
        "components/dev/plex/kustomization.yaml": resources("cm.yaml"),
        "components/dev/plex/cm.yaml": dump(cm("plex-config", "plex")),
        **changes,
    }
    return {rel: data for rel, data in files.items() if data is not None}


def graph(**changes: Any) -> dict[str, Any]:
    """The program's fluxGraph output for this stack: cilium is the repository's, plex the export's."""
    return {
        "namespace": "flux-system",
        "bootstrap": {"name": "flux-system", "namespace": "flux-system", "gitRepository": "flux-system",
                      "path": "./clusters/dev"},
        "plugin": ["flux-system", "intel-gpu-plugin"], "cni": ["flux-system", "cilium"],
        "pluginFolder": "components/dev/intel-gpu-plugin",
        "kustomizations": [{"name": "cilium", "namespace": "flux-system", "declared": False},
                           {"name": "plex", "namespace": "flux-system", "declared": True}],
        "components": {"plex": {"kustomization": ["flux-system", "plex"], "folder": "components/dev/plex",
                                "tier": None}},
        **changes,
    }


def tree_of(files: dict[str, bytes]) -> Tree:
    objects = [ExportedObject(rel, doc, None, "", "")  # type: ignore[arg-type]  # no registration needed here
               for rel, data in files.items() if not rel.endswith("kustomization.yaml")
               for doc in yaml.safe_load_all(data)]
    return Tree(stack="dev", layout=LAYOUT, files=dict(files), objects=objects)


class Stack:
    """One stack's check: the walk before and after the export's files, and the problems and notices."""

    def __init__(self, root: Path, repo: dict[str, bytes], files: dict[str, bytes], flux_graph: dict[str, Any],
                 old_owned: set[str] | None = None, node_count: int = 2,
                 gpu_apps: dict[str, Any] | None = None, app_keys: dict[str, str] | None = None) -> None:
        for rel, data in repo.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        self.tree = tree_of(files)
        self.after_view = RepoView(root, files, set())
        typed = FluxGraph.from_output(flux_graph)  # the fluxGraph stack output, read as the pipeline reads it
        self.walked = before_and_after(self.tree, typed, RepoView(root), self.after_view, gpu_apps, app_keys)
        self.problems = check_stack(self.walked, typed, self.after_view, old_owned or set(), node_count)
        self.notices = self.walked.notices


def parent_patching(name: str, spec: dict[str, Any], repo: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The repository with the export's entry folder applied by its Kustomization `apps` (as cluster-template's
    cluster-apps applies kubernetes/apps), which patches the child Kustomization `name` with `spec`."""
    patch = yaml.safe_dump({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                            "metadata": {"name": name}, "spec": spec}, sort_keys=False)
    repo = repository() if repo is None else repo
    listed = sorted(rel.split("/")[2] for rel in repo if rel.startswith("clusters/dev/") and rel.count("/") == 2)
    return {**repo,
            "clusters/dev/kustomization.yaml": resources("flux-system", *listed, "apps.yaml"),
            "clusters/dev/apps.yaml": dump(ks("apps", "./clusters/dev/gpu-platform", **EVERY_KS, wait=True, patches=[
                {"patch": patch, "target": {"kind": "Kustomization", "name": name}}]))}


def checker(tmp_path: Path) -> Callable[..., Stack]:
    """One stack's check in `tmp_path`/repo: the bootstrap repository, the export's files and the graph unless given."""
    def run(repo: dict[str, bytes] | None = None, files: dict[str, bytes] | None = None,
            flux_graph: dict[str, Any] | None = None, **kwargs: Any) -> Stack:
        return Stack(tmp_path / "repo", repository() if repo is None else repo,
                     exported() if files is None else files, graph() if flux_graph is None else flux_graph, **kwargs)
    return run
