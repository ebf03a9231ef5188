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


# --- gpu.dra.deliveredBy: repository: the driver the repository installs, adopted (issue 53) --------------------------

ADOPTED = ("  gpu-platform:gpu:\n    route: dra\n    dra:\n      deliveredBy: repository\n      kustomization:\n"
           "        namespace: kube-system\n        name: intel-gpu-resource-driver\n")


def adopted_run(tmp_path, stage: str = "driver-added"):
    """prod on the DRA route at `stage`, adopting the repository's driver, with the evidence that stage needs."""
    from gitops.engine.program import run_program
    from tests.model.dra.test_gate_migration import EVERY_CLAIM, EVERY_SLICE

    evidence = {"driver-added": {}, "apps-on-claims": EVERY_SLICE, "plugin-removed": EVERY_CLAIM}[stage]
    text = with_dra(stack_text("prod"), ADOPTED + f"      stage: {stage}\n")
    return run_program("prod", make_project(tmp_path / "project", {"prod": text}, evidence))


@pytest.mark.parametrize("stage", ["driver-added", "apps-on-claims", "plugin-removed"])
def test_a_stack_adopting_the_repository_s_driver_declares_no_driver_device_class_or_admission_policy(tmp_path, stage):
    capture = adopted_run(tmp_path, stage)
    found = objects(capture)
    assert not [k for k in found if k[0] in ("DeviceClass", "ValidatingAdmissionPolicy",
                                             "ValidatingAdmissionPolicyBinding")]
    assert not [k for k in found if "intel-gpu-resource-driver" in k[1]], "no driver object, no driver Kustomization"
    assert not [r for r in capture.registrations if r.type == "gpu-platform:components:IntelGpuResourceDriver"]
    graph = capture.stack_outputs["fluxGraph"]
    assert graph["adoptedDriver"] == ["kube-system", "intel-gpu-resource-driver"] and "driver" not in graph
    assert capture.stack_outputs["draMigration"]["stage"] == stage  # the stages and their evidence, unchanged
    assert ProgramOutputs.from_output("prod", capture.stack_outputs).flux_graph.adopted_driver == (
        "kube-system", "intel-gpu-resource-driver")


def test_the_claiming_app_s_kustomization_depends_on_the_adopted_driver_s_with_no_pulumi_edge_to_a_driver(tmp_path):
    from builders import registration

    capture = adopted_run(tmp_path, "apps-on-claims")
    plex = objects(capture)[("Kustomization", "plex")]["spec"]["dependsOn"]
    assert {"name": "intel-gpu-resource-driver", "namespace": "kube-system"} in plex
    assert {"name": "intel-gpu-resource-driver"} not in plex  # not the export's own, which it does not write
    assert capture.stack_outputs["fluxGraph"]["driverDependents"] == [["flux-system", "plex"]]
    by_urn = capture.by_urn()
    deployment = registration(capture, "kubernetes:apps/v1:Deployment", "plex-deployment")
    types = {by_urn[d].type for d in deployment.dependencies}
    assert "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate" in types  # its claim template, and no driver's
    assert not types & {"kubernetes:apps/v1:DaemonSet", "kubernetes:resource.k8s.io/v1:DeviceClass"}


def test_the_program_refuses_a_tier_depending_on_the_adopted_driver_as_on_its_own():
    from model.flux_graph import GraphNode

    cni, adopted = ("flux-system", "cilium"), ("kube-system", "intel-gpu-resource-driver")
    app, tier = ("flux-system", "plex"), ("flux-system", "apps")
    nodes = [GraphNode(key=cni, depends=(), wait=True), GraphNode(key=app, depends=(cni, adopted), wait=True),
             GraphNode(key=tier, depends=(adopted,), wait=True)]
    # the adopted Kustomization is not the program's to see (no "no such Kustomization"), but only a claiming app
    # may depend on it
    assert check_graph(nodes, roots=[], plugin=None, cni=cni, driver_dependents=[app], repository_unseen=True,
                       adopted_driver=adopted) == [
        "flux: apps.spec.dependsOn: 'kube-system/intel-gpu-resource-driver': nothing may depend on the DRA driver but "
        "the Kustomization of an app that claims a device; a failed driver rollout would stall that tier; hint: remove "
        "the dependency"]


def test_post_merge_checks_the_adopted_driver_s_kustomization_and_each_node_s_slice_not_a_daemonset_of_ours(tmp_path):
    capture = adopted_run(tmp_path, "plugin-removed")
    tree = capture_tree(capture)
    add_post_merge(tree, ProgramOutputs.from_output("prod", capture.stack_outputs))
    checklist = tree.files[f"{tree.layout.records}/POST-MERGE.md"].decode()
    assert ("1. The DRA driver the repository installs (the stack adopts it: gpu.dra.deliveredBy: repository) is "
            "delivered: `flux get kustomizations intel-gpu-resource-driver -n kube-system` shows READY True, and its "
            "DaemonSet (named by the repository's release) shows DESIRED = CURRENT = READY = 3 in "
            "`kubectl get daemonsets -A`.") in checklist
    suite = list(yaml.safe_load_all(tree.files[suite_path(tree.layout)]))
    assert [t["metadata"]["name"] for t in suite] == ["intel-gpu-resource-driver", "plex"]
    steps = suite[0]["spec"]["steps"]
    assert [s["name"] for s in steps] == [
        "the driver's Kustomization is Ready", f"every node publishes a {DRIVER} slice with a i915 device",
        "the device plugin's DaemonSet is gone"]
    assert steps[0]["try"][0]["assert"]["resource"]["metadata"] == {"name": "intel-gpu-resource-driver",
                                                                    "namespace": "kube-system"}


# onedr0p/home-ops's driver (kubernetes/apps/kube-system/intel-gpu-resource-driver), as its repository writes it
HOME_OPS_DRIVER = {
    "ks.yaml": "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
               "  name: intel-gpu-resource-driver\nspec:\n  healthChecks:\n"
               "    - apiVersion: helm.toolkit.fluxcd.io/v2\n"
               "      kind: HelmRelease\n      name: intel-gpu-resource-driver\n      namespace: kube-system\n"
               "  interval: 1h\n  path: ./kubernetes/apps/kube-system/intel-gpu-resource-driver/app\n  prune: true\n"
               "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n"
               "  targetNamespace: kube-system\n",
    "app/kustomization.yaml": "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
                              "  - ./helmrelease.yaml\n  - ./ocirepository.yaml\n",
    "app/helmrelease.yaml": "---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n"
                            "  name: intel-gpu-resource-driver\nspec:\n  chartRef:\n    kind: OCIRepository\n"
                            "    name: intel-gpu-resource-driver\n  interval: 1h\n  values:\n    kubeletPlugin:\n"
                            "      privileged: true\n",
    "app/ocirepository.yaml": "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n"
                              "  name: intel-gpu-resource-driver\nspec:\n  interval: 15m\n  ref:\n    tag: 0.11.0\n"
                              "  url: oci://ghcr.io/intel/intel-resource-drivers-for-kubernetes/"
                              "intel-gpu-resource-driver-chart\n",
}


def test_cluster_template_s_repository_with_home_ops_s_driver_is_adopted_and_exports_clean(tmp_path, capsys):
    from tests.model.dra.test_gate_migration import slices

    name, stacks, _ = LAYOUT_REPOSITORIES["split"]
    out = repo_copy(tmp_path, name)
    listing = out / "kubernetes/apps/kube-system/kustomization.yaml"
    listing.write_text(listing.read_text().replace("  - ./coredns/ks.yaml\n",
                                                   "  - ./coredns/ks.yaml\n  - ./intel-gpu-resource-driver/ks.yaml\n"))
    for rel, text in HOME_OPS_DRIVER.items():
        (out / "kubernetes/apps/kube-system/intel-gpu-resource-driver" / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / "kubernetes/apps/kube-system/intel-gpu-resource-driver" / rel).write_text(text)
    evidence = {"dra/home": slices("home", {"k3s-home-1": 1, "k3s-home-2": 1, "k3s-home-3": 1})}
    for stage in ("driver-added", "apps-on-claims"):
        project = make_project(tmp_path / "project", {"home": with_dra(stacks["home"],
                                                                       ADOPTED + f"      stage: {stage}\n")}, evidence)
        assert export(out, "home", project=project) == 0, capsys.readouterr().err
        assert not list(out.rglob("*intel-gpu-resource-driver-kubelet-plugin*"))
        assert not list(out.rglob("*deviceclass*")) and not list(out.rglob("*validatingadmissionpolicy*"))
        assert export(out, "home", project=project, check=True) == 0
    plex = yaml.safe_load((out / "kubernetes/apps/gpu-platform/ks.plex.yaml").read_text())
    assert {"name": "intel-gpu-resource-driver", "namespace": "kube-system"} in plex["spec"]["dependsOn"]
    delivery = (out / "kubernetes/apps/gpu-platform/DELIVERY.md").read_text()
    assert "The DRA driver is the repository's: kube-system/intel-gpu-resource-driver, which the stack" in delivery


def test_an_adopted_driver_the_repository_does_not_install_is_refused_at_its_stack_key_and_nothing_is_written(
        tmp_path, capsys):
    name, stacks, _ = LAYOUT_REPOSITORIES["split"]
    out = repo_copy(tmp_path, name)
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    capsys.readouterr()
    project = make_project(tmp_path / "project", {"home": with_dra(stacks["home"], ADOPTED)})
    assert export(out, "home", project=project) == 2
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")] == [
        "error: Pulumi.home.yaml: gpu-platform:gpu.dra.kustomization: kube-system/intel-gpu-resource-driver: Flux's "
        "walk from ./kubernetes/flux/cluster applies no such Kustomization, so nothing would install the DRA driver "
        "the stack adopts; hint: use one of default/echo, flux-system/cluster-apps, flux-system/flux-instance, "
        "flux-system/flux-operator, kube-system/cilium, kube-system/coredns"]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == before
