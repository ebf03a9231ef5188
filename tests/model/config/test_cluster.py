"""`kubernetes.mode: cluster` makes `pulumi up` apply straight to a cluster; while Flux reconciles that cluster the
two fight over the same objects, so the stack must say Flux does not manage it (`fluxManagesCluster: false`)."""

from __future__ import annotations

import pytest

from builders import project_keys
from conftest import make_project, stack_text
from gitops.export import main as export_main
from model.config import ConfigError, KubernetesConfig, parse_stack_config

RENDER = "    mode: render\n    renderDirectory: build/pulumi-render\n"
CLUSTER = "    mode: cluster\n    context: k3s-dev\n"


def test_cluster_mode_is_refused_while_flux_manages_the_cluster(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"dev": stack_text("dev").replace(RENDER, CLUSTER)})
    out = tmp_path / "out"
    assert export_main(["--stack", "dev", "--out", str(out), "--project-dir", str(project)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: Pulumi.dev.yaml: gpu-platform:kubernetes.mode: \"cluster\": makes Pulumi apply straight to a cluster "
        "that Flux also reconciles, so the two would fight over the same objects; hint: keep mode 'render' and let "
        "Flux apply the export, or set fluxManagesCluster: false if Flux does not manage that cluster",
        "nothing was written",
    ]
    assert not out.exists()


def test_cluster_mode_is_accepted_for_a_cluster_flux_does_not_manage():
    cfg = KubernetesConfig(mode="cluster", context="k3s-dev", fluxManagesCluster=False)
    assert (cfg.mode, cfg.context) == ("cluster", "k3s-dev")
    assert KubernetesConfig().fluxManagesCluster is True


@pytest.mark.parametrize(("value", "shown"), [("yes", '"yes"'), (0, "0"), ("false", '"false"')])
def test_flux_manages_cluster_is_a_boolean(tmp_path, value, shown):
    text = stack_text("dev").replace(RENDER, f"{CLUSTER}    fluxManagesCluster: {value!r}\n".replace("'", '"'))
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        parse_stack_config(project_keys(tmp_path / "Pulumi.dev.yaml"), "Pulumi.dev.yaml")
    assert err.value.lines == [f"Pulumi.dev.yaml: gpu-platform:kubernetes.fluxManagesCluster: {shown}: "
                               "must be true or false; hint: write true or false unquoted"]
