"""The preview's plan as text, shaped like `pulumi preview --diff` (colour on a terminal only), or as one JSON
document for CI."""

from __future__ import annotations

import json
from typing import Any

from gitops.plan.diff import Change, shown
from gitops.plan.plan import Plan, Step, shown_object

_SYMBOL = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": ""}
_COLOUR = {"create": "32", "add": "32", "update": "33", "replace": "1;35", "delete": "31", "warning": "33",
           "error": "31", "loud": "1;31"}
_CHANGE_SYMBOL = {"add": "+", "delete": "-", "update": "~"}


class _Paint:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, what: str) -> str:
        code = _COLOUR.get(what)
        return f"\033[{code}m{text}\033[0m" if self.on and code and text else text


def shown_pair(old: Any, new: Any) -> tuple[str, str]:
    """Both sides of an update; two long strings that differ past the cut are shown from just before the first
    difference, so the line never reads `"a…" => "a…"`."""
    before, after = shown(old), shown(new)
    if before != after or not (isinstance(old, str) and isinstance(new, str)):
        return before, after
    first = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    start = max(0, first - 40)
    return shown(f"…{old[start:]}"), shown(f"…{new[start:]}")


def _change_line(change: Change) -> str:
    symbol = "+-" if change.replace else _CHANGE_SYMBOL[change.kind]
    if change.kind == "add":
        text = f"{change.path}: {shown(change.new)}"
    elif change.kind == "delete":
        text = f"{change.path}: {shown(change.old)}"
    else:
        before, after = shown_pair(change.old, change.new)
        text = f"{change.path}: {before} => {after}"
    return f"{symbol} {text}"


_Row = tuple[str, str, str, str, str]  # (op, tree prefix + type, name, plan text, kind of row)
_Detail = tuple[str, str, str]  # (prefix, text, colour) of a line under a row


def render_text(plan: Plan, colour: bool = False) -> str:
    paint = _Paint(colour)
    rows, details = _rows(plan)
    against = (f"the tree the last export left in {plan.out} ({plan.index})" if plan.index
               else f"{plan.out}, which holds no export of {plan.stack} (every object is new)")
    lines = [f"Previewing update ({plan.stack}): the export compared with {against}", ""]
    lines += _table(rows, details, paint)
    lines += _outputs_and_diagnostics(plan, paint)
    replaced = [s for s in plan.steps if s.op == "replace"]
    if replaced:
        names = ", ".join(shown_object(s.object or {}) for s in replaced)
        lines += ["", paint(f"!! {len(replaced)} to replace ({names}): Kubernetes refuses these changes in place; "
                            f"see what Flux will do and the safe path above.", "loud")]
    lines += ["", plan.summary_line(), ""]
    return "\n".join(lines)


def _rows(plan: Plan) -> tuple[list[_Row], dict[int, list[_Detail]]]:
    """The resource tree, Stack first: components by type and name, the objects that change, the unchanged ones
    folded into a count (a component with nothing changed below it into one row)."""
    rows: list[_Row] = []
    details: dict[int, list[_Detail]] = {}  # row index -> its lines
    children: dict[str, list[Step]] = {}
    for comp in plan.components:
        children.setdefault(comp.parent, []).append(comp)
    for step in plan.steps:
        children.setdefault(step.parent, []).append(step)

    def unchanged_below(urn: str) -> bool:
        return all(c.op == "same" and (c.object is not None or unchanged_below(c.urn)) for c in children.get(urn, []))

    def count_below(urn: str) -> int:
        return sum(1 if c.object is not None else count_below(c.urn) for c in children.get(urn, []))

    def visit(urn: str, prefix: str) -> None:
        kids = children.get(urn, [])
        # By type and name: the engine's registration order follows the SDK's scheduling, not the program's text.
        comps = sorted((c for c in kids if c.object is None), key=lambda c: (c.type, c.name))
        shown_objects = sorted((c for c in kids if c.object is not None and c.op != "same"),
                               key=lambda c: (c.type, c.name))
        folded = sum(1 for c in kids if c.object is not None and c.op == "same")
        entries: list[Step | int] = [*comps, *shown_objects] + ([folded] if folded else [])
        for i, entry in enumerate(entries):
            last = i == len(entries) - 1
            branch = prefix + ("└─ " if last else "├─ ")
            below = prefix + ("   " if last else "│  ")
            if isinstance(entry, int):
                rows.append(("same", f"{branch}{entry} unchanged", "", "", "fold"))
                continue
            if entry.object is None:
                info = f"{count_below(entry.urn)} unchanged" if unchanged_below(entry.urn) else ""
                rows.append(("same", branch + entry.type, entry.name, info, "component"))
                if not info:
                    visit(entry.urn, below)
                continue
            rows.append((entry.op, branch + entry.type, entry.name, entry.op, "object"))
            lines = [(below + "    ", _change_line(c), "replace" if c.replace else c.kind) for c in entry.changes
                     if entry.op in ("update", "replace")]
            lines += [(below + "    ", f"!! {text}", "loud") for text in entry.flux]
            details[len(rows) - 1] = lines

    warnings = sum(1 for level, _ in plan.diagnostics if level == "warning")
    errors = sum(1 for level, _ in plan.diagnostics if level == "error")
    info = ", ".join(f"{n} {word}{'s' if n > 1 else ''}" for n, word in ((errors, "error"), (warnings, "warning")) if n)
    rows.append(("same", "pulumi:pulumi:Stack", f"{plan.project}-{plan.stack}", info, "stack"))
    visit(plan.root_urn, "")
    return rows, details


def _table(rows: list[_Row], details: dict[int, list[_Detail]], paint: _Paint) -> list[str]:
    type_width = max(len("Type"), *(len(r[1]) for r in rows if r[4] != "fold"))
    name_width = max(len("Name"), *(len(r[2]) for r in rows))
    lines = [f"     {'Type':<{type_width}}  {'Name':<{name_width}}  Plan"]
    for i, (op, type_text, name, plan_text, _) in enumerate(rows):
        symbol = _SYMBOL.get(op, "")
        head = f" {paint(f'{symbol:<2}', op)}  " if symbol else "     "
        if not name and not plan_text:
            lines.append(f"{head}{type_text}")
        else:
            shown_plan = paint(plan_text, op) if symbol else plan_text
            line = f"{head}{type_text:<{type_width}}  {name:<{name_width}}  {shown_plan}"
            lines.append(line.rstrip())
        for prefix, text, what in details.get(i, []):
            lines.append(f"     {prefix}{paint(text, what)}")
    return lines


def _outputs_and_diagnostics(plan: Plan, paint: _Paint) -> list[str]:
    lines = ["", "Outputs:"]
    if not plan.outputs_recorded:
        lines.append(f"    (not compared: {plan.index} records no outputs; the next export records them)")
    for change in plan.outputs:
        lines.append(f"  {paint(_change_line(change), change.kind)}")
    if plan.outputs_unchanged:
        lines.append(f"    {plan.outputs_unchanged} unchanged")
    if plan.diagnostics:
        lines += ["", "Diagnostics:", f"  pulumi:pulumi:Stack ({plan.project}-{plan.stack}):"]
        for level, message in plan.diagnostics:
            lines.append(f"    {paint(level + ':', level)} {message}")
    return lines


def render_json(plan: Plan) -> str:
    steps = []
    for step in sorted(plan.steps, key=lambda s: (s.file or "", s.type, s.name)):
        doc: dict[str, Any] = {"op": step.op, "urn": step.urn, "type": step.type, "name": step.name,
                               "parent": step.parent, "file": step.file, "object": step.object}
        if step.changes:
            doc["diffs"] = [c.as_json() for c in step.changes]
        if step.op == "replace":
            doc["replaceReasons"] = step.replace_reasons
            doc["flux"] = step.flux
        steps.append(doc)
    doc = {
        "stack": plan.stack,
        "out": plan.out,
        "index": plan.index,
        "steps": steps,
        "outputs": {"recorded": plan.outputs_recorded, "changes": [c.as_json() for c in plan.outputs],
                    "unchanged": plan.outputs_unchanged},
        "diagnostics": [{"severity": level, "message": message} for level, message in plan.diagnostics],
        "changeSummary": plan.summary(),
        "summary": plan.summary_line(),
        "refused": plan.refused,  # non-empty: the export would refuse (exit 2), as the preview does
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


