"""`vx history`: the durations the scheduler expects, read from the run history
(`vx.store.timings`): per task its executed, passed runs in the window, their median (what
orders the run), the last, fastest and slowest; `--format json` for machines."""

from __future__ import annotations

import json

from vx.cli.args import Args, one_of
from vx.errors import EXIT_OK, UsageError
from vx.store import runs, timings


def history_verb(args: Args, argv: list[str]) -> int:
    import os
    import sqlite3
    from pathlib import Path

    from vx.plugins.shaped import open_for_verb

    fmt = one_of("--format", args.format, ("text", "json"), "text")
    env = os.environ
    found = open_for_verb(Path(os.getcwd()), args.cache_dir, env)
    ws, cache_dir, cfg = found.ws, found.cache_dir, found.config.schedule
    window = _window(args.window) if args.window is not None else cfg.window
    try:
        rows = timings.on_record(str(cache_dir), (), window)
    except (OSError, sqlite3.Error) as exc:
        from vx.errors import EnvironmentFailure

        raise EnvironmentFailure(
            f"cannot read the run history: {exc}",
            facts=(f"path: {cache_dir / runs.DB_NAME}",),
            hint="check the cache directory's permissions; a damaged history starts afresh on the next run",
        ) from None
    if args.names:
        rows = [r for r in rows if any(_names(r["task"], name) for name in args.names)]
    report = {
        "history": str(cache_dir / runs.DB_NAME),
        "window": window,
        "ordering": "critical-path" if cfg.history else "dependents",
        "tasks": rows,
        "assume": timings.assumed(cfg),
        "file": str(ws.root / cfg.file) if cfg.file is not None else None,
    }
    if fmt == "json":
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(_text(report)))
    return EXIT_OK


def _window(value: str) -> int:
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= runs.KEEP_RUNS:
        raise UsageError(
            f"`--window={value}` must be a whole number of runs in 1..{runs.KEEP_RUNS}",
            hint="e.g. `--window=20`",
        )
    return int(value)


def _names(task: str, name: str) -> bool:
    """`PKG#TASK` names one task; a bare `TASK` names it in every project."""
    return task == name if "#" in name else task.rpartition("#")[2] == name


def _text(report: dict) -> list[str]:
    rows = report["tasks"]
    off = "" if report["ordering"] == "critical-path" else " (schedule.history is off)"
    lines = [
        f"expected durations: the median of each task's last {report['window']} executed, passed"
        f" runs{off}",
        f"history: {report['history']}",
    ]
    if not rows:
        lines.append("no executed task on record yet")
    else:
        width = max(len("task"), *(len(r["task"]) for r in rows))
        lines.append(
            f"{'task':<{width}}  {'runs':>4}  {'p50':>8}  {'last':>8}  {'min':>8}  {'max':>8}"
        )
        for r in rows:
            lines.append(
                f"{r['task']:<{width}}  {r['runs']:>4}  {_ms(r['p50_ms']):>8}  "
                f"{_ms(r['last_ms']):>8}  {_ms(r['min_ms']):>8}  {_ms(r['max_ms']):>8}"
            )
    if report["assume"]:
        lines.append("assumed where nothing is on record (schedule.assume):")
        lines += [f"  {name}  {_ms(ms)}" for name, ms in report["assume"].items()]
    if report["file"] is not None:
        lines.append(f"timings file (schedule.file): {report['file']}")
    return lines


def _ms(ms: float) -> str:
    return f"{ms / 1000:.2f}s" if ms >= 1000 else f"{ms:.0f}ms"
