"""Two `vx run`s on one workspace take turns.

The lock is an `flock` on a file under TMPDIR named for the workspace root. The kernel drops it
when the holder's process ends, however it ends, so there is no stale lock to detect and
nothing to reclaim: a dead run never holds it, and a live process that happens to reuse a dead
run's pid is never mistaken for one. The holder's pid is written into the file only for the
"waiting for" line. The file is never removed (removing it would let two runs lock two
different files).

A run waits as long as the other one holds the lock — no timeout: the wait ends when that run
ends (or is killed), and Ctrl-C ends the wait. It polls every POLL_S rather than blocking in
`flock`, so a signal is acted on at once. If the lock cannot be had at all (TMPDIR unwritable,
another user's file), say so once and go on unlocked: a lock must never be the reason a build
fails.

`os`, `fcntl` and xxhash only: a replayed warm run (`vx.fastpath.receipt`) takes this same lock before it
has loaded anything else of vx.
"""

from __future__ import annotations

import fcntl
import os
import time

import xxhash

WAIT_NOTICE_S = 1.0
POLL_S = 0.05


class RunLock:
    def __init__(self, notify) -> None:
        self.notify = notify
        self.held = False
        self.path = ""
        self._fd = -1

    def acquire(self, root) -> None:
        """Block until the workspace's lock is ours (or cannot be had at all)."""
        digest = xxhash.xxh3_64_hexdigest(
            str(root).encode()
        )  # xxhash is loaded for the keys anyway; hashlib is not
        self.path = os.path.join(_tempdir(), f"vx-run-{digest}.flock")
        try:
            self._fd = os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
        except OSError as exc:
            self.notify(f"cannot take the run lock ({exc.strerror}); running unlocked")
            return
        started, told = time.monotonic(), False
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            except OSError as exc:
                self._close()
                self.notify(f"cannot take the run lock ({exc.strerror}); running unlocked")
                return
            if not told and time.monotonic() - started > WAIT_NOTICE_S:
                holder = self._holder()
                self.notify(f"waiting for another vx run{f' (pid {holder})' if holder else ''}…")
                told = True
            time.sleep(POLL_S)
        self.held = True
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, str(os.getpid()).encode(), 0)
        except OSError:
            pass  # the pid is only for the waiting line

    def release(self) -> None:
        if self.held:
            self.held = False
            try:
                os.ftruncate(self._fd, 0)
                fcntl.flock(
                    self._fd, fcntl.LOCK_UN
                )  # now, even if a forked helper still shares the descriptor
            except OSError:
                pass
        self._close()

    def _holder(self) -> int | None:
        try:
            text = os.pread(self._fd, 32, 0)
            return int(text) if text.strip() else None
        except (OSError, ValueError):
            return None

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _tempdir() -> str:
    """Where `tempfile.gettempdir` would look, without importing tempfile (shutil, random…):
    TMPDIR, TEMP, TMP, then the usual directories, the first one we may write in."""
    candidates = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    for d in [*candidates, "/tmp", "/var/tmp", "/usr/tmp"]:
        if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return os.path.abspath(d)
    return os.getcwd()
