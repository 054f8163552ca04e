#!/usr/bin/env python3
"""A per-call timeline of one vx run on a REAPI (or `/v8`) cache: what a restore waits on, call by call.

    VX_REAPI_ENDPOINT=grpc://127.0.0.1:PORT python bench/reapi_timeline.py --out t.json -- run build

runs vx in this process (the vx this interpreter imports: a venv's, or `PYTHONPATH=src`) with
every REAPI call timed from its start to its end (`ReapiLayer._call`), every download
(`LayeredStore._fetch`), the prefetch, and the layer's opening (grpc's import and the channel),
all in seconds from the process start; then prints each kind's count, first start, last end and
durations, the most calls in flight, and the throttle's end state (pushback, cuts, limit), with
the run's own stages (`vx.stages`: discover, load configs, graph, keys, open cache, probe,
prefetch) on the same clock. On a `/v8` server (TURBO_API, TURBO_TOKEN, TURBO_TEAM), each GET and each
HTTP connection opened are timed instead.
Put `bench/link.py` in front of the server to see a link's round trips. Written for
docs/benchmarks.md, "REAPI restore width". The patches wrap vx's own methods and change nothing
they do.
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict

T0 = time.perf_counter()
EVENTS: list[tuple[str, str, float, float]] = []
_lock = threading.Lock()


def record(kind: str, name: str, start: float, end: float) -> None:
    with _lock:
        EVENTS.append((kind, name, start - T0, end - T0))


def timed(kind: str, name_of, method):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            record(kind, name_of(*args), start, time.perf_counter())

    return wrapper


def patch() -> None:
    import vx.stages as stages
    import vx.store.layered as layered
    import vx.store.remote as remote

    enter, leave = stages._Stage.__enter__, stages._Stage.__exit__

    def entered(self):
        self.timeline_start = time.perf_counter()
        return enter(self)

    def left(self, *exc):
        record("stage", self.name, self.timeline_start, time.perf_counter())
        return leave(self, *exc)

    stages._Stage.__enter__, stages._Stage.__exit__ = entered, left  # the run's own stages

    store = layered.LayeredStore
    store._fetch = timed("fetch", lambda self, key, want: "download", store._fetch)
    store.prefetch = timed("prefetch", lambda self, wanted: "prefetch", store.prefetch)
    deferred_open = remote._Deferred._open

    done = threading.Lock()  # the first thread back did the opening: the others waited on it

    def opened(self):
        start = time.perf_counter()
        layer = deferred_open(self)
        if not done.acquire(blocking=False):
            return layer
        record("open", "import grpc, make the channel", start, time.perf_counter())
        reapi = sys.modules["vx.store.remote.reapi"]
        reapi.ReapiLayer._call = timed(
            "rpc", lambda self, method, *rest: method.rsplit("/", 1)[-1], reapi.ReapiLayer._call
        )
        close = reapi.ReapiLayer.close

        def closing(layer_self):
            r, t = layer_self.retrier, layer_self.retrier.throttle
            now = time.perf_counter()
            name = f"pushed back {r.pushed}, cured {r.cured}, cuts {t.cuts}, limit {t.limit}"
            record("throttle", name, now, now)
            close(layer_self)

        reapi.ReapiLayer.close = closing
        return layer

    remote._Deferred._open = opened

    import vx.store.remote.turbo as turbo
    import vx.store.remote.wire as wire

    connect = wire.Wire._connect

    def connecting(self, conn, timeout):  # only a connection that is opened now is a "connect"
        if conn.sock is not None:
            return connect(self, conn, timeout)
        start = time.perf_counter()
        try:
            return connect(self, conn, timeout)
        finally:
            record("connect", "HTTP connection opened", start, time.perf_counter())

    wire.Wire._connect = connecting
    turbo.TurboLayer.get = timed("http", lambda self, key, sink: "GET", turbo.TurboLayer.get)


def summary(end: float, cpu: float) -> list[str]:
    out = [f"process: {end:.3f} s wall, {cpu:.2f} s CPU"]
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for kind, name, start, stop in EVENTS:
        groups[(kind, name)].append((start, stop))
    for (kind, name), spans in sorted(groups.items(), key=lambda kv: min(s for s, _ in kv[1])):
        took = [b - a for a, b in spans]
        out.append(
            f"{kind:8} {name:30} ×{len(spans):<5} {min(a for a, _ in spans):7.3f} → "
            f"{max(b for _, b in spans):7.3f} s; each {statistics.median(took):.3f} s "
            f"({min(took):.3f}–{max(took):.3f})"
        )
    edges = sorted(
        [(a, 1) for k, _, a, _ in EVENTS if k in ("rpc", "http")]
        + [(b, -1) for k, _, _, b in EVENTS if k in ("rpc", "http")]
    )
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    out.append(f"most calls in flight: {peak} (a retry's backoff counts as in flight)")
    return out


def main() -> None:
    argv = sys.argv[1:]
    out = None
    if argv[:1] == ["--out"]:
        out, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    patch()

    def report() -> None:
        end, cpu = time.perf_counter() - T0, time.process_time()
        lines = summary(end, cpu)
        print("\n".join(lines), file=sys.stderr)
        if out:
            with open(out, "w") as f:
                json.dump({"events": EVENTS, "end": end, "cpu": cpu}, f)

    done = []

    def once() -> None:
        if not done:
            done.append(True)
            report()

    atexit.register(once)
    exit_now = os._exit

    def leaving(code: int) -> None:  # vx ends a run with os._exit: report first
        once()
        exit_now(code)

    os._exit = leaving
    sys.argv = ["vx", *argv]
    from vx.cli.main import entry

    entry()


if __name__ == "__main__":
    main()
