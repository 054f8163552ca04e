"""An Nx workspace run as it is: nx.json, each project's project.json and package.json
(its scripts and `nx` block) become vx tasks, with nothing written.

Only projects without a vx.config of their own are mapped; a vx.config always wins. The mapping
follows Nx 21:

- projects are the package.json files the workspace globs name and every `project.json` under the
  root (node_modules, dot-directories and directories the root .gitignore names aside); a
  project.json's `name` wins, else package.json's, else the directory's name;
- a project's targets are its package.json scripts (`nx:run-script`), then package.json's
  `nx.targets`, then project.json's `targets`, each merged over the one before; nx.json's
  `targetDefaults` fill what a target leaves unset, looked up by executor first, then by name,
  then by the longest glob;
- `nx:run-commands` and `nx:run-script` run as shell commands (`nx:noop`, or no executor, is a
  group), a `continuous` one as a persistent task; any other executor runs as one process of
  `nxexec.cjs` through the workspace's own `nx` (config/nxexecutors.py), one that cannot be
  resolved and a `{ runtime }` input are refused by name when asked for, naming the file and field;
- a target caches only with `cache: true` (or an old `cacheableOperations` entry); its inputs
  default to `["default", "^default"]`, `default` to every file of the project;
- `dependsOn`, `implicitDependencies`, tags and `configurations` are mapped as their sections say.

Each field is checked here, with the file and Nx field path in every refusal, before the mapped
task goes through vx's own schema.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
import shlex
from typing import Any, Callable, Mapping

import xxhash
from msgspec import Struct, field

from vx.config.fields import At, Level, as_boolean, as_object, as_strings, kind_of
from vx.config.project import canonical, validate_project
from vx.config.turbo import with_hooks
from vx.errors import ConfigError, did_you_mean
from vx.files.globs import class_members
from vx.model import ROOT_PROJECT, NxResolved, Package, ProjectConfig, TaskConfig
from vx.workspace.nxprojects import read_json

NX_FILE = "nx.json"
_GLOB_CHARS = re.compile(r"[*?\[{]")

# nx.json keys vx maps; every other key shapes Nx's own cloud, daemon, generators or terminal.
_ROOT_MAPPED = ("targetDefaults", "namedInputs", "tasksRunnerOptions", "implicitDependencies")
TARGET = Level(
    "an Nx target",
    frozenset(
        {
            "executor",
            "command",
            "options",
            "configurations",
            "defaultConfiguration",
            "dependsOn",
            "inputs",
            "outputs",
            "cache",
            "continuous",
            "parallelism",
            "metadata",
            "syncGenerators",
        }
    ),
    foreign={
        "script": "a package.json script becomes a target of its name; in project.json write "
        '"executor": "nx:run-script", "options": {"script": …}',
        "exec": "in Nx a target's command is `command` (or options.command)",
    },
)
# The keys of a project's own definition, in project.json and in package.json's `nx` block alike.
_PROJECT_KEYS = frozenset(
    {
        "name",
        "root",
        "sourceRoot",
        "projectType",
        "targets",
        "tags",
        "implicitDependencies",
        "namedInputs",
        "metadata",
        "release",
    }
)
PROJECT = Level("project.json", _PROJECT_KEYS | {"generators", "$schema"})
PACKAGE_NX = Level("package.json `nx`", _PROJECT_KEYS | {"includedScripts"})
DEPENDS = Level("a dependsOn entry", frozenset({"target", "projects", "dependencies", "params"}))
# Options of nx:run-commands that are not passed on as `--name=value` arguments.
_RUN_COMMANDS_OPTIONS = frozenset(
    {
        "command",
        "commands",
        "color",
        "no-color",
        "parallel",
        "no-parallel",
        "readyWhen",
        "cwd",
        "args",
        "envFile",
        "__unparsed__",
        "env",
        "usePty",
        "streamOutput",
        "verbose",
        "forwardAllArgs",
        "tty",
    }
)


class NxRoot(Struct, frozen=True):
    """nx.json, checked, and the workspace's projects (for `^` inputs and dependsOn `projects`)."""

    source: str
    root: str  # absolute workspace root
    target_defaults: Mapping[str, dict]
    named_inputs: Mapping[str, list]
    cacheable: frozenset[str] | None  # tasksRunnerOptions.default.options.cacheableOperations
    packages: Mapping[str, Package] = field(default_factory=dict)
    memo: dict = field(default_factory=dict)  # project dir -> its read project (`_Project`)
    resolved: NxResolved | None = None  # where nx.json declares `plugins`: Nx's own answer


class _Project(Struct, frozen=True):
    """One project's own files, read: where each target and named input came from."""

    pkg: Package
    targets: Mapping[str, dict]  # merged: scripts < package.json nx.targets < project.json targets
    sources: Mapping[str, tuple[str, str]]  # target name -> the file and field that last defined it
    defaulted: Mapping[
        str, tuple[str, frozenset[str]]
    ]  # target name -> its targetDefaults key, the fields it gave
    named_inputs: Mapping[str, list]
    named_source: str
    tags: tuple[str, ...]
    source: str  # project.json when there is one, else package.json


# ---------------------------------------------------------------- reading


def find_root(
    root: str, packages: Mapping[str, Package], resolved: NxResolved | None = None
) -> NxRoot:
    at = At(NX_FILE)
    obj = as_object(read_json(os.path.join(root, NX_FILE), NX_FILE), at)
    for key in obj:
        near = did_you_mean(key, _ROOT_MAPPED)
        if key not in _ROOT_MAPPED and near and key != near and key.lower() == near.lower():
            at.key(key).refuse(f"unknown key `{key}` in nx.json", hint=f"did you mean `{near}`?")
    defaults = as_object(obj.get("targetDefaults", {}), at.key("targetDefaults"))
    for name, body in defaults.items():
        _check_target(body, at.key("targetDefaults").key(name))
    named = _named_inputs(obj.get("namedInputs", {}), at.key("namedInputs"))
    runner = obj.get("tasksRunnerOptions", {})
    ops = (
        (((runner or {}).get("default") or {}).get("options") or {}).get("cacheableOperations")
        if isinstance(runner, dict)
        else None
    )
    cacheable = (
        frozenset(as_strings(ops, at.key("tasksRunnerOptions.default.options.cacheableOperations")))
        if ops is not None
        else None
    )
    return NxRoot(NX_FILE, root, defaults, named, cacheable, packages, resolved=resolved)


def _named_inputs(value: Any, at: At) -> dict[str, list]:
    obj = as_object(value, at)
    for name, entries in obj.items():
        if not isinstance(entries, list):
            at.key(name).refuse(
                f"`{at.key(name).field}` must be an array of inputs, got {kind_of(entries)}",
                hint='e.g. "production": ["default", "!{projectRoot}/**/*.spec.ts"]',
            )
    return obj


def _check_target(body: Any, at: At) -> dict:
    obj = as_object(body, at, "an object (a target)")
    for key in obj:
        if key not in TARGET.allowed:
            near = did_you_mean(key, TARGET.allowed)
            at.key(key).refuse(
                f"unknown key `{key}` in an Nx target",
                hint=TARGET.foreign.get(key) or (f"did you mean `{near}`?" if near else None),
            )
    if "command" in obj and "executor" in obj:
        at.key("command").refuse(
            "a target with both `command` and `executor`",
            hint="`command` is short for the nx:run-commands executor; keep one",
        )
    for key in ("cache", "continuous", "parallelism"):
        if key in obj:
            as_boolean(obj[key], at.key(key))
    for key in ("options", "configurations"):
        if key in obj:
            as_object(obj[key], at.key(key))
    for name, options in obj.get("configurations", {}).items():
        as_object(options, at.key("configurations").key(name), "an object of options")
    if "outputs" in obj:
        as_strings(obj["outputs"], at.key("outputs"), "output paths")
    if "inputs" in obj and not isinstance(obj["inputs"], list):
        at.key("inputs").refuse(f"`inputs` must be an array, got {kind_of(obj['inputs'])}")
    if "dependsOn" in obj and not isinstance(obj["dependsOn"], list):
        at.key("dependsOn").refuse(
            f"`dependsOn` must be an array, got {kind_of(obj['dependsOn'])}", hint='e.g. ["^build"]'
        )
    return obj


# ---------------------------------------------------------------- one project's targets


class _Read(Struct):
    """A project's files as they are read in turn: the targets, each merged over the one before
    (and the file and field that last defined it), the tags, and the last file's named inputs."""

    targets: dict[str, dict] = field(default_factory=dict)
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    named: dict = field(default_factory=dict)
    named_source: str = NX_FILE


def _project(nx: NxRoot, pkg: Package) -> _Project:
    known = nx.memo.get(pkg.dir)
    if known is not None:
        return known
    if nx.resolved is not None and pkg.dir in nx.resolved.projects:
        nx.memo[pkg.dir] = _resolved_project(nx, pkg)
        return nx.memo[pkg.dir]
    directory = os.path.join(nx.root, pkg.dir) if pkg.dir else nx.root
    manifest_source = f"{pkg.dir}/package.json" if pkg.dir else "package.json"
    manifest = read_json(os.path.join(directory, "package.json"), manifest_source)
    manifest = manifest if isinstance(manifest, dict) else {}
    own_source = f"{pkg.dir}/project.json" if pkg.dir else "project.json"
    own = read_json(os.path.join(directory, "project.json"), own_source)
    read = _Read()
    if pkg.name != ROOT_PROJECT or own is not None or "nx" in manifest:
        _read_package_nx(read, pkg, manifest, manifest_source)
        if own is not None:
            at = At(own_source)
            own = as_object(own, at)
            _check_keys(own, at, PROJECT)
            _read_layer(read, own, at, own_source, "targets")
        if manifest and (pkg.name != ROOT_PROJECT or "nx" in manifest):
            # as Nx tags a package: first, by whether it is published, then by its keywords
            read.tags[:0] = _npm_tags(manifest)
    defaulted = _fill_defaults(nx, pkg, read.targets)
    found = _Project(
        pkg,
        read.targets,
        read.sources,
        defaulted,
        read.named,
        read.named_source,
        tuple(dict.fromkeys(read.tags)),
        own_source if own is not None else manifest_source,
    )
    nx.memo[pkg.dir] = found
    return found


def _npm_tags(manifest: dict) -> list[str]:
    """Nx's tags for a package.json project: `npm:private` or `npm:public`, `npm:<keyword>`."""
    keywords = manifest.get("keywords")
    words = [k for k in keywords if isinstance(k, str)] if isinstance(keywords, list) else []
    return ["npm:private" if manifest.get("private") else "npm:public"] + [
        f"npm:{k}" for k in words
    ]


def _resolved_project(nx: NxRoot, pkg: Package) -> _Project:
    """The project as Nx resolved it (vx.config.nxinference): its targets as they are, inferred
    and merged; each one's file and field from Nx's source map, naming the plugin that made it."""
    assert nx.resolved is not None
    project = nx.resolved.projects[pkg.dir]
    where = nx.resolved.sources.get(pkg.dir) or {}
    targets = json.loads(json.dumps(project.get("targets") or {}))
    sources: dict[str, tuple[str, str]] = {}
    defaulted: dict[str, tuple[str, frozenset[str]]] = {}
    for name, target in targets.items():
        sources[name] = _target_source(where, name, target, pkg)
        given = frozenset(
            k for k in target if (where.get(f"targets.{name}.{k}") or [None])[0] == NX_FILE
        )
        key = _target_default(nx, name, target.get("executor"))
        if given and key is not None:
            defaulted[name] = (key, given)
    made = (where.get("root") or [None])[0]
    source = made if made and made != NX_FILE else _rel(pkg.dir, "package.json")
    return _Project(
        pkg,
        targets,
        sources,
        defaulted,
        project.get("namedInputs") or {},
        (where.get("namedInputs") or [NX_FILE])[0] or NX_FILE,
        tuple(project.get("tags") or ()),
        source,
    )


def _target_source(where: Mapping[str, list], name: str, target: dict, pkg: Package) -> tuple:
    """The file and field a resolved target came from: a script, a target of project.json or of
    package.json's `nx`, or a plugin's config file (the field names the plugin)."""
    file, plugin = (where.get(f"targets.{name}") or [None, ""])[:2]
    if not file:
        return (_rel(pkg.dir, "project.json"), f"targets.{name}")
    if plugin == "nx/core/package-json":
        if target.get("executor") == "nx:run-script":
            return (file, f"scripts.{name}")
        return (file, f"nx.targets.{name}")
    if plugin == "nx/core/project-json" or file.endswith("project.json"):
        return (file, f"targets.{name}")
    return (file, f"targets.{name} (inferred by {plugin})")


def _rel(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _read_package_nx(read: _Read, pkg: Package, manifest: dict, source: str) -> None:
    """package.json's part: its scripts as `nx:run-script` targets, then its `nx` block."""
    at = At(source).key("nx")
    block = manifest.get("nx")
    block = as_object(block, at) if block is not None else {}
    _check_keys(block, at, PACKAGE_NX)
    included = block.get("includedScripts")
    scripts = pkg.scripts if pkg.name != ROOT_PROJECT or "nx" in manifest else {}
    for script in scripts:
        if included is None or script in included:
            read.targets[script] = {"executor": "nx:run-script", "options": {"script": script}}
            read.sources[script] = (source, f"scripts.{script}")
    _read_layer(read, block, at, source, "nx.targets")


def _read_layer(read: _Read, layer: dict, at: At, source: str, prefix: str) -> None:
    """One file's targets merged over the ones before, its tags added, its named inputs taken."""
    targets = layer.get("targets", {})
    _merge_targets(read.targets, read.sources, targets, at.key("targets"), source, prefix)
    read.tags += as_strings(layer.get("tags", []), at.key("tags"), "tags")
    if layer.get("namedInputs"):
        read.named = _named_inputs(layer["namedInputs"], at.key("namedInputs"))
        read.named_source = source


def _check_keys(obj: dict, at: At, level: Level) -> None:
    for key in obj:
        if key not in level.allowed:
            near = did_you_mean(key, level.allowed)
            at.key(key).refuse(
                f"unknown key `{key}` in {level.name}",
                hint=f"did you mean `{near}`?" if near else None,
            )


def _fill_defaults(
    nx: NxRoot, pkg: Package, targets: dict[str, dict]
) -> dict[str, tuple[str, frozenset[str]]]:
    """nx.json's targetDefaults filled into `targets`, in place; for each target they filled, the
    targetDefaults key and the fields it gave."""
    defaulted = {}
    for name in list(targets):
        default = _target_default(nx, name, targets[name].get("executor"))
        if default is not None:
            before = targets[name]
            targets[name] = _with_defaults(before, nx.target_defaults[default], pkg)
            defaulted[name] = (default, frozenset(k for k in targets[name] if k not in before))
        if not targets[name].get("executor"):
            # as Nx names a target that runs nothing
            targets[name] = {**targets[name], "executor": "nx:noop"}
    return defaulted


def _sugar(target: dict) -> dict:
    """`command` is short for nx:run-commands with options.command."""
    if "command" not in target:
        return target
    out = {k: v for k, v in target.items() if k != "command"}
    out["executor"] = "nx:run-commands"
    out["options"] = {**target.get("options", {}), "command": target["command"]}
    return out


def _merge_targets(
    targets: dict, sources: dict, value: Any, at: At, source: str, prefix: str
) -> None:
    for name, body in as_object(value, at).items():
        target = _sugar(_check_target(body, at.key(name)))
        base = targets.get(name)
        targets[name] = _merged(target, base) if base else target
        sources[name] = (source, f"{prefix}.{name}")


def _compatible(a: dict, b: dict) -> bool:
    """Nx's isCompatibleTarget: options merge only between targets of one executor (and command)."""
    if not a.get("executor") or not b.get("executor"):
        return True
    if a["executor"] != b["executor"]:
        return False
    for key in ("command", "script"):
        x, y = (a.get("options") or {}).get(key), (b.get("options") or {}).get(key)
        if x and y and x != y:
            return False
    return True


def _merged(target: dict, base: dict) -> dict:
    """`target` over `base` (Nx's mergeTargetConfigurations)."""
    same = _compatible(base, target)
    out = {
        **(
            {k: v for k, v in base.items() if k not in ("options", "configurations")}
            if same
            else {}
        ),
        **target,
    }
    if "options" in target or (same and "options" in base):
        out["options"] = {**(base.get("options", {}) if same else {}), **target.get("options", {})}
    if "configurations" in target or (same and "configurations" in base):
        merged = dict(base.get("configurations", {})) if same else {}
        for name, opts in target.get("configurations", {}).items():
            merged[name] = {**merged.get(name, {}), **opts}
        out["configurations"] = merged
    return out


def _target_default(nx: NxRoot, name: str, executor: str | None) -> str | None:
    """Nx's readTargetDefaultsForTarget, the key: by executor, then by name, then the longest matching glob."""
    defaults = nx.target_defaults
    if executor and executor in defaults:
        return executor
    if name in defaults:
        return name
    globs = [k for k in defaults if _GLOB_CHARS.search(k) and fnmatch.fnmatchcase(name, k)]
    return max(globs, key=len) if globs else None


def _with_defaults(target: dict, defaults: dict, pkg: Package) -> dict:
    """A target default fills what the target leaves unset (options and configurations key by key)."""
    defaults = _sugar(defaults)
    out = dict(target)  # Nx's mergeTargetDefaultWithTargetDefinition: fills, whatever the executors
    for key, value in defaults.items():
        if key == "options":
            out["options"] = {**_tokens(value, pkg), **target.get("options", {})}
        elif key == "configurations":
            configs = {n: dict(c) for n, c in target.get("configurations", {}).items()}
            for name, opts in value.items():
                configs[name] = {**_tokens(opts, pkg), **configs.get(name, {})}
            out["configurations"] = configs
        elif key not in target:
            out[key] = value
    return out


def _tokens(value: Any, pkg: Package) -> Any:
    """`{projectRoot}`, `{projectName}` and `{workspaceRoot}` in option values, as Nx resolves them."""
    if isinstance(value, str):
        return (
            value.replace("{projectRoot}", pkg.dir or ".")
            .replace("{projectName}", _nx_name(pkg))
            .replace("{workspaceRoot}/", "")
            .replace("{workspaceRoot}", ".")
        )
    if isinstance(value, list):
        return [_tokens(v, pkg) for v in value]
    if isinstance(value, dict):
        return {k: _tokens(v, pkg) for k, v in value.items()}
    return value


def _nx_name(pkg: Package) -> str:
    return pkg.name


# ---------------------------------------------------------------- the vx tasks


class _Refused(Exception):
    """A target vx cannot run: refused by name, naming the file and field, when asked for."""

    def __init__(self, message: str, file: str, field: str, hint: str):
        super().__init__(message)
        self.why = (message, file, field, hint)

    @classmethod
    def at(cls, where: At, message: str, hint: str) -> _Refused:
        return cls(message, where.file, where.field, hint)


def project(nx: NxRoot, pkg: Package, manager: str) -> ProjectConfig:
    """`pkg`'s targets as Nx would run them, as vx tasks; an empty config when it has none."""
    proj = _project(nx, pkg)
    tasks, refused = _tasks(nx, proj, manager)
    _refuse_dependants(tasks, refused)
    if proj.targets or pkg.name != ROOT_PROJECT:
        for input_name in _caret_names(nx):
            try:
                tasks[GROUP + input_name] = _input_group(nx, proj, input_name)
            except _Refused as exc:  # a dependant's `^name` reaches it: refused there, naming this
                refused[GROUP + input_name] = exc.why
    _keep_reaching(nx, tasks)
    if not tasks and not refused and not proj.tags:
        return ProjectConfig(source="", nx=True)
    envs = {name: body.pop("nxEnv", []) for name, body in tasks.items()}
    scripts = {name: body.get("exec", {}).pop("nxScript", "") for name, body in tasks.items()}
    executors = {name: body.get("exec", {}).pop("nxExecutor", None) for name, body in tasks.items()}
    origins = _origins(nx, proj, tasks)
    try:
        config = validate_project({"tasks": tasks, "tags": list(proj.tags)}, proj.source)
    except ConfigError as exc:  # name the target's field, not the vx field it maps to
        file, where = ProjectConfig(source=exc.file, origins=origins).located(exc.field)
        raise ConfigError(exc.message, file=file, field=where, hint=exc.hint) from None
    return ProjectConfig(
        source=config.source,
        tasks=_mapped(
            config, tasks, envs, scripts, root_tsconfig(nx), executors, parsed_nx_json(nx)
        ),
        tags=config.tags,
        not_runnable=refused,
        origins=origins,
        nx=True,
    )


def parsed_nx_json(nx: NxRoot) -> str:
    """nx.json as Nx folds it into every task's hash, but parsed: a digest of its canonical JSON.
    Any edit to what it says is a miss for every cached task, as in Nx (a task's command or
    executor may read it: an executor is handed it whole), while whitespace or a comment, which
    no reader of nx.json can see, is not."""
    key = ("root", "nx.json")
    if key not in nx.memo:
        parsed = read_json(os.path.join(nx.root, NX_FILE), NX_FILE)
        text = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
        nx.memo[key] = xxhash.xxh3_128_hexdigest(text.encode())
    return nx.memo[key]


def root_tsconfig(nx: NxRoot) -> dict | None:
    """The root tsconfig as Nx folds it into every task's hash (its TsConfig entry): the first of
    tsconfig.base.json and tsconfig.json, parsed, without `compilerOptions.paths` — so an edit to
    `target` or `strict` there is a miss for every cached task, as in Nx, while a new path alias
    or a reformat is not. `{"file": …, "json": …}`, None without one."""
    key = ("root", "tsconfig")
    if key not in nx.memo:
        nx.memo[key] = None
        for name in ("tsconfig.base.json", "tsconfig.json"):
            obj = read_json(os.path.join(nx.root, name), name)
            if obj is None:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("compilerOptions"), dict):
                options = {k: v for k, v in obj["compilerOptions"].items() if k != "paths"}
                obj = {**obj, "compilerOptions": options}
            nx.memo[key] = {"file": name, "json": obj}
            break
    return nx.memo[key]


def _tasks(nx: NxRoot, proj: _Project, manager: str) -> tuple[dict[str, dict], dict[str, tuple]]:
    """Each target as a task, and each of its configurations as `name:configuration`; the ones
    vx cannot run apart, refused by name."""
    tasks: dict[str, dict] = {}
    refused: dict[str, tuple] = {}
    for name, target in proj.targets.items():
        options = target.get("options", {})
        configurations = target.get("configurations", {})
        default = target.get("defaultConfiguration")
        variants = [
            (name, {**options, **configurations.get(default, {})} if default else options, default)
        ]
        variants += [(f"{name}:{c}", {**options, **over}, c) for c, over in configurations.items()]
        for task_name, opts, configuration in variants:
            try:
                tasks[task_name] = _task(nx, proj, name, target, opts, configuration, manager)
            except _Refused as exc:
                refused[task_name] = exc.why
    return tasks, refused


def _refuse_dependants(tasks: dict[str, dict], refused: dict[str, tuple]) -> None:
    """A same-project dependency vx cannot run makes its dependant refused too: running it
    without would run it before what it needs."""
    changed = True
    while changed:
        changed = False
        for name in list(tasks):
            for dep in tasks[name].get("dependsOn", ()):
                if dep in refused and name not in refused:
                    message, file, fld, hint = refused[dep]
                    refused[name] = (f"`{name}` depends on `{dep}`: {message}", file, fld, hint)
                    del tasks[name]
                    changed = True
                    break


def _keep_reaching(nx: NxRoot, tasks: dict[str, dict]) -> None:
    """Each task's dependsOn without the entries that reach no task: Nx passes over them, vx's
    own entries must reach one."""
    for body in tasks.values():
        deps = [
            d
            for d in body.get("dependsOn", ())
            if "#" in d
            or d in tasks
            or d.startswith("^" + GROUP)
            or d.startswith("^")
            and _anywhere(nx, d[1:])
        ]
        if deps or "exec" not in body:  # a noop keeps its empty group: it runs nothing
            body["dependsOn"] = deps
        else:
            body.pop("dependsOn", None)


def _mapped(
    config: ProjectConfig,
    tasks: Mapping[str, dict],
    envs: Mapping[str, list],
    scripts: Mapping[str, str],
    tsconfig: dict | None = None,
    executors: Mapping[str, dict | None] | None = None,
    nx_json: str | None = None,
) -> dict[str, TaskConfig]:
    """The validated tasks with what vx's schema has no field for: a target's env inputs, the
    package.json script an `nx:run-script` target runs (Nx runs it through the package manager),
    an input group's running nothing, and in each cached task's key the root tsconfig as Nx
    hashes it (`root_tsconfig`) and nx.json as parsed (`parsed_nx_json`)."""
    from msgspec.structs import replace

    mapped = {}
    for name, task in config.tasks.items():
        if scripts[name] and task.exec is not None:
            task = replace(task, exec=replace(task.exec, script=scripts[name]))
        if envs[name] and task.cache is not None:
            task = replace(task, cache=replace(task.cache, input_env=tuple(envs[name])))
        identity = (executors or {}).get(name)
        if identity and task.cache is None:  # `vx migrate` reads which executor it runs
            folded = {**tasks[name], "exec": {**tasks[name]["exec"], "command": identity}}
            task = replace(task, canonical=canonical(folded))
        if task.cache is not None and not name.startswith(GROUP):
            folded = {**tasks[name], "nxEnv": envs[name]} if envs[name] else tasks[name]
            if tsconfig:  # Nx hashes it into every task: the key folds it too
                folded = {**folded, "nxTsConfig": tsconfig}
            if nx_json:  # and nx.json
                folded = {**folded, "nxJson": nx_json}
            if identity:  # the executor and its version, not the runner's path or its context file
                folded = {**folded, "exec": {**folded["exec"], "command": identity}}
            if folded is not tasks[name]:
                task = replace(task, canonical=canonical(folded))
        if task.cache is not None and not name.startswith(GROUP):
            task = replace(task, cache=replace(task.cache, shared_outputs=True))
        if name.startswith(GROUP):  # runs nothing; keyed on the project's files of the named input
            task = replace(
                task, exec=None, implicit=True, canonical='{"implicit":true,' + task.canonical[1:]
            )
        mapped[name] = task
    return mapped


# A mapped task's vx fields and the target field each comes from ("": the target itself).
_TARGET_FIELDS = (
    ("", ""),
    ("dependsOn", "dependsOn"),
    ("cache", "cache"),
    ("cache.inputs", "inputs"),
    ("cache.outputs", "outputs"),
    ("exec", ""),
)


def _origins(nx: NxRoot, proj: _Project, tasks: Mapping[str, dict]) -> dict[str, tuple[str, str]]:
    """Where each task's fields were written: its target in project.json (or package.json), or
    the nx.json target default that gave the field; an input group's named input."""
    out: dict[str, tuple[str, str]] = {}
    for name in tasks:
        if name.startswith(GROUP):
            named = name[len(GROUP) :]
            own = named in proj.named_inputs
            out[f"tasks.{name}"] = (
                proj.named_source if own else NX_FILE,
                f"namedInputs.{named}",
            )
            continue
        target = name if name in proj.targets else name.rpartition(":")[0]
        if target not in proj.sources:
            continue
        source, path = proj.sources[target]
        default_key, given = proj.defaulted.get(target, ("", frozenset()))
        for vx_field, nx_field in _TARGET_FIELDS:
            key = f"tasks.{name}.{vx_field}" if vx_field else f"tasks.{name}"
            if nx_field in given:
                out[key] = (NX_FILE, f"targetDefaults.{default_key}.{nx_field}")
            elif nx_field and not path.startswith("scripts."):
                out[key] = (source, f"{path}.{nx_field}")
            else:  # a script, or the target as a whole
                out[key] = (source, path)
    return out


GROUP = "nx-inputs."  # `nx-inputs.production`: a project's `production` files, for its dependants' `^production`


def _input_group(nx: NxRoot, proj: _Project, name: str) -> dict:
    """The group a dependant's `^name` reaches: keyed on this project's `name` files and, through
    its own `^`, on every dependency's, as Nx hashes `^name` over all transitive dependencies."""
    files, workspace, env, _groups = _inputs(
        nx, proj, {"inputs": [name]}, At(NX_FILE).key("namedInputs").key(name)
    )
    inputs: dict[str, Any] = {"files": files}
    if workspace:
        inputs["workspaceFiles"] = workspace
    group: dict[str, Any] = {
        "exec": {"command": "true"},
        "dependsOn": [f"^{GROUP}{name}"],
        "cache": {"inputs": inputs, "outputs": {"files": []}},
    }
    if env:
        group["nxEnv"] = env
    return group


def _caret_names(nx: NxRoot) -> list[str]:
    """The named inputs some cached target of the workspace takes from its dependencies (`^name`)."""
    if "caret" in nx.memo:
        return nx.memo["caret"]
    found: set[str] = set()
    seen: set[str] = set()

    def walk(proj: _Project, entries: list) -> None:
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, str) and entry.startswith("^"):
                found.add(entry[1:])
            elif (
                isinstance(entry, dict)
                and entry.get("dependencies")
                and isinstance(entry.get("input"), str)
            ):
                found.add(entry["input"])
            elif (
                isinstance(entry, str) and entry not in seen and not ("{" in entry or "/" in entry)
            ):
                seen.add(entry)
                walk(proj, _named(nx, proj, entry) or [])

    for pkg in nx.packages.values():
        proj = _project(nx, pkg)
        seen.clear()
        for name, target in proj.targets.items():
            cached = target.get("cache")
            if cached or cached is None and nx.cacheable is not None and name in nx.cacheable:
                walk(proj, target.get("inputs", ["default", "^default"]))
    nx.memo["caret"] = sorted(found)
    return nx.memo["caret"]


def _anywhere(nx: NxRoot, name: str) -> bool:
    """Whether some project has the target: Nx lets `^name` reach none, vx's `^` must reach a declared task."""
    key = ("anywhere", name)
    if key not in nx.memo:
        base, _, configuration = name.partition(":")
        nx.memo[key] = any(
            base in (t := _project(nx, pkg).targets)
            and (not configuration or configuration in t[base].get("configurations", {}))
            for pkg in nx.packages.values()
        )
    return nx.memo[key]


def _task(
    nx: NxRoot,
    proj: _Project,
    name: str,
    target: dict,
    options: dict,
    configuration: str | None,
    manager: str,
) -> dict:
    at_of = _located(proj, name)
    task: dict[str, Any] = {}
    command = _exec(nx, proj, name, target, options, manager, at_of, configuration)
    if command is not None:
        task["exec"] = command
    deps = _depends_on(nx, proj, target.get("dependsOn", []), at_of("dependsOn"), configuration)
    if deps:
        task["dependsOn"] = deps
    if "exec" not in task:
        if not deps:
            task["dependsOn"] = []  # an empty group: runs nothing, as Nx's noop
        return task
    cached = target.get("cache")
    if cached is None and nx.cacheable is not None:
        cached = name in nx.cacheable
    if cached and not target.get("continuous"):  # a server's output is never kept
        _cache(nx, proj, name, target, options, task, at_of)
    task["exec"].pop("nxEnvFile", None)
    return task


def _located(proj: _Project, name: str) -> Callable[[str], At]:
    """Where target `name`'s field `key` was written: its own file, or the nx.json target default
    it came from."""
    source, field_path = proj.sources[name]
    own_at = At(source).key(field_path)
    default_key, given = proj.defaulted.get(name, ("", frozenset()))

    def at_of(key: str) -> At:
        if key in given:
            return At(NX_FILE).key("targetDefaults").key(default_key).key(key)
        return own_at.key(key)

    return at_of


def _exec(
    nx: NxRoot,
    proj: _Project,
    name: str,
    target: dict,
    options: dict,
    manager: str,
    at_of: Callable[[str], At],
    configuration: str | None = None,
) -> dict | None:
    """What the target runs, as a vx `exec`; None when it runs nothing (a group). A target vx
    cannot run is refused."""
    executor = target.get("executor")
    continuous = bool(target.get("continuous"))
    if executor == "nx:run-commands":
        ready = options.get("readyWhen")
        if ready and not continuous:
            raise _Refused.at(
                at_of("options").key("readyWhen"),
                f"`{name}` waits for `readyWhen`: it starts something that keeps running",
                "mark the target `continuous: true`, as Nx does for a server",
            )
        command = _run_commands(proj, options, at_of("options"))
        return _continuous(command, ready, at_of) if continuous else command
    if executor == "nx:run-script":
        script = options.get("script", name)
        if script not in proj.pkg.scripts:
            raise _Refused.at(
                at_of("options").key("script"),
                f"`{name}` runs the package.json script `{script}`, which the package lacks",
                "add the script, or fix the name",
            )
        command = {"command": with_hooks(proj.pkg, script, manager), "nxScript": script}
        return _continuous(command, None, at_of) if continuous else command
    if executor not in (None, "nx:noop"):
        return _executor(nx, proj, name, str(executor), options, at_of, configuration)
    return None


def _executor(
    nx: NxRoot,
    proj: _Project,
    name: str,
    executor: str,
    options: dict,
    at_of: Callable[[str], At],
    configuration: str | None,
) -> dict:
    """Any other executor: one process of vx's runner, which calls it through the workspace's
    own `nx` (config/nxexecutors.py); one that cannot be resolved is refused by name."""
    from vx.config import nxexecutors

    try:
        identity = nxexecutors.resolve(nx.root, executor, nx.packages)
    except nxexecutors.Unresolved as exc:
        raise _Refused.at(
            at_of("executor"),
            f"`{_nx_project_name(nx, proj.pkg)}:{name}` runs the executor `{executor}`, which "
            f"cannot be resolved: {exc}",
            exc.hint,
        ) from None
    if "exec-context" not in nx.memo:
        nx.memo["exec-context"] = nxexecutors.write_context(
            nx.root, nx.packages, lambda pkg: _nx_shaped(nx, pkg)
        )
    text = nxexecutors.command(
        proj.pkg.dir, _nx_project_name(nx, proj.pkg), name, configuration, nx.memo["exec-context"]
    )
    run = ":".join(
        [_nx_project_name(nx, proj.pkg), name, *([configuration] if configuration else [])]
    )
    identity.update(run=run, options=options, configuration=configuration)
    command = {"command": text, "nxExecutor": identity}
    if proj.targets[name].get("continuous") or identity.pop("continuous"):
        return _continuous(command, None, at_of)
    return command


def _nx_project_name(nx: NxRoot, pkg: Package) -> str:
    """The project's name to Nx: vx's, but for the root project, its own (project.json's, then
    package.json's)."""
    if pkg.name != ROOT_PROJECT:
        return pkg.name
    from vx.workspace.nxprojects import own_nx

    own, _source, _field = own_nx(nx.root, pkg)
    return str(own.get("name") or pkg.manifest.get("name") or posixpath.basename(nx.root))


def _nx_shaped(nx: NxRoot, pkg: Package) -> tuple[str, dict] | None:
    """The project as Nx's project configuration: Nx's own answer where it resolved the
    workspace, else the root, name, tags, implicit dependencies, source root, type and targets
    vx read; None for a root package.json that is no project to Nx (no project.json, no `nx`)."""
    name = _nx_project_name(nx, pkg)
    if nx.resolved is not None:
        if pkg.dir not in nx.resolved.projects:
            return None
        return name, {**nx.resolved.projects[pkg.dir], "name": name}
    from vx.workspace.nxprojects import own_nx

    own, source, _field = own_nx(nx.root, pkg)
    if pkg.name == ROOT_PROJECT and not own and not source.endswith("project.json"):
        return None
    proj = _project(nx, pkg)
    body: dict[str, Any] = {"root": pkg.dir or ".", "name": name, "tags": list(proj.tags)}
    for key in ("sourceRoot", "projectType", "implicitDependencies", "metadata"):
        if key in own:
            body[key] = own[key]
    body["targets"] = {t: dict(b) for t, b in proj.targets.items()}
    return name, body


def _continuous(command: dict, ready: Any, at_of: Callable[[str], At]) -> dict:
    """A `continuous: true` target as a persistent task (a server or a watcher). Nx starts its
    dependants once it has started; vx waits, as well, for a line holding `readyWhen` when it is
    one string. A list of them may print on separate lines, which a line pattern cannot wait for:
    ready once started, as in Nx."""
    texts = [ready] if isinstance(ready, str) else ready or []
    if not isinstance(texts, list) or not all(isinstance(t, str) and t for t in texts):
        at_of("options").key("readyWhen").refuse(
            f"`readyWhen` must be a string or a list of strings, got {kind_of(ready)}"
        )
    persistent: dict[str, Any] = {}
    if len(texts) == 1:
        persistent["readyWhen"] = re.escape(texts[0])
    return {**command, "persistent": persistent}


def _cache(
    nx: NxRoot,
    proj: _Project,
    name: str,
    target: dict,
    options: dict,
    task: dict[str, Any],
    at_of: Callable[[str], At],
) -> None:
    """A cached target's inputs and outputs, into `task`; its dependsOn takes the input groups its
    `^name` inputs reach."""
    files, workspace_files, env, groups = _inputs(nx, proj, target, at_of("inputs"))
    task["dependsOn"] = list(dict.fromkeys([*task.get("dependsOn", []), *groups]))
    outputs, workspace_outputs = _outputs(proj, name, target, options, at_of("outputs"))
    inputs: dict[str, Any] = {"files": files}
    if workspace_files:
        inputs["workspaceFiles"] = workspace_files
    env_file = task["exec"].pop("nxEnvFile", None)
    if env_file:
        inputs["workspaceFiles"] = [*inputs.get("workspaceFiles", []), env_file]
    plugin = (task["exec"].get("nxExecutor") or {}).get("local")
    if plugin:  # a local plugin's executor: its files key the task, as a package's version would
        inputs["workspaceFiles"] = [*inputs.get("workspaceFiles", []), f"{plugin}/**"]
    task["cache"] = {"inputs": inputs, "outputs": {"files": outputs}}
    if workspace_outputs:
        task["cache"]["outputs"]["workspaceFiles"] = workspace_outputs
    if env:
        task["nxEnv"] = env


# ---------------------------------------------------------------- nx:run-commands


def _run_commands(proj: _Project, options: dict, at: At) -> dict:
    """options.command / options.commands as one shell command, run in `cwd` (default: the workspace root)."""
    entries = _command_entries(options, at)
    pkg = proj.pkg
    args, parsed, unknown = _command_args(options, at)
    where = _command_dir(options, pkg, at)
    commands = []
    for entry in entries:
        # {workspaceRoot} is the root's absolute path to Nx; here the same place, from the command's cwd.
        text = _tokens(
            entry["command"].replace("{workspaceRoot}", posixpath.relpath(".", where)), pkg
        )
        forward = entry.get("forwardAllArgs", options.get("forwardAllArgs", True))
        if "{args." in text:
            text = re.sub(r"{args\.([^}]+)}", lambda m: parsed.get(m.group(1), ""), text)
        elif "{args}" in text:
            text = text.replace("{args}", " ".join([*unknown, args]).strip())
        elif forward:
            text = " ".join([text, *unknown, *([args] if args else [])])
        commands.append(text)
    hop = posixpath.relpath(where, pkg.dir or ".")
    body = _joined(commands, options.get("parallel", True))
    # a line of its own: `&` would take it along
    prefix = "" if hop == "." else f"cd {shlex.quote(hop)} || exit 1\n"
    out: dict[str, Any] = {}
    loaded = _env_file(options, pkg, where, at)
    if loaded is not None:
        prefix += loaded[0]
        out["nxEnvFile"] = loaded[1]
    out["command"] = prefix + body
    env = _command_env(options, at)
    if env is not None:
        out["env"] = env
    return out


def _command_entries(options: dict, at: At) -> list[dict]:
    """options.command, or each of options.commands, as `{"command": …}`."""
    if "command" in options and "commands" in options:
        at.key("commands").refuse("both `command` and `commands`", hint="keep one")
    if "command" in options:
        if not isinstance(options["command"], str):
            at.key("command").refuse(
                f"`command` must be a string, got {kind_of(options['command'])}"
            )
        return [{"command": options["command"]}]
    if "commands" not in options:
        at.refuse(
            "an nx:run-commands target needs `command` or `commands`",
            hint='e.g. "command": "tsc -b"',
        )
    if not isinstance(options["commands"], list) or not options["commands"]:
        at.key("commands").refuse(
            "`commands` must be a non-empty array", hint='e.g. ["tsc -b", "vite build"]'
        )
    entries = []
    for i, c in enumerate(options["commands"]):
        if isinstance(c, str):
            entries.append({"command": c})
        elif isinstance(c, dict) and isinstance(c.get("command"), str):
            entries.append(c)
        else:
            at.key("commands").item(i).refuse(
                'each entry must be a command string or {"command": …}'
            )
    return entries


def _command_args(options: dict, at: At) -> tuple[str, dict[str, str], list[str]]:
    """options.args as one string, its `--name` values, and the target's other options as the
    `--name=value` arguments Nx passes on."""
    args = options.get("args", "")
    if isinstance(args, list):
        args = " ".join(map(str, args))
    if not isinstance(args, str):
        at.key("args").refuse(
            f"`args` must be a string, got {kind_of(args)}", hint='e.g. "args": "--verbose"'
        )
    parsed = _parsed_args(args)
    unknown = [
        f"--{k}={v}"
        for k, v in options.items()
        if k not in _RUN_COMMANDS_OPTIONS
        and not isinstance(v, (dict, list))
        and parsed.get(k, v) == v
    ]
    return args, parsed, unknown


def _command_dir(options: dict, pkg: Package, at: At) -> str:
    """options.cwd, workspace-relative ("." by default); one outside the workspace is refused."""
    cwd = options.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        at.key("cwd").refuse(f"`cwd` must be a string, got {kind_of(cwd)}")
    where = posixpath.normpath(_tokens(cwd, pkg)) if cwd else "."
    if posixpath.isabs(where) or where.startswith(".."):
        at.key("cwd").refuse(
            f"`cwd` {cwd!r} is outside the workspace", hint="vx runs tasks inside the workspace"
        )
    return where


def _joined(commands: list[str], parallel: bool) -> str:
    """The commands as one shell body: one after another, or in parallel."""
    if len(commands) == 1:
        return commands[0]
    if parallel:  # every command at once; the task fails when any does, after all have finished
        starts = "".join(f"(\n{c}\n) & p{i}=$!\n" for i, c in enumerate(commands))
        waits = "".join(f"wait $p{i} || s=1\n" for i in range(len(commands)))
        return f"{starts}s=0\n{waits}exit $s"
    return " && ".join(f"(\n{c}\n)" for c in commands)


def _env_file(options: dict, pkg: Package, where: str, at: At) -> tuple[str, str] | None:
    """options.envFile as the shell line that loads it, and its workspace path; None without one.
    Loaded as Nx loads it: its variables exported to every command; a missing file is no error."""
    env_file = options.get("envFile")
    if env_file is None:
        return None
    if not isinstance(env_file, str):
        at.key("envFile").refuse(f"`envFile` must be a string, got {kind_of(env_file)}")
    ws_rel = posixpath.normpath(_tokens(env_file, pkg))
    from_here = posixpath.relpath(ws_rel, where)
    # `.` searches PATH
    from_here = shlex.quote(from_here if from_here.startswith("../") else "./" + from_here)
    return f"if [ -f {from_here} ]; then set -a; . {from_here}; set +a; fi\n", ws_rel


def _command_env(options: dict, at: At) -> dict | None:
    """options.env as a vx `exec.env`; None without one."""
    env = options.get("env")
    if env is None:
        return None
    env = as_object(env, at.key("env"))
    for key, value in env.items():
        if (
            not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key)
            or isinstance(value, (dict, list))
            or value is None
        ):
            at.key("env").key(key).refuse(
                f"`{key}`: an env entry is a NAME and a string value",
                hint='e.g. "env": {"NODE_ENV": "production"}',
            )
    return {"define": {k: v if isinstance(v, str) else json.dumps(v) for k, v in env.items()}}


def _parsed_args(args: str) -> dict[str, str]:
    """`--name=value` and `--name value` in an args string, as Nx's `{args.name}` reads them."""
    out: dict[str, str] = {}
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key, eq, value = word[2:].partition("=")
            if not eq:
                value = (
                    words[i + 1]
                    if i + 1 < len(words) and not words[i + 1].startswith("-")
                    else "true"
                )
                i += 0 if value == "true" else 1
            out[key] = value
        i += 1
    return out


# ---------------------------------------------------------------- dependsOn


def _depends_on(
    nx: NxRoot, proj: _Project, entries: list, at: At, configuration: str | None
) -> list[str]:
    """`build`, `^build`, `proj:build` and `{target, projects | dependencies, params}` as vx entries;
    with a configuration, a same-project target that has it is run with it."""
    out: list[str] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            out += _depends_text(nx, proj, entry, configuration)
        else:
            out += _depends_object(nx, proj, entry, at.item(i), configuration)
    return list(dict.fromkeys(out))


def _depends_text(nx: NxRoot, proj: _Project, entry: str, configuration: str | None) -> list[str]:
    if _GLOB_CHARS.search(entry):  # Nx's target-name globs: `build-*`, `^build-*`
        caret = "^" if entry.startswith("^") else ""
        pattern = entry[len(caret) :]
        pool = _all_targets(nx) if caret else proj.targets
        return [
            caret + _configured(proj, t, None if caret else configuration)
            for t in sorted(pool)
            if fnmatch.fnmatchcase(t, pattern)
        ]
    if entry.startswith("^"):
        return [entry]
    if ":" in entry and entry.split(":", 1)[0] in nx.packages:
        project_name, _, target = entry.partition(":")
        return [f"{project_name}#{target}"]
    return [_configured(proj, entry, configuration)]


def _depends_object(
    nx: NxRoot, proj: _Project, entry: Any, here: At, configuration: str | None
) -> list[str]:
    obj = as_object(entry, here, 'a target name or {"target": …}')
    for key in obj:
        if key not in DEPENDS.allowed:
            near = did_you_mean(key, DEPENDS.allowed)
            here.key(key).refuse(
                f"unknown key `{key}` in a dependsOn entry",
                hint=f"did you mean `{near}`?"
                if near
                else "keys: target, projects, dependencies, params",
            )
    target = obj.get("target")
    if not isinstance(target, str) or not target:
        here.key("target").refuse(
            "a dependsOn object needs a `target` string", hint='e.g. {"target": "build"}'
        )
    projects = obj.get("projects")
    if obj.get("dependencies") or projects == "dependencies":
        return [f"^{target}"]
    if projects is None or projects == "self":
        return [_configured(proj, target, configuration)]
    names = sorted(n for n in nx.packages if n != ROOT_PROJECT)
    wanted = (
        [projects]
        if isinstance(projects, str)
        else list(as_strings(projects, here.key("projects"), "project names"))
    )
    out: list[str] = []
    for pattern in wanted:
        if pattern.startswith("tag:"):
            matched = [n for n in names if pattern[4:] in _project(nx, nx.packages[n]).tags]
        elif _GLOB_CHARS.search(pattern):
            matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        elif pattern in nx.packages:
            matched = [pattern]
        else:
            here.key("projects").refuse(
                f"`{pattern}` names no project", hint=f"projects: {', '.join(names[:12])}"
            )
        out += [f"{n}#{target}" for n in matched]
    return out


def _all_targets(nx: NxRoot) -> set[str]:
    if "targets" not in nx.memo:
        nx.memo["targets"] = {t for pkg in nx.packages.values() for t in _project(nx, pkg).targets}
    return nx.memo["targets"]


def _configured(proj: _Project, target: str, configuration: str | None) -> str:
    if configuration and configuration in (proj.targets.get(target) or {}).get(
        "configurations", {}
    ):
        return f"{target}:{configuration}"
    return target


# ---------------------------------------------------------------- inputs and outputs


class _Found(Struct):
    """What a target's inputs expand to: project files (only for the task's own project),
    workspace files, env names, and the dependencies' input groups its `^name` entries reach."""

    files: list[str] = field(default_factory=list)
    workspace: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)


def _inputs(
    nx: NxRoot, proj: _Project, target: dict, at: At
) -> tuple[list[str], list[str], list[str], list[str]]:
    """A target's `inputs` (default `["default", "^default"]`) as project files, workspace files, env,
    and the dependencies' input groups its `^name` entries reach."""
    entries = target.get("inputs")
    if entries is None:
        entries = ["default", "^default"]
    found = _Found()
    _expand(nx, proj, entries, at, found, seen=(), own=True)
    files, workspace = found.files, found.workspace
    if not any(not f.startswith("!") for f in files):
        files = []  # only negations left: nothing of the project itself is an input
    if workspace and all(w.startswith("!") for w in workspace):
        workspace = []
    return _unique(files), _unique(workspace), _unique(found.env), _unique(found.groups)


def _named(nx: NxRoot, proj: _Project, name: str) -> list | None:
    if name in proj.named_inputs:
        return proj.named_inputs[name]
    if name in nx.named_inputs:
        return nx.named_inputs[name]
    return ["{projectRoot}/**/*"] if name == "default" else None


def _expand(
    nx: NxRoot, proj: _Project, entries: list, at: At, found: _Found, seen: tuple, own: bool
) -> None:
    """Input entries (named inputs, filesets, objects) into `found`."""
    for i, entry in enumerate(entries):
        here = at.item(i)
        if not isinstance(entry, str):
            obj = as_object(entry, here, "an input (a name, a fileset or an object)")
            _expand_object(nx, proj, obj, here, found, seen, own)
        elif entry.startswith("^"):
            if _named(nx, proj, entry[1:]) is None:
                here.refuse(
                    f"`{entry[1:]}` is no named input",
                    hint="define it in nx.json `namedInputs`",
                )
            found.groups.append(f"^{GROUP}{entry[1:]}")
        elif "{" in entry or "/" in entry or _GLOB_CHARS.search(entry):
            _fileset(proj, entry, here, found, own)
        else:
            _named_into(nx, proj, entry, here, found, seen, own)


def _expand_object(
    nx: NxRoot, proj: _Project, obj: dict, here: At, found: _Found, seen: tuple, own: bool
) -> None:
    """`{env}`, `{runtime}`, `{fileset}`, `{externalDependencies}`, `{dependentTasksOutputFiles}`
    or `{input, projects | dependencies}`, into `found`."""
    if "env" in obj:
        if not isinstance(obj["env"], str) or not re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_]*", obj["env"]
        ):
            here.key("env").refuse(f"`env` must name an env var, got {obj['env']!r}")
        found.env.append(obj["env"])
    elif "runtime" in obj:
        raise _Refused(
            f"a `runtime` input (`{obj['runtime']}`): vx does not run probe commands to key a task",
            here.file,
            here.field + ".runtime",
            'key what the probe reads instead: an { "env": … } input or a file',
        )
    elif "fileset" in obj:
        _fileset(proj, obj["fileset"], here.key("fileset"), found, own)
    elif "externalDependencies" in obj or "dependentTasksOutputFiles" in obj:
        # Covered already: every vx key folds the workspace's lockfiles, and the keys of the
        # task's dependencies (whose outputs follow from them).
        return
    elif "input" in obj:
        _named_of_projects(nx, proj, obj, here, found, seen, own)
    else:
        here.refuse(
            f"unknown input {json.dumps(obj)}",
            hint="inputs are named inputs, filesets, {env}, {runtime}, {externalDependencies}, "
            "{dependentTasksOutputFiles}, {input, projects}",
        )


def _named_of_projects(
    nx: NxRoot, proj: _Project, obj: dict, here: At, found: _Found, seen: tuple, own: bool
) -> None:
    """`{input, projects}`: the named input of the projects named (`self` by default), into
    `found`; `{input, dependencies: true}`: the dependencies' input group."""
    name = obj["input"]
    projects = obj.get("projects")
    if obj.get("dependencies"):
        found.groups.append(f"^{GROUP}{name}")
        return
    if projects is None or projects == "self":
        targets = [proj.pkg]
    else:
        if not (
            isinstance(projects, str)
            or isinstance(projects, list)
            and all(isinstance(x, str) for x in projects)
        ):
            here.key("projects").refuse(
                f"`projects` must be a project name or a list of them, got {json.dumps(projects)}",
                hint='e.g. "projects": "self" or "projects": ["lib-a"]',
            )
        wanted = [projects] if isinstance(projects, str) else list(projects)
        targets = [nx.packages[p] for p in wanted if p in nx.packages]
    for pkg in targets:
        other = _project(nx, pkg)
        _named_into(nx, other, name, here, found, seen, own=own and other is proj)


def _named_into(
    nx: NxRoot, proj: _Project, name: str, at: At, found: _Found, seen: tuple, own: bool
) -> None:
    entries = _named(nx, proj, name)
    if entries is None:
        at.refuse(
            f"`{name}` is no named input",
            hint="define it in nx.json `namedInputs`, or write a fileset "
            'such as "{projectRoot}/src/**/*"',
        )
    if (proj.pkg.dir, name) in seen:
        at.refuse(f"named input `{name}` includes itself", hint="remove the cycle from namedInputs")
    source = proj.named_source if name in proj.named_inputs else NX_FILE
    _expand(
        nx,
        proj,
        entries,
        At(source).key(f"namedInputs.{name}"),
        found,
        (*seen, (proj.pkg.dir, name)),
        own,
    )


def _fileset(proj: _Project, pattern: Any, at: At, found: _Found, own: bool) -> None:
    if not isinstance(pattern, str) or not pattern:
        at.refuse(f"a fileset must be a non-empty string, got {kind_of(pattern)}")
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    bang = "!" if negated else ""
    pkg = proj.pkg
    body = body.replace("{projectName}", pkg.name)
    if body.startswith("{projectRoot}"):
        rest = nx_glob(body[len("{projectRoot}") :].lstrip("/")) or "**"
        if own:
            found.files.append(bang + rest)
        else:
            found.workspace.append(bang + (posixpath.join(pkg.dir, rest) if pkg.dir else rest))
    elif body.startswith("{workspaceRoot}"):
        found.workspace.append(bang + (nx_glob(body[len("{workspaceRoot}") :].lstrip("/")) or "**"))
    else:
        at.refuse(
            f"fileset `{pattern}` starts with neither {{projectRoot}} nor {{workspaceRoot}}",
            hint='write it as "{projectRoot}/…" or "{workspaceRoot}/…"',
        )


_EXTGLOB = re.compile(r"([?*+@!])\(([^()]*)\)")
_CLASS = re.compile(r"\[(!?)([^\]/]+)\]")


def nx_glob(pattern: str) -> str:
    """An Nx (minimatch) glob in vx's grammar: `?(x)` and `*(x)` as `{,x}`, `+(a|b)` and `@(a|b)`
    as `{a,b}` (one repetition: `foo.specspec.ts` is nobody's file name), `[jt]` as `{j,t}`, and
    `!(x)` or a negated class as `*` (a wider input set: a key over-includes rather than misses)."""

    def alternatives(options: list[str]) -> str:
        options = list(dict.fromkeys(options))
        return options[0] if len(options) == 1 else "{" + ",".join(options) + "}"

    def extglob(m: re.Match) -> str:
        kind, options = m.group(1), m.group(2).split("|")
        if kind == "!":
            return "*"
        return alternatives(([""] if kind in "?*" else []) + options)

    def char_class(m: re.Match) -> str:
        if m.group(1):
            return "?"
        return alternatives(class_members(m.group(2)))

    previous = None
    while previous != pattern:  # innermost extglobs first
        previous, pattern = pattern, _EXTGLOB.sub(extglob, pattern)
    return _CLASS.sub(char_class, pattern)


def _outputs(
    proj: _Project, name: str, target: dict, options: dict, at: At
) -> tuple[list[str], list[str]]:
    """`outputs` with `{projectRoot}`, `{workspaceRoot}` and `{options.x}` resolved, split into the
    project's and the workspace's; without `outputs`, Nx's fallbacks (options.outputPath; a build's dist)."""
    pkg = proj.pkg
    declared = target.get("outputs")
    paths: list[str] = []
    if declared is not None:
        for i, output in enumerate(declared):
            text = _interpolate_output(output, pkg, options, at.item(i))
            if text is not None:
                paths.append(text)
    elif isinstance(options.get("outputPath"), str):
        paths.append(_tokens(options["outputPath"], pkg))
    elif name in ("build", "prepare"):
        # Nx's own fallback, but for `{projectRoot}/public`: vx wipes outputs before a run, and
        # `public/` is an app's static sources far more often than a build's output.
        paths += [
            posixpath.join("dist", pkg.dir) if pkg.dir else "dist",
            posixpath.join(pkg.dir, "dist"),
            posixpath.join(pkg.dir, "build"),
        ]
    own, workspace = [], []
    for path in paths:
        negated = path.startswith("!")
        body = posixpath.normpath(path[1:] if negated else path)
        bang = "!" if negated else ""
        if pkg.dir == "" or body == pkg.dir or body.startswith(pkg.dir + "/"):
            rel = body[len(pkg.dir) :].lstrip("/") if pkg.dir else body
            own.append(bang + (rel or "**"))
        else:
            workspace.append(bang + body)
    return _unique(own), _unique(workspace)


def _interpolate_output(output: str, pkg: Package, options: dict, at: At) -> str | None:
    text = output.replace("{workspaceRoot}/", "").replace("{projectRoot}", pkg.dir or ".")
    text = text.replace("{projectName}", pkg.name)

    def option(m: re.Match) -> str:
        value: Any = options
        for part in m.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value if isinstance(value, str) else "\0"

    text = re.sub(r"{options\.([^}]+)}", option, text)
    if "\0" in text:
        return None  # Nx drops an output whose option is unset
    if "{" in text and re.search(r"{(projectRoot|workspaceRoot)}", text):
        at.refuse(f"output `{output}`: {{workspaceRoot}} and {{projectRoot}} go only at its start")
    if text.startswith("/") or posixpath.normpath(text).startswith(".."):
        at.refuse(
            f"output `{output}` is outside the workspace",
            hint="outputs are paths inside the workspace",
        )
    return (
        posixpath.normpath(text) if not text.startswith("!") else "!" + posixpath.normpath(text[1:])
    )


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------- `vx show project NAME --json`


def shown_project_names(ws) -> list[str]:
    """What `nx show projects --json` lists: every project's Nx name (the root's, when the root
    is a project of Nx's), sorted."""
    from vx.errors import UsageError

    if not os.path.lexists(os.path.join(str(ws.root), NX_FILE)):
        raise UsageError(
            "`--json` shows Nx's projects; this workspace has no nx.json",
            hint="`vx show --format json` for vx's view",
        )
    names = {
        ws.nx_root if name == ROOT_PROJECT else name
        for name in ws.packages
        if name != ROOT_PROJECT or ws.nx_root is not None
    }
    return sorted(names)


def shown_project(ws, name: str) -> dict:
    """The project as `nx show project NAME --json` prints it: its root, tags, implicit
    dependencies and targets as resolved — merged over the scripts, target defaults filled in."""
    from vx.errors import UnknownTaskError, UsageError, suggestion

    root = str(ws.root)
    if not os.path.lexists(os.path.join(root, NX_FILE)):
        raise UsageError(
            "`--json` shows an Nx project; this workspace has no nx.json",
            hint="`vx show NAME --format json` for vx's view",
        )
    from vx.workspace.nxprojects import own_nx

    nx_root_name = ws.nx_root
    if name == nx_root_name and name not in ws.packages:
        name = ROOT_PROJECT
    if name not in ws.packages or name == ROOT_PROJECT and nx_root_name is None:
        raise UnknownTaskError(
            f"no project named `{name}`", hint=suggestion(name, ws.packages, noun="projects")
        )
    pkg = ws.packages[name]
    if ws.nx is not None and pkg.dir in ws.nx.projects:
        return dict(ws.nx.projects[pkg.dir])  # Nx's own answer, as it printed it
    nx = find_root(root, ws.packages, ws.nx)
    proj = _project(nx, pkg)
    own, _source, _field = own_nx(root, proj.pkg)
    return {
        "root": proj.pkg.dir or ".",
        "name": nx_root_name if name == ROOT_PROJECT else name,
        "tags": list(proj.tags),
        "implicitDependencies": [
            d
            for d in own.get("implicitDependencies", [])  # an unknown `!name` passed over
            if not (d.startswith("!") and d[1:] not in ws.packages)
        ],
        "targets": {
            t: {
                **body,
                "options": body.get("options", {}),
                "configurations": body.get("configurations", {}),
                "parallelism": body.get("parallelism", True),
            }
            for t, body in proj.targets.items()
        },
    }
