"""Format rows, frames and the footer as text lines (CLI-52, CLI-53, CLI-55, CLI-56, CLI-58, CLI-59).

Every function here is pure: a result in, strings out. The reporters decide *when* and *where*
a line goes; this module only decides what it looks like, so the plain and the live console
print the very same lines.
"""

from __future__ import annotations

import codecs
import re
import zlib
from typing import Iterable, Sequence

from vx.model import CacheStatus, LogChunk, Status, TaskId, TaskResult
from vx.verdicts import signal_name

HITS = (CacheStatus.LOCAL, CacheStatus.REMOTE, CacheStatus.UP_TO_DATE)

GLYPHS = {
    "miss": "⏺",
    "up-to-date": "►",
    "local": "⇢",
    "remote": "⇣",
    "failed": "◼",
    "skipped": "⊘",
    "aborted": "✗",
    "not-run": "◌",
}

# CSI (colours, cursor moves), OSC (titles, links) and the two-byte escapes: everything a
# terminal would swallow, so plain output carries only the text a reader would have seen.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

_RGB = {
    "ok": (95, 205, 120),
    "fail": (240, 85, 85),
    "hit": (95, 170, 255),
    "warn": (230, 190, 80),
    "task": (255, 121, 198),  # the task half of an id is pink (CLI-58)
}
_SGR = {"dim": "2", "bold": "1"}
_GLYPH_STYLE = {
    "miss": "ok",
    "up-to-date": "hit",
    "local": "hit",
    "remote": "hit",
    "failed": "fail",
    "skipped": "dim",
    "aborted": "warn",
    "not-run": "dim",
}


def strip_ansi(text: str) -> str:
    """Drop terminal escape sequences; plain output must not carry a tool's colours (CLI-58)."""
    return _ANSI.sub("", text)


class Palette:
    """Paint text in truecolour, or leave it alone when colour is off (CLI-58)."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def paint(self, text: str, style: str) -> str:
        """Wrap `text` in the style's SGR codes; the reset keeps styles from leaking."""
        if not self.color or not text:
            return text
        return f"\x1b[{_sgr(style)}m{text}\x1b[0m"

    def task_id(self, tid: TaskId) -> str:
        """Colour the project by a stable hue and the task half pink."""
        if not self.color:
            return str(tid)
        project = f"\x1b[38;2;{';'.join(map(str, project_rgb(tid.package)))}m{tid.package}\x1b[0m"
        return f"{project}#{self.paint(tid.task, 'task')}"

    def content(self, line: str) -> str:
        """Pass a task's own line through, stripped of escapes when vx prints plain."""
        return line if self.color else strip_ansi(line)


def _sgr(style: str) -> str:
    if style in _SGR:
        return _SGR[style]
    r, g, b = _RGB[style]
    return f"38;2;{r};{g};{b}"


def project_rgb(name: str) -> tuple[int, int, int]:
    """Derive a hue from the name, so a project keeps its colour from run to run."""
    hue = zlib.crc32(name.encode()) % 360
    return _hsl_to_rgb(hue, 0.6, 0.68)


def _hsl_to_rgb(hue: float, sat: float, light: float) -> tuple[int, int, int]:
    chroma = (1 - abs(2 * light - 1)) * sat
    x = chroma * (1 - abs((hue / 60) % 2 - 1))
    m = light - chroma / 2
    sector = int(hue // 60) % 6
    r, g, b = [(chroma, x, 0), (x, chroma, 0), (0, chroma, x), (0, x, chroma), (x, 0, chroma), (chroma, 0, x)][sector]
    return (round((r + m) * 255), round((g + m) * 255), round((b + m) * 255))


# ---------------------------------------------------------------- words


def format_duration(ms: float) -> str:
    """Spell a duration `0.41s`, `12.34s`, `1m02s`, `1h05m`: decimals while seconds matter."""
    seconds = max(ms, 0.0) / 1000
    if seconds < 60:
        return f"{seconds:.2f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def format_elapsed(seconds: float) -> str:
    """Spell a ticking worker clock: tenths are enough to see it move."""
    if seconds < 60:
        return f"{max(seconds, 0.0):.1f}s"
    return format_duration(seconds * 1000)


def never_started(result: TaskResult) -> bool:
    """Tell whether the result stands for a task the run never reached (CLI-56 `not run`)."""
    if result.status is Status.SKIPPED:
        return result.blocked_by is None
    return result.status is Status.ABORTED and result.exit_code is None and result.attempts == 0


def row_kind(result: TaskResult) -> str:
    """Name the glyph family of a result (CLI-52)."""
    if never_started(result):
        return "not-run"
    if result.status is not Status.SUCCESS:
        return result.status.value
    return "miss" if result.cache is CacheStatus.NO_CACHE else result.cache.value


def failure_detail(result: TaskResult) -> str:
    """Say what a failure label holds in its parentheses: `exit 137, 128 + SIGKILL` (CLI-59).

    The rebuilder's `reason` wins when it has one: it knows about sandbox violations and
    spawn errors the exit code cannot tell.
    """
    if result.reason:
        reason = result.reason
        if reason.startswith("failed (") and reason.endswith(")"):
            return reason[len("failed ("):-1]
        return reason
    return _exit_words(result.exit_code, result.timed_out)


def _exit_words(code: int | None, timed_out: bool) -> str:
    if code is None:
        return "timed out" if timed_out else "no exit code"
    words = f"exit {code}"
    name = _signal_name(code)
    if timed_out:
        return f"timed out, {words}"
    return f"{words}, 128 + {name}" if name else words


def _signal_name(code: int) -> str | None:
    return signal_name(code - 128) if 128 < code < 128 + 65 else None


def outcome_label(result: TaskResult) -> str:
    """Name the outcome a frame ends with: `ok`, `cached (local)`, `failed (exit 1)`… (CLI-53)."""
    if result.status is Status.FAILED:
        return f"failed ({failure_detail(result)})"
    if result.status is Status.SKIPPED:
        return "skipped"
    if result.status is Status.ABORTED:
        return "not run" if never_started(result) else "aborted"
    if result.cache is CacheStatus.UP_TO_DATE:
        return "up-to-date"
    if result.cache in HITS:
        return f"cached ({result.cache.value})"
    return "ok"


def _outcome_style(result: TaskResult) -> str:
    return _GLYPH_STYLE[row_kind(result)]


# ---------------------------------------------------------------- rows


def task_row(result: TaskResult, palette: Palette) -> str:
    """Format `<glyph> <time> <status> <cache> <name>` in aligned columns (CLI-52, CLI-56).

    Tasks that never ran leave the time and cache columns blank; the suffix names why a
    task failed or was skipped, tracing a skip to its root failure.
    """
    kind = row_kind(result)
    ran = kind not in ("skipped", "not-run")
    time = format_duration(result.duration_ms) if ran else ""
    cache = result.cache.value if ran else ""
    status = _row_status(result, kind)
    parts = (
        palette.paint(GLYPHS[kind], _GLYPH_STYLE[kind]),
        palette.paint(f"{time:>6}", "dim"),
        palette.paint(f"{status:<7}", _GLYPH_STYLE[kind]),
        palette.paint(f"{cache:<10}", "dim"),
        palette.task_id(result.id) + _row_suffix(result, kind),
    )
    return " ".join(parts)


def _row_status(result: TaskResult, kind: str) -> str:
    if kind == "not-run":
        return "not run"
    return "ok" if result.status is Status.SUCCESS else result.status.value


def _row_suffix(result: TaskResult, kind: str) -> str:
    if kind == "failed":
        return f" • {failure_detail(result)}"
    if kind == "skipped" and result.blocked_by is not None:
        return f" • blocked by {result.blocked_by}"
    return ""


def not_run_row(results: Sequence[TaskResult], palette: Palette) -> str:
    """Fold every task the run never reached into one line; after a stop they can be hundreds."""
    count = len(results)
    why = (results[0].reason or "").removeprefix("not run: ")
    noun = "task" if count == 1 else "tasks"
    line = f"{palette.paint(GLYPHS['not-run'], 'dim')} {count} {noun} not run"
    return f"{line} • {why}" if why else line


# ---------------------------------------------------------------- frames


def frame_open(tid: TaskId, palette: Palette, outcome: str | None = None, style: str = "dim") -> str:
    """Open a frame `┌─ id > outcome`; a live frame opens before its outcome is known (`┌─ id`)."""
    head = f"{palette.paint('┌─', 'dim')} {palette.task_id(tid)}"
    return head if outcome is None else f"{head} {palette.paint('>', 'dim')} {palette.paint(outcome, style)}"


def frame_command(command: str, palette: Palette) -> str:
    return f"{palette.paint('$', 'dim')} {command}"


def frame_close(result: TaskResult, palette: Palette) -> str:
    """Close a frame: `└─ id ── (1.20s) outcome`."""
    dur = palette.paint(f"── ({format_duration(result.duration_ms)})", "dim")
    label = palette.paint(outcome_label(result), _outcome_style(result))
    return f"{palette.paint('└─', 'dim')} {palette.task_id(result.id)} {dur} {label}"


def executed(result: TaskResult) -> bool:
    """Tell whether the command ran in this run (hits and skips show no `$ command`)."""
    return result.cache not in HITS and not never_started(result) and result.status is not Status.SKIPPED


def frame(result: TaskResult, palette: Palette, command: str | None = None) -> list[str]:
    """Build a whole frame: header, command, raw log, footer, blank line (CLI-53)."""
    lines = [frame_open(result.id, palette, outcome_label(result), _outcome_style(result))]
    command = command or result.command
    if command and executed(result):
        lines.append(frame_command(command, palette))
    lines += [palette.content(line) for line in log_lines(result.log)]
    return lines + sandbox_section(result, palette) + [frame_close(result, palette), ""]


def sandbox_section(result: TaskResult, palette: Palette) -> list[str]:
    """List what the sandbox caught, one path per line with the grant that would allow it (SB-12).

    ```
    ├─ SANDBOX VIOLATIONS (2)
    │ read  packages/app/fixtures/a.json  → allow.read "fixtures/a.json"
    │ write packages/app/out.txt  → allow.write "out.txt"
    ```
    """
    if not result.violations:
        return []
    bar = palette.paint("│", "dim")
    head = f"{palette.paint('├─', 'dim')} {palette.paint(f'SANDBOX VIOLATIONS ({len(result.violations)})', 'fail')}"
    return [head] + [f"{bar} {v.kind:<5} {v.path}  {palette.paint('→', 'dim')} {v.grant_hint}"
                     for v in result.violations]


# ---------------------------------------------------------------- logs


class LineSplitter:
    """Turn a task's byte chunks into whole text lines as they arrive.

    Each stream keeps its own decoder and partial line, so a UTF-8 sequence or a line cut
    across chunks is joined before it is printed, even when stdout and stderr interleave.
    """

    def __init__(self) -> None:
        self._decoders = {1: _decoder(), 2: _decoder()}
        self._partial = {1: "", 2: ""}

    def feed(self, chunk: LogChunk) -> list[str]:
        stream = 2 if chunk.stream == 2 else 1
        text = self._partial[stream] + self._decoders[stream].decode(chunk.data)
        *lines, self._partial[stream] = text.split("\n")
        return lines

    def finish(self) -> list[str]:
        """Return what is left: the last line of a stream that did not end with a newline."""
        rest = []
        for stream in (1, 2):
            tail = self._partial[stream] + self._decoders[stream].decode(b"", final=True)
            self._partial[stream] = ""
            if tail:
                rest.append(tail)
        return rest


def _decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


def log_lines(chunks: Iterable[LogChunk]) -> list[str]:
    """Split a stored log into lines, in arrival order (LC-10)."""
    splitter = LineSplitter()
    lines: list[str] = []
    for chunk in chunks:
        lines += splitter.feed(chunk)
    return lines + splitter.finish()


# ---------------------------------------------------------------- footer


def footer(results: Sequence[TaskResult], wall_ms: float, version: str, palette: Palette) -> list[str]:
    """Build the footer: a `─ vx <ver> ─` rule as wide as the result row under it (CLI-55)."""
    plain, painted = _result_row(results, wall_ms, palette)
    head = f"─ vx {version} "
    rule = head + "─" * max(len(plain) - len(head), 2)
    return [palette.paint(rule, "dim"), painted]


def _result_row(results: Sequence[TaskResult], wall_ms: float, palette: Palette) -> tuple[str, str]:
    """Count `12 tasks · 10 cached (83%) · 2 failed · wall 0.41s`, plain and painted."""
    parts = [(f"{len(results)} {'task' if len(results) == 1 else 'tasks'}", "bold")]
    cached = sum(1 for r in results if r.status is Status.SUCCESS and r.cache in HITS)
    if results:
        parts.append((f"{cached} cached ({cached * 100 // len(results)}%)", "hit" if cached else "dim"))
    for status, style in ((Status.FAILED, "fail"), (Status.SKIPPED, "dim"), (Status.ABORTED, "warn")):
        count = sum(1 for r in results if r.status is status)
        if count:
            parts.append((f"{count} {status.value}", style))
    parts.append((f"wall {format_duration(wall_ms)}", "dim"))
    sep = " · "
    return sep.join(p for p, _ in parts), palette.paint(sep, "dim").join(palette.paint(p, s) for p, s in parts)
