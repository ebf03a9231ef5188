"""gitops/repo/own_file_lines.py: the lines the export keeps in the repository's own files (the shared base's
kustomization.yaml entries, the overlays' cluster-vars keys; examples/home-network-k3s/repo): written in the
file's own line endings, taken out again byte for byte, refused with the line to add where a text edit cannot keep
them, never written through a symlink, never taking out an entry of the repository's own; and every file the export
writes restyled to pass the repository's own yamllint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from builders import (
    HOME_DEV as DEV,
    HOME_PROD as PROD,
    forge_index as forge,
    git,
    git_status as status,
    home_project as project,
    home_repo,
    refused_export as refused,
    with_plugin,
)
from conftest import export
from gitops.export import main as export_main
from gitops.repo import edits, lintconfig


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git copy of examples/home-network-k3s/repo, committed, so `git status` shows exactly what the export
    changed."""
    return home_repo(tmp_path)


def test_the_entry_follows_the_repositorys_line_endings_and_comments(repo, tmp_path):
    kfile = repo / "clusters/base/kustomization.yaml"
    crlf = kfile.read_bytes().replace(b"\n", b"\r\n")
    kfile.write_bytes(crlf)
    assert export(repo, "prod", project=project(tmp_path)) == 0
    assert kfile.read_bytes() == edits.add_resource(crlf, "intel-gpu-plugin.yaml")
    assert kfile.read_bytes().endswith(b"  - intel-gpu-plugin.yaml\r\n")


BY_HAND = "hint: add the line `- intel-gpu-plugin.yaml` to the `resources:` list by hand"


@pytest.mark.parametrize(("text", "problem"), [
    ("resources: [flux-system.yaml, cluster-vars.yaml, cilium.yaml]\n",
     "resources: is a list in flow style ([...]), not a list in block style (one `- item` a line)"),
    ("resources: &r\n  - flux-system.yaml\n",
     "(file): an anchor &r on line 1: anchors, aliases and tags are refused in a file edited as text"),
    ("resources:\n  - flux-system.yaml\nconfigMapGenerator:\n  - name: x\n",
     "configMapGenerator: a generator: the export does not edit a kustomization whose output depends on generator "
     "options"),
], ids=["flow style", "an anchor", "a generator"])
def test_a_hand_written_kustomization_the_edit_cannot_keep_is_refused_with_the_line_to_add(repo, tmp_path, capsys,
                                                                                         text, problem):
    (repo / "clusters/base/kustomization.yaml").write_text(text)
    assert refused(capsys, repo, project(tmp_path), "prod") == [
        f"{repo}/clusters/base/kustomization.yaml: {problem}; {BY_HAND}"]


def test_a_missing_base_kustomization_is_one_line_for_every_stack_sharing_it_naming_the_key_too(repo, tmp_path,
                                                                                              capsys):
    (repo / "clusters/base/kustomization.yaml").unlink()
    assert refused(capsys, repo, project(tmp_path), "prod") == [
        f"{repo}/clusters/base/kustomization.yaml: missing; the export keeps the entries intel-gpu-plugin.yaml in it; "
        "hint: restore it from git, or point gitops.entryDir (every stack sharing the base) at the folder that holds "
        "it"]


def test_removing_the_export_restores_the_repository_byte_for_byte(repo, tmp_path):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert status(repo) == set()
    assert git(repo, "diff") == ""


# --- what the user wrote is theirs -----------------------------------------------------------------------------

def _commit(repo: Path) -> None:
    git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qam", "by hand")


def test_an_entry_the_user_listed_before_the_first_export_is_theirs_and_stays_after_remove(repo, tmp_path):
    kfile = repo / "clusters/base/kustomization.yaml"
    kfile.write_text(kfile.read_text() + "  - intel-gpu-plugin.yaml\n")
    _commit(repo)
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    assert git(repo, "diff") == "", "the line was there: the export changed nothing of the file"
    for stack in ("dev", "prod"):
        index = json.loads((repo / f"gpu-platform/{stack}/export-index.json").read_text())
        assert "clusters/base/kustomization.yaml" not in index.get("edits", {}), "the user's line was recorded"
    assert export(repo, "prod", project=proj, check=True) == 0
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert status(repo) == set()
    assert git(repo, "diff") == "", "--remove took out the user's own line"


TWO_DEV, TWO_PROD = with_plugin(DEV, 2, "two on dev"), with_plugin(PROD, 3, "three on prod")


def test_a_cluster_vars_key_the_user_set_to_the_exports_value_is_theirs_and_stays_after_remove(repo, tmp_path):
    vars_file = repo / "clusters/dev/cluster-vars.yaml"
    vars_file.write_text(vars_file.read_text() + '  GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: "-shared-dev-num=2"\n')
    _commit(repo)
    proj = project(tmp_path, dev=TWO_DEV, prod=TWO_PROD)
    assert export(repo, "prod", project=proj) == 0
    assert git(repo, "diff", "clusters/dev/cluster-vars.yaml").count("\n+  ") == 1, "only the other key is added"
    index = json.loads((repo / "gpu-platform/dev/export-index.json").read_text())
    assert index["edits"]["clusters/dev/cluster-vars.yaml"] == {
        "data": {"GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON": "two on dev"}}
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert status(repo) == set()


def test_a_cluster_vars_key_the_user_set_to_another_value_is_refused_never_overwritten(repo, tmp_path, capsys):
    vars_file = repo / "clusters/dev/cluster-vars.yaml"
    vars_file.write_text(vars_file.read_text() + '  GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: "-shared-dev-num=4"\n')
    lines = refused(capsys, repo, project(tmp_path, dev=TWO_DEV, prod=TWO_PROD), "prod")
    assert lines == [f'{repo}/clusters/dev/cluster-vars.yaml: data.GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: '
                     '"-shared-dev-num=4" was set by hand and the export sets "-shared-dev-num=2"; the export never '
                     'overwrites a value it did not write; hint: delete the line '
                     '`GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: ...` to hand the key to the export, or change '
                     'Pulumi.dev.yaml so the export sets "-shared-dev-num=4"']


def test_a_key_the_export_wrote_is_still_the_exports_on_the_next_run(repo, tmp_path):
    proj = project(tmp_path, dev=TWO_DEV, prod=TWO_PROD)
    assert export(repo, "prod", project=proj) == 0
    assert export(repo, "prod", project=proj) == 0
    index = json.loads((repo / "gpu-platform/dev/export-index.json").read_text())
    assert sorted(index["edits"]["clusters/dev/cluster-vars.yaml"]["data"]) == [
        "GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0", "GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON"]
    assert json.loads((repo / "gpu-platform/prod/export-index.json").read_text())["edits"][
        "clusters/base/kustomization.yaml"] == {"resources": ["intel-gpu-plugin.yaml"]}


SETS = ("(the export sets GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0, GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON "
        "there)")


def test_a_cluster_vars_patch_the_export_cannot_read_is_named_not_called_missing(repo, tmp_path, capsys):
    vars_file = repo / "clusters/dev/cluster-vars.yaml"
    head, _, _ = vars_file.read_text().partition("\ndata:\n")
    vars_file.write_text(head + "\ndata: {CLUSTER_NAME: ${NAME}}\n")  # `{` starts no plain scalar in flow style
    lines = refused(capsys, repo, project(tmp_path, dev=TWO_DEV, prod=TWO_PROD), "prod")
    assert lines == [f"{repo}/clusters/dev/cluster-vars.yaml: (root): not readable as YAML (did not find "
                     f"expected ',' or '}}'), so the export cannot tell whether it sets ConfigMap cluster-vars "
                     f"{SETS}; hint: fix the file (kubectl kustomize clusters/dev shows where)"]


def test_a_cluster_vars_patch_written_inline_is_named_with_the_way_to_a_file(repo, tmp_path, capsys):
    kfile = repo / "clusters/dev/kustomization.yaml"
    patch = (repo / "clusters/dev/cluster-vars.yaml").read_text().replace("\n", "\n      ")
    kfile.write_text(kfile.read_text().replace("  - path: cluster-vars.yaml", f"  - patch: |-\n      {patch}"))
    (repo / "clusters/dev/cluster-vars.yaml").unlink()
    lines = refused(capsys, repo, project(tmp_path, dev=TWO_DEV, prod=TWO_PROD), "prod")
    assert lines == [f"{repo}/clusters/dev/kustomization.yaml: patches: ConfigMap cluster-vars is patched inline "
                     f"(`patch:`), which the export does not edit {SETS}; hint: move that patch into a file of "
                     "clusters/dev/ and list it as `- path: <file>`"]


# --- the export's line in the user's spelling (issue 54) ------------------------------------------------------

BASE = "clusters/base/kustomization.yaml"
SPELLINGS = ["./intel-gpu-plugin.yaml", '"intel-gpu-plugin.yaml"', "intel-gpu-plugin.yaml  # gpu"]


def _whole_refusal(capsys, repo: Path, proj: Path, *flags: str) -> str:
    """Everything a quiet export (or --check, --remove) of prod that must refuse prints, stdout then stderr: exit 2,
    the repository unchanged."""
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    capsys.readouterr()
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--quiet", *flags]) == 2
    printed, warned = capsys.readouterr()
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts} == before
    return printed + warned


@pytest.mark.parametrize("spelling", SPELLINGS, ids=["dot-slash", "quoted", "comment"])
def test_the_exports_line_respelled_by_the_user_stays_as_written_is_clean_and_goes_with_remove(repo, tmp_path,
                                                                                               spelling):
    proj = project(tmp_path)
    original = (repo / BASE).read_bytes()
    assert export(repo, "prod", project=proj) == 0
    respelled = (repo / BASE).read_bytes().replace(b"  - intel-gpu-plugin.yaml\n", f"  - {spelling}\n".encode())
    (repo / BASE).write_bytes(respelled)
    assert export(repo, "prod", project=proj) == 0
    assert (repo / BASE).read_bytes() == respelled, "the export added a second line or rewrote the user's"
    assert export(repo, "prod", project=proj, check=True) == 0
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert (repo / BASE).read_bytes() == original
    assert status(repo) == set()


@pytest.mark.parametrize("spelling", SPELLINGS, ids=["dot-slash", "quoted", "comment"])
def test_the_users_own_line_in_another_spelling_is_theirs_and_the_export_adds_none(repo, tmp_path, spelling):
    (repo / BASE).write_bytes((repo / BASE).read_bytes() + f"  - {spelling}\n".encode())
    _commit(repo)
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    assert git(repo, "diff", BASE) == ""
    assert export(repo, "prod", project=proj, check=True) == 0
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert status(repo) == set(), "--remove took out the user's own line"


@pytest.mark.parametrize("flags", [[], ["--check"], ["--remove"]], ids=["export", "check", "remove"])
def test_the_exports_line_beside_the_users_spelling_of_it_is_refused_once_naming_both(repo, tmp_path, capsys, flags):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    (repo / BASE).write_bytes((repo / BASE).read_bytes() + b"  - ./intel-gpu-plugin.yaml\n")
    assert _whole_refusal(capsys, repo, proj, *flags) == (
        f"error: {repo}/{BASE}: resources: `intel-gpu-plugin.yaml` (line 15) and `./intel-gpu-plugin.yaml` (line 16) "
        "name one file, which kustomize refuses to list twice; hint: delete one of the two lines\n"
        "nothing was written\n")


# --- a cluster-vars patch the export can read but not edit (issue 54) ------------------------------------------

PROD_VARS = "clusters/prod/cluster-vars.yaml"
PROD_LINES = ('`GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: "-shared-dev-num=3"`, '
              '`GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON: "three on prod"`')


def _prod_vars(repo: Path, change) -> None:
    path = repo / PROD_VARS
    path.write_text(change(path.read_text()))


def _flow(text: str) -> str:
    """The patch with its data block in flow style, two of its values kept."""
    return text.partition("\ndata:\n")[0] + '\ndata: {CLUSTER_NAME: prod, CLUSTER_ID: "1"}\n'


@pytest.mark.parametrize(("change", "problem"), [
    (_flow, "data (line 8): in flow style ({...}), which the export cannot edit without rewriting your lines"),
    (lambda text: text.replace("  CLUSTER_NAME: prod\n", "  CLUSTER_NAME: &name prod\n  CLUSTER_ALIAS: *name\n"),
     "data (line 8): its document holds an anchor &name on line 9, and the export edits no document with anchors, "
     "aliases or tags"),
], ids=["flow style", "an anchor"])
def test_a_cluster_vars_patch_the_export_cannot_edit_is_one_line_naming_its_data_line_and_the_lines_to_add(
        repo, tmp_path, capsys, change, problem):
    _prod_vars(repo, change)
    assert _whole_refusal(capsys, repo, project(tmp_path, dev=TWO_DEV, prod=TWO_PROD)) == (
        f"error: {repo}/{PROD_VARS}: {problem}; hint: set {PROD_LINES} under `data:` of ConfigMap "
        "cluster-vars by hand; the next export finds them there and edits nothing\n"
        "nothing was written\n")


def test_the_lines_added_by_hand_to_a_flow_style_patch_are_read_back_and_the_file_stays_as_it_is(repo, tmp_path):
    added = ('data: {GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: "-shared-dev-num=3", '
             'GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON: "three on prod", ')
    _prod_vars(repo, lambda text: _flow(text).replace("\ndata: {", "\n" + added))
    _commit(repo)
    proj = project(tmp_path, dev=TWO_DEV, prod=TWO_PROD)
    assert export(repo, "prod", project=proj) == 0
    assert git(repo, "diff", PROD_VARS) == ""
    assert export(repo, "prod", project=proj, check=True) == 0


def test_a_cluster_vars_patch_in_a_multi_document_file_is_edited_in_its_own_document(repo, tmp_path):
    other = ("---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: cilium\n"
             "  namespace: flux-system\nspec:\n  interval: 30m\n")
    _prod_vars(repo, lambda text: other + text)
    before = (repo / PROD_VARS).read_bytes()
    proj = project(tmp_path, dev=TWO_DEV, prod=TWO_PROD)
    assert export(repo, "prod", project=proj) == 0
    assert (repo / PROD_VARS).read_bytes() == before + (
        b'  GPU_PLATFORM_INTEL_GPU_PLUGIN_ARGS_0: "-shared-dev-num=3"\n'
        b'  GPU_PLATFORM_INTEL_GPU_PLUGIN_SHARED_DEV_NUM_REASON: "three on prod"\n')
    assert export_main(["--stack", "prod", "--out", str(repo), "--project-dir", str(proj), "--remove",
                        "--quiet"]) == 0
    assert (repo / PROD_VARS).read_bytes() == before


# --- a symlink and a forged index ------------------------------------------------------------------------------

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


def test_a_forged_index_never_gets_an_entry_of_the_repositorys_own_taken_out(repo, tmp_path, capsys):
    proj = project(tmp_path)
    assert export(repo, "prod", project=proj) == 0
    forge(repo, "prod", lambda d: d["edits"]["clusters/base/kustomization.yaml"]["resources"].append("cilium.yaml"))
    lines = refused(capsys, repo, proj, "prod")
    assert lines == [f"{repo}/clusters/base/kustomization.yaml: resources: `cilium.yaml`: the index says the export "
                     "added it, but clusters/base/cilium.yaml is not a file the export wrote; the export never takes "
                     "out an entry of the repository's own; hint: restore the index from git"]


# --- the repository's own yamllint -----------------------------------------------------------------------------

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
