"""`vx cache prune` and the workspace's `cacheRetention` (LC-16, CLI-04): real vx, real git,
real node builds, real SQLite."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from subprocess import DEVNULL

import pytest
from support.processes import Stderr, start_vx
from support.workspace import build_task, npm_workspace, vx_env


@pytest.fixture
def ws(repo):
    ws = repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {"tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
            }
        )
    ).commit()
    result = ws.vx("run", "build")
    assert result.code == 0, result.err
    return ws


def age(ws, task_id: str, seconds: float) -> None:
    """Make one entry look unused for `seconds` (what a week without that build would leave)."""
    db = sqlite3.connect(ws.root / ".vx/cache/cache.db")
    with db:
        db.execute(
            "UPDATE entries SET accessed_at=? WHERE task_id=?", (time.time() - seconds, task_id)
        )
    db.close()


def entries(ws) -> list[str]:
    db = sqlite3.connect(ws.root / ".vx/cache/cache.db")
    try:
        return sorted(row[0] for row in db.execute("SELECT task_id FROM entries"))
    finally:
        db.close()


@pytest.mark.feature("LC-16")
def test_older_than_evicts_the_unused_and_the_next_run_rebuilds_it(ws):
    age(ws, "a#build", 3 * 86400)
    result = ws.vx("cache", "prune", "--older-than", "2d")
    assert result.code == 0, result.err
    assert result.out.startswith("pruned 1 entry") and "kept 1 entry" in result.out
    assert entries(ws) == ["b#build"]
    again = ws.vx("run", "build")
    assert again.statuses() == {
        "a#build": ("success", "miss"),
        "b#build": ("success", "up-to-date"),
    }
    assert entries(ws) == ["a#build", "b#build"]  # rebuilt and saved again


@pytest.mark.feature("LC-16")
def test_max_size_goes_least_recently_used_first_and_dry_run_names_without_removing(ws):
    age(ws, "a#build", 60)
    dry = ws.vx("cache", "prune", "--max-size=1B", "--dry-run", "--format", "json")
    assert dry.code == 0, dry.err
    report = json.loads(dry.out)
    assert report["dryRun"] is True and [e["taskId"] for e in report["evicted"]] == [
        "a#build",
        "b#build",
    ]
    assert (
        report["bytesFreed"] == sum(e["bytes"] for e in report["evicted"]) > 0
        and report["kept"] == 0
    )
    assert entries(ws) == ["a#build", "b#build"]  # nothing went
    one = ws.vx("cache", "prune", "--max-size", f"{report['evicted'][1]['bytes']}B")
    assert one.code == 0 and entries(ws) == ["b#build"], (
        one.out + one.err
    )  # the older one went, the newer fits


@pytest.mark.feature("LC-16")
@pytest.mark.parametrize(
    "args, said",
    [
        (["--max-size", "10"], "has no unit"),
        (["--older-than", "0d"], "zero"),
        (["--older-then", "1d"], "did you mean `--older-than`"),
        (["--format", "yaml"], "neither text nor json"),
        (["--max-size"], "needs a value"),
    ],
)
def test_bad_bounds_are_refused_and_nothing_goes(ws, args, said):
    result = ws.vx("cache", "prune", *args)
    assert result.code == 2 and said in result.err and "Traceback" not in result.err
    assert entries(ws) == ["a#build", "b#build"]


@pytest.mark.feature("CLI-04")
def test_other_cache_subcommands_point_to_the_right_verb(ws):
    result = ws.vx("cache", "clear")
    assert result.code == 2 and "vx cache clean" in result.err
    stats = ws.vx("cache", "stats")
    assert stats.code == 2 and "vx info" in stats.err
    limited = ws.vx("cache", "clean", "--max-size", "1G")
    assert limited.code == 2 and "takes no limit" in limited.err


@pytest.mark.feature("CLI-04")
def test_deleting_dot_vx_keeps_the_shared_store_and_cache_clean_empties_it(repo, tmp_path):
    """The cache is the repository's shared store under the home: `rm -rf .vx` leaves it (the
    next run hits), `vx info` says so, and `vx cache clean` (after a `--dry-run` that removes
    nothing) empties it, so the next run builds."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "VX_SHARED_STORE": "1"}
    ws = repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {"tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
            }
        )
    ).commit()
    assert ws.vx("run", "build", env=env).code == 0
    shutil.rmtree(ws.root / ".vx")
    for dist in (ws.root / "packages").glob("*/dist"):
        shutil.rmtree(dist)
    again = ws.vx("run", "build", env=env)
    assert set(again.statuses().values()) == {("success", "local")}, again.err
    info = ws.vx("info", env=env, summary=False)
    assert "`vx cache clean` clears it (deleting .vx does not" in info.out, info.out
    dry = ws.vx("cache", "clean", "--dry-run", env=env, summary=False)
    assert dry.code == 0 and dry.out.splitlines()[-1].startswith("would remove 2 entries")
    assert "a#build" in dry.out and str(home) in dry.err
    cleaned = ws.vx("cache", "clean", "--format", "json", env=env, summary=False)
    assert cleaned.code == 0, cleaned.err
    assert sorted(e["taskId"] for e in json.loads(cleaned.out)["evicted"]) == ["a#build", "b#build"]
    after = ws.vx("run", "build", env=env)
    assert set(after.statuses().values()) == {("success", "miss")}, after.err


@pytest.mark.feature("LC-16")
def test_no_cache_yet_is_nothing_to_prune(repo):
    ws = repo.write(
        npm_workspace({"a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}}})
    ).commit()
    result = ws.vx("cache", "prune", "--max-size", "1G")
    assert result.code == 0 and "nothing to prune" in result.err
    assert not (ws.root / ".vx/cache").exists()  # and made none


@pytest.mark.feature("LC-16")
def test_workspace_retention_prunes_at_the_end_of_a_run(ws):
    (ws.root / "vx.workspace.json").write_text(json.dumps({"cacheRetention": {"olderThan": "1d"}}))
    ws.commit()
    age(ws, "a#build", 3 * 86400)
    result = ws.vx("run", "b#build")  # a hit for b: its use counts before anything is judged
    assert result.code == 0, result.err
    assert entries(ws) == ["b#build"]
    assert (ws.root / ".vx/cache/.vx-swept").exists()  # the hourly sweep ran too


@pytest.mark.feature("LC-16")
def test_a_bad_retention_is_refused_with_its_field(ws):
    (ws.root / "vx.workspace.json").write_text(json.dumps({"cacheRetention": {"maxSize": "10"}}))
    result = ws.vx("run", "build")
    assert result.code == 2 and "in: vx.workspace.json, cacheRetention.maxSize" in result.err


@pytest.mark.feature("LC-16")
def test_prune_waits_for_a_run_of_the_same_workspace(repo):
    # The task marks its start and ends once the test releases it (no timing to guess).
    marks, release = repo.root.parent / "started", repo.root.parent / "release"
    slow = build_task(
        command=f"node -e \"const fs=require('fs');fs.writeFileSync('{marks}','');"
        f"(function wait(){{if(!fs.existsSync('{release}'))return setTimeout(wait,20);"
        "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.js','x')})()\""
    )
    ws = repo.write(
        npm_workspace({"a": {"tasks": {"build": slow}, "files": {"src/a.js": "A;"}}})
    ).commit()
    release.touch()
    assert ws.vx("run", "build").code == 0
    release.unlink()
    marks.unlink()
    (ws.root / "packages/a/src/a.js").write_text("A2;")
    env = vx_env()
    run = start_vx("run", "build", cwd=ws.root, env=env, stdout=DEVNULL, stderr=DEVNULL)
    deadline = time.monotonic() + 120
    while not marks.exists():  # the run holds the lock: its task runs
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.02)
    prune = Stderr(
        start_vx("cache", "prune", "--max-size", "1B", cwd=ws.root, env=env, stdout=DEVNULL)
    )
    prune.wait_for("waiting for another vx run")
    assert run.poll() is None  # the run still holds the lock
    release.touch()
    assert run.wait(timeout=120) == 0
    err = prune.finish()
    assert prune.proc.returncode == 0, err
    assert entries(ws) == []  # it waited for the run, then emptied the cache (the run's too)
