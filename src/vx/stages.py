"""Time the stages of a run for `VX_TIMING=1` (OBS-11): a table on stderr, nothing otherwise."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, TextIO


class Stages:
    def __init__(self, enabled: bool, started: float | None = None) -> None:
        self.enabled = enabled
        self.started = started if started is not None else time.perf_counter()
        self.rows: list[tuple[str, float]] = []

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

    def print(self, out: TextIO) -> None:
        if not self.enabled:
            return
        total = (time.perf_counter() - self.started) * 1000
        out.write("vx timing (ms)\n")
        for name, ms in self.rows:
            out.write(f"  {name:<18} {ms:9.1f}\n")
        out.write(f"  {'total':<18} {total:9.1f}\n")
