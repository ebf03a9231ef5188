"""The export inside a real Flux repository: every exported object applied exactly once, nothing of the
repository's own lost, and each refusal one line naming the file to change, with nothing written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from conftest import (
    EXAMPLE,
    EXAMPLES,
    FIXTURES,
    LAYOUT_REPOSITORIES,
    cluster_documents,
    export,
    files_of,
    make_project,
    repo_copy,
    stack_text,
)
from gitops.export import main as export_main
from gitops.flux.build import RepoView
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk
from gitops.index import SUITE_FILE
from model.dra.evidence import next_dra_step

REPOS = FIXTURES / "repos"
HOME_STACK = (REPOS / "stacks" / "cluster-template.yaml").read_text()








def refused(capsys, out: Path, *stacks: str, project: Path | None = None) -> list[str]:
    """Export, expecting a refusal: returns the error lines; asserts nothing was written."""
    before = files_of(out)
    capsys.readouterr()
    assert export(out, *stacks, project=project) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert files_of(out) == before, "a refused export changed the repository"
    *errors, last = err.splitlines()
    assert last == "nothing was written" and all(line.startswith("error: ") for line in errors), err
    return [line.removeprefix("error: ") for line in errors]


def exported_ids(out: Path, folders: list[str]) -> list[ObjectId]:
    return [ObjectId.of(d) for folder in folders for _, d in cluster_documents(out, out / folder)]


def variant(tmp_path: Path, stack: str, text: str) -> Path:
    return make_project(tmp_path / f"project-{stack}", {stack: text})


# --- works with no hand edit ---------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_flux_bootstrap_repository_gets_every_exported_object_applied_once_and_keeps_all_of_its_own(tmp_path, stack):
    out = repo_copy(tmp_path, "flux-bootstrap")
    before = walk(RepoView(out), f"./clusters/{stack}")
    assert export(out, stack) == 0
    after = walk(RepoView(out), f"./clusters/{stack}")
    ids = exported_ids(out, [f"clusters/{stack}/gpu-platform", f"components/{stack}"])
    assert len(ids) == 20
    for oid in ids:
        assert len(after.applied_by.get(oid, [])) == 1, f"{oid}: applied by {after.applied_by.get(oid)}"
    for oid, appliers in before.applied_by.items():
        now = after.applied_by.get(oid)
        assert now == appliers, f"{oid}: was applied by {appliers}, now {now}"
    # The tiers' hand-written folders are walked now, and Plex comes from its own Kustomization.
    assert after.applied_by[ObjectId("apps", "Deployment", "plex", "plex")] == [("flux-system", "plex")]
    assert after.applied_by[ObjectId("apps", "Deployment", "home-automation", "home-assistant")] == \
        [("flux-system", "apps-wave-0")]
    assert after.problems == []
    assert export(out, stack, check=True) == 0


def test_both_stacks_in_one_bootstrap_repository(tmp_path):
    out = repo_copy(tmp_path, "flux-bootstrap")
    assert export(out, "dev", "prod") == 0
    for stack in ("dev", "prod"):
        after = walk(RepoView(out), f"./clusters/{stack}")
        assert all(len(a) == 1 for a in after.applied_by.values())
        assert ObjectId("", "Namespace", "", "flux-system") in after.applied_by


def test_a_cluster_template_repository_with_its_config(tmp_path):
    out = repo_copy(tmp_path, "cluster-template")
    project = variant(tmp_path, "home", HOME_STACK)
    before = walk(RepoView(out), "./kubernetes/flux/cluster")
    assert export(out, "home", project=project) == 0
    after = walk(RepoView(out), "./kubernetes/flux/cluster")
    ids = exported_ids(out, ["kubernetes/apps/gpu-platform", "kubernetes/gpu-platform"])
    assert len(ids) == 15
    for oid in ids:
        assert len(after.applied_by.get(oid, [])) == 1, oid
    for oid, appliers in before.applied_by.items():
        assert after.applied_by.get(oid) == appliers, oid
    plex_ks = after.kustomizations[("flux-system", "plex")]
    assert plex_ks.depends == (("storage", "local-path-provisioner"),)
    assert after.kustomizations[("flux-system", "intel-gpu-plugin")].depends == (("kube-system", "cilium"),)
    # The repository's formatter indents sequences; so does the export, as the stack asks.
    assert "\n    - name: local-path-provisioner\n" in (out / "kubernetes/apps/gpu-platform/ks.plex.yaml").read_text()
    assert export(out, "home", project=project, check=True) == 0


def test_an_export_of_the_older_layout_is_migrated_and_flux_system_is_applied_again(tmp_path):
    """Before the entry folder, the export wrote clusters/<stack>/kustomization.yaml, which cut flux-system out."""
    out = repo_copy(tmp_path, "flux-bootstrap")
    old = {
        "clusters/prod/kustomization.yaml": b"---\nresources:\n- configmap.cluster-vars.yaml\n",
        "clusters/prod/configmap.cluster-vars.yaml":
            b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\n",
    }
    for rel, data in old.items():
        (out / rel).write_bytes(data)
    index = {"files": {rel: hashlib.sha256(data).hexdigest() for rel, data in old.items()}, "stack": "prod"}
    (out / "clusters/prod/export-index.json").write_text(json.dumps(index))
    assert export(out, "prod") == 0
    for rel in [*old, "clusters/prod/export-index.json"]:
        assert not (out / rel).exists(), f"{rel} of the older export was not pruned"
    after = walk(RepoView(out), "./clusters/prod")
    assert after.applied_by[ObjectId("", "Namespace", "", "flux-system")] == [("flux-system", "flux-system")]


# --- formatting is not an edit -------------------------------------------------------------------------------

def reformat_with_indented_sequences(out: Path, folders: list[str]) -> int:
    """What prettier does to the exported YAML: sequences indented, comments kept, quoting its own."""
    from ruamel.yaml import YAML

    rt = YAML()
    rt.indent(mapping=2, sequence=4, offset=2)
    rt.explicit_start = True
    rt.width = 4096
    changed = 0
    for folder in folders:
        for path in sorted((out / folder).rglob("*.yaml")):
            docs = list(rt.load_all(path.read_text()))
            from io import StringIO
            buf = StringIO()
            rt.dump_all(docs, buf)
            if buf.getvalue() != path.read_text():
                path.write_text(buf.getvalue())
                changed += 1
    return changed


def test_a_tree_reformatted_with_indented_sequences_is_unchanged_for_check_and_re_export(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    assert export(out, "prod") == 0
    assert reformat_with_indented_sequences(out, ["clusters/prod/gpu-platform", "components/prod"]) >= 15
    formatted = files_of(out)
    assert b"\n    - name: platform-config\n" in formatted["clusters/prod/gpu-platform/ks.plex.yaml"]
    assert export(out, "prod", check=True) == 0
    capsys.readouterr()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "prod", "--out", str(out)]) == 0
    assert "prod: 0 written, 0 pruned, 27 unchanged" in capsys.readouterr().out
    assert files_of(out) == formatted, "a re-export rewrote files that only a formatter had touched"


def test_a_content_change_under_the_formatting_is_still_a_hand_edit(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    assert export(out, "prod") == 0
    reformat_with_indented_sequences(out, ["components/prod"])
    svc = out / "components/prod/plex/service.plex.yaml"
    svc.write_text(svc.read_text().replace("type: LoadBalancer", "type: NodePort"))
    assert export(out, "prod", check=True) == 1
    assert "changed  components/prod/plex/service.plex.yaml" in capsys.readouterr().out
    project = variant(tmp_path, "prod", stack_text("prod").replace("192.168.10.40", "192.168.10.41"))
    assert refused(capsys, out, "prod", project=project) == [
        f"{out}/components/prod/plex/service.plex.yaml: edited by hand since the last export; refusing to overwrite "
        "it; hint: put the change into the program or stack config, then `git checkout` the file"]


def test_sequence_indent_2_writes_what_a_formatter_writes_and_passes_lint(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    text = stack_text("dev") + "  gpu-platform:gitops:\n    sequenceIndent: 2\n"
    project = variant(tmp_path, "dev", text)
    assert export_main(["--stack", "dev", "--out", str(out), "--quiet", "--lint", "--project-dir", str(project)]) == 0
    kustomization = (out / "components/dev/plex/kustomization.yaml").read_text()
    assert "resources:\n  - deployment.plex.yaml\n" in kustomization
    # Reformatting back to kubectl style is not an edit either.
    plain = tmp_path / "plain"
    assert export(plain, "dev") == 0
    for rel, data in files_of(plain).items():
        if rel.endswith(".yaml"):
            assert yaml.safe_load_all(data.decode()) and list(yaml.safe_load_all(data)) == \
                list(yaml.safe_load_all((out / rel).read_bytes())), rel


# --- refusals -------------------------------------------------------------------------------------------------

def test_a_hand_written_cluster_kustomization_gets_the_exact_entry_to_add_and_passes_once_it_is_there(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    own = out / "clusters/prod/kustomization.yaml"
    own.write_text("---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                   "resources:\n  - flux-system\n")
    lines = refused(capsys, out, "prod")
    assert lines == [
        "clusters/prod/kustomization.yaml: resources: lacks 'gpu-platform', so nothing applies the 8 objects the "
        "export writes to clusters/prod/gpu-platform/ (e.g. ConfigMap flux-system/cluster-vars); hint: add "
        "`- gpu-platform` to its resources"]
    own.write_text(own.read_text() + "  - gpu-platform\n")
    assert export(out, "prod") == 0


def test_a_folder_applied_by_two_kustomizations_is_refused_naming_the_entry_to_remove(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    wave0 = out / "kubernetes/prod/apps/wave-0/kustomization.yaml"
    wave0.write_text(wave0.read_text() + "- ../../../../components/prod/plex\n")
    lines = [line for line in refused(capsys, out, "prod") if line.startswith("kubernetes/prod/apps/wave-0/")]
    assert lines == [
        "kubernetes/prod/apps/wave-0/kustomization.yaml: resources: `../../../../components/prod/plex`: "
        "flux-system/apps-wave-0 applies the 9 objects of components/prod/plex/ (e.g. Deployment plex/plex, written to "
        "components/prod/plex/deployment.plex.yaml), which flux-system/plex (path ./components/prod/plex) applies "
        "too; two Kustomizations applying one object fight over it and each prunes it when the other changes; hint: "
        "remove `../../../../components/prod/plex` from its resources"]


def test_an_entry_folder_that_would_cut_flux_system_out_of_the_bootstrap_build_is_refused(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    project = variant(tmp_path, "prod", stack_text("prod") + "  gpu-platform:gitops:\n    entryDir: clusters/prod\n")
    assert refused(capsys, out, "prod", project=project) == [
        'Pulumi.prod.yaml: gpu-platform:gitops.entryDir: "clusters/prod": the export\'s own '
        "clusters/prod/kustomization.yaml lists only the export's files, so the 12 objects flux-system/flux-system "
        "applied from clusters/prod/flux-system/gotk-components.yaml and clusters/prod/flux-system/gotk-sync.yaml "
        "before this export (e.g. Namespace flux-system from clusters/prod/flux-system/gotk-components.yaml) would be "
        "applied by no Kustomization after it; with prune: true Flux would delete them from the cluster; hint: set "
        "gitops.entryDir to a folder of its own, such as clusters/prod/gpu-platform"]


def test_a_tier_moved_out_of_cluster_vars_reach_applies_its_variables_as_written_as_flux_does(tmp_path, capsys):
    """Wave 1 moved to its own namespace: cluster-vars (in flux-system) is out of its reach, so the program gives it no
    substituteFrom, and a Kustomization without variables is not substituted at all: Flux applies `${TIMEZONE}` as
    written (as it applies a dashboard's `${DS}`). The walk used to refuse it; tests/differential found Flux building
    it, so the walk builds it too and the export goes through, with a warning naming the variable: under a
    Kustomization the export declares, a variable applied as written is almost always a mistake."""
    out = repo_copy(tmp_path, "flux-bootstrap")
    text = stack_text("prod").replace("        dependsOn: [apps-wave-0]\n",
                                      "        namespace: media\n"
                                      "        dependsOn: [{name: apps-wave-0, namespace: flux-system}]\n")
    capsys.readouterr()
    assert export(out, "prod", project=variant(tmp_path, "prod", text)) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "${TIMEZONE}" in line]
    assert warnings == [
        "WARNING prod: kubernetes/prod/apps/wave-1/deployment.overseerr.yaml (Deployment media/overseerr): "
        "spec.template.spec.containers[0].env[0].value: ${TIMEZONE} is applied as written: media/apps-wave-1 has no "
        "variables (no postBuild, or a substituteFrom out of its namespace's reach), and Flux substitutes only where "
        "a Kustomization has some; hint: give media/apps-wave-1 the variables it needs (cluster-vars lives in "
        "flux-system), or write $${TIMEZONE} if the text is meant"]
    view = walk(RepoView(out), "./clusters/prod")
    assert view.kustomizations[("media", "apps-wave-1")].variables == {}
    overseerr = view.manifests[ObjectId("apps", "Deployment", "media", "overseerr")]
    assert overseerr["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "${TIMEZONE}"


def test_a_hand_written_kustomization_whose_path_leaves_the_repository_is_refused(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    (out / "kubernetes/prod/apps/wave-1/ks.escape.yaml").write_text(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: escape\n"
        "  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./../../etc\n  prune: true\n"
        "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
    wave1 = out / "kubernetes/prod/apps/wave-1/kustomization.yaml"
    wave1.write_text(wave1.read_text() + "- ks.escape.yaml\n")
    lines = refused(capsys, out, "prod")
    assert lines == [
        "kubernetes/prod/apps/wave-1/ks.escape.yaml: spec.path: './../../etc': leaves the repository, and Flux reads "
        "only its source; flux-system/escape (kubernetes/prod/apps/wave-1/ks.escape.yaml) fails to build because of "
        "it, and Flux holds back whatever depends on it; hint: set spec.path to a folder of the repository (./…)"]


@pytest.mark.parametrize("path,key,problem", [
    ("./../../etc", "flux.tiers[0].path", "'.' and '..' are not allowed: a Flux path names a folder inside the "
     "repository; hint: write it from the repository root, e.g. ./kubernetes/prod/apps"),
    ("./components/prod/plex", "flux.tiers[0].path", "overlaps 'components/prod', a folder the export owns, so the "
     "tier would apply exported objects a second time; hint: point the tier at its hand-written folder")])
def test_a_tier_path_outside_the_repository_or_into_an_exported_folder_is_refused(tmp_path, capsys, path, key,
                                                                                  problem):
    out = repo_copy(tmp_path, "flux-bootstrap")
    text = stack_text("prod").replace("path: ./kubernetes/prod/cilium", f"path: {path}")
    lines = refused(capsys, out, "prod", project=variant(tmp_path, "prod", text))
    assert lines == [f"Pulumi.prod.yaml: gpu-platform:{key}: \"{path}\": {problem}"]


def test_a_kustomization_that_waits_for_a_tier_plex_joined_must_wait_for_plex_too(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    (out / "clusters/prod/ks.extras.yaml").write_text(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: extras\n"
        "  namespace: flux-system\nspec:\n  dependsOn:\n  - name: apps-wave-0\n  interval: 1h\n"
        "  path: ./kubernetes/prod/apps/wave-1\n  prune: true\n  sourceRef:\n    kind: GitRepository\n"
        "    name: flux-system\n")
    assert refused(capsys, out, "prod") == [
        "clusters/prod/ks.extras.yaml: flux-system/extras.spec.dependsOn: lacks flux-system/plex: plex joined the "
        "tier flux-system/apps-wave-0, and whatever waits for that tier must wait for plex too; hint: add "
        "`- name: plex` to its dependsOn"]


def test_a_tier_whose_timeout_is_below_its_slowest_workloads_start_is_refused_with_the_numbers(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    deploy = out / "kubernetes/prod/apps/wave-0/deployment.home-assistant.yaml"
    doc = yaml.safe_load(deploy.read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["startupProbe"] = {
        "httpGet": {"path": "/", "port": 8123}, "periodSeconds": 10, "failureThreshold": 60}
    deploy.write_text("---\n" + yaml.safe_dump(doc))
    assert refused(capsys, out, "prod") == [
        "clusters/prod/gpu-platform/ks.apps-wave-0.yaml: flux-system/apps-wave-0.spec.timeout: 5m (300 s) is not "
        "above the worst-case start of Deployment home-automation/home-assistant: 780 s (startupProbe 60 × 10 s "
        "+ 180 s image pull margin); a slow start fails the Kustomization and holds back everything that depends on "
        "it; hint: set timeout: 14m or more"]


def test_a_hand_written_kustomization_depending_on_the_plugin_is_refused(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    (out / "clusters/prod/ks.gpu-apps.yaml").write_text(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: gpu-apps\n"
        "  namespace: flux-system\nspec:\n  dependsOn:\n  - name: intel-gpu-plugin\n  interval: 1h\n"
        "  path: ./kubernetes/prod/apps/wave-1\n  prune: true\n  sourceRef:\n    kind: GitRepository\n"
        "    name: flux-system\n")
    assert refused(capsys, out, "prod") == [
        "clusters/prod/ks.gpu-apps.yaml: gpu-apps.spec.dependsOn: 'intel-gpu-plugin': nothing may depend on the GPU "
        "plugin; a failed plugin rollout would stall that tier; hint: remove the dependency"]


def test_a_repository_tier_the_walk_does_not_find_is_refused(tmp_path, capsys):
    out = repo_copy(tmp_path, "cluster-template")
    text = HOME_STACK.replace("      - name: local-path-provisioner\n", "      - name: local-path\n").replace(
        "        - name: local-path-provisioner\n", "        - name: local-path\n")
    assert refused(capsys, out, "home", project=variant(tmp_path, "home", text)) == [
        "Pulumi.home.yaml: gpu-platform:flux.tiers[1]: storage/local-path: the stack says the repository declares "
        "this Kustomization (declaredBy: repository) but Flux's walk does not reach it; flux-system/plex "
        "(kubernetes/apps/gpu-platform/ks.plex.yaml) depends on it, and Flux would wait for it forever; hint: fix its "
        "name or namespace there, or declare it in the repository"]


def test_a_dependency_on_a_kustomization_the_repository_holds_needs_no_tier(tmp_path):
    """Issue 53: kube-system/coredns is the repository's (kubernetes/apps/kube-system/coredns/ks.yaml), declared as no
    tier: a tier is only for what the export writes into. Flux's walk finds it, so the dependency stands."""
    out = repo_copy(tmp_path, "cluster-template")
    text = HOME_STACK.replace("        - name: local-path-provisioner\n          namespace: storage\n",
                              "        - name: local-path-provisioner\n          namespace: storage\n"
                              "        - name: coredns\n          namespace: kube-system\n")
    project = variant(tmp_path, "home", text)
    assert export(out, "home", project=project) == 0
    after = walk(RepoView(out), "./kubernetes/flux/cluster")
    assert after.kustomizations[("flux-system", "plex")].depends == (("storage", "local-path-provisioner"),
                                                                     ("kube-system", "coredns"))
    assert export(out, "home", project=project, check=True) == 0


def test_a_dependency_on_a_kustomization_the_repository_lacks_is_refused_at_its_stack_key_naming_those_that_exist(
        tmp_path, capsys):
    out = repo_copy(tmp_path, "cluster-template")
    for i, (dependency, shown, hint) in enumerate((
            ("{name: core-dns, namespace: kube-system}", "kube-system/core-dns", "did you mean kube-system/coredns?"),
            ("{name: coredns}", "coredns", "did you mean kube-system/coredns? (a dependsOn without a namespace names "
                                           "one in the Kustomization's own, flux-system)"))):
        text = HOME_STACK.replace("        - name: local-path-provisioner\n          namespace: storage\n",
                                  f"        - name: local-path-provisioner\n          namespace: storage\n"
                                  f"        - {dependency}\n")
        assert refused(capsys, out, "home", project=variant(tmp_path / str(i), "home", text)) == [
            f'Pulumi.home.yaml: gpu-platform:plex.delivery.dependsOn: "{shown}": no such Kustomization; Flux would '
            f"wait for it forever; hint: {hint}"]


def test_a_tier_depending_on_a_misspelt_tier_is_refused_at_its_stack_key(tmp_path, capsys):
    """The program leaves a dependency it does not declare to the walk (it may be the repository's); the walk finds
    no such Kustomization and names the stack key, as the program did before."""
    out = repo_copy(tmp_path, "flux-bootstrap")
    text = stack_text("dev").replace("dependsOn: [apps-wave-0]", "dependsOn: [apps-wave-9]")
    assert refused(capsys, out, "dev", project=variant(tmp_path, "dev", text)) == [
        'Pulumi.dev.yaml: gpu-platform:flux.tiers[4].dependsOn: "apps-wave-9": no such Kustomization; Flux would '
        "wait for it forever; hint: did you mean apps-wave-0?"]


def test_a_problem_already_in_the_repository_is_shown_not_refused(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    assert export(out, "prod") == 0
    issuer = out / "kubernetes/prod/platform-config/clusterissuer.home-ca.yaml"
    issuer.write_text(issuer.read_text().replace("${CLUSTER_DOMAIN}", "${NOT_A_VARIABLE}"))
    # The tier's own mistake, made after the export: the next export (a Plex change) shows it and goes on.
    project = variant(tmp_path, "prod", stack_text("prod").replace("imageTag: 1.42.2.10156-f737b826c",
                                                                   "imageTag: 1.42.2.10157-aaaaaaaaa"))
    capsys.readouterr()
    assert export_main(["--stack", "prod", "--out", str(out), "--project-dir", str(project)]) == 0
    err = capsys.readouterr().err
    assert ("already in the repository before this export: kubernetes/prod/platform-config/clusterissuer.home-ca.yaml"
            " (ClusterIssuer home-ca): ") in err
    assert "${NOT_A_VARIABLE} is not defined for flux-system/platform-config" in err


def test_the_first_export_refuses_a_problem_in_a_tier_folder_it_starts_applying(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    issuer = out / "kubernetes/prod/platform-config/clusterissuer.home-ca.yaml"
    issuer.write_text(issuer.read_text().replace("${CLUSTER_DOMAIN}", "${NOT_A_VARIABLE}"))
    assert refused(capsys, out, "prod") == [
        f"kubernetes/prod/platform-config/clusterissuer.home-ca.yaml (ClusterIssuer home-ca): spec.acme.{field}: "
        "${NOT_A_VARIABLE} is not defined for flux-system/platform-config, which applies it (its variables: "
        "CLUSTER_DOMAIN, CLUSTER_NAME, TIMEZONE); Flux's strict substitution would fail the whole Kustomization; "
        "hint: define it in the ConfigMap or Secret that Kustomization substitutes from, or give it a default "
        "(${VAR:=value})" for field in ("email", "server")]


def test_a_hand_written_kustomization_whose_generated_walk_reaches_an_exported_folder_is_named(tmp_path, capsys):
    out = repo_copy(tmp_path, "flux-bootstrap")
    (out / "clusters/prod/ks.everything.yaml").write_text(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: everything\n"
        "  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./components\n  prune: true\n"
        "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
    lines = refused(capsys, out, "prod")
    assert lines == [
        "clusters/prod/ks.everything.yaml: flux-system/everything applies the 12 objects of "
        "components/prod/intel-gpu-plugin/, components/prod/plex/ (e.g. DaemonSet intel-gpu-plugin/intel-gpu-plugin, "
        "written to components/prod/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml), which "
        "flux-system/intel-gpu-plugin, flux-system/plex apply too; two Kustomizations applying one object fight over "
        "it and each prunes it when the other changes; hint: stop flux-system/everything from reaching "
        "components/prod/intel-gpu-plugin/, components/prod/plex/"]


# --- cluster-template exactly as its generator leaves it (examples/cluster-template/repo) ----------

GENERATED_STACK = (EXAMPLES / "cluster-template" / "Pulumi.home.yaml").read_text()
CLUSTER_APPS = "kubernetes/flux/cluster/ks.yaml"


def test_cluster_template_as_generated_is_adopted_with_config_only_and_its_wait_false_is_a_warning(tmp_path, capsys):
    out = repo_copy(tmp_path, "cluster-template-generated")
    hand_written = files_of(out)
    project = variant(tmp_path, "home", GENERATED_STACK)
    capsys.readouterr()
    assert export(out, "home", project=project) == 0
    err = capsys.readouterr().err
    assert ("WARNING home: kubernetes/apps/kube-system/cilium/ks.yaml: kube-system/cilium.spec.wait: false (the "
            "repository's choice): intel-gpu-plugin, plex dependsOn it, so they start once it is applied, not once its "
            "workloads are healthy; wait: true there would hold them until its workloads are Ready") in err
    after = files_of(out)
    assert {rel: data for rel, data in after.items() if rel in hand_written} == hand_written  # no file edited
    assert export(out, "home", project=project, check=True) == 0
    view = walk(RepoView(out), "./kubernetes/flux/cluster")
    for name in ("plex", "intel-gpu-plugin"):
        ks = view.kustomizations[("flux-system", name)]
        assert ks.changed_by_parent == ["decryption", "deletionPolicy", "patches"]  # cluster-apps' patch reached it
        assert ks.spec["deletionPolicy"] == "WaitForTermination"
        assert ks.declared_spec is not None and ks.spec["postBuild"] == ks.declared_spec["postBuild"]  # kept
    delivery = (out / "kubernetes/apps/gpu-platform/DELIVERY.md").read_text()
    assert ("- plex: `decryption`, `deletionPolicy`, `patches`, set by the patches of cluster-apps "
            "(`kubernetes/flux/cluster/ks.yaml`)") in delivery


def patched_cluster_apps(out: Path, spec_lines: str) -> None:
    """cluster-apps' patch for every child Kustomization, with `spec_lines` added to the spec it sets."""
    path = out / CLUSTER_APPS
    text = path.read_text()
    anchor = "          deletionPolicy: WaitForTermination\n          patches:"
    assert anchor in text
    path.write_text(text.replace(anchor, "          deletionPolicy: WaitForTermination\n" + spec_lines +
                                 "          patches:", 1))


PATCH = "kubernetes/flux/cluster/ks.yaml: spec.patches[0] of flux-system/cluster-apps"


@pytest.mark.parametrize(("spec_lines", "expected"), [
    ("          timeout: 2m\n",
     f"{PATCH}: sets spec.timeout: 2m (120 s), not above the worst-case start of the workloads of 2 Kustomizations "
     "(flux-system/intel-gpu-plugin (DaemonSet intel-gpu-plugin/intel-gpu-plugin: 540 s), flux-system/plex "
     "(Deployment plex/plex: 480 s)) it patches; a slow start fails them and holds back everything that depends on "
     "them; hint: set timeout: 10m or more in that patch, or leave timeout out of that patch, or give the patch a "
     "target that leaves flux-system/intel-gpu-plugin and flux-system/plex out"),
    ("          postBuild:\n            substituteFrom:\n              - name: cluster-secrets\n"
     "                kind: Secret\n",
     f"{PATCH}: changes spec.postBuild.substituteFrom of the export's 2 Kustomizations flux-system/intel-gpu-plugin "
     "and flux-system/plex, dropping ConfigMap cluster-vars (a patch on a Flux Kustomization replaces a list, it "
     "does not merge it): their objects' variables would go undefined; hint: give the patch a target that leaves "
     "flux-system/intel-gpu-plugin and flux-system/plex out (e.g. a labelSelector), or list ConfigMap cluster-vars "
     "in the patch too"),
    ("          dependsOn:\n            - name: intel-gpu-plugin\n              namespace: flux-system\n",
     f"{PATCH}: sets spec.dependsOn of the Kustomizations it patches, which breaks 4 rules of Flux's order: "
     "7 Kustomizations (default/echo, flux-instance, flux-operator, intel-gpu-plugin, plex, kube-system/cilium, "
     "kube-system/coredns) depend on 'intel-gpu-plugin': nothing may depend on the GPU plugin; a failed plugin "
     "rollout would stall that tier; intel-gpu-plugin depends on ['intel-gpu-plugin']: the plugin may depend on the "
     "CNI (kube-system/cilium) only; dependsOn cycle: intel-gpu-plugin -> intel-gpu-plugin; Flux would never "
     "reconcile these; flux-system/intel-gpu-plugin loses its dependency on the CNI kube-system/cilium, so the "
     "plugin would roll out before pods have a network; hint: take dependsOn out of that patch, or give the patch a "
     "target that leaves those Kustomizations out"),
], ids=["timeout-below-the-start-budget", "substituteFrom-replaced", "dependency-on-the-plugin"])
def test_a_parent_patch_that_breaks_an_exported_kustomization_is_refused_naming_the_patch(tmp_path, capsys,
                                                                                         spec_lines, expected):
    """cluster-apps patches every child Kustomization; one that breaks the export's own guarantee is refused, in one
    line at the patch, whatever it breaks counted there."""
    out = repo_copy(tmp_path, "cluster-template-generated")
    patched_cluster_apps(out, spec_lines)
    assert refused(capsys, out, "home", project=variant(tmp_path, "home", GENERATED_STACK)) == [expected]


def test_delivery_md_marks_a_field_the_parent_changed_in_the_applied_spec(tmp_path):
    out = repo_copy(tmp_path, "cluster-template-generated")
    patched_cluster_apps(out, "          timeout: 20m\n")
    assert export(out, "home", project=variant(tmp_path, "home", GENERATED_STACK)) == 0
    delivery = (out / "kubernetes/apps/gpu-platform/DELIVERY.md").read_text()
    row = next(line for line in delivery.splitlines() if line.startswith("| plex |"))
    assert row.endswith("| kube-system/cilium | true | 20m * | 9 |")  # applied, not the 9m the export wrote
    assert "- plex: `decryption`, `deletionPolicy`, `patches`, `timeout`, set by the patches of cluster-apps" \
        in delivery


def test_the_per_app_layout_writes_each_component_as_cluster_template_writes_an_app(tmp_path):
    """gitops.layout: per-app: <entry>/<component>/ks.yaml beside <entry>/<component>/app/, listed by the entry's
    kustomization.yaml, as a cluster-template namespace folder lists <app>/ks.yaml."""
    out = repo_copy(tmp_path, "cluster-template-generated")
    text = GENERATED_STACK.replace("    componentsDir: kubernetes/gpu-platform\n", "    layout: per-app\n")
    assert "layout: per-app" in text
    project = variant(tmp_path, "home", text)
    assert export(out, "home", project=project) == 0
    entry = out / "kubernetes/apps/gpu-platform"
    listed = yaml.safe_load((entry / "kustomization.yaml").read_text())["resources"]
    assert listed == ["configmap.cluster-vars.yaml", "intel-gpu-plugin/ks.yaml", "plex/ks.yaml"]
    for component in ("intel-gpu-plugin", "plex"):
        ks = yaml.safe_load((entry / component / "ks.yaml").read_text())
        assert ks["spec"]["path"] == f"./kubernetes/apps/gpu-platform/{component}/app"
        assert (entry / component / "app" / "kustomization.yaml").is_file()
        assert not (entry / component / "kustomization.yaml").exists()
    assert not (out / "kubernetes/gpu-platform").exists()
    view = walk(RepoView(out), "./kubernetes/flux/cluster")
    ids = exported_ids(out, ["kubernetes/apps/gpu-platform"])
    assert len(ids) == 15
    for oid in ids:
        assert len(view.applied_by.get(oid, [])) == 1, oid
    assert export(out, "home", project=project, check=True) == 0


def test_the_per_app_layout_refuses_a_components_dir_it_would_not_use(tmp_path, capsys):
    out = repo_copy(tmp_path, "cluster-template-generated")
    text = GENERATED_STACK.replace("    componentsDir: kubernetes/gpu-platform\n",
                                   "    componentsDir: kubernetes/gpu-platform\n    layout: per-app\n")
    assert refused(capsys, out, "home", project=variant(tmp_path, "home", text)) == [
        'Pulumi.home.yaml: gpu-platform:gitops.componentsDir: "kubernetes/gpu-platform": not used with layout: '
        "per-app, where each component's folder is <entryDir>/<component>/app; hint: remove componentsDir, or use "
        "layout: split"]


@pytest.mark.parametrize("layout", LAYOUT_REPOSITORIES)
def test_a_relative_out_exports_as_its_absolute_path_does_in_every_layout(tmp_path, monkeypatch, layout):
    """`make export OUT=../home-ops`: the walk's mirror links and kubectl's messages are read from another folder."""
    name, stacks, _ = LAYOUT_REPOSITORIES[layout]
    project = make_project(tmp_path / "project", stacks)
    absolute = repo_copy(tmp_path / "abs", name)
    assert export(absolute, *stacks, project=project) == 0
    relative = repo_copy(tmp_path / "rel", name)
    monkeypatch.chdir(tmp_path / "rel")
    assert export(Path(name), *stacks, project=project) == 0
    assert files_of(relative) == files_of(absolute)


@pytest.mark.parametrize("layout", LAYOUT_REPOSITORIES)
def test_the_post_merge_suite_sits_beside_post_merge_md_and_no_kustomization_of_flux_s_walk_applies_it(tmp_path,
                                                                                                       layout):
    """Chainsaw's Tests are no cluster objects (no CRD serves them): in every layout the suite's folder is one no
    Flux Kustomization builds, or kustomize-controller would fail the whole tier on them."""
    name, stacks, bootstrap = LAYOUT_REPOSITORIES[layout]
    out = repo_copy(tmp_path, name)
    assert export(out, *stacks, project=make_project(tmp_path / "project", stacks)) == 0
    checklists = sorted(out.rglob("POST-MERGE.md"))
    assert len(checklists) == len(stacks)
    for checklist in checklists:
        docs = list(yaml.safe_load_all((checklist.parent / "post-merge" / SUITE_FILE).read_text()))
        assert {(d["apiVersion"], d["kind"]) for d in docs} == {("chainsaw.kyverno.io/v1alpha1", "Test")}
    for stack in stacks:
        after = walk(RepoView(out), bootstrap.format(stack=stack))
        assert after.applied_by and not [o for o in after.applied_by if o.group == "chainsaw.kyverno.io"]


# --- onedr0p/home-ops's shape: Intel's DRA driver and Plex adopted from its HelmReleases (examples/home-ops) -------

HOME_OPS = EXAMPLES / "home-ops"  # the project itself: its stack and its evidence/dra/ files
HOME_OPS_STACK = (HOME_OPS / "Pulumi.home.yaml").read_text()
HOME_OPS_EVIDENCE = {name: (HOME_OPS / "evidence" / f"{name}.yaml").read_text()
                     for name in ("dra/home", "dra/claims/home")}
HOME_OPS_ENTRY = "kubernetes/apps/gpu-platform"
HOME_OPS_WARNING = (
    "WARNING home: plex: how HelmRelease default/plex reaches the GPU is stated by plex.helmRelease.gpuAccess "
    "(dra-claim): its values cannot say (defaultPodOptions.resourceClaims: whether app-template 5.1.0 renders pod "
    "resourceClaims is not known here (4.1.1 does not, 5.3.0 does))")


def test_home_ops_s_driver_and_plex_are_adopted_and_the_export_writes_only_its_records(tmp_path, capsys):
    """examples/home-ops as shipped: the export writes no driver, DeviceClass or Plex (both are the repository's
    HelmReleases), only its entry folder; a second run changes nothing, --check agrees, --remove restores the
    repository byte for byte."""
    out = repo_copy(tmp_path, "home-ops")
    hand_written = files_of(out)
    capsys.readouterr()
    assert export(out, "home", project=HOME_OPS) == 0
    assert HOME_OPS_WARNING in capsys.readouterr().err.splitlines()
    after = files_of(out)
    assert {rel: data for rel, data in after.items() if rel in hand_written} == hand_written  # no file edited
    assert sorted(set(after) - set(hand_written)) == [f"{HOME_OPS_ENTRY}/{name}" for name in (
        "DELIVERY.md", "POST-MERGE.md", "configmap.cluster-vars.yaml", "export-index.json", "kustomization.yaml",
        "post-merge/chainsaw-test.yaml")]
    assert exported_ids(out, [HOME_OPS_ENTRY]) == [ObjectId("", "ConfigMap", "flux-system", "cluster-vars")]
    view = walk(RepoView(out), "./kubernetes/flux/cluster")
    assert view.problems == []
    assert all(len(appliers) == 1 for appliers in view.applied_by.values())
    helm = "helm.toolkit.fluxcd.io"
    assert view.applied_by[ObjectId(helm, "HelmRelease", "default", "plex")] == [("default", "plex")]
    assert view.applied_by[ObjectId(helm, "HelmRelease", "kube-system", "intel-gpu-resource-driver")] == \
        [("kube-system", "intel-gpu-resource-driver")]
    delivery = (out / HOME_OPS_ENTRY / "DELIVERY.md").read_text()
    assert "The DRA driver is the repository's: kube-system/intel-gpu-resource-driver, which the stack adopts" \
        in delivery
    assert "`plex` is the repository's: HelmRelease default/plex (kubernetes/apps/default/plex/app/helmrelease.yaml)" \
        in delivery
    assert export(out, "home", project=HOME_OPS) == 0
    assert files_of(out) == after
    assert export(out, "home", project=HOME_OPS, check=True) == 0
    assert export_main(["--stack", "home", "--out", str(out), "--project-dir", str(HOME_OPS), "--remove",
                        "--quiet"]) == 0
    assert files_of(out) == hand_written


PLEX_RELEASE = "kubernetes/apps/default/plex/app/helmrelease.yaml"
GPU_ACCESS = "      gpuAccess: dra-claim\n"


@pytest.mark.parametrize(("stack_edit", "repo_edit", "expected"), [
    ((GPU_ACCESS, ""), None,
     f"{PLEX_RELEASE}: HelmRelease default/plex: the export cannot tell how its pod reaches the GPU "
     "(defaultPodOptions.resourceClaims: whether app-template 5.1.0 renders pod resourceClaims is not known here "
     "(4.1.1 does not, 5.3.0 does)); hint: state it in plex.helmRelease.gpuAccess: device-plugin, dra-claim, "
     "host-path or none (the post-merge checks test it on the cluster)"),
    (None, ("kubernetes/apps/default/plex/app/ocirepository.yaml", "tag: 5.1.0", "tag: 4.1.1"),
     f"{PLEX_RELEASE}: HelmRelease default/plex: its values give none, but plex.helmRelease.gpuAccess states "
     "dra-claim; hint: remove plex.helmRelease.gpuAccess (the values say it), or change the values"),
    (("        name: intel-gpu-resource-driver\n", "        name: cilium\n"), None,
     "Pulumi.home.yaml: gpu-platform:gpu.dra.kustomization: kube-system/cilium: applies no Intel GPU DRA driver (it "
     "applies 2 objects from ./kubernetes/apps/kube-system/cilium/app, e.g. HelmRelease kube-system/cilium), so "
     "nothing would publish the ResourceSlices the apps' claims are allocated from; hint: did you mean "
     "kube-system/intel-gpu-resource-driver, which applies the Helm chart intel-gpu-resource-driver-chart, by "
     "chartRef OCIRepository kube-system/intel-gpu-resource-driver?"),
    (None, ("kubernetes/apps/default/namespace.yaml", "    kustomize.toolkit.fluxcd.io/prune: disabled\n",
            "    kustomize.toolkit.fluxcd.io/prune: disabled\n  labels:\n"
            "    resource.kubernetes.io/admin-access: \"true\"\n"),
     "kubernetes/apps/default/namespace.yaml: Namespace default: labelled resource.kubernetes.io/admin-access: "
     "\"true\", which lets any claim there reach every GPU of the class, in use or not, and the stack does not name "
     "it; hint: name the namespace in gpu.dra.adminAccessNamespaces, or take admin access out of the repository"),
], ids=["app-template-5.1.0-without-gpuAccess", "gpuAccess-the-proven-4.1.1-contradicts",
        "driver-kustomization-installs-no-driver", "admin-access-label-the-stack-does-not-name"])
def test_home_ops_refuses_what_it_cannot_adopt_in_one_line_at_the_file_to_change(tmp_path, capsys, stack_edit,
                                                                                repo_edit, expected):
    out = repo_copy(tmp_path, "home-ops")
    text = HOME_OPS_STACK
    if stack_edit:
        assert text.count(stack_edit[0]) == 1
        text = text.replace(*stack_edit)
    if repo_edit:
        path = out / repo_edit[0]
        assert path.read_text().count(repo_edit[1]) == 1
        path.write_text(path.read_text().replace(repo_edit[1], repo_edit[2]))
    project = make_project(tmp_path / "project-home-ops", {"home": text}, HOME_OPS_EVIDENCE)
    assert refused(capsys, out, "home", project=project) == [expected]


def _without_the_gpu_claim(out: Path) -> None:
    path = out / PLEX_RELEASE
    text = path.read_text()
    for claim in ("              claims:\n                - name: gpu\n",
                  "      resourceClaims:\n        - name: gpu\n          resourceClaimTemplateName: plex\n"):
        assert text.count(claim) == 1
        text = text.replace(claim, "")
    path.write_text(text)


def test_home_ops_plex_without_its_gpu_claim_is_refused_naming_its_helm_release(tmp_path, capsys):
    """The claim taken out of Plex's values: the values now say plainly that the pod reaches no GPU (no pod claim
    left to be unsure of), which the stack's intel-quicksync refuses at the release's file, with the evidence or
    without it (the export writes nothing of the GPU, so the stage is not what is refused: model/dra/gate.py)."""
    out = repo_copy(tmp_path, "home-ops")
    _without_the_gpu_claim(out)
    text = HOME_OPS_STACK.replace(GPU_ACCESS, "")
    for name, evidence in (("with-evidence", HOME_OPS_EVIDENCE), ("without-evidence", None)):
        project = make_project(tmp_path / name, {"home": text}, evidence)
        allowed = "dra-claim" if evidence else "host-path"
        assert refused(capsys, out, "home", project=project) == [
            f"{PLEX_RELEASE}: HelmRelease default/plex: Deployment default/plex reaches no GPU (no "
            "gpu.intel.com/i915, no claim, no /dev/dri hostPath in its values), but plex.hardware.gpu is "
            f"intel-quicksync and the gate allows {allowed} for home: plex would transcode on the CPU; hint: give the "
            "values " + ("controllers.plex.containers.app.resources.claims: [{name: gpu}] and "
                         "defaultPodOptions.resourceClaims: [{name: gpu, resourceClaimTemplateName: <a "
                         "ResourceClaimTemplate of class gpu.intel.com>}]" if evidence else
                         "the /dev/dri hostPath persistence") + ", or set plex.hardware.gpu: none"], name
    # the stack the docs give (gpuAccess: dra-claim, what 5.1.0's values cannot say) is contradicted by the values
    project = make_project(tmp_path / "as-shipped", {"home": HOME_OPS_STACK})
    assert refused(capsys, out, "home", project=project) == [
        f"{PLEX_RELEASE}: HelmRelease default/plex: its values give none, but plex.helmRelease.gpuAccess states "
        "dra-claim; hint: remove plex.helmRelease.gpuAccess (the values say it), or change the values"]


def test_home_ops_plex_on_its_claim_without_evidence_is_refused_at_the_stated_access_naming_its_release(
        tmp_path, capsys):
    out = repo_copy(tmp_path, "home-ops")
    project = make_project(tmp_path / "project", {"home": HOME_OPS_STACK})
    assert refused(capsys, out, "home", project=project) == [
        "Pulumi.home.yaml: gpu-platform:plex.helmRelease.gpuAccess: dra-claim: Deployment default/plex (of "
        f"HelmRelease default/plex, {PLEX_RELEASE}), as stated, claims a device of class gpu.intel.com, but the DRA "
        "gate does not allow a claim for home (there is no evidence that every node publishes a gpu.intel.com "
        "ResourceSlice (evidence/dra/home.yaml is missing): step 2 was skipped; a claim of plex needs that evidence); "
        "the claim would leave the pod Pending and default/plex never Ready, stalling every Kustomization after it; "
        f"hint: record the evidence first (`{next_dra_step('home')}`, then commit what it writes), or take the claim "
        "out of the release's values"]


PLUGIN_BY_CHART_REF = {
    "kubernetes/apps/kube-system/intel-gpu-plugin/ks.yaml": (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: intel-gpu-plugin\n"
        "spec:\n  interval: 1h\n  path: ./kubernetes/apps/kube-system/intel-gpu-plugin/app\n  prune: true\n"
        "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n"
        "  targetNamespace: kube-system\n"),
    "kubernetes/apps/kube-system/intel-gpu-plugin/app/kustomization.yaml": (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./helmrelease.yaml\n"
        "  - ./ocirepository.yaml\n"),
    "kubernetes/apps/kube-system/intel-gpu-plugin/app/helmrelease.yaml": (
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: intel-gpu-plugin\nspec:\n"
        "  chartRef:\n    kind: OCIRepository\n    name: intel-gpu-plugin\n  interval: 1h\n"),
    "kubernetes/apps/kube-system/intel-gpu-plugin/app/ocirepository.yaml": (
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: intel-gpu-plugin\nspec:\n"
        "  interval: 15m\n  ref:\n    tag: 0.34.0\n  url: oci://ghcr.io/example/charts/intel-device-plugins-gpu\n"),
}


def test_home_ops_with_a_device_plugin_by_chart_ref_refuses_it_in_one_line_naming_its_file(tmp_path, capsys):
    out = repo_copy(tmp_path, "home-ops")
    for rel, text in PLUGIN_BY_CHART_REF.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    listing = out / "kubernetes/apps/kube-system/kustomization.yaml"
    listing.write_text(listing.read_text() + "  - ./intel-gpu-plugin/ks.yaml\n")
    assert refused(capsys, out, "home", project=HOME_OPS) == [
        "kubernetes/apps/kube-system/intel-gpu-plugin/app/helmrelease.yaml: HelmRelease kube-system/intel-gpu-plugin: "
        "installs an Intel GPU device plugin (the Helm chart intel-device-plugins-gpu, by chartRef OCIRepository "
        "kube-system/intel-gpu-plugin) beside the DRA driver of the repository's kube-system/intel-gpu-resource-driver "
        "that the stack adopts, after gpu.dra.stage plugin-removed: both would hand out the same iGPU, neither "
        "counting the other's use; hint: remove it from the repository in the same pull request"]


def test_home_ops_s_driver_not_adopted_is_refused_naming_its_file(tmp_path, capsys):
    """A stack that has the export write its own driver beside the repository's: refused at the repository's release,
    whichever the stack's stage."""
    out = repo_copy(tmp_path, "home-ops")
    own_driver = ("      image: ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0\n"
                  f"      imageDigest: sha256:{'ab' * 32}\n")
    adopted = ("      deliveredBy: repository\n      kustomization:\n        namespace: kube-system\n"
               "        name: intel-gpu-resource-driver\n")
    text = HOME_OPS_STACK.replace(adopted, own_driver)
    assert own_driver in text
    project = make_project(tmp_path / "project", {"home": text}, HOME_OPS_EVIDENCE)
    [line] = refused(capsys, out, "home", project=project)
    assert line.startswith("kubernetes/apps/kube-system/intel-gpu-resource-driver/app/helmrelease.yaml: HelmRelease "
                           "kube-system/intel-gpu-resource-driver: installs a second Intel GPU DRA driver (the Helm "
                           "chart intel-gpu-resource-driver-chart, by chartRef OCIRepository "
                           "kube-system/intel-gpu-resource-driver) beside the export's intel-gpu-resource-driver"), line
