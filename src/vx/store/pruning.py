"""Keeping the local cache bounded: evict entries by age, then the least recently used
past a size, and sweep what no row accounts for.

`vx cache prune --older-than 30d --max-size 10G` runs it once; the workspace's `cacheRetention`
runs it at the end of a run when something is due. Eviction goes through the store's own drop
(row and artifact together, only the row that was seen), so a concurrent save is never lost. The
sweep removes artifacts with no row and crashed temp files, both only once an hour old (a save in
flight renames its artifact into place just before its row commits), and rows whose artifact is
gone.
"""

from __future__ import annotations

import os
import re
import time
from typing import Iterable, Sequence

from msgspec import Struct

from vx.model import CacheRetention as Retention
from vx.store.local import RESET_MARK, artifact_key, is_temp

SWEEP_MIN_AGE_S = 3600.0
# How long after an index reset the artifacts older than it are kept without a row, for a probe to
# index them again from their bytes (vx.store.local `_reindex`) rather than swept as orphans.
REINDEX_WINDOW_S = 7 * 86400.0
SWEEP_MARK = ".vx-swept"  # its mtime: when the sweep last ran at a run's end (at most hourly)
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m|h|d|w)\Z")
_DURATION_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(B|K|KB|KiB|M|MB|MiB|G|GB|GiB|T|TB|TiB)\Z", re.IGNORECASE)
_SIZE_POWER = {"b": 0, "k": 1, "m": 2, "g": 3, "t": 4}


class Row(Struct, frozen=True):
    key: str
    task_id: str
    size_bytes: int
    accessed_at: float
    crc: str


class Pruned(Struct, frozen=True):
    dry_run: bool
    evicted: tuple[Row, ...] = ()
    orphans: int = 0
    orphan_bytes: int = 0
    phantoms: int = 0  # rows whose artifact was gone
    kept: int = 0
    kept_bytes: int = 0

    @property
    def bytes_freed(self) -> int:
        return sum(r.size_bytes for r in self.evicted)


# ---------------------------------------------------------------- bounds


def parse_duration(text: str) -> float | str:
    """Seconds in `30d`, `12h`, `90m`, `45s`, `2w`; or why not."""
    m = _DURATION.match(text.strip())
    if not m:
        return f"`{text}` is no duration"
    seconds = float(m.group(1)) * _DURATION_S[m.group(2)]
    return seconds if seconds > 0 else f"`{text}` is zero, which would prune everything"


def parse_size(text: str) -> int | str:
    """Bytes in `10G`, `500MB`, `64KB`, `2GiB`, `1024B` (K, M, G, T are powers of 1024); or why not.
    A bare number is refused: `10` could mean anything."""
    m = _SIZE.match(text.strip())
    if not m:
        if re.fullmatch(r"[0-9.]+", text.strip()):
            return f"`{text}` has no unit"
        return f"`{text}` is no size"
    size = int(float(m.group(1)) * 1024 ** _SIZE_POWER[m.group(2)[0].lower()])
    return size if size > 0 else f"`{text}` is zero, which would prune everything"


# ---------------------------------------------------------------- what goes


def choose(rows: Iterable[Row], retention: Retention, now: float) -> tuple[list[Row], list[Row]]:
    """(evicted, kept): first every entry unused for longer than `older_than_s`, then the least
    recently used until what is kept fits in `max_bytes`."""
    ordered = sorted(rows, key=lambda r: (r.accessed_at, r.key))
    cutoff = now - retention.older_than_s if retention.older_than_s is not None else None
    evicted = [r for r in ordered if cutoff is not None and r.accessed_at < cutoff]
    kept = ordered[len(evicted) :]
    if retention.max_bytes is not None:
        total = sum(r.size_bytes for r in kept)
        cut = 0
        while cut < len(kept) and total > retention.max_bytes:
            total -= kept[cut].size_bytes
            cut += 1
        evicted, kept = evicted + kept[:cut], kept[cut:]
    return evicted, kept


def due(summary: tuple[int, int, float | None], retention: Retention, now: float) -> bool:
    """Whether `(count, total bytes, oldest accessed_at)` holds anything `retention` would evict."""
    _count, total, oldest = summary
    if (
        retention.older_than_s is not None
        and oldest is not None
        and oldest < now - retention.older_than_s
    ):
        return True
    return retention.max_bytes is not None and total > retention.max_bytes


def prune(
    store, retention: Retention, *, dry_run: bool, sweep: bool = True, now: float | None = None
) -> Pruned:
    """Evict what `retention` says from `store` (a LocalStore) and, with `sweep`, clear orphans."""
    now = time.time() if now is None else now
    rows = [Row(*r) for r in store.entry_rows()]
    evicted, kept = choose(rows, retention, now)
    if not dry_run and evicted:
        store.evict([(r.key, r.crc) for r in evicted])
    indexed = {r.key: r.crc for r in (rows if dry_run else kept)}
    orphans, orphan_bytes, phantoms = (
        sweep_dir(store, indexed, dry_run, now) if sweep else (0, 0, 0)
    )
    return Pruned(
        dry_run,
        tuple(evicted),
        orphans,
        orphan_bytes,
        phantoms,
        len(kept),
        sum(r.size_bytes for r in kept),
    )


def clean(store, *, dry_run: bool, now: float | None = None) -> Pruned:
    """Every entry of `store` evicted (`vx cache clean`), and what no row accounts for swept, as
    `prune` sweeps it (a temp or artifact younger than an hour may be a save in flight)."""
    now = time.time() if now is None else now
    rows = sorted((Row(*r) for r in store.entry_rows()), key=lambda r: (r.task_id, r.key))
    if not dry_run and rows:
        store.evict([(r.key, r.crc) for r in rows])
    known = {r.key: r.crc for r in rows} if dry_run else {}
    orphans, orphan_bytes, phantoms = sweep_dir(store, known, dry_run, now, reindexable=False)
    return Pruned(dry_run, tuple(rows), orphans, orphan_bytes, phantoms)


def sweep_dir(
    store, known: dict[str, str], dry_run: bool, now: float, reindexable: bool = True
) -> tuple[int, int, int]:
    """(orphans, their bytes, phantom rows): artifacts and temps no row accounts for, an hour old,
    removed; rows whose artifact is gone, dropped. With `reindexable`, an artifact saved before
    the index was last reset stays for REINDEX_WINDOW_S after it (`vx cache clean` takes it)."""
    orphans, orphan_bytes, present = 0, 0, set()
    try:
        reset = os.stat(os.path.join(store.cache_dir, RESET_MARK)).st_mtime
    except OSError:
        reset = None
    waiting = reindexable and reset is not None and now - reset < REINDEX_WINDOW_S
    for entry in _listing(store.cache_dir):
        name = entry.name
        key = name[: -len(".tar.zst")] if name.endswith(".tar.zst") else None
        if key in known:
            present.add(key)
            continue
        if artifact_key(name) is None and not is_temp(name):
            continue  # the index, run summaries, anything else (the user's, in a named dir)
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if now - st.st_mtime < SWEEP_MIN_AGE_S:
            continue
        if waiting and key is not None and reset is not None and st.st_mtime <= reset:
            continue  # saved before the reset: a probe may still index it again
        orphans, orphan_bytes = orphans + 1, orphan_bytes + st.st_size
        if not dry_run:
            _unlink(entry.path)
    phantoms = sorted(set(known) - present)
    if phantoms and not dry_run:
        store.evict(
            [(key, known[key]) for key in phantoms]
        )  # by (key, crc): a re-save meanwhile stays
    return orphans, orphan_bytes, len(phantoms)


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


def _listing(directory) -> Sequence[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return [e for e in it if e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
