"""Time one command: wall clock, CPU of the whole process tree, and peak RSS (from `wait4`).

CPU is user+sys of the process plus every descendant it waited for (turbo's `npm run`
children, vx's task shells), which is what `/usr/bin/time` reports. Peak RSS is the largest
single process of that tree (Linux `ru_maxrss` semantics), as in the perf anchors.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float
    rss_mib: float
    exit_code: int


@dataclass(frozen=True)
class Spread:
    """Median and range of one measure over the runs of a scenario."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values), len(values))


def measure(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], stderr_to: Path | None = None
) -> Sample:
    """Run `argv` to completion with stdout discarded; stderr goes to `stderr_to` or nowhere."""
    err = open(stderr_to, "wb") if stderr_to else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    finally:
        if stderr_to:
            err.close()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode)


def logged_run(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path
) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run `argv` with stdout and stderr captured as one text, write the command line and that
    output to `log`; (the process, wall seconds, CPU seconds of the children)."""
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    log.write_text(" ".join(argv) + "\n" + proc.stdout)
    return proc, wall, cpu


def summarise(samples: Sequence[Sample]) -> dict[str, Spread]:
    return {
        "wall_s": Spread.of([s.wall_s for s in samples]),
        "cpu_s": Spread.of([s.cpu_s for s in samples]),
        "rss_mib": Spread.of([s.rss_mib for s in samples]),
    }


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"
