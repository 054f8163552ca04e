"""How long the local cache keeps what it holds: the `vx cache prune` verb, the workspace's
`cacheRetention` applied when a run ends, and `vx cache clean`, which empties the store the
workspace uses (the repository's shared store under the home, which deleting `.vx` leaves alone).

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

from vx.cli.args import Args, one_of
from vx.errors import UsageError, did_you_mean
from vx.store.pruning import Pruned, Retention, parse_duration, parse_size, prune

SUBCOMMANDS = ("prune", "clean")
_OTHER_VERBS = {
    "clear": "`vx cache clean` empties the cache (`--dry-run` says what would go)",
    "purge": "`vx cache clean` empties the cache (`--dry-run` says what would go)",
    "gc": "`vx cache prune` sweeps what no row accounts for",
    "stats": "`vx info` shows the cache dir and its size",
    "list": "`vx cache prune --dry-run --max-size 1B` lists every entry",
    "size": "`vx info` shows the cache dir and its size",
}


def refuse_subcommand(word: str) -> UsageError:
    """`vx cache <word>` for anything but `prune` or `clean`: what to use instead."""
    hint = _OTHER_VERBS.get(word) or (
        f"did you mean `vx cache {near}`?"
        if (near := did_you_mean(word, SUBCOMMANDS))
        else "see `vx help cache`"
    )
    return UsageError(
        f"`vx cache {word}` is not a vx command; the subcommands are `prune` and `clean`",
        hint=hint,
    )


def cache_verb(args: Args, subcommand: str = "prune") -> int:
    """`vx cache prune` or `vx cache clean` with its parsed flags (`vx.cli.main` reads the
    subcommand)."""
    from vx.cli.args import say

    if subcommand == "clean" and (args.older_than is not None or args.max_size is not None):
        raise UsageError(
            "`vx cache clean` removes every entry and takes no limit",
            hint="`vx cache prune --older-than 30d --max-size 10G` keeps what fits",
        )
    retention = retention_of(args.older_than, args.max_size)
    fmt = one_of("--format", args.format, ("text", "json"), "text")
    cwd, env = Path(os.getcwd()), os.environ
    pruned = prune_workspace(
        cwd, retention, args.cache_dir, args.dry_run, env, say, everything=subcommand == "clean"
    )
    if pruned is None:
        return 0
    text = _text(pruned, "clean" if subcommand == "clean" else "prune")
    sys.stdout.write((_json(pruned) if fmt == "json" else text) + "\n")
    return 0


def retention_of(
    older_than: str | None, max_size: str | None, names=("--older-than", "--max-size")
):
    """The limits `--older-than` and `--max-size` give (`names` spell them in a refusal)."""
    return Retention(
        _parsed(names[0], older_than, parse_duration, "45s, 90m, 12h, 30d, 2w"),
        _parsed(names[1], max_size, parse_size, "64KB, 500MB, 10G"),
    )


def _parsed(flag: str, value: str | None, parse, examples: str):
    if value is None:
        return None
    parsed = parse(value)
    if isinstance(parsed, str):
        raise UsageError(f"{flag}: {parsed}", hint=f"write a number and a unit: {examples}")
    return parsed


def prune_workspace(
    cwd: Path,
    retention: Retention,
    cache_flag: str | None,
    dry_run: bool,
    env: Mapping[str, str],
    say,
    everything: bool = False,
) -> Pruned | None:
    """Prune (or with `everything`, clean) the store the workspace at `cwd` uses, under its run
    lock; None when there is no cache yet."""
    from vx.plugins.shaped import open_for_verb
    from vx.runlock import RunLock

    found = open_for_verb(cwd, cache_flag, env)
    ws, cache_dir, store_dir = found.ws, found.cache_dir, found.store_dir
    if found.note:
        say(f"vx: warning: {found.note}")
    index = store_dir / "store.db" if store_dir != cache_dir else cache_dir / "cache.db"
    if not index.exists():
        say(f"vx: nothing to {'clean' if everything else 'prune'}: no cache at {store_dir}")
        return None
    lock = RunLock(lambda message: say(f"vx: {message}"))
    lock.acquire(ws.root)
    try:
        from vx.store.local import LocalStore

        with LocalStore(cache_dir, ws.root, store_dir, fallback=found.note is not None) as store:
            if everything:
                from vx.store.pruning import clean

                say(f"vx: the cache of {ws.root}: {store_dir}")
                return clean(store, dry_run=dry_run)
            return prune(store, retention, dry_run=dry_run)
    finally:
        lock.release()


# ---------------------------------------------------------------- at a run's end


# ---------------------------------------------------------------- output


def _json(p: Pruned) -> str:
    return json.dumps(pruned_data(p), indent=2)


def pruned_data(p: Pruned) -> dict:
    """What `--format json` prints: what went (or would), what was swept and what is kept."""
    return {
        "dryRun": p.dry_run,
        "evicted": [
            {
                "key": r.key,
                "taskId": r.task_id,
                "bytes": r.size_bytes,
                "accessedAt": r.accessed_at,
            }
            for r in p.evicted
        ],
        "bytesFreed": p.bytes_freed,
        "orphans": p.orphans,
        "orphanBytes": p.orphan_bytes,
        "phantoms": p.phantoms,
        "kept": p.kept,
        "keptBytes": p.kept_bytes,
    }


def _text(p: Pruned, action: str = "prune") -> str:
    verb = (
        ("would remove" if p.dry_run else "removed")
        if action == "clean"
        else ("would prune" if p.dry_run else "pruned")
    )
    lines = []
    if p.dry_run and p.evicted:
        now = time.time()
        width = max(len(r.task_id) for r in p.evicted)
        lines += [
            f"  {r.task_id:<{width}}  {_bytes(r.size_bytes):>9}  unused {_age(now - r.accessed_at)}"
            for r in p.evicted
        ]
    head = f"{verb} {_count(len(p.evicted), 'entry', 'entries')} ({_bytes(p.bytes_freed)})"
    parts = [head]
    if p.orphans:
        parts.append(
            f"{'would sweep' if p.dry_run else 'swept'} {_count(p.orphans, 'orphan', 'orphans')} "
            f"({_bytes(p.orphan_bytes)})"
        )
    if p.phantoms:
        parts.append(
            f"{_count(p.phantoms, 'row', 'rows')} without an artifact {'to drop' if p.dry_run else 'dropped'}"
        )
    if action != "clean":
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
