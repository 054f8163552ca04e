"""The local cache store: a SQLite index plus one `<key>.tar.zst` artifact per entry.

The index answers the warm path alone: `probe` and `is_up_to_date` are pure SQL plus
lstat, and a hit replays its log from the row, so a fully cached run never opens an
artifact. The artifact is the record: `restore` re-validates it completely and keeps nothing
of one that fails, and a damaged one is dropped and becomes a miss.

`sqlite3` is imported when a store opens, never at import time.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Iterator, Mapping, Sequence

from msgspec import Struct

from vx.errors import FDS_HINT, EnvironmentFailure, OutOfFds, VxError
from vx.model import LogChunk, OutputFile
from vx.store import archive, packing, rows, unpacking
from vx.store.archive import ArchiveError
from vx.store.location import foreign
from vx.store.rows import chunked, marks
from vx.witness import output_stat

if TYPE_CHECKING:
    import sqlite3

SCHEMA_VERSION = "py-2"
# A workspace's index beside a shared store holds only the stamps: its own version, so a
# workspace that moves between the two layouts never reads entries left in the other.
SPLIT_VERSION = SCHEMA_VERSION + "-stamps"
DB_NAME = "cache.db"
STORE_DB = "store.db"  # the shared store's index (vx.store.shared)
# Its mtime: when the entries' index was last reset (a new schema, or made afresh). The artifacts
# older than it have no row until a probe indexes them again from their bytes (`_reindex`), and
# the sweep leaves them that long (vx.store.pruning.REINDEX_WINDOW_S).
RESET_MARK = ".vx-reset"
LOG_HALF = 8 << 20  # keep the first and the last 8 MiB of a task's log
_TOUCHED_READ = 16  # touched outputs a miss compares by content before it wipes instead

_TABLES = {
    "entries": "CREATE TABLE entries (hash TEXT PRIMARY KEY, task_id TEXT NOT NULL,"
    " command TEXT NOT NULL, duration_ms REAL NOT NULL, size_bytes INTEGER NOT NULL,"
    " created_at REAL NOT NULL, accessed_at REAL NOT NULL, cpu_ms REAL, peak_rss_bytes INTEGER,"
    " crc TEXT NOT NULL) WITHOUT ROWID",  # one b-tree seek per probed key, not two
    "entry_log": "CREATE TABLE entry_log (hash TEXT PRIMARY KEY, log BLOB NOT NULL)",
    "output_files": "CREATE TABLE output_files (hash TEXT NOT NULL, path TEXT NOT NULL,"
    " size INTEGER NOT NULL, mode INTEGER NOT NULL, mtime_ms INTEGER NOT NULL,"
    " PRIMARY KEY (hash, path)) WITHOUT ROWID",
    # Stamps are per workspace: a cache dir shared by two checkouts must
    # not let one checkout's inode numbers vouch for the other's files.
    "output_stamps": "CREATE TABLE output_stamps (hash TEXT NOT NULL, root TEXT NOT NULL,"
    " path TEXT NOT NULL, ino INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,"
    " PRIMARY KEY (hash, root, path)) WITHOUT ROWID",
}
# Per workspace too: since when the outputs of an entry it saved or restored (one that holds tsc's
# build info) have stood unchanged but for the entries named, as vx wrote them (engine/dating.py).
KEPT_TABLE = (
    "CREATE TABLE IF NOT EXISTS kept_since (hash TEXT NOT NULL, root TEXT NOT NULL,"
    " since_ns INTEGER NOT NULL, dated_ns INTEGER NOT NULL, upstream TEXT NOT NULL,"
    " PRIMARY KEY (hash, root)) WITHOUT ROWID"
)
_CHILD_TABLES = ("entry_log", "output_files", "output_stamps")
_STORE_TABLES = ("entries", "entry_log", "output_files")  # what a shared store's index holds
# Every table the cache index and the run history keep: one going missing under a run means
# another vx reset them (the CLI says so rather than report a bug).
INDEX_TABLES = frozenset(
    (*_TABLES, "schema_meta", "kept_since", "invocations", "runs", "key_history", "key_unsaved")
)
_FILES_WITH_STAMPS = (
    "SELECT f.hash, f.path, f.size, f.mode, f.mtime_ms, s.ino, s.ctime_ns FROM output_files f"
    " LEFT JOIN output_stamps s ON s.hash = f.hash AND s.root = ? AND s.path = f.path"
    " WHERE f.hash IN ({marks}) ORDER BY f.hash, f.path"
)
_ENTRY_COLUMNS = (
    "hash, task_id, command, duration_ms, size_bytes, created_at, cpu_ms, peak_rss_bytes, crc"
)


class CacheFull(EnvironmentFailure):
    """The cache's disk is full (or failing): what could not be written is dropped, the build
    goes on. `first` is True for the first of a run, the one that is reported."""

    first = True


_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL, _SQLITE_IOERR = 13, 10
_PRUNE_HINT = "free some space, or prune the cache with `vx cache prune --max-size …`"


def _sqlite_full(e: BaseException) -> bool:
    """A database error that is the disk's: full, or an I/O error (what a full disk gives WAL's shm)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is None:
        text = str(e)
        return "disk is full" in text or "disk I/O error" in text
    return code & 0xFF in (_SQLITE_FULL, _SQLITE_IOERR)


class KeptSince(Struct, frozen=True):
    """What this workspace noted of an entry it saved or restored: `since_ns`, a time of its own
    clock no later than the first read of what the outputs were built from; `dated_ns`, when the
    save or restore was done; and the stamps (ino, ctime_ns), by workspace-relative path, of the
    outputs of the entry and of the entries upstream of it as vx last wrote them here: a file
    that still shows one of these is that entry's file."""

    since_ns: int
    dated_ns: int
    stamps: dict[str, tuple[int, int]]


class CacheLayoutClash(VxError):
    """The cache dir's index is of the other layout (own entries vs shared store): refused, never
    reset, as another run may be using it."""

    code = "VX_E_REFUSED"


class DamagedEntry(Exception):
    """The artifact behind a hit failed a check; the caller treats it as a miss."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Entry(Struct, frozen=True):
    """One cached result as the index knows it.

    `stamps` line up with `files`: this workspace's (ino, ctime_ns) of each file after
    its last save or restore here, or None where none was recorded.
    """

    key: str
    task_id: str
    command: str
    files: tuple[OutputFile, ...]
    duration_ms: float
    size_bytes: int
    created_at: float
    cpu_ms: float | None = None
    peak_rss_bytes: int | None = None
    crc: str = ""
    stamps: tuple[tuple[int, int] | None, ...] = ()


def bound_log(log: Sequence[LogChunk], half: int | None = None) -> tuple[LogChunk, ...]:
    """Keep the first and last `half` bytes of the log, with a note naming the cut."""
    half = LOG_HALF if half is None else half
    total = sum(len(c.data) for c in log)
    if total <= 2 * half:
        return tuple(log)
    head, tail = _take(log, half), _take(log[::-1], half, from_end=True)[::-1]
    cut = total - sum(len(c.data) for c in head) - sum(len(c.data) for c in tail)
    note = LogChunk(2, f"\n[vx: {cut} bytes of output cut here]\n".encode())
    return (*head, note, *tail)


def _take(chunks: Sequence[LogChunk], budget: int, *, from_end: bool = False) -> list[LogChunk]:
    """Chunks from one end of the log up to `budget` bytes, cutting the last at a UTF-8 boundary."""
    out: list[LogChunk] = []
    for c in chunks:
        if budget <= 0:
            break
        if len(c.data) <= budget:
            out.append(c)
        else:
            out.append(LogChunk(c.stream, _utf8_cut(c.data, budget, from_end)))
        budget -= len(c.data)
    return out


def _utf8_cut(data: bytes, n: int, from_end: bool) -> bytes:
    """At most `n` bytes from one end of `data`, not splitting a UTF-8 sequence."""
    if from_end:
        start = len(data) - n
        while start < len(data) and data[start] & 0xC0 == 0x80:
            start += 1
        return data[start:]
    while 0 < n < len(data) and data[n] & 0xC0 == 0x80:
        n -= 1
    return data[:n]


class LocalStore:
    """One cache directory, one SQLite connection for the run, shared by threads under a lock.

    The rebuilder calls these methods through `asyncio.to_thread`, so every use of the
    connection holds `_lock`; packing and extracting happen outside it.
    """

    def __init__(
        self,
        cache_dir: Path,
        root: Path,
        store_dir: Path | None = None,
        *,
        fallback: bool = False,
    ):
        # `fallback`: an unsafe home kept the cache in the workspace, a layout the user did not
        # choose: an index of the shared layout there is reset as before, not refused.
        # `cache_dir` is where the artifacts live (and the temp files a save or a download
        # renames into them); `index_dir` the workspace's own. They differ only with a shared
        # store, whose index `store.db` the workspace's `cache.db` attaches.
        self.index_dir = Path(cache_dir)
        self.cache_dir = Path(store_dir) if store_dir is not None else self.index_dir
        self.shared = self.cache_dir != self.index_dir
        self.root = Path(root)
        self._root_key = str(self.root)
        self._root_prefix = os.path.join(self._root_key, "")
        self._artifact_prefix = os.path.join(str(self.cache_dir), "")
        self._uid = os.getuid()
        self._fallback = fallback
        self._cache_rel = _inside(str(self.cache_dir), self._root_key)
        self._lock = threading.Lock()
        self._remaking = threading.Lock()
        self._accessed: set[str] = set()
        self._fresh: dict[str, dict[str, tuple[int, int]]] = {}
        self._stamps_due: dict[
            str, dict[str, tuple[int, int]]
        ] = {}  # restored this run, written at close
        self._kept_due: dict[str, tuple[int, int, str]] = {}  # noted this run, written at close
        self._full_seen = False  # a save found the disk full: later ones are not reported again
        self._adoptions = _GroupCommit(self)
        self.spans: dict[str, list[float]] = {
            "save": [],
            "restore": [],
        }  # seconds per call, for VX_TIMING
        _prepare_dir(self.index_dir)
        if self.shared:
            _prepare_dir(self.cache_dir)
        self._db = self._connect()

    # ------------------------------------------------------------ lifecycle

    def _connect(self) -> "sqlite3.Connection":
        """Open the index with WAL and a busy timeout; reset it silently on a schema mismatch."""
        import sqlite3

        path = self.index_dir / DB_NAME
        store = self.cache_dir / STORE_DB
        fresh = [p for p in ((path, store) if self.shared else (path,)) if not p.exists()]
        # Another workspace's run may hold the shared store.db as it is made or changes journal
        # mode, and SQLite answers some of those locks at once instead of waiting: "locked" is
        # asked again, with backoff, for as long as a busy lock would be waited for.
        deadline, pause = time.monotonic() + 30, 0.01
        error: sqlite3.Error
        while True:
            db = None
            try:
                db = sqlite3.connect(
                    path, isolation_level=None, check_same_thread=False, timeout=5.0
                )
                self._set_up(db, store)
                return db
            except VxError:
                if db is not None:
                    db.close()
                raise
            except sqlite3.OperationalError as e:
                if db is not None:
                    db.close()
                if "locked" not in str(e) or time.monotonic() + pause > deadline:
                    error = e
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
            except sqlite3.Error as e:
                if db is not None:
                    db.close()
                error = e
                break
        if "locked" not in str(error):
            for made in fresh:  # made by this failed open: leave no index without tables behind
                for suffix in ("", "-wal", "-shm"):
                    _quiet_unlink(f"{made}{suffix}")
        if _sqlite_full(error):
            raise CacheFull(
                f"cannot open the cache index: {error}",
                facts=(f"path: {path}",),
                hint=_PRUNE_HINT,
            ) from None
        raise EnvironmentFailure(
            f"cannot open the cache index: {error}",
            facts=(f"path: {path}",),
            hint="check the cache directory's permissions and free space, or pass --cache-dir",
        ) from None

    def _set_up(self, db: "sqlite3.Connection", store: Path) -> None:
        for pragma in rows.CONNECTION_PRAGMAS:
            db.execute(pragma)
        # journal_mode is persistent in the file: the replay need not set it
        db.execute("PRAGMA journal_mode=WAL")
        self._refuse_other_layout(_schema_version(db, "main"))
        if self.shared:
            rows.attach_store(db, str(store))
            db.execute("PRAGMA store.journal_mode=WAL")
            before = _schema_version(db, "store")
            if _ensure_schema(db, "store", _STORE_TABLES, SCHEMA_VERSION):
                self._mark_reset(before)
            if _ensure_schema(db, "main", ("output_stamps",), SPLIT_VERSION):
                self._forget_local_artifacts()
        else:
            before = _schema_version(db, "main")
            if _ensure_schema(db, "main", tuple(_TABLES), SCHEMA_VERSION):
                self._mark_reset(before)

    def _refuse_other_layout(self, found: str | None) -> None:
        """Refuse an index this vx would reset only because it was made under the other layout
        (entries in the workspace's own cache vs beside the shared store): a run of that layout
        may be using it right now, and a reset drops its tables under it and every entry saved
        there. Another version's schema is still reset (docs/caching.md)."""
        other = SCHEMA_VERSION if self.shared else SPLIT_VERSION
        if found != other or self._fallback:
            return
        path = self.index_dir
        if self.shared:
            what = "holds its own entries (made by a vx run given this dir by VX_CACHE_DIR,"
            what += " --cache-dir, cacheDir or VX_SHARED_STORE=0)"
            hint = f"run with VX_CACHE_DIR={path} as the run that made it did; to use the"
            hint += f" repository's shared store here instead, remove it first (`rm -rf {path}`)"
        else:
            what = "is a workspace's index beside the repository's shared store (made by a vx"
            what += " run with no cache dir named)"
            hint = "name a cache dir of its own (e.g. VX_CACHE_DIR=.vx-cache), or run without"
            hint += f" VX_CACHE_DIR/--cache-dir/VX_SHARED_STORE=0; or remove it (`rm -rf {path}`)"
        raise CacheLayoutClash(
            f"the cache dir {path} {what}: this run would reset it, and lose what it holds",
            facts=(f"path: {path / DB_NAME}",),
            hint=hint,
        )

    def _mark_reset(self, before: str | None) -> None:
        """Note when an index of another schema was reset (not when one was made afresh)."""
        if before is None:
            return
        try:
            with open(os.path.join(self.cache_dir, RESET_MARK), "w"):
                pass
        except OSError:
            pass  # then the sweep may take the row-less artifacts: a colder store, never a wrong one

    def close(self, *, leave_open: bool = False) -> None:
        """Write the batched `accessed_at` updates and the restores' stamps in one
        transaction, a statement per IN-list batch rather than per task, and close the connection.

        With `leave_open`, the committed connection is kept to the process's exit instead
        (`rows.leave_open`): closing the last connection to a WAL database checkpoints it, which
        syncs the WAL and both index files (the workspace's and a shared store's), the most
        of a remote restore's end on a busy disk (docs/benchmarks.md)."""
        with self._lock:
            if self._db is None:
                return
            self._flush()
            if leave_open:
                rows.leave_open(self._db)
            else:
                self._db.close()
            self._db = None  # type: ignore[assignment]  # closed: nothing may use it after

    def flush(self) -> None:
        """Write the batched `accessed_at` updates and stamps now (before pruning reads them)."""
        with self._lock:
            if self._db is not None:
                self._flush()

    def _flush(self) -> None:
        import sqlite3

        if self._accessed or self._stamps_due or self._kept_due:
            try:
                with _transaction(self._db, immediate=True):
                    self._touch(list(self._accessed))
                    self._write_due_stamps()
                    self._write_due_kept()
            except (
                sqlite3.Error
            ) as e:  # a full disk loses only the stamps: those outputs restore again
                if not _sqlite_full(e):
                    raise
            self._accessed = set()

    def _touch(self, keys: list[str]) -> None:
        rows.touch(self._db, keys, time.time())

    def _write_due_stamps(self) -> None:
        due, self._stamps_due = self._stamps_due, {}
        rows.write_stamps(self._db, self._root_key, due)

    def _write_due_kept(self) -> None:
        if not self._kept_due:
            return
        import sqlite3

        due, self._kept_due = self._kept_due, {}
        self._db.execute(KEPT_TABLE)  # made by the first note: a run that notes none asks nothing
        crcs = self._crcs({k for _, _, upstream in due.values() for k in upstream.split()})
        notes = [
            (key, self._root_key, since, dated, _pinned(upstream, crcs))
            for key, (since, dated, upstream) in due.items()
        ]
        insert = "INSERT OR REPLACE INTO kept_since VALUES (?,?,?,?,?)"
        try:
            self._db.executemany(insert, notes)
        except sqlite3.OperationalError:  # a table of another shape: its notes are only lost
            self._db.execute("DROP TABLE kept_since")
            self._db.execute(KEPT_TABLE)
            self._db.executemany(insert, notes)

    def _crcs(self, keys: Iterable[str]) -> dict[str, str]:
        """Each entry's artifact checksum: which bytes its key holds now."""
        crcs: dict[str, str] = {}
        for batch in chunked(sorted(keys)):
            crcs.update(
                self._db.execute(
                    f"SELECT hash, crc FROM entries WHERE hash IN ({marks(len(batch))})", batch
                ).fetchall()
            )
        return crcs

    # ------------------------------------------------------------ kept outputs (engine/dating.py)

    def note_kept(self, key: str, since_ns: int, dated_ns: int, upstream: Sequence[str]) -> None:
        """Note that the entry's outputs were saved or restored here at `dated_ns` from what was
        on disk at `since_ns` or later, but for the outputs of the `upstream` entries; written at
        close (a crash loses the note, and without one a kept build info is dated to the epoch)."""
        with self._lock:
            self._kept_due[key] = (since_ns, dated_ns, " ".join(upstream))

    def kept_since(self, key: str) -> KeptSince | None:
        """What `note_kept` noted of the entry in this workspace, with the stamps of its outputs
        and its upstream entries' as this workspace last recorded them; None when nothing was."""
        import sqlite3

        with self._lock:
            due = self._kept_due.get(key)
            if due is None:
                try:
                    row = self._db.execute(
                        "SELECT since_ns, dated_ns, upstream FROM kept_since"
                        " WHERE hash=? AND root=?",
                        (key, self._root_key),
                    ).fetchone()
                except sqlite3.OperationalError:  # no note was ever written (no table), or
                    return None  # one of another shape, remade by the next note
                if row is None:
                    return None
                # an upstream entry saved again with other bytes since is not what was built on
                pinned = [p.split(":", 1) for p in row[2].split() if ":" in p]
                crcs = self._crcs(k for k, _ in pinned)
                due = (row[0], row[1], " ".join(k for k, crc in pinned if crcs.get(k) == crc))
            keys = [key, *due[2].split()]
            stamps: dict[str, tuple[int, int]] = {}
            stored = [k for k in keys if k not in self._fresh]
            for batch in chunked(stored):
                for path, ino, ctime in self._db.execute(
                    "SELECT path, ino, ctime_ns FROM output_stamps"
                    f" WHERE root=? AND hash IN ({marks(len(batch))})",
                    (self._root_key, *batch),
                ):
                    stamps[path] = (ino, ctime)
            for k in keys:
                stamps.update(self._fresh.get(k, {}))
        return KeptSince(due[0], due[1], stamps)

    def __enter__(self) -> "LocalStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def local(self) -> LocalStore:
        """The layer the run's probe answers from: this store (a layered store has one)."""
        return self

    def artifact(self, key: str) -> Path:
        return self.cache_dir / f"{key}.tar.zst"

    def _forget_local_artifacts(self) -> None:
        """The workspace's index moved to the split layout: the artifacts it held in its own dir
        (the old layout's) have no row any more, so they go rather than fill the disk unseen."""
        try:
            with os.scandir(self.index_dir) as it:
                for entry in it:
                    if artifact_key(entry.name) and entry.is_file(follow_symlinks=False):
                        _quiet_unlink(entry.path)
        except OSError:
            pass

    # ------------------------------------------------------------ probe

    def probe(self, keys: Iterable[str]) -> dict[str, Entry]:
        """Return the entries among `keys` whose artifact exists; pure SQL plus one stat per hit.

        The stat happens under the lock so an in-flight save in another thread is never
        mistaken for a torn artifact. A missing artifact drops its row; a size that
        disagrees with the row is only a miss, since another process may be mid-save.
        """
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            rows, outputs = self._select(wanted)
            sizes = {row[0]: self._artifact_size(row[0]) for row in rows}
        empty: tuple[list, list] = ([], [])
        hits = {}
        for row in rows:
            if sizes[row[0]] == row[4]:
                files, stamps = outputs.get(row[0], empty)
                hits[row[0]] = Entry(
                    row[0], row[1], row[2], tuple(files), *row[3:], stamps=tuple(stamps)
                )  # type: ignore[misc]  # row[3:] ends at crc
        gone = [(row[0], row[8]) for row in rows if sizes[row[0]] is None]
        if gone:
            self._drop(gone)
        if len(rows) < len(wanted):
            found = {row[0] for row in rows}
            for key in wanted:
                if key not in found and (entry := self._reindex(key)) is not None:
                    hits[key] = entry
        with self._lock:
            self._accessed.update(hits)
        return hits

    def _reindex(self, key: str) -> Entry | None:
        """An artifact without a row (the index was reset by a new schema, or lost its row in a
        crash) indexed again from its own bytes, after every check a restore makes: one stat for
        a key with no artifact. One that fails the checks, or predates the task facts in its
        meta, is removed: no run could ever index it. Another user's is left alone."""
        path = self._artifact_prefix + key + ".tar.zst"
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or (st.st_uid != self._uid and foreign(st) is not None):
            return None
        try:
            checked = unpacking.check(Path(path), key=key, allowed=self.guard(lambda _p: True))
            task_id, command, duration_ms = _task_facts(checked.meta)
        except ArchiveError:
            _quiet_unlink(path)
            return None
        except OSError:
            return None  # unreadable now (no descriptor left, say): a miss, the artifact kept
        found = checked.meta.get("exec")
        exec_meta = found if isinstance(found, dict) else {}
        cpu, rss = exec_meta.get("cpuMs"), exec_meta.get("peakRssBytes")
        cpu = cpu if isinstance(cpu, (int, float)) else None
        rss = rss if isinstance(rss, int) else None
        import sqlite3

        kept = bound_log(checked.log)
        info = packing.PackInfo(st.st_size, checked.files, checked.crc)
        row = (key, task_id, command, duration_ms, st.st_size, st.st_mtime, cpu, rss, checked.crc)
        with self._lock:
            try:
                with _transaction(self._db, immediate=True):
                    # Another run may have indexed or saved it meanwhile: its row stands.
                    if not self._db.execute(
                        "SELECT 1 FROM entries WHERE hash=?", (key,)
                    ).fetchone():
                        self._write_rows(
                            _Packed(Path(), key, info),
                            (*row, time.time()),
                            archive.encode_log(kept),
                        )
            except sqlite3.Error:
                return None  # the index is busy, full or failing: a miss, as before
        return Entry(
            key,
            task_id,
            command,
            checked.files,
            duration_ms,
            st.st_size,
            st.st_mtime,
            cpu,
            rss,
            checked.crc,
            stamps=(None,) * len(checked.files),
        )

    def _artifact_size(self, key: str) -> int | None:
        """Its size; -1 (never a row's, so a miss that keeps the row) for an artifact of another
        user's: whoever wrote it decides what a hit restores (`location.foreign`)."""
        try:
            st = os.stat(self._artifact_prefix + key + ".tar.zst")
        except OSError:
            return None
        return st.st_size if st.st_uid == self._uid or foreign(st) is None else -1

    def _select(self, keys: Sequence[str]) -> tuple[list[tuple], dict[str, tuple[list, list]]]:
        """Entry rows, and per key its output files with this workspace's stamps, in IN-list batches."""
        found: list[tuple] = []
        outputs: dict[str, tuple[list[OutputFile], list]] = {}
        for batch in chunked(keys):
            qs = marks(len(batch))
            found += self._db.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE hash IN ({qs})", batch
            )
            for h, path, size, mode, mtime_ms, ino, ctime_ns in self._db.execute(
                _FILES_WITH_STAMPS.format(marks=qs), (self._root_key, *batch)
            ):
                files, stamps = outputs.setdefault(h, ([], []))
                files.append(OutputFile(path, size, mode, mtime_ms))
                stamps.append(None if ino is None else (ino, ctime_ns))
        return found, outputs

    def log_of(self, entry: Entry) -> tuple[LogChunk, ...]:
        """The entry's log from its row, so a hit replays without opening the artifact."""
        with self._lock:
            row = self._db.execute(
                "SELECT log FROM entry_log WHERE hash=?", (entry.key,)
            ).fetchone()
        return archive.decode_log(row[0]) if row else ()

    def logs_of(self, entries: Sequence[Entry]) -> dict[str, tuple[LogChunk, ...]]:
        """`log_of` for many entries in one query per IN-list batch: the hit lane's warm path."""
        keys = [e.key for e in entries]
        out: dict[str, tuple[LogChunk, ...]] = {k: () for k in keys}
        with self._lock:
            for batch in chunked(keys):
                for key, blob in self._db.execute(
                    f"SELECT hash, log FROM entry_log WHERE hash IN ({marks(len(batch))})", batch
                ):
                    out[key] = archive.decode_log(blob)
        return out

    # ------------------------------------------------------------ up to date

    def is_up_to_date(self, entry: Entry, current: Collection[str]) -> bool:
        """True when the workspace already holds exactly the entry's outputs.

        Same file set, and each file matches on size, mode, ms mtime and the (ino, ctime)
        stamped here after the last save or restore; only lstat, never a read. This is on
        the fully cached path for every task, hence the flat loop.
        """
        if len(current) != len(entry.files):
            return False
        present = current if isinstance(current, (set, frozenset)) else set(current)
        expected = self.expected_outputs(entry)
        if expected is None:
            return False
        prefix = self._root_prefix
        for path, want in expected:
            if path not in present:
                return False
            try:
                if output_stat(os.lstat(prefix + path)) != want:
                    return False
            except OSError:
                return False
        return True

    def entry_on_disk(self, task_id: str, current: Collection[str]) -> Entry | None:
        """The entry of `task_id` the workspace holds exactly (the up-to-date check against its
        newest few entries), or None: what a miss may keep incremental state from. Off the warm
        path; touches nothing."""
        with self._lock:
            keys = [
                row[0]
                for row in self._db.execute(
                    "SELECT hash FROM entries WHERE task_id=? ORDER BY accessed_at DESC LIMIT 8",
                    (task_id,),
                )
            ]
            rows, outputs = self._select(keys)
        empty: tuple[list, list] = ([], [])
        present = set(current)
        by_key = {row[0]: row for row in rows}
        # newest first: of entries with the same files, the one written here last, whose note
        # (`kept_since`) is the latest
        for row in (by_key[k] for k in keys if k in by_key):
            files, stamps = outputs.get(row[0], empty)
            entry = Entry(row[0], row[1], row[2], tuple(files), *row[3:], stamps=tuple(stamps))  # type: ignore[misc]  # row[3:] ends at crc
            if len(present) != len(entry.files) or any(f.path not in present for f in files):
                continue
            if self._holds(entry):
                return entry
        return None

    def _holds(self, entry: Entry) -> bool:
        """Whether each output file on disk is the entry's: current by its stamp, or — a file
        another tool touched (`tsc -b` updates the timestamps of the projects it references) —
        the same size and mode and, read back from the artifact, the same bytes."""
        touched = []
        for f, stamp in zip(entry.files, entry.stamps):
            try:
                st = os.lstat(self._root_prefix + f.path)
            except OSError:
                return False
            if stamp is not None and output_stat(st) == (
                stat.S_IFREG | f.mode,
                f.size,
                f.mtime_ms,
                *stamp,
            ):
                continue
            if st.st_mode != stat.S_IFREG | f.mode or st.st_size != f.size:
                return False
            touched.append(f.path)
        if not touched:
            return True
        if len(touched) > _TOUCHED_READ:
            return False
        try:
            saved = unpacking.read_outputs(self.artifact(entry.key), set(touched))
            for path in touched:
                with open(self._root_prefix + path, "rb") as disk:
                    if saved.get(path) != disk.read():
                        return False
        except (OSError, ArchiveError):
            return False
        return True

    def output_bytes(self, entry: Entry) -> dict[str, bytes]:
        """Every output file of `entry` (workspace-relative path -> its bytes), read from its
        artifact with nothing written: what `--verify=determinism` compares a second run with."""
        return unpacking.read_outputs(self.artifact(entry.key), {f.path for f in entry.files})

    def expected_outputs(
        self, entry: Entry
    ) -> list[tuple[str, tuple[int, int, int, int, int]]] | None:
        """Each output file of `entry` with the lstat values (`witness.output_stat`) it must show to
        be current: the saved size, mode and ms mtime, and this workspace's stamp — one taken by a
        restore in this run if there was one. None when a file has no stamp (never current)."""
        fresh = self._fresh.get(entry.key)
        stamps = entry.stamps if fresh is None else [fresh.get(f.path) for f in entry.files]
        if len(stamps) != len(entry.files):
            return None
        out = []
        for f, stamp in zip(entry.files, stamps):
            if stamp is None:
                return None
            out.append((f.path, (stat.S_IFREG | f.mode, f.size, f.mtime_ms, *stamp)))
        return out

    # ------------------------------------------------------------ restore

    def restore(self, entry: Entry, allowed: Callable[[str], bool]) -> tuple[LogChunk, ...]:
        """Extract the entry's outputs, stamp them, and return its log.

        Raises DamagedEntry (after dropping the entry) when the artifact fails any check or
        vanished since the probe; a workspace that refuses writes raises
        EnvironmentFailure instead, since that is not the artifact's fault.
        """
        t0 = time.perf_counter()
        return self.finish_restore(entry, self.extract(entry, allowed), time.perf_counter() - t0)

    def guard(self, allowed: Callable[[str], bool]) -> Callable[[str], bool]:
        """`allowed`, and never a path inside the cache dir (when it lies in the workspace)."""
        cut = self._cache_rel
        if cut is None:
            return allowed
        return lambda path: not (path == cut[:-1] or path.startswith(cut)) and allowed(path)

    def extract(self, entry: Entry, allowed: Callable[[str], bool]) -> unpacking.Unpacked | str:
        """The file half of `restore`: unpack, or say why the artifact is damaged. It never touches
        the index, so a forked restore worker may run it (the hit lane's process pool)."""
        try:
            return unpacking.unpack(
                self.artifact(entry.key), key=entry.key, allowed=self.guard(allowed), root=self.root
            )
        except FileNotFoundError:
            return "the artifact vanished since the lookup"
        except ArchiveError as e:
            return e.message
        except OSError as e:
            return f"unreadable artifact: {e.strerror}"

    def finish_restore(
        self, entry: Entry, extracted: unpacking.Unpacked | str, seconds: float
    ) -> tuple[LogChunk, ...]:
        """The index half of `restore`: stamp what was written, or drop a damaged entry and raise."""
        if isinstance(extracted, str):
            self._drop([(entry.key, entry.crc)])
            raise DamagedEntry(extracted)
        self._stamp(entry.key, [f.path for f in extracted.files])
        self.spans["restore"].append(seconds)
        return extracted.log

    def stamp_restored(self, key: str, paths: Sequence[str]) -> None:
        """Stamp outputs another thread restored from this entry's artifact (a download
        restored as soon as it was proven), as `restore` stamps its own."""
        self._stamp(key, paths)

    def _stamp(self, key: str, paths: Sequence[str]) -> None:
        """Record (ino, ctime_ns) of the files just written: in memory for this run at once,
        in the index at `close` with every other restore's. A crash before then loses only the
        stamps, and a file without a stamp is never current, so the next run restores it again."""
        stamps = {}
        for path in paths:
            try:
                st = os.lstat(os.path.join(self._root_key, path))
            except FileNotFoundError:  # removed meanwhile: no stamp, so never current
                continue
            stamps[path] = (st.st_ino, st.st_ctime_ns)
        self._fresh[key] = stamps
        with self._lock:
            self._stamps_due[key] = stamps

    def _write_stamps(self, key: str, stamps: dict[str, tuple[int, int]]) -> None:
        self._db.execute("DELETE FROM output_stamps WHERE hash=? AND root=?", (key, self._root_key))
        self._db.executemany(
            "INSERT INTO output_stamps VALUES (?,?,?,?,?)",
            [(key, self._root_key, path, ino, ctime) for path, (ino, ctime) in stamps.items()],
        )

    # ------------------------------------------------------------ pruning (vx.store.pruning)

    def entry_rows(self) -> list[tuple[str, str, int, float, str]]:
        """Every entry as (key, task id, artifact bytes, accessed_at, crc)."""
        with self._lock:
            return list(
                self._db.execute("SELECT hash, task_id, size_bytes, accessed_at, crc FROM entries")
            )

    def entry_summary(self) -> tuple[int, int, float | None]:
        """(entries, their bytes, the oldest accessed_at): whether a retention is due, in one query."""
        with self._lock:
            count, total, oldest = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(size_bytes), 0), MIN(accessed_at) FROM entries"
            ).fetchone()
        return count, total, oldest

    def keep_history(self, records, settled=(), withheld=(), saved=()) -> None:
        """Keep the components of keys not seen before, and why tasks that ran were not saved,
        for `vx why` (`vx.store.history`)."""
        from vx.store.history import record_keys, record_unsaved

        with self._lock:
            if self._db is not None:
                record_keys(self._db, records, settled)
                record_unsaved(self._db, withheld, saved)

    def evict(self, entries: Sequence[tuple[str, str]]) -> None:
        """Drop (key, crc) entries: their rows and artifacts."""
        self._drop(entries)

    def _drop(self, entries: Sequence[tuple[str, str]]) -> None:
        """Forget (key, crc) entries and delete their artifacts, so the next run does not retry them.

        Only the row that was seen goes: if another process re-saved the key meanwhile,
        its crc differs and the fresh entry stays.
        """
        with self._lock:
            if self._db is None:
                return
            with _transaction(self._db, immediate=True):
                delete = "DELETE FROM entries WHERE hash=? AND crc=?"
                dropped = [
                    (key,) for key, crc in entries if self._db.execute(delete, (key, crc)).rowcount
                ]
                for table in _CHILD_TABLES:
                    self._db.executemany(f"DELETE FROM {table} WHERE hash=?", dropped)
                if dropped and _has_table(self._db, "kept_since"):
                    self._db.executemany("DELETE FROM kept_since WHERE hash=?", dropped)
        for (key,) in dropped:
            _quiet_unlink(self.artifact(key))
            self._fresh.pop(key, None)
            self._stamps_due.pop(key, None)
            self._kept_due.pop(key, None)

    # ------------------------------------------------------------ save

    def save(
        self,
        key: str,
        *,
        task_id: str,
        command: str,
        log: Sequence[LogChunk],
        files: Sequence[str],
        duration_ms: float,
        cpu_ms: float | None = None,
        peak_rss_bytes: int | None = None,
    ) -> int:
        """Pack the outputs and index them atomically; return the artifact's size.

        Packing happens outside the lock into a unique temp file; then one BEGIN IMMEDIATE
        transaction renames it into place and writes the rows. A failed commit puts the
        previous artifact back, so index and files never disagree.
        """
        t0 = time.perf_counter()
        kept = bound_log(log)
        try:
            task = {"id": task_id, "command": command, "durationMs": duration_ms}
            packed = self._pack(key, kept, files, cpu_ms, peak_rss_bytes, task)
            info, now = packed.info, time.time()
            row = (
                key,
                task_id,
                command,
                duration_ms,
                info.size_bytes,
                now,
                cpu_ms,
                peak_rss_bytes,
                info.crc,
                now,
            )
            with self._lock:
                self._install(packed, row, archive.encode_log(kept))
        except CacheFull as e:
            e.first, self._full_seen = not self._full_seen, True
            raise
        self._fresh[key] = {path: (ino, ctime) for path, ino, ctime in info.stamps}
        self.spans["save"].append(time.perf_counter() - t0)  # list.append: safe from any thread
        return info.size_bytes

    # This store is its own local layer (`vx.store.protocol`): a save here is always local.
    save_local = save

    def adopt(
        self,
        temp: Path | bytes,
        key: str,
        *,
        task_id: str,
        command: str,
        duration_ms: float,
        checked: unpacking.Checked,
        size_bytes: int,
    ) -> Entry:
        """Index an artifact that arrived from elsewhere (a remote hit) as if it was saved here.

        Why: the downloaded bytes become the local record unchanged, so the next run hits
        locally. `temp` must sit in the cache dir, or be the artifact's bytes (the thread that
        commits writes them to a temp file there), and must already have passed
        `unpacking.check`.
        """
        kept = bound_log(checked.log)
        found = checked.meta.get("exec")
        exec_meta = found if isinstance(found, dict) else {}
        cpu, rss = exec_meta.get("cpuMs"), exec_meta.get("peakRssBytes")
        cpu = cpu if isinstance(cpu, (int, float)) else None
        rss = rss if isinstance(rss, int) else None
        info, now = packing.PackInfo(size_bytes, checked.files, checked.crc), time.time()
        row = (key, task_id, command, duration_ms, size_bytes, now, cpu, rss, checked.crc, now)
        if isinstance(temp, bytes):
            self._adoptions.install(_Packed(Path(), key, info), row, archive.encode_log(kept), temp)
        else:
            self._adoptions.install(_Packed(temp, key, info), row, archive.encode_log(kept))
        self._fresh.pop(key, None)
        return Entry(
            key,
            task_id,
            command,
            checked.files,
            duration_ms,
            size_bytes,
            now,
            cpu,
            rss,
            checked.crc,
            stamps=(None,) * len(checked.files),
        )

    def _pack(
        self, key: str, log, files: Sequence[str], cpu_ms, peak_rss_bytes, task: dict
    ) -> "_Packed":
        """Pack into a fresh temp file in the cache dir; any failure removes it. The meta holds
        what the entry's row holds beyond the artifact itself (`task`: its id, command and
        duration), so an artifact whose row was lost is indexed again from its own bytes."""
        meta = {"exec": {"cpuMs": cpu_ms, "peakRssBytes": peak_rss_bytes}, "task": task}
        inside = self.guard(lambda _path: True)
        for path in files:
            if not inside(path):
                raise ArchiveError(
                    f"refused output {path}: it lies inside the cache directory",
                    hint="declare outputs that leave the cache directory out",
                )
        temp = self._temp(key)
        try:
            info = packing.pack(
                temp, key=key, log=log, files=[(p, self.root / p) for p in files], meta=meta
            )
        except ArchiveError:
            _quiet_unlink(temp)
            raise
        except OSError as e:
            _quiet_unlink(temp)
            raise _disk_failure(e, self.cache_dir) from None
        except BaseException:
            _quiet_unlink(temp)
            raise
        return _Packed(temp, key, info)

    def _temp(self, key: str) -> Path:
        """A new, empty, private file in the cache dir (`new_temp`), closed."""
        try:
            name, fd = self.new_temp(key)
        except OSError as e:
            raise _disk_failure(e, self.cache_dir) from None
        os.close(fd)
        return Path(name)

    def _temp_holding(self, key: str, data: bytes) -> Path:
        """`_temp` with `data` written into it through the descriptor that created it."""
        try:
            name, fd = self.new_temp(key)
        except OSError as e:
            raise _disk_failure(e, self.cache_dir) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as e:
            os.close(fd)
            _quiet_unlink(name)
            raise _disk_failure(e, self.cache_dir) from None
        os.close(fd)
        return Path(name)

    def new_temp(self, key: str, suffix: str = ".tmp") -> tuple[str, int]:
        """A new, empty, private file in the cache dir and its descriptor, open for writing, named
        as mkstemp would (without loading `tempfile` and `random` into a run that saves:
        docs/optimizations.md #24). Raises OSError.

        A cache dir removed under the run (`rm -rf ~/.vx` or a cleanup beside it) is made again,
        as the open made it, and the file made there: otherwise every download and save left in
        the run fails, and each of those tasks runs again and keeps nothing (docs/caching.md)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        remade = False
        while True:
            for _ in range(8):
                name = os.path.join(self.cache_dir, f".{key}.{os.urandom(6).hex()}{suffix}")
                try:
                    return name, os.open(name, flags, 0o600)
                except FileExistsError:
                    continue
                except FileNotFoundError:
                    if remade or not self._remake_dir():
                        raise
                    remade = True
                    break
            else:
                raise FileExistsError(errno.EEXIST, "no free temp name")

    def _remake_dir(self) -> bool:
        """Make the cache dir again after something removed it; False when it cannot be. The
        shared store's levels are made and checked as the open made them (`shared.remake`); a
        workspace's or a named dir is made as `_prepare_dir` makes it. Its index went with it:
        this run's rows go to the removed file and are lost at close, and the next run indexes
        the artifacts made since from their bytes (`_reindex`)."""
        with self._remaking:  # the threads that found it gone make it once
            if self.shared:
                from vx.store.shared import remake

                return remake(self.cache_dir)
            if not os.path.lexists(self.cache_dir):
                try:
                    _prepare_dir(self.cache_dir)
                except EnvironmentFailure:
                    return False
            # never through a link put there meanwhile
            return os.path.isdir(self.cache_dir) and not os.path.islink(self.cache_dir)

    def _install(self, packed: "_Packed", row: tuple, log_blob: bytes) -> None:
        """Rename the artifact in and write its rows in one transaction; undo both on failure.

        The previous artifact is kept through a hard link rather than moved aside, so a
        concurrent probe never sees the path missing.
        """
        final, backup, replaced = self.artifact(packed.key), None, False
        try:
            with _transaction(self._db, immediate=True):
                backup = _keep_previous(final)
                os.replace(packed.temp, final)
                replaced = True
                self._write_rows(packed, row, log_blob)
        except BaseException as e:
            _quiet_unlink(packed.temp)
            if replaced and backup is not None:
                os.replace(backup, final)
            elif replaced:
                _quiet_unlink(final)
            self._raise_index_full(e)
            raise
        if backup is not None:
            _quiet_unlink(backup)

    def _install_many(self, batch: Sequence[tuple["_Packed", tuple, bytes]]) -> None:
        """`_install` for several downloads in one transaction: each artifact renamed in, then
        every row, one COMMIT; any failure undoes every rename of the batch.

        Why: a remote restore adopts every task it downloads, and a transaction per artifact
        is most of what indexing one costs. A kill before the COMMIT leaves artifacts without
        rows (orphans, never read, swept by prune), never a row without its artifact. A failed
        batch puts each temp file back, so its artifacts can be installed again one by one.
        """
        if len(batch) == 1:
            with self._lock:
                self._install(*batch[0])
            return
        moved: list[tuple[Path, Path, Path | None]] = []
        try:
            with self._lock, _transaction(self._db, immediate=True):
                for packed, row, log_blob in batch:
                    final = self.artifact(packed.key)
                    backup = _keep_previous(final)
                    os.replace(packed.temp, final)
                    moved.append((packed.temp, final, backup))
                    self._write_rows(packed, row, log_blob)
        except BaseException as e:
            for temp, final, backup in reversed(moved):  # back where each came from, temps kept
                os.replace(final, temp)
                if backup is not None:
                    os.replace(backup, final)
            self._raise_index_full(e)
            raise
        for _temp, _final, backup in moved:
            if backup is not None:
                _quiet_unlink(backup)

    def _raise_index_full(self, e: BaseException) -> None:
        """An index write that failed for want of disk is CacheFull (the run goes on uncached);
        anything else is for the caller to re-raise."""
        import sqlite3

        if isinstance(e, sqlite3.Error) and _sqlite_full(e):
            raise CacheFull(
                f"cannot write to the cache index: {e}",
                facts=(f"path: {self.cache_dir}",),
                hint=_PRUNE_HINT,
            ) from None

    def _write_rows(self, packed: "_Packed", row: tuple, log_blob: bytes) -> None:
        key, info = packed.key, packed.info
        db = self._db
        db.execute(
            f"INSERT OR REPLACE INTO entries ({_ENTRY_COLUMNS}, accessed_at) VALUES ({marks(10)})",
            row,
        )
        db.execute("INSERT OR REPLACE INTO entry_log VALUES (?,?)", (key, log_blob))
        db.execute("DELETE FROM output_files WHERE hash=?", (key,))
        db.executemany(
            "INSERT INTO output_files VALUES (?,?,?,?,?)",
            [(key, f.path, f.size, f.mode, f.mtime_ms) for f in info.files],
        )
        self._write_stamps(key, {p: (ino, ctime) for p, ino, ctime in info.stamps})


class Opening:
    """A LocalStore being opened on a thread of its own, while the run does other work.

    Why: a fresh clone's first run makes the index's files and tables, and SQLite does that
    file work without holding the interpreter, so it overlaps the keys being made. `result`
    waits for it and raises what the open raised; `discard` waits and closes it."""

    def __init__(
        self, cache_dir: Path, root: Path, store_dir: Path | None = None, *, fallback: bool = False
    ):
        self._store: LocalStore | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._open,
            args=(cache_dir, root, store_dir, fallback),
            name="vx-open-cache",
            daemon=True,
        )
        self._thread.start()

    def _open(self, cache_dir: Path, root: Path, store_dir: Path | None, fallback: bool) -> None:
        try:
            self._store = LocalStore(cache_dir, root, store_dir, fallback=fallback)
        except BaseException as e:  # told by `result`, on the thread that waits for it
            self._error = e

    def result(self) -> LocalStore:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        assert self._store is not None  # opened, or the error above
        return self._store

    def discard(self) -> None:
        self._thread.join()
        if self._store is not None:
            self._store.close()


class _Packed(Struct, frozen=True):
    temp: Path
    key: str
    info: packing.PackInfo


class _Adoption:
    """One artifact waiting for its batch: what to install, and how that went once written."""

    __slots__ = ("packed", "row", "log_blob", "data", "written", "error")

    def __init__(self, packed: "_Packed", row: tuple, log_blob: bytes, data: bytes | None = None):
        self.packed, self.row, self.log_blob = packed, row, log_blob
        self.data = data  # the artifact itself, when no temp file holds it yet
        self.written = False
        self.error: BaseException | None = None

    def done(self, error: BaseException | None) -> None:
        self.written, self.error = True, error


class _GroupCommit:
    """Adoptions from many download threads, written a batch per transaction.

    The first thread to arrive writes everything queued, in one transaction, while the
    others wait; whoever arrives meanwhile is in the next batch. Each caller returns once its
    own artifact is renamed in and its rows are committed (or raises why not), as with one
    transaction each. A failed batch is retried one artifact at a time, so one bad artifact
    fails only itself."""

    def __init__(self, store: "LocalStore"):
        self._store = store
        self._ready = threading.Condition()
        self._queue: list[_Adoption] = []
        self._busy = False

    def install(
        self, packed: "_Packed", row: tuple, log_blob: bytes, data: bytes | None = None
    ) -> None:
        mine = _Adoption(packed, row, log_blob, data)
        batch: list[_Adoption] = []
        with self._ready:
            self._queue.append(mine)
            while not mine.written and self._busy:
                self._ready.wait()
            if not mine.written:
                self._busy = True
                batch, self._queue = self._queue, []
        if batch:
            try:
                self._write(batch)
            finally:
                with self._ready:
                    self._busy = False
                    self._ready.notify_all()
        if mine.error is not None:
            raise mine.error

    def _write(self, batch: list[_Adoption]) -> None:
        batch = [item for item in batch if self._landed(item)]
        if not batch:
            return
        try:
            self._store._install_many([(a.packed, a.row, a.log_blob) for a in batch])
        except BaseException as e:
            if len(batch) == 1 or not isinstance(e, Exception):
                for item in batch:
                    item.done(e)
                return
            for item in batch:  # one of them failed the batch (its temps are back): which, alone
                try:
                    self._store._install_many([(item.packed, item.row, item.log_blob)])
                except Exception as one:
                    item.done(one)
                else:
                    item.done(None)
            return
        for item in batch:
            item.done(None)

    def _landed(self, item: _Adoption) -> bool:
        """Write an artifact held in memory to its temp file (here, by the committing thread:
        one thread creating files in the cache dir at a time); False when that failed."""
        if item.data is None:
            return True
        packed = item.packed
        try:
            temp = self._store._temp_holding(packed.key, item.data)
        except Exception as e:
            item.done(e)
            return False
        item.packed, item.data = _Packed(temp, packed.key, packed.info), None
        return True


@contextmanager
def _transaction(db: "sqlite3.Connection", *, immediate: bool = False) -> Iterator[None]:
    """Run the block in one transaction; any failure, the COMMIT's included, rolls back."""
    db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _schema_version(db: "sqlite3.Connection", schema: str) -> str | None:
    import sqlite3

    try:
        row = db.execute(f"SELECT version FROM {schema}.schema_meta").fetchone()
    except sqlite3.OperationalError:  # no table yet
        return None
    return row[0] if row else None


def _ensure_schema(
    db: "sqlite3.Connection", schema: str, tables: Sequence[str], version: str
) -> bool:
    """Create `tables` in `schema`, or drop and recreate ours when the version differs;
    True when it did. Artifacts are kept; only the index is rebuilt. Tables other modules keep
    in the same database are left alone, and every table of ours that `tables` does not name is
    dropped: unqualified names find `main` first, so a stale `entries` there would hide the
    attached store's."""
    if _schema_version(db, schema) == version:
        return False
    with _transaction(db, immediate=True):
        if _schema_version(db, schema) == version:  # another process won the race
            return False
        for table in (*_TABLES, *(("kept_since",) if schema == "main" else ())):
            db.execute(f"DROP TABLE IF EXISTS {schema}.{table}")
        for table in tables:
            db.execute(_TABLES[table].replace("CREATE TABLE ", f"CREATE TABLE {schema}.", 1))
        db.execute(f"CREATE TABLE IF NOT EXISTS {schema}.schema_meta (version TEXT NOT NULL)")
        db.execute(f"DELETE FROM {schema}.schema_meta")
        db.execute(f"INSERT INTO {schema}.schema_meta VALUES (?)", (version,))
    return True


def _task_facts(meta: Mapping[str, object]) -> tuple[str, str, float]:
    """The task id, command and duration an artifact's meta holds for its row; an artifact of an
    older vx holds none, and is refused."""
    task = meta.get("task")
    if isinstance(task, dict):
        task_id, command, duration = task.get("id"), task.get("command"), task.get("durationMs")
        if isinstance(task_id, str) and isinstance(command, str):
            if isinstance(duration, (int, float)) and not isinstance(duration, bool):
                return task_id, command, float(duration)
    raise ArchiveError("artifact meta holds no task facts (id, command, durationMs)")


def _pinned(upstream: str, crcs: Mapping[str, str]) -> str:
    """The upstream keys that are entries, each with its artifact's checksum: `key:crc …`."""
    return " ".join(f"{k}:{crcs[k]}" for k in upstream.split() if k in crcs)


def _has_table(db: "sqlite3.Connection", name: str) -> bool:
    row = db.execute("SELECT 1 FROM main.sqlite_master WHERE type='table' AND name=?", (name,))
    return row.fetchone() is not None


def _prepare_dir(path: Path) -> None:
    """Make the cache dir (with a `*` .gitignore when vx creates it) or say why not."""
    try:
        path.mkdir(parents=True)
        created = True
    except FileExistsError:
        created = False
    except OSError as e:
        raise _unwritable(path, e) from None
    if not path.is_dir():
        raise _unwritable(path, "not a directory")
    if created:
        try:
            (path / ".gitignore").write_text("*\n")
        except OSError as e:
            import shutil

            shutil.rmtree(
                path, ignore_errors=True
            )  # made again, with its .gitignore, by the next run
            raise _unwritable(path, e) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise _unwritable(path, "permission denied")


def _unwritable(path: Path, why: str | OSError) -> EnvironmentFailure:
    if isinstance(why, OSError):
        if why.errno in _FULL_ERRNOS:
            return CacheFull(
                f"the cache directory cannot be made: {why.strerror}",
                facts=(f"path: {path}",),
                hint=_PRUNE_HINT,
            )
        why = why.strerror or str(why)
    return EnvironmentFailure(
        f"the cache directory is not writable: {why}",
        facts=(f"path: {path}",),
        hint="fix its permissions, or choose another with --cache-dir or VX_CACHE_DIR",
    )


def _disk_failure(e: OSError, cache_dir: Path) -> EnvironmentFailure:
    """Name a failed cache write in one line."""
    if e.errno in _FULL_ERRNOS:
        return CacheFull(
            f"cannot write to the cache: {e.strerror}",
            facts=(f"path: {cache_dir}",),
            hint=_PRUNE_HINT,
        )
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return OutOfFds(
            f"cannot write to the cache: {e.strerror}", facts=(f"path: {cache_dir}",), hint=FDS_HINT
        )
    return EnvironmentFailure(
        f"cannot write to the cache: {e.strerror}", facts=(f"path: {cache_dir}",)
    )


_HEX = frozenset("0123456789abcdef")


# A cache dir may be a directory of the user's (a named one, or `.vx/cache` a link a repository
# committed): vx removes only the files it names itself — `<key>.tar.zst` and `.<key>.….tmp|.old`.
def artifact_key(name: str) -> str | None:
    """The key of an artifact's file name (lower-case hex), else None."""
    key = name[: -len(".tar.zst")] if name.endswith(".tar.zst") else ""
    return key if key and _HEX.issuperset(key) else None


def is_temp(name: str) -> bool:
    """Whether `name` is one of vx's temp or backup files (`.<key>.….tmp`, `.<key>.….old`)."""
    if not (name.startswith(".") and name.endswith((".tmp", ".old"))):
        return False
    key = name[1:].partition(".")[0]
    return bool(key) and _HEX.issuperset(key)


def _inside(path: str, root: str) -> str | None:
    """`path` relative to `root` with a trailing slash when it lies inside, else None."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    return None if rel == "." or rel.startswith("..") else rel.replace(os.sep, "/") + "/"


def _keep_previous(final: Path) -> Path | None:
    """Hard-link an existing artifact aside so a failed re-save can put it back."""
    backup = final.with_name(f".{final.name}.{os.getpid()}-{threading.get_ident()}.old")
    _quiet_unlink(backup)
    try:
        os.link(final, backup)
    except OSError:  # none yet, or no hard links here (a failed re-save then loses the old entry)
        return None
    return backup


def _quiet_unlink(path: Path | str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
