"""Walk the task graph in parallel: dependency counters, a ready heap by priority, and the
--continue modes. The scheduler never spawns anything: it receives `rebuild`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Any, Callable, Collection, Coroutine, Mapping

from vx.model import CacheStatus, Status, TaskGraph, TaskId, TaskNode, TaskResult

Rebuild = Callable[[TaskNode, Mapping[TaskId, TaskResult]], Coroutine[Any, Any, TaskResult]]

CONTINUE_MODES = ("never", "deps-ok", "always")


class PrioritySlots:
    """A semaphore whose waiters are served highest priority first (ties: first come).

    Under a walk (`walk(slots=…)`) a slot a task ends with goes to the highest-ranked task that
    is ready or that the task's end makes ready (once its save lands), so the next link of a
    chain is not overtaken by a lesser task that asked first: the walk `expect`s each task it
    dispatches (a place in the queue before the task asks); a task `finish`es with its slots,
    and one of them is held on, through the save, while a dependant it is the last dependency of
    outranks every waiter (`ahead`); the walk `settle`s it after queueing the dependants."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._free = self.size
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._tick = itertools.count()
        self._expected: dict[TaskId, asyncio.Future[None]] = {}
        self._finished: dict[TaskId, int] = {}
        # set by a walk: the highest rank among the tasks that wait on nothing but `holder`
        # (None: none); a walk settles the slots tasks finish with, else they pass on at once
        self.ahead: Callable[[TaskId], int | None] | None = None

    def _idle(self) -> bool:
        """A slot is free and nobody waits for one (places given up are dropped first)."""
        return self._free > 0 and self._top() is None

    def _top(self) -> int | None:
        """The priority of the first waiter in line, None when nobody waits."""
        while self._waiters and self._waiters[0][2].done():
            heapq.heappop(self._waiters)
        return -self._waiters[0][0] if self._waiters else None

    def _queue(self, priority: int) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (-priority, next(self._tick), fut))
        return fut

    async def acquire(self, priority: int, holder: TaskId | None = None) -> None:
        """A slot; `holder`'s expected place in the queue when the walk gave it one."""
        fut = self._expected.pop(holder, None) if holder is not None else None
        if fut is None:
            if self._idle():
                self._free -= 1
                return
            fut = self._queue(priority)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # we were handed a slot while being cancelled: pass it on
            raise

    def take(self, n: int) -> None:
        """Hold `n` slots at once, before any waiter: the first wave started before the walk."""
        self._free -= n

    def release(self) -> None:
        while self._waiters:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1

    def expect(self, holder: TaskId, priority: int) -> None:
        """Queue `holder` now, as the walk dispatches it: it may have steps to take before it
        asks (a hit check, a key), and a slot freed meanwhile is still served by priority."""
        if self._idle():
            return  # a slot is free: the task takes it when it asks
        self._expected[holder] = self._queue(priority)

    def withdraw(self, holder: TaskId) -> None:
        """`holder` will not ask (a hit, a group, a remote worker) or not soon (a download):
        its place goes, and a slot already handed to it passes on."""
        fut = self._expected.pop(holder, None)
        if fut is None:
            return
        if fut.done() and not fut.cancelled():
            self.release()
        else:
            fut.cancel()

    def finish(self, holder: TaskId, n: int) -> None:
        """`holder` is done with its `n` slots (its process ended): they pass on now, but for one
        kept until the walk's `settle` when a task its end makes ready outranks every waiter."""
        nxt = self.ahead(holder) if self.ahead is not None and n else None
        top = self._top() if nxt is not None else None
        keep = 1 if nxt is not None and (top is None or nxt > top) else 0
        if keep:
            self._finished[holder] = self._finished.get(holder, 0) + keep
        for _ in range(n - keep):
            self.release()

    def settle(self, holder: TaskId) -> None:
        """Pass on the slots `holder` finished with, and any place it still had."""
        self.withdraw(holder)
        for _ in range(self._finished.pop(holder, 0)):
            self.release()


def _blocked(node: TaskNode, results: Mapping[TaskId, TaskResult]) -> TaskId | None:
    """The root failure that blocks this node, traced through skipped tasks."""
    for dep in node.deps:
        res = results[dep]
        if res.status is Status.FAILED or res.status is Status.ABORTED:
            return dep
        if res.status is Status.SKIPPED:
            return res.blocked_by or dep
    return None


def _skipped(node: TaskNode, blocker: TaskId, reason: str) -> TaskResult:
    return TaskResult(
        node.id, Status.SKIPPED, CacheStatus.NO_CACHE, blocked_by=blocker, reason=reason
    )


async def walk(
    graph: TaskGraph,
    rebuild: Rebuild,
    *,
    continue_mode: str = "deps-ok",
    stop: asyncio.Event | None = None,
    settled: Mapping[TaskId, TaskResult] | None = None,
    halt: asyncio.Event | None = None,
    priority: Mapping[TaskId, int] | None = None,
    slots: PrioritySlots | None = None,
    started: Collection[TaskId] = (),
) -> dict[TaskId, TaskResult]:
    """Run every node once its dependencies are done; return every node's result.

    `settled` nodes are already finished (the hit lane's work): they are never rebuilt, and
    since a node is settled only with all its dependencies, none of them waits on the walk.
    `halt` is set when `--continue=never` stops dispatch, so rebuilds still queued for a slot
    can see it too; and when `stop` is set, so a rebuild queued for a slot a stopped task
    frees never starts: it ends as not started (aborted, never run), not as one more task
    started and stopped. `started` tasks already run (the first wave): they are dispatched even
    after a stop, so their processes are adopted, stopped and counted as stopped. `priority`
    ranks ready tasks (`vx.engine.schedule`); the dependents count by default. `slots` are the
    rebuilds' slots: each dispatched task is queued for one at once, and a slot a finished task
    keeps for its dependants (`PrioritySlots.finish`) passes on once they are queued.
    """
    run = _Walk(graph, rebuild, continue_mode, stop, halt, priority, settled, started)
    if slots is not None:
        slots.ahead = run.ahead
    halting = (
        asyncio.ensure_future(_halt_on(stop, halt))
        if stop is not None and halt is not None
        else None
    )
    try:
        await run.loop(slots)
    finally:
        if halting is not None:
            halting.cancel()
        if slots is not None:
            for tid in run.ended:
                slots.settle(tid)
            slots.ahead = None
    return _close_unfinished(graph, run.results, stopped=bool(stop and stop.is_set()))


class _Walk:
    """One walk's state: each node's count of unfinished dependencies, the ready heap, the
    running rebuilds and the results."""

    def __init__(
        self,
        graph: TaskGraph,
        rebuild: Rebuild,
        continue_mode: str,
        stop: asyncio.Event | None,
        halt: asyncio.Event | None,
        priority: Mapping[TaskId, int] | None,
        settled: Mapping[TaskId, TaskResult] | None,
        started: Collection[TaskId],
    ) -> None:
        self.nodes, self.rebuild, self.continue_mode = graph.nodes, rebuild, continue_mode
        self.stop, self.halt, self.started = stop, halt, started
        self.results: dict[TaskId, TaskResult] = dict(settled or {})
        self.waiting, self.dependants = _counters(self.nodes, self.results)
        self.position = {tid: i for i, tid in enumerate(graph.order)}
        self.rank = priority or graph.priority
        self.ready = [
            (-self.rank[t], self.position[t], t) for t, c in self.waiting.items() if c == 0
        ]
        heapq.heapify(self.ready)
        self.running: dict[asyncio.Task[TaskResult], TaskId] = {}
        self.halted = False
        self.ended: list[TaskId] = []  # finished since the last dispatch: their slots pass on after

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    async def loop(self, slots: PrioritySlots | None) -> None:
        ready, running = self.ready, self.running
        while ready or running:
            while ready and not self.halted and not self.stopped():
                self.dispatch(heapq.heappop(ready)[2], slots)
            if self.started and self.stopped():  # already running: adopted, then stopped
                for item in [r for r in ready if r[2] in self.started]:
                    ready.remove(item)
                    self.dispatch(item[2], slots)
                heapq.heapify(ready)
            if slots is not None:
                for tid in self.ended:
                    slots.settle(tid)
            self.ended.clear()
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                tid = running.pop(fut)
                self.finish(tid, fut.result())
                self.ended.append(tid)

    def dispatch(self, tid: TaskId, slots: PrioritySlots | None) -> None:
        node = self.nodes[tid]
        blocker = _blocked(node, self.results)
        if blocker is not None and self.continue_mode != "always":
            self.finish(tid, _skipped(node, blocker, f"blocked by {blocker}"))
            return
        if slots is not None:
            slots.expect(tid, self.rank[tid])
        self.running[asyncio.create_task(self.rebuild(node, self.results))] = tid

    def finish(self, tid: TaskId, result: TaskResult) -> None:
        if self.stopped() and not self.halted and _held_back(result):
            result = _not_started(tid, result.key)  # halted by the stop, not by a failure
        self.results[tid] = result
        if result.status is Status.FAILED and self.continue_mode == "never":
            self.halted = True
            if self.halt is not None:
                self.halt.set()
        waiting = self.waiting
        for child in self.dependants[tid]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(self.ready, (-self.rank[child], self.position[child], child))

    def ahead(self, tid: TaskId) -> int | None:
        """The highest rank among the dependants `tid` is the last unfinished dependency of."""
        waiting, rank = self.waiting, self.rank
        return max((rank[c] for c in self.dependants[tid] if waiting[c] == 1), default=None)


async def _halt_on(stop: asyncio.Event, halt: asyncio.Event) -> None:
    """Halt dispatch as soon as the run is stopped (before the stopped tasks' slots pass on)."""
    await stop.wait()
    halt.set()


def _held_back(result: TaskResult) -> bool:
    """A rebuild that returned without starting because dispatch was halted."""
    return result.status is Status.SKIPPED and result.blocked_by is None and result.attempts == 0


def _not_started(tid: TaskId, key: str | None) -> TaskResult:
    return TaskResult(
        tid, Status.ABORTED, CacheStatus.NO_CACHE, key=key, reason="not run: the run was stopped"
    )


def _counters(
    nodes: Mapping[TaskId, TaskNode], results: Mapping[TaskId, TaskResult]
) -> tuple[dict[TaskId, int], dict[TaskId, list[TaskId]]]:
    """Each unfinished node's count of unfinished dependencies, and each node's unfinished
    dependants."""
    waiting = {
        tid: sum(d not in results for d in n.deps) for tid, n in nodes.items() if tid not in results
    }
    dependants: dict[TaskId, list[TaskId]] = {tid: [] for tid in nodes}
    for tid in waiting:
        for dep in nodes[tid].deps:
            dependants[dep].append(tid)
    return waiting, dependants


def _close_unfinished(
    graph: TaskGraph, results: dict[TaskId, TaskResult], *, stopped: bool
) -> dict[TaskId, TaskResult]:
    """Nodes never started: aborted when the run was stopped, else skipped after `--continue=never`."""
    for tid in graph.order:
        if tid not in results:
            if stopped:
                results[tid] = _not_started(tid, None)
            else:
                results[tid] = TaskResult(
                    tid,
                    Status.SKIPPED,
                    CacheStatus.NO_CACHE,
                    reason="not run: an earlier task failed (--continue=never)",
                )
    return results
