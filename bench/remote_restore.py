#!/usr/bin/env python3
"""Remote restore, the CI case: vx against turbo on one real remote cache server (issue 16).

    python bench/remote_restore.py --sizes 100,1000

For each size, the workspaces of bench/run.py (one copy per tool, `gen_monorepo.py`, turbo
installed) and one `turborepo-remote-cache` server on loopback (local storage; the pinned
version tests/scenarios/support/npm_packages.py installs). Each tool builds once from cold with the
server on, which uploads everything (vx with CI=1: it uploads only on CI by default; turbo
always uploads). Then every timed run is a fresh clone's first build: the tool's local cache
(vx: `.vx` and its shared store under HOME; turbo: `.turbo` and `node_modules/.cache/turbo`)
and every `dist/` deleted, `build` run with the server on, so every task is a remote hit that
downloads and restores its outputs. Runs alternate vx, turbo, turbo, vx, … after one warm-up
each; a run that did not hit for every task, or left a package unbuilt, stops the bench.
Prints a Markdown table (median, range) of wall and CPU seconds, and the ratio vx/turbo.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests" / "scenarios"))

from measure import load_average  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402
from support.remote_servers import CANARY, TurboServer  # noqa: E402
from tools import Tool, turbo_tool, version_of, vx_tool, workspaces  # noqa: E402

TEAM = "bench"
_VX_CACHED = re.compile(r"(\d+) tasks? · (\d+) cached")
_TURBO_CACHED = re.compile(r"Cached:\s+(\d+) cached, (\d+) total")


def remote_env(tool: Tool, server: TurboServer, upload: bool) -> dict[str, str]:
    env = tool.env()
    env.update({"TURBO_API": server.url, "TURBO_TOKEN": CANARY, "TURBO_TEAM": TEAM})
    if upload and tool.flavour == "vx":
        env["CI"] = "1"  # vx writes to a remote only on CI by default
    return env


def fresh_clone(tool: Tool, ws: Path) -> None:
    """What a CI job's clone holds: the tree and node_modules, no local cache, no outputs."""
    tool.clean(ws)


def run(tool: Tool, ws: Path, env: dict[str, str], concurrency: int, log: Path) -> tuple:
    """(wall s, cpu s, tasks, cached) of one `run build`; stops the bench on a failure."""
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            tool.argv(("build",), concurrency),
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tool.name} failed in {ws}; log in {log}")
    found = (_VX_CACHED if tool.flavour == "vx" else _TURBO_CACHED).findall(text)
    if not found:
        raise SystemExit(f"{tool.name}: no cache summary in {log}")
    a, b = (int(x) for x in found[-1])
    cached, tasks = (b, a) if tool.flavour == "vx" else (a, b)
    SCENARIOS["restore"].check(ws)  # every package has its dist/index.js
    return wall, usage.ru_utime + usage.ru_stime, tasks, cached


def bench_size(size: int, args, vx: Tool, server: TurboServer, logs: Path) -> dict:
    wss = workspaces(args.work, size, fresh=args.fresh)
    tools = {"vx": vx, "turbo": turbo_tool(wss["turbo"])}
    say(f"== m{size}: upload (load {load_average()})")
    for name, tool in tools.items() if not args.reuse_uploads else ():
        fresh_clone(tool, wss[name])
        env = remote_env(tool, server, upload=True)
        wall, _cpu, tasks, cached = run(
            tool, wss[name], env, args.concurrency, logs / f"m{size}-{name}-upload.log"
        )
        say(f"   {name} cold + upload: {wall:.1f} s, {tasks} tasks, {cached} cached")
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
    for i in range(args.runs + 1):  # the first round warms the machine's page cache
        order = list(tools) if i % 2 == 0 else list(reversed(tools))
        for name in order:
            tool, ws = tools[name], wss[name]
            fresh_clone(tool, ws)
            log = logs / f"m{size}-{name}-restore-{i}.log"
            wall, cpu, tasks, cached = run(
                tool, ws, remote_env(tool, server, False), args.concurrency, log
            )
            if cached != tasks:
                raise SystemExit(f"{name}: {cached} of {tasks} tasks were remote hits; see {log}")
            if i > 0:
                samples[name].append((wall, cpu))
        if i > 0:
            say(f"   run {i}: " + ", ".join(f"{n} {samples[n][-1][0]:.2f} s" for n in tools))
    for name, tool in tools.items():  # leave the copies as bench/run.py expects them
        tool.clean(wss[name])
    return {
        "size": size,
        "tasks": tasks,
        "load_after": load_average(),
        "tools": {n: samples[n] for n in tools},
        "versions": {n: version_of(t, wss[n]) for n, t in tools.items()},
    }


def table(rows: list[dict], runs: int) -> list[str]:
    out = [
        "| packages | vx wall (s) | turbo wall (s) | vx / turbo | vx CPU (s) | turbo CPU (s) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        med = {n: statistics.median(w for w, _ in s) for n, s in row["tools"].items()}
        rng = {n: (min(w for w, _ in s), max(w for w, _ in s)) for n, s in row["tools"].items()}
        cpu = {n: statistics.median(c for _, c in s) for n, s in row["tools"].items()}
        out.append(
            f"| {row['size']} | {med['vx']:.2f} ({rng['vx'][0]:.2f}–{rng['vx'][1]:.2f})"
            f" | {med['turbo']:.2f} ({rng['turbo'][0]:.2f}–{rng['turbo'][1]:.2f})"
            f" | {med['vx'] / med['turbo']:.2f} | {cpu['vx']:.1f} | {cpu['turbo']:.1f} |"
        )
    return out


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000", help="package counts, comma-separated")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per tool and size")
    ap.add_argument("--concurrency", type=int, default=os.cpu_count() or 2)
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(os.environ.get("VX_BENCH_DIR", "/tmp/vx-bench")),
        help="where workspaces, the vx venv and logs live (shared with bench/run.py)",
    )
    ap.add_argument("--vx", help="vx command to time (default: pip install of this checkout)")
    ap.add_argument("--fresh", action="store_true", help="regenerate the workspaces")
    ap.add_argument(
        "--reuse-uploads",
        action="store_true",
        help="skip the cold builds: the server's storage (WORK/remote-cache) already holds both"
        " tools' artifacts for this vx from an earlier run",
    )
    args = ap.parse_args(argv)
    args.work = args.work.resolve()
    logs = args.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    vx = vx_tool(args.vx, args.work)
    load = load_average()
    storage = args.work / "remote-cache"  # kept: --reuse-uploads restores from it again
    if not args.reuse_uploads:
        shutil.rmtree(storage, ignore_errors=True)
    server = TurboServer(storage, token=CANARY)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        rows = [bench_size(size, args, vx, server, logs) for size in sizes]
    finally:
        server.kill()
    versions = rows[0]["versions"]
    print(
        f"{time.strftime('%Y-%m-%d')} · {os.cpu_count()} CPUs · {versions['vx']} · "
        f"{versions['turbo']} (turbo) · turborepo-remote-cache on loopback · concurrency "
        f"{args.concurrency} · median of {args.runs} · load {load} → {rows[-1]['load_after']}\n"
    )
    print("\n".join(table(rows, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
