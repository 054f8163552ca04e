"""Ready tasks ordered by the expected remaining critical path, from the run history (the
schedule-history item of "every run remembered and explained"). Real vx, real git, real
processes; the order is what the tasks themselves record (one slot, each appends its name to a
marks file), never a timing. Durations are planted in runs.db, as a history of slow runs would
have left them."""

import json
import sqlite3

import pytest
from support.workspace import npm_workspace

# slow: a leaf nobody waits for; x: one dependent (y). The dependents count starts x first.
SHAPE = {"slow": [], "x": [], "y": ["x"]}


def workspace(repo, marks, schedule=None, cached=False):
    packages = {}
    for name, deps in SHAPE.items():
        task: dict = {"exec": {"command": f"echo {name} >> {marks}"}, "dependsOn": ["^build"]}
        if cached:
            task["cache"] = {"inputs": {"files": ["*.json"]}, "outputs": {"files": ["dist/**"]}}
            task["exec"]["command"] += " && mkdir -p dist && echo x > dist/o"
        packages[name] = {"deps": deps, "tasks": {"build": task}}
    files = npm_workspace(packages)
    if schedule is not None:
        files["vx.workspace.json"] = {"schedule": schedule}
    repo.write(files).commit()


def order(repo, marks, *extra, env=None):
    marks.unlink(missing_ok=True)
    res = repo.vx("run", "build", "--all", "--concurrency=1", *extra, env=env)
    assert res.code == 0, res.err
    return marks.read_text().split(), res


def plant(repo, durations):
    """Every recorded run of each project's build took `durations[project]` ms."""
    db = sqlite3.connect(repo.root / ".vx" / "cache" / "runs.db")
    with db:
        for project, ms in durations.items():
            db.execute("UPDATE runs SET duration_ms = ? WHERE project = ?", (ms, project))
    db.close()


@pytest.mark.feature("PL-12")
def test_ready_tasks_start_by_the_longest_expected_chain(repo, tmp_path):
    """Issue item: order ready tasks by expected remaining critical path from recorded
    durations (own median plus the longest chain of dependents), not the dependents count."""
    marks = tmp_path / "marks"
    workspace(repo, marks)
    first, _ = order(repo, marks)
    assert first[0] == "x"  # nothing on record: the dependents count (x has y waiting)
    plant(repo, {"slow": 9000, "x": 100, "y": 100})
    assert order(repo, marks)[0] == ["slow", "x", "y"]  # the slow leaf is the critical path
    plant(repo, {"slow": 5000, "x": 100, "y": 9000})
    # x is quick but y waits on it: x's chain (9.1 s) outranks slow (5 s), and x's slot passes
    # on only once y is queued for it, so y (9 s) goes before slow
    assert order(repo, marks)[0] == ["x", "y", "slow"]


@pytest.mark.feature("PL-12")
def test_history_off_keeps_the_dependents_count(repo, tmp_path):
    marks = tmp_path / "marks"
    workspace(repo, marks, schedule={"history": False})
    order(repo, marks)
    plant(repo, {"slow": 9000, "x": 100, "y": 100})
    assert order(repo, marks)[0][0] == "x"


@pytest.mark.feature("PL-12")
def test_assume_orders_a_cold_start(repo, tmp_path):
    """Issue item: `assume` supplies durations for a cold start (no history yet)."""
    marks = tmp_path / "marks"
    workspace(repo, marks, schedule={"assume": {"slow#build": 60000, "build": 10}})
    assert not (repo.root / ".vx" / "cache" / "runs.db").exists()
    assert order(repo, marks)[0] == ["slow", "x", "y"]


@pytest.mark.feature("PL-12")
def test_a_damaged_history_runs_in_the_default_order_with_one_warning(repo, tmp_path):
    """Issue item: fails open — an unreadable history is today's order, never a failed run."""
    marks = tmp_path / "marks"
    workspace(repo, marks)
    order(repo, marks)
    (repo.root / ".vx" / "cache" / "runs.db").write_bytes(b"this is no database " * 200)
    for suffix in ("-wal", "-shm"):
        (repo.root / ".vx" / "cache" / f"runs.db{suffix}").unlink(missing_ok=True)
    marks_seen, res = order(repo, marks)
    assert marks_seen[0] == "x"
    assert res.err.count("run history is unreadable") == 1, res.err
    assert res.err.count("warning") == 1, res.err
    again, res = order(repo, marks)  # the run's own record started the history afresh
    assert "unreadable" not in res.err and again[0] == "x"


@pytest.mark.feature("PL-12")
def test_a_fully_cached_run_reads_no_history(repo, tmp_path):
    """Reading history costs nothing when everything replays: with the history damaged, a run
    of hits says nothing about it — neither the receipt's replay nor a planned run whose hit
    lane settles every task opens runs.db to order anything."""
    import os

    marks = tmp_path / "marks"
    workspace(repo, marks, cached=True)
    order(repo, marks)
    (repo.root / ".vx" / "cache" / "runs.db").write_bytes(b"this is no database " * 200)
    res = repo.vx("run", "build", "--all", "--concurrency=1")
    assert res.code == 0 and " 3 cached" in res.err and "unreadable" not in res.err, res.err
    for name in SHAPE:  # the receipt no longer vouches; the keys are the same
        os.utime(repo.root / "packages" / name / "package.json", (1, 1))
    res = repo.vx("run", "build", "--all", "--concurrency=1", env={"VX_TIMING": "1"})
    assert res.code == 0 and " 3 cached" in res.err, res.err
    table = res.err[res.err.index("vx timing (ms)") :]
    assert "  hit lane " in table and "  schedule " not in table, table
    assert "unreadable" not in res.err


@pytest.mark.feature("PL-12")
def test_the_timings_file_carries_the_order_to_a_runner_with_no_history(repo, tmp_path):
    """Issue item: `file` carries timings between CI runners: written at a run's end, read
    by a checkout with an empty cache."""
    marks = tmp_path / "marks"
    workspace(repo, marks, schedule={"file": "vx-timings.json"})
    order(repo, marks)
    plant(repo, {"slow": 9000, "x": 100, "y": 100})
    order(repo, marks)  # orders by the planted record; records its own runs; writes the file
    carried = json.loads((repo.root / "vx-timings.json").read_text())
    assert carried["version"] == 1 and set(carried["tasks"]) == {"slow#build", "x#build", "y#build"}
    # a second runner: the file restored, no cache at all
    res_order, res = order(repo, marks, env={"VX_CACHE_DIR": str(tmp_path / "other-cache")})
    assert res_order == ["slow", "x", "y"], res.err


@pytest.mark.feature("PL-12")
def test_vx_history_shows_each_tasks_expected_duration(repo, tmp_path):
    """Issue item: the `vx history` verb, with `--format json`."""
    marks = tmp_path / "marks"
    workspace(repo, marks, schedule={"assume": {"deploy": 1234}})
    order(repo, marks)
    order(repo, marks)
    order(repo, marks)
    db = sqlite3.connect(repo.root / ".vx" / "cache" / "runs.db")
    with db:
        ids = [i for (i,) in db.execute("SELECT id FROM runs WHERE project = 'slow' ORDER BY id")]
        for i, ms in zip(ids, (3000, 1000, 2000)):
            db.execute("UPDATE runs SET duration_ms = ? WHERE id = ?", (ms, i))
    db.close()
    res = repo.vx("history", "--format", "json")
    assert res.code == 0, res.err
    report = json.loads(res.out)
    slow = next(r for r in report["tasks"] if r["task"] == "slow#build")
    assert slow == {
        "task": "slow#build",
        "runs": 3,
        "p50_ms": 2000.0,
        "last_ms": 2000.0,
        "min_ms": 1000.0,
        "max_ms": 3000.0,
    }
    assert report["tasks"][0]["task"] == "slow#build"  # slowest first
    assert report["window"] == 20 and report["assume"] == {"deploy": 1234}
    narrowed = json.loads(repo.vx("history", "slow#build", "--window=2", "--format=json").out)
    assert [r["task"] for r in narrowed["tasks"]] == ["slow#build"]
    assert narrowed["tasks"][0]["runs"] == 2 and narrowed["tasks"][0]["p50_ms"] == 1500.0
    text = repo.vx("history").out
    assert "slow#build" in text and "2.00s" in text and "deploy" in text
    bad = repo.vx("history", "--window=0")
    assert bad.code == 2 and "--window=0" in bad.err and "Traceback" not in bad.err


@pytest.mark.feature("PL-12")
def test_vx_history_with_nothing_on_record(repo):
    repo.write(npm_workspace({"a": {"tasks": {"build": {"exec": {"command": "true"}}}}})).commit()
    res = repo.vx("history", "--format=json")
    assert res.code == 0 and json.loads(res.out)["tasks"] == []
    assert "no executed task on record" in repo.vx("history").out


@pytest.mark.feature("PL-12")
def test_a_bad_schedule_config_names_the_field(repo):
    repo.write(npm_workspace({"a": {"tasks": {"build": {"exec": {"command": "true"}}}}}))
    repo.write({"vx.workspace.json": {"schedule": {"assume": {"build": "slow"}}}}).commit()
    res = repo.vx("run", "build")
    assert res.code == 2 and "schedule.assume.build" in res.err and "integer" in res.err, res.err
    assert "Traceback" not in res.err


@pytest.mark.feature("PL-12")
def test_the_history_order_as_the_plugins_schedule_hook(repo, tmp_path):
    """Issue item: the ordering as the first-party plugin's `schedule` hook — with
    `vx.plugins.schedule_history` declared, its options order the run (`assume` on a cold
    start, then the record), and a damaged history is one warning from the plugin."""
    marks = tmp_path / "marks"
    workspace(repo, marks)
    options = {"assume": {"slow#build": 60000}, "file": "t.json"}
    plugin = {"name": "vx.plugins.schedule_history", "options": options}
    repo.write({"vx.workspace.json": {"plugins": [plugin]}}).commit()
    assert order(repo, marks)[0] == ["slow", "x", "y"]  # assume, nothing on record
    assert set(json.loads((repo.root / "t.json").read_text())["tasks"]) == {
        "slow#build",
        "x#build",
        "y#build",
    }  # the run wrote the plugin's timings file
    plant(repo, {"slow": 10, "x": 100, "y": 9000})
    assert order(repo, marks)[0] == ["x", "y", "slow"]  # the record: x's chain is longest
    (repo.root / ".vx" / "cache" / "runs.db").write_bytes(b"this is no database " * 200)
    seen, res = order(repo, marks)
    assert res.err.count("run history is unreadable") == 1, res.err
    assert "plugin 'vx.plugins.schedule_history'" in res.err
    assert seen == ["x", "y", "slow"]  # the record unreadable: the timings file answers


@pytest.mark.feature("PL-12")
def test_the_plugins_options_are_checked(repo, tmp_path):
    marks = tmp_path / "marks"
    workspace(repo, marks)
    plugin = {"name": "vx.plugins.schedule_history", "options": {"window": 0}}
    repo.write({"vx.workspace.json": {"plugins": [plugin]}}).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2 and "window" in res.err and "1..1000" in res.err, res.err
    assert "Traceback" not in res.err


@pytest.mark.feature("PL-12")
def test_the_plugin_holds_a_task_whose_memory_would_not_fit(repo, tmp_path):
    """Issue item (optional part): the plugin's `admit` packs memory reservations against a
    budget — two tasks reserving 700 MB each under a 1G budget never run at once, though two
    slots are free. Each task marks its start and its end; a held task starts after the other
    ended, so the marks come in pairs."""
    marks = tmp_path / "marks"
    step = f"echo start-$N >> {marks} && sleep 0.3 && echo end-$N >> {marks}"
    packages = {
        name: {"tasks": {"build": {"exec": {"command": f"N={name}; {step}"}}}}
        for name in ("a", "b", "c")
    }
    plugin = {
        "name": "vx.plugins.schedule_history",
        "options": {"memory": "1G", "reservations": {"build": "700MB"}},
    }
    repo.write(npm_workspace(packages))
    repo.write({"vx.workspace.json": {"plugins": [plugin]}}).commit()
    res = repo.vx("run", "build", "--all", "--concurrency=2")
    assert res.code == 0, res.err
    seen = marks.read_text().split()
    assert len(seen) == 6
    for start, end in zip(seen[::2], seen[1::2]):
        assert start.startswith("start-") and end == "end-" + start[len("start-") :], seen


CHAIN = ("a", "b", "c")  # c needs b needs a, each saved; u1..u3 need nothing
FREE = ("u1", "u2", "u3")


def chain_workspace(repo, marks):
    """Each build appends start-NAME and end-NAME to `marks` around writing its output; the
    history (`assume`) makes the chain the critical path."""
    step = (
        f"echo start-$N >> {marks} && mkdir -p dist && echo $N > dist/o && echo end-$N >> {marks}"
    )
    packages = {}
    for i, name in enumerate(CHAIN + FREE):
        deps = [CHAIN[i - 1]] if 0 < i < len(CHAIN) else []
        task = {
            "exec": {"command": f"N={name}; {step}"},
            "dependsOn": ["^build"],
            "cache": {"inputs": {"files": ["*.json"]}, "outputs": {"files": ["dist/**"]}},
        }
        packages[name] = {"deps": deps, "tasks": {"build": task}}
    repo.write(npm_workspace(packages))
    assume = {"build": 10, **{f"{n}#build": 1000 for n in CHAIN}}
    repo.write({"vx.workspace.json": {"schedule": {"assume": assume}}}).commit()


@pytest.mark.feature("GR-08", "PL-12")
@pytest.mark.parametrize("concurrency", [1, 2])
def test_the_next_link_of_a_chain_gets_the_slot_its_dependency_frees(repo, tmp_path, concurrency):
    """Issue item: a finished task's slot passed on before the walk had queued its dependants
    (they are ready only once its outputs are saved), so a lesser ready task took it and the
    next link of the critical chain waited, once per link. The slot now passes on after the
    save, to the highest-ranked task counting the dependants. Read from the tasks' own marks:
    never more than `concurrency` tasks run, and from a link's end to the next link's start
    the independent tasks hold at most the other slots."""
    marks = tmp_path / "marks"
    chain_workspace(repo, marks)
    res = repo.vx("run", "build", "--all", f"--concurrency={concurrency}")
    assert res.code == 0, res.err
    seen = marks.read_text().split()
    assert sorted(seen) == sorted(f"{e}-{n}" for n in CHAIN + FREE for e in ("start", "end"))
    running: set[str] = set()
    between = False  # a link has ended and the next one has not started
    for mark in seen:
        event, name = mark.split("-")
        if event == "start":
            running.add(name)
        else:
            running.discard(name)
        if name in CHAIN[:-1] and event == "end":
            between = True
        elif name in CHAIN and event == "start":
            between = False
        assert len(running) <= concurrency, seen
        assert not between or len(running & set(FREE)) < concurrency, seen
    if concurrency == 1:
        assert seen[: 2 * len(CHAIN)] == [f"{e}-{n}" for n in CHAIN for e in ("start", "end")]
    again = repo.vx("run", "build", "--all")  # every task was saved
    assert again.code == 0 and " 6 cached" in again.err, again.err
