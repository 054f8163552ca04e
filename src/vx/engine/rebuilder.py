"""Bring one task up to date: key → hit? (skip or restore) : wipe outputs, execute, re-check, save.

The key of nearly every task is known before anything runs (keys are computed up front by
plan/tasks.py); a task after an uncached task of its own project, and what folds its key, is keyed
here once it is ready. Then the rebuilder decides which of the three roads to take and
says why.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from msgspec import Struct, field
from msgspec.structs import replace

from vx.engine import opening, taskcache, verdicts
from vx.engine.scheduler import PrioritySlots
from vx.errors import ToolchainRefused
from vx.events import (
    CacheRestored,
    Emit,
    Notice,
    TaskFinished,
    TaskOutput,
    TaskReady,
    TaskRetrying,
    TaskStarted,
)
from vx.model import (
    CachePolicy,
    CacheStatus,
    LogChunk,
    ProcessResult,
    Status,
    TaskId,
    TaskNode,
    TaskPlan,
    TaskResult,
    Violation,
)
from vx.proc import executor, masking
from vx.workspace.frameworks import unseen as framework_unseen

if TYPE_CHECKING:  # types only: a cached run never loads the store's or the sandbox's modules here
    from vx.engine import persistent
    from vx.engine.incremental import Kept
    from vx.engine.opening import First
    from vx.engine.remote import RemotePool
    from vx.engine.verify_determinism import Rerun
    from vx.files.index import FileIndex, Snapshot
    from vx.sandbox.runner import Session
    from vx.store.layered import Downloaded, LayeredStore
    from vx.store.local import Entry
    from vx.store.protocol import Store

    Offer = Callable[[TaskNode, TaskPlan], Callable[..., Awaitable[ProcessResult]] | None]

__all__ = [  # the plan types live in model.py
    "CachePolicy",
    "Hooks",
    "RunConfig",
    "RunContext",
    "RunState",
    "Services",
    "TaskPlan",
    "rebuild",
]


class RunConfig(Struct, frozen=True):
    """What the walk was set up with, the same for every task."""

    root: Path
    policy: CachePolicy
    hits: Mapping[str, Any]  # key -> store entry, from one batched probe
    priority: Mapping[TaskId, int]
    # tasks keyed once ready (True: inputs read again from disk)
    late: Mapping[TaskId, bool] = field(default_factory=dict)
    # the fingerprint files as the walk began (files.Snapshot), re-checked after each task
    lockfiles: Snapshot | None = None
    # `--continue=never`: a failure sets `halt` before its slot passes on
    halt_on_failure: bool = False
    terminal: bool = False  # vx runs on a TTY: an interactive task gets it


class Services(Struct, frozen=True):
    """What every task is run, kept and told through."""

    index: FileIndex
    store: Store[Any] | None  # its entries: the local store's, or a download
    emit: Emit
    table: executor.ProcessTable
    slots: PrioritySlots
    restore_slots: asyncio.Semaphore
    remote: LayeredStore | None = None  # when a remote layer reads
    # the REAPI workers' slots when a task of the run may go remote
    remote_pool: RemotePool | None = None
    # the executor's `execute` (None: vx.proc.executor.execute); the seam a test's scripted
    # executor fills
    execute: Callable[..., Awaitable[ProcessResult]] | None = None


class RunState(Struct):
    """What the walk changes as tasks start and end."""

    # the run's own plans: a task keyed once ready replaces its own, which dependants fold
    plans: dict[TaskId, TaskPlan]
    # task -> why nothing downstream of it saves: "a#build failed", "a#build was not saved (…)"
    tainted: dict[TaskId, str] = field(default_factory=dict)
    # task -> its first attempt's child and how it started: the first wave, started before the
    # loop existed with its slot taken (vx.fastpath.firstwave)
    early: dict[TaskId, tuple[executor.Child, First]] = field(default_factory=dict)
    # set by the scheduler when no new command may start (`--continue=never` after a failure):
    # tasks already dispatched but still waiting for a slot must not start either
    halt: asyncio.Event | None = None
    # once a fingerprint file moved (named here) every key of the run is stale: no hit, no save
    lock_moved: str | None = None
    # the persistent tasks started so far; the run decides their end
    servers: dict[TaskId, persistent.Server] = field(default_factory=dict)
    sandbox: Session | None = None  # made by the first sandboxed execution; closed by run
    alone: asyncio.Lock | None = None  # held while an interactive task gathers every slot
    running: set[TaskId] = field(default_factory=set)  # started through `admit`, not yet ended
    ended: asyncio.Event | None = None  # set when one of `running` ends
    said: set[str] = field(default_factory=set)  # warnings said once a run (TaskPlan.told)


class Hooks(Struct, frozen=True):
    """What the run's callers and plugins decide for a task; None: vx's own way."""

    # (node, plan, attempt) -> a wrapper to start the command through (--verify's strace)
    launch_for: Callable[[TaskNode, TaskPlan, int], executor.Launch | None] | None = None
    # (task, trace accesses) of each sandboxed attempt, for --verify; None: the traces are not kept
    observe: Callable[[TaskId, tuple[Any, ...]], None] | None = None
    # the plugins' `admit` hooks: (task, the admitted tasks running) -> may it start
    admit: Callable[[TaskId, frozenset[TaskId]], bool] | None = None
    # the plugins' executors: (node, plan) -> an `execute` for the task, or None (vx runs it)
    offer: Offer | None = None
    # how a late task is keyed: (node, fresh) -> its plan
    rekey: Callable[[TaskNode, bool], TaskPlan] | None = None
    # --verify=determinism: each cached task runs again and is compared with its entry here
    rerun: Rerun | None = None


class RunContext(Struct, frozen=True):
    """One walk's records, handed to every task: split by what changes when."""

    config: RunConfig
    services: Services
    state: RunState
    hooks: Hooks = Hooks()


async def rebuild(
    ctx: RunContext, node: TaskNode, results: Mapping[TaskId, TaskResult]
) -> TaskResult:
    """Take the task to a finished result; reported through the services' `emit`."""
    config, state, emit = ctx.config, ctx.state, ctx.services.emit
    plan = state.plans[node.id]
    rekey = ctx.hooks.rekey
    if node.id in config.late and rekey is not None:  # its dependencies are done: key it now
        plan = await asyncio.to_thread(rekey, node, config.late[node.id])
        state.plans[node.id] = plan  # dependants fold this key
    cause = _upstream_cause(ctx, node, results)
    if cause is not None:
        state.tainted[node.id] = cause
    if node.is_group:
        return TaskResult(node.id, Status.SUCCESS, CacheStatus.NO_CACHE, key=plan.key)
    if node.exec.persistent is not None and not _on_terminal(ctx, node):
        served = await _serve(ctx, node, plan)
        if not served.persistent or served.status is not Status.SUCCESS:
            emit(TaskFinished(served))
        return served
    result: TaskResult | None = None
    if ctx.hooks.rerun is not None and plan.outputs is not None and ctx.services.store is not None:
        result = await _rerun(ctx, node, plan, ctx.hooks.rerun)
    elif (
        plan.outputs is not None
        and config.policy.read
        and ctx.services.store is not None
        and state.lock_moved is None
    ):
        result = await _try_hit(ctx, node, plan)
    if result is None:
        result = await _execute_and_save(ctx, node, plan)
    if result.status is not Status.SKIPPED:  # skipped tasks are reported from the run's summary
        emit(TaskFinished(result))
    return result


def _halted(node: TaskNode, plan: TaskPlan) -> TaskResult:
    return TaskResult(
        node.id,
        Status.SKIPPED,
        CacheStatus.NO_CACHE,
        key=plan.key,
        reason="not run: an earlier task failed (--continue=never)",
    )


# ---------------------------------------------------------------- hits


async def _try_hit(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> TaskResult | None:
    """The task served from the cache (`vx.engine.taskcache` decides and serves), or None: it
    runs."""
    found = await _entry(ctx, node, plan)
    if found is None:
        return None
    entry, served = found
    store, outputs, root = ctx.services.store, plan.outputs, ctx.config.root
    assert store is not None and outputs is not None  # rebuild() asks only then
    ctx.services.slots.withdraw(node.id)  # a hit takes no slot
    started = time.monotonic()
    if served is CacheStatus.REMOTE:
        # Checked here, not on a worker thread: a download is mostly restored by its own thread
        # by now, and a fully remote-cached run makes this hop once per task for a small walk.
        up_to_date, _ = taskcache.current(store, entry, outputs, root)
    else:
        up_to_date, _ = await asyncio.to_thread(taskcache.current, store, entry, outputs, root)
    if not up_to_date:
        return await _restore(ctx, node, plan, entry, served, started)
    if served is CacheStatus.REMOTE:  # its download was restored as soon as it was proven
        ctx.services.emit(CacheRestored(node.id, served))
    cache = served if served is CacheStatus.REMOTE else CacheStatus.UP_TO_DATE
    log = store.log_of(entry)
    return taskcache.hit_result(node.id, plan, entry.duration_ms, log, cache, started)


async def _entry(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> tuple[Any, CacheStatus] | None:
    """The task's entry and where it is served from: the batched probe's, a probe of a key taken
    just now, else the remote layer's download; None when none has it."""
    store, remote = ctx.services.store, ctx.services.remote
    assert store is not None  # rebuild() asks only then
    entry: Entry | Downloaded | None = ctx.config.hits.get(plan.key)
    late = node.id in ctx.config.late  # keyed just now: the run's batched probe never saw this key
    if entry is None and late:
        entry = (await asyncio.to_thread(store.probe, [plan.key])).get(plan.key)
    if entry is not None:
        return entry, CacheStatus.LOCAL
    if remote is None:
        return None
    ctx.services.slots.withdraw(node.id)  # a download can take long: no slot waits for its answer
    if late:
        from vx.store.layered import wanted_from

        remote.prefetch(wanted_from({node.id: plan}, (), early=False))
    entry = await remote.fetched(plan.key)
    return None if entry is None else (entry, CacheStatus.REMOTE)


async def _restore(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    entry: Entry | Downloaded,
    served: CacheStatus,
    started: float,
) -> TaskResult | None:
    """Restore the entry's outputs: the hit's result, None when the entry cannot be restored
    (the task runs instead), a failure when the workspace refuses the write."""
    from vx.errors import EnvironmentFailure
    from vx.store.local import DamagedEntry

    store, outputs, emit = ctx.services.store, plan.outputs, ctx.services.emit
    assert store is not None and outputs is not None  # a hit is a task with outputs
    async with ctx.services.restore_slots:
        try:
            log = await asyncio.to_thread(taskcache.restore, store, entry, outputs, ctx.config.root)
            if ctx.config.policy.write:
                taskcache.note_kept(store, ctx.state.plans, plan, ctx.services.index.started_ns)
        except DamagedEntry as exc:
            emit(taskcache.damaged_notice(node.id, exc))
            return None
        except EnvironmentFailure as exc:  # a full disk: this task fails
            why = "; ".join((exc.message, *exc.facts, *((exc.hint,) if exc.hint else ())))
            emit(Notice(f"{node.id}: restore failed: {why}", id=node.id))
            return TaskResult(
                node.id,
                Status.FAILED,
                served,
                key=plan.key,
                reason=f"restore failed: {exc.message}",
                duration_ms=(time.monotonic() - started) * 1000,
                command=plan.command,
            )
    emit(CacheRestored(node.id, served))
    return taskcache.hit_result(node.id, plan, entry.duration_ms, log, served, started)


# ---------------------------------------------------------------- persistent tasks


class _Masked:
    """A task's output as it is told: its secret values, their masker (None when it has none)
    and the callback that emits each chunk masked."""

    def __init__(self, ctx: RunContext, node: TaskNode, plan: TaskPlan) -> None:
        declared = node.config.exec.env.secret if node.config.exec is not None else ()
        # the remote's credentials too: a task may print one it found some other way (a file)
        self.secrets = masking.secrets_of(plan.env, declared, host=os.environ)
        self.masker = masking.Masker(self.secrets) if self.secrets else None
        self.emit, self.tid = ctx.services.emit, node.id

    def on_output(self, chunk: LogChunk) -> None:
        masked = self.masker.feed(chunk) if self.masker is not None else chunk
        if masked is not None:
            self.emit(TaskOutput(self.tid, masked))

    def flush(self) -> None:
        """Tell what the masker still holds (the end of a chunk that might have begun a secret)."""
        if self.masker is not None:
            for rest in self.masker.flush():
                self.emit(TaskOutput(self.tid, rest))


async def _serve(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> TaskResult:
    """Start a persistent task and return once it is ready; it goes on running, owned by the
    run's `servers`. Its slot is held only until then: a server that waits for requests is no
    work."""
    masked = _Masked(ctx, node, plan)  # as for any task
    slots, state, emit = ctx.services.slots, ctx.state, ctx.services.emit
    await slots.acquire(ctx.config.priority.get(node.id, 0), node.id)
    try:
        if state.halt is not None and state.halt.is_set():
            return _halted(node, plan)
        emit(TaskStarted(node.id, plan.command or "", 1))
        started = time.monotonic()
        try:
            server = _start_server(ctx, node, plan, masked, started)
        except (OSError, ValueError) as exc:
            cwd = ctx.config.root / node.project_dir
            return _not_ready(ctx, node, plan, masked, executor.spawn_error(exc, cwd))
        state.servers[node.id] = server
        why = await server.wait_ready(
            plan.timeout_ms,
            lambda msg: emit(Notice(f"{node.id}: {msg}", level="info", id=node.id)),
        )
    finally:
        slots.release()
    duration_ms = (time.monotonic() - started) * 1000
    if why is not None:
        if not server.ended.done():
            await server.ended
        if ctx.config.halt_on_failure and state.halt is not None and not server.aborted:
            state.halt.set()
        return _not_ready(ctx, node, plan, masked, why, server.log, duration_ms, server.aborted)
    emit(TaskReady(node.id, duration_ms))
    return TaskResult(
        node.id,
        Status.SUCCESS,
        CacheStatus.NO_CACHE,
        key=plan.key,
        reason="ready",
        command=plan.command,
        attempts=1,
        persistent=True,
        duration_ms=duration_ms,
    )


def _start_server(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, masked: _Masked, started: float
) -> persistent.Server:
    from vx.engine import persistent

    ready_when = node.exec.persistent.ready_when if node.exec.persistent is not None else None
    emit = ctx.services.emit
    return persistent.start(
        plan.command or "",
        ctx.config.root / node.project_dir,
        plan.env,
        ctx.services.table,
        ready_when,
        masked.on_output,
        started,
        lambda words: emit(Notice(f"{node.id} {words} after it was ready", id=node.id)),
        tuple(masked.secrets),
    )


def _not_ready(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    masked: _Masked,
    why: str,
    log=(),
    duration_ms: float = 0.0,
    aborted: bool = False,
) -> TaskResult:
    """A persistent task that never was ready: failed, or aborted by the run's stop."""
    status = Status.ABORTED if aborted else Status.FAILED
    ctx.state.tainted[node.id] = f"{node.id} {status.value}"
    reason = f"not ready: {why}"
    if masked.masker is not None:
        masked.flush()
        reason = str(masking.mask_text(reason, masked.secrets))  # the log is masked by the server
    return TaskResult(
        node.id,
        status,
        CacheStatus.NO_CACHE,
        key=plan.key,
        reason=reason,
        log=tuple(log),
        command=plan.command,
        attempts=1,
        persistent=True,
        duration_ms=duration_ms,
        exit_code=None if aborted else 1,
    )


def _on_terminal(ctx: RunContext, node: TaskNode) -> bool:
    """An interactive task runs on the terminal when vx has one; off a TTY it is a normal task."""
    return node.exec.interactive and ctx.config.terminal


# ---------------------------------------------------------------- misses


async def _rerun(ctx: RunContext, node: TaskNode, plan: TaskPlan, rerun: Rerun) -> TaskResult:
    """--verify=determinism (`vx.engine.verify_determinism`): the task runs again from the same
    inputs against its local entry — once when it has one, else twice, the first run saved as
    usual — and what the second run left is compared with the entry. The entry is kept (the
    second result is never saved over it), and restored over a second result that differs: the
    workspace holds what a hit would have left."""
    store = ctx.services.store
    assert store is not None and plan.outputs is not None  # rebuild() asks only then
    local: Any = getattr(store, "local", store)  # the layered store's local layer
    entry = (await asyncio.to_thread(local.probe, [plan.key])).get(plan.key)
    if entry is None:
        first = await _execute_and_save(ctx, node, plan)
        if first.status is not Status.SUCCESS:
            rerun.skip(node.id, "it failed")
            return first
        if not first.saved:
            rerun.skip(node.id, "its first run was not " + _unsaved(first))
            return first
        entry = (await asyncio.to_thread(local.probe, [plan.key])).get(plan.key)
        if entry is None:
            rerun.skip(node.id, "its first run's entry is gone")
            return first
    second = await _execute_and_save(ctx, node, plan, again=True)
    if second.status is not Status.SUCCESS:
        rerun.skip(node.id, "its second run failed")
        return second
    root = ctx.config.root
    if await asyncio.to_thread(rerun.compare, node.id, local, entry, plan.outputs, root):
        try:
            await asyncio.to_thread(taskcache.restore, local, entry, plan.outputs, root)
        except Exception as exc:  # a damaged entry, a refused write: the run says it, not fails
            ctx.services.emit(Notice(f"{node.id}: its entry was not restored: {exc}", id=node.id))
    return replace(second, reason="ran again: compared with its entry (--verify=determinism)")


def _unsaved(result: TaskResult) -> str:
    return "saved" + (f" ({result.reason})" if result.reason else "")


async def _execute_and_save(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, again: bool = False
) -> TaskResult:
    """Run the task and keep its result; `again` (--verify=determinism's second run) wipes its
    outputs first as a save would, and saves nothing."""
    pool = ctx.services.remote_pool
    if plan.remote == "only" and (pool is None or pool.down is not None):
        return TaskResult(  # a remote-only task (an install for the workers) is no work here
            node.id,
            Status.SUCCESS,
            CacheStatus.NO_CACHE,
            key=plan.key,
            reason="remote only: no remote executor, not run",
            command=plan.command,
        )
    write = (
        plan.outputs is not None
        and ctx.config.policy.write
        and ctx.services.store is not None
        and not again
    )
    early = ctx.state.early.pop(node.id, None)
    snapshot: Snapshot | None = None
    if early is not None:
        ctx.services.slots.withdraw(node.id)  # it runs on the slot the first wave took
        snapshot, started_ns = early[1].snapshot, early[1].started_ns
    elif write:
        snapshot = opening.snapshot(ctx.services.index, node, plan)
    await _tell_unseen(ctx, node, plan)
    if early is None:
        started_ns = time.time_ns()
    proc, attempts, violations, kept = await _attempts(
        ctx, node, plan, wipe=write or again, early=early
    )
    if proc is None:
        return _halted(node, plan)
    await _check_lockfiles(ctx, node)
    status = _status_of(proc)
    if status is Status.SUCCESS:
        saved, reason = await _keep(ctx, node, plan, proc, (snapshot, started_ns, kept), write)
    else:
        saved, reason = False, _say_failure(ctx, node, plan, proc, violations)
        ctx.state.tainted[node.id] = f"{node.id} {status.value}"
    return TaskResult(
        node.id,
        status,
        CacheStatus.MISS if plan.outputs is not None else CacheStatus.NO_CACHE,
        key=plan.key,
        duration_ms=proc.duration_ms,
        exit_code=proc.exit_code,
        log=proc.log,
        reason=reason,
        command=plan.command,
        saved=saved,
        attempts=attempts,
        timed_out=proc.timed_out,
        cpu_ms=proc.cpu_ms,
        peak_rss_bytes=proc.peak_rss_bytes,
        violations=violations,
    )


async def _tell_unseen(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> None:
    """Before it runs: the input globs that match nothing, and a framework's variables the task
    does not see."""
    if plan.outputs is not None and plan.told.unmatched:
        # Asked again now: an upstream task of this run may have written what a glob names
        # (a dependency's gitignored dist); the re-check then withholds the save and says why.
        unmatched = await asyncio.to_thread(
            ctx.services.index.unmatched_now,
            plan.outputs.input_query,
            tuple(dict.fromkeys(glob for glob, _ in plan.told.unmatched)),
        )
        for said in plan.told.inputs_lines(unmatched):
            if said not in ctx.state.said:  # a turbo.json definition's line: once a run
                ctx.state.said.add(said)
                ctx.services.emit(Notice(said, id=node.id))
    if plan.framework:
        unseen = framework_unseen(plan.framework, plan.env, os.environ)
        if unseen:
            ctx.services.emit(Notice(f"{node.id}: {unseen}", id=node.id))


async def _keep(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    proc: ProcessResult,
    ran: tuple[Snapshot | None, int, bool],
    write: bool,
) -> tuple[bool, str | None]:
    """A successful run's result kept: saved, left on the remote, or neither; whether it was
    saved and why not. `ran` is (the inputs' snapshot, started_ns, whether it was built on
    kept outputs). Its dependants may not save when it was not saved for a reason that is its
    own."""
    snapshot, started_ns, kept = ran
    saved, reason, taints = False, None, True
    pool = ctx.services.remote_pool
    if plan.remote == "only":
        # Never saved here: its outputs live on the server, named in dependants' input roots.
        ran_there = pool is not None and node.id in pool.listings
        reason = "ran remotely only" if ran_there else "remote only: no remote executor, not run"
        taints = False
    elif pool is not None and node.id in pool.listings:
        # Saved once a local task fetches them; until then the server holds the result.
        pool.unsaved[node.id] = (proc, snapshot, started_ns)
        reason, taints = f"outputs left on the remote (--download={pool.download})", False
    elif write:
        saved, reason = await _save(ctx, node, plan, proc, snapshot, started_ns, kept)
        # A save the store refused (a full disk, a refused output) leaves the result sound: its
        # dependants may still save (and a full disk says so once for the run, not once a task).
        taints = not (reason or "").startswith(_STORE_REFUSED)
    tainted = ctx.state.tainted
    if write and not saved and taints and node.id not in tainted:
        tainted[node.id] = f"{node.id} was not saved ({(reason or '').removeprefix('not saved: ')})"
    return saved, reason


def _say_failure(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    proc: ProcessResult,
    violations: tuple[Violation, ...],
) -> str | None:
    """A failed or aborted run's reason; a failure's hint is told (`command not found` …)."""
    if _status_of(proc) is not Status.FAILED:
        return None
    cwd = ctx.config.root / node.project_dir
    hint = verdicts.exit_hint(proc, plan.command or "", _path_dirs(plan.env), cwd=cwd)
    if hint:
        ctx.services.emit(Notice(hint, level="info", id=node.id))
    spared = plan.outputs.spared if plan.outputs is not None else ()
    if spared:
        ctx.services.emit(Notice(_spared_notice(node, spared), level="info", id=node.id))
    return _failure_label(proc, violations)


def _spared_notice(node: TaskNode, spared: tuple[str, ...]) -> str:
    """Why a failure may not be the task's own: its outputs held files another task of the run
    wrote before it started, with no edge between the two."""
    shown = ", ".join(spared[:3]) + (f" and {len(spared) - 3} more" if len(spared) > 3 else "")
    return (
        f"{node.id} started with {len(spared)} file(s) in its outputs that another task of this "
        f"run had written ({shown}); a task that writes or reads another's outputs needs a "
        "dependsOn edge to it — `vx run --verify=inputs` names the writer"
    )


async def _check_lockfiles(ctx: RunContext, node: TaskNode) -> None:
    """After a task ran, see whether a lockfile or install setting moved (an install task,
    `npm version`); if so every key of this run was taken on the old one, and the rest of the run
    restores and saves nothing. A few lstats per task; the bytes only of a touched file."""
    state = ctx.state
    if ctx.config.lockfiles is None or state.lock_moved is not None:
        return
    moved = await asyncio.to_thread(ctx.services.index.changed_files, ctx.config.lockfiles)
    if moved is not None and state.lock_moved is None:
        state.lock_moved = moved
        ctx.services.emit(
            Notice(
                f"{moved} changed during the run (after {node.id} ran): nothing keyed on it as it "
                "was is restored or saved for the rest of the run",
                id=node.id,
            )
        )


def _upstream_cause(
    ctx: RunContext, node: TaskNode, results: Mapping[TaskId, TaskResult]
) -> str | None:
    """Why this task may not save because of a dependency: the first one's root cause, or None."""
    for dep in node.deps:
        if dep in ctx.state.tainted:
            return ctx.state.tainted[dep]
        if results[dep].status is not Status.SUCCESS:  # skipped or aborted: never rebuilt here
            return f"{dep} {results[dep].status.value}"
    return None


def _status_of(proc: ProcessResult) -> Status:
    if proc.aborted:
        return Status.ABORTED
    return Status.SUCCESS if proc.exit_code == 0 else Status.FAILED


async def _drop_loose_build_infos(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> None:
    """A tsc build info outside the outputs goes with the wipe (vx.engine.incremental)."""
    from vx.engine import incremental

    assert plan.outputs is not None  # only a task with outputs wipes
    note = await asyncio.to_thread(
        incremental.remove_loose_build_infos,
        ctx.config.root,
        plan.outputs,
        plan.command or "",
        str(node.id),
    )
    if note is not None:
        ctx.services.emit(Notice(note, id=node.id))


async def _attempts(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, *, wipe: bool, early=None
) -> tuple[ProcessResult | None, int, tuple[Violation, ...], bool]:
    """Run the command, retrying per exec.retries; each retry re-cleans outputs. The
    first attempt keeps an incremental tool's outputs and state when `incremental.prepare` may,
    and runs again on wiped outputs when what it left could differ from a clean build; the last
    item says the result was built on kept outputs. An `early` first attempt already runs: its
    slot is taken, its outputs prepared, its start told.

    No process (None) when the run halted while this task waited for its slot."""
    total = plan.retries + 1
    elapsed = 0.0
    kept = early[1].kept if early is not None else None  # outputs left for an incremental tool
    terminal = _on_terminal(ctx, node)
    pool = ctx.services.remote_pool
    remote = (
        early is None
        and pool is not None
        and pool.wants(plan)
        and ctx.hooks.launch_for is None
        and ctx.hooks.rerun is None  # --verify runs here
    )
    held = await _take_slots(ctx, node, early is not None, terminal, remote)
    try:
        if early is None and ctx.state.halt is not None and ctx.state.halt.is_set():
            return None, 0, (), False
        if not remote:
            await _fetch_upstream(ctx, node)
        for attempt in range(1, total + 1):
            if attempt == 1 and early is not None:
                started = (early[0], early[1].started_at)
                proc, violations = await _run_once(ctx, node, plan, started=started)
            else:
                keep = wipe and attempt == 1 and not remote  # a retry starts clean
                kept, proc, violations = await _attempt(
                    ctx, node, plan, attempt, wipe, keep, terminal=terminal, remote=remote
                )
            elapsed += proc.duration_ms
            if kept is not None and proc.exit_code == 0 and not proc.aborted:
                again = await _again_if_stale(ctx, node, plan, kept, attempt, terminal)
                if again is not None:  # a clean build could differ: build it and save that
                    kept, (proc, violations) = None, again
                    elapsed += proc.duration_ms
            if proc.exit_code == 0 or proc.aborted or attempt == total:
                break
            after = "a timeout" if proc.timed_out else f"exit {proc.exit_code}"
            ctx.services.emit(TaskRetrying(node.id, attempt + 1, total, after))
        halt = ctx.state.halt
        if ctx.config.halt_on_failure and halt is not None and proc.exit_code != 0:
            if not proc.aborted:
                halt.set()  # before the slot is handed to a waiter, or it would start
    finally:
        _give_back(ctx, node, held, remote)
    return _with_duration(proc, elapsed), attempt, violations, kept is not None


async def _take_slots(
    ctx: RunContext, node: TaskNode, early: bool, terminal: bool, remote: bool
) -> int:
    """The slots the task's run holds (how many of this machine's): a remote slot instead for a
    task going to a worker, every slot for one on the terminal, none to take for a first-wave
    task (its slot was taken then)."""
    slots = ctx.services.slots
    if remote:
        assert ctx.services.remote_pool is not None  # `remote` asks the pool
        slots.withdraw(node.id)
        await ctx.services.remote_pool.slots.acquire()  # this machine's stay for local tasks
        return 0
    if early:
        return 1
    if terminal:
        slots.withdraw(node.id)
        return await _acquire_all(ctx, node)
    if ctx.hooks.admit is not None:
        await _admitted(ctx, node)
    else:
        await slots.acquire(ctx.config.priority.get(node.id, 0), node.id)
    return 1


def _give_back(ctx: RunContext, node: TaskNode, held: int, remote: bool) -> None:
    """The task's slots back, once its run is over. One slot is kept through the save when a
    dependant outranks every waiter (the walk passes it on once that dependant is queued): the
    next link of a chain is not overtaken by a lesser task."""
    ctx.services.slots.finish(node.id, held)
    if remote:
        assert ctx.services.remote_pool is not None  # `remote` asked the pool
        ctx.services.remote_pool.slots.release()
    state = ctx.state
    if node.id in state.running:
        state.running.discard(node.id)
        ended, state.ended = state.ended, None
        if ended is not None:
            ended.set()  # the tasks held beside this one ask again


async def _attempt(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    attempt: int,
    wipe: bool,
    keep: bool,
    *,
    terminal: bool,
    remote: bool,
) -> tuple[Kept | None, ProcessResult, tuple[Violation, ...]]:
    """One attempt opened and run: with `wipe` its outputs go first (with a loose tsc build
    info), unless `keep` lets them stay for an incremental tool (`opening.keep_or_wipe`); what
    was kept, how it ended and its sandbox violations."""
    kept = None
    store = ctx.services.store
    if wipe and plan.outputs is not None:
        assert store is not None  # `wipe` is a task saved to a store
        await _drop_loose_build_infos(ctx, node, plan)
        kept = await asyncio.to_thread(
            opening.keep_or_wipe,
            ctx.config.root,
            plan.outputs,
            store,
            str(node.id),
            keep and ctx.config.policy.read,  # --force builds from wiped outputs
            ctx.services.index.started_ns if attempt == 1 else None,  # a retry wipes it all
            plan.command or "",
        )
    ctx.services.emit(TaskStarted(node.id, plan.command or "", attempt, terminal=terminal))
    launch = _launch(ctx, node, plan, attempt, terminal)
    proc, violations = await _run_once(ctx, node, plan, launch, terminal=terminal, remote=remote)
    return kept, proc, violations


async def _again_if_stale(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, kept: Kept, attempt: int, terminal: bool
) -> tuple[ProcessResult, tuple[Violation, ...]] | None:
    """After a run on kept outputs: when what it left could differ from a clean build, the
    same attempt again on wiped outputs (how it ended); None when the result stands."""
    from vx.engine import incremental

    root, outputs, emit = ctx.config.root, plan.outputs, ctx.services.emit
    assert outputs is not None  # kept only for a task with outputs
    why = await asyncio.to_thread(incremental.stale, root, outputs, kept)
    if why is None:
        return None
    emit(Notice(f"{node.id}: {why}; running it again on wiped outputs", level="info", id=node.id))
    await asyncio.to_thread(outputs.wipe, root)
    await _drop_loose_build_infos(ctx, node, plan)
    emit(TaskStarted(node.id, plan.command or "", attempt, terminal=terminal))
    launch = _launch(ctx, node, plan, attempt, terminal)
    return await _run_once(ctx, node, plan, launch, terminal=terminal)


def _launch(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, attempt: int, terminal: bool
) -> executor.Launch | None:
    """The wrapper an attempt starts through (--verify's strace), never on the terminal."""
    launch_for = ctx.hooks.launch_for
    return launch_for(node, plan, attempt) if launch_for and not terminal else None


async def _admitted(ctx: RunContext, node: TaskNode) -> None:
    """A slot, once the plugins' `admit` lets the task start beside the tasks now running. A
    held task gives its slot back and asks again when one of those ends; with nothing else
    running it starts, whatever the answer, so a hold never stalls the run."""
    admit, slots, state = ctx.hooks.admit, ctx.services.slots, ctx.state
    assert admit is not None  # called only then
    while True:
        await slots.acquire(ctx.config.priority.get(node.id, 0), node.id)
        if not state.running or admit(node.id, frozenset(state.running)):
            state.running.add(node.id)
            return
        slots.release()
        if state.ended is None:
            state.ended = asyncio.Event()
        await state.ended.wait()


async def _acquire_all(ctx: RunContext, node: TaskNode) -> int:
    """Every slot, so the interactive task runs alone; one gatherer at a time, so two
    interactive tasks never hold half each."""
    slots = ctx.services.slots
    if ctx.state.alone is None:
        ctx.state.alone = asyncio.Lock()
    async with ctx.state.alone:
        for _ in range(slots.size):
            await slots.acquire(ctx.config.priority.get(node.id, 0))
    return slots.size


async def _run_once(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    launch: executor.Launch | None = None,
    started=None,
    terminal: bool = False,
    remote: bool = False,
) -> tuple[ProcessResult, tuple[Violation, ...]]:
    """One attempt: on a remote worker when `remote` (here if that fails), inside the sandbox
    when the task declares one, else plainly; `started` is a first attempt already running
    (executor.execute)."""
    masked = _Masked(ctx, node, plan)
    if remote:
        proc, violations = await _run_remote(ctx, node, plan, masked.on_output)
    else:
        proc, violations = await _run_process(
            ctx, node, plan, launch, started, masked.on_output, terminal
        )
    if masked.masker is None:
        return proc, violations
    masked.flush()
    return replace(
        proc,
        log=masking.mask_log(proc.log, masked.secrets),
        spawn_error=masking.mask_text(proc.spawn_error, masked.secrets),
    ), violations


async def _run_remote(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, on_output
) -> tuple[ProcessResult, tuple[Violation, ...]]:
    """On a worker; when the server or the worker fails, here, on one of this machine's slots
    (the remote slot stays held). The plugins' `admit` is not asked for a task on a worker (it
    takes nothing of this machine's), but is before the task runs here."""
    pool = ctx.services.remote_pool
    assert pool is not None  # a remote attempt asks the pool
    proc = await pool.execute(str(ctx.config.root), node, plan, ctx.state.plans, on_output)
    if proc is not None:
        return proc, ()
    if plan.remote == "only":  # never here, even when the server fails
        return ProcessResult(exit_code=0, duration_ms=0.0), ()
    if plan.outputs is not None:  # what a lost worker's action may have left
        await asyncio.to_thread(plan.outputs.wipe, ctx.config.root)
    if ctx.hooks.admit is not None:
        await _admitted(ctx, node)  # `_attempts` takes it out of `running` when it ends
    else:
        await ctx.services.slots.acquire(ctx.config.priority.get(node.id, 0))
    try:
        await _fetch_upstream(ctx, node)
        return await _run_process(ctx, node, plan, None, None, on_output)
    finally:
        ctx.services.slots.release()


async def _fetch_upstream(ctx: RunContext, node: TaskNode) -> None:
    """Before a task runs here: fetch the outputs upstream tasks left on the server
    (`--download`) and save each of those tasks as if it had downloaded at once."""
    pool = ctx.services.remote_pool
    if pool is None or not pool.listings:
        return
    async with pool.fetch_lock:
        for dep in pool.upstream(node):
            if dep not in pool.listings or dep in pool.only:
                continue
            why = await pool.materialise(str(ctx.config.root), dep)
            if why is not None:
                ctx.services.emit(
                    Notice(
                        f"{node.id}: the outputs of {dep} could not be fetched from the remote "
                        f"({why})",
                        id=node.id,
                    )
                )
                continue
            unsaved = pool.unsaved.pop(dep, None)
            if unsaved is not None and ctx.config.policy.write and ctx.services.store is not None:
                await _save(ctx, pool.nodes[dep], ctx.state.plans[dep], *unsaved)


async def _run_process(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    launch: executor.Launch | None,
    started,
    on_output,
    terminal: bool = False,
) -> tuple[ProcessResult, tuple[Violation, ...]]:
    """One attempt here: by a plugin's executor when one takes it, else by vx's own, or inside
    the sandbox when the task declares one."""
    offer = ctx.hooks.offer
    if offer is not None and plan.sandbox is None and launch is None and not node.exec.interactive:
        offered = offer(node, plan)
        if offered is not None:  # a plugin's executor runs it (never a sandboxed or traced task)
            proc = await _run_offered(ctx, node, plan, offered, on_output)
            if proc is not None:
                return proc, ()
    if plan.sandbox is not None:
        return await _run_sandboxed(ctx, node, plan, on_output)
    # A cached task's outputs are read next: nothing it started may still be writing
    # (docs/caching.md § Save).
    proc = await (ctx.services.execute or executor.execute)(
        plan.command or "",
        cwd=ctx.config.root / node.project_dir,
        env=plan.env,
        timeout_ms=plan.timeout_ms,
        on_output=on_output,
        table=ctx.services.table,
        launch=launch,
        started=started,
        settle_group=plan.outputs is not None,
        terminal=terminal,
    )
    if proc.stopped_strays is not None:
        ctx.services.emit(
            Notice(
                f"{node.id}: processes it started in the background were still running after it "
                f"exited; stopped them ({proc.stopped_strays}) before reading its outputs",
                id=node.id,
            )
        )
    return proc, ()


async def _run_offered(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    offered: Callable[..., Awaitable[ProcessResult]],
    on_output,
) -> ProcessResult | None:
    """A plugin's executor's run; None when it built with another toolchain than the key's:
    what it left goes, and vx builds the task here."""
    try:
        return await offered(
            plan.command or "",
            cwd=ctx.config.root / node.project_dir,
            env=plan.env,
            timeout_ms=plan.timeout_ms,
            on_output=on_output,
        )
    except ToolchainRefused as exc:
        ctx.services.emit(Notice(f"{exc}: nothing of it is kept, it runs here", id=node.id))
        if plan.outputs is not None:
            await asyncio.to_thread(plan.outputs.wipe, ctx.config.root)
        return None


async def _run_sandboxed(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, on_output
) -> tuple[ProcessResult, tuple[Violation, ...]]:
    from vx.sandbox.runner import Session, run_sandboxed

    state, observe, emit = ctx.state, ctx.hooks.observe, ctx.services.emit
    assert plan.sandbox is not None  # asked only then
    if state.sandbox is None:
        state.sandbox = Session()
        state.sandbox.keep_accesses = observe is not None
    outcome = await run_sandboxed(
        state.sandbox,
        plan.sandbox,
        plan.command or "",
        cwd=ctx.config.root / node.project_dir,
        env=plan.env,
        timeout_ms=plan.timeout_ms,
        on_output=on_output,
        table=ctx.services.table,
        on_note=lambda note: emit(Notice(note, level="info", id=node.id)),
    )
    if observe is not None and outcome.accesses:  # untraced: --verify says so
        observe(node.id, outcome.accesses)
    for note in outcome.notes + outcome.failure_hints:
        emit(Notice(note, level="info", id=node.id))
    return outcome.process, outcome.violations


def _failure_label(proc: ProcessResult, violations: tuple[Violation, ...]) -> str:
    """`failed (exit 1, 2 sandbox violations)`."""
    label = verdicts.failure_label(proc)
    if not violations:
        return label
    noun = "violation" if len(violations) == 1 else "violations"
    return f"{label[:-1]}, {len(violations)} sandbox {noun})"


def _with_duration(proc: ProcessResult, total_ms: float) -> ProcessResult:
    return replace(proc, duration_ms=total_ms)


async def _save(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    proc: ProcessResult,
    snapshot,
    started_ns: int,
    kept: bool = False,
) -> tuple[bool, str | None]:
    """Save the result unless an input moved while the task ran or upstream was not saved.
    A result built on `kept` incremental state is saved locally only (docs/caching.md)."""
    files = await _files_to_save(ctx, node, plan, snapshot, started_ns)
    if isinstance(files, str):
        return False, files
    saved, reason = await _store(ctx, node, plan, proc, files, kept)
    if saved:
        assert ctx.services.store is not None  # `_store` saved to it
        taskcache.note_kept(ctx.services.store, ctx.state.plans, plan, started_ns)
    return saved, reason


async def _files_to_save(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, snapshot, started_ns: int
) -> list[str] | str:
    """The output files to save, or the reason the result may not be saved (told at once)."""
    emit = ctx.services.emit

    def refuse(why: str, said: str | None = None) -> str:
        emit(Notice(f"{node.id}: not saved to the cache: {said or why}", id=node.id))
        return f"not saved: {why}"

    if ctx.state.lock_moved is not None:
        return refuse(f"{ctx.state.lock_moved} changed during the run")
    if node.id in ctx.state.tainted:  # said once per task, in the run and (the reason) `vx why`
        return refuse(f"upstream {ctx.state.tainted[node.id]}")
    outputs = plan.outputs
    assert outputs is not None  # `write` held it
    moved = await asyncio.to_thread(
        ctx.services.index.changed_since, snapshot, outputs.input_query, started_ns
    )
    if moved:
        return refuse(f"input changed while it ran: {moved}")
    files, disowned = await asyncio.to_thread(outputs.walk_for_save, ctx.config.root)
    if disowned:
        more = f" (and {len(disowned) - 1} more)" if len(disowned) > 1 else ""
        return refuse(
            f"output {disowned[0]}{more} is not the task's to keep: outputs never include .git, "
            ".vx, an unnamed node_modules, another project's files or the task's own inputs"
        )
    removed = getattr(outputs, "removed", ())
    shared = node.config.cache is not None and node.config.cache.shared_outputs
    if removed and not shared:  # it deleted a file of its upstream's: a restore could not
        return refuse(f"it removed {removed[0]}", f"it removed {removed[0]}, which it adds to")
    # An Nx target is saved as Nx saves it, whatever it removed: an inferred vite `build` empties
    # the `dist` its `typecheck` wrote declarations into first, on every run, and refusing it
    # made the build miss on every later run where Nx hits (docs/caching.md, additive outputs).
    if not files and outputs.declares_files:
        declared = (
            *outputs.patterns,
            *(outputs.ws_globs.patterns if outputs.ws_globs is not None else ()),
        )
        line = plan.told.outputs_line(node.id, declared)
        if line:
            emit(Notice(line, id=node.id))
    return files


async def _store(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    proc: ProcessResult,
    files: list[str],
    kept: bool,
) -> tuple[bool, str | None]:
    """The result into the store (its local layer only when built on `kept` outputs); a refused
    output or a full disk is a warning, never a failed build."""
    store, emit = ctx.services.store, ctx.services.emit
    assert store is not None  # `write` held it
    try:
        await asyncio.to_thread(
            store.save_local if kept else store.save,
            plan.key,
            task_id=str(node.id),
            command=plan.command or "",
            log=proc.log,
            files=files,
            duration_ms=proc.duration_ms,
            cpu_ms=proc.cpu_ms,
            peak_rss_bytes=proc.peak_rss_bytes,
        )
    except Exception as exc:
        from vx.errors import EnvironmentFailure
        from vx.store.archive import ArchiveError
        from vx.store.local import CacheFull

        if not isinstance(exc, (ArchiveError, OSError, EnvironmentFailure)):
            raise
        if isinstance(exc, CacheFull):  # one warning a run: every later save would say the same
            if exc.first:
                emit(
                    Notice(
                        f"{node.id}: not saved to the cache: {exc.message}; {exc.hint} "
                        "(later saves that find the disk full are dropped silently)",
                        id=node.id,
                    )
                )
        else:
            emit(Notice(f"{node.id}: not saved to the cache: {exc}", id=node.id))
        return False, f"{_STORE_REFUSED}{exc}"
    return True, None


_STORE_REFUSED = "not saved: the cache refused it: "


def _path_dirs(env: Mapping[str, str]) -> list[str]:
    return [d for d in env.get("PATH", "").split(":") if d]
