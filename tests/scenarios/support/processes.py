"""Processes a scenario starts or watches: a started process's stderr read as it comes, whether
a pid still runs, and waiting for an event rather than sleeping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable


class Stderr:
    """A started process's stderr, read as it comes, so a test can wait for a line it prints
    (an event) instead of sleeping for a time that should be enough."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.text = proc, ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.text += line

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text:
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text}"
            assert self.proc.poll() is None or self._reader.is_alive(), self.text
            time.sleep(0.02)

    def finish(self, timeout: float = 120) -> str:
        """Wait for the process to end and its stderr to be read to the end; all of it."""
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return self.text


def start_vx(
    *args: str,
    cwd: Path,
    env: dict,
    stdout: int | None = subprocess.PIPE,
    stderr: int | None = subprocess.PIPE,
    stdin: int | None = subprocess.DEVNULL,
    text: bool = True,
) -> subprocess.Popen:
    """`python -m vx ARGS` started in `cwd` with `env` (`workspace.vx_env` for the usual one),
    left running for the test to signal, read or wait on."""
    return subprocess.Popen(
        [sys.executable, "-m", "vx", *args],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        text=text,
    )


def running(pid: int) -> bool:
    """Alive and not a zombie (a container's PID 1 may be slow to reap orphans). A process ending
    while its stat is read makes the read fail with ESRCH, not ENOENT (seen once in a suite run)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_for(predicate: Callable[[], object], what: str, limit_s: float = 60.0) -> None:
    """Poll an event (a file, a death) up to a generous bound; never a sleep that 'should be
    enough'."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def end(proc: subprocess.Popen, timeout: float | None = None) -> None:
    """Kill `proc` and reap it if it still runs: a test's cleanup, whatever the test saw."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=timeout)


def kill_all(pids: Iterable[int]) -> None:
    """SIGKILL those of `pids` still running: a test's cleanup of what a task left behind."""
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
