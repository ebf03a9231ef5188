"""`make new-stack STACK=<name> NODES="a b"`: a stack file from templates/Pulumi.stack.yaml that the export refuses,
one line per key, until its `# change:` marks and documentation addresses are resolved, then exports cleanly; or one
refusal line and nothing written."""

from __future__ import annotations

import json
import subprocess

import jsonschema
import pytest
import yaml

from conftest import ROOT, make_project, stack_text
from gitops.export import main as export_main
from gitops.new_stack import main as new_stack
from gitops.stack_schema import SCHEMA_PATH

# The first line of every Pulumi.<stack>.yaml (relative to the project root, where the stack files live).
SCHEMA_COMMENT = "# yaml-language-server: $schema=./schemas/stack/stack.schema.json"


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "project", {"dev": stack_text("dev")})


def test_a_new_stack_passes_the_schema_and_exports_once_its_change_marks_are_resolved(project, tmp_path, capsys):
    assert new_stack(["--stack", "lab", "--nodes", "lab-1 lab-2 123", "--project-dir", str(project)]) == 0
    assert "wrote Pulumi.lab.yaml (3 nodes)" in capsys.readouterr().out
    text = (project / "Pulumi.lab.yaml").read_text()
    assert text.splitlines()[0] == SCHEMA_COMMENT and "${" not in text
    doc = yaml.safe_load(text)
    assert doc["config"]["gpu-platform:cluster"]["nodes"] == ["lab-1", "lab-2", "123"]
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--stack", "lab", "--out", str(out), "--quiet", "--project-dir", str(project)]
    assert export_main(argv) == 2
    hint = "hint: set the value this cluster has, then delete the comment"
    assert capsys.readouterr().err.splitlines() == [
        f"error: Pulumi.lab.yaml: gpu-platform:flux.tiers: marked `# change: the paths of this cluster's hand-written "
        f"tier folders.` by make new-stack; {hint}",
        f"error: Pulumi.lab.yaml: gpu-platform:flux.clusterVars.CLUSTER_DOMAIN: marked `# change: the cluster's "
        f"domain` by make new-stack; {hint}",
        f"error: Pulumi.lab.yaml: gpu-platform:flux.clusterVars.TIMEZONE: marked `# change: the cluster's time zone` "
        f"by make new-stack; {hint}",
        f"error: Pulumi.lab.yaml: gpu-platform:plex.timezone: marked `# change: Plex's time zone` by make new-stack; "
        f"{hint}",
        "error: Pulumi.lab.yaml: gpu-platform:plex.advertiseIp: 192.0.2.40: a documentation address from the "
        "template, no real cluster's; hint: set the address or domain this cluster uses",
        f"error: Pulumi.lab.yaml: gpu-platform:plex.storage.mediaStorageClass: marked `# change: the storage class of "
        f"the media share` by make new-stack; {hint}",
        "nothing was written"]
    assert list(out.iterdir()) == []
    resolved = "\n".join(line.split("  # change:")[0] for line in text.splitlines()
                         if not line.lstrip().startswith("# change:"))
    (project / "Pulumi.lab.yaml").write_text(resolved.replace("192.0.2.40", "192.168.30.40") + "\n")
    assert export_main(argv) == 0
    assert (out / "components" / "lab" / "plex" / "deployment.plex.yaml").is_file()


@pytest.mark.parametrize("domain", ["lab.example.com", "nas.example.org:2049", "198.51.100.7", "203.0.113.0/28"])
def test_any_documentation_address_or_domain_left_in_a_stack_file_is_refused_naming_its_key(project, tmp_path,
                                                                                            capsys, domain):
    text = stack_text("dev").replace("    clusterVars:\n", f"    clusterVars:\n      NAS: \"{domain}\"\n", 1)
    assert f"NAS: \"{domain}\"" in text
    proj = make_project(tmp_path / "p", {"dev": text})
    assert export_main(["--stack", "dev", "--out", str(tmp_path), "--quiet", "--project-dir", str(proj)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: Pulumi.dev.yaml: gpu-platform:flux.clusterVars.NAS: {domain}: a documentation address from the "
        "template, no real cluster's; hint: set the address or domain this cluster uses", "nothing was written"]


@pytest.mark.parametrize("stack, nodes, expected", [
    ("dev", "a", "error: Pulumi.dev.yaml: (file): exists already; hint: choose another STACK, or edit Pulumi.dev.yaml"),
    ("bad name", "a", 'error: --stack "bad name": stack name: " " at position 3: Pulumi allows only letters, digits, '
                      "'-', '_' and '.' in a stack name; hint: name the stack file Pulumi.<stack>.yaml with a short "
                      "name such as dev or prod, and pass that name"),
    ("lab", "", 'error: Pulumi.lab.yaml: gpu-platform:cluster.nodes: no nodes given; hint: NODES="<node> <node> …" '
                "(kubectl get nodes)"),
    ("lab", "Lab-1", "error: Pulumi.lab.yaml: gpu-platform:cluster.nodes[0]: \"Lab-1\": must be a DNS-1123 name: "
                     "lowercase letters, digits, '-' and '.' (^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
                     "[a-z0-9])?)*$); hint: write a value of that form"),
])
def test_a_refused_stack_is_one_line_and_nothing_is_written(project, capsys, stack, nodes, expected):
    before = sorted(p.name for p in project.iterdir())
    assert new_stack(["--stack", stack, "--nodes", nodes, "--project-dir", str(project)]) == 2
    assert capsys.readouterr().err.splitlines() == [expected, "nothing was written"]  # each refusal alike
    assert sorted(p.name for p in project.iterdir()) == before


def test_make_new_stack_writes_the_file_then_its_golden_tree_snapshot():
    dry = subprocess.run(["make", "-n", "-s", "new-stack", "STACK=lab", "NODES=lab-1 lab-2"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "-m gitops.new_stack --stack lab --nodes \"lab-1 lab-2\"" in dry
    assert "GOLDEN_UPDATE=1" in dry
    assert "tests/gitops/test_tree_golden.py::test_the_exported_tree_matches_its_golden_snapshot[lab]" in dry
