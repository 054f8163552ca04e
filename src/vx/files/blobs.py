"""Git blob identities for the files the index cannot vouch for (dirty, untracked, untrusted).

A file is hashed in-process exactly as `git hash-object` would, and the OID is memoised on the
file's stat (mtime, size, ctime, inode) in a small SQLite table, so across runs a file is read
once until it changes. A file still inside its timestamp tick ("racy") is never memoised.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

Stat = tuple[int, int, int, int]  # (mtime_ns, size, ctime_ns, ino)


def stat_key(st: os.stat_result) -> Stat:
    return (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino)


# Bytes a run hashes with the interpreter's own sha1 before it loads hashlib: OpenSSL is slow
# to load and fast to hash, so the builtin pays for a few small edited files — the usual dirty
# tree — and OpenSSL for anything bigger (docs/optimizations.md #24).
BUILTIN_BYTES = 256 << 10
_builtin_left = BUILTIN_BYTES


def _new_hash(algo: str, size: int):
    """A blob hash for `size` bytes, its `blob <size>\\0` header already in."""
    global _builtin_left
    header = b"blob %d\0" % size
    if algo == "sha1" and size <= _builtin_left and "hashlib" not in sys.modules:
        try:
            from _sha1 import sha1
        except ImportError:
            pass
        else:
            _builtin_left -= size  # unlocked: a race only shifts when OpenSSL loads
            return sha1(header)
    import hashlib  # only a dirty tree hashes: the clean path never loads it

    return hashlib.new(algo, header)


def blob_oid(data: bytes, algo: str = "sha1") -> str:
    """Hash bytes as a git blob (`git hash-object`): `<algo>("blob <len>\\0" + data)`."""
    h = _new_hash(algo, len(data))
    h.update(data)
    return h.hexdigest()


def hash_open_file(f, size: int, algo: str) -> str:
    """Stream a file into a blob hash; re-read whole if it changed length under us."""
    h = _new_hash(algo, size)
    seen = 0
    while chunk := f.read(1 << 20):
        h.update(chunk)
        seen += len(chunk)
    if seen == size:
        return h.hexdigest()
    f.seek(0)
    return blob_oid(f.read(), algo)


class BlobMemo:
    """Blob OIDs of worktree files keyed on their stat, persisted in SQLite across runs.

    sqlite3 is imported only when the first dirty or untracked file needs hashing, so a
    clean warm run never pays for it. Any SQLite trouble just disables the memo: it is an
    optimisation, never a source of truth.
    """

    def __init__(self, path: Path | None, algo: str):
        self._path, self._algo = path, algo
        self._rows: dict[str, tuple[Stat, str]] | None = None
        self._pending: dict[str, tuple[Stat, str]] = {}
        self._lock = threading.Lock()

    def get(self, rel: str, key: Stat) -> str | None:
        """The remembered OID of `rel`, only if its stat is still `key`."""
        with self._lock:
            if self._rows is None:
                self._rows = self._load()
            row = self._pending.get(rel) or self._rows.get(rel)
        return row[1] if row and row[0] == key else None

    def put(self, rel: str, key: Stat, oid: str) -> None:
        """Remember an OID; nothing is written until `flush`."""
        with self._lock:
            self._pending[rel] = (key, oid)

    def _connect(self):
        import sqlite3

        assert self._path is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, timeout=5)
        db.execute(
            "CREATE TABLE IF NOT EXISTS file_blob_memo (path TEXT PRIMARY KEY, algo TEXT,"
            " mtime_ns INTEGER, size INTEGER, ctime_ns INTEGER, ino INTEGER, oid TEXT)"
        )
        return db

    def _load(self) -> dict[str, tuple[Stat, str]]:
        if self._path is None:
            return {}
        import sqlite3

        try:
            db = self._connect()
            try:
                rows = db.execute(
                    "SELECT path, mtime_ns, size, ctime_ns, ino, oid FROM file_blob_memo WHERE algo = ?",
                    (self._algo,),
                ).fetchall()
            finally:
                db.close()
        except (sqlite3.Error, OSError):
            self._path = None
            return {}
        return {r[0]: ((r[1], r[2], r[3], r[4]), r[5]) for r in rows}

    def flush(self) -> None:
        """Write the hashes learnt since the last flush, in one transaction."""
        with self._lock:
            pending, self._pending = self._pending, {}
            if self._rows is not None:
                self._rows.update(pending)
        if not pending or self._path is None:
            return
        import sqlite3

        rows = [(p, self._algo, *key, oid) for p, (key, oid) in pending.items()]
        try:
            db = self._connect()
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO file_blob_memo VALUES (?, ?, ?, ?, ?, ?, ?)", rows
                )
            db.close()
        except (sqlite3.Error, OSError):
            self._path = None
