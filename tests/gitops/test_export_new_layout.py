"""A new layout is one class (model/layout.py, docs/architecture.md "Where to change what"): this test adds one of its
own, registers it where `gitops.layout` looks names up, and exports a stack that names it into a copy of the
flux-bootstrap example's repository, with no other change to the program or the export."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
import yaml

from conftest import export, files_of, make_project, repo_copy, stack_text
from gitops.index import INDEX_FILE
from model.layout import LAYOUTS, Layout, flux_path


@dataclass(frozen=True)
class ByStackLayout(Layout):
    """Each stack's Flux Kustomizations in `clusters/<stack>/gpu/<name>.ks.yaml`, its components in
    `gpu-components/<stack>/<component>/`."""

    name: ClassVar[str] = "by-stack"

    @classmethod
    def from_config(cls, stack: str, gitops: Any, flux: Any) -> Layout:
        return cls(stack=stack, entry_dir=f"clusters/{stack}/gpu", components_dir=f"gpu-components/{stack}",
                   bootstrap_path=flux.bootstrapPath or flux_path(f"clusters/{stack}"),
                   sequence_indent=gitops.sequenceIndent)

    def kustomization_file(self, name: str, spec_path: str) -> str:
        return f"{self.entry_dir}/{name}.ks.yaml"


@pytest.fixture
def by_stack(monkeypatch):
    monkeypatch.setitem(LAYOUTS, ByStackLayout.name, ByStackLayout)


def test_a_layout_added_as_one_class_exports_into_a_repository(by_stack, tmp_path):
    text = stack_text("dev") + "  gpu-platform:gitops:\n    layout: by-stack\n"
    project = make_project(tmp_path / "project", {"dev": text})
    out = repo_copy(tmp_path, "flux-bootstrap")
    before = files_of(out)

    assert export(out, "dev", project=project) == 0

    written = sorted(set(files_of(out)) - set(before))
    assert "clusters/dev/gpu/intel-gpu-plugin.ks.yaml" in written
    assert "gpu-components/dev/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml" in written
    assert f"clusters/dev/gpu/{INDEX_FILE}" in written
    # every file is in one of the layout's two folders, and each Kustomization applies its component's folder
    assert all(p.startswith(("clusters/dev/gpu/", "gpu-components/dev/")) for p in written), written
    plugin = yaml.safe_load((out / "clusters/dev/gpu/intel-gpu-plugin.ks.yaml").read_text())
    assert plugin["spec"]["path"] == "./gpu-components/dev/intel-gpu-plugin"
    # what the stack output records reads back as the new layout
    index = json.loads((out / f"clusters/dev/gpu/{INDEX_FILE}").read_text())
    assert index["stackOutputs"]["layout"]["layout"] == "by-stack"


def test_without_its_class_the_name_is_refused_as_any_unknown_layout(tmp_path):
    text = stack_text("dev") + "  gpu-platform:gitops:\n    layout: by-stack\n"
    project = make_project(tmp_path / "project", {"dev": text})
    out = repo_copy(tmp_path, "flux-bootstrap")
    before = files_of(out)

    assert export(out, "dev", project=project) == 2

    assert files_of(out) == before
