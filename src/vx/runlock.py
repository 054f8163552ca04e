"""Two `vx run`s on one workspace take turns (GR-16).

The lock is an atomic directory under TMPDIR named for the workspace root, holding the holder's
pid; a lock whose pid is dead is reclaimed. If the lock cannot be made at all, say so once and
go on unlocked: a lock must never be the reason a build fails.

`os` and xxhash only: a replayed warm run (`vx.receipt`) takes this same lock before it has
loaded anything else of vx.
"""

from __future__ import annotations

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

    def acquire(self, root) -> None:
        """Block until the workspace's lock is ours (or cannot be had at all)."""
        digest = xxhash.xxh3_64_hexdigest(str(root).encode())  # xxhash is loaded for the keys anyway; hashlib is not
        self.path = os.path.join(_tempdir(), f"vx-run-{digest}.lock")
        pid_file = os.path.join(self.path, "pid")
        started, told = time.monotonic(), False
        while True:
            try:
                os.mkdir(self.path, 0o700)
                with open(pid_file, "w") as f:
                    f.write(str(os.getpid()))
                self.held = True
                return
            except FileExistsError:
                holder = self._holder()
                if holder is None or not _alive(holder):
                    self._reclaim()
                    continue
                if not told and time.monotonic() - started > WAIT_NOTICE_S:
                    self.notify(f"waiting for another vx run (pid {holder})…")
                    told = True
                time.sleep(POLL_S)
            except OSError as exc:
                self.notify(f"cannot take the run lock ({exc.strerror}); running unlocked")
                return

    def release(self) -> None:
        if self.held:
            self._reclaim()
            self.held = False

    def _holder(self) -> int | None:
        for attempt in range(2):
            try:
                with open(os.path.join(self.path, "pid")) as f:
                    return int(f.read())
            except (OSError, ValueError):
                # Just created by another run that has not written its pid yet: give it a moment.
                if attempt == 0:
                    time.sleep(POLL_S)
        return None

    def _reclaim(self) -> None:
        try:
            try:
                os.unlink(os.path.join(self.path, "pid"))
            except FileNotFoundError:
                pass
            os.rmdir(self.path)
        except OSError:
            pass


def _tempdir() -> str:
    """Where `tempfile.gettempdir` would look, without importing tempfile (shutil, random…):
    TMPDIR, TEMP, TMP, then the usual directories, the first one we may write in."""
    candidates = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    for d in [*candidates, "/tmp", "/var/tmp", "/usr/tmp"]:
        if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return os.path.abspath(d)
    return os.getcwd()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
