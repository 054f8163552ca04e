"""Start a task's process: `sh -c <command>` in the project dir, in its own session and
process group, stdin at EOF, stdout and stderr piped. A launch (the sandbox's or
--verify's wrapper) runs its argv instead, with its own stdin and kept descriptors.

When vx prints to a colour terminal (`lend_pty`), a task's stdout and stderr are one
pseudo-terminal instead of two pipes, as turbo runs tasks: a tool that asks `isatty(1)` keeps
its colours and progress. The pty is sized as vx's terminal, translates nothing (no `\n` to
`\r\n`: the log holds the bytes the task wrote, as from a pipe) and is no controlling terminal:
the task keeps the session and group a pipe's task has, so the warden, the signals and the
kills reach it as before, and the pty's close hangs nothing up. A launch keeps its pipes.

Apart from the executor, which owns the process from here on, because a run's first commands
start before asyncio is loaded (docs/optimizations.md #25): this module needs no event loop.

Tasks die with vx, however vx ends (a SIGKILL included): the first start also starts the
warden (proc/warden.py), which holds every task's process group until it is gone.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Generic, TypeVar

from msgspec import Struct

from vx.proc import descendants, warden

SHELL = "/bin/sh"

_pty_size: tuple[int, int] | None = None  # (columns, rows): tasks get a pty of this size

if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Mapping

S = TypeVar("S")
K = TypeVar("K")


class Started(Struct, Generic[S, K]):
    """A task's first process, started before the walk could own it: when (monotonic, for its
    timeout and duration; and the wall clock in ns, for the save's re-check of its inputs), and
    what the engine prepared for it, which this layer cannot name: its inputs' snapshot and the
    outputs kept for an incremental tool (`Started[Snapshot | None, Kept | None]`)."""

    popen: subprocess.Popen[bytes]
    started_at: float
    started_ns: int
    snapshot: S
    kept: K


def start(
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    launch=None,
    *,
    stdin: int | None = None,
    terminal: bool = False,
) -> subprocess.Popen[bytes]:
    """The started process; OSError or ValueError when it cannot start (the executor says why).
    `stdin` is an fd to read instead of EOF (a persistent task's pipe); with `terminal`
    the task has vx's own stdin, stdout and stderr (an interactive task on a TTY)."""
    if stdin is None:
        stdin = launch.stdin if launch and launch.stdin is not None else subprocess.DEVNULL
    warden.start(descendants.run_cgroup())
    cgroup = descendants.new_cgroup()
    if launch and cgroup and not os.access(launch.argv[0], os.X_OK):
        descendants.forget(0, cgroup)  # a wrapper found on PATH: Popen's lookup and error stay
        cgroup = ""
    enter = descendants.entry_words(cgroup)
    if launch is None:
        argv = ["sh", "-c", enter + command]
    elif enter:  # the shell moves itself, then becomes the wrapper (same pid, same fds)
        argv = [SHELL, "-c", enter + 'exec "$@"', "sh", *launch.argv]
    else:
        argv = list(launch.argv)
    master, slave = -1, -1
    if _pty_size is not None and launch is None and not terminal:
        master, slave = _open_pty(_pty_size)
    output: int = subprocess.PIPE if slave < 0 else slave
    try:
        popen = subprocess.Popen(
            argv,
            executable=SHELL if launch is None or enter else None,
            cwd=cwd,
            env=dict(env),
            stdin=None if terminal else stdin,
            stdout=None if terminal else output,
            stderr=None if terminal else output,
            start_new_session=True,
            pass_fds=tuple(launch.pass_fds) if launch else (),
        )
    except BaseException:
        descendants.forget(0, cgroup)
        if master >= 0:
            os.close(master)
        raise
    finally:
        if slave >= 0:
            os.close(slave)  # the task holds it now: its last close is the master's EOF
    descendants.bind(popen.pid, cgroup, env)
    warden.enlist(popen.pid)
    if master >= 0:  # the executor reads the pty where it would read the pipes
        popen.stdout = os.fdopen(master, "rb", buffering=0)
    return popen


def pty_size(environ: Mapping[str, str], stream: IO[str], coloured: bool) -> tuple[int, int] | None:
    """The size of the pty tasks get, (columns, rows): vx's terminal's, when `stream` (vx's
    stdout) is a terminal vx paints in colour (`coloured`: NO_COLOR, FORCE_COLOR=0 and TERM=dumb
    keep pipes) and `VX_TTY` does not turn it off; else None, pipes as off a terminal."""
    if environ.get("VX_TTY", "").lower() in ("0", "false", "no", "off") or not coloured:
        return None
    try:
        if not stream.isatty():
            return None
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return None
    return (size.columns or 80, size.lines or 24)


def lend_pty(size: tuple[int, int] | None) -> None:
    """Give the tasks started from now on a pty of `size` (`pty_size`), or pipes (None)."""
    global _pty_size
    _pty_size = size


def _open_pty(size: tuple[int, int]) -> tuple[int, int]:
    """A pty's (master, slave), the slave sized and with no output translation; (-1, -1) when
    none can be had (the system's ptys used up): the task gets pipes."""
    import fcntl
    import struct
    import termios

    try:
        master, slave = os.openpty()  # both close-on-exec: no other task inherits them
    except OSError:
        return -1, -1
    try:
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # oflag: a "\n" stays "\n"
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    except OSError:
        os.close(master)
        os.close(slave)
        return -1, -1
    return master, slave


def released(pgid: int) -> None:
    """The task's group is gone (its shell reaped, no member left): the warden forgets it."""
    warden.release(pgid)
