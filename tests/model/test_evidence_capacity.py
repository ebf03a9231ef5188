"""The capacity check: the GPU apps on the device-plugin path must all fit, at once, on what the nodes advertise,
each app's one pod taking its devices from a single node. Pure: evidence and requests built by hand."""

from __future__ import annotations

import pytest

from model.evidence import Evidence, EvidenceError, GpuRequest, check_capacity

SRC = "evidence/prod.yaml"
HINT = ("hint: hold an app back with intelGpuAccess: host-path, request fewer devices, or raise the plugin's "
        "sharedDevNum (with its reason) and record new evidence")


def app(name: str, devices: int, index: int = 0) -> GpuRequest:
    return GpuRequest(name, f"apps[{index}].hardware.devices", devices)


def refused(requests: list[GpuRequest], nodes: dict[str, int]) -> list[str]:
    try:
        check_capacity(requests, Evidence(SRC, nodes), "prod")
    except EvidenceError as exc:
        return exc.lines
    return []


def test_one_device_per_app_fits_while_there_are_as_many_nodes_with_a_device():
    nodes = {"k3s-prod-1": 1, "k3s-prod-2": 1, "k3s-prod-3": 1}
    assert refused([app("plex", 1), app("jellyfin", 1), app("tdarr", 1)], nodes) == []


def test_a_pod_cannot_take_its_devices_from_two_nodes_and_the_refusal_says_what_was_asked_and_advertised():
    assert refused([app("plex", 1, 0), app("jellyfin", 2, 1)], {"k3s-prod-2": 1, "k3s-prod-1": 1, "k3s-prod-3": 1}) == [
        "Pulumi.prod.yaml: gpu-platform:apps[1].hardware.devices: 2: jellyfin does not fit: the apps on the "
        "device-plugin path request 3 gpu.intel.com/i915 in all (jellyfin (2), plex (1)), the nodes advertise "
        "k3s-prod-1=1, k3s-prod-2=1, k3s-prod-3=1 (evidence/prod.yaml), and a pod takes its devices from one node; "
        f"jellyfin would stay Unschedulable; {HINT}"]


@pytest.mark.parametrize("devices,fits", [(1, True), (2, True), (3, False)])
def test_a_request_fits_a_node_that_advertises_at_least_as_many_devices(devices, fits):
    assert (refused([app("plex", devices)], {"k3s-prod-1": 2}) == []) is fits


def test_two_apps_fit_on_one_shared_device_node_only_while_its_count_lasts():
    assert refused([app("plex", 1), app("jellyfin", 1)], {"k3s-prod-1": 2}) == []
    assert refused([app("plex", 1), app("jellyfin", 2, 1)], {"k3s-prod-1": 2}) == [
        "Pulumi.prod.yaml: gpu-platform:apps[0].hardware.devices: 1: plex does not fit: the apps on the "
        "device-plugin path request 3 gpu.intel.com/i915 in all (jellyfin (2), plex (1)), the nodes advertise "
        "k3s-prod-1=2 (evidence/prod.yaml), and a pod takes its devices from one node; plex would stay Unschedulable; "
        f"{HINT}"]


def test_the_largest_request_is_placed_first_so_a_fit_that_exists_is_found():
    # In the order given, plex would take the 2-device node and jellyfin would find no node with 2 left.
    assert refused([app("plex", 1), app("jellyfin", 2)], {"k3s-prod-1": 2, "k3s-prod-2": 1}) == []


def test_every_app_that_does_not_fit_gets_its_own_line():
    lines = refused([app("plex", 2, 0), app("jellyfin", 3, 1), app("tdarr", 1, 2)], {"k3s-prod-1": 1})
    asked = ("the apps on the device-plugin path request 6 gpu.intel.com/i915 in all (jellyfin (3), plex (2), "
             "tdarr (1)), the nodes advertise k3s-prod-1=1 (evidence/prod.yaml), and a pod takes its devices from "
             "one node")
    assert lines == [
        f"Pulumi.prod.yaml: gpu-platform:apps[1].hardware.devices: 3: jellyfin does not fit: {asked}; jellyfin would "
        f"stay Unschedulable; {HINT}",
        f"Pulumi.prod.yaml: gpu-platform:apps[0].hardware.devices: 2: plex does not fit: {asked}; plex would stay "
        f"Unschedulable; {HINT}"]


def test_when_equal_requests_compete_for_the_last_device_the_later_name_is_the_one_refused():
    assert refused([app("plex", 1, 0), app("jellyfin", 1, 1)], {"k3s-prod-1": 1}) == [
        "Pulumi.prod.yaml: gpu-platform:apps[0].hardware.devices: 1: plex does not fit: the apps on the "
        "device-plugin path request 2 gpu.intel.com/i915 in all (jellyfin (1), plex (1)), the nodes advertise "
        "k3s-prod-1=1 (evidence/prod.yaml), and a pod takes its devices from one node; plex would stay Unschedulable; "
        f"{HINT}"]


def test_without_evidence_or_without_requests_there_is_nothing_to_check():
    check_capacity([app("plex", 9)], Evidence(SRC, None), "prod")
    assert refused([], {"k3s-prod-1": 1}) == []
