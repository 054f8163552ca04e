"""vx and turbo side by side on a real Turborepo checkout the user points it at.

The checkout must be installed already (its own package manager, its own lockfile), so both tools
run the repository's own scripts with the repository's own turbo. Each tool gets its own copy
(`cp -a`, as bench/run.py does for the generated workspace: turbo rewrites outputs on every hit).
For each task list, runs alternate between the tools:

- cold     caches and outputs gone, everything runs;
- warm     nothing changed since the last run;
- restore  outputs gone (`--remove`, default packages/*/dist), caches kept;
- edit     one tracked source file changed (then put back), what depends on it re-runs.

Every warm run's cached task set is compared between the tools (turbo's `--summarize` against
vx's): a task turbo serves from its cache that vx runs again — or the reverse — is printed.
`--check CMD` runs a command in vx's copy after a cold build (e.g. a package's tests).

    python bench/realworld.py ~/src/edge-runtime --tasks build --edit packages/primitives/src/index.ts
    python bench/realworld.py ~/src/floating-ui --tasks build typecheck --edit packages/utils/src/index.ts
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import TOOL_ENV, Tool, turbo_tool, version_of, vx_tool  # noqa: E402

SCENARIOS = ("cold", "warm", "restore", "edit")
REMOVE: list[str] = []  # --remove
ENV = {
    k: v for k, v in os.environ.items() if k not in ("CI", "VX_TIMING", "VX_CACHE_DIR")
}  # PATH set in main
# Removes the gitignored outputs but not the install nor the caches. Each kept directory is
# un-ignored together with everything below it (`!**/x/**`): un-ignoring only the directory would
# let git descend into it and delete every ignored `dist` of the installed packages.
CLEAN_OUTPUTS = [
    "git",
    "clean",
    "-fdXq",
    *(f"-e!{p}" for d in ("node_modules", ".vx", ".turbo") for p in (d, f"**/{d}/**")),
]


def copies(checkout: Path, work: Path, fresh: bool) -> dict[str, Path]:
    out = {}
    for name in ("vx", "turbo"):
        dest = work / f"{checkout.name}-{name}"
        if fresh or not dest.exists():
            shutil.rmtree(dest, ignore_errors=True)
            subprocess.run(["cp", "-a", str(checkout), str(dest)], check=True)
        out[name] = dest
    return out


def clean(tool: Tool, ws: Path, caches: bool) -> None:
    """Cold (`caches`): every gitignored file but the install, caches too. Restore: only the
    directories `--remove` names — a repository's undeclared outputs (edge-runtime's
    `primitives/types/*.d.ts`) would fail either tool's restored build, as in a fresh clone."""
    if not caches:
        for pattern in REMOVE:
            for path in ws.glob(pattern):
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        return
    subprocess.run(CLEAN_OUTPUTS, cwd=ws, check=True)
    for rel in (
        ".vx",
        ".turbo",
        "node_modules/.cache/turbo",
        *(str(p.relative_to(ws)) for p in ws.glob("*/*/.turbo")),
    ):
        shutil.rmtree(ws / rel, ignore_errors=True)


def package_manager_path(checkout: Path, work: Path) -> str:
    """A PATH whose first entry holds the package manager the checkout's `packageManager` names
    (installed once from npm): the repositories' scripts call `pnpm` themselves, and turbo
    refuses to run without the binary."""
    declared = json.loads((checkout / "package.json").read_text()).get("packageManager", "")
    name, _, version = declared.partition("@")
    if not version or name not in ("pnpm", "yarn"):
        return os.environ["PATH"]
    version = version.split("+")[0]
    prefix = work / f"{name}-{version}"
    if not (prefix / "node_modules" / ".bin" / name).exists():
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(prefix),
                f"{name}@{version}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return f"{prefix / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}"


def timed(
    tool: Tool, ws: Path, tasks: list[str], concurrency: int
) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds of the children, exit code and stderr of one run."""
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run(
        [*tool.argv(tasks, concurrency), *summarize_flag(tool)],
        cwd=ws,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    after = os.times()
    return (
        wall,
        (after.children_user - before.children_user)
        + (after.children_system - before.children_system),
        proc.returncode,
        proc.stderr,
    )


def summarize_flag(tool: Tool) -> list[str]:
    return ["--summarize"] if tool.flavour == "turbo" else ["--summarize=.vx/last-summary.json"]


def cached_tasks(tool: Tool, ws: Path) -> dict[str, bool]:
    """Each task of the last run (package#task) and whether the tool served it from its cache."""
    if tool.flavour == "turbo":
        runs = sorted((ws / ".turbo" / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
        data = json.loads(runs[-1].read_text())
        return {
            t["taskId"]: t["cache"]["status"] == "HIT"
            for t in data["tasks"]
            if t.get("command") not in (None, "<NONEXISTENT>")
        }
    data = json.loads((ws / ".vx" / "last-summary.json").read_text())
    return {
        t["id"]: t.get("cache") in ("local", "remote", "up-to-date")
        for t in data["tasks"]
        if not t.get("group")
    }


def edit(ws: Path, rel: str) -> None:
    path = ws / rel
    path.write_text(path.read_text() + "\n// edited by bench/realworld.py\n")


def restore_edit(ws: Path, rel: str) -> None:
    subprocess.run(["git", "checkout", "--", rel], cwd=ws, check=True)


def measure(
    tools: dict[str, Tool],
    wss: dict[str, Path],
    tasks: list[str],
    edited: str | None,
    runs: int,
    concurrency: int,
) -> tuple[dict, dict]:
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    warm_sets: dict[str, dict[str, bool]] = {}
    for _ in range(runs):
        for scenario in SCENARIOS:
            if scenario == "edit" and not edited:
                continue
            for name, tool in tools.items():
                ws = wss[name]
                if scenario == "cold":
                    clean(tool, ws, caches=True)
                elif scenario == "restore":
                    clean(tool, ws, caches=False)
                elif scenario == "edit":
                    edit(ws, edited)
                wall, cpu, code, err = timed(tool, ws, tasks, concurrency)
                if scenario == "edit":
                    restore_edit(ws, edited)
                    timed(
                        tool, ws, tasks, concurrency
                    )  # back to the committed state: the next round starts warm
                if code != 0:
                    print(f"{name} {scenario}: exit {code}\n{err[-2000:]}", file=sys.stderr)
                times.setdefault((scenario, name), []).append((wall, cpu))
                if scenario == "warm":
                    warm_sets[name] = cached_tasks(tool, ws)
    return times, warm_sets


def report(times: dict, warm_sets: dict, tasks: list[str], versions: dict[str, str]) -> list[str]:
    lines = [
        f"tasks: {' '.join(tasks)} · " + " · ".join(f"{k} {v}" for k, v in versions.items()),
        "",
        "| scenario | vx wall (s) | turbo wall (s) | ratio | vx CPU (s) | turbo CPU (s) |",
        "|---|---|---|---|---|---|",
    ]
    for scenario in SCENARIOS:
        if (scenario, "vx") not in times:
            continue
        vx, turbo = times[(scenario, "vx")], times[(scenario, "turbo")]
        vw, tw = statistics.median(w for w, _ in vx), statistics.median(w for w, _ in turbo)
        vc, tc = statistics.median(c for _, c in vx), statistics.median(c for _, c in turbo)
        lines.append(f"| {scenario} | {vw:.2f} | {tw:.2f} | {vw / tw:.2f} | {vc:.1f} | {tc:.1f} |")
    vx_hits = {t for t, hit in warm_sets.get("vx", {}).items() if hit}
    turbo_hits = {t for t, hit in warm_sets.get("turbo", {}).items() if hit}
    lines += [
        "",
        f"warm run: vx served {len(vx_hits)} of {len(warm_sets.get('vx', {}))} tasks from its cache, "
        f"turbo {len(turbo_hits)} of {len(warm_sets.get('turbo', {}))}",
    ]
    for t in sorted(turbo_hits - vx_hits):
        lines.append(f"  cached by turbo, not by vx: {t}")
    for t in sorted(vx_hits - turbo_hits):
        lines.append(f"  cached by vx, not by turbo: {t}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="an installed checkout of a Turborepo repository")
    ap.add_argument("--tasks", nargs="+", default=["build"])
    ap.add_argument(
        "--edit", help="a tracked file (checkout-relative) to change for the edit scenario"
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument(
        "--remove",
        nargs="+",
        default=["packages/*/dist"],
        help="globs (checkout-relative) the restore scenario deletes (default: packages/*/dist)",
    )
    ap.add_argument(
        "--check", help="a shell command run in vx's copy after a cold build; its exit code counts"
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/vx-realworld"))
    ap.add_argument("--fresh", action="store_true", help="copy the checkout again")
    ap.add_argument(
        "--vx", help="the vx command (default: installed from this checkout into a venv)"
    )
    args = ap.parse_args(argv)
    checkout = args.checkout.resolve()
    if not (checkout / "turbo.json").exists() or not (checkout / "node_modules").is_dir():
        ap.error(
            f"{checkout}: expected an installed Turborepo checkout (turbo.json and node_modules)"
        )
    args.work.mkdir(parents=True, exist_ok=True)
    REMOVE[:] = args.remove
    ENV.update(TOOL_ENV, PATH=package_manager_path(checkout, args.work))
    wss = copies(checkout, args.work, args.fresh)
    # vx's store inside its copy, where cold's clean removes it (the default is one store per
    # repository under ~/.vx, which would serve the cold run from the last one's entries)
    ENV["VX_CACHE_DIR"] = str(wss["vx"] / ".vx" / "cache")
    tools = {"vx": vx_tool(args.vx, args.work), "turbo": turbo_tool(wss["turbo"])}
    versions = {name: version_of(tool, wss[name]) for name, tool in tools.items()}
    times, warm_sets = measure(tools, wss, args.tasks, args.edit, args.runs, args.concurrency)
    print("\n".join(report(times, warm_sets, args.tasks, versions)))
    if args.check:
        clean(tools["vx"], wss["vx"], caches=True)
        subprocess.run(
            tools["vx"].argv(args.tasks, args.concurrency),
            cwd=wss["vx"],
            env=ENV,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        code = subprocess.run(args.check, shell=True, cwd=wss["vx"], env=ENV).returncode
        print(f"check `{args.check}` in vx's copy after a cold vx build: exit {code}")
        return 1 if code else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
