"""The remote cache seam: a layer that says whether it holds a key, and streams one
artifact down or up. Turborepo's `/v8` and Nx's `/v1` wires implement it, and a Bazel REAPI v2
server (`reapi.py`, ActionCache + CAS over gRPC) does too.

A layer raises `RemoteFailure` for anything that went wrong; the layered store turns every
failure into a miss or a skipped upload, so nothing here can fail a build. Secrets
(the token, the signing key) live only in `RemoteSettings`, hidden from its repr, and leave
the process only in the `Authorization` header and as an HMAC.

Only the stdlib is imported here; `http.client` and `ssl` (or grpc) load when a layer opens.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from typing import BinaryIO, Callable, Mapping
from urllib.parse import urlsplit

from msgspec import Struct

from vx.model import RemoteCacheConfig
from vx.store.remote.layer import (  # noqa: F401  # the seam's types, re-exported: where callers look
    BAD_RESPONSE,
    BUSY,
    DEFAULT_MAX_ARTIFACT_BYTES,
    DEFAULT_TIMEOUT_S,
    DEFAULT_TURBO_API,
    DEFAULT_UPLOAD_TIMEOUT_S,
    LOOPBACK_HOSTS,
    READ_ONLY,
    REFUSED,
    REJECTED,
    SERVER_ERROR,
    TIMEOUT,
    TOO_LARGE,
    UNREACHABLE,
    UNSUPPORTED,
    Found,
    RemoteFailure,
    RemoteLayer,
    RemoteSettings,
    Sink,
    checked_key,
)


class Resolution(Struct, frozen=True):
    """The remote layer to open, or None and the one line saying why it is off."""

    settings: RemoteSettings | None
    problem: str | None = None


TURBO_ENV = ("TURBO_API", "TURBO_TOKEN", "TURBO_TEAM", "TURBO_TEAMID", "VERCEL_ARTIFACTS_TOKEN")
NX_ENV = ("NX_SELF_HOSTED_REMOTE_CACHE_SERVER",)
REAPI_ENV = (
    "VX_REAPI_ENDPOINT",
    "VX_REAPI_INSTANCE",
    "VX_REAPI_HEADERS",
    "VX_REAPI_CA_CERT",
    "VX_REAPI_CLIENT_CERT",
    "VX_REAPI_CLIENT_KEY",
    "VX_REAPI_MAX_CONCURRENCY",
)


def configured(cfg: RemoteCacheConfig | None, env: Mapping[str, str]) -> bool:
    """Whether any remote is asked for; cheap, so a run without one imports nothing more."""
    if cfg is not None:
        return True
    if (
        env.get("TURBO_API")
        or env.get("NX_SELF_HOSTED_REMOTE_CACHE_SERVER")
        or env.get("VX_REAPI_ENDPOINT")
    ):
        return True
    token = env.get("TURBO_TOKEN") or env.get("VERCEL_ARTIFACTS_TOKEN")
    return bool(
        token
        and (env.get("TURBO_TEAM") or env.get("TURBO_TEAMID") or env.get("VERCEL_ARTIFACTS_OWNER"))
    )


def resolve(cfg: RemoteCacheConfig | None, env: Mapping[str, str]) -> Resolution:
    """Merge `remoteCache` with the environment; the environment wins, as it does for turbo."""
    if cfg is not None:
        kind = cfg.kind
    elif env.get("VX_REAPI_ENDPOINT"):
        kind = "reapi"
    else:
        kind = "nx" if _nx_by_env(env) else "turbo"
    if kind == "reapi":
        settings, problem = _reapi(cfg, env)
        if problem:
            return Resolution(None, problem)
    else:
        settings = _turbo(cfg, env) if kind == "turbo" else _nx(cfg, env)
    problem = _problem(settings)
    return Resolution(None, problem) if problem else Resolution(settings)


def _nx_by_env(env: Mapping[str, str]) -> bool:
    return bool(env.get("NX_SELF_HOSTED_REMOTE_CACHE_SERVER")) and not any(
        env.get(n) for n in TURBO_ENV
    )


def _common(cfg: RemoteCacheConfig | None, env: Mapping[str, str]) -> dict:
    timeout = _seconds(env, "TURBO_REMOTE_CACHE_TIMEOUT")
    if timeout is None:
        timeout = cfg.timeout_ms / 1000 if cfg is not None and cfg.timeout_ms else DEFAULT_TIMEOUT_S
    upload_timeout = _seconds(env, "TURBO_REMOTE_CACHE_UPLOAD_TIMEOUT") or max(
        DEFAULT_UPLOAD_TIMEOUT_S, timeout
    )
    return {
        "timeout_s": timeout,
        "upload_timeout_s": upload_timeout,
        "max_artifact_bytes": (
            cfg.max_artifact_bytes
            if cfg is not None and cfg.max_artifact_bytes
            else DEFAULT_MAX_ARTIFACT_BYTES
        ),
        "upload": cfg.upload if cfg is not None else "ci",
        "read_only": _truthy(env.get("TURBO_REMOTE_CACHE_READ_ONLY")),
        "ci_vendor": _ci_vendor(env),
    }


def _turbo(cfg: RemoteCacheConfig | None, env: Mapping[str, str]) -> RemoteSettings:
    mine = cfg if cfg is not None and cfg.kind == "turbo" else None
    key = env.get("TURBO_REMOTE_CACHE_SIGNATURE_KEY") or None
    signature = (
        mine.signature if mine is not None and mine.signature is not None else key is not None
    )
    return RemoteSettings(
        kind="turbo",
        url=(env.get("TURBO_API") or (mine.url if mine else None) or DEFAULT_TURBO_API).rstrip("/"),
        token=env.get("TURBO_TOKEN") or env.get("VERCEL_ARTIFACTS_TOKEN") or None,
        team=env.get("TURBO_TEAM") or (mine.team if mine else None) or None,
        team_id=(
            env.get("TURBO_TEAMID")
            or env.get("VERCEL_ARTIFACTS_OWNER")
            or (mine.team_id if mine else None)
            or None
        ),
        signature=signature,
        signature_key=key.encode() if key else None,
        **_common(cfg, env),
    )


def _nx(cfg: RemoteCacheConfig | None, env: Mapping[str, str]) -> RemoteSettings:
    url = (
        env.get("NX_SELF_HOSTED_REMOTE_CACHE_SERVER")
        or (cfg.url if cfg is not None else None)
        or ""
    )
    return RemoteSettings(
        kind="nx",
        url=url.rstrip("/"),
        token=env.get("NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN") or None,
        **_common(cfg, env),
    )


def _reapi(
    cfg: RemoteCacheConfig | None, env: Mapping[str, str]
) -> tuple[RemoteSettings, str | None]:
    """VX_REAPI_* over `remoteCache.reapi`; headers (API keys) only ever from the environment."""
    mine = cfg if cfg is not None and cfg.kind == "reapi" else None
    headers, problem = _headers(env.get("VX_REAPI_HEADERS") or "")
    settings = RemoteSettings(
        kind="reapi",
        url=(env.get("VX_REAPI_ENDPOINT") or (mine.url if mine else None) or "").rstrip("/"),
        instance=env.get("VX_REAPI_INSTANCE") or (mine.instance if mine else None) or "",
        headers=headers,
        ca_cert=env.get("VX_REAPI_CA_CERT") or (mine.ca_cert if mine else None) or None,
        client_cert=env.get("VX_REAPI_CLIENT_CERT") or (mine.client_cert if mine else None) or None,
        client_key=env.get("VX_REAPI_CLIENT_KEY") or (mine.client_key if mine else None) or None,
        max_concurrency=_count(env, "VX_REAPI_MAX_CONCURRENCY")
        or (mine.max_connections if mine else None),
        **_common(cfg, env),
    )
    return settings, problem


def _count(env: Mapping[str, str], name: str) -> int | None:
    """A positive whole number from the environment; unset or empty is None, anything else
    is refused (exit 2), as a bad timeout is."""
    text = (env.get(name) or "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        from vx.errors import UsageError

        raise UsageError(
            f"{name}={text} is not a number of calls",
            hint="give a whole number of at least 1, such as 8",
        )
    return int(text)


def _headers(text: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """`VX_REAPI_HEADERS`: `name=value` pairs, one per line or comma-separated (as Bazel's
    `--remote_header=name=value`). The problem line never repeats a value: it may be a key."""
    out = []
    for n, item in enumerate((i for i in text.replace("\n", ",").split(",") if i.strip()), 1):
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        reserved = name.startswith("grpc-") or name.endswith("-bin")  # gRPC's own, or binary
        if not sep or not _HEADER_NAME.match(name) or reserved or not value.strip():
            return (), (
                f"remote cache off: entry {n} of VX_REAPI_HEADERS is not a text name=value "
                "(e.g. x-buildbuddy-api-key=KEY, comma-separated; no grpc-* or *-bin names)"
            )
        out.append((name, value.strip()))
    return tuple(out), None


_HEADER_NAME = re.compile(r"[0-9a-z_.-]+\Z")


def _problem(s: RemoteSettings) -> str | None:
    """Why this layer cannot be used safely, in one line, or None."""
    if s.kind == "reapi":
        return _reapi_problem(s)
    parts = urlsplit(s.url) if s.url else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        where = (
            "NX_SELF_HOSTED_REMOTE_CACHE_SERVER or remoteCache.nx.url"
            if s.kind == "nx"
            else "TURBO_API"
        )
        return f"remote cache off: no usable server URL (set {where} to an http(s) URL)"
    if parts.username or parts.password:
        return "remote cache off: the server URL carries credentials; pass the token in the environment instead"
    if s.token and parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        return f"remote cache off: a token would travel in clear text to {s.endpoint}; use https"
    if s.signature and not s.signature_key:
        return "remote cache off: signatures are on but TURBO_REMOTE_CACHE_SIGNATURE_KEY is not set"
    return None


def _reapi_problem(s: RemoteSettings) -> str | None:
    parts = urlsplit(s.url) if s.url else None
    if parts is None or parts.scheme not in ("grpc", "grpcs") or not parts.hostname:
        return (
            "remote cache off: no usable REAPI endpoint (set VX_REAPI_ENDPOINT or "
            "remoteCache.reapi.endpoint to grpc://host:port, or grpcs:// for TLS)"
        )
    if parts.username or parts.password or parts.path.strip("/") or parts.query:
        return "remote cache off: the REAPI endpoint must be grpc(s)://host:port alone; pass keys in VX_REAPI_HEADERS"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.scheme == "grpc"):
        return f"remote cache off: the REAPI endpoint {s.endpoint} needs a port (grpcs:// defaults to 443)"
    if s.headers and parts.scheme == "grpc" and parts.hostname not in LOOPBACK_HOSTS:
        return f"remote cache off: VX_REAPI_HEADERS would travel in clear text to {s.endpoint}; use grpcs://"
    tls = _tls_problem(s, parts.scheme)
    if tls:
        return tls
    if importlib.util.find_spec("grpc") is None:
        from vx.install import extra_hint

        return "remote cache off: a REAPI endpoint needs grpcio and protobuf (" + (
            extra_hint("reapi", "grpcio protobuf") + ")"
        )
    return None


def _tls_problem(s: RemoteSettings, scheme: str) -> str | None:
    """The TLS files: only for grpcs://, a client certificate with its key, each one readable."""
    files = {
        "VX_REAPI_CA_CERT (caCert)": s.ca_cert,
        "VX_REAPI_CLIENT_CERT (clientCert)": s.client_cert,
        "VX_REAPI_CLIENT_KEY (clientKey)": s.client_key,
    }
    given = [name for name, path in files.items() if path]
    if given and scheme != "grpcs":
        return f"remote cache off: {given[0]} needs a grpcs:// endpoint, not {s.endpoint}"
    if bool(s.client_cert) != bool(s.client_key):
        return (
            "remote cache off: a client certificate needs its key: "
            "set both VX_REAPI_CLIENT_CERT and VX_REAPI_CLIENT_KEY (clientCert and clientKey)"
        )
    for name in given:
        path = files[name]
        if not (os.path.isfile(path) and os.access(path, os.R_OK)):  # type: ignore[arg-type]
            return f"remote cache off: {name} {path} is not a readable file"
    return None


def open_layer(settings: RemoteSettings, scope: str | None = None) -> RemoteLayer:
    """Open the wire for `settings.kind`; this is where the HTTP (or gRPC) modules are imported.
    With a scope's name (`cacheScope`), its keys are the scope's (`vx.store.remote.scope`)."""
    if scope is not None:
        from vx.store.remote.scope import ScopedLayer

        return ScopedLayer(open_layer(settings), scope)
    if settings.kind == "reapi":
        return _Deferred(settings)
    if settings.kind == "nx":
        from vx.store.remote.nx import NxLayer

        return NxLayer(settings)
    from vx.store.remote.turbo import TurboLayer

    return TurboLayer(settings)


class _Deferred:
    """A REAPI layer that imports grpc and connects on its first call: a run whose every
    task hits locally asks the remote nothing, and so loads none of it. A run that will look
    up (a fresh clone) opens it early instead (`warm`)."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        self._layer: RemoteLayer | None = None
        self._lock = threading.Lock()
        # `_tell` and `_closed` under a lock of their own: `_lock` is held through grpc's import
        self._told = threading.Lock()
        self._tell: Callable[[str, str], None] | None = None
        self._closed = False

    def listen(self, tell: Callable[[str, str], None]) -> None:
        """Where the layer says what the run should hear, once it opens (`ReapiLayer.listen`)."""
        with self._told:
            self._tell = tell
            layer = self._layer
        listen = getattr(layer, "listen", None)
        if listen is not None:  # opened already (`warm`)
            listen(tell)

    def warm(self) -> threading.Thread | None:
        """Import grpc and make the channel now, on this thread, then ask the server's
        capabilities on a thread of its own, while the run plans: a fresh clone's first lookup
        then finds the answer there, not three round trips (TCP, HTTP/2's settings, the call)
        after the keys (docs/remote-execution.md, "Start-up"). The import is CPU the run pays
        either way: on a thread beside planning it only shares the interpreter with it, and
        ends no sooner. A failure here is nobody's: the first call meets it again, and is told."""
        try:
            layer = self._open()
        except Exception:
            return None
        capabilities = getattr(layer, "capabilities", None)
        if capabilities is None:
            return None

        def asking() -> None:
            try:
                capabilities()
            except Exception:  # the first lookup asks again, and is told
                pass

        thread = threading.Thread(target=asking, name="vx-reapi-open", daemon=True)
        thread.start()
        return thread

    @property
    def fetch_width(self) -> int:
        """`ReapiLayer.fetch_width`, known before grpc loads (retry.py imports none of it)."""
        from vx.store.remote.retry import calls_in_flight

        return calls_in_flight(self.settings.max_concurrency)

    def _open(self) -> RemoteLayer:
        with self._lock:  # pool threads call at once; one channel for them all
            if self._layer is None:
                if self._closed:
                    raise RemoteFailure(UNREACHABLE, "the layer is closed")
                try:
                    from vx.store.remote.reapi import ReapiLayer
                except Exception as exc:
                    # e.g. a protobuf older than the stubs: a miss, not a crash
                    raise RemoteFailure(UNREACHABLE, f"grpc did not load ({exc})") from None
                layer = ReapiLayer(self.settings)
                with self._told:
                    if self._closed:  # closed while grpc loaded: no channel outlives the run
                        layer.close()
                        raise RemoteFailure(UNREACHABLE, "the layer is closed")
                    if self._tell is not None:
                        layer.listen(self._tell)
                    self._layer = layer
            return self._layer

    def has(self, key: str) -> Found | None:
        return self._open().has(key)

    def get(self, key: str, sink: Sink) -> Found | None:
        return self._open().get(key, sink)

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        self._open().put(key, src, size, duration_ms)

    def close(self) -> None:
        with self._told:
            self._closed = True
            layer = self._layer
        if layer is not None:
            layer.close()


MAX_TIMEOUT_S = 2**31 // 1000  # what a socket timeout can hold (milliseconds in a C int)


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    """A timeout variable in seconds; unset, empty or 0 is the default. A value no socket can
    wait (inf, nan, or past MAX_TIMEOUT_S) is refused rather than crashing mid-run."""
    text = env.get(name)
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    if value is not None and not 0 <= value <= MAX_TIMEOUT_S:  # nan fails both comparisons
        from vx.errors import UsageError

        raise UsageError(
            f"{name}={text} is not a timeout vx can wait",
            hint=f"give seconds from 1 to {MAX_TIMEOUT_S}, such as 30 (0 or unset keeps the default)",
        )
    return value or None


def _truthy(text: str | None) -> bool:
    return (text or "").strip().lower() not in ("", "0", "false", "no")


def _ci_vendor(env: Mapping[str, str]) -> str | None:
    """The `x-artifact-client-ci` value turbo sends: a vendor name, only in CI."""
    for name, vendor in (
        ("GITHUB_ACTIONS", "github-actions"),
        ("GITLAB_CI", "gitlab"),
        ("CIRCLECI", "circleci"),
        ("BUILDKITE", "buildkite"),
        ("VERCEL", "vercel"),
        ("JENKINS_URL", "jenkins"),
    ):
        if env.get(name):
            return vendor
    return "ci" if _truthy(env.get("CI")) else None
