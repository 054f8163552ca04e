"""`vx why TASK`: what moved a task's key between its last two runs, read from the key history
the store keeps (`vx.store.history`)."""

from __future__ import annotations

import json
from typing import Mapping

from vx.cli.args import Args, one_of
from vx.store.history import differences, last_two, unsaved_reason

# ---------------------------------------------------------------- vx why


def why_verb(args: Args, argv: list[str]) -> int:
    import os
    import sys
    from pathlib import Path

    from vx.errors import UsageError

    fmt, names = one_of("--format", args.format, ("text", "json"), "text"), args.names
    if len(names) != 1:
        raise UsageError(
            "name one task: `vx why PKG#TASK` (or a task of the project you stand in)",
            hint="e.g. `vx why web#build`",
        )
    verdict = why(names[0], Path(os.getcwd()), os.environ)
    sys.stdout.write(json.dumps(verdict, indent=2) + "\n" if fmt == "json" else _render(verdict))
    return 0


def why(name: str, cwd, env: Mapping[str, str]) -> dict:
    """What moved the key of the task `name` names (PKG#TASK, or a task of the project at `cwd`)
    between its last two recorded keys, as `vx why --format json` prints it."""
    task_id, rows, unsaved = key_history(name, cwd, env)
    verdict = _verdict(task_id, rows)
    if unsaved:
        verdict["notSaved"] = unsaved
    return verdict


def key_history(name: str, cwd, env: Mapping[str, str]) -> tuple[str, list, str | None]:
    """(the task id, its last two recorded keys with their components newest first, why the
    newest was not saved or None), read from the cache's key history."""
    import sqlite3

    from vx.errors import UsageError
    from vx.plugins.shaped import open_for_verb

    found = open_for_verb(cwd, None, env)
    task_id = _task_id(name, found.ws, cwd)
    cache_dir, store_dir = found.cache_dir, found.store_dir
    path, store = cache_dir / "cache.db", store_dir / "store.db"
    rows: list = []
    unsaved = None
    if path.exists():
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            if store_dir != cache_dir and store.exists():  # whether an entry exists by now
                db.execute("ATTACH DATABASE ? AS store", (f"{store.as_uri()}?mode=ro",))
            rows = last_two(db, task_id)
            if not rows and "#" not in name:  # from the root: the one project that has it
                holders = _holders(db, name)
                if len(holders) > 1:
                    raise UsageError(
                        f"several projects have a `{name}` task",
                        facts=(f"recorded: {', '.join(holders[:8])}",),
                        hint=f"name one: `vx why {holders[0]}`",
                    )
                if holders:
                    task_id, rows = holders[0], last_two(db, holders[0])
            unsaved = unsaved_reason(db, task_id, rows[0][0]) if rows else None
        finally:
            db.close()
    return task_id, rows, unsaved


def _holders(db, task: str) -> list[str]:
    import sqlite3

    try:
        rows = db.execute(
            "SELECT DISTINCT task_id FROM key_history WHERE task_id LIKE ? ESCAPE '\\'",
            ("%#" + task.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"),),
        )
        return sorted(r[0] for r in rows)
    except sqlite3.Error:  # no table yet
        return []


def _task_id(name: str, ws, cwd) -> str:
    from vx.errors import UnknownTaskError
    from vx.plan.tasks import package_of

    if "#" in name:
        package, _, task = name.rpartition("#")
        package = package or "//"
        if package not in ws.packages:
            from vx.errors import suggestion

            raise UnknownTaskError(
                f"no project named `{package}`",
                hint=suggestion(package, ws.packages, noun="projects"),
            )
        return f"{package}#{task}"
    return f"{package_of(ws, cwd)}#{name}"


def _verdict(task_id: str, rows: list) -> dict:
    if not rows:
        return {"task": task_id, "verdict": "unrecorded", "differences": []}
    if len(rows) == 1:
        return {"task": task_id, "verdict": "first", "key": rows[0][0], "differences": []}
    (new_key, new_at, new), (old_key, old_at, old) = rows
    return {
        "task": task_id,
        "verdict": "changed",
        "from": old_key,
        "to": new_key,
        "since": old_at,
        "at": new_at,
        "differences": [{"kind": kind, "what": what} for kind, what in differences(old, new)],
    }


def _render(v: dict) -> str:
    task = v["task"]
    if v["verdict"] == "unrecorded":
        return (
            f"{task}: no key recorded yet — run it with the cache on (`vx run {task}`), then ask again;\n"
            f"  a task id is PKG#TASK, e.g. `vx why web#build`\n"
        )
    unsaved = f"  {v['notSaved']}\n" if v.get("notSaved") else ""
    if v["verdict"] == "first":
        return f"{task}: one key recorded ({v['key']}); nothing to compare it with yet\n" + unsaved
    lines = [f"{task}: the key changed, {v['from']} → {v['to']}"]
    width = max(len(d["kind"]) for d in v["differences"]) if v["differences"] else 0
    for d in v["differences"]:
        hint = f"  → vx why {d['what']}" if d["kind"] == "upstream" else ""
        lines.append(f"  {d['kind']:<{width}}  {d['what']}{hint}")
    if not v["differences"]:
        lines.append("  (the same components: the vx version or the key's fold changed)")
    return "\n".join(lines) + "\n" + unsaved
