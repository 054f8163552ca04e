"""vx and the workspace's own Nx side by side on one installed Nx workspace (issue #28).

The workspace (`--ws DIR`) is a git checkout with its dependencies installed by its own package
manager and every change committed. It is copied twice under WORK (`cp -a`): `vx/` for vx and
`nx/` for Nx (its daemon off and on share that copy: the daemon keeps the project graph, the
cache is the same `.nx/cache`). Phases, each saved to WORK/state.json as it ends (a rerun
resumes; `--redo PHASE` runs one again):

- show     `nx show projects` and `nx show project P --json` against `vx show --format json`
           and `vx show project P --json`: projects, roots, tags, implicit dependencies and each
           target's executor/command, options, configurations, inputs, outputs, dependsOn, cache,
           continuous (Nx's `metadata` aside).
- graph    for each task set, `nx run-many -t … --graph=FILE` against `vx run … --dry=json`: the
           same tasks with the same dependencies (looking through vx's groups).
- inputs   the files Nx's hash plan names for each cached task (Nx's HashPlanInspector, with
           tests/scenarios/support/nx_hash_plan.js; before Nx 21, bench/nx_hash_files.js: Nx's
           hash details, each file set expanded as its hasher expands it) against the files
           vx's key folds.
- time     for each task set, alternating vx, nx (NX_DAEMON=false) and nx-daemon round by round:
           cold (caches, `.nx/workspace-data`, `.vx` and every gitignored file but the install
           gone), warm (nothing changed), restore (every output Nx's task graph names deleted).
           Wall and CPU medians and ratios against Nx. The cold builds' outputs are compared byte
           for byte (files that differ between two cold builds of one tool are counted as
           nondeterministic and left out), each tool's restore against its cold build, and the
           test counts of the cold logs. `--order` picks the tools and their order in a round,
           `--alternate` reverses it every other round (each tool first in turn: a cold series
           on a busy machine); each run keeps its 1-minute load, and vx's wall over each Nx's is
           given round by round. `--trace`: each cold run's task spans (vx's --profile and
           VX_TIMING, Nx's NX_PROFILE) beside its log.
- warm     (asked for by name) warm rounds alone on the copies as they are: each tool run twice,
           then interleaved warm rounds (`--rounds warm=N`).
- matrix   from a warm state of the widest task set: each edit (source, test file, the configs
           the plugins read, nx.json, the lockfile, an untracked and an ignored file, …) in both
           copies, both tools run, each task's hit or miss is compared (Nx's: its `[local cache]`
           / `[existing outputs match the cache…]` marks, vx's: `--summarize`), the edit is undone
           and both run again (all hits expected). A hit under vx where Nx misses is a wrong hit.

    python bench/nx_side.py --ws /tmp/nxside/ws --work /tmp/nxside/work
    python bench/nx_side.py --ws … --work … --phases show,graph --redo show
    python bench/nx_side.py --work /tmp/nxside/work --summary
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from corpus import diff_manifests, noise, test_counts  # noqa: E402
from measure import logged_run  # noqa: E402
from tools import TOOL_ENV  # noqa: E402

PHASES = ("show", "graph", "inputs", "time", "matrix", "warm")
HASH_PLAN = REPO / "tests" / "scenarios" / "support" / "nx_hash_plan.js"
NO_DOCKER = REPO / "bench" / "nx_no_docker.cjs"  # Nx 18-19's daemon, inside a container too
HASH_FILES = REPO / "bench" / "nx_hash_files.js"  # the same from Nx 17-20's hash details
TARGET_FIELDS = (
    "executor",
    "command",
    "options",
    "configurations",
    "defaultConfiguration",
    "dependsOn",
    "inputs",
    "outputs",
    "cache",
    "continuous",
    "parallelism",
)
SKIP_DIRS = {"node_modules", ".git", ".nx", ".vx"}
# Nx folds them into every hash; vx keys what they mean
NX_EVERYWHERE = {".gitignore", ".nxignore", "nx.json"}
MARK = "vx-nx-side edit"
NX_TASK = re.compile(r"^>\s+nx run (\S+?)(?:\s+(\[[^\]]*\]))?\s*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def med(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


class Side:
    def __init__(
        self, src: Path, work: Path, vx: list[str], concurrency: int, exclude: tuple[str, ...] = ()
    ):
        self.src = src
        self.exclude = exclude  # projects left out of every run, both tools (`--exclude`)
        self.work = work
        self.ws = {"vx": work / "vx", "nx": work / "nx"}
        self.vx = vx
        self.concurrency = concurrency
        self.trace = False  # cold runs: each tool's Chrome trace beside its log (`--trace`)
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.seq = len(list(self.logs.iterdir()))

    # ------------------------------------------------------------ the copies

    def prepare(self, fresh: bool) -> None:
        for name, ws in self.ws.items():
            if fresh and ws.exists():
                self.stop_daemon()
                shutil.rmtree(ws)
            if not ws.exists():
                log(f"copying {self.src} to {ws}")
                subprocess.run(["cp", "-a", str(self.src), str(ws)], check=True)
                self.clean(name)

    def env(self, tool: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("CI", "VX_TIMING", "VX_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")
            and (not k.startswith("NX_") or k == "NX_NATIVE_FILE_CACHE_DIRECTORY")
        }
        env.update(TOOL_ENV)
        env["NX_DAEMON"] = "true" if tool == "nx-daemon" else "false"
        if tool == "nx-daemon" and os.path.exists("/.dockerenv"):  # bench/nx_no_docker.cjs
            env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --require {NO_DOCKER}".strip()
        if tool == "vx":
            env["VX_CACHE_DIR"] = str(self.ws["vx"] / ".vx" / "cache")
            home = self.work / "vx-home"
            home.mkdir(exist_ok=True)
            env["HOME"] = str(home)
            env["PYTHONPATH"] = str(REPO / "src")
        env.update(extra or {})
        return env

    def copy(self, tool: str) -> Path:
        return self.ws["vx" if tool == "vx" else "nx"]

    def nx_argv(self, *args: str) -> list[str]:
        return ["node", str(self.ws["nx"] / "node_modules" / "nx" / "bin" / "nx.js"), *args]

    def call(self, tool: str, argv: list[str], check: bool = True) -> str:
        proc = subprocess.run(
            argv,
            cwd=self.copy(tool),
            env=self.env(tool),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        return proc.stdout

    def stop_daemon(self) -> None:
        if (self.ws["nx"] / "node_modules").exists():
            subprocess.run(
                self.nx_argv("daemon", "--stop"),
                cwd=self.ws["nx"],
                env=self.env("nx-daemon"),
                capture_output=True,
                check=False,
            )

    def clean(self, name: str) -> None:
        """Cold: the tool's cache and every gitignored file but the install gone."""
        ws = self.ws[name]
        if name == "nx":
            self.stop_daemon()
        listed = subprocess.run(
            ["git", "ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory"],
            cwd=ws,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\0")
        for rel in listed:
            if not rel or "node_modules" in rel.split("/"):
                continue
            path = ws / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for rel in (".nx", ".vx"):
            shutil.rmtree(ws / rel, ignore_errors=True)
        # a repository may track files under .nx (nx-console: .nx/workflows/agents.yaml)
        subprocess.run(["git", "checkout", "--", ".nx"], cwd=ws, capture_output=True, check=False)
        if name == "vx":
            shutil.rmtree(self.work / "vx-home" / ".vx", ignore_errors=True)

    def remove_outputs(self, name: str, outputs: list[str]) -> int:
        """Restore: delete what the cached tasks' outputs name (Nx's resolved paths or globs)."""
        ws = self.ws[name]
        gone = 0
        for out in outputs:
            matches = list(ws.glob(out)) if any(c in out for c in "*?[{") else [ws / out]
            for path in matches:
                if path.is_dir() and not path.is_symlink():
                    gone += sum(1 for _ in walk_files(path))
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
                    gone += 1
        return gone

    def manifest(self, name: str) -> dict[str, str]:
        """Every file git does not track, with its content's digest (the install and the tools'
        caches aside, the copy's own path replaced)."""
        import hashlib

        ws = self.ws[name]
        tracked = set(
            subprocess.run(
                ["git", "ls-files", "-z"], cwd=ws, capture_output=True, text=True, check=True
            ).stdout.split("\0")
        )
        root = str(ws).encode()
        out = {}
        for path in walk_files(ws):
            rel = path.relative_to(ws).as_posix()
            if rel in tracked or rel.endswith(".log") or "/.vite/" in f"/{rel}":
                continue
            try:
                data = path.read_bytes() if not path.is_symlink() else os.readlink(path).encode()
            except OSError:
                continue
            out[rel] = hashlib.sha1(data.replace(root, b"<ROOT>")).hexdigest()
        return out

    # ------------------------------------------------------------ one run

    def run(
        self, tool: str, tasks: list[str], label: str, summarize: bool = True
    ) -> dict[str, Any]:
        """One run. `summarize=False` (warm and restore): vx without `--summarize`, which a
        receipt never replays, so the run is timed as a user's `vx run-many` is; its hits are
        then read from the footer."""
        ws = self.copy(tool)
        if tool == "vx":
            (ws / ".vx" / "last-summary.json").unlink(missing_ok=True)
            argv = [
                *self.vx,
                "run-many",  # as `nx run-many`: every project's, the root project's too
                "-t",
                *tasks,
                "--concurrency",
                str(self.concurrency),
                *(["--summarize=.vx/last-summary.json"] if summarize else []),
                *(["--exclude", ",".join(self.exclude)] if self.exclude else []),
                # cold: every task's log, for the test counts. Warm and restore run as a user's
                # does: `--output-logs full` prints each hit's log, which no receipt replays
                *(["--output-logs", "full"] if summarize else []),
            ]
        else:
            argv = self.nx_argv(
                "run-many",
                "-t",
                *tasks,
                f"--parallel={self.concurrency}",
                "--outputStyle=static",
                *([f"--exclude={','.join(self.exclude)}"] if self.exclude else []),
            )
        self.seq += 1
        path = self.logs / f"{self.seq:04d}-{label}-{tool}.log"
        # warm and restore: vx's stage table (VX_TIMING=1) on every one, so each run says whether
        # it replayed its receipt and where its time went
        extra = {"VX_TIMING": "1"} if tool == "vx" and not summarize else None
        if self.trace and summarize:  # where a cold run's time went: each task's span
            trace = str(path.with_suffix(".trace.json"))
            if tool == "vx":
                argv.append(f"--profile={trace}")
                extra = {"VX_TIMING": "1"}
            else:  # Nx joins it to its working directory
                extra = {"NX_PROFILE": os.path.relpath(trace, ws)}
        proc, wall, cpu = logged_run(argv, ws, self.env(tool, extra), path)
        if tool != "vx":
            cache = nx_cached(proc.stdout)
        else:
            cache = vx_cached(ws) if summarize else vx_footer_cached(proc.stdout)
        return {
            "wall": round(wall, 3),
            "cpu": round(cpu, 3),
            "code": proc.returncode,
            "cache": cache,
            "log": str(path),
            "out": proc.stdout,
            "stages": vx_stages(proc.stdout) if extra and tool == "vx" else None,
        }


def walk_files(base: Path):
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for f in filenames:
            yield Path(dirpath) / f


def root_name(ws: Path) -> str:
    """The Nx name of the workspace's root project (vx calls it `//`): its project.json `name`,
    else package.json's."""
    for name in ("project.json", "package.json"):
        try:
            found = json.loads((ws / name).read_text()).get("name")
        except (OSError, ValueError):
            continue
        if isinstance(found, str):
            return found
    return "//"


def nx_id(ws: Path, tid: str) -> str:
    """A vx task id (`//:build`, `app:build`) as Nx names the task."""
    return root_name(ws) + tid[2:] if tid.startswith("//:") else tid


def vx_cached(ws: Path) -> dict[str, str]:
    try:
        data = json.loads((ws / ".vx" / "last-summary.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for t in data.get("tasks", []):
        if t.get("group"):
            continue
        c = t.get("cache")
        out[nx_id(ws, t["id"].replace("#", ":"))] = (
            "hit"
            if c in ("local", "remote", "up-to-date")
            else "none"
            if c == "no-cache"
            else "miss"
        )
    return out


def vx_footer_cached(out: str) -> dict[str, str]:
    """A run without `--summarize`: its footer (`14 tasks · 12 cached …`) gives the count of
    misses only, named as one entry."""
    m = re.search(r"(\d+) tasks? · (\d+) cached", ANSI.sub("", out))  # `1 task · …` too
    if m is None:
        return {"(no footer)": "miss"}
    missed = int(m.group(1)) - int(m.group(2))
    return {f"({missed} of {m.group(1)} by the footer)": "miss"} if missed else {}


def vx_stages(out: str) -> dict[str, float]:
    """The last `vx timing (ms)` table of a run's output; a replayed run's has `receipt check`."""
    rows: dict[str, float] | None = None
    for line in ANSI.sub("", out).splitlines():
        if line.startswith("vx timing (ms)"):
            rows = {}
        m = None if rows is None else re.match(r"^  (\S.*?)\s+(-?[\d.]+)$", line)
        if m:
            rows[m.group(1)] = float(m.group(2))  # type: ignore[index]
    return rows or {}


def replayed(stages: dict[str, float] | None) -> bool | None:
    return None if stages is None else "receipt check" in stages


def nx_cached(out: str) -> dict[str, str]:
    """Each task of an `nx run-many --outputStyle=static` log: "hit" where Nx marked it read from
    its cache (`[local cache]`, `[existing outputs match the cache, left as is]`), else "miss"."""
    tasks = {}
    for line in ANSI.sub("", out).splitlines():
        m = NX_TASK.match(line.strip())
        if m:
            mark = m.group(2) or ""
            tasks[m.group(1)] = "hit" if "cache" in mark else "miss"
    return tasks


# ---------------------------------------------------------------- show, graph, inputs


def shown(doc: dict) -> dict:
    return {
        "root": doc.get("root"),
        "tags": sorted(doc.get("tags", [])),
        "implicitDependencies": sorted(doc.get("implicitDependencies", [])),
        "targets": {
            t: {k: body[k] for k in TARGET_FIELDS if k in body}
            for t, body in doc.get("targets", {}).items()
        },
    }


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k}: only vx: {json.dumps(b[k])[:200]}")
            elif k not in b:
                out.append(f"{path}.{k}: only nx: {json.dumps(a[k])[:200]}")
            else:
                out.extend(differences(a[k], b[k], f"{path}.{k}"))
        return out
    if a != b:
        return [f"{path}: nx {json.dumps(a)[:200]} / vx {json.dumps(b)[:200]}"]
    return []


def phase_show(s: Side) -> dict:
    nx_projects = sorted(json.loads(s.call("nx", s.nx_argv("show", "projects", "--json"))))
    vx_doc = json.loads(s.call("vx", [*s.vx, "show", "--format", "json"]))
    # vx calls the root project `//`; `vx show project NAME` takes its Nx name too
    # vx calls the workspace root `//` in every workspace; one without tasks is no Nx project
    vx_projects = sorted(
        root_name(s.ws["vx"]) if p["name"] == "//" else p["name"]
        for p in vx_doc["projects"]
        if p["name"] != "//" or p.get("tasks")
    )
    diffs: dict[str, list[str]] = {}
    targets = 0
    for name in sorted(set(nx_projects) & set(vx_projects)):
        theirs = shown(json.loads(s.call("nx", s.nx_argv("show", "project", name, "--json"))))
        ours = shown(json.loads(s.call("vx", [*s.vx, "show", "project", name, "--json"])))
        targets += len(theirs["targets"])
        d = differences(theirs, ours)
        if d:
            diffs[name] = d
    result = {
        "projects": len(nx_projects),
        "targets": targets,
        "only_nx": sorted(set(nx_projects) - set(vx_projects)),
        "only_vx": sorted(set(vx_projects) - set(nx_projects)),
        "differences": diffs,
    }
    result["same"] = not (result["only_nx"] or result["only_vx"] or diffs)
    return result


def nx_graph(s: Side, tasks: list[str]) -> tuple[dict[str, list[str]], dict]:
    out = s.work / "graph.json"
    s.call("nx", s.nx_argv("run-many", "-t", *tasks, f"--graph={out}"))
    doc = json.loads(out.read_text())
    shows: dict[str, dict] = {}
    plain = {}
    for tid, task in doc["tasks"]["tasks"].items():
        target = task["target"]
        plain[tid] = f"{target['project']}:{target['target']}"
        if target.get("configuration"):
            if target["project"] not in shows:
                shows[target["project"]] = json.loads(
                    s.call("nx", s.nx_argv("show", "project", target["project"], "--json"))
                )
            default = shows[target["project"]]["targets"][target["target"]].get(
                "defaultConfiguration"
            )
            if default != target["configuration"]:
                plain[tid] += f":{target['configuration']}"
    graph = {
        plain[tid]: sorted(plain[d] for d in deps)
        for tid, deps in doc["tasks"]["dependencies"].items()
    }
    doc["plain"] = plain
    return graph, doc


def vx_plan(s: Side, tasks: list[str]) -> dict[str, dict]:
    doc = json.loads(s.call("vx", [*s.vx, "run-many", "-t", *tasks, "--dry=json"]))
    return {t["id"]: t for t in doc["tasks"]}


def vx_graph(rows: dict[str, dict], ws: Path) -> dict[str, list[str]]:
    def through(tid: str) -> list[str]:
        return [
            d
            for dep in rows[tid]["deps"]
            for d in (through(dep) if rows[dep].get("implicit") else [dep])
        ]

    return {
        nx_id(ws, tid.replace("#", ":")): sorted(
            {nx_id(ws, d.replace("#", ":")) for d in through(tid)}
        )
        for tid, row in rows.items()
        if not row.get("implicit")
    }


def phase_graph(s: Side, sets: list[list[str]]) -> dict:
    result = {}
    for tasks in sets:
        theirs, _ = nx_graph(s, tasks)
        ours = vx_graph(vx_plan(s, tasks), s.ws["vx"])
        diffs = differences(theirs, ours)
        result[" ".join(tasks)] = {
            "tasks": len(theirs),
            "edges": sum(len(v) for v in theirs.values()),
            "differences": diffs,
            "same": not diffs,
        }
    return result


def phase_inputs(s: Side, tasks: list[str]) -> dict:
    inspector = s.ws["nx"] / "node_modules" / "nx" / "src" / "hasher" / "hash-plan-inspector.js"
    # Nx 17-20 have no HashPlanInspector: their own hash details, each file set expanded to its
    # files as their hasher expands it, say the same
    plan_js = HASH_PLAN if inspector.exists() else HASH_FILES
    _, doc = nx_graph(s, tasks)
    proc = subprocess.run(
        ["node", str(plan_js), *tasks],
        cwd=s.ws["nx"],
        env=s.env("nx"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"hash plan: {proc.stderr[-2000:]}")
    plan = json.loads(proc.stdout)
    rows = vx_plan(s, tasks)

    def files(tid: str) -> set[str]:
        row = rows[tid]
        return set(row["inputs"] or ()).union(
            *(files(d) for d in row["deps"] if rows[d].get("implicit"))
        )

    diffs: dict[str, dict[str, Any]] = {}
    others: dict[str, list[str]] = {}
    groups: list[str] = []
    for tid, entries in plan.items():
        name = doc["plain"].get(tid, tid)
        if not doc["tasks"]["tasks"].get(tid, {}).get("cache"):
            continue
        nx_files = {e[5:] for e in entries if e.startswith("file:")} - NX_EVERYWHERE
        others[name] = sorted(e for e in entries if not e.startswith("file:"))
        vid = name.replace(":", "#")
        project, _, target = vid.partition("#")
        if vid not in rows and project == root_name(s.ws["vx"]):
            vid = f"//#{target}"
        if vid not in rows:
            diffs[name] = {"missing in vx": True}
            continue
        if rows[vid].get("predicted") == "group":  # `nx:noop`: runs nothing, restores nothing
            groups.append(name)
            continue
        ours = files(vid) - NX_EVERYWHERE  # a root project's own files hold them under vx
        if ours != nx_files:
            diffs[name] = {
                "only_nx": sorted(nx_files - ours)[:20],
                "only_vx": sorted(ours - nx_files)[:20],
            }
    return {
        "tasks": len(others),
        "differences": diffs,
        "same": not diffs,
        "nx_other": others,
        "from": plan_js.name,
        "groups": sorted(groups),
    }


# ---------------------------------------------------------------- time

TOOLS = ("vx", "nx", "nx-daemon")


def round_order(order: tuple[str, ...], i: int, alternate: bool) -> tuple[str, ...]:
    """Round i's tools: `order`, reversed every other round with `alternate`, so that each tool
    runs before and after each other in turn (a load that rises or falls through a round then
    favours none of them)."""
    return order[::-1] if alternate and i % 2 else order


def timed(s: Side, tool: str, tasks: list[str], label: str, summarize: bool = True) -> dict:
    """One run with the 1-minute load as it started (os.getloadavg: `uptime`'s first number)."""
    load = round(os.getloadavg()[0], 2)
    r = s.run(tool, tasks, label, summarize=summarize)
    r["load"] = load
    return r


def pair_stats(samples: dict[str, list[dict]]) -> dict[str, Any]:
    """Medians per tool, and vx's wall over each Nx's round by round (the paired ratios: both
    runs of a round under about the same load) with their median."""
    out: dict[str, Any] = {
        t: {
            "wall": med([x["wall"] for x in samples[t]]),
            "cpu": med([x["cpu"] for x in samples[t]]),
            "walls": [x["wall"] for x in samples[t]],
            "cpus": [x["cpu"] for x in samples[t]],
            "loads": [x["load"] for x in samples[t]],
        }
        for t in TOOLS
    }
    for t in ("nx", "nx-daemon"):
        v, n = out["vx"]["wall"], out[t]["wall"]
        out[f"ratio_{t}"] = round(v / n, 3) if v and n else None
        pairs = [round(a["wall"] / b["wall"], 3) for a, b in zip(samples["vx"], samples[t])]
        out[f"pairs_{t}"] = pairs
        out[f"pair_median_{t}"] = med(pairs)
    return out


def phase_time(
    s: Side,
    tasks: list[str],
    rounds: dict[str, int],
    order: tuple[str, ...] = TOOLS,
    alternate: bool = False,
) -> dict:
    forget_daemon(s)
    _, doc = nx_graph(s, tasks)
    outputs = sorted(
        {o for t in doc["tasks"]["tasks"].values() if t.get("cache") for o in t["outputs"]}
    )
    samples: dict[str, dict[str, list]] = {sc: {t: [] for t in TOOLS} for sc in rounds}
    runs: dict[str, list] = {t: [] for t in TOOLS}
    manifests: dict[str, list[dict]] = {t: [] for t in TOOLS}
    restore_diff: dict[str, list] = {t: [] for t in TOOLS}
    counts: dict[str, list] = {t: [] for t in TOOLS}
    label = "-".join(tasks)
    for i in range(rounds.get("cold", 0)):
        for tool in round_order(order, i, alternate):
            s.clean("vx" if tool == "vx" else "nx")
            r = timed(s, tool, tasks, f"cold{i}-{label}")
            samples["cold"][tool].append(r)
            runs[tool].append(
                {"scenario": "cold", "round": i, "code": r["code"], "log": r["log"]}
                | {k: r[k] for k in ("wall", "cpu", "load")}
            )
            if tool == "nx-daemon":  # now: the next cold clean of the Nx copy deletes its log
                runs[tool][-1]["daemon_ran"] = daemon_ran(s)
            manifests[tool].append(s.manifest("vx" if tool == "vx" else "nx"))
            counts[tool].append(test_counts(r["out"]))
            log(
                f"cold {label} {tool}: {r['wall']} s CPU {r['cpu']} s load {r['load']} exit {r['code']}"
            )
    if not manifests["nx"] and not manifests["nx-daemon"]:
        # cold=0: warm and restore from the copies as the last run left them
        manifests = {t: [s.manifest("vx" if t == "vx" else "nx")] for t in TOOLS}
    cold_nx = (manifests["nx"] or manifests["nx-daemon"])[0]
    for sc in ("warm", "restore"):
        for i in range(rounds.get(sc, 0)):
            for tool in round_order(order, i, alternate):
                timed_again(
                    s,
                    sc,
                    tool,
                    tasks,
                    f"{sc}{i}-{label}",
                    outputs,
                    manifests,
                    samples,
                    runs,
                    restore_diff,
                )
    noisy = noise(*manifests["vx"]) | noise(*manifests["nx"]) | noise(*manifests["nx-daemon"])
    return {
        "tasks": tasks,
        "order": list(order),
        "alternate": alternate,
        "stats": {sc: pair_stats(samples[sc]) for sc in rounds},
        "runs": runs,
        "outputs": diff_manifests(cold_nx, manifests["vx"][0], noisy),
        "noisy": sorted(noisy),
        "restore": {t: restore_diff[t] for t in TOOLS},
        "test_counts": counts,
        "daemon_ran": daemon_ran(s) or any(r.get("daemon_ran") for r in runs["nx-daemon"]),
    }


def timed_again(
    s: Side,
    sc: str,
    tool: str,
    tasks: list[str],
    label: str,
    outputs: list[str],
    manifests: dict[str, list[dict]],
    samples: dict[str, dict[str, list]],
    runs: dict[str, list],
    restore_diff: dict[str, list],
) -> None:
    """A warm run (nothing changed) or a restore run (every cached output deleted first)."""
    name = "vx" if tool == "vx" else "nx"
    gone = s.remove_outputs(name, outputs) if sc == "restore" else None
    r = timed(s, tool, tasks, label, summarize=False)
    samples[sc][tool].append(r)
    misses = sorted(k for k, v in r["cache"].items() if v == "miss")
    run = {
        "scenario": sc,
        "code": r["code"],
        "misses": misses,
        "replayed": replayed(r["stages"]),
        "stages": r["stages"],
        "load": r["load"],
    }
    if sc == "restore":
        run["removed"] = gone
        restore_diff[tool].append(
            diff_manifests(manifests[tool][0], s.manifest(name), noise(*manifests[tool]))
        )
    runs[tool].append(run)
    log(
        f"{sc} {' '.join(tasks)} {tool}: {r['wall']} s"
        + (f" removed {gone}" if sc == "restore" else "")
        + f" misses {misses} replayed {replayed(r['stages'])}"
    )


def phase_warm(s: Side, tasks: list[str], rounds: int) -> dict:
    """Warm rounds alone, on the copies as they are (no cold build first): each tool run twice,
    then `rounds` interleaved rounds of vx, nx and nx-daemon; each run's wall, CPU and misses."""
    forget_daemon(s)
    for _ in range(2):
        for tool in TOOLS:
            s.run(tool, tasks, "warm-up", summarize=False)
    runs: dict[str, list] = {t: [] for t in TOOLS}
    for i in range(rounds):
        for tool in TOOLS:
            r = s.run(tool, tasks, f"warm{i}", summarize=False)
            misses = sorted(k for k, v in r["cache"].items() if v == "miss")
            runs[tool].append({"wall": r["wall"], "cpu": r["cpu"], "misses": misses})
            log(f"warm {tool}: {r['wall']} s misses {misses}")
    stats: dict[str, Any] = {
        t: {"wall": med([r["wall"] for r in rs]), "cpu": med([r["cpu"] for r in rs])}
        for t, rs in runs.items()
    }
    for t in ("nx", "nx-daemon"):
        v, n = stats["vx"]["wall"], stats[t]["wall"]
        stats[f"ratio_{t}"] = round(v / n, 3) if v and n else None
    return {"tasks": tasks, "stats": stats, "runs": runs, "daemon_ran": daemon_ran(s)}


def forget_daemon(s: Side) -> None:
    """Stop Nx's daemon and drop its log: the log then says whether this phase's runs started it
    (`daemon_ran`)."""
    s.stop_daemon()
    for d in ("cache", "workspace-data"):
        (s.ws["nx"] / ".nx" / d / "d" / "daemon.log").unlink(missing_ok=True)


def daemon_ran(s: Side) -> bool:
    """Whether Nx's daemon served the nx-daemon runs: its log, which it writes from its start
    (`.nx/cache/d` before Nx 19, `.nx/workspace-data/d` since). Nx can leave it off whatever
    NX_DAEMON says (in a container before Nx 21: bench/nx_no_docker.cjs)."""
    nx = s.ws["nx"] / ".nx"
    return any((nx / d / "d" / "daemon.log").exists() for d in ("cache", "workspace-data"))


# ---------------------------------------------------------------- matrix


def text_edit(rel: str) -> Callable[[Path], None]:
    def apply(ws: Path) -> None:
        path = ws / rel
        nonce = time.time_ns()
        suffix = path.suffix
        if suffix in (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"):
            extra = f"\n// {MARK} {nonce}\n"
        elif suffix in (".yml", ".yaml"):
            extra = f"\n# {MARK} {nonce}\n"
        elif suffix == ".css":
            extra = f"\n/* {MARK} {nonce} */\n"
        elif suffix in (".md", ".html"):
            extra = f"\n<!-- {MARK} {nonce} -->\n"
        else:
            extra = "\n" + " " * (nonce % 997 + 1) + "\n"
        path.write_text(path.read_text() + extra)

    return apply


def json_edit(rel: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(ws: Path) -> None:
        path = ws / rel
        doc = json.loads(path.read_text())
        change(doc)
        path.write_text(json.dumps(doc, indent=2) + "\n")

    return apply


def new_file(rel: str, text: str) -> Callable[[Path], None]:
    def apply(ws: Path) -> None:
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + f"// {MARK} {time.time_ns()}\n")

    return apply


def lock_bump(package: str) -> Callable[[Path], None]:
    """pnpm-lock.yaml names the next patch version of one package, with another integrity
    (nothing reinstalled)."""

    def apply(ws: Path) -> None:
        path = ws / "pnpm-lock.yaml"
        text = path.read_text()
        m = re.search(rf"{re.escape(package)}@(\d+)\.(\d+)\.(\d+)", text)
        if not m:
            raise RuntimeError(f"{package} not in pnpm-lock.yaml")
        old = f"{m.group(1)}.{m.group(2)}.{m.group(3)}"
        new = f"{m.group(1)}.{m.group(2)}.{int(m.group(3)) + 1}"
        text = text.replace(f"{package}@{old}", f"{package}@{new}")
        text = re.sub(
            rf"('{re.escape(package)}':\n\s+specifier: \S+\n\s+version: ){re.escape(old)}",
            rf"\g<1>{new}",
            text,
        )
        text = text.replace(f"'{package}': {old}", f"'{package}': {new}")
        # Another version has another integrity, which is what Nx keys a package by.
        text = re.sub(
            rf"({re.escape(package)}@{re.escape(new)}'?:\n\s+resolution: \{{integrity: )([^}}\s]+)",
            lambda c: c.group(1) + other_integrity(c.group(2)),
            text,
        )
        path.write_text(text)

    return apply


def other_integrity(value: str) -> str:
    """An SRI string (`sha512-…==`) with its last base64 digit changed."""
    body = value.rstrip("=")
    last = "A" if body[-1] != "A" else "B"
    return body[:-1] + last + value[len(body) :]


FILES = {  # the create-nx-workspace shape bench/nx_side.py was first run on
    "source": "libs/util/src/lib/util.ts",
    "app": "apps/web/src/app/app.tsx",
    "test": "libs/ui/src/lib/ui.spec.tsx",
    "vite": "libs/ui/vite.config.ts",
    "eslint": "apps/web/eslint.config.mjs",
    "tsconfig": "libs/util/tsconfig.lib.json",
    "package": "libs/util/package.json",
    "readme": "libs/ui/README.md",
    "bump": "@swc/helpers",
}


def matrix_edits(ws: Path, files: dict[str, str]) -> list[tuple[str, str, Callable[[Path], None]]]:
    """The edits, on the files `--files` names (FILES by default) where the workspace has them."""
    edits: list[tuple[str, str, Callable[[Path], None]]] = []

    def has(rel: str | None) -> bool:
        return bool(rel) and (ws / str(rel)).exists()

    for label, key in (
        ("source", "source"),
        ("app source", "app"),
        ("test file", "test"),
        ("vite config (@nx/vite)", "vite"),
        ("jest config (@nx/jest)", "jest"),
        ("eslint config (@nx/eslint)", "eslint"),
    ):
        if has(files.get(key)):
            edits.append((label, files[key], text_edit(files[key])))
    for name in ("eslint.config.mjs", ".eslintrc.json"):
        if has(name):
            edits.append(("root eslint config", name, text_edit(name)))
    for label, key in (
        ("tsconfig.lib.json (@nx/js/typescript)", "tsconfig"),
        ("project package.json", "package"),
    ):
        if has(files.get(key)):
            edits.append((label, files[key], text_edit(files[key])))
    edits.append(("root package.json", "package.json", text_edit("package.json")))
    edits.append(("nx.json whitespace", "nx.json", text_edit("nx.json")))
    lock = next((n for n in ("pnpm-lock.yaml", "package-lock.json", "yarn.lock") if has(n)), None)
    if lock:
        edits.append(("lockfile whitespace/comment", lock, text_edit(lock)))
    if has(files.get("readme")):
        edits.append(("README", files["readme"], text_edit(files["readme"])))

    def shared(doc: dict) -> None:
        doc.setdefault("namedInputs", {}).setdefault("sharedGlobals", []).append(
            "{workspaceRoot}/.nvmrc"
        )

    edits.append(("nx.json sharedGlobals += .nvmrc", "nx.json", json_edit("nx.json", shared)))

    def lint_default(doc: dict) -> None:
        doc.setdefault("targetDefaults", {}).setdefault("lint", {})["inputs"] = [
            "default",
            "{workspaceRoot}/eslint.config.mjs",
        ]

    edits.append(
        ("nx.json targetDefaults.lint.inputs", "nx.json", json_edit("nx.json", lint_default))
    )
    if has("tsconfig.base.json"):

        def strict(doc: dict) -> None:
            doc["compilerOptions"]["noPropertyAccessFromIndexSignature"] = False

        edits.append(
            (
                "tsconfig.base.json option",
                "tsconfig.base.json",
                json_edit("tsconfig.base.json", strict),
            )
        )
    if lock and files.get("bump"):
        bump = {
            "pnpm-lock.yaml": lock_bump,
            "package-lock.json": npm_lock_bump,
            "yarn.lock": yarn_lock_bump,
        }[lock](files["bump"])
        edits.append((f"lockfile bump {files['bump']}", lock, bump))
    src = files.get("source")
    if has(src):
        d = Path(str(src)).parent.as_posix()
        top = "/".join(Path(str(src)).parts[:2])
        extra, ignored = f"{d}/extra.ts", files.get("ignored") or f"{top}/tmp/note.ts"
        edits.append(("untracked file", extra, new_file(extra, "export const x = 1;\n")))
        edits.append(("ignored file", ignored, new_file(ignored, "export const y = 1;\n")))
    return edits


def yarn_lock_bump(package: str) -> Callable[[Path], None]:
    """yarn.lock (Yarn 2+) names the next patch version of one package, with another checksum
    (nothing reinstalled)."""

    def apply(ws: Path) -> None:
        path = ws / "yarn.lock"
        text = path.read_text()
        head = re.compile(
            rf'^"?{re.escape(package)}@[^\n]*:\n  version: (\d+)\.(\d+)\.(\d+)\n'
            rf'  resolution: "{re.escape(package)}@npm:\d+\.\d+\.\d+"',
            re.M,
        )
        m = head.search(text)
        if not m:
            raise RuntimeError(f"{package} not in yarn.lock")
        old = f"{m.group(1)}.{m.group(2)}.{m.group(3)}"
        new = f"{m.group(1)}.{m.group(2)}.{int(m.group(3)) + 1}"
        end = text.find("\n\n", m.start())
        end = len(text) if end < 0 else end
        block = (
            text[m.start() : end]
            .replace(f"version: {old}", f"version: {new}")
            .replace(f"@npm:{old}", f"@npm:{new}")
        )
        # Another version has another checksum: Nx keys a package by it (the version only where
        # there is none), so an edit that kept it would be one Nx cannot see.
        block = re.sub(
            r"(\n  checksum: [0-9a-z/]*?)([0-9a-f])(\n|$)",
            lambda c: c.group(1) + ("0" if c.group(2) != "0" else "1") + c.group(3),
            block,
            count=1,
        )
        path.write_text(text[: m.start()] + block + text[end:])

    return apply


def npm_lock_bump(package: str) -> Callable[[Path], None]:
    """package-lock.json names the next patch version of one package, with another integrity
    (nothing reinstalled)."""

    def apply(ws: Path) -> None:
        path = ws / "package-lock.json"
        doc = json.loads(path.read_text())
        entry = doc["packages"][f"node_modules/{package}"]
        major, minor, patch = entry["version"].split(".")[:3]
        old = entry["version"]
        entry["version"] = f"{major}.{minor}.{int(patch.split('-')[0]) + 1}"
        if entry.get("resolved"):  # else Nx takes the entry for a tarball and drops its edges
            entry["resolved"] = entry["resolved"].replace(f"-{old}.tgz", f"-{entry['version']}.tgz")
        if entry.get("integrity"):
            entry["integrity"] = other_integrity(entry["integrity"])
        path.write_text(json.dumps(doc, indent=2) + "\n")

    return apply


def undo(ws: Path, rel: str) -> None:
    tracked = (
        subprocess.run(
            ["git", "ls-files", "--error-unmatch", rel], cwd=ws, capture_output=True
        ).returncode
        == 0
    )
    if tracked:
        subprocess.run(["git", "checkout", "--", rel], cwd=ws, check=True)
    else:
        (ws / rel).unlink(missing_ok=True)


def as_vx_names(nx: dict[str, str], vx: dict[str, str]) -> dict[str, str]:
    """Nx's task names as vx's: Nx's log names a task run in its default configuration
    `app:build:production`, vx's summary `app:build`."""
    out = {}
    for tid, v in nx.items():
        plain = tid.rsplit(":", 1)[0] if tid.count(":") >= 2 else tid
        out[plain if tid not in vx and plain in vx and plain not in nx else tid] = v
    return out


def compare_cache(vx: dict[str, str], nx: dict[str, str]) -> dict:
    nx = as_vx_names(nx, vx)
    ids = sorted(set(vx) | set(nx))
    wrong_hits = [t for t in ids if vx.get(t) == "hit" and nx.get(t) == "miss"]
    extra_misses = [t for t in ids if vx.get(t) == "miss" and nx.get(t) == "hit"]
    missing = [t for t in ids if (t in vx) != (t in nx)]
    return {
        "vx_misses": sorted(t for t in ids if vx.get(t) == "miss"),
        "nx_misses": sorted(t for t in ids if nx.get(t) == "miss"),
        "wrong_hits": wrong_hits,
        "extra_misses": extra_misses,
        "only_one": missing,
        "same": not (wrong_hits or extra_misses or missing),
    }


def phase_matrix(
    s: Side,
    tasks: list[str],
    state: dict,
    save: Callable[[], None],
    files: dict[str, str],
    only: list[str] | None = None,
) -> dict:
    result = state.setdefault("matrix", {})
    # in the order `only` names them: the ones that matter most first on a slow machine
    edits = sorted(
        (
            e
            for e in matrix_edits(s.ws["vx"], files)
            if e[0] not in result and (not only or any(e[0].startswith(o) for o in only))
        ),
        key=lambda e: next((i for i, o in enumerate(only or []) if e[0].startswith(o)), 0),
    )
    if not edits:
        return result
    # a warm state, each tool run twice: Nx 18's first run after its cache is cleared keys some
    # tasks (lint, test) differently from every later run, which the first edit would count
    for i in range(2):
        for tool in ("vx", "nx"):
            r = s.run(tool, tasks, f"matrix-warmup{i}")
            log(f"warm-up {tool}: exit {r['code']}, {r['wall']} s")
    for label, rel, apply in edits:
        after: dict[str, dict] = {}
        for tool in ("vx", "nx"):
            apply(s.copy(tool))
            after[tool] = s.run(tool, tasks, f"edit-{label.split()[0]}")
        for tool in ("vx", "nx"):
            undo(s.copy(tool), rel)
        back = {tool: s.run(tool, tasks, f"undo-{label.split()[0]}") for tool in ("vx", "nx")}
        cmp = compare_cache(after["vx"]["cache"], after["nx"]["cache"])
        cmp_back = compare_cache(back["vx"]["cache"], back["nx"]["cache"])
        result[label] = {
            "file": rel,
            "codes": {t: after[t]["code"] for t in after},
            **cmp,
            "undo": {k: cmp_back[k] for k in ("vx_misses", "nx_misses", "same")},
        }
        log(
            f"edit {label}: vx misses {len(cmp['vx_misses'])}, nx {len(cmp['nx_misses'])}"
            + (
                ""
                if cmp["same"]
                else f"  DIFFERENT wrong hits {cmp['wrong_hits']} extra {cmp['extra_misses']}"
            )
        )
        save()
    return result


# ---------------------------------------------------------------- the summary


def paired_lines(t: dict) -> list[str]:
    """Each scenario's runs round by round (wall, CPU, the load as it started) and vx's paired
    ratios against each Nx with their median."""
    out = [
        f"order {','.join(t.get('order', TOOLS))}" + (", alternating" if t.get("alternate") else "")
    ]
    for sc, st in t["stats"].items():
        for tool in TOOLS:
            x = st[tool]
            if x.get("walls"):
                rows = zip(
                    x["walls"],
                    x.get("cpus") or [None] * len(x["walls"]),
                    x.get("loads") or [None] * len(x["walls"]),
                )
                out.append(
                    f"  {sc} {tool}: "
                    + ", ".join(f"{w} s (CPU {c}, load {ld})" for w, c, ld in rows)
                )
        for tool in ("nx", "nx-daemon"):
            if st.get(f"pairs_{tool}"):
                out.append(
                    f"  {sc} vx/{tool} by round: {st[f'pairs_{tool}']}, median {st[f'pair_median_{tool}']}"
                )
    return out


def summary(state: dict) -> str:
    out = []
    show = state.get("show")
    if show:
        out.append(
            f"show: {show['projects']} projects, {show['targets']} targets, "
            + (
                "identical"
                if show["same"]
                else f"DIFFERENT {json.dumps(show['differences'])[:2000]}"
            )
        )
    for key, g in state.get("graph", {}).items():
        out.append(
            f"graph `{key}`: {g['tasks']} tasks, {g['edges']} edges, "
            + ("identical" if g["same"] else f"DIFFERENT {g['differences'][:10]}")
        )
    inp = state.get("inputs")
    if inp and inp.get("skipped"):
        out.append(f"inputs: not compared: {inp['skipped']}")
    elif inp:
        out.append(
            f"inputs: {inp['tasks']} cached tasks ({len(inp.get('groups', []))} `nx:noop`, "
            "vx groups, not compared), "
            + (
                "same files"
                if inp["same"]
                else f"DIFFERENT {json.dumps(inp['differences'])[:2000]}"
            )
        )
    for key, t in state.get("time", {}).items():
        out.append(f"\ntime `{key}`:")
        if not t.get("daemon_ran", True):
            out.append("Nx's daemon never ran: the daemon-on column is NOT daemon on")
        out.append("| scenario | vx | nx (daemon off) | nx (daemon on) | vx/nx | vx/nx-daemon |")
        out.append("|---|---|---|---|---|---|")
        for sc, st in t["stats"].items():
            out.append(
                f"| {sc} | {st['vx']['wall']} s | {st['nx']['wall']} s | {st['nx-daemon']['wall']} s "
                f"| {st['ratio_nx']}× | {st['ratio_nx-daemon']}× |"
            )
        out.extend(paired_lines(t))
        o = t["outputs"]
        out.append(
            f"outputs vx vs nx cold: {o['files']} files, "
            + ("byte-identical" if o["identical"] else f"DIFFERENT {o}")
            + f" ({len(t['noisy'])} nondeterministic left out)"
        )
        for tool, diffs in t["restore"].items():
            bad = [d for d in diffs if not d["identical"]]
            out.append(
                f"restore {tool}: " + ("identical to cold" if not bad else f"DIFFERENT {bad[0]}")
            )
        out.append(f"test counts (passed, failed) per cold run: {t['test_counts']}")
        for sc in ("warm", "restore"):
            flags = [r.get("replayed") for r in t["runs"]["vx"] if r["scenario"] == sc]
            out.append(f"vx {sc} runs replayed (VX_TIMING's `receipt check`): {flags}")
        for tool, rs in t["runs"].items():
            bad = [r for r in rs if r.get("code") or (r["scenario"] != "cold" and r.get("misses"))]
            if bad:
                out.append(f"  {tool}: {bad}")
    w = state.get("warm")
    if w:
        st = w["stats"]
        out.append(
            f"\nwarm alone `{' '.join(w['tasks'])}`: vx {st['vx']['wall']} s, nx {st['nx']['wall']} s, "
            f"nx-daemon {st['nx-daemon']['wall']} s: {st['ratio_nx']}x, {st['ratio_nx-daemon']}x"
            + ("" if w.get("daemon_ran", True) else " (Nx's daemon never ran: NOT daemon on)")
        )
        for tool, rs in w["runs"].items():
            out.append(
                f"  {tool}: " + ", ".join(f"{r['wall']} s {len(r['misses'])} misses" for r in rs)
            )
    m = state.get("matrix")
    if m:
        out.append("\nmatrix:")
        out.append("| edit | file | Nx misses | vx misses | same | undo: all hits |")
        out.append("|---|---|---|---|---|---|")
        for label, r in m.items():
            undo_ok = not r["undo"]["vx_misses"] and not r["undo"]["nx_misses"]
            if not r["same"] and not r["wrong_hits"] and not r["extra_misses"]:
                # a row saved before as_vx_names: the same tasks under both, named apart?
                one = set(r["only_one"])
                pairs = {t: t.rsplit(":", 1)[0] for t in one if t.rsplit(":", 1)[0] in one}
                nx_named = {pairs.get(t, t) for t in r["nx_misses"]}
                r["same"] = len(pairs) * 2 == len(one) and nx_named == set(r["vx_misses"])
                r["nx_misses"] = sorted(nx_named)
            out.append(
                f"| {label} | `{r['file']}` | {len(r['nx_misses'])} | {len(r['vx_misses'])} | "
                + (
                    "yes"
                    if r["same"]
                    else f"**no**: wrong hits {r['wrong_hits']}, extra misses {r['extra_misses']}, {r['only_one']}"
                )
                + f" | {'yes' if undo_ok else r['undo']} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--ws", type=Path, help="the installed Nx workspace (a git checkout)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--phases", default=",".join(PHASES[:-1]))
    ap.add_argument("--redo", default="", help="phases to run again (comma-separated)")
    ap.add_argument("--sets", nargs="*", default=["build", "build,test,lint,typecheck"])
    ap.add_argument("--rounds", default="cold=2,warm=3,restore=2")
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument(
        "--order",
        default=",".join(TOOLS),
        help="the time phase's tools in each round's order (a subset of vx,nx,nx-daemon with vx)",
    )
    ap.add_argument(
        "--alternate",
        action="store_true",
        help="time: reverse --order every other round (nx,vx then vx,nx …)",
    )
    ap.add_argument("--vx", default=f"{sys.executable} -m vx")
    ap.add_argument(
        "--files",
        default="",
        help="the matrix's files: source=…,app=…,test=…,vite=…,eslint=…,tsconfig=…,package=…,"
        "readme=…,bump=PACKAGE,ignored=a path .gitignore ignores (the create-nx-workspace shape's by default)",
    )
    ap.add_argument(
        "--exclude", default="", help="projects both tools leave out (P,…: each's --exclude)"
    )
    ap.add_argument(
        "--only",
        default="",
        help="the matrix's edits to run, by the start of their labels (comma-separated)",
    )
    ap.add_argument("--fresh", action="store_true", help="copy the workspace again")
    ap.add_argument(
        "--trace",
        action="store_true",
        help="cold runs: vx's --profile and VX_TIMING, Nx's NX_PROFILE (Chrome traces in WORK/logs)",
    )
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args(argv)
    state_path = args.work / "state.json"
    state: dict = json.loads(state_path.read_text()) if state_path.exists() else {}
    if args.summary:
        print(summary(state))
        return 0
    if args.ws is None or not (args.ws / "nx.json").exists():
        print(
            "error: --ws must name an installed Nx workspace (nx.json at its root)", file=sys.stderr
        )
        return 2
    phases = [p for p in args.phases.split(",") if p]
    unknown = [p for p in phases + [p for p in args.redo.split(",") if p] if p not in PHASES]
    if unknown:
        print(f"error: unknown phase {unknown[0]} (phases: {', '.join(PHASES)})", file=sys.stderr)
        return 2
    for p in args.redo.split(","):
        state.pop(p, None)
    args.work.mkdir(parents=True, exist_ok=True)
    sets = [x.split(",") for x in args.sets]
    files = dict(FILES, **dict(x.split("=", 1) for x in args.files.split(",") if x))
    rounds = {k: int(v) for k, v in (x.split("=") for x in args.rounds.split(","))}
    exclude = [p for p in args.exclude.split(",") if p]
    order = tuple(t for t in args.order.split(",") if t)
    if (
        "vx" not in order
        or len(set(order)) != len(order)
        or not set(order) <= set(TOOLS)
        or len(order) < 2
    ):
        print(
            f"error: --order {args.order}: vx and one or both of nx, nx-daemon, each once",
            file=sys.stderr,
        )
        return 2
    s = Side(
        args.ws.resolve(), args.work.resolve(), args.vx.split(), args.concurrency, tuple(exclude)
    )
    s.trace = args.trace
    s.prepare(args.fresh)

    def save() -> None:
        state_path.write_text(json.dumps(state, indent=1))

    try:
        for phase in phases:
            if phase in state and phase != "matrix":
                continue
            log(f"phase {phase}")
            if phase == "show":
                state["show"] = phase_show(s)
            elif phase == "graph":
                state["graph"] = phase_graph(s, sets)
            elif phase == "inputs":
                state["inputs"] = phase_inputs(s, sets[-1])
            elif phase == "time":
                state["time"] = {}
                for tasks in sets:
                    state["time"][" ".join(tasks)] = phase_time(
                        s, tasks, rounds, order, args.alternate
                    )
                    save()
            elif phase == "warm":
                state["warm"] = phase_warm(s, sets[-1], rounds.get("warm", 3))
            elif phase == "matrix":
                only = [o for o in args.only.split(",") if o]
                phase_matrix(s, sets[-1], state, save, files, only)
            save()
    finally:
        s.stop_daemon()
    print(summary(state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
