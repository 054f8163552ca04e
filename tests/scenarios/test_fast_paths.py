"""Counts that guard the fast paths (never timings; speed lives in bench/): a fully cached run opens
no input file and no artifact, never imports asyncio, and its SQL statements do not grow with the
number of tasks; restores take a bounded number of statements each; the hit lane settles exactly
what the walk would have (GR-09, LC-06, LC-07, KEY-12, KEY-22).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from support.workspace import build_task, npm_workspace, vx_env

# Runs vx in-process so the probe can count what it did; prints one JSON line of facts last.
PROBE = r"""
import json, sqlite3, sys
statements = []
_connect = sqlite3.connect
def connect(path, *a, **k):
    db = _connect(path, *a, **k)
    if str(path).endswith("cache.db"):
        db.set_trace_callback(lambda sql: statements.append(sql.split()[0].upper()))
    return db
sqlite3.connect = connect
import os
from vx.fastpath import hitlane
pools = []
_pool = hitlane._pool
def pool(*a):
    p = _pool(*a)
    pools.append(type(p).__name__)
    return p
hitlane._pool = pool
hitlane.FORK_FROM = int(os.environ.get("PROBE_FORK_FROM", hitlane.FORK_FROM))
from vx.cli.main import main
code = main(sys.argv[1:])
facts = {"code": code, "statements": statements, "asyncio": "asyncio" in sys.modules,
         "executor": "vx.proc.executor" in sys.modules, "pools": pools}
print("\n" + json.dumps(facts))
"""


def chain(n: int) -> dict:
    """n packages, each building after the previous one."""
    pkgs = {}
    for i in range(n):
        deps = [f"p{i - 1}"] if i else []
        pkgs[f"p{i}"] = {
            "deps": deps,
            "tasks": {"build": build_task()},
            "files": {"src/a.js": f"P{i};"},
        }
    return npm_workspace(pkgs)


def probe(repo, *args: str, env: dict | None = None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=repo.root,
        env=vx_env(env),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def writes(facts: dict) -> int:
    return sum(s in ("INSERT", "UPDATE", "DELETE", "REPLACE") for s in facts["statements"])


@pytest.mark.feature("LC-06", "GR-09")
def test_fully_cached_run_needs_no_event_loop_and_constant_sql(repo):
    repo.write(chain(4)).commit()
    assert repo.vx("run", "build").code == 0
    small = probe(repo, "run", "build")
    assert small["code"] == 0
    assert (
        not small["asyncio"] and not small["executor"]
    )  # nothing ran: no loop, no process machinery

    big = repo.root.parent / "big"
    big.mkdir()
    repo.__class__(big).write(chain(40)).commit()
    repo.__class__(big).vx("run", "build")
    large = probe(repo.__class__(big), "run", "build")
    assert large["code"] == 0 and not large["asyncio"]
    # The probe, the logs and the accessed_at bump are batched: ten times the tasks, the same statements.
    assert len(large["statements"]) == len(small["statements"]) <= 16, large["statements"]


@pytest.mark.feature("LC-07", "LC-16")
def test_a_restore_costs_a_bounded_number_of_statements(repo):
    repo.write(chain(12)).commit()
    assert repo.vx("run", "build").code == 0
    for pkg in (repo.root / "packages").iterdir():
        shutil.rmtree(pkg / "dist")
    facts = probe(repo, "run", "build")
    assert facts["code"] == 0
    # One transaction at close for every restore's stamps and the accessed_at bump; the INSERT
    # is one executemany (traced per row), the DELETE and UPDATE one statement per batch.
    assert facts["statements"].count("BEGIN") == 1, facts["statements"]
    assert writes(facts) <= 2 + 12, facts["statements"]
    assert all((repo.root / f"packages/p{i}/dist/out.js").is_file() for i in range(12))


@pytest.mark.feature("GR-09", "LC-07")
def test_restores_in_forked_workers_leave_what_threads_leave(repo):
    repo.write(chain(6)).commit()
    assert repo.vx("run", "build").code == 0
    expected = {p.name: (p / "dist/out.js").read_text() for p in (repo.root / "packages").iterdir()}
    for pkg in (repo.root / "packages").iterdir():
        (pkg / "dist/out.js").write_text(
            "stale"
        )  # present but wrong: the worker wipes, then unpacks
    facts = probe(repo, "run", "build", env={"PROBE_FORK_FROM": "1"})
    assert facts["code"] == 0 and facts["pools"] == ["ProcessPoolExecutor"]
    assert {
        p.name: (p / "dist/out.js").read_text() for p in (repo.root / "packages").iterdir()
    } == expected
    res = repo.vx("run", "build")  # the stamps written at close make the next run current
    assert set(res.statuses().values()) == {("success", "up-to-date")}


def traced(repo, calls: str) -> str:
    """`vx run build` under strace (children too), as a user runs it; the trace's text."""
    trace = repo.root.parent / "trace"
    proc = subprocess.run(
        [
            "strace",
            "-f",
            "-e",
            f"trace={calls}",
            "-o",
            str(trace),
            sys.executable,
            "-m",
            "vx",
            "run",
            "build",
        ],
        cwd=repo.root,
        env=vx_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return trace.read_text()


@pytest.mark.feature("KEY-12", "LC-06")
def test_warm_run_opens_no_input_and_no_artifact(repo):
    repo.write(chain(3)).commit()
    assert repo.vx("run", "build").code == 0
    opened = re.findall(
        r'open(?:at2?)?\((?:[^,]*, )?"([^"]+)"', traced(repo, "open,openat,openat2")
    )
    root = str(repo.root)
    assert [p for p in opened if p.endswith(".tar.zst")] == []
    assert [p for p in opened if p.startswith(f"{root}/packages/") and "/src/" in p] == []
    assert [p for p in opened if "/dist/" in p] == []  # outputs are stat'ed, never read


@pytest.mark.feature("GR-09", "KEY-22")
def test_lane_settles_around_a_miss(repo):
    files = npm_workspace(
        {
            "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
            "b": {"tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
            "c": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/c.js": "C;"}},
            "d": {"deps": ["b"], "tasks": {"build": build_task()}, "files": {"src/d.js": "D;"}},
        }
    )
    repo.write(files).commit()
    assert repo.vx("run", "build").code == 0
    repo.write({"packages/b/src/b.js": "B2;"})
    shutil.rmtree(repo.root / "packages/c/dist")
    res = repo.vx("run", "build")
    assert res.code == 0, res.err
    assert res.statuses() == {
        "a#build": ("success", "up-to-date"),
        "b#build": ("success", "miss"),
        "c#build": ("success", "local"),  # restored by the lane, after a settled
        "d#build": ("success", "miss"),  # downstream of the miss: the walk decides it
    }


@pytest.mark.feature("LC-12", "GR-09")
def test_damaged_artifact_in_the_lane_runs_and_its_dependant_still_restores(repo):
    files = npm_workspace(
        {
            "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
            "c": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/c.js": "C;"}},
        }
    )
    repo.write(files).commit()
    assert repo.vx("run", "build").code == 0
    summary = repo.vx("run", "build").summary
    key_a = next(t["hash"] for t in summary["tasks"] if t["id"] == "a#build")
    art = repo.root / ".vx" / "cache" / f"{key_a}.tar.zst"
    data = bytearray(art.read_bytes())
    data[len(data) // 2] ^= 0xFF
    art.write_bytes(bytes(data))
    for pkg in ("a", "c"):
        shutil.rmtree(repo.root / f"packages/{pkg}/dist")
    res = repo.vx("run", "build")
    assert res.code == 0, res.err
    assert res.statuses() == {"a#build": ("success", "miss"), "c#build": ("success", "local")}
    assert sum("cannot be restored" in line for line in res.err.splitlines()) == 1
    assert (repo.root / "packages/c/dist/out.js").read_text() == "C;"


@pytest.mark.feature("OBS-11")
def test_timing_table_names_every_stage(repo):
    repo.write(chain(2)).commit()
    repo.vx("run", "build")
    res = repo.vx("run", "build", env={"VX_TIMING": "1"})
    table = res.err[res.err.index("vx timing (ms)") :]
    for stage in (
        "startup (cpu)",
        "discover",
        "load configs",
        "build graph",
        "git enumeration",
        "keys",
        "open cache",
        "probe",
        "hit lane",
        "close cache",
        "total",
    ):
        assert f"  {stage} " in table, table
    assert "run graph" not in table  # everything settled in the lane: the walk never started
    assert "vx timing" not in repo.vx("run", "build").err


def test_the_first_wave_starts_before_asyncio_loads(repo):  # docs/optimizations.md #25
    """A run that must execute starts its first commands before it imports asyncio, so the import
    overlaps them: in the trace, the task's shell is exec'd before asyncio's package is opened.
    The results are the walk's as ever: the task ran once, its output cached."""
    repo.write(chain(2)).commit()
    lines = traced(repo, "execve,openat").splitlines()
    shell = next(i for i, line in enumerate(lines) if 'execve("/bin/sh", ["sh", "-c"' in line)
    loop = next(
        i
        for i, line in enumerate(lines)
        if re.search(r"openat\(.*/asyncio/(__pycache__/)?__init__", line)
    )
    assert shell < loop
    again = repo.vx("run", "build")
    assert again.code == 0 and " 2 cached" in again.err


def _outcome(res) -> list[tuple]:
    """What a run decided, task by task: everything but timings."""
    assert res.summary is not None, res.err
    return sorted((t["id"], t["status"], t["cache"], t["hash"]) for t in res.summary["tasks"])


def test_the_fast_paths_switched_off_change_no_result(tmp_path):
    """docs/architecture.md: fastpath/ holds optimisations only. With VX_FASTPATH=0 (no replay,
    no hit lane, no first wave) a cold run, a warm run, a run after an edit and one that restores
    deleted outputs decide exactly what they decide with them, and leave the same files."""
    from support.workspace import Repo

    runs = {}
    for name, env in (("fast", {}), ("plain", {"VX_FASTPATH": "0"})):
        root = tmp_path / name / "ws"
        root.mkdir(parents=True)
        repo = Repo(root).write(chain(6)).commit()
        steps = [_outcome(repo.vx("run", "build", "--all", env=env))]
        steps.append(_outcome(repo.vx("run", "build", "--all", env=env)))
        (root / "packages/p2/src/a.js").write_text("edited;")
        steps.append(_outcome(repo.vx("run", "build", "--all", env=env)))
        for dist in sorted(root.glob("packages/*/dist")):
            shutil.rmtree(dist)
        steps.append(_outcome(repo.vx("run", "build", "--all", env=env)))
        repo.vx(
            "run", "build", "--all", env=env, summary=False
        )  # keeps a receipt (a summary would not)
        again = repo.vx("run", "build", "--all", env={**env, "VX_TIMING": "1"}, summary=False)
        outputs = {
            str(p.relative_to(root)): p.read_text() for p in sorted(root.glob("packages/*/dist/*"))
        }
        runs[name] = (steps, outputs, again.code, "receipt check" in again.err)
    fast, plain = runs["fast"], runs["plain"]
    assert fast[0] == plain[0] and fast[1] == plain[1] and fast[2] == plain[2] == 0
    assert {cache for step in fast[0][1:] for _, _, cache, _ in step} >= {
        "local",
        "up-to-date",
        "miss",
    }
    assert fast[3] and not plain[3]  # the replay took the fast run's last run, and only that one


def test_the_switch_does_turn_the_hit_lane_off(repo):
    """VX_FASTPATH=0 is what the test above compares against: a fully cached run then goes
    through the walk (asyncio loaded) instead of ending in the hit lane."""
    repo.write(chain(3)).commit()
    assert repo.vx("run", "build").code == 0
    assert not probe(repo, "run", "build")["asyncio"]
    plain = probe(repo, "run", "build", env={"VX_FASTPATH": "0"})
    assert plain["code"] == 0 and plain["asyncio"]
