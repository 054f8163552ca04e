"""Reporters, summary JSON and `--dry` output (CLI-36, CLI-50..56, CLI-58..60, OBS-02, EX-20).

Event sequences are fed to reporters writing into StringIO; the lines are pinned exactly.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vx import style
from vx.errors import EnvironmentFailure, UsageError
from vx.events import (
    CacheRestored,
    Notice,
    PlannedTask,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskOutput,
    TaskRetrying,
    TaskStarted,
)
from vx.model import (
    CacheStatus,
    ExecConfig,
    LogChunk,
    RunSummary,
    Status,
    TaskConfig,
    TaskGraph,
    TaskId,
    TaskNode,
    TaskResult,
)
from vx.report import frames
from vx.report.console import ConsoleReporter
from vx.report.dry import render_dry
from vx.report.frames import Palette
from vx.report.plain import VISIBILITY, Sink
from vx.report.reporters import make_reporter
from vx.report.summary import summary_dict, write_summary
from vx.style import color_enabled, overprint

LIB, APP, WEB, ALL = (
    TaskId("lib", "build"),
    TaskId("app", "build"),
    TaskId("web", "build"),
    TaskId("//", "all"),
)
ESC = "\x1b"


# ---------------------------------------------------------------- builders


def node(tid: TaskId, deps=(), *, group=False, requested=False) -> TaskNode:
    exec_ = None if group else ExecConfig(f"run {tid.task}")
    return TaskNode(tid, TaskConfig(tid.task, "{}", exec_), tid.package, tuple(deps), requested)


def graph(nodes: list[TaskNode]) -> TaskGraph:
    ids = tuple(n.id for n in nodes)
    return TaskGraph(
        {n.id: n for n in nodes},
        ids,
        {t: 0 for t in ids},
        tuple(n.id for n in nodes if n.requested),
    )


def out(tid: TaskId, text: str, stream: int = 1) -> LogChunk:
    return LogChunk(stream, text.encode())


def ok(tid, ms=1200.0, cache=CacheStatus.MISS, log=(), command="tsc") -> TaskResult:
    return TaskResult(
        tid,
        Status.SUCCESS,
        cache,
        key=f"key-{tid.package}",
        duration_ms=ms,
        exit_code=0,
        log=tuple(log),
        command=command,
        attempts=0 if cache in frames.HITS else 1,
    )


def failed(tid, ms=410.0, code=1, log=(), **kw) -> TaskResult:
    return TaskResult(
        tid,
        Status.FAILED,
        CacheStatus.MISS,
        key=f"key-{tid.package}",
        duration_ms=ms,
        exit_code=code,
        log=tuple(log),
        command="vite build",
        attempts=1,
        **kw,
    )


def skipped(tid, blocker) -> TaskResult:
    return TaskResult(
        tid,
        Status.SKIPPED,
        CacheStatus.NO_CACHE,
        blocked_by=blocker,
        reason=f"blocked by {blocker}",
    )


def not_run(tid) -> TaskResult:
    return TaskResult(
        tid, Status.ABORTED, CacheStatus.NO_CACHE, reason="not run: the run was stopped"
    )


def summary(results, code=0, wall=0.41) -> RunSummary:
    return RunSummary("run-1", tuple(results), 1700000000.0, 1700000000.0 + wall, code)


def run(flow, events, *, color=False):
    """Feed events to a plain reporter; return (stdout lines, stderr lines)."""
    o, e = io.StringIO(), io.StringIO()
    reporter = make_reporter(flow=flow, color=color, live=False, version="0.1.0", out=o, err=e)
    for event in events:
        reporter(event)
    return o.getvalue().split("\n")[:-1], e.getvalue().split("\n")[:-1]


def rule(row: str) -> str:
    """The footer rule is exactly as wide as the result row under it (CLI-55)."""
    head = "─ vx 0.1.0 "
    return head + "─" * (len(row) - len(head))


def executed_events(tid, result, chunks, command="tsc"):
    return (
        [TaskStarted(tid, command)] + [TaskOutput(tid, c) for c in chunks] + [TaskFinished(result)]
    )


# The two-task run most tests share: lib#build (a dependency) then app#build (requested).
LIB_LOG = (out(LIB, "lib: compiled\n"),)
APP_LOG = (out(APP, "app: built\n"), out(APP, "app: warning\n", 2))
G2 = graph([node(LIB), node(APP, [LIB], requested=True)])


def two_task_run(app_result, lib_result=None):
    lib_result = lib_result or ok(LIB, log=LIB_LOG)
    events = [RunStarted(G2, 2)] + executed_events(LIB, lib_result, LIB_LOG)
    if lib_result.status is Status.SUCCESS:
        events += executed_events(APP, app_result, app_result.log, "vite build")
    return events + [
        RunFinished(
            summary([lib_result, app_result], code=int(app_result.status is not Status.SUCCESS))
        )
    ]


# ---------------------------------------------------------------- CLI-51 matrix


@pytest.mark.feature("CLI-51")
def test_visibility_matrix_is_pinned():
    assert VISIBILITY == {
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
        "ci": {
            "executed": "frame",
            "hit": "frame",
            "failed": "frame",
            "skipped": "row",
            "aborted": "frame",
            "not-run": "fold",
        },
        # --output-logs (CLI-33): turbo's names
        "full": {
            "executed": "frame",
            "hit": "frame",
            "failed": "frame",
            "skipped": "row",
            "aborted": "frame",
            "not-run": "fold",
        },
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


@pytest.mark.feature("CLI-51")
def test_failures_are_never_silent_in_any_flow():
    assert all(column["failed"] != "silent" for column in VISIBILITY.values())


# ---------------------------------------------------------------- focused (CLI-50, CLI-53)


@pytest.mark.feature("CLI-50")
def test_focused_streams_the_requested_task_in_a_live_frame_and_keeps_deps_silent():
    stdout, stderr = run("focused", two_task_run(ok(APP, 2500, log=APP_LOG, command="vite build")))
    assert stdout == [
        "┌─ app#build",
        "$ vite build",
        "app: built",
        "app: warning",
        "└─ app#build ── (2.50s) ok",
        "",
    ]
    assert stderr == [  # the frame's blank line already separates the footer
        rule("2 tasks · 0 cached (0%) · wall 0.41s"),
        "2 tasks · 0 cached (0%) · wall 0.41s",
    ]


@pytest.mark.feature("CLI-53")
def test_live_frame_joins_lines_split_across_chunks_and_flushes_the_last_partial():
    chunks = (out(APP, "hel"), out(APP, "lo\nwor"), out(APP, "ld"))
    stdout, _ = run("focused", two_task_run(ok(APP, 100, log=chunks)))
    assert stdout[2:5] == ["hello", "world", "└─ app#build ── (0.10s) ok"]


@pytest.mark.feature("CLI-53")
def test_utf8_split_across_chunks_is_decoded_whole():
    snow = "☃".encode()
    chunks = (LogChunk(1, b"a" + snow[:1]), LogChunk(1, snow[1:] + b"b\n"))
    stdout, _ = run("focused", two_task_run(ok(APP, 100, log=chunks)))
    assert stdout[2] == "a☃b"


@pytest.mark.feature("CLI-50")
def test_focused_dependency_failure_is_one_row_then_its_frame_before_the_footer():
    lib_fail = failed(LIB, log=(out(LIB, "TS2322: bad type\n"),))
    app_skip = skipped(APP, LIB)
    events = [
        RunStarted(G2, 2),
        *executed_events(LIB, lib_fail, lib_fail.log),
        RunFinished(summary([lib_fail, app_skip], code=1)),
    ]
    stdout, stderr = run("focused", events)
    assert stderr == [
        "◼  0.41s failed  miss       lib#build • exit 1",
        "⊘        skipped            app#build • blocked by lib#build",
        rule("2 tasks · 0 cached (0%) · 1 failed · 1 skipped · wall 0.41s"),
        "2 tasks · 0 cached (0%) · 1 failed · 1 skipped · wall 0.41s",
    ]
    assert stdout == [
        "",  # rows on stderr, then a blank line, then the replay (one terminal shows both)
        "┌─ lib#build > failed (exit 1)",
        "$ tsc",
        "TS2322: bad type",
        "└─ lib#build ── (0.41s) failed (exit 1)",
        "",
    ]


@pytest.mark.feature("CLI-50")
def test_focused_failure_of_the_requested_task_is_framed_once_not_replayed():
    stdout, stderr = run("focused", two_task_run(failed(APP, log=APP_LOG)))
    assert stdout.count("┌─ app#build") == 1 and "└─ app#build ── (0.41s) failed (exit 1)" in stdout
    assert not any(line.startswith("┌─ app#build >") for line in stdout)
    assert stderr[-1] == "2 tasks · 0 cached (0%) · 1 failed · wall 0.41s"


@pytest.mark.feature("LC-10")
def test_focused_cache_hit_replays_its_stored_log_labelled_with_the_cache_status():
    hit = ok(APP, 12, CacheStatus.LOCAL, log=APP_LOG, command="vite build")
    events = [
        RunStarted(G2, 2),
        CacheRestored(LIB, CacheStatus.LOCAL),
        TaskFinished(ok(LIB, 3, CacheStatus.LOCAL)),
        CacheRestored(APP, CacheStatus.LOCAL),
        TaskFinished(hit),
        RunFinished(summary([ok(LIB, 3, CacheStatus.LOCAL), hit])),
    ]
    stdout, stderr = run("focused", events)
    assert stdout == [
        "┌─ app#build > cached (local)",
        "app: built",
        "app: warning",
        "└─ app#build ── (0.01s) cached (local)",
        "",
    ]
    assert stderr[-1] == "2 tasks · 2 cached (100%) · wall 0.41s"


@pytest.mark.feature("CLI-53")
def test_several_requested_tasks_are_buffered_and_framed_whole():
    g = graph([node(LIB, requested=True), node(APP, requested=True)])
    lib_r, app_r = ok(LIB, log=LIB_LOG), ok(APP, 300, log=APP_LOG, command="vite build")
    events = [
        RunStarted(g, 2),
        TaskStarted(LIB, "tsc"),
        TaskStarted(APP, "vite build"),
        TaskOutput(APP, APP_LOG[0]),
        TaskOutput(LIB, LIB_LOG[0]),
        TaskOutput(APP, APP_LOG[1]),
        TaskFinished(lib_r),
        TaskFinished(app_r),
        RunFinished(summary([lib_r, app_r])),
    ]
    stdout, _ = run("focused", events)
    assert stdout == [
        "┌─ lib#build > ok",
        "$ tsc",
        "lib: compiled",
        "└─ lib#build ── (1.20s) ok",
        "",
        "┌─ app#build > ok",
        "$ vite build",
        "app: built",
        "app: warning",
        "└─ app#build ── (0.30s) ok",
        "",
    ]


@pytest.mark.feature("GR-03")
def test_a_requested_group_is_a_transparent_folder_for_its_one_task():
    g = graph([node(LIB), node(ALL, [LIB], group=True, requested=True)])
    lib_r = ok(LIB, log=LIB_LOG)
    events = [
        RunStarted(g, 1),
        *executed_events(LIB, lib_r, LIB_LOG),
        RunFinished(summary([lib_r])),
    ]
    stdout, stderr = run("focused", events)
    assert stdout[:3] == ["┌─ lib#build", "$ tsc", "lib: compiled"]
    assert stderr[-1] == "1 task · 0 cached (0%) · wall 0.41s"


@pytest.mark.feature("CLI-53")
def test_retry_is_announced_and_the_live_frame_keeps_both_attempts():
    first, second = out(APP, "flaky "), out(APP, "passed\n")
    result = ok(APP, 900, log=(second,), command="vite build")
    events = [
        RunStarted(G2, 2),
        TaskFinished(ok(LIB, 3, CacheStatus.UP_TO_DATE)),
        TaskStarted(APP, "vite build"),
        TaskOutput(APP, first),
        TaskRetrying(APP, 2, 3, "exit 1"),
        TaskStarted(APP, "vite build", 2),
        TaskOutput(APP, second),
        TaskFinished(result),
        RunFinished(summary([ok(LIB, 3, CacheStatus.UP_TO_DATE), result])),
    ]
    stdout, stderr = run("focused", events)
    assert stdout[:4] == ["┌─ app#build", "$ vite build", "flaky ", "passed"]
    assert stderr[0] == "vx: retrying app#build (attempt 2/3) after exit 1"


# ---------------------------------------------------------------- broad (CLI-50, CLI-52, CLI-56)


@pytest.mark.feature("CLI-52")
def test_broad_prints_one_row_per_executed_task_and_hits_are_silent():
    g = graph([node(LIB, requested=True), node(APP, requested=True), node(WEB, requested=True)])
    lib_r, app_r = ok(LIB, 3, CacheStatus.LOCAL, log=LIB_LOG), ok(APP, 2500, log=APP_LOG)
    web_r = ok(WEB, 65_000, CacheStatus.NO_CACHE)
    events = [
        RunStarted(g, 4),
        TaskFinished(lib_r),
        *executed_events(APP, app_r, APP_LOG),
        *executed_events(WEB, web_r, ()),
        RunFinished(summary([lib_r, app_r, web_r], wall=66.5)),
    ]
    stdout, stderr = run("broad", events)
    assert stdout == []
    assert (
        stderr
        == [
            "⏺  2.50s ok      miss       app#build",
            "⏺  1m05s ok      no-cache   web#build",
            "vx: 1 successful task's output is not shown; --output-logs=full shows it",  # app's; web printed nothing
            "",
            rule("3 tasks · 1 cached (33%) · wall 1m06s"),
            "3 tasks · 1 cached (33%) · wall 1m06s",
        ]
    )


@pytest.mark.feature("CLI-51")
def test_broad_failure_is_a_row_at_once_and_a_whole_frame_replayed_before_the_footer():
    g = graph([node(LIB, requested=True), node(APP, [LIB], requested=True)])
    lib_r = failed(LIB, log=(out(LIB, "boom\n", 2),))
    events = [
        RunStarted(g, 2),
        *executed_events(LIB, lib_r, lib_r.log, "vite build"),
        RunFinished(summary([lib_r, skipped(APP, LIB)], code=1)),
    ]
    stdout, stderr = run("broad", events)
    assert stderr[:2] == [
        "◼  0.41s failed  miss       lib#build • exit 1",
        "⊘        skipped            app#build • blocked by lib#build",
    ]
    assert stdout == [
        "",
        "┌─ lib#build > failed (exit 1)",
        "$ vite build",
        "boom",
        "└─ lib#build ── (0.41s) failed (exit 1)",
        "",
    ]


@pytest.mark.feature("CLI-51")
def test_broad_failure_on_one_terminal_reads_rows_then_frame_then_footer():
    g = graph([node(LIB, requested=True), node(APP, [LIB], requested=True)])
    lib_r = failed(LIB, log=(out(LIB, "boom\n", 2),))
    term = io.StringIO()
    reporter = make_reporter(
        flow="broad", color=False, live=False, version="0.1.0", out=term, err=term
    )
    for event in [
        RunStarted(g, 2),
        *executed_events(LIB, lib_r, lib_r.log, "vite build"),
        RunFinished(summary([lib_r, skipped(APP, LIB)], code=1)),
    ]:
        reporter(event)
    row = "2 tasks · 0 cached (0%) · 1 failed · 1 skipped · wall 0.41s"
    assert term.getvalue().split("\n") == [
        "◼  0.41s failed  miss       lib#build • exit 1",
        "⊘        skipped            app#build • blocked by lib#build",
        "",
        "┌─ lib#build > failed (exit 1)",
        "$ vite build",
        "boom",
        "└─ lib#build ── (0.41s) failed (exit 1)",
        "",
        rule(row),
        row,
        "",
    ]


@pytest.mark.feature("CLI-56")
def test_tasks_never_reached_after_a_stop_fold_into_one_line():
    g = graph([node(LIB, requested=True), node(APP, requested=True), node(WEB, requested=True)])
    lib_r = TaskResult(
        LIB, Status.ABORTED, CacheStatus.MISS, duration_ms=300, exit_code=143, attempts=1
    )
    events = [
        RunStarted(g, 1),
        TaskStarted(LIB, "tsc"),
        TaskFinished(lib_r),
        RunFinished(summary([lib_r, not_run(APP), not_run(WEB)], code=130)),
    ]
    _, stderr = run("broad", events)
    assert stderr[:2] == [
        "✗  0.30s aborted miss       lib#build",
        "◌ 2 tasks not run • the run was stopped",
    ]
    assert stderr[-1] == "3 tasks · 0 cached (0%) · 1 stopped · 2 not started · wall 0.41s"


@pytest.mark.feature("CLI-56")
def test_skipped_without_a_blocker_counts_as_not_run():
    r = TaskResult(
        APP,
        Status.SKIPPED,
        CacheStatus.NO_CACHE,
        reason="not run: an earlier task failed (--continue=never)",
    )
    _, stderr = run("broad", [RunStarted(G2, 1), RunFinished(summary([r], code=1))])
    assert stderr[0] == "◌ 1 task not run • an earlier task failed (--continue=never)"


# ---------------------------------------------------------------- GitHub Actions (CLI-57)


@pytest.mark.feature("CLI-57")
def test_github_actions_groups_frames_fences_output_and_annotates_failures():
    lib_r = ok(LIB, 4, CacheStatus.LOCAL, log=(out(LIB, "::set-output name=x::pwned\n"),))
    app_r = failed(APP, code=2, log=(out(APP, "boom\n"),))
    o, e = io.StringIO(), io.StringIO()
    reporter = make_reporter(
        flow="ci", color=False, live=False, version="0.1.0", out=o, err=e, github=True
    )
    for event in [
        RunStarted(G2, 2),
        TaskFinished(lib_r),
        TaskStarted(APP, "vite build"),
        TaskFinished(app_r),
        RunFinished(summary([lib_r, app_r], code=1)),
    ]:
        reporter(event)
    lines = o.getvalue().split("\n")
    token = lines[1].removeprefix("::stop-commands::")
    assert len(token) == 16 and lines[0] == "::group::lib#build (cached (local) 0.0s)"
    fence = lines.index(f"::{token}::")
    assert (
        lines.index("::set-output name=x::pwned") < fence
    )  # the task's text sits inside the fence
    assert lines[fence + 1] == "::endgroup::"
    rest = lines[fence + 2 :]
    assert not any(line.startswith("::group::") for line in rest)  # a failure stays expanded
    assert "::error title=app#build::app#build failed (exit 2)" in rest and "boom" in rest


@pytest.mark.feature("CLI-57")
def test_without_github_actions_there_are_no_workflow_commands():
    stdout, _ = run(
        "ci",
        [RunStarted(G2, 2), TaskFinished(ok(LIB, log=LIB_LOG)), RunFinished(summary([ok(LIB)]))],
    )
    assert not any(line.startswith("::") for line in stdout)


# ---------------------------------------------------------------- ci (CLI-50)


@pytest.mark.feature("CLI-50")
def test_ci_frames_every_task_whole_when_it_ends_hits_included():
    lib_r = ok(LIB, 4, CacheStatus.REMOTE, log=LIB_LOG)
    app_r = ok(APP, 800, log=APP_LOG, command="vite build")
    events = [
        RunStarted(G2, 2),
        TaskFinished(lib_r),
        TaskStarted(APP, "vite build"),
        TaskOutput(APP, APP_LOG[0]),
        Notice("remote cache is slow"),
        TaskOutput(APP, APP_LOG[1]),
        TaskFinished(app_r),
        RunFinished(summary([lib_r, app_r])),
    ]
    stdout, stderr = run("ci", events)
    assert stdout == [
        "┌─ lib#build > cached (remote)",
        "lib: compiled",
        "└─ lib#build ── (0.00s) cached (remote)",
        "",
        "┌─ app#build > ok",
        "$ vite build",
        "app: built",
        "app: warning",
        "└─ app#build ── (0.80s) ok",
        "",
    ]
    assert stderr[0] == "vx: warning: remote cache is slow"


# ---------------------------------------------------------------- notices, labels (CLI-59)


@pytest.mark.feature("CLI-59")
def test_notices_go_to_stderr_with_their_level():
    stdout, stderr = run(
        "broad", [Notice("entry damaged"), Notice("waiting for the lock", level="info")]
    )
    assert stdout == [] and stderr == ["vx: warning: entry damaged", "vx: waiting for the lock"]


@pytest.mark.feature("CLI-59")
@pytest.mark.parametrize(
    "result, label",
    [
        (failed(APP, code=1), "failed (exit 1)"),
        (failed(APP, code=137), "failed (exit 137, 128 + SIGKILL)"),
        (failed(APP, code=143, timed_out=True), "failed (timed out, exit 143)"),
        (
            failed(APP, code=1, reason="failed (exit 1, 2 sandbox violations)"),
            "failed (exit 1, 2 sandbox violations)",
        ),
        (failed(APP, code=None, reason="could not start"), "failed (could not start)"),
        (ok(APP, cache=CacheStatus.UP_TO_DATE), "up-to-date"),
        (ok(APP, cache=CacheStatus.REMOTE), "cached (remote)"),
        (ok(APP, cache=CacheStatus.NO_CACHE), "ok"),
        (not_run(APP), "not run"),
    ],
)
def test_labels_name_the_reason(result, label):
    assert frames.outcome_label(result) == label


@pytest.mark.feature("CLI-59")
@pytest.mark.parametrize(
    "ms, text",
    [(0, "0.00s"), (410, "0.41s"), (59_999, "60.00s"), (62_000, "1m02s"), (3_900_000, "1h05m")],
)
def test_durations(ms, text):
    assert frames.format_duration(ms) == text


@pytest.mark.feature("CLI-55")
def test_footer_counts_cache_and_failures():
    results = [ok(TaskId(f"p{i}", "build"), cache=CacheStatus.LOCAL) for i in range(10)]
    results += [failed(TaskId("x", "build")), failed(TaskId("y", "build"))]
    rule, row = frames.footer(results, 410, "0.1.0", Palette(False))
    assert row == "12 tasks · 10 cached (83%) · 2 failed · wall 0.41s"
    assert rule.startswith("─ vx 0.1.0 ─") and len(rule) == len(row)


# ---------------------------------------------------------------- colour (CLI-58)


@pytest.mark.feature("CLI-58")
def test_colour_off_writes_no_escape_and_strips_task_escapes():
    coloured = (LogChunk(1, b"\x1b[32mgreen\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07\n"),)
    stdout, stderr = run("ci", two_task_run(ok(APP, log=coloured), ok(LIB, log=coloured)))
    assert ESC not in "\n".join(stdout + stderr)
    assert stdout.count("green link") == 2


@pytest.mark.feature("EX-24")
def test_plain_output_shows_what_carriage_returns_left_and_colour_keeps_the_bytes():
    """A progress line a pty run stored, printed plain (a pipe, CI), is the line a terminal
    showed; on a colour terminal its bytes go through as they are."""
    progress = (LogChunk(1, b"\x1b[32m 10%\x1b[0m\r 50%\r100% done\r\nnext\rN\n"),)
    stdout, _ = run("ci", two_task_run(ok(APP, log=progress)))
    assert "100% done" in stdout and "Next" in stdout and "\r" not in "".join(stdout), stdout
    stdout, _ = run("ci", two_task_run(ok(APP, log=progress)), color=True)
    assert "\x1b[32m 10%\x1b[0m\r 50%\r100% done\r" in stdout, stdout


@pytest.mark.feature("CLI-58")
@pytest.mark.parametrize(
    "line, shown",
    [("a", "a"), ("50%\r100%", "100%"), ("abc\rX", "Xbc"), ("done\r", "done"), ("\r", "")],
)
def test_overprint_is_what_a_terminal_shows(line, shown):
    assert overprint(line) == shown


@pytest.mark.feature("CLI-58")
def test_colour_on_paints_vx_and_keeps_task_escapes():
    coloured = (LogChunk(1, b"\x1b[32mgreen\x1b[0m\n"),)
    stdout, stderr = run("focused", two_task_run(ok(APP, log=coloured)), color=True)
    assert "\x1b[32mgreen\x1b[0m" in stdout
    assert "\x1b[38;2;255;121;198mbuild\x1b[0m" in stdout[0]  # the task half is pink
    assert frames.strip_ansi(stdout[0]) == "┌─ app#build"
    assert frames.strip_ansi(stderr[-1]) == "2 tasks · 0 cached (0%) · wall 0.41s"


@pytest.mark.feature("CLI-58")
def test_project_hue_is_stable():
    assert frames.project_rgb("web") == frames.project_rgb("web")
    assert frames.project_rgb("web") != frames.project_rgb("api")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.feature("CLI-58")
@pytest.mark.parametrize(
    "env, tty, want",
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "0"}, True, False),
        ({"FORCE_COLOR": "false"}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "3"}, False, True),
    ],
)
def test_color_enabled(env, tty, want):
    assert color_enabled(env, Tty() if tty else io.StringIO()) is want


@pytest.mark.feature("CLI-58")
@pytest.mark.parametrize(
    "env, depth",
    [
        ({"TERM": "xterm-256color", "COLORTERM": "truecolor"}, style.TRUECOLOR),
        ({"TERM": "xterm-256color", "COLORTERM": "24bit"}, style.TRUECOLOR),
        ({"TERM": "xterm-256color"}, style.EXTENDED),
        ({"TERM": "screen-256color"}, style.EXTENDED),
        ({"TERM": "xterm"}, style.BASIC),
        ({"TERM": "linux"}, style.BASIC),
        ({"TERM": "dumb"}, style.MONO),
        ({"TERM": "xterm", "NO_COLOR": "1", "COLORTERM": "truecolor"}, style.MONO),
        ({"TERM": "xterm", "FORCE_COLOR": "2"}, style.EXTENDED),
        ({"TERM": "xterm", "FORCE_COLOR": "0"}, style.MONO),
    ],
)
def test_colour_depth_follows_the_terminal(env, depth):
    assert style.color_depth(env, Tty()) == depth


@pytest.mark.feature("CLI-58")
@pytest.mark.parametrize(
    "depth, pink",
    [
        (style.TRUECOLOR, "\x1b[38;2;255;121;198mbuild\x1b[0m"),
        (style.EXTENDED, "\x1b[38;5;212mbuild\x1b[0m"),
        (style.BASIC, "\x1b[95mbuild\x1b[0m"),
    ],
)
def test_the_palette_paints_in_the_depth_it_is_given(depth, pink):
    painted = Palette(depth).task_id(APP)
    assert painted.endswith(pink)
    escapes = re.findall(r"\x1b\[([0-9;]*)m", painted)
    if depth == style.BASIC:
        assert all(not e.startswith("38;") for e in escapes)
    if depth == style.EXTENDED:
        assert all(e == "0" or e.startswith("38;5;") for e in escapes)
    assert Palette(style.MONO).task_id(APP) == "app#build"


@pytest.mark.feature("CLI-58")
def test_color_enabled_on_a_closed_stream_is_off():
    stream = io.StringIO()
    stream.close()
    assert color_enabled({}, stream) is False


# ---------------------------------------------------------------- broken pipe (EX-20)


class BrokenPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.feature("EX-20")
def test_broken_stdout_goes_quiet_and_stderr_keeps_the_footer():
    err = io.StringIO()
    reporter = make_reporter(
        flow="ci", color=False, live=False, version="0.1.0", out=BrokenPipe(), err=err
    )
    for event in two_task_run(failed(APP, log=APP_LOG)):
        reporter(event)
    assert err.getvalue().endswith("2 tasks · 0 cached (0%) · 1 failed · wall 0.41s\n")


@pytest.mark.feature("EX-20")
def test_closed_streams_never_raise():
    o, e = io.StringIO(), io.StringIO()
    reporter = make_reporter(flow="broad", color=False, live=False, version="0.1.0", out=o, err=e)
    o.close()
    e.close()
    for event in two_task_run(failed(APP, log=APP_LOG)):
        reporter(event)
    assert o.closed and e.closed


@pytest.mark.feature("EX-20")
def test_a_real_broken_pipe_is_silent_end_to_end(tmp_path):
    script = (
        "import sys\n"
        "from vx.report.dry import render_dry\n"
        "from vx.events import PlannedTask\nfrom vx.model import TaskId\n"
        "plan = [PlannedTask(TaskId(f'p{i}', 'build'), 'tsc', 'k', 'miss', (), f'p{i}') for i in range(20000)]\n"
        "render_dry(plan, 'text', sys.stdout)\n"
        "sys.stderr.write('done\\n')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    proc = subprocess.run(
        f'{sys.executable} -c "$SCRIPT" | head -n 1',
        shell=True,
        capture_output=True,
        text=True,
        env={**env, "SCRIPT": script},
        timeout=30,
    )
    assert proc.stdout.startswith("TASK")
    assert proc.stderr == "done\n"


@pytest.mark.feature("EX-20")
def test_other_os_errors_are_not_swallowed():
    class Full(io.StringIO):
        def write(self, text):
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        Sink(Full(), io.StringIO()).lines("out", ["x"])


@pytest.mark.feature("EX-20")
def test_unknown_flow_is_refused():
    with pytest.raises(ValueError):
        make_reporter(
            flow="tui", color=False, live=False, version="0", out=io.StringIO(), err=io.StringIO()
        )


# ---------------------------------------------------------------- live console (CLI-54)


def screen(text: str) -> list[str]:
    """A tiny terminal: enough of CR, LF, cursor-up, CHA and erase-below to see what remains,
    column by column (a `^C` the terminal echoes moves the cursor too)."""
    import re

    rows, row, col = [""], 0, 0
    pattern = r"\x1b\[\?2026[hl]|\x1b\[\d*A|\x1b\[G|\x1b\[J|\r|\n|[^\x1b\r\n]+"
    for token in re.findall(pattern, text):
        if token == "\n":
            row, col = row + 1, 0  # the tty's onlcr
            rows += [""] * (row + 1 - len(rows))
        elif token in ("\r", "\x1b[G"):
            col = 0
        elif token.endswith("A"):
            row -= int(token[2:-1] or 1)
        elif token == "\x1b[J":
            del rows[row + 1 :]
            rows[row] = rows[row][:col]
        elif not token.startswith("\x1b[?"):
            line = rows[row].ljust(col)
            rows[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return rows[:-1] if rows[-1] == "" else rows


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def console(flow="focused", tick_s=None):
    term, clock = io.StringIO(), Clock()
    palette, sink = Palette(False), Sink(term, term)
    reporter = ConsoleReporter(
        flow=flow,
        palette=palette,
        version="0.1.0",
        sink=sink,
        width=lambda: 40,
        clock=clock,
        tick_s=tick_s,
    )
    return reporter, term, clock


@pytest.mark.feature("CLI-54")
def test_worker_rows_tick_and_are_erased_before_the_footer():
    reporter, term, clock = console("broad")
    g = graph([node(LIB, requested=True), node(APP, requested=True), node(ALL, [LIB], group=True)])
    reporter(RunStarted(g, 4))
    reporter(TaskStarted(LIB, "tsc"))
    clock.now += 0.05
    reporter(TaskStarted(APP, "vite build"))
    clock.now += 1.2
    reporter.tick()
    assert screen(term.getvalue()) == [
        "─" * 39,
        "  1.2s lib#build",
        "  1.2s app#build",
        "0/2 tasks · 0 cached",
    ]
    clock.now += 0.1
    lib_r = ok(LIB, 1300)
    reporter(TaskFinished(lib_r))
    assert screen(term.getvalue()) == [
        "⏺  1.30s ok      miss       lib#build",
        "─" * 39,
        "  1.3s app#build",
        "1/2 tasks · 0 cached",
    ]
    clock.now += 0.5
    app_r = ok(APP, 1800)
    reporter(TaskFinished(app_r))
    reporter(RunFinished(summary([lib_r, app_r])))
    assert screen(term.getvalue()) == [
        "⏺  1.30s ok      miss       lib#build",
        "⏺  1.80s ok      miss       app#build",
        "",
        rule("2 tasks · 0 cached (0%) · wall 0.41s"),
        "2 tasks · 0 cached (0%) · wall 0.41s",
    ]


@pytest.mark.feature("CLI-54")
def test_a_ctrl_c_echoed_by_the_terminal_leaves_no_stray_rule():
    """The tty echoes `^C` where the cursor stands, under the region: the erase must start from
    column 1, or the separator's first two columns stay on screen as `──`."""
    reporter, term, clock = console("broad")
    reporter(RunStarted(graph([node(LIB, requested=True), node(APP, requested=True)]), 2))
    reporter(TaskStarted(LIB, "tsc"))
    clock.now += 1
    reporter.tick()
    term.write("^C")  # the terminal's echo of the interrupt
    lib_r = TaskResult(
        LIB, Status.ABORTED, CacheStatus.MISS, duration_ms=300, exit_code=130, attempts=1
    )
    reporter(TaskFinished(lib_r))
    reporter(RunFinished(summary([lib_r, not_run(APP)], code=130)))
    shown = screen(term.getvalue())
    assert shown[0] == "✗  0.30s aborted miss       lib#build", shown
    assert not any(row.startswith("─") and "vx" not in row for row in shown), shown
    assert shown[-1] == "2 tasks · 0 cached (0%) · 1 stopped · 1 not started · wall 0.41s"


@pytest.mark.feature("CLI-54")
def test_redraws_are_coalesced_under_a_30ms_floor():
    reporter, term, clock = console("focused")
    reporter(RunStarted(G2, 2))
    reporter(TaskStarted(APP, "vite build"))
    for i in range(
        50
    ):  # fifty lines within 5 ms: printed at once, the region drawn once more later
        clock.now += 0.0001
        reporter(TaskOutput(APP, out(APP, f"line {i}\n")))
    draws = term.getvalue().count("\x1b[?2026h")
    assert draws <= 2
    clock.now += 0.031
    reporter.tick()
    assert term.getvalue().count("\x1b[?2026h") == draws + 1
    assert screen(term.getvalue())[-5:] == [
        "line 48",
        "line 49",
        "─" * 39,
        "  0.0s app#build",
        "0/2 tasks · 0 cached",
    ]


@pytest.mark.feature("CLI-54")
def test_long_ids_are_cut_to_the_terminal_so_rows_never_wrap():
    reporter, term, clock = console("broad")
    long_id = TaskId("@scope/" + "x" * 80, "build")
    reporter(RunStarted(graph([node(long_id, requested=True)]), 1))
    reporter(TaskStarted(long_id, "tsc"))
    assert all(len(row) <= 39 for row in screen(term.getvalue()))


@pytest.mark.feature("CLI-54")
def test_the_ticker_thread_redraws_and_stops_on_close():
    term = io.StringIO()
    drawn = threading.Event()

    class Watch(io.StringIO):
        def write(self, text):
            if "app#build" in text:
                drawn.set()
            return term.write(text)

    sink = Sink(Watch(), Watch())
    reporter = ConsoleReporter(
        flow="broad", palette=Palette(False), version="0", sink=sink, width=lambda: 40, tick_s=0.01
    )
    reporter(RunStarted(G2, 2))
    reporter(TaskStarted(APP, "vite build"))
    assert drawn.wait(5)
    ticker = reporter._ticker
    reporter.close()
    reporter.close()
    assert ticker is not None and not ticker.is_alive()
    assert screen(term.getvalue()) == []


@pytest.mark.feature("CLI-54")
def test_live_reporter_is_built_only_when_asked():
    kwargs = dict(flow="focused", color=False, version="0", out=io.StringIO(), err=io.StringIO())
    assert isinstance(make_reporter(live=True, **kwargs), ConsoleReporter)
    assert not isinstance(make_reporter(live=False, **kwargs), ConsoleReporter)


@pytest.mark.feature("CLI-54")
def test_importing_vx_report_does_not_import_rich():
    code = (
        "import sys, vx.report; print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30
    )
    assert proc.stdout.strip() == "[]", proc.stderr


# ---------------------------------------------------------------- summary (OBS-02)


@pytest.mark.feature("OBS-02")
def test_summary_shape():
    lib_r = ok(LIB, 3, CacheStatus.LOCAL)
    app_r = TaskResult(
        APP,
        Status.FAILED,
        CacheStatus.MISS,
        key="k2",
        duration_ms=410.5,
        exit_code=143,
        attempts=2,
        timed_out=True,
        cpu_ms=120.25,
        peak_rss_bytes=5_000_000,
    )
    web_r = skipped(WEB, APP)
    doc = summary_dict(RunSummary("run-1", (lib_r, app_r, web_r), 1700000000.0, 1700000001.5, 1))
    assert {k: doc[k] for k in ("runId", "ok", "exitCode", "startedAt", "endedAt", "totalMs")} == {
        "runId": "run-1",
        "ok": False,
        "exitCode": 1,
        "startedAt": "2023-11-14T22:13:20.000Z",
        "endedAt": "2023-11-14T22:13:21.500Z",
        "totalMs": 1500.0,
    }
    assert doc["tasks"] == [
        {
            "id": "lib#build",
            "project": "lib",
            "task": "build",
            "status": "success",
            "cache": "local",
            "exitCode": 0,
            "durationMs": 3.0,
            "hash": "key-lib",
            "attempts": 0,
        },
        {
            "id": "app#build",
            "project": "app",
            "task": "build",
            "status": "failed",
            "cache": "miss",
            "exitCode": 143,
            "durationMs": 410.5,
            "hash": "k2",
            "attempts": 2,
            "cpuMs": 120.25,
            "peakRssBytes": 5_000_000,
            "timedOut": True,
        },
        {
            "id": "web#build",
            "project": "web",
            "task": "build",
            "status": "skipped",
            "cache": "no-cache",
            "exitCode": None,
            "durationMs": 0.0,
            "hash": None,
            "attempts": 0,
            "blockedBy": "app#build",
        },
    ]
    assert doc["summary"] == {
        "successful": 1,
        "failed": 1,
        "skipped": 1,
        "aborted": 0,
        "cachedLocal": 1,
        "cachedRemote": 0,
        "upToDate": 0,
        "total": 3,
    }
    assert json.loads(json.dumps(doc)) == doc


@pytest.mark.feature("OBS-02")
def test_write_summary_is_atomic_and_creates_parents(tmp_path):
    target = tmp_path / "cache" / "runs" / "run-1.json"
    write_summary(summary([ok(LIB)]), target)
    write_summary(summary([ok(LIB), ok(APP)]), target)  # replaced whole, never appended
    assert json.loads(target.read_text())["summary"]["total"] == 2
    assert [p.name for p in target.parent.iterdir()] == ["run-1.json"]


@pytest.mark.feature("OBS-02")
def test_a_summary_to_a_device_or_fifo_is_written_through_never_renamed_over(tmp_path):
    """`--summarize=/dev/null` once replaced the machine's /dev/null with a file (as root, a
    rename over a device succeeds). A FIFO stands in for the device here."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_summary(summary([ok(LIB)]), fifo)
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe
    assert json.loads(got[0])["summary"]["total"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # and no temp file beside it


@pytest.mark.feature("OBS-02")
def test_unwritable_summary_is_a_vx_error_with_a_hint(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(EnvironmentFailure) as info:
        write_summary(summary([]), blocker / "run.json")
    assert "hint:" in info.value.render() and str(blocker) in info.value.render()


# ---------------------------------------------------------------- dry (CLI-36, CLI-60)

PLAN = [
    PlannedTask(LIB, "tsc -p .", "a1b2c3", "hit-local", (), "packages/lib"),
    PlannedTask(APP, "vite build", "d4e5f6", "miss", (LIB,), "apps/app"),
    PlannedTask(WEB, "next build", "0789ab", "no-cache", (LIB,), "apps/web"),
    PlannedTask(ALL, None, "cdef01", "group", (APP, WEB), ""),
]


@pytest.mark.feature("CLI-36")
def test_dry_text_table():
    buf = io.StringIO()
    render_dry(PLAN, "text", buf)
    assert buf.getvalue().split("\n") == [
        "TASK       PREDICTED  KEY     COMMAND",
        "lib#build  hit-local  a1b2c3  tsc -p .",
        "app#build  miss       d4e5f6  vite build",
        "web#build  no-cache   0789ab  next build",
        "//#all     group      cdef01  -",
        "3 tasks · 1 hit-local · 1 miss · 1 no-cache · 1 group",
        "",
    ]


@pytest.mark.feature("CLI-36", "CLI-60")
def test_dry_json_is_the_only_thing_on_stdout():
    buf = io.StringIO()
    render_dry(PLAN, "json", buf)
    doc = json.loads(buf.getvalue())
    assert doc["tasks"][1] == {
        "id": "app#build",
        "project": "app",
        "task": "build",
        "predicted": "miss",
        "key": "d4e5f6",
        "command": "vite build",
        "deps": ["lib#build"],
        "dir": "apps/app",
        "inputs": None,
    }
    assert doc["tasks"][3]["command"] is None and [t["id"] for t in doc["tasks"]] == [
        str(t.id) for t in PLAN
    ]


@pytest.mark.feature("CLI-36")
def test_unknown_dry_format_is_a_usage_error():
    with pytest.raises(UsageError):
        render_dry(PLAN, "yaml", io.StringIO())


@pytest.mark.feature("CLI-54")
def test_terminal_width_never_comes_back_zero():
    from vx.report.console import terminal_width

    assert terminal_width(io.StringIO()) > 0


@pytest.mark.feature("CLI-54")
def test_a_ready_server_is_pinned_as_running_above_the_workers():
    from vx.events import TaskReady

    reporter, term, clock = console("broad")
    g = graph([node(LIB, requested=True), node(APP, requested=True)])
    reporter(RunStarted(g, 4))
    reporter(TaskStarted(LIB, "vite"))
    reporter(TaskStarted(APP, "tsc"))
    clock.now += 1.0
    reporter(TaskReady(LIB, 1000))
    clock.now += 0.2
    reporter.tick()
    assert screen(term.getvalue())[-4:] == [
        "─" * 39,
        "     ▸ lib#build running",
        "  1.2s app#build",
        "0/2 tasks · 0 cached",
    ]
