"""The hardening policies on hand-written workloads: where each applies (app namespaces, the GPU plugin), in every
container list, and where each threshold lies. Pure: the rules alone, no mock engine."""

from __future__ import annotations

import pytest

from policy.rules import Resource, Settings, evaluate

PLUGIN_IMAGE = "docker.io/intel/intel-gpu-plugin:0.37.0"
APP_IMAGE = "docker.io/plexinc/pms-docker:1.42.2"
CONTAINER_LISTS = ["containers", "initContainers", "ephemeralContainers"]
NO_TOKEN = "the pod mounts a service-account token it never uses (automountServiceAccountToken is not false)"


def namespace(name: str, app: bool = True) -> Resource:
    labels = {"app-namespace": "true", "egress-class": "internet", "auth-mode": "app-native"} if app else {}
    return Resource("kubernetes:core/v1:Namespace", f"{name}-ns", f"urn:{name}-ns",
                    {"metadata": {"name": name, "labels": labels}})


def deny_all(ns: str) -> Resource:
    return Resource("kubernetes:networking.k8s.io/v1:NetworkPolicy", f"{ns}-deny", f"urn:{ns}-deny",
                    {"metadata": {"name": "default-deny", "namespace": ns},
                     "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}})


def deployment(ns: str, pod: dict, name: str = "w") -> Resource:
    return Resource("kubernetes:apps/v1:Deployment", f"{ns}-{name}", f"urn:{ns}-{name}",
                    {"metadata": {"name": name, "namespace": ns},
                     "spec": {"selector": {"matchLabels": {"app": name}},
                              "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}})


def container(name: str = "c", image: str = APP_IMAGE, **fields) -> dict:
    return {"name": name, "image": image, "securityContext": {"capabilities": {"drop": ["ALL"]}}, **fields}


def hardened(*extra: tuple[str, dict], **pod_fields) -> dict:
    pod = {"automountServiceAccountToken": False, "containers": [container("app")], **pod_fields}
    for container_list, c in extra:
        pod.setdefault(container_list, []).append(c)
    return pod


def found(resources: list[Resource], policy: str) -> list[tuple[str, str]]:
    return [(v.resource.ref, v.problem) for v in evaluate(resources, Settings()) if v.policy == policy]


WORLD = [namespace("media"), deny_all("media"), namespace("kube-system", app=False)]


def test_hardened_app_and_plugin_workloads_pass_every_policy():
    plugin = hardened(("initContainers", container("plugin", PLUGIN_IMAGE)))
    resources = [*WORLD, namespace("intel-gpu-plugin", app=False), deny_all("intel-gpu-plugin"),
                 deployment("media", hardened()), deployment("intel-gpu-plugin", plugin)]
    assert [str(v) for v in evaluate(resources, Settings())] == []


# --- no-service-account-token ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("automount", [None, True, "false"], ids=["absent", "true", "string-false"])
def test_an_app_pod_that_does_not_say_false_to_the_token_is_refused(automount):
    pod = hardened()
    pod.pop("automountServiceAccountToken")
    if automount is not None:
        pod["automountServiceAccountToken"] = automount
    assert found([*WORLD, deployment("media", pod)], "no-service-account-token") == [("Deployment media/w", NO_TOKEN)]


@pytest.mark.parametrize("container_list", CONTAINER_LISTS)
def test_the_plugin_needs_no_token_in_any_namespace_wherever_its_container_is_listed(container_list):
    pod = hardened((container_list, container("plugin", PLUGIN_IMAGE)))
    pod.pop("automountServiceAccountToken")
    assert found([*WORLD, deployment("kube-system", pod)], "no-service-account-token") == [
        ("Deployment kube-system/w", NO_TOKEN)]


def test_other_workloads_outside_app_namespaces_may_keep_their_token():
    pod = hardened(("containers", container("nameless-image", image="")))
    pod.pop("automountServiceAccountToken")
    assert found([*WORLD, deployment("kube-system", pod)], "no-service-account-token") == []


# --- drop-all-capabilities -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("container_list", CONTAINER_LISTS)
@pytest.mark.parametrize("capabilities", [None, {}, {"drop": ["NET_RAW"]}], ids=["absent", "empty", "drops-one"])
def test_an_app_container_in_any_list_that_does_not_drop_all_is_refused_by_name(container_list, capabilities):
    c = container()
    c["securityContext"] = {} if capabilities is None else {"capabilities": capabilities}
    assert found([*WORLD, deployment("media", hardened((container_list, c)))], "drop-all-capabilities") == [
        ("Deployment media/w", "container c keeps the runtime's default capabilities (no drop: [ALL])")]


@pytest.mark.parametrize("container_list", CONTAINER_LISTS)
def test_an_app_container_in_any_list_that_adds_back_host_level_capabilities_is_refused_naming_them(container_list):
    c = container(securityContext={"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}})
    assert found([*WORLD, deployment("media", hardened((container_list, c)))], "drop-all-capabilities") == [
        ("Deployment media/w", "container c adds back NET_RAW, SYS_ADMIN")]


def test_an_app_container_may_add_back_what_an_images_init_needs():
    c = container(securityContext={"capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETUID", "SETGID"]}})
    assert found([*WORLD, deployment("media", hardened(("containers", c)))], "drop-all-capabilities") == []


def test_capabilities_are_the_app_namespaces_business_only_and_every_app_workload_is_checked():
    loose = container(securityContext={})
    resources = [*WORLD, deployment("kube-system", hardened(("containers", loose)), name="first"),
                 deployment("media", hardened(("containers", loose)), name="second")]
    assert found(resources, "drop-all-capabilities") == [
        ("Deployment media/second", "container c keeps the runtime's default capabilities (no drop: [ALL])")]


# --- probe-timeouts --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("container_list", CONTAINER_LISTS)
@pytest.mark.parametrize("probe", ["startupProbe", "livenessProbe", "readinessProbe"])
@pytest.mark.parametrize("timeout,shown", [(None, "1 (default)"), (1, "1"), (0, "0")])
def test_every_probe_of_an_app_container_in_any_list_waits_two_seconds_or_is_refused(container_list, probe, timeout,
                                                                                      shown):
    check = {"httpGet": {"path": "/identity", "port": 32400},
             **({} if timeout is None else {"timeoutSeconds": timeout})}
    c = {**container(), probe: check}
    assert found([*WORLD, deployment("media", hardened((container_list, c)))], "probe-timeouts") == [
        ("Deployment media/w",
         f"container c {probe} has timeoutSeconds {shown}, below 2: a busy but healthy app fails it")]


@pytest.mark.parametrize("timeout", [2, 5])
def test_a_probe_that_waits_two_seconds_or_more_passes(timeout):
    c = container(livenessProbe={"tcpSocket": {"port": 32400}, "timeoutSeconds": timeout})
    assert found([*WORLD, deployment("media", hardened(("containers", c)))], "probe-timeouts") == []


def test_probe_timeouts_are_the_app_namespaces_business_only_and_every_app_workload_is_checked():
    c = container(readinessProbe={"tcpSocket": {"port": 80}})
    resources = [*WORLD, deployment("kube-system", hardened(("containers", c)), name="first"),
                 deployment("media", hardened(("containers", c)), name="second")]
    assert found(resources, "probe-timeouts") == [
        ("Deployment media/second", "container c readinessProbe has timeoutSeconds 1 (default), below 2: a busy but "
                                    "healthy app fails it")]


# --- intel-gpu-plugin-namespace-default-deny -------------------------------------------------------------------------

def test_the_plugins_namespace_must_deny_all_traffic_and_a_deny_elsewhere_does_not_count():
    plugin = deployment("intel-gpu-plugin", hardened(("containers", container("plugin", PLUGIN_IMAGE))))
    assert found([*WORLD, plugin], "intel-gpu-plugin-namespace-default-deny") == [
        ("Deployment intel-gpu-plugin/w", "namespace intel-gpu-plugin of the GPU plugin has no default-deny "
                                          "NetworkPolicy (it needs no network)")]
    assert found([*WORLD, plugin, deny_all("intel-gpu-plugin")], "intel-gpu-plugin-namespace-default-deny") == []
