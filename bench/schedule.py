#!/usr/bin/env python3
"""Which ready task starts first, measured: cold builds of a workspace with skewed task
durations, vx ordering by the run history (the expected remaining critical path) against vx
ordering by the dependents count (`schedule.history: false`) and against turbo.

    python bench/schedule.py                         # concurrency 2 and 4, 5 rounds each
    python bench/schedule.py --concurrency 2 --rounds 3 --turbo PATH

The workspace (written here, no dependencies to install): `--fast` quick libraries in layers,
each depending on two of the layer below, so the bottom layers have many dependents; and
`--chains` chains of `--chain-length` slow packages, whose first link depends on nothing and
whose last nobody waits for. The dependents count starts the fast libraries first and reaches a
chain late, which then runs alone at the end; the critical path starts the chains at once.
Every task sleeps its duration (a sleep, not a spin: the slots are the scarce thing, not the
machine's cores, which other work shares) and writes a dist/ output.

Each round is a cold build for every tool — vx with `--force` (every task executes; the run
history stays, as it does on a developer's machine or on CI with the timings file), turbo with
`--force` — in alternating order. The first, untimed round gives the history its durations.
Medians of wall time, `uptime`'s load beside them; a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE_MANAGER = "npm@11.19.1"
TURBO_VERSION = "2.11.11"


def generate(root: Path, fast: int, fast_ms: int, chains: int, length: int, slow_ms: int) -> None:
    """The skewed workspace at `root`, committed, with vx and turbo configs for the same work."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "packages").mkdir(parents=True)
    packages: dict[str, tuple[list[str], int]] = {}
    layers = 4
    per = max(1, fast // layers)
    names = [f"lib{i:03d}" for i in range(fast)]
    for i, name in enumerate(names):
        layer = min(i // per, layers - 1)
        below = [n for j, n in enumerate(names) if min(j // per, layers - 1) == layer - 1]
        deps = [below[(i * 7 + k * 3) % len(below)] for k in range(2)] if below else []
        packages[name] = (sorted(set(deps)), fast_ms)
    for c in range(chains):
        for link in range(length):
            deps = [f"chain{c}-{link - 1}"] if link else []
            packages[f"chain{c}-{link}"] = (deps, slow_ms)
    for name, (deps, ms) in packages.items():
        pkg = root / "packages" / name
        (pkg / "src").mkdir(parents=True)
        (pkg / "src" / "index.js").write_text(f"module.exports = {json.dumps(name)};\n")
        command = f"sleep {ms / 1000:.3f} && mkdir -p dist && cp src/index.js dist/index.js"
        manifest = {
            "name": name,
            "version": "1.0.0",
            "private": True,
            "scripts": {"build": command},
            "dependencies": {d: "*" for d in deps},
        }
        (pkg / "package.json").write_text(json.dumps(manifest, indent=2))
        vx = {
            "tasks": {
                "build": {
                    "exec": {"command": command},
                    "dependsOn": ["^build"],
                    "cache": {
                        "inputs": {"files": ["src/**", "package.json"]},
                        "outputs": {"files": ["dist/**"]},
                    },
                }
            }
        }
        (pkg / "vx.config.json").write_text(json.dumps(vx, indent=2))
    root_manifest = {
        "name": "skewed",
        "private": True,
        "workspaces": ["packages/*"],
        "packageManager": PACKAGE_MANAGER,
    }
    (root / "package.json").write_text(json.dumps(root_manifest, indent=2))
    turbo = {
        "$schema": "https://turbo.build/schema.json",
        "tasks": {"build": {"dependsOn": ["^build"], "outputs": ["dist/**"]}},
    }
    (root / "turbo.json").write_text(json.dumps(turbo, indent=2))
    (root / ".gitignore").write_text("node_modules/\ndist/\n.vx/\n.turbo/\n")
    lock = {"name": "skewed", "lockfileVersion": 3, "requires": True, "packages": {}}
    (root / "package-lock.json").write_text(json.dumps(lock, indent=2))
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env.update({"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"})
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "skewed"]):
        subprocess.run(["git", *argv], cwd=root, env=env, check=True)


def find_turbo(work: Path, given: str | None) -> Path:
    """`--turbo`, else turbo installed from npm under WORK (once)."""
    if given:
        return Path(given)
    home = work / "turbo"
    found = sorted(home.glob("node_modules/@turbo/*/bin/turbo"))
    if not found:
        home.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(home), "--no-save", f"turbo@{TURBO_VERSION}"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found = sorted(home.glob("node_modules/@turbo/*/bin/turbo"))
    return found[0]


def tools(work: Path, turbo: Path) -> dict[str, tuple[list[str], Path, dict]]:
    """name -> (argv up to the concurrency, workspace copy, env)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
    base.update({"NO_COLOR": "1", "TURBO_TELEMETRY_DISABLED": "1", "DO_NOT_TRACK": "1"})
    base["TURBO_NO_UPDATE_NOTIFIER"] = "1"
    vx_env = {**base, "PYTHONPATH": str(REPO / "src"), "VX_SHARED_STORE": "0"}
    vx = [sys.executable, "-m", "vx", "run", "build", "--all", "--force"]
    return {
        "vx (history)": (vx, work / "ws-history", vx_env),
        "vx (dependents)": (vx, work / "ws-dependents", vx_env),
        "turbo": ([str(turbo), "run", "build", "--force"], work / "ws-turbo", base),
    }


def cold(argv: list[str], ws: Path, env: dict, concurrency: int, flavour: str) -> float:
    """One build with every task executing; the outputs are wiped first."""
    for pkg in (ws / "packages").iterdir():
        shutil.rmtree(pkg / "dist", ignore_errors=True)
    flag = f"--concurrency={concurrency}"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*argv, flag], cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{flavour} failed in {ws}:\n{proc.stderr.decode(errors='replace')}")
    return wall


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("/tmp/vx-bench-schedule"))
    p.add_argument("--concurrency", default="2,4", help="comma-separated (default 2,4)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--fast", type=int, default=60, help="quick libraries (default 60)")
    p.add_argument("--fast-ms", type=int, default=150)
    p.add_argument("--chains", type=int, default=2, help="chains of slow packages (default 2)")
    p.add_argument("--chain-length", type=int, default=3)
    p.add_argument("--slow-ms", type=int, default=2000)
    p.add_argument("--turbo", help="a turbo binary (default: turbo from npm, under --work)")
    p.add_argument("--json", type=Path, help="write every sample here")
    args = p.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    turbo = find_turbo(work, args.turbo)
    src = work / "ws"
    generate(src, args.fast, args.fast_ms, args.chains, args.chain_length, args.slow_ms)
    runners = tools(work, turbo)
    for _name, (_argv, ws, _env) in runners.items():
        shutil.rmtree(ws, ignore_errors=True)
        shutil.copytree(src, ws, symlinks=True)
    (work / "ws-dependents" / "vx.workspace.json").write_text('{"schedule": {"history": false}}\n')
    (work / "ws-history" / "vx.workspace.json").write_text("{}\n")
    for ws in (work / "ws-dependents", work / "ws-history"):
        subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "schedule"],
            cwd=ws,
            check=True,
        )
    tasks = args.fast + args.chains * args.chain_length
    work_s = (args.fast * args.fast_ms + args.chains * args.chain_length * args.slow_ms) / 1000
    path_s = max(args.chain_length * args.slow_ms, 4 * args.fast_ms) / 1000
    print(
        f"{tasks} tasks: {args.fast} x {args.fast_ms} ms in 4 layers, {args.chains} chains of"
        f" {args.chain_length} x {args.slow_ms} ms; {work_s:.1f} s of work, critical path"
        f" {path_s:.1f} s",
        file=sys.stderr,
    )
    results: dict = {}
    for c in [int(x) for x in args.concurrency.split(",")]:
        bound = max(path_s, work_s / c)
        for name, (argv, ws, env) in runners.items():  # the history's durations; turbo warms up
            cold(argv, ws, env, c, name)
        samples: dict[str, list[float]] = {name: [] for name in runners}
        loads = [load()]
        for r in range(args.rounds):
            order = list(runners) if r % 2 == 0 else list(reversed(runners))
            for name in order:
                argv, ws, env = runners[name]
                samples[name].append(cold(argv, ws, env, c, name))
            loads.append(load())
            print(
                f"c={c} round {r + 1}: "
                + ", ".join(f"{n} {samples[n][-1]:.2f}s" for n in runners)
                + f"  [{loads[-1]}]",
                file=sys.stderr,
            )
        results[c] = {"bound_s": bound, "samples": samples, "uptime": loads}
    print(table(results, args.rounds))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def table(results: dict, rounds: int) -> str:
    lines = [
        "| concurrency | lower bound | vx, history order | vx, dependents count | turbo"
        " | load (1 min) before → after |",
        "|---|---|---|---|---|---|",
    ]
    for c, res in results.items():
        med = {n: statistics.median(s) for n, s in res["samples"].items()}

        def cell(name: str) -> str:
            s = res["samples"][name]
            return f"{med[name]:.2f} s ({min(s):.2f}–{max(s):.2f})"

        first, last = (_one_minute(u) for u in (res["uptime"][0], res["uptime"][-1]))
        lines.append(
            f"| {c} | {res['bound_s']:.2f} s | {cell('vx (history)')} | {cell('vx (dependents)')}"
            f" | {cell('turbo')} | {first} → {last} |"
        )
    lines.append(f"\nMedians of {rounds} rounds (min–max).")
    return "\n".join(lines)


def _one_minute(uptime: str) -> str:
    return uptime.rsplit("load average:", 1)[-1].split(",")[0].strip()


if __name__ == "__main__":
    raise SystemExit(main())
