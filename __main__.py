"""The GPU platform of the k3s cluster: Intel GPU plugin, Flux delivery graph, Plex.

Run by `pulumi preview --stack <stack>` (needs the Pulumi CLI and the kubernetes plugin) and, offline, by
`make export` / the tests, which run this same file under the SDK's mock engine (gitops/engine.py).
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.config import load_stack_config
from components.evidence import decide_gpu_access, load_evidence
from components.flux import PLUGIN_KUSTOMIZATION, DeliveredComponent, FluxDeliveryGraph
from components.intel_gpu_plugin import ADVERTISED_RESOURCE, IntelGpuPlugin
from components.layout import Layout
from components.plex import Plex, start_budget

stack = pulumi.get_stack()
project_dir = Path(__file__).resolve().parent
cfg = load_stack_config()  # validated before any resource is declared
layout = Layout.of(stack, cfg.gitops, cfg.flux)  # where each component lands in the GitOps repository
# The gate: Plex requests gpu.intel.com/i915 only when evidence/<stack>.yaml proves every node advertises it.
gpu = decide_gpu_access(cfg.plex.hardware.gpu, cfg.plex.hardware.intelGpuAccess, cfg.cluster.nodes,
                        load_evidence(project_dir, stack), stack)
if cfg.plex.hardware.gpu != "none" and gpu.access != "device-plugin":
    pulumi.log.warn(f"plex: {gpu.reason}")

# Explicit provider; Pulumi.yaml disables the default one so nothing can slip onto an ambient kubeconfig.
if cfg.kubernetes.mode == "render":
    provider = k8s.Provider(f"k8s-{stack}", render_yaml_to_directory=f"{cfg.kubernetes.renderDirectory}/{stack}")
else:
    provider = k8s.Provider(f"k8s-{stack}", context=cfg.kubernetes.context)
with_provider = pulumi.ResourceOptions(providers=[provider])

plugin = IntelGpuPlugin("intel-gpu-plugin", cfg.intelGpuPlugin, opts=with_provider)
plex = Plex("plex", cfg.plex, cfg.appPolicy, gpu, gpu_plugin_daemonset=plugin.daemonset, opts=with_provider)
# Each component is applied by a Kustomization of its own; Plex's joins the tier its config names.
flux = FluxDeliveryGraph(
    "flux", layout, cfg.flux, node_count=len(cfg.cluster.nodes),
    components=[DeliveredComponent("plex", cfg.plex.delivery, start_budget())],
    owned_sources={PLUGIN_KUSTOMIZATION: plugin, "plex": plex},
    opts=with_provider,
)

pulumi.export("nodes", cfg.cluster.nodes)
pulumi.export("kubernetesMode", cfg.kubernetes.mode)
pulumi.export("gpuResource", ADVERTISED_RESOURCE)
pulumi.export("plexGpuAccess", gpu.access)
pulumi.export("plexGpuReason", gpu.reason)
pulumi.export("fluxKustomizations", sorted(flux.kustomizations))
pulumi.export("layout", layout.as_output())  # where the export writes (gitops/tree.py reads it)
pulumi.export("fluxGraph", flux.summary)  # what the export's Flux walk checks the real repository against
pulumi.export("appPolicy", cfg.appPolicy.model_dump())  # label keys the offline policy run checks against
pulumi.export("pluginImage", plugin.daemonset.spec.template.spec.containers[0].image)
