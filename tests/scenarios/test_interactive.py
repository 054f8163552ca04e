"""Interactive tasks (EX-09, GR-19, issue 17): on a TTY a task gets the real terminal and runs
alone; off a TTY it is a normal task. The TTY is a real one, a tmux pane; every wait is on what
the pane shows or a file appearing, bounded by a generous timeout that can only fail a test."""

from __future__ import annotations

import pytest
from support.terminal import pane_fixture, vx_in_shell, wait_for_file  # noqa: F401 (the `pane` fixture)
from support.workspace import Repo

ASK = "printf 'name? '; read name; echo \"hello $name\"; echo ask-end >> ../../order.log"
OTHER = "echo other-start >> ../../order.log; echo other-end >> ../../order.log"


def workspace(repo: Repo) -> Repo:
    return repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules/\n.vx/\norder.log\ncode.txt\n",
            "packages/app/package.json": {"name": "app", "version": "1.0.0"},
            "packages/app/vx.config.json": {
                "tasks": {
                    "ask": {
                        "exec": {
                            "command": "echo ask-start >> ../../order.log; " + ASK,
                            "interactive": True,
                        }
                    },
                    "other": {"exec": {"command": OTHER}},
                    "both": {"dependsOn": ["ask", "other"]},
                }
            },
        }
    ).commit()


@pytest.mark.feature("EX-09")
def test_off_a_tty_an_interactive_task_runs_as_a_normal_task(repo):
    workspace(repo)
    res = repo.vx("run", "ask", cwd="packages/app")  # stdin is /dev/null: `read` sees EOF
    assert res.code == 0, res.out + res.err
    assert "name? hello" in res.out  # captured and framed like any task's output


@pytest.mark.feature("EX-09")
def test_on_a_tty_an_interactive_task_reads_the_terminal_and_runs_alone(repo, pane):
    """`both` asks for `ask` (interactive) and `other`: the prompt is on the real terminal, the
    answer typed there reaches the task, and `other` never runs while `ask` does (GR-19)."""
    workspace(repo)
    p = pane(vx_in_shell(repo, "run", "both"), repo.root / "packages" / "app")
    p.wait_for("name? ")
    p.keys("world", "Enter")
    p.wait_for("hello world")
    assert wait_for_file(repo.root / "code.txt", p) == "0", p.text()
    order = (repo.root / "order.log").read_text().split()
    assert order in (
        ["ask-start", "ask-end", "other-start", "other-end"],
        ["other-start", "other-end", "ask-start", "ask-end"],
    ), order
    assert "Traceback" not in p.text()


@pytest.mark.feature("EX-08")
def test_a_server_in_a_terminal_streams_and_ctrl_c_stops_it(repo, pane):
    """`vx run dev` on a real terminal (the live status region on): the server's lines, the
    footer, and Ctrl-C ends it with exit 130."""
    server = (
        "node -e \"require('http').createServer((q, s) => s.end('hi')).listen(0, '127.0.0.1', function () "
        "{ console.log('listening on ' + this.address().port) })\""
    )
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules/\n.vx/\ncode.txt\n",
            "packages/web/package.json": {"name": "web", "version": "1.0.0"},
            "packages/web/vx.config.json": {
                "tasks": {
                    "dev": {"exec": {"command": server, "persistent": {"readyWhen": "listening"}}}
                }
            },
        }
    ).commit()
    p = pane(vx_in_shell(repo, "run", "dev"), repo.root / "packages" / "web")
    p.wait_for("web#dev still running; Ctrl-C stops it")
    assert "web#dev │ listening on" in p.text()
    p.keys("C-c")
    assert wait_for_file(repo.root / "code.txt", p) == "130", p.text()


def terminal_holder(repo: Repo) -> Repo:
    """`repl` is persistent and interactive; every task writes a marker when it starts."""
    mark = 'touch "../../ran-$VX_RUN_TASK"; '
    return repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules/\n.vx/\nran-*\n",
            "packages/app/package.json": {"name": "app", "version": "1.0.0"},
            "packages/app/vx.config.json": {
                "tasks": {
                    "prep": {"exec": {"command": mark + "echo prep"}},
                    "repl": {
                        "exec": {
                            "command": mark + "printf 'q? '",  # exits at once off a TTY
                            "interactive": True,
                            "persistent": {},
                        },
                        "dependsOn": ["prep"],
                    },
                    "repl2": {
                        "exec": {"command": mark + "read y", "interactive": True, "persistent": {}}
                    },
                    "use": {"exec": {"command": mark + "echo use"}, "dependsOn": ["together"]},
                    "together": {"dependsOn": ["repl"]},
                    "two": {"dependsOn": ["repl", "repl2"]},
                }
            },
        }
    ).commit()


@pytest.mark.feature("GR-19")
@pytest.mark.parametrize(
    "task, words",
    [
        ("use", ["`app#together` depends on `app#repl`", "tasks.together.dependsOn"]),
        ("two", ["`app#repl` and `app#repl2` are both", "tasks.repl2.exec.interactive"]),
    ],
)
def test_a_task_after_a_terminal_holder_is_refused_before_anything_runs(repo, task, words):
    """GR-19: a persistent interactive task holds the terminal until the run ends, so a task that
    waits for it (here through a group) could never start, and two cannot share the terminal.
    The run is refused with exit 2 before any task starts, even the dependency `prep`."""
    terminal_holder(repo)
    res = repo.vx("run", task, cwd="packages/app")
    assert res.code == 2, res.out + res.err
    for word in words:
        assert word in res.err, res.err
    assert "in: packages/app/vx.config.json" in res.err and "hint:" in res.err, res.err
    assert "Traceback" not in res.err
    assert not list(repo.root.glob("ran-*")), "a task started before the refusal"


@pytest.mark.feature("GR-19")
def test_a_terminal_holder_alone_still_runs(repo):
    """The refusal is of the shape only: the holder with its own dependency runs (off a TTY it is
    a normal persistent task)."""
    terminal_holder(repo)
    res = repo.vx("run", "repl", cwd="packages/app")
    assert (repo.root / "ran-app#prep").exists() and (repo.root / "ran-app#repl").exists(), res.err
    assert "error:" not in res.err, res.err
