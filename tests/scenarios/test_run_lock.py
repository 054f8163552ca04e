"""Two `vx run`s in one workspace take turns on the run lock (GR-16)."""

import os
import subprocess
import sys
import time

import pytest
from support.processes import Stderr
from support.workspace import SRC, npm_workspace


def run_t(repo, env: dict) -> subprocess.CompletedProcess:
    """`vx run t` in packages/app, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "vx", "run", "t"],
        cwd=repo.root / "packages/app",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.feature("GR-16")
def test_concurrent_runs_take_turns(repo):
    # Each run appends start/end marks; overlapping runs would interleave them. A task ends once
    # the test releases it, so the first still runs when the second is seen waiting.
    cmd = (
        "echo start >> ../../marks; while [ ! -e ../../release ]; do sleep 0.02; done; "
        "echo end >> ../../marks"
    )
    repo.write(npm_workspace({"app": {"tasks": {"t": {"exec": {"command": cmd}}}}})).commit()
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1"}
    marks = repo.root / "marks"

    def start() -> Stderr:
        return Stderr(
            subprocess.Popen(
                [sys.executable, "-m", "vx", "run", "t"],
                cwd=repo.root / "packages/app",
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )

    first = start()
    deadline = time.monotonic() + 120
    while not (marks.exists() and marks.read_text()):  # the first holds the lock: its task runs
        assert time.monotonic() < deadline, first.text
        time.sleep(0.02)
    second = start()
    second.wait_for("waiting for another vx run")
    (repo.root / "release").touch()
    first.finish(), second.finish()
    assert [first.proc.returncode, second.proc.returncode] == [0, 0], first.text + second.text
    assert marks.read_text().split() == ["start", "end", "start", "end"]
    assert "waiting for another vx run" not in first.text


@pytest.mark.feature("GR-16")
def test_a_lock_left_by_a_dead_run_whose_pid_now_belongs_to_a_live_process_never_blocks(
    repo, tmp_path
):
    """A lock is the kernel's (flock), dropped with its holder; what a dead run left behind
    in TMPDIR — its lock naming a pid that a live, unrelated process now has — is not a holder."""
    import xxhash

    repo.write(npm_workspace({"app": {"tasks": {"t": {"exec": {"command": "echo ran"}}}}})).commit()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    stranger = subprocess.Popen(
        ["sleep", "300"]
    )  # the live process that "reused" the dead run's pid
    try:
        digest = xxhash.xxh3_64_hexdigest(str(repo.root).encode())
        old = tmp / f"vx-run-{digest}.lock"  # the directory lock earlier versions left
        old.mkdir()
        (old / "pid").write_text(str(stranger.pid))
        (tmp / f"vx-run-{digest}.flock").write_text(str(stranger.pid))
        env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1", "TMPDIR": str(tmp)}
        proc = run_t(repo, env)
        assert proc.returncode == 0, proc.stderr
        assert "waiting for another vx run" not in proc.stderr
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.feature("GR-16")
def test_a_killed_holder_frees_the_lock_at_once(repo, tmp_path):
    """The holder SIGKILLed mid-task: the next run takes the lock without reclaiming anything."""
    started = tmp_path / "started"
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"t": {"exec": {"command": f"touch {started}; sleep 300"}}}}}
        )
    ).commit()
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1", "TMPDIR": str(tmp_path)}
    holder = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "t"],
        cwd=repo.root / "packages/app",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and holder.poll() is None, (
            "the holder never started its task"
        )
        time.sleep(0.05)
    holder.kill()
    holder.wait()
    repo.write(
        {"packages/app/vx.config.json": {"tasks": {"t": {"exec": {"command": "echo second"}}}}}
    )
    proc = run_t(repo, env)
    assert proc.returncode == 0, proc.stderr
    assert "second" in proc.stdout
