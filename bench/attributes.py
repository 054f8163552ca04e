#!/usr/bin/env python3
"""What a `* text=auto` .gitattributes costs vx's keying (KEY-14), paired with the same workspace
without it.

    python bench/attributes.py                      # 300 packages x 20 files: 6,000 inputs
    python bench/attributes.py --old 2f3b263        # also the vx of that commit, in the same rounds

One workspace from `gen_monorepo.py` (vx configs only), copied twice: `plain` as generated and
`attrs` with `* text=auto` committed. Each is built once per vx, then the rounds alternate
workspaces (and vx builds) run by run, three scenarios each:

- `warm`: `vx run build` with everything up to date and no receipt (the whole pipeline keys).
- `replay`: the same with the receipt the run before wrote.
- `cold keys`: the first keying of a checkout: the blob memo and the attribute verdicts deleted,
  no receipt; everything still up to date.

Wall time of each run, its CPU (vx and every git it ran), and the `keys` and `git enumeration`
stages of VX_TIMING. Medians, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parse_stages  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}
SCENARIOS = ("warm", "replay", "cold keys")


def sh(argv: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env={**os.environ, **GIT_ENV, **(env or {})}, capture_output=True, text=True
    )


def workspaces(work: Path, packages: int) -> dict[str, Path]:
    plain, attrs = work / "plain", work / "attrs"
    if not attrs.exists():
        gen = [sys.executable, str(BENCH / "gen_monorepo.py"), str(plain), "-n", str(packages)]
        gen += ["-f", "20", "-d", "4", "-s", "1", "--tools", "vx", "--no-devdeps", "--force"]
        subprocess.run(gen, check=True, capture_output=True, env={**os.environ, **GIT_ENV})
        shutil.copytree(plain, attrs, symlinks=True)
        (attrs / ".gitattributes").write_text("* text=auto\n")
        sh(["git", "add", ".gitattributes"], attrs).check_returncode()
        sh(["git", "commit", "-qm", "text=auto"], attrs).check_returncode()
    return {"plain": plain, "attrs": attrs}


def vx_builds(work: Path, old: str | None) -> dict[str, Path]:
    """Source trees to put on PYTHONPATH: this checkout, and `old` exported from git."""
    builds = {"new": REPO / "src"}
    if old:
        dest = work / f"vx-{old}"
        if not dest.exists():
            dest.mkdir(parents=True)
            archive = subprocess.run(
                ["git", "archive", old, "src"], cwd=REPO, check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        builds[old] = dest / "src"
    return builds


def run_once(ws: Path, src: Path, scenario: str, home: Path) -> dict:
    if scenario != "replay":
        shutil.rmtree(ws / ".vx" / "receipts", ignore_errors=True)
    if scenario == "cold keys":
        for memo in (ws / ".vx").rglob("files.db"):
            memo.unlink()
        for memo in (ws / ".vx").rglob("attributes.json"):
            memo.unlink()
    env = {"PYTHONPATH": str(src), "VX_TIMING": "1", "HOME": str(home), "NO_COLOR": "1"}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VX_")}, **env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "run", "build", "--concurrency", "2"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"vx failed in {ws}:\n{proc.stderr[-2000:]}")
    stages = parse_stages(proc.stderr)
    return {
        "wall": wall,
        "cpu": cpu,
        "keys": stages.get("keys"),
        "git": stages.get("git enumeration"),
    }


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packages", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per cell (default 5)")
    ap.add_argument("--old", help="a commit of vx to measure beside this checkout")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vx-bench-attrs")
    ap.add_argument("--json", type=Path, help="write every sample here")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    wss = workspaces(args.work, args.packages)
    builds = vx_builds(args.work, args.old)
    cells = [(b, w) for b in builds for w in wss]
    # One copy of each workspace per build: each keeps its own cache and memos.
    trees = {}
    for b, w in cells:
        tree = args.work / "runs" / f"{b}-{w}"
        if not tree.exists():
            shutil.copytree(wss[w], tree, symlinks=True)
        trees[b, w] = tree
        home = args.work / "home" / f"{b}-{w}"
        home.mkdir(parents=True, exist_ok=True)
        run_once(tree, builds[b], "warm", home)  # the build, or a no-op once built
    load = [os.getloadavg()[0]]
    samples: dict = {(b, w, s): [] for b, w in cells for s in SCENARIOS}
    for _ in range(args.runs):
        for s in SCENARIOS:
            for b, w in cells:
                home = args.work / "home" / f"{b}-{w}"
                if s == "replay":
                    run_once(trees[b, w], builds[b], "warm", home)  # writes the receipt
                samples[b, w, s].append(run_once(trees[b, w], builds[b], s, home))
    load.append(os.getloadavg()[0])
    print(
        f"{args.packages} packages x 20 files, {args.runs} runs each, load {load[0]:.2f} → {load[1]:.2f}"
    )
    print("| vx | workspace | scenario | wall ms | CPU ms | keys ms | git enumeration ms |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for s in SCENARIOS:
        for b, w in cells:
            got = samples[b, w, s]
            cols = [median([g[k] for g in got]) for k in ("wall", "cpu", "keys", "git")]
            text = ["" if c is None else f"{c:.0f}" for c in cols]
            print(f"| {b} | {w} | {s} | {' | '.join(text)} |")
    if args.json:
        rows = [{"vx": b, "ws": w, "scenario": s, "runs": v} for (b, w, s), v in samples.items()]
        args.json.write_text(json.dumps({"load": load, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
