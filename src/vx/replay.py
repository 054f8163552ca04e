"""Finish a `vx run` from its receipt, before the CLI and the pipeline are even imported.

The checks, cheapest first, under the run lock (GR-16) like any run: same vx, command line,
directory and environment values; every planning path and project listing as the receipted run
left it (`receipt.paths_hold`); git's listings the same byte for byte (git is run again exactly
as the listing runs it: git, not vx, decides whether the tree is clean); every artifact and index
row still there. Then the keys and the hits are the receipt's, and what remains is the outcome
the pipeline would reach: each task's outputs are current (nothing to do) or absent (restored from
its artifact, as the hit lane would: nothing to wipe). The rows are touched (LC-06), the restores'
stamps written (LC-07), the receipt brought up to date, and the footer printed. Anything else —
an output edited, an artifact damaged, a fact changed — and this returns None: the pipeline runs
as if there were no receipt, which is always correct, and writes a fresh one.

It imports `os`, `sys`, `time`, `marshal`, xxhash, sqlite3's C module and vx's leaves; a restore
adds the artifact reader on plain values (`unpacking.unpack_plain`, with `json` and zstd's C
extension), never the records, `pathlib` or `typing`.
"""

from __future__ import annotations

import os
import sys
import time

from vx import __version__, receipt, witness

FORK_FROM = 16  # restores worth forking a second process for


def replay(argv: list[str], environ=os.environ, err=sys.stderr) -> int | None:
    """Finish `vx <argv>` from its receipt and return the exit code, or None to run it in full."""
    if not receipt.enabled(environ):
        return None
    started, cpu = time.perf_counter(), time.process_time()
    try:
        header, timing = _holds(argv, environ, err)
    except Exception:  # a receipt is never a reason to fail: any trouble with one is a miss
        return None
    if timing is None:
        return None
    _footer(header, environ, err, (time.perf_counter() - started) * 1000)
    if environ.get("VX_TIMING", "") not in ("", "0"):
        _timing(timing, started, cpu, err)
    return 0


def _holds(argv: list[str], environ, err) -> tuple[dict | None, list[tuple[str, float]] | None]:
    """The receipt's header, and the stage times of finishing from it; None if it does not hold."""
    found = receipt.find(os.getcwd(), argv)
    if found is None or not receipt.same_env(found[1], environ):
        return None, None
    from vx.runlock import RunLock

    lock = RunLock(lambda message: _say(err, f"vx: {message}"))
    lock.acquire(found[1]["root"])
    try:
        return found[1], _finish(*found, environ)
    finally:
        lock.release()


def _finish(path: str, header: dict, data: memoryview, environ) -> list[tuple[str, float]] | None:
    """Check everything while git runs, then restore what is absent. The index is read (and
    written) only when the receipt cannot vouch for it; then in one transaction, committed only
    when all of it held. The stage times, or None."""
    import marshal

    t0 = time.perf_counter()
    children, helper = _spawn_git(header["root"], header["git"], environ), None
    try:
        body = marshal.loads(data)
        if not receipt.paths_hold(body):
            return None
        states = [receipt.output_state(task) for task in body["tasks"]]
        if receipt.CHANGED in states or not _artifacts_hold(header, body["tasks"]):
            return None
        absent = [task for task, state in zip(body["tasks"], states) if state == receipt.ABSENT]
        if len(absent) >= FORK_FROM:  # its start overlaps the checks below; it extracts once they held
            helper = _Helper(header["cache_dir"], header["root"], absent[len(absent) // 2:])
            absent = absent[: len(absent) // 2]
        if absent:
            _reader()  # loaded while git still runs
        t1 = time.perf_counter()
        if not absent and _index_vouched(header):
            t2 = time.perf_counter()
            return _times(t0, t1, t2, t2, None) if _git_holds(children, header["git"]) else None
        before, looked_ns = _index_ids(header["cache_dir"]), time.time_ns()
        due = bool(absent) or time.time() - header["touched"] >= TOUCH_EVERY_S
        db = _open_index(header["cache_dir"])
        if db is None:
            return None
        try:
            if not _rows_hold(db, body["tasks"], touch=due):
                return None
            t2 = time.perf_counter()
            if not _git_holds(children, header["git"]):
                return None
            t3 = time.perf_counter()
            if absent and not _restore(header, body, absent, db, helper):
                return None
            db.execute("COMMIT")
        finally:
            db.close()  # an uncommitted touch rolls back
    finally:
        _reap(children)
        if helper is not None:
            helper.stop()  # told to extract, it has finished; else it exits without writing
    unchanged = not due and _index_ids(header["cache_dir"]) == before
    header["index"] = [before, looked_ns] if unchanged else None
    if due:
        header["touched"] = time.time()
    receipt.store(path, header, body if absent else bytes(data))
    return _times(t0, t1, t2, t3, time.perf_counter() if absent else None)


def _times(t0: float, t1: float, t2: float, t3: float, t4: float | None) -> list[tuple[str, float]]:
    rows = [("receipt check", (t1 - t0) * 1000), ("cache touch", (t2 - t1) * 1000), ("git enumeration", (t3 - t2) * 1000)]
    return rows + ([("restore", (t4 - t3) * 1000)] if t4 is not None else [])


# ---------------------------------------------------------------- the index

TOUCH_EVERY_S = 3600.0  # a replay refreshes `accessed_at` (LC-06) at most this often


def _index_ids(cache_dir: str) -> list:
    return [witness.identity(os.path.join(cache_dir, name), True) for name in ("cache.db", "cache.db-wal")]


def _index_vouched(header: dict) -> bool:
    """Whether the index is as the last replay confirmed it: neither `cache.db` nor its WAL
    written since (identities outside the racy window of that look), and the rows touched within
    the hour. Then every row the receipt names is still there, as it was."""
    seen = header.get("index")
    if seen is None or time.time() - header["touched"] >= TOUCH_EVERY_S:
        return False
    ids, looked_ns = seen
    return _index_ids(header["cache_dir"]) == ids and not receipt.racy([("", i) for i in ids], looked_ns)


def _artifacts_hold(header: dict, tasks: list) -> bool:
    prefix = os.path.join(header["cache_dir"], "")
    for key, size, _crc, *_ in tasks:
        try:
            if os.stat(f"{prefix}{key}.tar.zst").st_size != size:
                return False
        except OSError:
            return False
    return True


# ---------------------------------------------------------------- git


def _spawn_git(root: str, commands: list, environ) -> list[list[int]]:
    """Start each noted git command as the listing ran it, stdout to a memfd (three outputs at
    once cannot fill a pipe and stall), stdin and stderr on /dev/null. `posix_spawnp`, not fork:
    forking this process copies its page tables and leaves its memory copy-on-write while git
    starts (~1.5 ms a command here); `-C root` is git's own "as if started in root", which is
    how the listing runs it (cwd = the root)."""
    if not hasattr(os, "memfd_create"):
        raise OSError("no memfd")
    children = []
    for argv, *_ in commands:
        out = os.memfd_create("vx-git", os.MFD_CLOEXEC)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, out, 1),
                   (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
        try:
            pid = os.posix_spawnp(argv[0], [argv[0], "-C", root, *argv[1:]], environ, file_actions=actions)
        except BaseException:
            os.close(out)
            _reap(children)
            raise
        children.append([pid, out])
    return children


def _git_holds(children: list[list[int]], commands: list) -> bool:
    import xxhash

    for child, (_argv, code, digest, outputs) in zip(children, commands):
        pid, out = child
        _, status = os.waitpid(pid, 0)
        child[0] = 0  # reaped: its pid may be anyone's now
        size = os.fstat(out).st_size
        data = os.pread(out, size, 0) if size else b""
        got = xxhash.xxh3_128_hexdigest(data) if outputs is None else receipt.status_digest(data, frozenset(outputs))
        if os.waitstatus_to_exitcode(status) != code or got != digest:
            return False
    return True


def _reap(children: list[list[int]]) -> None:
    """Stop and reap what still runs. SIGTERM, never SIGKILL: `git status` may hold
    .git/index.lock (it writes back refreshed stat data), and only a signal it can catch lets it
    remove the lock on the way out — a killed one leaves the repository locked for the user."""
    for pid, out in children:
        os.close(out)
        if pid:
            try:
                os.kill(pid, 15)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _sqlite():
    """sqlite3's C module itself: the `sqlite3` package adds only `datetime` adapters (~3 ms of
    imports) that this replay never uses. The package is the fallback should that ever move."""
    try:
        import _sqlite3 as sqlite

        sqlite.connect, sqlite.Error  # noqa: B018 (both must be there)
    except (ImportError, AttributeError):
        import sqlite3 as sqlite
    return sqlite


def _open_index(cache_dir: str):
    """The cache index, set up as the store sets it up; None when there is none (connecting
    must never create one)."""
    sqlite3 = _sqlite()
    path = os.path.join(cache_dir, "cache.db")
    uri = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    try:
        from vx.store.rows import CONNECTION_PRAGMAS

        db = sqlite3.connect(f"file:{uri}?mode=rw", uri=True, isolation_level=None, timeout=5.0)
        for pragma in CONNECTION_PRAGMAS:  # as the store sets it up
            db.execute(pragma)
        return db
    except sqlite3.Error:
        return None


def _rows_hold(db, tasks: list, touch: bool) -> bool:
    """Every hit's row still in the index as it was; with `touch`, `accessed_at` set as the
    store's close sets it (LC-06). In a transaction the caller commits."""
    from vx.store import rows

    want = {key: (size, crc) for key, size, crc, *_ in tasks}
    try:
        db.execute("BEGIN IMMEDIATE" if touch else "BEGIN")
        if rows.sizes_and_crcs(db, list(want)) != want:
            return False
        if touch:
            rows.touch(db, list(want), time.time())
        return True
    except _sqlite().Error:
        return False


# ---------------------------------------------------------------- restores


def _restore(header: dict, body: dict, absent: list, db, helper: _Helper | None) -> bool:
    """Restore every absent task's outputs from its artifact, as the hit lane would (half of them
    in the helper when there are enough), stamp them (LC-07) and bring the receipt up to date.
    False when an artifact is refused: the pipeline then decides what that task needs."""
    from vx.store import rows

    root = header["root"]
    if helper is not None:
        helper.go()
    done = _extract(header["cache_dir"], root, absent)
    theirs = helper.result() if helper is not None else {}
    if done is None or theirs is None:
        return False
    by_key = {task[0]: task for task in body["tasks"]}
    due = {}
    for key, files in {**done, **theirs}.items():
        by_key[key], due[key] = receipt.restored(by_key[key], root, files)
    rows.write_stamps(db, root, due)
    body["tasks"] = [by_key[task[0]] for task in body["tasks"]]
    return True


class _Helper:
    """A forked second extractor. It is started as soon as the restores are known, so that its
    start — the fork, the reader's imports — overlaps the index and git checks, and it extracts
    its share only when `go` says every check held. Closing the pipe unsent is "stop": it exits
    having written nothing. It never opens the index (no SQLite connection crosses a fork)."""

    def __init__(self, cache_dir: str, root: str, tasks: list):
        go_read, self._go = os.pipe()
        self._results, results_write = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:
            code = 1
            try:
                os.close(self._go)
                os.close(self._results)
                _reader()
                if os.read(go_read, 1) == b"1":
                    import marshal

                    with os.fdopen(results_write, "wb") as out:
                        out.write(marshal.dumps(_extract(cache_dir, root, tasks)))
                    code = 0
            finally:
                os._exit(code)
        os.close(go_read)
        os.close(results_write)
        self._code: int | None = None

    def go(self) -> None:
        os.write(self._go, b"1")

    def result(self) -> dict | None:
        """{key: files written} of the helper's share; None if it refused one or failed."""
        import marshal

        with os.fdopen(self._results, "rb") as got:
            self._results = -1
            data = got.read()
        return marshal.loads(data) if data and self._wait() == 0 else None

    def stop(self) -> None:
        """Reap the helper; one never told to go sees its pipe close and exits."""
        if self._go >= 0:
            os.close(self._go)
            self._go = -1
        if self._results >= 0:
            os.close(self._results)
            self._results = -1
        self._wait()

    def _wait(self) -> int | None:
        if self._pid:
            _, status = os.waitpid(self._pid, 0)
            self._pid, self._code = 0, os.waitstatus_to_exitcode(status)
        return self._code


def _reader():
    """The artifact reader on plain values (`unpacking.unpack_plain`) with what it raises."""
    from vx.errors import VxError
    from vx.store.archive import ArchiveError
    from vx.store.unpacking import unpack_plain
    from vx.store.zstd import codec

    codec()  # loaded here, before any fork: the child inherits it
    return (ArchiveError, VxError, OSError), unpack_plain


def _extract(cache_dir: str, root: str, tasks: list) -> dict | None:
    refused, unpack = _reader()
    done = {}
    prefix = os.path.join(root, "")
    for key, _size, _crc, expected, _roots, _walked in tasks:
        allowed = frozenset(p[len(prefix):] for p, _ in expected)
        try:
            _log, files = unpack(os.path.join(cache_dir, f"{key}.tar.zst"), key=key, allowed=allowed.__contains__, root=root)
        except refused:
            return None
        done[key] = [(path, mode, size, mtime_ms) for path, size, mode, mtime_ms in files]
    return done


# ---------------------------------------------------------------- output


def _footer(header: dict, environ, err, wall_ms: float) -> None:
    from vx import style

    palette = style.Palette(style.color_enabled(environ, err))
    lines = style.footer(header["tasks"], header["tasks"], {}, wall_ms, __version__, palette)
    _say(err, "\n".join(lines))


def _timing(rows: list[tuple[str, float]], started: float, cpu: float, err) -> None:
    from vx.stages import Stages

    stages = Stages(True, started)
    stages.startup_ms = cpu * 1000  # CPU before the replay began: interpreter, site and imports
    stages.opened = started
    stages.rows = rows
    stages.print(err)


def _say(err, text: str) -> None:
    from vx.style import write

    try:
        write(err, text + "\n")
        err.flush()
    except (BrokenPipeError, ValueError):
        pass
