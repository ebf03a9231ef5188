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
from model.config import StackConfig, parse_stack_config, project_config
from model.dra.gate import DraApp, load_claim_evidence, load_slice_evidence, plan_dra
from model.errors import RefusalError
from model.evidence import GpuRequest, check_capacity, decide_gpu_access, load_evidence
from model.flux_graph import DRIVER_KUSTOMIZATION, PLUGIN_KUSTOMIZATION
from model.layout import Layout
from model.outputs import AppPolicy, GpuAppOutput


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
    cfg = load_stack_config()  # validated before any resource is declared
    layout = Layout.of(stack, cfg.gitops, cfg.flux)  # where each component lands in the GitOps repository
    # Plex is one GPU app among any others; each is config in the same shape (model/config.py GpuAppConfig).
    gpu_apps = [("plex", plex_app(cfg.plex))] + [(f"apps[{i}]", app) for i, app in enumerate(cfg.apps)]
    aliases = {"plex": legacy_aliases()}  # what is Plex's own stays in components/plex.py, this included
    delivered_by = {"plex": cfg.plex.deliveredBy}
    evidence = load_evidence(project_dir, stack)
    # gpu.route: dra: the stage of the move the stack asks for, allowed only on the evidence of the step before it
    # (model/dra/gate.py); from step 3 it decides every app it moves to a claim.
    dra = plan_dra(cfg.gpu, cfg.cluster.nodes,
                   [DraApp(key, app.name, app.hardware, delivered_by.get(app.name, "export")) for key, app in gpu_apps],
                   load_slice_evidence(project_dir, stack, cfg.gpu.dra.kernelDriver),
                   load_claim_evidence(project_dir, stack), stack) if cfg.gpu.route == "dra" else None
    # The gate, per app: an app requests gpu.intel.com/i915 only when evidence/<stack>.yaml proves every node
    # advertises it, and all such requests together fit what the nodes advertise.
    decisions = {app.name: (dra.decisions.get(app.name) if dra else None)
                 or decide_gpu_access(app.hardware.gpu, app.hardware.intelGpuAccess, cfg.cluster.nodes, evidence,
                                      stack, app=app.name, key=f"{key}.hardware.intelGpuAccess")
                 for key, app in gpu_apps}
    check_capacity([GpuRequest(app.name, f"{key}.hardware.devices", app.hardware.devices)
                    for key, app in gpu_apps if decisions[app.name].access == "device-plugin"], evidence, stack)
    for _, app in gpu_apps:
        if app.hardware.gpu != "none" and decisions[app.name].access not in ("device-plugin", "dra-claim"):
            pulumi.log.warn(f"{app.name}: {decisions[app.name].reason}")
    if dra:
        pulumi.log.info(f"gpu.route dra: step {dra.step} of 5 ({dra.stage}); next: {dra.next}")

# Explicit provider; Pulumi.yaml disables the default one so nothing can slip onto an ambient kubeconfig.
if cfg.kubernetes.mode == "render":
    provider = k8s.Provider(f"k8s-{stack}", render_yaml_to_directory=f"{cfg.kubernetes.renderDirectory}/{stack}")
else:
    provider = k8s.Provider(f"k8s-{stack}", context=cfg.kubernetes.context)
with_provider = pulumi.ResourceOptions(providers=[provider])

# The device plugin, until the DRA route's step 5 removes it on the evidence that every claim is allocated.
plugin = IntelGpuPlugin("intel-gpu-plugin", cfg.intelGpuPlugin, opts=with_provider) \
    if dra is None or dra.plugin else None
# gpu.route: dra: Intel's DRA driver, beside the plugin from step 1, publishing the slices the apps claim from step 3
driver = IntelGpuResourceDriver(DRIVER_KUSTOMIZATION, cfg.gpu.dra, opts=with_provider,
                                plugin_removed=not dra.plugin) if dra else None


def claim_of(name: str) -> DraClaim | None:
    if decisions[name].access != "dra-claim" or dra is None:
        return None
    return DraClaim(cfg.gpu.dra.kernelDriver, admin_access=name in dra.admin_access)


apps = {app.name: GpuApp(app, cfg.appPolicy, decisions[app.name],
                         gpu_plugin_daemonset=plugin.daemonset if plugin else None,
                         opts=pulumi.ResourceOptions.merge(
                             with_provider, pulumi.ResourceOptions(aliases=aliases.get(app.name, []))),
                         dra=claim_of(app.name),
                         dra_driver=[driver.daemonset, driver.device_class] if driver else [])
        for _, app in gpu_apps}
# Each component is applied by a Kustomization of its own; an app's joins the tier its config names. An app the
# repository delivers (plex.deliveredBy: repository) gets none: its objects above are the reference the export holds
# the repository's own to, and are never written.
delivered = {name for name in apps if delivered_by.get(name, "export") == "export"}
flux = FluxDeliveryGraph(
    "flux", layout, cfg.flux, node_count=len(cfg.cluster.nodes),
    components=[DeliveredComponent(app.name, app.delivery, start_budget(app),
                                   claims_device=decisions[app.name].access == "dra-claim", key=key)
                for key, app in gpu_apps if app.name in delivered],
    owned_sources={**({PLUGIN_KUSTOMIZATION: plugin} if plugin else {}),
                   **({DRIVER_KUSTOMIZATION: driver} if driver else {}),
                   **{name: app for name, app in apps.items() if name in delivered}},
    opts=with_provider,
    driver=driver_start_budget(len(cfg.cluster.nodes)) if driver else None,
    plugin=plugin is not None,
    source=f"Pulumi.{stack}.yaml",  # a graph problem of a tier or an app is named at its key in the stack file
)

pulumi.export("nodes", cfg.cluster.nodes)
pulumi.export("kubernetesMode", cfg.kubernetes.mode)
pulumi.export("gpuResource", ADVERTISED_RESOURCE)
pulumi.export("gpuSharesPerNode", cfg.intelGpuPlugin.sharedDevNum)  # each node's advertised count (one iGPU each)
if dra:  # the device-plugin route's outputs stay as they were
    pulumi.export("draKernelDriver", cfg.gpu.dra.kernelDriver)
    pulumi.export("draMigration", dra.as_output())  # the step the stack is at and what the next one needs
pulumi.export("gpuApps", {app.name: GpuAppOutput(decisions[app.name].access, decisions[app.name].reason,
                                                 app.hardware.devices, app.openTestPrefix or "",
                                                 delivered_by.get(app.name, "export")).as_output()
                          for _, app in gpu_apps})
pulumi.export("plexGpuAccess", decisions["plex"].access)
pulumi.export("plexGpuReason", decisions["plex"].reason)
pulumi.export("fluxKustomizations", sorted(flux.kustomizations))
# What the export reads back, typed (model/outputs.py, read by gitops/pipeline.py):
pulumi.export("layout", layout.as_output())  # where the export writes
if cfg.gitops.acceptReplacement:  # only when set: every index records the outputs, and most stacks replace nothing
    pulumi.export("acceptReplacement", sorted(cfg.gitops.acceptReplacement))
pulumi.export("fluxGraph", flux.summary.as_output())  # what the export's Flux walk checks the real repository against
pulumi.export("appPolicy", AppPolicy(cfg.appPolicy.egressClassLabel,  # label keys the offline policy run checks
                                     cfg.appPolicy.authModeLabel).as_output())
if plugin:
    pulumi.export("pluginImage", plugin.daemonset.spec.template.spec.containers[0].image)
