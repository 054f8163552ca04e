"""One package's task alone, under vx, under turbo and run directly, alternating: whether the same
process is slower under one tool (docs/benchmarks.md, trpc and monorepo-starter `typecheck`).

The task's script, in both copies alike, is prefixed by `/usr/bin/time` (its own wall and CPU)
and a probe writing what the process is given (environment, descriptors, nice, cgroups, limits)
to WORK/probe-<vx|turbo>.txt; the scripts are put back at the end. Each tool's run edits a
source file of the package (a new comment) so that the task misses and its dependencies hit.

    python bench/corpus.py --src DIR --work W --only trpc --install-only
    python bench/corpus_alone.py trpc --work W --package packages/tests --task typecheck \\
        --file packages/tests/server/___testHelpers.ts --rounds 4

Rows go to stdout and WORK/state/owner__name.alone.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import CORPUS, Bench, prepare, vx_tool  # noqa: E402

TIMED = re.compile(r"TSCTIME ([\d.]+) ([\d.]+) ([\d.]+) (\d+)")
TIME = "/usr/bin/time -f 'TSCTIME %e %U %S %M' "


def probe(work: Path, name: str) -> str:
    """Shell words writing what the task's shell is given to WORK/probe-<name>.txt."""
    return (
        "t=$([ -t 1 ] && echo y || echo n); o=$(readlink /proc/$$/fd/1 /proc/$$/fd/2);"
        " { env | sort; echo TTY1=$t; echo OUT=$o;"  # fd 1 and 2 before the group's redirection
        " echo TTY0=$([ -t 0 ] && echo y || echo n); echo NICE=$(ps -o ni= -p $$);"
        " cat /proc/$$/cgroup; grep Cpus_allowed_list /proc/$$/status; ulimit -a;"
        f" ls -l /proc/$$/fd; }} > {work}/probe-{name}.txt 2>&1; "
    )


def one(b: Bench, name: str, args, command: str, i: int) -> dict:
    if name == "direct":
        start, before = time.perf_counter(), os.times()
        proc = subprocess.run(
            ["sh", "-c", TIME + command],
            cwd=b.ws["turbo"] / args.package,
            env=b.tool_env("turbo"),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        after = os.times()
        cpu = after.children_user - before.children_user
        cpu += after.children_system - before.children_system
        rec = {"wall": time.perf_counter() - start, "cpu": cpu, "code": proc.returncode}
        rec["out"] = proc.stdout + proc.stderr
    else:
        with (b.ws[name] / args.file).open("a") as f:
            f.write(f"\n// corpus_alone {name} {i} {time.time()}\n")
        package = json.loads((b.ws[name] / args.package / "package.json").read_text())["name"]
        rec = b.run(name, [args.task], f"alone{i}", None, f"--filter={package}")
    found = TIMED.search(rec["out"])
    own = [float(x) for x in found.groups()] if found else None
    return {
        "tool": name,
        "wall": round(rec["wall"], 2),
        "cpu": round(rec["cpu"], 2),
        "code": rec["code"],
        "task_wall": own[0] if own else None,
        "task_cpu": round(own[1] + own[2], 2) if own else None,
        "task_rss_kib": own[3] if own else None,
        "cache": rec.get("cache"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", help="the repository whose owner/name contains this")
    ap.add_argument("--work", type=Path, default=Path("/tmp/vx-corpus"))
    ap.add_argument("--package", required=True, help="the package's directory")
    ap.add_argument("--task", required=True)
    ap.add_argument("--file", required=True, help="the file each run edits (a new comment)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--vx", help="the vx command (default: installed from this checkout)")
    args = ap.parse_args(argv)
    repo = next(r for r in CORPUS if args.only in r.slug)
    prepare(repo, None, args.work, False)
    b = Bench(repo, args.work, vx_tool(args.vx, args.work), args.concurrency)
    b.repo = dataclasses.replace(repo, filter=())  # the one package's filter, not the repo's
    manifests = {n: b.ws[n] / args.package / "package.json" for n in ("vx", "turbo")}
    kept = {n: p.read_text() for n, p in manifests.items()}
    command = json.loads(kept["vx"])["scripts"][args.task]
    out = args.work / "state" / f"{repo.dirname}.alone.jsonl"
    try:
        for name, path in manifests.items():
            doc = json.loads(kept[name])
            doc["scripts"][args.task] = probe(args.work, name) + TIME + command
            path.write_text(json.dumps(doc, indent=2) + "\n")
        order = ["vx", "turbo", "direct"]
        for i in range(args.rounds):
            for name in order if i % 2 == 0 else order[::-1]:
                load0 = Path("/proc/loadavg").read_text().split()[0]
                row = {"round": i, **one(b, name, args, command, i), "load0": load0}
                row["load1"] = Path("/proc/loadavg").read_text().split()[0]
                row["utc"] = time.strftime("%H:%M:%S", time.gmtime())
                print(json.dumps(row), flush=True)
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        for name, path in manifests.items():
            path.write_text(kept[name])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
