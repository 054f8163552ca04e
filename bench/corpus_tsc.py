"""Issue #26's two `tsc -b` oracles on a corpus repository (bench/corpus.py's install and copies).

1. From clean, the `tsc -b` task passes N times in N under vx, as under turbo, and the run
   right after each is all hits.
2. After one edit in a source file other packages' builds reference, the task's wall under vx
   against turbo's: tools alternating, a unique edit appended before each run (never undone, so
   no earlier entry serves it), wall and CPU and the load; then the incremental outputs against a
   clean build of the same edited tree, under each tool.

    python bench/corpus.py --src DIR --only evolu --install-only
    python bench/corpus_tsc.py evolu --clean 5 --turbo-clean 2 --edits 4

The copies are bench/corpus.py's (WORK/repos/owner__name/{vx,turbo}); the results go to
WORK/state/owner__name.tsc.json and a line per run to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import (  # noqa: E402
    CORPUS,
    Bench,
    diff_manifests,
    load,
    log,
    med,
    noise,
    prepare,
    vx_tool,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", help="the repository whose owner/name contains this")
    ap.add_argument("--task", help="the tsc -b task (default: the repository's first)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/vx-corpus"))
    ap.add_argument("--clean", type=int, default=5, help="clean vx runs (oracle 1)")
    ap.add_argument("--turbo-clean", type=int, default=2, help="clean turbo runs beside them")
    ap.add_argument("--edits", type=int, default=4, help="one-edit rounds per tool (oracle 2)")
    ap.add_argument("--file", help="the edited file (default: the repository's source edit)")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--vx", help="the vx command (default: installed from this checkout)")
    args = ap.parse_args(argv)

    repo = next(r for r in CORPUS if args.only in r.slug)
    task = args.task or repo.tasks[0]
    rel = args.file or repo.edits["source"]
    prepare(repo, None, args.work, False)
    b = Bench(repo, args.work, vx_tool(args.vx, args.work), args.concurrency)
    out_path = args.work / "state" / f"{repo.dirname}.tsc.json"
    res: dict = {"repo": repo.slug, "commit": repo.commit, "task": task, "file": rel}

    def save():
        out_path.write_text(json.dumps(res, indent=1, default=str))

    def brief(r: dict) -> dict:
        cache = r["cache"]
        return {
            "wall": r["wall"],
            "cpu": r["cpu"],
            "code": r["code"],
            "load": round(load(), 1),
            "hits": sum(1 for s in cache.values() if s == "hit"),
            "misses": sorted(t for t, s in cache.items() if s == "miss"),
            "tasks": len(cache),
            "log": r["log"],
        }

    # oracle 1: clean runs, each followed by a run that must be all hits
    clean: dict[str, list] = {"vx": [], "turbo": []}
    manifests: dict[str, list] = {"vx": [], "turbo": []}
    for i in range(max(args.clean, args.turbo_clean)):
        order = ["vx", "turbo"] if i % 2 == 0 else ["turbo", "vx"]
        for name in order:
            if i >= (args.clean if name == "vx" else args.turbo_clean):
                continue
            b.reset(name)
            b.clean(name)
            first = brief(b.run(name, [task], f"tsc-clean{i}"))
            if first["code"] == 0:
                manifests[name].append(b.manifest(name))
            second = brief(b.run(name, [task], f"tsc-next{i}"))
            clean[name].append({"clean": first, "next": second})
            log(
                f"  {name} clean#{i}: exit {first['code']} {first['wall']:.1f} s "
                f"(CPU {first['cpu']:.1f}, load {first['load']}); next run "
                f"{second['hits']}/{second['tasks']} hits, exit {second['code']}"
            )
            res["clean"] = clean
            save()
    if manifests["vx"] and manifests["turbo"]:
        noisy = noise(*manifests["vx"]) | noise(*manifests["turbo"])
        res["clean_vx_vs_turbo"] = diff_manifests(
            manifests["vx"][-1], manifests["turbo"][-1], noisy
        )
        res["nondeterministic"] = sorted(noisy)[:20]
    save()

    # oracle 2: one edit at a time, tools alternating, from each tool's warm state
    if not (args.clean or args.turbo_clean):
        # no clean phase this time (`--clean 0 --turbo-clean 0`: oracle 2 alone): a run of each
        # tool, untimed, finishes whatever state an earlier, interrupted run left, so each
        # tool's first edit starts from a whole build of the unedited tree
        for name in ("vx", "turbo"):
            b.unedit(name, rel)
            r = brief(b.run(name, [task], "tsc-settle"))
            log(f"  {name} settle: exit {r['code']}, {r['hits']}/{r['tasks']} hits")
            res.setdefault("settle", {})[name] = r
    edits: dict[str, list] = {"vx": [], "turbo": []}
    for i in range(args.edits):
        order = ["vx", "turbo"] if i % 2 == 0 else ["turbo", "vx"]
        for name in order:
            b.edit(name, rel)
            r = brief(b.run(name, [task], f"tsc-edit{i}"))
            edits[name].append(r)
            log(
                f"  {name} edit#{i}: exit {r['code']} {r['wall']:.2f} s (CPU {r['cpu']:.1f}, "
                f"load {r['load']}), {len(r['misses'])} misses"
            )
            res["edit"] = edits
            save()
    summary = {}
    for name, rs in edits.items():
        walls = [r["wall"] for r in rs]
        cpus = [r["cpu"] for r in rs]
        if walls:
            summary[name] = {
                "median": med(walls),
                "min": min(walls),
                "max": max(walls),
                "cpu_median": med(cpus),
            }
    if "vx" in summary and "turbo" in summary and summary["turbo"]["median"]:
        summary["ratio"] = round(summary["vx"]["median"] / summary["turbo"]["median"], 2)
    res["edit_summary"] = summary
    log(f"  edit medians: {json.dumps(summary)}")
    save()

    # the incremental outputs against a clean build of the same edited tree, per tool
    same = {}
    for name in ("vx", "turbo"):
        if not edits[name]:
            continue
        incremental = b.manifest(name)
        b.clean(name)
        r = brief(b.run(name, [task], "tsc-editclean"))
        same[name] = diff_manifests(
            incremental, b.manifest(name), noise(*manifests[name]) if manifests[name] else set()
        )
        same[name]["clean_exit"] = r["code"]
        log(f"  {name} incremental vs clean: {json.dumps(same[name])[:400]}")
        b.unedit(name, rel)
    res["incremental_vs_clean"] = same
    res["ended"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
