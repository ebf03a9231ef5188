"""The export aimed at the user's own repository (issue 29): one base for every cluster, overlays that only patch
cluster-vars (R-ENV-02), tests/fixtures/repos/home-network-k3s. The export changes exactly the files the plugin's
pull request changed, keeps every other byte, and refuses, one line each and nothing written, what a shared base
cannot say."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, evidence_for, export, files_of, make_project, stack_text
from gitops.export import main as export_main
from gitops.flux.build import RepoView
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk
from gitops.repo import edits, lintconfig

REPO = FIXTURES / "repos" / "home-network-k3s"
STACKS = FIXTURES / "repos" / "stacks"
DEV = (STACKS / "home-network-k3s-dev.yaml").read_text()
PROD = (STACKS / "home-network-k3s-prod.yaml").read_text()
PLUGIN_KS = ("flux-system", "intel-gpu-plugin")
# What the seed's pull request changed in the repository, and the export's one records folder.
PULL_REQUEST = {"M clusters/base/kustomization.yaml", "?? clusters/base/intel-gpu-plugin.yaml",
                "?? platform/intel-gpu-plugin/"}
RECORDS = "?? gpu-platform/"
UNTOUCHED = ("platform/kustomization.yaml", "apps/", "catalog/")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of the fixture, committed, so `git status` shows exactly what the export changed."""
    out = tmp_path / "home-network-k3s"
    shutil.copytree(REPO, out)
    git(out, "init", "-q")
    git(out, "add", "-A")
    git(out, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "fixture")
    return out


def project(tmp_path: Path, dev: str = DEV, prod: str = PROD, evidence: dict[str, str] | None = None) -> Path:
    return make_project(tmp_path / "project", {"dev": dev, "prod": prod}, evidence)


def status(repo: Path) -> set[str]:
    return {line.strip() for line in git(repo, "status", "--porcelain", "--untracked-files=normal").splitlines()}


def refused(capsys, out: Path, proj: Path, *stacks: str) -> list[str]:
    before = files_of(out)
    capsys.readouterr()
    assert export(out, *stacks, project=proj) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert files_of(out) == before, "a refused export changed the repository"
    return [line.removeprefix("error: ") for line in err.splitlines() if line.startswith("error: ")]


# --- the pull request, and nothing else ------------------------------------------------------------------------

def test_exporting_both_stacks_changes_exactly_the_pull_requests_files_and_a_second_run_nothing(repo, tmp_path):
    proj = project(tmp_path)
    assert export(repo, "dev", "prod", project=proj) == 0
    assert status(repo) == PULL_REQUEST | {RECORDS}
    assert git(repo, "diff", "--", *UNTOUCHED) == ""
    assert git(repo, "diff", "clusters/base/kustomization.yaml").count("\n+  - intel-gpu-plugin.yaml") == 1
    assert sorted(p.name for p in (repo / "platform" / "intel-gpu-plugin").iterdir()) == [
        "daemonset.intel-gpu-plugin.yaml", "kustomization.yaml", "namespace.intel-gpu-plugin.yaml",
        "networkpolicy.default-deny.yaml"]
    assert sorted(p.relative_to(repo).as_posix() for p in (repo / "gpu-platform").rglob("*")) == [
        "gpu-platform/dev", "gpu-platform/dev/DELIVERY.md", "gpu-platform/dev/POST-MERGE.md",
        "gpu-platform/dev/export-index.json", "gpu-platform/dev/post-merge",
        "gpu-platform/dev/post-merge/chainsaw-test.yaml", "gpu-platform/prod", "gpu-platform/prod/DELIVERY.md",
        "gpu-platform/prod/POST-MERGE.md", "gpu-platform/prod/export-index.json", "gpu-platform/prod/post-merge",
        "gpu-platform/prod/post-merge/chainsaw-test.yaml"]
    checklist = (repo / "gpu-platform/prod/POST-MERGE.md").read_text()
    assert "`flux get kustomizations intel-gpu-plugin -n flux-system`" in checklist
    # Plex is the repository's: its readiness is that of the Kustomization Flux's walk found applying it.
    assert "4. `plex` exists and is Ready: `flux get kustomizations apps-wave-0 -n flux-system`" in checklist
    first = files_of(repo)
    assert export(repo, "prod", "dev", project=proj) == 0
    assert files_of(repo) == first
    assert export(repo, "dev", project=proj, check=True) == 0


def test_the_plugins_kustomization_is_the_seeds_with_the_timeout_the_largest_stack_needs(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    ks = yaml.safe_load((repo / "clusters/base/intel-gpu-plugin.yaml").read_text())
    assert ks["spec"]["path"] == "./platform/intel-gpu-plugin"
    assert ks["spec"]["dependsOn"] == [{"name": "cilium"}]
    assert ks["spec"]["wait"] is True
    assert ks["spec"]["timeout"] == "10m"  # prod's three nodes (dev's one would need 4m): safe for both
    text = (repo / "clusters/base/intel-gpu-plugin.yaml").read_text()
    assert "STACK=" not in text, "a file of the base names no single stack"


def test_one_stack_named_exports_every_stack_of_its_base_and_says_so(repo, tmp_path, capsys):
    proj = project(tmp_path)
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj)]) == 0
    out = capsys.readouterr().out
    assert "dev: exported with prod: both write into clusters/base/" in out
    assert (repo / "gpu-platform/dev/export-index.json").is_file()
    together = files_of(repo)
    assert export(repo, "dev", project=proj) == 0
    assert files_of(repo) == together, "--stack dev after --stack prod is the same as both at once"


def test_nothing_depends_on_the_plugin_and_each_overlay_applies_it_once(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    for stack in ("dev", "prod"):
        view = walk(RepoView(repo), f"./clusters/{stack}")
        assert view.problems == []
        assert view.kustomizations[PLUGIN_KS].status == "built"
        assert not [k for k in view.kustomizations.values() if PLUGIN_KS in k.depends]
        for oid in view.kustomizations[PLUGIN_KS].objects:
            assert view.applied_by[oid] == [PLUGIN_KS], oid
        assert view.applied_by[ObjectId("apps", "Deployment", "plex", "plex")] == [("flux-system", "apps-wave-0")]
        assert len(view.kustomizations[PLUGIN_KS].objects) == 3
        # An overlay of ../base built by kustomize: each Kustomization named at the base's file that declares it.
        assert view.kustomizations[PLUGIN_KS].declared_in == "clusters/base/intel-gpu-plugin.yaml"
        assert view.kustomizations[("flux-system", "cilium")].declared_in == "clusters/base/cilium.yaml"


def test_both_overlays_build_with_kubectl_and_every_written_file_passes_the_repositorys_yamllint(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    for folder in ("clusters/dev", "clusters/prod", "platform/intel-gpu-plugin"):
        subprocess.run(["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", folder], cwd=repo,
                       check=True, capture_output=True)
    written = [line.split()[-1] for line in status(repo)]
    files = [p for rel in written for p in ([repo / rel] if (repo / rel).is_file() else (repo / rel).rglob("*.yaml"))]
    assert len(files) == 8  # with each stack's post-merge suite
    # yamllint's own command, as the repository's gate runs it (ci/gate.sh): `yamllint -c ci/yamllint.yaml`
    lint = subprocess.run([sys.executable, "-m", "yamllint", "-f", "parsable", "-c", "ci/yamllint.yaml",
                           *(p.relative_to(repo).as_posix() for p in files)], cwd=repo, capture_output=True, text=True)
    assert (lint.returncode, lint.stdout) == (0, "")
    # and the export holds itself to the same: the header's modeline left out, the generated line wrapped
    head = (repo / "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml").read_text().splitlines()[:3]
    assert head[0] == "---" and head[1].startswith("# Generated by `make export` for every stack of clusters/base")
    assert lintconfig.Lint.from_config("ci/yamllint.yaml", (repo / "ci/yamllint.yaml").read_bytes()).line_length_max \
        == 120


# --- drift and removal ---------------------------------------------------------------------------------------

HAND_EDITS = {
    "clusters/base/intel-gpu-plugin.yaml": ("interval: 1h", "interval: 2h"),
    "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml": ("IfNotPresent", "Always"),
    "platform/intel-gpu-plugin/kustomization.yaml": ("- namespace.intel-gpu-plugin.yaml\n", ""),
    "platform/intel-gpu-plugin/namespace.intel-gpu-plugin.yaml": ("app-namespace: 'false'", "app-namespace: 'true'"),
    "platform/intel-gpu-plugin/networkpolicy.default-deny.yaml": ("    - Egress\n", ""),
    "clusters/base/kustomization.yaml": ("  - intel-gpu-plugin.yaml", "  # - intel-gpu-plugin.yaml"),
    "gpu-platform/prod/post-merge/chainsaw-test.yaml": ("        allocatable:\n", "        capacity:\n"),
}


def test_every_file_the_export_writes_into_the_repository_has_a_hand_edit_case(repo, tmp_path):
    assert export(repo, "prod", project=project(tmp_path)) == 0
    written = {p.relative_to(repo).as_posix() for p in [*(repo / "platform/intel-gpu-plugin").iterdir(),
                                                         repo / "clusters/base/intel-gpu-plugin.yaml",
                                                         *(repo / "gpu-platform/prod").rglob("*.yaml")]}
    assert set(HAND_EDITS) == written | {"clusters/base/kustomization.yaml"}


@pytest.mark.parametrize("rel", sorted(HAND_EDITS))
def test_a_hand_edit_of_a_written_file_or_of_the_entry_is_drift(repo, tmp_path, rel):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    old, new = HAND_EDITS[rel]
    text = (repo / rel).read_text()
    assert old in text
    (repo / rel).write_text(text.replace(old, new))
    assert export(repo, "prod", project=proj, check=True) == 1


def test_removing_the_export_restores_the_repository_byte_for_byte(repo, tmp_path):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert status(repo) == set()
    assert git(repo, "diff") == ""


def test_the_entry_follows_the_repositorys_line_endings_and_comments(repo, tmp_path):
    kfile = repo / "clusters/base/kustomization.yaml"
    crlf = kfile.read_bytes().replace(b"\n", b"\r\n")
    kfile.write_bytes(crlf)
    assert export(repo, "prod", project=project(tmp_path)) == 0
    assert kfile.read_bytes() == edits.add_resource(crlf, "intel-gpu-plugin.yaml")
    assert kfile.read_bytes().endswith(b"  - intel-gpu-plugin.yaml\r\n")


# --- values that differ between the stacks ----------------------------------------------------------------------

def with_plugin(text: str, shared: int, reason: str) -> str:
    return text.replace("  gpu-platform:gitops:\n", f"  gpu-platform:intelGpuPlugin:\n    sharedDevNum: {shared}\n"
                        f"    sharedDevNumReason: {reason}\n  gpu-platform:gitops:\n", 1)


def test_a_value_that_differs_between_the_stacks_becomes_a_token_each_overlays_cluster_vars_sets(repo, tmp_path):
    proj = project(tmp_path, dev=with_plugin(DEV, 2, "two transcoders on dev"),
                   prod=with_plugin(PROD, 3, "three transcoders on prod"))
    assert export(repo, "prod", project=proj) == 0
    overlays = {"M clusters/dev/cluster-vars.yaml", "M clusters/prod/cluster-vars.yaml"}
    assert status(repo) == PULL_REQUEST | {RECORDS} | overlays
    ds = (repo / "platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml").read_text()
    assert "${GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0}" in ds
    dev_vars = edits.data_values((repo / "clusters/dev/cluster-vars.yaml").read_bytes())
    prod_vars = edits.data_values((repo / "clusters/prod/cluster-vars.yaml").read_bytes())
    assert dev_vars["GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0"] == "-shared-dev-num=2"
    assert prod_vars["GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0"] == "-shared-dev-num=3"
    diff = git(repo, "diff", "clusters/prod/cluster-vars.yaml")
    assert [line for line in diff.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))] \
        == [f'+  {k}: "{v}"' for k, v in sorted(prod_vars.items()) if k.startswith("GPU_PLATFORM_")]
    for stack, reason in (("dev", "two transcoders on dev"), ("prod", "three transcoders on prod")):
        view = walk(RepoView(repo), f"./clusters/{stack}")
        assert view.problems == []
        applied = view.manifests[ObjectId("apps", "DaemonSet", "intel-gpu-plugin", "intel-gpu-plugin")]
        assert applied["spec"]["template"]["spec"]["containers"][0]["args"] == [
            f"-shared-dev-num={2 if stack == 'dev' else 3}"]
        assert reason in applied["metadata"]["annotations"].values()
    assert export(repo, "dev", project=proj, check=True) == 0
    assert export_main(["--stack", "dev", "--out", str(repo), "--project-dir", str(proj), "--remove", "--quiet"]) == 0
    assert status(repo) == set()


# --- what a shared base cannot say -----------------------------------------------------------------------------

def delivered_by_export(text: str) -> str:
    return text.replace("    deliveredBy: repository\n", "")


def test_the_gpu_switch_in_one_stack_of_a_shared_base_is_refused(repo, tmp_path, capsys):
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)})}
    proj = project(tmp_path, dev=delivered_by_export(DEV), prod=delivered_by_export(PROD), evidence=evidence)
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [line for line in lines if line.startswith("plex: GPU access differs")] and len(lines) == 1
    assert "(dev: host-path, prod: device-plugin)" in lines[0]
    assert "hint: record it for dev" in lines[0]


def test_a_component_in_one_stack_only_is_refused(repo, tmp_path, capsys):
    app = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    apps = app[app.index("  gpu-platform:apps:"):]
    apps = apps[:apps.index("\n  gpu-platform:", 1) + 1] if "\n  gpu-platform:" in apps[1:] else apps
    proj = project(tmp_path, dev=DEV.rstrip("\n") + "\n" + apps)
    lines = refused(capsys, repo, proj, "prod")
    assert lines and all("written for dev but not for prod, which share the base clusters/base" in line
                         for line in lines)
    assert lines[0].startswith("clusters/base/jellyfin.yaml: ") or lines[0].startswith("platform/jellyfin/")


def test_a_base_field_no_value_of_makes_safe_for_both_stacks_is_refused_naming_each_value(repo, tmp_path, capsys):
    proj = project(tmp_path, prod=PROD.replace("  gpu-platform:flux:\n", "  gpu-platform:flux:\n"
                                                                        "    gitRepository: home\n", 1))
    lines = refused(capsys, repo, proj, "dev")
    assert lines == ['clusters/base/intel-gpu-plugin.yaml: spec.sourceRef.name: differs between the stacks of the '
                     'shared base (dev: "flux-system", prod: "home"); a Flux Kustomization in the base is applied as '
                     'written (the overlay\'s root Kustomization substitutes no variable) and no value is safe for '
                     'every stack; hint: make the stacks\' config agree there']


@pytest.mark.parametrize(("shape", "text"), [
    ("flow style", "resources: [flux-system.yaml, cluster-vars.yaml, cilium.yaml]\n"),
    ("an anchor", "resources: &r\n  - flux-system.yaml\n"),
    ("a generator", "resources:\n  - flux-system.yaml\nconfigMapGenerator:\n  - name: x\n"),
])
def test_a_hand_written_kustomization_the_edit_cannot_keep_is_refused_with_the_line_to_add(repo, tmp_path, capsys,
                                                                                         shape, text):
    (repo / "clusters/base/kustomization.yaml").write_text(text)
    lines = refused(capsys, repo, project(tmp_path), "prod")
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{repo}/clusters/base/kustomization.yaml: ")
    assert "intel-gpu-plugin.yaml" in lines[0].split("; hint: ", 1)[1]


def test_the_repositorys_plex_requesting_the_gpu_without_evidence_for_every_stack_is_refused_naming_its_file(
        repo, tmp_path, capsys):
    plex = repo / "apps/wave-0/plex.yaml"
    docs = list(yaml.safe_load_all(plex.read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0].setdefault("resources", {}).setdefault(
        "limits", {})["gpu.intel.com/i915"] = "1"
    plex.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)})}
    lines = refused(capsys, repo, project(tmp_path, evidence=evidence), "prod")
    assert len(lines) == 1, lines  # prod has its evidence; dev has none
    assert lines[0].startswith("apps/wave-0/plex.yaml: Deployment plex/plex: spec.template.spec.containers[0]."
                               "resources.limits.gpu.intel.com/i915: requests gpu.intel.com/i915, but the evidence "
                               "does not back it for dev")
    assert "make verify-nodes STACK=dev" in lines[0]


def test_with_evidence_for_every_stack_the_export_lists_the_fields_the_repositorys_plex_must_change(
        repo, tmp_path, capsys):
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                "dev": evidence_for("dev", {"k3s-dev-1": 1})}
    capsys.readouterr()
    assert export(repo, "prod", project=project(tmp_path, evidence=evidence)) == 0
    err = capsys.readouterr().err
    told = [line for line in err.splitlines() if "evidence allows the switch" in line]
    assert len(told) == 2
    assert "apps/wave-0/plex.yaml" in told[0]
    assert "resources.limits.gpu.intel.com/i915: (absent) -> '1'" in told[0]
    assert "spec.template.spec.volumes" in told[0] and "/dev/dri" in told[0]


# --- every layout: stacks that share a folder ------------------------------------------------------------------

@pytest.mark.parametrize(("shared", "deployment"), [
    ("  gpu-platform:gitops:\n    componentsDir: components/shared\n", "components/shared/plex/deployment.plex.yaml"),
    ("  gpu-platform:gitops:\n    layout: per-app\n    entryDir: clusters/shared\n",
     "clusters/shared/plex/app/deployment.plex.yaml"),
], ids=["split", "per-app"])
def test_two_stacks_writing_one_object_with_different_content_are_refused_naming_both_and_the_field(tmp_path, capsys,
                                                                                                    shared, deployment):
    dev = stack_text("dev").rstrip("\n") + "\n" + shared
    prod = stack_text("prod").rstrip("\n") + "\n" + shared
    proj = make_project(tmp_path / "project", {"dev": dev, "prod": prod})
    out = tmp_path / "out"
    shutil.copytree(FIXTURES / "repos" / "flux-bootstrap", out)
    lines = refused(capsys, out, proj, "dev")
    assert any(line.startswith(f"{deployment}: spec.template.spec.containers[0].env[") and "stacks dev and prod "
               "both write this file, with" in line for line in lines), lines


def test_an_object_a_repository_tier_in_another_namespace_applies_too_is_refused_naming_that_file(tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(FIXTURES / "repos" / "flux-bootstrap", out)
    proj = make_project(tmp_path / "project", {"prod": stack_text("prod")})
    assert export(out, "prod", project=proj) == 0
    # The repository's own media tier, in a namespace of its own, also renders Plex.
    media = out / "kubernetes/prod/media"
    media.mkdir(parents=True)
    shutil.copy(out / "components/prod/plex/deployment.plex.yaml", media / "plex.yaml")
    (media / "kustomization.yaml").write_text("resources:\n  - plex.yaml\n")
    (out / "clusters/prod/media.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "media", "namespace": "media"},
        "spec": {"interval": "10m", "path": "./kubernetes/prod/media", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}}}))
    lines = refused(capsys, out, proj, "prod")
    assert any(line.startswith("kubernetes/prod/media/plex.yaml: Deployment plex/plex: applied by media/media ")
               and "hint: take Deployment plex out of kubernetes/prod/media/plex.yaml" in line for line in lines), lines


def test_the_preview_says_the_host_path_stays_then_which_fields_the_repositorys_plex_must_change(repo, tmp_path):
    from gitops.preview import preview

    assert export(repo, "prod", project=project(tmp_path)) == 0
    before = preview("dev", repo, project(tmp_path))
    assert any("keeps its /dev/dri hostPath: evidence for dev does not allow" in line for _, line in before.diagnostics)
    evidence = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                "dev": evidence_for("dev", {"k3s-dev-1": 1})}
    after = preview("dev", repo, project(tmp_path / "with-evidence", evidence=evidence))
    told = [line for _, line in after.diagnostics if "evidence allows the switch" in line]
    assert len(told) == 1 and "resources.limits.gpu.intel.com/i915: (absent) -> '1'" in told[0]
    # The repository's Plex is not the export's: with or without evidence, no exported object changes.
    assert {s.op for s in before.steps} == {s.op for s in after.steps} == {"same"}


# --- a forged index --------------------------------------------------------------------------------------------

def forge(repo: Path, stack: str, change) -> None:
    index = repo / f"gpu-platform/{stack}/export-index.json"
    doc = json.loads(index.read_text())
    change(doc)
    index.write_text(json.dumps(doc))


def test_a_forged_index_never_gets_an_entry_of_the_repositorys_own_taken_out(repo, tmp_path, capsys):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    forge(repo, "prod", lambda d: d["edits"]["clusters/base/kustomization.yaml"]["resources"].append("cilium.yaml"))
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [f"{repo}/clusters/base/kustomization.yaml: resources: `cilium.yaml`: the index says the export "
                     "added it, but clusters/base/cilium.yaml is not a file the export wrote; the export never takes "
                     "out an entry of the repository's own; hint: restore the index from git"]


@pytest.mark.parametrize("rel", ["apps/wave-0/kustomization.yaml", "clusters/dev/cluster-vars.yaml"])
def test_a_forged_index_never_gets_the_export_to_edit_a_file_it_does_not_keep_lines_in(repo, tmp_path, capsys, rel):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    spec = {"resources": ["plex.yaml"]} if rel.startswith("apps") else {"data": {"GPU_PLATFORM_X": "1"}}
    forge(repo, "prod", lambda d: d.setdefault("edits", {}).update({rel: spec}))
    lines = refused(capsys, repo, proj, "prod")
    assert len(lines) == 1 and lines[0].startswith(f"{repo}/gpu-platform/prod/export-index.json: edits.{rel}: not an "
                                                   "edit the export makes"), lines


def test_a_forged_index_entry_for_a_repository_file_is_refused_not_pruned(repo, tmp_path, capsys):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    from gitops.index import content_hash

    rel = "platform/longhorn/helmrelease.yaml"
    forge(repo, "prod", lambda d: d["files"].update({rel: content_hash(rel, (repo / rel).read_bytes())}))
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [f"{repo}/gpu-platform/prod/export-index.json: files.{rel}: a file without the export's generated "
                     "header; the export trusts no entry it could not have written; hint: restore the index from git"]


@pytest.mark.parametrize("plugins", [None, ((2, "two transcoders on dev"), (3, "three transcoders on prod"))],
                         ids=["same", "tokens"])
def test_flux_s_walk_of_each_overlay_applies_exactly_that_stack_s_own_program_objects(repo, tmp_path, plugins):
    """The fast model of `make e2e`'s Flux build: each overlay, its cluster-vars substituted, yields field for field
    the plugin's objects that stack's program declares on its own (before the stacks were merged into one base)."""
    from gitops import pipeline

    dev, prod = (DEV, PROD) if plugins is None else (with_plugin(DEV, *plugins[0]), with_plugin(PROD, *plugins[1]))
    proj = project(tmp_path, dev=dev, prod=prod)
    assert export(repo, "prod", project=proj) == 0
    for stack in ("dev", "prod"):
        own = pipeline.build(stack, proj, lint=False).tree  # this stack alone: no token, its own values
        expected = {ObjectId.of(o.manifest): o.manifest for o in own.objects
                    if o.path.startswith("platform/intel-gpu-plugin/")}
        view = walk(RepoView(repo), f"./clusters/{stack}")
        assert sorted(view.kustomizations[PLUGIN_KS].objects) == sorted(expected)
        for oid, manifest in expected.items():
            assert view.manifests[oid] == manifest, oid


def test_an_overlay_patch_that_is_a_symlink_is_never_read_or_written_through(repo, tmp_path, capsys):
    outside = tmp_path / "outside.yaml"
    outside.write_bytes((repo / "clusters/dev/cluster-vars.yaml").read_bytes())
    (repo / "clusters/dev/cluster-vars.yaml").unlink()
    (repo / "clusters/dev/cluster-vars.yaml").symlink_to(outside)
    before = outside.read_bytes()
    proj = project(tmp_path, dev=with_plugin(DEV, 2, "two on dev"), prod=with_plugin(PROD, 3, "three on prod"))
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [f"{repo}/clusters/dev/cluster-vars.yaml: a symlink where the export reads or writes; the export "
                     "never follows links under OUT (the export sets GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0, "
                     "GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON there); hint: replace it with a real file "
                     "or folder"]
    assert outside.read_bytes() == before


def test_a_plugin_shared_in_one_stack_only_differs_in_shape_and_is_refused_naming_what_one_stack_lacks(
        repo, tmp_path, capsys):
    lines = refused(capsys, repo, project(tmp_path, dev=with_plugin(DEV, 2, "two on dev")), "prod")
    assert lines == [
        f"platform/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml: {where}: differs in shape between the stacks of "
        f"the shared base (prod lacks {lacks}); one file in the base cannot be both; hint: make the stacks' config "
        "agree there, or give each cluster its own layout"
        for where, lacks in (("metadata", "annotations"), ("spec.template.spec.containers[0]", "args"))]


def test_the_fixture_is_what_its_renderer_and_its_own_lint_say(tmp_path):
    """The fixture holds to its own gate: catalog/render.py reproduces apps/wave-0/plex.yaml byte for byte and
    yamllint -c ci/yamllint.yaml passes on the whole repository, before any export."""
    render = subprocess.run([sys.executable, "catalog/render.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert render.returncode == 0, render.stdout + render.stderr
    lint = subprocess.run([sys.executable, "-m", "yamllint", "-f", "parsable", "-c", "ci/yamllint.yaml", "."], cwd=REPO,
                          capture_output=True, text=True)
    assert (lint.returncode, lint.stdout) == (0, "")
