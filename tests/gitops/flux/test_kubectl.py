"""gitops/flux/kubectl.py: `kubectl kustomize` as the walk runs it (bounded in time, no kubeconfig, counted by the
builder) and its failures as one line naming the folder; a fake kubectl for the answers a real one rarely gives."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from builders import cm, dump
from gitops.flux.build import Builder, RepoView
from gitops.flux.documents import BuildError


def repo(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_a_failing_kubectl_build_is_one_line_without_the_mirrors_path(tmp_path):
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": ["gone.yaml"]})})
    builder = Builder(RepoView(tmp_path, {"other.yaml": b""}))
    with pytest.raises(BuildError) as caught:
        builder.flux_path("c")
    builder.close()
    message = str(caught.value)
    assert re.fullmatch(r"c: kustomize build failed: .+", message), message  # kubectl's own words: its version's
    assert str(tmp_path) not in message


def test_without_kubectl_a_hand_written_kustomization_is_a_build_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    repo(tmp_path, {"c/kustomization.yaml": dump({"namePrefix": "x-", "resources": []})})
    with pytest.raises(BuildError) as caught:
        Builder(RepoView(tmp_path)).flux_path("c")
    assert str(caught.value) == ("c: needs `kubectl kustomize` (its kustomization does more than list resources) and "
                                 "kubectl is not on PATH")


class FakeKubectl:
    """subprocess.run as kubectl would answer, recording how it was asked."""

    def __init__(self, returncode: int = 0, stdout: bytes = b"", stderr: bytes = b"", hang: bool = False):
        self.result = (returncode, stdout, stderr)
        self.hang = hang
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> Any:
        import subprocess

        self.calls.append((argv, kwargs))
        if self.hang:
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        code, out, err = self.result
        return subprocess.CompletedProcess(argv, code, out, err)


def kubectl_build(tmp_path: Path, monkeypatch, fake: FakeKubectl, folders: tuple[str, ...] = ("c",)) -> Any:
    from gitops.flux import kubectl

    for folder in folders:
        repo(tmp_path, {f"{folder}/kustomization.yaml": dump({"namePrefix": "x-", "resources": []})})
    monkeypatch.setattr(kubectl.subprocess, "run", fake)
    builder = Builder(RepoView(tmp_path))
    return builder, [builder.flux_path(f) for f in folders]


def test_kubectl_is_bounded_in_time_reads_no_kubeconfig_and_is_counted(tmp_path, monkeypatch):
    from gitops.flux.kubectl import KUBECTL_TIMEOUT_SECONDS

    fake = FakeKubectl(stdout=dump(cm("a", "n")))
    builder, built = kubectl_build(tmp_path, monkeypatch, fake, ("c", "d"))
    assert [[(b.manifest["metadata"]["name"], b.origin) for b in each] for each in built] == [[("a", "c")],
                                                                                             [("a", "d")]]
    assert builder.kubectl_builds == 2
    argv, kwargs = fake.calls[0]
    assert argv == ["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(tmp_path / "c")]
    assert kwargs["timeout"] == KUBECTL_TIMEOUT_SECONDS == 120 and kwargs["capture_output"] is True
    assert kwargs["env"]["KUBECONFIG"] == os.devnull


def test_a_kubectl_that_hangs_is_one_error_with_the_bound(tmp_path, monkeypatch):
    with pytest.raises(BuildError) as caught:
        kubectl_build(tmp_path, monkeypatch, FakeKubectl(hang=True))
    assert str(caught.value) == "c: kubectl kustomize did not finish in 120 s"


def test_kubectls_failure_is_its_last_line_without_the_folders_path(tmp_path, monkeypatch):
    stderr = f"warning: x\nError: accumulating resources from '{tmp_path}/c/gone.yaml': \xff missing".encode("latin-1")
    with pytest.raises(BuildError) as caught:
        kubectl_build(tmp_path, monkeypatch, FakeKubectl(returncode=1, stderr=stderr))
    assert str(caught.value) == ("c: kustomize build failed: Error: accumulating resources from 'c/gone.yaml': "
                                 "\ufffd missing")
    with pytest.raises(BuildError) as caught:
        kubectl_build(tmp_path, monkeypatch, FakeKubectl(returncode=1))
    assert str(caught.value) == "c: kustomize build failed: ?"


def test_kubectls_output_that_is_not_kubernetes_yaml_names_the_build(tmp_path, monkeypatch):
    with pytest.raises(BuildError) as caught:
        kubectl_build(tmp_path, monkeypatch, FakeKubectl(stdout=b"- 1\n"))
    assert str(caught.value) == ("c (kustomize output): failed to decode Kubernetes YAML: a document without "
                                 "apiVersion and kind")
