"""components/gpu_app.py's spec builders, called directly on a config written here: every object a GPU app gets,
field by field, for each way its pod may reach the GPU. What the export writes for an app is exactly this."""

from __future__ import annotations

from typing import Any

import pulumi._types as pulumi_types
import pytest

from components.gpu_app import (
    DraClaim,
    deployment_args,
    namespace_args,
    network_policy_args,
    probe_start_budget,
    pvc_args,
    resource_claim_template,
    service_args,
    start_budget,
)
from model.config import AppPolicyConfig, GpuAppConfig

SELECTOR = {"app.kubernetes.io/name": "jelly"}


def plain(value: Any) -> Any:
    """Pulumi Args as the manifest's own dict (camelCase keys; a field left None is absent, as in the export)."""
    if pulumi_types.is_input_type(type(value)):
        return {k: plain(v) for k, v in pulumi_types.input_type_to_dict(value).items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def app(**overrides: Any) -> GpuAppConfig:
    return GpuAppConfig.model_validate({
        "name": "jelly", "image": "ghcr.io/x/jelly:1.2", "port": 8096, "egressClass": "internet",
        "authMode": "app-native",
        "volumes": [{"name": "config", "mountPath": "/config", "size": "10Gi", "storageClass": "local-path"},
                    {"name": "media", "mountPath": "/media", "size": "1Ti", "storageClass": "nfs",
                     "accessMode": "ReadOnlyMany", "readOnly": True},
                    {"name": "cache", "mountPath": "/cache", "size": "5Gi"}],
        **overrides})


def pod(cfg: GpuAppConfig, access: Any = "none") -> dict[str, Any]:
    return plain(deployment_args(cfg, access))["spec"]["template"]["spec"]


def probe(path: str, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": 8096}, "periodSeconds": period, "failureThreshold": failures,
            "timeoutSeconds": timeout}


# --- namespace, network policies, claims, service ------------------------------------------------------------------

def test_the_namespace_carries_the_app_policy_labels_under_the_configured_keys():
    policy = AppPolicyConfig(egressClassLabel="example.com/egress", authModeLabel="example.com/auth")
    assert plain(namespace_args(app(egressClass="lan-only", authMode="sso"), policy)) == {"metadata": {
        "name": "jelly",
        "labels": {"app-namespace": "true", "example.com/egress": "lan-only", "example.com/auth": "sso"}}}


def test_the_network_policies_are_default_deny_plus_the_apps_port_dns_and_the_internet_without_the_lan():
    meta = {"namespace": "jelly"}
    pods = {"matchLabels": SELECTOR}
    assert {name: plain(args) for name, args in network_policy_args(app()).items()} == {
        "default-deny": {"metadata": {"name": "default-deny", **meta},
                         "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}},
        "allow-jelly-ingress": {"metadata": {"name": "allow-jelly-ingress", **meta}, "spec": {
            "podSelector": pods, "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": 8096}]}]}},
        "allow-dns-egress": {"metadata": {"name": "allow-dns-egress", **meta}, "spec": {
            "podSelector": pods, "policyTypes": ["Egress"],
            "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]}},
        "allow-internet-egress": {"metadata": {"name": "allow-internet-egress", **meta}, "spec": {
            "podSelector": pods, "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0",
                                            "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]}}]}]}},
    }


def test_each_volume_with_a_storage_class_is_a_claim_named_app_dash_volume_and_scratch_space_is_none():
    assert {name: plain(args) for name, args in pvc_args(app()).items()} == {
        "jelly-config": {"metadata": {"name": "jelly-config", "namespace": "jelly"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
            "resources": {"requests": {"storage": "10Gi"}}}},
        "jelly-media": {"metadata": {"name": "jelly-media", "namespace": "jelly"}, "spec": {
            "accessModes": ["ReadOnlyMany"], "storageClassName": "nfs",
            "resources": {"requests": {"storage": "1Ti"}}}},
    }


def test_without_a_load_balancer_address_the_service_is_cluster_internal():
    assert plain(service_args(app())) == {
        "metadata": {"name": "jelly", "namespace": "jelly"},
        "spec": {"type": "ClusterIP", "selector": SELECTOR,
                 "ports": [{"name": "http", "port": 8096, "targetPort": 8096, "protocol": "TCP"}]}}


def test_a_load_balancer_address_is_pinned_through_cilium_lb_ipam():
    assert plain(service_args(app(loadBalancerIp="192.168.1.5", portName="web"))) == {
        "metadata": {"name": "jelly", "namespace": "jelly", "annotations": {"lbipam.cilium.io/ips": "192.168.1.5"}},
        "spec": {"type": "LoadBalancer", "selector": SELECTOR,
                 "ports": [{"name": "web", "port": 8096, "targetPort": 8096, "protocol": "TCP"}]}}


# --- the deployment ------------------------------------------------------------------------------------------------

def test_the_deployment_is_one_recreated_replica_selected_by_the_app_name_without_a_token():
    args = plain(deployment_args(app(), "none"))
    assert args["metadata"] == {"name": "jelly", "namespace": "jelly", "labels": SELECTOR}
    spec = args["spec"]
    assert {k: v for k, v in spec.items() if k != "template"} == {
        "replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": SELECTOR}}
    assert spec["template"]["metadata"] == {"labels": SELECTOR}
    assert set(spec["template"]["spec"]) == {"automountServiceAccountToken", "containers", "volumes"}
    assert spec["template"]["spec"]["automountServiceAccountToken"] is False


def test_an_app_without_a_gpu_gets_its_volumes_and_a_hardened_container_and_nothing_else():
    spec = pod(app())
    assert spec["volumes"] == [
        {"name": "config", "persistentVolumeClaim": {"claimName": "jelly-config"}},
        {"name": "media", "persistentVolumeClaim": {"claimName": "jelly-media", "readOnly": True}},
        {"name": "cache", "emptyDir": {"sizeLimit": "5Gi"}},
    ]
    assert spec["containers"] == [{
        "name": "jelly",
        "image": "ghcr.io/x/jelly:1.2",
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8096, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "securityContext": {"privileged": False, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        "startupProbe": probe("/", 10, 30),
        "livenessProbe": probe("/", 30, 3),
        "readinessProbe": probe("/", 10, 3),
        "volumeMounts": [{"name": "config", "mountPath": "/config"},
                         {"name": "media", "mountPath": "/media", "readOnly": True},
                         {"name": "cache", "mountPath": "/cache"}],
    }]


def test_the_apps_env_secrets_capabilities_user_probe_and_resources_reach_the_container():
    cfg = app(env={"TZ": "UTC"},
              secretEnv=[{"name": "TOKEN", "secret": "jelly-token", "key": "token"},
                         {"name": "KEY", "secret": "jelly-key", "key": "k", "optional": False}],
              capabilities=["CHOWN", "SETUID"], runAsUser=1000, runAsGroup=1001,
              probe={"path": "/health", "timeoutSeconds": 4, "startupPeriodSeconds": 7, "startupFailureThreshold": 9},
              resources={"cpuRequest": "2", "memoryRequest": "2Gi", "memoryLimit": "8Gi"},
              imageDigest="sha256:" + "b" * 64)
    (container,) = pod(cfg)["containers"]
    assert container["image"] == "ghcr.io/x/jelly:1.2@sha256:" + "b" * 64
    assert container["env"] == [
        {"name": "TZ", "value": "UTC"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "jelly-token", "key": "token", "optional": True}}},
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "jelly-key", "key": "k", "optional": False}}},
    ]
    assert container["securityContext"] == {
        "privileged": False, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETUID"]},
        "runAsUser": 1000, "runAsGroup": 1001, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert (container["startupProbe"], container["livenessProbe"], container["readinessProbe"]) == (
        probe("/health", 7, 9, 4), probe("/health", 30, 3, 4), probe("/health", 10, 3, 4))
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "8Gi"}}


def test_an_app_with_no_volumes_and_no_env_has_no_empty_lists():
    spec = pod(app(volumes=[]))
    assert "volumes" not in spec
    assert "volumeMounts" not in spec["containers"][0] and "env" not in spec["containers"][0]


def test_only_secret_env_is_still_env():
    (container,) = pod(app(secretEnv=[{"name": "TOKEN", "secret": "s", "key": "k"}]))["containers"]
    assert [e["name"] for e in container["env"]] == ["TOKEN"]


def test_the_host_path_branch_mounts_dev_dri_and_requests_no_device():
    cfg = app(hardware={"gpu": "intel-quicksync", "devices": 2})
    spec = pod(cfg, "host-path")
    (container,) = spec["containers"]
    assert spec["volumes"][-1] == {"name": "dri", "hostPath": {"path": "/dev/dri", "type": "Directory"}}
    assert container["volumeMounts"][-1] == {"name": "dri", "mountPath": "/dev/dri"}
    assert container["resources"]["limits"] == {"memory": "4Gi"}
    assert len(spec["volumes"]) == 4 and len(container["volumeMounts"]) == 4


def test_the_host_path_branch_alone_still_mounts_dev_dri():
    spec = pod(app(volumes=[]), "host-path")
    assert spec["volumes"] == [{"name": "dri", "hostPath": {"path": "/dev/dri", "type": "Directory"}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "dri", "mountPath": "/dev/dri"}]


def test_the_device_plugin_branch_requests_the_configured_number_of_devices_and_mounts_nothing():
    spec = pod(app(hardware={"gpu": "intel-quicksync", "devices": 2}), "device-plugin")
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {"memory": "4Gi", "gpu.intel.com/i915": "2"}
    assert [v["name"] for v in spec["volumes"]] == ["config", "media", "cache"]
    assert [m["name"] for m in container["volumeMounts"]] == ["config", "media", "cache"]


def test_without_gpu_access_neither_the_device_nor_dev_dri_is_there():
    spec = pod(app(hardware={"gpu": "intel-quicksync"}), "none")
    assert spec["containers"][0]["resources"]["limits"] == {"memory": "4Gi"}
    assert "dri" not in [v["name"] for v in spec["volumes"]]



def test_the_claim_branch_takes_the_pod_s_claim_from_the_app_s_template_and_no_device_request():
    spec = pod(app(hardware={"gpu": "intel-quicksync", "devices": 2}), "dra-claim")
    (container,) = spec["containers"]
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "jelly-gpu"}]
    assert container["resources"] == {"limits": {"memory": "4Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"},
                                      "claims": [{"name": "gpu"}]}
    assert [v["name"] for v in spec["volumes"]] == ["config", "media", "cache"]
    for access in ("none", "host-path", "device-plugin"):
        other = pod(app(hardware={"gpu": "intel-quicksync"}), access)
        assert "resourceClaims" not in other and "claims" not in other["containers"][0]["resources"]

# --- the start budget ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("period", "failures"), [(10, 30), (7, 9)])
def test_the_start_budget_is_the_startup_probes_worst_case_plus_the_image_pull_margin(period, failures):
    cfg = app(probe={"startupPeriodSeconds": period, "startupFailureThreshold": failures})
    budget = start_budget(cfg)
    assert budget == probe_start_budget("jelly", cfg.probe)
    assert budget.seconds == period * failures + 180
    assert budget.explanation == f"startupProbe {failures} × {period} s + 180 s image pull margin"


def test_an_image_from_a_registry_with_a_port_keeps_its_port_and_tag():
    cfg = app(image="registry.local:5000/team/jelly:1.2", imageDigest="sha256:" + "c" * 64)
    assert pod(cfg)["containers"][0]["image"] == "registry.local:5000/team/jelly:1.2@sha256:" + "c" * 64
    assert pod(app(image="registry.local:5000/team/jelly:1.2"))["containers"][0]["image"] == \
        "registry.local:5000/team/jelly:1.2"


def test_a_claim_asks_for_one_device_of_the_driver_the_slices_proved_and_shares_it_only_when_told():
    claim = resource_claim_template(app(), DraClaim(kernel_driver="i915"))
    assert claim == {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "jelly-gpu", "namespace": "jelly"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.intel.com",
            "selectors": [{"cel": {"expression": 'device.attributes["gpu.intel.com"].driver == "i915"'}}]}}]}}}}
    shared = resource_claim_template(app(hardware={"devices": 2}), DraClaim(kernel_driver="xe", admin_access=True))
    exactly = shared["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["count"], exactly["adminAccess"]) == (2, True)
    assert exactly["selectors"][0]["cel"]["expression"].endswith('.driver == "xe"')
