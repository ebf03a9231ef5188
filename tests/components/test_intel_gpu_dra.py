"""gpu.route: dra, its first step (components/intel_gpu_dra.py): Intel's DRA driver beside the device plugin, with
its deliberate choices, its own Flux Kustomization that nothing depends on, in every layout; the device-plugin route
unchanged (the golden trees, tests/gitops/test_tree_golden.py)."""

from __future__ import annotations

import pytest
import yaml

from builders import capture_tree
from components.intel_gpu_dra import NAMESPACE, SERVICE_ACCOUNT, slice_policy
from conftest import LAYOUT_REPOSITORIES, export, make_project, repo_copy, stack_text
from gitops.index import suite_path
from gitops.reports.post_merge import add_post_merge
from model.config import DRA_DRIVER_IMAGE
from model.dra.evidence import DEVICE_CLASS, DRIVER
from model.flux_graph import check_graph
from model.outputs import ProgramOutputs

DIGEST = "sha256:" + "ab" * 32  # test data: the shape of a digest, no image's
DRA = (f"  gpu-platform:gpu:\n    route: dra\n    dra:\n      image: {DRA_DRIVER_IMAGE}\n"
       f"      imageDigest: {DIGEST}\n")


def with_dra(text: str, section: str = DRA) -> str:
    out = text.replace("config:\n", "config:\n" + section, 1)
    assert section in out
    return out


@pytest.fixture(scope="module")
def dra_prod(tmp_path_factory):
    from gitops.engine.program import run_program

    project = make_project(tmp_path_factory.mktemp("dra"), {"prod": with_dra(stack_text("prod"))})
    return run_program("prod", project)


def objects(capture) -> dict[tuple[str, str], dict]:
    return {(o.manifest["kind"], o.manifest["metadata"]["name"]): o.manifest for o in capture_tree(capture).objects}


def driver_container(capture) -> dict:
    ds = objects(capture)[("DaemonSet", "intel-gpu-resource-driver-kubelet-plugin")]
    (only,) = ds["spec"]["template"]["spec"]["containers"]
    return only


def test_the_shipped_stacks_stay_on_the_device_plugin_route_and_declare_no_driver(captures):
    for capture in captures.values():
        assert not [k for k in objects(capture) if k[0] in ("DeviceClass", "ValidatingAdmissionPolicy")]
        assert "draKernelDriver" not in capture.stack_outputs and "driver" not in capture.stack_outputs["fluxGraph"]


def test_the_dra_route_without_the_image_digest_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys):
    text = with_dra(stack_text("prod"), "  gpu-platform:gpu:\n    route: dra\n")
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    assert export(out, "prod", project=make_project(tmp_path / "project", {"prod": text})) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: Pulumi.prod.yaml: gpu-platform:gpu.dra.image: missing: route: dra needs the driver's image and the "
        "sha256 digest of its tag: the export never writes it by tag alone; hint: add image: "
        "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0 (the release this "
        "project is written for) and imageDigest: <the digest `crane digest <image>` gives>"]
    assert list(out.iterdir()) == []


def test_the_driver_is_upstream_s_objects_in_its_own_namespace(dra_prod):
    folder = "components/prod/intel-gpu-resource-driver/"
    assert sorted((o.manifest["kind"], o.manifest["metadata"]["name"]) for o in capture_tree(dra_prod).objects
                  if o.path.startswith(folder)) == [
        ("ClusterRole", "intel-gpu-resource-driver-role"),
        ("ClusterRoleBinding", "intel-gpu-resource-driver-role-binding"),
        ("DaemonSet", "intel-gpu-resource-driver-kubelet-plugin"),
        ("DeviceClass", DEVICE_CLASS),
        ("Namespace", NAMESPACE),
        ("NetworkPolicy", "default-deny-ingress"),
        ("ServiceAccount", SERVICE_ACCOUNT),
        ("ValidatingAdmissionPolicy", "resourceslices-policy-dra-kubelet-plugin-gpu"),
        ("ValidatingAdmissionPolicyBinding", "resourceslices-policy-dra-kubelet-plugin-gpu")]
    assert objects(dra_prod)[("DeviceClass", DEVICE_CLASS)]["spec"] == {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.intel.com"'}}]}  # no extendedResourceName
    assert objects(dra_prod)[("Namespace", NAMESPACE)]["metadata"]["labels"] == {"app-namespace": "false"}


def test_the_driver_runs_unprivileged_without_health_monitoring_pinned_by_digest(dra_prod):
    c = driver_container(dra_prod)
    assert c["image"] == f"{DRA_DRIVER_IMAGE}@{DIGEST}"
    assert c["securityContext"]["privileged"] is False and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["args"] == ["--healthcheck-port=51516"]  # no -m: no xpumd here
    assert "/run/xpumd" not in yaml.safe_dump(c)
    assert {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]} == {
        "/var/lib/kubelet/plugins_registry": False, "/var/lib/kubelet/plugins": False, "/etc/cdi": False,
        "/var/run/cdi": False, "/sysfs": True}
    assert c["resources"]["limits"] and c["resources"]["requests"]


def test_the_slice_policy_names_exactly_the_driver_s_service_account(dra_prod):
    """The username is written as a concatenation so a repository's line length can break it; it is still
    upstream's one string."""
    expression = slice_policy()["spec"]["matchConditions"][0]["expression"]
    left, right = expression.split(" == ", 1)
    assert left == "request.userInfo.username"
    assert "".join(part.strip().strip('"') for part in right.split("+")) == \
        f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


def test_the_driver_s_kustomization_follows_the_cni_only_and_waits_its_rollout_per_node(dra_prod):
    ks = objects(dra_prod)[("Kustomization", "intel-gpu-resource-driver")]["spec"]
    assert ks["dependsOn"] == [{"name": "cilium"}] and ks["wait"] is True and ks["prune"] is True
    # 3 nodes × (startup probe 60 × 10 s + 180 s image pull) = 2,340 s
    assert ks["timeout"] == "40m" and ks["path"] == "./components/prod/intel-gpu-resource-driver"
    others = [o for k, o in objects(dra_prod).items() if k[0] == "Kustomization"]
    assert not [o for o in others if {"name": "intel-gpu-resource-driver"} in o["spec"].get("dependsOn", [])]


def test_nothing_but_an_app_that_claims_a_device_may_depend_on_the_driver():
    from model.flux_graph import GraphNode

    cni, driver, apps = ("flux-system", "cilium"), ("flux-system", "intel-gpu-resource-driver"), ("flux-system", "a")
    nodes = [GraphNode(key=cni, depends=(), wait=True), GraphNode(key=driver, depends=(cni,), wait=True),
             GraphNode(key=apps, depends=(driver,), wait=True), GraphNode(key=("flux-system", "intel-gpu-plugin"),
                                                                          depends=(cni,), wait=True)]
    problems = check_graph(nodes, roots=[], plugin=("flux-system", "intel-gpu-plugin"), cni=cni, driver=driver)
    assert problems == ["flux: a.spec.dependsOn: 'intel-gpu-resource-driver': nothing may depend on the DRA driver "
                        "but the Kustomization of an app that claims a device; a failed driver rollout would stall "
                        "that tier; hint: remove the dependency"]
    assert check_graph(nodes, roots=[], plugin=("flux-system", "intel-gpu-plugin"), cni=cni, driver=driver,
                       driver_dependents=[apps]) == []
    nodes[1] = GraphNode(key=driver, depends=(cni, apps), wait=True)
    assert check_graph(nodes[:2] + nodes[3:] + [GraphNode(key=apps, depends=(), wait=True)], roots=[],
                       plugin=("flux-system", "intel-gpu-plugin"), cni=cni, driver=driver) == [
        "flux: intel-gpu-resource-driver.spec.dependsOn: ['a']: the DRA driver may depend on the CNI (cilium) only; "
        "hint: remove the others"]


def test_post_merge_checks_the_driver_and_each_node_s_slice_after_the_plugin(dra_prod):
    tree = capture_tree(dra_prod)
    add_post_merge(tree, ProgramOutputs.from_output("prod", dra_prod.stack_outputs))
    checklist = tree.files[f"{tree.layout.records}/POST-MERGE.md"].decode()
    assert "4. The DRA driver is delivered" in checklist and "6. `plex` exists and is Ready" in checklist
    assert f"--field-selector spec.driver={DRIVER}" in checklist
    suite = list(yaml.safe_load_all(tree.files[suite_path(tree.layout)]))
    assert [t["metadata"]["name"] for t in suite] == ["intel-gpu-plugin", "gpu-advertised",
                                                      "intel-gpu-resource-driver", "plex"]
    slices = [op["assert"]["resource"] for step in suite[2]["spec"]["steps"] for op in step["try"]
              if op["assert"]["resource"]["kind"] == "ResourceSlice"]
    assert [s["spec"]["nodeName"] for s in slices] == ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
    assert all(s["spec"]["driver"] == DRIVER and
               s["spec"]["(devices[?attributes.driver.string == 'i915'] | length(@) > `0`)"] is True for s in slices)


@pytest.mark.parametrize("layout", LAYOUT_REPOSITORIES)
def test_every_layout_exports_the_driver_once_and_checks_clean(tmp_path, layout):
    name, stacks, _ = LAYOUT_REPOSITORIES[layout]
    out = repo_copy(tmp_path, name)
    dra = {s: with_dra(t) for s, t in stacks.items()}
    project = make_project(tmp_path / "project", dra)
    assert export(out, *dra, project=project) == 0
    daemonsets = sorted(p.relative_to(out).as_posix() for p in out.rglob("daemonset.intel-gpu-resource-driver-*"))
    shared = layout == "shared-base"
    assert len(daemonsets) == (1 if shared or len(stacks) == 1 else len(stacks)), daemonsets
    assert export(out, *dra, project=project, check=True) == 0


def test_one_base_holds_one_route(tmp_path, capsys):
    name, stacks, _ = LAYOUT_REPOSITORIES["shared-base"]
    out = repo_copy(tmp_path, name)
    mixed = {**stacks, "dev": with_dra(stacks["dev"])}
    capsys.readouterr()
    assert export(out, *mixed, project=make_project(tmp_path / "project", mixed)) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == ['error: Pulumi.dev.yaml: gpu-platform:gpu.route: "dra", while prod says device-plugin: the '
                      "stacks of the base clusters/base share one set of components, and so one route; hint: set the "
                      "same gpu.route in every stack of the base"]


def test_the_driver_image_at_latest_is_refused_in_one_line(tmp_path, capsys):
    latest = DRA.replace(":v0.11.0\n", ":latest\n")
    assert ":latest" in latest
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    assert export(out, "prod", project=make_project(tmp_path / "project", {"prod": with_dra(stack_text("prod"),
                                                                                          latest)})) == 2
    assert capsys.readouterr().err.splitlines() == [
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.image: "ghcr.io/intel/intel-resource-drivers-for-kubernetes/'
        "intel-gpu-resource-driver:l…\" (84 characters): the tag 'latest' is not a pin; hint: use an exact version tag",
        "nothing was written",
    ]
    assert list(out.iterdir()) == []
