"""`vx why TASK`: what moved a task's key between its last two runs, read from the key history
the store keeps (`vx.store.history`); `--run RUNID`, between a run named by its id and the last."""

from __future__ import annotations

import json
from typing import Mapping

from vx.cli.args import Args, one_of
from vx.store.history import differences, kept, last_two, unsaved_reason

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
    cwd = Path(os.getcwd())
    if args.run is not None:
        verdict = why_run(names[0], args.run, cwd, os.environ)
    else:
        verdict = why(names[0], cwd, os.environ)
    sys.stdout.write(json.dumps(verdict, indent=2) + "\n" if fmt == "json" else _render(verdict))
    return 0


def why(name: str, cwd, env: Mapping[str, str]) -> dict:
    """Why the task `name` names (PKG#TASK, Nx's PKG:TASK, or a task of the project at `cwd`)
    did what it did in the last run, as `vx why --format json` prints it: a hit and since when
    its key is unchanged, else what moved its key between its last two recorded keys; with no
    history at all, what its key is folded from now (the plan)."""
    task_id, rows, unsaved = key_history(name, cwd, env)
    last = last_run(cwd, task_id, env)
    verdict = _verdict(task_id, rows, last)
    if unsaved:
        verdict["notSaved"] = unsaved
    if not rows and last is None:
        verdict.update(planned(task_id, cwd, env))
    return verdict


def why_run(name: str, prefix: str, cwd, env: Mapping[str, str]) -> dict:
    """What moved the task's key between the run whose id starts `prefix` and its latest run, as
    `vx why --run --format json` prints it. An unknown or ambiguous prefix, or a run that did
    not have the task, is refused."""
    task_id, _rows, _unsaved = key_history(name, cwd, env)
    then = _run_key(prefix, task_id, cwd, env)
    last = last_run(cwd, task_id, env) or then  # the named run had the task: one is on record
    verdict: dict = {"task": task_id, "run": then, "lastRun": last}
    if then["key"] == last["key"]:
        return {**verdict, "verdict": "same", "key": last["key"], "differences": []}
    old, new = _kept_records(task_id, (then["key"], last["key"]), cwd, env)
    verdict.update({"verdict": "changed", "from": then["key"], "to": last["key"]})
    verdict["differences"] = []
    if old is None or new is None:  # the history keeps a task's last few keys only
        verdict["componentsKept"] = False
        return verdict
    found = differences(old, new)
    verdict["differences"] = [{"kind": kind, "what": what} for kind, what in found]
    return verdict


def _run_key(prefix: str, task_id: str, cwd, env: Mapping[str, str]) -> dict:
    """The task's row of the run whose id starts `prefix`: its id, start, key, status, cache."""
    from vx.cli.last import open_history, pick
    from vx.errors import NoHistoryError, UsageError

    package, _, task = task_id.rpartition("#")
    _cache_dir, db = open_history(cwd, None, env)
    if db is None:
        raise NoHistoryError("no run recorded yet", hint="run the task first, e.g. `vx run build`")
    try:
        run = pick(db, prefix, False)
        assert run is not None  # pick refuses a prefix that names no run
        row = db.execute(
            "SELECT hash, status, cache FROM runs WHERE run_id=? AND project=? AND task=?"
            " ORDER BY id DESC LIMIT 1",
            (run["run_id"], package, task),
        ).fetchone()
    finally:
        db.close()
    if row is None:
        raise UsageError(
            f"run {run['run_id']} did not include {task_id}",
            facts=(f"it ran: {run['command']}",),
            hint=f"`vx last {run['run_id']}` lists its tasks; `vx last --list` shows other runs",
        )
    key, status, cache = row
    at = run["started_at"]
    return {"runId": run["run_id"], "at": at, "key": key, "status": status, "cache": cache}


def _kept_records(task_id: str, keys: tuple[str, str], cwd, env: Mapping[str, str]) -> list:
    """The components the key history keeps for each of `keys` (None for one it no longer has)."""
    import sqlite3

    from vx.plugins.shaped import open_for_verb

    path = open_for_verb(cwd, None, env).cache_dir / "cache.db"
    if not path.exists():
        return [None for _key in keys]
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        found = [kept(db, task_id, key) for key in keys]
    finally:
        db.close()
    return [None if hit is None else hit[1] for hit in found]


def key_history(name: str, cwd, env: Mapping[str, str]) -> tuple[str, list, str | None]:
    """(the task id, its last two recorded keys with their components newest first, why the
    newest was not saved or None), read from the cache's key history. A name the workspace does
    not have is refused with the nearest one (a task only the history knows, since removed from
    its config, is still answered)."""
    import sqlite3

    from vx.errors import UnknownTaskError
    from vx.plugins.shaped import open_for_verb, shaped_projects

    found = open_for_verb(cwd, None, env)
    try:
        task_id = resolve_task(name, *shaped_projects(found.ws, env), cwd)
        refused = None
    except UnknownTaskError as exc:
        task_id, refused = name, exc
    cache_dir, store_dir = found.cache_dir, found.store_dir
    path, store = cache_dir / "cache.db", store_dir / "store.db"
    rows: list = []
    unsaved = None
    if path.exists():
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            if store_dir != cache_dir and store.exists():  # whether an entry exists by now
                db.execute("ATTACH DATABASE ? AS store", (f"{store.as_uri()}?mode=ro",))
            rows = last_two(db, task_id) if "#" in task_id else []
            unsaved = unsaved_reason(db, task_id, rows[0][0]) if rows else None
        finally:
            db.close()
    if refused is not None and not rows:
        raise refused
    return task_id, rows, unsaved


def resolve_task(name: str, ws, configs: Mapping, cwd) -> str:
    """The task id `name` stands for, as `vx run` reads it: PKG#TASK (`#TASK` the root's),
    Nx's PKG:TASK, or a bare task — the project's at `cwd`, or from the root the one project
    that declares it. A name that resolves to no task is refused with the nearest one."""
    from vx.errors import UnknownTaskError, UsageError, suggestion
    from vx.model import ROOT_PROJECT
    from vx.plan.graph import task_of
    from vx.plan.tasks import package_of

    declared = sorted({task for config in configs.values() for task in config.tasks})
    if "#" not in name and ":" in name:  # Nx's project:target, unless a task is named so
        package, _, task = name.partition(":")
        if package in ws.packages and name not in declared:
            name = f"{package}#{task}"
    if "#" in name:
        package, _, task = name.rpartition("#")
        package = package or ROOT_PROJECT
        if package not in ws.packages:
            raise UnknownTaskError(
                f"no project named `{package}`",
                hint=suggestion(package, ws.packages, noun="projects"),
            )
        if task_of(configs, package, task) is None:
            raise UnknownTaskError(
                f"project `{package}` has no task `{task}`",
                hint=suggestion(task, configs[package].tasks, noun="tasks")
                or "`vx show` lists each project's tasks",
            )
        return f"{package}#{task}"
    here = package_of(ws, cwd)
    if name in configs[here].tasks or (here != ROOT_PROJECT and task_of(configs, here, name)):
        return f"{here}#{name}"
    holders = [p for p in sorted(configs) if name in configs[p].tasks]
    if not holders:
        raise UnknownTaskError(
            f"no project declares a task named `{name}`",
            hint=suggestion(name, declared, noun="tasks"),
        )
    shown = ", ".join(holders[:8]) + (", …" if len(holders) > 8 else "")
    if here != ROOT_PROJECT:
        raise UnknownTaskError(
            f"project `{here}` has no task `{name}`",
            facts=(f"declared by: {shown}",),
            hint=f"name one: `vx why {holders[0]}#{name}`",
        )
    if len(holders) > 1:
        raise UsageError(
            f"several projects have a `{name}` task",
            facts=(f"declared by: {shown}",),
            hint=f"name one: `vx why {holders[0]}#{name}`",
        )
    return f"{holders[0]}#{name}"


HIT_CACHES = ("local", "remote", "up-to-date")


def last_run(cwd, task_id: str, env: Mapping[str, str]) -> dict | None:
    """The task's row of the latest recorded run that had it (`vx.store.runs`), with when that
    run started and since when its key has been the same (the first run of the streak of runs
    with that key); None when no run on record had it."""
    import sqlite3

    from vx.cli.last import open_history

    package, _, task = task_id.rpartition("#")
    _cache_dir, db = open_history(cwd, None, env)
    if db is None:
        return None
    try:
        row = db.execute(
            "SELECT r.id, r.run_id, r.hash, r.status, r.cache, i.started_at FROM runs r"
            " JOIN invocations i ON i.run_id = r.run_id WHERE r.project=? AND r.task=?"
            " ORDER BY r.id DESC LIMIT 1",
            (package, task),
        ).fetchone()
        if row is None:
            return None
        row_id, run, key, status, cache, at = row
        (since,) = db.execute(
            "SELECT MIN(i.started_at) FROM runs r JOIN invocations i ON i.run_id = r.run_id"
            " WHERE r.project=? AND r.task=? AND r.hash=? AND r.id > COALESCE((SELECT MAX(id)"
            " FROM runs WHERE project=? AND task=? AND hash != ? AND id < ?), 0)",
            (package, task, key, package, task, key, row_id),
        ).fetchone()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return {"runId": run, "at": at, "key": key, "status": status, "cache": cache, "since": since}


def planned(task_id: str, cwd, env: Mapping[str, str]) -> dict:
    """What the task's key is folded from now, read off the plan (as `vx run --dry` makes it):
    for a fresh clone, whose history is empty. Env variables by name only."""
    from pathlib import Path

    from vx import witness
    from vx.model import TaskId
    from vx.prepare import RunRequest, prepare
    from vx.stages import Stages

    package, _, task = task_id.rpartition("#")
    request = RunRequest(cwd=Path(cwd), names=(task_id,), dry=True)
    prep = prepare(request, witness.ReadEnv(env), Stages(False, 0.0))
    try:
        plan = prep.plans[TaskId(package, task)]
        node = prep.graph.nodes[TaskId(package, task)]
    finally:
        if prep.store is not None:
            prep.store.close()
        if prep.plugins is not None:
            prep.plugins.teardown()
    out: dict = {"verdict": "planned", "cached": plan.outputs is not None}
    if plan.outputs is None and not node.config.implicit:
        return out
    record = plan.record
    out.update(
        key=plan.key,
        predicted="hit-local"
        if plan.key in prep.hits
        else "hit-remote"
        if plan.key in prep.remote_hits
        else "miss",
        inputs=[path for path, _identity in plan.inputs.files] if plan.inputs else [],
        env=[name for name, _value in record.env] if record else [],
        upstream=dict(record.upstream) if record else {},
        forwardArgs=bool(record.forward_args) if record else False,
    )
    return out


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


def _verdict(task_id: str, rows: list, last: dict | None = None) -> dict:
    if last is not None and last["cache"] in HIT_CACHES and last["status"] != "failed":
        verdict: dict = {
            "task": task_id,
            "verdict": "hit",
            "key": last["key"],
            "since": last["since"],
            "lastRun": last,
            "differences": [],
        }
        if len(rows) == 2 and rows[0][0] == last["key"]:  # and what moved it to that key
            verdict["lastChange"] = _changed(rows)
        return verdict
    if not rows:
        verdict = {"task": task_id, "verdict": "unrecorded", "differences": []}
    elif len(rows) == 1:
        verdict = {"task": task_id, "verdict": "first", "key": rows[0][0], "differences": []}
    else:
        verdict = {"task": task_id, "verdict": "changed", **_changed(rows)}
    if last is not None:
        verdict["lastRun"] = last
    return verdict


def _changed(rows: list) -> dict:
    (new_key, new_at, new), (old_key, old_at, old) = rows
    return {
        "from": old_key,
        "to": new_key,
        "since": old_at,
        "at": new_at,
        "differences": [{"kind": kind, "what": what} for kind, what in differences(old, new)],
    }


def _render(v: dict) -> str:
    task, verdict = v["task"], v["verdict"]
    if "run" in v:
        return "\n".join(_against_run(task, v)) + "\n"
    unsaved = [f"  {v['notSaved']}"] if v.get("notSaved") else []
    if verdict == "hit":
        last = v["lastRun"]
        lines = [
            f"{task}: a cache hit ({last['cache']}) in the last run, {_when(last['at'])} "
            f"(`vx last {last['runId'][:8]}`)",
            f"  key {v['key']}, unchanged since {_when(v['since'])}",
        ]
        if v.get("lastChange"):
            change = v["lastChange"]
            lines.append(f"  before that it changed, {change['from']} → {change['to']}:")
            lines += _differences(change["differences"], "    ")
        return "\n".join(lines) + "\n"
    if verdict == "planned":
        return "\n".join(_planned(task, v)) + "\n"
    if verdict == "unrecorded":
        lines = [
            f"{task}: no key on record: the runs on record kept none for it (it is not "
            "cached, or they ran without the cache)"
        ]
    elif verdict == "first":
        lines = [f"{task}: one key recorded ({v['key']}); nothing to compare it with yet"]
    else:
        lines = [f"{task}: the key changed, {v['from']} → {v['to']}"]
        lines += _differences(v["differences"], "  ")
    if v.get("lastRun"):
        last = v["lastRun"]
        lines.append(
            f"  the last run, {_when(last['at'])}: {_outcome(last)} (`vx last {last['runId'][:8]}`)"
        )
    return "\n".join(lines + unsaved) + "\n"


def _against_run(task: str, v: dict) -> list[str]:
    """`vx why --run`'s answer: the key then against the key of the latest run."""
    then, last = v["run"], v["lastRun"]
    named = f"run {then['runId']} ({_when(then['at'])})"
    if v["verdict"] == "same":
        lines = [f"{task}: the same key as in {named}: {v['key']}"]
    else:
        lines = [f"{task}: the key changed since {named}, {v['from']} → {v['to']}"]
        if v.get("componentsKept") is False:
            lines.append(
                "  the key history no longer keeps what the older key was folded from "
                "(it keeps a task's last few keys)"
            )
        else:
            lines += _differences(v["differences"], "  ")
    lines.append(
        f"  the last run, {_when(last['at'])}: {_outcome(last)} (`vx last {last['runId'][:8]}`)"
    )
    return lines


def _differences(found: list, indent: str) -> list[str]:
    if not found:
        return [f"{indent}(the same components: the vx version or the key's fold changed)"]
    width = max(len(d["kind"]) for d in found)
    return [
        f"{indent}{d['kind']:<{width}}  {d['what']}"
        + (f"  → vx why {d['what']}" if d["kind"] == "upstream" else "")
        for d in found
    ]


def _planned(task: str, v: dict) -> list[str]:
    """A fresh clone's answer: what the key is folded from now."""
    if "key" not in v:
        return [f"{task}: no run on record here; it is not cached, so every run runs it"]
    predicted = {
        "hit-local": "a run now would hit the local cache",
        "hit-remote": "a run now would hit the remote cache",
        "miss": "a run now would run it: the cache holds no entry for it",
    }[v["predicted"]]
    lines = [
        f"{task}: no run on record here; from the plan, its key is {v['key']}",
        f"  {predicted}",
        "  folded from its declaration, its package.json, the workspace's lockfiles, the vx "
        "version, and:",
    ]
    files = v["inputs"]
    shown = ", ".join(files[:6]) + (f", … ({len(files)} in all)" if len(files) > 6 else "")
    rows = [("files", shown or "none")]
    rows += [("env", ", ".join(v["env"]))] if v["env"] else []
    rows += [("upstream", f"{t}  → vx why {t}") for t in sorted(v["upstream"])]
    rows += [("forward", "the arguments after `--`")] if v["forwardArgs"] else []
    width = max(len(kind) for kind, _ in rows)
    return lines + [f"    {kind:<{width}}  {what}" for kind, what in rows]


def _outcome(last: dict) -> str:
    if last["status"] == "failed":
        return "it failed"
    if last["status"] in ("skipped", "aborted"):
        return f"it was {last['status']}"
    return "it ran (not in the cache)" if last["cache"] == "miss" else f"it ran ({last['cache']})"


def _when(at: float | None) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "?"
