"""The HTTP proxy a remote cache is reached through, read from the environment as curl reads it.

- `https_proxy`, then `HTTPS_PROXY`, for an `https://` cache; `http_proxy` (lowercase only: an
  uppercase `HTTP_PROXY` can be set by a request's `Proxy:` header under CGI) for an `http://`
  one; then `all_proxy`, then `ALL_PROXY`. An empty value is no proxy.
- `no_proxy`, then `NO_PROXY`: entries split at commas and spaces; `*` alone bypasses every
  host; a name matches itself and its subdomains (a leading dot is the same name); an IP address
  matches itself and a CIDR range (`10.0.0.0/8`, `fd00::/8`) the addresses in it; an entry with a
  `:port` matches that port alone (as Go and Python's urllib read it; curl ignores the port).
- The proxy is an `http://` URL (a bare `host:port` too); `user:password@` in it is sent as
  basic `Proxy-Authorization`, percent-decoded. An `https://` cache is reached through a
  CONNECT tunnel, so TLS runs end to end and the proxy sees only the host; an `http://` cache
  through absolute-URI requests. A proxy of any other scheme (`https://`, `socks5://`) is
  refused, and the remote with it: a miss, with its reason.

Where turbo (reqwest) reads differently: it tries the uppercase name first and honours
`HTTP_PROXY`; vx follows curl, so `HTTP_PROXY` alone does not proxy an `http://` cache.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import Mapping
from urllib.parse import unquote, urlsplit

from msgspec import Struct


class Proxy(Struct, frozen=True):
    """Where to connect instead of the cache, and what to tell it."""

    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization header's value


class ProxyError(ValueError):
    """A proxy vx cannot speak to; the message names it without its credentials."""


def for_url(url: str, environ: Mapping[str, str]) -> Proxy | None:
    """The proxy for `url` by the environment, None to connect directly; ProxyError when the
    proxy set is one vx cannot use."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    names = ("https_proxy", "HTTPS_PROXY") if scheme == "https" else ("http_proxy",)
    value = _first(environ, (*names, "all_proxy", "ALL_PROXY"))
    if not value or bypassed(parts.hostname or "", parts.port or _default_port(scheme), environ):
        return None
    return parse(value)


def parse(value: str) -> Proxy:
    if "://" not in value:
        value = "http://" + value
    parts = urlsplit(value)
    if parts.scheme.lower() != "http":
        raise ProxyError(
            f"the proxy {parts.scheme}://{parts.hostname or ''} is not supported: vx speaks to "
            "http:// proxies (CONNECT for an https:// cache)"
        )
    try:
        port = parts.port or 80
    except ValueError:
        raise ProxyError(f"the proxy {parts.hostname or value!r} has a bad port") from None
    if not parts.hostname:
        raise ProxyError("the proxy URL names no host")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return Proxy(parts.hostname, port, authorization)


def bypassed(host: str, port: int, environ: Mapping[str, str]) -> bool:
    """Whether `no_proxy` (else `NO_PROXY`) sends `host:port` around the proxy."""
    listed = _first(environ, ("no_proxy", "NO_PROXY"))
    if not listed:
        return False
    host = host.lower().rstrip(".")
    address = _address(host)
    for entry in listed.replace(",", " ").split():
        if entry == "*":
            return True
        name, wanted = _split_port(entry.lower())
        if wanted is not None and wanted != port:
            continue
        if address is not None and _address_matches(address, name):
            return True
        name = name.lstrip(".").rstrip(".")
        if name and address is None and (host == name or host.endswith("." + name)):
            return True
    return False


def _first(environ: Mapping[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        if name in environ:
            return environ[name].strip()
    return ""


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _address_matches(address: ipaddress.IPv4Address | ipaddress.IPv6Address, entry: str) -> bool:
    try:
        return address in ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port`, `[v6]:port`, `v4:port` into their parts; a bare IPv6 address keeps its colons."""
    if entry.startswith("["):
        inside, _, rest = entry[1:].partition("]")
        return inside, int(rest[1:]) if rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None
