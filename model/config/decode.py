"""Stack config as the Pulumi engine hands it over: the project's keys taken from the engine's config map (secret
ones refused), decoded, and validated into a StackConfig or refused with one line per problem."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from model.config.apps import GpuAppConfig
from model.config.errors import ConfigError, format_validation_error
from model.config.stack import StackConfig, cross_field_problems
from model.config.values import PROJECT


def parse_stack_config(raw: dict[str, Any], source: str, stack: str | None = None) -> StackConfig:
    """Validate the project's config keys (without the `gpu-platform:` prefix). Raises ConfigError."""
    try:
        cfg = StackConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc, StackConfig)) from None
    stack = stack or source.removeprefix("Pulumi.").removesuffix(".yaml")
    problems = cross_field_problems(cfg, source, stack)
    if problems:
        raise ConfigError(problems)
    return cfg


def _decode(value: Any) -> Any:
    # The Pulumi engine hands structured config over as JSON text; plain strings stay strings.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def project_config(config: dict[str, Any], secret_keys: set[str] | list[str], source: str) -> dict[str, Any]:
    """The `gpu-platform:*` keys of an engine config map, prefix stripped and decoded. Raises ConfigError for
    secret keys (secrets are referenced by name, SOPS in the GitOps repo, never carried in config)."""
    prefix = f"{PROJECT}:"
    raw: dict[str, Any] = {}
    errors: list[str] = []
    for key in sorted(config):
        if not key.startswith(prefix):
            continue
        if key in secret_keys:
            errors.append(f"{source}: {key}: (secret): secret config is refused; hint: reference a Secret by name")
            continue
        raw[key[len(prefix):]] = _decode(config[key])
    if errors:
        raise ConfigError(errors)
    return raw


def app_keys(config: dict[str, Any]) -> dict[str, str]:
    """The key in the stack file of each app of `apps` (`apps[0]`, …), by its name, from the engine's config map of a
    run the program accepted: a refusal drawn later names the key to change. Plex's key is its name."""
    apps = TypeAdapter(list[GpuAppConfig]).validate_python(_decode(config.get(f"{PROJECT}:apps", "[]")))
    return {app.name: f"apps[{i}]" for i, app in enumerate(apps)}
