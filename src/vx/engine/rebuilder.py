"""Bring one task up to date: key → hit? (skip or restore) : wipe outputs, execute, re-check, save.

The key of nearly every task is known before anything runs (keys are computed up front by
plan.py); a task after an uncached task of its own project, and what folds its key, is keyed
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

from vx.engine import opening, verdicts
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
    from vx.engine.opening import First
    from vx.files.index import FileIndex, Snapshot
    from vx.files.outputs import OutputSpec
    from vx.sandbox.runner import Session
    from vx.store.layered import Downloaded, LayeredStore
    from vx.store.local import Entry
    from vx.store.protocol import Store

__all__ = ["CachePolicy", "RunContext", "TaskPlan", "rebuild"]  # the plan types live in model.py


class RunContext(Struct):
    root: Path
    plans: Mapping[TaskId, TaskPlan]
    hits: Mapping[str, Entry]  # key -> store entry, from one batched probe
    index: FileIndex
    store: Store | None
    policy: CachePolicy
    slots: PrioritySlots
    restore_slots: asyncio.Semaphore
    table: executor.ProcessTable
    emit: Emit
    priority: Mapping[TaskId, int]
    # task -> why nothing downstream of it saves: "a#build failed", "a#build was not saved (…)"
    tainted: dict[TaskId, str] = field(default_factory=dict)
    remote: LayeredStore | None = None  # when a remote layer reads
    # (node, plan, attempt) -> a wrapper to start the command through (--verify's strace), or None
    launch_for: Callable[[TaskNode, TaskPlan, int], executor.Launch | None] | None = None
    # (task, trace accesses) of each sandboxed attempt, for --verify; None: the traces are not kept
    observe: Callable[[TaskId, tuple[Any, ...]], None] | None = None
    sandbox: Session | None = None  # made by the first sandboxed execution; closed by run
    # set by the scheduler when no new command may start (`--continue=never` after a failure):
    # tasks already dispatched but still waiting for a slot must not start either
    halt: asyncio.Event | None = None
    halt_on_failure: bool = (
        False  # `--continue=never`: a failure sets `halt` before its slot passes on
    )
    # task -> its first attempt's child and how it started: the first wave, started before the
    # loop existed with its slot taken (vx.fastpath.firstwave)
    early: dict[TaskId, tuple[executor.Child, First]] = field(default_factory=dict)
    # the fingerprint files as the walk began (files.Snapshot), re-checked after each task;
    # once one moved (`lock_moved` names it) every key of the run is stale: no hit, no save
    lockfiles: Snapshot | None = None
    lock_moved: str | None = None
    # tasks keyed once ready (True: inputs read again from disk), and how: (node, fresh) -> plan
    late: Mapping[TaskId, bool] = field(default_factory=dict)
    rekey: Callable[[TaskNode, bool], TaskPlan] | None = None
    # the persistent tasks started so far (persistent.Server); the run decides their end
    servers: dict[TaskId, Any] = field(default_factory=dict)
    terminal: bool = False  # vx runs on a TTY: an interactive task gets it
    alone: asyncio.Lock | None = None  # held while an interactive task gathers every slot
    # the executor's `execute` (None: vx.proc.executor.execute); the seam a test's scripted executor fills
    execute: Callable[..., Awaitable[ProcessResult]] | None = None
    # the REAPI workers' slots (engine.remote.RemotePool) when a task of the run may go remote
    remote_pool: Any = None
    # the plugins' `admit` hooks: (task, the admitted tasks running) -> may it start; None: always
    admit: Callable[[TaskId, frozenset[TaskId]], bool] | None = None
    running: set[TaskId] = field(default_factory=set)  # started through `admit`, not yet ended
    ended: asyncio.Event | None = None  # set when one of `running` ends
    # the plugins' executors: (node, plan) -> an `execute` for the task, or None (vx runs it)
    offer: Callable[[TaskNode, TaskPlan], Callable[..., Awaitable[ProcessResult]] | None] | None = (
        None
    )


async def rebuild(
    ctx: RunContext, node: TaskNode, results: Mapping[TaskId, TaskResult]
) -> TaskResult:
    """Take the task to a finished result; reported through ctx.emit."""
    plan = ctx.plans[node.id]
    if node.id in ctx.late and ctx.rekey is not None:  # its dependencies are done: key it now
        plan = await asyncio.to_thread(ctx.rekey, node, ctx.late[node.id])
        ctx.plans[node.id] = plan  # type: ignore[index]  # the run's own dict: dependants fold this key
    cause = _upstream_cause(ctx, node, results)
    if cause is not None:
        ctx.tainted[node.id] = cause
    if node.is_group:
        return TaskResult(node.id, Status.SUCCESS, CacheStatus.NO_CACHE, key=plan.key)
    if node.exec.persistent is not None and not _on_terminal(ctx, node):
        served = await _serve(ctx, node, plan)
        if not served.persistent or served.status is not Status.SUCCESS:
            ctx.emit(TaskFinished(served))
        return served
    result: TaskResult | None = None
    if (
        plan.outputs is not None
        and ctx.policy.read
        and ctx.store is not None
        and ctx.lock_moved is None
    ):
        result = await _try_hit(ctx, node, plan)
    if result is None:
        result = await _execute_and_save(ctx, node, plan)
    if result.status is not Status.SKIPPED:  # skipped tasks are reported from the run's summary
        ctx.emit(TaskFinished(result))
    return result


# ---------------------------------------------------------------- hits


async def _try_hit(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> TaskResult | None:
    store, outputs = ctx.store, plan.outputs
    assert store is not None and outputs is not None  # rebuild() asks only then
    entry: Entry | Downloaded | None = ctx.hits.get(plan.key)
    served = CacheStatus.LOCAL
    late = node.id in ctx.late  # keyed just now: the run's batched probe never saw this key
    if entry is None and late:
        entry = (await asyncio.to_thread(store.probe, [plan.key])).get(plan.key)
    if entry is None and ctx.remote is not None:  # local first, then the prefetched download
        ctx.slots.withdraw(node.id)  # a download can take long: no slot waits for its answer
        if late:
            from vx.store.layered import wanted_from

            ctx.remote.prefetch(wanted_from({node.id: plan}, (), early=False))
        entry, served = await ctx.remote.fetched(plan.key), CacheStatus.REMOTE
    if entry is None:
        return None
    ctx.slots.withdraw(node.id)  # a hit takes no slot
    started = time.monotonic()
    if served is CacheStatus.REMOTE:
        # Walked here, not on a worker thread: a download is mostly restored by its own thread
        # by now, and a fully remote-cached run makes this hop once per task for a small walk.
        current = outputs.walk(ctx.root)
    else:
        current = await asyncio.to_thread(outputs.walk, ctx.root)
    if store.is_up_to_date(entry, current):
        if served is CacheStatus.REMOTE:  # its download was restored as soon as it was proven
            ctx.emit(CacheRestored(node.id, served))
            return _hit(node, plan, entry, store.log_of(entry), served, started)
        return _hit(node, plan, entry, store.log_of(entry), CacheStatus.UP_TO_DATE, started)
    from vx.errors import EnvironmentFailure
    from vx.store.local import DamagedEntry

    async with ctx.restore_slots:
        try:
            log = await asyncio.to_thread(_restore, ctx, entry, outputs)
        except DamagedEntry as exc:
            ctx.emit(
                Notice(
                    f"cache entry for {node.id} cannot be restored ({exc.reason}); running the task instead",
                    id=node.id,
                )
            )
            return None
        except (
            EnvironmentFailure
        ) as exc:  # the workspace refused the write (a full disk): this task fails
            why = "; ".join((exc.message, *exc.facts, *((exc.hint,) if exc.hint else ())))
            ctx.emit(Notice(f"{node.id}: restore failed: {why}", id=node.id))
            return TaskResult(
                node.id,
                Status.FAILED,
                served,
                key=plan.key,
                reason=f"restore failed: {exc.message}",
                duration_ms=(time.monotonic() - started) * 1000,
                command=plan.command,
            )
    ctx.emit(CacheRestored(node.id, served))
    return _hit(node, plan, entry, log, served, started)


def _restore(
    ctx: RunContext, entry: Entry | Downloaded, outputs: OutputSpec
) -> tuple[LogChunk, ...]:
    assert ctx.store is not None
    outputs.wipe(ctx.root)
    return ctx.store.restore(entry, outputs.allows)


def _hit(
    node: TaskNode,
    plan: TaskPlan,
    entry: Entry | Downloaded,
    log,
    cache: CacheStatus,
    started: float,
) -> TaskResult:
    return TaskResult(
        node.id,
        Status.SUCCESS,
        cache,
        key=plan.key,
        exit_code=0,
        log=tuple(log),
        duration_ms=(time.monotonic() - started) * 1000,
        command=plan.command,
        stored_ms=entry.duration_ms,
    )


# ---------------------------------------------------------------- persistent tasks


def _masked_output(ctx: RunContext, node: TaskNode, plan: TaskPlan):
    """The task's secret values, their masker (None when it has none) and the output callback
    that emits each chunk masked."""
    declared = node.config.exec.env.secret if node.config.exec is not None else ()
    # the remote's credentials too: a task may print one it found some other way (a config file)
    secrets = masking.secrets_of(plan.env, declared, host=os.environ)
    masker = masking.Masker(secrets) if secrets else None

    def on_output(chunk: LogChunk) -> None:
        masked = masker.feed(chunk) if masker is not None else chunk
        if masked is not None:
            ctx.emit(TaskOutput(node.id, masked))

    return secrets, masker, on_output


async def _serve(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> TaskResult:
    """Start a persistent task and return once it is ready; it goes on running, owned by
    `ctx.servers`. Its slot is held only until then: a server that waits for requests is no work."""
    from vx.engine import persistent

    secrets, masker, on_output = _masked_output(ctx, node, plan)  # as for any task

    def failed(reason: str, log=(), duration_ms: float = 0.0, aborted: bool = False) -> TaskResult:
        status = Status.ABORTED if aborted else Status.FAILED
        ctx.tainted[node.id] = f"{node.id} {status.value}"
        if masker is not None:
            for rest in masker.flush():
                ctx.emit(TaskOutput(node.id, rest))
            reason = str(masking.mask_text(reason, secrets))  # the log is masked by the server
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

    await ctx.slots.acquire(ctx.priority.get(node.id, 0), node.id)
    try:
        if ctx.halt is not None and ctx.halt.is_set():
            return TaskResult(
                node.id,
                Status.SKIPPED,
                CacheStatus.NO_CACHE,
                key=plan.key,
                reason="not run: an earlier task failed (--continue=never)",
            )
        ctx.emit(TaskStarted(node.id, plan.command or "", 1))
        started = time.monotonic()
        try:
            server = persistent.start(
                plan.command or "",
                ctx.root / node.project_dir,
                plan.env,
                ctx.table,
                node.exec.persistent.ready_when,  # type: ignore[union-attr]  # a served task is persistent
                on_output,
                started,
                lambda words: ctx.emit(Notice(f"{node.id} {words} after it was ready", id=node.id)),
                tuple(secrets),
            )
        except (OSError, ValueError) as exc:
            return failed(f"not ready: {executor._spawn_error(exc, ctx.root / node.project_dir)}")
        ctx.servers[node.id] = server
        why = await server.wait_ready(
            plan.timeout_ms,
            lambda msg: ctx.emit(Notice(f"{node.id}: {msg}", level="info", id=node.id)),
        )
    finally:
        ctx.slots.release()
    duration_ms = (time.monotonic() - started) * 1000
    if why is not None:
        if not server.ended.done():
            await server.ended
        if ctx.halt_on_failure and ctx.halt is not None and not server.aborted:
            ctx.halt.set()
        return failed(f"not ready: {why}", server.log, duration_ms, aborted=server.aborted)
    ctx.emit(TaskReady(node.id, duration_ms))
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


def _on_terminal(ctx: RunContext, node: TaskNode) -> bool:
    """An interactive task runs on the terminal when vx has one; off a TTY it is a normal task."""
    return node.exec.interactive and ctx.terminal


# ---------------------------------------------------------------- misses


async def _execute_and_save(ctx: RunContext, node: TaskNode, plan: TaskPlan) -> TaskResult:
    if plan.remote == "only" and (ctx.remote_pool is None or ctx.remote_pool.down is not None):
        return TaskResult(  # a remote-only task (an install for the workers) is no work here
            node.id,
            Status.SUCCESS,
            CacheStatus.NO_CACHE,
            key=plan.key,
            reason="remote only: no remote executor, not run",
            command=plan.command,
        )
    cached = plan.outputs is not None
    write = cached and ctx.policy.write and ctx.store is not None
    early = ctx.early.pop(node.id, None)
    snapshot: Snapshot | None = None
    if early is not None:
        ctx.slots.withdraw(node.id)  # it runs on the slot the first wave took
        snapshot, started_ns = early[1].snapshot, early[1].started_ns
    elif write:
        snapshot = opening.snapshot(ctx.index, node, plan)
    if plan.outputs is not None and plan.inputs is not None and plan.inputs.unmatched_globs:
        # Asked again now: an upstream task of this run may have written what a glob names
        # (a dependency's gitignored dist); the re-check then withholds the save and says why.
        unmatched = await asyncio.to_thread(
            ctx.index.unmatched_now, plan.outputs.input_query, plan.inputs.unmatched_globs
        )
        if unmatched:
            ctx.emit(
                Notice(
                    f"{node.id}: cache.inputs matched no files ({', '.join(unmatched)})", id=node.id
                )
            )
    if plan.framework:
        unseen = framework_unseen(plan.framework, plan.env, os.environ)
        if unseen:
            ctx.emit(Notice(f"{node.id}: {unseen}", id=node.id))
    if early is None:
        started_ns = time.time_ns()
    proc, attempts, violations, kept = await _attempts(ctx, node, plan, wipe=write, early=early)
    if proc is None:
        return TaskResult(
            node.id,
            Status.SKIPPED,
            CacheStatus.NO_CACHE,
            key=plan.key,
            reason="not run: an earlier task failed (--continue=never)",
        )
    await _check_lockfiles(ctx, node)
    status = _status_of(proc)
    cache = CacheStatus.MISS if cached else CacheStatus.NO_CACHE
    saved, reason, taints = False, None, True
    pool = ctx.remote_pool
    if status is Status.SUCCESS and plan.remote == "only":
        # Never saved here: its outputs live on the server, named in dependants' input roots.
        ran = pool is not None and node.id in pool.listings
        reason = "ran remotely only" if ran else "remote only: no remote executor, not run"
        taints = False
    elif status is Status.SUCCESS and pool is not None and node.id in pool.listings:
        # Saved once a local task fetches them; until then the server holds the result.
        pool.unsaved[node.id] = (proc, snapshot, started_ns)
        reason, taints = f"outputs left on the remote (--download={pool.download})", False
    elif status is Status.SUCCESS and write:
        saved, reason = await _save(ctx, node, plan, proc, snapshot, started_ns, kept)
        # A save the store refused (a full disk, a refused output) leaves the result sound: its
        # dependants may still save (and a full disk says so once for the run, not once a task).
        taints = not (reason or "").startswith(_STORE_REFUSED)
    elif status is Status.FAILED:
        reason = _failure_label(proc, violations)
        hint = verdicts.exit_hint(
            proc, plan.command or "", _path_dirs(plan.env), cwd=ctx.root / node.project_dir
        )
        if hint:
            ctx.emit(Notice(hint, level="info", id=node.id))
    if status is not Status.SUCCESS:
        ctx.tainted[node.id] = f"{node.id} {status.value}"
    elif write and not saved and taints and node.id not in ctx.tainted:
        ctx.tainted[node.id] = (
            f"{node.id} was not saved ({(reason or '').removeprefix('not saved: ')})"
        )
    return TaskResult(
        node.id,
        status,
        cache,
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


async def _check_lockfiles(ctx: RunContext, node: TaskNode) -> None:
    """After a task ran, see whether a lockfile or install setting moved (an install task,
    `npm version`); if so every key of this run was taken on the old one, and the rest of the run
    restores and saves nothing. A few lstats per task; the bytes only of a touched file."""
    if ctx.lockfiles is None or ctx.lock_moved is not None:
        return
    moved = await asyncio.to_thread(ctx.index.changed_files, ctx.lockfiles)
    if moved is not None and ctx.lock_moved is None:
        ctx.lock_moved = moved
        ctx.emit(
            Notice(
                f"{moved} changed during the run (after {node.id} ran): nothing keyed on it as it was "
                "is restored or saved for the rest of the run",
                id=node.id,
            )
        )


def _upstream_cause(
    ctx: RunContext, node: TaskNode, results: Mapping[TaskId, TaskResult]
) -> str | None:
    """Why this task may not save because of a dependency: the first one's root cause, or None."""
    for dep in node.deps:
        if dep in ctx.tainted:
            return ctx.tainted[dep]
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
        ctx.root,
        plan.outputs,
        plan.command or "",
        str(node.id),
    )
    if note is not None:
        ctx.emit(Notice(note, id=node.id))


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
    from vx.engine import incremental

    terminal = _on_terminal(ctx, node)
    pool = ctx.remote_pool
    remote = early is None and pool is not None and pool.wants(plan) and ctx.launch_for is None
    held = 1
    if remote:
        held = 0
        ctx.slots.withdraw(node.id)
        await pool.slots.acquire()  # a remote slot: this machine's slots stay for local tasks
    elif early is None and terminal:
        ctx.slots.withdraw(node.id)
        held = await _acquire_all(ctx, node)
    elif early is None and ctx.admit is not None:
        await _admitted(ctx, node)
    elif early is None:
        await ctx.slots.acquire(ctx.priority.get(node.id, 0), node.id)
    try:
        if early is None and ctx.halt is not None and ctx.halt.is_set():
            return None, 0, (), False
        if not remote:
            await _fetch_upstream(ctx, node)
        for attempt in range(1, total + 1):
            if attempt == 1 and early is not None:
                started = (early[0], early[1].started_at)
                proc, violations = await _run_once(ctx, node, plan, started=started)
            else:
                kept = None
                if wipe and plan.outputs is not None:
                    await _drop_loose_build_infos(ctx, node, plan)
                if wipe and plan.outputs is not None:
                    assert ctx.store is not None  # `wipe` is a task saved to a store
                    # a retry or --force starts clean
                    keep = attempt == 1 and ctx.policy.read and not remote
                    kept = await asyncio.to_thread(
                        opening.keep_or_wipe,
                        ctx.root,
                        plan.outputs,
                        ctx.store,
                        str(node.id),
                        keep,
                    )
                ctx.emit(TaskStarted(node.id, plan.command or "", attempt, terminal=terminal))
                launch = (
                    ctx.launch_for(node, plan, attempt) if ctx.launch_for and not terminal else None
                )
                proc, violations = await _run_once(
                    ctx, node, plan, launch, terminal=terminal, remote=remote
                )
            elapsed += proc.duration_ms
            if kept is not None and proc.exit_code == 0 and not proc.aborted:
                assert plan.outputs is not None  # kept only for a task with outputs
                why = await asyncio.to_thread(incremental.stale, ctx.root, plan.outputs, kept)
                if why is not None:  # a clean build could differ: build it and save that
                    ctx.emit(
                        Notice(
                            f"{node.id}: {why}; running it again on wiped outputs",
                            level="info",
                            id=node.id,
                        )
                    )
                    kept = None
                    await asyncio.to_thread(plan.outputs.wipe, ctx.root)
                    await _drop_loose_build_infos(ctx, node, plan)
                    ctx.emit(TaskStarted(node.id, plan.command or "", attempt, terminal=terminal))
                    launch = (
                        ctx.launch_for(node, plan, attempt)
                        if ctx.launch_for and not terminal
                        else None
                    )
                    proc, violations = await _run_once(ctx, node, plan, launch, terminal=terminal)
                    elapsed += proc.duration_ms
            if proc.exit_code == 0 or proc.aborted or attempt == total:
                break
            after = "a timeout" if proc.timed_out else f"exit {proc.exit_code}"
            ctx.emit(TaskRetrying(node.id, attempt + 1, total, after))
        if (
            ctx.halt_on_failure
            and ctx.halt is not None
            and proc.exit_code != 0
            and not proc.aborted
        ):
            ctx.halt.set()  # before the slot is handed to a waiter, or it would start
    finally:
        # One slot is kept through the save when a dependant outranks every waiter (the walk
        # passes it on once that dependant is queued): the next link of a chain is not
        # overtaken by a lesser task.
        ctx.slots.finish(node.id, held)
        if remote:
            pool.slots.release()
        if node.id in ctx.running:
            ctx.running.discard(node.id)
            ended, ctx.ended = ctx.ended, None
            if ended is not None:
                ended.set()  # the tasks held beside this one ask again
    return _with_duration(proc, elapsed), attempt, violations, kept is not None


async def _admitted(ctx: RunContext, node: TaskNode) -> None:
    """A slot, once the plugins' `admit` lets the task start beside the tasks now running. A
    held task gives its slot back and asks again when one of those ends; with nothing else
    running it starts, whatever the answer, so a hold never stalls the run."""
    assert ctx.admit is not None  # called only then
    while True:
        await ctx.slots.acquire(ctx.priority.get(node.id, 0), node.id)
        if not ctx.running or ctx.admit(node.id, frozenset(ctx.running)):
            ctx.running.add(node.id)
            return
        ctx.slots.release()
        if ctx.ended is None:
            ctx.ended = asyncio.Event()
        await ctx.ended.wait()


async def _acquire_all(ctx: RunContext, node: TaskNode) -> int:
    """Every slot, so the interactive task runs alone; one gatherer at a time, so two
    interactive tasks never hold half each."""
    if ctx.alone is None:
        ctx.alone = asyncio.Lock()
    async with ctx.alone:
        for _ in range(ctx.slots.size):
            await ctx.slots.acquire(ctx.priority.get(node.id, 0))
    return ctx.slots.size


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
    secrets, masker, on_output = _masked_output(ctx, node, plan)

    if remote:
        proc, violations = await _run_remote(ctx, node, plan, on_output)
    else:
        proc, violations = await _run_process(ctx, node, plan, launch, started, on_output, terminal)
    if masker is None:
        return proc, violations
    for rest in masker.flush():
        ctx.emit(TaskOutput(node.id, rest))
    return replace(
        proc,
        log=masking.mask_log(proc.log, secrets),
        spawn_error=masking.mask_text(proc.spawn_error, secrets),
    ), violations


async def _run_remote(
    ctx: RunContext, node: TaskNode, plan: TaskPlan, on_output
) -> tuple[ProcessResult, tuple[Violation, ...]]:
    """On a worker; when the server or the worker fails, here, on one of this machine's slots
    (the remote slot stays held). The plugins' `admit` is not asked for a task on a worker (it
    takes nothing of this machine's), but is before the task runs here."""
    proc = await ctx.remote_pool.execute(str(ctx.root), node, plan, ctx.plans, on_output)
    if proc is not None:
        return proc, ()
    if plan.remote == "only":  # never here, even when the server fails
        return ProcessResult(exit_code=0, duration_ms=0.0), ()
    if plan.outputs is not None:  # what a lost worker's action may have left
        await asyncio.to_thread(plan.outputs.wipe, ctx.root)
    if ctx.admit is not None:
        await _admitted(ctx, node)  # `_attempts` takes it out of `running` when it ends
    else:
        await ctx.slots.acquire(ctx.priority.get(node.id, 0))
    try:
        await _fetch_upstream(ctx, node)
        return await _run_process(ctx, node, plan, None, None, on_output)
    finally:
        ctx.slots.release()


async def _fetch_upstream(ctx: RunContext, node: TaskNode) -> None:
    """Before a task runs here: fetch the outputs upstream tasks left on the server
    (`--download`) and save each of those tasks as if it had downloaded at once."""
    pool = ctx.remote_pool
    if pool is None or not pool.listings:
        return
    async with pool.fetch_lock:
        for dep in pool.upstream(node):
            if dep not in pool.listings or dep in pool.only:
                continue
            why = await pool.materialise(str(ctx.root), dep)
            if why is not None:
                ctx.emit(
                    Notice(
                        f"{node.id}: the outputs of {dep} could not be fetched from the remote ({why})",
                        id=node.id,
                    )
                )
                continue
            unsaved = pool.unsaved.pop(dep, None)
            if unsaved is not None and ctx.policy.write and ctx.store is not None:
                await _save(ctx, pool.nodes[dep], ctx.plans[dep], *unsaved)


async def _run_process(
    ctx: RunContext,
    node: TaskNode,
    plan: TaskPlan,
    launch: executor.Launch | None,
    started,
    on_output,
    terminal: bool = False,
) -> tuple[ProcessResult, tuple[Violation, ...]]:
    cwd = ctx.root / node.project_dir
    offered = (
        ctx.offer(node, plan)
        if ctx.offer is not None
        and plan.sandbox is None
        and launch is None
        and not (node.config.exec is not None and node.config.exec.interactive)
        else None
    )
    if offered is not None:  # a plugin's executor runs it (never a sandboxed or traced task)
        try:
            proc = await offered(
                plan.command or "",
                cwd=cwd,
                env=plan.env,
                timeout_ms=plan.timeout_ms,
                on_output=on_output,
            )
            return proc, ()
        except ToolchainRefused as exc:
            # built with another toolchain than the key's: what it left goes, vx builds it here
            ctx.emit(Notice(f"{exc}: nothing of it is kept, it runs here", id=node.id))
            if plan.outputs is not None:
                await asyncio.to_thread(plan.outputs.wipe, ctx.root)
    if plan.sandbox is None:
        # A cached task's outputs are read next: nothing it started may still be writing (docs/caching.md § Save).
        proc = await (ctx.execute or executor.execute)(
            plan.command or "",
            cwd=cwd,
            env=plan.env,
            timeout_ms=plan.timeout_ms,
            on_output=on_output,
            table=ctx.table,
            launch=launch,
            started=started,
            settle_group=plan.outputs is not None,
            terminal=terminal,
        )
        if proc.stopped_strays is not None:
            ctx.emit(
                Notice(
                    f"{node.id}: processes it started in the background were still running after it "
                    f"exited; stopped them ({proc.stopped_strays}) before reading its outputs",
                    id=node.id,
                )
            )
        return proc, ()
    from vx.sandbox.runner import Session, run_sandboxed

    if ctx.sandbox is None:
        ctx.sandbox = Session(p.sandbox for p in ctx.plans.values() if p.sandbox is not None)
        ctx.sandbox.keep_accesses = ctx.observe is not None
    outcome = await run_sandboxed(
        ctx.sandbox,
        plan.sandbox,
        plan.command or "",
        cwd=cwd,
        env=plan.env,
        timeout_ms=plan.timeout_ms,
        on_output=on_output,
        table=ctx.table,
        on_note=lambda note: ctx.emit(Notice(note, level="info", id=node.id)),
    )
    if ctx.observe is not None and outcome.accesses:  # untraced: --verify says so
        ctx.observe(node.id, outcome.accesses)
    for note in outcome.notes + outcome.failure_hints:
        ctx.emit(Notice(note, level="info", id=node.id))
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
    if ctx.lock_moved is not None:
        why = f"{ctx.lock_moved} changed during the run"
        ctx.emit(Notice(f"{node.id}: not saved to the cache: {why}", id=node.id))
        return False, f"not saved: {why}"
    if node.id in ctx.tainted:  # said once per task, in the run and (via the reason) in `vx why`
        cause = f"upstream {ctx.tainted[node.id]}"
        ctx.emit(Notice(f"{node.id}: not saved to the cache: {cause}", id=node.id))
        return False, f"not saved: {cause}"
    outputs, store = plan.outputs, ctx.store
    assert outputs is not None and store is not None  # `write` held both
    moved = await asyncio.to_thread(
        ctx.index.changed_since, snapshot, outputs.input_query, started_ns
    )
    if moved:
        ctx.emit(
            Notice(
                f"{node.id}: not saved to the cache: input changed while it ran: {moved}",
                id=node.id,
            )
        )
        return False, f"not saved: input changed while it ran: {moved}"
    files, disowned = await asyncio.to_thread(outputs.walk_for_save, ctx.root)
    if disowned:
        why = (
            f"output {disowned[0]}{f' (and {len(disowned) - 1} more)' if len(disowned) > 1 else ''} is not the "
            "task's to keep: outputs never include .git, .vx, an unnamed node_modules, another project's files "
            "or the task's own inputs"
        )
        ctx.emit(Notice(f"{node.id}: not saved to the cache: {why}", id=node.id))
        return False, f"not saved: {why}"
    removed = getattr(outputs, "removed", ())
    if removed:  # a task adding to its upstream's outputs deleted one: a restore could not
        ctx.emit(
            Notice(
                f"{node.id}: not saved to the cache: it removed {removed[0]}, which it adds to",
                id=node.id,
            )
        )
        return False, f"not saved: it removed {removed[0]}"
    if not files and outputs.declares_files:
        declared = (
            *outputs.patterns,
            *(outputs.ws_globs.patterns if outputs.ws_globs is not None else ()),
        )
        ctx.emit(
            Notice(f"{node.id}: cache.outputs matched no files ({', '.join(declared)})", id=node.id)
        )
    try:
        await asyncio.to_thread(
            getattr(store, "save_local", store.save) if kept else store.save,
            plan.key,
            task_id=str(node.id),
            command=plan.command or "",
            log=proc.log,
            files=files,
            duration_ms=proc.duration_ms,
            cpu_ms=proc.cpu_ms,
            peak_rss_bytes=proc.peak_rss_bytes,
        )
    except Exception as exc:  # a refused output or a full disk is a warning, never a failed build
        from vx.errors import EnvironmentFailure
        from vx.store.archive import ArchiveError
        from vx.store.local import CacheFull

        if not isinstance(exc, (ArchiveError, OSError, EnvironmentFailure)):
            raise
        if isinstance(exc, CacheFull):  # one warning a run: every later save would say the same
            if exc.first:
                ctx.emit(
                    Notice(
                        f"{node.id}: not saved to the cache: {exc.message}; {exc.hint} "
                        "(later saves that find the disk full are dropped silently)",
                        id=node.id,
                    )
                )
        else:
            ctx.emit(Notice(f"{node.id}: not saved to the cache: {exc}", id=node.id))
        return False, f"{_STORE_REFUSED}{exc}"
    return True, None


_STORE_REFUSED = "not saved: the cache refused it: "


def _path_dirs(env: Mapping[str, str]) -> list[str]:
    return [d for d in env.get("PATH", "").split(":") if d]
