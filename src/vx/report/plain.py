"""Render a run as lines on plain streams: pipes, NO_COLOR, CI.

The reporter decides, per flow and per outcome, whether a finished task is silent, a row, a
frame, or a row now and a frame at the end (the VISIBILITY table). Task output goes to stdout,
vx's own words to stderr. The live console reuses this class and only adds a status region.
"""

from __future__ import annotations

import errno
import os
from typing import Callable, Mapping, TextIO

from vx import style
from vx.events import (
    CacheRestored,
    Event,
    Notice,
    RunFinished,
    RunStarted,
    ServersKept,
    TaskFinished,
    TaskOutput,
    TaskReady,
    TaskRetrying,
    TaskStage,
    TaskStarted,
)
from vx.model import Status, TaskGraph, TaskId, TaskResult
from vx.report import frames
from vx.report.frames import LineSplitter, Palette

FLOWS = ("focused", "broad", "ci", "full", "new-only", "errors-only", "hash-only", "none")
OUTPUT_LOGS = FLOWS[3:]  # `--output-logs`, turbo's names: beats the flow the run would take

# Columns: the flow, split by role in the focused flow. Shapes: silent, row, frame,
# row+replay (one line at once, the whole frame before the footer) and fold (counted on one
# `not run` line). A failure is never silent and its frame is printed exactly once.
_EVERY_FRAME: Mapping[str, str] = {
    "executed": "frame",
    "hit": "frame",
    "failed": "frame",
    "skipped": "row",
    "aborted": "frame",
    "not-run": "fold",
}
VISIBILITY: Mapping[str, Mapping[str, str]] = {
    "focused:requested": {
        "executed": "frame",
        "hit": "frame",
        "failed": "frame",
        "skipped": "row",
        "aborted": "frame",
        "not-run": "fold",
    },
    "focused:dependency": {
        "executed": "silent",
        "hit": "silent",
        "failed": "row+replay",
        "skipped": "silent",
        "aborted": "row",
        "not-run": "fold",
    },
    "broad": {
        "executed": "row",
        "hit": "silent",
        "failed": "row+replay",
        "skipped": "row",
        "aborted": "row",
        "not-run": "fold",
    },
    "ci": _EVERY_FRAME,
    "full": _EVERY_FRAME,  # --output-logs=full: what CI shows, anywhere
    "new-only": {
        "executed": "frame",
        "hit": "row",
        "failed": "frame",
        "skipped": "row",
        "aborted": "frame",
        "not-run": "fold",
    },
    "errors-only": {
        "executed": "silent",
        "hit": "silent",
        "failed": "frame",
        "skipped": "row",
        "aborted": "row",
        "not-run": "fold",
    },
    "hash-only": {
        "executed": "row",
        "hit": "row",
        "failed": "row+replay",
        "skipped": "row",
        "aborted": "row",
        "not-run": "fold",
    },
    "none": {
        "executed": "silent",
        "hit": "silent",
        "failed": "row+replay",
        "skipped": "silent",
        "aborted": "row",
        "not-run": "fold",
    },
}


def outcome_class(result: TaskResult) -> str:
    """Name the VISIBILITY row a result falls in."""
    if frames.never_started(result):
        return "not-run"
    if result.status is not Status.SUCCESS:
        return result.status.value
    return "hit" if result.cache in frames.HITS else "executed"


class Sink:
    """Write whole lines to stdout or stderr; a closed pipe silences that stream only.

    `vx run … | head` must finish, save and exit with its own verdict, so EPIPE is swallowed
    here and never reported. `at_blank` remembers whether the last line on either stream was
    blank, since both usually land on one terminal.
    """

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._streams = {"out": out, "err": err}
        self._dead: set[str] = set()
        self.at_blank = True
        self.before_write: Callable[[], None] = lambda: None

    def lines(self, where: str, lines: list[str]) -> None:
        if not lines:
            return
        self.at_blank = lines[-1] == ""
        if where not in self._dead:
            self.before_write()
            self.raw(where, "\n".join(lines) + "\n")

    def separate(self, where: str) -> None:
        """Start a block on a fresh blank line, without doubling one already there."""
        if not self.at_blank:
            self.lines(where, [""])

    def raw(self, where: str, text: str) -> None:
        """Write and flush text as it is (escape codes included), going quiet on EPIPE."""
        if where in self._dead:
            return
        stream = self._streams[where]
        try:
            style.write(stream, text)
            stream.flush()
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EPIPE:
                raise
            self._go_quiet(where, stream)
        except ValueError:  # written after the stream was closed
            self._go_quiet(where, stream)

    def _go_quiet(self, where: str, stream: TextIO) -> None:
        self._dead.add(where)
        _point_at_devnull(stream)


def _point_at_devnull(stream: TextIO) -> None:
    """Aim the dead descriptor at /dev/null so the interpreter's last flush cannot complain."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # io.StringIO and friends have no descriptor
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def notice_line(event: Notice, palette: Palette) -> str:
    """Format `vx: warning: …` for warnings, `vx: …` for information."""
    if event.level == "warning":
        return f"vx: {palette.paint('warning:', 'warn')} {event.message}"
    return f"vx: {event.message}"


def retry_line(event: TaskRetrying, palette: Palette) -> str:
    return f"vx: retrying {palette.task_id(event.id)} (attempt {event.attempt}/{event.total}) after {event.after}"


def focus_of(graph: TaskGraph) -> frozenset[TaskId]:
    """Open groups up in the requested tasks: groups are transparent folders."""
    focus: set[TaskId] = set()
    pending = list(graph.requested)
    seen: set[TaskId] = set()
    while pending:
        tid = pending.pop()
        if tid in seen or tid not in graph.nodes:
            continue
        seen.add(tid)
        node = graph.nodes[tid]
        if node.is_group:
            pending.extend(node.deps)
        else:
            focus.add(tid)
    return frozenset(focus)


class PlainReporter:
    """Turn events into rows, frames and a footer on plain streams."""

    def __init__(
        self, *, flow: str, palette: Palette, version: str, sink: Sink, github: bool = False
    ) -> None:
        if flow not in FLOWS:
            raise ValueError(f"unknown output flow {flow!r}; expected one of {FLOWS}")
        self.flow, self.palette, self.version, self.sink = flow, palette, version, sink
        # On GitHub Actions, frames fold into ::group:: blocks fenced by a per-run token.
        self._github_token = os.urandom(8).hex() if github else None
        self._groups: frozenset[TaskId] = frozenset()
        self._focus: frozenset[TaskId] | None = (
            None  # None until RunStarted: treat all as requested
        )
        self._commands: dict[TaskId, str] = {}
        self._live: TaskId | None = None  # the task whose frame streams as it runs
        self._splitter = LineSplitter()
        self._reported: set[TaskId] = set()
        self._replay: list[TaskResult] = []
        self._not_run: list[TaskResult] = []
        self._servers: dict[TaskId, LineSplitter] = {}  # persistent tasks: output as `id │ line`
        self._server_width = 0
        self._terminal: set[TaskId] = set()  # interactive tasks that had the terminal
        self._hidden = 0  # successful tasks with a log that only a row (or nothing) stood for

    def __call__(self, event: Event) -> None:
        getattr(self, _HANDLERS[type(event)])(event)

    def close(self) -> None:
        """Nothing to tear down on plain streams; the live console overrides this."""

    # ------------------------------------------------------------ events

    def on_run_started(self, event: RunStarted) -> None:
        graph = event.graph
        self._groups = frozenset(t for t, n in graph.nodes.items() if n.is_group)
        self._focus = focus_of(graph)
        self._servers = {
            t: LineSplitter()
            for t, n in graph.nodes.items()
            if n.config.exec is not None and n.config.exec.persistent is not None
        }
        self._server_width = max((len(str(t)) for t in self._servers), default=0)

    def on_task_started(self, event: TaskStarted) -> None:
        self._commands[event.id] = event.command
        if event.terminal:
            self._terminal.add(event.id)  # its output went straight to the terminal: no frame
            return
        if event.id in self._servers:
            return
        if event.attempt == 1 and self._streams_live(event.id):
            self._live, self._splitter = event.id, LineSplitter()
            head = [frames.frame_open(event.id, self.palette)]
            self.sink.lines(
                "out",
                head
                + ([frames.frame_command(event.command, self.palette)] if event.command else []),
            )

    def on_task_output(self, event: TaskOutput) -> None:
        if event.id == self._live:
            self._print_content(self._splitter.feed(event.chunk))
        elif event.id in self._servers and self._shows_server(event.id):
            self._print_server(event.id, self._servers[event.id].feed(event.chunk))

    def on_task_ready(self, event: TaskReady) -> None:
        self.sink.lines("err", [frames.ready_row(event.id, event.duration_ms, self.palette)])

    def on_servers_kept(self, event: ServersKept) -> None:
        names = ", ".join(str(t) for t in event.ids)
        self.sink.lines(
            "err",
            [f"vx: {names} still running; Ctrl-C stops {'it' if len(event.ids) == 1 else 'them'}"],
        )

    def _shows_server(self, tid: TaskId) -> bool:
        """A requested server's output streams (`--output-logs` can hush it); a dependency's only in full logs."""
        if self.flow in ("ci", "full"):
            return True
        return self.flow not in ("none", "errors-only") and (
            self._focus is None or tid in self._focus
        )

    def _print_server(self, tid: TaskId, lines: list[str]) -> None:
        self.sink.lines(
            "out",
            [frames.server_line(tid, self._server_width, line, self.palette) for line in lines],
        )

    def on_task_retrying(self, event: TaskRetrying) -> None:
        if event.id == self._live:  # a retry starts a fresh line of output
            self._print_content(self._splitter.finish())
        self.sink.lines("err", [retry_line(event, self.palette)])

    def on_task_stage(self, event: TaskStage) -> None:
        if self.flow in ("none", "errors-only"):
            return
        where = "at the remote server" if event.stage == "queued" else "on a remote worker"
        self.sink.lines("err", [f"vx: {self.palette.task_id(event.id)} {event.stage} {where}"])

    def on_task_finished(self, event: TaskFinished) -> None:
        self._finish(event.result)

    def on_cache_restored(self, event: CacheRestored) -> None:
        """Ignore: a restore is shown by its TaskFinished."""

    def on_notice(self, event: Notice) -> None:
        self.sink.lines("err", [notice_line(event, self.palette)])

    def on_run_finished(self, event: RunFinished) -> None:
        summary = event.summary
        results = [r for r in summary.results if r.id not in self._groups]
        for result in results:  # skipped and never-run tasks get no TaskFinished of their own
            self._finish(result)
        if self._not_run:
            self.sink.lines("err", [frames.not_run_row(self._not_run, self.palette)])
        self._replay_failures()
        if self._hidden:  # say how to see what a row stood for (a log with warnings, say)
            noun = "task's output is" if self._hidden == 1 else "tasks' output is"
            self.sink.lines(
                "err",
                [f"vx: {self._hidden} successful {noun} not shown; --output-logs=full shows it"],
            )
        wall_ms = (summary.ended_at - summary.started_at) * 1000
        self.sink.separate("err")
        self.sink.lines("err", frames.footer(results, wall_ms, self.version, self.palette))

    # ------------------------------------------------------------ shapes

    def _finish(self, result: TaskResult) -> None:
        if result.id in self._groups or result.id in self._reported:
            return
        self._reported.add(result.id)
        if result.id == self._live:
            self._close_live(result)
            return
        if result.id in self._servers:
            if self._shows_server(result.id):
                self._print_server(result.id, self._servers[result.id].finish())
            if result.persistent and result.status is Status.SUCCESS:
                self.sink.lines("err", [frames.task_row(result, self.palette)])
                return
        if result.id in self._terminal and result.status is Status.SUCCESS:
            self.sink.lines("err", [frames.task_row(result, self.palette)])
            return
        shape = self.shape_of(result)
        if shape == "row" and result.status is Status.SUCCESS and result.log:
            self._hidden += 1
        if shape == "frame":
            self.sink.lines("out", self._frame(result))
        elif shape in ("row", "row+replay"):
            self.sink.lines("err", [frames.task_row(result, self.palette)])
        if shape == "row+replay":
            self._replay.append(result)
        elif shape == "fold":
            self._not_run.append(result)

    def shape_of(self, result: TaskResult) -> str:
        """Look the result up in VISIBILITY for this flow and the task's role."""
        column = self.flow
        if self.flow == "focused":
            requested = self._focus is None or result.id in self._focus
            column = "focused:requested" if requested else "focused:dependency"
        return VISIBILITY[column][outcome_class(result)]

    def _streams_live(self, tid: TaskId) -> bool:
        """Stream one focused task raw as it runs; several are buffered and framed whole."""
        return self.flow == "focused" and self._focus is not None and self._focus == {tid}

    def _close_live(self, result: TaskResult) -> None:
        self._print_content(self._splitter.finish())
        self.sink.lines(
            "out",
            frames.sandbox_section(result, self.palette)
            + [frames.frame_close(result, self.palette), ""],
        )
        self._live = None

    def _print_content(self, lines: list[str]) -> None:
        self.sink.lines("out", [self.palette.content(line) for line in lines])

    def _replay_failures(self) -> None:
        """Print each failure's frame whole before the footer, never capped."""
        for result in self._replay:
            self.sink.separate("out")
            self.sink.lines("out", self._frame(result))

    def _frame(self, result: TaskResult) -> list[str]:
        lines = frames.frame(result, self.palette, self._commands.get(result.id))
        return (
            frames.github_frame(result, lines, self._github_token) if self._github_token else lines
        )


# Looked up by name so the live console's overrides are the ones called.
_HANDLERS: Mapping[type, str] = {
    RunStarted: "on_run_started",
    TaskStarted: "on_task_started",
    TaskReady: "on_task_ready",
    ServersKept: "on_servers_kept",
    TaskOutput: "on_task_output",
    TaskRetrying: "on_task_retrying",
    TaskStage: "on_task_stage",
    TaskFinished: "on_task_finished",
    CacheRestored: "on_cache_restored",
    Notice: "on_notice",
    RunFinished: "on_run_finished",
}
