"""Measure what the sandbox costs a task: the fixed cost per task, and the CPU ratio on a node task.

    python bench/sandbox_overhead.py [--rounds 20] [--json out.json]

Variants, interleaved in shuffled order each round (so machine noise hits them alike):
  plain     executor.execute(`sh -c …`), what an unsandboxed task costs
  bwrap     the sandbox runner without strace (VX_STRACE="": enforced, untraced)
  traced    the sandbox runner as shipped: bwrap + strace inside + parse + judge

All tasks of a measurement run in one event loop and, per variant, one sandbox Session, as
the tasks of one `vx run` do (the probe, the run's temp root and the worker threads are paid
once per run, not per task).

Workloads: `true` (the fixed cost: wall time per task), and W1 from docs/sandbox.md — a node
script that reads 200 files and writes 50 (the CPU ratio). CPU is the whole tree's, from a
cgroup-v1 `cpuacct` group this process moves itself into (wait4 loses what runs in the
sandbox's pid namespace, pitfall 28); without one, only wall times are reported. "of it vx" is
this process's own share (setup, trace parsing, judging), so the rest is bwrap, strace and the
task. Numbers are medians; the ratio is against `plain`.
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
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vx.model import SandboxConfig  # noqa: E402
from vx.proc.executor import ProcessTable, execute  # noqa: E402
from vx.sandbox.grants import plan_sandbox  # noqa: E402
from vx.sandbox.runner import Session, run_sandboxed  # noqa: E402

CGROUP = Path("/sys/fs/cgroup/cpuacct")
TASK_JS = """const fs = require('fs');
let n = 0;
for (let i = 0; i < 200; i++) n += fs.readFileSync(`src/f${i}.js`, 'utf8').length;
fs.mkdirSync('out', { recursive: true });
for (let i = 0; i < 50; i++) fs.writeFileSync(`out/o${i}.txt`, String(n + i));
"""


def make_workspace(top: Path) -> Path:
    """W1: a one-project workspace with 200 sources, the task script and its package.json."""
    project = top / "ws" / "pkg"
    (project / "src").mkdir(parents=True)
    for i in range(200):
        (project / "src" / f"f{i}.js").write_text(f"module.exports = {i};\n")
    (project / "task.js").write_text(TASK_JS)
    (project / "package.json").write_text('{"name": "pkg", "version": "1.0.0"}\n')
    return project


class CpuMeter:
    """The CPU time of this process and everything it starts, from a cpuacct cgroup (ns)."""

    def __init__(self) -> None:
        self.group = CGROUP / f"vx-bench-{os.getpid()}"
        try:
            self.group.mkdir()
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
            self.ok = True
        except OSError:
            self.ok = False

    def read(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e6 if self.ok else float("nan")

    def close(self) -> None:
        if self.ok:
            (CGROUP / "cgroup.procs").write_text(str(os.getpid()))
            try:
                self.group.rmdir()
            except OSError:  # a detached tracer still exiting holds it: left for the system to reap
                pass


async def plain(command: str, cwd: Path, env: dict) -> int:
    result = await execute(
        command, cwd=cwd, env=env, timeout_ms=None, on_output=lambda c: None, table=ProcessTable()
    )
    return result.exit_code


class Sandboxed:
    """The sandbox runner as a run uses it: one Session for all of this variant's tasks."""

    def __init__(self, spec, environ: dict) -> None:
        self.spec, self.session = spec, Session([spec], environ=environ)

    async def __call__(self, command: str, cwd: Path, env: dict) -> int:
        outcome = await run_sandboxed(
            self.session,
            self.spec,
            command,
            cwd=cwd,
            env=env,
            timeout_ms=None,
            on_output=lambda c: None,
            table=ProcessTable(),
        )
        if outcome.violations or outcome.process.exit_code:
            raise SystemExit(f"unexpected: {outcome.violations} {outcome.process}")
        return outcome.process.exit_code

    def close(self) -> None:
        self.session.close()


def measure(
    variants: dict, command: str, cwd: Path, env: dict, rounds: int, meter: CpuMeter
) -> dict:
    return asyncio.run(_measure(variants, command, cwd, env, rounds, meter))


async def _measure(
    variants: dict, command: str, cwd: Path, env: dict, rounds: int, meter: CpuMeter
) -> dict:
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for name, run in variants.items():  # warm-up (and the probe, which a run pays once)
        await run(command, cwd, env)
    for _ in range(rounds):
        order = list(variants.items())
        random.shuffle(order)
        for name, run in order:
            cpu0, own0, wall0 = meter.read(), time.process_time(), time.perf_counter()
            await run(command, cwd, env)
            samples[name].append(
                (
                    (time.perf_counter() - wall0) * 1000,
                    meter.read() - cpu0,
                    (time.process_time() - own0) * 1000,
                )
            )
    return {
        name: {
            "wall_ms": statistics.median(x[0] for x in s),
            "cpu_ms": statistics.median(x[1] for x in s),
            "vx_cpu_ms": statistics.median(x[2] for x in s),
        }
        for name, s in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="vx-bench-sandbox-"))
    meter = CpuMeter()
    try:
        project = make_workspace(top)
        config = SandboxConfig(read=("src/**", "task.js", "package.json"), write=("out/",))
        spec = plan_sandbox(
            config,
            root=project.parent,
            project_rel="pkg",
            task="pkg#w1",
            task_name="w1",
            projects={"": "root", "pkg": "pkg"},
            linked=(),
            folded=None,
            cache_dir=None,
        )
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")}
        variants = {
            "plain": plain,
            "bwrap": Sandboxed(spec, {**os.environ, "VX_STRACE": ""}),
            "traced": Sandboxed(spec, dict(os.environ)),
        }
        try:
            results = {
                "fixed (true)": measure(variants, "true", project, env, args.rounds * 2, meter),
                "W1 (node, 200 reads, 50 writes)": measure(
                    variants, "node task.js", project, env, args.rounds, meter
                ),
            }
        finally:
            for run in variants.values():
                if isinstance(run, Sandboxed):
                    run.close()
    finally:
        meter.close()
        shutil.rmtree(top, ignore_errors=True)
    report(results, meter.ok)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def report(results: dict, cpu: bool) -> None:
    for workload, rows in results.items():
        base = rows["plain"]
        print(f"{workload}")
        print(
            f"  {'variant':<8} {'wall ms':>8} {'+ms':>7} {'cpu ms':>8} {'cpu ×':>6} {'of it vx':>9}"
        )
        for name, row in rows.items():
            ratio = row["cpu_ms"] / base["cpu_ms"] if cpu and base["cpu_ms"] else float("nan")
            print(
                f"  {name:<8} {row['wall_ms']:8.1f} {row['wall_ms'] - base['wall_ms']:+7.1f} "
                f"{row['cpu_ms']:8.1f} {ratio:6.2f} {row['vx_cpu_ms']:9.1f}"
            )
    if not cpu:
        print("(no cpuacct cgroup here: CPU columns are not measured)")


if __name__ == "__main__":
    main()
