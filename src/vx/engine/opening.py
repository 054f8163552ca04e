"""A task's opening: what comes before the command of its first attempt runs.

Its inputs' snapshot (the save re-checks them against it), a tsc build info outside its outputs
removed (engine/incremental.py), its outputs kept for an incremental tool or wiped, then its
start told. `begin` takes these steps and starts the process with no event loop: the first wave
(fastpath/firstwave.py). The rebuilder takes the same steps on its worker threads, and starts
the command through its executor (plain, sandboxed, wrapped, on a worker or a plugin's).

Loaded before asyncio on a run that executes a task: it imports only leaves at its top.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from vx.events import Emit, Notice, TaskStarted
from vx.proc import spawn

if TYPE_CHECKING:
    from pathlib import Path

    from vx.engine.incremental import Kept
    from vx.files.index import FileIndex, Snapshot
    from vx.files.outputs import OutputSpec
    from vx.model import TaskId, TaskNode, TaskPlan
    from vx.store.protocol import Store

    # a first attempt started before the walk: its inputs' snapshot and kept outputs
    First = spawn.Started[Snapshot | None, Kept | None]


def snapshot(index: FileIndex, node: TaskNode, plan: TaskPlan) -> Snapshot:
    """The task's inputs as it starts: its save is withheld when one moved while it ran. Its
    package.json is one of them unless the task declares it as an output (a build that rewrites
    it): then the key holds the manifest it started from and the entry the one it wrote."""
    assert plan.record is not None  # every planned task with outputs has its key's record
    outputs = plan.outputs
    writes = outputs is not None and outputs.allows(outputs.manifest)
    manifest = None if writes else plan.record.package_json
    return index.task_snapshot(plan.inputs, node.project_dir, manifest)


def keep_or_wipe(
    root: Path,
    outputs: OutputSpec,
    store: Store[Any],
    task_id: str,
    keep: bool,
    spare_since_ns: int | None = None,
    command: str = "",
) -> Kept | None:
    """With `keep`, leave the outputs in place for an incremental tool where
    `incremental.prepare` may, and return what they were; otherwise (or when it may not) wipe
    them and return None. A wipe spares what changed since `spare_since_ns` (the run's start:
    other tasks' writes, `OutputSpec.wipe`). `command` is the task's, whose tsconfigs tell what
    a kept build info may be dated to."""
    if keep:
        from vx.engine import incremental

        return incremental.prepare(root, outputs, store, task_id, spare_since_ns, command)
    outputs.wipe(root, spare_since_ns)
    return None


def begin(
    root: Path,
    node: TaskNode,
    plan: TaskPlan,
    index: FileIndex,
    emit: Emit,
    early: dict[TaskId, First],
    *,
    store: Store[Any] | None,
    keep: bool,
) -> bool:
    """Open the task and start its command, as its first attempt; whether it started (a command
    that cannot start is left to the walk, which says why). `store` is where its result will be
    saved: None keeps its outputs as they are and takes no snapshot. `keep` lets its outputs
    stay for an incremental tool (not under --force). The process goes into `early` before its
    start is told, so whatever fails after the spawn leaves it with the caller to stop."""
    outputs = plan.outputs if store is not None else None
    taken = None
    if outputs is not None:
        taken = snapshot(index, node, plan)
    started_ns = time.time_ns()
    kept = None
    if outputs is not None:
        assert store is not None  # outputs are opened only for a store
        from vx.engine import incremental

        note = incremental.remove_loose_build_infos(root, outputs, plan.command or "", str(node.id))
        if note is not None:
            emit(Notice(note, id=node.id))
        kept = keep_or_wipe(
            root, outputs, store, str(node.id), keep, index.started_ns, plan.command or ""
        )
    started_at = time.monotonic()
    try:
        popen = spawn.start(plan.command or "", root / node.project_dir, plan.env)
    except (OSError, ValueError):
        return False
    early[node.id] = spawn.Started(popen, started_at, started_ns, taken, kept)
    emit(TaskStarted(node.id, plan.command or "", 1))
    return True
