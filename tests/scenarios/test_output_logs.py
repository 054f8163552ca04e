"""`vx run --output-logs` (CLI-33): which task output a run shows, whatever the flow."""

from __future__ import annotations

import pytest

from conftest import build_task, npm_workspace

SAY = "node -e \"console.log('said by {name}')\""


@pytest.fixture
def ws(repo):
    fail = {"exec": {"command": "node -e \"console.log('broken here'); process.exit(3)\""}}
    return repo.write(npm_workspace({
        "a": {"tasks": {"build": build_task(command=SAY.format(name="a"), outputs=()), "check": fail},
              "files": {"src/a.js": "A;"}},
        "b": {"deps": ["a"], "tasks": {"build": build_task(command=SAY.format(name="b"), outputs=())},
              "files": {"src/b.js": "B;"}},
    })).commit()


def test_cli33_full_frames_every_task_even_hits_and_new_only_frames_only_misses(ws):
    assert ws.vx("run", "build", "--all").code == 0
    full = ws.vx("run", "build", "--all", "--output-logs=full")
    assert "said by a" in full.out and "said by b" in full.out  # replayed from the cache
    (ws.root / "packages/b/src/b.js").write_text("B2;")
    new = ws.vx("run", "build", "--all", "--output-logs", "new-only")
    assert "said by b" in new.out and "said by a" not in new.out
    assert "a#build" in new.err  # the hit is one row


def test_cli33_errors_only_shows_the_failure_and_nothing_of_what_went_well(ws):
    result = ws.vx("run", "build", "check", "--all", "--output-logs=errors-only")
    assert result.code == 1
    assert "broken here" in result.out and "said by" not in result.out + result.err


@pytest.mark.parametrize("mode", ["hash-only", "none"])
def test_cli33_quiet_modes_still_never_hide_a_failure(ws, mode):
    result = ws.vx("run", "build", "check", "--all", f"--output-logs={mode}")
    assert result.code == 1 and "said by" not in result.out
    assert "broken here" in result.out + result.err  # replayed at the end


def test_cli33_an_unknown_mode_is_refused_with_did_you_mean(ws):
    result = ws.vx("run", "build", "--output-logs=errors")
    assert result.code == 2 and "did you mean `errors-only`" in result.err
