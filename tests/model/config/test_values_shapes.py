"""The value shapes of model/config/values.py as a stack file meets them: a pattern refused in the words of
its meaning, an image tag that is no pin."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from builders import project_keys
from conftest import EXAMPLE
from model.config import ConfigError, parse_stack_config

DEV = project_keys(EXAMPLE / "Pulumi.dev.yaml")
SRC = "Pulumi.dev.yaml"


def refused(change: Callable[[dict[str, Any]], object]) -> list[str]:
    """The refusal lines of the shipped dev stack changed by `change`."""
    raw = copy.deepcopy(DEV)
    change(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, SRC)
    return info.value.lines


@pytest.mark.parametrize(("change", "line"), [
    (lambda r: r["flux"]["tiers"][0].update(interval="10 minutes"),
     'gpu-platform:flux.tiers[0].interval: "10 minutes": must be a Flux duration such as 30s, 10m or 1h30m '
     r"(^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$); hint: write a value of that form"),
    (lambda r: r["plex"].update(imageDigest="md5:1"),
     'gpu-platform:plex.imageDigest: "md5:1": must match ^sha256:[0-9a-f]{64}$; hint: write a value of that form'),
    (lambda r: r["flux"]["clusterVars"].update({"BAD-NAME": "x"}),
     'gpu-platform:flux.clusterVars.BAD-NAME: "BAD-NAME": must be a Flux variable name: letters, digits and \'_\', '
     "not starting with a digit (^[_a-zA-Z][_a-zA-Z0-9]*$); hint: write a value of that form"),
    (lambda r: r["plex"].update(imageTag="latest"),
     'gpu-platform:plex.imageTag: "latest": the tag \'latest\' is not a pin; hint: use an exact version tag'),
])
def test_a_value_of_the_wrong_shape_is_refused_naming_the_shape(change, line):
    assert refused(change) == [f"{SRC}: {line}"]
