#!/usr/bin/env python3
"""Remote execution of a real installed repository's `build` graph on BuildGrid's workers
(tests/scenarios/support/reapi_servers.py ExecStack: PostgreSQL, `bgd`, reapi_worker.py bots),
against a local vx build of the same copy, then a second clone that should be all remote hits.

The workers get `node_modules` the way a container image would give it: `--image` is a copy of
the installed checkout standing for the workers' image, and the workspace names it with
`remoteExecution.workerInstall`, so each action's input root links the package store there
(docs/remote-execution.md, "Packages on the workers"). Every run is a fresh `vx` process on a
fresh `cp -a` of BASE (the installed checkout, never written) with an empty cache.

    python bench/remote_exec_repo.py BASE --workers 2 [--filter '!website'] [--turbo] [--logs DIR]

The copies get two files the repository does not have: vx.workspace.json (remote execution on,
`workerInstall`) and, with --inputs, a turbo.json whose `build` inputs are replaced by the given
ones: a remote action sees only declared inputs, and a repository whose inputs match none of
the files its build reads cannot build remotely (vx warns about such inputs). Prints a
markdown table (wall, CPU of vx and its children, remote/local counts) and the load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "scenarios"))
sys.path.insert(0, str(HERE.parent / "src"))

from support.reapi_servers import ExecStack  # noqa: E402

# floating-ui/floating-ui's `build` reads each package's sources and configs, the `config`
# package's sources (its dist is config#build's output, shipped as such), the root
# package.json (its `browserslist` steers @babel/preset-env), the workspace packages'
# manifests, and (devtools) extension/src; its turbo.json names `packages/**/src/**` relative
# to each package, which matches nothing.
FLOATING_UI_INPUTS = [
    "$TURBO_DEFAULT$",
    "$TURBO_ROOT$/config/src/**",
    "$TURBO_ROOT$/config/scripts/**",
    "$TURBO_ROOT$/config/*.json",
    "$TURBO_ROOT$/config/*.ts",
    "$TURBO_ROOT$/package.json",
    "$TURBO_ROOT$/packages/*/package.json",
    "$TURBO_ROOT$/extension/src/**",
]


def copy(base: Path, dest: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["cp", "-a", str(base), str(dest)], check=True)
    return time.perf_counter() - started


def overlay(ws: Path, image: Path, inputs: list[str] | None, platform: dict[str, str]) -> None:
    """Turn remote execution on in a copy (files of vx's, and the turbo.json inputs fix)."""
    config = {
        "remoteExecution": {
            "default": True,
            "capacity": 8,
            "workerInstall": str(image),
            "platform": platform,
        }
    }
    (ws / "vx.workspace.json").write_text(json.dumps(config, indent=2) + "\n")
    if inputs is not None:
        turbo = json.loads((ws / "turbo.json").read_text())
        turbo["tasks"]["build"]["inputs"] = inputs
        (ws / "turbo.json").write_text(json.dumps(turbo, indent=2) + "\n")


def run_vx(ws: Path, env: dict[str, str], filters: list[str], log: Path) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
    full.update({"PYTHONPATH": str(HERE.parent / "src"), "VX_SHARED_STORE": "0", **env})
    argv = [sys.executable, "-m", "vx", "run", "build", "--output-logs=errors-only"]
    for f in filters:
        argv += ["--filter", f]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = Path("/proc/loadavg").read_text().split()[0]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ws, env=full, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    out = proc.stdout + proc.stderr
    hits = re.search(r"remote cache \([^)]*\): (\d+) hits?", out)
    remote = re.search(
        r"remote execution: (\d+) tasks? ran on \S+(?:, (\d+) ran here instead)?", out
    )
    return {
        "code": proc.returncode,
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "load": load,
        "remote": int(remote.group(1)) if remote else 0,
        "here_instead": int(remote.group(2) or 0) if remote else 0,
        "remote_hits": int(hits.group(1)) if hits else 0,
        "tail": out[-1500:],
    }


def outputs(ws: Path) -> dict[str, str]:
    """Every dist file of the workspace's packages, by path, with its SHA-256."""
    sums = {}
    for rel in sorted(
        subprocess.run(
            ["find", ".", "-path", "./node_modules", "-prune", "-o", "-path", "*/node_modules",
             "-prune", "-o", "-path", "*/dist/*", "-type", "f", "-print"],
            cwd=ws, capture_output=True, text=True, check=True,
        ).stdout.split()
    ):  # fmt: skip
        sums[rel] = hashlib.sha256((ws / rel).read_bytes()).hexdigest()
    return sums


def install_cost(ws: Path, image: str) -> dict:
    """vx's share of one action for the install: the node_modules entries walked and hashed
    into the input root (the store itself is one link), measured in this process."""
    from vx.engine import remote_exec
    from vx.engine.remote import install_links

    class Node:  # what install_links reads of a task node
        def __init__(self, project_dir: str):
            self.project_dir = project_dir

    manifests = [*ws.glob("*/package.json"), *ws.glob("*/*/package.json")]
    dirs = {str(p.parent.relative_to(ws)) for p in manifests if "node_modules" not in p.parts}
    projects = {d: Node(d) for d in dirs}
    started = time.perf_counter()
    paths, links = install_links(str(ws), projects, image)  # type: ignore[arg-type]
    walked = time.perf_counter() - started
    blobs: dict = {}
    started = time.perf_counter()
    remote_exec._input_root(str(ws), paths, "", blobs, [links])
    hashed = time.perf_counter() - started
    size = sum(b.digest.size_bytes for b in blobs.values())
    pnpm = ws / "node_modules" / ".pnpm"
    store = sum(1 for _ in pnpm.rglob("*")) if pnpm.is_dir() else 0
    return {
        "entries": len(paths),
        "blobs": len(blobs),
        "bytes": size,
        "walk_ms": walked * 1000,
        "tree_ms": hashed * 1000,
        "store_entries": store,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("base", type=Path, help="the installed checkout (copied, never written)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--filter", action="append", default=[], dest="filters")
    ap.add_argument("--inputs", default="floating-ui", help="'floating-ui', 'keep', or JSON list")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--logs", type=Path, default=None, help="keep each run's vx output here")
    ap.add_argument(
        "--turbo",
        action="store_true",
        help="also build a copy with the repository's own turbo (its package manager on PATH) "
        "and compare its outputs",
    )
    args = ap.parse_args()
    inputs = (
        FLOATING_UI_INPUTS
        if args.inputs == "floating-ui"
        else None
        if args.inputs == "keep"
        else json.loads(args.inputs)
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="vx-bench-rexec-repo-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = args.logs or work
    logs.mkdir(parents=True, exist_ok=True)
    image = work / "image"  # the workers' image: the install at a path they can reach
    locks = ("pnpm-lock.yaml", "package-lock.json", "yarn.lock")
    lock = next((args.base / f).read_bytes() for f in locks if (args.base / f).exists())
    platform = {"container-image": "vx-install@sha256:" + hashlib.sha256(lock).hexdigest()[:16]}
    rows = []
    try:
        took = copy(args.base, image)
        print(f"image copied in {took:.0f} s", file=sys.stderr)
        local = work / "local"
        copy(args.base, local)
        overlay(local, image, inputs, platform)
        res = run_vx(local, {}, args.filters, logs / "local.log")
        if res["code"] != 0:
            sys.exit(f"the local build failed:\n{res['tail']}")
        rows.append(("local (no endpoint)", res))
        want = outputs(local)
        if args.turbo:
            ws = work / "turbo"
            copy(args.base, ws)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
            argv = [
                "node_modules/.bin/turbo",
                "run",
                "build",
                *(f"--filter={f}" for f in args.filters),
            ]
            started = time.perf_counter()
            proc = subprocess.run(
                argv, cwd=ws, env={**env, "COREPACK_ENABLE_STRICT": "0"}, capture_output=True,
                text=True, timeout=3600,
            )  # fmt: skip
            wall = time.perf_counter() - started
            (logs / "turbo.log").write_text(proc.stdout + proc.stderr)
            same = outputs(ws) == want
            print(f"turbo: exit {proc.returncode}, {wall:.1f} s, outputs identical to vx's: {same}")
            shutil.rmtree(ws)
        cost = install_cost(local, str(image))
        shutil.rmtree(local)
        stack = ExecStack(work / "stack")
        try:
            for _ in range(args.workers):
                stack.add_worker()
            env = {**stack.env(), "CI": "1"}  # CI: the results are uploaded for the clone
            for name in ("remote, cold", "second clone"):
                ws = work / name.replace(" ", "-").replace(",", "")
                copy(args.base, ws)
                overlay(ws, image, inputs, platform)
                res = run_vx(ws, env, args.filters, logs / f"{ws.name}.log")
                got = outputs(ws)
                res["identical"] = got == want
                res["differ"] = sorted(p for p in {*got, *want} if got.get(p) != want.get(p))
                if res["differ"]:
                    print(f"{name}: outputs not identical: {res['differ']}", file=sys.stderr)
                if res["code"] != 0:
                    said = f"exit {res['code']}, identical {res['identical']}"
                    print(f"{name}: {said}\n{res['tail']}", file=sys.stderr)
                    if not args.keep:
                        shutil.rmtree(ws)
                    rows.append((name, res))
                    break
                rows.append((name, res))
                if not args.keep:
                    shutil.rmtree(ws)
        finally:
            stack.stop()
        base = rows[0][1]["wall"]
        print(f"{len(want)} output files; workers: {args.workers}; {platform}\n")
        print(
            "| build | wall | vs local | CPU (vx + children) | ran remotely | ran here instead "
            "| remote cache hits | outputs | load at start |\n|---|---|---|---|---|---|---|---|---|"
        )
        for name, r in rows:
            same = "—"
            if "identical" in r:
                same = (
                    "identical" if r["identical"] else f"{len(r['differ'])} of {len(want)} differ"
                )
            print(
                f"| {name} | {r['wall']:.1f} s | {r['wall'] / base:.2f}× | {r['cpu']:.1f} s "
                f"| {r['remote']} | {r['here_instead']} | {r['remote_hits']} | {same} | {r['load']} |"
            )
        print(
            f"\ninstall in each input root: {cost['entries']} node_modules entries "
            f"({cost['blobs']} blobs with the tree's messages, {cost['bytes'] / 1024:.0f} KiB), "
            f"walked once a run in {cost['walk_ms']:.0f} ms, hashed into the tree in "
            f"{cost['tree_ms']:.0f} ms an action; the store ({cost['store_entries']} entries) is one link"
        )
        print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
