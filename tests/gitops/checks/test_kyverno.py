"""Which of the repository's files hold its Kyverno policies, which rules refuse at admission, and how a refusal
reads (gitops/checks/kyverno.py). The CLI itself runs in tests/e2e/test_kyverno_check.py and
tests/e2e/test_kyverno_agreement.py."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import repository
from gitops.checks.kyverno import KyvernoPolicy, KyvernoRun, refusals, repository_policies


def policy(name: str, action: str | None = None, rule_action: str | None = None) -> dict:
    validate = {"message": "m", "pattern": {}} | ({"failureAction": rule_action} if rule_action else {})
    spec = {"rules": [{"name": "r", "validate": validate}]} | ({"validationFailureAction": action} if action else {})
    return {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": name}, "spec": spec}


def test_the_user_s_four_policies_are_found_wherever_they_sit_and_wired_or_not(tmp_path: Path):
    import shutil

    shutil.copytree(repository("home-network-k3s"), tmp_path / "repo")
    found = repository_policies(tmp_path / "repo")
    assert [(p.name, p.source) for p in found] == [
        (name, f"platform/kyverno/{name}.yaml") for name in (
            "require-auth-mode-label", "require-default-deny-baseline", "require-egress-class-label",
            "restrict-host-namespaces")]
    assert [p.reads_the_cluster for p in found] == [True, True, True, False]


def test_hidden_folders_links_broken_files_and_other_kinds_are_passed_over(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "p.yaml").write_text(json.dumps(policy("in-git")))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ok.yaml").write_text(json.dumps(policy("kept")) + "\n---\n" + json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
    (tmp_path / "a" / "broken.yaml").write_text("kind: [unclosed\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text(json.dumps(policy("outside")))
    (tmp_path / "a" / "link.yaml").symlink_to(outside)
    (tmp_path / "a" / "notes.txt").write_text(json.dumps(policy("not-yaml-named")))
    assert [p.name for p in repository_policies(tmp_path)] == ["kept"]


def test_a_policy_inside_a_v1_list_is_found_as_kustomize_takes_the_list_apart_for_flux(tmp_path: Path):
    (tmp_path / "policies.yaml").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        policy("listed"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]}))
    found = repository_policies(tmp_path)
    assert [(p.name, p.source) for p in found] == [("listed", "policies.yaml")]


def test_a_rule_enforces_by_its_own_action_else_the_policy_s_else_not_at_all():
    assert KyvernoPolicy("p", "f", policy("p", action="Enforce")).enforces("r")
    assert not KyvernoPolicy("p", "f", policy("p", action="Audit")).enforces("r")
    assert not KyvernoPolicy("p", "f", policy("p")).enforces("r")  # Kyverno's default is Audit
    assert KyvernoPolicy("p", "f", policy("p", action="Audit", rule_action="Enforce")).enforces("r")
    assert not KyvernoPolicy("p", "f", policy("p", action="Enforce", rule_action="Audit")).enforces("r")


def test_a_refusal_names_the_file_the_object_the_policy_where_it_is_and_the_rule():
    deployment = ("apps/v1", "Deployment", "plex", "plex")
    run = KyvernoRun()
    run.record(deployment, "p", "autogen-r", "fail", "the namespace plex must carry the label egress-class.")
    run.record(deployment, "audit-only", "r", "fail")
    run.record(("v1", "Namespace", "", "plex"), "p", "r", "pass")
    lines = refusals(run, [KyvernoPolicy("p", "platform/kyverno/p.yaml", policy("p", action="Enforce")),
                           KyvernoPolicy("audit-only", "platform/kyverno/a.yaml", policy("audit-only"))],
                     {deployment: "components/prod/plex/deployment.plex.yaml"})
    assert lines == [
        "components/prod/plex/deployment.plex.yaml: Deployment plex/plex: refused by Kyverno policy p "
        "(platform/kyverno/p.yaml), rule r (fail): the namespace plex must carry the label egress-class; hint: "
        "change the stack config so the object passes, or the policy if it is wrong; the export writes nothing the "
        "cluster's admission would refuse"]
    assert run.generated == {"Deployment"}
