"""Several remote layers as one: the plugins' `cache` layers in declaration order, then the
configured remote. A lookup asks each in turn until one holds the key; a save goes to each
layer that is written. The layered store puts the local store in front (the floor), so a run
composes local, then this chain, exactly as it composes local and one remote.

A layer that fails is passed over to the next on a read; the failure is raised (and so warned)
only when no layer after it served. A read that failed after writing part of an artifact is
raised at once: the half-written bytes cannot be taken back.
"""

from __future__ import annotations

import threading
from typing import Any, BinaryIO

from vx.store.remote.layer import BAD_RESPONSE, Found, RemoteFailure, RemoteLayer, Sink


class _Counted:
    def __init__(self, sink: Sink):
        self.sink, self.written = sink, 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        return self.sink.write(data)


class ChainLayer:
    """The `RemoteLayer` protocol over `(layer, written)` pairs, asked in their order."""

    def __init__(self, layers: list[tuple[RemoteLayer, bool]]):
        self.layers = layers
        self.settings = layers[0][0].settings
        self._lock = threading.Lock()
        self._status: dict[int, RemoteFailure | None] = {}  # a turbo server's answer, asked once

    def has(self, key: str) -> Found | None:
        failed: RemoteFailure | None = None
        for layer, _ in self.layers:
            try:
                found = layer.has(key)
            except RemoteFailure as failure:
                failed = failed or failure
                continue
            if found is not None:
                return found
        if failed is not None:
            raise failed
        return None

    def get(self, key: str, sink: Sink) -> Found | None:
        failed: RemoteFailure | None = None
        for layer, _ in self.layers:
            counted = _Counted(sink)
            try:
                found = layer.get(key, counted)
            except RemoteFailure as failure:
                if counted.written:
                    raise
                failed = failed or failure
                continue
            if found is not None:
                return found
        if failed is not None:
            raise failed
        return None

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        failed: RemoteFailure | None = None
        for n, (layer, written) in enumerate(self.layers):
            if not written:
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
                failed = failed or failure
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

    def close(self) -> None:
        for layer, _ in self.layers:
            layer.close()
