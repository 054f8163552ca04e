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

Tasks die with vx, however vx ends (a SIGKILL included): the first start also starts a
*warden*, a tiny `sh` in its own session that reads "+ group" and "- group" lines from a
pipe only vx holds. When vx is gone the pipe reads EOF, and the warden sends SIGTERM, then
after `WARDEN_GRACE_S` SIGKILL, to every task group still listed. Why not PR_SET_PDEATHSIG: it
reaches only the direct child (a task's `npm` or `node` grandchildren live on), fires when the
spawning *thread* exits, and needs a `preexec_fn`, which costs Popen its fast vfork path.
With a cgroup per task (proc/descendants.py) the warden also kills the run's cgroups, which
hold what left the groups (`setsid`), and removes them.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Generic, TypeVar

from msgspec import Struct

from vx.proc import descendants

SHELL = "/bin/sh"
WARDEN_GRACE_S = 2

# Groups arrive as "+ pgid" and leave as "- pgid" (removed without forking); at EOF each
# listed group gets SIGTERM, then SIGKILL. Terminal signals are ignored: only vx's end ends it.
_WARDEN = """trap '' INT TERM HUP QUIT
g=' '
while read -r op id; do
  case $op in
    +) g="$g$id " ;;
    -) case $g in *" $id "*) g="${g%% $id *} ${g#* $id }" ;; esac ;;
  esac
done
if [ "$g" != ' ' ]; then
  for p in $g; do kill -s TERM -- "-$p" 2>/dev/null; done
  sleep GRACE
  for p in $g; do kill -s KILL -- "-$p" 2>/dev/null; done
fi
[ -n "$1" ] || exit 0
echo 1 2>/dev/null >"$1/cgroup.kill" || for f in "$1"/*/cgroup.procs; do
  while read -r p; do kill -s KILL "$p" 2>/dev/null; done <"$f"
done 2>/dev/null
for i in 1 2 3 4 5 6 7 8 9 10; do
  rmdir "$1"/*/ 2>/dev/null; rmdir "$1" 2>/dev/null && exit 0
  sleep 1
done
""".replace("GRACE", str(WARDEN_GRACE_S))

_warden_fd = -1
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
    if _warden_fd < 0:
        _start_warden()
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
    _tell(f"+ {popen.pid}\n")
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
    """The task's group is gone (its shell reaped, no member left): the warden forgets it, so a
    later group with the same number is never signalled."""
    _tell(f"- {pgid}\n")


def _start_warden() -> None:
    global _warden_fd
    try:
        warden = subprocess.Popen(
            [SHELL, "-c", _WARDEN, "warden", descendants.run_cgroup()],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        _warden_fd = -2  # no warden: tasks then outlive a killed vx, as before; never asked again
        return
    assert warden.stdin is not None  # stdin=PIPE
    _warden_fd = os.dup(warden.stdin.fileno())  # O_CLOEXEC is not kept by dup: set it again
    os.set_inheritable(_warden_fd, False)
    warden.stdin.close()
    warden.returncode = 0  # never waited for: it outlives this process by design


def _tell(line: str) -> None:
    if _warden_fd >= 0:
        try:
            os.write(_warden_fd, line.encode())  # a line is far below PIPE_BUF: written whole
        except OSError:
            pass
