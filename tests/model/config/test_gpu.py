"""The `intelGpuPlugin:` section of model/config/gpu.py: every extra plugin flag is checked against the pinned
release's flag table, and the refused ones are named together in one message."""

from __future__ import annotations

import pytest

from model.plugin_flags import PLUGIN_VERSION


def plugin_refusal(args: list[str]) -> str:
    from pydantic import ValidationError

    from model.config import IntelGpuPluginConfig

    with pytest.raises(ValidationError) as info:
        IntelGpuPluginConfig(extraArgs=args)
    [error] = info.value.errors(include_url=False)
    return error["msg"].removeprefix("Value error, ")


UNKNOWN = ("'{}' is not a flag of gpu_plugin " + PLUGIN_VERSION + " (the plugin exits: 'flag provided but not "
           "defined'); hint: remove it; every flag of gpu_plugin " + PLUGIN_VERSION + " is listed in "
           "docs/plugin-flags.md")


def test_one_refused_plugin_flag_is_refused_with_its_reason():
    assert plugin_refusal(["-v=4", "-bogus"]) == UNKNOWN.format("-bogus")


@pytest.mark.parametrize("count", [2, 3])
def test_several_refused_plugin_flags_are_refused_together_in_one_message(count):
    flags = ["-bogus", "-nope", "-nada"][:count]
    assert plugin_refusal(flags) == "; ".join(UNKNOWN.format(f) for f in flags)
