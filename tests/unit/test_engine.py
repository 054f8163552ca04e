"""Planning, the hit path and the engine, on the fakes (tests/fakes.py): a real workspace on disk,
planned by the real pipeline, then walked with a memory store and a scripted executor: nothing is
spawned, no cache is opened."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from fakes import ListReporter, MemoryStore, ScriptedExecutor, writes

from vx.engine.rebuilder import RunContext, rebuild
from vx.engine.scheduler import PrioritySlots, walk
from vx.events import Notice
from vx.model import CachePolicy, CacheStatus, Status, TaskId
from vx.pipeline import RunRequest, prepare
from vx.proc import executor
from vx.stages import Stages

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
            root=prep.ws.root,
            plans=dict(prep.plans),
            hits=store.probe(p.key for p in prep.plans.values()),
            index=prep.index,
            store=store,
            policy=CachePolicy(),
            slots=PrioritySlots(2),
            restore_slots=asyncio.Semaphore(2),
            table=executor.ProcessTable(),
            emit=emit,
            priority=prep.graph.priority,
            execute=ran,
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
