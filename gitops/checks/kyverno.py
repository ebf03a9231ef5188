"""The repository's own Kyverno policies judge what the export is about to write, with the Kyverno CLI (opt-in: the
drift check runs it when `kyverno` is on PATH; README "The repository's Kyverno policies in the drift check").

Policies: every `kyverno.io` ClusterPolicy or Policy in the repository's YAML files, wired into a Flux tier or not yet.
Each stack's objects are judged as its cluster would admit them: namespace labels (what a `namespaceSelector` reads)
come from the export's Namespace objects, given to the CLI as values (offline a Namespace labels nothing). Kyverno
v1.19.1, traps pinned by tests/e2e/test_kyverno_agreement.py: `kyverno apply` for policies reading nothing from the
cluster, each object its own explicit file (a missing --resource path after the first is skipped silently) and a
census policy that must count every object once; `kyverno test` with `apiCallResponses` for `context.apiCall` policies
(`apply`'s fake client cannot answer them); "Policies Skipped" or a panic is an error, never a pass."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.safe_yaml import DocumentsError, yaml_documents

KYVERNO_GROUP = "kyverno.io"
POLICY_KINDS = ("ClusterPolicy", "Policy")
RUN_TIMEOUT = 300
MAX_POLICY_FILE = 1 << 20  # a policy file larger than this is not one a person wrote
AUTOGEN_PREFIXES = ("autogen-cronjob-", "autogen-")
# Counts every object the CLI loaded (Audit: it refuses nothing); its name cannot be a repository's (no dots).
CENSUS_NAME = "gpu-platform.census"
CENSUS = {
    "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
    "metadata": {"name": CENSUS_NAME, "annotations": {"pod-policies.kyverno.io/autogen-controllers": "none"}},
    "spec": {"background": False, "rules": [{
        "name": "every-object", "match": {"any": [{"resources": {"kinds": ["*"]}}]},
        "validate": {"failureAction": "Audit", "message": "counted", "pattern": {"metadata": {"name": "?*"}}}}]}}

Ident = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" for cluster-scoped), name


class KyvernoRunError(RuntimeError):
    """The CLI did not judge: it panicked, skipped a policy, printed no report, or left an object out."""


def ident(obj: dict[str, Any]) -> Ident:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")), str(meta.get("namespace") or ""),
            str(meta.get("name", "")))


def shown(i: Ident) -> str:
    return f"{i[1]} {i[2] + '/' if i[2] else ''}{i[3]}"


def base_rule(name: str) -> str:
    """The rule as written on Pod, for the rules Kyverno generated for Pod controllers."""
    for prefix in AUTOGEN_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


@dataclass(frozen=True)
class KyvernoPolicy:
    name: str
    source: str  # where it was read, for the refusal line
    document: dict[str, Any]

    @property
    def reads_the_cluster(self) -> bool:
        rules = (self.document.get("spec") or {}).get("rules") or []
        return any("apiCall" in entry for rule in rules for entry in (rule.get("context") or []))

    @property
    def file_name(self) -> str:
        return f"policy.{self.name}.yaml"

    def enforces(self, rule: str) -> bool:
        """The rule refuses at admission: its own failureAction, else the policy's validationFailureAction, else
        Kyverno's default, Audit (which only reports)."""
        spec = self.document.get("spec") or {}
        found = next((r for r in spec.get("rules") or [] if r.get("name") == rule), {})
        action = (found.get("validate") or {}).get("failureAction") or spec.get("validationFailureAction") or "Audit"
        return str(action).lower() == "enforce"


def is_policy(doc: Any) -> bool:
    return isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith(f"{KYVERNO_GROUP}/") \
        and doc.get("kind") in POLICY_KINDS


def repository_policies(out: Path, skip: frozenset[str] = frozenset()) -> list[KyvernoPolicy]:
    """Every Kyverno policy in the repository's YAML files, by name; never following a link, never leaving OUT,
    skipping hidden folders (.git, the export's work folder) and the repository-relative folders in `skip`. A file
    that does not parse is the repository's lint's business, not this check's: it is passed over."""
    found: dict[str, KyvernoPolicy] = {}
    for folder, dirs, files in os.walk(out):
        rel_folder = Path(folder).relative_to(out).as_posix()
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and (f"{rel_folder}/{d}" if rel_folder != "." else d) not in skip)
        for name in sorted(files):
            path = Path(folder) / name
            if not name.endswith((".yaml", ".yml")) or path.is_symlink() or path.stat().st_size > MAX_POLICY_FILE:
                continue
            try:
                docs = yaml_documents(path.read_bytes())
            except DocumentsError:
                continue
            # a v1 List is taken apart by kustomize, so Flux applies the policies inside one too
            items = [i for d in docs if isinstance(d, dict) and d.get("kind") == "List"
                     and isinstance(d.get("items"), list) for i in d["items"]]
            for doc in [*docs, *items]:
                if is_policy(doc) and str((doc.get("metadata") or {}).get("name", "")):
                    policy = KyvernoPolicy(str(doc["metadata"]["name"]), path.relative_to(out).as_posix(), doc)
                    found.setdefault(policy.name, policy)
    return [found[name] for name in sorted(found)]


@dataclass
class KyvernoRun:
    """What the CLI said: (object, policy, rule) -> pass/fail/skip/error/warn, with the policy's message."""

    verdicts: dict[tuple[Ident, str, str], str] = field(default_factory=dict)
    messages: dict[tuple[Ident, str, str], str] = field(default_factory=dict)
    census: Counter[Ident] = field(default_factory=Counter)
    rows: Counter[tuple[str, str]] = field(default_factory=Counter)  # (policy, rule) -> objects `test` reported
    generated: set[str] = field(default_factory=set)  # the kinds judged by an auto-generated rule

    def record(self, i: Ident, policy: str, rule: str, verdict: str, message: str = "") -> None:
        key = (i, policy, base_rule(rule))
        if key in self.verdicts:
            raise KyvernoRunError(f"two results for {shown(i)}, policy {policy}, rule {key[2]}")
        self.verdicts[key] = verdict
        if message:
            self.messages[key] = message
        if rule != key[2]:
            self.generated.add(i[1])


def stored_namespace(obj: dict[str, Any]) -> dict[str, Any]:
    """A Namespace as the API server keeps it: its labels plus kubernetes.io/metadata.name, which it always sets."""
    meta = obj["metadata"]
    labels = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": meta["name"], "labels": labels}}


def stored_network_policy(obj: dict[str, Any]) -> dict[str, Any]:
    """A NetworkPolicy as the API server stores it and an apiCall reads it back (k8s.io/api networking/v1 types.go,
    pkg/apis/networking/v1/defaults.go): podSelector is a struct, an absent one is the empty selector; matchLabels,
    matchExpressions, ingress, egress and policyTypes are omitempty, so empty ones are not there; policyTypes, when
    absent, default to [Ingress], plus Egress when there are egress rules."""
    obj = copy.deepcopy(obj)
    spec = obj.get("spec") or {}
    spec["podSelector"] = {k: v for k, v in (spec.get("podSelector") or {}).items() if v}
    for key in ("ingress", "egress", "policyTypes"):
        if not spec.get(key):
            spec.pop(key, None)
    spec.setdefault("policyTypes", ["Ingress"] + (["Egress"] if spec.get("egress") else []))
    obj["spec"] = spec
    return obj


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise KyvernoRunError(f"`kyverno {argv[1]}` ran over {RUN_TIMEOUT} s") from None
    if "panic:" in done.stderr + done.stdout:
        raise KyvernoRunError(f"`kyverno {argv[1]}` panicked: {_last_line(done.stderr)}")
    if "Policies Skipped" in done.stdout:
        raise KyvernoRunError(f"`kyverno {argv[1]}` skipped a policy it rejects: {_last_line(done.stdout)}")
    return done


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def run_kyverno(kyverno: Path, policies: list[KyvernoPolicy], objects: list[dict[str, Any]],
                work: Path) -> KyvernoRun:
    """Both routes on one set of objects, judged as one cluster holds them. `work` is an empty folder the caller
    owns (the CLI reads only what is written there)."""
    files = []
    for n, obj in enumerate(objects):
        files.append(f"{n:04d}.yaml")
        (work / files[-1]).write_text(json.dumps(obj))
    for p in policies:
        (work / p.file_name).write_text(json.dumps(p.document))
    (work / "policy.census.yaml").write_text(json.dumps(CENSUS))
    namespaces = [stored_namespace(o) for o in objects if o.get("kind") == "Namespace"]
    (work / "values.yaml").write_text(json.dumps({"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Values",
                                                  "namespaces": namespaces}))
    run = KyvernoRun()
    offline = [p.file_name for p in policies if not p.reads_the_cluster]
    _apply(kyverno, offline, files, work, run)
    online = [p for p in policies if p.reads_the_cluster]
    if online:
        _test(kyverno, online, objects, files, namespaces, work, run)
    missing = set(map(ident, objects)) - set(run.census)
    if missing:
        raise KyvernoRunError(f"Kyverno did not load {len(missing)} of {len(objects)} objects, first "
                              f"{shown(sorted(missing)[0])}")
    return run


def _apply(kyverno: Path, policy_files: list[str], files: list[str], work: Path, run: KyvernoRun) -> None:
    argv = [str(kyverno), "apply", *policy_files, "policy.census.yaml", *[a for f in files for a in ("--resource", f)],
            "--values-file", "values.yaml", "--policy-report", "--output-format", "json", "--remove-color"]
    done = _run(argv, work)
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(reports) != 1:
        raise KyvernoRunError(f"`kyverno apply` printed no policy report (exit {done.returncode}): "
                              f"{_last_line(done.stderr or done.stdout)}")
    for result in reports[0].get("results") or []:
        (res,) = result["resources"]
        i = (res.get("apiVersion", ""), res["kind"], res.get("namespace", ""), res["name"])
        if result["policy"] == CENSUS_NAME:
            run.census[i] += 1
        else:
            run.record(i, result["policy"], result["rule"], result["result"], str(result.get("message") or ""))


_LITERAL_NAMESPACE = re.compile(r"/api/v1/namespaces/[a-z0-9]([-a-z0-9]*[a-z0-9])?")

def _api_responses(objects: list[dict[str, Any]], namespaces: list[dict[str, Any]],
                   policies: Sequence[KyvernoPolicy] = ()) -> list[dict[str, Any]]:
    """The cluster's answers: each Namespace, and each namespace's NetworkPolicies as the API server stores them. A
    namespace a policy names literally and the cluster does not hold is answered as an object with no labels: what a
    rule reading its labels with a default of '' (the 404 of a real API server) gets."""
    in_namespace: dict[str, list[dict[str, Any]]] = {}
    for o in objects:
        ns = (o.get("metadata") or {}).get("namespace")
        if ns:
            in_namespace.setdefault(ns, [])
        if o.get("kind") == "Namespace":
            in_namespace.setdefault(o["metadata"]["name"], [])
    for o in objects:
        if o.get("kind") == "NetworkPolicy":
            in_namespace[o["metadata"]["namespace"]].append(stored_network_policy(o))
    responses = [{"urlPath": f"/api/v1/namespaces/{ns['metadata']['name']}", "method": "GET",
                  "response": {"body": ns}} for ns in namespaces]
    held = {r["urlPath"] for r in responses}
    named = sorted({str(entry["apiCall"].get("urlPath")) for p in policies
                    for rule in p.document.get("spec", {}).get("rules") or [] for entry in rule.get("context") or []
                    if isinstance(entry.get("apiCall"), dict)
                    and _LITERAL_NAMESPACE.fullmatch(str(entry["apiCall"].get("urlPath")))})
    responses += [{"urlPath": path, "method": "GET", "response": {"body": {}}} for path in named if path not in held]
    return responses + [{"urlPath": f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies", "method": "GET",
                         "response": {"body": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicyList",
                                               "metadata": {}, "items": items}}} for ns, items in in_namespace.items()]


def _test(kyverno: Path, online: list[KyvernoPolicy], objects: list[dict[str, Any]], files: list[str],
          namespaces: list[dict[str, Any]], work: Path, run: KyvernoRun) -> None:
    """Each rule declared `pass` without naming resources, so Kyverno reports every object: "Ok" is a pass, "Want
    pass, got X" is X, "Excluded" (no rule matched) a skip."""
    declared = [(p.name, r["name"]) for p in online for r in p.document["spec"]["rules"]]
    test = {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Test", "metadata": {"name": "gpu-platform"},
            "policies": [p.file_name for p in online], "resources": files, "values": {"namespaces": namespaces},
            "apiCallResponses": _api_responses(objects, namespaces, online),
            "results": [{"policy": p, "rule": r, "kind": "Pod", "result": "pass"} for p, r in declared]}
    (work / "kyverno-test.yaml").write_text(json.dumps(test))
    done = _run([str(kyverno), "test", ".", "--output-format", "json", "--remove-color"], work)
    match = re.search(r"^\[\n.*?^\]$", done.stdout, re.M | re.S)
    if not match:
        raise KyvernoRunError(f"`kyverno test` printed no results (exit {done.returncode}): "
                              f"{_last_line(done.stderr or done.stdout)}")
    for row in json.loads(match.group(0)):
        *api, kind, ns, name = row["RESOURCE"].split("/")
        reason = row["REASON"]
        got = re.fullmatch(r"Want pass, got (\w+)", reason)
        verdict = "pass" if reason == "Ok" else "skip" if reason == "Excluded" else got.group(1) if got else reason
        run.record(("/".join(api), kind, ns, name), row["POLICY"], row["RULE"], verdict)
        run.rows[row["POLICY"], base_rule(row["RULE"])] += 1


def refusals(run: KyvernoRun, policies: list[KyvernoPolicy], files: dict[Ident, str]) -> list[str]:
    """One line per object and rule Kyverno refuses (fail or error under a rule that enforces), naming the file the
    export writes, the object, the policy (and where it is) and the rule, in a stable order."""
    by_name = {p.name: p for p in policies}
    lines = []
    for (i, policy, rule), verdict in sorted(run.verdicts.items()):
        if verdict not in ("fail", "error") or (policy in by_name and not by_name[policy].enforces(rule)):
            continue
        message = run.messages.get((i, policy, rule), "")
        source = by_name[policy].source if policy in by_name else "?"
        said = f": {message.strip().rstrip('.')}" if message.strip() else ""
        lines.append(f"{files.get(i, '?')}: {shown(i)}: refused by Kyverno policy {policy} ({source}), "
                     f"rule {rule} ({verdict}){said}; hint: change the stack config so the object passes, or the "
                     "policy if it is wrong; the export writes nothing the cluster's admission would refuse")
    return lines


def kyverno_on_path() -> Path | None:
    found = shutil.which("kyverno")
    return Path(found) if found else None
