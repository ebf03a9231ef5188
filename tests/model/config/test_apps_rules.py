"""The rules between the keys of one app (model/config/apps.py), each refused at the key to change below the
app, wherever the app sits."""

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
APP = {"name": "jelly", "image": "docker.io/jellyfin/jellyfin:10.9.0", "port": 8096, "egressClass": "internet",
       "authMode": "app-native"}


def refused(change: Callable[[dict[str, Any]], object]) -> list[str]:
    """The refusal lines of the shipped dev stack changed by `change`."""
    raw = copy.deepcopy(DEV)
    change(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, SRC)
    return info.value.lines


@pytest.mark.parametrize(("change", "line"), [
    (lambda r: r.update(apps=[APP, {**APP, "name": "emby", "hardware": {"intelGpuAccess": "host-path"}}]),
     'gpu-platform:apps[1].hardware.intelGpuAccess: "host-path": needs gpu \'intel-quicksync\'; hint: set gpu: '
     "intel-quicksync beside it, or remove intelGpuAccess"),
    (lambda r: r.update(apps=[APP, {**APP, "name": "emby", "volumes": [
        {"name": "a", "mountPath": "/a", "size": "1Gi"}, {"name": "b", "mountPath": "/b", "size": "1Gi"},
        {"name": "a", "mountPath": "/c", "size": "1Gi"}]}]),
     'gpu-platform:apps[1].volumes[2].name: "a": named twice (also apps[1].volumes[0]); '
     "hint: name each volume once"),
    (lambda r: r.update(apps=[{**APP, "runAsGroup": 1000}]),
     "gpu-platform:apps[0].runAsUser: missing: runAsGroup 1000 needs the user it is the primary group of; "
     "hint: add runAsUser: <the uid the app runs as>, or remove runAsGroup"),
])
def test_a_rule_between_an_app_s_keys_names_the_key_to_change(change, line):
    assert refused(change) == [f"{SRC}: {line}"]
