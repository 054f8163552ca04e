"""Ctrl-C and SIGTERM tear every task's process group down and leave no partial cache entry (EX-11, EX-16)."""

import os
import signal
import subprocess
import sys
import time

from conftest import SRC, npm_workspace


def start(repo, *args):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VX_")}, "PYTHONPATH": SRC, "NO_COLOR": "1",
           "VX_KILL_GRACE_MS": "1000"}
    return subprocess.Popen([sys.executable, "-m", "vx", "run", *args], cwd=repo.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().split()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


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
    cmd = ("sh -c 'trap \"\" TERM; sleep 60' & echo $$ $! >> ../../pids; "
           "mkdir -p dist; echo partial > dist/out.js; wait")
    pkgs = {f"p{i}": {"tasks": {"build": {"exec": {"command": cmd},
                                           "cache": {"inputs": {"files": []}, "outputs": {"files": ["dist/**"]}}}}}
            for i in range(n)}
    repo.write(npm_workspace(pkgs)).commit()


def test_ctrl_c_kills_every_process_group_within_3s(repo):
    make(repo)
    proc = start(repo, "build", "--all", "--concurrency", "2")
    pids_file = repo.root / "pids"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(pids_file.read_text().split() if pids_file.exists() else []) < 4:
        time.sleep(0.02)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 4
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
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
    proc.communicate(timeout=10)
    assert proc.returncode == 143
