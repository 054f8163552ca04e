"""Running commands: sh -c in the project dir, env isolation, args, timeouts, retries, hints,
--continue modes (EX-01..EX-03, EX-05, EX-06, EX-10, EX-14, GR-10)."""

import pytest
from support.workspace import npm_workspace


def tasks_repo(repo, tasks, extra_pkgs=None):
    pkgs = {"app": {"tasks": tasks}}
    pkgs.update(extra_pkgs or {})
    repo.write(npm_workspace(pkgs)).commit()


@pytest.mark.feature("EX-01")
def test_runs_in_project_dir_with_pipes(repo):
    tasks_repo(repo, {"where": {"exec": {"command": "pwd | sed 's,.*/,,' && echo piped"}}})
    res = repo.vx("run", "where", cwd="packages/app")
    assert res.code == 0
    assert "app\n" in res.out and "piped" in res.out


@pytest.mark.feature("EX-03")
def test_environment_is_isolated(repo):
    cmd = 'echo "secret=${MY_SECRET:-unset} pass=${PASS_ME:-unset} def=$DEFINED run=$VX_RUN_TASK"; echo "$PATH"'
    tasks_repo(
        repo,
        {
            "env": {
                "exec": {
                    "command": cmd,
                    "env": {"passThrough": ["PASS_ME"], "define": {"DEFINED": "lit"}},
                }
            }
        },
    )
    res = repo.vx("run", "env", cwd="packages/app", env={"MY_SECRET": "hunter2", "PASS_ME": "yes"})
    assert res.code == 0, res.err
    assert "secret=unset pass=yes def=lit run=app#env" in res.out
    path_line = [l for l in res.out.splitlines() if "node_modules/.bin" in l][0]
    dirs = path_line.split(":")
    assert dirs[0].endswith("packages/app/node_modules/.bin") and dirs[1].endswith(
        "ws/node_modules/.bin"
    )


@pytest.mark.feature("EX-02")
def test_forwarded_args_reach_requested_tasks_only(repo):
    tasks_repo(
        repo,
        {
            "dep": {"exec": {"command": "echo dep-args:"}},
            "main": {"exec": {"command": "echo main-args:"}, "dependsOn": ["dep"]},
        },
    )
    res = repo.vx("run", "main", "--", "--flag", "two words", cwd="packages/app")
    assert res.code == 0
    assert "main-args: --flag two words" in res.out
    assert "dep-args:\n" in res.out or "dep-args: --flag" not in res.out


@pytest.mark.feature("EX-10")
def test_stdin_is_closed(repo):
    tasks_repo(repo, {"read": {"exec": {"command": "cat; echo done-reading"}}})
    res = repo.vx("run", "read", cwd="packages/app", timeout=20)
    assert res.code == 0 and "done-reading" in res.out


@pytest.mark.feature("EX-05")
def test_timeout_fails_with_143(repo):
    tasks_repo(repo, {"slow": {"exec": {"command": "sleep 30", "timeout": 300}}})
    res = repo.vx("run", "slow", cwd="packages/app", timeout=20)
    assert res.code == 1
    t = res.task("app#slow")
    assert t["status"] == "failed" and t["exitCode"] == 143 and t.get("timedOut") is True


@pytest.mark.feature("EX-06")
def test_retries_rerun_until_success(repo):
    cmd = "n=$(cat .count 2>/dev/null || echo 0); n=$((n+1)); echo $n > .count; [ $n -ge 3 ]"
    tasks_repo(repo, {"flaky": {"exec": {"command": cmd, "retries": 2}}})
    res = repo.vx("run", "flaky", cwd="packages/app")
    assert res.code == 0, res.out + res.err
    assert res.task("app#flaky")["attempts"] == 3
    assert "retrying app#flaky (attempt 2/3) after exit 1" in res.out + res.err


@pytest.mark.feature("EX-14")
def test_missing_command_gets_a_127_hint(repo):
    tasks_repo(repo, {"bad": {"exec": {"command": "definitely-not-a-command-xyz --go"}}})
    res = repo.vx("run", "bad", cwd="packages/app")
    assert res.code == 1
    assert res.task("app#bad")["exitCode"] == 127
    assert "definitely-not-a-command-xyz" in res.err


@pytest.mark.feature("EX-14", "CLI-59")
def test_signal_death_is_named(repo):
    tasks_repo(repo, {"boom": {"exec": {"command": "kill -SEGV $$"}}})
    res = repo.vx("run", "boom", cwd="packages/app")
    assert res.code == 1
    assert res.task("app#boom")["exitCode"] == 139
    assert "SIGSEGV" in res.out + res.err


@pytest.mark.feature("GR-10")
def test_continue_modes(repo):
    tasks = {
        "fail": {"exec": {"command": "exit 1"}},
        "after": {"exec": {"command": "echo after"}, "dependsOn": ["fail"]},
        "side": {"exec": {"command": "echo side"}},
        "all": {"dependsOn": ["after", "side"]},
    }
    tasks_repo(repo, tasks)
    default = repo.vx("run", "all", cwd="packages/app")
    assert default.code == 1
    assert (
        default.task("app#after")["status"] == "skipped"
        and default.task("app#side")["status"] == "success"
    )
    assert default.task("app#after")["blockedBy"] == "app#fail"
    always = repo.vx("run", "all", "--continue=always", cwd="packages/app")
    assert always.task("app#after")["status"] == "success" and always.code == 1


@pytest.mark.feature("GR-11")
def test_concurrency_bounds_parallel_tasks(repo):
    cmd = (
        "mkdir -p ../../.slots; touch ../../.slots/$$; sleep 0.3; ls ../../.slots | wc -l > ../../.peak-$$; "
        "rm ../../.slots/$$"
    )
    pkgs = {f"p{i}": {"tasks": {"t": {"exec": {"command": cmd}}}} for i in range(4)}
    repo.write(npm_workspace(pkgs)).commit()
    res = repo.vx("run", "t", "--all", "--concurrency", "1")
    assert res.code == 0
    peaks = [int(p.read_text()) for p in repo.root.glob(".peak-*")]
    assert peaks and max(peaks) == 1


def test_bad_concurrency_is_a_usage_error(repo):
    tasks_repo(repo, {"t": {"exec": {"command": "true"}}})
    res = repo.vx("run", "t", "--concurrency", "0x10", cwd="packages/app")
    assert res.code == 2 and "0x10" in res.err


@pytest.mark.feature("GR-10")
def test_continue_never_stops_dispatch_after_the_first_failure(repo):
    tasks = {
        "fail": {"exec": {"command": "exit 1"}},
        "later": {"exec": {"command": "touch ran-later"}, "dependsOn": ["gate"]},
        "gate": {"exec": {"command": "sleep 0.5"}},
        "all": {"dependsOn": ["fail", "later"]},
    }
    tasks_repo(repo, tasks)
    res = repo.vx("run", "all", "--continue=never", "--concurrency", "2", cwd="packages/app")
    assert res.code == 1
    assert res.task("app#fail")["status"] == "failed"
    assert res.task("app#later")["status"] == "skipped"
    assert not (repo.root / "packages/app/ran-later").exists()


@pytest.mark.feature("GR-10")
def test_continue_never_starts_nothing_that_was_still_waiting_for_a_slot(repo):
    # With one slot, `fail` runs first (two dependants: the highest priority); the siblings were
    # already ready and queued for the slot: none of them may start once it failed.
    tasks = {
        "fail": {"exec": {"command": "exit 1"}},
        "x": {"exec": {"command": "true"}, "dependsOn": ["fail"]},
        "all": {"dependsOn": ["x", "a", "b", "c"]},
    }
    tasks.update({n: {"exec": {"command": f"touch ran-{n}"}} for n in "abc"})
    tasks_repo(repo, tasks)
    res = repo.vx("run", "all", "--continue=never", "--concurrency", "1", cwd="packages/app")
    assert res.code == 1
    ran = sorted(p.name for p in (repo.root / "packages/app").glob("ran-*"))
    statuses = {t: res.task(f"app#{t}")["status"] for t in ("fail", "a", "b", "c")}
    assert statuses["fail"] == "failed"
    assert ran == [], (ran, statuses)
    assert {statuses[n] for n in "abc"} == {"skipped"}
