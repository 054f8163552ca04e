#!/usr/bin/env python3
"""What indexing a store again costs after a schema reset (LC-13): lazily, key by key as runs
probe them, or all at once at the reset.

    python bench/store_reindex.py                   # 10,000 entries of one 2 KiB output each

Fills a LocalStore with N entries, resets its index the way a release with a new schema does,
then times: a probe of 300 keys no artifact answers (what the lazy way adds to a miss: one stat
each), a probe of 300 row-less keys (one run's worth, indexed again from their bytes), and a
probe of all the rest (what doing it at the reset would cost the run that finds it). CPU and
wall per entry, with the load average.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vx.store.local import LocalStore  # noqa: E402


def timed(fn) -> tuple[float, float, object]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - w) * 1000, (time.process_time() - c) * 1000, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--run", type=int, default=300, help="keys one run probes (default 300)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ws, cache = Path(tmp) / "ws", Path(tmp) / "cache"
        (ws / "dist").mkdir(parents=True)
        keys = [f"{i:016x}" for i in range(args.entries)]
        body = os.urandom(1024).hex()
        with LocalStore(cache, ws) as store:
            for key in keys:
                (ws / "dist" / "out.js").write_text(key + body)
                store.save(
                    key,
                    task_id="p#build",
                    command="node b.js",
                    log=(),
                    files=["dist/out.js"],
                    duration_ms=5.0,
                )
        db = sqlite3.connect(cache / "cache.db")
        with db:
            db.execute("UPDATE schema_meta SET version = 'v0-old'")
        db.close()
        load = os.getloadavg()[0]
        with LocalStore(cache, ws) as store:
            absent = [f"{i:016x}" for i in range(10**9, 10**9 + args.run)]
            miss = timed(lambda: store.probe(absent))
            run = timed(lambda: store.probe(keys[: args.run]))
            rest = timed(lambda: store.probe(keys[args.run :]))
        assert len(run[2]) == args.run and len(rest[2]) == args.entries - args.run
        size = sum(p.stat().st_size for p in cache.glob("*.tar.zst"))
    n_rest = args.entries - args.run
    print(f"{args.entries} entries ({size / args.entries:.0f} B an artifact), load {load:.2f}")
    print("| probe | keys | wall ms | CPU ms | per key ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, n, (wall, cpu, _) in (
        ("no artifact (a plain miss)", args.run, miss),
        ("row-less, indexed again (one run)", args.run, run),
        ("row-less, indexed again (the rest)", n_rest, rest),
    ):
        print(f"| {name} | {n} | {wall:.0f} | {cpu:.0f} | {wall / n:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
