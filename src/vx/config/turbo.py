"""A Turborepo repository run as it is: turbo.json's task definitions and each package's
package.json scripts become vx tasks, with nothing written.

Only packages without a vx.config of their own are mapped; a vx.config always wins. The mapping
follows turbo 2's semantics (1.x `pipeline` is read as `tasks`):

- a task runs in a package only when the package has a script of that name; the root project runs
  only `//#name` definitions, so a root `"build": "turbo run build"` never recurses;
- `pkg#name` in the root file replaces `name` for that package; a package's own turbo.json
  (`extends: ["//"]`) then replaces field by field, `$TURBO_EXTENDS$` appending to the root's list;
- `inputs` default to every file of the package (`$TURBO_DEFAULT$`), `$TURBO_ROOT$/` globs are
  workspace files, `globalDependencies` are workspace inputs of every task;
- `env` keys the task and passes the variables through (turbo's strict mode), `passThroughEnv`
  only passes them; `globalEnv` / `globalPassThroughEnv` apply to every task;
- `cache: false` never caches; `persistent: true` is `exec.persistent: {}` and `interactive: true`
  is `exec.interactive`, neither cached (turbo never saves a persistent task either).

Each definition is checked here, with the turbo.json field path in every refusal, before the
mapped task goes through vx's own schema.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from msgspec import Struct, field
from msgspec.structs import replace

from vx import witness
from vx.config import jsonc
from vx.config.fields import At, Level, as_object, as_strings, check_keys, kind_of
from vx.config.project import canonical, depends_on_problem, validate_project
from vx.errors import ConfigError
from vx.files.globs import glob_error
from vx.model import ROOT_PROJECT, Package, ProjectConfig, RemoteCacheConfig, TaskConfig

FILE_NAMES = ("turbo.json", "turbo.jsonc")
DEFAULT = "$TURBO_DEFAULT$"
ROOT_PREFIX = "$TURBO_ROOT$/"
EXTENDS = "$TURBO_EXTENDS$"
_ENV_PATTERN = re.compile(r"!?[A-Za-z_*][A-Za-z0-9_*]*\Z")

# Keys that only shape turbo's own terminal, daemon or cache; vx has its own for each.
_IGNORED_ROOT = frozenset(
    {
        "daemon",
        "envMode",
        "cacheDir",
        "concurrency",
        "futureFlags",
        "dangerouslyDisablePackageManagerCheck",
        "noUpdateNotifier",
        "boundaries",
        "experimentalSpaces",
        "globalDotEnv",
        "cacheMaxAge",
    }
)
ROOT = Level(
    "turbo.json",
    frozenset(
        {
            "tasks",
            "pipeline",
            "globalDependencies",
            "globalEnv",
            "globalPassThroughEnv",
            "remoteCache",
            "ui",
        }
    )
    | _IGNORED_ROOT,
    foreign={"extends": "only a package's own turbo.json extends the root one"},
)
PACKAGE = Level(
    "a package's turbo.json",
    frozenset({"extends", "tasks", "tags", "boundaries"}),
    foreign={
        k: "set it in the root turbo.json"
        for k in ("globalDependencies", "globalEnv", "globalPassThroughEnv", "pipeline")
    },
)
TASK = Level(
    "a turbo.json task",
    frozenset(
        {
            "dependsOn",
            "inputs",
            "outputs",
            "cache",
            "env",
            "passThroughEnv",
            "persistent",
            "interactive",
            "interruptible",
            "outputLogs",
            "outputMode",
            "dotEnv",
            "with",
        }
    ),
    foreign={
        "exec": "a turbo.json task runs the package.json script of the same name; "
        "write vx tasks in a vx.config.json instead",
        "command": "a turbo.json task runs the package.json script of the same name",
    },
)


REMOTE = Level(
    "turbo.json remoteCache",
    frozenset(
        {
            "enabled",
            "signature",
            "preflight",
            "timeout",
            "uploadTimeout",
            "apiUrl",
            "loginUrl",
            "teamId",
            "teamSlug",
        }
    ),
)


class TurboRoot(Struct, frozen=True):
    """The root turbo.json, checked: definitions by `name`, `pkg#name` or `//#name`."""

    source: str
    tasks: Mapping[str, dict]
    global_inputs: tuple[str, ...] = ()
    global_env: tuple[str, ...] = ()
    global_pass_through: tuple[str, ...] = ()
    named: frozenset[str] = frozenset()  # packages some `pkg#name` definition names
    climbs: bool = False  # some `inputs` glob starts with `../`
    remote_cache: RemoteCacheConfig | None = None  # `remoteCache`
    remote_off: bool = False  # `remoteCache.enabled: false`: no remote, whatever `turbo link` wrote
    ui: str | None = None  # `"ui"`: "tui" or "stream", the default of `--ui`
    # Generated and copy-pasted packages share scripts and turbo.json texts: each distinct
    # (manager, scripts, own file, name when it matters) is mapped and validated once.
    memo: dict = field(default_factory=dict)


# ---------------------------------------------------------------- reading


def find_root(root: str) -> TurboRoot | None:
    """The workspace root's turbo.json (or turbo.jsonc), checked; None when there is neither."""
    found = []
    for name in FILE_NAMES:
        path = os.path.join(root, name)
        text = _read(path, name)
        if text is not None:
            found.append((name, text))
    if not found:
        return None
    if len(found) > 1:
        raise ConfigError(
            "both turbo.json and turbo.jsonc exist",
            file=found[0][0],
            hint="keep one; turbo and vx would not know which to read",
        )
    source, text = found[0]
    return _checked_root(jsonc.loads(text, source), source)


def linked(root: str) -> RemoteCacheConfig | None:
    """`.turbo/config.json`, as `turbo link` leaves it (`teamid`, `apiurl`, `teamslug`)."""
    path = os.path.join(root, ".turbo", "config.json")
    text = _read(path, ".turbo/config.json")
    if text is None:
        return None
    try:
        obj = jsonc.loads(text, ".turbo/config.json")
    except ConfigError:
        return None  # turbo's own file: a damaged one is turbo's to complain about
    if not isinstance(obj, dict):
        return None
    fields = {
        k: obj.get(k) if isinstance(obj.get(k), str) else None
        for k in ("teamid", "apiurl", "teamslug")
    }
    if not any(fields.values()):
        return None
    return RemoteCacheConfig(
        kind="turbo", url=fields["apiurl"], team=fields["teamslug"], team_id=fields["teamid"]
    )


def read_package(directory: str, source: str) -> dict | None:
    """A package's own turbo.json, checked, or None when it has none."""
    text = _read(os.path.join(directory, "turbo.json"), source)
    if text is None:
        return None
    at = At(source)
    obj = as_object(jsonc.loads(text, source), at)
    check_keys(obj, at, PACKAGE)
    extends = obj.get("extends")
    if not isinstance(extends, list) or "//" not in extends:
        at.key("extends").refuse(
            "a package's turbo.json must extend the root one", hint='write "extends": ["//"]'
        )
    tasks = as_object(obj.get("tasks", {}), at.key("tasks"))
    for name, body in tasks.items():
        if "#" in name:
            at.key("tasks").key(name).refuse(
                f"task `{name}` names a package; a package's turbo.json "
                "configures only its own tasks",
                hint=f"write `{name.split('#')[-1]}`",
            )
        _check_task(body, at.key("tasks").key(name), package_level=True)
    tags = as_strings(obj["tags"], at.key("tags"), "tags") if "tags" in obj else ()
    return {"tasks": tasks, "tags": list(tags), "text": text}


def _read(path: str, source: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        witness.probed(path)
        return None
    witness.read(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start})", file=source, hint="save it as UTF-8"
        ) from None


# ---------------------------------------------------------------- checks


def _checked_root(data: Any, source: str) -> TurboRoot:
    at = At(source)
    obj = as_object(data, at)
    check_keys(obj, at, ROOT)
    if "tasks" in obj and "pipeline" in obj:
        at.key("pipeline").refuse(
            "both `tasks` and `pipeline`", hint="`pipeline` is turbo 1's name for `tasks`; keep one"
        )
    key = "tasks" if "tasks" in obj else "pipeline"
    tasks = as_object(obj.get(key, {}), at.key(key))
    for name, body in tasks.items():
        _check_task_name(name, at.key(key).key(name))
        _check_task(body, at.key(key).key(name), package_level=False)
    return TurboRoot(
        source=source,
        tasks=tasks,
        named=frozenset(n.rpartition("#")[0] for n in tasks if "#" in n),
        climbs=any(
            isinstance(body, dict)
            and any(g.lstrip("!").startswith("../") for g in body.get("inputs", ()))
            for body in tasks.values()
        ),
        remote_cache=_remote(obj.get("remoteCache"), at.key("remoteCache")),
        remote_off=isinstance(obj.get("remoteCache"), dict)
        and obj["remoteCache"].get("enabled") is False,
        global_inputs=_globs(obj.get("globalDependencies", []), at.key("globalDependencies")),
        global_env=_env(obj.get("globalEnv", []), at.key("globalEnv")),
        global_pass_through=_env(
            obj.get("globalPassThroughEnv", []), at.key("globalPassThroughEnv")
        ),
        ui=_ui(obj.get("ui"), at.key("ui")),
    )


def _ui(value: Any, at: At) -> str | None:
    if value is None or value in ("tui", "stream"):
        return value
    return at.refuse(
        f"`{value}` is not a UI", hint='"tui" (the split view on a terminal) or "stream"'
    )


def _remote(value: Any, at: At) -> RemoteCacheConfig | None:
    """turbo.json `remoteCache` as vx's turbo remote; None when absent or off (`enabled:
    false`). The token never comes from a file: TURBO_TOKEN, as for turbo in CI. vx's upload policy
    stays its own (uploads from CI only unless vx.workspace.json says otherwise)."""
    if value is None:
        return None
    obj = as_object(value, at)
    check_keys(obj, at, REMOTE)
    _kinds(obj, at, bool, ("enabled", "signature", "preflight"))
    _kinds(obj, at, str, ("apiUrl", "teamId", "teamSlug", "loginUrl"))
    timeout = obj.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        at.key("timeout").refuse("`timeout` must be a positive number of seconds")
    if obj.get("enabled") is False:
        return None
    return RemoteCacheConfig(
        kind="turbo",
        url=obj.get("apiUrl"),
        team=obj.get("teamSlug"),
        team_id=obj.get("teamId"),
        signature=obj.get("signature"),
        timeout_ms=int(timeout * 1000) if timeout else None,
    )


def _check_task_name(name: str, at: At) -> None:
    package, _, task = name.rpartition("#")
    if not task or task.strip() != task or "*" in task or (name.count("#") and not package):
        at.refuse(
            f"task name {name!r} is neither `name` nor `package#name`",
            hint="root tasks are written `//#name`",
        )


def _check_task(body: Any, at: At, *, package_level: bool) -> None:
    obj = as_object(body, at, "an object (a task definition)")
    check_keys(obj, at, TASK)
    _kinds(obj, at, bool, ("cache", "persistent", "interactive", "interruptible"))
    _kinds(obj, at, str, ("outputLogs", "outputMode"))
    if "dependsOn" in obj:
        for i, entry in enumerate(as_strings(obj["dependsOn"], at.key("dependsOn"), "task names")):
            why = None if entry.startswith("$") or entry == EXTENDS else depends_on_problem(entry)
            if why:
                at.key("dependsOn").item(i).refuse(
                    f"dependsOn entry {entry!r} {why}",
                    hint="entries are `name`, `^name`, `pkg#name` or `//#name`",
                )
    for key in ("inputs", "outputs", "dotEnv"):
        if key in obj:
            _globs(obj[key], at.key(key), climbs=key == "inputs")
    for key in ("env", "passThroughEnv"):
        if key in obj:
            _env(obj[key], at.key(key))
    if "with" in obj:
        as_strings(obj["with"], at.key("with"), "task names")
    if not package_level:
        for key, value in obj.items():
            if isinstance(value, list) and EXTENDS in value:
                at.key(key).refuse(
                    f"`{EXTENDS}` in the root turbo.json: there is nothing to extend",
                    hint="it belongs in a package's own turbo.json",
                )


def _kinds(obj: dict, at: At, kind: type, keys: tuple[str, ...]) -> None:
    """Each of `keys` present in `obj` holds a `kind` (true/false for bool, a string for str)."""
    want = "true or false" if kind is bool else "a string"
    for key in keys:
        if key in obj and not isinstance(obj[key], kind):
            at.key(key).refuse(f"`{key}` must be {want}, got {kind_of(obj[key])}")


def _globs(value: Any, at: At, *, climbs: bool = False) -> tuple[str, ...]:
    """Checked glob strings; `climbs`: leading `../` steps are allowed (turbo's `inputs` take
    them, and where they lead is known per package, `_split`)."""
    globs = as_strings(value, at, "glob strings")
    for i, pattern in enumerate(globs):
        if pattern in (DEFAULT, EXTENDS):
            continue
        negation = "!" if pattern.startswith("!") else ""
        body = pattern[len(negation) :]
        body = body[len(ROOT_PREFIX) :] if body.startswith(ROOT_PREFIX) else body
        while climbs and body.startswith("../"):
            body = body[3:]
        problem = glob_error(negation + body)
        if problem:
            reason, _, hint = problem.partition("; ")
            at.item(i).refuse(f"glob `{pattern}`: {reason}", hint=hint or None)
    if globs and all(g.startswith("!") for g in globs):
        at.refuse(
            "every entry is a `!` negation, which selects nothing",
            hint=f'a negation takes back from what the others select, e.g. ["{DEFAULT}", "{globs[0]}"]',
        )
    return globs


def _env(value: Any, at: At) -> tuple[str, ...]:
    names = as_strings(value, at, "env var names")
    for i, name in enumerate(names):
        if name != EXTENDS and not _ENV_PATTERN.match(name):
            at.item(i).refuse(
                f"`{name}` is not an env var name or pattern",
                hint="names match [A-Za-z_][A-Za-z0-9_]*, `*` matches any run, `!` excludes",
            )
    return names


# ---------------------------------------------------------------- one package's tasks


def project(
    turbo: TurboRoot, pkg: Package, manager: str, own: dict | None, own_source: str
) -> ProjectConfig:
    """`pkg`'s tasks as turbo would run them; an empty config when none applies."""
    named = pkg.name == ROOT_PROJECT or pkg.name in turbo.named
    memo_key = (
        manager,
        tuple(sorted(pkg.scripts.items())),
        own["text"] if own else None,
        pkg.name if named else None,
        pkg.framework,
        # `../` inputs lead elsewhere from each directory
        pkg.dir if turbo.climbs or (own and '"../' in own["text"]) else None,
    )
    known = turbo.memo.get(memo_key)
    if known is None:
        known = turbo.memo[memo_key] = _mapped(turbo, pkg, manager, own, own_source)
    source = own_source if own is not None else turbo.source
    if not known.source or known.source == source:
        return known
    # Another package's own turbo.json of the same text: this one's file, where it names its own
    origins = {k: (source if f == known.source else f, w) for k, (f, w) in known.origins.items()}
    return replace(known, source=source, origins=origins)


def _mapped(
    turbo: TurboRoot, pkg: Package, manager: str, own: dict | None, own_source: str
) -> ProjectConfig:
    defined = definitions(turbo, pkg, own)
    tasks: dict[str, dict] = {}
    noops: set[str] = set()
    for name, body in defined.items():
        if name not in pkg.scripts:
            # turbo keeps a no-op (`<NONEXISTENT>`): it runs nothing, still waits for its own
            # dependsOn, and its hash folds the package's inputs into its dependants'.
            noops.add(name)
            plain = {k: v for k, v in body.items() if k not in ("persistent", "interactive")}
            tasks[name] = _vx_task(turbo, pkg, name, {**plain, "cache": True}, "true")
            continue
        tasks[name] = _vx_task(turbo, pkg, name, body, with_hooks(pkg, name, manager))
    for body in tasks.values():
        deps = [d for d in body.get("dependsOn", ()) if "#" in d or d.startswith("^") or d in tasks]
        if deps:
            body["dependsOn"] = deps
        else:
            body.pop("dependsOn", None)
    source = own_source if own is not None else turbo.source
    if not tasks and not (own or {}).get("tags"):
        return ProjectConfig(source="")
    envs = {name: _take_env(body) for name, body in tasks.items()}
    reach = {name: body.pop("turboReach", None) for name, body in tasks.items()}
    config = validate_project({"tasks": tasks, "tags": (own or {}).get("tags", [])}, source)
    mapped = {
        name: _with_env(
            _with_turbo_globs(task, tasks[name], reach[name]),
            tasks[name],
            *envs[name],
            pkg.framework,
        )
        for name, task in config.tasks.items()
    }
    return ProjectConfig(
        source=config.source,
        tags=config.tags,
        tasks={
            name: _as_noop(task) if name in noops else _runs_script(task, name)
            for name, task in mapped.items()
        },
        origins=_origins(turbo, pkg, own, source, tasks),
    )


def _origins(
    turbo: TurboRoot, pkg: Package, own: dict | None, own_source: str, tasks: dict[str, dict]
) -> dict[str, tuple[str, str]]:
    """Where each mapped task's globs were written: its definition's `inputs` and `outputs` (in
    the package's own turbo.json when that sets them, else the root's `name` or `pkg#name`) and
    `globalDependencies`. A warning names these, not the vx fields they map to."""
    out: dict[str, tuple[str, str]] = {}
    mine = (own or {}).get("tasks", {})
    for name, body in tasks.items():
        cache = body.get("cache")
        if not isinstance(cache, dict):
            continue
        qualified = f"{pkg.name}#{name}"
        written = task_key(qualified if qualified in turbo.tasks else name)
        for key in ("inputs", "outputs"):
            if key in mine.get(name, {}):
                out[f"tasks.{name}.cache.{key}"] = (own_source, f"{task_key(name)}.{key}")
            else:
                out[f"tasks.{name}.cache.{key}"] = (turbo.source, f"{written}.{key}")
        for i, glob in enumerate(cache["inputs"].get("workspaceFiles", ())):
            if glob in turbo.global_inputs:
                out[f"tasks.{name}.cache.inputs.workspaceFiles[{i}]"] = (
                    turbo.source,
                    "globalDependencies",
                )
    return out


def task_key(name: str) -> str:
    """A turbo.json task's path as a field: `tasks.build`, or `tasks["pkg#build"]`."""
    return f"tasks.{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name) else f'tasks["{name}"]'


def _runs_script(task: TaskConfig, name: str) -> TaskConfig:
    """`task` as the package.json script it runs: turbo runs it through the package manager,
    which sets `npm_package_name` and the rest (plan/lifecycle.py)."""
    assert task.exec is not None
    return replace(task, exec=replace(task.exec, script=name))


def _with_turbo_globs(task: TaskConfig, body: dict, reach: list[str] | None) -> TaskConfig:
    """`task` matching its globs as turbo does: character classes, and files git ignores reached
    by the explicit globs (`$TURBO_DEFAULT$` is git's view). In the declaration the key folds."""
    if task.cache is None:
        return task
    # Shown by `vx show` as folded: the globs matched on disk, gitignored files included.
    body["turboGlobs"] = {"onDisk": list(task.cache.input_files) if reach is None else reach}
    cache = replace(
        task.cache, turbo_globs=True, input_reach=tuple(reach) if reach is not None else None
    )
    return replace(task, cache=cache, canonical=canonical(body))


def _as_noop(task: TaskConfig) -> TaskConfig:
    """A definition whose script the package lacks, as an implicit group keyed on its inputs."""
    return replace(
        task, exec=None, implicit=True, canonical='{"implicit":true,' + task.canonical[1:]
    )


def _take_env(task: dict) -> tuple[list[str], list[str]]:
    """Turbo's env lists, out of the task: vx's schema takes names only, turbo's may be
    patterns (`NEXT_PUBLIC_*`, `!SECRET`), expanded against the host when the task is planned."""
    env = task["exec"].pop("env", {})
    keyed = task.get("cache", {}).get("inputs", {}).pop("env", [])
    return keyed, env.get("passThrough", [])


def _with_env(
    task: TaskConfig, body: dict, keyed: list[str], passed: list[str], framework: str
) -> TaskConfig:
    """`task` with turbo's env lists back in, and in the declaration the key folds.

    `framework` is the one turbo infers for the package: its variables (`NEXT_PUBLIC_*`, …) are
    matched against the host when the task is planned, then keyed and passed as turbo does, unless
    the run says `--framework-inference=false`."""
    if not keyed and not passed and not framework:
        return task
    assert task.exec is not None  # _vx_task gives every task its command
    exec_ = replace(
        task.exec, env=replace(task.exec.env, pass_through=tuple(passed), framework=framework)
    )
    if not keyed and not passed:
        return replace(task, exec=exec_)
    declared = {**body, "turboEnv": {"keyed": keyed, "passThrough": passed}}
    cache = replace(task.cache, input_env=tuple(keyed)) if task.cache is not None else None
    return replace(task, exec=exec_, cache=cache, canonical=canonical(declared))


def definitions(turbo: TurboRoot, pkg: Package, own: dict | None) -> dict[str, dict]:
    """The definitions that apply to `pkg`, by task name, after `pkg#name` and its own file."""
    out: dict[str, dict] = {}
    prefix = f"{pkg.name}#"
    for name, body in turbo.tasks.items():
        if name.startswith(prefix):
            out[name[len(prefix) :]] = body  # replaces the generic one, whatever the order
        elif "#" not in name and pkg.name != ROOT_PROJECT:
            out.setdefault(name, body)
    for name, body in (own or {}).get("tasks", {}).items():
        out[name] = _merged(out.get(name, {}), body)
    return out


def _merged(base: dict, over: dict) -> dict:
    """A package's field replaces the root's; `$TURBO_EXTENDS$` in a list appends to it."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, list) and EXTENDS in value:
            value = [*base.get(key, []), *(v for v in value if v != EXTENDS)]
        out[key] = value
    return out


HOOK_RUNNERS = ("npm", "bun", "yarn-classic", "pnpm-hooks")  # yarn 2+ runs no pre/post scripts


def hook_manager(manager: str, root) -> str:
    """The manager's name, told apart by whether it runs a script's pre/post hooks: `yarn-classic`
    for yarn 1 (no .yarnrc.yml at the root: yarn 2+ writes one), `pnpm-hooks` for a pnpm that runs
    them (`_pnpm_runs_hooks`)."""
    if manager == "pnpm":
        return "pnpm-hooks" if _pnpm_runs_hooks(str(root)) else "pnpm"
    if manager != "yarn":
        return manager
    marker = os.path.join(root, ".yarnrc.yml")
    witness.probed(marker)  # a receipt holds while it stays (or stays missing)
    return manager if os.path.lexists(marker) else "yarn-classic"


def _pnpm_runs_hooks(root: str) -> bool:
    """What `pnpm run` does with `pre<name>`/`post<name>`, checked against pnpm 6 to 10: the
    `enablePrePostScripts` setting of pnpm-workspace.yaml (pnpm 10), else `enable-pre-post-scripts`
    in the root .npmrc, else the default of its major version — on from pnpm 9, off before. The
    version is the root package.json's `packageManager`, else told by the lockfile's format;
    where neither tells (no lockfile, or format 9.0, which pnpm 9 and 10 both write), today's."""
    major = _pnpm_major(root)
    if major is None or major >= 10:
        setting = _read_text(os.path.join(root, "pnpm-workspace.yaml"))
        found = _PNPM_WORKSPACE_SETTING.findall(setting or "")
        if found:
            return found[-1] == "true"
    found = _NPMRC_SETTING.findall(_read_text(os.path.join(root, ".npmrc")) or "")
    if found:
        return found[-1].lower() == "true"
    return major is None or major >= 9


_NPMRC_SETTING = re.compile(r"^[ \t]*enable-pre-post-scripts[ \t]*=[ \t]*(\w+)", re.M)
_PNPM_WORKSPACE_SETTING = re.compile(r"^enablePrePostScripts:[ \t]*(true|false)\b", re.M)
_LOCKFILE_VERSION = re.compile(r"^lockfileVersion:[ \t]*'?(\d+)", re.M)


def _pnpm_major(root: str) -> int | None:
    manifest = _read_text(os.path.join(root, "package.json")) or ""
    declared = re.search(r'"packageManager"\s*:\s*"pnpm@(\d+)', manifest)
    if declared:
        return int(declared.group(1))
    lockfile = _LOCKFILE_VERSION.search(
        _read_text(os.path.join(root, "pnpm-lock.yaml"), head=200) or ""
    )
    if lockfile:
        # Format 6 is pnpm 8's (and late 7's), 5 older ones'; 9 is written by 9 and 10 alike.
        return None if int(lockfile.group(1)) >= 9 else 8
    return None


def _read_text(path: str, head: int = -1) -> str | None:
    witness.read(path)  # a receipt holds while the file stays as it was (or stays missing)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(head)
    except OSError:
        return None


def with_hooks(pkg: Package, name: str, manager: str) -> str:
    """The script, between its `pre`/`post` hooks as `npm run` (`bun run`, yarn 1, pnpm 9+) would run them."""
    script = pkg.scripts[name]
    pre, post = pkg.scripts.get(f"pre{name}"), pkg.scripts.get(f"post{name}")
    if manager not in HOOK_RUNNERS or not (pre or post):
        return script
    parts = [part for part in (pre, script, post) if part]
    if not any(_SHELL_LIST.search(part) for part in parts):
        return " && ".join(parts)
    # Each on its own lines in a subshell: `a || b` stays one step, and a trailing `# comment`
    # cannot swallow the `)`.
    return " && ".join(f"(\n{part}\n)" for part in parts)


_SHELL_LIST = re.compile(r"[;&|#\n]")


def _vx_task(turbo: TurboRoot, pkg: Package, name: str, body: dict, command: str) -> dict:
    """One definition in vx's schema."""
    env_deps = [d[1:] for d in body.get("dependsOn", ()) if d.startswith("$")]
    keyed = _unique([*turbo.global_env, *body.get("env", ()), *env_deps])
    passed = _unique([*keyed, *turbo.global_pass_through, *body.get("passThroughEnv", ())])
    task: dict[str, Any] = {"exec": {"command": command}}
    if passed:
        task["exec"]["env"] = {"passThrough": passed}
    long_running = bool(body.get("persistent") or body.get("interactive"))
    if body.get("persistent"):
        task["exec"]["persistent"] = {}
    if body.get("interactive"):
        task["exec"]["interactive"] = True
    deps = [d for d in body.get("dependsOn", ()) if not d.startswith("$")]
    if deps:
        task["dependsOn"] = deps
    if body.get("cache", True) and not long_running:
        declared = body.get("inputs") or [DEFAULT]
        files, workspace_files = _split(declared, pkg, name, turbo.source)
        files += list(body.get("dotEnv", ()))
        if DEFAULT in declared:  # git's view for the default; the rest as turbo's walk finds them
            task["turboReach"] = _split(
                [g for g in declared if g != DEFAULT], pkg, name, turbo.source
            )[0] + list(body.get("dotEnv", ()))
        outputs, workspace_outputs = _split(body.get("outputs", []), pkg, name, turbo.source)
        inputs: dict[str, Any] = {"files": files}
        # turbo's global hash folds the root package.json (a `browserslist` there shapes every
        # package's bundle) besides the globalDependencies; the root's own tasks key it already.
        shared = [*(("package.json",) if pkg.dir else ()), *turbo.global_inputs]
        if workspace_files or shared:
            inputs["workspaceFiles"] = _unique([*shared, *workspace_files])
        if keyed:
            inputs["env"] = keyed
        task["cache"] = {"inputs": inputs, "outputs": {"files": outputs}}
        if workspace_outputs:
            task["cache"]["outputs"]["workspaceFiles"] = workspace_outputs
    return task


def _split(globs, pkg: Package, name: str, source: str) -> tuple[list[str], list[str]]:
    """Package-relative globs and workspace-relative ones (`$TURBO_ROOT$/`, and those that climb
    out of the package with `../`, resolved from its directory), `$TURBO_DEFAULT$` as `**`."""
    package, workspace = [], []
    for pattern in globs:
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        if body == DEFAULT:
            package.append("**")
        elif body.startswith(ROOT_PREFIX):
            workspace.append(("!" if negated else "") + body[len(ROOT_PREFIX) :])
        elif body.startswith("../"):
            workspace.append(("!" if negated else "") + _climbed(body, pkg, name, source))
        else:
            package.append(pattern)
    return package, workspace


def _climbed(body: str, pkg: Package, name: str, source: str) -> str:
    """A `../` glob of `pkg` as a workspace-relative one; refused when it leaves the workspace."""
    steps = 0
    while body.startswith("../"):
        body, steps = body[3:], steps + 1
    parts = pkg.dir.split("/") if pkg.dir else []
    if steps > len(parts):
        raise ConfigError(
            f"input `{'../' * steps}{body}` of {pkg.name}#{name} leaves the workspace"
            f" (from {pkg.dir or 'the root'})",
            file=source,
            field=f"tasks.{'//#' if pkg.name == ROOT_PROJECT else ''}{name}.inputs",
            hint="vx keys only what the workspace holds; name workspace files with `$TURBO_ROOT$/`",
        )
    return "/".join([*parts[: len(parts) - steps], body])


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))
