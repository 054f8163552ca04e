"""Two `vx run`s on one workspace take turns (GR-16).

The lock is an atomic directory under TMPDIR named for the workspace root, holding the holder's
pid; a lock whose pid is dead is reclaimed. If the lock cannot be made at all, say so once and
go on unlocked: a lock must never be the reason a build fails.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Callable

import xxhash

WAIT_NOTICE_S = 1.0
POLL_S = 0.05


class RunLock:
    def __init__(self, notify: Callable[[str], None]) -> None:
        self.notify = notify
        self.held = False
        self.path = Path()

    def acquire(self, root: Path) -> None:
        """Block until the workspace's lock is ours (or cannot be had at all)."""
        digest = xxhash.xxh3_64_hexdigest(str(root).encode())  # xxhash is loaded for the keys anyway; hashlib is not
        self.path = Path(tempfile.gettempdir()) / f"vx-run-{digest}.lock"
        started, told = time.monotonic(), False
        while True:
            try:
                self.path.mkdir(mode=0o700)
                (self.path / "pid").write_text(str(os.getpid()))
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
        try:
            return int((self.path / "pid").read_text())
        except (OSError, ValueError):
            # Just created by another run that has not written its pid yet: give it a moment.
            time.sleep(POLL_S)
            try:
                return int((self.path / "pid").read_text())
            except (OSError, ValueError):
                return None

    def _reclaim(self) -> None:
        try:
            (self.path / "pid").unlink(missing_ok=True)
            self.path.rmdir()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
