"""gitops/checks/validate.py: every object of a tree checked before anything is written, on real program runs with
one object changed: the strict Kubernetes schemas, Flux Kustomizations naming the field, postBuild variables
cluster-vars must define, the names cluster-vars may hold, and no Secret or Pulumi secret value."""

from __future__ import annotations

import dataclasses

import pytest

from builders import capture_tree, mutated
from conftest import export, make_project, stack_text
from gitops.checks.validate import ExportValidationError, validate_tree

KS = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
DS = "kubernetes:apps/v1:DaemonSet"
PLUGIN_DS = ("components/prod/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml "
             "(DaemonSet intel-gpu-plugin/intel-gpu-plugin)")
PLUGIN_HINT = ("hint: the program generates this object: fix it in its component (IntelGpuPlugin intel-gpu-plugin, "
               "components/intel_gpu_plugin.py), then run the export again")
PLUGIN_KS = "clusters/prod/gpu-platform/ks.intel-gpu-plugin.yaml (Kustomization flux-system/intel-gpu-plugin)"
FLUX_HINT = ("hint: the program generates this object: fix it in its component (FluxDeliveryGraph flux, "
             "components/flux.py), then run the export again")


def refused(capture) -> list[str]:
    with pytest.raises(ExportValidationError) as caught:
        validate_tree(capture_tree(capture), lint=False)  # lint is about the emitter: test_export_trust.py tests it
    return caught.value.lines


def problems(tree) -> list[str]:
    """Every line validation (lint included) refuses the tree with; empty when it passes."""
    try:
        validate_tree(tree)
    except ExportValidationError as exc:
        return exc.lines
    return []


# --- the schemas and the substitutions ---------------------------------------------------------------------------

def test_the_shipped_stacks_validate(captures):
    assert {"dev", "prod"} <= set(captures)
    trees = {stack: capture_tree(capture) for stack, capture in captures.items()}
    assert all(tree.objects for tree in trees.values())
    assert {stack: problems(tree) for stack, tree in trees.items()} == {stack: [] for stack in trees}


def test_a_kubernetes_object_with_an_unknown_field_fails_the_strict_schema(captures):
    bad = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset", lambda m: m["spec"].update(replicas=3))
    assert refused(bad) == [
        f"{PLUGIN_DS}: spec: Additional properties are not allowed ('replicas' was unexpected) (Kubernetes 1.36.0 "
        f"strict schema); {PLUGIN_HINT}"]


def test_a_kubernetes_object_missing_a_required_field_fails(captures):
    bad = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset", lambda m: m["spec"].pop("selector"))
    assert refused(bad) == [
        f"{PLUGIN_DS}: spec: 'selector' is a required property (Kubernetes 1.36.0 strict schema); {PLUGIN_HINT}"]


@pytest.mark.parametrize("mutate,expected", [
    (lambda m: m.update(apiVersion="kustomize.toolkit.fluxcd.io/v1beta2"),
     f"{PLUGIN_KS}: apiVersion: 'kustomize.toolkit.fluxcd.io/v1beta2': must be kustomize.toolkit.fluxcd.io/v1"),
    (lambda m: m["metadata"].pop("name"),
     "clusters/prod/gpu-platform/ks.flux-intel-gpu-plugin.yaml (Kustomization flux-system/): metadata.name: missing: "
     "every Kustomization needs a name"),
    (lambda m: m["spec"].update(wiat=True),
     f"{PLUGIN_KS}: spec.wiat: unknown field; the Kustomization v1 API has no such field"),
    (lambda m: m["spec"]["sourceRef"].update(nmae="x"),
     f"{PLUGIN_KS}: spec.sourceRef.nmae: unknown field; the Kustomization v1 API has no such field"),
    (lambda m: m["spec"].update(interval="1d"),
     f"{PLUGIN_KS}: spec.interval: '1d' does not match '^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$' (Flux Kustomization v1 "
     "schema)"),
    (lambda m: m["spec"].pop("sourceRef"),
     f"{PLUGIN_KS}: spec: 'sourceRef' is a required property (Flux Kustomization v1 schema)"),
])
def test_a_bad_flux_kustomization_is_refused_naming_the_field(captures, mutate, expected):
    bad = mutated(captures["prod"], KS, "flux-intel-gpu-plugin", mutate)
    assert refused(bad) == [f"{expected}; {FLUX_HINT}"]


def test_an_undefined_substitution_variable_is_refused(captures):
    bad = mutated(captures["prod"], DS, "intel-gpu-plugin-daemonset",
                  lambda m: m["metadata"].setdefault("annotations", {}).update(owner="${UNDEFINED_OWNER}"))
    assert refused(bad) == [
        "components/prod/intel-gpu-plugin/daemonset.intel-gpu-plugin.yaml:8: ${UNDEFINED_OWNER}: not defined in "
        "cluster-vars (defined: CLUSTER_DOMAIN, CLUSTER_NAME, TIMEZONE); Flux's strict substitution would fail the "
        "reconcile; hint: add it to flux.clusterVars"]


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
    # the stack file's flux.clusterVars refuses such a key before the program runs (model/config/): a key only the
    # generated ConfigMap holds is the program's to fix
    assert refused(bad) == [
        "clusters/prod/gpu-platform/configmap.cluster-vars.yaml (ConfigMap flux-system/cluster-vars): data.9LIVES: not "
        f"a Flux variable name (^[_[:alpha:]][_[:alpha:][:digit:]]*$); {FLUX_HINT}"]


def test_export_refuses_and_writes_nothing_when_a_cluster_var_references_an_undefined_var(tmp_path, capsys):
    text = stack_text("dev").replace("      TIMEZONE: Europe/Berlin",
                                     "      TIMEZONE: Europe/Berlin\n      GREETING: ${NOPE}")
    project = make_project(tmp_path / "p", {"dev": text})
    out = tmp_path / "out"
    assert export(out, "dev", project=project) == 2
    assert capsys.readouterr().err == (
        "error: Pulumi.dev.yaml: gpu-platform:flux.clusterVars.GREETING: ${NOPE}: not defined in cluster-vars "
        "(defined: CLUSTER_DOMAIN, CLUSTER_NAME, GREETING, TIMEZONE); Flux's strict substitution would fail the "
        "reconcile; hint: add it to flux.clusterVars\nnothing was written\n")
    assert list(out.iterdir()) == []


# --- secrets ------------------------------------------------------------------------------------------------------

def test_a_secret_object_is_refused(captures):
    def to_secret(m):
        m.clear()
        m.update(apiVersion="v1", kind="Secret", metadata={"name": "plex-claim-token", "namespace": "plex"},
                 stringData={"token": "claim-abc"})
    bad = mutated(captures["prod"], "kubernetes:core/v1:Service", "plex-service", to_secret)
    lines = refused(bad)
    assert lines == [
        "components/prod/plex/secret.plex-claim-token.yaml (Secret plex/plex-claim-token): kind: Secret objects are "
        "never exported; hint: keep the Secret SOPS-encrypted in the GitOps repo and reference it by name"]
    assert not any("claim-abc" in line for line in lines), "the refusal must not print the secret's value"


def test_a_value_that_came_from_a_pulumi_secret_is_refused(captures):
    regs = [dataclasses.replace(r, secret_paths=("spec.template.spec.containers[0].env[4].value",))
            if r.name == "plex-deployment" else r for r in captures["prod"].registrations]
    assert refused(dataclasses.replace(captures["prod"], registrations=regs)) == [
        "components/prod/plex/deployment.plex.yaml (Deployment plex/plex): spec.template.spec.containers[0].env[4]."
        "value: holds a Pulumi secret value, which would land in plaintext; hint: reference a Secret by name instead"]
