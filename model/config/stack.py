"""The whole stack file (StackConfig: everything under `gpu-platform:`) and the rules across its sections, each
refused at the key to change (a model_validator could only name the root)."""

from __future__ import annotations

import json

from pydantic import PrivateAttr

from model.config.apps import AppPolicyConfig, GpuAppConfig, PlexConfig
from model.config.cluster import ClusterConfig, KubernetesConfig
from model.config.errors import shown_value
from model.config.flux import FluxConfig
from model.config.gitops import GitopsConfig
from model.config.gpu import GpuConfig, IntelGpuPluginConfig
from model.config.line_width import EXPORT_LINE_MAX, MAX_EXPORTED_VALUE, exported_width
from model.config.values import PROJECT, Strict
from model.images import PLEX_REPOSITORY, pin_problem
from model.layout import Layout, is_within, repo_dir


class StackConfig(Strict):
    """Everything under `gpu-platform:` in a `Pulumi.<stack>.yaml`, one section per key."""

    # The cluster's nodes. Required: the GPU gate and the plugin's rollout timeout count them.
    cluster: ClusterConfig
    kubernetes: KubernetesConfig = KubernetesConfig()
    # The Intel GPU device plugin's DaemonSet; every default is the safe one (no sharing, no extra flags).
    intelGpuPlugin: IntelGpuPluginConfig = IntelGpuPluginConfig()
    # The route to the iGPU: the device plugin (default) or Dynamic Resource Allocation.
    gpu: GpuConfig = GpuConfig()
    # The cluster's Flux and the delivery graph. Required: the tiers and cluster variables are the repository's own.
    flux: FluxConfig
    appPolicy: AppPolicyConfig = AppPolicyConfig()
    # Plex, the app this program was made for. Optional: a repository whose GPU app is another (Jellyfin in `media`)
    # declares that one under apps and no Plex; unset, nothing of Plex is written or judged.
    plex: PlexConfig | None = None
    # More GPU apps (or the only ones), as config: each one the export writes or adopts from the repository.
    apps: list[GpuAppConfig] = []
    gitops: GitopsConfig = GitopsConfig()
    _layout: Layout | None = PrivateAttr(default=None)

    @property
    def layout(self) -> Layout:
        """The stack's layout class, built once when the stack file was parsed (`parse_stack_config`)."""
        if self._layout is None:
            raise ValueError("a StackConfig's layout is decided by parse_stack_config, which knows the stack's name")
        return self._layout


def cross_field_problems(cfg: StackConfig, source: str, stack: str) -> list[str]:
    """Rules across sections, reported with the key to change (a model_validator could only name the root). Decides
    the stack's layout first (`cfg.layout`): its folders are what several rules judge."""
    layout = cfg._layout = Layout.of(stack, cfg.gitops, cfg.flux)
    return [f"{source}: {PROJECT}:{problem}" for problem in (
        *layout.config_problems(cfg.gitops, cfg.flux), *_tier_path_problems(cfg, layout), *_cluster_var_problems(cfg),
        *_delivery_tier_problems(cfg), *_pin_problems(cfg), *_app_name_problems(cfg), *_admin_access_problems(cfg))]


def keyed_apps(cfg: StackConfig) -> list[tuple[str, str, PlexConfig | GpuAppConfig]]:
    """(stack key, app name, its settings) of every GPU app, Plex first where the stack declares it."""
    plex: list[tuple[str, str, PlexConfig | GpuAppConfig]] = [("plex", "plex", cfg.plex)] if cfg.plex else []
    return plex + [(f"apps[{i}]", app.name, app) for i, app in enumerate(cfg.apps)]


# Each rule below gives `<key>: <value>: <problem>; hint: <fix>`; cross_field_problems prefixes the file and project.

def _tier_path_problems(cfg: StackConfig, layout: Layout) -> list[str]:
    """A repository tier never applies a folder the export owns."""
    owned = layout.owned_folders()
    problems = []
    for i, tier in enumerate(cfg.flux.tiers):
        if tier.path is None:
            continue
        folder = repo_dir(tier.path)
        clash = next((o for o in owned if is_within(folder, o) or is_within(o, folder)), None)
        if clash is not None:
            problems.append(f"flux.tiers[{i}].path: {json.dumps(tier.path)}: overlaps "
                            f"{clash!r}, a folder the export owns, so the tier would apply exported objects a "
                            "second time; hint: point the tier at its hand-written folder")
    return problems


def _cluster_var_problems(cfg: StackConfig) -> list[str]:
    """Each cluster variable fits on one line of the exported ConfigMap."""
    problems = []
    for name, value in cfg.flux.clusterVars.items():
        width = len(f"{name}: ") + (exported_width(value) or 0)
        if width > MAX_EXPORTED_VALUE:
            problems.append(f"flux.clusterVars.{name}: {shown_value(value)}: `{name}: <value>` is "
                            f"{width} characters as exported, above the {MAX_EXPORTED_VALUE} that fit on one "
                            f"{EXPORT_LINE_MAX}-character line (.yamllint.yaml) of the cluster-vars ConfigMap; "
                            f"hint: shorten the name or the value")
    return problems


def _delivery_tier_problems(cfg: StackConfig) -> list[str]:
    """A component joins a tier that exists (an app adopted from a HelmRelease joins the repository's own)."""
    tiers = [t.name for t in cfg.flux.tiers]
    deliveries = [(f"{key}.delivery.tier", app.delivery) for key, _, app in keyed_apps(cfg) if app.helmRelease is None]
    return [f"{key}: {json.dumps(delivery.tier)}: not a tier; hint: one of {', '.join(tiers)}"
            for key, delivery in deliveries if delivery.tier is not None and delivery.tier not in tiers]


def _pin_problems(cfg: StackConfig) -> list[str]:
    """An image's digest must belong to its tag (model/images.py keeps the record)."""
    # an app adopted from the repository's HelmRelease has no image here: the release pins its own
    pins: list[tuple[str, str, str, str | None]] = [
        (f"apps[{i}].imageDigest", app.image.rpartition(":")[0], app.image.rpartition(":")[2], app.imageDigest)
        for i, app in enumerate(cfg.apps) if app.image is not None]
    if cfg.plex is not None and cfg.plex.imageTag is not None:
        pins.insert(0, ("plex.imageDigest", PLEX_REPOSITORY, cfg.plex.imageTag, cfg.plex.imageDigest))
    problems = []
    for key, repository, tag, digest in pins:
        why = pin_problem(repository, tag, digest)
        if why:
            problems.append(f"{key}: {json.dumps(digest)}: {why}")
    return problems


def _app_name_problems(cfg: StackConfig) -> list[str]:
    """Each app gets a namespace and a Flux Kustomization of its own name."""
    taken = {"plex": "plex", "intel-gpu-plugin": "the GPU plugin", **{t.name: "a tier" for t in cfg.flux.tiers}}
    problems = []
    for i, app in enumerate(cfg.apps):
        if app.name in taken:
            problems.append(f"apps[{i}].name: {json.dumps(app.name)}: already the name of "
                            f"{taken[app.name]}; each app gets a namespace and a Flux Kustomization of that name; "
                            "hint: choose another name")
        taken.setdefault(app.name, f"apps[{i}]")
    return problems


def _admin_access_problems(cfg: StackConfig) -> list[str]:
    """gpu.route: dra: a claim asking for adminAccess only in a namespace the stack names, which the export labels
    (the API server refuses such a claim anywhere else); a named namespace must be one the export writes."""
    if cfg.gpu.route != "dra":
        return []
    named = cfg.gpu.dra.adminAccessNamespaces
    # the claim's namespace: the app's own where the export writes it, the release's where the stack adopts it
    apps = [(key, app.helmRelease.namespace if app.helmRelease else name, app.hardware)
            for key, name, app in keyed_apps(cfg)]
    problems = []
    for key, name, hardware in apps:
        if hardware.gpu != "none" and hardware.draAllocation == "admin-access" and name not in named:
            problems.append(f"{key}.hardware.draAllocation: \"admin-access\": an adminAccess claim in namespace "
                            f"{json.dumps(name)}, which gpu.dra.adminAccessNamespaces does not name, so the export "
                            "does not label it resource.kubernetes.io/admin-access: \"true\" and the API server "
                            f"would refuse the claim; hint: add {json.dumps(name)} to gpu.dra.adminAccessNamespaces, "
                            "or use draAllocation: exclusive")
    if len(set(named)) != len(named):
        problems.append("gpu.dra.adminAccessNamespaces: a namespace is named twice; hint: name each once")
    return problems
