"""The stack's `cluster:` (its nodes) and `kubernetes:` (how `pulumi up` reaches them) sections."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from model.config.errors import MISSING, first_repeat, key_rule
from model.config.values import NodeName, Strict, StrictBool


class ClusterConfig(Strict):
    """The cluster's nodes, by the names Kubernetes knows them by (`kubectl get nodes`)."""

    # Every node of the cluster, each once. The GPU gate needs all of them in evidence/<stack>.yaml before an app may
    # request gpu.intel.com/i915 (one missing node would leave a pod Unschedulable there), `make verify-nodes` checks
    # these names, and the plugin's Kustomization timeout grows with their count (one image pull per node).
    nodes: Annotated[list[NodeName], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_nodes(self) -> ClusterConfig:
        first = first_repeat(self.nodes)
        if first is not None:
            i, j = first
            raise key_rule(("nodes", j), self.nodes[j], "named twice", "name each node once", also=("nodes", i))
        return self


class KubernetesConfig(Strict):
    """How `pulumi up` reaches Kubernetes. Render mode writes YAML and needs no cluster."""

    # What the explicit provider does under the Pulumi CLI (the offline export ignores it). `render` (default): it
    # writes YAML to `renderDirectory` and talks to no cluster, so Flux stays the only thing that applies. `cluster`:
    # `pulumi up` applies to `context`, refused while fluxManagesCluster is true.
    mode: Literal["render", "cluster"] = "render"
    # Where render mode writes, one folder per stack below it (`<renderDirectory>/<stack>`), relative to the project.
    # This is the CLI's own tree (0-crd/, 1-manifest/, Secrets in plaintext), not the GitOps tree Flux reads: keep it
    # out of any repository. Default build/pulumi-render: under build/, which git ignores and `make clean` removes.
    renderDirectory: str = "build/pulumi-render"
    # The kubeconfig context mode 'cluster' applies to; required there, refused in render mode (it would suggest a
    # cluster is touched when none is). Default unset.
    context: str | None = None
    # Flux reconciles the cluster `context` names (default true). `pulumi up` with mode 'cluster' applies straight to
    # it, so Pulumi and Flux would fight over the same objects: mode 'cluster' is refused unless this is false.
    fluxManagesCluster: StrictBool = True

    @model_validator(mode="after")
    def _context_only_for_cluster(self) -> KubernetesConfig:
        if self.mode == "cluster" and not self.context:
            raise key_rule(("context",), MISSING if self.context is None else self.context,
                           "mode 'cluster' needs the kubeconfig context to apply to",
                           "add context: <a name from kubectl config get-contexts>, or use mode: render")
        if self.mode == "render" and self.context:
            raise key_rule(("context",), self.context, "only used with mode 'cluster'",
                           "remove it, or set mode: cluster")
        if self.mode == "cluster" and self.fluxManagesCluster:
            raise key_rule(("mode",), self.mode, "makes Pulumi apply straight to a cluster that Flux also reconciles, "
                           "so the two would fight over the same objects", "keep mode 'render' and let Flux apply the "
                           "export, or set fluxManagesCluster: false if Flux does not manage that cluster")
        return self
