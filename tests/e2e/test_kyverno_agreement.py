"""Kyverno judges the mirror (issue 31). `policy/rules.py` re-implements the repository's four app-scoped Kyverno
policies and the GPU plugin's non-choices in Python; here the Kyverno CLI (`make tools`: build/tools/bin/kyverno)
applies the real policies to the same objects, and for every object and every rule of the mirror Kyverno's verdict
(pass, fail or skip) and the mirror's must be the same. The Kyverno side is the repository's own four policies
(examples/home-network-k3s/repo/platform/kyverno/) plus `policy/kyverno/`, a Kyverno version of every rule
(or part of one) those four do not express. The objects are the corpus (tests/fixtures/kyverno-corpus/, one object a
file, the name says what it is) and the export of each shipped stack, each judged as its own cluster. Run by `make e2e`.

How Kyverno is run, and the CLI's offline traps (v1.19.1; the last test pins those of `apply`):
- `kyverno apply POLICIES --resource FILE... --values-file V --policy-report --output-format json`, every object as
  its own explicit file (a missing path after the first is skipped without a word; a directory as the first
  --resource reads its top level only and drops the other --resource paths), for the policies that read nothing from
  the cluster. The values file needs its apiVersion and kind: without them it is refused as a "deprecated schema".
- A namespace's labels reach a `namespaceSelector` only through the values file (`namespaces:`, the Namespace objects
  as the API server stores them). Offline, a Namespace object among the resources does NOT supply them, and a Pod
  whose namespace is unknown is not refused and not an error either: the app-scoped rules simply produce no result, so
  a missing label looks like "not an app namespace". Hence the census: one extra policy matches every kind and must
  report every object once, and every object the mirror holds in scope must get a verdict from Kyverno.
- A policy the CLI rejects is reported under "Policies Skipped" on stdout and does not run: refused here.
- The policies that read the cluster (`context.apiCall`: a namespace's labels, its NetworkPolicies) cannot run under
  `apply` offline: its fake client misparses `/api/v1/namespaces/NAME` ("failed to parse path") and panics listing
  NetworkPolicies when none is among the resources. They run under `kyverno test`, whose `apiCallResponses` answer
  each call with what the API server would return: the Namespace, and the namespace's NetworkPolicies as stored
  (podSelector defaulted to {}, empty fields dropped, policyTypes defaulted). Each result is declared `pass` without
  naming resources, so Kyverno reports every object: "Ok" is a pass, "Want pass, got X" is X, "Excluded" (no rule
  matched) a skip.
- Auto-generation: a rule on Pod is extended offline to the Pod templates of DaemonSet, Deployment, Job, StatefulSet,
  ReplicaSet, ReplicationController (`autogen-<rule>`) and CronJob (`autogen-cronjob-<rule>`); the corpus has each.

The mirror's verdict: fail when `evaluate` reports the object (for the rules that report the app namespace rather than
the workload, the labels and the default deny, when it reports the workload's namespace: the Pods Kyverno refuses
there); pass when the object is in the rule's scope (what rules.py walks, stated per rule in MIRROR_TO_KYVERNO); skip
otherwise. A disagreement is fixed in the mirror or in policy/kyverno/ and its case stays in the corpus; the ones
found so far are listed in the corpus's README. The table, and the tests that hold it to both sets of policies
without the CLI, are tests/policy/test_kyverno_twins.py (`make test`)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import FIXTURES, ROOT, cluster_documents, export, make_project, stack_text
from gitops.checks import kyverno as engine
from gitops.checks.kyverno import Ident, KyvernoPolicy, KyvernoRun, ident, shown
from model.config import DRA_DRIVER_IMAGE
from model.labels import APP_NAMESPACE_LABEL
from policy.rules import (
    PLUGIN_IMAGE,
    Resource,
    Settings,
    app_namespaces,
    asks_admin_access,
    containers,
    evaluate,
    pod_spec,
)
from tests.policy.test_kyverno_twins import MIRROR_TO_KYVERNO, REPOSITORY_POLICIES, load_policies

pytestmark = pytest.mark.e2e

KYVERNO = ROOT / "build" / "tools" / "bin" / "kyverno"
CORPUS = FIXTURES / "kyverno-corpus"
STACKS = ("dev", "prod")
TIMEOUT = 300


@pytest.fixture(autouse=True, scope="module")
def _kyverno_is_built() -> None:
    """A missing Kyverno CLI fails these tests (never skips them): `make e2e` builds it first."""
    if not KYVERNO.is_file():
        pytest.fail(f"{KYVERNO}: not built; hint: run `make tools` (make e2e does)")


# --- objects ----------------------------------------------------------------------------------------------------------

@dataclass
class Batch:
    """Objects judged together, as one cluster holds them (a rule of the mirror sees them all at once)."""

    name: str
    objects: list[dict[str, Any]]
    sources: dict[Ident, str] = field(default_factory=dict)


def corpus_batch() -> Batch:
    batch = Batch("corpus", [])
    for path in sorted(CORPUS.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(docs) == 1, f"{path.name}: one object a file, found {len(docs)}"
        batch.objects.append(docs[0])
        batch.sources[ident(docs[0])] = path.name
    return batch


# prod on the DRA route (its first step: Intel's driver beside the plugin), judged as its own cluster
DRA_ROUTE = (f"  gpu-platform:gpu:\n    route: dra\n    dra:\n      image: {DRA_DRIVER_IMAGE}\n"
             "      imageDigest: sha256:" + "ab" * 32 + "\n")


# prod at the DRA route's step 3, Plex sharing the iGPU through an adminAccess claim in its named, labelled namespace
ADMIN_CLAIMS = ("      stage: apps-on-claims\n      adminAccessNamespaces: [plex]\n",
                "      draAllocation: admin-access\n")


def export_batch(out: Path, stack: str, dra: bool = False, claims: bool = False) -> Batch:
    """Every object the export of one stack writes (kustomize's own kustomization.yaml is no cluster object)."""
    project = None
    if dra:
        text = stack_text(stack).replace("config:\n", "config:\n" + DRA_ROUTE + (ADMIN_CLAIMS[0] if claims else ""), 1)
        gpu = "    hardware:\n      gpu: intel-quicksync\n"
        text = text.replace(gpu, gpu + ADMIN_CLAIMS[1]) if claims else text
        nodes = "".join(f"  k3s-{stack}-{n}: 1\n" for n in (1, 2, 3))
        evidence = {f"dra/{stack}": f"stack: {stack}\ndriver: gpu.intel.com\nkernelDriver: i915\nnodes:\n{nodes}"}
        project = make_project(out.parent / f"project-{stack}-dra{'-claims' * claims}", {stack: text},
                               evidence if claims else None)
    assert export(out, stack, project=project) == 0
    batch = Batch(f"export {stack}{' (dra route' + (', step 3)' if claims else ')') if dra else ''}", [])
    for path, doc in cluster_documents(out):
        batch.objects.append(doc)
        batch.sources[ident(doc)] = str(path.relative_to(out))
    return batch


def stray_plugin_batch(out: Path) -> Batch:
    """prod at the DRA route's step 5 (the plugin removed, the driver's namespace saying so) with the corpus's GPU
    plugin, namespace and baseline beside it, as a repository that still installs one would hold them."""
    nodes = "".join(f"  k3s-prod-{n}: 1\n" for n in (1, 2, 3))
    text = stack_text("prod").replace("config:\n", "config:\n" + DRA_ROUTE + "      stage: plugin-removed\n", 1)
    project = make_project(out.parent / "project-prod-dra-removed", {"prod": text}, {
        "dra/prod": f"stack: prod\ndriver: gpu.intel.com\nkernelDriver: i915\nnodes:\n{nodes}",
        "dra/claims/prod": "stack: prod\ndriver: gpu.intel.com\napps:\n  plex: k3s-prod-1\n"})
    assert export(out, "prod", project=project) == 0
    batch = Batch("export prod (dra route, step 5) and a stray plugin", [])
    for path, doc in cluster_documents(out):
        batch.objects.append(doc)
        batch.sources[ident(doc)] = str(path.relative_to(out))
    assert not [o for o in batch.objects if "intel-gpu-plugin" in json.dumps(o.get("spec", {}))]
    for name in ("namespace.gpu-plugin.yaml", "networkpolicy.gpu-plugin.default-deny.yaml",
                 "daemonset.gpu-plugin.plugin-good.yaml"):
        (doc,) = [d for d in yaml.safe_load_all((CORPUS / name).read_text()) if d is not None]
        batch.objects.append(doc)
        batch.sources[ident(doc)] = f"kyverno-corpus/{name}"
    return batch


def type_token(obj: dict[str, Any]) -> str:
    """The Pulumi type token the mirror sees for an object, e.g. kubernetes:apps/v1:Deployment."""
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{obj.get('kind')}"


# --- the mirror's verdicts --------------------------------------------------------------------------------------------

def _is_plugin_workload(r: Resource) -> bool:
    spec = pod_spec(r)
    return spec is not None and any(PLUGIN_IMAGE in str(c.get("image", "")) for c in containers(spec))


def mirror_verdicts(batch: Batch) -> dict[tuple[Ident, str], str]:
    resources = [Resource(type_token(o), shown(ident(o)), f"urn:{shown(ident(o))}", o) for o in batch.objects]
    apps = app_namespaces(resources)
    scopes: dict[str, Callable[[Resource], bool]] = {
        "workload": lambda r: pod_spec(r) is not None,
        "app": lambda r: pod_spec(r) is not None and r.namespace in apps,
        "plugin": _is_plugin_workload,
        "app-or-plugin": lambda r: (pod_spec(r) is not None and r.namespace in apps) or _is_plugin_workload(r),
        "admin-claim": asks_admin_access,
    }
    reported: dict[str, set[Ident]] = {name: set() for name in MIRROR_TO_KYVERNO}
    for v in evaluate(resources, Settings()):
        reported[v.policy].add(ident(dict(v.resource.props)))
    verdicts = {}
    for rule, counterpart in MIRROR_TO_KYVERNO.items():
        in_scope = scopes[counterpart.scope]
        for r in resources:
            i = ident(dict(r.props))
            if counterpart.on_namespace:
                failed = in_scope(r) and ("v1", "Namespace", "", r.namespace or "") in reported[rule]
            else:
                failed = i in reported[rule]
                assert not failed or in_scope(r), f"{rule} reports {shown(i)}, outside the scope the table gives it"
            verdicts[i, rule] = "fail" if failed else "pass" if in_scope(r) else "skip"
        if counterpart.on_namespace:
            assert all(i[1] == "Namespace" for i in reported[rule]), f"{rule} reports a non-namespace"
    return verdicts


# --- Kyverno's verdicts -----------------------------------------------------------------------------------------------

def run_kyverno(batch: Batch, work: Path) -> KyvernoRun:
    """The product's engine (gitops/checks/kyverno.py) on one batch, with both sets of policies."""
    work.mkdir(parents=True)
    policies = [KyvernoPolicy(name, str(doc["_path"]), {k: v for k, v in doc.items() if k != "_path"})
                for name, doc in sorted(load_policies().items())]
    return engine.run_kyverno(KYVERNO, policies, batch.objects, work)


def combined(verdicts: Iterable[str]) -> str:
    """The mirror's one verdict from its Kyverno rules': any fail fails; else any pass passes; else all skipped."""
    seen = set(verdicts) - {"skip"}
    odd = seen - {"pass", "fail"}
    return f"error ({', '.join(sorted(odd))})" if odd else "fail" if "fail" in seen else "pass" if seen else "skip"


# --- judging ----------------------------------------------------------------------------------------------------------

@dataclass
class Judged:
    batch: Batch
    run: KyvernoRun
    mirror: dict[tuple[Ident, str], str]

    def kyverno(self, i: Ident, rule: str) -> str:
        return combined(self.run.verdicts.get((i, p, r), "skip") for p, r in MIRROR_TO_KYVERNO[rule].kyverno)

    def parts(self, i: Ident, rule: str) -> str:
        return ", ".join(f"{p}/{r}: {self.run.verdicts.get((i, p, r), 'no result')}"
                         for p, r in MIRROR_TO_KYVERNO[rule].kyverno)


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> list[Judged]:
    root = tmp_path_factory.mktemp("kyverno-agreement")
    batches = [corpus_batch(), *(export_batch(root / f"out-{s}", s) for s in STACKS),
               export_batch(root / "out-prod-dra", "prod", dra=True),
               export_batch(root / "out-prod-dra-claims", "prod", dra=True, claims=True),
               stray_plugin_batch(root / "out-prod-dra-removed")]
    out = []
    for n, batch in enumerate(batches):
        idents = [ident(o) for o in batch.objects]
        assert len(set(idents)) == len(idents), f"{batch.name}: two objects with the same kind, namespace and name"
        out.append(Judged(batch, run_kyverno(batch, root / f"run-{n}"), mirror_verdicts(batch)))
    return out


def test_kyverno_evaluated_every_object(judged):
    """The silent-skip trap: the census counts each object once in every batch, and `kyverno test` reports every
    object for every rule it declares."""
    for j in judged:
        idents = Counter(ident(o) for o in j.batch.objects)
        assert j.run.census == idents, (f"{j.batch.name}: Kyverno loaded {sum(j.run.census.values())} objects of "
                                        f"{len(idents)}; missing: {sorted(set(idents) - set(j.run.census))[:5]}")
        assert j.run.rows and set(j.run.rows.values()) == {len(idents)}, f"{j.batch.name}: {j.run.rows}"


def test_the_cli_generates_the_pod_rules_for_every_pod_controller_offline(judged):
    controllers = {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "ReplicationController", "Job", "CronJob"}
    assert judged[0].run.generated == controllers


def test_no_rule_is_vacuous(judged):
    """Across the batches each rule of the mirror, and each Kyverno rule it maps to, fails at least one object and
    passes at least one."""
    seen: dict[str, set[str]] = {}
    for j in judged:
        for i in {ident(o) for o in j.batch.objects}:
            for rule, counterpart in MIRROR_TO_KYVERNO.items():
                seen.setdefault(rule, set()).add(j.kyverno(i, rule))
                for p, r in counterpart.kyverno:
                    seen.setdefault(f"{p}/{r}", set()).add(j.run.verdicts.get((i, p, r), "skip"))
    vacuous = {name: sorted(v) for name, v in seen.items() if not {"pass", "fail"} <= v}
    assert not vacuous, f"rules without both a pass and a fail: {vacuous}"


def test_kyverno_and_the_mirror_agree_on_every_object_and_rule(judged, record_property):
    objects = sum(len(j.batch.objects) for j in judged)
    disagreements = []
    for j in judged:
        for o in j.batch.objects:
            i = ident(o)
            for rule in MIRROR_TO_KYVERNO:
                kyverno, mirror = j.kyverno(i, rule), j.mirror[i, rule]
                if kyverno != mirror:
                    disagreements.append(
                        f"{j.batch.name}: {shown(i)} ({j.batch.sources[i]}), rule {rule}: Kyverno {kyverno} "
                        f"({j.parts(i, rule)}), mirror {mirror}")
    record_property("figures", f"kyverno: {objects} objects x {len(MIRROR_TO_KYVERNO)} rules, "
                               f"{len(disagreements)} disagreements")
    assert not disagreements, (f"first disagreement of {len(disagreements)}: {disagreements[0]}"
                               + "".join(f"\n  then: {d}" for d in disagreements[1:200]))


def test_the_export_is_judged_with_its_app_namespace_labelled(judged):
    """The export's own objects are in the run with the labels they carry: Plex's namespace is an app namespace
    (every app rule judges its Deployment) and the plugin's is not."""
    for j in judged[1:]:
        labels = {o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(APP_NAMESPACE_LABEL)
                  for o in j.batch.objects if o.get("kind") == "Namespace"}
        assert "true" in labels.values() and "false" in labels.values(), labels
        for o in j.batch.objects:
            if o.get("kind") in ("Deployment", "DaemonSet"):
                app = labels.get(o["metadata"]["namespace"]) == "true"
                verdict = j.kyverno(ident(o), "restrict-host-namespaces")
                assert verdict == ("pass" if app else "skip"), (shown(ident(o)), verdict)


# --- the CLI's offline behaviour this test relies on ------------------------------------------------------------------

APP_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "media"},
           "spec": {"containers": [{"name": "c", "image": "nginx:1", "securityContext": {"privileged": True}}]}}
MEDIA = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "media", "labels": {"app-namespace": "true"}}}
VALUES = {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Values", "namespaces": [MEDIA]}


def _apply(tmp_path: Path, policy: Path, *resources: str, values: dict | None = None) -> tuple[int, list[str]]:
    """Exit code, and each result as "<object> <rule>: <result>"."""
    argv = [str(KYVERNO), "apply", str(policy), *[a for r in resources for a in ("--resource", r)],
            "--policy-report", "--output-format", "json", "--remove-color"]
    if values is not None:
        (tmp_path / "values.yaml").write_text(json.dumps(values))
        argv += ["--values-file", "values.yaml"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, sorted(f"{r['resources'][0]['name']} {r['rule']}: {r['result']}"
                                   for rep in reports for r in rep.get("results") or [])


def test_the_cli_offline_traps_this_test_guards_against(tmp_path):
    """Kyverno v1.19.1 offline, as this test found it: a missing --resource after the first is skipped without a word
    (the first one missing is an error); a directory as the first --resource is read one level deep and the other
    --resource paths are dropped, a directory after the first is dropped; without a values file a Namespace among the
    resources does not label its namespace, so the privileged Pod gets no result at all and the run exits 0; a values
    file without its apiVersion and kind is refused ("deprecated schema"), with no report; the fake client cannot
    answer the namespace lookup the repository's label policies make, and panics listing NetworkPolicies when none
    is among the resources."""
    def pod(path: str, name: str) -> str:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(json.dumps({**APP_POD, "metadata": {**APP_POD["metadata"], "name": name}}))
        return path

    p, q, r = pod("p.yaml", "p"), pod("dir/q.yaml", "q"), pod("dir/deeper/r.yaml", "r")
    (tmp_path / "ns.yaml").write_text(json.dumps(MEDIA))
    host = REPOSITORY_POLICIES / "restrict-host-namespaces.yaml"

    def judged(*names: str) -> list[str]:
        return sorted(f"{n} {rule}" for n in names for rule in ("host-namespaces: pass", "privileged-containers: fail"))

    assert _apply(tmp_path, host, p, q, r, values=VALUES) == (1, judged("p", "q", "r"))
    assert _apply(tmp_path, host, p, "no-such-file.yaml", values=VALUES) == (1, judged("p"))
    assert _apply(tmp_path, host, "no-such-file.yaml", p, values=VALUES) == (1, [])
    assert _apply(tmp_path, host, "dir", p, values=VALUES) == (1, judged("q"))
    assert _apply(tmp_path, host, p, "dir", values=VALUES) == (1, judged("p"))
    assert _apply(tmp_path, host, "ns.yaml", p) == (0, [])
    assert _apply(tmp_path, host, p, values={"namespaces": [MEDIA]}) == (1, [])
    assert _apply(tmp_path, REPOSITORY_POLICIES / "require-auth-mode-label.yaml", p, values=VALUES) == (
        1, ["p namespace-has-auth-mode: error"])
    (tmp_path / "values.yaml").write_text(json.dumps(VALUES))
    baseline = subprocess.run([str(KYVERNO), "apply", str(REPOSITORY_POLICIES / "require-default-deny-baseline.yaml"),
                               "--resource", p, "--values-file", "values.yaml"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert baseline.returncode != 0 and "panic:" in baseline.stderr, baseline.stderr[-2000:]
