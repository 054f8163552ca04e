"""Run one task command as a real process, and own it until it is reaped.

A task is `sh -c <command>` in the project dir, in its own session and process
group, with stdin at EOF and stdout/stderr read concurrently, in arrival
order. The shell is reaped with `wait4`, the only call that also returns the rusage of
the child tree. asyncio's child watchers reap with `waitpid` and throw that away,
and reaping twice races, so vx spawns with `subprocess.Popen`, watches the exit through a
pidfd (a waiting thread where pidfds are missing) and reaps the pid itself.

`execute()` returns only after the shell is reaped, also on timeout and cancellation
(trio's discipline): every process vx starts has an owner until it is gone.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from msgspec import Struct

from vx.errors import UsageError
from vx.model import LogChunk, ProcessResult
from vx.proc import descendants, spawn, warden
from vx.proc.spawn import SHELL

DRAIN_S = 0.25  # how long the pipes are read after the shell exits
DEFAULT_KILL_GRACE_MS = 2000  # SIGTERM -> SIGKILL
REAP_AFTER_KILL_S = 5.0  # a SIGKILLed process in uninterruptible sleep may take a while
_READ_SIZE = 1 << 16
_CUT_NOTE = (
    b"vx: stopped reading output 250 ms after the shell exited: "
    b"a background process still holds the pipe\n"
)
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux
_STATUS_UNKNOWN = 255  # someone else reaped the shell; its verdict is lost


def kill_grace_ms(environ: Mapping[str, str] = os.environ) -> int:
    """Read `VX_KILL_GRACE_MS`, the SIGTERM-to-SIGKILL grace; 2000 when unset.

    The CLI should call this once up front, so a bad value is refused before anything runs.
    """
    text = environ.get("VX_KILL_GRACE_MS", "")
    if text == "":
        return DEFAULT_KILL_GRACE_MS
    if not re.fullmatch(r"[0-9]+", text):
        raise UsageError(
            f"invalid VX_KILL_GRACE_MS `{text}`",
            hint="set it to a whole number of milliseconds, such as 2000",
        )
    return int(text)


# ---------------------------------------------------------------- the run's process table


class ProcessTable:
    """Hold the live process groups of one run, so that a stop reaches every one of them.

    Why a table: the signal that stops vx arrives once, but must reach each task's own
    process group once, and the run may not end while a group it started lives.
    A group leaves the live set when its shell is reaped; if members remain (a background
    child that outlived its shell), the group lingers until the run shuts down, so that no
    process a task started survives the run. "Members" include what left the group on purpose
    (`setsid`): proc/descendants.py finds those, by cgroup or as vx's orphans.
    """

    def __init__(self) -> None:
        self.stopping = False  # set: a process that ends now is `aborted`
        self._live: dict[int, Child] = {}
        self._lingering: dict[int, Child] = {}
        self._signalled: set[int] = set()
        self._stop_signal: int | None = None
        self._empty = asyncio.Event()
        self._empty.set()

    @property
    def pgids(self) -> tuple[int, ...]:
        """The process groups (one per running shell) in the table now."""
        return tuple(self._live)

    def terminate_all(self, sig: int = signal.SIGTERM) -> None:
        """Forward a stop signal once to every live group and mark the run stopping.

        SIGHUP is forwarded as SIGTERM: the tasks did not lose a terminal, vx is stopping.
        A group that starts after this gets the same signal at once.
        """
        self.stopping = True
        self._stop_signal = signal.SIGTERM if sig == signal.SIGHUP else sig
        for pgid in list(self._live):
            self._signal_once(pgid)
        self._signal_lingering(signal.SIGTERM)  # background jobs ignore SIGINT (POSIX)

    def kill_all(self) -> None:
        """SIGKILL every group still alive; a second stop signal or an expired grace."""
        self.stopping = True
        for child in list(self._live.values()):
            child.signal(signal.SIGKILL)
        self._signal_lingering(signal.SIGKILL)
        descendants.signal_orphans(signal.SIGKILL)

    async def shutdown(self, grace_s: float) -> None:
        """Terminate every group, wait up to `grace_s` for them to end, kill the rest."""
        self.terminate_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        if not await self._wait_empty(grace_s) or not await self._wait_lingering(deadline):
            self.kill_all()
            await self._wait_empty(REAP_AFTER_KILL_S)
            await self._wait_lingering(time.monotonic() + REAP_AFTER_KILL_S)
        self._signal_lingering(0)  # forgets what is gone
        await self._stop_orphans(grace_s)

    async def _stop_orphans(self, grace_s: float) -> None:
        """A subreaper's orphans (what tasks left outside their groups) end with the run too."""
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, REAP_AFTER_KILL_S)):
            if not descendants.orphans():
                return
            descendants.signal_orphans(sig)
            deadline = time.monotonic() + wait_s
            while descendants.orphans() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)

    async def _wait_lingering(self, deadline: float) -> bool:
        while any(child.running() for child in self._lingering.values()):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    def _signal_lingering(self, sig: int) -> None:
        for pgid, child in list(self._lingering.items()):
            if not child.present():
                self._lingering.pop(pgid, None)
                child.release()
            elif sig:
                child.signal_all(sig)

    async def _wait_empty(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._empty.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def _signal_once(self, pgid: int) -> None:
        if pgid not in self._signalled and self._stop_signal is not None:
            self._signalled.add(pgid)
            self._live[pgid].signal(self._stop_signal)

    def _add(self, child: Child) -> None:
        self._live[child.pid] = child
        self._empty.clear()
        self._signal_once(child.pid)

    def _discard(self, child: Child) -> None:
        self._live.pop(child.pid, None)
        self._signalled.discard(child.pid)
        if child.present():  # members outlived the shell: keep the group to stop it later
            self._lingering[child.pid] = child
        if not self._live:
            self._empty.set()


# ---------------------------------------------------------------- one child


class Launch(Struct, frozen=True):
    """Start a task through a wrapper (the sandbox's bwrap argv) instead of `sh -c command`.

    Why here: the wrapper still needs everything execute() owns — its own process group,
    timeouts, Ctrl-C, the drain bound, the reaping. `stdin` is an fd the child reads as
    stdin (default /dev/null), `pass_fds` stay open at their numbers, and `polite_group`
    names the process group that SIGTERM/SIGINT go to once it is known (None: our own).
    """

    argv: Sequence[str]
    stdin: int | None = None
    pass_fds: Sequence[int] = ()
    polite_group: Callable[[], int | None] | None = None


class Child:
    """One spawned shell: its pid (also its process group id) and how it ended."""

    def __init__(self, popen: subprocess.Popen[bytes], table: ProcessTable) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.table = table
        # (wait status or None, rusage or None, aborted)
        self.exited: asyncio.Future[tuple[int | None, object, bool]]
        self.exited = asyncio.get_running_loop().create_future()
        self.own_rss = _own_peak_rss()  # sampled after exec: see _peak_rss
        self.killed = False  # SIGKILL was needed to end the shell
        self.term_deadline: float | None = None
        self.launch: Launch | None = None

    def signal(self, sig: int) -> None:
        """Send `sig` to the whole group; after the shell is reaped, only while members live.

        A launch may name another group for the polite signals (a sandbox's inner session);
        SIGKILL always goes to our own group, whose death takes the launch's processes along,
        and to every process the task started that left the group (see descendants).
        """
        if self.exited.done() and not self.running():
            return  # the number may already belong to someone else
        polite = self.launch.polite_group() if self.launch and self.launch.polite_group else None
        _killpg(
            polite if polite and sig != signal.SIGKILL and not self.exited.done() else self.pid, sig
        )
        if sig == signal.SIGKILL:
            descendants.signal_all(self.pid, sig)
            if not self.exited.done():
                self.killed = True

    def signal_all(self, sig: int) -> None:
        """Send `sig` to the group and to what the task started outside it (its shell is gone)."""
        _killpg(self.pid, sig)
        descendants.signal_all(self.pid, sig)

    def running(self) -> bool:
        """Whether anything the task started still runs (zombies do not count)."""
        return group_alive(self.pid) or descendants.alive(self.pid)

    def present(self) -> bool:
        """Like running(), but one kill(2) in the usual case; a zombie in the group counts."""
        return _killpg_probe(self.pid) or descendants.alive(self.pid, thorough=False)

    def release(self) -> None:
        """Nothing of the task is left: the warden forgets its group, its cgroup goes."""
        spawn.released(self.pid)
        descendants.forget(self.pid)

    def terminate(self, grace_s: float) -> float:
        """SIGTERM the group once; return when the grace ends."""
        if self.term_deadline is None:
            self.term_deadline = time.monotonic() + grace_s
            self.signal(signal.SIGTERM)
        return self.term_deadline

    def _on_exit(self, status: int | None, rusage: object) -> None:
        # Popen must never reap or warn about a pid we already reaped (it could be reused).
        self.popen.returncode = (
            _STATUS_UNKNOWN if status is None else os.waitstatus_to_exitcode(status)
        )
        aborted = self.table.stopping
        self.table._discard(self)
        # members that outlive the shell (or their zombies) stay the warden's
        if not self.present():
            self.release()
        if not self.exited.done():
            self.exited.set_result((status, rusage, aborted))


def adopt(
    popen: subprocess.Popen[bytes], table: ProcessTable, launch: Launch | None = None
) -> Child:
    """Own a process started by `spawn.start` (now, or before the loop existed): register it and
    watch for its exit. A process that already exited is a readable pidfd at once."""
    child = Child(popen, table)
    child.launch = launch
    table._add(child)
    _watch_exit(child.pid, child._on_exit)
    warden.watch(asyncio.get_running_loop())
    return child


def _watch_exit(pid: int, on_exit: Callable[[int | None, object], None]) -> None:
    """Call `on_exit(status, rusage)` in the loop once `pid` has exited and been reaped."""
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        threading.Thread(target=_wait_in_thread, args=(pid, loop, on_exit), daemon=True).start()
        return

    def exited() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        reaped = _reap(pid, os.WNOHANG)
        if (
            reaped is _NOT_YET
        ):  # a traced child (the sandbox's strace) is waitable only once its tracer saw the exit
            threading.Thread(target=_wait_in_thread, args=(pid, loop, on_exit), daemon=True).start()
            return
        on_exit(*reaped)

    loop.add_reader(pidfd, exited)


def _wait_in_thread(pid: int, loop: asyncio.AbstractEventLoop, on_exit: Callable) -> None:
    """Block in wait4 off the loop; the fallback where pidfd_open is missing."""
    reaped = _reap(pid, 0)
    try:
        loop.call_soon_threadsafe(on_exit, *reaped)
    except RuntimeError:
        pass  # the loop is closed: nobody is waiting any more


_NOT_YET: tuple[int | None, object] = (None, "not yet")


def _reap(pid: int, flags: int) -> tuple[int | None, object]:
    try:
        got, status, rusage = os.wait4(pid, flags)
    except ChildProcessError:
        return None, None
    return _NOT_YET if got == 0 else (status, rusage)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def group_alive(pgid: int) -> bool:
    """Tell whether any member of the process group still runs (zombies do not count).

    Why not just `killpg(pgid, 0)`: orphaned grandchildren are reaped by PID 1, which in
    some containers takes seconds, and a zombie cannot be killed any further anyway.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return _killpg_probe(pgid)
    return any(_running_in_group(entry, pgid) for entry in entries if entry.isdigit())


def _running_in_group(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) "
    return len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid


def _killpg_probe(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------- output capture


class Capture:
    """Collect a child's stdout and stderr chunks in the order they arrive (one stream, 1, from
    a pty)."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        on_output: Callable[[LogChunk], None],
        keep_bytes: int | None = None,
    ):
        self.chunks: list[LogChunk] = []
        self._on_output = on_output
        self._keep, self._kept = keep_bytes, 0  # a persistent task keeps only its log's tail
        self._error: Exception | None = None
        self._loop = asyncio.get_running_loop()
        assert popen.stdout is not None  # spawn pipes both, or gives both one pty (stdout)
        self._open: dict[int, IO[bytes]] = {1: popen.stdout}
        if popen.stderr is not None:
            self._open[2] = popen.stderr
        self._all_closed = asyncio.Event()
        for stream, pipe in self._open.items():
            os.set_blocking(pipe.fileno(), False)
            self._loop.add_reader(pipe.fileno(), self._read, stream)

    async def drain(self, within_s: float) -> None:
        """Read for `within_s` more after the shell exits, then cut the pipes with a note.

        A backgrounded child that inherited the pipes would otherwise hold the task open
        for as long as it lives.
        """
        try:
            await asyncio.wait_for(self._all_closed.wait(), within_s)
        except TimeoutError:
            for stream in list(self._open):
                while stream in self._open and self._read(stream):
                    pass
            if self._open:
                self._deliver(LogChunk(2, self._cut_note()))
            self.close()

    def close(self) -> None:
        for stream in list(self._open):
            self._close(stream)

    def raise_callback_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _read(self, stream: int) -> bool:
        """Read what one pipe has; return whether anything came."""
        try:
            data = os.read(self._open[stream].fileno(), _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:  # EIO: a pty's master once every holder of its slave has closed it
            data = b""
        if data:
            self._deliver(LogChunk(stream, data))
        else:
            self._close(stream)
        return bool(data)

    def _deliver(self, chunk: LogChunk) -> None:
        self.chunks.append(chunk)
        if self._keep is not None:
            self._kept += len(chunk.data)
            while self._kept > self._keep and len(self.chunks) > 1:
                self._kept -= len(self.chunks.pop(0).data)
        if self._error is None:
            try:
                self._on_output(chunk)
            except Exception as exc:  # re-raised once the child is reaped
                self._error = exc

    def _close(self, stream: int) -> None:
        pipe = self._open.pop(stream, None)
        if pipe is not None:
            self._loop.remove_reader(pipe.fileno())
            pipe.close()
        if not self._open:
            self._all_closed.set()

    def _cut_note(self) -> bytes:
        ends_line = not self.chunks or self.chunks[-1].data.endswith(b"\n")
        return _CUT_NOTE if ends_line else b"\n" + _CUT_NOTE


# ---------------------------------------------------------------- execute


async def execute(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_ms: int | None,
    on_output: Callable[[LogChunk], None],
    table: ProcessTable,
    grace_ms: int | None = None,
    launch: Launch | None = None,
    started: tuple[Child, float] | None = None,
    settle_group: bool = False,
    terminal: bool = False,
) -> ProcessResult:
    """Run `sh -c command` to the end and describe how it ended; never raise for the task.

    `grace_ms` is the SIGTERM-to-SIGKILL grace, `VX_KILL_GRACE_MS` when None. A spawn
    failure is a result (exit 127 with `spawn_error`); cancellation stops the group,
    reaps the shell and re-raises. With `launch`, its argv runs instead of the shell.
    `started` is (the child, its `time.monotonic()` start) when it was started before the walk:
    its timeout and duration count from then. With `settle_group` (a cached task, whose outputs
    are read next) it returns only once the whole process group is gone: what the shell left
    running is waited for for the grace, then SIGTERMed, then SIGKILLed after the grace. With
    `terminal` the command has vx's own stdin, stdout and stderr and nothing is captured.
    """
    grace_s = (kill_grace_ms() if grace_ms is None else grace_ms) / 1000
    if started is not None:
        child, started_at = started
    else:
        started_at = time.monotonic()
        try:
            child = adopt(spawn.start(command, cwd, env, launch, terminal=terminal), table, launch)
        except (OSError, ValueError) as exc:
            error = spawn_error(exc, cwd, launch.argv[0] if launch else SHELL)
            return ProcessResult(
                exit_code=127, duration_ms=_ms_since(started_at), spawn_error=error
            )
    capture = Capture(child.popen, on_output) if not terminal else None
    stopped = None
    try:
        left_ms = None if timeout_ms is None else timeout_ms - _ms_since(started_at)
        timed_out = await _supervise(child, left_ms, grace_s)
        if settle_group and not timed_out:  # the pipes are still read meanwhile
            stopped = await _settle_group(child, grace_s)
        if capture is not None:
            await capture.drain(DRAIN_S)
    finally:
        if capture is not None:
            capture.close()
    if capture is not None:
        capture.raise_callback_error()
    result = _result(
        child,
        capture.chunks if capture is not None else [],
        timed_out=timed_out,
        started=started_at,
    )
    if stopped is not None:
        from msgspec.structs import replace

        result = replace(result, stopped_strays=stopped)
    return result


async def _settle_group(child: Child, grace_s: float) -> str | None:
    """Wait until nothing of the task's group runs any more, so that nothing it started can write
    after its outputs are read; stop what is left after the grace. None when nothing had to be
    stopped, else the signal it took. There is no event for the death of processes that are not
    our children, so this polls, and only when the shell left some behind."""
    in_group = _killpg_probe(child.pid) and group_alive(child.pid)
    if not in_group and not descendants.alive(child.pid):
        if child.table._lingering.pop(child.pid, None) is not None:
            child.release()
        return None  # the usual case: one failed kill(2), and one read with a cgroup
    stopped = None
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            stopped = sig.name
            child.signal_all(sig)
        deadline = time.monotonic() + (REAP_AFTER_KILL_S if sig == signal.SIGKILL else grace_s)
        delay = 0.005
        while child.running():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.1)
            if sig == signal.SIGKILL:
                child.signal_all(sig)  # a process forked before the kill reached its parent
        else:
            child.table._lingering.pop(child.pid, None)  # gone: its number may be reused
            child.release()
            return stopped
    return stopped


async def _supervise(child: Child, timeout_ms: float | None, grace_s: float) -> bool:
    """Wait for the shell; stop its group on overrun or cancellation. True on a timeout."""
    try:
        if await _exited_within(child, None if timeout_ms is None else timeout_ms / 1000):
            return False
        await stop_group(child, grace_s)
        return True
    except asyncio.CancelledError:
        await _stop_despite_cancel(child, grace_s)
        raise


async def _exited_within(child: Child, timeout_s: float | None) -> bool:
    # asyncio.wait never cancels the future it watches, so `exited` survives our cancellation.
    if timeout_s is not None:
        timeout_s = max(0.0, timeout_s)
    done, _ = await asyncio.wait({child.exited}, timeout=timeout_s)
    return bool(done)


async def stop_group(child: Child, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL it after the grace, and return once the shell is reaped."""
    deadline = child.terminate(grace_s)
    if not await _exited_within(child, deadline - time.monotonic()):
        child.signal(signal.SIGKILL)
        await _exited_within(child, None)
    else:  # the shell is gone: what it left outside its group gets SIGTERM too
        descendants.signal_all(child.pid, signal.SIGTERM)
    if not await _group_gone_by(child, deadline):
        child.signal(signal.SIGKILL)
        await _group_gone_by(child, time.monotonic() + REAP_AFTER_KILL_S)


async def _group_gone_by(child: Child, deadline: float) -> bool:
    """Wait until no member of the group runs, or the deadline passes; True when it is gone.

    A grandchild may ignore SIGTERM, and a SIGKILLed one still runs until its exit path ends
    (kill(2) returns before): vx returns only once nothing the task started can still write.
    There is no event for the death of processes that are not our children, so this polls,
    and only on the stop path.
    """
    delay = 0.005
    while child.running():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.1)
    return True


async def _stop_despite_cancel(child: Child, grace_s: float) -> None:
    """Stop the group although our task is cancelled; a further cancel means SIGKILL now."""
    stopping = asyncio.ensure_future(stop_group(child, grace_s))
    while not stopping.done():
        try:
            await asyncio.shield(stopping)
        except asyncio.CancelledError:
            child.signal(signal.SIGKILL)


def _result(
    child: Child, chunks: list[LogChunk], *, timed_out: bool, started: float
) -> ProcessResult:
    status, rusage, aborted = child.exited.result()
    exit_code, sig = verdict_of(status)
    if timed_out:  # the label is the overrun, whatever the shell made of the signal
        sig = signal.SIGKILL if child.killed else signal.SIGTERM
        exit_code = 128 + sig
    return ProcessResult(
        exit_code=exit_code,
        duration_ms=_ms_since(started),
        log=tuple(chunks),
        timed_out=timed_out,
        aborted=aborted,
        signal=None if sig is None else int(sig),
        cpu_ms=_cpu_ms(rusage),
        peak_rss_bytes=_peak_rss(rusage, child.own_rss),
    )


def verdict_of(status: int | None) -> tuple[int, int | None]:
    """Turn a wait status into (exit code, signal): a death by signal n is exit 128+n."""
    if status is None:
        return _STATUS_UNKNOWN, None
    code = os.waitstatus_to_exitcode(status)
    return (128 - code, -code) if code < 0 else (code, None)


def _cpu_ms(rusage: object) -> float | None:
    if rusage is None:
        return None
    return (rusage.ru_utime + rusage.ru_stime) * 1000  # type: ignore[attr-defined]


def _peak_rss(rusage: object, own_rss: int) -> int | None:
    """Report the tree's peak RSS only when it beats vx's own footprint.

    Why: Popen uses vfork, and Linux charges the parent's resident set to the child at
    exec, so a peak at or below vx's own size is vx's, not the task's.
    """
    if rusage is None:
        return None
    peak = rusage.ru_maxrss * _RSS_UNIT  # type: ignore[attr-defined]
    return peak if peak > own_rss else None


def _own_peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _RSS_UNIT


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def spawn_error(exc: Exception, cwd: Path, program: str = SHELL) -> str:
    """Say why the shell could not start, naming the directory when that is the cause."""
    if isinstance(exc, OSError) and str(exc.filename) == str(cwd):
        return f"cannot enter the task's directory {cwd}: {exc.strerror}"
    if isinstance(exc, OSError):
        return f"cannot start {program}: {exc.strerror}"
    return f"cannot start {program}: {exc}"
