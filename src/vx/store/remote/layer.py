"""What a remote layer is and what it raises: the types both wires and the layered store share.

Only the stdlib is imported here; `http.client` and `ssl` load when a layer opens.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlsplit

from msgspec import Struct

DEFAULT_TURBO_API = "https://vercel.com/api"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_UPLOAD_TIMEOUT_S = 60.0
DEFAULT_MAX_ARTIFACT_BYTES = 1 << 30
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# an HTTP layer's download threads (store.layered's pool) and the connections `warm` opens for
# them: more than the cores, each also waits on the server and the disk
FETCH_WORKERS = 16

# Failure classes: one warning per class per run, repeats counted at the end.
UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
SERVER_ERROR = "server error"
REFUSED = "refused credentials"
TOO_LARGE = "too large"  # the server said so of a size (or vx's own bound): never pushback
BUSY = "server busy"  # RESOURCE_EXHAUSTED still, after the retries
BAD_RESPONSE = "bad response"
REJECTED = "rejected artifact"
# What a server's capabilities can say (REAPI): the layer is no use to vx, or it takes no writes.
UNSUPPORTED = "unsupported server"
READ_ONLY = "read-only server"


_HEX_KEY = re.compile(r"[0-9a-fA-F]+\Z")


class RemoteFailure(Exception):
    """One remote operation failed; `kind` is its class, `detail` never holds a secret."""

    def __init__(self, kind: str, detail: str, *, status: int | None = None):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.status = status


def checked_key(key: str) -> str:
    """The key itself if it is hex, as both wires require; anything else never reaches a URL."""
    if not _HEX_KEY.match(key):
        raise RemoteFailure(BAD_RESPONSE, f"refusing to send a non-hex key {key!r}")
    return key


class Found(Struct, frozen=True):
    """A remote entry as the server described it (either may be unknown)."""

    size: int | None = None
    duration_ms: float | None = None


class RemoteSettings(Struct, frozen=True):
    """One remote layer, resolved from `remoteCache` and the environment. Secrets stay out of repr.

    A Struct, not a dataclass: a fresh clone's restore imports this module on its way to the
    first download, and `dataclasses` and the code a frozen dataclass generates cost as much
    CPU as the rest of the module (docs/benchmarks.md)."""

    kind: str  # turbo | nx | reapi
    url: str  # base URL without a trailing slash (reapi: grpc:// or grpcs://host:port)
    token: str | None = None  # secret: never in repr
    team: str | None = None  # turbo slug
    team_id: str | None = None
    signature: bool = False
    signature_key: bytes | None = None  # secret: never in repr
    timeout_s: float = DEFAULT_TIMEOUT_S
    upload_timeout_s: float = DEFAULT_UPLOAD_TIMEOUT_S
    max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES
    upload: str = "ci"  # ci | always | never
    read_only: bool = False
    ci_vendor: str | None = None
    instance: str = ""  # reapi `instance_name`
    headers: tuple[tuple[str, str], ...] = ()  # reapi metadata (API keys): never in repr
    ca_cert: str | None = None  # reapi grpcs: PEM roots to trust instead of the system's
    client_cert: str | None = None  # reapi mTLS: PEM certificate chain and its key (paths)
    client_key: str | None = None
    max_concurrency: int | None = None  # reapi: calls in flight at most (None: vx's default)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.__rich_repr__())
        return f"RemoteSettings({shown})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:  # msgspec's own would show every field
        return [(n, getattr(self, n)) for n in self.__struct_fields__ if n not in _SECRET_FIELDS]

    @property
    def endpoint(self) -> str:
        """The base URL fit to print: no user info, no query."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"


_SECRET_FIELDS = ("token", "signature_key", "headers")


class Sink(Protocol):
    """Where a download streams: a file, or one that counts what it takes."""

    def write(self, data: bytes, /) -> int: ...


class RemoteLayer(Protocol):
    """The seam: `has` probes, `get` streams a body into `sink`, `put` streams `src` up."""

    settings: RemoteSettings

    def has(self, key: str) -> Found | None: ...

    def get(self, key: str, sink: Sink) -> Found | None: ...

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None: ...

    def close(self) -> None: ...
