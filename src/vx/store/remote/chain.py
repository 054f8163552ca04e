"""Several remote layers as one: the plugins' `cache` layers in declaration order, then the
configured remote. A lookup asks each in turn until one holds the key; a save goes to each
layer that is written. The layered store puts the local store in front (the floor), so a run
composes local, then this chain, exactly as it composes local and one remote.

A layer that fails is passed over to the next on a read; the failure is raised (and so warned)
only when no layer after it served. A read that failed after writing part of an artifact is
raised at once: the half-written bytes cannot be taken back. Each layer has its own breaker
(vx.store.remote.health's rule): a dead layer is passed over for a while without being asked,
and the layers beside it are asked as before.

A hit a later layer served is copied back to the written layers before it (`copy_back`, which
the layered store calls in the background once the download is proven), so the next run finds
it in the first layer it asks, as a remote hit lands in the local cache.
"""

from __future__ import annotations

import threading
import time
from typing import Any, BinaryIO, Callable

from vx.store.remote.health import BREAKER_AFTER, BREAKER_OPEN_S, TRANSPORT
from vx.store.remote.layer import BAD_RESPONSE, Found, RemoteFailure, RemoteLayer, Sink


class _Counted:
    def __init__(self, sink: Sink):
        self.sink, self.written = sink, 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        return self.sink.write(data)


class _Breaker:
    """One layer's breaker: BREAKER_AFTER transport failures in a row pass it over for
    BREAKER_OPEN_S; then one request is let through, and one more failure opens it again."""

    def __init__(self, clock: Callable[[], float]):
        self._clock, self.streak, self.open_until = clock, 0, 0.0

    def allows(self) -> bool:
        if self.open_until and self._clock() < self.open_until:
            return False
        if self.open_until:  # half-open
            self.open_until, self.streak = 0.0, BREAKER_AFTER - 1
        return True

    def failed(self, failure: RemoteFailure) -> bool:
        """Count a failure; whether it opened the breaker."""
        if failure.kind not in TRANSPORT:
            return False
        self.streak += 1
        if self.streak < BREAKER_AFTER or self.open_until:
            return False
        self.open_until = self._clock() + BREAKER_OPEN_S
        return True


class ChainLayer:
    """The `RemoteLayer` protocol over `(layer, written)` pairs, asked in their order."""

    breaks_per_layer = True  # the layered store's own breaker stays closed: each layer has one

    def __init__(
        self, layers: list[tuple[RemoteLayer, bool]], clock: Callable[[], float] = time.monotonic
    ):
        self.layers = layers
        self.settings = layers[0][0].settings
        self._lock = threading.Lock()
        self._status: dict[int, RemoteFailure | None] = {}  # a turbo server's answer, asked once
        self._breakers = [_Breaker(clock) for _ in layers]
        self._gate = threading.Lock()  # the breakers' and `_served`'s
        self._served: dict[str, int] = {}  # key -> the layer a `get` was served by
        self.tell: Callable[[str], None] | None = None  # says a layer's breaker opened

    def _allows(self, n: int) -> bool:
        with self._gate:
            return self._breakers[n].allows()

    def _succeeded(self, n: int) -> None:
        with self._gate:
            self._breakers[n].streak = 0

    def _failed(self, n: int, failure: RemoteFailure) -> None:
        with self._gate:
            tripped = self._breakers[n].failed(failure)
        if tripped and self.tell is not None:
            self.tell(
                f"remote cache: {self.layers[n][0].settings.endpoint} failed {BREAKER_AFTER} "
                f"times in a row; not asking it again for {BREAKER_OPEN_S:g} s"
            )

    def has(self, key: str) -> Found | None:
        failed: RemoteFailure | None = None
        for n, (layer, _) in enumerate(self.layers):
            if not self._allows(n):
                continue
            try:
                found = layer.has(key)
            except RemoteFailure as failure:
                self._failed(n, failure)
                failed = failed or failure
                continue
            self._succeeded(n)
            if found is not None:
                return found
        if failed is not None:
            raise failed
        return None

    def get(self, key: str, sink: Sink) -> Found | None:
        failed: RemoteFailure | None = None
        for n, (layer, _) in enumerate(self.layers):
            if not self._allows(n):
                continue
            counted = _Counted(sink)
            try:
                found = layer.get(key, counted)
            except RemoteFailure as failure:
                self._failed(n, failure)
                if counted.written:
                    raise
                failed = failed or failure
                continue
            self._succeeded(n)
            if found is not None:
                if n:
                    with self._gate:
                        self._served[key] = n
                return found
        if failed is not None:
            raise failed
        return None

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        self._put_to(range(len(self.layers)), key, src, size, duration_ms)

    def copy_back(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> bool:
        """Write a hit a later layer served (its proven artifact, `src`) to the written layers
        before that one; False when there are none (the first layer served, or nothing did)."""
        with self._gate:
            served = self._served.pop(key, 0)
        if not any(written for _, written in self.layers[:served]):
            return False
        self._put_to(range(served), key, src, size, duration_ms)
        return True

    def _put_to(self, which: range, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        failed: RemoteFailure | None = None
        for n in which:
            layer, written = self.layers[n]
            if not written or not self._allows(n):
                continue
            refused = self._refused(n, layer)
            if refused is not None:
                failed = failed if failed is not None or refused.kind == BAD_RESPONSE else refused
                if refused.kind != BAD_RESPONSE:
                    continue
            src.seek(0)
            try:
                layer.put(key, src, size, duration_ms)
            except RemoteFailure as failure:
                self._failed(n, failure)
                failed = failed or failure
                continue
            self._succeeded(n)
        if failed is not None:
            raise failed

    def _refused(self, n: int, layer: Any) -> RemoteFailure | None:
        """A layer with a `status` (a turbo server) is written only once it says caching is on;
        one without the endpoint (BAD_RESPONSE) is taken as on, as the layered store does."""
        status = getattr(layer, "status", None)
        if status is None:
            return None
        with self._lock:  # every uploader waits for the one answer
            if n not in self._status:
                try:
                    status()
                    self._status[n] = None
                except RemoteFailure as failure:
                    self._status[n] = failure
            return self._status[n]

    def listen(self, tell: Callable[[str, str], None]) -> None:
        """Each layer that has something of its own to say says it through `tell`."""
        for layer, _ in self.layers:
            listen = getattr(layer, "listen", None)
            if listen is not None:
                listen(tell)

    def close(self) -> None:
        for layer, _ in self.layers:
            layer.close()
