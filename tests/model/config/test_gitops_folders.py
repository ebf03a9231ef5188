"""The `gitops:` section of model/config/gitops.py: the export's folders are relative to the repository root
and normalized."""

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
NO_HINT = "; hint: see the key's type in docs/config.md"


def refused(change: Callable[[dict[str, Any]], object]) -> list[str]:
    """The refusal lines of the shipped dev stack changed by `change`."""
    raw = copy.deepcopy(DEV)
    change(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, SRC)
    return info.value.lines


@pytest.mark.parametrize("folder", ["/srv/gitops", "clusters//dev", "clusters/dev/", "clusters/./dev", "clusters/..",
                                    ".", "a/../b"])
def test_an_export_folder_must_be_relative_to_the_repository_root_and_normalized(folder):
    assert refused(lambda r: r.update(gitops={"entryDir": folder})) == [
        f'{SRC}: gpu-platform:gitops.entryDir: "{folder}": must be a folder relative to the repository root, without '
        "'.', '..' or '//'" + NO_HINT]


def test_a_layout_no_class_defines_is_refused_with_the_layouts_there_are():
    assert refused(lambda r: r.update(gitops={"layout": "flat"})) == [
        f'{SRC}: gpu-platform:gitops.layout: "flat": no such layout; the layouts are split, per-app, shared-base; '
        "hint: write one of them"]


def test_a_layout_that_is_not_text_is_refused_before_it_is_looked_up():
    assert refused(lambda r: r.update(gitops={"layout": 2})) == [
        f"{SRC}: gpu-platform:gitops.layout: 2: Input should be a valid string{NO_HINT}"]
