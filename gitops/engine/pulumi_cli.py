"""The real Pulumi engine over this program: `pulumi preview`, `up`, `stack export` and `destroy` with the CLI and
the kubernetes provider that `make tools` builds (or a CLI of your own: PULUMI=/path/to/pulumi).

The CLI runs with `--client` against the Automation API's in-process language host, so it needs no
`pulumi-language-python` plugin (the Go proxy serves none; tools/README.md). Each stack runs in its own site (default
build/pulumi/<stack>/): a copy of the program's files (so `stack init`'s `encryptionsalt` never lands in the committed
Pulumi.<stack>.yaml), the file backend's state, PULUMI_HOME. Usage:
    python -m gitops.engine.pulumi_cli preview --stack prod [--policy-pack] [--site DIR]
    python -m gitops.engine.pulumi_cli up|export|destroy --stack prod
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import runpy
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops.engine.stacks import ROOT
from model.errors import RefusalError

TOOLS_BIN = ROOT / "build" / "tools" / "bin"
# The pack as an executable analyzer: the CLI runs a directory pack through the Python language host, which the
# proxy does not serve; policy/analyzer runs the same pack with the SDK's own `python -m pulumi.policy`.
POLICY_PACK = ROOT / "policy" / "analyzer"
# What the program reads from its own folder (__main__.py's project_dir); components/ come from the installed
# project (pip install -e .), so the copy runs the same code.
SITE_FILES = ("Pulumi.yaml", "__main__.py")
SITE_DIRS = ("evidence",)
# The CLI's environment: offline, no update check, no plugin download, no ambient cluster.
ENGINE_ENV = {
    "PULUMI_SKIP_UPDATE_CHECK": "true",
    "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    "PULUMI_CONFIG_PASSPHRASE": "",  # the file backend's secrets manager; this program holds no secret config
    "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
}


class EngineError(RefusalError):
    """The engine refused or failed; `lines` is what it said (its own output, not a traceback), `run` what it had
    reported until then (policy violations above all)."""

    def __init__(self, lines: list[str], run: EngineRun | None = None) -> None:
        super().__init__(lines)
        self.run = run


@dataclass(frozen=True)
class Site:
    """Where one stack runs: the program's copy (`project`), the file backend (`state`) and PULUMI_HOME (`home`)."""

    stack: str
    root: Path
    pulumi: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def home(self) -> Path:
        return self.root / "home"


def default_pulumi() -> Path:
    return Path(os.environ.get("PULUMI") or TOOLS_BIN / "pulumi")


def make_site(stack: str, root: Path, source: Path = ROOT, pulumi: Path | None = None) -> Site:
    """A site for `stack` at `root`, its project copied from `source` (a project folder: Pulumi.yaml, __main__.py,
    Pulumi.<stack>.yaml, evidence/). An existing site keeps its state and takes the source's current files."""
    site = Site(stack=stack, root=root, pulumi=pulumi or default_pulumi())
    site.project.mkdir(parents=True, exist_ok=True)
    site.state.mkdir(parents=True, exist_ok=True)
    site.home.mkdir(parents=True, exist_ok=True)
    for name in (*SITE_FILES, f"Pulumi.{stack}.yaml"):
        copied = site.project / name
        text = (source / name).read_text()
        if name == f"Pulumi.{stack}.yaml" and copied.exists():
            # keep the salt `stack init` wrote, take every other line from the source
            salt = [line for line in copied.read_text().splitlines(keepends=True) if line.startswith("encryptionsalt:")]
            text = "".join(salt) + "".join(line for line in text.splitlines(keepends=True)
                                           if not line.startswith("encryptionsalt:"))
        copied.write_text(text)
    for name in SITE_DIRS:
        shutil.rmtree(site.project / name, ignore_errors=True)
        if (source / name).is_dir():
            shutil.copytree(source / name, site.project / name)
    return site


def engine_env(site: Site, environ: dict[str, str]) -> dict[str, str]:
    """What the CLI runs with, over `environ`: ENGINE_ENV, the site's backend, the provider beside the CLI on PATH, and
    a user. The CLI is built without cgo, so Go names the user from /etc/passwd or else $USER and $HOME, and refuses
    to create a stack with none of them: a container running an arbitrary uid (CI's) has no passwd entry and no $USER.
    The name only labels the file backend's update history."""
    env = {**ENGINE_ENV, "PULUMI_BACKEND_URL": site.state.as_uri(),
           "PATH": os.pathsep.join([str(site.pulumi.parent), str(TOOLS_BIN), environ.get("PATH", "")])}
    if not environ.get("USER"):
        env["USER"] = _user_name(environ)
    if not environ.get("HOME"):
        env["HOME"] = str(site.home)
    return env


def _user_name(environ: dict[str, str]) -> str:
    if environ.get("LOGNAME"):
        return environ["LOGNAME"]
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # no passwd entry for this uid
        return f"uid-{os.getuid()}"


def _stack(site: Site) -> Any:
    from pulumi import automation as auto

    if not site.pulumi.is_file():
        raise EngineError([f"error: {site.pulumi}: no Pulumi CLI there; hint: run `make tools`, or set PULUMI to "
                           "your own CLI"])
    program_file = str(site.project / "__main__.py")

    def program() -> None:
        runpy.run_path(program_file, run_name="__main__")

    env = engine_env(site, dict(os.environ))
    command = auto.PulumiCommand(root=str(site.pulumi.parent.parent), skip_version_check=True)
    workspace = auto.LocalWorkspace(work_dir=str(site.project), program=program, pulumi_home=str(site.home),
                                    env_vars=env, pulumi_command=command)
    return auto.Stack.create_or_select(site.stack, workspace)


@dataclass(frozen=True)
class StepEvent:
    """One resource step the engine planned or performed, as its event stream reports it."""

    op: str  # create | update | replace | delete | same | create-replacement | delete-replaced | read | …
    urn: str
    type: str
    diffs: tuple[str, ...] = ()
    replace_keys: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class PolicyViolation:
    policy: str
    level: str
    message: str
    urn: str | None


@dataclass
class EngineRun:
    """What one `preview`, `up` or `destroy` did: its steps, its summary, policy violations, diagnostics, text."""

    steps: list[StepEvent] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)
    violations: list[PolicyViolation] = field(default_factory=list)
    diagnostics: list[tuple[str, str]] = field(default_factory=list)  # (severity, message)
    outputs: dict[str, Any] = field(default_factory=dict)  # the stack's outputs as the engine reported them
    stdout: str = ""
    error: list[str] = field(default_factory=list)  # what the CLI said when it failed

    def as_output(self) -> dict[str, Any]:
        return {"steps": [vars(s) | {"diffs": list(s.diffs), "replace_keys": list(s.replace_keys)} for s in self.steps],
                "summary": self.summary,
                "violations": [vars(v) for v in self.violations],
                "diagnostics": [list(d) for d in self.diagnostics],
                "outputs": self.outputs,
                "stdout": self.stdout,
                "error": self.error}

    @classmethod
    def from_output(cls, data: dict[str, Any]) -> EngineRun:
        return cls(steps=[StepEvent(s["op"], s["urn"], s["type"], tuple(s["diffs"]), tuple(s["replace_keys"]))
                          for s in data["steps"]],
                   summary=dict(data["summary"]),
                   violations=[PolicyViolation(**v) for v in data["violations"]],
                   diagnostics=[(d[0], d[1]) for d in data["diagnostics"]],
                   outputs=dict(data["outputs"]), stdout=data["stdout"], error=list(data["error"]))


def _collector(run: EngineRun) -> Any:
    def on_event(event: Any) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            op = meta.op.value if hasattr(meta.op, "value") else str(meta.op)
            run.steps.append(StepEvent(op=op, urn=meta.urn, type=meta.type, diffs=tuple(meta.diffs or ()),
                                       replace_keys=tuple(meta.keys or ()) if op.startswith(("replace", "create-r"))
                                       else ()))
        elif event.res_outputs_event is not None:
            meta = event.res_outputs_event.metadata
            if meta.type == "pulumi:pulumi:Stack" and meta.new is not None:
                run.outputs = dict(meta.new.outputs or {})
        elif event.policy_event is not None:
            p = event.policy_event
            run.violations.append(PolicyViolation(p.policy_name, p.enforcement_level, p.message.strip(),
                                                  p.resource_urn))
        elif event.diagnostic_event is not None and event.diagnostic_event.severity != "debug":
            d = event.diagnostic_event
            run.diagnostics.append((d.severity, d.message.strip()))

    return on_event


def _summary(changes: Any) -> dict[str, int]:
    return {str(op.value if hasattr(op, "value") else op): n for op, n in sorted((changes or {}).items(),
                                                                                  key=lambda kv: str(kv[0]))}


def _engine_call(action: Any, run: EngineRun | None = None) -> Any:
    from pulumi import automation as auto

    try:
        return action()
    except auto.CommandError as exc:
        raise EngineError(str(exc).splitlines(), run) from None


def preview(site: Site, policy_pack: Path | None = None, diff: bool = True) -> EngineRun:
    """`pulumi preview [--diff] [--policy-pack DIR]`."""
    stack = _stack(site)
    run = EngineRun()
    result = _engine_call(lambda: stack.preview(
        diff=diff, color="never", on_event=_collector(run),
        policy_packs=[str(policy_pack)] if policy_pack else None), run)
    run.summary, run.stdout = _summary(result.change_summary), result.stdout
    return run


def up(site: Site) -> EngineRun:
    """`pulumi up --yes`."""
    return _update(site, "up")


def destroy(site: Site) -> EngineRun:
    """`pulumi destroy --yes`."""
    return _update(site, "destroy")


def _update(site: Site, action: str) -> EngineRun:
    stack = _stack(site)
    run = EngineRun()
    result = _engine_call(lambda: getattr(stack, action)(color="never", on_event=_collector(run)), run)
    run.summary, run.stdout = _summary(result.summary.resource_changes), result.stdout
    return run


def export(site: Site) -> dict[str, Any]:
    """`pulumi stack export`: the deployment (resources with type, parent, dependencies, inputs, outputs)."""
    stack = _stack(site)
    return _engine_call(lambda: stack.export_stack()).deployment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops.engine.pulumi_cli",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("action", choices=("preview", "up", "export", "destroy"))
    parser.add_argument("--stack", required=True)
    parser.add_argument("--site", type=Path, help="default: build/pulumi/<stack>")
    parser.add_argument("--source", type=Path, default=ROOT, help="the project folder to copy (default: this one)")
    parser.add_argument("--policy-pack", action="store_true", help="preview with the policy pack in policy/")
    parser.add_argument("--json", type=Path, help="also write what the engine did as JSON to this file")
    parser.add_argument("--kubeconfig", type=Path, help="for `kubernetes.mode: cluster`: the kubeconfig whose "
                        "context the stack names (never taken from $KUBECONFIG)")
    args = parser.parse_args(argv)
    # The provider refuses render mode with a kubeconfig, and it takes one from the environment: only ever the one
    # asked for here.
    os.environ.pop("KUBECONFIG", None)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = str(args.kubeconfig.resolve())
    site = make_site(args.stack, args.site or ROOT / "build" / "pulumi" / args.stack, args.source)
    try:
        if args.action == "export":
            result: Any = export(site)
            print(json.dumps(result, indent=2, sort_keys=True))
        else:
            run = {"preview": lambda: preview(site, POLICY_PACK if args.policy_pack else None),
                   "up": lambda: up(site), "destroy": lambda: destroy(site)}[args.action]()
            print(run.stdout, end="")
            result = run.as_output()
    except EngineError as exc:
        print("\n".join(exc.lines), file=sys.stderr)
        if args.json and exc.run is not None:
            exc.run.error = exc.lines
            args.json.write_text(json.dumps(exc.run.as_output(), indent=2, sort_keys=True) + "\n")
        return 2
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
