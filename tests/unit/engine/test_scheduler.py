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
    assert len(res) == 3 and all(r.status is Status.SUCCESS for r in res.values())


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


def test_a_stop_before_the_walk_still_takes_over_the_tasks_already_started():
    """The first wave's tasks run before the walk: a stop that came first still dispatches them
    (their rebuild adopts and ends the process, a stopped task), and nothing else."""
    g = graph({"a": [], "b": [], "c": ["a"]})
    stop = asyncio.Event()
    stop.set()
    rebuilt = []

    async def rebuild(node, results):
        rebuilt.append(node.id.task)
        return TaskResult(node.id, Status.ABORTED, CacheStatus.MISS, attempts=1)

    res = run(g, rebuild=rebuild, stop=stop, started={TaskId("p", "a")})
    assert rebuilt == ["a"] and res[TaskId("p", "a")].attempts == 1
    assert [res[TaskId("p", t)].reason for t in "bc"] == ["not run: the run was stopped"] * 2


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


def slotted_walk(edges, priority, hits=()):
    """Walk with one slot: each task takes it, ends its process (`finish`), then saves; a hit
    gives its place back. The order the tasks got the slot in."""
    g = graph(edges, priority=priority)
    slots, order = PrioritySlots(1), []

    async def rebuild(node, results):
        if node.id.task in hits:
            slots.withdraw(node.id)  # a hit: it never asks
            order.append(node.id.task)
            return TaskResult(node.id, Status.SUCCESS, CacheStatus.LOCAL)
        await slots.acquire(g.priority[node.id], node.id)
        order.append(node.id.task)
        await asyncio.sleep(0)  # its process runs
        slots.finish(node.id, 1)
        await asyncio.sleep(0)  # its save, after the process ended
        return TaskResult(node.id, Status.SUCCESS, CacheStatus.MISS)

    res = run(g, rebuild=rebuild, slots=slots)
    assert all(r.status is Status.SUCCESS for r in res.values())
    assert slots._free == 1 and slots.ahead is None  # every slot given back
    return order


@pytest.mark.feature("GR-08")
def test_a_finished_tasks_slot_waits_for_a_dependant_that_outranks_every_waiter():
    """b (rank 5) gets the slot a ends with, though u (rank 0) asked long before and b is ready
    only after a's save; a hit made ready beside b (rank 7) is handed it first and passes it on."""
    edges = {"a": [], "b": ["a"], "u": [], "hit": ["a"]}
    order = slotted_walk(edges, {"a": 9, "b": 5, "hit": 7}, hits={"hit"})
    assert order == ["a", "hit", "b", "u"]


@pytest.mark.feature("GR-08")
def test_a_finished_tasks_slot_passes_at_once_to_a_waiter_that_outranks_its_dependants():
    """u (rank 6) outranks a's dependant b (rank 5): it gets the slot as a's process ends,
    without waiting for a's save."""
    assert slotted_walk({"a": [], "b": ["a"], "u": []}, {"a": 9, "u": 6, "b": 5}) == ["a", "u", "b"]


@pytest.mark.feature("GR-19")
def test_an_interactive_task_gathers_every_slot_before_it_starts():
    """It waits for every running task to give its slot back, and a task asking after it waits
    until it is done: it runs alone."""
    from types import SimpleNamespace

    from vx.engine.rebuilder import _acquire_all

    async def main() -> None:
        slots = PrioritySlots(2)
        ctx = SimpleNamespace(
            services=SimpleNamespace(slots=slots),
            state=SimpleNamespace(alone=None),
            config=SimpleNamespace(priority={}),
        )
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


@pytest.mark.feature("CLI-56")
def test_a_stop_starts_none_of_the_tasks_waiting_for_a_slot():
    """Two slots, four tasks: the stop comes while two run and two wait. The two running end
    aborted as the stop ends them and free their slots; the two waiting see the halt when they
    get a slot (as the rebuilder checks it) and end not started, never run."""
    g = graph({"a": [], "b": [], "c": [], "d": []})
    stop, halt = asyncio.Event(), asyncio.Event()
    started: list[str] = []

    async def main():
        slots = PrioritySlots(2)
        running = asyncio.Event()

        async def rebuild(node, results):
            await slots.acquire(0, node.id)
            try:
                if halt.is_set():  # as the rebuilder does once it holds a slot
                    return TaskResult(node.id, Status.SKIPPED, CacheStatus.NO_CACHE)
                started.append(node.id.task)
                if len(started) == 2:
                    running.set()
                await stop.wait()
                return TaskResult(
                    node.id, Status.ABORTED, CacheStatus.MISS, exit_code=130, attempts=1
                )
            finally:
                slots.release()

        async def ctrl_c():
            await running.wait()
            stop.set()

        stopper = asyncio.ensure_future(ctrl_c())
        res = await walk(g, rebuild=rebuild, stop=stop, halt=halt, slots=slots)
        await stopper
        return res

    res = asyncio.run(main())
    assert sorted(started) == ["a", "b"]
    stopped = {t.task for t, r in res.items() if r.attempts == 1}
    never = {t.task for t, r in res.items() if r.attempts == 0}
    assert stopped == {"a", "b"} and never == {"c", "d"}
    assert all(r.status is Status.ABORTED for r in res.values())
    assert {res[TaskId("p", t)].reason for t in never} == {"not run: the run was stopped"}
