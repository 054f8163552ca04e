"""A named cache scope over a remote layer (vx.store.remote.scope), against an in-memory layer."""

import io

import pytest

from vx.store.remote.layer import Found
from vx.store.remote.scope import ScopedLayer, scoped_key


class Memory:
    """A remote layer holding bodies by key; it may have a status check, as a turbo server does."""

    settings = None

    def __init__(self, **bodies: bytes):
        self.bodies, self.asked = dict(bodies), []

    def has(self, key):
        self.asked.append(("has", key))
        return Found(len(self.bodies[key])) if key in self.bodies else None

    def get(self, key, sink):
        self.asked.append(("get", key))
        if key not in self.bodies:
            return None
        sink.write(self.bodies[key])
        return Found(len(self.bodies[key]))

    def put(self, key, src, size, duration_ms):
        self.bodies[key] = src.read(size)

    def close(self):
        pass


class WithStatus(Memory):
    def status(self):
        return "enabled"


@pytest.mark.feature("RC-06")
def test_a_scope_reads_its_own_key_first_then_the_trusted_one_and_writes_its_own():
    """Every run remembered and explained: a scope's entry wins over the trusted one, a trusted
    entry serves the scope when it has none, and a scope's upload never lands on a task key."""
    key = "ab" * 8
    mine = scoped_key("pr-1", key)
    assert len(mine) == len(key) and mine != key and mine != scoped_key("pr-2", key)
    inner = Memory(**{key: b"trusted"})
    layer = ScopedLayer(inner, "pr-1")
    sink = io.BytesIO()
    assert layer.get(key, sink) == Found(7) and sink.getvalue() == b"trusted"
    assert inner.asked == [("get", mine), ("get", key)]
    layer.put(key, io.BytesIO(b"built by pr-1"), 13, 5.0)
    assert inner.bodies == {key: b"trusted", mine: b"built by pr-1"}
    sink = io.BytesIO()
    layer.get(key, sink)
    assert sink.getvalue() == b"built by pr-1"


@pytest.mark.feature("RC-06")
def test_a_scoped_layer_keeps_the_inner_layers_status_check():
    """Every run remembered and explained: a scope does not skip the turbo status check that
    comes before a first upload (the layered store looks for it by name)."""
    assert ScopedLayer(WithStatus(), "pr-1").status() == "enabled"
    assert getattr(ScopedLayer(Memory(), "pr-1"), "status", None) is None
