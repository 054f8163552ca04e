#!/usr/bin/env python3
"""Benchmark vx side by side with Turborepo on generated monorepos (issue 4).

    python bench/run.py --sizes 100                  # the docs' m100 rows, ~5 minutes
    python bench/run.py                              # sizes 10, 100, 1000 (~30 minutes)
    python bench/run.py --sizes 1000 --scenarios warm,restore,leaf
    python bench/run.py --against nx --sizes 100,1000 --scenarios warm,restore,leaf

For each size, `gen_monorepo.py` writes one workspace with both tools' configs (same
commands, same cached outputs; turbo installed from npm into it), copied once per tool.
Then, scenario by scenario, each tool gets its warm-up runs and the timed runs alternate
vx, turbo, turbo, vx, ... so load on the machine falls on both. Every vx run has
VX_TIMING=1 and its stage table is kept. `--against nx` times Nx instead (nx 21.6.4 from npm, in
its own copy), its daemon off and on (NX_DAEMON=false/true) as two tools sharing that copy
and its cache, interleaved with vx in the same way. Results: a Markdown table on stdout (also written
to --markdown) and every sample in --json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import load_average, measure, summarise  # noqa: E402
from report import main_table, parse_stages, stage_table, versus_table  # noqa: E402
from scenarios import ORDER, SCENARIOS, Scenario  # noqa: E402
from tools import (  # noqa: E402
    Tool,
    direct_npm,
    nx_tool,
    stop_daemon,
    turbo_tool,
    version_of,
    vx_tool,
    workspaces,
)

BIG = 1000  # from here on core and multi are opt-in: turbo needs 10+ minutes for each


def runs_for(scenario: str, size: int, override: int | None) -> int:
    """How many timed runs per tool: fewer where one run is a whole build."""
    if override is not None:
        return override
    if scenario in ("cold", "core"):
        return 5 if size <= 10 else (2 if size <= 100 else 1)
    return 10 if size <= 100 else (5 if size <= BIG else 3)


def default_scenarios(size: int) -> list[str]:
    return list(ORDER) if size < BIG else ["cold", "warm", "restore", "leaf"]


# ---------------------------------------------------------------- one scenario


def run_scenario(
    sc: Scenario,
    size: int,
    tools: dict[str, Tool],
    wss: dict[str, Path],
    runs: int,
    concurrency: int,
    logs: Path,
) -> dict:
    """Warm up each tool, then time `runs` alternating runs per tool; return the summary row."""
    say(
        f"== m{size} {sc.name}: {sc.warmup} warm-up + {runs} timed runs per tool (load {load_average()})"
    )
    for _ in range(sc.warmup):
        for name, tool in tools.items():
            once(sc, tool, wss[name], concurrency, None)
    samples: dict[str, list] = {name: [] for name in tools}
    stages: dict[str, list[float]] = {}
    for i in range(runs):
        order = list(tools) if i % 2 == 0 else list(reversed(tools))
        for name in order:
            err = logs / f"m{size}-{sc.name}-{name}-{i}.err" if name == "vx" else None
            sample = once(sc, tools[name], wss[name], concurrency, err)
            samples[name].append(sample)
            if err is not None:
                for stage, ms in parse_stages(err.read_text(errors="replace")).items():
                    stages.setdefault(stage, []).append(ms)
        say(
            f"   run {i + 1}: "
            + ", ".join(f"{n} {samples[n][-1].wall_s * 1000:.0f} ms" for n in tools)
        )
    for name in tools:
        sc.finish(wss[name])
        settle(tools[name], wss[name], concurrency)
    return {
        "size": size,
        "scenario": sc.name,
        "tasks": list(sc.tasks),
        "what": sc.what,
        "runs": runs,
        "load_after": load_average(),
        "tools": {
            n: {
                **{k: vars(v) for k, v in summarise(samples[n]).items()},
                "samples": [vars(s) for s in samples[n]],
            }
            for n in tools
        },
        "stages": stages,
    }


def once(sc: Scenario, tool: Tool, ws: Path, concurrency: int, err: Path | None):
    sc.prepare(tool, ws)
    env = tool.env()
    if tool.flavour == "vx":
        env["VX_TIMING"] = "1"
    sample = measure(tool.argv(sc.tasks, concurrency), ws, env, err)
    if sample.exit_code != 0:
        raise SystemExit(
            f"{tool.name} failed (exit {sample.exit_code}) in {sc.name} at {ws}"
            + (f"; stderr in {err}" if err else "")
        )
    sc.check(ws)
    return sample


def settle(tool: Tool, ws: Path, concurrency: int) -> None:
    """One untimed build, so the tool's cache and outputs match the committed tree again."""
    measure(tool.argv(("build",), concurrency), ws, tool.env())


def fill_direct(tool: Tool, ws: Path, concurrency: int, work: Path) -> None:
    """turbo's untimed first build with `npm run` skipped (`tools.direct_npm`): the same commands
    and outputs, cached under the same task hashes — checked here, since a fill under other hashes
    would make every timed run a full build."""
    env = tool.env()
    env["PATH"] = f"{direct_npm(work)}{os.pathsep}{env.get('PATH', '')}"
    before = _dry_hashes(tool, ws, env)
    measure(tool.argv(("build",), concurrency), ws, env)
    after = _dry_hashes(tool, ws, tool.env())
    missed = [task for task, (_, status) in after.items() if status != "HIT"]
    if missed or {t: h for t, (h, _) in before.items()} != {t: h for t, (h, _) in after.items()}:
        raise SystemExit(
            f"turbo's direct fill in {ws} left {len(missed)} tasks uncached or hashed apart; "
            "run without --fill direct"
        )


def _dry_hashes(tool: Tool, ws: Path, env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """{task: (hash, cache status)} from `turbo run build --dry=json`."""
    out = subprocess.run(
        [*tool.exe, "run", "build", "--dry=json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {t["taskId"]: (t["hash"], t["cache"]["status"]) for t in json.loads(out)["tasks"]}


# ---------------------------------------------------------------- the whole run


def machine(tools: dict[str, Tool], ws: Path) -> dict:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "node": _out(["node", "--version"]),
        "git": _out(["git", "--version"]),
        "versions": {n: version_of(t, ws) for n, t in tools.items()},
        "vx_commit": _out(
            [
                "git",
                "-C",
                str(Path(__file__).resolve().parent.parent),
                "rev-parse",
                "--short",
                "HEAD",
            ]
        ),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _out(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def incumbents(against: str, wss: dict[str, Path]) -> tuple[dict[str, Tool], dict[str, Path]]:
    """The tools vx is timed against, and the copy each runs in (Nx's two modes share one)."""
    if against == "turbo":
        return {"turbo": turbo_tool(wss["turbo"])}, {"turbo": wss["turbo"]}
    nx = wss["nx"]
    return {"nx": nx_tool(nx, daemon=False), "nx-daemon": nx_tool(nx, daemon=True)}, {
        "nx": nx,
        "nx-daemon": nx,
    }


def bench_size(size: int, args, vx: Tool, logs: Path) -> list[dict]:
    copies = workspaces(args.work, size, fresh=args.fresh, against=args.against)
    others, other_wss = incumbents(args.against, copies)
    tools, wss = {"vx": vx, **others}, {"vx": copies["vx"], **other_wss}
    names = args.scenarios or default_scenarios(size)
    if "cold" not in names:  # whatever state a reused workspace is in, start from a full cache
        for name, tool in tools.items():
            if args.fill == "direct" and tool.flavour == "turbo":
                fill_direct(tool, wss[name], args.concurrency, args.work)
            else:
                settle(tool, wss[name], args.concurrency)
    try:
        return [
            run_scenario(
                SCENARIOS[n], size, tools, wss, runs_for(n, size, args.runs), args.concurrency, logs
            )
            for n in ORDER
            if n in names
        ]
    finally:
        for name, tool in tools.items():
            stop_daemon(tool, wss[name])


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes", default="10,100,1000", help="package counts, comma-separated (20 files each)"
    )
    ap.add_argument(
        "--scenarios",
        help=f"comma list of {','.join(ORDER)} (default: all below {BIG} packages, "
        f"cold,warm,restore,leaf from {BIG})",
    )
    ap.add_argument("--runs", type=int, help="timed runs per tool and scenario (default: by size)")
    ap.add_argument(
        "--concurrency",
        type=int,
        default=os.cpu_count() or 2,
        help="for both tools (default: CPUs)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(os.environ.get("VX_BENCH_DIR", "/tmp/vx-bench")),
        help="where workspaces, the vx venv and logs live; reused across runs",
    )
    ap.add_argument(
        "--vx", help="vx command to time (default: pip install of this checkout into WORK/venv)"
    )
    ap.add_argument("--fresh", action="store_true", help="regenerate the workspaces")
    ap.add_argument(
        "--against",
        choices=("turbo", "nx"),
        default="turbo",
        help="the incumbent timed beside vx (nx: its daemon off and on)",
    )
    ap.add_argument(
        "--fill",
        choices=("npm", "direct"),
        default="npm",
        help="turbo's untimed first build (without cold): through `npm run`, or each package's "
        "command run directly, for thousands of packages (same task hashes, checked)",
    )
    ap.add_argument("--json", type=Path, help="write every sample here (default WORK/results.json)")
    ap.add_argument("--markdown", type=Path, help="also write the tables here")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.scenarios = args.scenarios.split(",") if args.scenarios else None
    unknown = set(args.scenarios or ()) - set(ORDER)
    if unknown:
        ap.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    args.work = args.work.resolve()
    return args


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    logs = args.work / "logs"
    logs.mkdir(exist_ok=True)
    vx = vx_tool(args.vx, args.work)
    started, load = time.time(), load_average()
    results = [row for size in args.sizes for row in bench_size(size, args, vx, logs)]
    copies = workspaces(args.work, args.sizes[0], against=args.against)
    first = copies[args.against]
    info = {
        "against": args.against,
        "machine": machine({"vx": vx, **incumbents(args.against, copies)[0]}, first),
        "load_before": load,
        "load_after": load_average(),
        "minutes": round((time.time() - started) / 60, 1),
        "concurrency": args.concurrency,
        "results": results,
    }
    (args.json or args.work / "results.json").write_text(json.dumps(info, indent=1))
    table = (
        main_table(results)
        if args.against == "turbo"
        else versus_table(results, ("nx", "nx-daemon"))
    )
    text = "\n".join(header(info) + [""] + table + [""] + stage_table(results)) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


def header(info: dict) -> list[str]:
    m = info["machine"]
    return [
        f"{m['date']} · {m['cpus']} CPUs ({m['cpu']}) · Linux {m['kernel']} · Python {m['python']} · "
        f"node {m['node']} · {m['git']} · "
        + "".join(f"{v} ({n}) · " for n, v in m["versions"].items() if n != "vx")
        + f"{m['versions']['vx']} @ "
        f"{m['vx_commit']} · concurrency {info['concurrency']} · load {info['load_before']} → "
        f"{info['load_after']} · {info['minutes']} min"
    ]


if __name__ == "__main__":
    sys.exit(main())
