"""A persistent task's process: started, watched until it is ready, then kept
until the run lets it go.

Ready means a line of its output matches `exec.persistent.readyWhen` (line breaks and ANSI
escapes stripped; the trailing partial line counts too, a prompt rarely ends in a newline), or,
without one, that it started. It reads a pipe vx holds open rather than EOF: some servers exit
when their stdin closes. Only the tail of its log is kept, for the frame of a failure: a server
prints for as long as it runs.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Callable, Mapping

from msgspec.structs import replace

from vx.errors import EXIT_TASK_FAILED
from vx.events import Emit, Notice, ServersKept
from vx.model import LogChunk, RunSummary, Status, TaskGraph, TaskId, TaskResult
from vx.proc import executor, spawn

TAIL_BYTES = 256 << 10
PARTIAL_LIMIT = 64 << 10  # a "line" longer than this is tested in pieces
DEFAULT_READY_NOTICE_MS = 10_000
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def ready_notice_ms(environ: Mapping[str, str] = os.environ) -> int:
    """`VX_READY_NOTICE_MS`: after how long vx says what a persistent task is waiting for."""
    text = environ.get("VX_READY_NOTICE_MS", "")
    return int(text) if text.isdigit() else DEFAULT_READY_NOTICE_MS


class Server:
    """One persistent task's process group, its readiness and its end.

    `ready` resolves to None once the task is ready, or to why it never was; `ended` resolves to
    its exit code once the shell is reaped and its pipes are drained.
    """

    def __init__(
        self,
        child: executor.Child,
        stdin_w: int,
        ready_when: str | None,
        on_output: Callable[[LogChunk], None],
        started_at: float,
        on_crash: Callable[[str], None] = lambda words: None,
        secrets: tuple[bytes, ...] = (),
    ) -> None:
        loop = asyncio.get_running_loop()
        self._secrets = secrets
        self.child, self.started_at = child, started_at
        self.released = False  # vx stopped it: its end is no failure
        self.words = ""  # how it ended: `exited with code 1`
        self._on_crash = on_crash
        self._stdin_w = stdin_w
        self._on_output = on_output
        self._pattern = re.compile(ready_when.encode()) if ready_when else None
        self._partial = {1: b"", 2: b""}
        self.ready: asyncio.Future[str | None] = loop.create_future()
        if self._pattern is None:
            self._set_ready()
        self.capture = executor.Capture(child.popen, self._chunk, keep_bytes=TAIL_BYTES)
        self.ended: asyncio.Future[int] = asyncio.ensure_future(self._watch())

    @property
    def log(self) -> tuple[LogChunk, ...]:
        """The tail of its log, secrets masked."""
        if self._secrets:
            from vx.proc import masking

            return masking.mask_log(self.capture.chunks, self._secrets)
        return tuple(self.capture.chunks)

    @property
    def aborted(self) -> bool:
        """It ended because the run is stopping."""
        return self.child.exited.done() and self.child.exited.result()[2]

    def _set_ready(self) -> None:
        if not self.ready.done():
            self.ready.set_result(None)

    def _chunk(self, chunk: LogChunk) -> None:
        self._on_output(chunk)
        if self.ready.done() or self._pattern is None:
            return
        stream = 2 if chunk.stream == 2 else 1
        text = self._partial[stream] + chunk.data
        *lines, rest = text.split(b"\n")
        self._partial[stream] = rest[-PARTIAL_LIMIT:]
        if any(self._matches(line) for line in (*lines, rest)):
            self._set_ready()

    def _matches(self, line: bytes) -> bool:
        assert self._pattern is not None  # asked only when a readyWhen pattern was given
        return self._pattern.search(_ANSI.sub(b"", line.rstrip(b"\r"))) is not None

    async def _watch(self) -> int:
        await asyncio.wait({self.child.exited})
        try:
            await self.capture.drain(executor.DRAIN_S)
        finally:
            self.capture.close()
            _close(self._stdin_w)
        status, _, _ = self.child.exited.result()
        code, sig = executor.verdict_of(status)
        self.words = exit_words(code, sig)
        if not self.ready.done():
            self.ready.set_result(self.words)
        elif code != 0 and not self.released and not self.aborted:
            self._on_crash(self.words)  # named at once, while the rest of the run goes on
        return code

    async def wait_ready(self, timeout_ms: int | None, notice: Callable[[str], None]) -> str | None:
        """Wait until it is ready; None, or why not (it exited, or `timeout_ms` passed: then it is stopped)."""
        loop = asyncio.get_running_loop()
        told = None
        pattern = self._pattern
        if pattern is not None:

            def still_waiting() -> None:
                if not self.ready.done():
                    notice(
                        f"still waiting for a line matching /{pattern.pattern.decode()}/ "
                        "(exec.persistent.readyWhen)"
                    )

            told = loop.call_later(ready_notice_ms() / 1000, still_waiting)
        try:
            done, _ = await asyncio.wait(
                {self.ready}, timeout=None if timeout_ms is None else timeout_ms / 1000
            )
        finally:
            if told is not None:
                told.cancel()
        if done:
            return self.ready.result()
        await self.stop(executor.kill_grace_ms() / 1000)
        return (
            f"timed out after {timeout_ms} ms waiting for a line matching /{self._pattern.pattern.decode()}/"
            if self._pattern is not None
            else f"timed out after {timeout_ms} ms"
        )

    async def stop(self, grace_s: float) -> int:
        """SIGTERM its group, SIGKILL what is left after the grace; its exit code once reaped."""
        self.released = True
        if not self.child.exited.done():
            await executor.stop_group(self.child, grace_s)
        return await asyncio.shield(self.ended)


def start(
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    table: executor.ProcessTable,
    ready_when: str | None,
    on_output: Callable[[LogChunk], None],
    started_at: float,
    on_crash: Callable[[str], None] = lambda words: None,
    secrets: tuple[bytes, ...] = (),
) -> Server:
    """Start the task's shell with a held stdin pipe; OSError or ValueError when it cannot start."""
    stdin_r, stdin_w = os.pipe()
    try:
        popen = spawn.start(command, cwd, env, stdin=stdin_r)
    except BaseException:
        _close(stdin_w)
        raise
    finally:
        _close(stdin_r)
    return Server(
        executor.adopt(popen, table),
        stdin_w,
        ready_when,
        on_output,
        started_at,
        on_crash,
        secrets,
    )


def exit_words(code: int, sig: int | None) -> str:
    """`exited with code 1`, `was killed by SIGSEGV`."""
    if sig is not None:
        from vx.engine.verdicts import signal_name

        return f"was killed by {signal_name(sig) or f'signal {sig}'}"
    return f"exited with code {code}"


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# ---------------------------------------------------------------- the end of the graph


async def release(
    graph: TaskGraph,
    servers: Mapping[TaskId, Server],
    results: dict[TaskId, TaskResult],
    emit: Emit,
    *,
    stopped: bool,
    keep_despite_failures: bool,
) -> tuple[TaskId, ...]:
    """Decide, once the graph is done, which persistent tasks stay in the foreground: the requested
    ones still running, with the persistent tasks they depend on — none after a stop, or when
    anything failed (unless `--continue=always`). Stop the rest; write every server's result."""
    for tid, server in servers.items():
        if results[tid].status is Status.SUCCESS and server.ended.done():
            results[tid] = _ended(results[tid], server)
    failed = any(r.status is not Status.SUCCESS for r in results.values())
    keep = () if stopped or (failed and not keep_despite_failures) else _kept(graph, servers)
    others = [tid for tid, server in servers.items() if tid not in keep and not server.ended.done()]
    await asyncio.gather(*(servers[tid].stop(executor.kill_grace_ms() / 1000) for tid in others))
    for tid in others:
        if results[tid].status is Status.SUCCESS:
            results[tid] = (
                replace(
                    results[tid], status=Status.ABORTED, reason="stopped: the run was interrupted"
                )
                if stopped
                else replace(results[tid], reason="stopped at the end of the run")
            )
    for tid in keep:
        results[tid] = replace(results[tid], reason="serving")
    return keep


def _kept(graph: TaskGraph, servers: Mapping[TaskId, Server]) -> tuple[TaskId, ...]:
    """Requested persistent tasks still running, and every running persistent task upstream of one."""

    def running(tid: TaskId) -> bool:
        return tid in servers and not servers[tid].ended.done()

    requested: list[TaskId] = []
    pending, seen = list(graph.requested), set()
    while pending:  # a requested group stands for its members
        tid = pending.pop()
        if tid in seen:
            continue
        seen.add(tid)
        if graph.nodes[tid].is_group:
            pending.extend(graph.nodes[tid].deps)
        elif running(tid):
            requested.append(tid)
    keep, pending = set(requested), list(requested)
    while pending:
        for dep in graph.nodes[pending.pop()].deps:
            if dep not in keep:
                pending.append(dep)
                if running(dep):
                    keep.add(dep)
    return tuple(t for t in graph.order if t in keep)


def _ended(result: TaskResult, server: Server) -> TaskResult:
    """The result of a server that ended on its own after it was ready."""
    code = server.ended.result()
    if server.aborted:
        return replace(result, status=Status.ABORTED, reason="stopped: the run was interrupted")
    if code == 0:
        return replace(result, reason=server.words, exit_code=0)
    return replace(
        result,
        status=Status.FAILED,
        exit_code=code,
        log=server.log,
        reason=f"{server.words} after it was ready",
    )


async def foreground(
    summary: RunSummary,
    kept: tuple[TaskId, ...],
    servers: Mapping[TaskId, Server],
    emit: Emit,
    stop: asyncio.Event,
    stopped_by: list[int],
    signal_exits: Mapping[int, int],
) -> RunSummary:
    """Keep the servers in the foreground until the first one ends or the run is stopped (Ctrl-C,
    SIGTERM: the run's handlers signal every group); then stop the others. The run's summary, its
    exit code 1 when that first one failed."""
    emit(ServersKept(kept))
    ends = {servers[tid].ended: tid for tid in kept}
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({*ends, stopping}, return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
    finally:
        stopping.cancel()
    if stopped_by:
        running = sum(1 for tid in kept if not servers[tid].ended.done())
        if running:
            emit(Notice(f"stopping {running} server{'' if running == 1 else 's'}", level="info"))
        return replace(summary, exit_code=signal_exits[stopped_by[0]], interrupted=True)
    first = next(tid for tid in kept if servers[tid].ended.done())
    server, rest = (
        servers[first],
        [tid for tid in kept if tid != first and not servers[tid].ended.done()],
    )
    code = server.ended.result()
    also = f"; stopping {len(rest)} other{'' if len(rest) == 1 else 's'}" if rest else ""
    emit(Notice(f"{first} {server.words}{also}", level="warning" if code else "info", id=first))
    await asyncio.gather(*(servers[tid].stop(executor.kill_grace_ms() / 1000) for tid in rest))
    if stopped_by:
        return replace(summary, exit_code=signal_exits[stopped_by[0]], interrupted=True)
    ended = _ended(next(r for r in summary.results if r.id == first), server)
    results = tuple(ended if r.id == first else r for r in summary.results)
    return replace(
        summary, results=results, exit_code=EXIT_TASK_FAILED if code else summary.exit_code
    )
