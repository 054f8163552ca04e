#!/usr/bin/env python3
"""Measure a shared remote cache: clone A builds cold and uploads, clone B restores (issue 5).

Generates a monorepo with bench/gen_monorepo.py, starts the real turborepo-remote-cache server
(tests/scenarios/support/npm_packages.py installs it) on loopback, makes two separate clones, then
times, each as a fresh `vx` process (wall clock, uploads drained before exit):

    A local     clone A, cold, remote off                 the baseline build
    A upload    clone A again, cold, CI=1                 builds and uploads every artifact
    B remote    clone B, empty cache                      every task a remote hit
    B local     clone B, outputs deleted                  every task a local hit (after B remote)

    python bench/remote_cache.py --packages 100 --task-ms 200 --runs 3

Prints a small markdown table of the median of each; docs/remote-cache.md records a run.
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

from support.remote_servers import CANARY, TurboServer  # noqa: E402


def generate(root: Path, packages: int, task_ms: int) -> Path:
    repo = root / "origin"
    subprocess.run(
        [
            sys.executable,
            str(HERE / "gen_monorepo.py"),
            str(repo),
            "--packages",
            str(packages),
            "--files-per-package",
            "10",
            "--tools",
            "vx",
            "--no-devdeps",
            "--task-ms",
            str(task_ms),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    ws = json.loads((repo / "vx.workspace.json").read_text())
    ws["remoteCache"] = {"turbo": {"team": "bench"}}
    (repo / "vx.workspace.json").write_text(json.dumps(ws, indent=2) + "\n")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "commit", "-qam", "remote cache"], cwd=repo, check=True)
    return repo


def clone(origin: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(dest)], check=True)
    return dest


def vx(repo: Path, env: dict[str, str], *args: str) -> float:
    """Wall seconds of one `vx run build --all` process; it must exit 0."""
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI", "TURBO_"))},
        **env,
    }
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["vx", "run", "build", "--all", *args], cwd=repo, env=full, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"vx failed in {repo}:\n{proc.stderr}")
    return wall


def one_round(work: Path, origin: Path, server: TurboServer, team: str) -> dict[str, float]:
    remote = {"TURBO_API": server.url, "TURBO_TOKEN": CANARY, "TURBO_TEAM": team}
    a, b = clone(origin, work / "a"), clone(origin, work / "b")
    row = {"A local": vx(a, {}, "--cache=remote:")}
    shutil.rmtree(a / ".vx")
    for dist in a.glob("packages/*/dist"):
        shutil.rmtree(dist)
    row["A upload"] = vx(a, {**remote, "CI": "1"})
    row["B remote"] = vx(b, remote)
    for dist in b.glob("packages/*/dist"):
        shutil.rmtree(dist)
    row["B local"] = vx(b, remote)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=100)
    parser.add_argument("--task-ms", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vx-remote-bench-") as tmp:
        work = Path(tmp)
        origin = generate(work, opts.packages, opts.task_ms)
        server = TurboServer(work / "server", token=CANARY)
        try:
            rows = [one_round(work, origin, server, f"bench-{i}") for i in range(opts.runs)]
        finally:
            server.kill()
    print(
        f"| {opts.packages} packages, tasks ~{opts.task_ms} ms, median of {opts.runs} | wall (s) |"
    )
    print("|---|---|")
    for name in rows[0]:
        print(f"| {name} | {statistics.median(r[name] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
