"""Plex as one GPU app: `plex_app` turns Plex's own settings (`plex:` in stack config) into a `GpuAppConfig`, which
the generic `GpuApp` component (components/gpu_app.py) declares like any other app. What is Plex's own lives here
and nowhere else: its image, port and probe path, the claim-token Secret reference, the advertised address, the
PLEX_UID/PLEX_GID its init switches to, its volumes, and the capabilities that init needs.
"""

from __future__ import annotations

import pulumi

from components.gpu_app import probe_start_budget
from model.config import AppProbeConfig, AppSecretEnvConfig, AppVolumeConfig, GpuAppConfig, PlexConfig
from model.flux_graph import StartBudget
from model.images import PLEX_REPOSITORY

NAME = "plex"
NAMESPACE = NAME
PORT = 32400
CLAIM_TOKEN_KEY = "token"
# A first start migrates the database and can take minutes on a large library: 30 × 10 s before kubelet gives up.
# /identity is answered from memory; 5 s before a probe counts as failed leaves room for a host busy transcoding.
PROBE = AppProbeConfig(path="/identity", timeoutSeconds=5, startupPeriodSeconds=10, startupFailureThreshold=30)
# The image's s6 init starts as root, then drops to PLEX_UID; `drop: [ALL]` takes every capability away and these
# come back, each for one step of that init (NET_RAW, NET_BIND_SERVICE, SYS_* and the rest stay dropped):
INIT_CAPABILITIES = (
    "CHOWN",         # chown -R of /config and /transcode to PLEX_UID:PLEX_GID
    "DAC_OVERRIDE",  # reading and fixing files under /config that belong to another uid before the chown
    "FOWNER",        # chmod of those files, whose owner root is not
    "SETGID",        # s6-setuidgid / usermod: switching to PLEX_GID
    "SETUID",        # s6-setuidgid: switching to PLEX_UID (privileges only ever dropped: no escalation)
)


def plex_app(cfg: PlexConfig) -> GpuAppConfig:
    """Plex's settings in the generic shape. Everything else (namespace, policies, PVCs, Deployment, Service,
    hardening, the GPU branch, its Flux Kustomization) is the GPU app's, shared with every other app. A Plex adopted
    from the repository's HelmRelease is only its name, hardware and release: the release says the rest."""
    if cfg.helmRelease is not None:
        return GpuAppConfig(name=NAME, hardware=cfg.hardware, deliveredBy=cfg.deliveredBy,
                            helmRelease=cfg.helmRelease, workload=cfg.workload)
    s, tz, ip = cfg.storage, cfg.timezone, cfg.advertiseIp
    if s is None or tz is None or ip is None:  # PlexConfig requires them without helmRelease
        raise ValueError("plex: storage, timezone and advertiseIp are required for the Plex the program writes")
    return GpuAppConfig(
        name=NAME,
        image=f"{PLEX_REPOSITORY}:{cfg.imageTag}",
        imageDigest=cfg.imageDigest,
        port=PORT,
        portName="pms",
        env={"TZ": tz, "PLEX_UID": str(cfg.uid), "PLEX_GID": str(cfg.gid),
             "ADVERTISE_IP": f"http://{ip}:{PORT}/"},
        # Read on first start only, and expires minutes after it is issued: optional, so later starts need no Secret.
        secretEnv=[AppSecretEnvConfig(name="PLEX_CLAIM", secret=cfg.claimTokenSecret, key=CLAIM_TOKEN_KEY)],
        volumes=[
            AppVolumeConfig(name="config", mountPath="/config", size=s.configSize, storageClass=s.configStorageClass),
            AppVolumeConfig(name="media", mountPath="/data", size=s.mediaSize, storageClass=s.mediaStorageClass,
                            accessMode="ReadWriteMany", readOnly=True),
            AppVolumeConfig(name="transcode", mountPath="/transcode", size=s.transcodeSizeLimit),
        ],
        probe=PROBE,
        capabilities=list(INIT_CAPABILITIES),
        # The device test runs as Plex's uid, not as root (root would pass where Plex fails).
        openTestPrefix="s6-setuidgid plex",
        egressClass=cfg.egressClass,
        authMode=cfg.authMode,
        loadBalancerIp=ip,
        hardware=cfg.hardware,
        delivery=cfg.delivery,
        deliveredBy=cfg.deliveredBy,
    )


def legacy_aliases() -> list[pulumi.Alias]:
    """Plex was a component type of its own before GPU apps existed; the alias keeps its Pulumi URNs, so a CLI
    user's stack sees no replacement when the same Plex becomes a GpuApp."""
    return [pulumi.Alias(type_="gpu-platform:components:Plex")]


def start_budget() -> StartBudget:
    """Plex's worst-case start (its Kustomization's timeout is sized above it): fixed by its probe."""
    return probe_start_budget(NAME, PROBE)
