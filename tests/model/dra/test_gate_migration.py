"""gpu.route: dra, the move from the device plugin as exports (model/dra/gate.py, docs/dra.md): step 3 switches
every GPU app to a claim on step 2's slice evidence, step 5 removes the plugin on step 4's allocation evidence; each
refusal is one line, and nothing is written."""

from __future__ import annotations

import pytest
import yaml

from builders import capture_tree
from conftest import LAYOUT_REPOSITORIES, PROD_NODES, export, make_project, repo_copy, stack_text
from gitops.index import suite_path
from gitops.reports.post_merge import add_post_merge
from model.config import GpuConfig, GpuHardwareConfig
from model.config.gpu import DRA_DRIVER_IMAGE as DRA_IMAGE, DraDriverConfig
from model.dra.evidence import next_claims_step, next_dra_step
from model.dra.gate import DraApp, EvidenceFile, plan_dra
from model.evidence import EvidenceError
from model.outputs import ProgramOutputs
from tests.components.test_intel_gpu_dra import DRA, with_dra

JELLYFIN = ("  gpu-platform:apps:\n    - name: jellyfin\n      image: docker.io/jellyfin/jellyfin:10.9.0\n"
            "      port: 8096\n      egressClass: internet\n      authMode: app-native\n"
            "      hardware:\n        gpu: intel-quicksync\n")
PLEX_GPU = "    hardware:\n      gpu: intel-quicksync\n"


def stage(stack: str, name: str, extra: str = "", text: str | None = None) -> str:
    """A stack file on the DRA route at stage `name`, with `extra` lines under gpu.dra."""
    return with_dra(text or stack_text(stack), DRA + f"      stage: {name}\n" + extra)


def slices(stack: str, nodes: dict[str, int], kernel: str = "i915") -> str:
    body = "".join(f"  {n}: {c}\n" for n, c in nodes.items())
    return f"stack: {stack}\ndriver: gpu.intel.com\nkernelDriver: {kernel}\nnodes:\n{body}"


def claims(stack: str, apps: dict[str, str]) -> str:
    body = "".join(f"  {a}: {n}\n" for a, n in apps.items())
    return f"stack: {stack}\ndriver: gpu.intel.com\napps:\n{body}"


EVERY_SLICE = {"dra/prod": slices("prod", dict.fromkeys(PROD_NODES, 1))}
EVERY_CLAIM = {**EVERY_SLICE, "dra/claims/prod": claims("prod", {"plex": "k3s-prod-1"})}


def run(tmp_path, text: str, evidence: dict[str, str]):
    from gitops.engine.program import run_program

    return run_program("prod", make_project(tmp_path / "project", {"prod": text}, evidence))


def objects(capture) -> dict[tuple[str, str], dict]:
    return {(o.manifest["kind"], o.manifest["metadata"]["name"]): o.manifest for o in capture_tree(capture).objects}


def refused(tmp_path, capsys, text: str, evidence: dict[str, str]) -> list[str]:
    """The export's error lines; OUT must stay empty."""
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    code = export(out, "prod", project=make_project(tmp_path / "project", {"prod": text}, evidence))
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert code == 2 and list(out.iterdir()) == [], (code, errors)
    return errors


def test_step_3_switches_plex_to_a_claim_and_removes_its_i915_request_in_the_same_export(tmp_path):
    capture = run(tmp_path, stage("prod", "apps-on-claims"), EVERY_SLICE)
    found = objects(capture)
    pod = found[("Deployment", "plex")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "plex-gpu"}]
    assert container["resources"]["claims"] == [{"name": "gpu"}]
    assert "gpu.intel.com/i915" not in container["resources"]["limits"]
    assert not [v for v in pod["volumes"] if "hostPath" in v]
    assert found[("ResourceClaimTemplate", "plex-gpu")]["spec"] == {"spec": {"devices": {"requests": [{
        "name": "gpu", "exactly": {"deviceClassName": "gpu.intel.com", "selectors": [
            {"cel": {"expression": 'device.attributes["gpu.intel.com"].driver == "i915"'}}]}}]}}}
    assert "resource.kubernetes.io/admin-access" not in found[("Namespace", "plex")]["metadata"]["labels"]
    # the app's own Kustomization now waits for the driver's; the plugin stays until step 5
    assert {"name": "intel-gpu-resource-driver"} in found[("Kustomization", "plex")]["spec"]["dependsOn"]
    assert ("DaemonSet", "intel-gpu-plugin") in found and ("Kustomization", "intel-gpu-plugin") in found
    assert capture.stack_outputs["draMigration"] == {
        "stage": "apps-on-claims", "step": 3, "plugin": True, "claims": ["plex"], "adminAccess": [],
        "adminAccessNamespaces": [],
        "next": "step 4: record that every claim is allocated and every app runs: " + next_claims_step("prod")}
    assert capture.stack_outputs["gpuApps"]["plex"]["access"] == "dra-claim"
    assert ("info", "gpu.route dra: step 3 of 5 (apps-on-claims); next: step 4: record that every claim is "
                    f"allocated and every app runs: {next_claims_step('prod')}") in capture.logs


def test_step_1_names_step_2_as_next_and_claims_nothing(tmp_path):
    capture = run(tmp_path, stage("prod", "driver-added"), {})
    assert capture.stack_outputs["draMigration"]["next"] == ("step 2: record that every node publishes its slice: "
                                                             + next_dra_step("prod"))
    assert not [k for k in objects(capture) if k[0] == "ResourceClaimTemplate"]


def test_step_5_removes_the_plugin_and_its_kustomization_and_keeps_plex_on_its_claim(tmp_path):
    capture = run(tmp_path, stage("prod", "plugin-removed"), EVERY_CLAIM)
    found = objects(capture)
    assert not [k for k in found if "intel-gpu-plugin" in k[1]]
    assert ("DaemonSet", "intel-gpu-resource-driver-kubelet-plugin") in found
    # what the policy rule intel-gpu-plugin-not-beside-dra-driver (and its Kyverno twin) read from here on
    assert found[("Namespace", "intel-gpu-resource-driver")]["metadata"]["labels"] == {
        "app-namespace": "false", "gpu-platform.home.arpa/device-plugin-removed": "true"}
    assert found[("Deployment", "plex")]["spec"]["template"]["spec"]["resourceClaims"][0]["name"] == "gpu"
    migration = capture.stack_outputs["draMigration"]
    assert (migration["step"], migration["plugin"]) == (5, False)
    assert migration["next"] == "none: the move to DRA is complete"
    assert capture.stack_outputs["fluxGraph"]["plugin"] is None and "pluginImage" not in capture.stack_outputs
    tree = capture_tree(capture)
    add_post_merge(tree, ProgramOutputs.from_output("prod", capture.stack_outputs))
    suite = list(yaml.safe_load_all(tree.files[suite_path(tree.layout)]))
    assert [t["metadata"]["name"] for t in suite] == ["intel-gpu-resource-driver", "plex"]
    assert suite[0]["spec"]["steps"][-1]["try"] == [{"error": {"resource": {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "intel-gpu-plugin",
                                                                   "namespace": "intel-gpu-plugin"}}}}]
    checklist = tree.files[f"{tree.layout.records}/POST-MERGE.md"].decode()
    assert "intel-gpu-plugin" not in checklist and "allocated,reserved" in checklist


def test_the_post_merge_suite_of_step_3_asserts_the_claim_allocated_and_no_i915_request(tmp_path):
    capture = run(tmp_path, stage("prod", "apps-on-claims"), EVERY_SLICE)
    tree = capture_tree(capture)
    add_post_merge(tree, ProgramOutputs.from_output("prod", capture.stack_outputs))
    suite = {t["metadata"]["name"]: t for t in yaml.safe_load_all(tree.files[suite_path(tree.layout)])}
    assert list(suite) == ["intel-gpu-plugin", "gpu-advertised", "intel-gpu-resource-driver", "plex"]
    ops = [op for step in suite["plex"]["spec"]["steps"] for op in step["try"]]
    claim = next(op["assert"]["resource"] for op in ops if "assert" in op
                 and op["assert"]["resource"]["kind"] == "ResourceClaim")
    assert claim["metadata"] == {"namespace": "plex"}
    assert claim["status"]["allocation"]["devices"] == {
        "(results[?driver == 'gpu.intel.com'] | length(@) > `0`)": True}
    errors = [op["error"]["resource"]["spec"] for op in ops if "error" in op]
    assert {'(containers[0].resources.limits."gpu.intel.com/i915" != `null`)': True} in errors
    checklist = tree.files[f"{tree.layout.records}/POST-MERGE.md"].decode()
    assert next_claims_step("prod") in checklist


def test_admin_access_labels_the_named_namespace_and_shares_the_device(tmp_path):
    """Four apps on three one-iGPU nodes: exclusive claims cannot all be allocated, adminAccess ones can."""
    apps = "  gpu-platform:apps:\n" + "".join(
        f"    - name: {n}\n      image: docker.io/jellyfin/jellyfin:10.9.0\n      port: 8096\n"
        "      egressClass: internet\n      authMode: app-native\n      hardware:\n        gpu: intel-quicksync\n"
        "        draAllocation: admin-access\n" for n in ("jf-a", "jf-b", "jf-c"))
    text = stage("prod", "apps-on-claims", "      adminAccessNamespaces: [jf-a, jf-b, jf-c]\n",
                 text=with_dra(stack_text("prod"), apps))
    found = objects(run(tmp_path, text, EVERY_SLICE))
    for name in ("jf-a", "jf-b", "jf-c"):
        assert found[("Namespace", name)]["metadata"]["labels"]["resource.kubernetes.io/admin-access"] == "true"
        assert found[("ResourceClaimTemplate", f"{name}-gpu")]["spec"]["spec"]["devices"]["requests"][0][
            "exactly"]["adminAccess"] is True
    assert "adminAccess" not in found[("ResourceClaimTemplate", "plex-gpu")]["spec"]["spec"]["devices"][
        "requests"][0]["exactly"]


# --- refusals: one line each, nothing written ---------------------------------------------------------------------

def test_a_claim_without_slice_evidence_is_refused(tmp_path, capsys):
    assert refused(tmp_path, capsys, stage("prod", "apps-on-claims"), {}) == [
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "apps-on-claims": refused: there is no evidence that '
        "every node publishes a gpu.intel.com ResourceSlice (evidence/dra/prod.yaml is missing): step 2 was skipped; "
        "a claim no slice can satisfy leaves plex Pending, its Kustomization never Ready and every tier that waits "
        f"for it stalled; hint: merge step 1 (driver-added), then run `{next_dra_step('prod')}`"]


def test_a_node_without_a_slice_is_refused(tmp_path, capsys):
    two = {"dra/prod": slices("prod", {"k3s-prod-1": 1, "k3s-prod-2": 1})}
    (line,) = refused(tmp_path, capsys, stage("prod", "apps-on-claims"), two)
    assert line == (
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "apps-on-claims": refused: evidence/dra/prod.yaml shows '
        "no gpu.intel.com slice on k3s-prod-3; a claim no slice can satisfy leaves plex Pending, its Kustomization "
        "never Ready and every tier that waits for it stalled; hint: merge step 1 (driver-added), then run "
        f"`{next_dra_step('prod')}`")


def test_slice_evidence_of_another_kernel_driver_is_refused(tmp_path, capsys):
    xe = {"dra/prod": slices("prod", dict.fromkeys(PROD_NODES, 1), kernel="xe")}
    (line,) = refused(tmp_path, capsys, stage("prod", "apps-on-claims"), xe)
    assert line == ('error: evidence/dra/prod.yaml: kernelDriver: "xe": expected "i915"; '
                    f"hint: regenerate it with `{next_dra_step('prod')}`")


def test_the_plugin_removed_before_the_claims_are_proven_allocated_is_refused(tmp_path, capsys):
    (line,) = refused(tmp_path, capsys, stage("prod", "plugin-removed"), EVERY_SLICE)
    assert line == (
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "plugin-removed": refused: there is no evidence that '
        "the claims are allocated and the apps run (evidence/dra/claims/prod.yaml is missing): step 4 was skipped; "
        "removing the plugin now would take the GPU from plex while it may still run on gpu.intel.com/i915; hint: "
        f"export and merge step 3 (apps-on-claims), then run `{next_claims_step('prod')}`")


def test_the_plugin_removed_while_one_app_is_not_proven_on_its_claim_is_refused(tmp_path, capsys):
    text = stage("prod", "plugin-removed", text=with_dra(stack_text("prod"), JELLYFIN))
    (line,) = refused(tmp_path, capsys, text, EVERY_CLAIM)
    assert line == (
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "plugin-removed": refused: evidence/dra/claims/prod.yaml '
        "does not show jellyfin running on an allocated claim; removing the plugin now would take the GPU from "
        "jellyfin while it may still run on gpu.intel.com/i915; hint: export and merge step 3 (apps-on-claims), then "
        f"run `{next_claims_step('prod')}`")


def test_a_skipped_step_names_the_missing_evidence(tmp_path, capsys):
    (line,) = refused(tmp_path, capsys, stage("prod", "plugin-removed"), {})
    assert line == (
        'error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "plugin-removed": refused: there is no evidence that '
        "every node publishes a gpu.intel.com ResourceSlice (evidence/dra/prod.yaml is missing): step 2 was skipped; "
        "a claim no slice can satisfy leaves plex Pending, its Kustomization never Ready and every tier that waits "
        f"for it stalled; hint: merge step 1 (driver-added), then run `{next_dra_step('prod')}`")


def test_an_admin_access_claim_in_an_unlabelled_namespace_is_refused(tmp_path, capsys):
    text = stage("prod", "apps-on-claims", text=stack_text("prod").replace(
        PLEX_GPU, PLEX_GPU + "      draAllocation: admin-access\n"))
    (line,) = refused(tmp_path, capsys, text, EVERY_SLICE)
    assert line == (
        'error: Pulumi.prod.yaml: gpu-platform:plex.hardware.draAllocation: "admin-access": an adminAccess claim in '
        'namespace "plex", which gpu.dra.adminAccessNamespaces does not name, so the export does not label it '
        'resource.kubernetes.io/admin-access: "true" and the API server would refuse the claim; hint: add "plex" to '
        "gpu.dra.adminAccessNamespaces, or use draAllocation: exclusive")


def test_exclusive_claims_beyond_the_nodes_devices_are_refused(tmp_path, capsys):
    text = stage("prod", "apps-on-claims", text=stack_text("prod").replace(PLEX_GPU, PLEX_GPU + "      devices: 2\n"))
    (line,) = refused(tmp_path, capsys, text, EVERY_SLICE)
    assert line == ("error: Pulumi.prod.yaml: gpu-platform:plex.hardware.devices: 2: plex's exclusive claim cannot be "
                    "allocated: the apps' exclusive claims ask for 2 gpu.intel.com devices in all, the nodes publish "
                    "k3s-prod-1=1, k3s-prod-2=1, k3s-prod-3=1 healthy (evidence/dra/prod.yaml), and an exclusive "
                    "device serves one claim; plex would stay Pending; hint: share the iGPU with draAllocation: "
                    "admin-access (its namespace in gpu.dra.adminAccessNamespaces), or hold an app back with "
                    "intelGpuAccess: host-path")


def test_an_explicit_device_plugin_request_from_step_3_on_is_refused(tmp_path, capsys):
    text = stage("prod", "apps-on-claims", text=stack_text("prod").replace(
        PLEX_GPU, PLEX_GPU + "      intelGpuAccess: device-plugin\n"))
    (line,) = refused(tmp_path, capsys, text, EVERY_SLICE)
    assert line == ('error: Pulumi.prod.yaml: gpu-platform:plex.hardware.intelGpuAccess: "device-plugin": refused at '
                    "gpu.dra.stage apps-on-claims: from step 3 on every GPU app claims the iGPU, never a claim and "
                    "gpu.intel.com/i915 in one export; hint: set intelGpuAccess: auto (or host-path to hold plex back)")


def test_evidence_of_a_node_the_stack_does_not_list_is_refused(tmp_path, capsys):
    other = {"dra/prod": slices("prod", {**dict.fromkeys(PROD_NODES, 1), "k3s-old-9": 1})}
    (line,) = refused(tmp_path, capsys, stage("prod", "apps-on-claims"), other)
    assert line == ("error: evidence/dra/prod.yaml: nodes: k3s-old-9: not in this stack's nodes (k3s-prod-1, "
                    "k3s-prod-2, k3s-prod-3); the evidence is for another cluster or an old list; "
                    f"hint: regenerate it with `{next_dra_step('prod')}`")


@pytest.mark.parametrize("evidence,problem", [
    ("stack: prod\ndriver: gpu.intel.com\napps: {plex: 7}\n",
     "apps.plex: 7: not a Kubernetes node name (lowercase letters, digits, '-' and '.', at most 253)"),
    ("stack: prod\ndriver: gpu.intel.com\napps: []\n",
     "apps: must map each GPU app to the node its allocated claim runs it on"),
    ("stack: dev\ndriver: gpu.intel.com\napps: {plex: k3s-prod-1}\n", 'stack: "dev": expected "prod"'),
    ("- not a mapping\n", "(root): not a mapping"),
    ("stack: prod\ndriver: gpu.intel.com\napps: {plex: k3s-prod-1}\nnote: extra\n",
     "note: unknown keys; allocation evidence holds stack, driver and apps only"),
    ("stack: prod\n\x00", "(file): binary data (a NUL byte at offset 12), not text"),
])
def test_hostile_allocation_evidence_is_one_line_per_problem_and_nothing_written(tmp_path, capsys, evidence, problem):
    lines = refused(tmp_path, capsys, stage("prod", "plugin-removed"),
                    {**EVERY_SLICE, "dra/claims/prod": evidence})
    assert lines == [f"error: evidence/dra/claims/prod.yaml: {problem}; "
                     f"hint: regenerate it with `{next_claims_step('prod')}`"]


# --- every layout, one base ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("step", ["apps-on-claims", "plugin-removed"])
@pytest.mark.parametrize("layout", LAYOUT_REPOSITORIES)
def test_every_layout_exports_each_step_and_checks_clean(tmp_path, layout, step):
    name, stacks, _ = LAYOUT_REPOSITORIES[layout]
    out = repo_copy(tmp_path, name)
    texts = {s: stage(s, step, text=t) for s, t in stacks.items()}
    evidence = {}
    for s, t in stacks.items():
        nodes = yaml.safe_load(t)["config"]["gpu-platform:cluster"]["nodes"]
        evidence[f"dra/{s}"] = slices(s, dict.fromkeys(nodes, 1))
        evidence[f"dra/claims/{s}"] = claims(s, {"plex": nodes[0]})
    project = make_project(tmp_path / "project", texts, evidence)
    assert export(out, *texts, project=project) == 0
    # where the repository delivers Plex (the shared base), its renderer switches it; the export writes no Plex
    delivered = "deliveredBy: repository" not in next(iter(stacks.values()))
    assert bool(list(out.rglob("resourceclaimtemplate.plex-gpu.yaml"))) == delivered
    assert bool(list(out.rglob("daemonset.intel-gpu-plugin*"))) == (step == "apps-on-claims")
    assert export(out, *texts, project=project, check=True) == 0


def test_one_base_takes_each_step_for_all_its_stacks(tmp_path, capsys):
    name, stacks, _ = LAYOUT_REPOSITORIES["shared-base"]
    out = repo_copy(tmp_path, name)
    texts = {"dev": stage("dev", "driver-added", text=stacks["dev"]),
             "prod": stage("prod", "apps-on-claims", text=stacks["prod"])}
    evidence = {"dra/prod": slices("prod", dict.fromkeys(yaml.safe_load(stacks["prod"])["config"][
        "gpu-platform:cluster"]["nodes"], 1))}
    capsys.readouterr()
    assert export(out, *texts, project=make_project(tmp_path / "project", texts, evidence)) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == ['error: Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: "apps-on-claims", while dev says '
                      '"driver-added": the stacks of the base clusters/base share one set of components, so the move '
                      "to DRA takes each step for all of them at once; hint: set the same gpu.dra.stage in every stack "
                      "of the base, with each stack's evidence"]


def test_the_preview_says_which_step_the_stack_is_at_and_what_the_next_needs(tmp_path):
    from gitops.plan.render import render_text
    from gitops.preview import preview

    project = make_project(tmp_path / "project", {"prod": stage("prod", "driver-added")})
    text = render_text(preview("prod", tmp_path / "out", project))
    assert (f"info: gpu.route dra: step 1 of 5 (driver-added); next: step 2: record that every node publishes its "
            f"slice: {next_dra_step('prod')}") in text


def test_a_shared_base_writes_the_claim_template_of_an_app_it_delivers_once_for_every_stack(tmp_path):
    """The shared base's Plex is the repository's; an app the export delivers there gets its claim template in the
    base, the same for each overlay, at step 3 and after step 5."""
    name, stacks, _ = LAYOUT_REPOSITORIES["shared-base"]
    out = repo_copy(tmp_path, name)
    app = JELLYFIN + "      delivery:\n        dependsOn: [apps-wave-0]\n"
    for step in ("apps-on-claims", "plugin-removed"):
        texts = {s: stage(s, step, text=with_dra(t, app)) for s, t in stacks.items()}
        evidence = {}
        for s, t in stacks.items():
            nodes = yaml.safe_load(t)["config"]["gpu-platform:cluster"]["nodes"]
            evidence[f"dra/{s}"] = slices(s, dict.fromkeys(nodes, 1))
            evidence[f"dra/claims/{s}"] = claims(s, {"plex": nodes[0], "jellyfin": nodes[-1]})
        assert export(out, *texts, project=make_project(tmp_path / f"project-{step}", texts, evidence)) == 0
        assert [p.relative_to(out).as_posix() for p in out.rglob("resourceclaimtemplate.*")] == [
            "platform/jellyfin/resourceclaimtemplate.jellyfin-gpu.yaml"]
    assert not list(out.rglob("*intel-gpu-plugin*"))


# --- step 5 with the repository's driver and apps: the evidence asked of each app, at its release (issue 53) --------

def adopting(stage_name: str = "plugin-removed") -> GpuConfig:
    driver = {"namespace": "kube-system", "name": "intel-gpu-resource-driver"}
    return GpuConfig.model_validate({"route": "dra", "dra": {"deliveredBy": "repository", "stage": stage_name,
                                                            "kustomization": driver}})


def adopted_plex(adopted: bool = True) -> DraApp:
    return DraApp("plex", "plex", GpuHardwareConfig(gpu="intel-quicksync"), "repository", adopted)


NO_SLICES = EvidenceFile("evidence/dra/prod.yaml", None)
NO_CLAIMS = EvidenceFile("evidence/dra/claims/prod.yaml", None)
SLICES = EvidenceFile("evidence/dra/prod.yaml", dict.fromkeys(PROD_NODES, 1))


def test_step_5_adopting_the_driver_and_every_app_allows_no_claim_without_evidence_instead_of_refusing_the_stage():
    plan = plan_dra(adopting(), PROD_NODES, [adopted_plex()], NO_SLICES, NO_CLAIMS, "prod")
    assert not plan.plugin and plan.step == 5
    decision = plan.decisions["plex"]
    assert decision.access == "host-path"
    assert decision.reason == (
        "there is no evidence that every node publishes a gpu.intel.com ResourceSlice (evidence/dra/prod.yaml is "
        f"missing): step 2 was skipped; a claim of plex needs that evidence; next: {next_dra_step('prod')}")
    claims_missing = plan_dra(adopting(), PROD_NODES, [adopted_plex()], SLICES, NO_CLAIMS, "prod")
    assert claims_missing.decisions["plex"].reason.endswith(
        f"step 4 was skipped; a claim of plex needs that evidence; next: {next_claims_step('prod')}")
    proven = plan_dra(adopting(), PROD_NODES, [adopted_plex()], SLICES,
                      EvidenceFile("evidence/dra/claims/prod.yaml", {"plex": "k3s-prod-1"}), "prod")
    assert proven.decisions["plex"].access == "dra-claim"


@pytest.mark.parametrize("case", ["an app the export writes", "a repository app not adopted", "step 3",
                                  "the export's own driver"])
def test_the_stage_is_still_refused_where_the_export_writes_what_the_evidence_protects(case):
    gpu, apps = adopting(), [adopted_plex()]
    if case == "an app the export writes":
        apps.append(DraApp("apps[0]", "jellyfin", GpuHardwareConfig(gpu="intel-quicksync")))
    elif case == "a repository app not adopted":
        apps = [adopted_plex(adopted=False)]
    elif case == "step 3":
        gpu = adopting("apps-on-claims")
        apps.append(DraApp("apps[0]", "jellyfin", GpuHardwareConfig(gpu="intel-quicksync")))
    else:
        gpu = GpuConfig(route="dra", dra=DraDriverConfig(image=DRA_IMAGE, imageDigest=f"sha256:{'ab' * 32}",
                                                         stage="plugin-removed"))
    with pytest.raises(EvidenceError) as refused:
        plan_dra(gpu, PROD_NODES, apps, NO_SLICES, NO_CLAIMS, "prod")
    assert refused.value.lines[0].startswith("Pulumi.prod.yaml: gpu-platform:gpu.dra.stage: ")
