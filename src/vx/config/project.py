"""The project schema: a vx.config.json's tags and tasks into a ProjectConfig.

A task's name, dependsOn, exec (command, env, timeout, retries) and cache (inputs, outputs, their
globs and task filters), with the micro-syntax of names and dependsOn entries; exec.sandbox is
validated in `vx.config.exec_sandbox`.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable

from vx.config.fields import (
    MAX_TIMEOUT_MS,
    At,
    Level,
    as_boolean,
    as_integer,
    as_object,
    as_string,
    as_strings,
    check_keys,
    kind_of,
    nx_home,
    turbo_home,
    wireit_home,
)
from vx.files.globs import GlobSet, glob_error
from vx.model import CacheConfig, EnvConfig, ExecConfig, PersistentConfig, ProjectConfig, TaskConfig

MAX_RETRIES = 100  # a failing task retried without end never ends the run
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PROTECTED_FILES = ("package.json", "vx.config.json", "vx.config.jsonc")


# ---------------------------------------------------------------- object levels


def _on_task(key: str) -> str:
    return f"`{key}` belongs on a task; in vx it is tasks.<name>.{key}"


PROJECT = Level(
    "the project config",
    frozenset({"tags", "tasks"}),
    foreign={
        "targets": nx_home("targets", "tasks (each with exec.command, dependsOn, cache)"),
        "pipeline": turbo_home("pipeline", "tasks"),
        "scripts": "scripts stay in package.json; a vx task runs one as exec.command",
        "name": "a project is named by its package.json `name`",
        "extends": "vx configs inherit nothing; repeat the tasks",
        "plugins": "plugins are declared for the whole workspace, in vx.workspace.json",
        "namedInputs": nx_home("namedInputs", "a list in tasks.<name>.cache.inputs.files"),
        "implicitDependencies": nx_home("implicitDependencies", "a dependsOn entry `pkg#task`"),
        "inputs": turbo_home("inputs", "tasks.<name>.cache.inputs.files"),
        "outputs": turbo_home("outputs", "tasks.<name>.cache.outputs.files"),
        "env": turbo_home("env", "tasks.<name>.cache.inputs.env or tasks.<name>.exec.env"),
        **{k: _on_task(k) for k in ("dependsOn", "cache", "exec", "description", "command")},
    },
)

TASK = Level(
    "a task",
    frozenset({"description", "exec", "dependsOn", "cache"}),
    foreign={
        "outputs": turbo_home("outputs", "cache.outputs.files"),
        "inputs": turbo_home("inputs", "cache.inputs.files"),
        "env": turbo_home("env", "cache.inputs.env (to key on it) or exec.env.define (to set it)"),
        "passThroughEnv": turbo_home("passThroughEnv", "exec.env.passThrough"),
        "outputLogs": turbo_home("outputLogs", "the --output-logs flag of `vx run`"),
        "executor": nx_home("executor", "exec.command (vx runs one shell command)"),
        "options": nx_home("options", "exec.command and exec.env"),
        "command": wireit_home("command", "exec.command"),
        "files": wireit_home("files", "cache.inputs.files"),
        "output": wireit_home("output", "cache.outputs.files"),
        "dependencies": wireit_home("dependencies", "dependsOn"),
        "script": "in vx a task's command is exec.command",
        "cmd": "in vx a task's command is exec.command",
        "cwd": "a task runs in its project directory; write `cd <dir> && …` in exec.command",
        "persistent": 'in vx it is exec.persistent: `"exec": { "command": …, "persistent": {} }`',
        "interactive": 'in vx it is exec.interactive: `"exec": { "command": …, "interactive": true }`',
        "continuous": nx_home("continuous", "exec.persistent"),
    },
)

EXEC = Level(
    "exec",
    frozenset(
        {
            "command",
            "env",
            "timeout",
            "retries",
            "sandbox",
            "persistent",
            "interactive",
            "remote",
            "platform",
        }
    ),
    foreign={
        "continuous": nx_home("continuous", "`persistent`"),
        "cmd": "in vx it is `command`",
        "script": "in vx it is `command`",
        "args": "write the arguments into `command`",
        "cwd": "a task runs in its project directory; write `cd <dir> && …` in `command`",
        "dependsOn": "`dependsOn` belongs on the task, beside `exec`",
        "cache": "`cache` belongs on the task, beside `exec`",
        "outputs": turbo_home("outputs", "the task's cache.outputs.files"),
        "inputs": turbo_home("inputs", "the task's cache.inputs.files"),
    },
)

PERSISTENT = Level(
    "exec.persistent",
    frozenset({"readyWhen"}),
    foreign={
        "ready": "in vx it is `readyWhen`",
        "readyPattern": "in vx it is `readyWhen`",
        "lineMatches": "in vx it is `readyWhen`",
    },
)

ENV = Level(
    "exec.env",
    frozenset({"passThrough", "define", "secret"}),
    foreign={"set": "in vx it is `define`", "vars": "in vx it is `define`"},
)

CACHE = Level("cache", frozenset({"inputs", "outputs"}))

INPUTS = Level(
    "cache.inputs",
    frozenset({"files", "workspaceFiles", "env", "tasks", "runtime", "workspaceRuntime"}),
)

OUTPUTS = Level("cache.outputs", frozenset({"files", "workspaceFiles"}))


# ---------------------------------------------------------------- names and micro-syntax


def task_name_problem(name: str) -> str | None:
    """Why `name` cannot name a task, or None: dependsOn and the CLI must reach it."""
    if not name.strip():
        return "is empty"
    if name.strip() != name:
        return "has surrounding whitespace"
    if "#" in name:
        return "contains `#`, which separates a package from its task"
    if "*" in name:
        return "contains `*`, which makes it a pattern"
    if name[0] in "^!":
        return f"starts with `{name[0]}`, which names dependencies' tasks or negates"
    return None


def depends_on_problem(entry: str) -> str | None:
    """Why `entry` is no dependsOn form, or None.

    Forms: `name`, `^name`, `pkg#name`, `//#name`, `name.*`, `^name.*`.
    """
    if entry in ("*", "^*") or entry.startswith("!"):
        return "belongs to cache.inputs.tasks, not dependsOn"
    body = entry[1:] if entry.startswith("^") else entry
    if "#" in body:
        if entry.startswith("^"):
            return "mixes `^` (every dependency) with `pkg#` (one package)"
        package, _, body = body.partition("#")
        if not package or package.strip() != package:
            return "names no package before `#`"
    return _task_half_problem(body)


def _task_half_problem(body: str) -> str | None:
    """The task half may be a name or `name.*`; `*` anywhere else is refused."""
    stem = body[:-2] if body.endswith(".*") else body
    why = task_name_problem(stem)
    return f"names a task that {why}" if why else None


def _filter_problem(entry: str) -> str | None:
    """Why `entry` is no cache.inputs.tasks form, or None."""
    body = entry[1:] if entry.startswith("!") else entry
    body = body[1:] if body.startswith("^") else body
    if not body or body.strip() != body or body.startswith(("!", "^")):
        return "is no task filter"
    package, hash_, task = body.rpartition("#")
    if hash_ and not package:
        return "names no package before `#`"
    return None if task else "names no task"


# ---------------------------------------------------------------- globs


def _globs(value: Any, at: At) -> tuple[str, ...]:
    """An array of valid globs that selects something when it is non-empty."""
    globs = as_strings(value, at, "glob strings")
    for i, pattern in enumerate(globs):
        problem = _glob_error(pattern)
        if problem:
            reason, _, hint = problem.partition("; ")
            at.item(i).refuse(f"glob `{pattern}`: {reason}", hint=hint or _GLOB_HINT)
    if globs and all(g.startswith("!") for g in globs):
        at.refuse(
            "every entry is a `!` negation, which selects nothing",
            hint=f"a `!` entry only takes back what a positive glob matched, e.g. "
            f'["**", {json.dumps(globs[0])}]',
        )
    return globs


@functools.lru_cache(maxsize=4096)
def _glob_error(pattern: str) -> str | None:
    """glob_error, memoised: a workspace repeats the same few globs in every project."""
    return glob_error(pattern)


_GLOB_HINT = "globs are project-relative: `*`, `**`, `?`, `{a,b}` and a leading `!` are understood"


def covers_top_file(pattern: str, name: str) -> bool:
    """Whether an output glob would take the project's own top-level file `name`.

    Outputs are wiped before a run and restored on a hit; a glob covering package.json or
    the config would delete the project's manifest (2.8).
    """
    return GlobSet([pattern]).matches(name)


# ---------------------------------------------------------------- project config


def validate_project(data: Any, file: str) -> ProjectConfig:
    """Turn a decoded vx.config.json into a ProjectConfig, or refuse with where and why."""
    at = At(file)
    obj = as_object(data, at, "an object with `tasks`")
    check_keys(obj, at, PROJECT)
    tags = _tags(obj["tags"], at.key("tags")) if "tags" in obj else ()
    tasks_at = at.key("tasks")
    tasks = as_object(obj.get("tasks", {}), tasks_at, "an object keyed by task name")
    return ProjectConfig(
        source=file,
        tasks={
            name: _task(name, body, tasks_at.key(name))
            for name, body in tasks.items()
            if name != "$schema"
        },
        tags=tags,
    )


def _tags(value: Any, at: At) -> tuple[str, ...]:
    """Labels for `--filter tag:`: plain words, never patterns."""
    tags = as_strings(value, at, "tags")
    for i, tag in enumerate(tags):
        if "*" in tag or tag.endswith("...") or re.search(r"\[.*\]", tag) or tag != tag.strip():
            at.item(i).refuse(
                f"tag `{tag}` looks like a filter pattern, not a label",
                hint="a tag is a plain word such as `frontend`",
            )
    return tags


_TASK_MEMO: dict[tuple[str, str], TaskConfig] = {}
_TASK_MEMO_LIMIT = 16384


def _task(name: str, value: Any, at: At) -> TaskConfig:
    """Validate one task, once per distinct (name, declaration) in the process.

    Monorepos repeat the same task shapes in every project, and a declaration's validity
    depends only on its name and body, so a validated TaskConfig is shared. Only successes
    are remembered: a refusal always names the file it was found in.
    """
    body = as_object(value, at)
    text = canonical(body)
    found = _TASK_MEMO.get((name, text))
    if found is None:
        found = _validate_task(name, body, text, at)
        if len(_TASK_MEMO) >= _TASK_MEMO_LIMIT:
            _TASK_MEMO.clear()
        _TASK_MEMO[(name, text)] = found
    return found


def _validate_task(name: str, body: dict[str, Any], text: str, at: At) -> TaskConfig:
    why = task_name_problem(name)
    if why:
        at.refuse(
            f"task name {json.dumps(name)} {why}",
            hint="dependsOn, cache.inputs.tasks and the CLI could not name it; rename it",
        )
    check_keys(body, at, TASK)
    exec_ = _exec(body["exec"], at.key("exec")) if "exec" in body else None
    depends_on = (
        _depends_on(body["dependsOn"], at.key("dependsOn")) if "dependsOn" in body else None
    )
    if exec_ is None and depends_on is None:
        at.refuse(
            f"task `{name}` has neither `exec` nor `dependsOn`",
            hint="give it exec.command to run, or dependsOn to make it a group",
        )
    description = (
        as_string(body["description"], at.key("description")) if "description" in body else None
    )
    if (
        "cache" in body
        and exec_ is not None
        and (exec_.persistent is not None or exec_.interactive)
    ):
        kind = "persistent" if exec_.persistent is not None else "interactive"
        at.key("cache").refuse(
            f"`cache` on {kind} task `{name}`: it is never saved to the cache",
            hint="drop `cache`; a task that reads the terminal or never ends runs every "
            "time (cache the build it depends on instead)",
        )
    if exec_ is not None and exec_.remote and "cache" not in body:
        at.key("exec").key("remote").refuse(
            f"`remote` on task `{name}`, which has no `cache`: only a cached task runs remotely "
            "(its outputs are what comes back)",
            hint='declare its outputs in `cache` (`"outputs": {"files": []}` for none), or drop `remote`',
        )
    cache = (
        _cache(body["cache"], at.key("cache"), exec_, depends_on or ()) if "cache" in body else None
    )
    if exec_ is not None and exec_.remote is True and cache and cache.output_workspace_files:
        at.key("exec").key("remote").refuse(
            f"`remote` on task `{name}`, which has `cache.outputs.workspaceFiles`: a worker "
            "returns only what is under the task's own directory",
            hint="move those outputs under the project, or drop `remote`",
        )
    return TaskConfig(
        name=name,
        canonical=text,
        exec=exec_,
        depends_on=depends_on or (),
        cache=cache,
        description=description,
    )


def canonical(task: dict[str, Any]) -> str:
    """The declaration as sorted compact JSON: what the key folds; `$schema` is not, nor where
    the task runs (`exec.remote`, `exec.platform`): a worker builds what this machine would."""
    exec_ = task.get("exec")
    if isinstance(exec_, dict) and ("remote" in exec_ or "platform" in exec_):
        task = {
            **task,
            "exec": {k: v for k, v in exec_.items() if k not in ("remote", "platform")},
        }
    text = json.dumps(task, sort_keys=True, separators=(",", ":"))
    return (
        json.dumps(_without_schema(task), sort_keys=True, separators=(",", ":"))
        if '"$schema"' in text
        else text
    )


def _without_schema(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_schema(v) for k, v in value.items() if k != "$schema"}
    return [_without_schema(v) for v in value] if isinstance(value, list) else value


def _depends_on(value: Any, at: At) -> tuple[str, ...]:
    if not isinstance(value, list):
        at.refuse(
            f"`{at.field}` must be an array of strings, got {kind_of(value)}",
            hint="entries are `name`, `^name`, `pkg#name` or `//#name`",
        )
    for i, entry in enumerate(value):
        why = "is not a string" if not isinstance(entry, str) else depends_on_problem(entry)
        if why:
            at.item(i).refuse(f"dependsOn entry {json.dumps(entry)} {why}", hint=_DEPENDS_HINT)
    return tuple(value)


_DEPENDS_HINT = (
    "entries are `name` (this project), `^name` (its dependencies), `pkg#name`, "
    "`//#name` (the root project), or `name.*`"
)


# ---------------------------------------------------------------- exec


def _exec(value: Any, at: At) -> ExecConfig:
    body = as_object(value, at, "an object with a `command` string")
    check_keys(body, at, EXEC)
    if "command" not in body:
        at.refuse("`exec` needs a `command`", hint='the shell command the task runs, e.g. "tsc -b"')
    persistent = (
        _persistent(body["persistent"], at.key("persistent")) if "persistent" in body else None
    )
    interactive = (
        _interactive(body["interactive"], at.key("interactive")) if "interactive" in body else False
    )
    if persistent is not None and "retries" in body:
        at.key("retries").refuse(
            "`retries` on a persistent task: it is never retried",
            hint="drop `retries`; a server that exits is reported, not started again",
        )
    if persistent is not None and "sandbox" in body:
        at.key("sandbox").refuse(
            "`sandbox` on a persistent task is not supported yet in this version",
            hint="drop `sandbox` from the server, or run it outside vx; its build can be sandboxed",
        )
    if interactive and "sandbox" in body:
        at.key("sandbox").refuse(
            "`sandbox` on an interactive task: it has the real terminal, which no sandbox "
            "can confine",
            hint="drop `sandbox` or `interactive`",
        )
    if interactive and persistent is not None and persistent.ready_when is not None:
        at.key("persistent").key("readyWhen").refuse(
            "`readyWhen` on an interactive task: its output goes to the terminal, unread by vx",
            hint="drop `readyWhen`; an interactive persistent task is ready once it starts",
        )
    return ExecConfig(
        command=_command(body["command"], at.key("command")),
        env=_env(body["env"], at.key("env")) if "env" in body else EnvConfig(),
        timeout_ms=as_integer(body["timeout"], at.key("timeout"), 1, MAX_TIMEOUT_MS)
        if "timeout" in body
        else None,
        retries=as_integer(body["retries"], at.key("retries"), 0, MAX_RETRIES)
        if "retries" in body
        else None,
        sandbox=_sandbox(body["sandbox"], at.key("sandbox")) if "sandbox" in body else None,
        persistent=persistent,
        interactive=interactive,
        remote=_remote(body, at) if "remote" in body else None,
        platform=platform_properties(body["platform"], at.key("platform"))
        if "platform" in body
        else (),
    )


def _remote(body: dict[str, Any], at: At) -> bool | str:
    """exec.remote: true, false or "only"; refused on a task that can never leave this machine."""
    value = body["remote"]
    if value not in (True, False, "only"):
        at.key("remote").refuse(
            f'`remote` must be true, false or "only", got {json.dumps(value)}',
            hint='true runs the task on a remote worker when one is configured; "only" never here',
        )
    if value is False:
        return False
    local = next((k for k in ("persistent", "interactive", "sandbox") if k in body), None)
    if local is not None:
        at.key("remote").refuse(
            f"`remote` on a task with `{local}`: that runs on this machine only",
            hint=f"drop `remote` or `{local}`",
        )
    env = body.get("env")
    if isinstance(env, dict) and (env.get("passThrough") or env.get("secret")):
        at.key("remote").refuse(
            "`remote` on a task that passes host variables through (`env.passThrough` or "
            "`env.secret`): those never leave this machine",
            hint="set what the task needs with `env.define`, or drop `remote`",
        )
    return value


def platform_properties(value: Any, at: At) -> tuple[tuple[str, str], ...]:
    """`platform`: REAPI platform properties, {name: value} strings, kept sorted by name."""
    body = as_object(value, at, 'an object of strings such as { "OSFamily": "linux" }')
    pairs = []
    for name, prop in body.items():
        if not name:
            at.refuse("a platform property has an empty name", hint='e.g. "OSFamily"')
        pairs.append((name, as_string(prop, at.key(name))))
    return tuple(sorted(pairs))


def _persistent(value: Any, at: At) -> PersistentConfig:
    """exec.persistent: `{}` or `{ "readyWhen": "<regex>" }`, the regex compiled here."""
    if isinstance(value, bool):
        at.refuse(
            f"`persistent: {json.dumps(value)}` is turbo's spelling",
            hint='in vx write `"persistent": {}`, or `{ "readyWhen": "listening on" }` to wait for a line',
        )
    body = as_object(value, at, 'an object such as { "readyWhen": "ready in" }')
    check_keys(body, at, PERSISTENT)
    if "readyWhen" not in body:
        return PersistentConfig()
    pattern = as_string(body["readyWhen"], at.key("readyWhen"))
    if not pattern:
        at.key("readyWhen").refuse(
            "`readyWhen` is empty",
            hint="a regular expression a line of output matches "
            'once the task is ready, such as "listening on"; or drop it',
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        at.key("readyWhen").refuse(
            f"`readyWhen` is not a valid regular expression: {exc}",
            hint="escape regex characters meant literally, e.g. `\\(ready\\)`",
        )
    return PersistentConfig(ready_when=pattern)


def _interactive(value: Any, at: At) -> bool:
    return as_boolean(value, at, hint="`true` gives the task the terminal when vx runs on one")


def _sandbox(value: Any, at: At):
    """exec.sandbox: validated in its own module, loaded only by configs that use it."""
    from vx.config.exec_sandbox import validate_sandbox

    return validate_sandbox(value, at)


def _command(value: Any, at: At) -> str:
    command = as_string(value, at)
    if not command.strip():
        at.refuse("`exec.command` is empty", hint="write the shell command the task runs")
    if "\0" in command:
        at.refuse(
            "`exec.command` holds a NUL, which no command line can carry",
            hint="remove the NUL character (\\u0000) from the command",
        )
    return command


def _env(value: Any, at: At) -> EnvConfig:
    body = as_object(value, at)
    check_keys(body, at, ENV)
    define = _define(body["define"], at.key("define")) if "define" in body else {}
    return EnvConfig(
        pass_through=_env_names(body["passThrough"], at.key("passThrough"))
        if "passThrough" in body
        else (),
        define=define,
        secret=_env_names(body["secret"], at.key("secret")) if "secret" in body else (),
    )


def _env_names(value: Any, at: At) -> tuple[str, ...]:
    names = as_strings(value, at, "env var names")
    for i, name in enumerate(names):
        if not _ENV_NAME.match(name):
            at.item(i).refuse(f"`{name}` is not an env var name", hint=_env_hint(name))
    return names


def _commands(value: Any, at: At) -> tuple[str, ...]:
    commands = as_strings(value, at, "shell commands")
    for i, command in enumerate(commands):
        if not command.strip():
            at.item(i).refuse(
                "a runtime input is an empty command", hint='e.g. "node -v" or "tsc -v"'
            )
        if "\0" in command:
            at.item(i).refuse(
                "a runtime input holds a NUL, which no command line can carry",
                hint="remove the NUL character (\\u0000) from the command",
            )
    return commands


def _env_hint(name: str) -> str:
    if name.startswith("!"):
        return f"`!` is turbo's exclusion from a wildcard; vx lists names, so leave {name[1:]} out"
    if "*" in name:
        return "wildcards in env names are not supported; list each name"
    return "names match [A-Za-z_][A-Za-z0-9_]*"


def _define(value: Any, at: At) -> dict[str, str]:
    body = as_object(value, at, "an object of NAME: value strings")
    body = {k: v for k, v in body.items() if k != "$schema"}
    for name, text in body.items():
        if not _ENV_NAME.match(name):
            at.key(name).refuse(f"`{name}` is not an env var name", hint=_env_hint(name))
        if not isinstance(text, str) or "\0" in text:
            at.key(name).refuse(
                f"`{at.key(name).field}` must be a string without NUL, got {kind_of(text)}",
                hint="write the value as a JSON string",
            )
    return dict(body)


# ---------------------------------------------------------------- cache


def _cache(
    value: Any, at: At, exec_: ExecConfig | None, depends_on: tuple[str, ...]
) -> CacheConfig:
    if isinstance(value, bool):
        at.refuse(f"`cache: {json.dumps(value)}` is turbo's spelling", hint=_CACHE_BOOL_HINT)
    if exec_ is None:
        at.refuse(
            "`cache` on a group task: a group runs nothing, so there is nothing to cache",
            hint="move `cache` to the task with `exec`, or drop it",
        )
    body = as_object(value, at, "an object with `inputs` and `outputs`")
    check_keys(body, at, CACHE)
    for part in ("inputs", "outputs"):
        if part not in body:
            at.refuse(
                f"`cache` needs both `inputs` and `outputs` (missing `{part}`)", hint=_CACHE_SHAPE
            )
    inputs = _part(body["inputs"], at.key("inputs"), INPUTS)
    outputs = _part(body["outputs"], at.key("outputs"), OUTPUTS)
    return _cache_config(inputs, outputs, at, depends_on)


_CACHE_SHAPE = 'cache: { "inputs": { "files": ["src/**"] }, "outputs": { "files": ["dist/**"] } }'
_CACHE_BOOL_HINT = (
    "in vx a task caches only when it declares " + _CACHE_SHAPE + "; without `cache` it always runs"
)


def _part(value: Any, at: At, level: Level) -> dict[str, Any]:
    """cache.inputs / cache.outputs: an object that must name `files` (`[]` is valid)."""
    if isinstance(value, list):
        at.refuse(
            f"`{at.field}` must be an object, got an array",
            hint=f'did you mean `{{ "files": {json.dumps(value)} }}`?',
        )
    body = as_object(value, at)
    check_keys(body, at, level)
    if "files" not in body:
        at.refuse(f"`{at.field}` needs `files`", hint=f"`[]` is valid; {_CACHE_SHAPE}")
    return body


def _cache_config(
    inputs: dict[str, Any], outputs: dict[str, Any], at: At, depends_on: tuple[str, ...]
) -> CacheConfig:
    in_at, out_at = at.key("inputs"), at.key("outputs")
    output_files = _globs(outputs["files"], out_at.key("files"))
    _refuse_own_files(output_files, out_at.key("files"))
    output_ws = _optional(outputs, "workspaceFiles", out_at, _globs)
    input_files = _globs(inputs["files"], in_at.key("files"))
    input_ws = _optional(inputs, "workspaceFiles", in_at, _globs)
    _refuse_foreign(output_files, input_files, out_at.key("files"))
    _refuse_foreign(output_ws, input_ws, out_at.key("workspaceFiles"), workspace=True)
    tasks = (
        _input_tasks(inputs["tasks"], in_at.key("tasks"), depends_on) if "tasks" in inputs else None
    )
    return CacheConfig(
        input_files=input_files,
        output_files=output_files,
        input_workspace_files=input_ws,
        output_workspace_files=output_ws,
        input_env=_optional(inputs, "env", in_at, _env_names),
        input_tasks=tasks,
        input_runtime=_optional(inputs, "runtime", in_at, _commands),
        input_ws_runtime=_optional(inputs, "workspaceRuntime", in_at, _commands),
    )


def _optional(
    body: dict[str, Any], key: str, at: At, check: Callable[[Any, At], tuple[str, ...]]
) -> tuple[str, ...]:
    return check(body[key], at.key(key)) if key in body else ()


def _refuse_own_files(globs: tuple[str, ...], at: At) -> None:
    """Outputs are wiped before a run: a glob covering the manifest or config would delete it.
    `package.json` named outright is a build that rewrites it (trpc's): the wipe never deletes
    it (`OutputSpec.wipe`), the entry saves it and a hit restores it, as turbo does."""
    for i, pattern in enumerate(globs):
        if pattern.startswith("!") or pattern == "package.json":
            continue
        for name in _PROTECTED_FILES:
            if covers_top_file(pattern, name):
                at.item(i).refuse(
                    f"output `{pattern}` covers the project's own {name}",
                    hint="outputs are deleted before the task runs; name the "
                    'directory it writes, such as "dist/**" (a build that rewrites '
                    'package.json names it outright: "package.json")',
                )


def _refuse_foreign(
    globs: tuple[str, ...], inputs: tuple[str, ...], at: At, *, workspace: bool = False
) -> None:
    """Outputs are what a restore may write: never `.git` or `.vx` (a planted hook would run on
    the next commit), never the workspace's manifests, never a whole input glob's tree."""
    covering = GlobSet(inputs).roots() if inputs else ()
    for i, pattern in enumerate(globs):
        if pattern.startswith("!"):
            continue
        one = GlobSet([pattern])
        for word in _NEVER_OUTPUT:
            if one.names(word):
                at.item(i).refuse(
                    f"output `{pattern}` enters `{word}`",
                    hint="outputs never include `.git` or `.vx`; name the directory the task writes",
                )
        if workspace:
            for name in _ROOT_FILES:
                if covers_top_file(pattern, name):
                    at.item(i).refuse(
                        f"output `{pattern}` covers the workspace's own {name}",
                        hint="outputs are deleted before the task runs and written by a restore; "
                        'name the directory the task writes, such as "dist/**"',
                    )
        for root in covering:
            if one.covers(root):
                at.item(i).refuse(
                    f"output `{pattern}` covers every input under `{root or '.'}`",
                    hint="outputs are deleted before the task runs and written by a restore, so "
                    "they never include the task's inputs; name the directory the task writes",
                )


_NEVER_OUTPUT = (".git", ".vx")
_ROOT_FILES = ("package.json", "vx.workspace.json", "pnpm-workspace.yaml")


def _input_tasks(value: Any, at: At, depends_on: tuple[str, ...]) -> tuple[str, ...]:
    """cache.inputs.tasks; an exact entry must be one dependsOn can reach."""
    entries = as_strings(value, at, "task filters")
    for i, entry in enumerate(entries):
        why = _filter_problem(entry)
        if why:
            at.item(i).refuse(f"`{entry}` {why}", hint=_FILTER_HINT)
        if not _named_by(entry, depends_on):
            at.item(i).refuse(
                f"`{entry}` names no task in dependsOn "
                f"({', '.join(depends_on) or 'none declared'})",
                hint="`name` is this project's task, `^name` its dependencies', "
                "`pkg#name` one package's; an entry no dependsOn reaches matches "
                "nothing. Fix it, or use [] to decouple on purpose",
            )
    return entries


_FILTER_HINT = "entries are `*`, `^*`, `name`, `^name`, `pkg#name`, patterns, and `!` exclusions"


def _split_form(spec: str) -> tuple[str, str, str]:
    """(form, package, task): form is self, deps or cross."""
    if spec.startswith("^"):
        return "deps", "", spec[1:]
    package, hash_, task = spec.partition("#")
    return ("cross", package, task) if hash_ else ("self", "", spec)


def _pattern_match(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return pattern == name
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name) is not None


def _named_by(entry: str, depends_on: tuple[str, ...]) -> bool:
    """Negations and patterns stay silent; an exact entry needs a dependsOn of a reaching form."""
    if entry.startswith("!"):
        return True
    form, package, task = _split_form(entry)
    if "*" in task or "*" in package:
        return True
    for dep_form, dep_package, dep_task in map(_split_form, depends_on):
        if not _pattern_match(dep_task, task):
            continue
        if form == dep_form == "cross":
            if _pattern_match(dep_package, package):
                return True
        elif form == dep_form or "cross" in (form, dep_form):
            return True
    return False
