"""Settle confirmed local cache hits before the walk: up-to-date checks and restores, in waves.

Every key is computed before anything runs and never changes during the run (no early
cutoff), so whether a task is a local hit is known from the one batched probe. A
task is settled here only when every dependency is settled too: nothing upstream can then
fail, be skipped or withhold a save, so the result is exactly the one the rebuilder's hit
path would produce (same status, cache status, log and events) — without an asyncio task,
a thread hop and a log query per task. Restores of one wave share a thread pool as wide as
the rebuilder's restore lane (2 × concurrency). Whatever is not settled (misses,
uncached tasks, their dependants, damaged artifacts) goes to the walk unchanged.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from msgspec import Struct, field

from vx.events import CacheRestored, Emit, Notice, TaskFinished
from vx.model import CacheStatus, LogChunk, Status, TaskGraph, TaskId, TaskResult


class Settled(Struct):
    """What the lane decided: results to hand the walk, and keys the walk must not trust."""

    results: dict[TaskId, TaskResult] = field(default_factory=dict)
    damaged: set[str] = field(default_factory=set)  # artifacts that failed a restore: execute them
    restored: int = 0
    current: int = 0  # hits whose outputs were already in place (nothing extracted)


class _Hit(Struct, frozen=True):
    tid: TaskId
    plan: Any  # rebuilder.TaskPlan
    entry: Any  # store.local.Entry
    started: float
    stale: bool  # outputs were present (but not the entry's): a restore wipes them first


def settle(
    graph: TaskGraph,
    plans: Mapping[TaskId, Any],
    hits: Mapping[str, Any],
    store: Any,
    root: Path,
    emit: Emit,
    width: int,
    stopped: Callable[[], bool] = lambda: False,
) -> Settled:
    """Settle, wave by wave, every task whose key is a local hit and whose dependencies are settled."""
    out = _Lane(graph, plans, hits, store, root, emit)
    pending, restores = out.scan(list(graph.order))
    if not restores or stopped():
        return out.finish()  # the warm path: no pool, not even its import
    jobs = {
        p.key: (out.local, p.outputs, hits[p.key])
        for p in plans.values()
        if p.outputs and p.key in hits
    }
    _JOBS.update(jobs)  # before any fork: forked workers find their work here by key
    try:
        with _pool(
            width, len(jobs), sum(entry.size_bytes for _, _, entry in jobs.values())
        ) as pool:
            while restores:
                out.restore_wave(pool, restores)
                if not pending or stopped():
                    break
                pending, restores = out.scan(pending)
    finally:
        for key in jobs:
            _JOBS.pop(key, None)
    return out.finish()


# key -> (store, outputs, entry) of every restore this process may run; forked workers inherit it.
_JOBS: dict[str, tuple[Any, Any, Any]] = {}
FORK_FROM = 128  # restores that pay for forking workers (docs/optimizations.md #7)
BYTES_PER_THREAD = 4 << 20  # compressed artifact bytes that keep one more restore thread busy


def _pool(width: int, jobs: int, size_bytes: int):
    """Worker processes when there are enough restores and nothing else runs threads (a fork
    copies only the forking thread); otherwise threads, as many as the bytes to inflate keep
    busy. Small artifacts are Python work under the GIL: a second thread only adds lock
    handoffs (docs/optimizations.md #7), while big ones
    spend their time in zstd and in writes, which release it."""
    import threading

    cpus = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    if jobs >= FORK_FROM and cpus > 1 and threading.active_count() == 1 and hasattr(os, "fork"):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(
            max_workers=min(cpus, max(1, width)), mp_context=multiprocessing.get_context("fork")
        )
    from concurrent.futures import ThreadPoolExecutor

    threads = max(1, min(width, size_bytes // BYTES_PER_THREAD))
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vx-restore")


def _extract_many(work: list[tuple[str, bool]], root: Path) -> list[Any]:
    """Run in a worker: wipe stale outputs and unpack each entry; never touches the index.

    Returns, per key, what `LocalStore.extract` returned (the unpacked files and log, or why the
    artifact is damaged), or ("refused", message, facts, hint) when the workspace refused a write.
    """
    from vx.errors import VxError

    out: list[Any] = []
    for key, stale in work:
        local, outputs, entry = _JOBS[key]
        try:
            if stale:
                outputs.wipe(root)
            out.append(local.extract(entry, outputs.allows))
        except VxError as exc:  # EnvironmentFailure: plain values cross the process boundary
            out.append(("refused", exc.message, exc.facts, exc.hint))
    return out


class _Lane:
    def __init__(self, graph: TaskGraph, plans, hits, store, root: Path, emit: Emit):
        self.graph, self.plans, self.hits, self.store, self.root, self.emit = (
            graph,
            plans,
            hits,
            store,
            root,
            emit,
        )
        self.settled = Settled()
        self.dead: set[TaskId] = set()  # never settled here: the walk decides them
        self.ancestors: dict = {}  # output-walk ancestor checks, shared: no task runs during a scan
        self.local = getattr(
            store, "local", store
        )  # hits are local entries, even behind a remote layer
        self.lazy: list[TaskId] = []  # persistent tasks nobody asked for, settled for now

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
            self.settled.results[tid] = TaskResult(
                tid, Status.SUCCESS, CacheStatus.NO_CACHE, key=plan.key
            )
            return
        if node.exec.persistent is not None and not node.requested:
            # Needed only by its dependants: if each of them is a hit, it is never started. Taken
            # as settled so they are decided; `finish` takes it back if one of them is not.
            self.settled.results[tid] = TaskResult(
                tid,
                Status.SUCCESS,
                CacheStatus.NO_CACHE,
                key=plan.key,
                persistent=True,
                reason=_NOT_STARTED,
            )
            self.lazy.append(tid)
            return
        entry = self.hits.get(plan.key) if plan.outputs is not None else None
        if entry is None:
            self.dead.add(tid)
            return
        present = plan.outputs.walk(self.root, self.ancestors)
        hit = _Hit(tid, plan, entry, time.monotonic(), bool(present))
        if self.store.is_up_to_date(entry, present):
            self.settled.results[tid] = (
                _PENDING_LOG  # a placeholder: dependants may settle in this pass
            )
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

    def finish(self) -> Settled:
        """Keep a lazy persistent task settled (never started) only when every dependant was
        settled; else hand it to the walk. Dependants first: a lazy one not started needs none."""
        results = self.settled.results
        dependants: dict[TaskId, list[TaskId]] = {tid: [] for tid in self.lazy}
        for tid, node in self.graph.nodes.items():
            for dep in node.deps:
                if dep in dependants:
                    dependants[dep].append(tid)
        for tid in reversed(self.lazy):  # lazy is in topological order
            if not all(d in results for d in dependants[tid]):
                del results[tid]
        return self.settled

    def restore_wave(self, pool, restores: list[_Hit]) -> None:
        """Restore one wave in parallel; a damaged artifact is reported and left to the walk."""
        from vx.store.local import DamagedEntry

        t0 = time.perf_counter()
        extracted = self._extract(pool, restores)
        seconds = (time.perf_counter() - t0) / max(1, len(restores))
        for h, got in zip(restores, extracted):
            if isinstance(got, tuple) and got and got[0] == "refused":
                self.dead.add(
                    h.tid
                )  # the workspace refused a write: the walk's restore reports it, failing the task
                continue
            try:
                log = self.local.finish_restore(h.entry, got, seconds)
            except DamagedEntry as exc:
                self.emit(
                    Notice(
                        f"cache entry for {h.tid} cannot be restored ({exc.reason}); running the task instead",
                        id=h.tid,
                    )
                )
                self.settled.damaged.add(h.entry.key)
                self.dead.add(h.tid)
                continue
            self.emit(CacheRestored(h.tid, CacheStatus.LOCAL))
            result = _result(h, log, CacheStatus.LOCAL)
            self.settled.results[h.tid] = result
            self.emit(TaskFinished(result))
            self.settled.restored += 1

    def _extract(self, pool, restores: list[_Hit]) -> list[Any]:
        """Split the wave into a few chunks per worker, so each crossing carries many restores."""
        work = [(h.entry.key, h.stale) for h in restores]
        n = max(1, min(len(work), 4 * getattr(pool, "_max_workers", 2)))
        chunks = [work[i::n] for i in range(n)]
        results: dict[str, Any] = {}
        for chunk, fut in [(c, pool.submit(_extract_many, c, self.root)) for c in chunks]:
            results.update(zip((key for key, _ in chunk), fut.result()))
        return [results[h.entry.key] for h in restores]


_PENDING_LOG = TaskResult(TaskId("", ""), Status.SUCCESS, CacheStatus.UP_TO_DATE)
_NOT_STARTED = "not started: every task that needs it was a cache hit"


def _logs(store: Any, entries: list[Any]) -> Mapping[str, tuple[LogChunk, ...]]:
    """Every entry's log, in one query per batch where the store offers it."""
    if not entries:
        return {}
    many = getattr(getattr(store, "local", store), "logs_of", None)
    if many is not None:
        return many(entries)
    return {e.key: store.log_of(e) for e in entries}


def _result(h: _Hit, log, cache: CacheStatus) -> TaskResult:
    return TaskResult(
        h.tid,
        Status.SUCCESS,
        cache,
        key=h.plan.key,
        exit_code=0,
        log=tuple(log),
        duration_ms=(time.monotonic() - h.started) * 1000,
        command=h.plan.command,
        stored_ms=h.entry.duration_ms,
    )
