"""The first export: both stacks into one OUT; `kubectl kustomize` builds exactly each folder's objects."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import EXAMPLE
from gitops.export import main as export_main

STACKS = ("dev", "prod")


def kustomize(folder: Path) -> list[dict]:
    result = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True, check=True)
    return [d for d in YAML(typ="safe", pure=True).load_all(result.stdout) if d]


def refs(objects) -> list[tuple[str, str, str | None]]:
    return sorted((o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gitops")
    for stack in STACKS:  # one after the other into the same OUT
        assert export_main(["--project-dir", str(EXAMPLE), "--stack", stack, "--out", str(out), "--quiet"]) == 0
    return out


def files_of(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_dev_and_prod_in_one_out_never_share_a_file(exported, tmp_path):
    dev_only = tmp_path / "dev-only"
    dev_only.mkdir()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(dev_only), "--quiet"]) == 0
    dev_files = files_of(dev_only)
    both = files_of(exported)
    for rel, content in dev_files.items():
        assert both[rel] == content, f"{rel}: prod's export changed a dev file"
    prod_paths = set(both) - set(dev_files)
    assert prod_paths and all("/prod/" in f"/{p}" for p in prod_paths)


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_entry_point_builds_into_the_kustomizations_and_cluster_vars_only(exported, stack):
    objects = kustomize(exported / "clusters" / stack / "gpu-platform")
    assert refs(objects) == sorted(
        [("ConfigMap", "cluster-vars", "flux-system")]
        + [("Kustomization", n, "flux-system") for n in
           ("apps-wave-0", "apps-wave-1", "cilium", "intel-gpu-plugin", "platform", "platform-config", "plex")])


@pytest.mark.parametrize("stack", STACKS)
def test_the_export_never_writes_a_kustomization_file_into_the_bootstrap_folder(exported, stack):
    # One there would switch off Flux's generated kustomization and cut flux-system/ out of the bootstrap build.
    assert sorted(p.name for p in (exported / "clusters" / stack).iterdir()) == ["gpu-platform"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_owned_kustomization_path_builds_into_exactly_its_component(exported, stack):
    index = json.loads((exported / "clusters" / stack / "gpu-platform" / "export-index.json").read_text())
    entry = kustomize(exported / "clusters" / stack / "gpu-platform")
    owned = {k["metadata"]["name"]: k["spec"]["path"] for k in entry
             if k["kind"] == "Kustomization" and k["metadata"]["name"] not in index["externalPaths"]}
    assert sorted(owned) == ["intel-gpu-plugin", "plex"]
    assert all(path.startswith("./") for path in owned.values())
    assert refs(kustomize(exported / owned["intel-gpu-plugin"])) == [
        ("DaemonSet", "intel-gpu-plugin", "intel-gpu-plugin"), ("Namespace", "intel-gpu-plugin", None),
        ("NetworkPolicy", "default-deny", "intel-gpu-plugin")]
    assert {k for k, _, _ in refs(kustomize(exported / owned["plex"]))} >= {"Deployment", "Service"}


@pytest.mark.parametrize("stack", STACKS)
def test_plex_folder_builds_into_the_plex_objects(exported, stack):
    objects = kustomize(exported / "components" / stack / "plex")
    assert refs(objects) == sorted([
        ("Deployment", "plex", "plex"), ("Namespace", "plex", None), ("Service", "plex", "plex"),
        ("NetworkPolicy", "allow-dns-egress", "plex"), ("NetworkPolicy", "allow-internet-egress", "plex"),
        ("NetworkPolicy", "allow-plex-ingress", "plex"), ("NetworkPolicy", "default-deny", "plex"),
        ("PersistentVolumeClaim", "plex-config", "plex"), ("PersistentVolumeClaim", "plex-media", "plex")])


@pytest.mark.parametrize("stack", STACKS)
def test_external_paths_are_listed_and_are_not_written(exported, stack):
    index = json.loads((exported / "clusters" / stack / "gpu-platform" / "export-index.json").read_text())
    assert sorted(index["externalPaths"]) == ["apps-wave-0", "apps-wave-1", "cilium", "platform", "platform-config"]
    delivery = (exported / "clusters" / stack / "gpu-platform" / "DELIVERY.md").read_text()
    for name, path in index["externalPaths"].items():
        assert not (exported / path).exists(), f"{path} is external and must not be written"
        row = next(line for line in delivery.splitlines() if line.startswith(f"| {name} |"))
        assert f"`{path}`" in row and row.endswith("| not in this repository |"), row


def test_the_entry_point_holds_no_workload(exported):
    kinds = {o["kind"] for o in kustomize(exported / "clusters" / "prod" / "gpu-platform")}
    assert kinds == {"Kustomization", "ConfigMap"}
