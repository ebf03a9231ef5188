"""An export you can trust: validated, lint-clean, deterministic, ownership-checked, atomic, drift-checked."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from builders import INDEX, capture_tree, export_an_older_tree, killed_export, mutated
from conftest import ROOT, export, files_of, make_project, stack_text
from gitops.checks.validate import ExportValidationError, validate_tree
from gitops.export import main as export_main
from model.images import INTEL_GPU_PLUGIN_TAG

KS = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
DS = "kubernetes:apps/v1:DaemonSet"






def refused(capture) -> list[str]:
    with pytest.raises(ExportValidationError) as caught:
        validate_tree(capture_tree(capture), lint=False)  # lint is about the emitter, tested on the real tree below
    return caught.value.lines


def problems(tree) -> list[str]:
    """Every line validation (lint included) refuses the tree with; empty when it passes."""
    try:
        validate_tree(tree)
    except ExportValidationError as exc:
        return exc.lines
    return []


# 1. Validation before writing ---------------------------------------------------------------------------------

def test_the_shipped_stacks_validate(captures):
    assert {"dev", "prod"} <= set(captures)
    trees = {stack: capture_tree(capture) for stack, capture in captures.items()}
    assert all(tree.objects for tree in trees.values())
    assert {stack: problems(tree) for stack, tree in trees.items()} == {stack: [] for stack in trees}


def test_a_kubernetes_object_with_an_unknown_field_fails_the_strict_schema(captures):
    bad = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset", lambda m: m["spec"].update(replicas=3))
    lines = refused(bad)
    assert any("daemonset.intel-gpu-plugin.yaml (DaemonSet intel-gpu-plugin/intel-gpu-plugin)" in line
               and "replicas" in line and "1.36.0" in line for line in lines), lines


def test_a_kubernetes_object_missing_a_required_field_fails(captures):
    bad = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset", lambda m: m["spec"].pop("selector"))
    assert any("selector" in line and "required" in line for line in refused(bad))


@pytest.mark.parametrize("mutate,expected", [
    (lambda m: m.update(apiVersion="kustomize.toolkit.fluxcd.io/v1beta2"),
     "apiVersion: 'kustomize.toolkit.fluxcd.io/v1beta2': must be kustomize.toolkit.fluxcd.io/v1"),
    (lambda m: m["metadata"].pop("name"), "metadata.name: missing"),
    (lambda m: m["spec"].update(wiat=True), "spec.wiat: unknown field"),
    (lambda m: m["spec"]["sourceRef"].update(nmae="x"), "spec.sourceRef.nmae: unknown field"),
    (lambda m: m["spec"].update(interval="1d"), "spec.interval: '1d' does not match"),
    (lambda m: m["spec"].pop("sourceRef"), "'sourceRef' is a required property"),
])
def test_a_bad_flux_kustomization_is_refused_naming_the_field(captures, mutate, expected):
    bad = mutated(captures["prod"], KS, "flux-intel-gpu-plugin", mutate)
    lines = refused(bad)
    assert any("ks." in line and expected in line for line in lines), lines


def test_an_undefined_substitution_variable_is_refused(captures):
    bad = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset",
                  lambda m: m["metadata"].setdefault("annotations", {}).update(owner="${UNDEFINED_OWNER}"))
    lines = refused(bad)
    assert any("daemonset.intel-gpu-plugin.yaml" in line and "${UNDEFINED_OWNER}: not defined in cluster-vars" in line
               for line in lines), lines


def test_defined_and_defaulted_substitution_variables_pass(captures):
    ok = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset",
                 lambda m: m["metadata"].setdefault("annotations", {}).update(
                     a="${CLUSTER_NAME}", b="${NOT_SET:=fallback}", c="$${LITERAL}"))
    tree = capture_tree(ok)
    daemonset = next(o for o in tree.objects if o.registration.name == "intel-gpu-plugin-daemonset")
    written = tree.files[daemonset.path].decode()
    assert all(ref in written for ref in ("${CLUSTER_NAME}", "${NOT_SET:=fallback}", "$${LITERAL}"))
    cluster_vars = next(o.manifest["data"] for o in tree.objects
                        if o.manifest["kind"] == "ConfigMap" and o.manifest["metadata"]["name"] == "cluster-vars")
    assert "CLUSTER_NAME" in cluster_vars and "NOT_SET" not in cluster_vars and "LITERAL" not in cluster_vars
    assert problems(tree) == []


def test_a_cluster_vars_key_flux_cannot_substitute_is_refused(captures):
    bad = mutated(captures["prod"], "kubernetes:core/v1:ConfigMap", "flux-cluster-vars",
                  lambda m: m["data"].update({"9LIVES": "x"}))
    assert any("cluster-vars: data.9LIVES: not a Flux variable name" in line for line in refused(bad))


def test_export_refuses_and_writes_nothing_when_a_cluster_var_references_an_undefined_var(tmp_path, capsys):
    text = stack_text("dev").replace("      TIMEZONE: Europe/Berlin",
                                     "      TIMEZONE: Europe/Berlin\n      GREETING: ${NOPE}")
    project = make_project(tmp_path / "p", {"dev": text})
    out = tmp_path / "out"
    assert export(out, "dev", project=project) == 2
    assert "${NOPE}: not defined in cluster-vars" in capsys.readouterr().err
    assert not out.exists()


# 8. Secrets ---------------------------------------------------------------------------------------------------

def test_a_secret_object_is_refused(captures):
    def to_secret(m):
        m.clear()
        m.update(apiVersion="v1", kind="Secret", metadata={"name": "plex-claim-token", "namespace": "plex"},
                 stringData={"token": "claim-abc"})
    bad = mutated(captures["prod"], "kubernetes:core/v1:Service", "plex-service", to_secret)
    lines = refused(bad)
    assert any("Secret objects are never exported" in line for line in lines)
    assert not any("claim-abc" in line for line in lines), "the refusal must not print the secret's value"


def test_a_value_that_came_from_a_pulumi_secret_is_refused(captures):
    regs = [dataclasses.replace(r, secret_paths=("spec.template.spec.containers[0].env[4].value",))
            if r.name == "plex-deployment" else r for r in captures["prod"].registrations]
    lines = refused(dataclasses.replace(captures["prod"], registrations=regs))
    assert any("holds a Pulumi secret value" in line and "env[4]" in line for line in lines)


def test_capture_replaces_a_secret_value_by_a_placeholder_and_records_its_path():
    from gitops.engine.program import SECRET_PLACEHOLDER, _plain, _secret_paths
    wire = {"spec": {"token": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "x"},
                     "name": "plain"}}
    found: list[str] = []
    assert _plain(wire, "", found) == {"spec": {"token": SECRET_PLACEHOLDER, "name": "plain"}}
    assert found == ["spec.token"]
    assert _secret_paths(wire) == ["spec.token"]  # the fallback walker over the raw wire struct agrees
    assert _secret_paths({"spec": {"token": "x"}}) == []


# 2. Lint and layout -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tree_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tree")
    assert export(out, "dev", "prod") == 0
    return out


def test_the_tree_passes_yamllint_with_the_shipped_config(tree_dir):
    result = subprocess.run([sys.executable, "-m", "yamllint", "--strict", "-c", str(ROOT / ".yamllint.yaml"),
                             str(tree_dir)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "indent-sequences: consistent" in (ROOT / ".yamllint.yaml").read_text()


def test_every_yaml_file_starts_with_document_marker_schema_line_and_generated_header(tree_dir):
    for path in tree_dir.rglob("*.yaml"):
        lines = path.read_text().splitlines()
        assert lines[0] == "---", path
        assert lines[1].startswith("# yaml-language-server: $schema=https://"), path
        if path.name == "namespace.plex.yaml":  # core kinds carry their version, like every other kind
            assert lines[1].endswith("/namespace-v1.json"), lines[1]
        assert lines[2].startswith("# Generated by `make export STACK="), path
        assert lines[2].endswith("`. Do not edit: change the program and re-export."), f"{path}: names no module"


def test_keys_are_in_the_documented_order(tree_dir):
    from ruamel.yaml import YAML
    doc = YAML(typ="rt", pure=True).load((tree_dir / "components/prod/plex/deployment.plex.yaml").read_text())
    assert list(doc)[:3] == ["apiVersion", "kind", "metadata"]
    assert list(doc["spec"]) == sorted(doc["spec"])
    container = doc["spec"]["template"]["spec"]["containers"][0]
    assert list(container) == sorted(container)


# 3. One image pin ---------------------------------------------------------------------------------------------

def test_the_plugin_tag_lives_in_exactly_one_place_with_a_renovate_marker():
    sources = []
    for folder, subfolders, names in os.walk(ROOT):
        # Pruned, not filtered after the walk: .venv and build/ (mutation copies of the project) hold most files.
        subfolders[:] = sorted(d for d in subfolders if d not in {".venv", "tests", "build", ".git", "node_modules"})
        sources += [Path(folder, n) for n in sorted(names) if Path(n).suffix in (".py", ".yaml", ".json5", ".toml",
                                                                                  ".cfg")]
    hits = [(p, i) for p in sources for i, line in enumerate(p.read_text().splitlines())
            if INTEL_GPU_PLUGIN_TAG in line]
    assert [(p.relative_to(ROOT).as_posix()) for p, _ in hits] == ["model/images.py"], hits
    lines = (ROOT / "model/images.py").read_text().splitlines()
    path, index = hits[0]
    assert lines[index - 1] == "# renovate: datasource=docker depName=docker.io/intel/intel-gpu-plugin"
    match = re.search(renovate_patterns()[0], "\n".join(lines[index - 1:index + 2]))
    assert match, "renovate.json5's plugin matchString does not match model/images.py"
    from model.images import INTEL_GPU_PLUGIN_DIGEST
    # One match takes the tag and its digest: a Renovate bump updates both in one change.
    assert match.group("currentValue", "currentDigest") == (INTEL_GPU_PLUGIN_TAG, INTEL_GPU_PLUGIN_DIGEST)


def renovate_patterns() -> list[str]:
    """The custom managers' matchStrings from renovate.json5, as Python regexes (JavaScript writes (?<name>…))."""
    renovate = (ROOT / "renovate.json5").read_text()
    found = re.findall(r'matchStrings: \[\n\s+"(.*?)",\n', renovate)
    return [p.encode().decode("unicode_escape").replace("(?<", "(?P<") for p in found]


def test_renovate_takes_each_apps_tag_and_digest_from_the_stack_files_in_one_match():
    from conftest import FIXTURES
    plex, app = renovate_patterns()[1:]
    text = "    imageTag: 1.42.2.10156-f737b826c\n    imageDigest: sha256:" + "a" * 64 + "\n"
    found = re.search(plex, text)
    assert found and found.group("currentValue", "currentDigest") == ("1.42.2.10156-f737b826c", "sha256:" + "a" * 64)
    found = re.search(plex, (ROOT / "Pulumi.prod.yaml").read_text())
    assert found and found.group("currentValue") == "1.42.2.10156-f737b826c"
    jellyfin = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    found = re.search(app, jellyfin)
    assert found
    assert (found.group("depName"), found.group("currentValue")) == ("docker.io/jellyfin/jellyfin", "10.10.7")


def test_the_export_shows_the_pinned_tag(tree_dir):
    text = (tree_dir / "components/dev/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml").read_text()
    from model.images import INTEL_GPU_PLUGIN_DIGEST
    assert f"image: docker.io/intel/intel-gpu-plugin:{INTEL_GPU_PLUGIN_TAG}@{INTEL_GPU_PLUGIN_DIGEST}\n" in text


# 4. Determinism -----------------------------------------------------------------------------------------------

def test_output_is_byte_identical_across_hash_seeds_and_stack_order(tmp_path):
    in_process = tmp_path / "in-process"
    assert export(in_process, "prod", "dev") == 0
    # Another process with another hash seed, stacks in the other order.
    seed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "17"
    other = tmp_path / "other-seed"
    subprocess.run([sys.executable, "-m", "gitops.export", "--stack", "dev", "--stack", "prod", "--out", str(other),
                    "--quiet"], cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed}, check=True, capture_output=True)
    assert files_of(in_process) == files_of(other)
    assert export(other, "dev", "prod", check=True) == 0
    assert not any(re.search(rb"20\d\d-\d\d-\d\dT", c) for c in files_of(other).values()), "no timestamps"


# 5. Ownership and pruning -------------------------------------------------------------------------------------

def test_re_export_prunes_an_owned_file_no_longer_produced(tmp_path):
    out = tmp_path / "out"
    assert export(out, "dev") == 0
    stale = out / "components/dev/plex/configmap.old-settings.yaml"
    stale.write_text("---\nold: true\n")
    index_file = out / INDEX
    index = json.loads(index_file.read_text())
    import hashlib
    index["files"][stale.relative_to(out).as_posix()] = hashlib.sha256(stale.read_bytes()).hexdigest()
    index_file.write_text(json.dumps(index))
    assert export(out, "dev") == 0
    assert not stale.exists()
    assert stale.relative_to(out).as_posix() not in json.loads(index_file.read_text())["files"]


def test_re_export_never_touches_files_it_does_not_own(tmp_path):
    out = tmp_path / "out"
    assert export(out, "dev") == 0
    mine = out / "components/dev/plex/NOTES.md"
    mine.write_text("hand-written\n")
    external = out / "kubernetes/dev/cilium/kustomization.yaml"
    external.parent.mkdir(parents=True)
    external.write_text("---\nresources: []\n")
    assert export(out, "dev") == 0
    assert mine.read_text() == "hand-written\n" and external.read_text() == "---\nresources: []\n"


def test_export_refuses_to_overwrite_a_hand_written_file_at_an_owned_path_and_changes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    target = out / "components/dev/plex/deployment.plex.yaml"
    target.parent.mkdir(parents=True)
    target.write_text("---\n# my own plex\n")
    assert export(out, "dev") == 2
    assert "refusing to overwrite a hand-written file" in capsys.readouterr().err
    assert files_of(out) == {"components/dev/plex/deployment.plex.yaml": b"---\n# my own plex\n"}


def test_export_refuses_to_overwrite_an_owned_file_edited_by_hand(tmp_path, capsys):
    out = tmp_path / "out"
    assert export(out, "dev") == 0
    target = out / "components/dev/plex/service.plex.yaml"
    target.write_text(target.read_text().replace("port: 32400", "port: 32401"))
    before = files_of(out)
    project = make_project(tmp_path / "p", {"dev": stack_text("dev").replace("192.168.20.40", "192.168.20.41")})
    assert export(out, "dev", project=project) == 2
    assert "edited by hand since the last export" in capsys.readouterr().err
    assert files_of(out) == before


# 6. Atomic ----------------------------------------------------------------------------------------------------

# Where a kill lands before the commit point. With the syncfs lever (the default): os.fdopen #1..#26 open the staged
# files, #27 the journal written aside, then the one syncfs before the os.replace commit. With the lever off:
# fsync #1..#26 are the staged files, #27 the journal.
# `make test` kills in the middle of each path and at the flush; the first and last file of each path are stress
# rounds (`make stress`, CI): the same guarantee at its edges, ~0.8 s each.
_EDGE = pytest.mark.stress
KILLS_BEFORE_COMMIT = [pytest.param("fdopen", 1, None, marks=_EDGE), ("fdopen", 13, None),
                       pytest.param("fdopen", 27, None, marks=_EDGE), ("_syncfs", 1, None),
                       pytest.param("fsync", 1, "syncfs", marks=_EDGE), ("fsync", 13, "syncfs"),
                       pytest.param("fsync", 27, "syncfs", marks=_EDGE)]


@pytest.mark.parametrize(("function", "kill_at", "levers_off"), KILLS_BEFORE_COMMIT)
def test_an_export_killed_before_its_commit_point_leaves_the_previous_tree_whole(tmp_path, monkeypatch, function,
                                                                                kill_at, levers_off):
    import gitops.repo.writer

    if levers_off:
        monkeypatch.setenv("GPU_PLATFORM_LEVERS_OFF", levers_off)
    out = tmp_path / "out"
    export_an_older_tree(out)
    before = files_of(out)
    owner = gitops.repo.writer if function.startswith("_") else os
    code = killed_export(["--stack", "dev", "--out", str(out), "--quiet"], function, kill_at, owner)
    assert code == -9, f"the export was not killed at {function} #{kill_at} (exit {code})"
    after = {k: v for k, v in files_of(out).items() if not k.startswith(".gitops-export/")}
    assert after == before, "a killed export changed the previous tree"
    assert export(out, "dev") == 0  # the next run discards the leftovers and completes
    assert export(out, "dev", check=True) == 0
    assert not (out / ".gitops-export").exists()


def test_an_export_killed_after_its_commit_point_is_completed_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    export_an_older_tree(out)
    # os.replace #1 is the journal (commit point); #10 is in the middle of the renames.
    assert killed_export(["--stack", "dev", "--out", str(out), "--quiet"], "replace", 10) == -9
    assert export(out, "dev", check=True) == 1  # drift is visible until the export is completed
    assert export(out, "dev") == 0
    assert export(out, "dev", check=True) == 0


# 7. Drift check -----------------------------------------------------------------------------------------------

def test_check_exits_0_when_equal_and_1_with_a_summary_when_not_and_never_writes(tmp_path, capsys):
    out = tmp_path / "out"
    assert export(out, "dev", "prod") == 0
    assert export(out, "dev", "prod", check=True) == 0
    (out / "components/prod/plex/service.plex.yaml").write_text("---\n")
    (out / "clusters/dev/gpu-platform/ks.cilium.yaml").unlink()
    before = files_of(out)
    capsys.readouterr()
    assert export_main(["--stack", "dev", "--stack", "prod", "--out", str(out), "--check"]) == 1
    report = capsys.readouterr().out
    assert "changed  components/prod/plex/service.plex.yaml" in report
    # A unified diff of the changed file against what the export would write.
    diff = [line.strip() for line in report.splitlines()]
    at = diff.index("--- a/components/prod/plex/service.plex.yaml")
    assert diff[at + 1] == "+++ b/components/prod/plex/service.plex.yaml" and "+kind: Service" in diff[at:]
    assert "missing  clusters/dev/gpu-platform/ks.cilium.yaml" in report
    assert files_of(out) == before


def test_check_on_an_empty_folder_reports_drift_and_creates_nothing(tmp_path):
    out = tmp_path / "empty"
    assert export(out, "dev", check=True) == 1
    assert not out.exists()


# 9. Picture ---------------------------------------------------------------------------------------------------

def test_delivery_markdown_draws_what_the_walk_found(tree_dir):
    text = (tree_dir / "clusters/prod/gpu-platform/DELIVERY.md").read_text()
    block = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    ks = "k_flux_system_"
    for edge in ("cilium --> k_flux_system_flux_system", "platform --> k_flux_system_cilium",
                 "platform_config --> k_flux_system_platform", "apps_wave_0 --> k_flux_system_platform_config",
                 "apps_wave_1 --> k_flux_system_apps_wave_0", "apps_wave_1 --> k_flux_system_plex",
                 "plex --> k_flux_system_platform_config", "intel_gpu_plugin --> k_flux_system_cilium",
                 "intel_gpu_plugin ==> f_components_prod_intel_gpu_plugin", "plex ==> f_components_prod_plex",
                 "flux_system ==> f_clusters_prod_gpu_platform"):
        assert f"  {ks}{edge}\n" in block, edge
    assert not re.search(r"--> k_flux_system_intel_gpu_plugin\b", block), "nothing may depend on the plugin"
    assert "| `components/prod/plex/` | 9 | plex |" in text
    assert "| `components/prod/intel-gpu-plugin/` | 3 | intel-gpu-plugin |" in text


LEAKY_MAIN = '''
import runpy
import pulumi
import pulumi_kubernetes as k8s

program = runpy.run_path({main!r}, run_name="__main__")
# A value marked secret in Pulumi, placed in an object the export would write.
k8s.core.v1.ConfigMap("plex-leak", metadata={{"name": "leak", "namespace": "plex"}},
                      data={{"token": pulumi.Output.secret("s3cr3t-claim")}},
                      opts=pulumi.ResourceOptions(parent=program["apps"]["plex"], provider=program["provider"]))
'''


def test_a_pulumi_secret_in_the_real_program_is_refused_and_never_printed(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"dev": stack_text("dev")})
    (project / "__main__.py").write_text(LEAKY_MAIN.format(main=str(ROOT / "__main__.py")))
    out = tmp_path / "out"
    assert export(out, "dev", project=project) == 2
    err = capsys.readouterr().err
    # The SDK marks the whole `data` map secret once one of its values is.
    assert re.search(r"configmap\.leak\.yaml \(ConfigMap plex/leak\): data(\.token)?: "
                     r"holds a Pulumi secret value", err), err
    assert "s3cr3t" not in err and not out.exists()


def test_a_corrupt_index_is_a_clear_error_for_export_and_check(tmp_path, capsys):
    out = tmp_path / "out"
    assert export(out, "dev") == 0
    (out / INDEX).write_text("{not json")
    before = files_of(out)
    assert export(out, "dev") == 2
    assert export(out, "dev", check=True) == 2
    assert "export-index.json: (root): not a valid export index (not JSON)" in capsys.readouterr().err
    assert files_of(out) == before


def test_the_documented_drift_command_keeps_0_clean_1_drift_2_error(tmp_path):
    script = ROOT / "scripts" / "drift-check"
    out = tmp_path / "repo"
    assert export(out, "dev") == 0

    def run(*args: str) -> subprocess.CompletedProcess:
        # From another folder, with OUT relative to it, as a GitOps repository's CI would call it.
        return subprocess.run([str(script), *args], cwd=tmp_path, capture_output=True, text=True)

    assert run("--stack", "dev", "--out", "repo").returncode == 0
    (out / "components/dev/plex/service.plex.yaml").write_text("---\n")
    drifted = run("--stack", "dev", "--out", "repo")
    assert drifted.returncode == 1 and "changed  components/dev/plex/service.plex.yaml" in drifted.stdout
    broken = run("--stack", "nope", "--out", "repo")
    assert broken.returncode == 2 and "error: Pulumi.nope.yaml: no such stack file" in broken.stderr
