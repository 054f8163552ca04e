"""vx as a library: `plan_run` and `run` for a tool that embeds vx or a test that drives
it, through the same two steps the CLI takes (`vx.prepare.prepare`, then `vx.pipeline.execute`).
Both are also `vx.plan_run` and `vx.run` (`vx.plan` is the planning package, so the reference's
`planRun` names the first).

    import vx

    planned = vx.plan_run(["build"], cwd="repo", all=True)     # what would run, and its keys
    stop = vx.Abort()                                           # stop() it from any thread
    result = vx.run(["build"], cwd="repo", log=print, abort=stop)
    failed = [t.id for t in result.results if t.status.value == "failed"]

Results are the records the CLI reports from: `plan_run` returns `vx.events.PlannedTask`s, `run` a
`vx.model.RunSummary` (each task's `TaskResult`: status, cache, key, duration, exit code).
`log` receives the run's report as plain text, one line a call (no colour, no live region);
without it the report goes nowhere. Refusals raise `vx.errors.VxError` (a `UsageError` or a
`ConfigError`, with `code`, `hint` and `exit_code`); a failing task does not raise: it is in
the result, with `exit_code` 1.

What the CLI adds around a run is not done here: no receipt (each call plans afresh), no run
history row, no summary file. Call `run` from the main thread (Ctrl-C and SIGTERM stop it as
they stop `vx run`); an `Abort` may be stopped from any thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TextIO, cast

from vx.engine.signals import Abort

if TYPE_CHECKING:
    from vx.events import PlannedTask
    from vx.model import RunSummary
    from vx.prepare import RunRequest

__all__ = ["Abort", "plan_run", "run"]


def plan_run(
    tasks: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    all: bool = False,
    filters: Sequence[str] = (),
    affected: str | None = None,
    env: Mapping[str, str] | None = None,
    frozen: bool = False,
) -> list[PlannedTask]:
    """The tasks `vx run TASKS` would run from `cwd`, in order, each with its key, command,
    dependencies, input files and predicted cache status (`vx run --dry=json`'s rows)."""
    from vx.prepare import dry_plan, prepare
    from vx.stages import Stages

    req = _request(tasks, cwd, all, filters, affected, frozen=frozen)
    prep = prepare(req, os.environ if env is None else env, Stages(False))
    try:
        return dry_plan(prep)
    finally:
        if prep.store is not None:
            prep.store.close()
        if prep.plugins is not None:
            prep.plugins.teardown()


def run(
    tasks: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    all: bool = False,
    filters: Sequence[str] = (),
    affected: str | None = None,
    force: bool = False,
    no_cache: bool = False,
    concurrency: int | str | None = None,
    forward_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    frozen: bool = False,
    log: Callable[[str], None] | None = None,
    abort: Abort | None = None,
) -> RunSummary:
    """Run `tasks` as `vx run` would from `cwd`: hits restored, misses executed and saved; the
    run's summary. `abort.stop()` stops it as Ctrl-C does (its tasks torn down, `exit_code`
    130, `interrupted`)."""
    from vx import __version__
    from vx import pipeline as pipe
    from vx.prepare import prepare
    from vx.report.reporters import make_reporter
    from vx.runlock import RunLock
    from vx.stages import Stages

    req = _request(
        tasks,
        cwd,
        all,
        filters,
        affected,
        force=force,
        no_cache=no_cache,
        concurrency=None if concurrency is None else str(concurrency),
        forward_args=tuple(forward_args),
        frozen=frozen,
    )
    host_env = os.environ if env is None else env
    lines = _Lines(log)
    stream = cast(TextIO, lines)  # the reporter's sink writes and flushes, nothing else
    reporter: Any = make_reporter(
        flow="broad" if all else "focused", color=0, live=False, version=__version__, out=stream,
        err=stream,
    )  # fmt: skip
    stages = Stages(False)
    lock = RunLock(lambda message: lines.write(f"vx: {message}\n"))
    prep = None
    try:
        prep = prepare(req, host_env, stages, lock=lock)
        return pipe.execute(prep, req, reporter, stages, on_graph_end=lock.release, abort=abort)
    finally:
        lock.release()
        reporter.close()
        if prep is not None and prep.plugins is not None:
            for message in prep.plugins.teardown():
                lines.write(f"vx: warning: {message}\n")
        lines.flush()


def _request(tasks, cwd, all, filters, affected, **more) -> RunRequest:
    from vx.errors import UsageError
    from vx.prepare import RunRequest, Selectors

    if isinstance(tasks, str):
        raise UsageError("`tasks` is a list of task names", hint=f"[{tasks!r}]")
    if not tasks:
        raise UsageError("name at least one task", hint='e.g. vx.api.run(["build"])')
    root = Path(cwd if cwd is not None else os.getcwd()).resolve()
    return RunRequest(
        cwd=root,
        names=tuple(tasks),
        all=all,
        select=Selectors(filters=tuple(filters)),
        affected=affected,
        **more,
    )


class _Lines:
    """A text stream that hands each complete line to `log` (none: dropped)."""

    def __init__(self, log: Callable[[str], None] | None) -> None:
        self.log = log
        self.pending = ""

    def write(self, text: str) -> int:
        if self.log is None:
            return len(text)
        *done, self.pending = (self.pending + text).split("\n")
        for line in done:
            self.log(line)
        return len(text)

    def flush(self) -> None:
        if self.log is not None and self.pending:
            line, self.pending = self.pending, ""
            self.log(line)

    def isatty(self) -> bool:
        return False
