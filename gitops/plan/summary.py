"""What one export changed in OUT, short, for the pull request: objects created, updated, replaced and deleted (the
preview's plan, object by object), the GPU gate and the next step. The terminal prints it after each export;
`--summary FILE` writes it as Markdown for the pull request's description; `--json` carries it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gitops.plan.plan import Step, shown_object
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


@dataclass(frozen=True)
class ChangeSummary:
    stack: str
    changes: tuple[ObjectChange, ...]
    gate: tuple[tuple[str, str], ...]  # (GPU app, how it reaches the GPU in this export)
    next_step: str

    def counts(self) -> dict[str, int]:
        found = Counter(change.op for change in self.changes)
        return {op: found[op] for op in OPS}

    def headline(self) -> str:
        counts = self.counts()
        if not self.changes:
            return f"{self.stack}: no object changes"
        return f"{self.stack}: " + ", ".join(f"{n} to {op}" for op, n in counts.items() if n)

    def text(self) -> list[str]:
        lines = [self.headline()]
        for change in self.changes[:_SHOWN]:
            fields = f" ({', '.join(change.fields[:3])}{', …' if len(change.fields) > 3 else ''})" \
                if change.fields else ""
            lines.append(f"  {_MARK[change.op]} {change.object}{fields}")
        if len(self.changes) > _SHOWN:
            lines.append(f"  … and {len(self.changes) - _SHOWN} more (make preview lists every field)")
        if self.gate:
            lines.append("  gate: " + ", ".join(f"{app} on {access}" for app, access in self.gate))
        lines.append(f"  next: {self.next_step}")
        return lines

    def markdown(self) -> str:
        lines = [f"### gpu-platform: `{self.stack}`", "", self.headline().split(": ", 1)[1] + ".", ""]
        if self.changes:
            lines += ["| change | object | file |", "| --- | --- | --- |"]
            lines += [f"| {c.op} | `{c.object}` | `{c.file}` |" for c in self.changes]
            lines.append("")
        if self.gate:
            lines += ["GPU gate: " + ", ".join(f"`{app}` on **{access}**" for app, access in self.gate) + ".", ""]
        lines += [f"Next: {self.next_step}", ""]
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {"counts": self.counts(),
                "changes": [{"op": c.op, "object": c.object, "file": c.file, "fields": list(c.fields)}
                            for c in self.changes],
                "gate": {app: access for app, access in self.gate}, "next": self.next_step}


def summarize(stack: str, steps: list[Step], outputs: ProgramOutputs, records: str) -> ChangeSummary:
    """The change of one stack's export from its object steps (gitops/plan/plan.py `object_steps`); `records`: the
    folder of its POST-MERGE.md."""
    changes = tuple(ObjectChange(step.op, shown_object(step.object or {}), step.file or "",
                                 tuple(c.path for c in step.changes))
                    for step in sorted(steps, key=lambda s: (OPS.index(s.op) if s.op in OPS else 9, s.file or ""))
                    if step.op in OPS)
    gate = tuple(sorted((name, app.access) for name, app in outputs.gpu_apps.items()))
    waiting = [name for name, access in gate if access not in _ON_THE_GPU and access != "none"]
    if waiting:
        next_step = (f"after the merge, the checks of {records}/POST-MERGE.md; then `make verify-nodes STACK={stack}` "
                     f"and export again to move {', '.join(waiting)} onto the GPU")
    else:
        next_step = f"after the merge, the checks of {records}/POST-MERGE.md"
    return ChangeSummary(stack, changes, gate, next_step)


__all__ = ["ChangeSummary", "ObjectChange", "summarize"]
