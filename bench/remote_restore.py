#!/usr/bin/env python3
"""Remote restore, the CI case: vx against turbo on real remote cache servers, over a link.

    python bench/remote_restore.py --sizes 100,1000
    python bench/remote_restore.py --sizes 100,1000 --links 0,20:100,80:100 --servers v8,reapi

For each size, the workspaces of bench/run.py (one copy per tool, `gen_monorepo.py`, turbo
installed) and one `turborepo-remote-cache` server on loopback (local storage; the pinned
version tests/scenarios/support/npm_packages.py installs). Each tool builds once from cold with the
server on, which uploads everything (vx with CI=1: it uploads only on CI by default; turbo
always uploads). Then every timed run is a fresh clone's first build: the tool's local cache
(vx: `.vx` and its shared store under HOME; turbo: `.turbo` and `node_modules/.cache/turbo`)
and every `dist/` deleted, `build` run with the server on, so every task is a remote hit that
downloads and restores its outputs. Runs alternate vx, turbo, turbo, vx, … after one warm-up
each; a run that did not hit for every task, or left a package unbuilt, stops the bench.
Prints a Markdown table (median, range) of wall and CPU seconds, and the ratio vx/turbo.

`--links` puts the servers behind a network link (`bench/link.py`, a TCP proxy of its own process
that delays each direction by half the RTT and paces it at the bandwidth): `RTT_MS:MBIT`, or `0`
for loopback as it is. Uploads always go over loopback; every timed restore goes over the link.
`--servers reapi` adds vx on a Bazel REAPI cache (BuildGrid, cache only, its default settings, in
the venv tests/scenarios/support/reapi_servers.py makes), restored from through the same link, its
ratio against turbo on `/v8` (turbo speaks no REAPI). `--baseline CMD` adds another vx (an older
build's venv) on the same servers, runs alternating with the others: before and after in one
series, at one load.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests" / "scenarios"))
sys.path.append(str(BENCH.parent / "src"))  # the test support asks vx itself (never the tools' env)

from measure import load_average  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402
from support.remote_servers import CANARY, TurboServer  # noqa: E402
from tools import Tool, turbo_tool, version_of, vx_tool, workspaces  # noqa: E402

TEAM = "bench"
_VX_CACHED = re.compile(r"(\d+) tasks? · (\d+) cached")
_TURBO_CACHED = re.compile(r"Cached:\s+(\d+) cached, (\d+) total")


class Link:
    """`bench/link.py` in front of one server: `url` is what a tool connects to."""

    def __init__(self, spec: str, host_port: str, scheme: str):
        self.spec, self.proc = spec, None
        if spec == "0":
            self.url = f"{scheme}://{host_port}"
            return
        rtt, mbit = spec.split(":")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "link.py"),
                "--to",
                host_port,
                "--rtt-ms",
                rtt,
                "--mbit",
                mbit,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()  # "port N" once it listens
        if not line.startswith("port "):
            raise SystemExit(f"bench/link.py did not start: {line!r}")
        self.url = f"{scheme}://127.0.0.1:{line.split()[1]}"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def describe(spec: str) -> str:
    if spec == "0":
        return "loopback"
    rtt, mbit = spec.split(":")
    return f"{rtt} ms RTT, {mbit} Mbit/s"


def remote_env(tool: Tool, server: str, url: str, upload: bool) -> dict[str, str]:
    """The tool's environment for `server` ("v8" or "reapi") at `url`."""
    env = tool.env()
    if server == "v8":
        env.update({"TURBO_API": url, "TURBO_TOKEN": CANARY, "TURBO_TEAM": TEAM})
    else:
        env["VX_REAPI_ENDPOINT"] = url
    if upload and tool.flavour == "vx":
        env["CI"] = "1"  # vx writes to a remote only on CI by default
    return env


def fresh_clone(tool: Tool, ws: Path) -> None:
    """What a CI job's clone holds: the tree and node_modules, no local cache, no outputs."""
    tool.clean(ws)


def run(tool: Tool, ws: Path, env: dict[str, str], concurrency: int, log: Path) -> tuple:
    """(wall s, cpu s, tasks, cached) of one `run build`; stops the bench on a failure."""
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            tool.argv(("build",), concurrency),
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tool.name} failed in {ws}; log in {log}")
    found = (_VX_CACHED if tool.flavour == "vx" else _TURBO_CACHED).findall(text)
    if not found:
        raise SystemExit(f"{tool.name}: no cache summary in {log}")
    a, b = (int(x) for x in found[-1])
    cached, tasks = (b, a) if tool.flavour == "vx" else (a, b)
    SCENARIOS["restore"].check(ws)  # every package has its dist/index.js
    return wall, usage.ru_utime + usage.ru_stime, tasks, cached


# who is timed: (name, tool flavour, server)
RUNNERS = {
    "v8": [("vx", "vx", "v8"), ("turbo", "turbo", "v8")],
    "reapi": [("vx reapi", "vx", "reapi")],
}


def bench_size(size: int, args, vx: Tool, servers: dict, logs: Path) -> list[dict]:
    wss = workspaces(args.work, size, fresh=args.fresh)
    tools = {"vx": vx, "turbo": turbo_tool(wss["turbo"])}
    runners = [r for s in servers for r in RUNNERS[s]]
    if args.baseline:  # the older vx restores the vx copy of the workspace, on every server
        tools["base"] = Tool("vx", tuple(args.baseline.split()), "vx", home=vx.home)
        wss = {**wss, "base": wss["vx"]}
        runners += [(f"{name} base", "base", server) for name, f, server in runners if f == "vx"]
    say(f"== m{size}: upload (load {load_average()})")
    for name, flavour, server in runners if not args.reuse_uploads else ():
        tool, ws = tools[flavour], wss[flavour]
        fresh_clone(tool, ws)
        env = remote_env(tool, server, servers[server][1], upload=True)
        log = logs / f"m{size}-{name.replace(' ', '-')}-upload.log"
        wall, _cpu, tasks, cached = run(tool, ws, env, args.concurrency, log)
        say(f"   {name} cold + upload: {wall:.1f} s, {tasks} tasks, {cached} cached")
    rows = []
    for spec in args.links.split(","):
        links = {s: Link(spec, host_port, scheme) for s, (host_port, _, scheme) in servers.items()}
        try:
            say(f"   link {describe(spec)}")
            samples = {name: [] for name, _, _ in runners}
            for i in range(args.runs + 1):  # the first round warms the machine's page cache
                order = runners if i % 2 == 0 else list(reversed(runners))
                for name, flavour, server in order:
                    tool, ws = tools[flavour], wss[flavour]
                    fresh_clone(tool, ws)
                    log = (
                        logs / f"m{size}-{name.replace(' ', '-')}-{spec.replace(':', '_')}-{i}.log"
                    )
                    env = remote_env(tool, server, links[server].url, False)
                    wall, cpu, tasks, cached = run(tool, ws, env, args.concurrency, log)
                    if cached != tasks:
                        raise SystemExit(
                            f"{name}: {cached} of {tasks} tasks were remote hits; see {log}"
                        )
                    if i > 0:
                        samples[name].append((wall, cpu))
                if i > 0:
                    say(
                        f"   run {i}: "
                        + ", ".join(f"{n} {s[-1][0]:.2f} s" for n, s in samples.items())
                    )
        finally:
            for link in links.values():
                link.stop()
        rows.append({"size": size, "link": spec, "tasks": tasks, "tools": samples})
    for flavour, tool in tools.items():  # leave the copies as bench/run.py expects them
        tool.clean(wss[flavour])
    for row in rows:
        row["load_after"] = load_average()
        row["versions"] = {n: version_of(t, wss[n]) for n, t in tools.items()}
    return rows


def table(rows: list[dict]) -> list[str]:
    names = list(rows[0]["tools"])
    others = [n for n in names if n != "turbo"]
    out = [
        "| packages | link | "
        + " | ".join(f"{n} wall (s)" for n in names)
        + " | "
        + " | ".join(f"{n} / turbo" for n in others)
        + " | "
        + " | ".join(f"{n} CPU (s)" for n in names)
        + " |",
        "|---|---|" + "---|" * (2 * len(names) + len(others)),
    ]
    for row in rows:
        s = row["tools"]
        med = {n: statistics.median(w for w, _ in s[n]) for n in names}
        rng = {n: (min(w for w, _ in s[n]), max(w for w, _ in s[n])) for n in names}
        cpu = {n: statistics.median(c for _, c in s[n]) for n in names}
        out.append(
            f"| {row['size']} | {describe(row['link'])} | "
            + " | ".join(f"{med[n]:.2f} ({rng[n][0]:.2f}–{rng[n][1]:.2f})" for n in names)
            + " | "
            + " | ".join(f"**{med[n] / med['turbo']:.2f}**" for n in others)
            + " | "
            + " | ".join(f"{cpu[n]:.1f}" for n in names)
            + " |"
        )
    return out


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def with_reapi(vx: Tool, args) -> None:
    """The bench venv's vx gets its `reapi` extra (grpcio, protobuf)."""
    if args.vx:
        return
    pip = args.work / "venv" / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", f"{BENCH.parent}[reapi]"], check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000", help="package counts, comma-separated")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per tool and size")
    ap.add_argument("--concurrency", type=int, default=os.cpu_count() or 2)
    ap.add_argument(
        "--links", default="0", help="RTT_MS:MBIT links, comma-separated; 0 is loopback as it is"
    )
    ap.add_argument(
        "--servers", default="v8", help="v8 (vx and turbo on /v8), reapi (vx on BuildGrid)"
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(os.environ.get("VX_BENCH_DIR", "/tmp/vx-bench")),
        help="where workspaces, the vx venv and logs live (shared with bench/run.py)",
    )
    ap.add_argument("--vx", help="vx command to time (default: pip install of this checkout)")
    ap.add_argument(
        "--baseline",
        help="another vx command (with grpcio for reapi) timed beside, alternating: before/after",
    )
    ap.add_argument("--fresh", action="store_true", help="regenerate the workspaces")
    ap.add_argument(
        "--reuse-uploads",
        action="store_true",
        help="skip the cold builds: the server's storage (WORK/remote-cache) already holds both"
        " tools' artifacts for this vx from an earlier run (v8 only: BuildGrid keeps them in memory)",
    )
    args = ap.parse_args(argv)
    args.work = args.work.resolve()
    wanted = args.servers.split(",")
    if "v8" not in wanted or not set(wanted) <= set(RUNNERS):
        ap.error("--servers: v8, optionally with reapi (turbo on /v8 is what ratios divide by)")
    if args.reuse_uploads and "reapi" in wanted:
        ap.error("--reuse-uploads: BuildGrid's storage is in memory; drop it with --servers reapi")
    logs = args.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    vx = vx_tool(args.vx, args.work)
    load = load_average()
    storage = args.work / "remote-cache"  # kept: --reuse-uploads restores from it again
    if not args.reuse_uploads:
        shutil.rmtree(storage, ignore_errors=True)
    turbo_server = TurboServer(storage, token=CANARY)
    grid = None
    servers = {"v8": (turbo_server.url.split("://", 1)[1], turbo_server.url, "http")}
    try:
        if "reapi" in wanted:
            from support.reapi_servers import BuildGrid

            with_reapi(vx, args)
            grid = BuildGrid(args.work / "buildgrid")
            host_port = grid.endpoint.split("://", 1)[1]
            servers["reapi"] = (host_port, grid.endpoint, "grpc")
        sizes = [int(s) for s in args.sizes.split(",")]
        rows = [row for size in sizes for row in bench_size(size, args, vx, servers, logs)]
    finally:
        turbo_server.kill()
        if grid is not None:
            grid.stop()
    versions = rows[0]["versions"]
    print(
        f"{time.strftime('%Y-%m-%d')} · {os.cpu_count()} CPUs · {versions['vx']} · "
        f"{versions['turbo']} (turbo) · "
        + (f"{versions['base']} (base) · " if "base" in versions else "")
        + "turborepo-remote-cache"
        + (" and BuildGrid (cache only, default settings)" if grid else "")
        + f" on loopback · concurrency {args.concurrency} · median of {args.runs}"
        f" · load {load} → {rows[-1]['load_after']}\n"
    )
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
