"""Two `vx run`s in one workspace take turns on the run lock (GR-16)."""

import os
import subprocess
import sys
import time

from conftest import SRC, npm_workspace


def test_concurrent_runs_take_turns(repo):
    # Each run appends start/end marks; overlapping runs would interleave them.
    cmd = "echo start >> ../../marks; sleep 1.5; echo end >> ../../marks"
    repo.write(npm_workspace({"app": {"tasks": {"t": {"exec": {"command": cmd}}}}})).commit()
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1"}
    procs = []
    for _ in range(2):
        procs.append(subprocess.Popen([sys.executable, "-m", "vx", "run", "t"], cwd=repo.root / "packages/app",
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        time.sleep(0.2)
    outs = [p.communicate(timeout=30) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert (repo.root / "marks").read_text().split() == ["start", "end", "start", "end"]
    assert "waiting for another vx run" in outs[1][1]
