"""Tasks get a terminal: when vx prints to a colour terminal, a task's stdout and stderr are a pty
sized as vx's terminal (a tmux pane of 120x40), so a tool that asks `[ -t 1 ]` keeps its
colours; piped, under NO_COLOR or VX_TTY=0, pipes as before. The log a pty run stores replays
the same on a terminal and plain off one. Every wait is on what the pane shows or a file
appearing (terminal.py), never on time passing."""

from __future__ import annotations

import pytest
from support.processes import kill_all, running, wait_for
from support.terminal import pane_fixture, vx_in_shell, wait_for_file  # noqa: F401 (the `pane` fixture)
from support.workspace import Repo, cached_build, npm_workspace

# Red only on a terminal; a progress line a carriage return overwrites; the size it was given
# (stdin from fd 2, the pty: fd 1 is the substitution's pipe). Quotes keep the words the output
# says out of the command line vx prints above it.
PAINTS = (
    'if [ -t 1 ]; then printf \'\\033[31m%s\\033[0m\\n\' tty-"red"; else echo piped-"plain"; fi; '
    "printf 'step 1\\rstep 2\\n'; "
    'echo size $(stty size <&2 2>/dev/null || echo "none"); '
    "mkdir -p dist && echo x > dist/o"
)
COLOUR_ON = "-u NO_COLOR -u FORCE_COLOR -u GITHUB_ACTIONS -u VX_TTY TERM=xterm COLORTERM="
RED = "\x1b[31mtty-red"


def paints(repo: Repo, command: str = PAINTS) -> Repo:
    return repo.write(npm_workspace({"app": {"tasks": {"build": cached_build(command)}}})).commit()


def run_in_pane(repo: Repo, pane, env: str = COLOUR_ON):
    (repo.root / "code.txt").unlink(missing_ok=True)
    p = pane(vx_in_shell(repo, "run", "build", "--output-logs=full", env=env), repo.root)
    assert wait_for_file(repo.root / "code.txt", p) == "0", p.text()
    return p


@pytest.mark.feature("EX-24")
def test_on_a_colour_terminal_a_task_has_a_tty_and_its_replay_shows_the_same(repo, pane):
    """On the pane the task sees a terminal of the pane's size and its red reaches the screen;
    the cache hit that follows (the receipt's replay) shows the same red line, and a piped run
    of that same hit shows it plain, the progress line as a terminal showed it."""
    paints(repo)
    shown = run_in_pane(repo, pane).screen(escapes=True)
    assert RED in shown and "piped-plain" not in shown, shown
    assert "size 40 120" in shown, shown
    replayed = run_in_pane(repo, pane).screen(escapes=True)
    assert RED in replayed and "size 40 120" in replayed, replayed
    piped = repo.vx("run", "build", "--output-logs=full")
    assert piped.code == 0 and piped.statuses()["app#build"][1] != "miss", piped.err
    assert "tty-red" in piped.out and "\x1b" not in piped.out, piped.out
    assert "step 2" in piped.out and "\r" not in piped.out and "step 1" not in piped.out


@pytest.mark.feature("EX-24")
@pytest.mark.parametrize("env", ["NO_COLOR=1", "VX_TTY=0"])
def test_no_color_or_vx_tty_off_keeps_the_pipes_on_a_terminal(repo, pane, env):
    """NO_COLOR (the task sees it, vx paints nothing) or VX_TTY=0 on a terminal: the task's
    output is a pipe, as off a terminal."""
    paints(repo)
    shown = run_in_pane(repo, pane, f"{COLOUR_ON} {env}").screen(escapes=True)
    assert "piped-plain" in shown and "tty-red" not in shown, shown
    assert "size none" in shown, shown


@pytest.mark.feature("EX-24")
def test_off_a_terminal_a_task_still_writes_to_pipes(repo):
    """Piped (CI), FORCE_COLOR or not: no terminal for the task, stdout and stderr apart."""
    paints(repo, '[ -t 1 ] && echo tty-"out" || echo pipe-"out"; [ -t 2 ] || echo pipe-"err" >&2')
    res = repo.vx("run", "build", "--output-logs=full", env={"FORCE_COLOR": "1"})
    assert res.code == 0, res.err
    assert "pipe-out" in res.out and "pipe-err" in res.out and "tty-out" not in res.out, res.out


@pytest.mark.feature("EX-24")
def test_ctrl_c_stops_a_task_tree_on_a_pty(repo, pane):
    """A task on a pty that started a child in the background and one in a session of its own:
    Ctrl-C ends the run with 130 and nothing the task started is left."""
    script = (
        "[ -t 1 ] && echo yes > ../../tty; sleep 600 & echo $! >> ../../pids; "
        "setsid sleep 600 & echo $! >> ../../pids; echo $$ >> ../../pids; wait"
    )
    paints(repo, script)
    p = pane(vx_in_shell(repo, "run", "build", "--output-logs=full", env=COLOUR_ON), repo.root)
    pids = repo.root / "pids"
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 3, "the task's pids")
    started = [int(pid) for pid in pids.read_text().split()]
    assert (repo.root / "tty").exists(), p.text()
    try:
        p.keys("C-c")
        assert wait_for_file(repo.root / "code.txt", p) == "130", p.text()
        assert not [pid for pid in started if running(pid)], p.text()
    finally:
        kill_all(started)
