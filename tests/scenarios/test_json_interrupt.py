"""Ctrl-C under `vx run --format json`: the exit code says interrupted and stdout is still one
JSON document a script can read (docs/cli.md)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.schemas import validate
from support.workspace import SRC, npm_workspace

# Tells the test it is running (a file at the workspace root), then waits to be stopped.
HANG = "node -e \"require('fs').writeFileSync('../../started','1');setInterval(()=>{},1000)\""


@pytest.mark.feature("WS-22", "EX-11")
def test_ctrl_c_under_format_json_exits_130_with_the_record_on_stdout(repo):
    """SIGINT to the process group (what Ctrl-C sends) while a task runs, waiting on the task's
    own sign that it started: exit 130, and stdout is one JSON document saying the run was not
    ok, with exit code 130 — nothing else on stdout."""
    repo.write(npm_workspace({"a": {"tasks": {"hang": {"exec": {"command": HANG}}}}})).commit()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
    env.update({"PYTHONPATH": SRC, "NO_COLOR": "1", "VX_KILL_GRACE_MS": "1000"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "hang", "--all", "--format", "json"],
        cwd=repo.root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        started = repo.root / "started"
        deadline = time.monotonic() + 120
        while not started.exists():  # an event the task writes, not a time that should do
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    validate(doc, "run.json")
    assert doc["ok"] is False and doc["run"]["exit_code"] == 130, doc
    assert "Traceback" not in err
