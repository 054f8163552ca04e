"""Keep a live status region under the scrolling output on a terminal.

The region is a separator, a pinned `▸ id running` row per ready persistent task, one `<elapsed>
<id>` row per running task (no glyph, at most min(concurrency, 10)) and a meter. It lives on
stderr below everything else: before any line is printed it is erased, and it is drawn again at
most every 30 ms, so a chatty task costs one redraw per frame of the terminal, not one per line.
It is erased for good before the footer. Imported only when a terminal asks for it: this is the
one module that uses rich.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from typing import Callable, TextIO

from vx.events import Event, RunFinished, RunStarted, TaskFinished, TaskReady, TaskStarted
from vx.model import Status, TaskId, TaskResult
from vx.report import frames
from vx.report.frames import Palette
from vx.report.plain import PlainReporter, Sink

REDRAW_FLOOR_S = 0.03  # never redraw more often than this
TICK_S = 0.1  # the worker clocks show tenths
MAX_WORKER_ROWS = 10
_SYNC_ON, _SYNC_OFF = "\x1b[?2026h", "\x1b[?2026l"  # synchronized output: no tearing mid-redraw


def terminal_width(stream: TextIO) -> int:
    """Ask the terminal behind `stream` for its width; fall back to a sane default."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size().columns  # a pty may report 0


class LiveRegion:
    """Hold what the region shows; draw or erase it in place with ANSI cursor moves."""

    def __init__(self, sink: Sink, palette: Palette, width: Callable[[], int]) -> None:
        from rich.cells import cell_len, set_cell_size  # wide characters take two columns

        self._cell_len, self._set_cell_size = cell_len, set_cell_size
        self.sink, self.palette, self.width = sink, palette, width
        self.running: dict[TaskId, float] = {}
        self.serving: list[TaskId] = []  # ready persistent tasks, pinned above the workers
        self.slots, self.total, self.done, self.cached, self.failed = 1, 0, 0, 0, 0
        self.active = False
        self.dirty = False
        self.last_draw = -math.inf
        self._drawn = 0

    def begin(self, total: int, concurrency: int) -> None:
        self.total, self.slots, self.active = total, max(1, min(concurrency, MAX_WORKER_ROWS)), True

    def finished(self, result: TaskResult) -> None:
        self.running.pop(result.id, None)
        self.done += 1
        self.cached += int(result.status is Status.SUCCESS and result.cache in frames.HITS)
        self.failed += int(result.status is Status.FAILED)

    def lines(self, now: float) -> list[str]:
        """Build the region's rows, each cut to the terminal so none wraps and breaks the erase."""
        room = max(self.width() - 1, 10)
        out = [self.palette.paint("─" * min(room, 60), "dim")]
        out += [self._server_row(tid, room) for tid in self.serving]
        out += self._worker_rows(now, room)
        out.append(self._meter(room))
        return out

    def _worker_rows(self, now: float, room: int) -> list[str]:
        order = sorted(self.running.items(), key=lambda item: item[1])
        shown = order if len(order) <= self.slots else order[: self.slots - 1]
        rows = [self._worker_row(tid, now - started, room) for tid, started in shown]
        if len(shown) < len(order):
            rows.append(self.palette.paint(f"{'':>6} … {len(order) - len(shown)} more", "dim"))
        return rows

    def _server_row(self, tid: TaskId, room: int) -> str:
        glyph = self.palette.paint(f"{frames.GLYPHS['persistent']:>6}", "ok")
        name = str(tid)
        if self._cell_len(name) > room - 15:
            return f"{glyph} {self._set_cell_size(name, room - 15)} running"
        return f"{glyph} {self.palette.task_id(tid)} {self.palette.paint('running', 'dim')}"

    def _worker_row(self, tid: TaskId, elapsed: float, room: int) -> str:
        clock = self.palette.paint(f"{frames.format_elapsed(elapsed):>6}", "dim")
        name = str(tid)
        if self._cell_len(name) > room - 7:
            return f"{clock} {self._set_cell_size(name, room - 7)}"
        return f"{clock} {self.palette.task_id(tid)}"

    def _meter(self, room: int) -> str:
        text = f"{self.done}/{self.total} tasks · {self.cached} cached"
        if self.failed:
            text += f" · {self.failed} failed"
        return self.palette.paint(
            self._set_cell_size(text, room) if self._cell_len(text) > room else text, "dim"
        )

    def draw(self, now: float) -> None:
        """Replace the region on screen with its current rows in one write."""
        rows = self.lines(now)
        self.sink.raw("err", _SYNC_ON + self._erase_codes() + "\n".join(rows) + "\n" + _SYNC_OFF)
        self._drawn, self.last_draw, self.dirty = len(rows), now, False

    def hide(self) -> None:
        """Erase the region so a line can be printed where it stood; it is drawn again later."""
        if self._drawn:
            self.sink.raw("err", self._erase_codes())
            self._drawn = 0
        self.dirty = self.active

    def _erase_codes(self) -> str:
        # Every row ends in a newline, but the terminal may have echoed something since (a
        # Ctrl-C's `^C`, a key typed): CHA (`ESC [ G`) puts the cursor back in column 1, or the
        # erase below would keep the separator's first columns (a stray `──`). Not a CR: a tty
        # with `ocrnl` would turn it into one more line feed.
        return f"\x1b[{self._drawn}A\x1b[G\x1b[J" if self._drawn else ""


class ConsoleReporter(PlainReporter):
    """Report like the plain reporter, plus a live region drawn from events and a ticking thread."""

    def __init__(
        self,
        *,
        flow: str,
        palette: Palette,
        version: str,
        sink: Sink,
        width: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
        tick_s: float | None = REDRAW_FLOOR_S,
    ) -> None:
        super().__init__(flow=flow, palette=palette, version=version, sink=sink)
        self.region = LiveRegion(sink, palette, width)
        self._clock = clock
        self._tick_s = tick_s  # None: no thread, the caller calls tick() (tests)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._held: TaskId | None = None  # the interactive task that has the terminal
        sink.before_write = self.region.hide

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.close()  # erased before the footer
        with self._lock:
            self._track(event)
            super().__call__(event)
            self._request_draw()

    def _track(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            groups = sum(1 for n in event.graph.nodes.values() if n.is_group)
            self.region.begin(len(event.graph.nodes) - groups, event.concurrency)
            self._start_ticker()
        elif isinstance(event, TaskStarted) and event.terminal:
            self.region.hide()  # the task has the terminal: nothing is drawn over it
            self.region.active, self._held = False, event.id
        elif isinstance(event, TaskStarted):
            self.region.running.setdefault(event.id, self._clock())
        elif isinstance(event, TaskReady):
            self.region.running.pop(event.id, None)  # a ready server is no work in progress: pinned
            self.region.serving.append(event.id)
        elif isinstance(event, TaskFinished) and event.result.id == self._held:
            self.region.active, self._held = True, None
            self.region.finished(event.result)
        elif isinstance(event, TaskFinished) and self.region.active:
            self.region.finished(event.result)

    def _request_draw(self) -> None:
        """Draw now unless the last draw was under the 30 ms floor; the ticker catches up."""
        if not self.region.active:
            return
        now = self._clock()
        if now - self.region.last_draw >= REDRAW_FLOOR_S:
            self.region.draw(now)
        else:
            self.region.dirty = True

    def tick(self) -> None:
        """Redraw when something changed, or when a running task's clock moved a tenth."""
        with self._lock:
            region, now = self.region, self._clock()
            stale = region.running and now - region.last_draw >= TICK_S
            if (
                region.active
                and (region.dirty or stale)
                and now - region.last_draw >= REDRAW_FLOOR_S
            ):
                region.draw(now)

    def close(self) -> None:
        """Stop the ticker and erase the region; safe to call twice, and from a `finally`."""
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        self._ticker = None
        with self._lock:
            self.region.hide()
            self.region.active = False
            self.region.dirty = False

    def _start_ticker(self) -> None:
        if self._tick_s is None or self._ticker is not None:
            return
        self._ticker = threading.Thread(target=self._tick_loop, name="vx-status", daemon=True)
        self._ticker.start()

    def _tick_loop(self) -> None:
        while not self._stop.wait(self._tick_s):
            self.tick()
