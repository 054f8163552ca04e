"""Start a task's process: `sh -c <command>` in the project dir (EX-01), in its own session and
process group (EX-11), stdin at EOF (EX-10), stdout and stderr piped. A launch (the sandbox's or
--verify's wrapper) runs its argv instead, with its own stdin and kept descriptors.

Apart from the executor, which owns the process from here on, because a run's first commands
start before asyncio is loaded (docs/optimizations.md #25): this module needs no event loop.
"""

from __future__ import annotations

import subprocess

SHELL = "/bin/sh"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Mapping


def start(command: str, cwd: Path, env: Mapping[str, str], launch=None, *, stdin: int | None = None,
          terminal: bool = False) -> subprocess.Popen[bytes]:
    """The started process; OSError or ValueError when it cannot start (the executor says why).
    `stdin` is an fd to read instead of EOF (a persistent task's pipe, EX-07); with `terminal`
    the task has vx's own stdin, stdout and stderr (an interactive task on a TTY, EX-09)."""
    if stdin is None:
        stdin = launch.stdin if launch and launch.stdin is not None else subprocess.DEVNULL
    return subprocess.Popen(
        list(launch.argv) if launch else ["sh", "-c", command],
        executable=None if launch else SHELL,
        cwd=cwd,
        env=dict(env),
        stdin=None if terminal else stdin,
        stdout=None if terminal else subprocess.PIPE,
        stderr=None if terminal else subprocess.PIPE,
        start_new_session=True,
        pass_fds=tuple(launch.pass_fds) if launch else (),
    )
