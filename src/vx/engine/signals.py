"""A run's signals: SIGINT, SIGTERM and SIGHUP stop it, each with its exit code.

In Turborepo's shape (turborepo-signals): before the event loop exists a signal is only noted
(`noted`), and the hit lane and the first wave look at it between their steps; once the walk's
loop runs it listens (`listening`) and takes over what was noted. The first signal stops every
task with a grace, a second one kills them at once.

The hit lane imports this module on a cached run: it loads no asyncio until a walk listens.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from vx.errors import EXIT_OK, EXIT_SIGHUP, EXIT_SIGINT, EXIT_SIGTERM, EXIT_TASK_FAILED
from vx.model import Status

if TYPE_CHECKING:
    import asyncio

    from vx.model import TaskResult
    from vx.proc.executor import ProcessTable

EXITS: dict[int, int] = {
    signal.SIGINT: EXIT_SIGINT,
    signal.SIGTERM: EXIT_SIGTERM,
    signal.SIGHUP: EXIT_SIGHUP,
}


class Abort:
    """A run's stop from any thread (`vx.api`'s abort handle): `stop()` acts as Ctrl-C does — noted
    before the walk listens, acted on at once after — and only its first call counts (a second
    Ctrl-C kills without grace and leaves; a second `stop()` does nothing)."""

    def __init__(self) -> None:
        self.stopped = False
        self._lock = threading.Lock()
        self._caught: list[int] | None = None  # the noting list of the step running now
        self._on: tuple[Any, Callable[[int], None]] | None = None  # the walk's loop and handler

    def stop(self) -> None:
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
            if self._on is not None:
                loop, on_signal = self._on
                loop.call_soon_threadsafe(on_signal, signal.SIGINT)
            elif self._caught is not None:
                self._caught.append(signal.SIGINT)

    def _noting(self, caught: list[int] | None) -> None:
        with self._lock:
            self._caught = caught
            if caught is not None and self.stopped and signal.SIGINT not in caught:
                caught.append(signal.SIGINT)

    def _listening(self, on: tuple[Any, Callable[[int], None]] | None) -> None:
        with self._lock:
            self._on = on


_ABORT: Abort | None = None  # the run's, while `aborting` holds it


@contextmanager
def aborting(abort: Abort | None) -> Iterator[None]:
    """While a run executes: `abort` reaches whatever notes or listens for signals meanwhile."""
    global _ABORT
    previous, _ABORT = _ABORT, abort
    try:
        yield
    finally:
        _ABORT = previous


@contextmanager
def noted() -> Iterator[list[int]]:
    """Note SIGINT/SIGTERM/SIGHUP (and an `Abort`'s stop) in the list it yields instead of dying
    mid-restore; the handlers before are back after. Off the main thread (which alone may set
    them) signals stay as they were."""
    caught: list[int] = []
    previous = {}
    for sig in EXITS:
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
        except ValueError:  # not the main thread
            break
    abort = _ABORT
    if abort is not None:
        abort._noting(caught)
    try:
        yield caught
    finally:
        if abort is not None:
            abort._noting(None)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def first(caught: Sequence[int]) -> signal.Signals | None:
    """The signal noted first, which is the one that stops the run."""
    return signal.Signals(caught[0]) if caught else None


@contextmanager
def listening(
    table: ProcessTable, stop: asyncio.Event, stopped_by: list[int], caught: Sequence[int] = ()
) -> Iterator[None]:
    """While the walk runs: a signal sets `stop`, goes into `stopped_by` and reaches every task of
    `table`. One noted before the loop (`caught`) is acted on at once."""
    import asyncio

    loop = asyncio.get_running_loop()
    abort = _ABORT
    try:
        on_signal = install(table, stop, stopped_by)
        if abort is not None:
            abort._listening((loop, on_signal))
        if caught:
            on_signal(signal.Signals(caught[0]))
        yield
    finally:
        if abort is not None:
            abort._listening(None)
        for sig in EXITS:
            loop.remove_signal_handler(sig)


def install(
    table: ProcessTable, stop: asyncio.Event, stopped_by: list[int]
) -> Callable[[int], None]:
    """The running loop's handlers, and what each calls: the first signal terminates every group
    and kills what is left after the grace; a second one kills at once and exits."""
    import asyncio

    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        if stopped_by:  # a second signal: no more grace
            table.kill_all()
            os._exit(EXITS[stopped_by[0]])
        stopped_by.append(sig)
        stop.set()
        table.stopping = True
        table.terminate_all(sig)
        loop.call_later(grace_s(), table.kill_all)

    for sig in EXITS:
        loop.add_signal_handler(sig, on_signal, sig)
    return on_signal


def grace_s() -> float:
    """From SIGTERM to SIGKILL (`VX_KILL_GRACE_MS`)."""
    from vx.proc.executor import kill_grace_ms

    return kill_grace_ms() / 1000


def exit_code(results: Sequence[TaskResult], stopped_by: int | None) -> int:
    """The run's exit code: the stopping signal's, else whether every task succeeded."""
    if stopped_by is not None:
        return EXITS[stopped_by]
    ok = all(r.status is Status.SUCCESS for r in results)
    return EXIT_OK if ok else EXIT_TASK_FAILED
