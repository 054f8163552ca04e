#!/usr/bin/env python3
"""Measure remote execution: a cold build of a generated monorepo here, then on BuildGrid's
workers (tests/scenarios/support/reapi_servers.py ExecStack: PostgreSQL, `bgd`,
reapi_worker.py bots), each as a fresh `vx` process on a fresh copy with an empty cache, wall
clock.

    local      vx run build, remote off (concurrency: the CPUs)
    remote N   the same with every build remote, N workers (a fresh server each time, so
               its action cache serves nothing)

    python bench/remote_exec.py --packages 100 --task-ms 200 --workers 2,4 --runs 2

Prints a markdown table of the median of each and `uptime`; docs/remote-execution.md records a run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "scenarios"))

from support.reapi_servers import ExecStack  # noqa: E402


def generate(root: Path, packages: int, task_ms: int) -> Path:
    repo = root / "origin"
    subprocess.run(
        [sys.executable, str(HERE / "gen_monorepo.py"), str(repo), "--packages", str(packages),
         "--files-per-package", "10", "--tools", "vx", "--no-devdeps", "--task-ms", str(task_ms)],
        check=True, capture_output=True,
    )  # fmt: skip
    ws = json.loads((repo / "vx.workspace.json").read_text())
    ws["remoteExecution"] = {"default": True, "capacity": 8}
    (repo / "vx.workspace.json").write_text(json.dumps(ws, indent=2) + "\n")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "commit", "-qam", "remote"], cwd=repo, check=True)
    time.sleep(1.1)  # older than git's index, as a real checkout is
    return repo


def cold(origin: Path, work: Path, env: dict[str, str]) -> float:
    copy = work / f"run-{time.monotonic_ns()}"
    shutil.copytree(origin, copy, symlinks=True)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
    full.update({"PYTHONPATH": str(HERE.parent / "src"), "VX_SHARED_STORE": "0", **env})
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "run", "build"], cwd=copy, env=full,
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    took = time.perf_counter() - started
    if proc.returncode != 0 or ("VX_REAPI_ENDPOINT" in env and "ran here instead" in proc.stderr):
        sys.exit(f"the run failed or fell back:\n{proc.stderr[-3000:]}")
    shutil.rmtree(copy)
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packages", type=int, default=100)
    ap.add_argument("--task-ms", type=int, default=200)
    ap.add_argument("--workers", default="2,4")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vx-bench-rexec-"))
    try:
        origin = generate(work, args.packages, args.task_ms)
        rows = [("local", statistics.median(cold(origin, work, {}) for _ in range(args.runs)))]
        for n in (int(w) for w in args.workers.split(",")):
            times = []
            for _ in range(args.runs):
                stack = ExecStack(work / f"stack-{n}-{time.monotonic_ns()}")
                try:
                    for _ in range(n):
                        stack.add_worker()
                    times.append(cold(origin, work, stack.env()))
                finally:
                    stack.stop()
            rows.append((f"remote, {n} workers", statistics.median(times)))
        base = rows[0][1]
        print(f"{args.packages} packages, --task-ms {args.task_ms}, median of {args.runs}\n")
        print("| build | wall | vs local |\n|---|---|---|")
        for name, took in rows:
            print(f"| {name} | {took:.1f} s | {took / base:.2f}× |")
        print("\n" + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
