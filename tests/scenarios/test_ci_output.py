"""What a CI run shows (CLI-57, OBS-02, OBS-04): GitHub Actions groups and annotations, the
markdown report for a step summary, the time hits saved. Real vx, real node tasks."""

from __future__ import annotations

import json

import pytest
from support.workspace import build_task, npm_workspace


@pytest.fixture
def ws(repo):
    fail = {"exec": {"command": "node -e \"console.log('::warning::injected'); process.exit(4)\""}}
    return repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task(), "check": fail}, "files": {"src/a.js": "A;"}},
                "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
            }
        )
    ).commit()


@pytest.mark.feature("CLI-57")
def test_github_actions_groups_each_frame_and_annotates_the_failure(ws):
    result = ws.vx("run", "build", "check", "--all", env={"GITHUB_ACTIONS": "true", "CI": "true"})
    assert result.code == 1
    lines = result.out.splitlines()
    assert any(line.startswith("::group::a#build (ok ") for line in lines)
    assert "::error title=a#check::a#check failed (exit 4)" in lines
    injected = lines.index("::warning::injected")  # the task tried to issue a workflow command
    token = lines[max(j for j in range(injected) if lines[j].startswith("::stop-commands::"))]
    token = token.removeprefix("::stop-commands::")
    closes = [j for j, line in enumerate(lines) if line == f"::{token}::"]
    opened = max(j for j in range(injected) if lines[j] == f"::stop-commands::{token}")
    assert not any(opened < j < injected for j in closes) and any(
        j > injected for j in closes
    )  # fenced


@pytest.mark.feature("OBS-04")
def test_the_markdown_report_lists_failures_first_and_appends_to_a_file(ws):
    result = ws.vx("run", "build", "check", "--all", "--report", summary=False)
    assert result.code == 1
    table = result.out[result.out.index("**vx run: failed**") :]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `a#check` | failed")
    assert {row.split("`")[1] for row in rows} == {"a#build", "a#check", "b#build"}
    target = ws.root / "step-summary.md"
    for _ in range(2):
        assert ws.vx("run", "build", "--all", f"--report-file={target}").code == 0
    text = target.read_text()
    assert text.count("**vx run: ok**") == 2  # appended, not replaced
    heads = [line for line in text.splitlines() if line.startswith("**vx run:")]
    assert heads[-1].startswith("**vx run: ok** · 2 tasks · 2 cached")  # the second run: all hits


@pytest.mark.feature("OBS-02")
def test_hits_say_how_long_they_took_when_saved(ws):
    assert ws.vx("run", "build", "--all").code == 0
    again = ws.vx("run", "build", "--all")
    assert again.code == 0
    tasks = {t["id"]: t for t in again.summary["tasks"]}
    assert tasks.keys() == {"a#build", "b#build"}
    assert all(t["storedMs"] > 0 for t in tasks.values())
    assert again.summary["savedMs"] == pytest.approx(
        sum(t["storedMs"] for t in tasks.values()), abs=0.01
    )


@pytest.mark.feature("OBS-03")
def test_the_profile_is_a_chrome_trace_with_one_span_per_task(ws):
    target = ws.root / "trace.json"
    result = ws.vx("run", "build", "--all", f"--profile={target}", summary=False)
    assert result.code == 0, result.err
    events = json.loads(target.read_text())["traceEvents"]
    spans = {e["name"]: e for e in events if e["ph"] == "X"}
    threads = {e["args"]["name"]: e["tid"] for e in events if e["ph"] == "M"}
    assert set(spans) == {"a#build", "b#build"} and threads.keys() == {"a", "b"}
    a, b = spans["a#build"], spans["b#build"]
    assert a["tid"] == threads["a"] and a["cat"] == "success" and a["args"]["exitCode"] == 0
    assert (
        b["ts"] >= a["ts"] + a["dur"] - 1000
    )  # b waited for a (within a millisecond of clock skew)
    refused = ws.vx("run", "build", "--profile", "--dry", summary=False)
    assert refused.code == 2
