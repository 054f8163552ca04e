"""Time the stages of a run for `VX_TIMING=1`: a table on stderr, nothing otherwise.

The first row is start-up: the CPU the process spent before the pipeline began (the
interpreter, site hooks and imports; CPU because the start of the process has no wall clock
here, and at start-up the two agree). Span rows sum a per-task cost over every task
(`save (Σ 12)`), so they overlap the stage they ran in and are not part of the total.

Stdlib `time` alone (no contextlib, no typing): a replayed warm run prints this table too.
"""

from __future__ import annotations

import time


class Stages:
    def __init__(self, enabled: bool, started: float | None = None) -> None:
        self.enabled = enabled
        self.started = started if started is not None else time.perf_counter()
        self.startup_ms = (
            time.process_time() * 1000
        )  # CPU before the pipeline: interpreter, site, imports
        self.opened = time.perf_counter()
        self.rows: list[tuple[str, float]] = []
        self.spans: list[tuple[str, int, float]] = []

    def __call__(self, name: str) -> _Stage:
        """`with stages("keys"):` times the block as one row."""
        return _Stage(self, name)

    def mark(self, name: str, since: float) -> None:
        if self.enabled:
            self.rows.append((name, (time.perf_counter() - since) * 1000))

    def span(self, name: str, seconds: list[float] | tuple[float, ...]) -> None:
        """Record a per-task cost summed over tasks (e.g. every save), when there was any."""
        each = list(seconds)
        if self.enabled and each:
            self.spans.append((name, len(each), sum(each) * 1000))

    def print(self, out) -> None:  # any text stream
        if not self.enabled:
            return
        ran = (time.perf_counter() - self.opened) * 1000
        out.write("vx timing (ms)\n")
        out.write(f"  {'startup (cpu)':<18} {self.startup_ms:9.1f}\n")
        for name, ms in self.rows:
            out.write(f"  {name:<18} {ms:9.1f}\n")
        for name, n, ms in self.spans:
            out.write(f"  {f'{name} (Σ {n})':<18} {ms:9.1f}\n")
        out.write(f"  {'total':<18} {self.startup_ms + ran:9.1f}\n")


class _Stage:
    def __init__(self, stages: Stages, name: str) -> None:
        self.stages, self.name = stages, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        if self.stages.enabled:
            self.stages.rows.append((self.name, (time.perf_counter() - self.t0) * 1000))
