"""One warning per failure class, a breaker against dead servers, refused credentials (RC-02)."""

import pytest

from vx.store.remote import REFUSED, REJECTED, SERVER_ERROR, TIMEOUT, UNREACHABLE, RemoteFailure
from vx.store.remote.health import BREAKER_AFTER, BREAKER_OPEN_S, Health


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make():
    clock, said = Clock(), []
    health = Health("http://127.0.0.1:9", clock=clock)
    health.attach(lambda message, level: said.append((level, message)))
    return health, clock, said


@pytest.mark.feature("RC-02")
def test_each_class_is_said_once_and_counted():
    health, _, said = make()
    for _ in range(3):
        health.failed("GET", "abc", RemoteFailure(REJECTED, "bad sum"), "treated as a miss")
        health.succeeded()
    health.failed("GET", "abd", RemoteFailure(TIMEOUT, "slow"), "treated as a miss")
    assert (
        len(said) == 2 and "GET abc at http://127.0.0.1:9: bad sum; treated as a miss" in said[0][1]
    )
    line, level = health.tally()
    assert level == "warning" and "rejected artifact ×3" in line and "timeout ×1" in line


@pytest.mark.feature("RC-02")
def test_breaker_opens_after_consecutive_transport_failures_then_half_opens():
    health, clock, said = make()
    for kind in (UNREACHABLE, TIMEOUT, SERVER_ERROR)[:BREAKER_AFTER]:
        assert health.allows(writing=False)
        health.failed("GET", "k", RemoteFailure(kind, "x"), "miss")
    assert not health.allows(writing=False) and not health.allows(writing=True)
    assert any("failed 3 times in a row" in m for _, m in said)
    clock.now += BREAKER_OPEN_S
    assert health.allows(writing=False)  # half-open: one try
    health.failed("GET", "k", RemoteFailure(UNREACHABLE, "x"), "miss")
    assert not health.allows(writing=False)  # and one failure re-opens it


@pytest.mark.feature("RC-02")
def test_a_success_resets_the_streak():
    health, _, _ = make()
    for _ in range(5):
        health.failed("GET", "k", RemoteFailure(UNREACHABLE, "x"), "miss")
        health.succeeded()
    assert health.allows(writing=False)


@pytest.mark.feature("RC-02")
def test_401_turns_everything_off_403_on_put_only_uploads():
    health, _, said = make()
    health.failed(
        "PUT", "k", RemoteFailure(REFUSED, "PUT answered 403", status=403), "not uploaded"
    )
    assert health.allows(writing=False) and not health.allows(writing=True)
    assert "uploads are off for this run" in said[-1][1]
    health.failed("GET", "k", RemoteFailure(REFUSED, "GET answered 401", status=401), "miss")
    assert not health.allows(writing=False)
    health.failed("GET", "k", RemoteFailure(REFUSED, "GET answered 401", status=401), "miss")
    assert len(said) == 2  # each switch-off is said once


def test_messages_wait_until_someone_listens():
    health = Health("http://x")
    health.failed("HEAD", "k", RemoteFailure(TIMEOUT, "slow"), "predicted as a miss")
    assert len(health.drain()) == 1 and health.drain() == []


def test_a_quiet_run_has_an_info_tally_and_an_idle_one_none():
    health, _, _ = make()
    assert health.tally() is None
    health.count("hits", 2)
    health.count("bytes_down", 2048)
    line, level = health.tally()
    assert level == "info" and "2 hits, 0 misses, 0 uploads, 2.0 KiB down, 0 B up" in line
