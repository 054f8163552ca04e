"""`vx run --profile[=profile.json]`: the run as a Chrome trace (chrome://tracing,
Perfetto, speedscope) — one complete (`ph: "X"`) event per task, microsecond timestamps, one
thread row per project, the status as the category, and the exit code, key, CPU and peak RSS as
arguments.

A task's span is taken from the events as they pass: it starts at its first `TaskStarted` (a hit
never starts one: it ends when its result arrives, and its span is its own duration).
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from vx.errors import EnvironmentFailure
from vx.events import TaskFinished, TaskStarted
from vx.model import RunSummary, TaskId


class Profiler:
    def __init__(self) -> None:
        self.started: dict[TaskId, float] = {}
        self.ended: dict[TaskId, float] = {}

    def wrap(self, emit: Callable) -> Callable:
        def observed(event) -> None:
            now = time.time()
            if isinstance(event, TaskStarted):
                self.started.setdefault(event.id, now)
            elif isinstance(event, TaskFinished):
                self.ended[event.result.id] = now
            emit(event)

        return observed

    def trace(self, summary: RunSummary) -> dict:
        projects = sorted({r.id.package for r in summary.results})
        tid = {name: i + 1 for i, name in enumerate(projects)}
        events = [
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": tid[name], "args": {"name": name}}
            for name in projects
        ]
        for r in summary.results:
            end = self.ended.get(r.id)
            if end is None:
                continue  # skipped or never started: no span to draw
            start = self.started.get(r.id, end - r.duration_ms / 1000)
            args: dict[str, Any] = {"exitCode": r.exit_code, "hash": r.key, "cache": r.cache.value}
            if r.cpu_ms is not None:
                args["cpuMs"] = round(r.cpu_ms, 3)
            if r.peak_rss_bytes is not None:
                args["peakRssBytes"] = r.peak_rss_bytes
            events.append(
                {
                    "name": str(r.id),
                    "cat": r.status.value,
                    "ph": "X",
                    "pid": 1,
                    "tid": tid[r.id.package],
                    "ts": round(start * 1e6),
                    "dur": max(round((end - start) * 1e6), 1),
                    "args": args,
                }
            )
        return {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"runId": summary.run_id},
        }

    def write(self, summary: RunSummary, path: Path) -> None:
        # Never through a link: `profile.json` in the directory a run starts from may be one a
        # repository committed, leading to a file of the user's.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(self.trace(summary)))
        except OSError as exc:
            cause = "it is a symlink" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            raise EnvironmentFailure(
                "cannot write the profile",
                facts=(f"path: {path}", f"cause: {cause}"),
                hint="pass --profile=<path> in a writable directory",
            ) from None
