"""The exported DaemonSet equals the upstream base except for deliberate differences, each asserted on its own."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ruamel.yaml import YAML

from builders import project_keys, registration
from components.intel_gpu_plugin import daemonset_args, plugin_args
from conftest import EXAMPLE, FIXTURES
from model.config import ConfigError, IntelGpuPluginConfig, parse_stack_config
from model.images import INTEL_GPU_PLUGIN_TAG

UPSTREAM = YAML(typ="safe", pure=True).load(
    (FIXTURES / "upstream" / "intel-gpu-plugin" / "upstream-base-rendered.yaml").read_text())
DS = "kubernetes:apps/v1:DaemonSet"
PROD_DIGEST = "sha256:7001200071db10587fc31184eedda4f5cf291efba737adf85a8c80539f7fa5e1"


def daemonset(capture) -> dict:
    return registration(capture, DS, "intel-gpu-plugin-daemonset").inputs


def container(manifest: dict) -> dict:
    (only,) = manifest["spec"]["template"]["spec"]["containers"]
    return only


def apply_deliberate_differences(upstream: dict, image: str) -> dict:
    expected = copy.deepcopy(upstream)
    expected["metadata"]["namespace"] = "intel-gpu-plugin"
    c = container(expected)
    c["image"] = image
    c["resources"]["limits"]["memory"] = "115Mi"
    expected["spec"]["template"]["spec"]["automountServiceAccountToken"] = False
    return expected


@pytest.mark.parametrize("stack,image", [
    ("dev", f"docker.io/intel/intel-gpu-plugin:0.37.0@{PROD_DIGEST}"),
    ("prod", f"docker.io/intel/intel-gpu-plugin:0.37.0@{PROD_DIGEST}"),
])
def test_daemonset_is_upstream_base_plus_only_the_deliberate_differences(captures, stack, image):
    assert daemonset(captures[stack]) == apply_deliberate_differences(UPSTREAM, image), (
        f"{stack}: DaemonSet intel-gpu-plugin drifted from upstream beyond the deliberate differences")


def test_difference_namespace_is_intel_gpu_plugin(captures):
    assert "namespace" not in UPSTREAM["metadata"]
    assert daemonset(captures["prod"])["metadata"]["namespace"] == "intel-gpu-plugin"


def test_difference_image_is_0_37_0_from_docker_io_with_no_v_in_the_tag(captures):
    assert container(UPSTREAM)["image"] == "intel/intel-gpu-plugin:0.36.0"
    image = container(daemonset(captures["dev"]))["image"]
    assert image == f"docker.io/intel/intel-gpu-plugin:0.37.0@{PROD_DIGEST}"
    assert not INTEL_GPU_PLUGIN_TAG.startswith("v")


def test_difference_image_is_pinned_by_tag_and_digest_together_in_every_stack(captures):
    from model.images import INTEL_GPU_PLUGIN_DIGEST, RECORDED_DIGESTS
    assert INTEL_GPU_PLUGIN_DIGEST == PROD_DIGEST
    assert RECORDED_DIGESTS["docker.io/intel/intel-gpu-plugin"] == {INTEL_GPU_PLUGIN_TAG: INTEL_GPU_PLUGIN_DIGEST}
    for stack in captures:
        assert container(daemonset(captures[stack]))["image"].endswith(f":0.37.0@{PROD_DIGEST}"), stack


def test_difference_memory_limit_is_115Mi(captures):  # noqa: N802  115Mi as the manifest spells it (mi would be milli)
    assert container(UPSTREAM)["resources"]["limits"]["memory"] == "90Mi"
    assert container(daemonset(captures["prod"]))["resources"]["limits"]["memory"] == "115Mi"


def test_no_args_at_the_default_shared_dev_num_of_1(captures):
    assert "args" not in container(UPSTREAM)
    assert "args" not in container(daemonset(captures["prod"]))
    assert plugin_args(IntelGpuPluginConfig()) == []


def test_shared_dev_num_argument_appears_only_when_config_sets_a_count_above_1():
    cfg = IntelGpuPluginConfig(sharedDevNum=3, sharedDevNumReason="measured three 1080p streams")
    assert plugin_args(cfg) == ["-shared-dev-num=3"]
    args: Any = daemonset_args(cfg)  # read as built: plain Args objects, no Outputs (the declared types allow them)
    assert args.spec.template.spec.containers[0].args == ["-shared-dev-num=3"]


def test_health_management_is_refused_by_the_config_model():
    keys = {**project_keys(EXAMPLE / "Pulumi.prod.yaml"), "intelGpuPlugin": {"extraArgs": ["-health-management"]}}
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(keys, "Pulumi.prod.yaml")
    assert caught.value.lines == [
        'Pulumi.prod.yaml: gpu-platform:intelGpuPlugin.extraArgs: ["-health-management"]: \'-health-management\' is '
        "refused: needs the intel-gpu-levelzero sidecar, which opens the GPU itself and so runs privileged upstream "
        "(overlays/levelzero; issue #2278); this DaemonSet is deliberately not privileged and has no sidecar or "
        "Level-Zero socket volume; hint: remove it"]


def test_dev_dri_and_sys_class_drm_are_read_only_and_cdi_is_writable(captures):
    mounts = {m["mountPath"]: m for m in container(daemonset(captures["prod"]))["volumeMounts"]}
    assert mounts["/dev/dri"].get("readOnly") is True
    assert mounts["/sys/class/drm"].get("readOnly") is True
    assert not mounts["/var/run/cdi"].get("readOnly", False), "the plugin writes CDI specs to /var/run/cdi"


def test_plugin_is_not_privileged_and_has_no_supplemental_groups(captures):
    manifest = daemonset(captures["prod"])
    security = container(manifest)["securityContext"]
    assert security.get("privileged", False) is False
    assert security["allowPrivilegeEscalation"] is False
    assert "supplementalGroups" not in manifest["spec"]["template"]["spec"].get("securityContext", {})


def test_no_node_feature_discovery_selector(captures):
    selector = daemonset(captures["prod"])["spec"]["template"]["spec"]["nodeSelector"]
    assert selector == {"kubernetes.io/arch": "amd64"}
    assert not any(key.startswith("intel.feature.node.kubernetes.io") for key in selector)


def test_difference_no_service_account_token_in_the_plugin_pod(captures):
    assert daemonset(captures["prod"])["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_the_plugin_namespace_denies_all_traffic(captures):
    policy = registration(captures["prod"], "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                          "intel-gpu-plugin-default-deny")
    assert policy.inputs["metadata"] == {"name": "default-deny", "namespace": "intel-gpu-plugin"}
    assert policy.inputs["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_no_operator_and_nothing_but_namespace_daemonset_and_deny_all_in_the_component(captures):
    by_urn = captures["prod"].by_urn()
    component = registration(captures["prod"], "gpu-platform:components:IntelGpuPlugin", "intel-gpu-plugin")
    children = sorted(r.type for r in captures["prod"].registrations if r.parent == component.urn)
    assert children == ["kubernetes:apps/v1:DaemonSet", "kubernetes:core/v1:Namespace",
                        "kubernetes:networking.k8s.io/v1:NetworkPolicy"]
    assert not any("deviceplugin.intel.com" in r.type for r in by_urn.values()), "no Intel operator CRs"


def test_namespace_is_labelled_not_an_app_namespace(captures):
    ns = registration(captures["prod"], "kubernetes:core/v1:Namespace", "intel-gpu-plugin-namespace").inputs
    assert ns["metadata"] == {"name": "intel-gpu-plugin", "labels": {"app-namespace": "false"}}
