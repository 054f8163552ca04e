"""Validate `exec.sandbox` into a SandboxConfig, or refuse with where and why.

Only what the text alone can tell is checked here: shapes, path grammar, host patterns. What
needs the workspace (a write grant reaching a nested project or the cache dir, a link that
leaves the project) is refused by `vx.sandbox.grants` when the run is planned.
"""

from __future__ import annotations

import re
from typing import Any

from vx.config.fields import At, Level, as_boolean, as_object, as_strings, check_keys, kind_of
from vx.files.globs import glob_error
from vx.model import SandboxConfig

_MACOS_ONLY = "it only has a meaning on macOS; remove it"

SANDBOX = Level(
    "exec.sandbox",
    frozenset({"allow", "deny", "ignore", "trace"}),
    foreign={
        "allowRead": "in vx it is allow.read",
        "allowWrite": "in vx it is allow.write",
        "allowGitConfig": "in vx it is allow.gitConfig",
        "network": "in vx it is allow.network (hosts) and deny.network",
        "read": "grants go under `allow`: allow.read",
        "write": "grants go under `allow`: allow.write",
    },
    unsupported={
        "weakerWhenNested": "vx's Linux sandbox has no weaker nested mode yet; run vx outside a sandbox",
        "weakerNetworkIsolation": _MACOS_ONLY,
    },
)

ALLOW = Level(
    "exec.sandbox.allow",
    frozenset({"read", "write", "network", "unixSockets", "localBinding", "pty", "gitConfig"}),
    foreign={"domains": "in vx it is allow.network", "allowedDomains": "in vx it is allow.network"},
    unsupported={"systemInfo": _MACOS_ONLY, "machLookup": _MACOS_ONLY},
)

DENY = Level(
    "exec.sandbox.deny",
    frozenset({"network"}),
    foreign={
        "read": "reads are denied by default: grant only what the task needs",
        "write": "writes are denied by default: grant only what the task needs",
    },
)

IGNORE = Level(
    "exec.sandbox.ignore",
    frozenset({"read", "write", "network"}),
    unsupported={"systemInfo": _MACOS_ONLY},
)

_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_IPV4 = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}\Z")
_WILD = re.compile(r"[*?{}\[\]]")
_HOST_HINT = "write a host such as `registry.npmjs.org`, `*.example.com` or `localhost:8080`"
_WALLS = (".git", ".vx")


def validate_sandbox(value: Any, at: At) -> SandboxConfig:
    """Turn the decoded `exec.sandbox` object into a SandboxConfig."""
    body = as_object(value, at, "an object with `allow`, `deny` or `ignore`")
    check_keys(body, at, SANDBOX)
    allow = _level(body, "allow", at, ALLOW)
    deny = _level(body, "deny", at, DENY)
    ignore = _level(body, "ignore", at, IGNORE)
    a_at, i_at = at.key("allow"), at.key("ignore")
    return SandboxConfig(
        read=_paths(allow.get("read", []), a_at.key("read"), write=False),
        write=_paths(allow.get("write", []), a_at.key("write"), write=True),
        network=_network(allow.get("network", False), a_at.key("network")),
        unix_sockets=_sockets(allow.get("unixSockets", False), a_at.key("unixSockets")),
        local_binding=_ports(allow.get("localBinding", False), a_at.key("localBinding")),
        pty=as_boolean(allow.get("pty", False), a_at.key("pty")),
        git_config=as_boolean(allow.get("gitConfig", False), a_at.key("gitConfig")),
        deny_network=_hosts(deny.get("network", []), at.key("deny").key("network"), deny=True),
        ignore_read=_ignore_paths(ignore.get("read", []), i_at.key("read")),
        ignore_write=_ignore_paths(ignore.get("write", []), i_at.key("write")),
        ignore_network=_ignore_hosts(ignore.get("network", []), i_at.key("network")),
        trace=as_boolean(body["trace"], at.key("trace")) if "trace" in body else None,
    )


def _level(body: dict[str, Any], key: str, at: At, level: Level) -> dict[str, Any]:
    if key not in body:
        return {}
    obj = as_object(body[key], at.key(key))
    check_keys(obj, at.key(key), level)
    return obj


# ---------------------------------------------------------------- paths


def _paths(value: Any, at: At, *, write: bool) -> tuple[str, ...]:
    """Grants: project-relative globs or paths, absolute paths, or `~` paths."""
    paths = as_strings(value, at, "paths or globs")
    for i, path in enumerate(paths):
        problem = _path_problem(path) or (_write_problem(path) if write else None)
        if problem:
            reason, _, hint = problem.partition("; ")
            at.item(i).refuse(f"grant `{path}`: {reason}", hint=hint or None)
    return paths


def _path_problem(path: str) -> str | None:
    """Why `path` is no grant, with a hint after `; `, or None."""
    if "\0" in path or "\\" in path:
        return "holds a NUL or a backslash; write `/`-separated paths"
    if path.startswith(("/", "~")):
        return _outside_problem(path)
    return _relative_problem(path)


def _outside_problem(path: str) -> str | None:
    """An absolute or `~` grant is bound as is: it may end in `/**`, but hold no other wildcard."""
    if path.startswith("~") and not (path == "~" or path.startswith("~/")):
        return "`~user` is not understood; write `~/…` for your home or an absolute path"
    body = path[:-3] if path.endswith("/**") else path
    if _WILD.search(body):
        return (
            f"glob characters in a path outside the project; grant the directory instead, "
            f"e.g. `{_static_dir(body)}/`"
        )
    if ".." in body.split("/"):
        return "`..` in an absolute path; write the path it means"
    return None


def _relative_problem(path: str) -> str | None:
    """A relative grant may climb out with leading `../`; the rest is a vx glob."""
    rest = _without_climb(path)
    if ".." in rest.split("/"):
        return "`..` after the start of a path; write the path it means, e.g. `../shared/x`"
    if rest.strip("/.") == "":
        return None
    problem = glob_error(rest)
    if problem:
        reason, _, hint = problem.partition("; ")
        return f"{reason}; {hint or 'globs are `*`, `**`, `?` and `{a,b}`'}"
    return None


def _write_problem(path: str) -> str | None:
    """A write grant stays in its project and never opens a wall."""
    if path.startswith("../") or path == "..":
        return (
            "leaves the project; a task writes only inside its own project — "
            "let the project that owns the path write it"
        )
    segments = path.split("/")
    for wall in _WALLS:
        if wall in segments:
            return (
                f"would make `{wall}` writable; vx never lets a task write the repository "
                "or its own directory"
            )
    return None


def _ignore_paths(value: Any, at: At) -> tuple[str, ...]:
    """ignore.read / ignore.write: like grants, and globs are fine anywhere."""
    paths = as_strings(value, at, "paths or globs")
    for i, path in enumerate(paths):
        if "\0" in path or "\\" in path:
            at.item(i).refuse(
                f"pattern `{path}` holds a NUL or a backslash", hint="write `/`-separated paths"
            )
    return paths


def _without_climb(path: str) -> str:
    while path.startswith("../"):
        path = path[3:]
    return "" if path == ".." else path


def _static_dir(path: str) -> str:
    match = _WILD.search(path)
    head = path[: match.start()] if match else path
    return head.rsplit("/", 1)[0] or "/"


# ---------------------------------------------------------------- network


def _network(value: Any, at: At) -> bool | tuple[str, ...]:
    """`true` (the host's network) or host patterns for the run's proxy."""
    if isinstance(value, bool):
        return True if value else ()
    return _hosts(value, at, deny=False)


def _hosts(value: Any, at: At, *, deny: bool) -> tuple[str, ...]:
    hosts = as_strings(value, at, "host patterns")
    for i, host in enumerate(hosts):
        problem = host_problem(host, deny=deny)
        if problem:
            reason, _, hint = problem.partition("; ")
            at.item(i).refuse(f"host pattern `{host}` {reason}", hint=hint or _HOST_HINT)
    return tuple(h.lower() for h in hosts)


def host_problem(pattern: str, *, deny: bool = False) -> str | None:
    """Why `pattern` is no host pattern (`example.com`, `*.example.com`, `host:port`), or None."""
    if "://" in pattern:
        return (
            f"has a scheme; write the host alone, e.g. `{pattern.split('://', 1)[1].split('/')[0]}`"
        )
    if "/" in pattern:
        return "has a path; a pattern names a host, not a URL"
    host, port_problem = _split_port(pattern)
    if port_problem:
        return port_problem
    if host == "*":
        return (
            None if deny else "allows every host; write `allow.network: true` for the whole network"
        )
    return _host_name_problem(host.lower())


def _split_port(pattern: str) -> tuple[str, str | None]:
    host, colon, port = pattern.rpartition(":")
    if not colon:
        return pattern, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        return host, f"has the port `{port}`; a port is a number in 1..65535"
    return host, None


def _host_name_problem(host: str) -> str | None:
    if host == "localhost" or _IPV4.match(host):
        return None
    wildcard = host.startswith("*.")
    labels = (host[2:] if wildcard else host).split(".")
    if not all(_LABEL.match(label) for label in labels):
        return "is not a host name; names are letters, digits, `-` and dots, with an optional leading `*.`"
    if len(labels) < 2:
        return (
            "is too broad: a wildcard over a top-level domain"
            if wildcard
            else "has no dot; name the whole host, e.g. `registry.npmjs.org`"
        )
    return None


def _ignore_hosts(value: Any, at: At) -> tuple[str, ...]:
    """ignore.network: `host:port` entries, case-insensitive."""
    entries = as_strings(value, at, "`host:port` entries")
    for i, entry in enumerate(entries):
        host, port_problem = _split_port(entry)
        if port_problem or not host or "/" in entry:
            at.item(i).refuse(
                f"`{entry}` is no `host:port` entry",
                hint="write the host and port a refused request named, e.g. `example.com:443`",
            )
    return tuple(e.lower() for e in entries)


# ---------------------------------------------------------------- unix sockets and ports


def _sockets(value: Any, at: At) -> bool | tuple[str, ...]:
    if isinstance(value, bool):
        return value
    paths = as_strings(value, at, "socket paths")
    for i, path in enumerate(paths):
        if not path.startswith(("/", "~/")):
            at.item(i).refuse(
                f"socket `{path}` is not an absolute path",
                hint="name the socket file, e.g. `/var/run/docker.sock`",
            )
    return paths


def _ports(value: Any, at: At) -> bool | tuple[int, ...]:
    if isinstance(value, bool):
        return value
    if not isinstance(value, list):
        at.refuse(
            f"`{at.field}` must be true, false or an array of ports, got {kind_of(value)}",
            hint="write e.g. [3000, 5173]",
        )
    for i, port in enumerate(value):
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            at.item(i).refuse(
                f"`{at.field}` holds `{port}`, which is no port", hint="ports are 1..65535"
            )
    return tuple(value)
