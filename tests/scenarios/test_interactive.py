"""Interactive tasks (EX-09, GR-19, issue 17): on a TTY a task gets the real terminal and runs
alone; off a TTY it is a normal task. The TTY is a real one, a tmux pane; every wait is on what
the pane shows or a file appearing, bounded by a generous timeout that can only fail a test."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from conftest import SRC, Repo

WAIT_S = 90

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


class Pane:
    """A tmux session of its own (own socket), one pane running a shell command."""

    def __init__(self, command: str, cwd: str):
        self.socket = f"vx-test-{uuid.uuid4().hex[:8]}"
        self._tmux("new-session", "-d", "-x", "120", "-y", "40", "-c", cwd, command)

    def _tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True
        ).stdout

    def text(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-200")

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WAIT_S
        delay = 0.02
        while True:  # tmux has no event for "the pane shows this": poll, bounded by WAIT_S
            shown = self.text()
            if text in shown:
                return shown
            if time.monotonic() > deadline:
                pytest.fail(f"the pane never showed {text!r}:\n{shown}")
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def pane():
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (dev/test installs it)")
    made: list[Pane] = []

    def make(command: str, cwd) -> Pane:
        made.append(Pane(command, str(cwd)))
        return made[-1]

    yield make
    for one in made:
        one.close()


def vx_in_shell(repo: Repo, *args: str) -> str:
    """A shell line running vx on the pane's terminal, then writing its exit code to code.txt."""
    env = f"PYTHONPATH={shlex.quote(SRC)} NO_COLOR=1"
    vx = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "vx", *args))
    code = shlex.quote(str(repo.root / "code.txt"))
    return f"env -u CI {env} {vx}; echo $? > {code}.tmp && mv {code}.tmp {code}; sleep 600"


def wait_for_file(path, pane: Pane) -> str:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} never appeared:\n{pane.text()}")
        time.sleep(0.05)
    return path.read_text().strip()


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
