"""Parse and match the host patterns of `exec.sandbox.allow.network` / `deny.network`.

A pattern is `example.com` (that host), `*.example.com` (its subdomains, not itself),
`localhost`, an IPv4 literal or a bracketed IPv6 literal, each with an optional `:port`;
a deny list may also say `*` (everything). Pure: no I/O, so the schema can refuse a bad
pattern with the same words the proxy would use to match it.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Iterable, Sequence

from msgspec import Struct

_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")


class PatternError(ValueError):
    """A host pattern the proxy could not honour; the message says what to write instead."""


class HostPattern(Struct, frozen=True):
    """One parsed pattern: `host` lower-case without brackets, `wildcard` for `*.host`."""

    text: str
    host: str  # "" for the deny-everything `*`
    wildcard: bool = False
    port: int | None = None

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host == "":
            return True
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host


def parse(text: str, *, deny: bool = False) -> HostPattern:
    """Parse one pattern; raise PatternError naming the problem (a scheme, `*.com`, …)."""
    raw = text.strip()
    if raw != text or not raw:
        raise PatternError(
            f"`{text}` is not a host pattern", 'e.g. "registry.npmjs.org" or "*.example.com:443"'
        )
    if "://" in raw:
        host = raw.split("://", 1)[1].split("/", 1)[0]
        raise PatternError(f"`{text}` has a scheme", f'write the host alone, e.g. "{host}"')
    if raw == "*":
        if deny:
            return HostPattern(raw, "")
        raise PatternError(
            "`*` would allow every host", "use `allow.network: true` for the host's whole network"
        )
    if "/" in raw:
        raise PatternError(
            f"`{text}` has a path", f'write the host alone, e.g. "{raw.split("/", 1)[0]}"'
        )
    host, port = _split_port(raw)
    wildcard = host.startswith("*.")
    if wildcard and ("." not in host[2:].rstrip(".") or _is_ip(host[2:])):
        raise PatternError(
            f"`{text}` would match a whole top-level domain",
            f'name the domain, e.g. "*.example{host[1:]}"',
        )
    return HostPattern(raw, _normal_host(host[2:] if wildcard else host, text), wildcard, port)


def parse_all(texts: Iterable[str], *, deny: bool = False) -> tuple[HostPattern, ...]:
    return tuple(parse(t, deny=deny) for t in texts)


def problem(text: str, *, deny: bool = False) -> tuple[str, str] | None:
    """(message, hint) when `text` is refused, else None; for the config schema."""
    try:
        parse(text, deny=deny)
    except PatternError as exc:
        return exc.args[0], exc.args[1]
    return None


def _split_port(raw: str) -> tuple[str, int | None]:
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0:
            raise PatternError(
                f"`{raw}` has an unclosed `[`", 'write an IPv6 address as "[::1]" or "[::1]:8080"'
            )
        host, rest = raw[: close + 1], raw[close + 1 :]
        if rest and not rest.startswith(":"):
            raise PatternError(
                f"`{raw}` is not a host pattern", 'write an IPv6 address as "[::1]:8080"'
            )
        return host, _port(rest[1:], raw) if rest else None
    if raw.count(":") > 1:
        raise PatternError(
            f"`{raw}` looks like a bare IPv6 address", f'write it in brackets: "[{raw}]"'
        )
    host, colon, port = raw.partition(":")
    return host, _port(port, raw) if colon else None


def _port(text: str, raw: str) -> int:
    if not _PORT.match(text) or not 1 <= int(text) <= 65535:
        raise PatternError(
            f"`{raw}` has a bad port", 'a port is a number from 1 to 65535, e.g. "example.com:443"'
        )
    return int(text)


def _normal_host(host: str, text: str) -> str:
    name = host.lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        if not _is_ip(name[1:-1]):
            raise PatternError(f"`{text}` is not an IPv6 address", 'e.g. "[::1]:8080"')
        return str(ipaddress.ip_address(name[1:-1]))
    if _is_ip(name) or name == "localhost":
        return name
    if "*" in name:
        raise PatternError(f"`{text}` has a `*` that is not a leading `*.`", 'e.g. "*.example.com"')
    if "." not in name:
        raise PatternError(
            f"`{text}` is not a domain name (no dot)",
            f'write the full name, e.g. "{name}.example.com", or "localhost"',
        )
    if not all(_LABEL.match(label) for label in name.split(".")):
        raise PatternError(
            f"`{text}` is not a valid host name", "letters, digits, `-` and `.` only"
        )
    return name


def is_ip(text: str) -> bool:
    return _is_ip(text)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def normal(host: str) -> str:
    """The form patterns are matched against: lower-case, no trailing dot, no brackets."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if ":" in name and _is_ip(name):
        return str(ipaddress.ip_address(name))
    return name


def endpoint(host: str, port: int) -> str:
    """`host:port` as reported in a violation; IPv6 in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class HostFilter:
    """Decide a destination: any deny pattern refuses first, then an allow pattern admits."""

    def __init__(self, allow: Sequence[str], deny: Sequence[str] = ()):
        self.allow = parse_all(allow)
        self.deny = parse_all(deny, deny=True)

    def denied_by(self, host: str, port: int) -> HostPattern | None:
        """The deny pattern that refuses this destination, if any."""
        name = normal(host)
        return next((p for p in self.deny if p.matches(name, port)), None)

    def allows(self, host: str, port: int) -> bool:
        if self.denied_by(host, port) is not None:
            return False
        name = normal(host)
        return any(p.matches(name, port) for p in self.allow)

    def grants_loopback(self) -> bool:
        """Whether an allow pattern names the host's loopback (then it must not be NO_PROXY)."""
        return any(p.host in LOOPBACK for p in self.allow)


LOOPBACK = ("localhost", "127.0.0.1", "::1")
