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
        (["--filter", "e"], "no package named `e`"),
        (["--filter", "bb"], "did you mean `b`"),
        (["--filter", "./nowhere"], "no directory `./nowhere`"),
        (["--filter", "[no-such-ref]"], "cannot compare with `no-such-ref`"),
        (["--filter", "web^"], "cannot read"),
    ],
)
def test_a_filter_that_cannot_select_refuses_the_run(ws, args, said):
    result = ws.vx("run", "build", *args)
    assert result.code == 2 and said in result.err and "Traceback" not in result.err, result.err


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "args, said",
    [
        (["lint", "--filter", "a"], "no project --filter=a selects (a) has `lint`"),
        (["build", "--filter", "b", "--filter", "!b"], "--filter=b --filter=!b selects no project"),
        (["build", "--filter", "[HEAD]"], "--filter=[HEAD] selects no project"),
    ],
)
def test_a_filter_that_leaves_nothing_to_run_says_so_and_exits_0(ws, args, said):
    result = ws.vx("run", *args)  # as turbo: "No tasks were executed as part of this run"
    assert result.code == 0 and f"vx: nothing to run: {said}" in result.err, result.err
    assert result.summary is not None and result.summary["tasks"] == []


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
