"""`pulumi preview` and `pulumi up` exactly as a user types them (issue 45): the plain Pulumi CLI, which starts the
Python language host (`pulumi-language-python`), which runs `__main__.py` in the virtualenv Pulumi.yaml names and
runs `policy/` as a Python policy pack. No Automation API on this path.

Each run happens in a copy of the project root as a user has it: Pulumi.yaml, __main__.py, the flux-bootstrap
example's stack files (dev and prod, render mode; prod in cluster mode against the e2e API server too), `policy/`
with its own `.venv`, and `.venv`. The copy's `.venv`
and `policy/.venv` link to this checkout's (`make e2e` builds both): the project is installed in `.venv` editable, so
`components/` and `model/` import from this checkout, as they would from a user's clone. The environment is a user's
with `pulumi login --local`: build/tools/bin first on PATH, an empty PULUMI_CONFIG_PASSPHRASE, no update check,
HOME and PULUMI_HOME of its own, no KUBECONFIG (only the cluster-mode commands get one: the test control plane's),
offline.

The plan through the host is compared step for step with the Automation API's (gitops/engine/pulumi_cli.py
`preview`): the same URNs, operations, types, parents, dependencies, providers and inputs. Skipped with a reason where
the CLI or the host is not built (a clone without ../shared: a CLI from pulumi.com brings its own host, and
`PULUMI=/path/to/pulumi make e2e` runs these tests with it). Run by `make e2e` (K=plain), never by `make test`.
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane
from test_export_on_a_cluster import (
    PROD_NODES,
    RENDER_MODE,
    cluster,  # noqa: F401 (the cluster tests' fixture: this module starts its own control plane, stopped by pid)
    exported_objects,
    lb_ipam,
    volume,
)

from conftest import ROOT, STACKS, stack_text
from gitops.engine.pulumi_cli import default_pulumi

pytestmark = pytest.mark.e2e

TOOLS_BIN = ROOT / "build" / "tools" / "bin"
HOST = "pulumi-language-python"
# Every copy of a session, under build/ and emptied when the module starts (the engine tests' build/e2e is theirs).
PLAIN = ROOT / "build" / "e2e-plain"
PACK = "gpu-platform-policies@v0.0.1 (local: policy)"  # how the CLI names the pack it ran
TIMEOUT = 900


def cli_path() -> str:
    """PATH as a user has it after `make tools`: the CLI's folder (PULUMI's, when set) and build/tools/bin first."""
    return os.pathsep.join(dict.fromkeys([str(default_pulumi().parent), str(TOOLS_BIN), os.environ.get("PATH", "")]))


def _virtualenv(project_file: Path) -> str:
    """The virtualenv a Pulumi.yaml or PulumiPolicy.yaml names for the Python host (runtime.options.virtualenv)."""
    return yaml.safe_load(project_file.read_text())["runtime"]["options"]["virtualenv"]


@pytest.fixture(scope="module")
def plain_tools() -> None:
    """The CLI, the host on PATH, the provider and both venvs; a missing CLI or host skips (with the reason), a missing
    venv fails (make e2e builds them)."""
    pulumi = default_pulumi()
    if not pulumi.is_file():
        pytest.skip(f"{pulumi}: no Pulumi CLI; hint: run `make tools`, or PULUMI=/path/to/pulumi make e2e")
    if shutil.which(HOST, path=cli_path()) is None:
        pytest.skip(f"{HOST}: not on PATH beside {pulumi}; `make tools` builds it only where ../shared/reference/"
                    "pulumi-language-python exists, and a Pulumi CLI from pulumi.com brings its own")
    if shutil.which("pulumi-resource-kubernetes", path=cli_path()) is None:
        pytest.fail("pulumi-resource-kubernetes: not built; hint: run `make tools` (make e2e does)")
    for venv in (ROOT / _virtualenv(ROOT / "Pulumi.yaml"), ROOT / "policy" / _virtualenv(ROOT / "policy" /
                                                                                        "PulumiPolicy.yaml")):
        if not (venv / "bin" / "python").is_file():
            pytest.fail(f"{venv}: no virtualenv; hint: make .venv/.installed policy/.venv/.installed (make e2e does)")


def copy_project(directory: Path, stacks: dict[str, str], main: str | None = None) -> Path:
    """A copy of the project root at `directory`: Pulumi.yaml, __main__.py (or `main`), Pulumi.<stack>.yaml for each
    of `stacks`, policy/ (without its venv) and model/ (which the policy rules import), and the two venvs Pulumi.yaml
    and PulumiPolicy.yaml name, linked."""
    directory.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", directory / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", directory / "__main__.py")
    if main is not None:
        shutil.copy(ROOT / "__main__.py", directory / "program.py")
        (directory / "__main__.py").write_text(main)
    for stack, text in stacks.items():
        (directory / f"Pulumi.{stack}.yaml").write_text(text)
    venv = _virtualenv(ROOT / "Pulumi.yaml")
    (directory / venv).symlink_to(ROOT / venv)
    pack_venv = _virtualenv(ROOT / "policy" / "PulumiPolicy.yaml")
    shutil.copytree(ROOT / "policy", directory / "policy", ignore=shutil.ignore_patterns(pack_venv, "__pycache__"))
    (directory / "policy" / pack_venv).symlink_to(ROOT / "policy" / pack_venv)
    # The pack's venv holds pulumi-policy only: the rules import model.labels through the project root, which
    # policy/__main__.py puts on sys.path, as in a user's clone.
    shutil.copytree(ROOT / "model", directory / "model", ignore=shutil.ignore_patterns("__pycache__"))
    return directory


def user_env(home: Path) -> dict[str, str]:
    """The environment of a user who ran `pulumi login --local`, with a HOME and PULUMI_HOME of its own."""
    dropped = {"KUBECONFIG", "PULUMI_BACKEND_URL", "PULUMI_ACCESS_TOKEN", "PULUMI_HOME", "VIRTUAL_ENV", "PYTHONPATH",
               "PULUMI_CONFIG_PASSPHRASE_FILE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("PYTEST_")}
    (home / "pulumi-home").mkdir(parents=True, exist_ok=True)
    env.update(PATH=cli_path(), HOME=str(home), PULUMI_HOME=str(home / "pulumi-home"), PULUMI_CONFIG_PASSPHRASE="",
               PULUMI_SKIP_UPDATE_CHECK="1")
    if not env.get("USER"):  # the CLI is built without cgo: Go names the user from /etc/passwd, else $USER
        try:
            env["USER"] = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            env["USER"] = f"uid-{os.getuid()}"
    return env


@dataclass
class User:
    """One user's shell: a project copy, a HOME, and every command typed with what it said."""

    project: Path
    home: Path
    said: list[tuple[str, subprocess.CompletedProcess[str]]] = field(default_factory=list)

    def pulumi(self, *args: str, ok: bool = True, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`pulumi ARGS` in the project; `kubeconfig`: KUBECONFIG for this one command (the user's shell has none)."""
        env = user_env(self.home)
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        done = subprocess.run([str(default_pulumi()), *args], cwd=self.project, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        typed = " ".join([*([f"KUBECONFIG={kubeconfig}"] if kubeconfig else []), "pulumi", *args])
        self.said.append((typed, done))
        if ok and done.returncode != 0:
            # which resource failed and why: the CLI's error lines, ahead of its long outputs and summary
            diagnostics = "\n".join(line for line in done.stdout.splitlines() if "error" in line)[:4000]
            raise AssertionError(f"{typed}: exit {done.returncode}\n{diagnostics}\n{done.stdout[-4000:]}\n"
                                 f"{done.stderr[-4000:]}")
        return done


def start(directory: Path, stacks: dict[str, str], main: str | None = None) -> User:
    """A fresh copy, `pulumi login` to a file backend of its own and `pulumi stack init` for each stack."""
    user = User(copy_project(directory / "project", stacks, main), directory / "home")
    # `pulumi login --local` with the state in this folder (`--local` is file://~, where ~ is the passwd entry's home
    # for this CLI, not $HOME)
    backend = directory / "backend"
    backend.mkdir(parents=True)
    user.pulumi("login", backend.as_uri())
    for stack in stacks:
        user.pulumi("stack", "init", stack)
    return user


# What the Automation API's plan is: gitops/engine/pulumi_cli.py `preview` (the CLI with the SDK's in-process host),
# with the SDK's own `json=True` added, so the CLI prints the same `--json` plan the plain command prints. In a
# process of its own (the inline program must not share the pytest process's SDK state).
AUTOMATION_PLAN = '''
import json, sys
from pathlib import Path

import pulumi.automation as auto

from gitops.engine import pulumi_cli

_preview = auto.Stack.preview
auto.Stack.preview = lambda self, **kw: _preview(self, **{**kw, "json": True})
stack, root, source, out = sys.argv[1:]
run = pulumi_cli.preview(pulumi_cli.make_site(stack, Path(root), Path(source)), diff=False)
plan = json.loads(run.stdout)
# the event stream the module collects is the same run's: the same steps as the JSON
assert sorted((s.op, s.urn) for s in run.steps) == sorted((s["op"], s["urn"]) for s in plan["steps"])
Path(out).write_text(json.dumps(plan))
'''


def automation_plan(stack: str, directory: Path) -> dict[str, Any]:
    source = directory / "source"
    source.mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, source / name)
    (source / f"Pulumi.{stack}.yaml").write_text(stack_text(stack))
    out = directory / "plan.json"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    done = subprocess.run([sys.executable, "-c", AUTOMATION_PLAN, stack, str(directory / "site"), str(source),
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode != 0:
        raise AssertionError(f"Automation API preview --stack {stack}: exit {done.returncode}\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return json.loads(out.read_text())


# --- the step-for-step comparison ------------------------------------------------------------------------------------

# What each step is compared on: the step's own operation and provider, and the planned state's type, parent,
# dependencies (of the resource and per property), provider, custom and inputs. Left out: sourcePosition and
# stackTrace (where the program ran from differs by path) and the order of steps (the engine registers
# concurrently; the order differs from run to run on either path).
def plan_steps(plan: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each step of a `pulumi preview --json` plan, by (URN, operation), as the comparison sees it."""
    steps: dict[tuple[str, str], dict[str, Any]] = {}
    for step in plan["steps"]:
        key = (step["urn"], step["op"])
        assert key not in steps, f"{key}: twice in one plan"
        state = step.get("newState") or step.get("oldState") or {}
        steps[key] = {
            "step provider": step.get("provider", ""),
            "type": state.get("type", ""),
            "parent": state.get("parent", ""),
            "dependencies": sorted(state.get("dependencies") or ()),
            "property dependencies": {k: sorted(v or ()) for k, v in (state.get("propertyDependencies") or {}).items()},
            "provider": state.get("provider", ""),
            "custom": bool(state.get("custom")),
            "inputs": state.get("inputs") or {},
        }
    return steps


def plan_differences(host: dict[str, Any], automation: dict[str, Any]) -> list[str]:
    """Where the plan through the Python host and the Automation API's differ, one line each; empty: they agree."""
    ours, theirs = plan_steps(host), plan_steps(automation)
    lines = []
    for urn, op in sorted(ours.keys() - theirs.keys()):
        lines.append(f"{urn}: {op} only through the host")
    for urn, op in sorted(theirs.keys() - ours.keys()):
        lines.append(f"{urn}: {op} only through the Automation API")
    for key in sorted(ours.keys() & theirs.keys()):
        for name, value in ours[key].items():
            if value != theirs[key][name]:
                lines.append(f"{key[0]}: {name}: host {value!r}, Automation API {theirs[key][name]!r}")
    if host.get("changeSummary") != automation.get("changeSummary"):
        lines.append(f"summary: host {host.get('changeSummary')}, Automation API {automation.get('changeSummary')}")
    return lines


# --- one session of a user, per stack --------------------------------------------------------------------------------

@dataclass
class StackSession:
    stack: str
    user: User
    preview: subprocess.CompletedProcess[str]  # pulumi preview --stack S --diff
    plan: dict[str, Any]  # pulumi preview --stack S --json
    automation: dict[str, Any]  # the Automation API's plan of the same stack file
    policy: subprocess.CompletedProcess[str]  # pulumi preview --stack S --policy-pack policy
    up: subprocess.CompletedProcess[str]  # pulumi up --stack S --yes
    again: subprocess.CompletedProcess[str]  # pulumi preview --stack S --diff --expect-no-changes


@pytest.fixture(scope="module")
def sessions(plain_tools) -> dict[str, StackSession]:
    shutil.rmtree(PLAIN, ignore_errors=True)
    user = start(PLAIN / "user", {stack: stack_text(stack) for stack in STACKS})
    out = {}
    for stack in STACKS:
        user.pulumi("stack", "select", stack)
        preview = user.pulumi("preview", "--stack", stack, "--diff")
        plan = json.loads(user.pulumi("preview", "--stack", stack, "--json").stdout)
        policy = user.pulumi("preview", "--stack", stack, "--policy-pack", "policy")
        up = user.pulumi("up", "--stack", stack, "--yes")
        again = user.pulumi("preview", "--stack", stack, "--diff", "--expect-no-changes")
        out[stack] = StackSession(stack, user, preview, plan, automation_plan(stack, PLAIN / f"automation-{stack}"),
                                  policy, up, again)
    return out


def frames(plan: dict[str, Any]) -> set[str]:
    """Every source position of the stack traces the plan records (where each resource was registered from)."""
    return {frame.get("sourcePosition", "") for step in plan["steps"]
            for frame in (step.get("newState") or {}).get("stackTrace") or ()}


def summary_line(text: str, kind: str) -> int:
    """N of the `Resources:` section's `+ N to create` (kind "to create"), `+ N created`, `N unchanged`."""
    found = re.findall(rf"^\s+(?:\+ )?(\d+) {kind}$", text, re.MULTILINE)
    assert len(found) == 1, f"no single '{kind}' line in:\n{text[-3000:]}"
    return int(found[0])


# --- what the user sees ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_pulumi_preview_through_the_host_plans_every_resource_as_a_create(sessions, captures, record_property, stack):
    run = sessions[stack]
    declared = len(captures[stack].registrations) + 1  # the engine counts the root stack, the mock capture does not
    assert summary_line(run.preview.stdout, "to create") == declared
    assert run.plan["changeSummary"] == {"create": declared}
    # the program ran through the host's exec script (Pulumi.yaml's runtime), the Automation API's through its own
    assert HOST + "-exec" in " ".join(frames(run.plan))
    assert HOST + "-exec" not in " ".join(frames(run.automation))
    if stack == "prod":
        record_property("figures", f"plain `pulumi preview --stack prod --diff` (examples/flux-bootstrap's prod, the "
                                   f"Python host from PATH): + {declared} to create")


@pytest.mark.parametrize("stack", STACKS)
def test_the_plan_through_the_host_equals_the_automation_apis_step_for_step(sessions, stack):
    run = sessions[stack]
    assert plan_differences(run.plan, run.automation) == []
    assert len(run.plan["steps"]) == len(run.automation["steps"]) > 1


@pytest.mark.parametrize("stack", STACKS)
def test_the_policy_pack_passes_through_the_host(sessions, record_property, stack):
    run = sessions[stack]
    said = run.policy.stdout + run.policy.stderr
    assert run.policy.returncode == 0
    assert f"✅ {PACK}" in said, said[-3000:]
    assert "connection refused" not in said
    if stack == "prod":
        record_property("figures", f"plain `pulumi preview --stack prod --policy-pack policy` (flux-bootstrap's prod): "
                                   f"exit 0, ✅ {PACK}")


@pytest.mark.parametrize("stack", STACKS)
def test_pulumi_up_renders_and_a_second_preview_shows_no_change(sessions, stack):
    run = sessions[stack]
    declared = summary_line(run.preview.stdout, "to create")
    assert summary_line(run.up.stdout, "created") == declared
    rendered = run.user.project / "build" / "pulumi-render" / stack
    assert sorted(p.parent.name for p in rendered.rglob("*.yaml")), f"{rendered}: nothing rendered"
    assert run.again.returncode == 0  # --expect-no-changes: a change would exit non-zero
    assert summary_line(run.again.stdout, "unchanged") == declared
    assert "to create" not in run.again.stdout and "to update" not in run.again.stdout


# A program that breaks one rule on purpose: the real program (copied beside it as program.py, so it reads the copy's
# folder), after a transform that unpins Plex's image (the stack file cannot say `latest`: the config refuses it before
# the policy could).
UNPINNED_MAIN = '''import runpy
from pathlib import Path

import pulumi


def unpin(args):
    if args.type_ == "kubernetes:apps/v1:Deployment" and args.name == "plex-deployment":
        containers = args.props["spec"]["template"]["spec"]["containers"]
        containers[0]["image"] = containers[0]["image"].split(":")[0].split("@")[0] + ":latest"
        return pulumi.ResourceTransformResult(props=args.props, opts=args.opts)
    return None


pulumi.runtime.register_resource_transform(unpin)
runpy.run_path(str(Path(__file__).absolute().parent / "program.py"), run_name="__main__")
'''


def test_a_stack_that_breaks_a_rule_fails_the_preview_with_the_rules_message(plain_tools, sessions, record_property):
    user = start(PLAIN / "unpinned", {"prod": stack_text("prod")}, UNPINNED_MAIN)
    done = user.pulumi("preview", "--stack", "prod", "--policy-pack", "policy", ok=False)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert f"❌ {PACK}" in said, said[-3000:]
    # the pack's block: the rule, the resource, the rule's description, then the violation's own message
    assert "- [mandatory]  pinned-image-tags  (kubernetes:apps/v1:Deployment: plex-deployment)" in said, said[-3000:]
    violation = re.search(r"^\s+(Deployment plex/plex: container plex uses '\S+:latest': .*)$", said, re.MULTILINE)
    assert violation, said[-3000:]
    assert "hint: pin an exact version tag" in violation.group(1)
    record_property("figures", f"plain `pulumi preview --policy-pack policy`, Plex unpinned: exit {done.returncode}, "
                               f"❌ {PACK}: [mandatory] pinned-image-tags: {violation.group(1).strip()}")


# --- cluster mode: `pulumi up` against the e2e API server -------------------------------------------------------------

def cluster_mode_text(context: str) -> str:
    """Prod's stack file with `kubernetes:` in cluster mode on `context`, Flux not managing that cluster."""
    text = stack_text("prod")
    assert RENDER_MODE in text, "prod's stack file no longer says render mode as the cluster test expects"
    return text.replace(RENDER_MODE, f"    mode: cluster\n    context: {context}\n    fluxManagesCluster: false\n")


def live_object(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The API server's copy of an exported object (kind.group, name, namespace), or None when it has none."""
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    meta = obj["metadata"]
    done = plane.kubectl("get", f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower(), meta["name"],
                         *(["-n", meta["namespace"]] if meta.get("namespace") else []), "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def test_pulumi_up_in_cluster_mode_applies_to_the_api_server_and_a_second_preview_shows_no_change(
        plain_tools, cluster, captures, tmp_path, record_property):  # noqa: F811 (cluster: the imported fixture)
    """`kubernetes: {mode: cluster, context: <the e2e API server's>, fluxManagesCluster: false}`: the plain CLI's
    `pulumi up --yes` applies every object the export writes to the real kube-apiserver (tests/e2e/controlplane.py,
    loopback, kwok nodes named as prod's), and a second preview with `--expect-no-changes` passes."""
    plane: ControlPlane = cluster
    context = json.loads(plane.kubeconfig.read_text())["current-context"]
    text = cluster_mode_text(context)
    exported = [d for docs in exported_objects(tmp_path / "export", "prod", text).values() for d in docs]
    assert [o for o in exported if live_object(plane, o)] == [], "the API server holds an exported object already"
    # what Flux's bootstrap leaves on a cluster and the program does not declare: the namespace flux-system, where the
    # stack's Kustomizations and its cluster-vars ConfigMap go (the fixture installed Flux's CRDs)
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}})
    for node in PROD_NODES:
        plane.add_node(node, gpus=None)
    # no provisioner here: a volume for each claim, of its class and size, so the provider's await sees it Bound
    plane.apply([volume(f"plain-{c['metadata']['name']}", c["spec"]["storageClassName"],
                        c["spec"]["resources"]["requests"]["storage"])
                 for c in exported if c["kind"] == "PersistentVolumeClaim"])

    shutil.rmtree(PLAIN / "cluster", ignore_errors=True)
    user = start(PLAIN / "cluster", {"prod": text})
    user.pulumi("stack", "select", "prod")
    declared = len(captures["prod"].registrations) + 1  # the root stack too
    preview = user.pulumi("preview", "--stack", "prod", "--diff", kubeconfig=plane.kubeconfig)
    assert summary_line(preview.stdout, "to create") == declared
    with lb_ipam(plane):
        up = user.pulumi("up", "--stack", "prod", "--yes", kubeconfig=plane.kubeconfig)
    assert summary_line(up.stdout, "created") == declared
    assert not (user.project / "build" / "pulumi-render").exists(), "cluster mode rendered files"

    # every object of the export is on the API server, as the export writes it where it matters
    missing = [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in exported
               if live_object(plane, o) is None]
    assert missing == [], missing
    for obj in exported:
        live = live_object(plane, obj)
        assert live is not None
        assert live["metadata"].get("labels", {}).items() >= (obj["metadata"].get("labels") or {}).items()
        if obj["kind"] in ("Deployment", "DaemonSet"):
            assert [c["image"] for c in live["spec"]["template"]["spec"]["containers"]] == \
                [c["image"] for c in obj["spec"]["template"]["spec"]["containers"]]
    plex = plane.get("deployment", "-n", "plex", "plex")
    assert plex["status"].get("availableReplicas") == plex["spec"]["replicas"]  # the provider waited for it

    again = user.pulumi("preview", "--stack", "prod", "--diff", "--expect-no-changes", kubeconfig=plane.kubeconfig)
    assert summary_line(again.stdout, "unchanged") == declared
    assert "to create" not in again.stdout and "to update" not in again.stdout
    record_property("figures", f"plain `pulumi up --stack prod --yes` in cluster mode (context {context}, the e2e "
                               f"API server): + {declared} created, {len(exported)} exported objects live; a second "
                               f"`pulumi preview --expect-no-changes`: {declared} unchanged")


# --- the comparison itself -------------------------------------------------------------------------------------------

def _first(plan: dict[str, Any], test) -> dict[str, Any]:
    return next(s for s in plan["steps"] if test(s))


def _change_op(step: dict[str, Any]) -> None:
    step["op"] = "update"


def _drop_dependency(step: dict[str, Any]) -> None:
    step["newState"]["dependencies"] = step["newState"]["dependencies"][1:]


def _change_parent(step: dict[str, Any]) -> None:
    step["newState"]["parent"] = step["urn"].split("::")[0] + "::gpu-platform::pulumi:pulumi:Stack::elsewhere"


def _change_provider(step: dict[str, Any]) -> None:
    step["newState"]["provider"] = step["newState"]["provider"].replace("::k8s-", "::other-")


MUTATIONS = {"op": _change_op, "dependencies": _drop_dependency, "parent": _change_parent,
             "provider": _change_provider}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_the_comparison_reports_one_changed_step(sessions, mutation):
    plan = sessions["prod"].plan
    assert plan_differences(plan, copy.deepcopy(plan)) == []
    changed = copy.deepcopy(plan)
    step = _first(changed, lambda s: s.get("newState", {}).get("custom") and s["newState"].get("dependencies")
                  and s["newState"].get("parent"))
    MUTATIONS[mutation](step)
    lines = plan_differences(plan, changed)
    assert lines, f"changing the {mutation} of {step['urn']} went unnoticed"
    assert all(step["urn"] in line or line.startswith("summary:") for line in lines), lines
    if mutation != "op":
        assert [line.split(": ")[1] for line in lines] == [mutation], lines
