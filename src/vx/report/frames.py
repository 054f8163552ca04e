"""Format rows, frames and the footer as text lines.

Every function here is pure: a result in, strings out. The reporters decide *when* and *where*
a line goes; this module only decides what it looks like, so the plain and the live console
print the very same lines.
"""

from __future__ import annotations

import codecs
from typing import Iterable, Sequence

from vx import style
from vx.engine.verdicts import signal_name
from vx.model import CacheStatus, LogChunk, Status, TaskId, TaskResult
from vx.style import Palette, format_duration, project_rgb, strip_ansi  # noqa: F401 (re-exported)

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
    "persistent": "▸",
}

_GLYPH_STYLE = {
    "miss": "ok",
    "up-to-date": "hit",
    "local": "hit",
    "remote": "hit",
    "failed": "fail",
    "skipped": "dim",
    "aborted": "warn",
    "not-run": "dim",
    "persistent": "ok",
}


# ---------------------------------------------------------------- words


def format_elapsed(seconds: float) -> str:
    """Spell a ticking worker clock: tenths are enough to see it move."""
    if seconds < 60:
        return f"{max(seconds, 0.0):.1f}s"
    return format_duration(seconds * 1000)


def never_started(result: TaskResult) -> bool:
    """Tell whether the result stands for a task the run never reached (a `not run` row)."""
    if result.status is Status.SKIPPED:
        return result.blocked_by is None
    return result.status is Status.ABORTED and result.exit_code is None and result.attempts == 0


def row_kind(result: TaskResult) -> str:
    """Name the glyph family of a result."""
    if never_started(result):
        return "not-run"
    if result.status is not Status.SUCCESS:
        return result.status.value
    if result.persistent:
        return "persistent"
    return "miss" if result.cache is CacheStatus.NO_CACHE else result.cache.value


def failure_detail(result: TaskResult) -> str:
    """Say what a failure label holds in its parentheses: `exit 137, 128 + SIGKILL`.

    The rebuilder's `reason` wins when it has one: it knows about sandbox violations and
    spawn errors the exit code cannot tell.
    """
    if result.reason:
        reason = result.reason
        if reason.startswith("failed (") and reason.endswith(")"):
            return reason[len("failed (") : -1]
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
    """Name the outcome a frame ends with: `ok`, `cached (local)`, `failed (exit 1)`…"""
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
    """Format `<glyph> <time> <status> <cache> <name>` in aligned columns.

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
    if kind == "persistent" and result.reason:
        return f" • {result.reason}"
    return ""


def ready_row(tid: TaskId, duration_ms: float, palette: Palette) -> str:
    """`▸  1.20s ready   web#dev`: a persistent task became ready."""
    return " ".join(
        (
            palette.paint(GLYPHS["persistent"], "ok"),
            palette.paint(f"{format_duration(duration_ms):>6}", "dim"),
            palette.paint(f"{'ready':<7}", "ok"),
            palette.task_id(tid),
        )
    )


def server_line(tid: TaskId, width: int, line: str, palette: Palette) -> str:
    """`web#dev │ listening on :3000`: one line of a persistent task's output."""
    pad = " " * max(0, width - len(str(tid)))
    return f"{palette.task_id(tid)}{pad} {palette.paint('│', 'dim')} {palette.content(line)}"


def not_run_row(results: Sequence[TaskResult], palette: Palette) -> str:
    """Fold every task the run never reached into one line; after a stop they can be hundreds."""
    count = len(results)
    why = (results[0].reason or "").removeprefix("not run: ")
    noun = "task" if count == 1 else "tasks"
    line = f"{palette.paint(GLYPHS['not-run'], 'dim')} {count} {noun} not run"
    return f"{line} • {why}" if why else line


# ---------------------------------------------------------------- frames


def frame_open(
    tid: TaskId, palette: Palette, outcome: str | None = None, style: str = "dim"
) -> str:
    """Open a frame `┌─ id > outcome`; a live frame opens before its outcome is known (`┌─ id`)."""
    head = f"{palette.paint('┌─', 'dim')} {palette.task_id(tid)}"
    return (
        head
        if outcome is None
        else f"{head} {palette.paint('>', 'dim')} {palette.paint(outcome, style)}"
    )


def frame_command(command: str, palette: Palette) -> str:
    return f"{palette.paint('$', 'dim')} {command}"


def frame_close(result: TaskResult, palette: Palette) -> str:
    """Close a frame: `└─ id ── (1.20s) outcome`."""
    dur = palette.paint(f"── ({format_duration(result.duration_ms)})", "dim")
    label = palette.paint(outcome_label(result), _outcome_style(result))
    return f"{palette.paint('└─', 'dim')} {palette.task_id(result.id)} {dur} {label}"


def executed(result: TaskResult) -> bool:
    """Tell whether the command ran in this run (hits and skips show no `$ command`)."""
    return (
        result.cache not in HITS
        and not never_started(result)
        and result.status is not Status.SKIPPED
    )


def frame(result: TaskResult, palette: Palette, command: str | None = None) -> list[str]:
    """Build a whole frame: header, command, raw log, footer, blank line."""
    lines = [frame_open(result.id, palette, outcome_label(result), _outcome_style(result))]
    command = command or result.command
    if command and executed(result):
        lines.append(frame_command(command, palette))
    lines += [palette.content(line) for line in log_lines(result.log)]
    return lines + sandbox_section(result, palette) + [frame_close(result, palette), ""]


def sandbox_section(result: TaskResult, palette: Palette) -> list[str]:
    """List what the sandbox caught, one path per line with the grant that would allow it.

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
    return [head] + [
        f"{bar} {v.kind:<5} {v.path}  {palette.paint('→', 'dim')} {v.grant_hint}"
        for v in result.violations
    ]


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
    """Split a stored log into lines, in arrival order."""
    splitter = LineSplitter()
    lines: list[str] = []
    for chunk in chunks:
        lines += splitter.feed(chunk)
    return lines + splitter.finish()


# ---------------------------------------------------------------- footer


def footer(
    results: Sequence[TaskResult], wall_ms: float, version: str, palette: Palette
) -> list[str]:
    """Build the footer: a `─ vx <ver> ─` rule as wide as the result row under it."""
    cached = sum(1 for r in results if r.status is Status.SUCCESS and r.cache in HITS)
    tallies = {
        status.value: sum(1 for r in results if r.status is status)
        for status in (Status.FAILED, Status.SKIPPED)
    }
    aborted = [r for r in results if r.status is Status.ABORTED]
    tallies["not started"] = sum(1 for r in aborted if never_started(r))
    tallies["stopped"] = len(aborted) - tallies["not started"]
    return style.footer(len(results), cached, tallies, wall_ms, version, palette)


# ---------------------------------------------------------------- GitHub Actions


def github_frame(result: TaskResult, lines: list[str], token: str) -> list[str]:
    """A frame inside `::group::` (a failure stays open and is annotated with `::error`), its text
    fenced by `::stop-commands::` so a task's output can never issue workflow commands."""
    failed = result.status is not Status.SUCCESS
    seconds = format_elapsed(result.duration_ms / 1000)
    head = (
        []
        if failed
        else [f"::group::{_gh_escape(str(result.id))} ({outcome_label(result)} {seconds})"]
    )
    fenced = [f"::stop-commands::{token}", *lines, f"::{token}::"]
    if failed:
        detail = _gh_escape(
            failure_detail(result) if not never_started(result) else result.status.value
        )
        return [
            *fenced,
            f"::error title={_gh_escape(str(result.id), prop=True)}::{result.id} failed ({detail})",
        ]
    return [*head, *fenced, "::endgroup::"]


def _gh_escape(text: str, prop: bool = False) -> str:
    """Workflow-command escaping: `%`, CR and LF always; `:` and `,` in a property."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text
