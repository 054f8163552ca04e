"""`vx info`: what vx sees here — versions, workspace, cache, workers, sandbox.

A doctor never fails on what it inspects: each row that cannot be read says why instead.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Mapping

from vx import __version__, install

Row = tuple[str, str]


def info_verb(args, argv: list[str]) -> int:
    from vx.cli.args import one_of

    if one_of("--format", args.format, ("text", "json"), "text") == "json":
        import json

        print(json.dumps(info_document(Path(os.getcwd()), os.environ), indent=2))
        return 0
    print(render(info_rows(Path(os.getcwd()), os.environ)), end="")
    return 0


RECENT_RUNS = 5  # runs listed by `--format json`, newest first


def info_document(cwd: Path, env: Mapping[str, str]) -> dict:
    """`vx info --format json` (the shape is `schemas/info.json`): every part that cannot be read
    is null, with why in `unavailable`, as the text rows say it."""
    from vx import CACHE_VERSION
    from vx.store.local import SCHEMA_VERSION
    from vx.store.runs import SCHEMA as RUNS_SCHEMA

    doc: dict = {
        "vx": __version__,
        "install": {"kind": install.kind(), "path": install.where()},
        "python": platform.python_version(),
        "git": _tool_version(["git", "--version"]),
        "node": _tool_version(["node", "--version"]),
        "keyVersion": CACHE_VERSION,
        "storeSchema": SCHEMA_VERSION,
        "historySchema": int(RUNS_SCHEMA),
        "root": None,
        "packageManager": None,
        "projects": None,
        "tasks": None,
        "configError": None,
        "cacheDir": None,
        "store": None,
        "runs": None,
        "gitStatusCache": None,
        "lock": None,
        "workers": _guarded("workers", lambda: [("", _workers())])[0][1],
        "unavailable": {},
    }
    try:
        doc.update(_workspace_document(cwd, env))
    except Exception as exc:  # a doctor never fails on what it inspects
        from vx.errors import VxError

        if not isinstance(exc, (VxError, OSError)):
            raise
        doc["unavailable"]["workspace"] = getattr(exc, "message", None) or str(exc)
    return doc


def _workspace_document(cwd: Path, env: Mapping[str, str]) -> dict:
    from vx.config import loader as config
    from vx.errors import VxError
    from vx.store import location
    from vx.workspace import discover as workspace

    ws = workspace.discover(cwd)
    ws_config = config.load_workspace(ws.root, env)
    out: dict = {"root": str(ws.root), "packageManager": ws.manager, "projects": len(ws.packages)}
    try:
        configs = config.load_all(ws, env)
        out["tasks"] = sum(len(c.tasks) for c in configs.values())
    except VxError as exc:
        out["configError"] = exc.message
    if ws_config.plugins:
        from vx.plugins.shaped import shaped_workspace_config

        try:
            ws_config = shaped_workspace_config(ws.root, env)
        except VxError:
            pass
    cache_dir, store_dir, _note = location.store_of(cwd, None, ws, ws_config, env)
    out["cacheDir"] = str(cache_dir)
    out["store"] = _store_document(cache_dir, store_dir)
    out["runs"] = _runs_document(cache_dir)
    out["gitStatusCache"] = {
        "fsmonitor": _git_config(ws.root, "core.fsmonitor"),
        "untrackedCache": _git_config(ws.root, "core.untrackedCache"),
    }
    lock = ws.root / "vx-lock.json"
    out["lock"] = {"path": str(lock), "present": lock.is_file()}
    return out


def _store_document(cache_dir: Path, store_dir: Path) -> dict:
    """Where the entries are, how many and how big, and the orphans: artifacts no entry names
    (what `vx cache prune` sweeps once an hour old) and entries whose artifact is gone. Read only:
    the index is opened read-only, nothing is swept."""
    import sqlite3

    from vx.store.local import DB_NAME, STORE_DB

    shared = store_dir != cache_dir
    doc: dict = {
        "dir": str(store_dir),
        "shared": shared,
        "entries": 0,
        "bytes": 0,
        "orphans": 0,
        "orphanBytes": 0,
        "missingArtifacts": 0,
    }
    artifacts: dict[str, int] = {}
    if store_dir.is_dir():
        for entry in os.scandir(store_dir):
            if entry.name.endswith(".tar.zst"):
                try:
                    artifacts[entry.name[: -len(".tar.zst")]] = entry.stat().st_size
                except OSError:
                    continue
    index = store_dir / STORE_DB if shared else cache_dir / DB_NAME
    keys: set[str] = set()
    if index.is_file():
        try:
            db = sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True)
            try:
                keys = {r[0] for r in db.execute("SELECT hash FROM entries")}
            finally:
                db.close()
        except sqlite3.Error as exc:
            doc["unreadable"] = str(exc)
    doc["entries"] = len(keys)
    doc["bytes"] = sum(size for key, size in artifacts.items() if key in keys)
    orphans = [size for key, size in artifacts.items() if key not in keys]
    doc["orphans"], doc["orphanBytes"] = len(orphans), sum(orphans)
    doc["missingArtifacts"] = len(keys - set(artifacts))
    return doc


def _runs_document(cache_dir: Path) -> dict:
    """The runs of the last 24 hours and the latest few, from the run history (read only)."""
    import json
    import sqlite3
    import time

    from vx.store import runs

    doc: dict = {"last24h": 0, "recent": []}
    path = cache_dir / runs.DB_NAME
    if not path.is_file():
        return doc
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            (doc["last24h"],) = db.execute(
                "SELECT COUNT(*) FROM invocations WHERE started_at >= ?", (time.time() - 86400,)
            ).fetchone()
            columns = {r[1] for r in db.execute("PRAGMA table_info(invocations)")}
            tags = "tags" if "tags" in columns else "NULL"
            rows = db.execute(
                "SELECT run_id, command, started_at, exit_code, task_count, hit_count, replayed,"
                f" {tags} FROM invocations ORDER BY started_at DESC LIMIT ?",
                (RECENT_RUNS,),
            ).fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        doc["unreadable"] = str(exc)
        return doc
    doc["recent"] = [
        {
            "runId": r[0],
            "command": r[1],
            "startedAt": r[2],
            "exitCode": r[3],
            "tasks": r[4],
            "hits": r[5],
            "replayed": bool(r[6]),
            "tags": json.loads(r[7]) if r[7] else {},
        }
        for r in rows
    ]
    return doc


def _git_config(root: Path, name: str) -> str | None:
    """A git setting as git reads it here (`git config --get`), None when unset or no git."""
    if shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(
            ["git", "config", "--get", name], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def info_rows(cwd: Path, env: Mapping[str, str]) -> list[Row]:
    """Every row of `vx info`, in display order."""
    rows: list[Row] = [
        ("vx", __version__),
        ("installed", install.described()),
        ("python", platform.python_version()),
        ("git", _tool_version(["git", "--version"])),
        ("node", _tool_version(["node", "--version"])),
    ]
    rows += _guarded("workspace", lambda: _workspace_rows(cwd, env))
    rows += _guarded("workers", lambda: [("workers", _workers())])
    rows += _guarded("sandbox", lambda: [("sandbox", _sandbox())])
    return rows


def render(rows: list[Row]) -> str:
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}}  {v}\n" for k, v in rows)


def _guarded(name: str, make: Callable[[], list[Row]]) -> list[Row]:
    from vx.errors import VxError

    try:
        return make()
    except VxError as exc:
        return [(name, f"unavailable: {exc.message}")]
    except OSError as exc:
        return [(name, f"unavailable: {exc.strerror or exc}")]


def _tool_version(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not found"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"
    return out.removeprefix("git version ")


def _workspace_rows(cwd: Path, env: Mapping[str, str]) -> list[Row]:
    from vx.config import loader as config
    from vx.errors import VxError
    from vx.store import location
    from vx.workspace import discover as workspace

    ws = workspace.discover(cwd)
    ws_config = config.load_workspace(ws.root, env)
    rows: list[Row] = [("root", str(ws.root)), ("package manager", ws.manager)]
    if ws_config.plugins:
        rows.append(("plugins", _plugins(ws_config, ws.root, env)))
    try:
        configs = config.load_all(ws, env)
        tasks = sum(len(c.tasks) for c in configs.values())
        rows.append(("projects", f"{len(ws.packages)} ({tasks} tasks)"))
    except VxError as exc:
        rows.append(("projects", f"{len(ws.packages)} (config error: {exc.message})"))
    if ws_config.plugins:  # the cache dir as the run finds it, a `config` hook's cacheDir too
        from vx.plugins.shaped import shaped_workspace_config

        try:
            ws_config = shaped_workspace_config(ws.root, env)
        except VxError:
            pass  # the plugins row says why they cannot be loaded
    cache_dir, store_dir, _note = location.store_of(cwd, None, ws, ws_config, env)
    rows.append(("cache dir", str(cache_dir)))
    if store_dir != cache_dir:
        rows.append(("shared store", f"{store_dir} (entries and artifacts)"))
    how = "`vx cache clean` clears it"
    if store_dir != cache_dir:
        how += " (deleting .vx does not: the entries are in the shared store)"
    rows.append(("cache", f"{_cache_usage(store_dir)} · {how}"))
    rows.append(("flaky", _flaky(cache_dir)))
    return rows


def _plugins(ws_config, root: Path, env: Mapping[str, str]) -> str:
    """Each declared plugin and its hooks, loaded as for a verb (no setup), or why not."""
    from vx.errors import VxError
    from vx.plugins.host import load

    try:
        host = load(ws_config.plugins, root, env, setup=False)
    except VxError as exc:
        return f"unavailable: {exc.message}"
    return "; ".join(f"{p.name} ({', '.join(sorted(p.hooks))})" for p in host.plugins)


SHOWN_FLAKY = 10  # flaky tasks named before the rest fold into a count


def _flaky(cache_dir: Path) -> str:
    """The tasks the run history calls flaky (as `vx last` marks them), or why there are none."""
    import sqlite3

    from vx.store import runs

    try:
        db = runs.connect(str(cache_dir), create=False)
        if db is None:
            return "no runs recorded"
        try:
            found = runs.flaky_on_record(db)
        finally:
            db.close()
    except (OSError, sqlite3.Error) as exc:
        return f"unavailable: cannot read the run history: {exc}"
    if not found:
        return "none on record"
    names = [f"{project}#{task}" for project, task in found]
    more = len(names) - SHOWN_FLAKY
    return ", ".join(names[:SHOWN_FLAKY]) + (f" … and {more} more" if more > 0 else "")


def _cache_usage(cache_dir: Path) -> str:
    usage = cache_usage(cache_dir)
    if usage is None:
        return "empty (not created yet)"
    return f"{usage[0]} entries, {_human(usage[1])}"


def cache_usage(cache_dir: Path) -> tuple[int, int] | None:
    """(artifacts, their bytes) in the store's directory; None before it exists."""
    if not cache_dir.is_dir():
        return None
    sizes = [p.stat().st_size for p in cache_dir.glob("*.tar.zst")]
    return len(sizes), sum(sizes)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _workers() -> str:
    from vx.plan.environment import default_concurrency

    cpus = os.cpu_count() or 1
    workers = default_concurrency()
    return f"{workers}" + ("" if workers == cpus else f" (cgroup quota; {cpus} CPUs)")


def _sandbox() -> str:
    try:
        from vx.sandbox.probe import sandbox_status
    except ImportError:
        return "not built into this version"
    return sandbox_status()
