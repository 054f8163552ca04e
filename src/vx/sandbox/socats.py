"""The socat processes of a sandbox's bridges: the host listeners of `vx.sandbox.ports` and the
bridges `vx.sandbox.bridges` starts in the sandbox's network namespace. Each socat leads a
process group of its own, so stopping it ends the connections it forked too, and the warden holds
that group as it holds a task's: a SIGKILLed vx left its bridges listening in the sandbox's
network namespace for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Sequence

from vx.proc import descendants, warden


class Socats:
    """One attempt's socats of one side; `stop()` ends them."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def spawn(self, argv: list[str], pass_fds: Sequence[int] = ()) -> subprocess.Popen:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        warden.start(descendants.run_cgroup())
        warden.enlist(proc.pid)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        """End every socat and the connections it forked."""
        for proc in self.procs:
            _signal_group(proc, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            warden.release(proc.pid)
        self.procs.clear()


def address(path: str | Path) -> str:
    """`path` as it goes into a socat address: its `,` and `:` escaped."""
    return str(path).replace(",", "\\,").replace(":", "\\:")


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
