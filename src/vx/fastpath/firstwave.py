"""The first wave: the commands the walk would start first, started before asyncio is loaded, so
that loading it overlaps them (docs/optimizations.md #25); and asyncio's import without `ssl`
(#24), paid by every run that executes a task.

Only plain misses qualify: every dependency settled by the hit lane, no sandbox, no remote that
might still serve them, at most `concurrency` of them, in the walk's order. Each is opened as the
rebuilder opens a first attempt (engine/opening.py) and the walk adopts the processes. With the
lane off (VX_FASTPATH=0) the walk starts them itself: the result is the same.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any, Mapping

from vx.model import Status

if TYPE_CHECKING:
    from pathlib import Path

    from vx.engine.opening import First
    from vx.events import Emit
    from vx.files.index import FileIndex
    from vx.model import TaskGraph, TaskId, TaskPlan, TaskResult
    from vx.store.protocol import Store


def start(
    graph: TaskGraph,
    plans: Mapping[TaskId, TaskPlan],
    hits: Mapping[str, Any],
    settled: Mapping[TaskId, TaskResult],
    priority: Mapping[TaskId, int],
    early: dict[TaskId, First],
    *,
    root: Path,
    index: FileIndex,
    store: Store[Any] | None,
    keep: bool,
    width: int,
    emit: Emit,
) -> None:
    """Start up to `width` ready misses (dependencies all in `settled`), highest `priority` first,
    then the graph's order. `store` is where results are saved (None: outputs left as they are)
    and `keep` lets outputs stay for an incremental tool. Fills `early` as each starts, so that
    what started before a failure (an output that cannot be wiped) is still the caller's to
    stop."""
    from vx.engine.opening import begin

    nodes = graph.nodes
    position = {tid: i for i, tid in enumerate(graph.order)}
    ready = sorted(
        (t for t, n in nodes.items() if t not in settled and all(d in settled for d in n.deps)),
        key=lambda t: (-priority[t], position[t]),
    )
    for tid in ready:
        node, plan = nodes[tid], plans[tid]
        if len(early) == width:
            break
        if (
            node.is_group
            or plan.sandbox is not None
            or plan.remote == "only"  # never here
            or (plan.outputs is not None and plan.key in hits)
        ):
            continue
        if node.exec.persistent is not None or node.exec.interactive:
            continue  # a held stdin, readiness, or the terminal: the walk starts those
        if any(settled[d].status is not Status.SUCCESS for d in node.deps):
            continue
        begin(root, node, plan, index, emit, early, store=store, keep=keep)


def stop(early: dict[TaskId, First]) -> None:
    """Kill and reap first-wave processes no walk adopted (the run failed before it could), with
    what they started outside their groups, and release each as the executor does once nothing
    of it runs: its cgroup goes, and the warden forgets its group, whose number may be reused."""
    if not early:
        return
    from vx.proc import descendants, spawn
    from vx.proc.executor import REAP_AFTER_KILL_S, group_alive

    for started in early.values():
        popen = started.popen
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        descendants.signal_all(popen.pid, signal.SIGKILL)
        popen.wait()
        deadline = time.monotonic() + REAP_AFTER_KILL_S
        while group_alive(popen.pid) or descendants.alive(popen.pid):
            if time.monotonic() >= deadline:
                break  # still dying: the warden keeps the group and kills the cgroup at exit
            time.sleep(0.01)
            descendants.signal_all(popen.pid, signal.SIGKILL)  # forked before the kill landed
        else:
            spawn.released(popen.pid)
            descendants.forget(popen.pid)
    early.clear()


def import_asyncio():
    """`import asyncio` without it loading `ssl`, paid by every run that executes a task
    (docs/optimizations.md #24).

    asyncio imports ssl only to offer TLS on its own transports, and treats a missing module as
    a Python built without it (`ssl = None` in base_events, selector_events, sslproto). vx never
    asks asyncio for TLS: the remote cache speaks it through http.client, which imports ssl
    itself — and can, because the stand-in is taken out again at once. Where ssl or asyncio is
    already loaded (a remote layer opened first), or another thread runs (it could be importing
    ssl at that moment), this is a plain import.
    """
    import sys

    threading = sys.modules.get("threading")
    # another thread might import ssl meanwhile
    others = threading is not None and threading.active_count() > 1
    if others or "asyncio" in sys.modules or "ssl" in sys.modules:
        import asyncio

        return asyncio
    sys.modules["ssl"] = None  # type: ignore[assignment]  # `import ssl` now raises ImportError
    try:
        import asyncio
    finally:
        if "ssl" in sys.modules and sys.modules["ssl"] is None:
            del sys.modules["ssl"]
    return asyncio
