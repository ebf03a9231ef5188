"""The GPU platform of the k3s cluster: Intel GPU plugin, Flux delivery graph, GPU apps (Plex and any others).

Run by `pulumi preview --stack <stack>` (needs the Pulumi CLI and the kubernetes plugin) and, offline, by
`make export` / the tests, which run this same file under the SDK's mock engine (gitops/engine/program.py).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.flux import DeliveredComponent, FluxDeliveryGraph
from components.gpu_app import DraClaim, GpuApp, start_budget
from components.intel_gpu_dra import IntelGpuResourceDriver, start_budget as driver_start_budget
from components.intel_gpu_plugin import ADVERTISED_RESOURCE, IntelGpuPlugin
from components.plex import legacy_aliases, plex_app
from model.app_plan import plan_apps
from model.config import StackConfig, parse_stack_config, project_config
from model.dra.gate import load_claim_evidence, load_slice_evidence
from model.errors import RefusalError
from model.evidence import load_evidence
from model.flux_graph import DRIVER_KUSTOMIZATION, PLUGIN_KUSTOMIZATION
from model.outputs import AppPolicy


class ProgramRefusalError(RefusalError, pulumi.RunError):
    """A refusal of the core (model/: config, evidence), which knows nothing of Pulumi, as the CLI prints it: a
    RunError, without a traceback. The export catches it as the RefusalError it is."""


@contextmanager
def refusals_for_the_cli() -> Iterator[None]:
    try:
        yield
    except RefusalError as refusal:
        raise ProgramRefusalError(refusal.lines) from None


def load_stack_config() -> StackConfig:
    """Read every `gpu-platform:*` key the engine passed in, so unknown keys are caught, not ignored."""
    source = f"Pulumi.{pulumi.get_stack()}.yaml"
    config = pulumi.runtime.config.CONFIG.get()
    # is_config_secret is the SDK's public question; the set behind it is private and was read here before.
    secret_keys = {key for key in config if pulumi.runtime.is_config_secret(key)}
    return parse_stack_config(project_config(config, secret_keys, source), source, pulumi.get_stack())


stack = pulumi.get_stack()
# The folder of the stack files and evidence/: absolute, not resolved, so an example project (examples/<name>/,
# whose __main__.py links here) reads its own.
project_dir = Path(__file__).absolute().parent
with refusals_for_the_cli():  # config and evidence are refused before any resource is declared
    cfg = load_stack_config()
    # Plex is one GPU app among any others (what is Plex's own stays in components/plex.py); the gate, the DRA
    # route's stage and who delivers each app are decided in model/app_plan.py.
    plan = plan_apps(cfg, ([("plex", plex_app(cfg.plex))] if cfg.plex else []) + [(f"apps[{i}]", app)
                                                                                   for i, app in enumerate(cfg.apps)],
                     load_evidence(project_dir, stack),
                     (load_slice_evidence(project_dir, stack, cfg.gpu.dra.kernelDriver),
                      load_claim_evidence(project_dir, stack)) if cfg.gpu.route == "dra" else None, stack)
for warning in plan.warnings:
    pulumi.log.warn(warning)
if progress := plan.progress():
    pulumi.log.info(progress)

# Explicit provider; Pulumi.yaml disables the default one so nothing can slip onto an ambient kubeconfig.
if cfg.kubernetes.mode == "render":
    provider = k8s.Provider(f"k8s-{stack}", render_yaml_to_directory=f"{cfg.kubernetes.renderDirectory}/{stack}")
else:
    provider = k8s.Provider(f"k8s-{stack}", context=cfg.kubernetes.context)
with_provider = pulumi.ResourceOptions(providers=[provider])

# The device plugin, until the DRA route's step 5 removes it on the evidence that every claim is allocated.
plugin = IntelGpuPlugin("intel-gpu-plugin", cfg.intelGpuPlugin, opts=with_provider) if plan.plugin else None
# gpu.route: dra: Intel's DRA driver, beside the plugin from step 1, publishing the slices the apps claim from step 3;
# none when the repository installs it (gpu.dra.deliveredBy: repository): the stack adopts its Kustomization
adopted_driver = cfg.gpu.dra.adopted if plan.dra else None
driver = IntelGpuResourceDriver(DRIVER_KUSTOMIZATION, cfg.gpu.dra, opts=with_provider,
                                plugin_removed=not plan.plugin) if plan.dra and not adopted_driver else None
apps = {a.name: GpuApp(a.config, cfg.appPolicy, a.decision,
                       gpu_plugin_daemonset=plugin.daemonset if plugin else None,
                       # Plex's URNs from before it was a GpuApp: a CLI user's stack sees no replacement
                       opts=pulumi.ResourceOptions.merge(with_provider, pulumi.ResourceOptions(
                           aliases=legacy_aliases() if a.key == "plex" else [])),
                       dra=DraClaim(cfg.gpu.dra.kernelDriver, a.admin_access) if a.claims_device else None,
                       # no Pulumi edge to a driver the repository installs (None: adopted, not forgotten)
                       dra_driver=[driver.daemonset, driver.device_class] if driver else None if adopted_driver else [])
        for a in plan.apps if a.adopted is None}  # an app adopted from a HelmRelease: the release is its reference
# Each component is applied by a Kustomization of its own; an app's joins the tier its config names. An app the
# repository delivers (deliveredBy: repository) gets none: its objects above are the reference the export holds the
# repository's own to, and are never written.
exported = [a for a in plan.apps if a.exported]
flux = FluxDeliveryGraph(
    "flux", cfg.layout, cfg.flux, node_count=len(cfg.cluster.nodes),
    components=[DeliveredComponent(a.name, a.config.delivery, start_budget(a.config),
                                   claims_device=a.claims_device, key=a.key) for a in exported],
    owned_sources={**({PLUGIN_KUSTOMIZATION: plugin} if plugin else {}),
                   **({DRIVER_KUSTOMIZATION: driver} if driver else {}),
                   **{a.name: apps[a.name] for a in exported}},
    opts=with_provider,
    driver=driver_start_budget(len(cfg.cluster.nodes)) if driver else None,
    adopted_driver=adopted_driver,  # the claiming apps' Kustomizations depend on the repository's instead
    plugin=plugin is not None,
    source=f"Pulumi.{stack}.yaml",  # a graph problem of a tier or an app is named at its key in the stack file
)

pulumi.export("nodes", cfg.cluster.nodes)
pulumi.export("kubernetesMode", cfg.kubernetes.mode)
pulumi.export("gpuResource", ADVERTISED_RESOURCE)
pulumi.export("gpuSharesPerNode", cfg.intelGpuPlugin.sharedDevNum)  # each node's advertised count (one iGPU each)
if plan.dra:  # the device-plugin route's outputs stay as they were
    pulumi.export("draKernelDriver", cfg.gpu.dra.kernelDriver)
    pulumi.export("draMigration", plan.dra.as_output())  # the step the stack is at and what the next one needs
pulumi.export("gpuApps", {a.name: a.output().as_output() for a in plan.apps})
if cfg.plex:  # the outputs Plex has always had; a stack without Plex reads its apps' in gpuApps
    pulumi.export("plexGpuAccess", plan.app("plex").decision.access)
    pulumi.export("plexGpuReason", plan.app("plex").decision.reason)
pulumi.export("fluxKustomizations", sorted(flux.kustomizations))
# What the export reads back, typed (model/outputs.py, read by gitops/pipeline.py):
pulumi.export("layout", cfg.layout.as_output())  # where the export writes
if cfg.gitops.acceptReplacement:  # only when set: every index records the outputs, and most stacks replace nothing
    pulumi.export("acceptReplacement", sorted(cfg.gitops.acceptReplacement))
pulumi.export("fluxGraph", flux.summary.as_output())  # what the export's Flux walk checks the real repository against
pulumi.export("appPolicy", AppPolicy(cfg.appPolicy.egressClassLabel,  # label keys the offline policy run checks
                                     cfg.appPolicy.authModeLabel).as_output())
if plugin:
    pulumi.export("pluginImage", plugin.daemonset.spec.template.spec.containers[0].image)
