#!/usr/bin/env python3
"""Start-up of the standalone vx (dev/release) against the same code run by Python.

The warm run of a generated workspace (gen_monorepo.py, build only: `vx run build` twice, then
each timed run is the third or later, a replay) and `vx --version`, alternating the two so that
the machine's load falls on both alike. Python runs the checkout's src/vx with the real
interpreter (not a version manager's shim, which would add its own start-up to Python's side).

usage: bench/standalone.py STANDALONE_VX [-n PACKAGES] [-f FILES] [--runs N] [--launcher BIN] [--venv BIN]
                           [--before STANDALONE_VX]
  e.g. dev/release /tmp/rel && bench/standalone.py /tmp/rel/standalone/vx/vx
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Spread, load_average, measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("standalone", type=Path)
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("-f", type=int, default=5)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--launcher",
        type=Path,
        help="also time the npm launcher: node_modules/.bin/vx of an install of dev/release's tarballs",
    )
    ap.add_argument(
        "--venv",
        type=Path,
        help="also time a pip-installed vx: a venv's bin/vx (pip install the wheel dev/release wrote)",
    )
    ap.add_argument(
        "--before",
        type=Path,
        help="also time another standalone build (an earlier dev/release's), in the same rounds",
    )
    args = ap.parse_args(argv)
    python = os.path.realpath(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VX_")}
    env["VX_SHARED_STORE"] = "0"  # the workspace keeps its cache: nothing left under ~/.vx
    tools = {
        "standalone": [str(args.standalone.resolve())],
        "python -m vx": [python, "-m", "vx"],
    }
    penv = {**env, "PYTHONPATH": str(ROOT / "src")}
    envs = {"standalone": env, "python -m vx": penv}
    if args.before:
        tools["standalone, before"] = [str(args.before.resolve())]
        envs["standalone, before"] = env
    if args.venv:
        tools["pip, a venv"] = [str(args.venv.absolute())]
        envs["pip, a venv"] = env
    if args.launcher:
        tools["npm launcher"] = [str(args.launcher.absolute())]
        envs["npm launcher"] = env
    with tempfile.TemporaryDirectory(prefix="vx-standalone-bench-") as tmp:
        ws = Path(tmp) / "ws"
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "gen_monorepo.py"), str(ws), "-n", str(args.n),
             "-f", str(args.f), "--tools", "vx"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        for name, cmd in tools.items():  # cold, then warm: every later run replays
            for _ in range(2):
                s = measure([*cmd, "run", "build"], ws, envs[name])
                assert s.exit_code == 0, (name, s)
        print(f"# {args.n} packages x {args.f} files, {args.runs} runs each, alternating")
        print(f"# load before: {load_average()}")
        for label, words in (
            ("warm `vx run build`", ["run", "build"]),
            ("`vx --version`", ["--version"]),
        ):
            wall: dict[str, list[float]] = {n: [] for n in tools}
            cpu: dict[str, list[float]] = {n: [] for n in tools}
            for _ in range(args.runs):
                for name, cmd in tools.items():
                    s = measure([*cmd, *words], ws, envs[name])
                    assert s.exit_code == 0, (name, words, s)
                    wall[name].append(s.wall_s * 1000)
                    cpu[name].append(s.cpu_s * 1000)
            for name in tools:
                w, c = Spread.of(wall[name]), Spread.of(cpu[name])
                print(
                    f"{label:<22} {name:<18} wall ms min {w.low:.0f} median {w.median:.0f} "
                    f"max {w.high:.0f}; cpu ms min {c.low:.0f} median {c.median:.0f} max {c.high:.0f}"
                )
        print(f"# load after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
