"""Several remote layers as one (vx.store.remote.chain), against in-memory layers."""

import io

import pytest

from vx.store.remote.chain import ChainLayer
from vx.store.remote.layer import BAD_RESPONSE, SERVER_ERROR, Found, RemoteFailure


class Memory:
    settings = None

    def __init__(self, fail=None, half=False, status=None, **bodies: bytes):
        self.bodies, self.fail, self.half, self._status = dict(bodies), fail, half, status
        self.closed = False
        if status is not None:
            self.status = self._check

    def _check(self):
        if self._status != "on":
            raise RemoteFailure(self._status, "status")

    def has(self, key):
        if self.fail:
            raise RemoteFailure(SERVER_ERROR, "down")
        return Found(len(self.bodies[key])) if key in self.bodies else None

    def get(self, key, sink):
        if self.half:
            sink.write(b"par")
        if self.fail:
            raise RemoteFailure(SERVER_ERROR, "down")
        if key not in self.bodies:
            return None
        sink.write(self.bodies[key])
        return Found(len(self.bodies[key]))

    def put(self, key, src, size, duration_ms):
        if self.fail:
            raise RemoteFailure(SERVER_ERROR, "down")
        self.bodies[key] = src.read()

    def close(self):
        self.closed = True


def test_a_lookup_asks_each_layer_in_turn_until_one_holds_the_key():
    first, second = Memory(), Memory(k=b"body")
    chain = ChainLayer([(first, True), (second, True)])
    sink = io.BytesIO()
    assert chain.has("k") is not None and chain.get("k", sink) is not None
    assert sink.getvalue() == b"body"
    assert chain.has("other") is None and chain.get("other", io.BytesIO()) is None


def test_a_failing_layer_is_passed_over_and_raised_only_when_nothing_after_it_served():
    chain = ChainLayer([(Memory(fail=True), True), (Memory(k=b"body"), True)])
    sink = io.BytesIO()
    assert chain.get("k", sink) is not None and sink.getvalue() == b"body"
    with pytest.raises(RemoteFailure):
        chain.get("missing", io.BytesIO())
    with pytest.raises(RemoteFailure):
        chain.has("missing")


def test_a_read_that_failed_after_writing_part_of_an_artifact_is_raised_at_once():
    chain = ChainLayer([(Memory(fail=True, half=True), True), (Memory(k=b"body"), True)])
    with pytest.raises(RemoteFailure):
        chain.get("k", io.BytesIO())


def test_a_save_goes_to_each_written_layer_even_past_a_failing_one():
    failing, written, read_only = Memory(fail=True), Memory(), Memory()
    chain = ChainLayer([(failing, True), (written, True), (read_only, False)])
    with pytest.raises(RemoteFailure):
        chain.put("k", io.BytesIO(b"body"), 4, 1.0)
    assert written.bodies == {"k": b"body"} and read_only.bodies == {}


def test_a_layer_whose_status_says_off_is_not_written_and_one_without_status_is():
    off, no_endpoint, plain = Memory(status=SERVER_ERROR), Memory(status=BAD_RESPONSE), Memory()
    chain = ChainLayer([(off, True), (no_endpoint, True), (plain, True)])
    with pytest.raises(RemoteFailure):
        chain.put("k", io.BytesIO(b"body"), 4, 1.0)
    assert off.bodies == {} and no_endpoint.bodies == plain.bodies == {"k": b"body"}
    chain.close()
    assert off.closed and plain.closed


class Counting(Memory):
    def __init__(self, **kw):
        from types import SimpleNamespace

        super().__init__(**kw)
        self.calls, self.settings = 0, SimpleNamespace(endpoint="mem://dead")

    def get(self, key, sink):
        self.calls += 1
        return super().get(key, sink)


def test_each_layer_has_its_own_breaker_and_the_rest_are_asked_as_before():
    """A dead layer is asked three times, then passed over until its breaker's time is up (one
    request then), while the live layer after it serves every lookup."""
    now = [0.0]
    dead, live = Counting(fail=True), Memory(k=b"body")
    said: list[str] = []
    chain = ChainLayer([(dead, True), (live, True)], clock=lambda: now[0])
    chain.tell = said.append
    for _ in range(6):
        sink = io.BytesIO()
        assert chain.get("k", sink) is not None and sink.getvalue() == b"body"
    assert dead.calls == 3 and said == [
        "remote cache: mem://dead failed 3 times in a row; not asking it again for 30 s"
    ]
    now[0] = 31.0  # past the open time: one request goes through, fails, opens it again
    for _ in range(3):
        assert chain.get("k", io.BytesIO()) is not None
    assert dead.calls == 4 and len(said) == 2


def test_a_later_layers_hit_is_copied_back_to_the_written_layers_before_it():
    first, read_only, served = Memory(), Memory(), Memory(k=b"body")
    chain = ChainLayer([(first, True), (read_only, False), (served, True)])
    assert chain.get("k", io.BytesIO()) is not None
    assert chain.copy_back("k", io.BytesIO(b"body"), 4, 0.0)
    assert first.bodies == {"k": b"body"} and read_only.bodies == {}
    assert not chain.copy_back("k", io.BytesIO(b"body"), 4, 0.0)  # once per hit
    assert chain.get("k", io.BytesIO()) is not None  # the first layer serves it now
    assert not chain.copy_back("k", io.BytesIO(b"body"), 4, 0.0)  # nothing before it
