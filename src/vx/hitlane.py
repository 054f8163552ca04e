"""Settle confirmed local cache hits before the walk: up-to-date checks and restores, in waves.

Every key is computed before anything runs and never changes during the run (no early
cutoff, KEY-22), so whether a task is a local hit is known from the one batched probe. A
task is settled here only when every dependency is settled too: nothing upstream can then
fail, be skipped or withhold a save, so the result is exactly the one the rebuilder's hit
path would produce (same status, cache status, log and events) — without an asyncio task,
a thread hop and a log query per task. Restores of one wave share a thread pool as wide as
the rebuilder's restore lane (2 × concurrency, GR-09). Whatever is not settled (misses,
uncached tasks, their dependants, damaged artifacts) goes to the walk unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from vx.events import CacheRestored, Emit, Notice, TaskFinished
from vx.model import CacheStatus, LogChunk, Status, TaskGraph, TaskId, TaskResult

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


@dataclass
class Settled:
    """What the lane decided: results to hand the walk, and keys the walk must not trust."""

    results: dict[TaskId, TaskResult] = field(default_factory=dict)
    damaged: set[str] = field(default_factory=set)  # artifacts that failed a restore: execute them
    restored: int = 0
    current: int = 0  # hits whose outputs were already in place (nothing extracted)


@dataclass(frozen=True, slots=True)
class _Hit:
    tid: TaskId
    plan: Any  # rebuilder.TaskPlan
    entry: Any  # store.local.Entry
    started: float


def settle(graph: TaskGraph, plans: Mapping[TaskId, Any], hits: Mapping[str, Any], store: Any, root: Path,
           emit: Emit, width: int, stopped: Callable[[], bool] = lambda: False) -> Settled:
    """Settle, wave by wave, every task whose key is a local hit and whose dependencies are settled."""
    out = _Lane(graph, plans, hits, store, root, emit)
    pending, restores = out.scan(list(graph.order))
    if not restores or stopped():
        return out.settled  # the warm path: no pool, not even its import
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="vx-restore") as pool:
        while restores:
            out.restore_wave(pool, restores)
            if not pending or stopped():
                break
            pending, restores = out.scan(pending)
    return out.settled


class _Lane:
    def __init__(self, graph: TaskGraph, plans, hits, store, root: Path, emit: Emit):
        self.graph, self.plans, self.hits, self.store, self.root, self.emit = graph, plans, hits, store, root, emit
        self.settled = Settled()
        self.dead: set[TaskId] = set()  # never settled here: the walk decides them

    def scan(self, pending: list[TaskId]) -> tuple[list[TaskId], list[_Hit]]:
        """One pass in topological order: settle what is current, collect what needs a restore."""
        results, dead, nodes = self.settled.results, self.dead, self.graph.nodes
        blocked: list[TaskId] = []
        restores: list[_Hit] = []
        current: list[_Hit] = []
        for tid in pending:
            deps = nodes[tid].deps
            if any(d in dead for d in deps):
                dead.add(tid)
            elif any(d not in results for d in deps):
                blocked.append(tid)
            else:
                self._decide(tid, current, restores)
        self._finish_current(current)
        return blocked, restores

    def _decide(self, tid: TaskId, current: list[_Hit], restores: list[_Hit]) -> None:
        node, plan = self.graph.nodes[tid], self.plans[tid]
        if node.is_group:
            self.settled.results[tid] = TaskResult(tid, Status.SUCCESS, CacheStatus.NO_CACHE, key=plan.key)
            return
        entry = self.hits.get(plan.key) if plan.outputs is not None else None
        if entry is None:
            self.dead.add(tid)
            return
        hit = _Hit(tid, plan, entry, time.monotonic())
        if self.store.is_up_to_date(entry, plan.outputs.walk(self.root)):
            self.settled.results[tid] = _PENDING_LOG  # a placeholder: dependants may settle in this pass
            current.append(hit)
        else:
            restores.append(hit)

    def _finish_current(self, current: list[_Hit]) -> None:
        """Fetch the logs of the current hits in one batch, then report them in order."""
        logs = _logs(self.store, [h.entry for h in current])
        for h in current:
            result = _result(h, logs.get(h.entry.key, ()), CacheStatus.UP_TO_DATE)
            self.settled.results[h.tid] = result
            self.emit(TaskFinished(result))
        self.settled.current += len(current)

    def restore_wave(self, pool: ThreadPoolExecutor, restores: list[_Hit]) -> None:
        """Restore one wave in parallel; a damaged artifact is reported and left to the walk."""
        from vx.store.local import DamagedEntry

        futures = [pool.submit(self._restore, h) for h in restores]
        for h, fut in zip(restores, futures):
            try:
                log = fut.result()
            except DamagedEntry as exc:
                self.emit(Notice(f"cache entry for {h.tid} cannot be restored ({exc.reason}); running the task instead",
                                 id=h.tid))
                self.settled.damaged.add(h.entry.key)
                self.dead.add(h.tid)
                continue
            self.emit(CacheRestored(h.tid, CacheStatus.LOCAL))
            result = _result(h, log, CacheStatus.LOCAL)
            self.settled.results[h.tid] = result
            self.emit(TaskFinished(result))
            self.settled.restored += 1

    def _restore(self, h: _Hit) -> tuple[LogChunk, ...]:
        h.plan.outputs.wipe(self.root)
        return self.store.restore(h.entry, h.plan.outputs.allows)


_PENDING_LOG = TaskResult(TaskId("", ""), Status.SUCCESS, CacheStatus.UP_TO_DATE)


def _logs(store: Any, entries: list[Any]) -> Mapping[str, tuple[LogChunk, ...]]:
    """Every entry's log, in one query per batch where the store offers it."""
    if not entries:
        return {}
    many = getattr(getattr(store, "local", store), "logs_of", None)
    if many is not None:
        return many(entries)
    return {e.key: store.log_of(e) for e in entries}


def _result(h: _Hit, log, cache: CacheStatus) -> TaskResult:
    return TaskResult(h.tid, Status.SUCCESS, cache, key=h.plan.key, exit_code=0, log=tuple(log),
                      duration_ms=(time.monotonic() - h.started) * 1000, command=h.plan.command)
