"""HTTP/1.1 to one cache server: a keep-alive connection per worker thread, deadlines on every
byte, bounded retries, and one classification of what went wrong.

Built on `http.client` rather than httpx: the calls are four verbs on one host, the stdlib
is several times cheaper to import (paid only when a remote is configured, but on every such
run: docs/optimizations.md #28), and streaming bodies with an exact `Content-Length`, a
running HMAC and a byte ceiling is plainest with the socket-level reads http.client gives.

Retries: only 429 and 5xx other than 501, at most twice, with jittered
backoff from 0.5 s (a `Retry-After` is honoured up to 10 s); a connection the server closed
while idle is retried once on a fresh one. Nothing else is retried: a refused connection or
a timeout answers the question, and the layered store's breaker takes it from there.
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import ssl
import threading
import time
from typing import BinaryIO, Callable, Mapping
from urllib.parse import urlencode, urlsplit

from msgspec import Struct

from vx import __version__
from vx.store.remote.layer import (
    BAD_RESPONSE,
    REFUSED,
    SERVER_ERROR,
    TIMEOUT,
    TOO_LARGE,
    UNREACHABLE,
    RemoteFailure,
    RemoteSettings,
    Sink,
)
from vx.store.remote.proxy import Proxy, ProxyError, for_url

CHUNK = 256 << 10
CONNECT_TIMEOUT_S = 5.0
MIN_RATE = 256 << 10  # bytes/s a big body must keep up, past the request timeout (slow drips end)
DRAIN_LIMIT = 64 << 10  # an unread body this small is read away so the connection is reused
MAX_RETRIES = 2
BACKOFF_S = 0.5
BACKOFF_CAP_S = 10.0
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504, 505, 507, 508, 510, 511})
_IDLE_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class Reply(Struct):
    """A response whose body is still on the wire; `read_into` or `close` it."""

    status: int
    headers: Mapping[str, str]
    response: http.client.HTTPResponse
    started: float
    timeout_s: float
    wire: "Wire"
    received: int = 0

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def read_into(
        self, sink: Sink, limit: int, on_chunk: Callable[[bytes], None] | None = None
    ) -> int:
        """Stream the body into `sink`, refusing more than `limit` bytes or a rate too slow to finish."""
        length = _content_length(self)
        if length is not None and length > limit:
            self.close(reuse=False)
            raise RemoteFailure(
                TOO_LARGE, f"the artifact is {length} bytes, over the {limit} byte bound"
            )
        total = 0
        while chunk := self._chunk():
            total += len(chunk)
            if total > limit:
                self.close(reuse=False)
                raise RemoteFailure(TOO_LARGE, f"the artifact is over the {limit} byte bound")
            if on_chunk is not None:
                on_chunk(chunk)
            try:
                sink.write(chunk)
            except (
                BaseException
            ):  # the sink refused (the temp budget, a full disk): drop the connection
                self.close(reuse=False)
                raise
        if length is not None and total != length:
            self.close(reuse=False)
            raise RemoteFailure(BAD_RESPONSE, f"the body ended after {total} of {length} bytes")
        # `read1` stops at Content-Length without marking the response done; until it is, the
        # thread's kept-alive connection answers its next request with ResponseNotReady.
        self.close()
        return total

    def close(self, *, reuse: bool = True) -> None:
        """Finish with the response: a small unread body (a 404's, a HEAD's) is read away so the
        keep-alive connection serves the next request; anything else drops the connection."""
        length = self.response.length  # None for a chunked body: never drained, it could be endless
        if reuse and not self.response.isclosed() and length is not None and length <= DRAIN_LIMIT:
            try:
                self.response.read()
            except (OSError, http.client.HTTPException):
                pass
        if reuse and self.response.isclosed():
            return
        self.response.close()
        self.wire.drop()

    def _chunk(self) -> bytes:
        allowed = self.started + self.timeout_s + (self.received / MIN_RATE)
        left = allowed - time.monotonic()
        if left <= 0:
            self.close(reuse=False)
            raise RemoteFailure(TIMEOUT, f"the body arrived slower than {MIN_RATE // 1024} KiB/s")
        self.wire.set_timeout(min(left, self.timeout_s))
        try:
            data = self.response.read1(CHUNK)
        except (TimeoutError, socket.timeout):
            self.close(reuse=False)
            raise RemoteFailure(TIMEOUT, f"no data for {self.timeout_s:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            self.close(reuse=False)
            raise RemoteFailure(
                BAD_RESPONSE, f"the connection broke mid-body ({type(exc).__name__})"
            ) from None
        self.received += len(data)
        return data


def _content_length(reply: Reply) -> int | None:
    text = reply.header("content-length")
    return int(text) if text and text.isdigit() else None


class _DeadlineReader:
    """A request body that refuses to keep sending past its deadline (slow servers end)."""

    def __init__(self, src: BinaryIO, deadline: float):
        self._src, self._deadline = src, deadline

    def read(self, n: int = -1) -> bytes:
        if time.monotonic() > self._deadline:
            raise RemoteFailure(TIMEOUT, "the upload did not finish in time")
        return self._src.read(CHUNK if n is None or n < 0 else min(n, CHUNK))


class _Headers:
    """A response's header fields as `http.client` reads them (`get`, `get_all`, `items`, names
    matched without case), parsed by splitting lines rather than by the `email` package.

    Why: `http.client` hands the header block to `email.parser`, which costs more than the rest
    of a small download's request and response together; a remote restore makes one per task.
    Line limits stay `http.client`'s own (`_read_headers`). A folded line (leading space or tab)
    continues the field before it; a line without a colon is not a field and is skipped."""

    __slots__ = ("_fields",)

    def __init__(self, lines: list[bytes]):
        fields: list[tuple[str, str]] = []
        for raw in lines:
            line = raw.decode("iso-8859-1").rstrip("\r\n")
            if not line:
                continue
            if line[0] in " \t":
                if fields:
                    name, value = fields[-1]
                    fields[-1] = (name, f"{value} {line.strip()}".strip())
                continue
            name, colon, value = line.partition(":")
            if colon and name and name == name.strip():
                fields.append(
                    (name, value.lstrip(" \t"))
                )  # as email keeps it: trailing blanks stay
        self._fields = fields

    def get(self, name: str, default: str | None = None) -> str | None:
        name = name.lower()
        return next((v for k, v in self._fields if k.lower() == name), default)

    def get_all(self, name: str, failobj: object = None):
        name = name.lower()
        found = [v for k, v in self._fields if k.lower() == name]
        return found or failobj

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)


class _Response(http.client.HTTPResponse):
    """`http.client.HTTPResponse` with its header block read into `_Headers`; the status line,
    framing (chunked, Content-Length, HEAD) and keep-alive decisions are the stdlib's own."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()  # type: ignore[attr-defined]
            if status != http.client.CONTINUE:
                break
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]  # a 100's header
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = _Headers(http.client._read_headers(self.fp))  # type: ignore[attr-defined,assignment]
        encoding = self.headers.get("transfer-encoding")
        self.chunked = bool(encoding and encoding.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        if (
            status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
            or 100 <= status < 200
            or self._method == "HEAD"  # type: ignore[attr-defined]
        ):
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


def _create_connection(address: tuple[str, int | None], *args, **kwargs) -> socket.socket:
    """`socket.create_connection` (http.client's hook for it) with an ASCII host name passed as
    bytes: as a str, the resolver encodes it through the `idna` codec, whose loading (with
    `unicodedata` and `stringprep`) is a remote run's dearest import after http.client's own."""
    host, port = address
    if isinstance(host, str) and host.isascii():
        return socket.create_connection((host.encode(), port), *args, **kwargs)  # type: ignore[arg-type]
    return socket.create_connection((host, port), *args, **kwargs)


class Wire:
    """Requests to one server, one connection per thread; `close` drops them all."""

    def __init__(self, settings: RemoteSettings):
        parts = urlsplit(settings.url)
        self.settings = settings
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._base = parts.path.rstrip("/")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._idle: list[http.client.HTTPConnection] = []  # opened by `warm`, not yet taken
        self._closed = False  # `warm`'s threads keep nothing they open after `close`
        self._auth = {"Authorization": f"Bearer {settings.token}"} if settings.token else {}
        self._context = ssl.create_default_context() if self._https else None
        self._origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        self._proxy, self._proxy_error = _proxy_for(settings.url)

    def url_path(self, path: str, query: Mapping[str, str] | None = None) -> str:
        return self._base + path + (f"?{urlencode(query)}" if query else "")

    # ------------------------------------------------------------ connections

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None and self._idle:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is not None:  # one `warm` opened: the server may have closed it while idle
                self._local.conn, self._local.used = conn, True
                return conn
        if conn is None:
            conn = self._new_connection()
            self._local.conn = conn
            self._local.used = False
        return conn

    def _new_connection(self) -> http.client.HTTPConnection:
        proxy = self._proxy
        host, port = (proxy.host, proxy.port) if proxy else (self._host, self._port)
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(
                host, port, timeout=CONNECT_TIMEOUT_S, context=self._context
            )
            if proxy:  # CONNECT: TLS runs end to end, the proxy sees the host alone
                auth = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else {}
                conn.set_tunnel(self._host, self._port or 443, headers=auth)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT_S)
        conn.response_class = _Response
        conn._create_connection = _create_connection  # type: ignore[attr-defined]
        with self._lock:
            self._open.add(conn)
        return conn

    def warm(self, count: int) -> list[threading.Thread]:
        """Open `count` connections now, each on a short thread of its own (TCP, and TLS or a
        proxy's tunnel as a request would), for the download threads to take: a fresh clone's
        first downloads then find them open, not one round trip or more after the keys
        (docs/remote-cache.md, "Start-up"). A failure here is nobody's: the request that
        would have used the connection opens its own, and meets it there."""
        if self._proxy_error or count < 1:
            return []

        def opening() -> None:
            conn = self._new_connection()
            try:
                self._connect(conn, self.settings.timeout_s)
            except (OSError, http.client.HTTPException, UnicodeError, ValueError):
                with self._lock:
                    self._open.discard(conn)
                conn.close()
                return
            with self._lock:
                if not self._closed and conn in self._open:
                    self._idle.append(conn)
                    return
                self._open.discard(conn)
            conn.close()

        threads = [
            threading.Thread(target=opening, name="vx-remote-open", daemon=True)
            for _ in range(count)
        ]

        def launching() -> None:
            for thread in threads[1:]:
                thread.start()
            opening()

        # the caller starts one thread, which starts the rest: each start waits for the new
        # thread to be scheduled, and on a loaded machine 16 such waits held up planning
        threads[0] = threading.Thread(target=launching, name="vx-remote-open", daemon=True)
        threads[0].start()
        return threads

    def set_timeout(self, seconds: float) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            conn.sock.settimeout(max(seconds, 0.001))

    def drop(self) -> None:
        """Close this thread's connection, and those `warm` opened that no thread took (as old
        as the one that failed, and likely ended as it was); the next request opens a fresh one."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        with self._lock:
            idle, self._idle = self._idle, []
            for old in (conn, *idle):
                self._open.discard(old)  # type: ignore[arg-type]
        for old in (conn, *idle):
            if old is not None:
                old.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._open, self._idle = list(self._open), set(), []
        for conn in conns:
            conn.close()

    # ------------------------------------------------------------ requests

    def call(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] = {},
        body: BinaryIO | None = None,
        size: int = 0,
        timeout_s: float | None = None,
    ) -> Reply:
        """Send one request (retrying as the module says); return 2xx, 404 and 409 replies.

        Every other outcome raises RemoteFailure with its class; the body of a returned reply
        is still unread.
        """
        timeout = timeout_s or self.settings.timeout_s
        for attempt in range(MAX_RETRIES + 1):
            reply = self._attempt(method, path, headers, body, size, timeout)
            if reply.status not in _RETRY_STATUS or attempt == MAX_RETRIES:
                break
            wait = _backoff(attempt, reply.header("retry-after"))
            reply.close()
            time.sleep(wait)
        return _classified(reply, method, attempt)

    def _attempt(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: BinaryIO | None,
        size: int,
        timeout: float,
    ) -> Reply:
        """One exchange; a reused connection the server had closed is retried once, fresh (one
        `warm` opened counts as reused: it sat idle)."""
        if self._proxy_error:
            raise RemoteFailure(UNREACHABLE, self._proxy_error)
        self._connection()  # this thread's, a warmed one, or a new one: no I/O yet
        reused = getattr(self._local, "used", False)
        try:
            return self._exchange(method, path, headers, body, size, timeout)
        except _IDLE_CLOSED:
            self.drop()
            if not reused:
                raise RemoteFailure(UNREACHABLE, "the server closed the connection") from None
        try:
            return self._exchange(method, path, headers, body, size, timeout)
        except _IDLE_CLOSED:
            self.drop()
            raise RemoteFailure(UNREACHABLE, "the server closed the connection") from None

    def _exchange(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: BinaryIO | None,
        size: int,
        timeout: float,
    ) -> Reply:
        if self._proxy_error:
            raise RemoteFailure(UNREACHABLE, self._proxy_error)
        conn = self._connection()
        started = time.monotonic()
        all_headers = {"User-Agent": f"vx {__version__}", **self._auth, **headers}
        if self._proxy and not self._https:  # a plain request through the proxy: an absolute URI
            path = self._origin + path
            if self._proxy.authorization:
                all_headers["Proxy-Authorization"] = self._proxy.authorization
        if body is not None:
            body.seek(0)
            all_headers["Content-Length"] = str(size)
            body = _DeadlineReader(body, started + timeout + size / MIN_RATE)  # type: ignore[assignment]
        try:
            self._connect(conn, timeout)
            response = self._send(conn, method, path, body, all_headers)
        except _IDLE_CLOSED:
            raise
        except RemoteFailure:
            self.drop()
            raise
        except (TimeoutError, socket.timeout):
            self.drop()
            raise RemoteFailure(TIMEOUT, f"no answer in {timeout:g} s") from None
        except UnicodeError:  # the `idna` encoding of a host name with an empty or overlong label
            self.drop()
            raise RemoteFailure(UNREACHABLE, "the host name is not a valid DNS name") from None
        except (OSError, http.client.HTTPException) as exc:
            self.drop()
            why = _why(exc)
            if self._proxy:
                why += f" (through the proxy {self._proxy.host}:{self._proxy.port})"
            raise RemoteFailure(UNREACHABLE, why) from None
        self._local.used = True
        heads = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, heads, response, started, timeout, self)

    def _connect(self, conn: http.client.HTTPConnection, timeout: float) -> None:
        if conn.sock is None:
            conn.timeout = min(CONNECT_TIMEOUT_S, timeout)
            conn.connect()
        conn.sock.settimeout(timeout)

    def _send(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        path: str,
        body,
        headers: Mapping[str, str],
    ) -> http.client.HTTPResponse:
        """Send and read the status; a server that answered early (413) and hung up mid-body is heard."""
        fresh = not getattr(self._local, "used", False)
        try:
            conn.request(method, path, body=body, headers=headers, encode_chunked=False)
        except (BrokenPipeError, ConnectionResetError):
            if body is None or not fresh:
                raise
            try:
                return conn.getresponse()
            except (OSError, http.client.HTTPException):
                raise RemoteFailure(UNREACHABLE, "the server hung up during the upload") from None
        return conn.getresponse()


def _proxy_for(url: str) -> tuple[Proxy | None, str]:
    """The proxy the environment names for `url` (docs/remote-cache.md § Proxies), or why none
    can be used."""
    try:
        return for_url(url, os.environ), ""
    except ProxyError as exc:
        return None, str(exc)


def _classified(reply: Reply, method: str, retries: int = 0) -> Reply:
    """Pass through what callers decide on (2xx, 404, 409); turn the rest into a failure."""
    status = reply.status
    if 200 <= status < 300 or status in (404, 409):
        return reply
    reply.close()
    if status in (401, 403):
        raise RemoteFailure(REFUSED, f"{method} answered {status}", status=status)
    if status == 413:
        raise RemoteFailure(
            TOO_LARGE, "the server refused the body as too large (413)", status=status
        )
    if status >= 500 or status == 429:
        tries = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
        raise RemoteFailure(SERVER_ERROR, f"{method} answered {status}{tries}", status=status)
    raise RemoteFailure(BAD_RESPONSE, f"{method} answered {status}", status=status)


def _backoff(attempt: int, retry_after: str | None) -> float:
    """Seconds before the next try: `Retry-After` (capped) or 0.5 s doubling, with jitter."""
    if retry_after and retry_after.strip().isdigit():
        return min(float(retry_after.strip()), BACKOFF_CAP_S)
    base = min(BACKOFF_S * (2**attempt), BACKOFF_CAP_S)
    return base * (0.75 + random.random() / 2)


def _why(exc: BaseException) -> str:
    """Name a connection failure without echoing anything a server or URL could carry."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "the host name did not resolve"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or type(exc).__name__})"
    words = str(exc).split()
    if words[:3] == ["Tunnel", "connection", "failed:"]:  # http.client's CONNECT answered non-2xx
        return f"the proxy refused the tunnel ({words[3] if words[3:] else '?'})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__
