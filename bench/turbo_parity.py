"""Does vx run a Turborepo repository as turbo would (TL-05)? Compare the task graphs.

Takes the benchmark's generated workspace (turbo.json + package.json scripts, turbo installed from
npm), removes every vx config from a copy, and asks both tools for their plan without running
anything — `turbo run … --dry=json` and `vx run … --dry=json` — then compares the tasks with a
command and the commands each waits for, looking through no-ops (a package without the script:
turbo's `<NONEXISTENT>`, vx's keyed group). Exit 0 when they are the same.

    python bench/turbo_parity.py --packages 100 --tasks build test lint
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import turbo_tool, vx_tool, workspaces  # noqa: E402


def plans(ws: Path, tasks: list[str], vx, turbo) -> tuple[dict, dict]:
    t = subprocess.run([*turbo.exe, "run", *tasks, "--dry=json"], cwd=ws, env=turbo.env(), capture_output=True,
                       text=True, check=True)
    v = subprocess.run([*vx.exe, "run", *tasks, "--dry=json"], cwd=ws, env=vx.env(), capture_output=True,
                       text=True, check=True)
    turbo_graph = {x["taskId"]: (x["command"] == "<NONEXISTENT>", x["dependencies"]) for x in json.loads(t.stdout)["tasks"]}
    vx_graph = {x["id"]: (x["command"] is None, x["deps"]) for x in json.loads(v.stdout)["tasks"]}
    return through_noops(turbo_graph), through_noops(vx_graph)


def through_noops(plan: dict[str, tuple[bool, list[str]]]) -> dict[str, list[str]]:
    """Each task with a command and the commands it waits for, looking through no-ops (turbo's
    `<NONEXISTENT>` tasks, vx's groups): what runs, in which order."""
    memo: dict[str, set[str]] = {}

    def real(tid: str) -> set[str]:
        if tid not in memo:
            memo[tid] = set()
            for dep in plan[tid][1]:
                memo[tid] |= real(dep) if plan[dep][0] else {dep}
        return memo[tid]

    return {tid: sorted(real(tid)) for tid, (noop, _deps) in plan.items() if not noop}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packages", type=int, default=100)
    ap.add_argument("--tasks", nargs="+", default=["build", "test", "lint"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/vx-bench"))
    ap.add_argument("--vx", help="the vx command (default: installed from this checkout into a venv)")
    args = ap.parse_args(argv)
    source = workspaces(args.work, args.packages)["turbo"]
    ws = args.work / f"m{args.packages}-parity"
    shutil.rmtree(ws, ignore_errors=True)
    subprocess.run(["cp", "-a", str(source), str(ws)], check=True)
    for config in [*ws.glob("packages/*/vx.config.json"), ws / "vx.workspace.json"]:
        config.unlink(missing_ok=True)
    turbo_graph, vx_graph = plans(ws, args.tasks, vx_tool(args.vx, args.work), turbo_tool(ws))
    only_turbo, only_vx = sorted(set(turbo_graph) - set(vx_graph)), sorted(set(vx_graph) - set(turbo_graph))
    edges = sorted(t for t in set(turbo_graph) & set(vx_graph) if turbo_graph[t] != vx_graph[t])
    print(f"tasks: turbo {len(turbo_graph)}, vx {len(vx_graph)}; only turbo: {len(only_turbo)}, only vx: "
          f"{len(only_vx)}; different dependencies: {len(edges)}")
    for tid in (only_turbo + only_vx + edges)[:10]:
        print(f"  {tid}: turbo {turbo_graph.get(tid)} vx {vx_graph.get(tid)}")
    return 0 if not (only_turbo or only_vx or edges) else 1


if __name__ == "__main__":
    sys.exit(main())
