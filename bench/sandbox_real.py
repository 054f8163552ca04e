"""Measure what the sandbox costs a real build task: plain, sandboxed untraced, sandboxed traced.

    python bench/sandbox_real.py ROOT PROJECT -- COMMAND... [--read G]... [--write G]... [--clean P]...
                                 [--rounds 5] [--json out.json]

ROOT is a workspace (vx discovers its packages, as a run does), PROJECT the task's project
directory relative to it, COMMAND what the task runs there (`sh -c`). Each round runs the
three variants in shuffled order, each from a clean state (`--clean` paths, project-relative,
removed before every run: a `tsc -b` with its .tsbuildinfo left would do nothing):

  plain     executor.execute(`sh -c …`): what the task costs unsandboxed
  untraced  the sandbox runner without strace (`sandbox.trace: false`: enforced, no report)
  traced    the sandbox runner as shipped: bwrap + strace + parse + judge
  traced-v1 (with --v1) the trace as it was before 2026-12-01: readlink traced too, strace decoding
            every stat buffer and clone3 struct (`-e verbose=all`)

The sandbox grants are `--read` / `--write` (as `exec.sandbox.allow` would say them) plus
what every sandboxed task gets (the dependency grant of the project's linked packages). A
sandboxed run with a violation or a failure stops the bench: it measured the wrong thing.

CPU is the whole process tree's, from the cpuacct cgroup of bench/sandbox_overhead.py, and
"of it vx" this process's own share (setup, reading and judging the trace); wall and CPU are
medians over the rounds, with the spread (min–max) beside them; "paired" is the median of
each round's own ratio to that round's plain run, which a load that drifts between rounds
moves less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sandbox_overhead import CpuMeter, Sandboxed, plain  # noqa: E402

from vx.model import SandboxConfig  # noqa: E402
from vx.sandbox import trace  # noqa: E402
from vx.sandbox.grants import linked_packages, plan_sandbox  # noqa: E402
from vx.workspace.discover import discover  # noqa: E402


def spec_for(root: Path, project_rel: str, read: list[str], write: list[str]):
    ws = discover(root)
    by_dir = {p.dir: p for p in ws.packages.values()}
    name = by_dir[project_rel].name
    config = SandboxConfig(read=tuple(read), write=tuple(write))
    return plan_sandbox(
        config,
        root=ws.root,
        project_rel=project_rel,
        task=f"{name}#bench",
        task_name="bench",
        projects={p.dir: p.name for p in ws.packages.values()},
        linked=linked_packages(ws.packages, name),
        folded=None,
        cache_dir=None,
    )


class TracedV1(Sandboxed):
    """The traced runner with the strace arguments of before: readlink traced, structs decoded."""

    async def __call__(self, command: str, cwd: Path, env: dict) -> int:
        shipped = trace.strace_argv

        def v1(strace: str, output: str) -> list[str]:
            argv = shipped(strace, output)
            at = argv.index("verbose=none")
            del argv[at - 1 : at + 1]
            return [a + ",readlink,readlinkat" if a.startswith("trace=") else a for a in argv]

        trace.strace_argv = v1
        try:
            return await super().__call__(command, cwd, env)
        finally:
            trace.strace_argv = shipped


def clean(project: Path, paths: list[str]) -> None:
    for rel in paths:
        target = project / rel
        if target.is_dir() and not target.is_symlink():
            # a granted directory may be a mount point inside; outside it is an ordinary one
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()


async def _measure(
    variants: dict,
    command: str,
    project: Path,
    env: dict,
    rounds: int,
    meter: CpuMeter,
    cleaned: list[str],
) -> dict:
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for name, run in variants.items():  # warm-up: the page cache, the probe a run pays once
        clean(project, cleaned)
        await run(command, project, env)
    for index in range(rounds):
        order = list(variants.items())
        random.shuffle(order)
        for name, run in order:
            clean(project, cleaned)
            cpu0, own0, wall0 = meter.read(), time.process_time(), time.perf_counter()
            await run(command, project, env)
            samples[name].append(
                (
                    (time.perf_counter() - wall0) * 1000,
                    meter.read() - cpu0,
                    (time.process_time() - own0) * 1000,
                )
            )
        print(
            f"round {index + 1}/{rounds}: "
            + ", ".join(
                f"{n} {samples[n][-1][0]:.0f}/{samples[n][-1][1]:.0f} ms" for n in variants
            ),
            file=sys.stderr,
            flush=True,
        )
    return {name: _summary(s) for name, s in samples.items()}


def _summary(samples: list[tuple[float, float, float]]) -> dict:
    walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
    return {
        "wall_ms": statistics.median(walls),
        "wall_min": min(walls),
        "wall_max": max(walls),
        "cpu_ms": statistics.median(cpus),
        "cpu_min": min(cpus),
        "cpu_max": max(cpus),
        "vx_cpu_ms": statistics.median(s[2] for s in samples),
        "samples": samples,
    }


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: sandbox_real.py ROOT PROJECT [options] -- COMMAND...")
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("project")
    parser.add_argument("--read", action="append", default=[])
    parser.add_argument("--write", action="append", default=[])
    parser.add_argument("--clean", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--v1", action="store_true", help="also run the trace as it was before (traced-v1)"
    )
    args = parser.parse_args(argv[:split])
    command = " ".join(argv[split + 1 :])
    root = args.root.resolve()
    project = root / args.project
    spec = spec_for(root, args.project, args.read, args.write)
    path = os.pathsep.join(
        [
            str(project / "node_modules" / ".bin"),
            str(root / "node_modules" / ".bin"),
            os.environ.get("PATH", os.defpath),
        ]
    )
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/")}
    meter = CpuMeter()
    variants = {
        "plain": plain,
        "untraced": Sandboxed(spec, {**os.environ, "VX_STRACE": ""}),
        "traced": Sandboxed(spec, dict(os.environ)),
    }
    if args.v1:
        variants["traced-v1"] = TracedV1(spec, dict(os.environ))
    try:
        results = asyncio.run(
            _measure(variants, command, project, env, args.rounds, meter, args.clean)
        )
    finally:
        for run in variants.values():
            if isinstance(run, Sandboxed):
                run.close()
        meter.close()
    base = results["plain"]
    print(f"{command}  (in {args.project}, {args.rounds} rounds, medians, min–max)")
    print(
        f"  {'variant':<9} {'wall ms':>20} {'wall ×':>7} {'paired':>7} {'cpu ms':>20} {'cpu ×':>6} "
        f"{'paired':>7} {'of it vx':>9}"
    )
    for name, row in results.items():
        pairs = list(zip(row["samples"], base["samples"]))
        wall_paired = statistics.median(s[0] / b[0] for s, b in pairs)
        cpu_paired = statistics.median(s[1] / b[1] for s, b in pairs) if meter.ok else float("nan")
        wall = f"{row['wall_ms']:.0f} ({row['wall_min']:.0f}–{row['wall_max']:.0f})"
        cpu = f"{row['cpu_ms']:.0f} ({row['cpu_min']:.0f}–{row['cpu_max']:.0f})"
        print(
            f"  {name:<9} {wall:>20} {row['wall_ms'] / base['wall_ms']:7.2f} {wall_paired:7.2f} {cpu:>20} "
            f"{row['cpu_ms'] / base['cpu_ms'] if meter.ok else float('nan'):6.2f} {cpu_paired:7.2f} "
            f"{row['vx_cpu_ms']:9.0f}"
        )
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
