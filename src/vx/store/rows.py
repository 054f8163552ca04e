"""The index statements a warm run makes, shared by the store and the replay of a receipt.

A fully cached run confirms its rows, touches them and records the stamps of what it
restored. `vx.store.local` does that for the pipeline; `vx.fastpath.receipt` does it for a
replayed run, which loads neither sqlite3's package nor the store. One text of each statement
serves both. Stdlib only, no import at all: callers hand in their connection.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a replay loads this)
if TYPE_CHECKING:
    from typing import Any, Sequence

SQL_BATCH = 800  # IN-lists stay under 900 bound parameters (old SQLite caps at 999)
# Every connection to the index: wait for a writer rather than fail, and WAL + NORMAL (no fsync
# per commit; a cache may lose its last entry, never its consistency).
CONNECTION_PRAGMAS = ("PRAGMA busy_timeout=5000", "PRAGMA synchronous=NORMAL")


_left_open: list = []  # the committed connection `leave_open` keeps for the process's exit


def leave_open(db) -> None:
    """Keep a committed index connection open until the process exits (the CLI and a replay end
    with `os._exit`) rather than close it. Closing the last connection to a WAL database
    checkpoints it: the WAL synced, its pages copied into the database file, that synced, the
    WAL deleted — and the next run's first write makes it again and syncs its header and the
    directory: most of a restore's end on a busy disk (docs/benchmarks.md). Exiting with it open
    is what SQLite's WAL is built to survive: every committed transaction is in the WAL, the
    next connection reads it from there, and the checkpoint happens when a commit crosses
    `wal_autocheckpoint` or a run closes its store. A caller that goes on in-process (a test,
    `vx.api`) closes the one left before, so no more than one stays open."""
    while _left_open:
        _left_open.pop().close()
    _left_open.append(db)


def attach_store(db, path: str) -> None:
    """Attach a shared store's index as `store`, set up as the workspace's own; unqualified
    names then find its tables (`entries`, `entry_log`, `output_files`), which `main` lacks."""
    db.execute("ATTACH DATABASE ? AS store", (path,))
    for pragma in CONNECTION_PRAGMAS:
        if pragma.startswith("PRAGMA synchronous"):
            db.execute(pragma.replace("PRAGMA ", "PRAGMA store.", 1))


def chunked(items: Sequence[Any]) -> list[Any]:
    return [items[i : i + SQL_BATCH] for i in range(0, len(items), SQL_BATCH)]


def marks(n: int) -> str:
    return ",".join("?" * n)


def sizes_and_crcs(db, keys: list[str]) -> dict[str, tuple[int, str]]:
    """Each key's (size_bytes, crc) as the index holds it; absent keys are left out."""
    out = {}
    for batch in chunked(keys):
        for key, size, crc in db.execute(
            f"SELECT hash, size_bytes, crc FROM entries WHERE hash IN ({marks(len(batch))})", batch
        ):
            out[key] = (size, crc)
    return out


def touch(db, keys: list[str], now: float) -> None:
    """Set `accessed_at`: one statement per IN-list batch, not one per key."""
    for batch in chunked(keys):
        db.execute(
            f"UPDATE entries SET accessed_at=? WHERE hash IN ({marks(len(batch))})", (now, *batch)
        )


def write_stamps(db, root: str, due: dict[str, dict[str, tuple[int, int]]]) -> None:
    """Replace this workspace's stamps (ino, ctime_ns) of each key's outputs."""
    for batch in chunked(list(due)):
        db.execute(
            f"DELETE FROM output_stamps WHERE root=? AND hash IN ({marks(len(batch))})",
            (root, *batch),
        )
    db.executemany(
        "INSERT INTO output_stamps VALUES (?,?,?,?,?)",
        [
            (key, root, path, ino, ctime)
            for key, stamps in due.items()
            for path, (ino, ctime) in stamps.items()
        ],
    )
