"""Ordering ready tasks by expected remaining critical path (the schedule-history item): the
path computation, the priorities the scheduler takes, and the durations read from the record.
No processes."""

import asyncio
import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vx.engine.schedule import critical_path, priorities
from vx.engine.scheduler import PrioritySlots, walk
from vx.model import (
    CacheStatus,
    ExecConfig,
    ScheduleConfig,
    Status,
    TaskConfig,
    TaskGraph,
    TaskId,
    TaskNode,
    TaskResult,
)
from vx.plan.graph import dependent_counts
from vx.store import runs, timings


def graph(edges: dict[str, list[str]]) -> TaskGraph:
    """Tasks of one project, `name -> its dependencies`; order by name, dependencies first."""
    nodes = {}
    for name, deps in edges.items():
        tid = TaskId("p", name)
        cfg = TaskConfig(name, json.dumps(name), ExecConfig("true"), tuple(deps))
        nodes[tid] = TaskNode(tid, cfg, "p", tuple(TaskId("p", d) for d in deps))
    order: list[TaskId] = []
    seen: set[TaskId] = set()

    def visit(t):
        if t not in seen:
            seen.add(t)
            for d in nodes[t].deps:
                visit(d)
            order.append(t)

    for t in sorted(nodes):
        visit(t)
    return TaskGraph(nodes, tuple(order), dependent_counts(nodes, tuple(order)), tuple(nodes))


def t(name: str) -> TaskId:
    return TaskId("p", name)


@pytest.mark.feature("PL-12")
def test_a_path_is_its_own_duration_plus_the_longest_chain_below():
    g = graph({"a": [], "b": ["a"], "c": ["a"], "d": ["c"]})
    w = {t("a"): 1.0, t("b"): 10.0, t("c"): 2.0, t("d"): 3.0}
    path = critical_path(g, g.order, w)
    assert path == {t("a"): 11.0, t("b"): 10.0, t("c"): 5.0, t("d"): 3.0}


@pytest.mark.feature("PL-12")
def test_only_tasks_still_to_run_count():
    """A dependent that is not pending (settled, or cut from the run) adds nothing."""
    g = graph({"a": [], "b": ["a"], "c": []})
    w = {t("a"): 1.0, t("b"): 50.0, t("c"): 1.0}
    assert critical_path(g, [t("a"), t("c")], w) == {t("a"): 1.0, t("c"): 1.0}


@pytest.mark.feature("PL-12")
def test_a_slow_leaf_outranks_a_task_with_many_fast_dependents():
    """Where the dependents count picks badly: `hub` has three dependents, `slow` none."""
    g = graph({"hub": [], "x": ["hub"], "y": ["hub"], "z": ["hub"], "slow": []})
    assert g.priority[t("hub")] > g.priority[t("slow")]  # today's order
    w = {t("hub"): 10.0, t("x"): 10.0, t("y"): 10.0, t("z"): 10.0, t("slow"): 1000.0}
    prio = priorities(g, g.order, w)
    assert prio[t("slow")] > prio[t("hub")]


@pytest.mark.feature("PL-12")
def test_no_weights_keep_the_dependents_count():
    g = graph({"a": [], "b": ["a"]})
    assert priorities(g, g.order, {}) is g.priority


@pytest.mark.feature("PL-12")
def test_equal_paths_go_to_the_task_with_more_dependents():
    g = graph({"a": [], "b": ["a"], "c": []})
    w = {t("a"): 0.0, t("b"): 5.0, t("c"): 5.0}  # a's path 5 = c's path 5
    prio = priorities(g, g.order, w)
    assert prio[t("a")] > prio[t("c")]


@st.composite
def weighted_graphs(draw):
    n = draw(st.integers(1, 12))
    edges = {
        f"t{i}": [f"t{j}" for j in draw(st.sets(st.integers(0, i - 1))) if i] if i else []
        for i in range(n)
    }
    g = graph(edges)
    weights = {
        tid: draw(st.floats(0, 1e6, allow_nan=False))
        for tid in g.order
        if draw(st.booleans())  # some tasks have no weight
    }
    pending = [tid for tid in g.order if draw(st.booleans())]
    # keep pending closed under dependents, as a run's unsettled tasks are
    closed = set(pending)
    for tid in g.order:
        if any(d in closed for d in g.nodes[tid].deps):
            closed.add(tid)
    return g, weights, [tid for tid in g.order if tid in closed]


@pytest.mark.feature("PL-12")
@settings(max_examples=200, deadline=None)
@given(weighted_graphs())
def test_the_ordering_is_a_valid_topological_priority(case):
    """Every task ranks strictly above each dependent: a dependency is never left behind its
    dependents, whatever the durations say."""
    g, weights, pending = case
    prio = priorities(g, pending, weights)
    for tid in pending:
        for dep in g.nodes[tid].deps:
            if dep in pending:
                assert prio[dep] > prio[tid]


@pytest.mark.feature("PL-12")
@settings(max_examples=100, deadline=None)
@given(weighted_graphs())
def test_the_path_is_the_longest_chain_of_weights(case):
    """Checked against a brute-force walk of every chain from the task down."""
    g, weights, pending = case
    below = {tid: [c for c in pending if tid in g.nodes[c].deps] for tid in pending}

    def longest(tid):
        return max(0.0, weights.get(tid, 0.0)) + max((longest(c) for c in below[tid]), default=0.0)

    path = critical_path(g, pending, weights)
    for tid in pending:
        assert path[tid] == pytest.approx(longest(tid))


@pytest.mark.feature("PL-12")
def test_the_walk_serves_the_priorities_it_is_given():
    """One slot: ready tasks start by the priorities passed to the walk, not the graph's."""
    g = graph({"hub": [], "x": ["hub"], "slow": []})
    w = {t("hub"): 1.0, t("x"): 1.0, t("slow"): 100.0}
    assert start_order(g, priorities(g, g.order, w), width=1) == ["slow", "hub", "x"]


def start_order(g, prio, width: int, walk_slots: bool = False) -> list[str]:
    """The order the walk starts `g`'s tasks in on `width` slots ranked by `prio`; with
    `walk_slots` the walk holds the slots too, as the pipeline's does."""
    started: list[str] = []

    async def main():
        slots = PrioritySlots(width)

        async def rebuild(node, results):
            await slots.acquire(prio[node.id])
            try:
                started.append(node.id.task)
                await asyncio.sleep(0)
            finally:
                slots.release()
            return TaskResult(node.id, Status.SUCCESS, CacheStatus.MISS)

        return await walk(g, rebuild, priority=prio, slots=slots if walk_slots else None)

    asyncio.run(main())
    return started


# ---------------------------------------------------------------- durations on record


def history(tmp_path, rows):
    """A runs.db holding `rows` of (project, task, status, duration_ms), oldest first."""
    db = runs.connect(str(tmp_path))
    db.executemany(
        f"INSERT INTO runs ({','.join(runs.RUN_COLUMNS)}) VALUES ({','.join('?' * len(runs.RUN_COLUMNS))})",
        [
            [
                "r",
                project,
                task,
                "",
                status,
                "miss",
                0,
                ms,
                None,
                None,
                1,
                0,
                0,
                0,
                None,
                None,
                0,
                None,
            ]
            for project, task, status, ms in rows
        ],
    )
    db.close()


@pytest.mark.feature("PL-12")
def test_the_expected_duration_is_the_median_of_the_window(tmp_path):
    history(
        tmp_path,
        [("p", "a", "success", ms) for ms in (1000, 1, 2, 3)]  # the 1000 falls out of a window of 3
        + [("p", "a", "failed", 5000), ("p", "a", "cache-hit", 9000)],  # neither counts
    )
    found = timings.recorded(str(tmp_path), [t("a"), t("b")], 3)
    assert found == {t("a"): 2.0}


@pytest.mark.feature("PL-12")
def test_assume_seeds_what_nothing_recorded_knows(tmp_path):
    history(tmp_path, [("p", "a", "success", 10.0)])
    cfg = ScheduleConfig(assume={"p#b": 700, "c": 300, "a": 99999})
    weights, warning = timings.expected(
        str(tmp_path), str(tmp_path), cfg, [t("a"), t("b"), t("c"), t("d")]
    )
    assert warning is None
    # the record beats assume; a task known to neither counts as the median of what was measured
    assert weights == {t("a"): 10.0, t("b"): 700.0, t("c"): 300.0, t("d"): 10.0}


@pytest.mark.feature("PL-12")
def test_nothing_known_means_no_weights(tmp_path):
    assert timings.expected(str(tmp_path), str(tmp_path), ScheduleConfig(), [t("a")]) == ({}, None)


@pytest.mark.feature("PL-12")
def test_history_off_reads_nothing(tmp_path):
    (tmp_path / runs.DB_NAME).write_bytes(b"not a database at all" * 100)
    cfg = ScheduleConfig(history=False, assume={"a": 5})
    assert timings.expected(str(tmp_path), str(tmp_path), cfg, [t("a")]) == ({}, None)


@pytest.mark.feature("PL-12")
def test_a_damaged_history_is_one_warning_and_left_for_the_record_to_replace(tmp_path):
    (tmp_path / runs.DB_NAME).write_bytes(b"not a database at all" * 100)
    weights, warning = timings.expected(str(tmp_path), str(tmp_path), ScheduleConfig(), [t("a")])
    assert weights == {} and warning is not None and "run history is unreadable" in warning
    assert (tmp_path / runs.DB_NAME).read_bytes().startswith(b"not a database")


@pytest.mark.feature("PL-12")
def test_the_timings_file_fills_in_below_the_record_and_gains_this_runs_medians(tmp_path):
    history(tmp_path, [("p", "a", "success", 40.0), ("p", "a", "success", 60.0)])
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"version": 1, "tasks": {"p#a": 1.0, "p#b": 250.0}}))
    cfg = ScheduleConfig(file="timings.json")
    weights, warning = timings.expected(str(tmp_path), str(tmp_path), cfg, [t("a"), t("b")])
    assert warning is None and weights == {t("a"): 50.0, t("b"): 250.0}
    timings.write_file(str(path), str(tmp_path), [t("a")], 20)
    assert json.loads(path.read_text())["tasks"] == {"p#a": 50.0, "p#b": 250.0}


@pytest.mark.feature("PL-12")
def test_an_unreadable_timings_file_is_a_warning(tmp_path):
    (tmp_path / "t.json").write_text("{not json")
    cfg = ScheduleConfig(file="t.json", assume={"a": 5})
    weights, warning = timings.expected(str(tmp_path), str(tmp_path), cfg, [t("a")])
    assert weights == {t("a"): 5.0} and "timings file" in (warning or "")


@pytest.mark.feature("PL-12")
def test_the_index_answers_a_tasks_durations(tmp_path):
    """One index step per task, never a scan of every run."""
    history(tmp_path, [("p", "a", "success", 1.0)])
    db = sqlite3.connect(tmp_path / runs.DB_NAME)
    plan = db.execute(
        "EXPLAIN QUERY PLAN SELECT duration_ms FROM runs WHERE project = ? AND task = ?"
        " AND status = 'success' ORDER BY id DESC LIMIT ?",
        ("p", "a", 20),
    ).fetchall()
    db.close()
    assert any("runs_executed" in row[-1] for row in plan), plan


# ---------------------------------------------------------------- memory reservations


@pytest.mark.feature("PL-12")
def test_a_reservation_is_the_highest_peak_with_a_margin_in_whole_steps(tmp_path):
    mib = 1 << 20
    assert timings.reservation(100 * mib) == 128 * mib  # 125 MiB up to two steps
    assert timings.reservation(256 * mib) == 320 * mib  # exactly 320
    history(tmp_path, [("p", "a", "success", 1.0)] * 3)
    db = sqlite3.connect(tmp_path / runs.DB_NAME)
    with db:
        ids = [i for (i,) in db.execute("SELECT id FROM runs ORDER BY id")]
        for i, peak in zip(ids, (900 * mib, 100 * mib, 200 * mib)):
            db.execute("UPDATE runs SET peak_rss_bytes = ? WHERE id = ?", (peak, i))
    db.close()
    assert timings.reservations(str(tmp_path), [t("a"), t("b")], 2) == {t("a"): 256 * mib}
    assert timings.reservations(str(tmp_path), [t("a")], 3) == {t("a"): 1152 * mib}


@pytest.mark.feature("PL-12")
def test_a_task_is_admitted_while_the_running_reservations_leave_room():
    assert timings.admits(300, [300, 300], 1000)
    assert not timings.admits(500, [300, 300], 1000)
    assert timings.admits(0, [1000], 1000)  # nothing reserved: never held


@pytest.mark.feature("PL-12")
def test_the_memory_budget_is_capped_by_the_tightest_cgroup(tmp_path):
    from vx.plan.environment import memory_budget

    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/a/b\n0::/x\n")
    (tmp_path / "fs" / "memory" / "a" / "b").mkdir(parents=True)
    (tmp_path / "fs" / "memory" / "a" / "memory.limit_in_bytes").write_text("3000000000\n")
    (tmp_path / "fs" / "memory" / "a" / "b" / "memory.limit_in_bytes").write_text("9" * 19)
    (tmp_path / "fs" / "unified" / "x").mkdir(parents=True)
    (tmp_path / "fs" / "unified" / "x" / "memory.max").write_text("max\n")
    assert memory_budget(cgroup_root=tmp_path / "fs", proc_cgroup=proc) == 3000000000
    proc.write_text("0::/\n")
    whole = memory_budget(cgroup_root=tmp_path / "fs", proc_cgroup=proc)
    assert whole == memory_budget(cgroup_root=tmp_path / "none", proc_cgroup=tmp_path / "none")


@pytest.mark.feature("PL-12")
def test_the_plugins_admit_packs_reservations_against_its_budget(tmp_path):
    from vx.plugins.host import TaskView
    from vx.plugins.schedule_history import plugin

    class Ctx:
        root = tmp_path
        env: dict = {}
        warnings: list = []

        def warn(self, message):
            self.warnings.append(message)

    hooks = plugin({"memory": "1G", "reservations": {"p#c": "700MB", "b": "100MB"}})
    history(tmp_path / ".vx" / "cache", [("p", "a", "success", 1.0)])
    db = sqlite3.connect(tmp_path / ".vx" / "cache" / runs.DB_NAME)
    with db:
        db.execute("UPDATE runs SET peak_rss_bytes = ?", (400 << 20,))  # 500 MiB reserved
    db.close()
    views = [TaskView(f"p#{n}", "p", n, "p", "true") for n in ("a", "b", "c", "d")]
    ctx = Ctx()
    hooks["config"]({}, ctx)
    hooks["schedule"](views, ctx)
    admit = hooks["admit"]
    a, b, c, d = views
    assert admit(a, [], ctx) and admit(b, ["p#a"], ctx)  # 500 + 100 MiB
    assert not admit(c, ["p#a"], ctx)  # 500 + 700 MiB > 1 GiB
    assert admit(c, ["p#b"], ctx)  # 100 + 700 MiB
    assert admit(d, ["p#a", "p#c"], ctx)  # d has no reservation: never held
    assert ctx.warnings == []


@pytest.mark.feature("PL-12")
def test_the_plugins_memory_option_is_checked():
    from vx.errors import VxError
    from vx.plugins.schedule_history import plugin

    with pytest.raises(VxError) as bad:
        plugin({"memory": "lots"})
    assert "memory" in str(bad.value)
    with pytest.raises(VxError):
        plugin({"reservations": {"build": 5}})
    assert "admit" not in plugin({})  # no budget: nothing is held


# react-spring's build after an edit in `shared` (docs/benchmarks.md § Corpus): a chain to
# `core`, five targets after it, `web` alone also feeding `parallax`, and `react-spring`
# waiting for all five. The durations are one vx sample's (s). By name `web` comes fourth of
# the five; turbo started it third or fourth, which left `parallax` for the run's tail.
_SPRING = {
    "shared": [],
    "animated": ["shared"],
    "core": ["animated"],
    **{target: ["core"] for target in ("konva", "native", "three", "web", "zdog")},
    "parallax": ["web"],
    "react-spring": ["konva", "native", "three", "web", "zdog"],
}
_SPRING_S = {
    "shared": 42.8, "animated": 28.7, "core": 55.2, "web": 45.0, "three": 42.7,
    "native": 31.9, "zdog": 31.2, "konva": 40.2, "parallax": 57.5, "react-spring": 34.6,
}  # fmt: skip


@pytest.mark.feature("PL-12")
@pytest.mark.parametrize("recorded", [False, True], ids=["dependents-count", "critical-path"])
def test_the_target_with_a_second_dependant_starts_first(recorded):
    """Two slots: once `core` ends, `web` (whose `parallax` would otherwise run alone at the
    end) takes the first slot, with or without recorded durations."""
    g = graph(_SPRING)
    w = {t(n): s * 1000 for n, s in _SPRING_S.items()} if recorded else {}
    started = start_order(g, priorities(g, g.order, w), width=2, walk_slots=True)
    assert started[:4] == ["shared", "animated", "core", "web"]
