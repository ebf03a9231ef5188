"""The one pipeline `export`, `--check` and `preview` share; the commands only parse arguments and print.

1. `build`: the program under the mock engine, its outputs read once, typed, the tree built and validated.
2. `export` / `check`: OUT opened (locked, an interrupted export completed, each index read once);
   `restyle_and_place_lines` fits the trees to the repository, `check_repository` walks OUT as Flux would and refuses
   what breaks delivery, `add_reports_and_index` adds DELIVERY.md, POST-MERGE.md, its suite and the index, judged by
   the repository's own yamllint; then the export writes, the check compares.
3. `compare`: for the preview, what OUT holds for the stack, read under the shared lock.
Each step's module is named in docs/architecture.md ("The hops of make export").
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops.checks import kyverno, shared_base
from gitops.checks.admin_access import check_admin_access
from gitops.checks.delivery import before_and_after, check_stack
from gitops.checks.dra_steps import skipped_steps
from gitops.checks.reference import check_references
from gitops.checks.validate import validate_tree
from gitops.checks.walk_builds import StackWalk
from gitops.engine.program import Capture, run_program
from gitops.engine.stacks import template_leftovers
from gitops.flux.build import RepoView
from gitops.flux.walk import walk_from_bootstrap
from gitops.index import DELIVERY_FILE, index_json
from gitops.plan.diff import shown
from gitops.plan.plan import Step, object_steps, shown_object
from gitops.plan.pull_request import StackChange, pull_request
from gitops.plan.summary import PullRequest
from gitops.repo import out_folder, own_file_lines, work_tree, writer
from gitops.repo.current import Current, read_current, recorded_outputs
from gitops.repo.out_folder import Records
from gitops.repo.repository_lint import lint_problems
from gitops.reports.delivery import delivery_markdown
from gitops.reports.post_merge import add_post_merge
from gitops.reports.renderer_change import RendererChange, changes_of, once_per_export
from gitops.tree import Tree, build_tree, collect_objects
from model.config import app_keys
from model.errors import RefusalError
from model.outputs import ProgramOutputs


@dataclass
class Stack:
    """One stack through the pipeline: what the program registered, its outputs, and its tree."""

    capture: Capture
    outputs: ProgramOutputs
    tree: Tree
    # The key in the stack file of each app of `apps` (`apps[0]`), by name: a refusal of the walk names the key.
    app_keys: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # a shared base's values this stack's cluster-vars holds
    combined: bool = False  # `combine` ran over the run's stacks
    # The export's change against what OUT held, object by object (`check_replacements`): the pull request's summary
    changes: list[Step] = field(default_factory=list)
    # What the renderer's pull request of an app the repository delivers must change (`add_reports_and_index`)
    renderer_changes: list[RendererChange] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.capture.stack


class OutRefusedError(RefusalError):
    """OUT refused the export or the check. `written`: files were changed before the refusal (the tree is half-way,
    the journal stays); `recovered`: what completing an interrupted export did before it, per stack."""

    def __init__(self, lines: list[str], written: bool = False,
                 recovered: list[tuple[str, str]] | None = None) -> None:
        super().__init__(lines)
        self.written = written
        self.recovered = recovered or []


@dataclass(frozen=True)
class OutWarning:
    """What the user should know about OUT although the export went ahead: the line, and the next step."""

    line: str
    next_step: str


@dataclass
class Exported:
    recovered: list[tuple[str, str]] = field(default_factory=list)  # (stack, what completing its export did)
    written: list[tuple[str, writer.Plan]] = field(default_factory=list)  # (stack, its plan), in the stacks' order
    notices: list[tuple[str, str]] = field(default_factory=list)  # (stack, notice): the gate's warnings above all
    warnings: list[OutWarning] = field(default_factory=list)  # about OUT itself, each once
    pull_request: PullRequest = field(default_factory=lambda: PullRequest(()))  # what the pull request changes
    status: list[str] = field(default_factory=list)  # `git status --short` of the export's paths in OUT's work tree
    paths: list[str] = field(default_factory=list)  # every path the export wrote or pruned, relative to OUT


@dataclass
class Checked:
    pending: list[str]  # stacks whose export was interrupted after its commit point
    differences: list[str]  # drift lines, every stack's
    judged: list[str] = field(default_factory=list)  # what the repository's Kyverno policies judged, when they ran


@dataclass
class Compared:
    current: Current  # what OUT holds for the stack
    pending: bool  # an export of the stack was interrupted after its commit point


# --- 1. build ----------------------------------------------------------------------------------------------------

def build(stack: str, project_dir: Path, lint: bool) -> Stack:
    """Run the program for `stack` and build its validated tree. Raises a RefusalError (config, evidence, graph,
    stack file, placement, validation, a stack file still a template)."""
    leftovers = template_leftovers(stack, project_dir.resolve())
    if leftovers:
        raise RefusalError(leftovers)
    return from_capture(run_program(stack, project_dir.resolve()), lint)


def from_capture(capture: Capture, lint: bool) -> Stack:
    """The validated tree of a program run already captured. yamllint checks the emitter, which the tests hold to it
    on the real tree; a plain export skips it (about a third of the export's time per object), --check and --lint
    run it."""
    outputs = ProgramOutputs.from_output(capture.stack, capture.stack_outputs)
    references = frozenset(name for name, app in outputs.gpu_apps.items() if app.by_repository)
    tree = build_tree(capture, outputs.layout, reference_apps=references)
    validate_tree(tree, outputs.app_policy, lint=lint)
    return Stack(capture, outputs, tree, app_keys(capture.config))


def combine(stacks: list[Stack]) -> None:
    """The stacks of one run as one set of files: a shared base's stacks merged (their differing values become
    tokens), then no file written by two stacks with different content. Raises OutRefusedError; reads no OUT. Once
    per run: a merged tree merges to itself, and its tokens would be lost."""
    if all(s.combined for s in stacks):
        return
    problems: list[str] = []
    bases: dict[str, list[Stack]] = {}
    for s in stacks:
        if s.tree.layout.base_group is not None:
            bases.setdefault(s.tree.layout.base_group, []).append(s)
    for group in bases.values():  # in stack order, whatever the command line's: the same files and lines every run
        group.sort(key=lambda s: s.name)
        merged, lines = shared_base.merge([(s.tree, s.outputs) for s in group])
        problems += lines
        for s in group:
            s.tokens = merged.tokens.get(s.name, {})
    if not problems:
        problems = shared_base.conflicts([s.tree for s in stacks])
    if problems:
        raise OutRefusedError(problems)
    shared_base.note_together([s.tree for s in stacks])
    for s in stacks:
        s.combined = True


# --- 2. export and check -----------------------------------------------------------------------------------------

def export(stacks: list[Stack], out: Path, rewrite_headers: bool = False, base_ref: str | None = None,
           stage: bool = False) -> Exported:
    """Write every stack's tree into OUT, one export at a time; raises OutRefusedError (nothing written unless it
    says so). `rewrite_headers`: the files an older export wrote get the current header (gitops/headers.py).
    `base_ref`: what the pull request's summary is measured against (default: the merge-base of HEAD with the default
    branch, where OUT is a Git work tree); `stage`: `git add` exactly the export's paths afterwards."""
    done = Exported()
    combine(stacks)
    try:
        base = work_tree.pull_request_base(out, base_ref) if out.is_dir() else None
    except work_tree.BaseError as exc:
        raise OutRefusedError([f"{exc}; hint: name a branch, tag or commit of OUT, or leave --base out for the "
                               "merge-base of HEAD with the default branch"]) from None
    with _opened(out, stacks, exclusive=True, done=done) as records:
        found = against_repository(out, stacks, records)
        skipped = skipped_steps([(s.tree, s.outputs) for s in stacks],
                                {name: recorded_outputs(r.index) for name, r in records.items() if r.index is not None})
        if skipped:
            raise OutRefusedError(skipped)
        owned = {name: r.owned for name, r in records.items()}
        every = {rel: digest for s in stacks for rel, digest in owned[s.name].items()}
        written = {rel for s in stacks for rel in s.tree.files}
        plans = [writer.plan_changes(out, s.tree, owned[s.name], siblings=every, kept=written - set(s.tree.files),
                                     rewrite_headers=rewrite_headers) for s in stacks]  # refuse before writing any
        done.pull_request = pull_request(out, [StackChange(s.tree, s.outputs, s.changes, found[s.name].after)
                                               for s in stacks], base,  # against OUT as it was, where no base
                                         once_per_export([c for s in stacks for c in s.renderer_changes]))
        writer.write_trees(out, [(s.tree, plan) for s, plan in zip(stacks, plans, strict=True)])  # one commit
        done.written += [(s.name, plan) for s, plan in zip(stacks, plans, strict=True)]
    done.notices = [(s.name, notice) for s in stacks for notice in s.tree.notices]
    done.warnings = out_warnings(out, stacks, found)
    done.paths = sorted({rel for _, plan in done.written for rel in [*plan.write, *plan.delete]})
    if stage:
        work_tree.stage(out, done.paths)
    done.status = work_tree.status(out, done.paths)
    return done


def out_placement(out: Path, checkouts: list[Path]) -> None:
    """OUT checked before anything is read or written (gitops/repo/out_folder.py `placement`). Raises
    OutRefusedError."""
    try:
        out_folder.placement(out, checkouts)
    except out_folder.OwnershipError as exc:
        raise OutRefusedError(exc.lines) from None


def out_warnings(out: Path, stacks: list[Stack], found: dict[str, StackWalk]) -> list[OutWarning]:
    """What an export into OUT went ahead with but the user should see on the terminal: OUT is no Git work tree (no
    diff shows the change), a stack's bootstrap folder is not there (the repository's own files were not checked), a
    Kustomization points at a path OUT does not hold (Flux fails it). One warning per cause."""
    warnings: list[OutWarning] = []
    if not out_folder.is_work_tree(out):
        warnings.append(OutWarning(f"{out} is not a Git work tree: no diff will show this export",
                                   "give --out the root of your GitOps repository (a git clone)"))
    for s in stacks:
        boot = s.tree.layout.bootstrap_path.removeprefix("./").strip("/")
        if found[s.name].fresh:
            warnings.append(OutWarning(
                f"{s.name}: {out} has no {boot}/: Flux is not bootstrapped there, the repository was not checked",
                f"run `flux bootstrap` with --path={boot}, or set flux.bootstrapPath in Pulumi.{s.name}.yaml"))
        missing = sorted({ks.shown_path for ks in found[s.name].after.kustomizations.values()
                          if ks.status == "external"})
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            warnings.append(OutWarning(
                f"{s.name}: {missing[0]}{more}: not in {out}; Flux fails a Kustomization whose path is missing",
                f"add the folders, or fix the paths (flux.tiers in Pulumi.{s.name}.yaml); "
                f"{s.tree.layout.records}/{DELIVERY_FILE} lists them all"))
    return warnings


def remove(stacks: list[Stack], out: Path) -> Exported:
    """Take every stack's export out of OUT: the files its index owns (when they still hold what it wrote), the lines
    it keeps in hand-written files, the index last. What stays is the repository as it was before the first export.
    No walk: only the export's own files and lines go, and nothing may depend on what it exports."""
    done = Exported()
    with _opened(out, stacks, exclusive=True, done=done) as records:
        problems: list[str] = []
        for s in stacks:
            s.tree.files, s.tree.edits, s.tree.edited = {}, {}, set()
            problems += own_file_lines.place(out, s.tree, {}, records[s.name].edits)
        if problems:  # the stacks of a base keep the same lines: each problem once
            raise OutRefusedError(list(dict.fromkeys(problems)))
        plans = [writer.plan_changes(out, s.tree, records[s.name].owned) for s in stacks]
        for s, plan in zip(stacks, plans, strict=True):
            if records[s.name].index is not None:
                plan.delete.append(s.tree.index_path)
            plan.delete = [rel for rel in plan.delete if rel not in {r for p in done.written for r in p[1].delete}]
            done.written.append((s.name, plan))
        writer.write_trees(out, [(s.tree, plan) for s, plan in zip(stacks, plans, strict=True)])  # one commit
    return done


def check(stacks: list[Stack], out: Path, kyverno: Path | None = None) -> Checked:
    """Compare OUT with what the export would write, under the shared lock; writes nothing to the repository.
    `kyverno`: the CLI that runs the repository's own Kyverno policies on each stack's objects first (its scratch
    files in a private temporary folder); what they refuse is an OutRefusedError."""
    combine(stacks)
    with _opened(out, stacks, exclusive=False) as records:
        against_repository(out, stacks, records)
        judged = _kyverno_judges(out, stacks, kyverno) if kyverno is not None else []
        pending = [s.name for s in stacks if records[s.name].interrupted]
        differences = _once([line for s in stacks for line in writer.drift(out, s.tree, records[s.name].owned)])
    return Checked(pending=pending, differences=differences, judged=judged)


def _kyverno_judges(out: Path, stacks: list[Stack], cli: Path) -> list[str]:
    """Each stack's objects as the program declares them (a shared base's files hold ${TOKEN}s Flux substitutes), as
    that stack's cluster: one line per stack of what was judged, or the refusals."""
    policies = kyverno.repository_policies(out)
    judged: list[str] = []
    problems: list[str] = []
    for s in stacks:
        written = {o.path for o in s.tree.objects}
        objects = [o for o in collect_objects(s.capture, s.tree.layout) if o.path in written]
        # Kyverno's input in a private temporary folder: a check writes nothing into the repository
        with tempfile.TemporaryDirectory(prefix=f"gpu-platform-kyverno-{s.name}-") as work:
            try:
                run = kyverno.run_kyverno(cli, policies, [o.manifest for o in objects], Path(work))
            except kyverno.KyvernoRunError as exc:
                problems.append(f"{cli}: {exc}; hint: the project is tested with the Kyverno CLI v1.19.1 (make "
                                "tools builds it); take the CLI off PATH to check without it")
                continue
        problems += kyverno.refusals(run, policies, {kyverno.ident(o.manifest): o.path for o in objects})
        judged.append(f"{s.name}: the repository's {len(policies)} Kyverno policies judged {len(objects)} objects")
    if problems:
        raise OutRefusedError(problems)
    return judged


def _once(lines: list[str]) -> list[str]:
    """Drift lines with each file's block once: a shared base's files are every stack's."""
    out: list[str] = []
    seen: set[str] = set()
    keep = True
    for line in lines:
        if not line.startswith("  "):  # a file's header line; its diff lines follow, indented
            keep = line not in seen
            seen.add(line)
        if keep:
            out.append(line)
    return out


def restyle_and_place_lines(out: Path, stacks: list[Stack], records: dict[str, Records]) -> None:
    """The trees fitted to the repository: restyled to its yamllint, the export's lines placed in its own files (from
    what each stack's last export kept, `records`). Raises OutRefusedError."""
    problems = own_file_lines.restyle([s.tree for s in stacks], out)
    # A line another stack's index records is the export's too (the stacks of a base keep the same lines).
    exports_own: dict[str, dict[str, Any]] = {}
    for r in records.values():
        for rel, spec in r.edits.items():
            mine = exports_own.setdefault(rel, {"resources": [], "data": {}})
            mine["resources"] += [e for e in spec.get("resources", []) if e not in mine["resources"]]
            mine["data"].update(spec.get("data", {}))
    for s in stacks:
        problems += own_file_lines.place(out, s.tree, s.tokens, records[s.name].edits, exports_own)
    if problems:  # the stacks of a base keep the same lines: each problem once
        raise OutRefusedError(list(dict.fromkeys(problems)))


def check_repository(out: Path, stacks: list[Stack], owned: dict[str, dict[str, str]]) -> dict[str, StackWalk]:
    """Walk OUT as Flux would, as it is and as it will be with every stack's files written and stale ones pruned,
    and refuse what breaks delivery (OutRefusedError). Returns what each stack's walk found; changes no tree."""
    writes = {rel: content for s in stacks for rel, content in s.tree.files.items()}
    deletes = {rel for s in stacks for rel in owned[s.name] if rel not in writes}  # another stack may still write it
    before, after = RepoView(out), RepoView(out, writes, deletes)
    problems: list[str] = []
    found: dict[str, StackWalk] = {}
    for s in stacks:
        walked = before_and_after(s.tree, s.outputs.flux_graph, before, after, s.outputs.gpu_apps, s.app_keys)
        walk_problems = check_stack(walked, s.outputs.flux_graph, after, set(owned[s.name]), len(s.outputs.nodes))
        problems += walk_problems
        refused, told = check_references(s.tree, walked.after, s.outputs.gpu_apps, walked.fresh, bool(walk_problems),
                                         s.app_keys)
        problems += refused + check_admin_access(walked.after, s.outputs.dra_migration)
        walked.notices += told
        found[s.name] = walked
    if problems:  # the stacks of a base see one repository: a problem of a file they share, once
        raise OutRefusedError(list(dict.fromkeys(problems)))
    return found


def add_reports_and_index(out: Path, stacks: list[Stack], found: dict[str, StackWalk]) -> None:
    """Each tree finished with what its walk found: the notices, DELIVERY.md, POST-MERGE.md and the Chainsaw suite
    (gitops/reports/), and, last, the index of every file with the stack outputs as exported (gitops/index.py); then
    every YAML file of the run judged by the repository's own yamllint. Raises OutRefusedError."""
    view = RepoView(out)
    for s in stacks:
        after = found[s.name].after
        s.tree.notices += found[s.name].notices
        s.renderer_changes = changes_of(s.tree, s.outputs.gpu_apps, after, lambda rel: _read_or_none(view, rel))
        s.tree.files[f"{s.tree.layout.records}/{DELIVERY_FILE}"] = \
            delivery_markdown(s.tree, after, s.renderer_changes, s.outputs.flux_graph.adopted_driver,
                              {n: a.adopted for n, a in s.outputs.gpu_apps.items() if a.adopted}).encode()
        add_post_merge(s.tree, s.outputs, after)
        s.tree.files[s.tree.index_path] = index_json(s.name, s.tree.files, s.tree.external_paths, s.tree.edits,
                                                     s.tree.edited, s.capture.stack_outputs)
    problems = lint_problems([s.tree for s in stacks], out)
    if problems:
        raise OutRefusedError(problems)


def _read_or_none(view: RepoView, rel: str) -> bytes | None:
    try:
        return view.read(rel)
    except (OSError, ValueError):
        return None


def check_replacements(out: Path, stacks: list[Stack]) -> None:
    """A change Kubernetes will not make in place (gitops/plan/plan.py `replacements`) is refused, one line per
    object, unless the stack file accepts it (`replacement_verdicts`); what is accepted becomes a notice, so
    DELIVERY.md and the terminal tell the reviewer. Raises OutRefusedError."""
    problems: list[str] = []
    for s in stacks:
        s.changes = object_steps(s.tree, read_current(out, s.tree), s.outputs.flux_graph.bootstrap.key)
        refused, notices = replacement_verdicts(s, [step for step in s.changes if step.op == "replace"], out)
        problems += refused
        s.tree.notices += notices
    if problems:
        raise OutRefusedError(problems)


def replacement_verdicts(s: Stack, found: list[Step], out: Path) -> tuple[list[str], list[str]]:
    """For the replace steps of a stack: the refusals (one line per object: the fields, old -> new, what Flux does,
    the safe path, and how to accept it) and the notices (each object the stack file's gitops.acceptReplacement
    accepts; an accepted object that replaces nothing, so the entry is to be removed after the merge)."""
    accepted = set(s.outputs.accept_replacement)
    refused: list[str] = []
    notices: list[str] = []
    for step in found:
        ref = shown_object(step.object or {})
        changes = "; ".join(f"{c.path}: {shown(c.old)} -> {shown(c.new)} ({c.replace})"
                            for c in step.changes if c.replace)
        if ref in accepted:
            notices.append(f"{ref} is replaced on purpose (gitops.acceptReplacement): {changes}; Flux's apply fails "
                           "until the object is deleted and created again, by hand or with `force: true` "
                           f"({_LOSS.get(str((step.object or {}).get('kind')), 'the object starts from scratch')}); "
                           f"remove the entry from Pulumi.{s.name}.yaml after the merge")
            continue
        fails = step.flux[1].removeprefix("Flux: ").removesuffix(" the change never lands.").rstrip(";")
        safe = step.flux[3].removeprefix("Safe path: ").rstrip(".")
        refused.append(f"{out / (step.file or '')}: {ref}: {changes}; {fails}; hint: {safe}; or, to replace it on "
                       f"purpose, add `{ref}` to gitops.acceptReplacement in Pulumi.{s.name}.yaml")
    for ref in sorted(accepted - {shown_object(step.object or {}) for step in found}):
        notices.append(f"gitops.acceptReplacement: {ref}: nothing of this export replaces it; remove the entry from "
                       f"Pulumi.{s.name}.yaml")
    return refused, notices


_LOSS = {"PersistentVolumeClaim": "every file on the volume is lost"}


def against_repository(out: Path, stacks: list[Stack], records: dict[str, Records]) -> dict[str, StackWalk]:
    """restyle_and_place_lines, the replacements, check_repository and add_reports_and_index: the trees as the run
    writes them, against OUT as `opened` found it. Returns what each stack's walk found."""
    restyle_and_place_lines(out, stacks, records)
    check_replacements(out, stacks)
    found = check_repository(out, stacks, {name: r.owned for name, r in records.items()})
    add_reports_and_index(out, stacks, found)
    return found


@contextmanager
def _opened(out: Path, stacks: list[Stack], exclusive: bool,
            done: Exported | None = None) -> Iterator[dict[str, Records]]:
    """OUT opened for the stacks (gitops/repo/out_folder.py), every refusal made one OutRefusedError that keeps what
    completing interrupted exports did."""
    recovered = done.recovered if done is not None else []
    try:
        with out_folder.opened(out, [s.tree for s in stacks], exclusive, recovered) as records:
            yield records
    except OutRefusedError as exc:
        raise OutRefusedError(exc.lines, recovered=recovered) from None
    except out_folder.OwnershipError as exc:
        raise OutRefusedError(exc.lines, written=exc.partial, recovered=recovered) from None
    except OSError as exc:  # the last net: a filesystem that fails in a way no check foresaw
        where = exc.filename or out
        raise OutRefusedError([f"{where}: {exc.strerror or type(exc).__name__}; hint: fix the cause and run the export "
                          "again"], recovered=recovered) from None


# --- 3. compare (the preview) ------------------------------------------------------------------------------------

def references(stack: Stack, out: Path) -> list[tuple[str, str]]:
    """What the evidence gate says of the apps the repository delivers, on Flux's walk of OUT as it is: (level, line),
    `error` for what the export would refuse. Read under the shared lock; empty when the repository delivers none."""
    if not any(app.by_repository for app in stack.outputs.gpu_apps.values()) or not out.is_dir():
        return []
    graph = stack.outputs.flux_graph
    with out_folder.out_lock(out, exclusive=False):
        view = RepoView(out)
        fresh = not view.is_dir(stack.tree.layout.bootstrap_path.removeprefix("./"))
        walked = walk_from_bootstrap(view, stack.tree.layout.bootstrap_path, graph.bootstrap.key,
                                     graph.bootstrap.source_key)
        changes = changes_of(stack.tree, stack.outputs.gpu_apps, walked, lambda rel: _read_or_none(view, rel))
    refused, told = check_references(stack.tree, walked, stack.outputs.gpu_apps, fresh, app_keys=stack.app_keys)
    told += ["\n".join([c.line(), *(f"      {line}" for line in c.diff)]) for c in changes]
    return [("error", f"the export refuses: {line}") for line in refused] + [("warning", line) for line in told]


def compare(stack: Stack, out: Path) -> Compared:
    """What OUT holds for the stack, read under the shared lock (never a half-written tree); nothing is written.
    Raises OutRefusedError for an OUT it cannot read."""
    try:
        out_folder.check_out(out, creating=False)
        with out_folder.out_lock(out, exclusive=False):
            current = read_current(out, stack.tree)
            pending = out.is_dir() and out_folder.interrupted(out, stack.name)
    except out_folder.OwnershipError as exc:
        raise OutRefusedError(exc.lines) from None
    except OSError as exc:
        raise OutRefusedError([f"{exc.filename or out}: {exc.strerror or type(exc).__name__}; hint: check that OUT is "
                          f"readable"]) from None
    return Compared(current=current, pending=pending)
