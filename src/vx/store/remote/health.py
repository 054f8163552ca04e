"""How the remote layer is doing this run: warnings once per class, a breaker, and the tally.

Every failure becomes a miss or a skipped upload. The first failure of each class is
said at once, naming the operation, the key and the endpoint (never a credential); repeats
are only counted and said at the end. Three transport failures in a row open the breaker
for 30 s, so a dead or black-holed server costs about one timeout, not one per task; after
that one request is let through to see whether it came back.
Refused credentials turn the layer off for the run (a 403 on upload: uploads only), and so
does a server whose capabilities vx cannot use; one that takes no writes turns uploads off.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from typing import Callable

from vx.store.remote import (
    BUSY,
    READ_ONLY,
    REFUSED,
    SERVER_ERROR,
    TIMEOUT,
    UNREACHABLE,
    UNSUPPORTED,
    RemoteFailure,
)

BREAKER_AFTER = 3
BREAKER_OPEN_S = 30.0
# The failures a breaker counts: what is left once the retries are spent (pushback a retry
# cured never reaches here).
TRANSPORT = frozenset({UNREACHABLE, TIMEOUT, SERVER_ERROR, BUSY})
_TRANSPORT = TRANSPORT

Say = Callable[[str, str], None]  # (message, level: info | warning)


class Health:
    """Thread-safe: pool threads record, the loop thread (or the closer) hears the messages."""

    def __init__(
        self, endpoint: str, clock: Callable[[], float] = time.monotonic, breaker: bool = True
    ):
        self.endpoint = endpoint
        self._breaker = breaker  # off over a chain of layers, which has one per layer
        self._clock = clock
        self._lock = threading.Lock()
        self._say: Say | None = None
        self._wake: Callable[[], None] | None = None
        self._pending: list[tuple[str, str]] = []
        self.failures: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.reads_on = True
        self.writes_on = True
        self._streak = 0
        self._open_until = 0.0

    # ------------------------------------------------------------ messages

    def attach(self, say: Say | None, wake: Callable[[], None] | None = None) -> None:
        """Deliver messages through `say`, then and from now on.

        With `wake`, `say` belongs to another thread (the event loop's): pool threads only
        queue a message and call `wake`, which must schedule `flush` on that thread. A message
        leaves the queue only when delivered, so one raised after the loop ended waits for
        the next `attach` (the closer's) instead of being lost.
        """
        with self._lock:
            self._say, self._wake = say, wake
        self.flush()

    def flush(self) -> None:
        """Hand every queued message to `say`, oldest first (on `say`'s own thread)."""
        with self._lock:
            say, pending = self._say, self._pending
            if say is None:
                return
            self._pending = []
        for message, level in pending:
            say(message, level)

    def drain(self) -> list[tuple[str, str]]:
        """Messages nobody heard yet (no `say` attached), oldest first."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    def tell(self, message: str, level: str = "warning") -> None:
        from vx.proc.masking import mask_text, secrets_of

        # a server's reason may quote what it was sent: a header value, the token
        message = mask_text(message, secrets_of(os.environ)) or ""
        with self._lock:
            self._pending.append((message, level))
            wake, direct = self._wake, self._say is not None and self._wake is None
        if direct:
            self.flush()
        elif wake is not None:
            try:
                wake()
            except RuntimeError:  # the loop has closed: the closer's attach delivers it
                pass

    # ------------------------------------------------------------ gate

    def allows(self, writing: bool) -> bool:
        """Whether a request may go out now (layer on for this direction, breaker closed)."""
        with self._lock:
            if not (self.writes_on if writing else self.reads_on):
                return False
            if self._open_until and self._clock() < self._open_until:
                self.counts["skipped"] += 1
                return False
            if self._open_until:  # half-open: one more failure re-opens at once
                self._open_until, self._streak = 0.0, BREAKER_AFTER - 1
            return True

    def succeeded(self) -> None:
        with self._lock:
            self._streak = 0

    def count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    # ------------------------------------------------------------ failures

    def failed(self, op: str, key: str, failure: RemoteFailure, consequence: str) -> None:
        """Count a failure; say the first of its class, and what it turns off if anything."""
        if failure.kind in (UNSUPPORTED, READ_ONLY):
            self._unfit(failure)
            return
        with self._lock:
            self.failures[failure.kind] += 1
            first = self.failures[failure.kind] == 1
            tripped = self._trip(failure)
        if failure.kind == REFUSED:
            self._refused(op, failure)
        elif first:
            self.tell(
                f"remote cache: {op} {key} at {self.endpoint}: {failure.detail}; {consequence} "
                f"(further `{failure.kind}` failures are counted at the end)"
            )
        if tripped:
            self.tell(
                f"remote cache: {self.endpoint} failed {BREAKER_AFTER} times in a row; "
                f"not asking it again for {BREAKER_OPEN_S:g} s"
            )

    def _trip(self, failure: RemoteFailure) -> bool:
        if failure.kind not in _TRANSPORT or not self._breaker:
            return False
        self._streak += 1
        if self._streak < BREAKER_AFTER or self._open_until:
            return False
        self._open_until = self._clock() + BREAKER_OPEN_S
        return True

    def _refused(self, op: str, failure: RemoteFailure) -> None:
        """401 anywhere, or 403 on a read: the layer is off; 403 on a write: uploads are off."""
        writes_only = op == "PUT" and failure.status != 401
        with self._lock:
            was_on = self.writes_on if writes_only else (self.reads_on or self.writes_on)
            self.writes_on = False
            if not writes_only:
                self.reads_on = False
        if was_on:
            what = "uploads are off" if writes_only else "the remote cache is off"
            names = (
                "VX_REAPI_HEADERS"
                if self.endpoint.startswith("grpc")
                else "TURBO_TOKEN / NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN"
            )
            self.tell(
                f"remote cache: {self.endpoint} refused {op}: {failure.detail}; {what} for this run "
                f"(check {names} and its permissions)"
            )

    def _unfit(self, failure: RemoteFailure) -> None:
        """What the server said it cannot do: no failure of the run's, so not in the tally. A
        server vx cannot use turns the layer off (a warning); a read-only one, uploads (a note)."""
        writes_only = failure.kind == READ_ONLY
        with self._lock:
            was_on = self.writes_on if writes_only else (self.reads_on or self.writes_on)
            self.writes_on = False
            if not writes_only:
                self.reads_on = False
        if was_on:
            what = "uploads are off" if writes_only else "the remote cache is off"
            self.tell(
                f"remote cache: {self.endpoint} {failure.detail}; {what} for this run",
                "info" if writes_only else "warning",
            )

    # ------------------------------------------------------------ the end

    def tally(self) -> tuple[str, str] | None:
        """One closing line: what the remote did, and each failure class with its count."""
        c = self.counts
        if not (c or self.failures):
            return None
        parts = [
            f"{c['hits']} hit{'s' * (c['hits'] != 1)}",
            f"{c['misses']} miss{'es' * (c['misses'] != 1)}",
            f"{c['uploads']} upload{'s' * (c['uploads'] != 1)}",
        ]
        if c["bytes_down"] or c["bytes_up"]:
            parts.append(f"{_size(c['bytes_down'])} down, {_size(c['bytes_up'])} up")
        line = f"remote cache ({self.endpoint}): " + ", ".join(parts)
        if self.failures:
            line += "; failures: " + ", ".join(
                f"{kind} ×{n}" for kind, n in sorted(self.failures.items())
            )
        if c["skipped"]:
            line += f"; {c['skipped']} request{'s' * (c['skipped'] != 1)} skipped while the breaker was open"
        return line, "warning" if self.failures else "info"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.1f} GiB"
