"""Plex: namespace labels, NetworkPolicy baseline, Deployment shape, both GPU modes, nothing privileged anywhere."""

from __future__ import annotations

from typing import Any

import pytest

from builders import project_keys, registration, registrations
from components.gpu_app import deployment_args as app_deployment_args, namespace_args as app_namespace_args
from components.plex import plex_app
from conftest import COMPLETE_PROD_EVIDENCE, EXAMPLE, stack_text
from model.config import AppPolicyConfig, PlexConfig
from model.evidence import GpuAccess

DEPLOY = "kubernetes:apps/v1:Deployment"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def plex_config(**hardware) -> PlexConfig:
    raw = project_keys(EXAMPLE / "Pulumi.prod.yaml")["plex"]
    raw["hardware"] = hardware
    return PlexConfig.model_validate(raw)


# The builders' Args, read as built: plain nested Args objects (their declared Input types also allow Outputs and
# awaitables, which a pure builder never returns), hence Any.
def namespace_args(cfg: PlexConfig, policy: AppPolicyConfig) -> Any:
    return app_namespace_args(plex_app(cfg), policy)


def deployment_args(cfg: PlexConfig, access: GpuAccess) -> Any:
    return app_deployment_args(plex_app(cfg), access)


def pod(capture) -> dict:
    return registration(capture, DEPLOY, "plex-deployment").inputs["spec"]["template"]["spec"]


def test_namespace_carries_the_app_policy_labels_from_config(captures):
    ns = registration(captures["prod"], "kubernetes:core/v1:Namespace", "plex-namespace").inputs
    assert ns["metadata"]["labels"] == {"app-namespace": "true", "egress-class": "internet", "auth-mode": "app-native"}


def test_label_keys_come_from_the_app_policy_config():
    args = namespace_args(plex_config(gpu="none"), AppPolicyConfig(egressClassLabel="net.example/egress",
                                                                  authModeLabel="auth.example/mode"))
    assert args.metadata.labels == {"app-namespace": "true", "net.example/egress": "internet",
                                    "auth.example/mode": "app-native"}


def test_default_deny_baseline_and_the_three_allows(captures):
    policies = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in registrations(captures["prod"], NETPOL)}
    assert sorted(policies) == ["allow-dns-egress", "allow-internet-egress", "allow-plex-ingress", "default-deny"]
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert policies["allow-plex-ingress"]["ingress"] == [{"ports": [{"port": 32400, "protocol": "TCP"}]}]
    assert {p["port"] for p in policies["allow-dns-egress"]["egress"][0]["ports"]} == {53}
    assert policies["allow-internet-egress"]["egress"][0]["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"


def test_deployment_is_recreate_with_pinned_image_probes_and_env(captures):
    d = registration(captures["prod"], DEPLOY, "plex-deployment").inputs
    assert d["spec"]["strategy"] == {"type": "Recreate"}
    (c,) = d["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "docker.io/plexinc/pms-docker:1.42.2.10156-f737b826c"
    env = {e["name"]: e for e in c["env"]}
    assert env["TZ"]["value"] == "Europe/Berlin" and env["PLEX_UID"]["value"] == "1000"
    assert env["PLEX_GID"]["value"] == "1000"
    assert env["ADVERTISE_IP"]["value"] == "http://192.168.10.40:32400/"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/identity", "port": 32400}, probe


def test_claim_token_is_referenced_by_secret_name_only(captures):
    (c,) = pod(captures["prod"])["containers"]
    claim = next(e for e in c["env"] if e["name"] == "PLEX_CLAIM")
    assert "value" not in claim
    assert claim["valueFrom"]["secretKeyRef"]["name"] == "plex-claim-token"
    assert not registrations(captures["prod"], "kubernetes:core/v1:Secret"), "no Secret object is declared"


def test_storage_classes_come_from_config(captures):
    pvcs = {r.inputs["metadata"]["name"]: r.inputs["spec"]
            for r in registrations(captures["prod"], "kubernetes:core/v1:PersistentVolumeClaim")}
    assert pvcs["plex-config"]["storageClassName"] == "local-path"
    assert pvcs["plex-media"]["storageClassName"] == "nfs-media"
    volumes = {v["name"]: v for v in pod(captures["prod"])["volumes"]}
    assert volumes["transcode"]["emptyDir"] == {"sizeLimit": "30Gi"}


def test_service_exposes_32400(captures):
    svc = registration(captures["prod"], "kubernetes:core/v1:Service", "plex-service").inputs
    assert svc["spec"]["ports"] == [{"name": "pms", "port": 32400, "protocol": "TCP", "targetPort": 32400}]


def test_gpu_none_has_neither_hostpath_nor_resource_request():
    spec = deployment_args(plex_config(gpu="none"), "none").spec.template.spec
    assert "gpu.intel.com/i915" not in spec.containers[0].resources.limits
    assert not any(v.host_path for v in spec.volumes)


def test_intel_quicksync_host_path_mode_mounts_dev_dri_and_requests_no_resource(captures):
    assert captures["prod"].stack_outputs["plexGpuAccess"] == "host-path"  # no evidence in the project
    spec = pod(captures["prod"])
    (c,) = spec["containers"]
    assert {"name": "dri", "hostPath": {"path": "/dev/dri", "type": "Directory"}} in spec["volumes"]
    assert "gpu.intel.com/i915" not in c["resources"]["limits"]


def test_intel_quicksync_device_plugin_mode_requests_i915_and_has_no_hostpath(run_stack_text):
    capture = run_stack_text(stack_text("prod"), stack="prod", evidence=COMPLETE_PROD_EVIDENCE)
    spec = pod(capture)
    (c,) = spec["containers"]
    assert c["resources"]["limits"]["gpu.intel.com/i915"] == "1"
    assert not any("hostPath" in v for v in spec["volumes"])
    assert not any(m["mountPath"] == "/dev/dri" for m in c["volumeMounts"])


def _walk(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}.{k}", k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_nothing_anywhere_is_privileged_uses_host_namespaces_or_supplemental_groups(captures, stack):
    for reg in captures[stack].registrations:
        for path, key, value in _walk(reg.inputs):
            where = f"{reg.type} {reg.name}{path}"
            assert not (key == "privileged" and value is True), where
            assert not (key in ("hostNetwork", "hostPID", "hostIPC") and value is True), where
            assert key != "supplementalGroups", where
