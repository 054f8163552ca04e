"""Write the machine-readable run summary for `--summarize`.

The JSON is an interface: camelCase keys, ISO 8601 UTC times, optional keys left out rather
than null so a consumer can tell "not measured" from "zero". It is written to a temp file and
renamed, so a reader never sees half a summary.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from vx.errors import EnvironmentFailure
from vx.model import CacheStatus, RunSummary, Status, TaskResult


def iso8601(epoch_s: float) -> str:
    """Stamp `2024-05-01T12:00:00.123Z`: milliseconds, always UTC."""
    from datetime import datetime, timezone  # only a summary needs a calendar

    stamp = datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def task_dict(result: TaskResult) -> dict[str, Any]:
    """Build one `tasks[]` entry; measurements appear only when they were taken."""
    out: dict[str, Any] = {
        "id": str(result.id),
        "project": result.id.package,
        "task": result.id.task,
        "status": result.status.value,
        "cache": result.cache.value,
        "exitCode": result.exit_code,
        "durationMs": round(result.duration_ms, 3),
        "hash": result.key,
        "attempts": result.attempts,
    }
    if result.cpu_ms is not None:
        out["cpuMs"] = round(result.cpu_ms, 3)
    if result.peak_rss_bytes is not None:
        out["peakRssBytes"] = result.peak_rss_bytes
    if result.stored_ms is not None:
        out["storedMs"] = round(result.stored_ms, 3)
    if result.timed_out:
        out["timedOut"] = True
    if result.blocked_by is not None:
        out["blockedBy"] = str(result.blocked_by)
    if result.persistent:  # how the server ended (stopped, serving, not started, not ready)
        out["persistent"] = True
        out["reason"] = result.reason or ""
    if result.violations:  # what the sandbox caught, with the grant that would allow each
        out["sandboxViolations"] = [
            {"kind": v.kind, "path": v.path, "grant": v.grant_hint} for v in result.violations
        ]
    return out


def counts(results: tuple[TaskResult, ...]) -> dict[str, int]:
    """Count the `summary{}` block: statuses, then how the successes were served."""

    def served(cache: CacheStatus) -> int:
        return sum(1 for r in results if r.status is Status.SUCCESS and r.cache is cache)

    def status(kind: Status) -> int:
        return sum(1 for r in results if r.status is kind)

    return {
        "successful": status(Status.SUCCESS),
        "failed": status(Status.FAILED),
        "skipped": status(Status.SKIPPED),
        "aborted": status(Status.ABORTED),
        "cachedLocal": served(CacheStatus.LOCAL),
        "cachedRemote": served(CacheStatus.REMOTE),
        "upToDate": served(CacheStatus.UP_TO_DATE),
        "total": len(results),
    }


def summary_dict(summary: RunSummary, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """Build the whole `--summarize` document for one run; `tags` are its `--tag k=v`."""
    return {
        "runId": summary.run_id,
        "ok": summary.exit_code == 0,
        "exitCode": summary.exit_code,
        "startedAt": iso8601(summary.started_at),
        "endedAt": iso8601(summary.ended_at),
        "totalMs": round((summary.ended_at - summary.started_at) * 1000, 3),
        "tasks": [task_dict(r) for r in summary.results],
        "summary": counts(summary.results),
        "savedMs": round(sum(r.stored_ms or 0.0 for r in summary.results), 3),
        "tags": tags or {},
    }


def write_summary(summary: RunSummary, path: Path, tags: dict[str, str] | None = None) -> None:
    """Write the summary atomically (temp file in the same directory, then rename) — or, to a path
    that is no regular file (`/dev/null`, `/dev/stdout`, a FIFO), straight into it: renaming over
    a device would replace it with a file."""
    import tempfile  # only `--summarize` pays for it

    text = json.dumps(summary_dict(summary, tags), indent=2) + "\n"
    try:
        if _special(path):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise EnvironmentFailure(
            "cannot write the run summary",
            facts=(f"path: {path}", f"cause: {exc.strerror or exc}"),
            hint="pass --summarize=<path> with a writable directory",
        ) from None


def _special(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


# ---------------------------------------------------------------- --report=markdown


def markdown(summary: RunSummary, interrupted: bool = False) -> str:
    """The run as a markdown table, for `$GITHUB_STEP_SUMMARY` and friends: a header line with
    the counts, the execution time spent and the time the hits saved, then one row per task."""
    c = counts(summary.results)
    spent = sum(r.duration_ms for r in summary.results if r.cache not in _SERVED)
    saved = sum(r.stored_ms or 0.0 for r in summary.results)
    verdict = "interrupted" if interrupted else ("ok" if summary.exit_code == 0 else "failed")
    cached = c["cachedLocal"] + c["cachedRemote"] + c["upToDate"]
    head = (
        f"**vx run: {verdict}** · {c['total']} tasks · {cached} cached · {c['failed']} failed · "
        f"{_seconds(spent)} total · {_seconds(saved)} saved"
    )
    rows = ["| Task | Status | Cache | Duration |", "|---|---|---|---|"]
    rows += [
        f"| `{_cell(str(r.id))}` | {r.status.value} | {r.cache.value} | {_seconds(r.duration_ms)} |"
        for r in sorted(summary.results, key=_failures_first)
    ]
    return "\n".join([head, "", *rows]) + "\n"


_SERVED = (CacheStatus.LOCAL, CacheStatus.REMOTE, CacheStatus.UP_TO_DATE)


def _failures_first(result: TaskResult) -> tuple[int, str]:
    return (0 if result.status is Status.FAILED else 1, str(result.id))


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def append_report(text: str, path: Path) -> None:
    """Append (never replace: a step summary collects every step's) to `path`."""
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise EnvironmentFailure(
            "cannot write the report",
            facts=(f"path: {path}", f"cause: {exc.strerror or exc}"),
            hint="pass --report-file=<path> in a writable directory",
        ) from None
