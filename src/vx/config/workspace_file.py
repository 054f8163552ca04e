"""The workspace schema: vx.workspace.json (concurrency, cacheDir, timeout, remoteCache, cacheRetention,
affectedBase, rules, plugins) into a WorkspaceConfig; a remote cache's token or key is refused here,
never read from the file.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vx.config.fields import (
    MAX_TIMEOUT_MS,
    At,
    Level,
    as_boolean,
    as_integer,
    as_object,
    as_string,
    check_keys,
    kind_of,
    nx_home,
    turbo_home,
)
from vx.model import (
    CacheRetention,
    PluginSpec,
    RemoteCacheConfig,
    RemoteExecution,
    ScheduleConfig,
    WorkspaceConfig,
)

# ---------------------------------------------------------------- object levels


WORKSPACE = Level(
    "the workspace config",
    frozenset(
        {
            "concurrency",
            "cacheDir",
            "timeout",
            "remoteCache",
            "cacheRetention",
            "affectedBase",
            "rules",
            "sandbox",
            "migrated",
            "remoteExecution",
            "cacheScope",
            "schedule",
            "plugins",
        }
    ),
    foreign={
        "pipeline": turbo_home("pipeline", "each package's vx.config.json `tasks`"),
        "tasks": "tasks live in each package's vx.config.json",
        "targetDefaults": nx_home("targetDefaults", "each package's vx.config.json `tasks`"),
        "globalEnv": turbo_home("globalEnv", "cache.inputs.env on the tasks it keys"),
        "globalDependencies": turbo_home("globalDependencies", "cache.inputs.workspaceFiles"),
        "globalPassThroughEnv": turbo_home("globalPassThroughEnv", "exec.env.passThrough"),
        "cacheDirectory": "in vx it is `cacheDir`",
        "parallel": "in vx it is `concurrency`",
        "packages": "members are read from package.json `workspaces` or pnpm-workspace.yaml",
        "workspaces": "members are read from package.json `workspaces` or pnpm-workspace.yaml",
    },
)

RULES = Level(
    "rules",
    frozenset({"exclusiveOutputs"}),
    unsupported={
        "upfrontKeys": "remove it; every key is known before anything runs in this version"
    },
)

SANDBOX = Level(
    "sandbox",
    frozenset({"trace"}),
    foreign={
        k: "grants are per task: exec.sandbox.allow in the package's vx.config.json"
        for k in ("allow", "deny", "ignore")
    },
)


# ---------------------------------------------------------------- workspace config


def validate_workspace(data: Any, file: str) -> WorkspaceConfig:
    """Turn a decoded vx.workspace.json into a WorkspaceConfig."""
    at = At(file)
    obj = as_object(data, at)
    check_keys(obj, at, WORKSPACE)
    cache_dir = as_string(obj["cacheDir"], at.key("cacheDir")) if "cacheDir" in obj else None
    if cache_dir is not None and not cache_dir.strip():
        at.key("cacheDir").refuse("`cacheDir` is empty", hint="name a directory, or omit it")
    return WorkspaceConfig(
        source=file,
        concurrency=as_integer(obj["concurrency"], at.key("concurrency"), 1)
        if "concurrency" in obj
        else None,
        cache_dir=cache_dir,
        timeout_ms=as_integer(obj["timeout"], at.key("timeout"), 1, MAX_TIMEOUT_MS)
        if "timeout" in obj
        else None,
        remote_cache=_remote_cache(obj["remoteCache"], at.key("remoteCache"))
        if "remoteCache" in obj
        else None,
        cache_retention=_retention(obj["cacheRetention"], at.key("cacheRetention"))
        if "cacheRetention" in obj
        else None,
        affected_base=_affected_base(obj["affectedBase"], at.key("affectedBase"))
        if "affectedBase" in obj
        else None,
        exclusive_outputs=_exclusive_outputs(obj["rules"], at.key("rules"))
        if "rules" in obj
        else True,
        sandbox_trace=_sandbox_trace(obj["sandbox"], at.key("sandbox"))
        if "sandbox" in obj
        else True,
        migrated=_migrated(obj["migrated"], at.key("migrated")) if "migrated" in obj else None,
        remote_execution=_remote_execution(obj["remoteExecution"], at.key("remoteExecution"))
        if "remoteExecution" in obj
        else None,
        cache_scope=_cache_scope(obj["cacheScope"], at.key("cacheScope"))
        if "cacheScope" in obj
        else None,
        plugins=_plugins(obj["plugins"], at.key("plugins")) if "plugins" in obj else (),
        schedule=schedule_of(obj["schedule"], at.key("schedule"))
        if "schedule" in obj
        else ScheduleConfig(),
    )


SCHEDULE = Level(
    "schedule",
    frozenset({"history", "window", "assume", "file"}),
    foreign={"predictive": "in vx it is `history` (on by default)"},
    unsupported={
        "resources": "remove it; tasks are not admitted by declared resources in this version",
        **{
            k: "memory reservations are options of the vx.plugins.schedule_history plugin"
            for k in ("memory", "reservations")
        },
    },
)
MAX_WINDOW = 1000  # the history keeps no more runs than this


def schedule_of(value: Any, at: At) -> ScheduleConfig:
    """`schedule`: {history, window, assume: {PKG#TASK | TASK: ms}, file}."""
    obj = as_object(value, at)
    check_keys(obj, at, SCHEDULE)
    assume: dict[str, int] = {}
    if "assume" in obj:
        where = at.key("assume")
        for name, ms in as_object(obj["assume"], where).items():
            if not name or name.startswith("#") or name.endswith("#"):
                where.refuse(
                    f"`{name}` names no task",
                    hint='name a task or a project\'s task, e.g. {"build": 30000, "web#test": 5000}',
                )
            assume[name] = as_integer(ms, where.key(name), 0, MAX_TIMEOUT_MS)
    file = None
    if "file" in obj:
        file = as_string(obj["file"], at.key("file"))
        if not file.strip():
            at.key("file").refuse(
                "`file` is empty", hint="name a workspace-relative path, e.g. .vx-timings.json"
            )
    return ScheduleConfig(
        history=as_boolean(obj["history"], at.key("history")) if "history" in obj else True,
        window=as_integer(obj["window"], at.key("window"), 1, MAX_WINDOW)
        if "window" in obj
        else 20,
        assume=assume,
        file=file,
    )


REMOTE_EXECUTION = Level(
    "remoteExecution",
    frozenset(
        {"capacity", "default", "platform", "updateTimeout", "queueTimeout", "workerInstall"}
    ),
    foreign={
        "endpoint": "the server is remoteCache.reapi.endpoint (or VX_REAPI_ENDPOINT)",
        "remote_executor": "the server is remoteCache.reapi.endpoint (or VX_REAPI_ENDPOINT)",
    },
)


# the longest `updateTimeout` / `queueTimeout` (a week): long enough to mean "wait"
MAX_BOUND_MS = 7 * 24 * 3600 * 1000


def _remote_execution(value: Any, at: At) -> RemoteExecution:
    """`remoteExecution: {capacity?, default?, platform?, updateTimeout?, queueTimeout?}` (the
    bounds in milliseconds); the server is the REAPI remote's."""
    from vx.config.project import platform_properties

    obj = as_object(value, at)
    check_keys(obj, at, REMOTE_EXECUTION)
    return RemoteExecution(
        capacity=as_integer(obj["capacity"], at.key("capacity"), 1, 1024)
        if "capacity" in obj
        else RemoteExecution().capacity,
        default=as_boolean(obj["default"], at.key("default")) if "default" in obj else False,
        platform=platform_properties(obj["platform"], at.key("platform"))
        if "platform" in obj
        else (),
        update_timeout_ms=as_integer(obj["updateTimeout"], at.key("updateTimeout"), 1, MAX_BOUND_MS)
        if "updateTimeout" in obj
        else RemoteExecution().update_timeout_ms,
        queue_timeout_ms=as_integer(obj["queueTimeout"], at.key("queueTimeout"), 1, MAX_BOUND_MS)
        if "queueTimeout" in obj
        else RemoteExecution().queue_timeout_ms,
        worker_install=_worker_install(obj["workerInstall"], at.key("workerInstall"))
        if "workerInstall" in obj
        else None,
    )


def _worker_install(value: Any, at: At) -> str:
    """`workerInstall`: an absolute POSIX path on the workers (where the workspace is installed)."""
    path = as_string(value, at)
    if not path.startswith("/") or "\\" in path or "\0" in path:
        at.refuse(
            f"`workerInstall` must be an absolute path on the workers, got {json.dumps(path)}",
            hint='e.g. "/opt/workspace": where the workers\' image has this workspace installed',
        )
    return path.rstrip("/") or "/"


def _cache_scope(value: Any, at: At) -> str:
    from vx.store.policy import scope_problem

    scope = as_string(value, at)
    problem = scope_problem(scope)
    if problem:
        at.refuse(f"`cacheScope` {problem}", hint="trusted, read-only, or a name such as pr-42")
    return scope


PLUGIN = Level("a plugin entry", frozenset({"name", "options"}))
_PLUGIN_HINT = 'e.g. "plugins": ["vx.plugins.otel", {"name": "my_plugin", "options": {"level": 2}}]'
# a module path (`vx.plugins.otel`) or an entry point's name (`my-plugin`)
_PLUGIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _plugins(value: Any, at: At) -> tuple[PluginSpec, ...]:
    """`plugins: ["name", {"name": "...", "options": {...}}]`, in declaration order (precedence)."""
    if not isinstance(value, list):
        at.refuse(f"`plugins` must be a list, got {kind_of(value)}", hint=_PLUGIN_HINT)
    out: list[PluginSpec] = []
    for i, item in enumerate(value):
        here = at.item(i)
        options: dict[str, Any] = {}
        if isinstance(item, dict):
            check_keys(item, here, PLUGIN)
            if "name" not in item:
                here.refuse("a plugin entry needs a `name`", hint=_PLUGIN_HINT)
            name = as_string(item["name"], here.key("name"))
            options = as_object(item.get("options", {}), here.key("options"))
        elif isinstance(item, str):
            name = item
        else:
            here.refuse(
                f"a plugin is a name or {{name, options}}, got {kind_of(item)}", hint=_PLUGIN_HINT
            )
        if not _PLUGIN_NAME.fullmatch(name):
            here.refuse(
                f"{json.dumps(name)} is not a plugin name",
                hint="name a Python module (vx.plugins.otel) or a `vx.plugins` entry point",
            )
        if any(spec.name == name for spec in out):
            here.refuse(
                f"plugin {name!r} is declared twice",
                hint="keep one entry; put every option in it",
            )
        out.append(PluginSpec(name, options))
    return tuple(out)


def _migrated(value: Any, at: At) -> str:
    """`migrated`: the tool `vx migrate` wrote the configs from; its files no longer give tasks."""
    if value not in ("turbo", "nx"):
        at.refuse(
            f'`migrated` must be "turbo" or "nx", got {json.dumps(value)}',
            hint="`vx migrate` writes it; remove it to have vx read turbo.json or nx.json again",
        )
    return value


def _sandbox_trace(value: Any, at: At) -> bool:
    """`sandbox.trace`: false runs every sandboxed task enforced but untraced, unless the task says otherwise."""
    return _switch(value, at, SANDBOX, "trace", 'e.g. "sandbox": {"trace": false}')


def _exclusive_outputs(value: Any, at: At) -> bool:
    """`rules.exclusiveOutputs`: false lets a dependant add to its upstream's outputs."""
    return _switch(
        value, at, RULES, "exclusiveOutputs", 'e.g. "rules": {"exclusiveOutputs": false}'
    )


def _switch(value: Any, at: At, level, name: str, hint: str) -> bool:
    """The one boolean `name` of an object at `level` (true when absent)."""
    obj = as_object(value, at)
    check_keys(obj, at, level)
    return as_boolean(obj.get(name, True), at.key(name), hint=hint)


def _affected_base(value: Any, at: At) -> str:
    from vx.errors import UsageError
    from vx.files.git import check_ref

    ref = as_string(value, at)
    try:
        return check_ref(ref)
    except UsageError as exc:
        at.refuse(f"`affectedBase` {ref!r} is not a ref vx will compare against", hint=exc.hint)


# ---------------------------------------------------------------- cacheRetention

RETENTION = Level(
    "cacheRetention",
    frozenset({"olderThan", "maxSize"}),
    foreign={
        "maxAge": "in vx it is `olderThan`",
        "ttl": "in vx it is `olderThan`",
        "size": "in vx it is `maxSize`",
        "maxBytes": 'in vx it is `maxSize` (e.g. "10G")',
    },
)


def _retention(value: Any, at: At) -> CacheRetention:
    """`cacheRetention: {olderThan?: "30d", maxSize?: "10G"}`, pruned at the end of each run."""
    from vx.store.pruning import parse_duration, parse_size

    obj = as_object(value, at)
    check_keys(obj, at, RETENTION)
    if not {"olderThan", "maxSize"} & set(obj):
        at.refuse(
            "`cacheRetention` bounds nothing",
            hint='e.g. "cacheRetention": {"olderThan": "30d", "maxSize": "10G"}',
        )
    out: dict[str, Any] = {}
    for key, parse, dest, example in (
        ("olderThan", parse_duration, "older_than_s", "30d, 12h, 90m"),
        ("maxSize", parse_size, "max_bytes", "10G, 500MB, 64KB"),
    ):
        if key in obj:
            parsed = parse(as_string(obj[key], at.key(key)))
            if isinstance(parsed, str):
                at.key(key).refuse(
                    f"`{key}`: {parsed}", hint=f"write a number and a unit: {example}"
                )
            out[dest] = parsed
    return CacheRetention(**out)


# ---------------------------------------------------------------- remoteCache

_TURBO_HOME = "remoteCache.turbo"
REMOTE_CACHE = Level(
    "remoteCache",
    frozenset({"turbo", "nx", "reapi", "upload", "timeout", "maxArtifactSize"}),
    foreign={
        k: f"in vx it is {_TURBO_HOME}.{v}"
        for k, v in (
            ("apiUrl", "apiUrl"),
            ("teamId", "teamId"),
            ("teamSlug", "team"),
            ("signature", "signature"),
        )
    },
    unsupported={
        "preflight": "remove it; vx sends no preflight in this version",
        "uploadTimeout": "remove it; set TURBO_REMOTE_CACHE_UPLOAD_TIMEOUT (seconds) instead",
        "enabled": "remove it; `--cache=remote:` turns the remote off for a run",
    },
)
TURBO_REMOTE = Level(
    f"{_TURBO_HOME}",
    frozenset({"apiUrl", "team", "teamId", "signature"}),
    foreign={"teamSlug": "in vx it is `team`"},
)
NX_REMOTE = Level("remoteCache.nx", frozenset({"url"}))
REAPI_REMOTE = Level(
    "remoteCache.reapi",
    frozenset({"endpoint", "instance", "caCert", "clientCert", "clientKey", "maxConnections"}),
    foreign={
        "url": "in vx it is `endpoint`",
        "remoteCache": "in vx it is `endpoint`",
        "instanceName": "in vx it is `instance`",
        "remoteInstanceName": "in vx it is `instance`",
        "tlsCertificate": "in vx it is `caCert`",
        "tls_certificate": "in vx it is `caCert`",
        "tlsClientCertificate": "in vx it is `clientCert`",
        "tlsClientKey": "in vx it is `clientKey`",
        "maxConcurrency": "in vx it is `maxConnections`",
        "remote_max_connections": "in vx it is `maxConnections`",
    },
    unsupported={
        "headers": "remove it; headers carry API keys: set VX_REAPI_HEADERS in the environment",
        "executor": "remove it; vx uses a REAPI server as a cache only in this version",
    },
)
UPLOAD_MODES = ("ci", "always", "never")
_SECRET_KEYS = ("token", "accessToken", "signatureKey")


def _remote_cache(value: Any, at: At) -> RemoteCacheConfig:
    """`remoteCache: {turbo: {...} | nx: {...} | reapi: {...}, upload?, timeout?, maxArtifactSize?}`;
    never a secret."""
    obj = _no_secrets(as_object(value, at), at)
    check_keys(obj, at, REMOTE_CACHE)
    kinds = [k for k in ("turbo", "nx", "reapi") if k in obj]
    if len(kinds) != 1:
        at.refuse(
            "`remoteCache` needs exactly one of `turbo`, `nx` or `reapi`",
            hint='e.g. "remoteCache": {"turbo": {"apiUrl": "https://cache.example.com", "team": "web"}}',
        )
    wire = _remote_wire(kinds[0], obj[kinds[0]], at.key(kinds[0]))
    upload = as_string(obj.get("upload", "ci"), at.key("upload"))
    if upload not in UPLOAD_MODES:
        at.key("upload").refuse(
            f"`upload` must be one of {', '.join(UPLOAD_MODES)}, got {upload!r}",
            hint="`ci` uploads only when CI is set (the default)",
        )
    return RemoteCacheConfig(
        **wire,
        upload=upload,
        timeout_ms=as_integer(obj["timeout"], at.key("timeout"), 1, MAX_TIMEOUT_MS)
        if "timeout" in obj
        else None,
        max_artifact_bytes=as_integer(obj["maxArtifactSize"], at.key("maxArtifactSize"), 1)
        if "maxArtifactSize" in obj
        else None,
    )


def _remote_wire(kind: str, value: Any, at: At) -> dict[str, Any]:
    obj = _no_secrets(as_object(value, at), at)
    check_keys(obj, at, {"turbo": TURBO_REMOTE, "nx": NX_REMOTE, "reapi": REAPI_REMOTE}[kind])
    numbers = ("signature", "$schema", "maxConnections")
    strings = {k: as_string(v, at.key(k)) for k, v in obj.items() if k not in numbers}
    if kind == "reapi":
        wire = _reapi_wire(strings, at)
        if "maxConnections" in obj:
            wire["max_connections"] = as_integer(
                obj["maxConnections"], at.key("maxConnections"), 1, 10_000
            )
        return wire
    if kind == "nx":
        return {"kind": "nx", "url": strings.get("url")}
    signature = obj.get("signature")
    if signature is not None:
        as_boolean(signature, at.key("signature"))
    return {
        "kind": "turbo",
        "url": strings.get("apiUrl"),
        "team": strings.get("team"),
        "team_id": strings.get("teamId"),
        "signature": signature,
    }


def _reapi_wire(strings: dict[str, str], at: At) -> dict[str, Any]:
    """`remoteCache.reapi: {endpoint: "grpc(s)://host:port", instance?, caCert?, clientCert?,
    clientKey?}`, checked here so a typo is refused with its field (the environment's VX_REAPI_*
    win over it at run time). The TLS files are paths, relative to the workspace root; the key
    file is a secret, its path is not."""
    from urllib.parse import urlsplit

    endpoint = strings.get("endpoint")
    hint = 'e.g. "reapi": {"endpoint": "grpcs://remote.buildbuddy.io"} or "grpc://127.0.0.1:50051"'
    if endpoint is None:
        at.refuse("`remoteCache.reapi` needs an `endpoint`", hint=hint)
    parts = urlsplit(endpoint)
    try:
        port = parts.port
    except ValueError:
        port = 0
    if (
        parts.scheme not in ("grpc", "grpcs")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.path.strip("/")
        or parts.query
        or port == 0
        or (port is None and parts.scheme == "grpc")
    ):
        at.key("endpoint").refuse(
            f"`endpoint` must be grpc://host:port or grpcs://host[:port], got {endpoint!r}",
            hint=hint,
        )
    tls = {k: strings[k] for k in ("caCert", "clientCert", "clientKey") if k in strings}
    for name, path in tls.items():
        if not path.strip():
            at.key(name).refuse(f"`{name}` is empty", hint="name a PEM file, or omit it")
        if parts.scheme != "grpcs":
            at.key(name).refuse(
                f"`{name}` needs a grpcs:// endpoint, not {endpoint!r}",
                hint="TLS files are for grpcs://; a grpc:// endpoint is plain text",
            )
    if ("clientCert" in tls) != ("clientKey" in tls):
        missing = "clientKey" if "clientCert" in tls else "clientCert"
        at.refuse(
            f"`remoteCache.reapi` has one of `clientCert` and `clientKey` but no `{missing}`",
            hint="a client certificate (mTLS) needs both: the PEM certificate and its key",
        )
    return {
        "kind": "reapi",
        "url": endpoint.rstrip("/"),
        "instance": strings.get("instance"),
        "ca_cert": tls.get("caCert"),
        "client_cert": tls.get("clientCert"),
        "client_key": tls.get("clientKey"),
    }


def _no_secrets(obj: dict[str, Any], at: At) -> dict[str, Any]:
    """Refuse a token or key written into a config file: it would be committed and shared."""
    for key in _SECRET_KEYS:
        if key in obj:
            at.key(key).refuse(
                f"`{key}` must not be written in a config file",
                hint="set TURBO_TOKEN, NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN or "
                "TURBO_REMOTE_CACHE_SIGNATURE_KEY in the environment instead",
            )
    return obj
