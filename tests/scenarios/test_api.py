"""vx as a library (TL-09): `vx.plan` and `vx.run` in a Python process of their own, as a tool that
embeds vx would call them — typed results, a log sink, refusals as exceptions, an abort handle
used from another thread. Real git, real node."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.workspace import lib_and_app, npm_workspace, vx_env

SLEEPER = (
    "node -e \"require('fs').writeFileSync('started', String(process.pid));"
    'setTimeout(() => {}, 120000)"'
)


def python(ws, body: str) -> dict:
    """Run `body` (which leaves its answer in `out`) in a fresh interpreter in the workspace."""
    script = "import json, vx\nout = {}\n" + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ws.root,
        env=vx_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.feature("TL-09")
def test_plan_then_run_then_hits_with_a_log_sink(repo):
    ws = repo.write(lib_and_app("node -e 0")).commit()
    out = python(
        ws,
        """
        before = vx.plan_run(["build"], all=True)
        out["plan"] = [[str(t.id), t.predicted, len(t.key or "")] for t in before]
        lines = []
        first = vx.run(["build"], all=True, log=lines.append)
        out["first"] = [first.exit_code, sorted((str(r.id), r.status.value, r.cache.value) for r in first.results)]
        out["lines"] = lines
        second = vx.run(["build"], all=True)
        out["second"] = sorted(r.cache.value for r in second.results)
        out["after"] = [t.predicted for t in vx.plan_run(["build"], all=True)]
        """,
    )
    assert out["plan"] == [["lib#build", "miss", 16], ["app#build", "miss", 16]]
    assert out["first"] == [0, [["app#build", "success", "miss"], ["lib#build", "success", "miss"]]]
    assert any("2 tasks" in line for line in out["lines"]), out["lines"]
    assert all("\x1b[" not in line and "\n" not in line for line in out["lines"])  # plain lines
    assert out["second"] == ["up-to-date", "up-to-date"]
    assert out["after"] == ["hit-local", "hit-local"]


@pytest.mark.feature("TL-09")
def test_a_failure_is_a_result_and_a_refusal_an_exception(repo):
    ws = repo.write(
        npm_workspace({"a": {"tasks": {"t": {"exec": {"command": "node -e 'process.exit(3)'"}}}}})
    ).commit()
    out = python(
        ws,
        """
        from vx.errors import VxError
        failed = vx.run(["t"], all=True)
        out["failed"] = [failed.exit_code, [(r.status.value, r.exit_code) for r in failed.results]]
        try:
            vx.run(["nope"], all=True)
        except VxError as exc:
            out["refused"] = [type(exc).__name__, exc.exit_code, str(exc)]
        try:
            vx.run("t")
        except VxError as exc:
            out["string"] = exc.exit_code
        """,
    )
    assert out["failed"] == [1, [["failed", 3]]]
    assert out["refused"][1] == 2 and "nope" in out["refused"][2], out["refused"]
    assert out["string"] == 2


@pytest.mark.feature("TL-09")
def test_an_abort_from_another_thread_stops_the_run_as_ctrl_c(repo):
    ws = repo.write(npm_workspace({"a": {"tasks": {"serve": {"exec": {"command": SLEEPER}}}}}))
    ws.write({".gitignore": "node_modules/\n.vx/\nstarted\n"}).commit()
    out = python(
        ws,
        """
        import os, threading, time
        stop = vx.Abort()

        def stopper():
            while not os.path.exists("packages/a/started"):  # the task is running
                time.sleep(0.02)
            stop.stop()
            stop.stop()  # a second stop does nothing (a second Ctrl-C would kill vx)

        threading.Thread(target=stopper, daemon=True).start()
        summary = vx.run(["serve"], all=True, abort=stop)
        out["summary"] = [summary.exit_code, summary.interrupted]
        pid = int(open("packages/a/started").read())
        try:
            os.kill(pid, 0)
            out["alive"] = True
        except ProcessLookupError:
            out["alive"] = False
        """,
    )
    assert out["summary"] == [130, True]
    assert out["alive"] is False
