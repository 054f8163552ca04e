"""The run history (`runs.db` beside the cache) and what reads it: `vx last`, kept failure logs,
flaky rows. Real vx in a real git workspace."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from support.workspace import SRC, cached_build, lib_and_app, npm_workspace

FAIL = (
    "node -e \"console.log('first line');for(let i=0;i<3000;i++)console.log('noise '+i);"
    "console.error('the real error');process.exit(3)\""
)


def workspace(repo):
    ci = {"dependsOn": ["build", "test"]}  # a group: no command
    repo.write(lib_and_app(FAIL, ci=ci)).commit()


def history(repo):
    db = sqlite3.connect(repo.root / ".vx" / "cache" / "runs.db")
    try:
        db.row_factory = sqlite3.Row
        invocations = [dict(r) for r in db.execute("SELECT * FROM invocations ORDER BY started_at")]
        rows = [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        db.close()
    return invocations, rows


@pytest.mark.feature("OBS-01")
def test_each_run_writes_an_invocation_and_a_row_per_real_task(repo):
    workspace(repo)
    first = repo.vx("run", "build", "--all")
    assert first.code == 0, first.err
    second = repo.vx("run", "build", "--all")
    assert second.code == 0, second.err
    invocations, rows = history(repo)
    assert [i["run_id"] for i in invocations] == [
        first.summary["runId"],
        second.summary["runId"],
    ]
    run_id = invocations[0]["run_id"]
    assert run_id[14] == "7" and run_id[19] in "89ab"  # a version-7 UUID
    assert invocations[1]["run_id"] > run_id  # v7 ids sort by time
    assert invocations[0]["command"].startswith("vx run build --all")
    assert json.loads(invocations[0]["requested_tasks"]) == ["build"]
    assert (invocations[0]["task_count"], invocations[0]["hit_count"]) == (2, 0)
    assert (invocations[1]["hit_count"], invocations[1]["exit_ok"]) == (2, 1)
    cold = {(r["project"], r["task"]): r for r in rows if r["run_id"] == run_id}
    assert set(cold) == {("lib", "build"), ("app", "build")}
    assert cold[("lib", "build")]["status"] == "success"
    assert cold[("lib", "build")]["cache"] == "miss"
    assert cold[("lib", "build")]["hash"] == first.task("lib#build")["hash"]
    assert cold[("lib", "build")]["exit_code"] == 0
    assert cold[("lib", "build")]["duration_ms"] > 0
    assert cold[("lib", "build")]["cached"] == 1
    warm = [r for r in rows if r["run_id"] == invocations[1]["run_id"]]
    assert {r["status"] for r in warm} == {"cache-hit"}


@pytest.mark.feature("OBS-01")
def test_groups_are_not_recorded_and_a_failure_records_its_reason(repo):
    workspace(repo)
    result = repo.vx("run", "app#ci")
    assert result.code == 1
    _invocations, rows = history(repo)
    tasks = {f"{r['project']}#{r['task']}": r for r in rows}
    assert set(tasks) == {"lib#build", "app#build", "app#test"}  # not the group app#ci
    assert tasks["app#test"]["status"] == "failed"
    assert tasks["app#test"]["exit_code"] == 3
    assert tasks["app#test"]["reason"] == "failed (exit 3)"


@pytest.mark.feature("OBS-01")
def test_a_replayed_run_is_recorded_too(repo):
    workspace(repo)
    for _ in range(3):  # the second writes the receipt the third replays
        assert repo.vx("run", "build", "--all", summary=False).code == 0
    timing = repo.vx("run", "build", "--all", summary=False, env={"VX_TIMING": "1"})
    assert "receipt check" in timing.err  # the replay finished it
    last = repo.vx("last", "--format", "json")
    assert last.code == 0, last.err
    report = json.loads(last.out)
    assert report["run"]["replayed"] is True
    assert report["run"]["hit_count"] == 2
    assert {(t["id"], t["status"]) for t in report["tasks"]} == {
        ("lib#build", "cache-hit"),
        ("app#build", "cache-hit"),
    }
    invocations, _rows = history(repo)
    assert len(invocations) == 4


@pytest.mark.feature("OBS-01")
def test_a_planted_pending_file_is_read_as_runs_or_not_at_all(repo):
    """Item: receipts read with marshal (the run history's pending file too). `runs.pending`
    is the workspace's: records planted there (an archive, a shared disk) or torn are left out
    — never an error, a traceback or a row of the wrong shape — and the replays' own stay."""
    import marshal

    workspace(repo)
    for _ in range(3):  # the second writes the receipt the third replays
        assert repo.vx("run", "build", "--all", summary=False).code == 0
    pending = repo.root / ".vx" / "cache" / "runs.pending"
    assert pending.exists()  # the replay's own record
    wrong = marshal.dumps([["planted"], [[1]]])  # a record of the wrong shape
    row = ["x", "a", "build", "k", "cache-hit", "local", 0, 0.0, None, None, 0, 0, 0, 0]
    with open(pending, "ab") as f:
        f.write(len(wrong).to_bytes(4, "little") + wrong + b"\n")
        f.write(json.dumps([["planted"] * 26, [row + [None, None, 0, None]]]).encode() + b"\n")
        f.write(b"\xe9" * 64)
    last = repo.vx("last", "--format", "json")
    assert last.code == 0 and "Traceback" not in last.err, last.err
    assert json.loads(last.out)["run"]["replayed"] is True
    invocations, _rows = history(repo)
    assert len(invocations) == 3 and "planted" not in {i["run_id"] for i in invocations}
    assert not pending.exists()


@pytest.mark.feature("OBS-01")
def test_a_run_stopped_by_a_signal_records_nothing(repo):
    hang = "node -e \"require('fs').writeFileSync('../../started','1');setInterval(()=>{},1000)\""
    repo.write(
        npm_workspace(
            {
                "a": {
                    "tasks": {
                        "serve": {"exec": {"command": hang}},
                        "quick": {"exec": {"command": "node -e 0"}},
                    }
                }
            }
        )
    ).commit()
    assert repo.vx("run", "a#quick").code == 0  # a run that ends is recorded
    # the suite's cache layout kept (VX_SHARED_STORE): the first run above made the index in it
    env = {k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "a#serve"],
        cwd=repo.root,
        env={**env, "PYTHONPATH": SRC, "NO_COLOR": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (repo.root / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    invocations, _rows = history(repo)
    assert len(invocations) == 1  # only the run that ended


@pytest.mark.feature("OBS-07")
def test_vx_last_shows_failures_first_and_the_command_that_reruns_them(repo):
    workspace(repo)
    assert repo.vx("run", "app#test").code == 1
    assert repo.vx("run", "build", "--all").code == 0
    latest = repo.vx("last")
    assert latest.code == 0, latest.err
    assert latest.out.startswith("vx last: ok · vx run build --all")
    assert "re-run what failed" not in latest.out
    red = repo.vx("last", "--failed")
    assert red.code == 0, red.err
    lines = red.out.splitlines()
    assert lines[0].startswith("vx last: failed (exit 1) · vx run app#test")
    assert lines[2].split()[:2] == ["failed", "app#test"]  # failures first
    assert "failed (exit 3)" in lines[2]
    assert lines[-1] == "re-run what failed: vx run app#test"
    as_json = json.loads(repo.vx("last", "--failed", "--format", "json").out)
    assert as_json["rerun"] == "vx run app#test"
    assert as_json["tasks"][0]["id"] == "app#test"
    listed = repo.vx("last", "--list=5")
    assert listed.code == 0
    rows = listed.out.splitlines()
    assert len(rows) == 2 and " ok " in rows[0] and " failed " in rows[1]
    prefix = rows[1].split()[0]
    picked = repo.vx("last", prefix)
    assert picked.out.startswith("vx last: failed"), picked.out
    assert repo.vx("last", "--list=1", "--format", "json").code == 0


@pytest.mark.feature("OBS-07")
def test_vx_last_refuses_an_unknown_run_id_and_a_bad_count(repo):
    workspace(repo)
    empty = repo.vx("last")
    assert empty.code == 0 and "no run recorded yet" in empty.out
    assert repo.vx("run", "build", "--all").code == 0
    unknown = repo.vx("last", "ffffffff")
    assert unknown.code == 2 and "no recorded run has an id starting `ffffffff`" in unknown.err
    bad = repo.vx("last", "--list=zero")
    assert bad.code == 2 and "--list=zero" in bad.err
    assert "Traceback" not in unknown.err + bad.err


@pytest.mark.feature("OBS-13")
def test_a_failure_keeps_its_whole_log_and_prints_where(repo):
    workspace(repo)
    result = repo.vx("run", "app#test")
    assert result.code == 1
    said = [line for line in result.err.splitlines() if "its full log:" in line]
    assert len(said) == 1 and said[0].startswith("vx: app#test failed; its full log: ")
    path = said[0].split("its full log: ")[1]
    kept = open(path).read()
    assert "first line" in kept and "noise 2999" in kept and "the real error" in kept
    assert path.startswith(str(repo.root / ".vx" / "cache" / "logs"))
    shown = repo.vx("last", "--log", "app#test")
    assert shown.code == 0, shown.err
    assert shown.out == kept
    passed = repo.vx("last", "--log", "lib#build")
    assert passed.code == 2 and "no log of lib#build is kept" in passed.err


@pytest.mark.feature("OBS-13")
def test_kept_failure_logs_are_pruned_to_the_newest(repo):
    workspace(repo)
    logs = repo.root / ".vx" / "cache" / "logs"
    logs.mkdir(parents=True)
    for i in range(60):  # older runs' logs: their names sort before any new run id
        (logs / f"00000000-0000-7000-8000-{i:012d}-x_test.log").write_text("old")
    assert repo.vx("run", "app#test").code == 1
    names = sorted(p.name for p in logs.iterdir())
    assert len(names) == 50
    assert not names[-1].startswith("00000000")  # the new one is kept
    assert "00000000-0000-7000-8000-000000000059-x_test.log" in names  # the newest old ones
    assert "00000000-0000-7000-8000-000000000000-x_test.log" not in names


@pytest.mark.feature("OBS-08")
def test_a_key_that_passed_and_failed_is_shown_flaky(repo):
    # The outcome hangs on a file the key does not cover: the same key passes, then fails.
    flip = (
        "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').writeFileSync('dist/o','x');"
        "process.exit(require('fs').existsSync('../../flip')?1:0)\""
    )
    repo.write(npm_workspace({"a": {"tasks": {"check": cached_build(flip)}}})).commit()
    assert repo.vx("run", "a#check").code == 0
    (repo.root / "flip").write_text("1")
    assert repo.vx("run", "a#check", "--force").code == 1
    shown = repo.vx("last")
    row = [line for line in shown.out.splitlines() if line.startswith("  failed ")]
    assert row and row[0].endswith("flaky"), shown.out
    report = json.loads(repo.vx("last", "--format", "json").out)
    assert report["tasks"][0]["flaky"] is True


NO_CI = {"CI": "", "GITHUB_ACTIONS": "", "GITLAB_CI": "", "BUILDKITE": "", "CIRCLECI": ""}


def latest(repo):
    invocations, _rows = history(repo)
    return invocations[-1]


@pytest.mark.feature("OBS-12")
def test_a_run_records_its_commit_branch_and_ci(repo):
    workspace(repo)
    repo.git("checkout", "-q", "-b", "feature/x")
    head = repo.git("rev-parse", "HEAD").strip()
    env = {**NO_CI, "GITHUB_ACTIONS": "true", "CI": "true"}
    assert repo.vx("run", "build", "--all", env=env).code == 0
    run = latest(repo)
    assert (run["git_sha"], run["git_branch"], run["git_dirty"], run["ci_provider"]) == (
        head,
        "feature/x",
        0,  # outputs and the cache are gitignored
        "github-actions",
    )
    assert run["host"] == os.uname().nodename and run["os"] == sys.platform
    shown = repo.vx("last").out.splitlines()[0]
    assert f"feature/x@{head[:10]}" in shown and "ci github-actions" in shown, shown
    repo.git("pack-refs", "--all")  # the branch's ref now lives in packed-refs only
    assert not (repo.root / ".git" / "refs" / "heads" / "feature" / "x").exists()
    (repo.root / "notes.txt").write_text("untracked")
    assert repo.vx("run", "build", "--all", "--force", env={**NO_CI, "CI": "1"}).code == 0
    run = latest(repo)
    assert (run["git_sha"], run["git_branch"], run["git_dirty"], run["ci_provider"]) == (
        head,
        "feature/x",
        1,
        "ci",
    )
    shown = repo.vx("last").out.splitlines()[0]
    assert f"feature/x@{head[:10]} (dirty)" in shown, shown
    assert repo.vx("run", "build", "--all", "--force", env=NO_CI).code == 0
    assert latest(repo)["ci_provider"] is None


@pytest.mark.feature("OBS-12")
def test_a_detached_head_records_the_commit_and_no_branch(repo):
    workspace(repo)
    repo.commit("second")
    first = repo.git("rev-parse", "HEAD~1").strip()
    repo.git("checkout", "-q", "--detach", first)
    assert repo.vx("run", "build", "--all", env=NO_CI).code == 0
    run = latest(repo)
    assert (run["git_sha"], run["git_branch"], run["ci_provider"]) == (first, None, None)
    shown = repo.vx("last").out.splitlines()[0]
    assert f" · {first[:10]}" in shown and "@" not in shown, shown


@pytest.mark.feature("OBS-12")
def test_a_linked_worktree_records_its_own_branch(repo):
    workspace(repo)
    other = repo.root.parent / "other"
    repo.git("worktree", "add", "-q", "-b", "side", str(other))
    side = type(repo)(other)
    side.commit("on the side")
    assert (other / ".git").is_file()  # `gitdir: …`, HEAD there, refs in the main repository
    assert side.vx("run", "build", "--all", env=NO_CI).code == 0
    run = latest(side)
    assert (run["git_sha"], run["git_branch"]) == (side.git("rev-parse", "HEAD").strip(), "side")
    assert run["git_sha"] != repo.git("rev-parse", "HEAD").strip()


@pytest.mark.feature("OBS-12")
def test_a_replay_reads_the_commit_again(repo):
    workspace(repo)
    (repo.root / "notes.txt").write_text("untracked")  # dirty, and so on every replay
    for _ in range(3):  # the second writes the receipt the third replays
        assert repo.vx("run", "build", "--all", summary=False, env=NO_CI).code == 0
    repo.git("commit", "-q", "--allow-empty", "-m", "no file changed")
    head = repo.git("rev-parse", "HEAD").strip()
    timing = repo.vx(
        "run", "build", "--all", summary=False, env={**NO_CI, "VX_TIMING": "1", "BUILDKITE": "1"}
    )
    assert "receipt check" in timing.err  # the replay finished it
    assert repo.vx("last").code == 0  # folds the replay's pending record into runs.db
    run = latest(repo)
    assert (run["replayed"], run["git_sha"], run["git_branch"], run["ci_provider"]) == (
        1,
        head,
        "main",
        "buildkite",
    )
    assert run["git_dirty"] == 1  # the receipted run's, which listed the same files


def info_row(repo, name):
    shown = repo.vx("info", summary=False)
    assert shown.code == 0, shown.err
    found = [line[len(name) :].strip() for line in shown.out.splitlines() if line.startswith(name)]
    assert len(found) == 1, shown.out
    return found[0]


@pytest.mark.feature("OBS-08")
def test_vx_info_lists_the_tasks_flaky_on_record(repo):
    flip = (
        "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').writeFileSync('dist/o','x');"
        "process.exit(require('fs').existsSync('../../flip')?1:0)\""
    )
    # Fails its first attempt, passes its second (the marker file counts attempts).
    second_try = (
        "node -e \"const f='../../tried';const n=require('fs').existsSync(f);"
        "require('fs').writeFileSync(f,'1');process.exit(n?0:1)\""
    )
    repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"check": cached_build(flip)}},
                "c": {"tasks": {"lint": cached_build()}},
                "b": {"tasks": {"test": {"exec": {"command": second_try, "retries": 1}}}},
            }
        )
    ).commit()
    assert info_row(repo, "flaky") == "no runs recorded"
    assert repo.vx("run", "a#check", "c#lint").code == 0
    assert info_row(repo, "flaky") == "none on record"
    (repo.root / "flip").write_text("1")
    assert repo.vx("run", "a#check", "c#lint", "--force").code == 1
    assert info_row(repo, "flaky") == "a#check"  # not c#lint, which only ever passed
    assert repo.vx("run", "b#test").code == 0
    assert info_row(repo, "flaky") == "a#check, b#test"
