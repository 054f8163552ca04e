"""Does vx run a Turborepo repository as turbo would (TL-05)? Compare the task graphs, and with
`--inputs` the files each task hashes.

Takes the benchmark's generated workspace (turbo.json + package.json scripts, turbo installed from
npm), removes every vx config from a copy, and asks both tools for their plan without running
anything — `turbo run … --dry=json` and `vx run … --dry=json` — then compares the tasks with a
command and the commands each waits for, looking through no-ops (a package without the script:
turbo's `<NONEXISTENT>`, vx's keyed group); `--inputs` also compares each task's input files
(turbo's `inputs` map, vx's `inputs`), as `input_differences` normalises them. Exit 0 when they
are the same.

    python bench/turbo_parity.py --packages 100 --tasks build test lint [--inputs]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(
    1, str(Path(__file__).resolve().parents[1] / "src")
)  # this checkout's vx.files.globs

from tools import turbo_tool, vx_tool, workspaces  # noqa: E402


def dry_docs(ws: Path, tasks: list[str], vx, turbo) -> tuple[dict, dict]:
    """Both tools' `--dry=json` documents for `tasks` in `ws`."""
    t = subprocess.run(
        [*turbo.exe, "run", *tasks, "--dry=json"],
        cwd=ws,
        env=turbo.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    v = subprocess.run(
        [*vx.exe, "run", *tasks, "--dry=json"],
        cwd=ws,
        env=vx.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(t.stdout), json.loads(v.stdout)


# What vx keys apart from the task's file set, or never: the project's package.json (a key part of its
# own) and turbo.json (its definitions are in the key); `.git`, `.vx` and build info files (KEY-17);
# node_modules, which vx enters only for a glob that names it.
_NEVER_COMPARED = re.compile(r"(?:^|/)(?:\.git|\.vx|node_modules)/|\.tsbuildinfo$")


def input_differences(turbo_doc: dict, vx_doc: dict) -> dict[str, tuple[list[str], list[str]]]:
    """Per cached task, the input files only turbo hashes and only vx does, workspace-relative.

    Normalised: turbo's package-relative paths made workspace-relative; the globalDependencies
    (turbo keys them globally, vx as workspace inputs of each task), the package's package.json
    and turbo.json, and the task's own outputs (never vx inputs, KEY-17) left out of both sides."""
    from vx.files.globs import GlobSet

    global_files = set(turbo_doc.get("globalCacheInputs", {}).get("files") or {})
    vx_tasks = {t["id"]: t for t in vx_doc["tasks"] if t.get("inputs") is not None}
    out: dict[str, tuple[list[str], list[str]]] = {}
    for task in turbo_doc["tasks"]:
        tid, base = task["taskId"], task["directory"]
        if tid not in vx_tasks:
            continue
        outputs = task["resolvedTaskDefinition"].get("outputs") or []
        own_outputs = (
            GlobSet(outputs, turbo=True) if any(not o.startswith("!") for o in outputs) else None
        )
        prefix = base + "/" if base else ""

        def kept(path: str) -> bool:
            if path in global_files or path in (prefix + "package.json", prefix + "turbo.json"):
                return False
            if _NEVER_COMPARED.search(path):
                return False
            return not (
                own_outputs and path.startswith(prefix) and own_outputs.matches(path[len(prefix) :])
            )

        theirs = {os.path.normpath(os.path.join(base, p)) for p in task["inputs"]}
        ours = set(vx_tasks[tid]["inputs"])
        theirs, ours = {p for p in theirs if kept(p)}, {p for p in ours if kept(p)}
        if theirs != ours:
            out[tid] = (sorted(theirs - ours), sorted(ours - theirs))
    return out


def graphs(turbo_doc: dict, vx_doc: dict) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Both plans as each task with a command and the commands it waits for."""
    turbo_graph = {
        x["taskId"]: (x["command"] == "<NONEXISTENT>", x["dependencies"])
        for x in turbo_doc["tasks"]
    }
    vx_graph = {x["id"]: (x["command"] is None, x["deps"]) for x in vx_doc["tasks"]}
    return through_noops(turbo_graph), through_noops(vx_graph)


def through_noops(plan: dict[str, tuple[bool, list[str]]]) -> dict[str, list[str]]:
    """Each task with a command and the commands it waits for, looking through no-ops (turbo's
    `<NONEXISTENT>` tasks, vx's groups): what runs, in which order."""
    memo: dict[str, set[str]] = {}

    def real(tid: str) -> set[str]:
        if tid not in memo:
            memo[tid] = set()
            for dep in plan[tid][1]:
                memo[tid] |= real(dep) if plan[dep][0] else {dep}
        return memo[tid]

    return {tid: sorted(real(tid)) for tid, (noop, _deps) in plan.items() if not noop}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packages", type=int, default=100)
    ap.add_argument("--tasks", nargs="+", default=["build", "test", "lint"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/vx-bench"))
    ap.add_argument(
        "--vx", help="the vx command (default: installed from this checkout into a venv)"
    )
    ap.add_argument("--inputs", action="store_true", help="compare each task's input files too")
    args = ap.parse_args(argv)
    source = workspaces(args.work, args.packages)["turbo"]
    ws = args.work / f"m{args.packages}-parity"
    shutil.rmtree(ws, ignore_errors=True)
    subprocess.run(["cp", "-a", str(source), str(ws)], check=True)
    for config in [*ws.glob("packages/*/vx.config.json"), ws / "vx.workspace.json"]:
        config.unlink(missing_ok=True)
    turbo_doc, vx_doc = dry_docs(ws, args.tasks, vx_tool(args.vx, args.work), turbo_tool(ws))
    turbo_graph, vx_graph = graphs(turbo_doc, vx_doc)
    only_turbo, only_vx = (
        sorted(set(turbo_graph) - set(vx_graph)),
        sorted(set(vx_graph) - set(turbo_graph)),
    )
    edges = sorted(t for t in set(turbo_graph) & set(vx_graph) if turbo_graph[t] != vx_graph[t])
    print(
        f"tasks: turbo {len(turbo_graph)}, vx {len(vx_graph)}; only turbo: {len(only_turbo)}, only vx: "
        f"{len(only_vx)}; different dependencies: {len(edges)}"
    )
    for tid in (only_turbo + only_vx + edges)[:10]:
        print(f"  {tid}: turbo {turbo_graph.get(tid)} vx {vx_graph.get(tid)}")
    files = input_differences(turbo_doc, vx_doc) if args.inputs else {}
    if args.inputs:
        compared = sum(1 for t in vx_doc["tasks"] if t.get("inputs") is not None)
        print(f"input files: {compared} cached tasks compared, {len(files)} with different files")
        for tid, (theirs, ours) in list(files.items())[:10]:
            print(f"  {tid}: only turbo {theirs[:5]} only vx {ours[:5]}")
    return 0 if not (only_turbo or only_vx or edges or files) else 1


if __name__ == "__main__":
    sys.exit(main())
