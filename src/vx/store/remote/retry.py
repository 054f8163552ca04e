"""How a REAPI call is tried again, as Bazel's remote retrier does it: which gRPC codes are
transient, the backoff between tries (exponential, jittered, bounded in tries and in time, a
server's `google.rpc.RetryInfo` delay honoured), and how many calls may be in flight, lowered
for the rest of the run when the server pushes back (RESOURCE_EXHAUSTED).

Pure logic over status names, a clock and a wait: grpc is not imported here (`reapi.py` turns
its errors into `Refusal`s), so the policy is tested with a fake clock and no sleeping.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

# Bazel's RETRIABLE_GRPC_ERRORS less CANCELLED: a call vx sees cancelled is one its own closing
# channel ended (a stop, the end of the run), and trying it again could only fail again.
TRANSIENT = frozenset({"UNKNOWN", "ABORTED", "INTERNAL", "UNAVAILABLE", "RESOURCE_EXHAUSTED"})
# A deadline passed is tried again on a read only: a write that ran out of time would send its
# whole body again, and the upload is not what the run waits on.
TRANSIENT_READ = TRANSIENT | {"DEADLINE_EXCEEDED"}
PUSHBACK = "RESOURCE_EXHAUSTED"  # the server's "not now": it lowers the calls in flight
# What a client says of a server it cannot reach or that keeps silent. Tried again only once the
# server has answered this run: one that never did is down or black-holed, and waiting out
# five backoffs for it would cost every run with a dead cache configured seconds for nothing.
NO_ANSWER = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})

RETRIES = 5  # tries after the first (Bazel's --remote_retries)
BUDGET_FACTOR = 2.0  # all of one call's tries end within this many of its timeouts
# Calls in flight before any pushback. gRPC multiplexes them on one HTTP/2 connection, so they
# cost the client little, and behind a link a download is two round trips (GetActionResult, then
# the blob): the restore's width is what bounds it (docs/benchmarks.md, "REAPI restore width").
DEFAULT_MAX_CONCURRENCY = 64


def calls_in_flight(max_concurrency: int | None) -> int:
    """The calls in flight before any pushback: `maxConnections`/`VX_REAPI_MAX_CONCURRENCY`, else
    the default. Also the REAPI layer's download threads (`store.layered`)."""
    return max(1, max_concurrency or DEFAULT_MAX_CONCURRENCY)


MIN_DEADLINE_S = 0.05  # a retry's deadline when the budget is all but spent


@dataclass(frozen=True, slots=True)
class Backoff:
    """Seconds between tries: `first_s`, times `factor` each retry, capped at `cap_s`, each one
    spread by ± `jitter` of itself. A server's RetryInfo delay replaces it, up to `hint_cap_s`.

    Bazel's is 100 ms doubling to 5 s with ± 10 %; vx spreads wider, as pushback reaches many
    of one client's threads at the same moment and a narrow spread sends them back together."""

    first_s: float = 0.1
    factor: float = 2.0
    cap_s: float = 5.0
    jitter: float = 0.5
    hint_cap_s: float = 10.0

    def delay(self, retry: int, rand: float, hinted: float | None = None) -> float:
        """Before retry number `retry` (0 for the first); `rand` is uniform in [0, 1)."""
        if hinted is not None and hinted >= 0:
            return min(hinted, self.hint_cap_s)
        base = min(self.first_s * self.factor**retry, self.cap_s)
        return base * (1 + self.jitter * (2 * rand - 1))


class Refusal(Exception):
    """One try's failure as the retrier reads it: the status name, the delay the server asked
    for (RetryInfo) if any, and what was raised (for the caller to classify at the end)."""

    def __init__(self, code: str, cause: BaseException, retry_delay: float | None = None):
        super().__init__(code)
        self.code, self.cause, self.retry_delay = code, cause, retry_delay


class Throttle:
    """How many calls may be in flight: at most `limit`, which pushback lowers and nothing
    raises again. One cut per round: a call entered before the last cut was sent under the old
    limit, so its refusal says nothing about the new one (as TCP halves once per window)."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.in_flight = 0
        self._round = 0
        self._cond = threading.Condition()

    def enter(self) -> int:
        """Wait for a free slot and take it; returns the round it was taken in."""
        with self._cond:
            while self.in_flight >= self.limit:
                self._cond.wait()
            self.in_flight += 1
            return self._round

    @property
    def cuts(self) -> int:
        """How many times pushback lowered the limit."""
        return self._round

    def leave(self) -> None:
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()

    def pushback(self, entered: int) -> int | None:
        """A call taken in round `entered` was refused for load (it still holds its slot): the
        limit becomes half the calls in flight. Returns the new limit when it was lowered."""
        with self._cond:
            if entered != self._round or self.limit == 1:
                return None
            self.limit = max(1, min(self.limit, self.in_flight) // 2)
            self._round += 1
            return self.limit


class Retrier:
    """Runs one call's tries (thread-safe: one Retrier per channel). `wait(s)` sleeps, and
    returns True when the layer closed meanwhile (no more tries); `lowered(n)` hears each cut."""

    def __init__(
        self,
        throttle: Throttle,
        backoff: Backoff = Backoff(),
        retries: int = RETRIES,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
        rand: Callable[[], float] = random.random,
        lowered: Callable[[int], None] | None = None,
    ):
        self.throttle, self.backoff, self.retries = throttle, backoff, retries
        self._clock, self._rand, self.lowered = clock, rand, lowered
        self._closed = threading.Event()
        self._wait = wait if wait is not None else self._closed.wait
        self._lock = threading.Lock()
        self.retried = 0  # tries after a first one, all calls together
        self.cured = 0  # calls that failed at least once, then succeeded
        self.pushed = 0  # tries the server refused for load
        self.answered = False  # the server answered a call this run (a reply or its own refusal)

    def close(self) -> None:
        """No more tries: a call waiting out its backoff gives up with its last refusal."""
        self._closed.set()

    def run(self, attempt: Callable[[float], T], *, timeout_s: float, reading: bool) -> T:
        """`attempt(deadline_s)` until it returns, or raises a Refusal that is not transient,
        or the tries or the time run out (then that Refusal is raised)."""
        start = self._clock()
        budget = timeout_s * BUDGET_FACTOR
        for retry in range(self.retries + 1):
            deadline = max(min(timeout_s, start + budget - self._clock()), MIN_DEADLINE_S)
            entered = self.throttle.enter()
            failed: Refusal | None = None
            try:
                result = attempt(deadline)
            except Refusal as refusal:
                failed = refusal
                if refusal.code == PUSHBACK:  # while it still holds its slot: in flight counts it
                    self._count(pushed=1)
                    cut = self.throttle.pushback(entered)
                    if cut is not None and self.lowered is not None:
                        self.lowered(cut)
            finally:
                self.throttle.leave()
            if failed is None or failed.code not in NO_ANSWER:
                self.answered = True
            if failed is None:
                if retry:
                    self._count(cured=1)
                return result
            delay = self._next(failed, retry, reading, start, budget)
            if delay is None:
                raise failed
            self._count(retried=1)
            if self._closed.is_set() or self._wait(delay):
                raise failed
        raise AssertionError("unreachable: the last try returns or raises")

    def _next(
        self, refusal: Refusal, retry: int, reading: bool, start: float, budget: float
    ) -> float | None:
        """The wait before the next try, or None when there is to be none."""
        if refusal.code not in (TRANSIENT_READ if reading else TRANSIENT):
            return None
        if refusal.code in NO_ANSWER and not self.answered:
            return None
        if retry >= self.retries:
            return None
        delay = self.backoff.delay(retry, self._rand(), refusal.retry_delay)
        if self._clock() + delay >= start + budget:
            return None
        return delay

    def _count(self, retried: int = 0, cured: int = 0, pushed: int = 0) -> None:
        with self._lock:
            self.retried += retried
            self.cured += cured
            self.pushed += pushed


# ------------------------------------------------------------ what a status's details say

RETRY_INFO = "google.rpc.RetryInfo"
PRECONDITION_FAILURE = "google.rpc.PreconditionFailure"
_SIZE_WORDS = ("size", "large", "exceed")


def retry_delay(details: list[tuple[str, bytes]]) -> float | None:
    """The seconds a `google.rpc.RetryInfo` among a status's details asks to wait, or None.
    `details` are its `Any`s as (type URL, value); one that does not decode is no answer."""
    for type_url, value in details:
        if type_url.rsplit("/", 1)[-1] != RETRY_INFO:
            continue
        try:
            for number, duration in _fields(value):
                if number == 1 and isinstance(duration, bytes):
                    parts = dict((n, v) for n, v in _fields(duration) if isinstance(v, int))
                    return parts.get(1, 0) + parts.get(2, 0) / 1e9
        except ValueError:
            return None
    return None


def size_violation(details: list[tuple[str, bytes]]) -> str | None:
    """The description of a `google.rpc.PreconditionFailure` violation about a size (a blob
    over the server's limit), or None: the one FAILED_PRECONDITION that means "too large"."""
    for type_url, value in details:
        if type_url.rsplit("/", 1)[-1] != PRECONDITION_FAILURE:
            continue
        try:
            for number, violation in _fields(value):
                if number != 1 or not isinstance(violation, bytes):
                    continue
                text = {n: v for n, v in _fields(violation) if isinstance(v, bytes)}
                kind = text.get(1, b"").decode(errors="replace")
                said = text.get(3, b"").decode(errors="replace")
                if any(w in (kind + " " + said).lower() for w in _SIZE_WORDS):
                    return said or kind
        except ValueError:
            return None
    return None


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """A protobuf message's fields as (number, varint or bytes); ValueError when malformed."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise ValueError("a field runs past the message")
            yield number, data[i : i + size]
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    if i != len(data):
        raise ValueError("a field runs past the message")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("a varint runs past the message")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i
