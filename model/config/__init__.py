"""Typed stack configuration: every value that differs between clusters, validated before any resource exists.

The values live in `Pulumi.<stack>.yaml` under the project's namespace (`gpu-platform:`) and reach the program
through Pulumi's config system, so `pulumi preview` and the offline export read the same data. One module per
section (cluster, flux, gitops, apps, gpu), the whole file and the rules across sections in stack, the value shapes
in values and line_width, the one-line refusals in errors, the engine's config map in decode.
"""

from model.config.apps import (
    AppPolicyConfig,
    AppProbeConfig,
    AppResourcesConfig,
    AppSecretEnvConfig,
    AppVolumeConfig,
    DeliveredBy,
    GpuAppConfig,
    GpuHardwareConfig,
    PlexConfig,
    PlexHardwareConfig,
    PlexStorageConfig,
)
from model.config.cluster import ClusterConfig, KubernetesConfig
from model.config.decode import app_keys, parse_stack_config, project_config
from model.config.errors import MISSING, ConfigError, format_validation_error, key_rule
from model.config.flux import (
    DecryptionConfig,
    DeliveryConfig,
    DependsOnRef,
    FluxConfig,
    HealthCheckConfig,
    SecretRef,
    TierConfig,
)
from model.config.gitops import GitopsConfig
from model.config.gpu import DRA_DRIVER_IMAGE, DraDriverConfig, GpuConfig, IntelGpuPluginConfig
from model.config.line_width import EXPORT_LINE_MAX, MAX_EXPORTED_VALUE, exported_width, fits_export_line
from model.config.stack import StackConfig, cross_field_problems, keyed_apps
from model.config.values import (
    DNS1123_LABEL,
    FLUX_VAR_NAME_PATTERN,
    OBJECT_REF_PATTERN,
    PATTERN_MEANING,
    PROJECT,
    Dns1123Label,
    FluxDuration,
    RepoPath,
)

__all__ = [
    "DNS1123_LABEL", "DRA_DRIVER_IMAGE", "EXPORT_LINE_MAX", "FLUX_VAR_NAME_PATTERN", "MAX_EXPORTED_VALUE", "MISSING",
    "OBJECT_REF_PATTERN", "PATTERN_MEANING", "PROJECT", "app_keys", "AppPolicyConfig", "AppProbeConfig",
    "AppResourcesConfig", "AppSecretEnvConfig", "AppVolumeConfig", "ClusterConfig", "ConfigError", "DecryptionConfig",
    "DeliveryConfig", "DeliveredBy", "DependsOnRef", "Dns1123Label", "DraDriverConfig", "FluxConfig", "FluxDuration",
    "GitopsConfig", "GpuAppConfig", "GpuConfig", "GpuHardwareConfig", "HealthCheckConfig", "IntelGpuPluginConfig",
    "KubernetesConfig", "PlexConfig", "PlexHardwareConfig", "PlexStorageConfig", "RepoPath", "SecretRef", "StackConfig",
    "TierConfig", "cross_field_problems", "exported_width", "fits_export_line", "format_validation_error", "key_rule",
    "keyed_apps", "parse_stack_config", "project_config",
]
