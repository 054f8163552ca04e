"""The per-task overhead of an Nx executor task under vx against `nx run P:T` itself
(docs/benchmarks.md, "An Nx executor task").

    python bench/nx_executor.py NODE_MODULES [--rounds 5]

NODE_MODULES: a node_modules with nx 21.6.4 and @nx/js (the scenario tests' `nx-plugins` bundle:
`PYTHONPATH=tests/scenarios python3 -m support.npm_packages --install` prints it). The workspace is
tests/scenarios/test_nx_executors.py's, written to a temporary directory. Each round times, in
alternating order: `vx run P:T --force` (the task executed, nothing from the cache), vx's runner
alone with vx's projects and with Nx's own project graph, `nx run P:T --skip-nx-cache` with the
daemon off and on, and `node -e 0` (the floor of any Node process), and vx running an nx:run-commands target of
`node -e 0` (the floor of a vx task that starts Node). Wall times, median (min–max).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(HERE.parent / "tests" / "scenarios"))

NX_ENV = {"NX_NO_CLOUD": "true", "NX_TUI": "false", "DO_NOT_TRACK": "1", "NO_COLOR": "1"}


def workspace(node_modules: Path) -> Path:
    from support.workspace import Repo  # noqa: PLC0415 - the scenario tests' workspace writer
    from test_nx_executors import local_workspace  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix="vx-bench-nx-exec-"))
    repo = Repo(root)
    files = local_workspace()
    # the floor of a vx task that starts Node: an nx:run-commands target running `node -e 0`
    files["packages/app/project.json"]["targets"]["plain"] = {"command": "node -e 0"}  # type: ignore[index]
    repo.write(files)
    (root / "node_modules").symlink_to(node_modules, target_is_directory=True)
    repo.commit()
    return root


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{shlex.join(argv)} failed:\n{proc.stdout.decode()}{proc.stderr.decode()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("node_modules", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", default="app:build")
    args = parser.parse_args()
    root = workspace(args.node_modules.resolve())
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NX_", "VX_"))}
    vx_env = {**base, "PYTHONPATH": str(SRC), "VX_TTY": "0"}
    nx_off = {**base, **NX_ENV, "NX_DAEMON": "false"}
    nx_on = {**base, **NX_ENV, "NX_DAEMON": "true"}
    nx = [str(root / "node_modules" / ".bin" / "nx")]
    project, target = args.target.split(":")
    vx = [sys.executable, "-m", "vx"]
    # the plan writes the runner's context; the runner alone is timed with it and without it
    subprocess.run(
        [*vx, "run", args.target, "--dry"], cwd=root, env=vx_env, check=True, capture_output=True
    )
    context = next((root / ".vx" / "nx-exec").glob("*.json")).relative_to(root)
    runner = ["node", str(SRC / "vx" / "config" / "nxexec.cjs")]
    subprocess.run([*nx, "daemon", "--start"], cwd=root, env=nx_on, capture_output=True)
    rows = {
        "vx run (executes)": ([*vx, "run", args.target, "--force"], vx_env),
        "vx run, a `node -e 0` command": ([*vx, "run", "app:plain", "--force"], vx_env),
        "vx's runner, vx's projects": ([*runner, str(context), project, target, ""], vx_env),
        "vx's runner, Nx's graph": ([*runner, "no-context.json", project, target, ""], nx_off),
        "nx run, daemon off": ([*nx, "run", args.target, "--skip-nx-cache"], nx_off),
        "nx run, daemon on": ([*nx, "run", args.target, "--skip-nx-cache"], nx_on),
        "node -e 0": (["node", "-e", "0"], base),
    }
    for argv, env in rows.values():  # warm every path once, untimed
        timed(argv, root, env)
    times: dict[str, list[float]] = {name: [] for name in rows}
    load = [os.getloadavg()[0]]
    for i in range(args.rounds):
        order = list(rows) if i % 2 == 0 else list(reversed(rows))
        for name in order:
            argv, env = rows[name]
            times[name].append(timed(argv, root, env))
        load.append(os.getloadavg()[0])
    subprocess.run([*nx, "daemon", "--stop"], cwd=root, env=nx_on, capture_output=True)
    print(f"{args.target}, {args.rounds} rounds, 1-minute load {min(load):.1f}–{max(load):.1f}")
    print("| run | wall, median (min–max) |\n| --- | ---: |")
    for name, values in times.items():
        ms = [v * 1000 for v in values]
        print(f"| {name} | {statistics.median(ms):.0f} ms ({min(ms):.0f}–{max(ms):.0f}) |")


if __name__ == "__main__":
    main()
