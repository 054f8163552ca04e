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


def start(command: str, cwd: Path, env: Mapping[str, str], launch=None) -> subprocess.Popen[bytes]:
    """The started process; OSError or ValueError when it cannot start (the executor says why)."""
    return subprocess.Popen(
        list(launch.argv) if launch else ["sh", "-c", command],
        executable=None if launch else SHELL,
        cwd=cwd,
        env=dict(env),
        stdin=launch.stdin if launch and launch.stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=tuple(launch.pass_fds) if launch else (),
    )
