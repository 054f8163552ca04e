"""The two runners under test and the workspaces they run in.

Each tool gets its own copy of one generated workspace (byte-identical trees, same commit):
turbo rewrites every cached output on a hit (new inode and mtime), which would turn vx's
"nothing changed" run into a restore if the two shared a tree. Runs still alternate, so the
machine's noise falls on both alike.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
GENERATOR = BENCH / "gen_monorepo.py"
FILES_PER_PACKAGE, DEPS, SEED = 20, 4, 1

TOOL_ENV = {  # no telemetry, update checks or colour; CI unset (it changes defaults)
    "TURBO_TELEMETRY_DISABLED": "1",
    "TURBO_NO_UPDATE_NOTIFIER": "1",
    "DO_NOT_TRACK": "1",
    "NO_COLOR": "1",
    "NX_NO_CLOUD": "true",
    "NX_TUI": "false",
}
NX_VERSION = "21.6.4"  # the Nx the scenario tests pin (tests/scenarios/support/npm_packages.py)


@dataclass(frozen=True)
class Tool:
    name: str
    exe: tuple[str, ...]  # the command up to (not including) `run`
    flavour: str  # "vx" | "turbo" | "nx"
    daemon: bool = False  # nx: NX_DAEMON=true (the daemon keeps the project graph between runs)
    # vx's HOME: the repository's shared store lives under it (~/.vx/<id>), so a cold start
    # empties it and the bench never reads or fills the user's own
    home: Path | None = None

    def argv(self, tasks: Sequence[str], concurrency: int) -> list[str]:
        if self.flavour == "nx":
            return [*self.exe, "run-many", "-t", *tasks, f"--parallel={concurrency}"]
        if self.flavour == "turbo":
            return [*self.exe, "run", *tasks, f"--concurrency={concurrency}"]
        return [*self.exe, "run", *tasks, "--concurrency", str(concurrency)]

    def clean(self, ws: Path) -> None:
        """Empty the tool's cache and delete every output: a cold start."""
        caches = {
            "vx": [".vx"],
            "turbo": [".turbo", "node_modules/.cache/turbo"],
            "nx": [".nx"],
        }[self.flavour]
        if self.flavour == "nx":  # a daemon would keep the old graph and cache state
            subprocess.run([*self.exe, "daemon", "--stop"], cwd=ws, env=self.env(), check=False)
        for rel in caches:
            shutil.rmtree(ws / rel, ignore_errors=True)
        if self.home is not None:
            shutil.rmtree(self.home / ".vx", ignore_errors=True)
        for pkg in (ws / "packages").iterdir():
            shutil.rmtree(pkg / "dist", ignore_errors=True)
            if self.flavour == "turbo":
                shutil.rmtree(pkg / ".turbo", ignore_errors=True)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "VX_TIMING", "VX_CACHE_DIR")}
        env.update(TOOL_ENV)
        if self.home is not None:
            self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
            env["HOME"] = str(self.home)
        if self.flavour == "nx":
            env["NX_DAEMON"] = "true" if self.daemon else "false"
        return env


# ---------------------------------------------------------------- the tools


def turbo_tool(ws: Path) -> Tool:
    """The native turbo binary (as in the perf anchors), skipping the ~150 ms node shim of .bin/turbo."""
    native = sorted((ws / "node_modules" / "@turbo").glob("*/bin/turbo"))
    exe = native[0] if native else ws / "node_modules" / ".bin" / "turbo"
    return Tool("turbo", (str(exe),), "turbo")


def nx_tool(ws: Path, daemon: bool) -> Tool:
    """Nx from the workspace's node_modules, with its daemon on or off (NX_DAEMON)."""
    exe = ws / "node_modules" / ".bin" / "nx"
    return Tool("nx-daemon" if daemon else "nx", (str(exe),), "nx", daemon)


def stop_daemon(tool: Tool, ws: Path) -> None:
    """Stop the Nx daemon a run started in `ws` (it outlives the run)."""
    if tool.daemon:
        subprocess.run(
            [*tool.exe, "daemon", "--stop"],
            cwd=ws,
            env=tool.env(),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


_HELD: dict[Path, int] = {}  # work dirs this process holds, each by an flock kept until it exits


def hold(work: Path) -> None:
    """Take `work` for this process alone. Why: every size's vx keeps its shared store under
    WORK/vx-home, and a cold start empties that home (`Tool.clean`), so a second bench on the same
    directory would remove the store under this one's running builds (each download and save
    after it failed, before vx made a removed store again)."""
    work = work.resolve()
    if work in _HELD:
        return
    work.mkdir(parents=True, exist_ok=True)
    fd = os.open(work / ".bench-lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SystemExit(
            f"{work} is in use by another bench; give this one its own (--work or VX_BENCH_DIR)"
        ) from None
    _HELD[work] = fd


def vx_tool(spec: str | None, work: Path) -> Tool:
    """`--vx CMD` as given, else vx pip-installed (not editable) from this checkout into a venv.

    A plain install is what users get: compiled .pyc files and a clean site-packages. The
    development interpreter here has an editable install, a site hook that imports certifi
    at every start and PYTHONDONTWRITEBYTECODE=1; `--vx vx` measures that instead.
    """
    hold(work)
    home = work / "vx-home"
    if spec:
        return Tool("vx", tuple(spec.split()), "vx", home=home)
    venv = work / "venv"
    if not (venv / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "pip"), "install", "-q", str(REPO)])
    else:  # refresh vx itself: the numbers are for the checkout as it is now
        _run(
            [
                str(venv / "bin" / "pip"),
                "install",
                "-q",
                "--no-deps",
                "--force-reinstall",
                str(REPO),
            ]
        )
    return Tool("vx", (str(venv / "bin" / "vx"),), "vx", home=home)


DIRECT_NPM = """#!/bin/sh
# bench/run.py --fill direct: `npm run build|test|lint` as the generated package.json spells each
# script (node ../../scripts/<name>.js), without npm's own start-up; anything else to npm itself.
case "$1 $2 $#" in
  "run build 2"|"run test 2"|"run lint 2") exec node "../../scripts/$2.js" ;;
esac
exec {npm} "$@"
"""


def direct_npm(work: Path) -> Path:
    """A directory whose `npm` runs the generated packages' scripts directly (`DIRECT_NPM`), for
    filling turbo's cache at sizes where `npm run` per task would take an hour. turbo's task
    hashes do not cover the npm binary or PATH (bench/run.py checks them with --dry=json)."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not on PATH")
    where = work / "direct-npm"
    where.mkdir(parents=True, exist_ok=True)
    shim = where / "npm"
    shim.write_text(DIRECT_NPM.replace("{npm}", npm))
    shim.chmod(0o755)
    return where


def version_of(tool: Tool, ws: Path) -> str:
    out = subprocess.run(
        [*tool.exe, "--version"], cwd=ws, capture_output=True, text=True, env=tool.env()
    )
    lines = out.stdout.strip().splitlines()
    if tool.flavour == "nx":  # "Nx Version:" then "- Local: v21.6.4"
        local = [ln.split("Local:", 1)[1].strip() for ln in lines if "Local:" in ln]
        return f"nx {local[0]}" if local else "?"
    return lines[0] if lines else "?"


# ---------------------------------------------------------------- workspaces


def workspaces(
    work: Path, packages: int, fresh: bool = False, against: str = "turbo"
) -> dict[str, Path]:
    """Generate (or reuse) the size's workspace and its per-tool copies: {"vx": path, "turbo": path}
    (against Nx: {"vx": path, "nx": path} under WORK/nx, nx.json beside the vx configs)."""
    base = work / f"m{packages}" if against == "turbo" else work / "nx" / f"m{packages}"
    copies = {name: base.with_name(f"{base.name}-{name}") for name in ("vx", against)}
    if not fresh and all(_matches(p, packages) for p in copies.values()):
        return copies
    for path in (base, *copies.values()):
        shutil.rmtree(path, ignore_errors=True)
    _run(
        [
            sys.executable,
            str(GENERATOR),
            str(base),
            "-n",
            str(packages),
            "-f",
            str(FILES_PER_PACKAGE),
            "-d",
            str(DEPS),
            "-s",
            str(SEED),
            "--tools",
            f"vx,{against}",
            *(["--tool-version", f"nx={NX_VERSION}"] if against == "nx" else []),
            "--install",
        ],
        # No auto gc after the generator's commit of thousands of files: it would pack objects in
        # the background while `cp` copies them (a 1,000-package copy failed so).
        env={
            **os.environ,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "gc.auto",
            "GIT_CONFIG_VALUE_0": "0",
        },
    )
    for path in copies.values():
        _run(["cp", "-a", str(base), str(path)])
    shutil.rmtree(base)
    return copies


def meta(ws: Path) -> dict:
    return json.loads((ws / "bench-meta.json").read_text())


def _matches(ws: Path, packages: int) -> bool:
    try:
        args = meta(ws)["args"]
    except (OSError, ValueError, KeyError):
        return False
    want = {
        "packages": packages,
        "files_per_package": FILES_PER_PACKAGE,
        "deps": DEPS,
        "seed": SEED,
    }
    return all(args.get(k) == v for k, v in want.items()) and (ws / "node_modules").is_dir()


def _run(argv: Sequence[str], env: dict[str, str] | None = None) -> None:
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    subprocess.run(list(argv), check=True, stdout=subprocess.DEVNULL, env=env)
