"""The tests' shared builders and lookups: small Kubernetes and Flux documents for the tests that write repositories
by hand (`dump`, `ks`, `cm`: each writes only what it is given, a field a test does not ask for is absent, not
defaulted); the program's registrations by type and name (`registration`, `registrations`), and a capture with
one object changed (`mutated`); the writer's steps for one stack in the pipeline's order (`write_tree`,
`plan_changes`, `drift`: hand-made trees, no program run, no walk) and the "lab" stack's tree written or refused
(`lab_exported`, `lab_refusal`); the stack file's project keys (`project_keys`); exports killed mid-write and trees
as an older export left them (`killed_export`, `export_an_older_tree`); the preview's URNs and a real export of dev
(`exported_dev`); the user's own repository with one base for every cluster, a git copy of it (`home_repo`), its two
stacks (`home_project`) and an export of them it must refuse (`refused_export`)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ruamel.yaml import YAML

from conftest import EXAMPLE, LAB_APP, ROOT, evidence_for, export, files_of, lab_tree, make_project, repository
from gitops.engine.program import Capture, Registration
from gitops.export import main as export_main
from gitops.repo import out_folder, writer
from gitops.tree import Tree
from model.config import PROJECT

INDEX = "clusters/dev/gpu-platform/export-index.json"  # the dev stack's index under OUT


def dump(*docs: Any) -> bytes:
    """The documents as one multi-document YAML file, keys in the order given."""
    return yaml.safe_dump_all(list(docs), sort_keys=False).encode()


def ks(name: str, path: str, namespace: str | None = "flux-system", *, source_ref: bool = True,
       source_namespace: str | None = None, prune: bool | None = None, interval: str | None = None,
       **spec: Any) -> dict[str, Any]:
    """A Flux Kustomization of `path`, in `namespace` (None: no metadata.namespace), from the bootstrap GitRepository
    `flux-system` (`source_ref=False`: no sourceRef at all); the sourceRef names the source's namespace only when
    `source_namespace` is given; `prune` and `interval` are set only when given (in that order, after path and
    sourceRef); `spec` adds any other field."""
    source = {"kind": "GitRepository", "name": "flux-system",
              **({"namespace": source_namespace} if source_namespace is not None else {})}
    fields = {**({"sourceRef": source} if source_ref else {}),
              **({"prune": prune} if prune is not None else {}),
              **({"interval": interval} if interval is not None else {})}
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, **({"namespace": namespace} if namespace is not None else {})},
            "spec": {"path": path, **fields, **spec}}


def cm(name: str, namespace: str | None = None, *, empty_data: bool = False, **data: str) -> dict[str, Any]:
    """A ConfigMap, in `namespace` when one is given (None: no metadata.namespace). `data` holds the keyword
    arguments; without any, the ConfigMap has no data field, or `data: {}` with `empty_data=True`."""
    meta = {"name": name, **({"namespace": namespace} if namespace is not None else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            **({"data": data} if data or empty_data else {})}


def registration(capture: Capture, type_: str, name: str) -> Registration:
    """The one resource of this type and name the program registered."""
    found = [r for r in capture.registrations if r.type == type_ and r.name == name]
    assert len(found) == 1, f"{len(found)} registrations of {type_} named {name!r}"
    return found[0]


def registrations(capture: Capture, type_: str) -> list[Registration]:
    """Every resource of this type the program registered, in registration order."""
    return [r for r in capture.registrations if r.type == type_]


# --- the writer's steps for one stack, in the order gitops/pipeline.py runs them ---------------------------------

def write_tree(out: Path, tree: Tree, plan: writer.Plan | None = None) -> writer.Plan:
    out_folder.check_out(out, creating=True)
    out_folder.make_out(out)
    if plan is None:
        out_folder.recover(out, tree.stack, tree)
        plan = plan_changes(out, tree)
    return writer.write_tree(out, tree, plan)


def plan_changes(out: Path, tree: Tree) -> writer.Plan:
    return writer.plan_changes(out, tree, out_folder.read_index(out, tree))


def drift(out: Path, tree: Tree) -> list[str]:
    return writer.drift(out, tree, out_folder.read_index(out, tree))


# The "lab" stack's small tree (conftest.lab_tree): its index under OUT, its files, and what the writer does with them.
LAB_INDEX = "clusters/lab/gpu-platform/export-index.json"
LAB_CM = "components/lab/app/configmap.settings.yaml"
LAB_ENTRY = "clusters/lab/gpu-platform/kustomization.yaml"
LAB_FILES = {
    LAB_APP: b"kind: Deployment\nmetadata:\n  name: app\n",
    LAB_CM: b"kind: ConfigMap\ndata:\n  a: '1'\n",
    LAB_ENTRY: b"resources:\n- ../../../components/lab/app\n",
}


def lab_files_tree(files: dict[str, bytes] | None = None) -> Tree:
    """The lab tree of LAB_FILES, or of the files given."""
    return lab_tree(LAB_FILES if files is None else files)


def lab_exported(tmp_path: Path, files: dict[str, bytes] | None = None) -> Path:
    """OUT (tmp_path/out) with the lab tree written into it."""
    out = tmp_path / "out"
    write_tree(out, lab_files_tree(files))
    return out


def lab_refusal(out: Path, t: Tree) -> list[str]:
    """write_tree must refuse and leave OUT exactly as it was."""
    before = files_of(out)
    with pytest.raises(out_folder.OwnershipError) as info:
        write_tree(out, t)
    assert files_of(out) == before
    assert not (out / out_folder.WORK_DIR).exists()
    return info.value.lines


# --- programs, exports and stack files ------------------------------------------------------------------------

def project_keys(path) -> dict:
    doc = YAML(typ="safe", pure=True).load(path.read_text())
    return {k.split(":", 1)[1]: v for k, v in doc["config"].items() if k.startswith(f"{PROJECT}:")}


def mutated(capture: Capture, type_: str, name: str, mutate) -> Capture:
    """A copy of a real capture with one object's inputs changed: a crafted bad object."""
    regs = []
    for reg in capture.registrations:
        if reg.type == type_ and reg.name == name:
            inputs = copy.deepcopy(reg.inputs)
            mutate(inputs)
            reg = dataclasses.replace(reg, inputs=inputs)
        regs.append(reg)
    return dataclasses.replace(capture, registrations=regs)


def killed_export(argv: list[str], os_function: str, kill_at: int, owner: object = os) -> int:
    """Run the export in a forked child that SIGKILLs itself at the kill_at-th call of <owner>.<os_function>
    (owner: the os module unless another is given).

    A fork, not a new interpreter: the child already has everything imported, so the kill lands mid-write
    without paying the import time again. The child gets its own event loop (the SDK runs RPCs in the loop's
    executor, whose threads do not survive a fork).
    """
    import asyncio
    import signal

    pid = os.fork()
    if pid == 0:  # child
        code = 3
        try:
            asyncio.set_event_loop(asyncio.new_event_loop())
            calls = [0]
            real = getattr(owner, os_function)

            def dying(*args, **kwargs):
                calls[0] += 1
                if calls[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(*args, **kwargs)

            setattr(owner, os_function, dying)
            code = export_main(argv if "--project-dir" in argv else ["--project-dir", str(EXAMPLE), *argv])
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    # The child shared this loop's epoll instance and self-pipe; start the parent afresh on a new loop.
    asyncio.set_event_loop(asyncio.new_event_loop())
    return os.waitstatus_to_exitcode(status)


def export_an_older_tree(out: Path) -> None:
    """A tree as an older version of the program wrote it: every owned file differs in content from today's."""
    from gitops.index import content_hash
    assert export(out, "dev") == 0
    index_file = out / INDEX
    index = json.loads(index_file.read_text())
    for rel in index["files"]:
        path = out / rel
        older = b"writtenBy: an older export\n" if rel.endswith(".yaml") else b"<!-- an older export -->\n"
        path.write_bytes(path.read_bytes() + older)
        index["files"][rel] = content_hash(rel, path.read_bytes())
    index_file.write_text(json.dumps(index))


def capture_tree(capture: Capture) -> Tree:
    """The tree of a captured program run, where its layout output says (as the pipeline builds it)."""
    from gitops.tree import build_tree
    from model.layout import Layout

    return build_tree(capture, Layout.from_output(capture.stack, capture.stack_outputs["layout"]))


def preview_capture(capture: Capture, out: Path) -> Any:
    """The preview of a captured program run against OUT, refusals as the command raises them (PreviewError)."""
    from gitops import pipeline
    from gitops.preview import PreviewError, plan_for
    from model.errors import RefusalError

    try:
        return plan_for(pipeline.from_capture(capture, lint=False), out)
    except RefusalError as exc:
        raise PreviewError(exc.lines) from None


# --- the preview: a plan's resource URNs, and a repository a real export of dev left -----------------------------

STACK_URN = "urn:pulumi:dev::gpu-platform::pulumi:pulumi:Stack::gpu-platform-dev"
APP_URN = "urn:pulumi:dev::gpu-platform::gpu-platform:components:GpuApp::plex"
QUIET_URN = "urn:pulumi:dev::gpu-platform::gpu-platform:components:Quiet::quiet"


def exported_dev(tmp_path: Path) -> Path:
    from conftest import export

    out = tmp_path / "out"
    assert export(out, "dev") == 0
    return out


# --- the user's own repository, one base for every cluster (issue 29): examples/home-network-k3s/repo ------------

HOME_REPO = repository("home-network-k3s")
HOME_DEV = (ROOT / "Pulumi.dev.yaml").read_text()  # the shipped stacks are the ones for this repository
HOME_PROD = (ROOT / "Pulumi.prod.yaml").read_text()
PLUGIN_KS = ("flux-system", "intel-gpu-plugin")
# What the seed's pull request changed in the repository, and the export's one records folder.
HOME_PULL_REQUEST = {"M clusters/base/kustomization.yaml", "?? clusters/base/intel-gpu-plugin.yaml",
                     "?? platform/intel-gpu-plugin/"}
HOME_RECORDS = "?? gpu-platform/"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def home_repo(tmp_path: Path) -> Path:
    """A git copy of the fixture, committed, so `git status` shows exactly what the export changed (each test
    module's `repo` fixture)."""
    out = tmp_path / "home-network-k3s"
    shutil.copytree(HOME_REPO, out)
    git(out, "init", "-q")
    git(out, "add", "-A")
    git(out, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "fixture")
    return out


# Evidence that every node of both stacks advertises the GPU (step 3 of the rollout, for prod and dev).
HOME_EVIDENCE = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 1 for i in (1, 2, 3)}),
                 "dev": evidence_for("dev", {"k3s-dev-1": 1})}
# The renderer's pull request the user writes (step 4): a gpu mode that asks the device plugin for the iGPU instead of
# the /dev/dri hostPath, and Plex's definition switched to it.
_RENDERER_CHANGE = ('    elif gpu != "none":',
                    '    elif gpu == "intel-gpu-plugin":\n'
                    '        d = {**d, "resources": {**d["resources"], "limits": {**d["resources"].get("limits", {}),\n'
                    '                                                             "gpu.intel.com/i915": "1"}}}\n'
                    '    elif gpu != "none":')


def render_the_switch(repo: Path) -> None:
    """The renderer's pull request in a copy of the home repository, as the user writes it, and
    `python3 catalog/render.py`."""
    render = repo / "catalog/render.py"
    render.write_text(render.read_text().replace(*_RENDERER_CHANGE))
    plex = repo / "catalog/plex.yaml"
    plex.write_text(plex.read_text().replace("gpu: intel-quicksync", "gpu: intel-gpu-plugin"))
    subprocess.run([sys.executable, "catalog/render.py"], cwd=repo, check=True, capture_output=True)


def home_on_a_branch(tmp_path: Path) -> Path:
    """home_repo with its commit on `main` and a branch checked out, as a user's clone before a pull request."""
    out = home_repo(tmp_path)
    git(out, "branch", "-M", "main")
    git(out, "checkout", "-qb", "gpu-plugin")
    return out


def export_prod(capsys, out: Path, project: Path, *flags: str) -> tuple[int, str, str]:
    """`--stack prod --out OUT` as a user runs it (not quiet): exit code, stdout, stderr."""
    capsys.readouterr()
    code = export_main(["--stack", "prod", "--out", str(out), "--project-dir", str(project), *flags])
    printed, warned = capsys.readouterr()
    return code, printed, warned


def home_project(tmp_path: Path, dev: str = HOME_DEV, prod: str = HOME_PROD,
                 evidence: dict[str, str] | None = None) -> Path:
    """A project of the repository's two stacks, dev and prod (stack files given as text), with evidence files."""
    return make_project(tmp_path / "project", {"dev": dev, "prod": prod}, evidence)


def git_status(repo: Path) -> set[str]:
    return {line.strip() for line in git(repo, "status", "--porcelain", "--untracked-files=normal").splitlines()}


def refused_export(capsys, out: Path, proj: Path, *stacks: str) -> list[str]:
    """The error lines of an export that must refuse (exit 2, no traceback) and leave OUT as it was."""
    before = files_of(out)
    capsys.readouterr()
    assert export(out, *stacks, project=proj) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert files_of(out) == before, "a refused export changed the repository"
    return [line.removeprefix("error: ") for line in err.splitlines() if line.startswith("error: ")]


def with_plugin(text: str, shared: int, reason: str) -> str:
    """A stack file with the device plugin's sharedDevNum and its reason set."""
    return text.replace("  gpu-platform:gitops:\n", f"  gpu-platform:intelGpuPlugin:\n    sharedDevNum: {shared}\n"
                        f"    sharedDevNumReason: {reason}\n  gpu-platform:gitops:\n", 1)


def forge_index(repo: Path, stack: str, change) -> None:
    """The stack's export index in the repository, changed by `change` (a forged index)."""
    index = repo / f"gpu-platform/{stack}/export-index.json"
    doc = json.loads(index.read_text())
    change(doc)
    index.write_text(json.dumps(doc))
