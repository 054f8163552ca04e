"""Tasks die with vx (item 6): a SIGKILLed vx leaves no task running, its grandchildren included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import SRC, npm_workspace

HANG = (
    "node -e \"require('child_process').spawn(process.execPath,['-e',"
    '\'require(\\"fs\\").writeFileSync(\\"grandchild.pid\\",String(process.pid));setInterval(()=>{},1000)\'],'
    "{stdio:'ignore'});require('fs').writeFileSync('child.pid',String(process.pid));setInterval(()=>{},1000)\""
)


def running(pid: int) -> bool:
    """Alive and not a zombie (a container's PID 1 may be slow to reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(predicate, what: str, limit_s: float = 60.0) -> None:
    """Poll an event (a file, a death) up to a generous bound; never a sleep that 'should be enough'."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_item6_sigkill_of_vx_ends_every_task_and_its_children(repo):
    repo.write(
        npm_workspace(
            {name: {"tasks": {"serve": {"exec": {"command": HANG}}}} for name in ("a", "b")}
        )
    ).commit()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VX_", "CI")) or k == "VX_SHARED_STORE"
    }
    env.update({"PYTHONPATH": SRC, "NO_COLOR": "1"})
    vx = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "serve", "--all"],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    pids = []
    try:
        for name in ("a", "b"):
            for kind in ("child", "grandchild"):
                path = repo.root / f"packages/{name}/{kind}.pid"
                wait_for(
                    lambda path=path: path.exists() and path.read_text(), f"{path.name} of {name}"
                )
                pids.append(int(path.read_text()))
        assert all(running(p) for p in pids)
        vx.send_signal(signal.SIGKILL)
        vx.wait()
        for pid in pids:
            wait_for(
                lambda pid=pid: not running(pid), f"task process {pid} to end after vx was killed"
            )
    finally:
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
