"""Which ready task gets a slot first. The scheduler serves the highest priority; by default a
task's priority is the count of its transitive dependents (`TaskGraph.priority`). Given expected
durations it is the expected remaining critical path instead: the task's own duration plus the
longest chain of its dependents still to run, so the task the run's end waits on starts first.

`Weights` is the whole interface: anything that maps the tasks still to run to expected
durations in ms (the run history does: `vx.store.timings`). An empty answer keeps the default.
Pure and cheap: planning imports it, the warm path never calls it.
"""

from __future__ import annotations

from typing import Callable, Collection, Mapping

from vx.model import TaskGraph, TaskId

Weights = Callable[[TaskGraph, Collection[TaskId]], Mapping[TaskId, float]]


def critical_path(
    graph: TaskGraph, pending: Collection[TaskId], weights: Mapping[TaskId, float]
) -> dict[TaskId, float]:
    """Each pending task's own expected ms plus the longest chain of its pending dependents. A
    task's dependents are pending whenever it is (a task settles only after its dependencies),
    so the chain never leaves `pending`. A task without a weight counts as 0."""
    below: dict[TaskId, list[TaskId]] = {t: [] for t in pending}
    for tid in pending:
        for dep in graph.nodes[tid].deps:
            if dep in below:
                below[dep].append(tid)
    path: dict[TaskId, float] = {}
    for tid in reversed(graph.order):  # dependents before their dependencies
        if tid in below:
            chain = max((path[c] for c in below[tid]), default=0.0)
            path[tid] = max(0.0, weights.get(tid, 0.0)) + chain
    return path


def priorities(
    graph: TaskGraph, pending: Collection[TaskId], weights: Mapping[TaskId, float]
) -> Mapping[TaskId, int]:
    """The scheduler's priorities from expected durations: the critical path in whole ms, ties
    going to the task with more dependents (then graph order, as the scheduler breaks them).
    Every task ranks above its dependents, as the default does: the dependents count alone is
    strictly greater for a dependency, and its path is at least as long. Without weights, the
    default."""
    if not weights:
        return graph.priority
    path = critical_path(graph, pending, weights)
    scale = len(graph.nodes) + 1  # above any dependents count
    return {t: int(-(-path[t] // 1)) * scale + graph.priority[t] for t in path}
