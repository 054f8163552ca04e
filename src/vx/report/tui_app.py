"""The split view of `--ui=tui`: the task list on the left, the selected task's output on the right.

Runs as its own process (`python -m vx.report.tui_app FD`, started by `vx.report.tui`), reading
the run's events as JSON lines from FD. The output pane follows the task that started last (when
it ends, one still running) until the user picks a task: up/down, j/k or a click. q or Ctrl-C
stops the run (SIGINT to vx, as a Ctrl-C on the stream output) and, once the run is over, closes
the view; vx closes it by itself when the run ends unless told to keep it (`--keep-ui`). The task
list is as wide as its longest row, up to half the terminal; a longer row is cut, never wrapped.
Only this process imports textual.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import msgspec
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, OptionList, RichLog, Static
from textual.widgets.option_list import Option

from vx.report.frames import GLYPHS
from vx.style import overprint

_COLOURS = {
    "miss": "green",
    "up-to-date": "cyan",
    "local": "cyan",
    "remote": "cyan",
    "failed": "red",
    "skipped": "bright_black",
    "aborted": "yellow",
    "not-run": "bright_black",
    "persistent": "green",
    "running": "yellow",
    "ready": "green",
    "serving": "green",
    "waiting": "bright_black",
}
_RUNNING, _WAITING = "●", "·"
_LIST_MIN = 24  # columns: the task list is never narrower (a short name leaves room for words)
_LIST_CHROME = 6  # the list's border, padding and scrollbar around a row


class TaskRow:
    """What the view knows of one task: its state, words and output lines."""

    __slots__ = ("id", "kind", "glyph", "words", "lines", "partial")

    def __init__(self, tid: str) -> None:
        self.id, self.kind, self.glyph, self.words = tid, "waiting", _WAITING, ""
        self.lines: list[str] = []
        self.partial = ""

    def feed(self, text: str) -> list[str]:
        """Add output; return the lines it completed (a partial line waits for its end)."""
        parts = (self.partial + text).split("\n")
        self.partial = parts.pop()
        lines = [overprint(line) for line in parts]  # a progress bar's last state, "\r\n" too
        self.lines.extend(lines)
        return lines

    def flush(self) -> list[str]:
        """End a partial last line; the lines added."""
        rest, self.partial = ([overprint(self.partial)] if self.partial else []), ""
        return rest

    def cells(self) -> int:
        """The row's width uncut, in columns."""
        return self.prompt().cell_len

    def prompt(self, width: int | None = None) -> Text:
        """The row: glyph, id, words; cut with an ellipsis to `width` columns."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{self.glyph} ", style=_COLOURS.get(self.kind, ""))
        text.append(self.id)
        if self.words:
            text.append(f"  {self.words}", style="dim")
        if width is not None and text.cell_len > width:
            text.truncate(width, overflow="ellipsis")
        return text


class RunView(App):
    """The split view. Messages from vx arrive through `call_from_thread(self.on_vx, message)`."""

    CSS = """
    #tasks { width: 24; height: 1fr; border: round $secondary; }
    #output { height: 1fr; border: round $secondary; }
    #status { height: 1; padding: 0 1; }
    """
    BINDINGS = [
        Binding("j", "down", "next", show=False),
        Binding("k", "up", "previous", show=False),
        Binding("q", "stop", "quit"),
        Binding("ctrl+c", "stop", "quit", show=False, priority=True),
    ]
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._events_fd = fd
        self._rows: dict[str, TaskRow] = {}
        self._shown: str | None = None  # the task whose output the right pane holds
        self._picked = False  # the user chose a task: the pane no longer follows the run
        self._moving: list[str] = []  # the tasks the view itself highlighted, not yet told
        self._started: list[str] = []  # tasks in the order they started
        self._begun = time.monotonic()
        self._summary = ""
        self._exit_code: int | None = None
        self._run_over = False  # vx said the run is over
        self._stop_asked = False
        self._vx = os.getppid()  # the run this view draws
        self._notices: list[str] = []

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield OptionList(id="tasks")
            yield RichLog(id="output", wrap=True, markup=False, highlight=False)
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tasks", OptionList).border_title = "tasks"
        self.query_one("#output", RichLog).border_title = "output"
        threading.Thread(target=self._read, daemon=True).start()
        self.set_interval(0.5, self._draw_status)
        self._draw_status()

    def _read(self) -> None:
        decode = msgspec.json.Decoder().decode
        with os.fdopen(self._events_fd, "rb") as events:
            for line in events:
                self.call_from_thread(self.on_vx, decode(line))
        if not self._run_over:  # vx went away without a word (killed): give the terminal back
            self.call_from_thread(self.on_vx, ["closed", self._exit_code, True])

    # ------------------------------------------------------------ messages from vx

    def on_vx(self, message: list) -> None:
        kind = message[0]
        if kind == "tasks":
            tasks = self.query_one("#tasks", OptionList)
            for tid in message[1]:
                self._rows[tid] = TaskRow(tid)
                tasks.add_option(Option(self._rows[tid].prompt(), id=tid))
            self._fit_list(*self._rows.values())
            if message[1]:
                self._follow(message[1][0])
            tasks.focus()
        elif kind == "start":
            self._set(message[1], "running", _RUNNING, "running")
            self._output(message[1], [f"$ {message[2]}"])
            if message[1] in self._rows:
                self._started.append(message[1])
                self._follow(message[1])
        elif kind == "out":
            row = self._rows.get(message[1])
            if row is not None:
                self._write(row, row.feed(message[2]))
        elif kind == "ready":
            self._set(message[1], "ready", GLYPHS["persistent"], "ready")
        elif kind == "retry":
            self._set(message[1], "running", _RUNNING, message[2])
        elif kind == "restored":
            self._set(message[1], message[2], GLYPHS.get(message[2], "⇢"), "restoring")
        elif kind == "done":
            row = self._rows.get(message[1])
            if row is not None:
                replayed = (
                    [overprint(line) for line in message[4].split("\n")] if message[4] else []
                )
                self._output(row.id, row.flush() + replayed)
                kind = (
                    "serving" if message[3] == "serving" else message[2]
                )  # kept in the foreground
                self._set(message[1], kind, GLYPHS.get(message[2], "?"), message[3])
                if message[1] == self._shown and message[2] != "failed":  # on to one running
                    running = [t for t in self._started if self._rows[t].kind == "running"]
                    if running:
                        self._follow(running[-1])
        elif kind == "kept":
            for tid in message[1]:
                self._set(tid, "serving", GLYPHS["persistent"], "serving")
        elif kind == "notice":
            self._notices.append(message[1])
        elif kind == "summary":
            self._summary, self._exit_code = message[1], message[2]
        elif kind == "closed":
            if message[1] is not None:
                self._exit_code = message[1]
            self._run_over = True
            if self._stop_asked or (len(message) > 2 and message[2]):
                self.exit()
                return
        self._draw_status()

    def _set(self, tid: str, kind: str, glyph: str, words: str) -> None:
        row = self._rows.get(tid)
        if row is None:
            return
        row.kind, row.glyph, row.words = kind, glyph, words
        self._fit_list(row)
        self.query_one("#tasks", OptionList).replace_option_prompt(tid, row.prompt(self._row_width))

    # ------------------------------------------------------------ layout and following

    _row_width = _LIST_MIN - _LIST_CHROME
    _list_width: int | None = None
    _longest = 0  # the widest row so far: the list grows with its rows, never jitters back

    def _fit_list(self, *changed: TaskRow) -> None:
        """Size the task list to its longest row, up to half the terminal; cut longer rows."""
        self._longest = max([self._longest, *(row.cells() for row in changed)])
        width = max(_LIST_MIN, min(self._longest + _LIST_CHROME, self.size.width // 2))
        if width == self._list_width:
            return
        self._list_width = width
        self._row_width = width - _LIST_CHROME
        tasks = self.query_one("#tasks", OptionList)
        tasks.styles.width = width
        for tid, row in self._rows.items():
            tasks.replace_option_prompt(tid, row.prompt(self._row_width))

    def on_resize(self) -> None:
        if self._rows:
            self._fit_list()

    def _follow(self, tid: str) -> None:
        """Show `tid`'s output unless the user picked a task: the view highlights it itself."""
        if self._picked or tid == self._shown:
            return
        tasks = self.query_one("#tasks", OptionList)
        index = tasks.get_option_index(tid)
        if tasks.highlighted != index:
            self._moving.append(tid)
            tasks.highlighted = index
        self._show(tid)

    def _output(self, tid: str, lines: list[str]) -> None:
        row = self._rows.get(tid)
        if row is not None:
            row.lines.extend(lines)
            self._write(row, lines)

    def _write(self, row: TaskRow, lines: list[str]) -> None:
        if row.id == self._shown:
            log = self.query_one("#output", RichLog)
            for line in lines:
                log.write(Text.from_ansi(line))

    def _show(self, tid: str) -> None:
        row = self._rows[tid]
        self._shown = tid
        log = self.query_one("#output", RichLog)
        log.clear()
        log.border_title = f"output: {tid}"
        for line in row.lines + ([row.partial] if row.partial else []):
            log.write(Text.from_ansi(line))

    def _draw_status(self) -> None:
        states = [r.kind for r in self._rows.values()]
        running, serving = states.count("running"), states.count("serving")
        done = sum(1 for s in states if s not in ("running", "waiting", "ready", "serving"))
        if self._run_over:
            head = f"run over: exit {self._exit_code} · q quits"
        elif self._stop_asked:
            head = "stopping the run… (q again: at once)"
        else:
            elapsed = time.monotonic() - self._begun
            busy = f"{running} running" + (f" · {serving} serving" if serving else "")
            head = f"{busy} · {done}/{len(states)} done · {elapsed:.0f}s · q stops"
        parts = [head] + ([self._summary] if self._summary else []) + self._notices[-1:]
        for status in self.query("#status").results(Static):  # none once the view is torn down
            status.update(Text(" · ".join(parts)))

    # ------------------------------------------------------------ keys

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        tid = event.option.id
        if tid is not None and tid in self._moving:  # the view's own move, following the run
            del self._moving[: self._moving.index(tid) + 1]
        elif tid is not None:
            self._picked = True  # the user's: the pane stays where the user put it
        if tid is not None and tid != self._shown:
            self._show(tid)

    def action_down(self) -> None:
        self.query_one("#tasks", OptionList).action_cursor_down()

    def action_up(self) -> None:
        self.query_one("#tasks", OptionList).action_cursor_up()

    def action_stop(self) -> None:
        if self._run_over:
            self.exit()
            return
        self._stop_asked = True  # vx tears the tasks down as for Ctrl-C; a second press: at once
        if os.getppid() == self._vx:  # never a signal to whoever adopted an orphaned view
            os.kill(self._vx, signal.SIGINT)
        self._draw_status()


def main() -> None:
    RunView(int(sys.argv[1])).run()


if __name__ == "__main__":
    main()
