"""Which cache layers a run reads and writes (local and remote, read and write), and `--cache`.

Defaults: the local layer reads and writes; a configured remote layer reads, and writes only
on CI (`CI` set) unless `remoteCache.upload` says `always` or `never`. Why read-only off CI:
a laptop's tree is often dirty in ways the key cannot see (untracked tools, local env), and
one upload from it is served to every CI run after; CI machines are the trusted writers.
`--cache=remote:rw` (or `upload: "always"`, turbo's behaviour) opts a machine in.

`cacheScope` (or `VX_CACHE_SCOPE`, which wins) sets the remote's writes instead: `trusted` writes
task keys, `read-only` writes nothing, and a name (`pr-42`) writes under keys of its own — read
first, then the trusted ones (`vx.store.remote.scope`). A client-side convention that keeps a
pull request's uploads from serving the default branch, not a security boundary: the server's
token is that.

Then `--cache` sets each layer it names exactly, `--force` turns every read off and
`--no-cache` turns everything off. This module is pure and stdlib-only: the no-remote path
imports it and nothing else of the remote cache.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from msgspec import Struct
from msgspec.structs import replace

from vx.errors import UsageError
from vx.model import RemoteCacheConfig

LAYERS = ("local", "remote")
_REMOTE_ENV = (
    "TURBO_API",
    "TURBO_TOKEN",
    "VERCEL_ARTIFACTS_TOKEN",
    "NX_SELF_HOSTED_REMOTE_CACHE_SERVER",
    "VX_REAPI_ENDPOINT",
)


class CacheAxes(Struct, frozen=True):
    local_read: bool = True
    local_write: bool = True
    remote_read: bool = False
    remote_write: bool = False

    @property
    def reads(self) -> bool:
        return self.local_read or self.remote_read

    @property
    def writes(self) -> bool:
        return self.local_write or self.remote_write

    @property
    def remote(self) -> bool:
        return self.remote_read or self.remote_write


class CachePlan(Struct, frozen=True):
    """The axes, the (first) remote layer's settings when it is on, the scope its keys are written under
    (None: the task keys themselves), and lines to tell the user."""

    axes: CacheAxes
    remote: Any = None  # store.remote.RemoteSettings
    notices: tuple[str, ...] = ()
    scope: str | None = None
    layers: tuple[tuple[Any, bool], ...] = ()  # each remote layer's settings and whether written


SCOPE_KINDS = ("trusted", "read-only")
SCOPE_MOST = 128
_SCOPE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/@")


def scope_problem(scope: str) -> str | None:
    """What is wrong with a `cacheScope` value, or None."""
    if not scope:
        return "must not be empty"
    if len(scope) > SCOPE_MOST:
        return f"is longer than {SCOPE_MOST} characters"
    bad = sorted(set(scope) - _SCOPE_CHARS)
    if bad:
        return f"{scope!r} holds {bad[0]!r}: a name is letters, digits and . _ - / @"
    return None


def cache_scope(configured: str | None, env: Mapping[str, str]) -> str | None:
    """The run's scope: `VX_CACHE_SCOPE`, else the workspace's `cacheScope`; None for neither."""
    scope = env.get("VX_CACHE_SCOPE") or None
    if scope is not None:
        problem = scope_problem(scope)
        if problem:
            raise UsageError(
                f"VX_CACHE_SCOPE {problem}", hint="trusted, read-only, or a name such as pr-42"
            )
        return scope
    return configured


def parse_spec(text: str) -> dict[str, tuple[bool, bool]]:
    """`local:rw,remote:r` -> {layer: (read, write)}; `remote:` turns a layer off."""
    if not text.strip():
        raise UsageError("`--cache` needs a value", hint="e.g. `--cache=local:rw,remote:r`")
    out: dict[str, tuple[bool, bool]] = {}
    for item in text.split(","):
        layer, colon, modes = item.strip().partition(":")
        if (
            layer not in LAYERS
            or not colon
            or set(modes) - {"r", "w"}
            or len(set(modes)) != len(modes)
        ):
            raise UsageError(
                f"`--cache={text}`: cannot read `{item.strip()}`",
                hint="write a comma list of local:[r][w] and remote:[r][w], e.g. local:rw,remote:r",
            )
        if layer in out:
            raise UsageError(f"`--cache={text}` names `{layer}` twice", hint="name each layer once")
        out[layer] = ("r" in modes, "w" in modes)
    return out


def plan_cache(
    *,
    no_cache: bool,
    force: bool,
    spec: str | None,
    cfg: RemoteCacheConfig | None,
    env: Mapping[str, str],
    scope: str | None = None,
    plugins: Sequence[Any] = (),
) -> CachePlan:
    """Resolve the run's axes and, only when a remote is asked for, its settings. `plugins` are
    the settings of the plugins' cache layers, asked before the configured remote."""
    named = parse_spec(spec) if spec is not None else {}
    notices: list[str] = []
    settings, default_remote = None, (False, False)
    if cfg is not None or any(env.get(name) for name in _REMOTE_ENV):
        settings, default_remote, problem = _remote(cfg, env)
        notices += [problem] if problem else []
        if settings is not None and scope is not None:
            default_remote = (True, scope != "read-only")
    # a plugin's layer is read and written by default: the plugin decides what it keeps
    default_plugin = (True, scope != "read-only") if plugins else (False, False)
    default = (default_remote[0] or default_plugin[0], default_remote[1] or default_plugin[1])
    axes = CacheAxes(*named.get("local", (True, True)), *named.get("remote", default))
    if settings is None and not plugins and (axes.remote_read or axes.remote_write):
        if not notices:
            notices.append(
                "`--cache` (or `--remote-only`) names the remote layer, but no remote cache is configured "
                "(remoteCache in vx.workspace.json, or TURBO_API / NX_SELF_HOSTED_REMOTE_CACHE_SERVER "
                "/ VX_REAPI_ENDPOINT)"
            )
        axes = replace(axes, remote_read=False, remote_write=False)
    if force:
        axes = replace(axes, local_read=False, remote_read=False)
    if no_cache:
        axes = CacheAxes(False, False, False, False)
    chosen = "remote" in named  # `--cache` names the remote layers: each of them, exactly
    layers = [(s, axes.remote_write and (chosen or default_plugin[1])) for s in plugins]
    if settings is not None:
        layers.append((settings, axes.remote_write and (chosen or default_remote[1])))
    layers = [(s, written and not s.read_only) for s, written in layers]
    axes = replace(axes, remote_write=any(written for _, written in layers))
    named_scope = scope if scope not in (None, *SCOPE_KINDS) else None
    on = tuple(layers) if axes.remote else ()
    return CachePlan(axes, on[0][0] if on else None, tuple(notices), named_scope, on)


def _remote(
    cfg: RemoteCacheConfig | None, env: Mapping[str, str]
) -> tuple[Any, tuple[bool, bool], str | None]:
    from vx.store import remote

    if not remote.configured(cfg, env):
        return None, (False, False), None
    found = remote.resolve(cfg, env)
    if found.settings is None:
        return None, (False, False), found.problem
    upload = found.settings.upload
    ci = (env.get("CI") or "").strip().lower() not in ("", "0", "false")
    return found.settings, (True, upload == "always" or (upload == "ci" and ci)), None
