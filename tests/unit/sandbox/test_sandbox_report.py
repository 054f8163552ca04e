"""How violations are shown: the frame's SANDBOX VIOLATIONS section, the live frame, the summary (SB-12)."""

from __future__ import annotations

import io

from vx.events import RunStarted, TaskFinished, TaskOutput, TaskStarted
from vx.model import (
    CacheStatus,
    ExecConfig,
    LogChunk,
    Status,
    TaskConfig,
    TaskGraph,
    TaskId,
    TaskNode,
    TaskResult,
    Violation,
)
from vx.report import frames, summary
from vx.report.frames import Palette
from vx.report.plain import PlainReporter, Sink

APP = TaskId("app", "build")
VIOLATIONS = (
    Violation("read", "packages/app/fixture.json", 'allow.read "fixture.json"'),
    Violation("write", "packages/app/out.txt", 'allow.write "out.txt"'),
)


def result(violations=VIOLATIONS) -> TaskResult:
    return TaskResult(
        APP,
        Status.FAILED,
        CacheStatus.MISS,
        exit_code=1,
        duration_ms=410.0,
        log=(LogChunk(1, b"working\n"),),
        reason="failed (exit 1, 2 sandbox violations)",
        command="node build.js",
        attempts=1,
        violations=violations,
    )


def test_the_frame_lists_each_violation_with_its_grant_before_the_close():
    lines = frames.frame(result(), Palette(False))
    assert lines == [
        "┌─ app#build > failed (exit 1, 2 sandbox violations)",
        "$ node build.js",
        "working",
        "├─ SANDBOX VIOLATIONS (2)",
        '│ read  packages/app/fixture.json  → allow.read "fixture.json"',
        '│ write packages/app/out.txt  → allow.write "out.txt"',
        "└─ app#build ── (0.41s) failed (exit 1, 2 sandbox violations)",
        "",
    ]


def test_no_violations_no_section():
    assert frames.sandbox_section(result(()), Palette(False)) == []


def test_a_live_frame_closes_with_the_section_too():
    out, err = io.StringIO(), io.StringIO()
    reporter = PlainReporter(
        flow="focused", palette=Palette(False), version="0", sink=Sink(out, err)
    )
    node = TaskNode(
        APP, TaskConfig("build", "{}", exec=ExecConfig("node build.js")), "packages/app", (), True
    )
    reporter(RunStarted(TaskGraph({APP: node}, (APP,), {APP: 0}, (APP,)), 1))
    reporter(TaskStarted(APP, "node build.js"))
    reporter(TaskOutput(APP, LogChunk(1, b"working\n")))
    reporter(TaskFinished(result()))
    text = out.getvalue()
    assert (
        text.index("working") < text.index("├─ SANDBOX VIOLATIONS (2)") < text.index("└─ app#build")
    )


def test_the_summary_carries_the_violations():
    entry = summary.task_dict(result())
    assert entry["sandboxViolations"] == [
        {"kind": "read", "path": "packages/app/fixture.json", "grant": 'allow.read "fixture.json"'},
        {"kind": "write", "path": "packages/app/out.txt", "grant": 'allow.write "out.txt"'},
    ]
    assert "sandboxViolations" not in summary.task_dict(result(()))
