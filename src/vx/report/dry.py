"""Print the plan of `--dry`: what each task would do, without running anything.

The plan is the command's product, so it goes to stdout alone, text or JSON, with no colour:
it is meant to be read by a person at a glance or by a script byte for byte.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence, TextIO

from vx.errors import UsageError
from vx.events import PlannedTask
from vx.report.plain import Sink

DRY_FORMATS = ("text", "json")
# Count-line order; a status not listed here is counted after these, in order of appearance.
_PREDICTED_ORDER = ("hit-local", "hit-remote", "miss", "no-cache", "not-started", "@noop")
_HEADER = ("TASK", "PREDICTED", "KEY", "COMMAND")


def planned_dict(task: PlannedTask) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": str(task.id),
        "project": task.id.package,
        "task": task.id.task,
        "predicted": task.predicted,
        "key": task.key,
        "command": task.command,
        "deps": [str(d) for d in task.deps],
        "dir": task.project_dir,
        # A cached task's input files and their identities, as its key folds them (the project's
        # package.json is folded on its own); null for a group or an uncached task.
        "inputs": dict(task.inputs) if task.inputs is not None else None,
    }
    if (
        task.implicit
    ):  # made by vx (keyed on the project's files, an Nx one's on its deps'): no command
        row["implicit"] = True
    return row


def dry_json(plan: Sequence[PlannedTask]) -> str:
    return json.dumps({"tasks": [planned_dict(t) for t in plan]}, indent=2) + "\n"


def dry_table(plan: Sequence[PlannedTask]) -> list[str]:
    """Align columns: task, predicted status, key, command; then the count line."""
    rows = [_HEADER] + [
        (str(t.id), t.predicted, t.key or "-", t.command or ("(implicit)" if t.implicit else "-"))
        for t in plan
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), row[-1]]) for row in rows]
    return lines + [count_line(plan)]


def count_line(plan: Sequence[PlannedTask]) -> str:
    """Count `3 tasks · 1 hit-local · 2 miss · 1 group`: groups are folders, not tasks."""
    tally = Counter(t.predicted for t in plan)
    groups = tally.pop("group", 0)
    total = sum(tally.values())
    order = [s for s in _PREDICTED_ORDER if s in tally] + [
        s for s in tally if s not in _PREDICTED_ORDER
    ]
    parts = [f"{total} {'task' if total == 1 else 'tasks'}"] + [f"{tally[s]} {s}" for s in order]
    if groups:
        parts.append(f"{groups} {'group' if groups == 1 else 'groups'}")
    return " · ".join(parts)


def render_dry(plan: Sequence[PlannedTask], fmt: str, out: TextIO) -> None:
    """Write the plan to `out` (stdout): nothing else belongs there under `--dry`."""
    if fmt not in DRY_FORMATS:
        raise UsageError(
            f"unknown --dry format `{fmt}`", hint="use --dry, --dry=text or --dry=json"
        )
    sink = Sink(out, out)  # a closed pipe (`--dry | head`) is not an error
    if fmt == "json":
        sink.raw("out", dry_json(plan))
    else:
        sink.lines("out", dry_table(plan))


# ---------------------------------------------------------------- --graph

GRAPH_EXTENSIONS = (".dot", ".gv")
# Fill colours by predicted status; white for anything else (not started).
_FILL = {
    "hit-local": "palegreen",
    "hit-remote": "lightskyblue",
    "miss": "orange",
    "no-cache": "lightgray",
    "group": "violet",
}


def graph_dot(plan: Sequence[PlannedTask]) -> str:
    """The plan as a Graphviz digraph, each task filled by its predicted status, an edge from each
    task to what it depends on."""
    lines = [
        "digraph vx {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="monospace"];',
    ]
    for task in plan:
        colour = _FILL.get(task.predicted, "white")
        lines.append(
            f'  {_quoted(str(task.id))} [fillcolor="{colour}", tooltip={_quoted(task.predicted)}];'
        )
    for task in plan:
        lines += [f"  {_quoted(str(task.id))} -> {_quoted(str(dep))};" for dep in task.deps]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return json.dumps(text)  # DOT's quoted IDs escape `"` and `\` as JSON does


def graph_target(value: str) -> str:
    """`--graph=<path>`: a DOT file; any other extension is refused (vx draws no images itself)."""
    if value and not value.endswith(GRAPH_EXTENSIONS):
        raise UsageError(
            f"`--graph={value}`: vx writes Graphviz DOT, so the file must end in .dot or .gv",
            hint="write --graph=plan.dot, then e.g. `dot -Tsvg plan.dot -o plan.svg`",
        )
    return value
