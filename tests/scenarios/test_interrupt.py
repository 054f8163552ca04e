"""Ctrl-C and SIGTERM tear every task's process group down and leave no partial cache entry (EX-11, EX-16)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.terminal import pane_fixture, vx_in_shell, wait_for_file  # noqa: F401 (the `pane` fixture)
from support.workspace import SRC, npm_workspace


def start(repo, *args):
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"
        },
        "PYTHONPATH": SRC,
        "NO_COLOR": "1",
        "VX_KILL_GRACE_MS": "1000",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "vx", "run", *args],
        cwd=repo.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path, timeout=120.0, count=1):
    """The words of `path` once it holds at least `count` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= count:
            return path.read_text().split()
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} words")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def make(repo, n=2):
    # Each task starts a grandchild that ignores SIGTERM, records both pids, then waits.
    cmd = (
        "sh -c 'trap \"\" TERM; sleep 60' & echo $$ $! >> ../../pids; "
        "mkdir -p dist; echo partial > dist/out.js; wait"
    )
    pkgs = {
        f"p{i}": {
            "tasks": {
                "build": {
                    "exec": {"command": cmd},
                    "cache": {"inputs": {"files": []}, "outputs": {"files": ["dist/**"]}},
                }
            }
        }
        for i in range(n)
    }
    repo.write(npm_workspace(pkgs)).commit()


def test_ctrl_c_kills_every_process_group_within_3s(repo):
    make(repo)
    proc = start(repo, "build", "--all", "--concurrency", "2")
    pids_file = repo.root / "pids"
    deadline = time.monotonic() + 120
    while (
        time.monotonic() < deadline
        and len(pids_file.read_text().split() if pids_file.exists() else []) < 4
    ):
        time.sleep(0.02)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 4
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    deadline = t0 + 3
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    assert not any(alive(p) for p in pids), "a task process survived Ctrl-C"
    assert list((repo.root / ".vx" / "cache").glob("*.tar.zst")) == []
    assert "Traceback" not in err


def test_sigterm_exits_143(repo):
    make(repo, n=1)
    proc = start(repo, "build", "--all")
    wait_for(repo.root / "pids")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143


SLOW_ASYNCIO = """
import os, sys, time
class SlowAsyncio:  # holds the run between starting its first wave and loading asyncio
    def find_spec(self, name, path=None, target=None):
        if name == "asyncio" and os.environ.get("VX_TEST_IN_GAP"):
            gap = os.environ.pop("VX_TEST_IN_GAP")
            open(gap, "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(gap + ".go") and time.monotonic() < deadline:
                time.sleep(0.01)  # until the test has sent its Ctrl-C
        return None
sys.meta_path.insert(0, SlowAsyncio())
"""


def test_ctrl_c_while_the_first_wave_runs_before_the_walk_stops_it(repo, tmp_path):
    """The first commands start before asyncio is loaded (docs/optimizations.md #25). A Ctrl-C in
    that gap is held until the walk exists, which then stops the started group as any other:
    exit 130, the task aborted, nothing of it left running, nothing cached."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_ASYNCIO)
    cmd = "echo $$ > ../../pid; sleep 30; echo done > ../../finished"
    repo.write(
        npm_workspace(
            {
                "p0": {
                    "tasks": {
                        "build": {
                            "exec": {"command": cmd},
                            "cache": {"inputs": {"files": []}, "outputs": {"files": []}},
                        }
                    }
                }
            }
        )
    ).commit()
    gap = tmp_path / "in-gap"
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"
        },
        "PYTHONPATH": f"{hook}:{SRC}",
        "NO_COLOR": "1",
        "VX_TEST_IN_GAP": str(gap),
    }  # no VX_KILL_GRACE_MS: checking it loads asyncio
    proc = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "build", "--all"],
        cwd=repo.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    (pid,) = [int(p) for p in wait_for(repo.root / "pid")]
    deadline = time.monotonic() + 120
    while not gap.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gap.exists() and alive(pid)  # the task runs, and asyncio is not loaded yet
    proc.send_signal(signal.SIGINT)
    Path(f"{gap}.go").touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not alive(pid) and not (repo.root / "finished").exists()
    assert "Traceback" not in err and list((repo.root / ".vx" / "cache").glob("*.tar.zst")) == []


@pytest.mark.feature("CLI-56")
def test_ctrl_c_on_a_terminal_counts_stopped_and_not_started_apart(repo, pane):
    """Two tasks running, four waiting for a slot: Ctrl-C stops the two and starts none of the
    four (their slots free as the two stop), the footer says `2 stopped · 4 not started`, and
    the status region leaves nothing behind — not even the `──` the terminal's `^C` echo would
    have kept of its separator."""
    cmd = "echo $$ >> ../../started; sleep 60"
    build = {"exec": {"command": cmd}}
    repo.write(npm_workspace({f"p{i}": {"tasks": {"build": build}} for i in range(6)})).commit()
    p = pane(vx_in_shell(repo, "run", "build", "--all", "--concurrency", "2"), repo.root)
    started = repo.root / "started"
    # Both running (the first wave, which the walk may not have taken over yet: a stop then
    # still counts them as stopped, not as never started)
    assert len(wait_for(started, timeout=60, count=2)) == 2, p.text()
    p.keys("C-c")
    assert wait_for_file(repo.root / "code.txt", p) == "130"
    shown = p.screen()
    assert "6 tasks · 0 cached (0%) · 2 stopped · 4 not started" in shown, shown
    assert "◌ 4 tasks not run • the run was stopped" in shown, shown
    stray = [row for row in shown.splitlines() if row.startswith("──")]
    assert not stray, shown
    assert len(started.read_text().split()) == 2  # none started after the stop
