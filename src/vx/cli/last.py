"""`vx last`: what happened in the latest run (or one named by an id prefix), read from the run
history the store keeps (`vx.store.runs`): a header, the tasks failures first, and the command
that re-runs what failed. `--list[=N]` lists recent runs, `--log PKG#TASK` prints a kept log."""

from __future__ import annotations

import json
import sys
import time
from typing import Mapping

from vx.cli.args import Args, one_of
from vx.errors import EXIT_OK, NoHistoryError, UsageError
from vx.store import runs

SHOWN_HITS = 16  # hit rows shown before the rest fold into a count
LIST_DEFAULT = 10


def last_verb(args: Args, argv: list[str]) -> int:
    import os
    from pathlib import Path

    fmt = one_of("--format", args.format, ("text", "json"), "text")
    if len(args.names) > 1:
        raise UsageError("name at most one run id (a prefix will do)", hint="see `vx last --list`")
    count = _list_count(args.list)
    cache_dir, db = open_history(Path(os.getcwd()), args.cache_dir, os.environ)
    if db is None:
        if count is not None and fmt == "json":  # a list of no runs is an answer, not a refusal
            print(json.dumps({"runs": []}))
            return EXIT_OK
        return _nothing(fmt, cache_dir, args.failed)
    try:
        if count is not None:
            return _list(db, count, args.failed, fmt)
        run = pick(db, args.names[0] if args.names else None, args.failed)
        if run is None:
            return _nothing(fmt, cache_dir, args.failed)
        rows = runs.task_rows(db, run["run_id"])
        if args.log is not None:
            sys.stdout.buffer.write(kept_log(run, rows, args.log)[1])
            sys.stdout.flush()
            return EXIT_OK
        flaky = runs.flaky(db, rows)
    finally:
        db.close()
    report = runs.run_record(run, rows, flaky)
    if fmt == "json":
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(_text(report)))
    return EXIT_OK


def open_history(cwd, cache_flag: str | None, env: Mapping[str, str]):
    """(the cache dir, the run history opened read-only — None when nothing was recorded yet),
    the pending replays folded in first. `vx mcp` reads through it too."""
    import sqlite3

    from vx.plugins.shaped import open_for_verb

    cache_dir = open_for_verb(cwd, cache_flag, env).cache_dir
    try:
        runs.fold_pending(str(cache_dir))
        return cache_dir, runs.connect(str(cache_dir), create=False)
    except (OSError, sqlite3.Error) as exc:
        from vx.errors import EnvironmentFailure

        raise EnvironmentFailure(
            f"cannot read the run history: {exc}",
            facts=(f"path: {cache_dir / runs.DB_NAME}",),
            hint="check the cache directory's permissions",
        ) from None


def _list_count(value) -> int | None:
    """`--list` (the default count) or `--list=N`; None when not given."""
    if value is None:
        return None
    if value == "":
        return LIST_DEFAULT
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise UsageError(f"`--list={value}` must be a positive number", hint="e.g. `--list=20`")
    return int(value)


def _nothing(fmt: str, cache_dir, failed: bool = False) -> int:
    """Nothing on record: a note for a reader; under JSON a refusal, as there is no run record
    to print."""
    what = "no failed run" if failed else "no run"
    if fmt == "json":
        raise NoHistoryError(
            f"{what} recorded yet",
            facts=(f"history: {cache_dir / runs.DB_NAME}",),
            hint="run a task first, e.g. `vx run build`",
        )
    print(f"vx last: {what} recorded yet (history: {cache_dir / runs.DB_NAME})")
    return EXIT_OK


def pick(db, prefix: str | None, failed: bool) -> dict | None:
    if prefix is None:
        latest = runs.invocations(db, 1, failed)
        return latest[0] if latest else None
    found = runs.find(db, prefix)
    if failed:
        found = [r for r in found if not r["exit_ok"]]
    if not found:
        raise NoHistoryError(
            f"no recorded run has an id starting `{prefix}`", hint="see `vx last --list`"
        )
    if len(found) > 1:
        raise UsageError(
            f"`{prefix}` starts {len(found)} run ids",
            facts=tuple(f"run {r['run_id']}" for r in found[:5]),
            hint="give more of the id",
        )
    return found[0]


def _list(db, count: int, failed: bool, fmt: str) -> int:
    listed = runs.invocations(db, count, failed)
    ids = [r for (r,) in db.execute("SELECT run_id FROM invocations")]
    width = _unique_width(ids)
    if fmt == "json":
        print(json.dumps({"runs": [runs.invocation_record(r) for r in listed]}, indent=2))
        return EXIT_OK
    for r in listed:
        verdict = "ok" if r["exit_ok"] else "failed"
        print(
            f"{r['run_id'][:width]}  {_when(r['started_at'])}  {verdict:<6}  "
            f"{r['task_count']} tasks, {r['failed_count']} failed, {r['hit_count']} cached  "
            f"{_seconds(r['total_duration_ms'])}  {r['command']}"
        )
    return EXIT_OK


def _unique_width(ids: list[str], least: int = 8) -> int:
    """The shortest prefix length (at least `least`) that tells every id apart."""
    width = least
    while width < 36 and len({i[:width] for i in ids}) < len(ids):
        width += 1
    return width


def kept_log(run: dict, rows: list[dict], name: str) -> tuple[str, bytes]:
    """(PKG#TASK, its kept log) of the task `name` names in `run`; refused when none is kept."""
    wanted = name if "#" in name else None
    found = [
        r
        for r in rows
        if (f"{r['project']}#{r['task']}" == wanted) or (not wanted and r["task"] == name)
    ]
    if not found:
        raise UsageError(
            f"`{name}` is not a task of run {run['run_id']}",
            hint="name it as PKG#TASK; `vx last` lists the run's tasks",
        )
    row = found[0]
    tid = f"{row['project']}#{row['task']}"
    path = row["log_path"]
    try:
        with open(path or "", "rb") as f:
            return tid, f.read()
    except OSError:
        raise UsageError(
            f"no log of {tid} is kept for run {run['run_id']}"
            + ("" if path else f" (it {_verb(row)})"),
            hint="a failed task's whole output is kept, for the last 50 failures",
        ) from None


def _verb(row: dict) -> str:
    return {"success": "passed", "cache-hit": "was a cache hit", "skipped": "was skipped"}.get(
        row["status"], row["status"]
    )


# ---------------------------------------------------------------- the report


def _text(report: dict) -> list[str]:
    run = report["run"]
    verdict = "ok" if run["exit_ok"] else f"failed (exit {run['exit_code']})"
    lines = [
        f"vx last: {verdict} · {run['command']} · {_when(run['started_at'])}"
        + "".join(f" · {part}" for part in _context(run))
        + (" · replayed" if run["replayed"] else ""),
        f"  run {run['run_id']} · {run['task_count']} tasks · {run['failed_count']} failed"
        f" · {run['hit_count']} cached · {_seconds(run['total_duration_ms'])}",
    ]
    hits = 0
    for t in report["tasks"]:
        hit = t["status"].startswith("cache-hit")
        hits += hit
        if hit and hits > SHOWN_HITS:
            continue
        lines.append("  " + _row(t))
        if t["log_path"]:
            lines.append(f"      log: {t['log_path']}")
    if hits > SHOWN_HITS:
        lines.append(f"  … and {hits - SHOWN_HITS} more cache hits")
    if report["rerun"]:
        lines.append(f"re-run what failed: {report['rerun']}")
    return lines


def _context(run: dict) -> list[str]:
    """`branch@sha` (either alone when the other is unknown; `(dirty)` after it when the
    workspace was), `ci <provider>` and the run's `--tag`s."""
    sha = (run.get("git_sha") or "")[:10]
    where = "@".join(p for p in (run.get("git_branch"), sha) if p)
    if where and run.get("git_dirty"):
        where += " (dirty)"
    ci = run.get("ci_provider")
    tags = run.get("tags") or {}
    if isinstance(tags, str):  # the row as kept: a JSON object
        import json

        tags = json.loads(tags)
    shown = " ".join(f"{k}={v}" for k, v in tags.items())
    return [p for p in (where, f"ci {ci}" if ci else "", f"tags {shown}" if shown else "") if p]


def _row(t: dict) -> str:
    parts = [f"{t['status']:<16} {t['id']}"]
    if t["status"] in ("success", "failed"):
        parts.append(_seconds(t["duration_ms"]))
        if t["cpu_ms"] is not None and t["duration_ms"]:
            parts.append(f"cpu {t['cpu_ms'] / t['duration_ms']:.1f}x")
        if t["peak_rss_bytes"]:
            parts.append(f"rss {t['peak_rss_bytes'] / (1 << 20):.0f} MiB")
    if t["attempts"] > 1:
        parts.append(f"{t['attempts']} attempts")
    if t["reason"]:
        parts.append(t["reason"])
    if t["blocked_by"]:
        parts.append(f"blocked by {t['blocked_by']}")
    if t["flaky"]:
        parts.append("flaky")
    return " · ".join(parts)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}s"
