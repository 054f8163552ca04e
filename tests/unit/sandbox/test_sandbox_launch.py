"""executor.Launch: the seam the sandbox runner starts bwrap through (real processes, EX-05, EX-11)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from vx.proc.executor import Launch, ProcessTable, execute

ENV = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C"}


def run(command: str, cwd: Path, launch: Launch, *, timeout_ms=None, table=None):
    table = table or ProcessTable()
    coro = execute(
        command,
        cwd=cwd,
        env=ENV,
        timeout_ms=timeout_ms,
        on_output=lambda c: None,
        table=table,
        grace_ms=120_000,  # a stop that needs the grace shows as minutes, not as a near miss
        launch=launch,
    )
    return asyncio.run(asyncio.wait_for(coro, 300))


def out(result) -> bytes:
    return b"".join(c.data for c in result.log if c.stream == 1)


def test_launch_argv_replaces_sh_c(tmp_path):
    result = run("ignored", tmp_path, Launch(argv=["sh", "-c", "echo launched; pwd; exit 4"]))
    assert result.exit_code == 4 and out(result) == f"launched\n{tmp_path}\n".encode()


def test_launch_stdin_and_passed_fds(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("from stdin\n")
    stdin = os.open(src, os.O_RDONLY)
    read, write = os.pipe()
    try:
        result = run(
            "",
            tmp_path,
            Launch(
                argv=["sh", "-c", f"cat; echo passed > /proc/self/fd/{write}"],
                stdin=stdin,
                pass_fds=(write,),
            ),
        )
        os.close(write)
        assert out(result) == b"from stdin\n" and os.read(read, 100) == b"passed\n"
    finally:
        os.close(stdin)
        os.close(read)


def test_polite_signals_go_to_the_launch_group_and_sigkill_to_ours(tmp_path):
    # The task lives in a session of its own, as inside bwrap --new-session; only the
    # launch's polite_group lets SIGTERM reach its trap before the timeout's SIGKILL.
    pidfile = tmp_path / "inner.pid"
    (tmp_path / "inner.sh").write_text(
        f"trap 'echo got-term; exit 3' TERM; echo $$ > {pidfile}; while :; do sleep 0.05; done\n"
    )
    script = "setsid sh inner.sh & wait"

    def group():
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        return int(text) if text else None

    started = time.monotonic()
    result = run(
        "", tmp_path, Launch(argv=["sh", "-c", script], polite_group=group), timeout_ms=5000
    )  # the timeout leaves the inner shell time to write its pid, even on a loaded machine
    assert result.timed_out and b"got-term" in out(result)
    assert time.monotonic() - started < 60  # the trap ended it, not the 120 s grace
