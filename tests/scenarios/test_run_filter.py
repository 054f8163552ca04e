"""`vx run --filter` (CLI-21, CLI-40): real vx, real git, real node builds."""

from __future__ import annotations

import time

import pytest
from support.workspace import build_task, npm_workspace


@pytest.fixture
def ws(repo):
    """a <- b <- c (c depends on b depends on a), and d alone; d also has a `lint`."""
    lint = {"exec": {"command": "node -e \"console.log('lint')\""}}
    return repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
                "c": {"deps": ["b"], "tasks": {"build": build_task()}, "files": {"src/c.js": "C;"}},
                "d": {"tasks": {"build": build_task(), "lint": lint}, "files": {"src/d.js": "D;"}},
            }
        )
    ).commit()


def ran(result) -> set[str]:
    assert result.code == 0, result.err
    return set(result.statuses())


@pytest.mark.feature("CLI-21")
def test_a_filter_selects_projects_and_their_task_dependencies_come_along(ws):
    assert ran(ws.vx("run", "build", "--filter", "b")) == {
        "a#build",
        "b#build",
    }  # a#build via ^build
    assert ran(ws.vx("run", "build", "-F", "...b")) == {"a#build", "b#build", "c#build"}
    assert ran(ws.vx("run", "build", "--filter=./packages/*", "--filter=!c", "--filter=!d")) == {
        "a#build",
        "b#build",
    }


@pytest.mark.feature("CLI-40")
def test_changed_since_a_ref_takes_uncommitted_and_untracked_files(ws):
    (ws.root / "packages/c/src/c.js").write_text("C2;")
    (ws.root / "packages/d/src/new.js").write_text("N;")
    assert ran(ws.vx("run", "build", "--filter=[HEAD]")) == {
        "a#build",
        "b#build",
        "c#build",
        "d#build",
    }
    ws.commit("c and d")
    (ws.root / "packages/b/src/b.js").write_text("B2;")
    assert ran(ws.vx("run", "build", "--filter=[HEAD]")) == {"a#build", "b#build"}
    assert ran(ws.vx("run", "build", "--filter=...[HEAD]")) == {"a#build", "b#build", "c#build"}
    assert ran(ws.vx("run", "build", "--filter=[HEAD~1]")) == {
        "a#build",
        "b#build",
        "c#build",
        "d#build",
    }


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "args, said",
    [
        (["--filter", "e"], "selects no project"),
        (["--filter", "bb"], "did you mean `b`"),
        (["--filter", "b", "--filter", "!b"], "removed every selected project"),
        (["--filter", "[no-such-ref]"], "cannot compare with `no-such-ref`"),
        (["--filter", "web^"], "cannot read"),
    ],
)
def test_a_filter_that_cannot_select_refuses_the_run(ws, args, said):
    result = ws.vx("run", "build", *args)
    assert result.code == 2 and said in result.err and "Traceback" not in result.err, result.err


@pytest.mark.feature("GR-06")
def test_no_selected_project_declares_the_task(ws):
    result = ws.vx("run", "lint", "--filter", "a")
    assert result.code == 2 and "no project the filter selects declares `lint`" in result.err
    assert "declared by: d" in result.err


@pytest.mark.feature("CLI-40")
def test_a_replay_of_a_changed_since_run_sees_a_new_change(ws):
    (ws.root / "packages/b/src/b.js").write_text("B2;")
    for _ in range(2):  # the first builds, the second writes the receipt
        assert ws.vx("run", "build", "--filter=[HEAD]", summary=False).code == 0
        time.sleep(0.06)
    replay = ws.vx("run", "build", "--filter=[HEAD]", summary=False, env={"VX_TIMING": "1"})
    assert replay.code == 0 and "receipt check" in replay.err, replay.err
    (ws.root / "packages/d/src/d.js").write_text("D2;")
    changed = ws.vx("run", "build", "--filter=[HEAD]")
    assert ran(changed) == {"a#build", "b#build", "d#build"}
    assert changed.statuses()["d#build"] == ("success", "miss")
