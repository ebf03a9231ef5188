"""Each policy with one failing and one passing case, and the offline run inside the export."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from builders import capture_tree, registration
from conftest import stack_text
from gitops.checks.validate import check_policies
from model.labels import SHARED_DEV_NUM_REASON_ANNOTATION
from model.outputs import AppPolicy
from policy.rules import RULES, Resource, Settings, evaluate, from_struct

NS = "kubernetes:core/v1:Namespace"
NP = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
DEPLOY = "kubernetes:apps/v1:Deployment"
DS = "kubernetes:apps/v1:DaemonSet"


def resources_of(capture) -> list[Resource]:
    return [Resource(r.type, r.name, r.urn, copy.deepcopy(r.inputs)) for r in capture.registrations
            if r.type.startswith("kubernetes:")]


def edit(resources, type_, name, mutate) -> list[Resource]:
    out = []
    for r in resources:
        if r.type == type_ and r.name == name:
            props = copy.deepcopy(dict(r.props))
            mutate(props)
            r = Resource(r.type, r.name, r.urn, props)
        out.append(r)
    return out


def violations(resources, policy: str) -> list[str]:
    return [str(v) for v in evaluate(resources, Settings()) if v.policy == policy]


def plex_container(props):
    return props["spec"]["template"]["spec"]["containers"][0]


def plugin_container(props):
    return props["spec"]["template"]["spec"]["containers"][0]


@pytest.fixture
def prod(captures):
    return resources_of(captures["prod"])


def test_the_shipped_stacks_violate_no_policy(captures):
    for capture in captures.values():
        assert evaluate(resources_of(capture), Settings()) == []


def as_struct(value: Any) -> Any:
    """Props as the real analyzer hands them over: every number a double (a protobuf Struct)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, dict, list)):
        return value
    if isinstance(value, dict):
        return {k: as_struct(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_struct(v) for v in value]
    return float(value)


def test_props_from_the_analyzer_have_their_integers_back_so_the_shipped_stacks_still_pass(captures):
    """Under `pulumi preview --policy-pack` the probe timeouts arrive as 5.0: read as such, probe-timeouts refused
    every shipped stack (found by the real analyzer, tests/e2e)."""
    for capture in captures.values():
        struct = [Resource(r.type, r.name, r.urn, as_struct(r.props)) for r in resources_of(capture)]
        assert [v.policy for v in evaluate(struct, Settings())].count("probe-timeouts") == 3
        assert evaluate([Resource(r.type, r.name, r.urn, from_struct(r.props)) for r in struct], Settings()) == []


def test_from_struct_keeps_fractions_booleans_and_strings():
    assert from_struct({"a": [1.0, 1.5, True, "2.0"], "b": {"c": 0.0}}) == {"a": [1, 1.5, True, "2.0"], "b": {"c": 0}}
    assert isinstance(from_struct(True), bool) and isinstance(from_struct(3.0), int)


def test_from_struct_unwraps_read_only_proxies_at_every_depth():
    """pulumi-policy hands props over as Mapping and Sequence proxies, not dicts and lists."""
    from collections.abc import Mapping, Sequence
    from types import MappingProxyType

    class Frozen(Sequence):
        def __init__(self, items):
            self.items = tuple(items)

        def __getitem__(self, i):
            return self.items[i]

        def __len__(self):
            return len(self.items)

    proxied = MappingProxyType({"spec": Frozen([MappingProxyType({"timeoutSeconds": 5.0})])})
    plain = from_struct(proxied)
    assert plain == {"spec": [{"timeoutSeconds": 5}]}
    assert type(plain["spec"]) is list and type(plain["spec"][0]) is dict
    assert isinstance(proxied, Mapping) and not isinstance(proxied, dict)


def test_every_rule_is_mandatory():
    assert all(rule.mandatory for rule in RULES) and len(RULES) == 14


@pytest.mark.parametrize("mutate,problem", [
    (lambda p: plex_container(p).setdefault("securityContext", {}).update(privileged=True),
     "container plex is privileged"),
    (lambda p: p["spec"]["template"]["spec"].update(hostNetwork=True), "hostNetwork: true"),
    (lambda p: p["spec"]["template"]["spec"].update(hostPID=True), "hostPID: true"),
    (lambda p: p["spec"]["template"]["spec"].update(hostIPC=True), "hostIPC: true"),
])
def test_restrict_host_namespaces_fails_in_an_app_namespace(prod, mutate, problem):
    found = violations(edit(prod, DEPLOY, "plex-deployment", mutate), "restrict-host-namespaces")
    assert found == [f"policy restrict-host-namespaces: Deployment plex/plex (plex-deployment): {problem} in app "
                     "namespace plex; hint: drop privileged/host* from the pod spec; GPU access comes from the device "
                     "plugin's resource"]


def test_restrict_host_namespaces_ignores_non_app_namespaces(prod):
    relabel = edit(prod, NS, "plex-namespace", lambda p: p["metadata"]["labels"].update({"app-namespace": "false"}))
    privileged = edit(relabel, DEPLOY, "plex-deployment",
                      lambda p: p["spec"]["template"]["spec"].update(hostNetwork=True))
    assert violations(privileged, "restrict-host-namespaces") == []


@pytest.mark.parametrize("policy,label", [("require-egress-class-label", "egress-class"),
                                          ("require-auth-mode-label", "auth-mode")])
def test_app_namespace_labels_are_required(prod, policy, label):
    assert violations(prod, policy) == []
    found = violations(edit(prod, NS, "plex-namespace", lambda p: p["metadata"]["labels"].pop(label)), policy)
    key = {"egress-class": "egressClass", "auth-mode": "authMode"}[label]
    assert found == [f"policy {policy}: Namespace plex (plex-namespace): app namespace plex has no '{label}' label; "
                     f"hint: set plex.{key} (and appPolicy.{key}Label) in the stack config"]


def test_label_keys_follow_the_settings(prod):
    found = [str(v) for v in evaluate(prod, Settings(egress_class_label="net/egress"))
             if v.policy == "require-egress-class-label"]
    assert found == ["policy require-egress-class-label: Namespace plex (plex-namespace): app namespace plex has no "
                     "'net/egress' label; hint: set plex.egressClass (and appPolicy.egressClassLabel) in the stack "
                     "config"]


def test_default_deny_baseline_is_required(prod):
    assert violations(prod, "require-default-deny-baseline") == []
    without = [r for r in prod if not (r.type == NP and r.props["metadata"]["name"] == "default-deny")]
    refused = ["policy require-default-deny-baseline: Namespace plex (plex-namespace): app namespace plex has no "
               "default-deny NetworkPolicy (podSelector {}, Ingress+Egress, no rules); hint: declare a NetworkPolicy "
               "with podSelector {} and policyTypes [Ingress, Egress] and no rules"]
    assert violations(without, "require-default-deny-baseline") == refused
    leaky = edit(prod, NP, "plex-default-deny", lambda p: p["spec"].update(policyTypes=["Ingress"]))
    assert violations(leaky, "require-default-deny-baseline") == refused


def test_plugin_health_management_is_refused(prod):
    assert violations(prod, "intel-gpu-plugin-no-health-management") == []
    bad = edit(prod, DS, "intel-gpu-plugin-daemonset",
               lambda p: plugin_container(p).update(args=["-health-management"]))
    assert violations(bad, "intel-gpu-plugin-no-health-management") == [
        "policy intel-gpu-plugin-no-health-management: DaemonSet intel-gpu-plugin/intel-gpu-plugin "
        "(intel-gpu-plugin-daemonset): container intel-gpu-plugin runs -health-management (Level-Zero sidecar opens "
        "the device: EPERM); hint: remove -health-management from intelGpuPlugin.extraArgs"]


@pytest.mark.parametrize("path", ["/dev/dri", "/sys/class/drm"])
def test_plugin_device_mounts_must_be_read_only(prod, path):
    assert violations(prod, "intel-gpu-plugin-read-only-device-mounts") == []

    def writable(p):
        for m in plugin_container(p)["volumeMounts"]:
            if m["mountPath"] == path:
                m.pop("readOnly")
    found = violations(edit(prod, DS, "intel-gpu-plugin-daemonset", writable),
                       "intel-gpu-plugin-read-only-device-mounts")
    assert found == ["policy intel-gpu-plugin-read-only-device-mounts: DaemonSet intel-gpu-plugin/intel-gpu-plugin "
                     f"(intel-gpu-plugin-daemonset): container intel-gpu-plugin mounts {path} writable; hint: set "
                     "readOnly: true on the plugin's /dev/dri and /sys/class/drm mounts"]


def test_shared_dev_num_above_1_needs_a_recorded_reason(prod):
    shared = edit(prod, DS, "intel-gpu-plugin-daemonset",
                  lambda p: plugin_container(p).update(args=["-shared-dev-num=4"]))
    found = violations(shared, "intel-gpu-plugin-shared-dev-num-reason")
    assert found == ["policy intel-gpu-plugin-shared-dev-num-reason: DaemonSet intel-gpu-plugin/intel-gpu-plugin "
                     "(intel-gpu-plugin-daemonset): -shared-dev-num=4 without a recorded reason; hint: set "
                     "intelGpuPlugin.sharedDevNumReason (exported as the gpu-platform.home.arpa/shared-dev-num-reason "
                     "annotation)"]
    reasoned = edit(shared, DS, "intel-gpu-plugin-daemonset",
                    lambda p: p["metadata"].setdefault("annotations", {}).update(
                        {SHARED_DEV_NUM_REASON_ANNOTATION: "measured"}))
    assert violations(reasoned, "intel-gpu-plugin-shared-dev-num-reason") == []


@pytest.mark.parametrize("image,ok", [
    ("docker.io/plexinc/pms-docker:latest", False), ("docker.io/plexinc/pms-docker", False),
    ("registry:5000/plex", False), ("docker.io/plexinc/pms-docker:1.42.2", True),
    ("docker.io/plexinc/pms-docker@sha256:" + "a" * 64, True),
])
def test_images_are_pinned(prod, image, ok):
    found = violations(edit(prod, DEPLOY, "plex-deployment", lambda p: plex_container(p).update(image=image)),
                       "pinned-image-tags")
    assert (found == []) is ok, found


def test_the_program_records_the_shared_dev_num_reason_so_the_policy_passes(run_stack_text):
    text = stack_text("dev").replace("  gpu-platform:flux:\n", "  gpu-platform:intelGpuPlugin:\n    sharedDevNum: 2\n"
                                     "    sharedDevNumReason: two 1080p streams measured\n  gpu-platform:flux:\n", 1)
    capture = run_stack_text(text)
    ds = registration(capture, DS, "intel-gpu-plugin-daemonset").inputs
    assert ds["metadata"]["annotations"] == {SHARED_DEV_NUM_REASON_ANNOTATION: "two 1080p streams measured"}
    assert evaluate(resources_of(capture), Settings()) == []


def test_the_export_runs_the_policies_offline_and_names_resource_policy_and_fix(captures):
    import dataclasses
    regs = []
    for r in captures["prod"].registrations:
        if r.name == "plex-deployment":
            inputs = copy.deepcopy(r.inputs)
            inputs["spec"]["template"]["spec"]["hostPID"] = True
            r = dataclasses.replace(r, inputs=inputs)
        regs.append(r)
    lines = check_policies(capture_tree(dataclasses.replace(captures["prod"], registrations=regs)), AppPolicy())
    assert lines == ["components/prod/plex/deployment.plex.yaml: policy restrict-host-namespaces: Deployment plex/plex "
                     "(plex-deployment): hostPID: true in app namespace plex; hint: drop privileged/host* from the pod "
                     "spec; GPU access comes from the device plugin's resource"]



def claim(kind: str, namespace: str, request: dict[str, Any]) -> Resource:
    devices = {"devices": {"requests": [{"name": "gpu", **request}]}}
    spec = {"spec": devices} if kind == "ResourceClaimTemplate" else devices
    return Resource(f"kubernetes:resource.k8s.io/v1:{kind}", "gpu", f"urn:{kind}:{namespace}",
                    {"apiVersion": "resource.k8s.io/v1", "kind": kind,
                     "metadata": {"name": "gpu", "namespace": namespace}, "spec": spec})


def namespace(name: str, labels: dict[str, str]) -> Resource:
    return Resource("kubernetes:core/v1:Namespace", name, f"urn:ns:{name}",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


@pytest.mark.parametrize(("kind", "request_", "labels", "refused"), [
    ("ResourceClaimTemplate", {"exactly": {"deviceClassName": "gpu.intel.com", "adminAccess": True}}, {}, True),
    ("ResourceClaimTemplate", {"exactly": {"deviceClassName": "gpu.intel.com", "adminAccess": True}},
     {"resource.kubernetes.io/admin-access": "true"}, False),
    ("ResourceClaimTemplate", {"exactly": {"deviceClassName": "gpu.intel.com", "adminAccess": True}},
     {"resource.kubernetes.io/admin-access": "false"}, True),
    ("ResourceClaim", {"firstAvailable": [{"name": "a", "deviceClassName": "gpu.intel.com"},
                                          {"name": "b", "deviceClassName": "gpu.intel.com", "adminAccess": True}]},
     {}, True),
    ("ResourceClaim", {"exactly": {"deviceClassName": "gpu.intel.com"}}, {}, False),
    ("ResourceClaimTemplate", {"exactly": {"deviceClassName": "gpu.intel.com", "adminAccess": "true"}}, {}, False),
])
def test_an_admin_access_claim_only_in_a_namespace_labelled_for_it(kind, request_, labels, refused):
    """The string "true" is not adminAccess: the API server's schema takes a boolean, so such a claim is refused at
    admission for its type, not admitted with admin access."""
    found = evaluate([namespace("media", labels), claim(kind, "media", request_)], Settings())
    lines = [str(v) for v in found if v.policy == "dra-admin-access-labelled-namespace"]
    assert bool(lines) == refused, lines
    if refused:
        assert lines == [f"policy dra-admin-access-labelled-namespace: {kind} media/gpu (gpu): asks for adminAccess in "
                         "namespace media, which is not labelled resource.kubernetes.io/admin-access: \"true\"; the "
                         "API server refuses such a claim there; hint: name the app's namespace in "
                         "gpu.dra.adminAccessNamespaces (the export labels it), or use draAllocation: exclusive"]


def test_after_step_5_a_plugin_beside_the_dra_driver_is_refused(captures):
    plugin = [r for r in resources_of(captures["prod"]) if r.kind in ("DaemonSet", "Namespace")
              and "intel-gpu-plugin" in r.name]
    assert {r.kind for r in plugin} == {"Namespace", "DaemonSet"}
    driver = namespace("intel-gpu-resource-driver", {"app-namespace": "false"})
    assert violations([*plugin, driver], "intel-gpu-plugin-not-beside-dra-driver") == []  # steps 1 and 3: side by side
    removed = namespace("intel-gpu-resource-driver", {"gpu-platform.home.arpa/device-plugin-removed": "true"})
    (line,) = violations([*plugin, removed], "intel-gpu-plugin-not-beside-dra-driver")
    assert line == ("policy intel-gpu-plugin-not-beside-dra-driver: DaemonSet intel-gpu-plugin/intel-gpu-plugin "
                    "(intel-gpu-plugin-daemonset): runs the Intel GPU device plugin beside the DRA driver, whose "
                    "namespace intel-gpu-resource-driver says the plugin was removed (gpu-platform.home.arpa/device-"
                    "plugin-removed); both would hand out the same iGPU; hint: remove the plugin from the repository "
                    "(gpu.dra.stage: plugin-removed takes the export's own away)")
