"""`vx.plugins.schedule_history`: the history order as a plugin's `schedule` hook. Ready tasks
start by the expected remaining critical path — a task's median duration over its last `window`
executed, passed runs (`vx.store.timings`) plus the longest chain of its dependents
(`vx.engine.schedule`) — with the options `window`, `assume` and `file` of the workspace's
`schedule` (docs/config.md). The same order is vx's default without the plugin; declaring it
pins the options with the plugin, as the reference spells it.

With `memory` (true: the machine's memory capped by its cgroup; or a size such as "8G") its
`admit` hook packs memory reservations against that budget: a task reserves its highest peak RSS
over the window × 1.25, in whole 64 MiB steps (`reservations` may name a size for a task or a
task name instead), and starts only while what runs leaves room; a task with nothing on record
reserves nothing.

The hook is given every task of the run before any is probed, so hits count in the chains too,
and the run history is read on every run (a workspace with plugins is never replayed). History
that cannot be read is one warning and the dependents count, never a failed run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vx.config.fields import At


def plugin(options: dict[str, Any]) -> dict[str, Any]:
    from vx.config.fields import At
    from vx.config.workspace_file import schedule_of

    at = At("vx.workspace.json").key("plugins").key("options")
    rest = {k: v for k, v in options.items() if k not in ("memory", "reservations")}
    cfg = schedule_of(rest, at)
    budget = _budget(options["memory"], at.key("memory")) if "memory" in options else None
    declared_reservations = _declared(options.get("reservations", {}), at.key("reservations"))
    declared: dict[str, Any] = {}
    reserved: dict[str, int] = {}  # task id -> bytes, for `admit`

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
        from vx.plan.graph import dependent_counts
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
        graph = TaskGraph(nodes, order, dependent_counts(nodes, order), ())
        commands = [tid(t.id) for t in tasks if t.command is not None]
        cache_dir = _cache_dir(ctx, declared)
        if budget is not None:
            _reserve(reserved, cache_dir, commands, cfg.window, declared_reservations, ctx)
        weights, warning = timings.expected(cache_dir, str(ctx.root), cfg, commands)
        if warning is not None:
            ctx.warn(warning)
        if not weights:
            return None  # nothing known: the dependents count
        return {str(t): p for t, p in priorities(graph, order, weights).items()}

    def admit(task, running, ctx) -> bool:
        """Start a task only while the reservations of what runs leave room for its own."""
        if budget is None:
            return True
        need = reserved.get(task.id, 0)
        return timings.admits(need, [reserved.get(r, 0) for r in running], budget)

    from vx.store import timings

    hooks: dict[str, Any] = {"config": config, "schedule": schedule}
    if budget is not None:
        hooks["admit"] = admit
    return hooks


def _budget(value: Any, at: At) -> int:
    """`memory`: true packs against the machine's memory (capped by its cgroup), a size such as
    "8G" against that much."""
    from vx.plan.environment import memory_budget
    from vx.store.pruning import parse_size

    if value is True:
        return memory_budget()
    size = parse_size(value) if isinstance(value, str) else "not a size"
    if isinstance(size, str):
        at.refuse(
            f"`memory` must be true or a size, got {value!r} ({size})",
            hint='e.g. "memory": true (the machine\'s memory) or "memory": "8G"',
        )
    return size


def _declared(value: Any, at: At) -> dict[str, int]:
    """`reservations`: {"PKG#TASK" or "TASK": size} that stand in for what the record says."""
    from vx.config.fields import as_object
    from vx.store.pruning import parse_size

    out: dict[str, int] = {}
    for name, text in as_object(value, at).items():
        size = parse_size(text) if isinstance(text, str) else "not a size"
        if isinstance(size, str):
            at.key(name).refuse(
                f"a reservation must be a size, got {text!r} ({size})", hint='e.g. "2G", "512MB"'
            )
        out[name] = size
    return out


def _reserve(reserved, cache_dir, commands, window, declared, ctx) -> None:
    """Fill `reserved` for the run's commands: a declared reservation, else the record's."""
    from vx.store import timings

    try:
        found = timings.reservations(cache_dir, commands, window)
    except Exception as exc:  # sqlite3.Error, OSError: nothing reserved, nothing held
        ctx.warn(f"no memory reservations from the run history ({exc}): tasks are not held")
        found = {}
    for t in commands:
        need = declared.get(str(t), declared.get(t.task, found.get(t)))
        if need is not None:
            reserved[str(t)] = need


def _cache_dir(ctx, declared: dict[str, Any]) -> str:
    """The workspace's cache dir as a run finds it without `--cache-dir`: `cacheDir` >
    VX_CACHE_DIR > `<root>/.vx/cache` (`vx.store.location`)."""
    named = declared.get("cacheDir") if isinstance(declared.get("cacheDir"), str) else None
    if named:
        return os.path.abspath(os.path.join(ctx.root, os.path.expanduser(named)))
    if ctx.env.get("VX_CACHE_DIR"):
        return os.path.abspath(os.path.expanduser(ctx.env["VX_CACHE_DIR"]))
    return os.path.join(ctx.root, ".vx", "cache")
