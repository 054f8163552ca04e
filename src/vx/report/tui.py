"""`--ui=tui`: the run's events go to a split view drawn by another process (`vx.report.tui_app`).

The view is a child process so that the run keeps the main thread and its signal handlers (the
view's library wants the main thread too): the view puts the terminal in raw mode, so Ctrl-C and
`q` reach it as keys, and it asks the run to stop by sending this process SIGINT — the very path
of a Ctrl-C on the stream output. Events go to it as JSON lines on a pipe, from a thread, so a
slow view never holds the run up. The view closes by itself when the run ends, as turbo's does
(with `keep`, `--keep-ui`, it stays until the user quits); then the run's rows, failures and
footer are printed as `--output-logs=hash-only` prints them, so the scrollback keeps the outcome.
"""

from __future__ import annotations

import codecs
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import TextIO

import msgspec

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
    TaskStarted,
)
from vx.install import module_argv
from vx.model import Status, TaskId, TaskResult
from vx.report import frames
from vx.report.plain import PlainReporter, Sink
from vx.style import Palette, format_duration, strip_ansi

_DONE = object()  # the writer's last item


def available() -> bool:
    """Whether the view's library is installed: found, not imported (vx never imports it)."""
    from importlib.util import find_spec

    try:
        return find_spec("textual") is not None
    except ValueError:  # a stand-in in sys.modules without a spec: as good as missing
        return False


class TuiReporter:
    """Forward a run's events to the split view; print the outcome once the view is closed."""

    def __init__(
        self, *, version: str, out: TextIO, err: TextIO, color: bool | int, keep: bool = False
    ) -> None:
        self._events: list[Event] = []
        self._keep = keep  # the view stays open after the run until the user quits
        self._version, self._out, self._err, self._color = version, out, err, color
        self._decoders: dict[TaskId, codecs.IncrementalDecoder] = {}
        self._exit: int | None = None
        self._leave = True  # close the view by itself: the run was interrupted or never ended
        read, write = os.pipe()
        src = str(Path(__file__).resolve().parents[2])  # the view imports this same vx
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        self._view = subprocess.Popen(
            [*module_argv("vx.report.tui_app"), str(read)],
            pass_fds=(read,),
            env=env,
        )
        os.close(read)
        self._pipe = os.fdopen(write, "wb")
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_loop, name="vx-tui", daemon=True)
        self._writer.start()

    def __call__(self, event: Event) -> None:
        self._events.append(event)
        message = self._message(event)
        if message is not None:
            self._queue.put(message)

    def outcome(self, exit_code: int, interrupted: bool) -> None:
        """How the run ended. The view closes by itself, unless kept open (`keep`) after a run
        that ended by itself; a run stopped by a signal (SIGTERM, or `q` in the view) closes it."""
        self._exit, self._leave = exit_code, interrupted or not self._keep

    def close(self) -> None:
        """Tell the view the run is over, wait for it to close (by itself, or the user's `q` when
        kept open), then print the outcome."""
        self._queue.put(["closed", self._exit, self._leave])
        self._queue.put(_DONE)
        # A `q` pressed as the run ended sends SIGINT once more: the run is over, nothing to stop.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self._writer.join()
            self._view.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
        plain = PlainReporter(
            flow="hash-only",
            palette=Palette(self._color),
            version=self._version,
            sink=Sink(self._out, self._err),
        )
        for event in self._events:
            plain(event)

    # ------------------------------------------------------------ messages

    def _message(self, event: Event) -> list | None:
        if isinstance(event, RunStarted):
            graph = event.graph
            tasks = [[str(t), graph.nodes[t].config.exec is not None] for t in graph.order]
            return ["tasks", [name for name, runs in tasks if runs], event.concurrency]
        if isinstance(event, TaskStarted):
            return ["start", str(event.id), event.command]
        if isinstance(event, TaskOutput):
            decoder = self._decoders.get(event.id)
            if decoder is None:
                decoder = self._decoders[event.id] = codecs.getincrementaldecoder("utf-8")(
                    errors="replace"
                )
            return ["out", str(event.id), decoder.decode(event.chunk.data)]
        if isinstance(event, TaskReady):
            return ["ready", str(event.id)]
        if isinstance(event, TaskRetrying):
            return ["retry", str(event.id), f"retrying (attempt {event.attempt}/{event.total})"]
        if isinstance(event, TaskFinished):
            result = event.result
            # A cache hit's output never streamed: the view shows what the cache replays.
            log = "" if result.id in self._decoders else "\n".join(frames.log_lines(result.log))
            return ["done", str(result.id), *_outcome(result), log]
        if isinstance(event, CacheRestored):
            return ["restored", str(event.id), event.cache.value]
        if isinstance(event, Notice):
            return ["notice", event.message]
        if isinstance(event, ServersKept):
            return ["kept", [str(t) for t in event.ids]]
        if isinstance(event, RunFinished):
            self._exit = event.summary.exit_code
            wall_ms = (event.summary.ended_at - event.summary.started_at) * 1000
            lines = frames.footer(event.summary.results, wall_ms, self._version, Palette(False))
            return ["summary", strip_ansi(lines[-1]), event.summary.exit_code]
        return None

    def _write_loop(self) -> None:
        encode = msgspec.json.Encoder().encode
        try:
            while True:
                item = self._queue.get()
                if item is _DONE:
                    break
                self._pipe.write(encode(item) + b"\n")
                if self._queue.empty():
                    self._pipe.flush()
        except (BrokenPipeError, OSError):
            pass  # the view is gone; the run goes on, and its outcome is printed at the end
        finally:
            try:
                self._pipe.close()
            except OSError:
                pass


def _outcome(result: TaskResult) -> tuple[str, str]:
    """The view's glyph kind (frames.GLYPHS) and words for a finished task."""
    kind = frames.row_kind(result)
    if result.persistent and result.status is Status.SUCCESS:
        return kind, result.reason or "served"
    words = frames.outcome_label(result)
    if kind in ("skipped", "not-run"):
        return kind, words
    return kind, f"{words} · {format_duration(result.duration_ms)}"
