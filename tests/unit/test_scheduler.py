"""The walk: dependency order, priority, --continue modes, slots (GR-08, GR-10). No processes."""

import asyncio
import json

import pytest

from vx.engine.scheduler import PrioritySlots, walk
from vx.model import (
    CacheStatus,
    ExecConfig,
    Status,
    TaskConfig,
    TaskGraph,
    TaskId,
    TaskNode,
    TaskResult,
)


def graph(edges: dict[str, list[str]], priority=None) -> TaskGraph:
    nodes = {}
    for name, deps in edges.items():
        tid = TaskId("p", name)
        cfg = TaskConfig(name, json.dumps(name), ExecConfig("true"), tuple(deps))
        nodes[tid] = TaskNode(tid, cfg, "p", tuple(TaskId("p", d) for d in deps))
    order, seen = [], set()

    def visit(t):
        if t in seen:
            return
        seen.add(t)
        for d in nodes[t].deps:
            visit(d)
        order.append(t)

    for t in sorted(nodes):
        visit(t)
    prio = {t: (priority or {}).get(t.task, 0) for t in nodes}
    return TaskGraph(nodes, tuple(order), prio, tuple(nodes))


def fake_rebuild(fail=(), log=None):
    async def rebuild(node, results):
        for dep in node.deps:
            assert dep in results, f"{node.id} started before {dep}"
        if log is not None:
            log.append(node.id.task)
        await asyncio.sleep(0)
        status = Status.FAILED if node.id.task in fail else Status.SUCCESS
        return TaskResult(node.id, status, CacheStatus.MISS)

    return rebuild


def run(g, **kw):
    return asyncio.run(walk(g, **kw))


def test_dependencies_finish_before_dependants():
    g = graph({"a": [], "b": ["a"], "c": ["a", "b"]})
    res = run(g, rebuild=fake_rebuild())
    assert all(r.status is Status.SUCCESS for r in res.values())


@pytest.mark.feature("GR-08")
def test_ready_tasks_start_by_priority():
    log = []
    g = graph({"low": [], "high": [], "mid": []}, priority={"high": 5, "mid": 2})
    run(g, rebuild=fake_rebuild(log=log))
    assert log == ["high", "mid", "low"]


@pytest.mark.feature("GR-10", "CLI-56")
def test_deps_ok_skips_dependants_and_names_root_failure():
    g = graph({"a": [], "b": ["a"], "c": ["b"], "side": []})
    res = run(g, rebuild=fake_rebuild(fail={"a"}))
    assert res[TaskId("p", "b")].status is Status.SKIPPED
    assert res[TaskId("p", "c")].blocked_by == TaskId("p", "a")
    assert res[TaskId("p", "side")].status is Status.SUCCESS


@pytest.mark.feature("GR-10")
def test_always_runs_dependants():
    g = graph({"a": [], "b": ["a"]})
    res = run(g, rebuild=fake_rebuild(fail={"a"}), continue_mode="always")
    assert res[TaskId("p", "b")].status is Status.SUCCESS


@pytest.mark.feature("GR-10")
def test_never_stops_dispatch_after_first_failure():
    g = graph({"a": [], "x": [], "b": ["x"]}, priority={"a": 9})
    res = run(g, rebuild=fake_rebuild(fail={"a"}), continue_mode="never")
    assert res[TaskId("p", "b")].status is Status.SKIPPED
    assert "--continue=never" in res[TaskId("p", "b")].reason


@pytest.mark.feature("EX-16")
def test_stop_event_aborts_unstarted():
    g = graph({"a": [], "b": ["a"]})
    stop = asyncio.Event()

    async def rebuild(node, results):
        stop.set()
        return TaskResult(node.id, Status.ABORTED, CacheStatus.MISS)

    res = run(g, rebuild=rebuild, stop=stop)
    assert res[TaskId("p", "b")].status is Status.ABORTED


def test_priority_slots_bound_and_order():
    async def main():
        slots = PrioritySlots(1)
        order, running, peak = [], 0, 0

        async def job(name, prio):
            nonlocal running, peak
            await slots.acquire(prio)
            running += 1
            peak = max(peak, running)
            order.append(name)
            await asyncio.sleep(0)
            running -= 1
            slots.release()

        await slots.acquire(0)  # hold the only slot while the others queue
        jobs = [asyncio.create_task(job(n, p)) for n, p in (("low", 1), ("high", 9), ("mid", 5))]
        await asyncio.sleep(0)
        slots.release()
        await asyncio.gather(*jobs)
        return order, peak

    order, peak = asyncio.run(main())
    assert order == ["high", "mid", "low"] and peak == 1


@pytest.mark.feature("GR-08")
def test_a_finished_tasks_slot_goes_to_its_dependant_when_it_ranks_higher():
    """The slot a task ends with passes on after the walk queued the dependants its end made
    ready: b (rank 5) gets a's slot, though u (rank 0) asked long before; a hit made ready
    beside b (rank 7) is handed the slot first and passes it on, as it never asks."""
    g = graph({"a": [], "b": ["a"], "u": [], "hit": ["a"]}, priority={"a": 9, "b": 5, "hit": 7})
    slots, order = PrioritySlots(1), []

    async def rebuild(node, results):
        if node.id.task == "hit":
            slots.withdraw(node.id)  # a hit: it never asks
            order.append("hit")
            return TaskResult(node.id, Status.SUCCESS, CacheStatus.LOCAL)
        await slots.acquire(0, node.id)
        order.append(node.id.task)
        await asyncio.sleep(0)  # its process runs, then its save
        slots.finish(node.id, 1)
        await asyncio.sleep(0)
        return TaskResult(node.id, Status.SUCCESS, CacheStatus.MISS)

    res = run(g, rebuild=rebuild, slots=slots)
    assert all(r.status is Status.SUCCESS for r in res.values())
    assert order == ["a", "hit", "b", "u"] and slots._free == 1 and not slots.walked


@pytest.mark.feature("GR-19")
def test_an_interactive_task_gathers_every_slot_before_it_starts():
    """It waits for every running task to give its slot back, and a task asking after it waits
    until it is done: it runs alone."""
    from types import SimpleNamespace

    from vx.engine.rebuilder import _acquire_all

    async def main() -> None:
        slots = PrioritySlots(2)
        ctx = SimpleNamespace(slots=slots, alone=None, priority={})
        await slots.acquire(0)  # another task is running
        gather = asyncio.ensure_future(_acquire_all(ctx, SimpleNamespace(id=TaskId("a", "ask"))))
        for _ in range(20):  # no I/O anywhere: the loop runs everything that can run
            await asyncio.sleep(0)
        assert not gather.done()
        later = asyncio.ensure_future(slots.acquire(0))
        slots.release()  # the running task ends
        assert await gather == 2
        for _ in range(20):
            await asyncio.sleep(0)
        assert not later.done()  # nothing starts beside it
        slots.release()
        slots.release()
        await later

    asyncio.run(main())
