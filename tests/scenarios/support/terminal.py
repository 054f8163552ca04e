"""A real terminal for scenario tests: a tmux pane of its own, read with capture-pane. Every wait
is on what the pane shows or a file appearing, bounded by a generous timeout that can only fail
a test."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from support.workspace import SRC, Repo

WAIT_S = 90


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

    def screen(self, escapes: bool = False) -> str:
        """What the pane shows now, without its history (tmux keeps a screen cleared from the
        top row in its history: `scroll-on-clear`); with `escapes`, its colours as SGR codes."""
        return self._tmux("capture-pane", "-p", "-J", *(["-e"] if escapes else []))

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


@pytest.fixture(name="pane")
def pane_fixture():
    """`pane(command, cwd)`: a Pane running `command`; every pane is closed after the test.
    Import `pane_fixture` into a test module to use the fixture `pane`."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (dev/test installs it)")
    made: list[Pane] = []

    def make(command: str, cwd) -> Pane:
        made.append(Pane(command, str(cwd)))
        return made[-1]

    yield make
    for one in made:
        one.close()


def vx_in_shell(repo: Repo, *args: str, env: str = "NO_COLOR=1") -> str:
    """A shell line running vx on the pane's terminal, then writing its exit code to code.txt;
    `env` are the variables it runs with (`-u NAME …` first unsets some), colour off by default."""
    env = f"{env} PYTHONPATH={shlex.quote(SRC)}"
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
