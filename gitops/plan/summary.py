"""What the pull request changes, short: objects created, updated, replaced and deleted (the preview's plan, object
by object), the repository's own objects the GPU gate judges (an app it renders, with the fields), the export's lines
in the user's files, the records, the GPU gate and the next step. Measured against the pull request's base (the
merge-base of HEAD with the default branch, or `--base REF`) where OUT is a Git work tree, so exporting twice on a
branch gives the same description; else against OUT as it was. Stacks that share files (a shared base) are one pull
request: an object they share is listed once, with the clusters it goes to. The terminal prints it after each
export; `--summary FILE` writes it as Markdown for the pull request's description; `--json` carries each stack's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from gitops.plan.plan import Step, shown_object
from gitops.reports.renderer_change import RendererChange
from model.outputs import ProgramOutputs

OPS = ("create", "update", "replace", "delete")
_MARK = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}
_SHOWN = 20  # objects listed on the terminal; the rest counted
_ON_THE_GPU = ("device-plugin", "dra-claim")


@dataclass(frozen=True)
class ObjectChange:
    op: str  # create | update | replace | delete
    object: str  # `Kind namespace/name`
    file: str
    fields: tuple[str, ...] = ()  # the changed fields of an update or a replacement
    judged: str = ""  # the repository's own object the gate judges: its GPU access, `before -> after`
    stacks: tuple[str, ...] = ()  # the clusters it goes to (set when the stacks of a run are put together)

    def shown(self, several: bool) -> str:
        if self.judged:
            what = f" (the repository's, GPU access {self.judged}: {'; '.join(self.fields)})"
        else:
            what = f" ({', '.join(self.fields[:3])}{', …' if len(self.fields) > 3 else ''})" if self.fields else ""
        return f"{_MARK[self.op]} {self.object}{what}" + (f" [{', '.join(self.stacks)}]" if several else "")


@dataclass(frozen=True)
class AppGate:
    """One GPU app at the gate: what the gate allows, and what the cluster runs after the merge (an app the
    repository renders keeps its hostPath until the renderer's change lands, whatever the gate allows)."""

    app: str
    allowed: str
    runs: str

    def shown(self) -> str:
        if self.runs == self.allowed:
            return f"{self.app} on {self.allowed}"
        return f"{self.app} on {self.runs}, {self.allowed} allowed (the renderer's change)"


@dataclass(frozen=True)
class ChangeSummary:
    """One stack's part of the pull request."""

    stack: str
    changes: tuple[ObjectChange, ...]
    gate: tuple[AppGate, ...]
    next_step: str
    lines: tuple[str, ...] = ()  # the export's lines this change puts into (or takes out of) the user's files
    records: str = ""  # the stack's records folder, where this change touches it

    def counts(self) -> dict[str, int]:
        found = Counter(change.op for change in self.changes)
        return {op: found[op] for op in OPS}

    def as_json(self) -> dict[str, object]:
        return {"counts": self.counts(),
                "changes": [{"op": c.op, "object": c.object, "file": c.file, "fields": list(c.fields)}
                            | ({"judged": c.judged} if c.judged else {}) for c in self.changes],
                "gate": {g.app: g.allowed for g in self.gate}, "runs": {g.app: g.runs for g in self.gate},
                "lines": list(self.lines), "records": self.records, "next": self.next_step}


@dataclass(frozen=True)
class PullRequest:
    """The stacks of one run as the one pull request they make; `base`: what it is measured against ("" where OUT
    is no Git work tree: against OUT as it was)."""

    summaries: tuple[ChangeSummary, ...]
    base: str = ""
    renderer_changes: tuple[RendererChange, ...] = ()  # step 4: what an app's renderer must change, once per app

    @property
    def stacks(self) -> tuple[str, ...]:
        return tuple(s.stack for s in self.summaries)

    def changes(self) -> list[ObjectChange]:
        """Every change once, with the stacks it goes to, in the first stack's order."""
        merged: dict[ObjectChange, list[str]] = {}
        for s in self.summaries:
            for change in s.changes:
                merged.setdefault(change, []).append(s.stack)
        found = [ObjectChange(c.op, c.object, c.file, c.fields, c.judged, tuple(stacks))
                 for c, stacks in merged.items()]
        return sorted(found, key=lambda c: (OPS.index(c.op) if c.op in OPS else 9, bool(c.judged)))

    def _grouped(self, values: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
        """(text, stacks) for each text, in order of first appearance."""
        grouped: dict[str, list[str]] = {}
        for stack, text in values:
            grouped.setdefault(text, []).append(stack)
        return list(grouped.items())

    def headline(self) -> str:
        counts = Counter(c.op for c in self.changes())
        said = ", ".join(f"{counts[op]} to {op}" for op in OPS if counts[op]) or "no object changes"
        return f"{', '.join(self.stacks)}: {said}" + (f" (against {self.base})" if self.base else "")

    def _lines(self) -> list[str]:
        return list(dict.fromkeys(line for s in self.summaries for line in s.lines))

    def _records(self) -> list[str]:
        return [s.records for s in self.summaries if s.records]

    def text(self) -> list[str]:
        several = len(self.summaries) > 1
        changes = self.changes()
        out = [self.headline(), *(f"  {c.shown(several)}" for c in changes[:_SHOWN])]
        if len(changes) > _SHOWN:
            out.append(f"  … and {len(changes) - _SHOWN} more (make preview lists every field)")
        out += [f"  lines in your files: {line}" for line in self._lines()]
        if self._records():
            out.append(f"  records: {', '.join(self._records())} (DELIVERY.md, POST-MERGE.md, its suite, the index)")
        gates = self._grouped([(s.stack, ", ".join(g.shown() for g in s.gate)) for s in self.summaries if s.gate])
        out += [f"  gate: {text}" + (f" [{', '.join(stacks)}]" if several else "") for text, stacks in gates]
        steps = self._grouped([(s.stack, s.next_step) for s in self.summaries])
        out += [f"  next{_for(stacks, len(steps) > 1)}: {text}" for text, stacks in steps]
        return out

    def markdown(self) -> str:
        several = len(self.summaries) > 1
        base = f" (against `{self.base}`)" if self.base else ""
        out = [f"### gpu-platform: {', '.join(f'`{s}`' for s in self.stacks)}{base}", "",
               self.headline().split(": ", 1)[1].removesuffix(f" (against {self.base})") + ".", ""]
        changes = self.changes()
        if changes:
            column = " clusters |" if several else ""
            out += [f"| change | object | file |{column}", "| --- | --- | --- |" + (" --- |" if several else "")]
            out += [f"| {c.op} | `{c.object}` | `{c.file}` |" + (f" {', '.join(c.stacks)} |" if several else "")
                    for c in changes]
            out.append("")
        for c in changes:
            if c.judged:
                out += [f"`{c.object}` is the repository's own, judged by the GPU gate: GPU access {c.judged}; "
                        "fields (before -> after):", "", *(f"- `{field}`" for field in c.fields), ""]
        out += ["Lines the export keeps in your files: `{}`: `{}`.".format(*line.split(": ", 1))
                for line in self._lines()]
        if self._records():
            out += [f"Records: {', '.join(f'`{r}`' for r in self._records())} (DELIVERY.md, POST-MERGE.md, its "
                    "suite, the index).", ""]
        elif self._lines():
            out.append("")
        gates = self._grouped([(s.stack, ", ".join(f"`{g.app}` on **{g.runs}**" + (
            f" ({g.allowed} allowed: the renderer's change)" if g.runs != g.allowed else "") for g in s.gate))
            for s in self.summaries if s.gate])
        out += [f"GPU gate: {text}" + (f" ({', '.join(stacks)})" if several else "") + "." for text, stacks in gates]
        if gates:
            out.append("")
        steps = self._grouped([(s.stack, s.next_step) for s in self.summaries])
        out += [f"Next{_for(stacks, len(steps) > 1)}: {text}" for text, stacks in steps]
        for change in self.renderer_changes:
            out += ["", *change.markdown()]
        return "\n".join([*out, ""]).replace("\n\n\n", "\n\n")


def _for(stacks: list[str], said: bool) -> str:
    return f" ({', '.join(stacks)})" if said else ""


def summarize(stack: str, steps: list[Step], outputs: ProgramOutputs, records: str,
              runs: Mapping[str, str] | None = None, judged: tuple[ObjectChange, ...] = (),
              lines: tuple[str, ...] = (), records_changed: bool = False) -> ChangeSummary:
    """The change of one stack's export from its object steps (gitops/plan/plan.py `object_steps`); `records`: the
    folder of its POST-MERGE.md; `runs`: what the cluster runs of each app the repository delivers (default: what
    the gate allows); `judged`: the repository's own objects the gate judges that changed; `lines`: the export's
    lines in the user's files that changed; `records_changed`: whether the records folder changed."""
    changes = tuple(ObjectChange(step.op, shown_object(step.object or {}), step.file or "",
                                 tuple(c.path for c in step.changes))
                    for step in sorted(steps, key=lambda s: (OPS.index(s.op) if s.op in OPS else 9, s.file or ""))
                    if step.op in OPS)
    gate = tuple(AppGate(name, app.access, (runs or {}).get(name) or app.access)
                 for name, app in sorted(outputs.gpu_apps.items()))
    waiting = [g.app for g in gate if g.allowed not in _ON_THE_GPU and g.allowed != "none"]
    moving = [g.app for g in gate if g.allowed in _ON_THE_GPU and g.runs != g.allowed]
    next_step = f"after the merge, the checks of {records}/POST-MERGE.md"
    if moving:
        next_step = (f"the renderer's change of {', '.join(moving)} (printed above, and in {records}/DELIVERY.md) in "
                     f"this pull request or the next; {next_step}")
    if waiting:
        next_step += (f"; then `make verify-nodes STACK={stack}` and export again to move {', '.join(waiting)} onto "
                      "the GPU")
    return ChangeSummary(stack, (*changes, *judged), gate, next_step, lines, records if records_changed else "")


__all__ = ["AppGate", "ChangeSummary", "ObjectChange", "PullRequest", "summarize"]
