"""Expected task durations for the scheduler (`vx.engine.schedule`), from what is on record: the
median of a task's last `window` executed, passed runs in the run history (`runs.db`), else the
workspace's timings `file` (carried between CI runners), else its `assume` entries. A task none of
them knows counts as the median of what was measured, so a new task is neither first nor last.

Read only when something is about to execute: a replayed or fully cached run never opens
`runs.db` for this. Unreadable history is never a reason to fail a run — `expected` answers
what it could read and one warning, and the scheduler keeps its default order.
"""

from __future__ import annotations

import json
import os
from typing import Any, Collection, Mapping

from vx.model import RunSummary, ScheduleConfig, TaskId
from vx.store import runs

FILE_VERSION = 1


def median(values: Collection[float]) -> float:
    """The p50 (the mean of the middle two of an even count); `statistics` costs an import."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def expected(
    cache_dir: str, root: str, cfg: ScheduleConfig, tasks: Collection[TaskId]
) -> tuple[dict[TaskId, float], str | None]:
    """(expected ms per task, a warning or None). Empty when nothing is known about any task
    (a cold start without `assume`), or when `schedule.history` is off."""
    if not cfg.history or not tasks:
        return {}, None
    warning = None
    measured: dict[TaskId, float] = {}
    try:
        measured = recorded(cache_dir, tasks, cfg.window)
    except Exception as exc:  # sqlite3.Error, OSError, a damaged row: the default order serves
        warning = (
            f"the run history is unreadable ({_said(exc)}; {os.path.join(cache_dir, runs.DB_NAME)}):"
            " tasks start in the default order this run"
        )
    if cfg.file is not None:
        shared, note = read_file(os.path.join(root, cfg.file))
        warning = warning or note
        for tid in tasks:
            if tid not in measured and str(tid) in shared:
                measured[tid] = shared[str(tid)]
    weights = dict(measured)
    for tid in tasks:
        if tid not in weights:
            ms = cfg.assume.get(str(tid), cfg.assume.get(tid.task))
            if ms is not None:
                weights[tid] = float(ms)
    if not weights:
        return {}, warning
    typical = median(measured.values()) if measured else 0.0
    return {tid: weights.get(tid, typical) for tid in tasks}, warning


def recorded(cache_dir: str, tasks: Collection[TaskId], window: int) -> dict[TaskId, float]:
    """The median of each task's last `window` executed, passed runs; {} without a history.
    Opened as it is, never made or repaired: a damaged file raises (sqlite3.DatabaseError), and
    the run's own record at its end starts it afresh (`runs.connect`)."""
    return {t: median(v) for t, v in _per_task(cache_dir, tasks, window, runs.durations).items()}


RESERVE_STEP = 64 << 20  # reservations are whole 64 MiB steps
RESERVE_MARGIN = 1.25  # above the highest peak on record


def reservation(peak_bytes: int) -> int:
    """The memory a task is expected to need: its highest peak RSS on record with a margin,
    rounded up to a whole step."""
    need = int(peak_bytes * RESERVE_MARGIN)
    return -(-need // RESERVE_STEP) * RESERVE_STEP


def reservations(cache_dir: str, tasks: Collection[TaskId], window: int) -> dict[TaskId, int]:
    """Each task's reservation from its last `window` executed, passed runs; tasks with no
    measured peak are left out. {} without a history. Raises sqlite3.Error / OSError."""
    return {t: reservation(v) for t, v in _per_task(cache_dir, tasks, window, runs.peaks).items()}


def _per_task(cache_dir: str, tasks: Collection[TaskId], window: int, query) -> dict[TaskId, Any]:
    """`query(db, [(package, task)], window)` on the run history, keyed back by task; {} without
    a history or with one of another shape (the next record starts that afresh). Opened as it
    is, never made or repaired."""
    path = os.path.join(cache_dir, runs.DB_NAME)
    if not os.path.exists(path):
        return {}
    import sqlite3

    db = sqlite3.connect(path, timeout=1.0)
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != int(runs.SCHEMA):
            return {}
        by_name = {(t.package, t.task): t for t in tasks}
        found = query(db, sorted(by_name), window)
    finally:
        db.close()
    return {by_name[k]: v for k, v in found.items()}


def admits(need: int, running: Collection[int], budget: int) -> bool:
    """Whether a task reserving `need` bytes fits beside the reservations `running` hold; one
    that reserves nothing always does."""
    return need == 0 or sum(running) + need <= budget


def read_file(path: str) -> tuple[dict[str, float], str | None]:
    """The timings file's {PKG#TASK: ms}; ({}, None) when absent, ({}, warning) when unreadable."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:
        return {}, f"the timings file {path} is unreadable ({_said(exc)}): it was not used"
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict) or data.get("version") != FILE_VERSION:
        return (
            {},
            f"the timings file {path} is not one vx wrote (version {FILE_VERSION}): it was not used",
        )
    return {
        k: float(v)
        for k, v in tasks.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    }, None


def write_file(path: str, cache_dir: str, ran: Collection[TaskId], window: int) -> None:
    """Fold the medians of the tasks this run executed into the timings file (the rest of it
    kept), written whole and renamed into place. Raises OSError / sqlite3.Error."""
    shared, _note = read_file(path)
    shared.update({str(t): ms for t, ms in recorded(cache_dir, ran, window).items()})
    body = json.dumps(
        {"version": FILE_VERSION, "window": window, "tasks": dict(sorted(shared.items()))},
        indent=2,
    )
    from vx.dotvx import write_whole

    write_whole(path, (body + "\n").encode())


def keep_timings(facts: runs.RunFacts, summary: RunSummary) -> None:
    """Fold this run's executed tasks into the workspace's timings file (`schedule.file`), for
    the next runner with an empty cache; a failure here is the file's, never the run's."""
    import sqlite3
    from pathlib import Path

    ran = [r.id for r in summary.results if runs.history_status(r) == "success"]
    schedule = facts.schedule
    if schedule.file is None or not ran:
        return
    try:
        write_file(str(Path(facts.root) / schedule.file), facts.cache_dir, ran, schedule.window)
    except (OSError, sqlite3.Error):
        pass


def on_record(cache_dir: str, tasks: Collection[TaskId], window: int) -> list[dict]:
    """`vx history`: per task on record (all, or `tasks`), its runs in the window, median, last,
    fastest and slowest ms, sorted by median, slowest first. Raises sqlite3.Error / OSError."""
    path = os.path.join(cache_dir, runs.DB_NAME)
    if not os.path.exists(path):
        return []
    db = runs.connect(cache_dir, create=False)
    try:
        names = [(t.package, t.task) for t in tasks] if tasks else runs.executed_tasks(db)
        found = runs.durations(db, names, window)
    finally:
        db.close()
    rows = [
        {
            "task": f"{project}#{task}",
            "runs": len(ms),
            "p50_ms": round(median(ms), 1),
            "last_ms": round(ms[0], 1),
            "min_ms": round(min(ms), 1),
            "max_ms": round(max(ms), 1),
        }
        for (project, task), ms in found.items()
    ]
    return sorted(rows, key=lambda r: (-r["p50_ms"], r["task"]))


def _said(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def assumed(cfg: ScheduleConfig) -> Mapping[str, int]:
    """The workspace's `assume` entries, for `vx history` to show beside the record."""
    return dict(sorted(cfg.assume.items()))
