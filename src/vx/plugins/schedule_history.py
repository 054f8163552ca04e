"""`vx.plugins.schedule_history`: the history order as a plugin's `schedule` hook. Ready tasks
start by the expected remaining critical path — a task's median duration over its last `window`
executed, passed runs (`vx.store.timings`) plus the longest chain of its dependents
(`vx.engine.schedule`) — with the options `window`, `assume` and `file` of the workspace's
`schedule` (docs/config.md). The same order is vx's default without the plugin; declaring it
pins the options with the plugin, as the reference spells it.

The hook is given every task of the run before any is probed, so hits count in the chains too,
and the run history is read on every run (a workspace with plugins is never replayed). History
that cannot be read is one warning and the dependents count, never a failed run.
"""

from __future__ import annotations

import os
from typing import Any


def plugin(options: dict[str, Any]) -> dict[str, Any]:
    from vx.config.fields import At
    from vx.config.workspace_file import _schedule

    cfg = _schedule(options, At("vx.workspace.json").key("plugins").key("options"))
    declared: dict[str, Any] = {}

    def config(ws: dict[str, Any], ctx) -> dict[str, Any] | None:
        declared["cacheDir"] = ws.get("cacheDir")  # where runs.db is, as the run will find it
        if cfg.file is None or not isinstance(ws.get("schedule", {}), dict):
            return None
        # the run writes the timings file at its end, as for the workspace's own `schedule.file`
        ws["schedule"] = {**ws.get("schedule", {}), "file": cfg.file, "window": cfg.window}
        return ws

    def schedule(tasks, ctx) -> dict[str, int] | None:
        from vx.engine.schedule import priorities
        from vx.model import TaskConfig, TaskGraph, TaskId, TaskNode
        from vx.plan.graph import _dependent_counts
        from vx.store import timings

        def tid(name: str) -> TaskId:
            project, _, task = name.rpartition("#")
            return TaskId(project, task)

        nodes = {
            tid(t.id): TaskNode(
                tid(t.id), TaskConfig(t.task, "", None, ()), t.dir, tuple(tid(d) for d in t.deps)
            )
            for t in tasks
        }
        order = tuple(tid(t.id) for t in tasks)  # the run's order: dependencies first
        graph = TaskGraph(nodes, order, _dependent_counts(nodes, order), ())
        commands = [tid(t.id) for t in tasks if t.command is not None]
        weights, warning = timings.expected(_cache_dir(ctx, declared), str(ctx.root), cfg, commands)
        if warning is not None:
            ctx.warn(warning)
        if not weights:
            return None  # nothing known: the dependents count
        return {str(t): p for t, p in priorities(graph, order, weights).items()}

    return {"config": config, "schedule": schedule}


def _cache_dir(ctx, declared: dict[str, Any]) -> str:
    """The workspace's cache dir as a run finds it without `--cache-dir`: `cacheDir` >
    VX_CACHE_DIR > `<root>/.vx/cache` (`vx.store.location`)."""
    named = declared.get("cacheDir") if isinstance(declared.get("cacheDir"), str) else None
    if named:
        return os.path.abspath(os.path.join(ctx.root, os.path.expanduser(named)))
    if ctx.env.get("VX_CACHE_DIR"):
        return os.path.abspath(os.path.expanduser(ctx.env["VX_CACHE_DIR"]))
    return os.path.join(ctx.root, ".vx", "cache")
