"""Another task of the run writes into a task's outputs before that task starts — a `tsc -b` that
builds a referenced project into that project's `out-tsc` while the project's own `tsc -b` runs
beside it (floating-ui's `typecheck`). vx wipes a miss's outputs before it runs, but not what
this run already wrote there: that writer may still be writing, and what it wrote is no stale
output. Real turbo, which never wipes, is the oracle: the same workspace passes under both.

The workspace orders the three tasks with files, not sleeps: `d` writes c's `out/data`, then `u`
(which `c` depends on) ends, `c` starts, and only then does `d` write c's `out/info`. `c` fails
when it finds `out/info` without `out/data`, which is what a wipe at c's start left."""

from __future__ import annotations

import subprocess

import pytest
from support.corpora import tool_env
from support.npm_packages import installed_or_skip

SYNC = "../../.sync"
QUIET = {"TURBO_TELEMETRY_DISABLED": "1", "TURBO_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"}


def race(check_c: str) -> dict[str, object]:
    wait = "while [ ! -f {} ]; do sleep 0.02; done"
    return {
        "package.json": {
            "name": "race",
            "private": True,
            "packageManager": "npm@11.19.1",
            "workspaces": ["packages/*"],
        },
        "turbo.json": {"tasks": {"check": {"dependsOn": ["^check"], "outputs": ["out/**"]}}},
        ".gitignore": "node_modules/\n.sync/\nout/\n.vx/\n.turbo/\n",
        "packages/u/package.json": {
            "name": "u",
            "version": "1.0.0",
            "scripts": {"check": wait.format(f"{SYNC}/d-wrote")},
        },
        "packages/c/package.json": {
            "name": "c",
            "version": "1.0.0",
            "dependencies": {"u": "1.0.0"},
            "scripts": {
                "check": f"touch {SYNC}/c-started; {wait.format(f'{SYNC}/d-done')}; {check_c}"
            },
        },
        "packages/d/package.json": {
            "name": "d",
            "version": "1.0.0",
            "scripts": {
                "check": "mkdir -p ../c/out && echo c > ../c/out/data"
                f" && touch {SYNC}/d-wrote; {wait.format(f'{SYNC}/c-started')};"
                f" echo info > ../c/out/info; touch {SYNC}/d-done"
            },
        },
    }


TRUSTS_ITS_STATE = (
    "if [ -f out/info ] && [ ! -f out/data ]; then echo 'c: out/info says built but out/data is gone';"
    " exit 1; fi; mkdir -p out; echo c > out/data; echo info > out/info"
)


def fresh(repo) -> None:
    """A clean tree for the next run: no outputs, no cache, the order files gone."""
    subprocess.run(["rm", "-rf", ".vx", ".turbo", ".sync", "packages/c/out"], cwd=repo.root)
    (repo.root / ".sync").mkdir()


@pytest.fixture
def workspace(repo):
    repo.write(race(TRUSTS_ITS_STATE)).commit()
    return repo


def test_a_task_keeps_what_another_task_of_the_run_wrote_into_its_outputs(workspace):
    fresh(workspace)
    first = workspace.vx("run", "check", "--concurrency=3")
    assert first.code == 0, first.out + first.err
    assert (workspace.root / "packages/c/out/data").read_text() == "c\n"
    second = workspace.vx("run", "check", "--concurrency=3")
    assert second.code == 0, second.err
    assert sorted(second.statuses().values()) == [("success", "up-to-date")] * 3


def test_real_turbo_runs_the_same_workspace(workspace):
    """The oracle: turbo never wipes, so the same two writers write the same files."""
    where = installed_or_skip("turbo")
    turbo = sorted(where.parent.glob("@turbo/*/bin/turbo"))[0]
    subprocess.run(["npm", "install", "-q", "--no-audit", "--no-fund"], cwd=workspace.root)
    fresh(workspace)
    out = subprocess.run(
        [str(turbo), "run", "check", "--concurrency=3"],
        cwd=workspace.root,
        env=tool_env("TURBO_", QUIET),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (workspace.root / "packages/c/out/data").read_text() == "c\n"


def test_a_stale_output_from_before_the_run_is_still_wiped(workspace):
    """What the run did not write is wiped as always: an entry never holds a stale output."""
    fresh(workspace)
    (workspace.root / "packages/c/out").mkdir(parents=True)
    (workspace.root / "packages/c/out/stale.js").write_text("old\n")
    assert workspace.vx("run", "check", "--concurrency=3").code == 0
    assert not (workspace.root / "packages/c/out/stale.js").exists()
    assert sorted(p.name for p in (workspace.root / "packages/c/out").iterdir()) == ["data", "info"]


def test_a_failure_beside_another_task_s_writes_says_so(repo):
    """When a task fails with files in its outputs that another task wrote, the run names them."""
    repo.write(
        race("if [ -f out/data ]; then echo 'c: out/data was not mine'; exit 1; fi")
    ).commit()
    fresh(repo)
    res = repo.vx("run", "check", "--concurrency=3")
    assert res.code == 1 and "c: out/data was not mine" in res.out + res.err
    said = " ".join((res.out + res.err).split())
    assert (
        "c#check started with 1 file(s) in its outputs that another task of this run had "
        "written (packages/c/out/data)" in said
    ), said
