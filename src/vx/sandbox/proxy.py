"""Filter a run's outbound network: one proxy on the host, one unix socket per sandboxed task.

A task whose `exec.sandbox.allow.network` lists hosts runs in its own network namespace with
only `lo`. Its one door out is a unix socket that vx bind-mounts into the sandbox; inside, a
`socat` bridge listens on 127.0.0.1:3128 and forwards to it, and the proxy variables point
there. The proxy on the host speaks HTTP CONNECT, plain-HTTP absolute-URI proxying and SOCKS5
(CONNECT only) on the same socket (the first byte tells them apart), admits a destination only
when an allow pattern matches and no deny pattern does, and records every refusal as a
`network` violation of the task that owns the socket.

The proxy runs its own asyncio loop on one thread, so it serves while vx's loop is busy and
from synchronous callers alike; each connection is two pump coroutines with bounded buffers.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Mapping, Sequence
from urllib.parse import urlsplit

from msgspec import Struct

from vx.model import Violation
from vx.proc import warden
from vx.sandbox import hosts

BRIDGE_PORT = 3128  # inside the sandbox's own network namespace, so no clash between tasks
MAX_HEAD = 64 * 1024  # an HTTP request head (line + headers) larger than this is refused
CHUNK = 64 * 1024  # per read; writes wait for drain, so a connection buffers O(CHUNK) per direction
CONNECT_TIMEOUT_S = 15.0
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with the NUL
REFUSED_BODY = "vx sandbox: network access to {dest} is not granted (exec.sandbox.allow.network)\n"
_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
}


class ProxyError(RuntimeError):
    """The proxy could not start (its directory or socket)."""


class Refusal(Struct, frozen=True):
    """One refused connection: which socket (task) asked, for what, and which rule said no."""

    label: str
    host: str
    port: int
    denied_by: str | None  # the deny pattern, or None when no allow pattern matched

    @property
    def endpoint(self) -> str:
        return hosts.endpoint(self.host, self.port)


class Proxy:
    """One per run: listens on unix sockets in a private 0700 directory; see the module doc."""

    def __init__(self, directory: Path | None = None):
        self._parent = directory
        self.directory: Path | None = None
        self._filter: hosts.HostFilter | None = None
        self._filters: dict[str, hosts.HostFilter] = {}  # a task's own policy, by label
        self._deny_addresses: dict[str, frozenset[str]] = {}  # a deny name -> what it resolved to
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[str, asyncio.AbstractServer] = {}
        self._sockets: dict[str, Path] = {}
        self._connections: set[asyncio.Task] = set()
        self._refusals: list[Refusal] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------ lifecycle

    def start(self, allow: Sequence[str], deny: Sequence[str] = ()) -> Path:
        """Start serving with the run's union of allow patterns and every deny; return the
        default socket (label "") — `attach` gives each task its own for attribution."""
        self._filter = hosts.HostFilter(allow, deny)
        self.directory = Path(tempfile.mkdtemp(prefix="vx-net-", dir=self._parent))
        os.chmod(self.directory, 0o700)
        warden.remove_at_end(str(self.directory))
        self.preload.write_text(NODE_PRELOAD)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vx-proxy", daemon=True)
        self._thread.start()
        return self.attach("")

    def attach(
        self, label: str, allow: Sequence[str] | None = None, deny: Sequence[str] = ()
    ) -> Path:
        """A socket of its own for `label` (a task id); refusals through it are that task's.

        With `allow`, that task's connections are judged by its own patterns alone, never by
        another task's (the run's filter from `start` serves labels attached without)."""
        if allow is not None:
            self._filters[label] = hosts.HostFilter(allow, deny)
        if label in self._sockets:
            return self._sockets[label]
        assert self._loop is not None and self.directory is not None, "start() first"
        path = self.directory / f"{len(self._sockets)}.sock"
        if len(os.fsencode(path)) > SOCKET_PATH_MAX:
            raise ProxyError(f"the proxy socket path is too long for a unix socket: {path}")
        future = asyncio.run_coroutine_threadsafe(self._listen(label, path), self._loop)
        self._servers[label] = future.result()
        self._sockets[label] = path
        return path

    def detach(self, label: str) -> None:
        """Stop listening for `label` (its task ended); its refusals stay readable."""
        server = self._servers.pop(label, None)
        path = self._sockets.pop(label, None)
        if server is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(server.close)
        if path is not None:
            path.unlink(missing_ok=True)

    def stop(self) -> None:
        """Close every listener and connection, end the thread, remove the directory."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
        self._loop = self._thread = None
        self._servers.clear()
        self._sockets.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            warden.removed(str(self.directory))

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def grants_loopback(self) -> bool:
        """An allow pattern names the host's loopback, so loopback must go through the proxy."""
        return self._filter is not None and self._filter.grants_loopback()

    def grants_loopback_to(self, label: str) -> bool:
        found = self._filters.get(label, self._filter)
        return found is not None and found.grants_loopback()

    def _filter_for(self, label: str) -> hosts.HostFilter:
        found = self._filters.get(label, self._filter)
        assert found is not None
        return found

    @property
    def preload(self) -> Path:
        """The Node preload that routes built-in fetch through the proxy (see NODE_PRELOAD)."""
        assert self.directory is not None, "start() first"
        return self.directory / "fetch-proxy.cjs"

    # ------------------------------------------------------------ results

    def refusals(self, label: str | None = None) -> list[Refusal]:
        """Refused connections, in order, for one label (or all)."""
        with self._lock:
            return [r for r in self._refusals if label is None or r.label == label]

    def violations(self, label: str | None = None, ignore: Sequence[str] = ()) -> list[Violation]:
        """One `network` violation per refused `host:port` (first occurrence order); `ignore`
        holds `host:port` entries (case-insensitive) that are silenced."""
        silenced = {entry.lower() for entry in ignore}
        seen: dict[str, Violation] = {}
        for refusal in self.refusals(label):
            dest = refusal.endpoint
            if dest.lower() not in silenced and dest not in seen:
                seen[dest] = Violation("network", dest, _grant_hint(refusal))
        return list(seen.values())

    def _refuse(
        self, label: str, host: str, port: int, denied: hosts.HostPattern | None = None
    ) -> None:
        denied = denied or self._filter_for(label).denied_by(host, port)
        with self._lock:
            self._refusals.append(
                Refusal(label, hosts.normal(host), port, denied.text if denied else None)
            )

    # ------------------------------------------------------------ serving (on the proxy's loop)

    async def _listen(self, label: str, path: Path) -> asyncio.AbstractServer:
        path.unlink(missing_ok=True)

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
            try:
                await self._serve(label, reader, writer)
            except asyncio.CancelledError:
                pass  # stop(): end quietly (3.11's stream callback would log a cancelled task)

        server = await asyncio.start_unix_server(on_connection, path=str(path), limit=MAX_HEAD)
        os.chmod(path, 0o600)
        return server

    async def _close_all(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)

    async def _serve(
        self, label: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            first = await reader.readexactly(1)
            if first == b"\x05":
                await self._socks(label, reader, writer)
            else:
                await self._http(label, first, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError):
            pass  # a client that hung up or spoke nonsense; nothing to record
        finally:
            writer.close()

    async def _admit(self, label: str, host: str, port: int) -> list[str] | None:
        """The addresses to dial for an admitted destination, or None (refused and recorded).

        Deny patterns are matched against the name *and* every address it resolves to, and deny
        names against what they resolve to, so `allow localhost` cannot reach a denied
        `127.0.0.1`; the proxy then dials the addresses it checked, never the name again."""
        judge = self._filter_for(label)
        if not judge.allows(host, port):
            self._refuse(label, host, port)
            return None
        addresses = await _resolve(host, port)
        for pattern in judge.deny:
            hit = any(pattern.matches(a, port) for a in addresses) or (
                not pattern.wildcard
                and pattern.host
                and not hosts.is_ip(pattern.host)
                and (pattern.port is None or pattern.port == port)
                and set(addresses) & await self._resolved_deny(pattern.host)
            )
            if hit:
                self._refuse(label, host, port, pattern)
                return None
        return addresses

    async def _resolved_deny(self, name: str) -> frozenset[str]:
        if name not in self._deny_addresses:
            self._deny_addresses[name] = frozenset(await _resolve(name, 0))
        return self._deny_addresses[name]

    # ------------------------------------------------------------ HTTP

    async def _http(
        self, label: str, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            head = first + await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return await _http_reply(
                writer, 431, "Request Header Fields Too Large", "request head too large\n"
            )
        request = _parse_head(head)
        if request is None:
            return await _http_reply(
                writer, 400, "Bad Request", "vx sandbox proxy: not a proxy request\n"
            )
        method, host, port, forward = request
        addresses = await self._admit(label, host, port)
        if addresses is None:
            body = REFUSED_BODY.format(dest=hosts.endpoint(hosts.normal(host), port))
            return await _http_reply(writer, 403, "Forbidden", body, blocked=True)
        upstream = await _open(addresses, port)
        if upstream is None:
            return await _http_reply(
                writer, 502, "Bad Gateway", f"vx sandbox proxy: cannot reach {host}:{port}\n"
            )
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream[1].write(forward)
        await _relay(reader, writer, *upstream)

    # ------------------------------------------------------------ SOCKS5

    async def _socks(
        self, label: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        methods = await reader.readexactly((await reader.readexactly(1))[0])
        if 0 not in methods:  # we only speak "no authentication"
            writer.write(b"\x05\xff")
            return await writer.drain()
        writer.write(b"\x05\x00")
        _, command, _, atyp = await reader.readexactly(4)
        host = await _socks_host(reader, atyp)
        port = int.from_bytes(await reader.readexactly(2), "big")
        if host is None or command != 1:
            return await _socks_reply(writer, 0x08 if host is None else 0x07)
        addresses = await self._admit(label, host, port)
        if addresses is None:
            return await _socks_reply(writer, 0x02)  # connection not allowed by ruleset
        upstream = await _open(addresses, port)
        if upstream is None:
            return await _socks_reply(writer, 0x05)
        writer.write(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
        await _relay(reader, writer, *upstream)


def _grant_hint(refusal: Refusal) -> str:
    """`allow.network "host"` (the frame's grant column), or the deny pattern that refused."""
    if refusal.denied_by is not None:
        return f'denied by deny.network "{refusal.denied_by}"'
    host = f"[{refusal.host}]" if ":" in refusal.host else refusal.host
    return f'allow.network "{host}"'


def _parse_head(head: bytes) -> tuple[str, str, int, bytes] | None:
    """(method, host, port, head to send upstream) for CONNECT or an absolute http:// URI."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    method, target, version = parts
    if method == "CONNECT":
        host_port = _split_host_port(target)
        return (method, *host_port, b"") if host_port else None
    url = urlsplit(target)
    try:
        port = url.port or 80
    except ValueError:
        return None
    if url.scheme != "http" or not url.hostname:
        return None
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    headers = [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
    forward = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
    return method, url.hostname, port, forward.encode("latin-1")


def _split_host_port(target: str) -> tuple[str, int] | None:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


async def _socks_host(reader: asyncio.StreamReader, atyp: int) -> str | None:
    if atyp == 1:
        return str(ipaddress.IPv4Address(await reader.readexactly(4)))
    if atyp == 4:
        return str(ipaddress.IPv6Address(await reader.readexactly(16)))
    if atyp == 3:
        name = await reader.readexactly((await reader.readexactly(1))[0])
        return name.decode("ascii") if name.isascii() and name else None
    return None


async def _socks_reply(writer: asyncio.StreamWriter, code: int) -> None:
    writer.write(bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0]))
    await writer.drain()


async def _http_reply(
    writer: asyncio.StreamWriter, status: int, reason: str, body: str, blocked: bool = False
) -> None:
    data = body.encode()
    extra = "X-Proxy-Error: blocked-by-allowlist\r\n" if blocked else ""
    writer.write(
        (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n{extra}"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        ).encode()
        + data
    )
    await writer.drain()


async def _resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, normalised, in resolver order ([] when it does not)."""
    name = hosts.normal(host)
    if hosts.is_ip(name):
        return [name]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(hosts.normal(str(info[4][0])) for info in infos))


async def _open(
    addresses: Sequence[str], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    for address in addresses:
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(address, port, limit=CHUNK), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError, UnicodeError):
            continue
    return None


async def _relay(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    """Pump both ways until both sides are done; a reset on either side ends both."""
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(_pump(a_reader, b_writer))
            group.create_task(_pump(b_reader, a_writer))
    except* (ConnectionError, OSError):
        pass
    finally:
        b_writer.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof() and not writer.is_closing():
        writer.write_eof()


# ---------------------------------------------------------------- the sandbox side


class NetworkPlan(Struct, frozen=True):
    """What the sandbox runner adds for a task with `allow.network` hosts.

    `bwrap_args` (the fetch preload, read-only) go after the runner's `--tmpfs /tmp`; `socket`
    is the task's own proxy socket, which the bridge outside the sandbox connects to (it is
    never mounted in, `vx.sandbox.bridges`); `env` wins over the task's own variables.
    """

    bwrap_args: tuple[str, ...]
    socket: str
    env: Mapping[str, str]


def network_env(
    port: int = BRIDGE_PORT,
    *,
    preload: Path | None = None,
    node_options: str = "",
    loopback_granted: bool = False,
) -> dict[str, str]:
    """The proxy variables a task sees: HTTP(S) for most clients, socks5h for ALL_PROXY users,
    npm/yarn spellings, Node's NODE_USE_ENV_PROXY (Node >= 22.21 / 24) and, for older Node,
    a `--require` of the fetch preload appended to the task's own NODE_OPTIONS."""
    http = f"http://127.0.0.1:{port}"
    socks = f"socks5h://127.0.0.1:{port}"
    no_proxy = "" if loopback_granted else ",".join(hosts.LOOPBACK)
    env = {
        "HTTP_PROXY": http,
        "HTTPS_PROXY": http,
        "http_proxy": http,
        "https_proxy": http,
        "ALL_PROXY": socks,
        "all_proxy": socks,
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
        "npm_config_proxy": http,
        "npm_config_https_proxy": http,
        "YARN_HTTP_PROXY": http,
        "YARN_HTTPS_PROXY": http,
        "NODE_USE_ENV_PROXY": "1",
        "VX_PROXY_PORT": str(port),
    }
    if preload is not None:
        env["NODE_OPTIONS"] = " ".join(
            filter(None, [node_options, f"--require={_node_quote(str(preload))}"])
        )
    return env


def _node_quote(path: str) -> str:
    return f'"{path}"' if any(c in path for c in " \"'\\") else path


def network_plan(
    proxy: Proxy,
    label: str,
    *,
    port: int = BRIDGE_PORT,
    node_options: str = "",
    allow: Sequence[str] | None = None,
    deny: Sequence[str] = (),
) -> NetworkPlan:
    """Everything a sandboxed task needs to reach the run's proxy as task `label`."""
    socket_path = proxy.attach(label, allow, deny) if allow is not None else proxy.attach(label)
    binds = ("--ro-bind", str(proxy.preload), str(proxy.preload))
    env = network_env(
        port,
        preload=proxy.preload,
        node_options=node_options,
        loopback_granted=proxy.grants_loopback_to(label),
    )
    return NetworkPlan(binds, str(socket_path), env)


# Routes Node's built-in fetch (undici) through the proxy on Node versions that ignore the
# proxy variables (< 22.21, and 23.x): on the first fetch(), the global dispatcher is replaced
# by an Agent of the same class whose `connect` opens an HTTP CONNECT tunnel through
# 127.0.0.1:$VX_PROXY_PORT (TLS on top for https:). Hosts in NO_PROXY connect directly.
# Lazy, so node processes that never fetch pay nothing beyond reading this file.
NODE_PRELOAD = r"""'use strict';
(function () {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major >= 24 || (major === 22 && minor >= 21) || typeof globalThis.fetch !== 'function') return;
  const net = require('net');
  const tls = require('tls');
  const port = Number(process.env.VX_PROXY_PORT || 3128);
  const noProxy = (process.env.NO_PROXY || '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  const direct = (host) => noProxy.some((n) => n === '*' || host === n || host.endsWith('.' + n.replace(/^\./, '')));
  const key = Symbol.for('undici.globalDispatcher.1');
  const original = globalThis.fetch;
  let installed = false;

  const sni = (opts, host) => opts.servername || (net.isIP(host) ? undefined : host);

  function secure(sock, opts, host, cb) {
    const t = tls.connect({ socket: sock, servername: sni(opts, host), ALPNProtocols: ['http/1.1'] });
    t.once('secureConnect', () => cb(null, t));
    t.once('error', (err) => cb(err));
  }

  function tunnel(opts, cb) {
    const https = opts.protocol === 'https:';
    const host = String(opts.hostname).replace(/^\[|\]$/g, '').toLowerCase();
    const dport = Number(opts.port) || (https ? 443 : 80);
    if (direct(host)) {
      const s = https ? tls.connect({ host, port: dport, servername: sni(opts, host), ALPNProtocols: ['http/1.1'] })
        : net.connect(dport, host);
      s.once(https ? 'secureConnect' : 'connect', () => cb(null, s));
      s.once('error', (err) => cb(err));
      return;
    }
    const dest = host.includes(':') ? `[${host}]:${dport}` : `${host}:${dport}`;
    const sock = net.connect(port, '127.0.0.1');
    let head = Buffer.alloc(0);
    const fail = (err) => { sock.destroy(); cb(err); };
    sock.once('error', fail);
    sock.once('connect', () => sock.write(`CONNECT ${dest} HTTP/1.1\r\nHost: ${dest}\r\n\r\n`));
    function onReadable() {
      let chunk;
      while ((chunk = sock.read()) !== null) head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.removeListener('readable', onReadable);
      sock.removeListener('error', fail);
      const status = head.subarray(0, end).toString('latin1').split(' ')[1];
      if (status !== '200') {
        const err = new Error(`the vx sandbox proxy refused ${dest} (HTTP ${status})`);
        err.code = 'ECONNREFUSED';
        return fail(err);
      }
      if (end + 4 < head.length) sock.unshift(head.subarray(end + 4));
      if (https) secure(sock, opts, host, cb); else cb(null, sock);
    }
    sock.on('readable', onReadable);
  }

  function install() {
    installed = true;
    void globalThis.Response; // loads Node's bundled undici, which creates the default Agent
    const current = globalThis[key];
    if (current && typeof current.constructor === 'function') globalThis[key] = new current.constructor({ connect: tunnel });
  }

  globalThis.fetch = function fetch(input, init) {
    if (!installed) install();
    return original.call(this, input, init);
  };
})();
"""
