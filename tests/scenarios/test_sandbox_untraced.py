"""`sandbox.trace: false` (issue 13, #3's decision): the task is enforced as ever, nothing traces it,
nothing is reported — in the task's `exec.sandbox` or for every task in vx.workspace.json."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.commands import needs
from support.workspace import npm_workspace

pytestmark = needs("bwrap", "strace")

# Reads an ungranted file (refused whether traced or not), then says whether it got it.
PEEK = 'cat fixture.json 2>/dev/null && echo GOT""-IT || echo re""fused'  # the echo of the command holds neither word


def marking_strace(tmp_path: Path) -> tuple[str, Path]:
    """A strace that leaves a mark for every task it traces (the sandbox's `-DD`), not for vx's probe."""
    marks = tmp_path / "traced"
    marks.mkdir()
    wrapper = tmp_path / "strace"
    wrapper.write_text(
        f'#!/bin/sh\ncase " $* " in *" -DD "*) touch "{marks}/$$";; esac\n'
        f'exec {shutil.which("strace")} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper), marks


def task(trace: bool | None = None) -> dict:
    sandbox: dict = {"allow": {"read": ["src/**"]}}
    if trace is not None:
        sandbox["trace"] = trace
    return {
        "exec": {"command": PEEK, "sandbox": sandbox},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": []}},
    }


def write(repo, tasks: dict, workspace: dict | None = None) -> None:
    files = npm_workspace(
        {"app": {"tasks": tasks, "files": {"src/a.js": "a\n", "fixture.json": "{}"}}}
    )
    if workspace is not None:
        files["vx.workspace.json"] = workspace
    repo.write(files).commit()


def test_trace_false_enforces_and_nothing_traces_the_task(repo, tmp_path):
    strace, marks = marking_strace(tmp_path)
    write(repo, {"t": task(trace=False)})
    res = repo.vx("run", "t", cwd="packages/app", env={"VX_STRACE": strace})
    assert "refused" in res.out and "GOT-IT" not in res.out, res.out  # still enforced
    assert res.code == 0, res.out + res.err  # nothing reported, so nothing fails it
    assert res.task("app#t").get("sandboxViolations", []) == []
    assert list(marks.iterdir()) == []  # strace never ran for the task
    assert "untraced" not in res.out + res.err  # chosen, not a machine without strace: no note
    assert repo.vx("run", "t", cwd="packages/app", env={"VX_STRACE": strace}).task("app#t")[
        "cache"
    ] in ("hit", "up-to-date")  # cached as a traced pass is


def test_the_workspace_turns_tracing_off_and_a_task_turns_it_back_on(repo, tmp_path):
    strace, marks = marking_strace(tmp_path)
    write(
        repo, {"quiet": task(), "loud": task(trace=True)}, workspace={"sandbox": {"trace": False}}
    )
    quiet = repo.vx("run", "quiet", cwd="packages/app", env={"VX_STRACE": strace})
    assert quiet.code == 0 and "refused" in quiet.out, quiet.out + quiet.err
    assert list(marks.iterdir()) == []
    loud = repo.vx("run", "loud", cwd="packages/app", env={"VX_STRACE": strace})
    assert loud.code == 1, loud.out + loud.err
    assert loud.task("app#loud")["sandboxViolations"] == [
        {"kind": "read", "path": "packages/app/fixture.json", "grant": 'allow.read "fixture.json"'}
    ]
    assert len(list(marks.iterdir())) == 1


@pytest.mark.feature("LG-03")
def test_verify_names_the_tasks_it_could_not_trace(repo):
    write(repo, {"t": task(trace=False)})
    res = repo.vx("run", "t", "--verify", cwd="packages/app")
    assert (
        "verify: not traced (sandbox.trace is false, so what they read is unknown): app#t"
        in res.out
    ), res.out
    assert res.code == 0


def test_a_trace_that_is_not_a_boolean_is_refused_naming_where(repo):
    write(repo, {"t": task()}, workspace={"sandbox": {"trace": "off"}})
    res = repo.vx("run", "t", cwd="packages/app")
    assert res.code == 2, res.out + res.err
    assert (
        "vx.workspace.json" in res.err and "sandbox.trace" in res.err and "true or false" in res.err
    )
