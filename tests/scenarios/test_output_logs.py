"""`vx run --output-logs` (CLI-33): which task output a run shows, whatever the flow."""

from __future__ import annotations

import pytest
from support.workspace import build_task, npm_workspace

SAY = "node -e \"console.log('said by {name}')\""


@pytest.fixture
def ws(repo):
    fail = {"exec": {"command": "node -e \"console.log('broken here'); process.exit(3)\""}}
    return repo.write(
        npm_workspace(
            {
                "a": {
                    "tasks": {
                        "build": build_task(command=SAY.format(name="a"), outputs=()),
                        "check": fail,
                    },
                    "files": {"src/a.js": "A;"},
                },
                "b": {
                    "deps": ["a"],
                    "tasks": {"build": build_task(command=SAY.format(name="b"), outputs=())},
                    "files": {"src/b.js": "B;"},
                },
            }
        )
    ).commit()


@pytest.mark.feature("CLI-33")
def test_full_frames_every_task_even_hits_and_new_only_frames_only_misses(ws):
    assert ws.vx("run", "build", "--all").code == 0
    full = ws.vx("run", "build", "--all", "--output-logs=full")
    assert "said by a" in full.out and "said by b" in full.out  # replayed from the cache
    (ws.root / "packages/b/src/b.js").write_text("B2;")
    new = ws.vx("run", "build", "--all", "--output-logs", "new-only")
    assert "said by b" in new.out and "said by a" not in new.out
    assert "a#build" in new.err  # the hit is one row


@pytest.mark.feature("CLI-33")
def test_errors_only_shows_the_failure_and_nothing_of_what_went_well(ws):
    result = ws.vx("run", "build", "check", "--all", "--output-logs=errors-only")
    assert result.code == 1
    assert "broken here" in result.out and "said by" not in result.out + result.err


@pytest.mark.feature("CLI-33")
@pytest.mark.parametrize("mode", ["hash-only", "none"])
def test_quiet_modes_still_never_hide_a_failure(ws, mode):
    result = ws.vx("run", "build", "check", "--all", f"--output-logs={mode}")
    assert result.code == 1 and "said by" not in result.out
    assert "broken here" in result.out + result.err  # replayed at the end


@pytest.mark.feature("CLI-33")
def test_an_unknown_mode_is_refused_with_did_you_mean(ws):
    result = ws.vx("run", "build", "--output-logs=errors")
    assert result.code == 2 and "did you mean `errors-only`" in result.err


def test_issue17_a_named_task_streams_from_the_root_as_from_its_own_directory(repo):
    """`vx run app#build` at the root names one task: its log is shown, as from packages/app;
    a broad run shows rows and says how to see the logs they stand for."""
    from support.workspace import npm_workspace

    task = {
        "exec": {"command": "printf '%s: something to read\\n' warning"}
    }  # the line is not the command
    repo.write(
        npm_workspace({"app": {"tasks": {"build": task}}, "lib": {"tasks": {"build": task}}})
    ).commit()
    named = repo.vx("run", "app#build")
    inside = repo.vx("run", "build", cwd="packages/app")
    assert named.code == inside.code == 0
    assert "warning: something to read" in named.out and "warning: something to read" in inside.out
    broad = repo.vx("run", "build")
    assert "warning: something to read" not in broad.out
    assert "vx: 2 successful tasks' output is not shown; --output-logs=full shows it" in broad.err
    full = repo.vx("run", "build", "--output-logs=full")
    assert full.out.count("warning: something to read") == 2 and "not shown" not in full.err
