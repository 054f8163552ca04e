"""A `vx run` from its prepared world (`vx.prepare`) to its summary: the hit lane, the first wave,
the walk, the persistent tasks' end, closing the store.

It never prints: everything goes out as events.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from msgspec import Struct

from vx.engine import signals
from vx.errors import EXIT_OK
from vx.events import Emit, Notice, RunFinished, RunStarted
from vx.model import (
    CacheStatus,
    RunSummary,
    Status,
    TaskId,
    TaskPlan,
    TaskResult,
)
from vx.stages import Stages

if TYPE_CHECKING:
    import asyncio

    from vx.engine.opening import First
    from vx.engine.rebuilder import Hooks, RunContext
    from vx.engine.remote import RemotePool
    from vx.engine.verify_determinism import Rerun
    from vx.fastpath.hitlane import Settled
    from vx.files.index import Snapshot
    from vx.model import (
        HashRecord,
        TaskNode,
    )
    from vx.prepare import Prepared, RunRequest
    from vx.proc.executor import Child, ProcessTable


# ---------------------------------------------------------------- execute


def execute(
    prep: Prepared,
    req: RunRequest,
    emit: Emit,
    stages: Stages,
    launch_for: Callable[..., Any] | None = None,
    observe: Callable[..., None] | None = None,
    on_graph_end: Callable[[], None] | None = None,
    rerun: Rerun | None = None,
    abort: signals.Abort | None = None,
) -> RunSummary:
    """Walk the graph under the run lock; Ctrl-C and SIGTERM tear every task down. `launch_for`
    may wrap a task's command and `observe` receives sandboxed traces (rebuilder.Hooks), for
    --verify=inputs, and `rerun` runs each cached task again for --verify=determinism.
    Persistent tasks kept in the foreground run after the summary; `on_graph_end` is called
    before they are waited for (the CLI releases the run lock: they write no cache). `abort`
    stops the run as Ctrl-C does, from any thread (vx.api)."""
    with signals.aborting(abort):
        return _execute(prep, req, emit, stages, launch_for, observe, on_graph_end, rerun)


def _execute(
    prep: Prepared,
    req: RunRequest,
    emit: Emit,
    stages: Stages,
    launch_for: Callable[..., Any] | None,
    observe: Callable[..., None] | None,
    on_graph_end: Callable[[], None] | None,
    rerun: Rerun | None,
) -> RunSummary:
    started = time.time()
    if prep.plugins is not None:
        emit = prep.plugins.observed(emit)
    _announce(prep, emit)
    with stages("hit lane"):
        lane, stopped_by = _settle_hits(prep, emit) if req.fast_paths else _no_lane()

    def conclude(results: Mapping[TaskId, TaskResult], stopped_by: int | None) -> RunSummary:
        return _conclude(prep, emit, stages, started, results, stopped_by)

    if len(lane.results) == len(prep.graph.nodes) and stopped_by is None:
        # everything was a confirmed hit: no event loop, asyncio never imported
        return conclude(lane.results, None)
    from vx.fastpath import firstwave

    _lend_pty()
    with signals.noted() as caught:  # until the walk listens: it acts on what came meanwhile
        early: dict[TaskId, First] = {}  # filled as they start: a failure midway stops those
        try:
            lockfiles = prep.index.snapshot(None, prep.index.fingerprinted)  # before anything runs
            with stages("schedule"):
                priority = _priorities(prep, lane, emit)
            verifying = launch_for is not None or rerun is not None
            if stopped_by is None and not verifying and req.fast_paths and not _admits(prep):
                _start_first_wave(prep, lane.results, emit, early, priority)
            asyncio = firstwave.import_asyncio()  # while the first wave runs
            handed = _Handover(lane, stopped_by, caught, early, lockfiles, priority)
            with stages("run graph"):
                results, stopped_by, summary = asyncio.run(
                    _walk(
                        prep,
                        req,
                        emit,
                        handed,
                        (launch_for, observe, rerun),
                        conclude,
                        on_graph_end,
                    )
                )
        except BaseException:
            firstwave.stop(early)  # only what the walk never adopted
            raise
    return summary if summary is not None else conclude(results, stopped_by)


def _lend_pty() -> None:
    """Tasks write to a pty sized as vx's terminal when vx prints to a colour terminal, to pipes
    otherwise (proc/spawn.py)."""
    import sys

    from vx.proc import spawn
    from vx.style import color_enabled

    coloured = color_enabled(os.environ, sys.stdout)
    spawn.lend_pty(spawn.pty_size(os.environ, sys.stdout, coloured))


def _conclude(
    prep: Prepared,
    emit: Emit,
    stages: Stages,
    started: float,
    results: Mapping[TaskId, TaskResult],
    stopped_by: int | None,
) -> RunSummary:
    """Close the store and tell the run's summary."""
    with stages("close cache"):
        _close_store(prep, emit, results)
    spans = prep.store.local.spans if prep.store is not None else {}
    for name in ("restore", "save"):
        stages.span(name, spans.get(name, ()))
    ordered = tuple(results[t] for t in prep.graph.order if not prep.graph.nodes[t].is_group)
    summary = RunSummary(
        _run_id(),
        ordered,
        started,
        time.time(),
        signals.exit_code(ordered, stopped_by),
        interrupted=stopped_by is not None,
    )
    emit(RunFinished(summary))
    return summary


def _admits(prep: Prepared) -> bool:
    """Whether the plugins decide where or when a task starts: the walk asks them before each."""
    return prep.plugins is not None and (prep.plugins.has("admit") or bool(prep.plugins.executors))


def receipt_tasks(prep: Prepared, summary: RunSummary, started_ns: int) -> list[list] | None:
    """Each task's part of a receipt of this run (`vx.fastpath.receipt.task_record`): its cache row, the
    lstat values its outputs must show, where they live and what walking them reads. None when
    the run does not qualify: anything but a clean, uninterrupted run of local hits, a remote
    layer, or a sandboxed task."""
    from vx.fastpath import receipt

    if (
        summary.exit_code != EXIT_OK
        or summary.interrupted
        or prep.remote is not None
        or prep.store is None
        or prep.plugins is not None  # a key hook may read what no receipt could vouch for
    ):
        return None
    if any(
        n.config.exec is not None
        and (n.config.exec.persistent is not None or n.config.exec.interactive)
        for n in prep.graph.nodes.values()
    ):
        return None  # a server or a prompt must start on every run: nothing of it is in any receipt
    if any(len(getattr(p.record, "runtime", ())) > 1 for p in prep.plans.values()):
        return None  # a runtime probe may answer differently with no file changed: plan again
    local = prep.store.local  # the store itself: a layered store would be prep.remote too
    hit = (CacheStatus.UP_TO_DATE, CacheStatus.LOCAL)
    if not all(
        r.status is Status.SUCCESS
        and r.cache in hit
        and prep.plans[r.id].outputs is not None
        and prep.plans[r.id].key in prep.hits
        for r in summary.results
    ):
        return None  # before any walk: a run with one miss is decided at once
    if any(plan.sandbox is not None for plan in prep.plans.values()):
        return None  # planning a sandbox resolves grants against paths no witness notes
    root = str(prep.ws.root)
    tasks = []
    for result in summary.results:
        plan = prep.plans[result.id]
        entry = prep.hits[plan.key]
        expected = local.expected_outputs(entry)
        if expected is None:
            return None
        assert plan.outputs is not None  # all(...) above
        roots, walked = plan.outputs.state(prep.ws.root)
        through = None
        if not local.is_up_to_date(entry, plan.outputs.walk(prep.ws.root)):
            through = covering(prep, result.id, entry)
        if through is not None:
            # its files vouched for by its covering dependant's record, which holds the whole
            # tree and every file of its entry (a replay restores them through it); its own
            # walk still says whether anything was added or taken away
            expected = []
        tasks.append(
            receipt.task_record(
                entry.key,
                entry.size_bytes,
                entry.crc,
                [(os.path.join(root, path), want) for path, want in expected],
                roots,
                walked,
                started_ns,
                covering=None if through is None else prep.plans[through].key,
            )
        )
    return tasks


def covering(prep: Prepared, tid: TaskId, entry: Any) -> TaskId | None:
    from vx.engine import taskcache

    assert prep.store is not None
    store = prep.store.local
    return taskcache.covering(prep.graph, prep.plans, prep.hits, store, tid, entry, prep.ws.root)


def _run_id() -> str:
    from vx.store.runs import run_id

    return run_id()


def _close_store(
    prep: Prepared, emit: Emit, results: Mapping[TaskId, TaskResult] | None = None
) -> None:
    """Close the store; with a remote layer that drains the uploads and tells the tally.
    Just before the local store closes, new keys' components are kept (`vx why`) and the
    workspace's `cacheRetention` is applied."""

    def settle(local) -> None:
        if not prep.policy.write:
            return  # a read-only cache (`--cache=local:r`) is written nothing, history included
        _keep_history(local, prep, results or {})
        if prep.retention is not None:
            from vx.store.pruning import apply_at_run_end

            apply_at_run_end(local, prep.retention)

    if prep.remote is not None:
        prep.remote.close(lambda message, level: emit(Notice(message, level=level)), settle)
    elif prep.store is not None:
        settle(prep.store)
        prep.store.close()


def _keep_history(local, prep: Prepared, results: Mapping[TaskId, TaskResult]) -> None:
    """Each new key's components, for `vx why`; a failure here never fails the run. An up-to-date
    hit is skipped: its outputs were last written under this very key, so the history already has
    it as the newest — a warm run then asks the history nothing."""
    import sqlite3

    moved: list[tuple[str, HashRecord]] = []
    settled: list[tuple[str, HashRecord]] = []
    for tid, plan in prep.plans.items():
        if plan.record is not None:
            fresh = tid in results and results[tid].cache is CacheStatus.UP_TO_DATE
            (settled if fresh else moved).append((plan.key, plan.record))
    ran = [
        r for r in results.values() if r.cache is CacheStatus.MISS and r.status is Status.SUCCESS
    ]
    withheld = [(str(r.id), r.key, r.reason) for r in ran if not r.saved and r.reason]
    try:
        local.keep_history(moved, settled, withheld, [str(r.id) for r in ran if r.saved])
    except (OSError, sqlite3.Error):
        pass


def _announce(prep: Prepared, emit: Emit) -> None:
    emit(RunStarted(prep.graph, prep.concurrency))
    for message, level in prep.notices:
        emit(Notice(message, level=level))
    if prep.remote is not None:
        prep.remote.attach(lambda message, level: emit(Notice(message, level=level)))


def _settle_hits(prep: Prepared, emit: Emit):
    """Settle confirmed local hits before the walk; a signal stops it between waves and
    comes back as the run's stopping signal, so the walk aborts the rest as it would."""
    from vx.fastpath.hitlane import Settled, settle

    if not (prep.hits and prep.policy.read and prep.store is not None):
        return Settled(), None
    with signals.noted() as caught:
        lane = settle(
            prep.graph,
            prep.plans,
            prep.hits,
            prep.store.local,  # the batched probe's hits are local entries, remote layer or not
            prep.ws.root,
            emit,
            2 * prep.concurrency,
            lambda: bool(caught),
            prep.index.started_ns if prep.policy.write else None,
        )
    return lane, signals.first(caught)


def _no_lane():
    """The hit lane switched off: the walk's rebuilder serves every hit."""
    from vx.fastpath.hitlane import Settled

    return Settled(), None


class _Handover(Struct):
    """What the run hands its walk from before the event loop existed."""

    lane: Settled
    stopped_early: int | None  # the signal that stopped the hit lane
    caught: list[int]  # signals noted since: the walk acts on them at once
    early: dict[TaskId, First]  # the first wave: the walk adopts each process
    lockfiles: Snapshot  # the fingerprint files before anything ran
    priority: Mapping[TaskId, int]


async def _walk(
    prep: Prepared,
    req: RunRequest,
    emit: Emit,
    handed: _Handover,
    wrap: tuple[Callable[..., Any] | None, Callable[..., None] | None, Rerun | None],
    conclude: Callable[[Mapping[TaskId, TaskResult], int | None], RunSummary],
    on_graph_end: Callable[[], None] | None,
) -> tuple[dict[TaskId, TaskResult], int | None, RunSummary | None]:
    """The walk, then the persistent tasks' end: the summary when some were kept in the
    foreground (it is told before they are waited for), else None and the caller concludes.
    `wrap` is --verify's (launch_for, observe, rerun)."""
    import asyncio

    from vx.engine.rebuilder import rebuild
    from vx.engine.scheduler import walk
    from vx.proc import executor

    table = executor.ProcessTable()
    stop = asyncio.Event()
    stopped_by: list[int] = [handed.stopped_early] if handed.stopped_early is not None else []
    if stopped_by:
        stop.set()  # the lane was interrupted: the walk starts nothing and aborts the rest
    summary, ctx = None, None
    # Everything from the first adoption on is inside the `try`: an adopted task is the table's,
    # and only the table's shutdown stops it (the caller stops what was never adopted).
    try:
        ctx = context = _context(prep, req, emit, handed, wrap, table, stop)
        with signals.listening(table, stop, stopped_by, handed.caught):
            results = await walk(
                prep.graph,
                lambda node, res: rebuild(context, node, res),
                continue_mode=req.continue_mode,
                stop=stop,
                settled=handed.lane.results,
                halt=context.state.halt,
                priority=context.config.priority,
                slots=context.services.slots,
                started=frozenset(context.state.early),  # the first wave: stopped, if stopped
            )
            if context.state.servers:
                from vx.engine import persistent

                kept = await persistent.release(
                    prep.graph,
                    context.state.servers,
                    results,
                    emit,
                    stopped=bool(stopped_by),
                    keep_despite_failures=req.continue_mode == "always",
                )
                if kept:
                    summary = conclude(results, None)
                    if on_graph_end is not None:
                        on_graph_end()
                    summary = await persistent.foreground(
                        summary, kept, context.state.servers, emit, stop, stopped_by, signals.EXITS
                    )
    finally:
        await _close_walk(ctx, table, emit)
    return results, (stopped_by[0] if stopped_by else None), summary


def _context(
    prep: Prepared,
    req: RunRequest,
    emit: Emit,
    handed: _Handover,
    wrap: tuple[Callable[..., Any] | None, Callable[..., None] | None, Rerun | None],
    table: ProcessTable,
    stop: asyncio.Event,
) -> RunContext:
    """The walk's records (`vx.engine.rebuilder`), once the first wave is adopted into `table`
    with its slots taken."""
    import asyncio

    from vx.engine.rebuilder import RunConfig, RunContext, RunState, Services
    from vx.engine.scheduler import PrioritySlots

    adopted = _adopt(handed.early, table)
    slots = PrioritySlots(prep.concurrency)
    slots.take(len(adopted))
    damaged = handed.lane.damaged
    late = _late(prep) if prep.store is not None else {}  # no cache: keys decide nothing
    config = RunConfig(
        root=prep.ws.root,
        policy=prep.policy,
        hits={k: v for k, v in prep.hits.items() if k not in damaged} if damaged else prep.hits,
        priority=handed.priority or prep.graph.priority,
        late=late,
        lockfiles=handed.lockfiles,
        halt_on_failure=req.continue_mode == "never",
        terminal=req.lend_terminal and os.isatty(0) and os.isatty(1),
    )
    services = Services(
        index=prep.index,
        store=prep.store,
        emit=emit,
        table=table,
        slots=slots,
        restore_slots=asyncio.Semaphore(2 * prep.concurrency),
        remote=prep.remote,
        remote_pool=_remote_pool(prep, req, emit, stop, bool(late)),
    )
    state = RunState(
        plans=prep.plans,
        early=adopted,
        halt=asyncio.Event(),
        # `--exclude-dependencies`: a task whose dependency does not run may hit, never save
        tainted={t: f"{dep} was not run (--exclude-dependencies)" for t, dep in prep.cut.items()},
    )
    return RunContext(config, services, state, _hooks(prep, wrap, bool(late)))


def _adopt(early: dict[TaskId, First], table: ProcessTable) -> dict[TaskId, tuple[Child, First]]:
    """The first wave's processes, each moved from `early` into `table`, whose shutdown stops
    it from now on."""
    from vx.proc import executor

    adopted = {}
    for tid in list(early):
        adopted[tid] = (executor.adopt(early[tid].popen, table), early[tid])
        del early[tid]
    return adopted


def _remote_pool(
    prep: Prepared, req: RunRequest, emit: Emit, stop: asyncio.Event, late: bool
) -> RemotePool | None:
    """The REAPI workers' slots, when the run has a server to execute on."""
    if prep.remote_exec is None:
        return None
    from vx.engine.remote import RemotePool

    return RemotePool(
        prep.remote_exec,
        prep.remote_config,
        prep.graph.nodes,
        emit,
        download=req.download,
        deferrable=not late and not _runtime_inputs(prep),
        rerun=not prep.policy.read,
        stop=stop,
    )


def _hooks(
    prep: Prepared,
    wrap: tuple[Callable[..., Any] | None, Callable[..., None] | None, Rerun | None],
    late: bool,
) -> Hooks:
    """What decides for a task beside vx: --verify's wrapper and traces, the plugins' `admit`
    and executors, and how a task is keyed late."""
    from vx.engine.rebuilder import Hooks

    host = prep.plugins
    launch_for, observe, rerun = wrap
    return Hooks(
        launch_for=launch_for,
        observe=observe,
        rerun=rerun,
        admit=_admit(prep),
        offer=host.executor_for if host is not None and host.executors else None,
        rekey=_rekey(prep) if late else None,
    )


def _admit(prep: Prepared) -> Callable[[TaskId, frozenset[TaskId]], bool] | None:
    """The plugins' `admit` hooks, asked whether a task may start beside those running."""
    host = prep.plugins
    if host is None or not host.has("admit"):
        return None
    return lambda tid, running: host.admit(prep.graph.nodes[tid], prep.plans[tid], running)


def _rekey(prep: Prepared) -> Callable[[TaskNode, bool], TaskPlan]:
    """How a task keyed late is keyed once its dependencies are done."""
    from vx.plan.tasks import nested_dirs, rekeyed

    nested = nested_dirs(prep.ws)
    keyed = prep.keyed_graph or prep.graph  # a key folds every dependency, run or not
    return lambda node, fresh: rekeyed(
        prep.index,
        keyed.nodes[node.id],
        prep.plans,
        fresh,
        nested.get(node.project_dir, ()),
    )


async def _close_walk(ctx: RunContext | None, table: ProcessTable, emit: Emit) -> None:
    """After the walk, however it ended: every group it started stopped, the sandboxes' proxy
    and temp root gone, the remote workers' slots closed and their tally told."""
    await table.shutdown(signals.grace_s())
    if ctx is not None and ctx.state.sandbox is not None:
        ctx.state.sandbox.close()
    pool = ctx.services.remote_pool if ctx is not None else None
    if pool is not None:
        pool.close()
        told = pool.summary()
        if told:
            emit(Notice(told, level="info"))


def _priorities(prep: Prepared, lane, emit: Emit) -> Mapping[TaskId, int]:
    """The walk's priorities: the expected remaining critical path from the recorded durations
    of the tasks still to run (`vx.store.timings`), else the dependents count. Read only here,
    where something is about to execute; whatever goes wrong, the default order runs."""
    from vx.engine.schedule import priorities
    from vx.store import timings

    if prep.plugins is not None and prep.plugins.has("schedule"):
        return prep.graph.priority  # a plugin's `schedule` hook weighed them: it wins
    pending = [t for t in prep.graph.order if t not in lane.results]
    commands = [t for t in pending if not prep.graph.nodes[t].is_group]  # a group takes no time
    try:
        weights, warning = timings.expected(
            str(prep.cache_dir), str(prep.ws.root), prep.schedule, commands
        )
        if warning is not None:
            emit(Notice(warning, level="warning"))
        return priorities(prep.graph, pending, weights)
    except Exception as exc:  # never a failed run for an order
        emit(Notice(f"tasks start in the default order this run: {exc}", level="warning"))
        return prep.graph.priority


def _runtime_inputs(prep: Prepared) -> bool:
    """Whether a task of the run probes the machine (`cache.inputs.runtime`): its probe could
    read what an upstream task left, so nothing is left on a remote."""
    return any(
        n.config.cache is not None
        and (n.config.cache.input_runtime or n.config.cache.input_ws_runtime)
        for n in prep.graph.nodes.values()
    )


def _late(prep: Prepared) -> dict[TaskId, bool]:
    """The tasks that run keyed late, judged on the graph their keys fold."""
    from vx.plan.tasks import late_tasks

    if prep.keyed_graph is None:
        return late_tasks(prep.graph)
    return {t: v for t, v in late_tasks(prep.keyed_graph).items() if t in prep.graph.nodes}


def _start_first_wave(
    prep: Prepared,
    settled: Mapping[TaskId, TaskResult],
    emit: Emit,
    early: dict[TaskId, First],
    priority: Mapping[TaskId, int],
) -> None:
    """The first wave (`vx.fastpath.firstwave`), unless a remote layer might still serve a task
    or a task might run on a remote worker."""
    from vx.fastpath import firstwave

    if prep.remote is not None or prep.remote_exec is not None:
        return
    firstwave.start(
        prep.graph,
        prep.plans,
        prep.hits,
        settled,
        priority,
        early,
        root=prep.ws.root,
        index=prep.index,
        store=prep.store if prep.policy.write else None,
        keep=prep.policy.read,  # --force builds from wiped outputs
        width=prep.concurrency,
        emit=emit,
    )
