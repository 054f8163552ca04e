"""The REAPI retry policy (RC-09): which codes are tried again, the backoff, its bounds in tries
and in time, RetryInfo, and the calls in flight that pushback lowers. A fake clock: nothing
sleeps."""

import threading

import pytest

from vx.store.remote.retry import (
    RETRIES,
    Backoff,
    Refusal,
    Retrier,
    Throttle,
    retry_delay,
    size_violation,
)


class Clock:
    """Time that moves only when a try takes some or a wait passes."""

    def __init__(self):
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(round(seconds, 6))
        self.now += seconds
        return False


def retrier(clock, answered: bool = True, **kw) -> Retrier:
    """A retrier on `clock`, its jitter at the middle; `answered`: the server answered before."""
    kw.setdefault("throttle", Throttle(32))
    made = Retrier(clock=clock, wait=clock.wait, rand=lambda: 0.5, **kw)
    made.answered = answered
    return made


def failing(*codes: str, then="ok", takes: float = 0.0, clock=None):
    """A try that raises each code in turn (taking `takes` seconds), then returns `then`."""
    left = list(codes)
    deadlines: list[float] = []

    def attempt(deadline: float):
        deadlines.append(round(deadline, 6))
        if clock is not None:
            clock.now += takes
        if left:
            raise Refusal(left.pop(0), RuntimeError("cause"))
        return then

    attempt.deadlines = deadlines  # type: ignore[attr-defined]
    return attempt


@pytest.mark.feature("RC-09")
def test_backoff_doubles_from_100ms_to_a_5s_cap_spread_by_half_either_way():
    b = Backoff()
    assert [round(b.delay(n, 0.5), 6) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5]
    assert b.delay(0, 0.0) == pytest.approx(0.05) and b.delay(0, 0.999999) == pytest.approx(0.15)
    assert b.delay(3, 0.5, hinted=2.5) == 2.5  # the server's RetryInfo, as asked
    assert b.delay(3, 0.5, hinted=600) == 10.0  # up to a cap


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "code", ["RESOURCE_EXHAUSTED", "UNAVAILABLE", "ABORTED", "INTERNAL", "UNKNOWN"]
)
def test_a_transient_code_is_tried_again_after_the_backoff(code):
    clock = Clock()
    r = retrier(clock)
    assert r.run(failing(code, code), timeout_s=30, reading=False) == "ok"
    assert clock.waits == [0.1, 0.2]
    assert (r.retried, r.cured) == (2, 1)


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "code",
    ["NOT_FOUND", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "PERMISSION_DENIED", "CANCELLED"],
)
def test_an_answer_is_never_tried_again(code):
    clock = Clock()
    r = retrier(clock)
    with pytest.raises(Refusal) as raised:
        r.run(failing(code), timeout_s=30, reading=True)
    assert raised.value.code == code and clock.waits == [] and r.retried == 0


@pytest.mark.feature("RC-09")
def test_a_passed_deadline_is_tried_again_on_a_read_only():
    clock = Clock()
    assert retrier(clock).run(failing("DEADLINE_EXCEEDED"), timeout_s=30, reading=True) == "ok"
    with pytest.raises(Refusal):
        retrier(Clock()).run(failing("DEADLINE_EXCEEDED"), timeout_s=30, reading=False)


@pytest.mark.feature("RC-09")
def test_a_server_that_never_answered_is_not_waited_for_again():
    """Refused connections or silence from the first call on: a dead server costs one try.
    Once it has answered (a reply, or a refusal of its own), the same codes are tried again."""
    for code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        clock = Clock()
        r = retrier(clock, answered=False)
        with pytest.raises(Refusal):
            r.run(failing(code), timeout_s=30, reading=True)
        assert clock.waits == [] and not r.answered
    clock = Clock()
    r = retrier(clock, answered=False)
    assert r.run(failing("RESOURCE_EXHAUSTED", "UNAVAILABLE"), timeout_s=30, reading=True) == "ok"
    assert clock.waits == [0.1, 0.2] and r.answered


@pytest.mark.feature("RC-09")
def test_tries_are_bounded_in_number():
    clock = Clock()
    attempt = failing(*["UNAVAILABLE"] * 20)
    with pytest.raises(Refusal):
        retrier(clock).run(attempt, timeout_s=30, reading=True)
    assert len(attempt.deadlines) == RETRIES + 1 == 6
    assert clock.waits == [0.1, 0.2, 0.4, 0.8, 1.6]


@pytest.mark.feature("RC-09")
def test_tries_are_bounded_in_time_at_twice_the_timeout():
    """A stalled server: each try takes what its deadline allows; the second gets only what
    is left of the budget, and no third starts past it."""
    clock = Clock()
    attempt = failing(*["DEADLINE_EXCEEDED"] * 20, takes=1.0, clock=clock)
    with pytest.raises(Refusal):
        retrier(clock).run(attempt, timeout_s=1.0, reading=True)
    assert attempt.deadlines == [1.0, 0.9] and clock.waits == [0.1]


@pytest.mark.feature("RC-09")
def test_a_servers_retry_info_sets_the_wait():
    clock = Clock()
    hinted = Refusal("RESOURCE_EXHAUSTED", RuntimeError(), retry_delay=1.25)
    tries = iter([hinted])

    def attempt(deadline):
        for refusal in tries:
            raise refusal
        return "ok"

    assert retrier(clock).run(attempt, timeout_s=30, reading=True) == "ok"
    assert clock.waits == [1.25]


@pytest.mark.feature("RC-09")
def test_closing_ends_the_wait_with_the_last_refusal():
    clock = Clock()
    r = retrier(clock)
    r.close()
    attempt = failing("UNAVAILABLE", "UNAVAILABLE")
    with pytest.raises(Refusal):
        r.run(attempt, timeout_s=30, reading=True)
    assert len(attempt.deadlines) == 1


@pytest.mark.feature("RC-09")
def test_pushback_halves_the_calls_in_flight_once_a_round_down_to_one():
    t = Throttle(32)
    rounds = [t.enter() for _ in range(16)]
    assert t.pushback(rounds[0]) == 8  # half of the 16 in flight, below the 32 allowed
    assert t.pushback(rounds[1]) is None  # sent under the old limit: no news
    cuts = []
    for n in (16, 8, 4, 2, 1):
        if n < 16:
            rounds = [t.enter() for _ in range(n)]
            cuts.append(t.pushback(rounds[-1]))
        for _ in range(n):
            t.leave()
    assert cuts == [4, 2, 1, None] and t.limit == 1 and t.in_flight == 0  # never below one


@pytest.mark.feature("RC-09")
def test_a_cut_is_told_and_a_cured_call_leaves_its_slot():
    clock = Clock()
    told: list[int] = []
    throttle = Throttle(4)
    r = retrier(clock, throttle=throttle, lowered=told.append)
    r.run(failing("RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"), timeout_s=30, reading=True)
    assert told == [1]  # one call in flight: straight to one
    assert throttle.in_flight == 0 and throttle.limit == 1


@pytest.mark.feature("RC-09")
def test_a_full_throttle_holds_the_next_call_until_one_leaves():
    t = Throttle(1)
    t.enter()
    entered = threading.Event()
    waiter = threading.Thread(target=lambda: (t.enter(), entered.set()))
    waiter.start()
    t.leave()
    assert entered.wait(30)
    waiter.join(30)
    assert t.in_flight == 1


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
PRECONDITION = "type.googleapis.com/google.rpc.PreconditionFailure"


@pytest.mark.feature("RC-09")
def test_retry_info_is_read_from_the_status_details():
    duration = _field(1, 2) + _field(2, 500_000_000)
    assert retry_delay([("x/other", b"junk"), (RETRY_INFO, _field(1, duration))]) == 2.5
    assert retry_delay([(RETRY_INFO, b"\x0a\x09\x08")]) is None  # cut short
    assert retry_delay([]) is None


@pytest.mark.feature("RC-09")
def test_only_a_size_violation_of_a_precondition_failure_is_too_large():
    def failure(kind: str, said: str) -> bytes:
        return _field(
            1, _field(1, kind.encode()) + _field(2, b"blobs/x") + _field(3, said.encode())
        )

    big = failure("TOO_LARGE", "blob exceeds max_cas_blob_size_bytes")
    assert size_violation([(PRECONDITION, big)]) == "blob exceeds max_cas_blob_size_bytes"
    assert size_violation([(PRECONDITION, failure("MISSING", "blob missing"))]) is None
    assert size_violation([(RETRY_INFO, big)]) is None
