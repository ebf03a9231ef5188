"""The exported DRA driver (components/intel_gpu_dra.py) held to Intel's upstream the way the device plugin is held
to its own (tests/components/test_intel_gpu_plugin.py): upstream's kustomize base at gpu-v0.11.0, rendered, compared
object by object and field by field with what the program exports on the DRA route; every difference is one of the
deliberate choices listed below (path -> reason), a listed choice that no longer differs is an error too, and the
claims the apps make select only attributes the driver publishes in the discovery mode it runs in.

Upstream is read from the workplace's shared reference (`../shared/reference/dra/upstream-gpu-v0.11.0`, Apache-2.0,
copied unchanged from intel/intel-resource-drivers-for-kubernetes at commit 7a4d31b5; its SOURCE.md); it is not part
of the project, so the comparison is skipped where that folder is absent (a user's clone).

Rendering: the kustomize base is its `resources` files as they are (its kustomization.yaml has no transformer: the
`images:` override is commented out, which the test asserts), so rendering it is reading them. The Helm chart of
the same release is NOT rendered: its templates use Go template functions (include, toYaml, nindent, semverCompare)
this test cannot reproduce faithfully in Python, and Helm is not a dependency. The comparison is against the
kustomize base only. Where the export takes the chart's side instead of the base's (not privileged, the pull policy,
the `--healthcheck-port` argument) the reason says so, and test_the_chart_defaults_the_reasons_rest_on reads those
defaults from the chart's values.yaml and templates. What the chart has and the export keeps as the base has it:
the base's `app:` label and names, its ServiceAccount name (the chart's is `intel-gpu-sa`), no tolerations (the chart
tolerates control-plane taints), no Helm labels.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from builders import capture_tree
from conftest import make_project, stack_text
from model.config import DRA_DRIVER_IMAGE
from tests.components.test_intel_gpu_dra import with_dra
from tests.model.dra.test_gate_migration import EVERY_SLICE, stage

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "dra"
UPSTREAM = REFERENCE / "upstream-gpu-v0.11.0"
BASE = UPSTREAM / "deployments" / "gpu" / "base"
CHART = UPSTREAM / "charts" / "intel-gpu-resource-driver"
needs_upstream = pytest.mark.skipif(
    not UPSTREAM.is_dir(), reason=f"upstream's DRA driver is not here ({REFERENCE} is the workplace's shared "
                                  "reference, absent from a user's clone): nothing to compare against")

FOLDER = "components/prod/intel-gpu-resource-driver/"
DS = "DaemonSet/intel-gpu-resource-driver-kubelet-plugin:"
POD = DS + "spec.template.spec."
CONTAINER = POD + "containers[kubelet-plugin]."
VAP = "ValidatingAdmissionPolicy/resourceslices-policy-dra-kubelet-plugin-gpu:"
NOT_UPSTREAM_CEL = "the same CEL as upstream's (test_the_rewritten_cel_is_upstream_s_cel): "
NO_XPUMD = ("no xpumd on this cluster, so no socket to mount (the chart mounts it only with "
            "kubeletPlugin.healthMonitoring.enabled): the third discovery mode")

# Every difference between upstream's base and the export, and why. Paths: `Kind/name:field.path`, list items of
# a list whose items all have a `name` as `[name]`, other lists of objects by index; a whole object or subtree that
# only one side has is one path.
DELIBERATE: dict[str, str] = {
    "Namespace/intel-gpu-resource-driver:metadata.labels":
        'app-namespace: "false": not an app namespace, the driver needs hostPaths the app policies forbid '
        "(step 5 adds the plugin-removed label)",
    POD + "serviceAccount":
        "the deprecated alias of serviceAccountName, which names the same account; the API server fills it in",
    POD + "nodeSelector":
        "kubernetes.io/arch: amd64, as the plugin's: every node has the iGPU (upstream's base runs on every node)",
    DS + "spec.updateStrategy": "one node at a time, never a second copy on a node, as the plugin's",
    CONTAINER + "image":
        "pinned by tag and digest (gpu.dra.image and gpu.dra.imageDigest); the base runs :latest, its images: "
        "override commented out",
    CONTAINER + "imagePullPolicy": "the chart's pullPolicy (IfNotPresent); the base leaves it to :latest's Always",
    CONTAINER + "args":
        "the chart's --healthcheck-port (the port both probes use) without -m: health monitoring needs xpumd, "
        "which this cluster does not run (USAGE.md, Discovery modes: non-privileged, without xpumd)",
    CONTAINER + "resources":
        "upstream sets none; the device plugin's order of magnitude, not measured (docs/dra.md)",
    CONTAINER + "securityContext.privileged":
        "false, the chart's default (kubeletPlugin.privileged: false; the base says true): privileged buys the "
        "local-memory size an integrated GPU does not have (USAGE.md, Discovery modes)",
    CONTAINER + "securityContext.allowPrivilegeEscalation":
        "false: hardening on top of upstream's (every capability dropped, not privileged); the driver gains none",
    CONTAINER + "volumeMounts[sysfs].readOnly":
        "discovery reads sysfs only: mounted read-only (docs/dra.md); no SR-IOV VF provisioning or "
        "DRM/VFIO rebinding here, the writes upstream's writable mount allows",
    CONTAINER + "volumeMounts[xpumd-socket]": NO_XPUMD,
    POD + "volumes[xpumd-socket]": NO_XPUMD,
    "ClusterRole/intel-gpu-resource-driver-role:metadata.namespace":
        "upstream's namespace on a cluster-scoped object, which the API server ignores: dropped",
    "ClusterRoleBinding/intel-gpu-resource-driver-role-binding:metadata.namespace":
        "upstream's namespace on a cluster-scoped object, which the API server ignores: dropped",
    VAP + "spec.matchConditions[isRestrictedUser].expression":
        NOT_UPSTREAM_CEL + "the username literal written as a concatenation so a line can break it",
    VAP + "spec.validations[1].messageExpression": NOT_UPSTREAM_CEL + "spaces around its operators",
    "DeviceClass/gpu-vfio.intel.com": "no VM takes a GPU by passthrough here: only the gpu.intel.com class",
    "NetworkPolicy/default-deny-ingress":
        "deny all ingress to the driver's namespace (kubelet reaches it through host sockets); egress open for "
        "the API server",
}


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def _key(obj: dict[str, Any]) -> str:
    return f'{obj["kind"]}/{obj["metadata"]["name"]}'


def _at(path: str, field: str) -> str:
    return f"{path}.{field}" if ":" in path else f"{path}:{field}"


def _named(value: Any) -> bool:
    return (isinstance(value, list) and bool(value) and all(isinstance(i, dict) and isinstance(i.get("name"), str)
                                                            for i in value)
            and len({i["name"] for i in value}) == len(value))


def _diff(path: str, up: Any, ex: Any, out: dict[str, tuple[Any, Any]]) -> None:
    if isinstance(up, dict) and isinstance(ex, dict):
        for field in sorted(up.keys() | ex.keys()):
            _diff(_at(path, field), up.get(field, ABSENT), ex.get(field, ABSENT), out)
    elif _named(up) and _named(ex):
        up_names, ex_names = [i["name"] for i in up], [i["name"] for i in ex]
        if [n for n in up_names if n in ex_names] != [n for n in ex_names if n in up_names]:
            out[f"{path} (order)"] = (up_names, ex_names)
        by_up, by_ex = {i["name"]: i for i in up}, {i["name"]: i for i in ex}
        for name in up_names + [n for n in ex_names if n not in by_up]:
            _diff(f"{path}[{name}]", by_up.get(name, ABSENT), by_ex.get(name, ABSENT), out)
    elif (isinstance(up, list) and isinstance(ex, list) and len(up) == len(ex)
          and all(isinstance(i, dict) for i in up + ex)):
        for index, (a, b) in enumerate(zip(up, ex, strict=True)):
            _diff(f"{path}[{index}]", a, b, out)
    elif up != ex or type(up) is not type(ex):  # True and 1 are equal in Python, not in a manifest
        out[path] = (up, ex)


def differences(upstream: list[dict[str, Any]], exported: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Every path where the two sets of objects differ, with upstream's value and the export's."""
    ups, exs = {_key(o): o for o in upstream}, {_key(o): o for o in exported}
    assert len(ups) == len(upstream) and len(exs) == len(exported), "two objects of one kind and name"
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(ups.keys() | exs.keys()):
        _diff(key, ups.get(key, ABSENT), exs.get(key, ABSENT), out)
    return out


def check(upstream: list[dict[str, Any]], exported: list[dict[str, Any]], deliberate: dict[str, str]) -> list[str]:
    """One line per problem: a difference nobody declared, and a declared difference that is not (any longer) one."""
    found = differences(upstream, exported)
    problems = [f"undeclared difference: {path}: upstream {up!r}, exported {ex!r}"
                for path, (up, ex) in found.items() if path not in deliberate]
    problems += [f"listed but not different: {path} ({reason})"
                 for path, reason in deliberate.items() if path not in found]
    return problems


def _load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in YAML(typ="safe", pure=True).load_all(path.read_text()) if doc is not None]


def upstream_base() -> list[dict[str, Any]]:
    """`kustomize build deployments/gpu/base`: its resources as they are, in its order (it has no transformer)."""
    kustomization = _load(BASE / "kustomization.yaml")[0]
    assert set(kustomization) == {"resources"}, (
        f"upstream's kustomization.yaml now has {sorted(set(kustomization) - {'resources'})}: reading its resources "
        "is no longer its rendering; render it with its transformers")
    return [doc for name in kustomization["resources"] for doc in _load(BASE / name)]


def exported_driver(capture) -> list[dict[str, Any]]:
    return [o.manifest for o in capture_tree(capture).objects if o.path.startswith(FOLDER)]


@pytest.fixture(scope="module")
def driver_at_step_1(tmp_path_factory) -> list[dict[str, Any]]:
    from gitops.engine.program import run_program

    project = make_project(tmp_path_factory.mktemp("dra-upstream"), {"prod": with_dra(stack_text("prod"))})
    return exported_driver(run_program("prod", project))


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return upstream_base()


@needs_upstream
def test_the_exported_driver_is_upstream_s_base_plus_only_the_deliberate_differences(base, driver_at_step_1):
    assert driver_at_step_1, f"nothing exported under {FOLDER}"
    assert check(base, driver_at_step_1, DELIBERATE) == []
    # Flux applies the folder with postBuild substitution: nothing in it may be a ${VAR} it would rewrite.
    assert "${" not in repr(driver_at_step_1)
    assert all(reason.strip() for reason in DELIBERATE.values())


@needs_upstream
def test_a_deliberate_choice_taken_back_or_unlisted_is_an_error(base, driver_at_step_1):
    """The list holds exactly the differences: an entry the export no longer differs on fails, and so does a real
    difference whose entry is removed."""
    privileged = CONTAINER + "securityContext.privileged"
    exported = copy.deepcopy(driver_at_step_1)
    (ds,) = [o for o in exported if o["kind"] == "DaemonSet"]
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True  # upstream's base
    assert check(base, exported, DELIBERATE) == [
        f"listed but not different: {privileged} ({DELIBERATE[privileged]})"]
    unlisted = {path: reason for path, reason in DELIBERATE.items() if path != privileged}
    assert check(base, driver_at_step_1, unlisted) == [
        f"undeclared difference: {privileged}: upstream True, exported False"]


@needs_upstream
def test_an_undeclared_change_to_the_exported_driver_is_an_error(base, driver_at_step_1):
    exported = copy.deepcopy(driver_at_step_1)
    (ds,) = [o for o in exported if o["kind"] == "DaemonSet"]
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["livenessProbe"]["periodSeconds"] = 5
    container["env"].append({"name": "EXTRA", "value": "1"})
    (role,) = [o for o in exported if o["kind"] == "ClusterRole"]
    role["rules"][0]["verbs"] = ["get", "list"]
    assert check(base, exported, DELIBERATE) == [
        "undeclared difference: ClusterRole/intel-gpu-resource-driver-role:rules[0].verbs: upstream ['get'], "
        "exported ['get', 'list']",
        f"undeclared difference: {CONTAINER}env[EXTRA]: upstream <absent>, exported {{'name': 'EXTRA', 'value': '1'}}",
        f"undeclared difference: {CONTAINER}livenessProbe.periodSeconds: upstream 30, exported 5"]


def _cel_tokens(expression: str) -> list[str]:
    """The expression's tokens without the spaces between them, adjacent string literals of one quote joined by
    `+` folded into one: what a line break or an operator's spacing cannot change."""
    tokens = [t for t in re.findall(r'"[^"]*"|\'[^\']*\'|\s+|\+|[^"\'\s+]+', expression) if not t.isspace()]
    folded: list[str] = []
    for token in tokens:
        if (len(folded) >= 2 and folded[-1] == "+" and token[:1] in "\"'" and folded[-2][:1] == token[:1]
                and len(folded[-2]) >= 2 and folded[-2][-1] == token[0]):
            folded[-2:] = [folded[-2][:-1] + token[1:]]
        else:
            folded.append(token)
    return folded


@needs_upstream
def test_the_rewritten_cel_is_upstream_s_cel(base, driver_at_step_1):
    found = differences(base, driver_at_step_1)
    rewritten = [path for path, reason in DELIBERATE.items() if reason.startswith(NOT_UPSTREAM_CEL)]
    assert rewritten
    for path in rewritten:
        up, ex = found[path]
        assert up != ex and _cel_tokens(up) == _cel_tokens(ex), path
    assert _cel_tokens('"a" + "b" + x') == ['"ab"', "+", "x"] and _cel_tokens('"a" + x') != _cel_tokens('"ax"')


@needs_upstream
def test_the_chart_defaults_the_reasons_rest_on():
    """The export takes the chart's side on three fields; those are the chart's defaults at this release."""
    values = _load(CHART / "values.yaml")[0]
    plugin = values["kubeletPlugin"]
    assert plugin["privileged"] is False and plugin["healthMonitoring"]["enabled"] is True
    assert values["image"]["pullPolicy"] == "IfNotPresent" and plugin["healthcheckPort"] == 51516
    repository = f'{values["image"]["repository"]}/{values["image"]["name"]}'
    assert DRA_DRIVER_IMAGE == f'{repository}:{values["image"]["tag"]}'
    template = (CHART / "templates" / "resource-driver.yaml").read_text()
    assert "- --healthcheck-port={{ .Values.kubeletPlugin.healthcheckPort }}" in template
    assert "{{- if .Values.kubeletPlugin.healthMonitoring.enabled }}\n        - -m" in template


# --- the claims select only what the driver publishes in its discovery mode -----------------------------------------

# What the driver publishes on each device in the mode it runs in here (not privileged, no -m, no xpumd).
# upstream doc/gpu/USAGE.md at gpu-v0.11.0: "Discovery modes" (line 16: "non-privileged, without xpumd: ... the
# devices are announced in ResourceSlice as-is, without details", e.g. memory), "Notable changes" v0.10.0 (line 208:
# "If neither health-monitoring is enabled, nor privileged mode - the discovered devices are announced to the cluster
# without the HW details (e.g. memory)"), and the attributes of the example slice under "Deployment validation"
# (from line 89). Device names carry the qualified attribute names (`<domain>/<name>`; the driver's own domain is
# gpu.intel.com).
MODE_3_ATTRIBUTES = {
    "gpu.intel.com/driver",  # i915 or xe: read from sysfs
    "gpu.intel.com/family",  # from the PCI id's table; "Unknown" for most iGPUs
    "gpu.intel.com/model",
    # published, but USAGE.md does not say its value without -m; upstream's source sets every device's health to
    # "Unknown" when health monitoring is off (cmd/kubelet-gpu-plugin/driver.go, newDriver), so no claim selects on it
    "gpu.intel.com/health",
    "gpu.intel.com/pciId",
    "gpu.intel.com/sriov",
    "resource.kubernetes.io/pciBusID",
    "resource.kubernetes.io/pcieRoot",
}
# Published too, but deprecated (USAGE.md, Notable changes: pciRoot in v0.10.0, pciAddress in v0.11.0): no claim
# may start depending on them.
DEPRECATED_ATTRIBUTES = {"gpu.intel.com/pciRoot", "gpu.intel.com/pciAddress"}
# `memory` is published as 0 in this mode ("without details (e.g. memory)"): a capacity no claim may select on.
MODE_3_CAPACITIES = {"gpu.intel.com/millicores"}

_REFERENCE = re.compile(r"""device\.(attributes|capacity)\[\s*(["'])([^"']+)\2\s*\]"""
                        r"""\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(["'])([^"']+)\5\s*\])""")


def selected(expression: str) -> tuple[set[str], set[str]]:
    """The qualified attribute and capacity names a CEL selector reads; anything else it reads of the device but
    `device.driver` is refused (it would escape the check)."""
    attributes: set[str] = set()
    capacities: set[str] = set()
    for match in _REFERENCE.finditer(expression):
        kind, _, domain, dotted, _, indexed = match.groups()
        (attributes if kind == "attributes" else capacities).add(f"{domain}/{dotted or indexed}")
    rest = _REFERENCE.sub("", expression)
    assert not re.search(r"device\s*\.\s*(?!driver\b)", rest), f"a selector reads the device otherwise: {expression}"
    return attributes, capacities


def cel_selectors(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [value["cel"]["expression"]] if isinstance(value.get("cel"), dict) else []
        return found + [e for v in value.values() for e in cel_selectors(v)]
    if isinstance(value, list):
        return [e for v in value for e in cel_selectors(v)]
    return []


def test_the_claims_select_only_attributes_the_driver_publishes_without_xpumd_or_privilege(tmp_path):
    from gitops.engine.program import run_program

    # step 3: Plex on its claim, and a second app sharing the iGPU through admin access, each with its selector
    apps = ("  gpu-platform:apps:\n    - name: jellyfin\n      image: docker.io/jellyfin/jellyfin:10.9.0\n"
            "      port: 8096\n      egressClass: internet\n      authMode: app-native\n      hardware:\n"
            "        gpu: intel-quicksync\n        draAllocation: admin-access\n")
    text = stage("prod", "apps-on-claims", "      adminAccessNamespaces: [jellyfin]\n",
                 text=with_dra(stack_text("prod"), apps))
    tree = capture_tree(run_program("prod", make_project(tmp_path / "project", {"prod": text}, EVERY_SLICE)))
    by_kind: dict[str, list[str]] = {}
    for o in tree.objects:
        for expression in cel_selectors(o.manifest.get("spec")):
            if o.manifest["kind"] in ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim"):
                by_kind.setdefault(o.manifest["kind"], []).append(expression)
    assert sorted(by_kind) == ["DeviceClass", "ResourceClaimTemplate"] and len(by_kind["ResourceClaimTemplate"]) == 2
    for expression in [e for found in by_kind.values() for e in found]:
        attributes, capacities = selected(expression)
        assert attributes <= MODE_3_ATTRIBUTES, (expression, attributes - MODE_3_ATTRIBUTES)
        assert not attributes & DEPRECATED_ATTRIBUTES and capacities <= MODE_3_CAPACITIES, expression
    assert selected('device.attributes["gpu.intel.com"].driver == "i915"') == ({"gpu.intel.com/driver"}, set())
    assert selected("device.capacity['gpu.intel.com']['memory'].compareTo(quantity('16Gi')) >= 0") == (
        set(), {"gpu.intel.com/memory"})
    with pytest.raises(AssertionError):
        selected('device.allowMultipleAllocations == true')


@needs_upstream
def test_the_listed_attributes_are_in_upstream_s_example_slice():
    usage = (UPSTREAM / "doc" / "gpu" / "USAGE.md").read_text()
    assert "- **non-privileged, without xpumd**: the DRA driver has no source of device details (e.g. memory)" in usage
    example = usage[usage.index("Example contents of the ResourceSlice object"):usage.index("## Deploying test pod")]
    slice_ = YAML(typ="safe", pure=True).load(example.split("```bash\n", 1)[1].split("```", 1)[0].split("\n", 1)[1])
    published = {name if "/" in name else f"gpu.intel.com/{name}" for device in slice_["spec"]["devices"]
                 for name in device["attributes"]}
    assert MODE_3_ATTRIBUTES | DEPRECATED_ATTRIBUTES == published
    assert {f"gpu.intel.com/{n}" for d in slice_["spec"]["devices"] for n in d["capacity"]} == (
        MODE_3_CAPACITIES | {"gpu.intel.com/memory"})
