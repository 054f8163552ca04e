"""Planning, the hit path and the engine, on the fakes (tests/fakes.py): a real workspace on disk,
planned by the real pipeline, then walked with a memory store and a scripted executor: nothing is
spawned, no cache is opened. The hit's owner (`vx.engine.taskcache`) and the hit lane
(`vx.fastpath.hitlane`) are asked directly too."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from fakes import ListReporter, MemoryStore, ScriptedExecutor, writes

from vx.engine import taskcache
from vx.engine.rebuilder import RunConfig, RunContext, RunState, Services, rebuild
from vx.engine.scheduler import PrioritySlots, walk
from vx.events import CacheRestored, Notice, TaskFinished
from vx.fastpath.hitlane import settle
from vx.model import CachePolicy, CacheStatus, LogChunk, Status, TaskId
from vx.prepare import RunRequest, prepare
from vx.proc import executor
from vx.stages import Stages
from vx.store.local import DamagedEntry

LIB, APP = TaskId("lib", "build"), TaskId("app", "build")


def _task(command: str, deps: list[str]) -> dict:
    return {
        "exec": {"command": command},
        "dependsOn": deps,
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """lib and app (app depends on lib), each a cached build of src/ into dist/; no git."""
    files = {
        "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
        "packages/lib/package.json": {"name": "lib", "version": "1.0.0"},
        "packages/lib/vx.config.json": {
            "tasks": {"build": _task("build-lib", []), "lint": {"exec": {"command": "lint-lib"}}}
        },
        "packages/lib/src/a.js": "A;",
        "packages/app/package.json": {
            "name": "app",
            "version": "1.0.0",
            "dependencies": {"lib": "*"},
        },
        "packages/app/vx.config.json": {"tasks": {"build": _task("build-app", ["^build"])}},
        "packages/app/src/b.js": "B;",
        "README.md": "readme",
    }
    for rel, content in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return tmp_path


def _env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"
    }


def _plan(root: Path, *names: str):
    return prepare(
        RunRequest(cwd=root, names=names or ("build",), all=True, no_cache=True),
        _env(),
        Stages(False),
    )


def _walk(root: Path, store: MemoryStore, scripts: dict, reporter: ListReporter | None = None):
    prep = _plan(root)
    ran = ScriptedExecutor(scripts)
    emit = reporter if reporter is not None else ListReporter()

    async def go():
        ctx = RunContext(
            RunConfig(
                root=prep.ws.root,
                policy=CachePolicy(),
                hits=store.probe(p.key for p in prep.plans.values()),
                priority=prep.graph.priority,
            ),
            Services(
                index=prep.index,
                store=store,
                emit=emit,
                table=executor.ProcessTable(),
                slots=PrioritySlots(2),
                restore_slots=asyncio.Semaphore(2),
                execute=ran,
            ),
            RunState(plans=dict(prep.plans)),
        )
        return await walk(prep.graph, lambda node, done: rebuild(ctx, node, done))

    return asyncio.run(go()), ran


BUILDS = {"build-lib": writes({"dist/lib.js": "lib"}), "build-app": writes({"dist/app.js": "app"})}


# ---------------------------------------------------------------- plan


def test_plan_keys_are_stable_and_move_with_an_input_and_downstream(ws):
    first, again = _plan(ws), _plan(ws)
    assert {t: p.key for t, p in first.plans.items()} == {t: p.key for t, p in again.plans.items()}
    (ws / "README.md").write_text("edited")  # no task's input
    assert {t: p.key for t, p in _plan(ws).plans.items()} == {
        t: p.key for t, p in first.plans.items()
    }
    (ws / "packages/lib/src/a.js").write_text("A2;")
    edited = _plan(ws)
    assert edited.plans[LIB].key != first.plans[LIB].key
    assert edited.plans[APP].key != first.plans[APP].key  # it folds lib's key


def test_plan_an_uncached_task_has_no_outputs_and_its_command(ws):
    prep = _plan(ws, "lint")
    lint = prep.plans[TaskId("lib", "lint")]
    assert lint.outputs is None and lint.command == "lint-lib"
    assert prep.plans.keys() == {TaskId("lib", "lint")}


# ---------------------------------------------------------------- engine


def test_engine_a_cold_walk_runs_upstream_first_and_saves_each_result(ws):
    store = MemoryStore(ws)
    results, ran = _walk(ws, store, BUILDS)
    assert [command for command, _ in ran.ran] == ["build-lib", "build-app"]
    assert all(
        r.status is Status.SUCCESS and r.cache is CacheStatus.MISS and r.saved
        for r in results.values()
    )
    assert sorted(store.saved) == sorted(r.key for r in results.values())
    assert store.entries[results[LIB].key].files == {"packages/lib/dist/lib.js": b"lib"}


def test_engine_a_failure_is_not_saved_and_blocks_its_dependant(ws):
    store = MemoryStore(ws)
    results, ran = _walk(
        ws, store, {**BUILDS, "build-lib": writes({"dist/lib.js": "half"}, code=1)}
    )
    assert results[LIB].status is Status.FAILED and not results[LIB].saved
    assert results[APP].status is Status.SKIPPED and results[APP].blocked_by == LIB
    assert [command for command, _ in ran.ran] == ["build-lib"] and store.saved == []


# ---------------------------------------------------------------- hits


def test_hit_outputs_in_place_run_nothing_and_restore_nothing(ws):
    store = MemoryStore(ws)
    _walk(ws, store, BUILDS)
    results, ran = _walk(ws, store, BUILDS)
    assert ran.ran == [] and store.restored == []
    assert {r.cache for r in results.values()} == {CacheStatus.UP_TO_DATE}


def test_hit_deleted_outputs_are_restored_from_the_store(ws):
    store = MemoryStore(ws)
    _walk(ws, store, BUILDS)
    (ws / "packages/lib/dist/lib.js").unlink()
    results, ran = _walk(ws, store, BUILDS)
    assert ran.ran == [] and store.restored == [results[LIB].key]
    assert results[LIB].cache is CacheStatus.LOCAL and results[APP].cache is CacheStatus.UP_TO_DATE
    assert (ws / "packages/lib/dist/lib.js").read_text() == "lib"


def test_hit_a_damaged_entry_runs_the_task_and_says_why(ws):
    store = MemoryStore(ws)
    first, _ = _walk(ws, store, BUILDS)
    (ws / "packages/lib/dist/lib.js").unlink()
    store.damaged.add(first[LIB].key)
    reporter = ListReporter()
    results, ran = _walk(ws, store, BUILDS, reporter)
    assert [command for command, _ in ran.ran] == ["build-lib"] and results[
        LIB
    ].cache is CacheStatus.MISS
    assert any("cannot be restored (damaged in memory)" in n.message for n in reporter.of(Notice))


# ---------------------------------------------------------------- the task cache


DEV = TaskId("lib", "dev")
LIB_OUT, APP_OUT = "packages/lib/dist/lib.js", "packages/app/dist/app.js"


def _saved(root: Path) -> tuple[MemoryStore, object]:
    """A memory store a cold walk saved both builds into, and the plan of the next run."""
    store = MemoryStore(root)
    _walk(root, store, BUILDS)
    return store, _plan(root)


def _served(root: Path) -> None:
    """lib gains a dev server nobody asks for, which app's build waits for."""
    lib = {"build": _task("build-lib", []), "dev": {"exec": {"command": "serve", "persistent": {}}}}
    app = {"build": _task("build-app", ["^build", "^dev"])}
    (root / "packages/lib/vx.config.json").write_text(json.dumps({"tasks": lib}))
    (root / "packages/app/vx.config.json").write_text(json.dumps({"tasks": app}))


def test_taskcache_current_tells_outputs_in_place_from_stale_and_absent_ones(ws):
    store, prep = _saved(ws)
    plan = prep.plans[LIB]
    entry = store.entries[plan.key]
    assert taskcache.current(store, entry, plan.outputs, ws) == (True, True)
    (ws / LIB_OUT).write_text("edited")
    assert taskcache.current(store, entry, plan.outputs, ws) == (False, True)
    (ws / LIB_OUT).unlink()
    assert taskcache.current(store, entry, plan.outputs, ws) == (False, False)


def test_taskcache_restore_wipes_what_is_there_and_writes_the_entry_back(ws):
    store, prep = _saved(ws)
    plan = prep.plans[LIB]
    (ws / LIB_OUT).write_text("edited")
    (ws / "packages/lib/dist/stale.js").write_text("stale")
    log = taskcache.restore(store, store.entries[plan.key], plan.outputs, ws)
    assert log == (LogChunk(1, b"ran build-lib\n"),)
    assert [p.name for p in (ws / "packages/lib/dist").iterdir()] == ["lib.js"]
    assert (ws / LIB_OUT).read_text() == "lib" and store.restored == [plan.key]


def test_taskcache_a_damaged_entry_raises_and_its_notice_says_the_task_runs(ws):
    store, prep = _saved(ws)
    plan = prep.plans[LIB]
    store.damaged.add(plan.key)
    with pytest.raises(DamagedEntry) as raised:
        taskcache.restore(store, store.entries[plan.key], plan.outputs, ws)
    notice = taskcache.damaged_notice(LIB, raised.value)
    assert notice.message == (
        "cache entry for lib#build cannot be restored (damaged in memory); running the task instead"
    )
    assert notice.id == LIB and notice.level == "warning"


def test_taskcache_a_hit_result_is_a_success_that_keeps_the_saved_run_time(ws):
    plan = _plan(ws).plans[LIB]
    log = (LogChunk(1, b"built\n"),)
    result = taskcache.hit_result(LIB, plan, 12.5, log, CacheStatus.LOCAL, time.monotonic())
    assert (result.id, result.status, result.cache, result.key) == (
        LIB,
        Status.SUCCESS,
        CacheStatus.LOCAL,
        plan.key,
    )
    assert (result.exit_code, result.log, result.stored_ms, result.command) == (
        0,
        log,
        12.5,
        "build-lib",
    )
    assert 0 <= result.duration_ms < 60_000


def test_taskcache_a_lazy_server_is_not_started_only_when_every_dependant_hits(ws):
    _served(ws)
    prep = _plan(ws)
    assert taskcache.lazy(prep.graph.nodes[DEV]) and not taskcache.lazy(prep.graph.nodes[LIB])
    cached = {p.key for p in prep.plans.values() if p.outputs is not None}
    assert taskcache.not_started(prep.graph, prep.plans, cached) == {DEV}
    assert taskcache.not_started(prep.graph, prep.plans, cached - {prep.plans[APP].key}) == set()
    assert taskcache.not_started(prep.graph, prep.plans, set()) == set()


def test_taskcache_needed_takes_back_a_lazy_task_that_an_unsettled_dependant_waits_for(ws):
    _served(ws)
    graph = _plan(ws).graph
    assert taskcache.needed(graph, [DEV], {LIB, DEV, APP}) == set()
    assert taskcache.needed(graph, [DEV], {LIB, DEV}) == {DEV}
    result = taskcache.not_started_result(DEV, _plan(ws).plans[DEV])
    assert result.persistent and result.reason == taskcache.NOT_STARTED


# ---------------------------------------------------------------- the hit lane


def _lane(root: Path, store: MemoryStore, reporter: ListReporter):
    prep = _plan(root)
    hits = store.probe(p.key for p in prep.plans.values())
    return settle(prep.graph, prep.plans, hits, store, root, reporter, 2)


def test_hitlane_settles_hits_in_place_without_a_restore(ws):
    store, _ = _saved(ws)
    reporter = ListReporter()
    lane = _lane(ws, store, reporter)
    assert {t: r.cache for t, r in lane.results.items()} == {
        LIB: CacheStatus.UP_TO_DATE,
        APP: CacheStatus.UP_TO_DATE,
    }
    assert (lane.current, lane.restored, store.restored, lane.damaged) == (2, 0, [], set())
    assert [e.result.id for e in reporter.of(TaskFinished)] == [LIB, APP]
    assert lane.results[APP].log == (LogChunk(1, b"ran build-app\n"),)


def test_hitlane_restores_deleted_outputs_and_tells_the_restore_before_the_result(ws):
    store, _ = _saved(ws)
    (ws / LIB_OUT).unlink()
    reporter = ListReporter()
    lane = _lane(ws, store, reporter)
    assert lane.results[LIB].cache is CacheStatus.LOCAL
    assert lane.results[APP].cache is CacheStatus.UP_TO_DATE
    assert (lane.current, lane.restored) == (1, 1) and (ws / LIB_OUT).read_text() == "lib"
    # app waits for lib: it is decided in the scan after lib's restore
    told = [
        (type(e).__name__, e.id if isinstance(e, CacheRestored) else e.result.id)
        for e in reporter.events
        if isinstance(e, (CacheRestored, TaskFinished))
    ]
    assert told == [("CacheRestored", LIB), ("TaskFinished", LIB), ("TaskFinished", APP)]


def test_hitlane_leaves_a_damaged_entry_and_what_follows_it_to_the_walk(ws):
    store, _ = _saved(ws)
    (ws / LIB_OUT).unlink()
    store.damaged.add(store.saved[0])
    reporter = ListReporter()
    lane = _lane(ws, store, reporter)
    assert lane.results == {} and lane.damaged == {store.saved[0]}
    assert [n.message for n in reporter.of(Notice)] == [
        "cache entry for lib#build cannot be restored (damaged in memory); running the task instead"
    ]


def test_hitlane_keeps_a_lazy_server_unstarted_only_while_its_dependants_hit(ws):
    _served(ws)
    for rel in (LIB_OUT, APP_OUT):  # before planning: the server's key folds lib's files
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(rel)
    prep = _plan(ws)
    store = MemoryStore(ws)
    for tid, rel in ((LIB, LIB_OUT), (APP, APP_OUT)):
        store.save(
            prep.plans[tid].key, task_id=str(tid), command="", log=(), files=[rel], duration_ms=1
        )
    lane = _lane(ws, store, ListReporter())
    assert set(lane.results) == {LIB, DEV, APP}
    assert lane.results[DEV].reason == taskcache.NOT_STARTED and lane.results[DEV].persistent
    del store.entries[prep.plans[APP].key]  # app now runs: it needs its server started
    lane = _lane(ws, store, ListReporter())
    assert set(lane.results) == {LIB}
