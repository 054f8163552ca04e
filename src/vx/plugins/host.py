"""The plugin seam: the plugins a workspace declares (`plugins` in vx.workspace), loaded, checked,
and called at their points of the pipeline, each failure kept to its plugin (docs/plugins.md).

A plugin is a Python module, or a `vx.plugins` entry point, whose `plugin(options)` returns a
dict of hooks. Shaping hooks (setup, config, discover, project, graph, key, schedule and the
executor and cache factories) decide what the run does, so a throw in one fails the run in one
line naming the plugin and the hook; a vx error a plugin raises on purpose is shown as it is.
Observers (telemetry sinks, `ctx.on` callbacks, teardown) only watch, so a throw is warned once
and that observer is switched off; a throwing `admit` admits from then on, an executor's throw
fails its task, a cache layer's is a miss. Only a workspace that declares a plugin imports this
module.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from msgspec import Struct, field, structs

from vx.errors import EXIT_USAGE, ToolchainRefused, VxError
from vx.events import Notice
from vx.model import (
    LogChunk,
    Package,
    PluginSpec,
    ProcessResult,
    ProjectConfig,
    TaskGraph,
    TaskId,
    TaskNode,
    TaskPlan,
    Workspace,
    WorkspaceConfig,
)

if TYPE_CHECKING:
    import asyncio

# In pipeline order; docs/plugins.md has one example of each.
HOOKS = (
    "config",
    "discover",
    "project",
    "graph",
    "key",
    "fingerprint",
    "schedule",
    "admit",
    "executor",
    "cache",
    "telemetry",
    "setup",
    "teardown",
    "commands",
)
# every verb of vx itself (cli/main.py VERBS and the foreign verbs it points elsewhere); a unit
# test holds the two equal
CORE_VERBS = frozenset(
    {
        *("run", "run-many", "affected", "watch", "init", "migrate", "info", "show", "ls"),
        *(
            "why",
            "last",
            "history",
            "cache",
            "prune",
            "lock",
            "mcp",
            "completions",
            "help",
            "version",
        ),
        *("build", "test", "lint", "exec", "graph"),
    }
)
# What a hook's throw may be: any error, and sys.exit() too (a plugin does not end vx's run)
_THROWN = (Exception, SystemExit)
TEARDOWN_S = 3.0  # how long one plugin's teardown may hold the end of a run
ENTRY_POINTS = "vx.plugins"
# A cycle of `vx watch` (vx.cli.watch): the plugins its session set up, as [name, options]
# pairs, and the pipe the cycle's events go back to the session through
WATCH_PLUGINS = "VX_WATCH_PLUGINS"
WATCH_EVENTS = "VX_WATCH_EVENTS"


class PluginError(VxError):
    """A plugin failed to load, broke its contract, or threw in a shaping hook (exit 2): the
    workspace's plugins are to fix, so a config refusal by code."""

    exit_code = EXIT_USAGE
    code = "VX_E_CONFIG"


class TaskView(Struct, frozen=True):
    """A task as hooks see it: `id` is `project#task`, `dir` its project's directory relative to
    the workspace root, `command` what runs (None for a group), `deps` the ids of the tasks it
    waits for. `toolchain`, for an executor, is what the key says the task is built with, as
    measured here: `node` (the `node -v` on its PATH) and each `inputs.runtime` probe's output
    (`runtime:<command>:stdout`, `...:stderr`, `ws-runtime:` for the workspace's)."""

    id: str
    project: str
    task: str
    dir: str
    command: str | None
    deps: tuple[str, ...] = ()
    toolchain: dict[str, str] = field(default_factory=dict)


class ProjectView(Struct, frozen=True):
    """A project as the `project` hook sees it: its package name and its directory."""

    name: str
    dir: str


class Change(Struct, frozen=True):
    """A claimed file's change as `fingerprint.affected` sees it: the file, the merge-base
    commit `base`, its bytes there (`before`) and in the worktree (`after`), None where it is
    absent, and every project of the workspace."""

    file: str
    base: str
    before: bytes | None
    after: bytes | None
    projects: tuple[ProjectView, ...]


class Context:
    """What every hook is given: the plugin's `name` and `options`, the workspace `root`, the
    run's environment `env` (read only), `warn(message)`, and — in `setup` — `on(callback)`,
    which has `callback(event)` called with every event of the run."""

    __slots__ = ("name", "options", "root", "env", "_host")

    def __init__(self, host: Host, plugin: Plugin, root: Path, env: Mapping[str, str]):
        self.name, self.options, self.root, self.env = plugin.name, plugin.options, root, env
        self._host = host

    def warn(self, message: str) -> None:
        self._host.warn(f"plugin '{self.name}': {message}")

    def on(self, callback: Callable[[Any], None]) -> None:
        if not callable(callback):
            raise PluginError(f"plugin '{self.name}': ctx.on() takes a function, got {callback!r}")
        self._host.observers.append(_Observer(self.name, "setup: ctx.on", callback))


class Plugin:
    __slots__ = ("name", "options", "hooks", "ctx", "off", "session")

    def __init__(self, name: str, options: dict[str, Any], hooks: dict[str, Any]):
        self.name, self.options, self.hooks = name, options, hooks
        self.off: set[str] = set()  # hooks switched off for the rest of the run
        self.ctx: Context
        self.session = False  # set up by the `vx watch` session around this run: not here


class _Observer:
    __slots__ = ("plugin", "hook", "fn", "off")

    def __init__(self, plugin: str, hook: str, fn: Callable[[Any], None]):
        self.plugin, self.hook, self.fn, self.off = plugin, hook, fn, False


class Host:
    """The loaded plugins of one workspace, in declaration order."""

    def __init__(self, root: Path, env: Mapping[str, str]):
        self.root, self.env = root, env
        self.plugins: list[Plugin] = []
        self.observers: list[_Observer] = []
        self.pending: list[str] = []  # warnings said before a run's events flow
        self.executors: list[tuple[str, Any]] = []  # (plugin, what its `executor` hook returned)
        self.claims: dict[str, str] = {}  # root fingerprint file -> the plugin that claims it
        self._emit: Callable[[Any], None] | None = None
        self._torn = False

    # -------------------------------------------------------------- calling hooks

    def with_hook(self, hook: str) -> list[Plugin]:
        return [p for p in self.plugins if hook in p.hooks and hook not in p.off]

    def has(self, hook: str) -> bool:
        return bool(self.with_hook(hook))

    def _shape(self, plugin: Plugin, hook: str, *args: Any) -> Any:
        """Call a shaping hook: any throw fails the run, naming the plugin and the hook."""
        try:
            return plugin.hooks[hook](*args, plugin.ctx)
        except VxError:
            raise
        except _THROWN as exc:
            raise _failed(plugin.name, hook, exc) from None

    def warn(self, message: str) -> None:
        message = masked(message)
        if self._emit is not None:
            self._emit(Notice(message, level="warning"))
        else:
            self.pending.append(message)

    def shape_config(self, data: Any, loaded: WorkspaceConfig) -> WorkspaceConfig:
        """The workspace config after each `config` hook, validated again after each one."""
        from msgspec.structs import replace

        from vx.config.workspace_file import validate_workspace

        config = loaded
        for plugin in self.with_hook("config"):
            given = copy.deepcopy(data)
            edited = self._shape(plugin, "config", given)
            data = given if edited is None else edited
            data = _as_json(plugin.name, data)
            if not isinstance(data, dict):
                raise PluginError(
                    f"plugin '{plugin.name}': its `config` hook returned {type(data).__name__}, "
                    "not the workspace config",
                    hint="return the dict it was given (edited), or None to keep it",
                )
            config = validate_workspace(
                data, f"{loaded.source or 'vx.workspace.json'} (as plugin '{plugin.name}' left it)"
            )
            if config.plugins != loaded.plugins:
                raise PluginError(
                    f"plugin '{plugin.name}': its `config` hook changed `plugins`",
                    hint="the plugins a run loads are the ones vx.workspace declares",
                )
        if config.remote_cache is None and loaded.remote_cache is not None:
            config = replace(config, remote_cache=loaded.remote_cache)  # a Turborepo's own remote
        return replace(config, reads=loaded.reads)  # what the file read still moves it

    def discovered(self, ws: Workspace) -> Workspace:
        """The workspace with the projects each `discover` hook adds: `{"dir", "name"}` each, a
        directory inside the root that no package has, under a name no package has."""
        from msgspec.structs import replace

        packages = dict(ws.packages)
        dirs = {p.dir for p in packages.values()}
        hint = 'return e.g. [{"dir": "tools/gen", "name": "gen"}], or None'
        for plugin in self.with_hook("discover"):
            got = self._shape(plugin, "discover")
            if got is None:
                continue
            if not isinstance(got, list):
                raise PluginError(
                    f"plugin '{plugin.name}': its `discover` hook returned {_shown(got)}", hint=hint
                )
            for item in got:
                if (
                    not isinstance(item, dict)
                    or set(item) != {"dir", "name"}
                    or not all(isinstance(v, str) and v for v in item.values())
                ):
                    raise PluginError(
                        f"plugin '{plugin.name}': its `discover` hook gave {_shown(item)}",
                        hint=hint,
                    )
                rel = os.path.normpath(item["dir"]).replace(os.sep, "/")
                name = item["name"]
                problem = named = None
                if os.path.isabs(rel) or rel == "." or rel.split("/")[0] == "..":
                    problem = f"the directory {item['dir']!r} is not inside the workspace"
                elif link := _link_on_the_way(ws.root, rel):
                    problem = (
                        f"{link!r} is a symlink; vx follows no links for a project's files "
                        "(name the real directory)"
                    )
                elif not (ws.root / rel).is_dir():
                    problem = f"the directory {rel!r} does not exist"
                elif rel in dirs:
                    problem = f"{rel!r} is already a project's directory"
                elif named := _name_problem(name):
                    problem = named
                elif name in packages:
                    problem = f"a project is already named {name!r}"
                if problem:
                    raise PluginError(
                        f"plugin '{plugin.name}': its `discover` hook adds a project, but {problem}",
                        hint="name it as a package is named: a plain string without `#`"
                        if named
                        else "name a directory of the workspace that holds no project yet",
                    )
                packages[name] = Package(name, rel, (), f"{rel}/package.json")
                dirs.add(rel)
        return replace(ws, packages=packages)

    def shape_project(self, pkg: Package, data: Any, source: str) -> tuple[Any, str] | None:
        """A project's config after each `project` hook, and the label refusals name; None
        when every hook kept it as it was."""
        view = ProjectView(pkg.name, pkg.dir)
        shaped: tuple[Any, str] | None = None
        for plugin in self.with_hook("project"):
            given = copy.deepcopy(data)
            edited = self._shape(plugin, "project", view, given)
            if edited is None:
                continue
            if not isinstance(edited, dict):
                raise PluginError(
                    f"plugin '{plugin.name}': its `project` hook returned {_shown(edited)} for "
                    f"{pkg.name}, not a project config",
                    hint="return the dict it was given (edited), or None to keep it",
                )
            data = edited
            shaped = (data, f"{source} (as plugin '{plugin.name}' left it)")
        return shaped

    def shape_graph(self, graph: TaskGraph, configs: Mapping[str, ProjectConfig]) -> TaskGraph:
        """The graph after each `graph` hook: edges between the run's tasks added or dropped,
        the requested tasks chosen among them; checked again (ids, cycles, the terminal) after
        each one."""
        from vx.plan.graph import rebuilt

        for plugin in self.with_hook("graph"):
            by_id = {str(t): t for t in graph.nodes}
            edges = {str(t): [str(d) for d in n.deps] for t, n in graph.nodes.items()}
            requested = [str(t) for t in graph.requested]
            got = self._shape(plugin, "graph", edges, requested)
            if got is None:
                continue
            if (
                not isinstance(got, tuple)
                or len(got) != 2
                or not isinstance(got[0], dict)
                or not isinstance(got[1], list)
            ):
                raise PluginError(
                    f"plugin '{plugin.name}': its `graph` hook returned {_shown(got)}",
                    hint="return (edges, requested) as it was given them (edited), or None",
                )
            edges, requested = got
            named = {*edges, *(d for deps in edges.values() for d in deps), *requested}
            unknown = sorted(str(t) for t in named - set(by_id))
            if unknown or set(edges) != set(by_id):
                which = unknown[0] if unknown else sorted(set(by_id) - set(edges))[0]
                raise PluginError(
                    f"plugin '{plugin.name}': its `graph` hook names {which!r}, which is not "
                    "a task of this run, or leaves a task out",
                    hint="edit the edges of the tasks it was given; a task cannot be added there",
                )
            try:
                graph = rebuilt(
                    graph,
                    {
                        by_id[t]: tuple(dict.fromkeys(by_id[d] for d in deps))
                        for t, deps in edges.items()
                    },
                    tuple(dict.fromkeys(by_id[t] for t in requested)),
                    configs,
                )
            except VxError as exc:
                raise PluginError(
                    f"plugin '{plugin.name}': after its `graph` hook, {exc.message}",
                    facts=exc.facts,
                    hint=exc.hint,
                ) from None
        return graph

    def executor_for(self, node: TaskNode, plan: TaskPlan) -> Callable[..., Any] | None:
        """The first plugin executor that accepts the task, as an `execute` of vx's own
        signature (vx.proc.executor.execute); None: vx runs it. An `accepts` that throws is
        warned once and that executor is asked no more."""
        view = task_view(node, plan)
        if plan.record is not None and plan.record.runtime:
            view = structs.replace(view, toolchain=dict(plan.record.runtime))
        for name, executor in self.executors:
            accepts = getattr(executor, "accepts", None)
            if accepts is not None:
                try:
                    if not accepts(view):
                        continue
                except _THROWN as exc:
                    self.executors = [(n, e) for n, e in self.executors if e is not executor]
                    self.warn(f"{_failed(name, 'executor: accepts', exc).message}; not asked again")
                    continue
            return _offered(name, executor, view)
        return None

    def cache_layers(self) -> list[Any]:
        """The layer each `cache` hook that does not decline returns, in declaration order,
        wrapped as vx's remote layers are (`PluginLayer`)."""
        layers = []
        for plugin in self.with_hook("cache"):
            got = self._shape(plugin, "cache")
            if got is None:
                continue
            missing = [m for m in ("has", "get", "put") if not callable(getattr(got, m, None))]
            if missing:
                raise PluginError(
                    f"plugin '{plugin.name}': its `cache` hook returned {_shown(got)}, which "
                    f"has no `{missing[0]}` method",
                    hint="return an object with has(key), get(key) and put(key, data), or None",
                )
            layers.append(PluginLayer(plugin.name, got))
        return layers

    def key_material(
        self, node: TaskNode, plan: TaskPlan
    ) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
        """Every `key` hook's `{name: value}` for the task, as sorted (`plugin/name`, value), and
        the claimed fingerprint files that leave its key: those whose plugin keyed something of
        the task. A claiming plugin whose hook declines leaves its files in the key."""
        view = task_view(node, plan)
        out: list[tuple[str, str]] = []
        released: set[str] = set()
        for plugin in self.with_hook("key"):
            got = self._shape(plugin, "key", view)
            if got is None:
                continue
            if not isinstance(got, dict) or not all(_text(k) and _text(v) for k, v in got.items()):
                raise PluginError(
                    f"plugin '{plugin.name}': its `key` hook returned {_shown(got)} for {view.id}",
                    hint='return a dict of strings, e.g. {"abi": "115"}, or None',
                )
            out += ((f"{plugin.name}/{name}", value) for name, value in got.items())
            if got:
                released.update(f for f, by in self.claims.items() if by == plugin.name)
        return tuple(sorted(out)), frozenset(released)

    def claimed_affected(self, ws: Workspace, base: str) -> dict[str, Callable[[], Any]]:
        """Per claimed file, what `--affected` asks when it changed since `base` (the
        merge-base): the names of the projects its plugin's `affected` says the change touches,
        None for every project (a plugin without `affected` cannot tell)."""
        import functools

        by_name = {p.name: p for p in self.plugins}
        return {
            file: functools.partial(self._affected, by_name[name], ws, file, base)
            for file, name in self.claims.items()
        }

    def _affected(self, plugin: Plugin, ws: Workspace, file: str, base: str) -> set[str] | None:
        hook = plugin.hooks["fingerprint"].get("affected")
        if hook is None:
            return None
        change = Change(
            file,
            base,
            _at_base(ws.root, base, file),
            _in_worktree(ws.root, file),
            tuple(ProjectView(p.name, p.dir) for p in ws.packages.values()),
        )
        try:
            got = hook(change, plugin.ctx)
        except VxError:
            raise
        except _THROWN as exc:
            raise _failed(plugin.name, "fingerprint: affected", exc) from None
        if got is None:
            return None
        hint = "return the names of the projects the change touches (a list), or None for all"
        if isinstance(got, (str, bytes)) or not isinstance(got, (list, tuple, set, frozenset)):
            raise PluginError(
                f"plugin '{plugin.name}': its `fingerprint: affected` hook returned {_shown(got)}",
                hint=hint,
            )
        for project in got:
            if project not in ws.packages:
                raise PluginError(
                    f"plugin '{plugin.name}': its `fingerprint: affected` hook names "
                    f"{_shown(project)}, which is not a project of the workspace",
                    hint=hint,
                )
        return set(got)

    def weights(self, graph: TaskGraph) -> Mapping[TaskId, float]:
        """The walk's priorities: the baseline (dependents count), each `schedule` hook's
        weights over it, a later plugin winning per task."""
        if not self.has("schedule"):
            return graph.priority
        by_id = {str(t): t for t in graph.nodes}
        views = [task_view(graph.nodes[t], None) for t in graph.order]
        merged: dict[TaskId, float] = dict(graph.priority)
        for plugin in self.with_hook("schedule"):
            got = self._shape(plugin, "schedule", views)
            if got is None:
                continue
            if not isinstance(got, dict):
                raise PluginError(
                    f"plugin '{plugin.name}': its `schedule` hook returned {_shown(got)}",
                    hint='return {"project#task": weight, ...} (higher runs first), or None',
                )
            for name, weight in got.items():
                if name not in by_id:
                    raise PluginError(
                        f"plugin '{plugin.name}': its `schedule` hook weighs {name!r}, "
                        "which is not a task of this run",
                        hint="weigh only the tasks it was given (their `id`)",
                    )
                if not _finite(weight):
                    raise PluginError(
                        f"plugin '{plugin.name}': its `schedule` hook gave {name} the weight "
                        f"{_shown(weight)}",
                        hint="a weight is a finite number; higher runs first",
                    )
                merged[by_id[name]] = weight
        return merged

    def admit(self, node: TaskNode, plan: TaskPlan, running: Iterable[TaskId]) -> bool:
        """Whether a ready task may start beside `running`; every `admit` hook must say yes.
        One that throws is warned about once and admits from then on."""
        view, busy = task_view(node, plan), sorted(str(t) for t in running)
        for plugin in self.with_hook("admit"):
            try:
                if not plugin.hooks["admit"](view, busy, plugin.ctx):
                    return False
            except _THROWN as exc:
                plugin.off.add("admit")
                self.warn(f"{_failed(plugin.name, 'admit', exc).message}; it admits from now on")
        return True

    # -------------------------------------------------------------- observers

    def observed(self, emit: Callable[[Any], None]) -> Callable[[Any], None]:
        """`emit` that also hands every event to each observer; one that throws is warned
        about once and switched off."""
        self._emit = emit
        for message in self.pending:
            emit(Notice(message, level="warning"))
        self.pending.clear()
        if not self.observers:
            return emit

        def tee(event: Any) -> None:
            emit(event)
            self.deliver(event)

        return tee

    def deliver(self, event: Any) -> None:
        """Hand `event` to each observer; one that throws is warned about once and switched
        off. (A `vx watch` session hears its cycles' events through this.)"""
        for obs in self.observers:
            if obs.off:
                continue
            try:
                obs.fn(event)
            except _THROWN as exc:
                obs.off = True
                self.warn(
                    f"{_failed(obs.plugin, obs.hook, exc).message}; switched off for this run"
                )

    def teardown(self) -> list[str]:
        """Each plugin's `teardown`, each bounded to TEARDOWN_S; the warnings to print."""
        if self._torn:
            return []
        self._torn = True
        self._emit = None
        said: list[str] = []
        for plugin in self.with_hook("teardown"):
            if plugin.session:
                continue  # the `vx watch` session tears it down as it ends
            failure: list[BaseException] = []

            def run(plugin: Plugin = plugin, failure: list[BaseException] = failure) -> None:
                try:
                    plugin.hooks["teardown"](plugin.ctx)
                except BaseException as exc:  # a daemon thread: nothing must escape it
                    failure.append(exc)

            thread = threading.Thread(target=run, name=f"vx-teardown-{plugin.name}", daemon=True)
            thread.start()
            thread.join(TEARDOWN_S)
            if thread.is_alive():
                said.append(
                    f"plugin '{plugin.name}': its `teardown` hook did not end within "
                    f"{TEARDOWN_S:g} s; vx did not wait for it"
                )
            elif failure and isinstance(failure[0], _THROWN):
                said.append(_failed(plugin.name, "teardown", failure[0]).message)
        said[:0], self.pending = self.pending, []  # with what `ctx.warn` said meanwhile, first
        return said

    # -------------------------------------------------------------- commands

    def verbs(self) -> dict[str, tuple[Plugin, dict[str, Any]]]:
        """Each plugin verb -> (its plugin, its {description, run})."""
        out: dict[str, tuple[Plugin, dict[str, Any]]] = {}
        for plugin in self.with_hook("commands"):
            for verb, command in plugin.hooks["commands"].items():
                out[verb] = (plugin, command)
        return out

    def run_verb(self, verb: str, argv: list[str]) -> int:
        plugin, command = self.verbs()[verb]
        code = self._shape_command(plugin, verb, command, argv)
        if code is None:
            return 0
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
            raise PluginError(
                f"plugin '{plugin.name}': `vx {verb}` returned {code!r}, not an exit code",
                hint="return an int from 0 to 255, or None for 0",
            )
        return code

    def _shape_command(self, plugin: Plugin, verb: str, command: dict, argv: list[str]) -> Any:
        try:
            return command["run"](argv, plugin.ctx)
        except VxError:
            raise
        except _THROWN as exc:
            raise _failed(plugin.name, f"commands.{verb}", exc) from None


# ---------------------------------------------------------------- loading


def load(
    specs: Iterable[PluginSpec],
    root: Path,
    env: Mapping[str, str],
    setup: bool = True,
    factories: bool = True,
) -> Host:
    """Import and check every declared plugin, in order, then call each `setup` (unless
    `setup` is False: a plugin verb runs without a run around it) and, with `factories`, the
    telemetry and executor factories (a `vx watch` session sets its plugins up without them:
    its cycles' runs call those). In a cycle of `vx watch` a plugin the session set up is not
    set up (nor torn down) again, and the run's events go back to the session."""
    host = Host(root, env)
    session = _session_specs(env) if setup else ()
    if str(root) not in sys.path:
        sys.path.append(str(root))  # a plugin kept in the workspace, after what is installed
    claimed: dict[str, str] = {}
    for spec in specs:
        hooks = _hooks(spec, _factory(spec.name))
        plugin = Plugin(spec.name, copy.deepcopy(dict(spec.options)), hooks)
        plugin.ctx = Context(host, plugin, root, env)
        for verb in hooks.get("commands", {}):
            if verb in claimed:
                raise PluginError(
                    f"plugins '{claimed[verb]}' and '{spec.name}' both add the verb `{verb}`",
                    hint="keep one of them in `plugins`",
                )
            claimed[verb] = spec.name
        for file in hooks.get("fingerprint", {}).get("files", ()):
            if file in host.claims:
                raise PluginError(
                    f"plugins '{host.claims[file]}' and '{spec.name}' both claim the "
                    f"fingerprint file `{file}`",
                    facts=("in: vx.workspace, plugins",),
                    hint="one plugin keys a file: keep one of them in vx.workspace's `plugins`",
                )
            host.claims[file] = spec.name
        plugin.session = [spec.name, dict(spec.options)] in session
        host.plugins.append(plugin)
    if any(p.session for p in host.plugins):
        host.observers.append(_Observer("vx watch", "events", _Forward(env[WATCH_EVENTS])))
    if setup:
        for plugin in host.with_hook("setup"):
            if not plugin.session:
                host._shape(plugin, "setup")
    if setup and factories:
        for plugin in host.with_hook("telemetry"):
            _sinks(host, plugin)
        for plugin in host.with_hook("executor"):
            got = host._shape(plugin, "executor")
            if got is None:
                continue
            if not callable(getattr(got, "run", None)):
                raise PluginError(
                    f"plugin '{plugin.name}': its `executor` hook returned {_shown(got)}, which "
                    "has no `run` method",
                    hint="return an object with run(task, command, cwd, env, output), or None",
                )
            host.executors.append((plugin.name, got))
    return host


def session_env(host: Host, fd: int) -> dict[str, str]:
    """What a `vx watch` session puts in each cycle's environment: the plugins it set up, and
    the pipe `fd` the cycle's events go back through."""
    specs = [[p.name, p.options] for p in host.plugins]
    return {WATCH_PLUGINS: json.dumps(specs), WATCH_EVENTS: str(fd)}


def _session_specs(env: Mapping[str, str]) -> list[Any]:
    """The [name, options] pairs a `vx watch` session around this run set up; none outside one
    (or when what it said cannot be read: then every plugin is set up here)."""
    said, fd = env.get(WATCH_PLUGINS), env.get(WATCH_EVENTS)
    if not said or not fd or not fd.isdigit():
        return []
    try:
        specs = json.loads(said)
    except ValueError:
        return []
    return specs if isinstance(specs, list) else []


class _Forward:
    """A cycle's events, as msgpack `[type name, event]` frames on the `vx watch` session's
    pipe: the session's `ctx.on` callbacks hear them. When the pipe is gone (or an event cannot
    be sent) the cycle stops sending, and its run goes on."""

    def __init__(self, fd: str):
        self.fd, self.off = int(fd), False
        self.lock = threading.Lock()
        try:  # the session's pipe is this process's alone: no task it starts inherits it
            os.set_inheritable(self.fd, False)
        except OSError:
            self.off = True

    def __call__(self, event: Any) -> None:
        import struct

        import msgspec

        if self.off:
            return
        try:
            data = msgspec.msgpack.encode((type(event).__name__, event))
            frame = memoryview(struct.pack(">I", len(data)) + data)
            with self.lock:
                while frame:
                    frame = frame[os.write(self.fd, frame) :]
        except Exception:  # the session went, or the event is not one to send
            self.off = True


def read_session_events(fd: int, host: Host) -> None:
    """Until the pipe ends: each cycle's events, decoded as the `vx.events` type each names
    (and nothing else), handed to the session's observers."""
    import struct
    import typing

    import msgspec

    from vx import events

    kinds = {kind.__name__: kind for kind in typing.get_args(events.Event)}
    with os.fdopen(fd, "rb") as pipe:
        while head := pipe.read(4):
            if len(head) < 4:
                return
            data = pipe.read(struct.unpack(">I", head)[0])
            try:
                name, raw = msgspec.msgpack.decode(data, type=tuple[str, msgspec.Raw])
                event = msgspec.msgpack.decode(raw, type=kinds[name])
            except (msgspec.DecodeError, KeyError):  # a cycle killed mid-event: no more frames
                return
            host.deliver(event)


def _sinks(host: Host, plugin: Plugin) -> None:
    """The sinks a `telemetry` hook returns (one function, a list of them, or None to
    decline), each called with every event; a hook that throws only costs its own sinks."""
    try:
        got = plugin.hooks["telemetry"](plugin.ctx)
    except _THROWN as exc:
        host.warn(f"{_failed(plugin.name, 'telemetry', exc).message}; switched off for this run")
        return
    sinks = [] if got is None else list(got) if isinstance(got, (list, tuple)) else [got]
    for sink in sinks:
        if not callable(sink):
            host.warn(
                f"plugin '{plugin.name}': its `telemetry` hook returned {_shown(sink)}, "
                "not a function of an event; switched off for this run"
            )
            return
    host.observers += (_Observer(plugin.name, "telemetry", sink) for sink in sinks)


def _factory(name: str) -> Callable[[dict[str, Any]], Any]:
    """The `plugin` function of the module `name`, else of the `vx.plugins` entry point `name`."""
    quiet = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # a plugin kept in the workspace leaves no __pycache__ in it
    try:
        found: Any = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            raise _load_failed(name, exc) from None  # the module is there; one it imports is not
        found = _entry_point(name)
    except _THROWN as exc:
        raise _load_failed(name, exc) from None
    finally:
        sys.dont_write_bytecode = quiet
    factory = getattr(found, "plugin", None) if not callable(found) else found
    if not callable(factory):
        raise PluginError(
            f"plugin '{name}' has no `plugin` function",
            hint="a plugin module defines `def plugin(options): return {hook: function, ...}`",
        )
    return factory


def _entry_point(name: str) -> Any:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        if ep.name == name:
            try:
                return ep.load()
            except _THROWN as exc:
                raise _load_failed(name, exc) from None
    raise PluginError(
        f"plugin '{name}' is neither an importable module nor a `{ENTRY_POINTS}` entry point",
        hint="install the package that provides it, or check the name in vx.workspace's `plugins`",
    )


def _hooks(spec: PluginSpec, factory: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """What `plugin(options)` returned, checked: known hooks only, each a function (`commands`
    a table of verbs), at least one."""
    try:
        hooks = factory(copy.deepcopy(dict(spec.options)))
    except VxError:
        raise
    except _THROWN as exc:
        raise _failed(spec.name, "plugin(options)", exc) from None
    name = spec.name
    if not isinstance(hooks, dict):
        raise PluginError(
            f"plugin '{name}': `plugin(options)` returned {_shown(hooks)}, not a dict of hooks",
            hint='return e.g. {"key": key} — a hook name and its function',
        )
    for hook, value in hooks.items():
        if hook == "name":
            raise PluginError(
                f"plugin '{name}' sets `name`",
                hint="a plugin is named by its module or entry point; drop the `name` key",
            )
        if hook not in HOOKS:
            from vx.errors import suggestion

            raise PluginError(
                f"plugin '{name}': `{hook}` is not a hook",
                hint=suggestion(str(hook), HOOKS, noun="hooks"),
            )
        if hook == "commands":
            _check_commands(name, value)
        elif hook == "fingerprint":
            _check_fingerprint(name, value, hooks)
        elif not callable(value):
            raise PluginError(
                f"plugin '{name}': `{hook}` must be a function, got {_shown(value)}",
                hint=f"def {hook}(...): ... and return {{{hook!r}: {hook}}}",
            )
    if not hooks:
        raise PluginError(
            f"plugin '{name}' has no hooks",
            hint="return at least one hook from `plugin(options)`, or drop it from `plugins`",
        )
    return hooks


def _check_fingerprint(name: str, value: Any, hooks: dict[str, Any]) -> None:
    """`fingerprint` is `{"files": [root fingerprint files], "affected": function}` (`affected`
    optional), and only beside a `key` hook: a claimed file leaves a task's key only for the
    material that hook puts in."""
    from vx.files.index import FINGERPRINT_FILES

    hint = 'e.g. "fingerprint": {"files": ["pnpm-lock.yaml"], "affected": affected}'
    if not isinstance(value, dict) or set(value) - {"files", "affected"}:
        raise PluginError(
            f"plugin '{name}': `fingerprint` must be {{files, affected}}, got {_shown(value)}",
            hint=hint,
        )
    files = value.get("files")
    if not isinstance(files, (list, tuple)) or not files:
        raise PluginError(
            f"plugin '{name}': `fingerprint.files` must be a list of the root files it claims",
            hint=hint,
        )
    for file in files:
        if file not in FINGERPRINT_FILES:
            raise PluginError(
                f"plugin '{name}': `fingerprint.files` names {_shown(file)}, which is not a root "
                "fingerprint file",
                hint="it may claim " + ", ".join(FINGERPRINT_FILES),
            )
    if "affected" in value and not callable(value["affected"]):
        raise PluginError(
            f"plugin '{name}': `fingerprint.affected` must be a function, got "
            f"{_shown(value['affected'])}",
            hint="def affected(change, ctx): return [project names], or None for every project",
        )
    if not callable(hooks.get("key")):
        raise PluginError(
            f"plugin '{name}' claims {', '.join(files)} but has no `key` hook",
            hint="a claimed file leaves the workspace fingerprint only for what the plugin's "
            "`key` hook keys of it per task; add one",
        )


def _check_commands(name: str, value: Any) -> None:
    hint = 'e.g. "commands": {"hello": {"description": "say hello", "run": run}}'
    if not isinstance(value, dict) or not value:
        raise PluginError(f"plugin '{name}': `commands` must be a dict of verbs", hint=hint)
    for verb, command in value.items():
        if verb in CORE_VERBS:
            raise PluginError(
                f"plugin '{name}' adds the verb `{verb}`, which is vx's own",
                hint="name the verb something vx does not already mean",
            )
        if not isinstance(verb, str) or not verb or verb.startswith("-") or " " in verb:
            raise PluginError(f"plugin '{name}': {verb!r} is not a verb name", hint=hint)
        if (
            not isinstance(command, dict)
            or not callable(command.get("run"))
            or not isinstance(command.get("description", ""), str)
            or set(command) - {"run", "description"}
        ):
            raise PluginError(
                f"plugin '{name}': the verb `{verb}` must be {{description, run}}", hint=hint
            )


# ---------------------------------------------------------------- values


def task_view(node: TaskNode, plan: TaskPlan | None) -> TaskView:
    command = plan.command if plan is not None else None
    if command is None and node.config.exec is not None:
        command = node.config.exec.command
    deps = tuple(str(d) for d in node.deps)
    return TaskView(str(node.id), node.id.package, node.id.task, node.project_dir, command, deps)


def _failed(plugin: str, hook: str, exc: BaseException) -> PluginError:
    """The one line a hook's throw becomes: which plugin, which hook, what it raised."""
    if os.environ.get("VX_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    text = _said(exc)
    said = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return PluginError(masked(f"plugin '{plugin}' failed in its `{hook}` hook: {said}"))


def _load_failed(name: str, exc: BaseException) -> PluginError:
    if os.environ.get("VX_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    text = _said(exc)
    return PluginError(
        masked(f"plugin '{name}' failed to load: {type(exc).__name__}: {text}".rstrip(": ")),
        hint="VX_DEBUG=1 shows the traceback",
    )


def _said(exc: BaseException) -> str:
    """The first line of what `exc` says; nothing when even saying it throws."""
    try:
        text = str(exc)
    except Exception:  # a plugin's exception class may raise anything from its __str__
        return ""
    return text.splitlines()[0] if text else ""


def _text(value: Any) -> bool:
    """A str that is text: a lone surrogate cannot go into a key."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _finite(weight: Any) -> bool:
    """A weight the walk can order by: a number, not a bool, NaN or an infinity."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        return False
    try:
        return math.isfinite(weight)
    except OverflowError:  # an int past any float
        return False


def _as_json(plugin: str, data: Any) -> Any:
    """What a `config` hook left, as JSON data (keys strings, no cycle, no NaN, no object), so
    the workspace config's checks see what a vx.workspace file could hold."""
    try:
        return json.loads(json.dumps(data, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise PluginError(
            f"plugin '{plugin}': its `config` hook returned what is not JSON data: {_said(exc)}",
            hint="return the dict it was given (edited with strings, numbers, lists, dicts)",
        ) from None


def masked(text: str) -> str:
    """`text` with the environment's secret values (vx.proc.masking's rule) shown as ***: what
    a plugin says or raises may quote one."""
    from vx.proc.masking import mask_text, secrets_of

    return mask_text(text, secrets_of(os.environ)) or ""


def _name_problem(name: str) -> str | None:
    """What is wrong with a discovered project's name, as a package name is checked."""
    if name.strip() != name:
        return f"its name {name!r} has surrounding whitespace"
    if "#" in name:
        return f"its name {name!r} contains `#`, which separates a project from its task"
    return None


def _at_base(root: Path, base: str, file: str) -> bytes | None:
    """The root file `file` as commit `base` holds it; None when it has none."""
    import subprocess

    done = subprocess.run(
        ["git", "show", f"{base}:./{file}"], cwd=root, capture_output=True, check=False
    )
    return done.stdout if done.returncode == 0 else None


def _in_worktree(root: Path, file: str) -> bytes | None:
    try:
        return (root / file).read_bytes()
    except OSError:
        return None


def _link_on_the_way(root: Path, rel: str) -> str | None:
    """The first directory of `rel` (below the root) that is a symlink, if any: a project reached
    through one would have its outputs walked, wiped and restored through the link."""
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        here = "/".join(parts[:i])
        if (root / here).is_symlink():
            return here
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _offered(name: str, executor: Any, view: TaskView) -> Callable[..., Any]:
    """`executor.run(task, command, cwd, env, output)` as an awaitable `execute`: it runs in a
    worker thread, `output(data)` streams into the task's log, what it returns is the exit code,
    and a throw is the task's failure, said in its log naming the plugin; (exit code, toolchain)
    with a toolchain other than the key's raises `ToolchainRefused`. Past the task's
    `timeout_ms` the task ends as timed out, as a local command does; a thread cannot be
    stopped, so the call is left behind, its later output dropped. The thread is a daemon one:
    a call that never returns cannot hold vx's exit."""

    async def execute(command: str, *, cwd, env, on_output, timeout_ms=None, **_: Any) -> Any:
        import asyncio
        import time

        call = _Call(asyncio.get_running_loop(), on_output)
        started = time.monotonic()
        threading.Thread(
            target=call.run,
            args=(executor, view, command, cwd, env),
            name=f"vx-plugin-{name}",
            daemon=True,
        ).start()
        try:
            code, thrown = await asyncio.wait_for(
                asyncio.shield(call.answer), None if timeout_ms is None else timeout_ms / 1000
            )
        except asyncio.TimeoutError:
            call.over.set()
            return ProcessResult(
                143, (time.monotonic() - started) * 1000, tuple(call.log), timed_out=True
            )
        except BaseException:
            call.over.set()
            raise
        code, differs = _exit_of(name, view, code, thrown, call.tell)
        await asyncio.sleep(0)  # the output the worker thread queued is told before the end
        call.over.set()
        if differs is not None:
            raise ToolchainRefused(f"plugin '{name}' built {view.id} with {differs}")
        return ProcessResult(code, (time.monotonic() - started) * 1000, tuple(call.log))

    return execute


class _Call:
    """One call of a plugin executor's `run`, in its worker thread: what it outputs goes into
    the task's log until the task has ended (`over`), and how it ended is settled on the loop."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_output: Callable[[LogChunk], None]
    ) -> None:
        self.loop, self.on_output = loop, on_output
        self.log: list[LogChunk] = []
        self.over = threading.Event()  # the task has ended: what the call says now goes nowhere
        self.answer: asyncio.Future[Any] = loop.create_future()

    def tell(self, chunk: LogChunk) -> None:
        if not self.over.is_set():
            self.log.append(chunk)
            self.on_output(chunk)

    def output(self, data: bytes | str) -> None:
        chunk = LogChunk(1, data.encode() if isinstance(data, str) else bytes(data))
        if not self.over.is_set():
            self.loop.call_soon_threadsafe(self.tell, chunk)

    def run(self, executor: Any, view: TaskView, command: str, cwd: Any, env: Any) -> None:
        """The worker thread: the call, and what it returned or threw, handed to the loop."""
        try:
            outcome: tuple[Any, BaseException | None] = (
                executor.run(view, command, cwd, dict(env), self.output),
                None,
            )
        except BaseException as exc:  # handed to the loop, judged there
            outcome = (None, exc)
        if not self.over.is_set():
            try:
                self.loop.call_soon_threadsafe(self._settle, outcome)
            except RuntimeError:  # the loop has closed: nobody waits any more
                pass

    def _settle(self, outcome: tuple[Any, BaseException | None]) -> None:
        if not self.answer.done():
            self.answer.set_result(outcome)


def _exit_of(
    name: str,
    view: TaskView,
    code: Any,
    thrown: BaseException | None,
    tell: Callable[[LogChunk], None],
) -> tuple[int, str | None]:
    """The exit code the call returned, and the difference of the toolchain it reported from the
    key's (None: none); a throw, or what is no exit code, is exit 1, said in the task's log."""
    differs = None
    try:
        if thrown is not None:
            raise thrown
        if isinstance(code, tuple) and len(code) == 2 and isinstance(code[1], dict):
            code, used = code  # the exit code, and the toolchain it was built with
            differs = _differs(view.toolchain, used)
        if isinstance(code, bool) or not isinstance(code, int):
            raise TypeError(
                f"run() returned {_shown(code)}, not an exit code (or exit code, toolchain)"
            )
    except _THROWN as exc:
        said = _failed(name, "executor", exc).message
        tell(LogChunk(2, f"vx: {said}\n".encode()))
        return 1, None
    return code, differs


def _differs(keyed: Mapping[str, str], used: Mapping[Any, Any]) -> str | None:
    """The first entry of the key's toolchain that an executor's report gives another value,
    said as `node v18.20.0, the key has v20.11.1`; what the report leaves out is trusted."""
    for label, want in keyed.items():
        got = used.get(label)
        if got is not None and str(got).strip() != want:
            return f"{label} {str(got).strip()}, the key has {want}"
    return None


class PluginLayer:
    """A plugin's cache as a remote layer (vx.store.remote.layer.RemoteLayer): `has(key) ->
    bool`, `get(key) -> bytes | None` (the artifact) and `put(key, data)`, called from pool
    threads. Whatever one raises is a failed remote operation, which the layered store turns
    into a miss or a skipped upload, warned once: a plugin's cache never fails a build."""

    def __init__(self, name: str, cache: Any):
        from vx.store.remote.layer import RemoteSettings

        self.name, self.cache = name, cache
        self.settings = RemoteSettings(kind="plugin", url=f"plugin://{name}", upload="always")

    def _call(self, method: str, *args: Any) -> Any:
        from vx.store.remote.layer import SERVER_ERROR, RemoteFailure

        try:
            return getattr(self.cache, method)(*args)
        except _THROWN as exc:
            text = str(exc).splitlines()[0] if str(exc) else ""
            said = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            raise RemoteFailure(
                SERVER_ERROR,
                masked(f"plugin '{self.name}' failed in its cache's `{method}`: {said}"),
            ) from None

    def has(self, key: str) -> Any:
        from vx.store.remote.layer import Found

        return Found() if self._call("has", key) else None

    def get(self, key: str, sink: Any) -> Any:
        from vx.store.remote.layer import BAD_RESPONSE, Found, RemoteFailure

        data = self._call("get", key)
        if data is None:
            return None
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RemoteFailure(
                BAD_RESPONSE, f"plugin '{self.name}': its cache's `get` returned {_shown(data)}"
            )
        sink.write(bytes(data))
        return Found(size=len(data))

    def put(self, key: str, src: Any, size: int, duration_ms: float) -> None:
        self._call("put", key, src.read())

    def close(self) -> None:
        if callable(getattr(self.cache, "close", None)):
            try:
                self.cache.close()
            except _THROWN:  # an observer's end: nothing left to fail
                pass
