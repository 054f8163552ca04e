"""A task's cache hit, decided and served in one place (Turborepo's `TaskCache`): whether the
workspace already holds the entry's outputs, their restore, the hit's result, the notice for an
entry that cannot be restored, and which persistent tasks a run of hits never starts.

Three callers ask it: the hit lane (fastpath/hitlane.py) in batches before the walk, the
rebuilder one task at a time, and `--dry` (prepare.dry_plan) for its prediction. Loaded by
every cached run: it imports only leaves.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Collection, Mapping, Sequence

from vx.events import Notice
from vx.model import CacheStatus, Status, TaskResult

if TYPE_CHECKING:
    from pathlib import Path

    from vx.files.outputs import OutputSpec
    from vx.model import LogChunk, TaskGraph, TaskId, TaskNode, TaskPlan
    from vx.store.local import DamagedEntry
    from vx.store.protocol import E, L, LocalLayer, Store
    from vx.store.unpacking import Unpacked

NOT_STARTED = "not started: every task that needs it was a cache hit"


# ---------------------------------------------------------------- a hit


def current(
    store: Store[E], entry: E, outputs: OutputSpec, root: Path, seen: dict | None = None
) -> tuple[bool, bool]:
    """Whether the workspace holds exactly the entry's outputs (a hit with nothing to restore),
    and whether it holds any output of the task at all (stale ones a restore wipes first).
    `seen` shares the output walk's ancestor checks across tasks while none runs."""
    present = outputs.walk(root, seen)
    return store.is_up_to_date(entry, present), bool(present)


def covering(
    graph: TaskGraph,
    plans: Mapping[TaskId, TaskPlan],
    hits: Mapping[str, E],
    store: Store[E],
    tid: TaskId,
    held: E,
    root: Path,
    seen: dict | None = None,
) -> TaskId | None:
    """The dependant through which a hit whose own outputs are not current is current: an
    additive Nx target saving the whole tree (`AdditiveOutputs.whole`) that is a hit, whose
    outputs are current and hold every output of `tid`. Its entry holds `tid`'s files as they
    were (its key folds `tid`'s), so wiping and restoring `tid` and then it would leave the tree
    as it is: nx-console's `_build` <- `extract-dependencies` <- `build`, which otherwise
    restored both on every warm run, so no warm run could replay (docs/caching.md). Every file
    of `tid`'s entry (`held`) must be in that tree too: one outside it, deleted here, would
    otherwise stay lost. Its entry then holds every file of `tid`'s (its files are exactly the
    tree it holds), which is what lets a replay restore `tid`'s through it (`receipt`)."""
    own = plans[tid].outputs
    files = getattr(held, "files", None)
    if own is None or files is None:
        return None
    mine: set[str] | None = None
    for did, plan in plans.items():
        outputs = plan.outputs
        if outputs is None or not getattr(outputs, "whole", False) or did == tid:
            continue
        entry = hits.get(plan.key)
        if entry is None or not _upstream(graph, did, tid):
            continue
        theirs = outputs.walk(root, seen)
        if not store.is_up_to_date(entry, theirs):
            continue
        if mine is None:
            mine = set(own.walk(root, seen)) | {f.path for f in files}
        if mine <= set(theirs):
            return did
    return None


def _upstream(graph: TaskGraph, tid: TaskId, wanted: TaskId) -> bool:
    """Whether `wanted` is among `tid`'s dependencies, however deep."""
    stack, seen = list(graph.nodes[tid].deps), set()
    while stack:
        dep = stack.pop()
        if dep == wanted:
            return True
        if dep not in seen:
            seen.add(dep)
            stack.extend(graph.nodes[dep].deps)
    return False


def restore(store: Store[E], entry: E, outputs: OutputSpec, root: Path) -> tuple[LogChunk, ...]:
    """Wipe the task's outputs and restore the entry's; its log. DamagedEntry when the artifact
    cannot be restored (the task runs instead: `damaged_notice`), EnvironmentFailure when the
    workspace refuses a write (the task fails)."""
    outputs.wipe(root)
    return store.restore(entry, outputs.allows)


def extract(
    layer: LocalLayer[L], entry: L, outputs: OutputSpec, root: Path, stale: bool
) -> Unpacked | str:
    """The file half of `restore`, for a batch's worker (a thread, or a forked process that may
    not touch the index): wipe stale outputs and unpack. `layer.finish_restore` takes the
    result on the index's thread."""
    if stale:
        outputs.wipe(root)
    return layer.extract(entry, outputs.allows)


def note_kept(
    store: Store[E],
    plans: Mapping[TaskId, TaskPlan],
    plan: TaskPlan,
    since_ns: int,
    upstream: Upstream | None = None,
) -> None:
    """After a save or a restore of a task that runs tsc: note what its kept build infos may be
    dated to (engine/dating.py) — now, with `since_ns` (a save's task start, a restore's file
    listing) less the reach of one clock tick, and the keys of the entries upstream of it, whose
    outputs its build infos were built on. `upstream` may be shared by a batch of restores."""
    from vx.engine.tsconfig import runs_tsc
    from vx.witness import RACY_NS

    if plan.outputs is None or not runs_tsc(plan.command or ""):
        return
    keys = (upstream or Upstream(plans)).keys(plan)
    store.note_kept(plan.key, since_ns - RACY_NS, time.time_ns(), sorted(keys))


class Upstream:
    """The keys folded into a plan's key, and into theirs, all the way up; remembered per key."""

    def __init__(self, plans: Mapping[TaskId, TaskPlan]) -> None:
        self.by_name = {str(tid): p for tid, p in plans.items()}
        self.known: dict[str, frozenset[str]] = {}

    def keys(self, plan: TaskPlan, depth: int = 0) -> frozenset[str]:
        if plan.key in self.known:
            return self.known[plan.key]
        found: set[str] = set()
        for name, key in plan.record.upstream if plan.record is not None else ():
            found.add(key)
            up = self.by_name.get(name)
            if up is not None and up.key == key and depth < 256:
                found |= self.keys(up, depth + 1)
        self.known[plan.key] = frozenset(found)
        return self.known[plan.key]


def hit_result(
    tid: TaskId, plan: TaskPlan, stored_ms: float | None, log, cache: CacheStatus, started: float
) -> TaskResult:
    """A hit's result: `cache` says how it was served, `stored_ms` is how long the run that saved
    it took, `started` (monotonic) when serving it began."""
    return TaskResult(
        tid,
        Status.SUCCESS,
        cache,
        key=plan.key,
        exit_code=0,
        log=tuple(log),
        duration_ms=(time.monotonic() - started) * 1000,
        command=plan.command,
        stored_ms=stored_ms,
    )


def damaged_notice(tid: TaskId, exc: DamagedEntry) -> Notice:
    """What the run says of an entry that cannot be restored: the task runs instead."""
    return Notice(
        f"cache entry for {tid} cannot be restored ({exc.reason}); running the task instead",
        id=tid,
    )


# ---------------------------------------------------------------- persistent tasks hits spare


def lazy(node: TaskNode) -> bool:
    """A persistent task nobody asked for: needed only by its dependants, so never started when
    each of them is a hit. A group is none."""
    return not node.is_group and node.exec.persistent is not None and not node.requested


def not_started_result(tid: TaskId, plan: TaskPlan) -> TaskResult:
    """A lazy persistent task's result when no dependant needed it started."""
    return TaskResult(
        tid,
        Status.SUCCESS,
        CacheStatus.NO_CACHE,
        key=plan.key,
        persistent=True,
        reason=NOT_STARTED,
    )


def needed(graph: TaskGraph, waiting: Sequence[TaskId], settled: Collection[TaskId]) -> set[TaskId]:
    """Of the lazy tasks `waiting` (in topological order, each taken as settled while its
    dependants were decided), those a dependant outside `settled` needs: they start after all.
    Dependants first: a lazy task that is not started needs none of its own dependencies."""
    dependants: dict[TaskId, list[TaskId]] = {tid: [] for tid in waiting}
    for tid, node in graph.nodes.items():
        for dep in node.deps:
            if dep in dependants:
                dependants[dep].append(tid)
    out: set[TaskId] = set()
    for tid in reversed(waiting):
        if not all(d in settled and d not in out for d in dependants[tid]):
            out.add(tid)
    return out


def not_started(
    graph: TaskGraph, plans: Mapping[TaskId, TaskPlan], hits: Collection[str]
) -> set[TaskId]:
    """The lazy persistent tasks a run would not start, as the hit lane decides, with every key
    in `hits` taken as a hit that settles: each of them is ready once its dependencies settle,
    and none is needed by a dependant that does not."""
    nodes = graph.nodes
    if not hits or not any(lazy(n) for n in nodes.values()):
        return set()
    settled: set[TaskId] = set()
    waiting: list[TaskId] = []
    for tid in graph.order:
        node, plan = nodes[tid], plans[tid]
        ready = all(d in settled for d in node.deps)
        if lazy(node):
            waiting.append(tid)
        elif not node.is_group:
            ready = ready and plan.outputs is not None and plan.key in hits
        if ready:
            settled.add(tid)
    return {t for t in waiting if t in settled} - needed(graph, waiting, settled)
