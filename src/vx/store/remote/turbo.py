"""Turborepo's remote cache API, `/v8/artifacts` (docs/remote-cache.md).

HEAD probes, GET streams down, PUT streams up with `Content-Length` and
`x-artifact-duration`; the team goes in every query as turbo sends it (`teamId` only when the
id starts with `team_`, `slug` whenever one is set). With signatures on, each PUT carries
`x-artifact-tag = base64(HMAC-SHA256(key, hash ‖ teamId ‖ body))` (turbo's current layout)
and a GET whose tag is missing or wrong is refused before a byte of it is used.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, BinaryIO

from vx.store.remote.layer import (
    BAD_RESPONSE,
    FETCH_WORKERS,
    REFUSED,
    REJECTED,
    Found,
    RemoteFailure,
    RemoteSettings,
    Sink,
    checked_key,
)
from vx.store.remote.wire import CHUNK, Reply, Wire

if TYPE_CHECKING:
    import hmac

OPEN_STATUSES = ("enabled",)


def artifact_tag(key: str, team_id: str | None, body: BinaryIO, secret: bytes) -> str:
    """The `x-artifact-tag` of an artifact: turbo's HMAC layout, computed as the body streams."""
    mac = _tag_hmac(key, team_id, secret)
    body.seek(0)
    while chunk := body.read(CHUNK):
        mac.update(chunk)
    return base64.b64encode(mac.digest()).decode()


def _tag_hmac(key: str, team_id: str | None, secret: bytes) -> "hmac.HMAC":
    # Loaded only with a signature key: OpenSSL's hashlib is slow to load on every remote run.
    import hashlib
    import hmac

    return hmac.new(secret, key.encode() + (team_id or "").encode(), hashlib.sha256)


def _same(a: bytes, b: bytes) -> bool:
    import hmac

    return hmac.compare_digest(a, b)


def team_query(settings: RemoteSettings) -> dict[str, str]:
    """`teamId` only for a `team_…` id, `slug` whenever set: what turbo sends."""
    query = {}
    if settings.team_id and settings.team_id.startswith("team_"):
        query["teamId"] = settings.team_id
    if settings.team:
        query["slug"] = settings.team
    return query


class TurboLayer:
    """One Turborepo-compatible server (Vercel, ducktors' turborepo-remote-cache, …)."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        self.wire = Wire(settings)
        self._query = team_query(settings)

    def _path(self, key: str) -> str:
        return self.wire.url_path(f"/v8/artifacts/{checked_key(key)}", self._query)

    def has(self, key: str) -> Found | None:
        """HEAD: 200 is a hit, 404 a miss; no body moves."""
        reply = self.wire.call("HEAD", self._path(key))
        reply.close()
        return _found(reply) if reply.status == 200 else None

    def get(self, key: str, sink: Sink) -> Found | None:
        """Stream the artifact into `sink`; with signatures on, a bad or missing tag is refused."""
        reply = self.wire.call("GET", self._path(key))
        if reply.status != 200:
            reply.close()
            return None
        mac = self._verifier(key, reply)
        size = reply.read_into(sink, self.settings.max_artifact_bytes, mac.update if mac else None)
        if mac is not None and not _same(_tag_bytes(reply), mac.digest()):
            raise RemoteFailure(
                REJECTED, "its x-artifact-tag does not match the body (signature check)"
            )
        return Found(size, _found(reply).duration_ms)

    def _verifier(self, key: str, reply: Reply) -> "hmac.HMAC | None":
        if not self.settings.signature:
            return None
        if not reply.header("x-artifact-tag"):
            reply.close(reuse=False)
            raise RemoteFailure(REJECTED, "it has no x-artifact-tag and signatures are on")
        assert self.settings.signature_key is not None
        return _tag_hmac(key, self.settings.team_id, self.settings.signature_key)

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        """PUT the bytes of `src` (exactly `size`), signed when signatures are on; any 2xx is done."""
        headers = {
            "Content-Type": "application/octet-stream",
            "x-artifact-duration": str(int(duration_ms)),
        }
        if self.settings.signature and self.settings.signature_key:
            headers["x-artifact-tag"] = artifact_tag(
                key, self.settings.team_id, src, self.settings.signature_key
            )
        if self.settings.ci_vendor:
            headers["x-artifact-client-ci"] = self.settings.ci_vendor
        reply = self.wire.call(
            "PUT",
            self._path(key),
            headers=headers,
            body=src,
            size=size,
            timeout_s=self.settings.upload_timeout_s,
        )
        reply.close()
        if reply.status == 404:
            raise RemoteFailure(BAD_RESPONSE, "PUT answered 404")

    def status(self) -> str:
        """`GET /v8/artifacts/status`: enabled, disabled, over_limit or paused."""
        import json

        reply = self.wire.call("GET", self.wire.url_path("/v8/artifacts/status", self._query))
        body = _small_body(reply)
        try:
            value = json.loads(body).get("status")
        except (ValueError, AttributeError):
            value = None
        if not isinstance(value, str):
            raise RemoteFailure(BAD_RESPONSE, 'the status answer is not {"status": …}')
        if value != "enabled" and value in ("disabled", "over_limit", "paused"):
            raise RemoteFailure(REFUSED, f"the server says remote caching is {value}")
        return value

    def warm(self) -> None:
        """Open the download threads' connections now, while the run plans (`Wire.warm`)."""
        self.wire.warm(FETCH_WORKERS)

    def close(self) -> None:
        self.wire.close()


def _found(reply: Reply) -> Found:
    length = reply.header("content-length")
    duration = reply.header("x-artifact-duration")
    return Found(
        int(length) if length and length.isdigit() else None,
        float(duration) if duration and duration.replace(".", "", 1).isdigit() else None,
    )


def _tag_bytes(reply: Reply) -> bytes:
    try:
        return base64.b64decode(reply.header("x-artifact-tag") or "", validate=True)
    except ValueError:
        return b""


def _small_body(reply: Reply, cap: int = 64 << 10) -> bytes:
    import io

    sink = io.BytesIO()
    try:
        reply.read_into(sink, cap)
    finally:
        reply.close()
    return sink.getvalue()
