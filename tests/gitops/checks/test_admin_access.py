"""gitops/checks/admin_access.py: on the DRA route, admin access the repository grants outside the namespaces the
stack names (gpu.dra.adminAccessNamespaces), found in Flux's walk of the repository, is refused in one line; named,
it exports."""

from __future__ import annotations

import yaml

from conftest import LAYOUT_REPOSITORIES, export, make_project, repo_copy
from tests.model.dra.test_gate_migration import slices, stage


def test_admin_access_the_repository_grants_outside_the_named_namespaces_is_refused_in_its_walk(tmp_path, capsys):
    """A repository's namespace labelled for admin access, and a claim asking for it there, are refused unless the
    stack names the namespace (as onedr0p's home-ops labels kube-system for its GPU metrics exporter)."""
    name, stacks, _ = LAYOUT_REPOSITORIES["split"]
    out = repo_copy(tmp_path, name)
    namespace = out / "kubernetes/apps/kube-system/namespace.yaml"
    doc = yaml.safe_load(namespace.read_text())
    doc["metadata"].setdefault("labels", {})["resource.kubernetes.io/admin-access"] = "true"
    namespace.write_text(yaml.safe_dump(doc))
    nodes = yaml.safe_load(stacks["home"])["config"]["gpu-platform:cluster"]["nodes"]
    evidence = {"dra/home": slices("home", dict.fromkeys(nodes, 1))}
    refused_text = stage("home", "apps-on-claims", text=stacks["home"])
    capsys.readouterr()
    assert export(out, "home", project=make_project(tmp_path / "project", {"home": refused_text}, evidence)) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == ["error: kubernetes/apps/kube-system/namespace.yaml: Namespace kube-system: labelled "
                      'resource.kubernetes.io/admin-access: "true", which lets any claim there reach every GPU of '
                      "the class, in use or not, and the stack does not name it; hint: name the namespace in "
                      "gpu.dra.adminAccessNamespaces, or take admin access out of the repository"], errors
    named = stage("home", "apps-on-claims", "      adminAccessNamespaces: [kube-system]\n", text=stacks["home"])
    assert export(out, "home", project=make_project(tmp_path / "named", {"home": named}, evidence)) == 0
