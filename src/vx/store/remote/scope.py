"""A named cache scope (`cacheScope: "pr-42"`) over a remote layer: entries are written under the
scope's own keys, and read from them first, then from the trusted keys (the task keys
themselves, which the default branch writes). So a pull request reuses what the default branch
built, and what it builds itself serves only itself.

A scope's key is derived from the task key, hex as every wire wants:
`sha256("vx-cache-scope\\0" + scope + "\\0" + key)`, cut to the task key's length (16 at least).
"""

from __future__ import annotations

import hashlib
from typing import BinaryIO

from vx.store.remote.layer import Found, RemoteLayer, Sink


def scoped_key(scope: str, key: str) -> str:
    digest = hashlib.sha256(f"vx-cache-scope\0{scope}\0{key}".encode()).hexdigest()
    return digest[: max(len(key), 16)]


class ScopedLayer:
    """The `RemoteLayer` protocol, with a scope's keys in front of the trusted ones."""

    def __init__(self, inner: RemoteLayer, scope: str):
        self.inner, self.scope = inner, scope
        self.settings = inner.settings

    def has(self, key: str) -> Found | None:
        return self.inner.has(scoped_key(self.scope, key)) or self.inner.has(key)

    def get(self, key: str, sink: Sink) -> Found | None:
        found = self.inner.get(scoped_key(self.scope, key), sink)
        return found if found is not None else self.inner.get(key, sink)

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        self.inner.put(scoped_key(self.scope, key), src, size, duration_ms)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str):
        """A layer's optional parts (a turbo server's `status`) are the inner layer's."""
        return getattr(self.inner, name)
