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
from typing import TYPE_CHECKING, Any, Callable, Generic, Mapping, TypeAlias, TypeVar

from msgspec import Struct, field

from vx.engine import taskcache
from vx.events import CacheRestored, Emit, TaskFinished
from vx.model import CacheStatus, Status, TaskGraph, TaskId, TaskPlan, TaskResult

if TYPE_CHECKING:
    from vx.files.outputs import OutputSpec
    from vx.store.protocol import LocalEntry, LocalLayer
    from vx.store.unpacking import Unpacked

    # What a worker's restore came to: unpacked, why the artifact is damaged, or ("refused",
    # message, facts, hint) when the workspace refused a write.
    Extracted: TypeAlias = Unpacked | str | tuple[str, str, tuple[str, ...], str | None]

L = TypeVar("L", bound="LocalEntry")  # the local layer's entries (a name, not an import)


class Settled(Struct):
    """What the lane decided: results to hand the walk, and keys the walk must not trust."""

    results: dict[TaskId, TaskResult] = field(default_factory=dict)
    damaged: set[str] = field(default_factory=set)  # artifacts that failed a restore: execute them
    restored: int = 0
    current: int = 0  # hits whose outputs were already in place (nothing extracted)


class _Hit(Struct, Generic[L], frozen=True):
    tid: TaskId
    plan: TaskPlan
    entry: L
    started: float
    stale: bool  # outputs were present (but not the entry's): a restore wipes them first


def settle(
    graph: TaskGraph,
    plans: Mapping[TaskId, TaskPlan],
    hits: Mapping[str, L],
    local: LocalLayer[L],
    root: Path,
    emit: Emit,
    width: int,
    stopped: Callable[[], bool] = lambda: False,
    listed_ns: int | None = None,
) -> Settled:
    """Settle, wave by wave, every task whose key is a hit of `local` (the layer the batched
    probe answered from, even behind a remote one) and whose dependencies are settled. With
    `listed_ns` (when the run's file listing began), a restore of a task that runs tsc is noted
    for the date of its build infos (`taskcache.note_kept`)."""
    out = _Lane(graph, plans, hits, local, root, emit)
    out.listed_ns = listed_ns
    pending, restores = out.scan(list(graph.order))
    if not restores or stopped():
        return out.finish()  # the warm path: no pool, not even its import
    jobs = {
        p.key: (local, p.outputs, hits[p.key])
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


# key -> (local layer, outputs, entry) of every restore this process may run; forked workers
# inherit it.
_JOBS: dict[str, tuple[LocalLayer[Any], OutputSpec, Any]] = {}
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


def _extract_many(work: list[tuple[str, bool]], root: Path) -> list[Extracted]:
    """Run in a worker: wipe stale outputs and unpack each entry (`taskcache.extract`); never
    touches the index. Returns what each restore came to, by key."""
    from vx.errors import VxError

    out: list[Extracted] = []
    for key, stale in work:
        local, outputs, entry = _JOBS[key]
        try:
            out.append(taskcache.extract(local, entry, outputs, root, stale))
        except VxError as exc:  # EnvironmentFailure: plain values cross the process boundary
            out.append(("refused", exc.message, exc.facts, exc.hint))
    return out


class _Lane(Generic[L]):
    def __init__(
        self,
        graph: TaskGraph,
        plans: Mapping[TaskId, TaskPlan],
        hits: Mapping[str, L],
        local: LocalLayer[L],
        root: Path,
        emit: Emit,
    ):
        self.graph, self.plans, self.hits, self.local, self.root, self.emit = (
            graph,
            plans,
            hits,
            local,
            root,
            emit,
        )
        self.settled = Settled()
        self.dead: set[TaskId] = set()  # never settled here: the walk decides them
        self.ancestors: dict = {}  # output-walk ancestor checks, shared: no task runs during a scan
        self.lazy: list[TaskId] = []  # persistent tasks nobody asked for, settled for now
        self.listed_ns: int | None = None  # when the run's listing began: restores are noted
        self.upstream: taskcache.Upstream | None = None  # their upstream keys, made once

    def scan(self, pending: list[TaskId]) -> tuple[list[TaskId], list[_Hit[L]]]:
        """One pass in topological order: settle what is current, collect what needs a restore."""
        results, dead, nodes = self.settled.results, self.dead, self.graph.nodes
        blocked: list[TaskId] = []
        restores: list[_Hit[L]] = []
        current: list[_Hit[L]] = []
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

    def _decide(self, tid: TaskId, current: list[_Hit[L]], restores: list[_Hit[L]]) -> None:
        node, plan = self.graph.nodes[tid], self.plans[tid]
        if node.is_group:
            self.settled.results[tid] = TaskResult(
                tid, Status.SUCCESS, CacheStatus.NO_CACHE, key=plan.key
            )
            return
        if taskcache.lazy(node):
            # Needed only by its dependants: if each of them is a hit, it is never started. Taken
            # as settled so they are decided; `finish` takes it back if one of them is not.
            self.settled.results[tid] = taskcache.not_started_result(tid, plan)
            self.lazy.append(tid)
            return
        entry = self.hits.get(plan.key) if plan.outputs is not None else None
        if entry is None:
            self.dead.add(tid)
            return
        assert plan.outputs is not None  # a hit is a task with outputs
        started = time.monotonic()
        up_to_date, stale = taskcache.current(
            self.local, entry, plan.outputs, self.root, self.ancestors
        )
        if not up_to_date and stale:
            through = taskcache.covering(
                self.graph, self.plans, self.hits, self.local, tid, entry, self.root, self.ancestors
            )
            up_to_date = through is not None
        hit = _Hit(tid, plan, entry, started, stale)
        if up_to_date:
            # a placeholder: dependants may settle in this pass
            self.settled.results[tid] = _PENDING_LOG
            current.append(hit)
        else:
            restores.append(hit)

    def _finish_current(self, current: list[_Hit[L]]) -> None:
        """Fetch the logs of the current hits in one batch, then report them in order."""
        logs = self.local.logs_of([h.entry for h in current]) if current else {}
        for h in current:
            result = _result(h, logs.get(h.entry.key, ()), CacheStatus.UP_TO_DATE)
            self.settled.results[h.tid] = result
            self.emit(TaskFinished(result))
        self.settled.current += len(current)

    def finish(self) -> Settled:
        """Keep a lazy persistent task settled (never started) only when every dependant was
        settled; else hand it to the walk (`taskcache.needed`)."""
        results = self.settled.results
        for tid in taskcache.needed(self.graph, self.lazy, results):
            del results[tid]
        return self.settled

    def restore_wave(self, pool, restores: list[_Hit[L]]) -> None:
        """Restore one wave in parallel; a damaged artifact is reported and left to the walk."""
        from vx.store.local import DamagedEntry

        t0 = time.perf_counter()
        extracted = self._extract(pool, restores)
        seconds = (time.perf_counter() - t0) / max(1, len(restores))
        for h, got in zip(restores, extracted):
            if isinstance(got, tuple):
                # the workspace refused a write: the walk's restore reports it, failing the task
                self.dead.add(h.tid)
                continue
            try:
                log = self.local.finish_restore(h.entry, got, seconds)
            except DamagedEntry as exc:
                self.emit(taskcache.damaged_notice(h.tid, exc))
                self.settled.damaged.add(h.entry.key)
                self.dead.add(h.tid)
                continue
            if self.listed_ns is not None:
                if self.upstream is None:
                    self.upstream = taskcache.Upstream(self.plans)
                taskcache.note_kept(self.local, self.plans, h.plan, self.listed_ns, self.upstream)
            self.emit(CacheRestored(h.tid, CacheStatus.LOCAL))
            result = _result(h, log, CacheStatus.LOCAL)
            self.settled.results[h.tid] = result
            self.emit(TaskFinished(result))
            self.settled.restored += 1

    def _extract(self, pool, restores: list[_Hit[L]]) -> list[Extracted]:
        """Split the wave into a few chunks per worker, so each crossing carries many restores."""
        work = [(h.entry.key, h.stale) for h in restores]
        n = max(1, min(len(work), 4 * getattr(pool, "_max_workers", 2)))
        chunks = [work[i::n] for i in range(n)]
        results: dict[str, Extracted] = {}
        for chunk, fut in [(c, pool.submit(_extract_many, c, self.root)) for c in chunks]:
            results.update(zip((key for key, _ in chunk), fut.result()))
        return [results[h.entry.key] for h in restores]


_PENDING_LOG = TaskResult(TaskId("", ""), Status.SUCCESS, CacheStatus.UP_TO_DATE)


def _result(h: _Hit[L], log, cache: CacheStatus) -> TaskResult:
    return taskcache.hit_result(h.tid, h.plan, h.entry.duration_ms, log, cache, h.started)
