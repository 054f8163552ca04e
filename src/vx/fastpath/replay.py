"""Finish a `vx run` from its receipt, before the CLI and the pipeline are even imported.

The checks, cheapest first, under the run lock like any run: same vx, command line,
directory and environment values; every planning path and project listing as the receipted run
left it (`receipt.paths_hold`); git's listings the same byte for byte (git is run again exactly
as the listing runs it, but without the optional index lock: git, not vx, decides whether the
tree is clean); every artifact and index row still there. Then the keys and the hits are the
receipt's, and what remains is the outcome the pipeline would reach: each task's outputs are
current (nothing to do) or absent (restored from its artifact, as the hit lane would: nothing to
wipe — while the index and git are checked, by two processes when there are many). The rows are
touched, the restores' stamps written once every check held, the receipt brought
up to date, and the footer printed. Anything else — an output edited, an artifact damaged, a fact
changed — and this returns None: the pipeline runs as if there were no receipt, which is always
correct, and writes a fresh one.

It imports `os`, `sys`, `time`, `marshal`, `_blake2` (the receipt's MAC), xxhash, sqlite3's C
module and vx's leaves; a restore adds `vx.fastpath.restores` and the artifact reader on plain
values (`unpacking.unpack_plain`, with `json` and zstd's C extension), never the records,
`pathlib` or `typing`.
"""

from __future__ import annotations

import os
import stat
import sys
import time

from vx import __version__, dotvx, witness
from vx.fastpath import receipt

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from vx.fastpath import restores

FORK_FROM = 16  # restores worth forking a second process for


def replay(argv: list[str], environ=os.environ, err=sys.stderr) -> int | None:
    """Finish `vx <argv>` from its receipt and return the exit code, or None to run it in full."""
    if not receipt.enabled(environ):
        return None
    started, cpu, began = time.perf_counter(), time.process_time(), time.time()
    try:
        header, finished = _holds(argv, environ, err, began)
    except Exception:  # a receipt is never a reason to fail: any trouble with one is a miss
        return None
    if header is None or finished is None:
        return None
    timing, record = finished
    if header.get("json") and record is None:  # no history to print: the pipeline prints it
        return None
    _footer(header, environ, err, (time.perf_counter() - started) * 1000)
    if environ.get("VX_TIMING", "") not in ("", "0"):
        _timing(timing, started, cpu, err)
    if record is not None and header.get("json"):
        _print_record(record)
    return 0


def _holds(
    argv: list[str], environ, err, began: float
) -> tuple[dict | None, tuple[list[tuple[str, float]], tuple | None] | None]:
    """The receipt's header, and what finishing from it gave (see `_finish`); None if it does
    not hold."""
    found = receipt.find(os.getcwd(), argv)
    if found is None or not receipt.same_env(found[1], environ):
        return None, None
    from vx.runlock import RunLock

    lock = RunLock(lambda message: _say(err, f"vx: {message}"))
    lock.acquire(found[1]["root"])
    try:
        return found[1], _finish(*found, environ, began)
    finally:
        lock.release()


def _finish(
    path: str, header: dict, data: memoryview, environ, began: float
) -> tuple[list[tuple[str, float]], tuple | None] | None:
    """Check everything while git runs, restoring what is absent meanwhile. The index is read (and
    written) only when the receipt cannot vouch for it; then in one transaction, committed only
    when all of it held. The stage times and the run's history record (see `_record`), or None.

    Restores start before the index and git are checked: each writes only into output roots
    found absent, from an artifact the reader verifies whole, and stamps nothing until every
    check held. Should one fail, the pipeline finds those outputs unstamped, so never current:
    it wipes and restores or rebuilds them as if this had never run."""
    marks = [("", time.perf_counter())]  # (stage that ended, when)
    git_index = _GitIndex(header, environ)
    children, helper = _spawn_git(header["root"], header["git"], environ, git_index.vouched), None
    try:
        body = receipt.body_of(header, data)
        if body is None or not receipt.paths_hold(body):
            return None
        split = receipt.to_restore(body["tasks"])
        if split is None or not _store_private(header):
            return None
        if not _artifacts_hold(header, body["tasks"]):
            return None
        absent, through = split
        restoring, restored_tasks = bool(absent), absent + through
        if restoring:
            from vx.fastpath import restores

            restores.load_reader()  # before the fork: the helper inherits it
        if len(absent) >= FORK_FROM:  # both take restores from one queue: whoever is free
            helper = restores.Helper(header["store_dir"], header["root"], absent)
            absent = helper.share  # type: ignore[assignment]  # a queue the helper shares, read as a list
        marks.append(("receipt check", time.perf_counter()))
        if not restoring and _index_vouched(header):
            if not _git_holds(children, header["git"]):
                return None
            if git_index.confirm(header):  # newly vouched for: kept for the next replay
                receipt.store(path, header, bytes(data))
            record = _record(header, body, set(), began)
            return _times(marks, ("git enumeration", time.perf_counter())), record
        before, looked_ns = _index_ids(header), time.time_ns()
        due = time.time() - header["touched"] >= TOUCH_EVERY_S  # as a warm replay: hourly
        db = _open_index(header)
        if db is None:
            return None
        try:
            if not _rows_hold(db, body["tasks"], touch=due, write=restoring):
                return None
            marks.append(("cache touch", time.perf_counter()))
            done = _extract_share(header, absent) if restoring else {}
            if restoring:
                marks.append(("restore", time.perf_counter()))
            if done is None or not _git_holds(children, header["git"]):
                return None
            git_index.confirm(header)
            marks.append(("git enumeration", time.perf_counter()))
            if restoring and not _restore(header, body, done, helper, db, through):
                return None
            db.execute("COMMIT")
            from vx.store import rows

            rows.leave_open(db)
            db = None
        finally:
            if db is not None:
                db.close()  # an uncommitted touch rolls back
    finally:
        _reap(children)
        if helper is not None:
            helper.stop()  # having reported, it has exited; else it stops after the artifact at hand
    unchanged = not due and _index_ids(header) == before
    header["index"] = [before, looked_ns] if unchanged else None
    if due:
        header["touched"] = time.time()
    receipt.store(path, header, body if restoring else bytes(data))
    record = _record(header, body, {task[0] for task in restored_tasks}, began)
    return _times(marks, ("stamps", time.perf_counter()) if restoring else None), record


def _extract_share(header: dict, absent) -> dict | None:
    """The main process's share of the restores (`restores.extract`), after loading what the
    replay's end imports (the history's and the footer's modules): loaded here, beside the
    helper's restores, the shared queue hands the helper more of them, and the serial end,
    with the other core idle, is shorter."""
    from vx import style  # noqa: F401
    from vx.fastpath import restores
    from vx.store import runs  # noqa: F401

    return restores.extract(header["store_dir"], header["root"], absent)


def _times(
    marks: list[tuple[str, float]], last: tuple[str, float] | None
) -> list[tuple[str, float]]:
    """The main process's stages in ms: `restore` is its own share; `stamps` waits for the
    helper's share, stamps both and commits."""
    marks = marks + [last] if last is not None else marks
    return [(name, (at - marks[i][1]) * 1000) for i, (name, at) in enumerate(marks[1:])]


# ---------------------------------------------------------------- the index

TOUCH_EVERY_S = 3600.0  # a replay refreshes `accessed_at` at most this often


def _index_ids(header: dict) -> list:
    """The identities of the index files: the workspace's, and a shared store's, which
    another workspace of the repository may have written since."""
    cache_dir, store_dir = header["cache_dir"], header["store_dir"]
    ids = [
        witness.identity(os.path.join(cache_dir, "cache.db"), True),
        _wal_identity(os.path.join(cache_dir, "cache.db-wal")),
    ]
    if store_dir != cache_dir:
        ids += [
            witness.identity(os.path.join(store_dir, "store.db"), True),
            _wal_identity(os.path.join(store_dir, "store.db-wal")),
        ]
    return ids


def _wal_identity(path: str):
    """A WAL's identity without its ctime. Run as root, SQLite `fchown`s a WAL to the database's
    owner each time a connection opens it (unixOpen), which moves the ctime though nothing was
    written: with it, every replay's own look at the index made the next one's differ, and no
    replay as root was ever vouched for. What SQLite writes moves the mtime (a WAL reset rewrites
    frames in place at the same size, but not at the same mtime), and a write within the clock
    tick of the mtime seen is inside the racy window of that look (`_index_vouched`)."""
    ident = witness.identity(path, True)
    return None if ident is None else (ident[0], ident[1], ident[2], 0, ident[4])


def _index_vouched(header: dict) -> bool:
    """Whether the index is as the last replay confirmed it: neither `cache.db` nor its WAL
    written since (identities outside the racy window of that look), and the rows touched within
    the hour. Then every row the receipt names is still there, as it was."""
    seen = header.get("index")
    if seen is None or time.time() - header["touched"] >= TOUCH_EVERY_S:
        return False
    ids, looked_ns = seen
    return _index_ids(header) == ids and not receipt.racy([("", i) for i in ids], looked_ns)


def _store_private(header: dict) -> bool:
    """A shared store's three levels (`~/.vx`, `<id>`, `cache`) are still directories of this
    user's that nobody else can write, as the run that wrote the receipt found them:
    a replay reads its artifacts by path."""
    store_dir = header["store_dir"]
    if store_dir == header["cache_dir"]:
        return True
    uid = os.getuid()
    for path in (
        store_dir,
        os.path.dirname(store_dir),
        os.path.dirname(os.path.dirname(store_dir)),
    ):
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
            return False
    return True


def _artifacts_hold(header: dict, tasks: list) -> bool:
    """Each artifact still there, of its size, and this user's (as the store's probe checks;
    under `sudo`, the user's who ran it)."""
    prefix, uid = os.path.join(header["store_dir"], ""), os.getuid()
    sudo = os.environ.get("SUDO_UID") if uid == 0 else None
    for key, size, _crc, *_ in tasks:
        try:
            st = os.stat(f"{prefix}{key}.tar.zst")
        except OSError:
            return False
        if st.st_size != size or (st.st_uid != uid and str(st.st_uid) != sudo):
            return False
    return True


# ---------------------------------------------------------------- git


class _GitIndex:
    """Whether `git ls-files` can be left out of this replay: its output — each index entry's
    tag, mode, OID and stage — is read from the index file alone, so while that file is the one
    an earlier replay saw before and after its own `ls-files` matched the receipt, this one's
    would match too. Only where git finds the repository at the root (`<root>/.git` a
    directory, whose `index` it reads) and with every `GIT_*` variable as it was then (any of
    them may move the index, the repository or its configuration: `GIT_INDEX_FILE`, `GIT_DIR`,
    `GIT_CONFIG_*`, ...); the config and `status` listings still run every time.
    `git status` (run with no optional locks) never writes the index; anything that does
    (`git add`, `update-index`, a status run by the user) replaces it, so its identity changes.

    A sparse index's expansion reads trees by OID and a split index's shared part by its hash,
    neither of which can change under its name. Kept in the receipt's header as `[path,
    identity, digest of the GIT_* variables]`, only outside the racy window of the look that saw
    it."""

    def __init__(self, header: dict, environ) -> None:
        self.path, self.seen, self.looked_ns = "", None, 0
        self.vouched = False
        git_env = sorted(f"{k}={v}" for k, v in environ.items() if k.startswith("GIT_"))
        self.env = dotvx.env_digest("\0".join(git_env))
        dot = os.path.join(header["root"], ".git")
        try:
            if not stat.S_ISDIR(os.lstat(dot).st_mode):
                return
        except OSError:
            return
        self.path, self.looked_ns = os.path.join(dot, "index"), time.time_ns()
        self.seen = witness.identity(self.path, True)
        self.vouched = self.seen is not None and header.get("git_index") == self.noted()

    def noted(self) -> list:
        return [self.path, self.seen, self.env]

    def confirm(self, header: dict) -> bool:
        """After every listing matched: note the index as this replay's `ls-files` read it — the
        same before it started and after it ended, outside the racy window. Whether the header
        changed."""
        if self.vouched:
            return False
        kept = None
        if (
            self.seen is not None
            and witness.identity(self.path, True) == self.seen
            and not witness.racy_times(self.seen[2], self.seen[3], self.looked_ns)
        ):
            kept = self.noted()
        changed = header.get("git_index") != kept
        header["git_index"] = kept
        return changed


def _spawn_git(root: str, commands: list, environ, index_vouched: bool = False) -> list[list[int]]:
    """Start each noted git command as the listing ran it, stdout to a memfd (three outputs at
    once cannot fill a pipe and stall), stdin and stderr on /dev/null. `posix_spawnp`, not fork:
    forking this process copies its page tables and leaves its memory copy-on-write while git
    starts (docs/optimizations.md #23); `-C root` is git's own "as if started in root", which is
    how the listing runs it (cwd = the root).

    One difference, which changes no output: `GIT_OPTIONAL_LOCKS=0`. `git status` otherwise takes
    .git/index.lock early to write back refreshed stat data, and a replay that gives up early
    stops it; git removes the lock on SIGTERM only once its handler is installed, just after the
    lock file is created, so a signal landing in between would leave the repository locked. The
    pipeline's own listing, which is never stopped in a normal run, still writes the index back."""
    if not hasattr(os, "memfd_create"):
        raise OSError("no memfd")
    environ = {**environ, "GIT_OPTIONAL_LOCKS": "0"}  # the one difference: see above
    children: list[list[int]] = []
    for argv, *_ in commands:
        if index_vouched and argv[1:2] == ["ls-files"]:  # its index is as vouched (`_GitIndex`)
            children.append([0, -1])
            continue
        out = os.memfd_create("vx-git", os.MFD_CLOEXEC)
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        try:
            pid = os.posix_spawnp(
                argv[0], [argv[0], "-C", root, *argv[1:]], environ, file_actions=actions
            )
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
        if out < 0:  # left out: its output is vouched for (`_GitIndex`)
            continue
        _, status = os.waitpid(pid, 0)
        child[0] = 0  # reaped: its pid may be anyone's now
        size = os.fstat(out).st_size
        data = os.pread(out, size, 0) if size else b""
        got = (
            xxhash.xxh3_128_hexdigest(data)
            if outputs is None
            else receipt.status_digest(data, frozenset(outputs))
        )
        if os.waitstatus_to_exitcode(status) != code or got != digest:
            return False
    return True


def _reap(children: list[list[int]]) -> None:
    """Stop and reap what still runs. SIGTERM, never SIGKILL: `git status` may hold
    .git/index.lock (it writes back refreshed stat data), and only a signal it can catch lets it
    remove the lock on the way out — a killed one leaves the repository locked for the user."""
    for pid, out in children:
        if out >= 0:
            os.close(out)
        if pid:
            try:
                os.kill(pid, 15)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _sqlite():
    """sqlite3's C module itself: the `sqlite3` package adds only `datetime` adapters, imports
    this replay never uses (docs/optimizations.md #26). The package is the fallback should that
    ever move."""
    try:
        sqlite = _sqlite_module()
        sqlite.connect, sqlite.Error  # noqa: B018 (both must be there)
    except (ImportError, AttributeError):
        import sqlite3 as sqlite
    return sqlite


def _sqlite_module():
    """`_sqlite3`, loaded without `functools`. Its init takes `functools.lru_cache` for the
    statement cache; `functools` brings `collections`, `operator`, `reprlib`, ... (most of the
    index's cost in a replay: docs/optimizations.md #26). While it loads, `functools` is a
    stand-in whose `lru_cache` builds the very wrapper the real one builds
    (`_functools._lru_cache_wrapper`, the C cache) — without the `cache_info` tuple type and
    `update_wrapper`'s copied names, which the module never uses. The stand-in leaves
    `sys.modules` at once: any later `import functools` is the real one."""
    if "_sqlite3" in sys.modules or "functools" in sys.modules:
        import _sqlite3

        return _sqlite3
    import _functools

    def lru_cache(maxsize=128, typed=False):
        return lambda function: _functools._lru_cache_wrapper(function, maxsize, typed, tuple)

    stand_in = type(sys)("functools")
    stand_in.lru_cache = lru_cache
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3
    finally:
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
    return _sqlite3


def _open_index(header: dict):
    """The cache index (with a shared store's attached), set up as the store sets it up; None
    when there is none (connecting must never create one)."""
    sqlite3 = _sqlite()
    cache_dir, store_dir = header["cache_dir"], header["store_dir"]
    db = None
    try:
        from vx.store import rows

        db = sqlite3.connect(
            _uri(os.path.join(cache_dir, "cache.db")), uri=True, isolation_level=None, timeout=5.0
        )
        for pragma in rows.CONNECTION_PRAGMAS:  # as the store sets it up
            db.execute(pragma)
        if store_dir != cache_dir:
            rows.attach_store(db, _uri(os.path.join(store_dir, "store.db")))
        return db
    except sqlite3.Error:
        if db is not None:
            db.close()
        return None


def _uri(path: str) -> str:
    """An existing database's file, read-write: `mode=rw` never creates one."""
    return "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=rw"


def _rows_hold(db, tasks: list, touch: bool, write: bool = False) -> bool:
    """Every hit's row still in the index as it was; with `touch`, `accessed_at` set as the
    store's close sets it. In a transaction the caller commits: a write one (`write`: a restore
    stamps its outputs in it) holds the write lock from the start, so no other writer can drop
    a row between this check and the commit, and no upgrade can fail half way."""
    from vx.store import rows

    want = {key: (size, crc) for key, size, crc, *_ in tasks}
    try:
        db.execute("BEGIN IMMEDIATE" if touch or write else "BEGIN")
        if rows.sizes_and_crcs(db, list(want)) != want:
            return False
        if touch:
            rows.touch(db, list(want), time.time())
        return True
    except _sqlite().Error:
        return False


# ---------------------------------------------------------------- restores


def _restore(
    header: dict, body: dict, done: dict, helper: restores.Helper | None, db, through: list
) -> bool:
    """Stamp every restored output, the helper's share with this process's, and bring
    the receipt up to date. False when the helper refused an artifact: the pipeline then
    decides what that task needs. `through`: tasks restored by their covering dependant's
    artifact; nothing of theirs is stamped (the next run finds them current through it)."""
    from vx.store import rows

    root = header["root"]
    theirs = helper.result() if helper is not None else {}
    if theirs is None:
        return False
    by_key = {task[0]: task for task in body["tasks"]}
    due = {}
    for key, files in {**done, **theirs}.items():
        by_key[key], due[key] = receipt.restored(by_key[key], root, files)
    for task in through:
        by_key[task[0]] = receipt.restored(task, root, [])[0]
    rows.write_stamps(db, root, due)
    body["tasks"] = [by_key[task[0]] for task in body["tasks"]]
    return True


# ---------------------------------------------------------------- history


def _record(header: dict, body: dict, restored: set, began: float) -> tuple | None:
    """Append this run to the history's pending file (`vx.store.runs`), still under the run lock:
    every task a hit, restored or up to date. A receipt without `history` records nothing. The
    commit and branch are read again (two or three small file reads): a commit or checkout that
    changes no listed file leaves the receipt good. The invocation row and the task rows
    appended (None without `history`)."""
    history = body.get("history")
    if history is None:
        return None
    from vx.store import runs

    (command, cwd, names, policy, concurrency, host), tasks = history
    run, ended = runs.run_id(), time.time()
    rows = [
        [run, project, task, key, "cache-hit", "local" if key in restored else "up-to-date"]
        + [0, 0.0, None, None, 0, 0, 0, int(key in restored), None, None, 0, None]
        for project, task, key in tasks
    ]
    local = sum(1 for _p, _t, key in tasks if key in restored)
    invocation = [run, command, cwd, names, policy, concurrency, began, ended]
    invocation += [(ended - began) * 1000, len(rows), 0, len(rows), local, 0, len(rows) - local]
    # The listings matched the receipted run's byte for byte, so its dirty flag still holds.
    dirty = host[4] if len(host) > 4 else None
    invocation += [0, 1, 1, *host[:4], *runs.git_head(header["root"]), dirty]
    invocation += [runs.ci_provider(os.environ), host[5] if len(host) > 5 else None]  # tags
    try:
        runs.append_pending(header["cache_dir"], invocation, rows)
    except OSError:
        pass  # the history is never a reason to fail a run
    return invocation, rows


# ---------------------------------------------------------------- output


def _footer(header: dict, environ, err, wall_ms: float) -> None:
    from vx import style

    palette = style.Palette(style.color_depth(environ, err))
    lines = style.footer(header["tasks"], header["tasks"], {}, wall_ms, __version__, palette)
    _say(err, "\n".join(lines))


def _print_record(record: tuple) -> None:
    """`--format json`: the run's record on stdout, as the pipeline prints it (every task a hit:
    none failed, none flaky)."""
    import json

    from vx.store import runs

    invocation, rows = record
    tasks = [dict(zip(runs.RUN_COLUMNS, row)) for row in rows]
    out = runs.run_record(dict(zip(runs.INVOCATION_COLUMNS, invocation)), tasks, set())
    try:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


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
