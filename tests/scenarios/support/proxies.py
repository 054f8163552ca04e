"""A forward HTTP proxy on loopback (stdlib), as corporate networks put in front of a cache:
CONNECT tunnels for https:// and absolute-URI requests for http://, optionally demanding basic
`Proxy-Authorization`. It keeps what it was asked (`seen`: "CONNECT 127.0.0.1:PORT", "GET
http://…") and the credentials it was shown, so a test can say the request went through it."""

from __future__ import annotations

import select
import socket
import socketserver
import threading
from urllib.parse import urlsplit


class _Handler(socketserver.StreamRequestHandler):
    server: HttpProxy
    rbufsize = 0  # unbuffered: what follows the head is still on the socket for the pipe

    def handle(self) -> None:
        head = self.rfile.readline(65536).decode("latin-1")
        lines = []
        while (line := self.rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
            lines.append(line.decode("latin-1"))
        try:
            method, target, version = head.split()
        except ValueError:
            return
        auth = next(
            (
                v.strip()
                for k, _, v in (l.partition(":") for l in lines)
                if k.lower() == "proxy-authorization"
            ),
            None,
        )
        self.server.seen.append(f"{method} {target}")
        self.server.credentials.append(auth)
        if self.server.require and auth != self.server.require:
            self.wfile.write(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
            )
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = socket.create_connection((host, int(port)))
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._pipe(upstream, b"")
            return
        parts = urlsplit(target)
        upstream = socket.create_connection((parts.hostname, parts.port or 80))
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        kept = [
            l for l in lines if l.split(":")[0].lower() not in ("proxy-authorization", "connection")
        ]
        request = f"{method} {path} {version}\r\n{''.join(kept)}Connection: close\r\n\r\n"
        self._pipe(upstream, request.encode("latin-1"))  # one request a connection: then it closes

    def _pipe(self, upstream: socket.socket, first: bytes) -> None:
        client = self.connection
        upstream.sendall(first)
        with upstream:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 60)
                if not ready:
                    return
                for src in ready:
                    data = src.recv(65536)
                    if not data:
                        return
                    (upstream if src is client else client).sendall(data)


class HttpProxy(socketserver.ThreadingTCPServer):
    """The proxy on 127.0.0.1:`port`; `require` is the Proxy-Authorization value it demands."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, require: str | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.require = require
        self.seen: list[str] = []
        self.credentials: list[str | None] = []
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request, client_address) -> None:
        pass

    def close(self) -> None:
        self.shutdown()
        self.server_close()
