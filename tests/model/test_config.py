"""Stack config is validated before any resource exists; each bad value names file, key, value and rule."""

from __future__ import annotations

import subprocess
import sys

import pulumi
import pytest

from builders import project_keys
from conftest import FIXTURES, ROOT, make_project, stack_text
from model.config import ConfigError, parse_stack_config
from model.errors import RefusalError

VALID = sorted((FIXTURES / "config" / "valid").glob("*.yaml"))
INVALID = sorted((FIXTURES / "config" / "invalid").glob("*.yaml"))


def fixture_header(path) -> tuple[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# rule: "), f"{path.name} must open with '# rule: …'"
    assert lines[1].startswith("# key: "), f"{path.name} must name the key on its second line"
    return lines[0][len("# rule: "):], lines[1][len("# key: "):]


@pytest.mark.parametrize("path", VALID + [ROOT / "Pulumi.dev.yaml", ROOT / "Pulumi.prod.yaml"], ids=lambda p: p.name)
def test_valid_stack_files_are_accepted(path):
    cfg = parse_stack_config(project_keys(path), path.name)
    assert cfg.cluster.nodes, f"{path.name}: parsed config has no nodes"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_stack_file_is_refused_with_a_line_naming_the_key(path):
    rule, key = fixture_header(path)
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(project_keys(path), path.name, stack="dev")  # the fixtures are variants of dev
    lines = caught.value.lines
    assert any(line.startswith(f"{path.name}: {key}:") for line in lines), (
        f"{path.name} breaks '{rule}' but no error line names {key}: {lines}")
    assert all(line.startswith(f"{path.name}: ") for line in lines)


def test_prod_has_the_three_prod_nodes():
    cfg = parse_stack_config(project_keys(ROOT / "Pulumi.prod.yaml"), "Pulumi.prod.yaml")
    assert cfg.cluster.nodes == ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]


def test_dev_has_its_own_nodes():
    cfg = parse_stack_config(project_keys(ROOT / "Pulumi.dev.yaml"), "Pulumi.dev.yaml")
    assert cfg.cluster.nodes and not set(cfg.cluster.nodes) & {"k3s-prod-1", "k3s-prod-2", "k3s-prod-3"}


def test_an_error_shows_the_offending_value_and_what_is_allowed():
    with pytest.raises(ConfigError, match=r'gpu-platform:plex\.hardware\.gpu: "nvidia": .*none.*intel-quicksync'):
        parse_stack_config(project_keys(FIXTURES / "config" / "invalid" / "gpu-mode-unknown.yaml"), "x.yaml")


def test_the_program_refuses_bad_config_before_declaring_any_resource(run_stack_text):
    bad = stack_text("dev").replace("gpu: intel-quicksync", "gpu: nvidia")
    # The core's ConfigError, raised to the CLI as a RunError: Pulumi prints it without a traceback.
    with pytest.raises(pulumi.RunError, match="Pulumi.variant.yaml: gpu-platform:plex.hardware.gpu") as caught:
        run_stack_text(bad)
    assert isinstance(caught.value, RefusalError)


def test_secret_config_is_refused_without_showing_its_value(run_stack_text):
    text = stack_text("dev") + "  gpu-platform:claimToken:\n    secure: AAABAKZnotarealciphertext\n"
    with pytest.raises(RefusalError) as caught:
        run_stack_text(text)
    assert "gpu-platform:claimToken" in str(caught.value)
    assert "AAAB" not in str(caught.value)


def test_export_of_a_bad_stack_exits_2_with_one_line_per_error_no_traceback_and_writes_nothing(tmp_path):
    bad = stack_text("dev").replace("imageTag: 1.42.2.10156-f737b826c", "imageTag: latest").replace(
        "CLUSTER_NAME: dev", "CLUSTER-NAME: dev")
    project = make_project(tmp_path / "project", {"bad": bad})
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "gitops.export", "--stack", "bad", "--out", str(out), "--project-dir", str(project)],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2, result.stderr
    assert any("gpu-platform:plex.imageTag" in e and '"latest"' in e for e in errors)
    assert any("gpu-platform:flux.clusterVars.CLUSTER-NAME" in e for e in errors)
    assert not out.exists()


