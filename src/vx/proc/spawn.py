"""Start a task's process: `sh -c <command>` in the project dir, in its own session and
process group, stdin at EOF, stdout and stderr piped. A launch (the sandbox's or
--verify's wrapper) runs its argv instead, with its own stdin and kept descriptors.

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

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Mapping

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
    try:
        popen = subprocess.Popen(
            argv,
            executable=SHELL if launch is None or enter else None,
            cwd=cwd,
            env=dict(env),
            stdin=None if terminal else stdin,
            stdout=None if terminal else subprocess.PIPE,
            stderr=None if terminal else subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(launch.pass_fds) if launch else (),
        )
    except BaseException:
        descendants.forget(0, cgroup)
        raise
    descendants.bind(popen.pid, cgroup, env)
    _tell(f"+ {popen.pid}\n")
    return popen


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
