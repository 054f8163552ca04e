"""How long the local cache keeps what it holds (LC-16): the `vx cache prune` verb, and the
workspace's `cacheRetention` applied when a run ends.

The verb takes the workspace's run lock first (a run restoring an artifact must not see it
vanish), opens the cache only if it exists, and prints what went — or, with `--dry-run`, what
would — as text or JSON. At a run's end the policy costs one aggregate query unless something is
due; the orphan sweep then runs at most hourly.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Mapping

from vx.errors import UsageError, did_you_mean
from vx.store.pruning import SWEEP_MARK, SWEEP_MIN_AGE_S, Pruned, Retention, due, parse_duration, parse_size, prune

_FLAGS = ("--older-than", "--max-size", "--dry-run", "--format", "--cache-dir")
_OTHER_VERBS = {
    "clean": "`vx cache prune --max-size 1B` empties it; or delete the cache dir",
    "clear": "`vx cache prune --max-size 1B` empties it; or delete the cache dir",
    "gc": "`vx cache prune` sweeps what no row accounts for",
    "stats": "`vx info` shows the cache dir and its size",
    "list": "`vx cache prune --dry-run --max-size 1B` lists every entry",
    "size": "`vx info` shows the cache dir and its size",
}


def cache_verb(rest: list[str], env: Mapping[str, str], say, help_text: str) -> int:
    """`vx cache …`: only `prune` is a subcommand."""
    if not rest or rest[0] in ("-h", "--help"):
        print(help_text, end="")
        return 0
    if rest[0] != "prune":
        hint = _OTHER_VERBS.get(rest[0]) or (f"did you mean `vx cache {near}`?"
                                             if (near := did_you_mean(rest[0], ["prune"])) else "see `vx help cache`")
        raise UsageError(f"`vx cache {rest[0]}` is not a vx command; the subcommand is `prune`", hint=hint)
    options = _parse(rest[1:])
    if options.get("help"):
        print(help_text, end="")
        return 0
    retention = Retention(options.get("older_than"), options.get("max_size"))
    pruned = _prune_workspace(Path(os.getcwd()), retention, options, env, say)
    if pruned is None:
        return 0
    out = _json(pruned) if options.get("format") == "json" else _text(pruned)
    sys.stdout.write(out + "\n")
    return 0


def _parse(tokens: list[str]) -> dict:
    out: dict = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, value = tok.partition("=")
        if tok in ("-h", "--help"):
            out["help"] = True
        elif name == "--dry-run" and not eq:
            out["dry_run"] = True
        elif name in ("--older-than", "--max-size", "--format", "--cache-dir"):
            if not eq:
                i += 1
                if i >= len(tokens) or tokens[i].startswith("-"):
                    raise UsageError(f"`{name}` needs a value", hint="see `vx help cache`")
                value = tokens[i]
            out.update(_option(name, value))
        else:
            near = did_you_mean(name, _FLAGS)
            raise UsageError(f"unknown flag `{tok}` for `vx cache prune`",
                             hint=f"did you mean `{near}`?" if near else "see `vx help cache`")
        i += 1
    return out


def _option(name: str, value: str) -> dict:
    if name == "--older-than":
        parsed = parse_duration(value)
        if isinstance(parsed, str):
            raise UsageError(f"--older-than: {parsed}", hint="write a number and a unit: 45s, 90m, 12h, 30d, 2w")
        return {"older_than": parsed}
    if name == "--max-size":
        parsed = parse_size(value)
        if isinstance(parsed, str):
            raise UsageError(f"--max-size: {parsed}", hint="write a number and a unit: 64KB, 500MB, 10G")
        return {"max_size": parsed}
    if name == "--format":
        if value not in ("text", "json"):
            raise UsageError(f"--format: `{value}` is neither text nor json", hint="--format json")
        return {"format": value}
    return {"cache_dir": value}


def _prune_workspace(cwd: Path, retention: Retention, options: dict, env: Mapping[str, str], say) -> Pruned | None:
    from vx import config, workspace
    from vx.run import RunRequest, resolve_cache_dir
    from vx.runlock import RunLock

    ws = workspace.discover(cwd)
    cache_dir = resolve_cache_dir(RunRequest(cwd=cwd, names=(), cache_dir=options.get("cache_dir")), ws,
                                  config.load_workspace(ws.root, env), env)
    if not (cache_dir / "cache.db").exists():
        say(f"vx: nothing to prune: no cache at {cache_dir}")
        return None
    lock = RunLock(lambda message: say(f"vx: {message}"))
    lock.acquire(ws.root)
    try:
        from vx.store.local import LocalStore

        with LocalStore(cache_dir, ws.root) as store:
            return prune(store, retention, dry_run=bool(options.get("dry_run")))
    finally:
        lock.release()


# ---------------------------------------------------------------- at a run's end


def apply_at_run_end(store, retention: Retention | None) -> None:
    """The workspace's `cacheRetention`, silently: evict only when something is due; sweep hourly."""
    if retention is None:
        return
    import sqlite3

    try:
        _apply(store, retention)
    except (OSError, sqlite3.Error):
        pass  # keeping the cache small must never be why a run fails; `vx cache prune` says why


def _apply(store, retention: Retention) -> None:
    store.flush()  # this run's hits count as used before anything is judged unused
    now = time.time()
    mark = os.path.join(store.cache_dir, SWEEP_MARK)
    try:
        sweep = now - os.stat(mark).st_mtime >= SWEEP_MIN_AGE_S
    except OSError:
        sweep = True
    if not (sweep or due(store.entry_summary(), retention, now)):
        return
    prune(store, retention, dry_run=False, sweep=sweep, now=now)
    if sweep:
        try:
            with open(mark, "w"):
                pass
        except OSError:
            pass


# ---------------------------------------------------------------- output


def _json(p: Pruned) -> str:
    return json.dumps({
        "dryRun": p.dry_run,
        "evicted": [{"key": r.key, "taskId": r.task_id, "bytes": r.size_bytes, "accessedAt": r.accessed_at}
                    for r in p.evicted],
        "bytesFreed": p.bytes_freed, "orphans": p.orphans, "orphanBytes": p.orphan_bytes,
        "phantoms": p.phantoms, "kept": p.kept, "keptBytes": p.kept_bytes,
    }, indent=2)


def _text(p: Pruned) -> str:
    verb = "would prune" if p.dry_run else "pruned"
    lines = []
    if p.dry_run and p.evicted:
        now = time.time()
        width = max(len(r.task_id) for r in p.evicted)
        lines += [f"  {r.task_id:<{width}}  {_bytes(r.size_bytes):>9}  unused {_age(now - r.accessed_at)}"
                  for r in p.evicted]
    head = f"{verb} {_count(len(p.evicted), 'entry', 'entries')} ({_bytes(p.bytes_freed)})"
    parts = [head]
    if p.orphans:
        parts.append(f"{'would sweep' if p.dry_run else 'swept'} {_count(p.orphans, 'orphan', 'orphans')} "
                     f"({_bytes(p.orphan_bytes)})")
    if p.phantoms:
        parts.append(f"{_count(p.phantoms, 'row', 'rows')} without an artifact {'to drop' if p.dry_run else 'dropped'}")
    parts.append(f"kept {_count(p.kept, 'entry', 'entries')} ({_bytes(p.kept_bytes)})")
    return "\n".join([*lines, " · ".join(parts)])


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"
