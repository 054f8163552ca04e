"""The key history: each distinct key of a task is kept with the components it was
folded from, so `vx why TASK` (`vx.cli.why`) can name what changed between the last two.

The components live beside the cache index, in a table of their own in `cache.db` (the store's
schema gate leaves other tables alone): per task the last `KEEP` keys, each with its record —
file identities, declared env (values as digests: a key may fold a secret, the history never
holds one), config, package.json, fingerprint, forwarded args (a digest too) and upstream keys. A run writes
only keys it has not seen, so a warm run costs one batched SELECT.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Iterable, Mapping

import msgspec

from vx.model import HashRecord
from vx.store.rows import chunked, marks

TABLE = (
    "CREATE TABLE IF NOT EXISTS key_history (task_id TEXT NOT NULL, key TEXT NOT NULL,"
    " recorded_at REAL NOT NULL, record TEXT NOT NULL, PRIMARY KEY (task_id, key)) WITHOUT ROWID"
)
KEEP = 8
# The last run's word on a task that ran and was not saved, while its key is still the newest.
UNSAVED = (
    "CREATE TABLE IF NOT EXISTS key_unsaved (task_id TEXT PRIMARY KEY, key TEXT NOT NULL,"
    " reason TEXT NOT NULL, recorded_at REAL NOT NULL) WITHOUT ROWID"
)


def record_keys(
    db, records: Iterable[tuple[str, HashRecord]], settled: Iterable[tuple[str, HashRecord]] = ()
) -> int:
    """Keep `records` ((key, record) pairs) whose key is not already the task's newest: a new key
    is inserted, a key seen before (a change reverted) becomes the newest again. `settled` (the
    up-to-date hits, whose keys the history already has) is kept only into an empty history — the
    first run that keeps one. A run whose keys did not move writes nothing. Returns rows written."""
    db.execute(TABLE)
    wanted = {(record.task_id, key): record for key, record in records}
    if db.execute("SELECT 1 FROM key_history LIMIT 1").fetchone() is None:
        wanted.update(((record.task_id, key), record) for key, record in settled)
    if not wanted:
        return 0
    seen: set[tuple[str, str]] = set()
    newest: dict[str, tuple[float, str]] = {}
    for batch in chunked(sorted({task for task, _key in wanted})):
        for task, key, at in db.execute(
            f"SELECT task_id, key, recorded_at FROM key_history WHERE task_id IN ({marks(len(batch))})",
            batch,
        ):
            seen.add((task, key))
            newest[task] = max(newest.get(task, (at, key)), (at, key))
    moved = [(task, key) for task, key in wanted if newest.get(task, (0.0, None))[1] != key]
    if not moved:
        return 0
    now = time.time()
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany(
            "UPDATE key_history SET recorded_at=? WHERE task_id=? AND key=?",
            [(now, t, k) for t, k in moved if (t, k) in seen],
        )
        db.executemany(
            "INSERT INTO key_history VALUES (?,?,?,?)",
            [(t, k, now, _encode(wanted[(t, k)])) for t, k in moved if (t, k) not in seen],
        )
        db.executemany(
            "DELETE FROM key_history WHERE task_id=? AND key NOT IN "
            "(SELECT key FROM key_history WHERE task_id=? ORDER BY recorded_at DESC LIMIT ?)",
            [(t, t, KEEP) for t in sorted({t for t, _k in moved})],
        )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return len(moved)


def record_unsaved(db, withheld: Iterable[tuple[str, str, str]], saved: Iterable[str]) -> None:
    """Keep why each task in `withheld` ((task, key, reason)) was not saved, and forget it for the
    tasks in `saved`. Only tasks that ran come here, so a warm run writes nothing."""
    withheld, forgotten = list(withheld), [(task,) for task in saved]
    if not withheld and not forgotten:
        return
    db.execute(UNSAVED)
    now = time.time()
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany("DELETE FROM key_unsaved WHERE task_id=?", forgotten)
        db.executemany(
            "INSERT OR REPLACE INTO key_unsaved VALUES (?,?,?,?)",
            [(task, key, reason, now) for task, key, reason in withheld],
        )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def unsaved_reason(db, task_id: str, key: str) -> str | None:
    """Why the task's `key` was not saved by the last run that ran it; None when it was, or when
    an entry for it exists by now (another run or a remote saved it)."""
    try:
        row = db.execute(
            "SELECT reason FROM key_unsaved WHERE task_id=? AND key=?"
            " AND NOT EXISTS (SELECT 1 FROM entries WHERE hash=?)",
            (task_id, key, key),
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # no table yet
            return None
        raise
    return row[0] if row else None


def _encode(record: HashRecord) -> str:
    # msgspec rather than json.dumps: a fresh clone's first run writes every task's record
    return msgspec.json.encode(
        {
            "fingerprint": record.fingerprint,
            "package": record.package_json,
            "config": record.config,
            "args": _digest("\0".join(record.forward_args))
            if record.forward_args
            else None,  # may hold a secret
            "env": {name: None if value is None else _digest(value) for name, value in record.env},
            "upstream": dict(record.upstream),
            "files": dict(record.files),
            "lockfile": _lockfile_parts(record.lockfile),
            "runtime": {label: _digest(value) for label, value in record.runtime},
            "plugin": {name: _digest(value) for name, value in record.plugin},
        }
    ).decode()


def _lockfile_parts(folded) -> dict[str, str]:
    from vx.files.lockfile import why_parts

    return why_parts(folded)


def _digest(value: str) -> str | None:
    from vx.dotvx import env_digest  # seeded per user: see there

    return env_digest(value)


def last_two(db, task_id: str) -> list[tuple[str, float, dict]]:
    """The task's two most recent keys, newest first: (key, recorded_at, components)."""
    try:
        rows = db.execute(
            "SELECT key, recorded_at, record FROM key_history WHERE task_id=? "
            "ORDER BY recorded_at DESC LIMIT 2",
            (task_id,),
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # no table yet: nothing recorded
            return []
        raise
    return [(key, at, json.loads(record)) for key, at, record in rows]


def kept(db, task_id: str, key: str) -> tuple[float, dict] | None:
    """(recorded_at, components) of one of the task's keys; None when the history no longer
    keeps it (only the last `KEEP` are) or never had it."""
    try:
        row = db.execute(
            "SELECT recorded_at, record FROM key_history WHERE task_id=? AND key=?",
            (task_id, key),
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return (row[0], json.loads(row[1])) if row else None


# ---------------------------------------------------------------- what changed


def differences(old: Mapping, new: Mapping) -> list[tuple[str, str]]:
    """(kind, what) for each component that differs, in fold order; files by path."""
    out: list[tuple[str, str]] = []
    if old["fingerprint"] != new["fingerprint"]:
        moved = (
            _lockfile_moves(old["lockfile"], new["lockfile"])
            if "lockfile" in old and "lockfile" in new
            else []
        )
        out += moved or [("workspace", "the lockfiles or install settings (or the vx version)")]
    if old["package"] != new["package"]:
        out.append(("package", "package.json"))
    if old["config"] != new["config"]:
        out.append(("config", "the task's declaration"))
    if old["args"] != new["args"]:
        out.append(("forward", "the arguments after `--`"))
    for name in sorted(set(old["env"]) | set(new["env"])):
        if old["env"].get(name, "absent") != new["env"].get(name, "absent"):
            out.append(("env", name))
    old_rt, new_rt = old.get("runtime", {}), new.get("runtime", {})
    for label in sorted(set(old_rt) | set(new_rt)):
        if old_rt.get(label, "absent") != new_rt.get(label, "absent"):
            out.append(_runtime_kind(label))
    old_pl, new_pl = old.get("plugin", {}), new.get("plugin", {})
    for name in sorted(set(old_pl) | set(new_pl)):
        if old_pl.get(name, "absent") != new_pl.get(name, "absent"):
            out.append(("plugin", name))
    for task in sorted(set(old["upstream"]) | set(new["upstream"])):
        if old["upstream"].get(task) != new["upstream"].get(task):
            out.append(("upstream", task))
    of, nf = old["files"], new["files"]
    out += [("file", f"{path} (added)") for path in sorted(set(nf) - set(of))]
    out += [("file", f"{path} (removed)") for path in sorted(set(of) - set(nf))]
    out += [("file", path) for path in sorted(set(of) & set(nf)) if of[path] != nf[path]]
    return out


def _runtime_kind(label: str) -> tuple[str, str]:
    """`node` -> the Node version; `runtime:<command>:stdout` -> (runtime, `<command>` (stdout))."""
    if ":" not in label:
        return ("runtime", "the Node version on the task's PATH (node -v)")
    kind, _, rest = label.partition(":")
    command, _, stream = rest.rpartition(":")
    return (kind, f"{command} ({stream})")


def _lockfile_moves(old: Mapping, new: Mapping) -> list[tuple[str, str]]:
    """The dependencies whose resolution moved in the project's share of the lockfile."""
    out = [("lockfile", f"{label} (added)") for label in sorted(set(new) - set(old))]
    out += [("lockfile", f"{label} (removed)") for label in sorted(set(old) - set(new))]
    return out + [
        ("lockfile", label) for label in sorted(set(old) & set(new)) if old[label] != new[label]
    ]
