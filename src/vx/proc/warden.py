"""The warden: tasks die with vx, however vx ends (a SIGKILL included).

The first task start forks vx into a warden (`vx-warden` in `ps`), in a session of its own, that
holds one end of a socket pair only vx holds the other of. For each task vx sends it a pidfd of
the task's shell, which leads the task's process group, and takes it back once the group is
gone. When vx is gone the socket reads end-of-file, and the warden sends SIGTERM to every group
still listed, then SIGKILL to those with a member left once `GRACE_S` passes (it ends as soon as
none has), and with a cgroup per task (proc/descendants.py) kills the run's cgroups and removes
them. Last it removes the run's private temp directories (a sandbox's task dirs and traces, the
network proxy's sockets) that vx handed it and did not take back: a SIGKILLed vx left one in
/tmp per run.

**It never signals a stranger.** A group is signalled through the pidfd of its leader
(`pidfd_send_signal` with `PIDFD_SIGNAL_PROCESS_GROUP`, Linux 6.9): the kernel resolves the
group the pidfd names, not a number, so a group that took a dead task's number is out of reach.
Before Linux 6.9 the warden signals each member by a pidfd of its own, and lists the members
only while the leader is unreaped, when the number is still the task's; members that appear after
the leader is reaped are out of its reach then. The run's cgroup is held open as a directory, so
a later run's directory of the same name is never killed.

**A task can kill it; vx then starts another.** A task runs with vx's rights, and no process
can keep another of its user from signalling it. vx watches the warden (its socket reads end-of-
file when the warden dies) and forks a new one, handing it every group still listed. What stays
open is a task that kills the warden and vx at once, or every process of the user (`kill -9 -1`):
the sandbox's pid namespace is what holds such a task (docs/caching.md).

Why a fork of vx and not a program of its own: it costs a millisecond where starting Python
costs tens, and a shell cannot hold a pidfd. Why not PR_SET_PDEATHSIG: it reaches only the
direct child (a task's `npm` or `node` grandchildren live on), fires when the spawning *thread*
exits, and needs a `preexec_fn`, which costs Popen its fast vfork path. This module needs no
event loop: a run's first commands start before asyncio loads.
"""

from __future__ import annotations

import os
import signal
import socket
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GRACE_S = 2.0
_PGROUP = 4  # PIDFD_SIGNAL_PROCESS_GROUP (linux/pidfd.h, Linux 6.9)
_by_group = True  # False: signal member by member, as before Linux 6.9 (or as the tests ask)

_conn: socket.socket | None = None  # vx's end; None before the first start
_pid = 0  # the warden's pid
_off = False  # no warden can be had here: tasks outlive a killed vx, as before
_held: dict[int, int] = {}  # pgid -> vx's own pidfd of the group's leader, for a new warden
_watched: Any = None  # the event loop that tells vx of the warden's end
_run_dir = ""  # the run's cgroup, for a new warden
_dirs: dict[str, int] = {}  # a run's temp directory -> vx's descriptor of it, for a new warden


def start(run_cgroup: str) -> None:
    """Fork the warden, once; later calls do nothing (nor when none can be had)."""
    global _conn, _pid, _off, _run_dir
    if _conn is not None or _off or _pipe >= 0:
        return
    _run_dir = run_cgroup
    try:
        if not hasattr(os, "pidfd_open"):
            raise OSError("no pidfds")
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError:
        _start_shell(run_cgroup)
        return
    try:
        pid = _fork()
    except OSError:
        mine.close()
        theirs.close()
        _off = True
        return
    if pid == 0:  # the warden: never returns
        mine.close()
        _serve(theirs, run_cgroup)
    theirs.close()
    _conn, _pid = mine, pid
    for pgid, pidfd in _held.items():
        _send(b"+%d" % pgid, pidfd)
    for path, fd in _dirs.items():
        _send(b"d" + os.fsencode(path), fd)


def enlist(pid: int) -> None:
    """The task shell `pid` just started (unreaped: its pid is its own): the warden holds its group."""
    if _conn is None:
        _tell(b"+ %d\n" % pid)
        return
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return
    _held[pid] = pidfd
    _send(b"+%d" % pid, pidfd)


def release(pgid: int) -> None:
    """The group is gone (its shell reaped, no member left): the warden forgets it."""
    _tell(b"- %d\n" % pgid)
    pidfd = _held.pop(pgid, None)
    if pidfd is not None:
        os.close(pidfd)
        _send(b"-%d" % pgid)


def remove_at_end(path: str) -> None:
    """The warden removes `path`, a temp directory of vx's own, should vx end without removing it.
    Told with a descriptor: a directory of that name made later by another is left alone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    _dirs[path] = fd
    _send(b"d" + os.fsencode(path), fd)


def removed(path: str) -> None:
    """vx removed `path` itself: the warden forgets it (`vx watch` makes one per cycle)."""
    fd = _dirs.pop(path, None)
    if fd is not None:
        os.close(fd)
        _send(b"x" + os.fsencode(path))


def watch(loop: Any) -> None:
    """Have `loop` (an asyncio loop) start a new warden should this one die while vx runs."""
    global _watched
    if _conn is None or _watched is loop:
        return
    if _watched is not None:  # an earlier run's loop (`vx watch`)
        try:
            _watched.remove_reader(_conn.fileno())
        except (RuntimeError, ValueError, OSError):
            pass
    _watched = loop
    loop.add_reader(_conn.fileno(), _rearm)


def pid() -> int:
    """The warden's pid; 0 before the first start."""
    return _pid


def _rearm() -> None:
    """The warden's end of the socket closed: it died. Reap it, start another, hand it the groups."""
    global _conn, _watched
    if _conn is None:
        return
    loop, _watched = _watched, None
    if loop is not None:
        loop.remove_reader(_conn.fileno())
    _conn.close()
    _conn = None
    try:
        os.waitpid(_pid, os.WNOHANG)
    except ChildProcessError:
        pass
    start(_run_dir)
    if loop is not None:
        watch(loop)


def _fork() -> int:
    import warnings

    with warnings.catch_warnings():  # Python 3.12 frowns on fork with threads; the child runs
        warnings.simplefilter("ignore")  # no code that takes a lock another thread could hold
        return os.fork()


def _send(message: bytes, pidfd: int = -1) -> None:
    if _conn is None:
        return
    try:
        socket.send_fds(_conn, [message], [pidfd]) if pidfd >= 0 else _conn.send(message)
    except OSError:
        pass  # the warden is gone: the watch starts another, which gets every group


# ---------------------------------------------------------------- without pidfds: a shell

# Where Linux has no pidfds (before 5.3) or AF_UNIX no SOCK_SEQPACKET, the warden is a `sh` that
# is told group numbers on a pipe and signals them by number: a number a stranger took since is
# then signalled too. Groups arrive as "+ pgid" and leave as "- pgid"; at end-of-file each listed
# group gets SIGTERM, then SIGKILL; terminal signals are ignored.
_SHELL_WARDEN = """trap '' INT TERM HUP QUIT
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
""".replace("GRACE", str(int(GRACE_S)))
_pipe = -1  # vx's end of the shell warden's pipe


def _start_shell(run_cgroup: str) -> None:
    global _pipe, _off, _pid
    import subprocess

    try:
        shell = subprocess.Popen(
            ["/bin/sh", "-c", _SHELL_WARDEN, "vx-warden", run_cgroup],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        _off = True  # no warden: tasks then outlive a killed vx; never asked again
        return
    assert shell.stdin is not None  # stdin=PIPE
    _pipe = os.dup(shell.stdin.fileno())  # O_CLOEXEC is not kept by dup: set it again
    os.set_inheritable(_pipe, False)
    shell.stdin.close()
    shell.returncode = 0  # never waited for: it outlives this process by design
    _pid = shell.pid


def _tell(line: bytes) -> None:
    if _pipe >= 0:
        try:
            os.write(_pipe, line)  # a line is far below PIPE_BUF: written whole
        except OSError:
            pass


# ---------------------------------------------------------------- the warden's side


def _serve(conn: socket.socket, run_cgroup: str) -> None:
    global _by_group
    import gc

    # never collect: a cycle the fork copied could hold an object whose finaliser takes a lock
    # (SQLite's, gRPC's) that a thread of vx held at the fork, and the warden would hang on it
    gc.disable()
    try:
        _by_group = os.environ.get("VX_TEST_WARDEN") != "members"
        _detach(conn.fileno())
        cgroup = _open_dir(run_cgroup)
        groups: dict[int, int] = {}
        dirs: dict[bytes, int] = {}
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(conn, 4200, 4)  # a path: up to PATH_MAX
            except InterruptedError:
                continue
            except OSError:
                break
            if not message:
                break  # vx is gone
            kind, rest = message[:1], message[1:]
            if kind == b"d" and fds:
                dirs[rest] = fds.pop()
            elif kind == b"x" and rest in dirs:
                os.close(dirs.pop(rest))
            elif kind == b"+" and fds:
                groups[int(rest)] = fds.pop()
            elif kind == b"-" and int(rest) in groups:
                os.close(groups.pop(int(rest)))
            for fd in fds:
                os.close(fd)
        _end(groups)
        if cgroup >= 0:
            _end_cgroup(cgroup, run_cgroup)
        for path, fd in dirs.items():  # after the tasks: none writes its TMPDIR any more
            _remove_dir(path, fd)
    except BaseException:
        pass
    finally:
        os._exit(0)


def _detach(keep: int) -> None:
    """Leave vx's session, its signals and every descriptor but `keep`."""
    os.setsid()
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        quiet = number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
        try:
            if quiet or callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_IGN if quiet else signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)  # never hold vx's output open: its reader waits for end-of-file
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 30)  # close_range(2): one call, however high the limit
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write("vx-warden")
    except OSError:
        pass


def _end(groups: dict[int, int]) -> None:
    members: dict[int, list[int]] = {pgid: [] for pgid in groups}
    live = [pgid for pgid in groups if _signal(pgid, groups[pgid], signal.SIGTERM, members)]
    deadline = time.monotonic() + GRACE_S
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [pgid for pgid in live if _signal(pgid, groups[pgid], 0, members)]
    for pgid in live:
        _signal(pgid, groups[pgid], signal.SIGKILL, members)


def _signal(pgid: int, leader: int, sig: int, members: dict[int, list[int]]) -> bool:
    """Send `sig` to the group the pidfd `leader` leads; whether one of its members was there."""
    global _by_group
    if _by_group:
        try:
            signal.pidfd_send_signal(leader, sig, None, _PGROUP)
            return True
        except ProcessLookupError:
            return False
        except OSError:
            _by_group = False  # before Linux 6.9: member by member
    fresh = _members(pgid, leader)
    if fresh:  # the leader is unreaped: the whole group as it is now
        for fd in members[pgid]:
            os.close(fd)
        members[pgid] = fresh
    reached = False
    for member in members[pgid]:
        try:
            signal.pidfd_send_signal(member, sig)
            reached = True
        except OSError:
            pass
    return reached


def _members(pgid: int, leader: int) -> list[int]:
    """Pidfds of the processes in group `pgid`, taken while its leader is unreaped (so that the
    number is still the task's); none once it is reaped."""
    if not _unreaped(leader):
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _group_of(entry) == pgid:
            try:
                fd = os.pidfd_open(int(entry))
            except OSError:
                continue
            if _group_of(entry) == pgid and _unreaped(fd):  # the same process, still in it
                found.append(fd)
            else:
                os.close(fd)
    if not _unreaped(leader):  # reaped meanwhile: the number may have been taken since
        for fd in found:
            os.close(fd)
        return []
    return found


def _unreaped(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except OSError:
        return False
    return True


def _group_of(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
        return int(stat[stat.rfind(b")") + 2 :].split()[2])
    except (OSError, ValueError, IndexError):
        return 0


def _open_dir(path: str) -> int:
    if not path:
        return -1
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return -1


def _end_cgroup(fd: int, path: str) -> None:
    """Kill what is left in the run's cgroup (held open: a later run's of that name is not it)
    and remove it once empty."""
    if not _write_at(fd, "cgroup.kill", b"1"):
        frozen = _write_at(fd, "cgroup.freeze", b"1")  # before Linux 5.14: no member can fork
        for _, _, _, dir_fd in os.fwalk(".", dir_fd=fd):
            try:
                with open(os.open("cgroup.procs", os.O_RDONLY, dir_fd=dir_fd), "rb") as file:
                    pids = [int(word) for word in file.read().split()]
            except OSError:
                continue
            for member in pids:  # frozen: none can exit and leave its pid to another meanwhile
                try:
                    os.kill(member, signal.SIGKILL)
                except OSError:
                    pass
        if frozen:
            _write_at(fd, "cgroup.freeze", b"0")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for _, subdirs, _, dir_fd in os.fwalk(".", dir_fd=fd, topdown=False):
            for name in subdirs:
                try:
                    os.rmdir(name, dir_fd=dir_fd)
                except OSError:
                    pass
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def _remove_dir(path: bytes, fd: int) -> None:
    """Remove the tree at `path` if it is still the directory `fd` holds."""
    import shutil

    try:
        if os.lstat(path).st_ino != os.fstat(fd).st_ino:
            return  # gone, or another directory took the name since
    except OSError:
        return
    shutil.rmtree(path, ignore_errors=True)  # descriptor-based: follows no link it meets


def _write_at(fd: int, name: str, data: bytes) -> bool:
    try:
        target = os.open(name, os.O_WRONLY, dir_fd=fd)
    except OSError:
        return False
    try:
        os.write(target, data)
    except OSError:
        return False
    finally:
        os.close(target)
    return True
