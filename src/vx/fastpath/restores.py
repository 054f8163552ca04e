"""A replay's restores (`vx.fastpath.replay`): outputs found absent, restored from their artifacts by the
hit lane's own reader on plain values, in one process or, when there are many, two taking from
one queue. Nothing here stamps or decides: the replay stamps once every check held.

`os` only, and the reader (`vx.store.unpacking.unpack_plain`, loaded by `load_reader`).
"""

from __future__ import annotations

import os

PIPE_BUF = (
    4096  # the numbers are written before anyone reads: at most a page, the least a pipe holds
)


class Queue:
    """Restores shared out as they are taken: a pipe filled with task numbers before the fork,
    read four bytes (one number) at a time by both processes. A pipe read of a few bytes is
    atomic, so each number goes to exactly one; whoever is free takes the next — the main
    process after the index, the helper from the start — and both finish together. Draining
    it is "stop": the other process finds it empty after the artifact at hand."""

    def __init__(self, tasks: list):
        per = max(
            1, -(-len(tasks) // (PIPE_BUF // 4))
        )  # tasks a number stands for: all numbers fit in one pipe
        self.tasks, self.per = tasks, per
        self.fd, fill = os.pipe()
        try:
            os.write(fill, b"".join(i.to_bytes(4, "little") for i in range(-(-len(tasks) // per))))
        finally:
            os.close(fill)

    def __iter__(self):
        while number := os.read(self.fd, 4):
            i = int.from_bytes(number, "little") * self.per
            yield from self.tasks[i : i + self.per]

    def drain(self) -> None:
        while os.read(self.fd, PIPE_BUF):
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Helper:
    """A forked second extractor, started as soon as the restores are known: it inherits the
    reader and takes restores from the queue it shares with the main process (`share`, what
    the main process iterates) at once, beside the main process's checks. `stop` drains the
    queue: it finishes the artifact at hand (a restore is all or nothing) and exits without
    reporting. It never opens the index (no SQLite connection crosses a fork)."""

    def __init__(self, cache_dir: str, root: str, tasks: list):
        self.share = Queue(tasks)
        self._results, results_write = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:
            code = 1
            try:
                os.close(self._results)
                done = extract(cache_dir, root, self.share)
                if done is None:
                    self.share.drain()  # refused: the main process need not take the rest either
                else:
                    import marshal

                    with os.fdopen(results_write, "wb") as out:
                        out.write(marshal.dumps(done))
                    code = 0
            finally:
                os._exit(code)
        os.close(results_write)
        self._code: int | None = None

    def result(self) -> dict | None:
        """{key: files written} of the helper's share; None if it refused one or failed."""
        import marshal

        with os.fdopen(self._results, "rb") as got:
            self._results = -1
            data = got.read()
        return marshal.loads(data) if data and self._wait() == 0 else None

    def stop(self) -> None:
        """Reap the helper: one still extracting stops after the artifact at hand."""
        if self.share.fd >= 0:
            self.share.drain()
            self.share.close()
        if self._results >= 0:
            os.close(self._results)
            self._results = -1
        self._wait()

    def _wait(self) -> int | None:
        if self._pid:
            _, status = os.waitpid(self._pid, 0)
            self._pid, self._code = 0, os.waitstatus_to_exitcode(status)
        return self._code


def load_reader():
    """The artifact reader on plain values (`unpacking.unpack_plain`) with what it raises."""
    from vx.errors import VxError
    from vx.store.archive import ArchiveError
    from vx.store.unpacking import Dirs, unpack_plain
    from vx.store.zstd import codec

    codec()  # loaded here, before any fork: the child inherits it
    return (ArchiveError, VxError, OSError), unpack_plain, Dirs


def extract(cache_dir: str, root: str, tasks) -> dict | None:
    """{key: files written} of each task's outputs restored from its artifact (`tasks`, a list or
    a `Queue`); None when one was refused. A file written is (path, mode, size, ms mtime, ino,
    ctime_ns): its stamp is taken here, by whichever process restored it, as soon as its artifact
    is done, rather than by the main process once both are (`receipt.restored`): those lstats
    were the serial tail of a replayed restore, with the other core idle."""
    refused, unpack, Dirs = load_reader()
    done = {}
    prefix = os.path.join(root, "")
    lstat = os.lstat
    try:
        dirs = Dirs(root)  # parents shared by outputs found absent are opened once
    except OSError:
        return None
    try:
        for key, _size, _crc, expected, *_ in tasks:
            allowed = frozenset(p[len(prefix) :] for p, _ in expected)
            try:
                _log, files = unpack(
                    os.path.join(cache_dir, f"{key}.tar.zst"),
                    key=key,
                    allowed=allowed.__contains__,
                    root=root,
                    dirs=dirs,
                )
            except refused:
                return None
            stamped = []
            for path, size, mode, mtime_ms in files:
                st = lstat(prefix + path)
                stamped.append((path, mode, size, mtime_ms, st.st_ino, st.st_ctime_ns))
            done[key] = stamped
    finally:
        dirs.close()
    return done
