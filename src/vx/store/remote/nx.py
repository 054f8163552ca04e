"""Nx's self-hosted remote cache API, `/v1/cache/{hash}` (Nx 20.8+).

GET answers 200 with the body or 404; PUT needs `Content-Length` and answers 200/202, or 409
when the record exists, which counts as done (records are immutable there). The API has no
HEAD, so `has` sends a GET and hangs up after the status line.
"""

from __future__ import annotations

from typing import BinaryIO

from vx.store.remote.layer import (
    BAD_RESPONSE,
    FETCH_WORKERS,
    Found,
    RemoteFailure,
    RemoteSettings,
    Sink,
    checked_key,
)
from vx.store.remote.wire import Wire


class NxLayer:
    """One server that speaks the Nx self-hosted cache API."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        self.wire = Wire(settings)

    def _path(self, key: str) -> str:
        return self.wire.url_path(f"/v1/cache/{checked_key(key)}")

    def has(self, key: str) -> Found | None:
        """A GET whose body is never read (the connection is dropped instead)."""
        reply = self.wire.call("GET", self._path(key))
        reply.close(reuse=False)
        return Found() if reply.status == 200 else None

    def get(self, key: str, sink: Sink) -> Found | None:
        reply = self.wire.call("GET", self._path(key))
        if reply.status != 200:
            reply.close()
            return None
        return Found(reply.read_into(sink, self.settings.max_artifact_bytes))

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        """PUT the bytes; 409 means another writer stored the key first, which is as good."""
        reply = self.wire.call(
            "PUT",
            self._path(key),
            headers={"Content-Type": "application/octet-stream"},
            body=src,
            size=size,
            timeout_s=self.settings.upload_timeout_s,
        )
        reply.close()
        if reply.status == 404:
            raise RemoteFailure(BAD_RESPONSE, "PUT answered 404")

    def warm(self) -> None:
        """Open the download threads' connections now, while the run plans (`Wire.warm`)."""
        self.wire.warm(FETCH_WORKERS)

    def close(self) -> None:
        self.wire.close()
