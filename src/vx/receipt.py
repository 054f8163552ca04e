"""A fully cached run, remembered, so the next identical one need not repeat the work.

A `vx run` whose every task was a confirmed local hit, shown in the broad flow (where hits are
silent, so the whole output is the footer), ends by writing a receipt: its command line and
working directory; each environment variable it looked up, with its value; every path its
planning read or probed, with its lstat identity (`vx.witness`); digests of git's three
listings; each hit's cache row (key, size, crc) and the lstat values its outputs must show.

The run's outcome is a function of exactly those. So before anything else of vx is loaded,
`replay` checks the receipt for the same command in the same directory: same vx, the same
environment values, every path's identity unchanged and none inside the racy window of the
receipted run's start (a stat equal to one taken then cannot vouch for an edit in the same
tick), git's listings the same byte for byte (git is run again exactly as before: git, not vx,
decides whether the tree is clean), every output and artifact still in place and every row still
in the index. Then the outcome is the receipt's: it touches the rows (LC-06) and prints the footer,
under the run lock (GR-16) like any run. On any difference the full pipeline runs as if there were
no receipt, and writes a fresh one. A receipt is an optimisation, never a source of truth: each
fact it relies on is checked again, and any trouble reading one is only a miss. `VX_REPLAY=0`
turns receipts off (docs/optimizations.md #18).

Replaying imports `os`, `sys`, `time`, `marshal`, xxhash and sqlite3 and vx's leaves (`witness`,
`style`, `runlock`, `stages`): a replayed run must cost less than the interpreter's own start.
"""

from __future__ import annotations

import marshal
import os
import sys
import time

from vx import __version__, witness

FORMAT = 1
RECEIPTS = os.path.join(".vx", "receipts")
SQL_BATCH = 800  # as the store's IN-lists: under 900 bound parameters
GIT_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME")  # read straight from os.environ by the listing


def enabled(environ) -> bool:
    return environ.get("VX_REPLAY", "") not in ("0", "false", "no", "off")


def name_of(cwd: str, argv: list[str]) -> str:
    import xxhash

    return xxhash.xxh3_64_hexdigest("\0".join([__version__, cwd, *argv]).encode("utf-8", "surrogateescape"))


# ---------------------------------------------------------------- replay


def replay(argv: list[str], environ=os.environ, err=sys.stderr) -> int | None:
    """Finish `vx <argv>` from its receipt and return the exit code, or None to run it in full."""
    if not enabled(environ):
        return None
    started, cpu = time.perf_counter(), time.process_time()
    try:
        receipt, timing = _holds(argv, environ, err)
    except Exception:  # a receipt is never a reason to fail: any trouble with one is a miss
        return None
    if timing is None:
        return None
    _footer(receipt, environ, err, (time.perf_counter() - started) * 1000)
    if environ.get("VX_TIMING", "") not in ("", "0"):
        _timing(timing, started, cpu, err)
    return 0


def _holds(argv: list[str], environ, err) -> tuple[dict | None, list[tuple[str, float]] | None]:
    """The receipt for this command, and the stage times of checking it; None if it does not hold."""
    found = _find(os.getcwd(), argv)
    if found is None or not _same_env(found[0], environ):
        return None, None
    header, data = found
    from vx.runlock import RunLock

    lock = RunLock(lambda message: _say(err, f"vx: {message}"))
    lock.acquire(header["root"])
    try:
        return header, _check(header, data, environ)
    finally:
        lock.release()


def _find(cwd: str, argv: list[str]) -> tuple[dict, memoryview] | None:
    """This command's receipt, under `.vx/receipts` of cwd or of a directory above: its header
    (checked) and the undecoded rest, which waits until git has been started."""
    name = name_of(cwd, argv)
    here = cwd
    while True:
        try:
            with open(os.path.join(here, RECEIPTS, name), "rb") as f:
                data = memoryview(f.read())
        except FileNotFoundError:
            data = None
        if data is not None:
            size = int.from_bytes(data[:4], "little")
            header = marshal.loads(data[4:4 + size])
            ok = (isinstance(header, dict) and header.get("format") == FORMAT and header.get("vx") == __version__
                  and header.get("cwd") == cwd and header.get("argv") == argv and header.get("root") == here)
            return (header, data[4 + size:]) if ok else None
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def _same_env(receipt: dict, environ) -> bool:
    if receipt["env_whole"] is not None:
        return receipt["env_whole"] == dict(environ)
    return all(environ.get(name) == value for name, value in receipt["env"].items())


def _check(header: dict, data: memoryview, environ) -> list[tuple[str, float]] | None:
    """Every fact of the receipt, cheapest first, while git runs; the rows are touched in a
    transaction committed only once git's listings match too. The stage times, or None."""
    t0 = time.perf_counter()
    children = _spawn_git(header["root"], header["git"], environ)
    try:
        body = marshal.loads(data)
        if not (_paths_hold(body) and _outputs_hold(body) and _artifacts_hold(header, body)):
            return None
        t1 = time.perf_counter()
        db = _open_index(header["cache_dir"])
        if db is None:
            return None
        try:
            if not _rows_hold_and_touch(db, body["entries"]):
                return None
            t2 = time.perf_counter()
            if not _git_holds(children, header["git"]):
                return None
            db.execute("COMMIT")
        finally:
            db.close()  # an uncommitted touch rolls back
    finally:
        _reap(children)
    return [("receipt check", (t1 - t0) * 1000), ("cache touch", (t2 - t1) * 1000),
            ("git enumeration", (time.perf_counter() - t2) * 1000)]


def _paths_hold(body: dict) -> bool:
    """Every path as the receipted run left it: its whole identity where its bytes or entries
    were used, its kind and inode where only those mattered, still missing where it was."""
    lstat = os.lstat
    for path, want in body["read"]:
        try:
            st = lstat(path)
        except OSError:
            if want is None:
                continue
            return False
        if want is None or (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != want:
            return False
    for path, want in body["probed"]:
        try:
            st = lstat(path)
        except OSError:
            if want is None:
                continue
            return False
        if want is None or (st.st_mode & 0o170000, 0, 0, 0, st.st_ino) != want:
            return False
    return True


def _racy(paths: list, started_ns: int) -> bool:
    """Whether a path was changed so close to the run's start that an edit in the same tick
    could have left its identity as recorded (the racy window, `witness.RACY_NS`)."""
    for _path, ident in paths:
        if ident is not None:
            coarse = ident[2] % 1_000_000_000 == 0 and ident[3] % 1_000_000_000 == 0
            if max(ident[2], ident[3]) >= started_ns - (witness.COARSE_RACY_NS if coarse else witness.RACY_NS):
                return True
    return False


def _outputs_hold(receipt: dict) -> bool:
    lstat, output_stat = os.lstat, witness.output_stat
    for path, want in receipt["outputs"]:
        try:
            if output_stat(lstat(path)) != want:
                return False
        except OSError:
            return False
    return True


def _artifacts_hold(header: dict, body: dict) -> bool:
    prefix = os.path.join(header["cache_dir"], "")
    for key, size, _crc in body["entries"]:
        try:
            if os.stat(f"{prefix}{key}.tar.zst").st_size != size:
                return False
        except OSError:
            return False
    return True


def _spawn_git(root: str, commands: list, environ) -> list[tuple[int, int]]:
    """Fork each noted git command as the listing ran it (cwd = the root), stdout to a memfd
    (three outputs at once cannot fill a pipe and stall), stderr and stdin to /dev/null."""
    if not hasattr(os, "memfd_create"):
        raise OSError("no memfd")
    children = []
    for argv, _code, _digest in commands:
        out = os.memfd_create("vx-git", os.MFD_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # the child: only async-signal-safe steps until exec
            try:
                os.chdir(root)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(out, 1)
                os.dup2(null, 2)
                os.execvpe(argv[0], list(argv), environ)
            finally:
                os._exit(127)
        children.append((pid, out))
    return children


def _git_holds(children: list[tuple[int, int]], commands: list) -> bool:
    import xxhash

    ok = True
    for (pid, out), (_argv, code, digest) in zip(children, commands):
        _, status = os.waitpid(pid, 0)
        size = os.fstat(out).st_size
        data = os.pread(out, size, 0) if size else b""
        if os.waitstatus_to_exitcode(status) != code or xxhash.xxh3_128_hexdigest(data) != digest:
            ok = False
    return ok


def _reap(children: list[tuple[int, int]]) -> None:
    for pid, out in children:
        os.close(out)
        try:
            os.kill(pid, 9)
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
    try:
        db = sqlite3.connect(f"file:{_uri_path(path)}?mode=rw", uri=True, isolation_level=None, timeout=5.0)
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA synchronous=NORMAL")  # as the store: WAL + NORMAL, no fsync per commit
        return db
    except sqlite3.Error:
        return None


def _rows_hold_and_touch(db, entries: list) -> bool:
    """Every hit's row still in the index as it was; `accessed_at` set as the store's close sets
    it (LC-06), in a transaction the caller commits."""
    sqlite3 = _sqlite()

    want = {key: (size, crc) for key, size, crc in entries}
    keys = list(want)
    now = time.time()
    try:
        db.execute("BEGIN IMMEDIATE")
        for i in range(0, len(keys), SQL_BATCH):
            batch = keys[i:i + SQL_BATCH]
            marks = ",".join("?" * len(batch))
            rows = db.execute(f"SELECT hash, size_bytes, crc FROM entries WHERE hash IN ({marks})", batch).fetchall()
            if len(rows) != len(batch) or any(want[h] != (size, crc) for h, size, crc in rows):
                return False
            db.execute(f"UPDATE entries SET accessed_at=? WHERE hash IN ({marks})", (now, *batch))
        return True
    except sqlite3.Error:
        return False


def _uri_path(path: str) -> str:
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def _footer(receipt: dict, environ, err, wall_ms: float) -> None:
    from vx import style

    palette = style.Palette(style.color_enabled(environ, err))
    lines = style.footer(receipt["tasks"], receipt["cached"], {}, wall_ms, __version__, palette)
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


# ---------------------------------------------------------------- writing


def write(*, argv: list[str], cwd: str, root: str, cache_dir: str, started_ns: int, env: witness.ReadEnv,
          noted: tuple[dict[str, bool], list], vouched, entries: list[tuple[str, int, str]],
          outputs: list[tuple[str, tuple]], tasks: int) -> bool:
    """Write the receipt of a run that qualified (the caller decides that); False when a fact
    cannot be vouched for (a path inside the racy window, say) and nothing was written.

    `vouched(rel)` names the files git vouches for: their bytes are pinned by git's listings,
    which the replay compares whole, so the receipt need not stat them too."""
    paths_read, commands = noted
    prefix = os.path.join(root, "")
    read, probed = [], []
    for path, whole in sorted(paths_read.items()):
        if whole and path.startswith(prefix) and vouched(path[len(prefix):]):
            continue
        (read if whole else probed).append((path, witness.identity(path, whole)))
    if not commands or _racy(read, started_ns):
        return False
    header = {
        "format": FORMAT, "vx": __version__, "cwd": cwd, "argv": list(argv), "root": root, "cache_dir": cache_dir,
        "env": {name: env_value(env, name) for name in sorted(env.names | set(GIT_ENV))},
        "env_whole": dict(env.items()) if env.whole else None,
        "git": [list(c) for c in commands], "tasks": tasks, "cached": tasks,
    }
    body = {"read": read, "probed": probed, "entries": entries, "outputs": outputs}
    head = marshal.dumps(header)
    return _store(os.path.join(root, RECEIPTS), name_of(cwd, argv), len(head).to_bytes(4, "little") + head
                  + marshal.dumps(body))


def _store(directory: str, name: str, data: bytes) -> bool:
    """Write atomically (a rename), beside a `*` .gitignore so git never lists receipts."""
    try:
        os.makedirs(directory, exist_ok=True)
        ignore = os.path.join(directory, ".gitignore")
        if not os.path.exists(ignore):
            with open(ignore, "w") as f:
                f.write("*\n")
        final = os.path.join(directory, name)
        temp = f"{final}.{os.getpid()}.tmp"
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, final)
    except OSError:
        return False
    return True


def env_value(env: witness.ReadEnv, name: str) -> str | None:
    return dict.get(env, name)  # without noting the look-up


def forget(root: str, cwd: str, argv: list[str]) -> None:
    """Drop this command's receipt: the run it described no longer holds."""
    try:
        os.unlink(os.path.join(root, RECEIPTS, name_of(cwd, argv)))
    except OSError:
        pass
