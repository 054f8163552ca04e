"""Time the stages of a run for `VX_TIMING=1` (OBS-11): a table on stderr, nothing otherwise.

The first row is start-up: the CPU the process spent before the pipeline began (the
interpreter, site hooks and imports; CPU because the start of the process has no wall clock
here, and at start-up the two agree). Span rows sum a per-task cost over every task
(`save (Σ 12)`), so they overlap the stage they ran in and are not part of the total.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterable, Iterator, TextIO


class Stages:
    def __init__(self, enabled: bool, started: float | None = None) -> None:
        self.enabled = enabled
        self.started = started if started is not None else time.perf_counter()
        self.startup_ms = time.process_time() * 1000  # CPU before the pipeline: interpreter, site, imports
        self.opened = time.perf_counter()
        self.rows: list[tuple[str, float]] = []
        self.spans: list[tuple[str, int, float]] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self.enabled:
                self.rows.append((name, (time.perf_counter() - t0) * 1000))

    def mark(self, name: str, since: float) -> None:
        if self.enabled:
            self.rows.append((name, (time.perf_counter() - since) * 1000))

    def span(self, name: str, seconds: Iterable[float]) -> None:
        """Record a per-task cost summed over tasks (e.g. every save), when there was any."""
        each = list(seconds)
        if self.enabled and each:
            self.spans.append((name, len(each), sum(each) * 1000))

    def print(self, out: TextIO) -> None:
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
