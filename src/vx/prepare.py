"""A `vx run` up to its first command: discover, load the configs, build the graph, make every
task's plan and key, open the cache and probe it (`prepare`); `--dry` stops here (`dry_plan`).

The result is `Prepared`, the world read once, which `vx.pipeline.execute` runs. It never prints:
everything goes out as events or values.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from msgspec import Struct

from vx.config import loader as config
from vx.errors import ConfigError, UsageError, VxError
from vx.events import PlannedTask
from vx.model import (
    ROOT_PROJECT,
    CachePolicy,
    RemoteExecution,
    ScheduleConfig,
    TaskGraph,
    TaskId,
    TaskPlan,
    Workspace,
)
from vx.plan import origins
from vx.plan.graph import Selection, build_graph
from vx.plan.ownership import refuse_overlaps
from vx.plan.tasks import RunOptions, default_timeout, make_plans, package_of
from vx.runlock import RunLock
from vx.stages import Stages
from vx.workspace import discover as workspace

if TYPE_CHECKING:
    from vx.files.index import FileIndex
    from vx.model import (
        CacheRetention,
        ProjectConfig,
        RemoteCacheConfig,
        WorkspaceConfig,
    )
    from vx.plugins.host import Host, PluginLayer
    from vx.store.layered import LayeredStore
    from vx.store.local import Entry, LocalStore, Opening
    from vx.store.policy import CachePlan
    from vx.store.remote.layer import RemoteLayer, RemoteSettings


class Selectors(Struct, frozen=True):
    """Which projects a run covers, as typed: `--filter` selectors, Nx's `-p` and `--exclude`."""

    filters: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.filters or self.projects or self.exclude)

    def said(self) -> list[str]:
        """The selection as typed, for the line that says it selects nothing."""
        return [
            *(f"--filter={t}" for t in self.filters),
            *(f"-p {p}" for p in self.projects),
            *(f"--exclude {p}" for p in self.exclude),
        ]


class RunRequest(Struct, frozen=True):
    """What `vx run` was asked for, before anything is read."""

    cwd: Path
    names: tuple[str, ...]
    all: bool = False
    select: Selectors = Selectors()  # `--filter`, `-p`, `--exclude`
    affected: str | None = None  # `--affected`: "" for the default base, else the ref
    forward_args: tuple[str, ...] = ()
    concurrency: str | None = None
    continue_mode: str = "deps-ok"
    download: str = "all"  # --download: remote-executed outputs fetched (all | toplevel | none)
    no_cache: bool = False
    force: bool = False
    cache_dir: str | None = None
    timeout_ms: int | None = None
    retries: int | None = None
    cache_spec: str | None = None  # `--cache local:rw,remote:r`
    dry: bool = False  # planning only: the remote is probed, never downloaded from
    verify: str | None = (
        None  # --verify=inputs: cached tasks execute traced (no cache reads), saves as usual
    )
    framework_inference: bool = True  # `--framework-inference=false` (turbo's flag)
    configuration: str | None = None  # Nx's `--configuration c`
    fast_paths: bool = (
        True  # VX_FASTPATH=0: no hit lane, no first wave (the result must not change)
    )
    lend_terminal: bool = True  # an interactive task may have vx's terminal; not under --ui=tui
    # `--exclude-dependencies[=names]` / `--only`: None off, () every edge, else task names
    exclude_deps: tuple[str, ...] | None = None
    frozen: bool = (
        False  # `--frozen`: the code configs as vx-lock.json holds them, no Node for them
    )


class Prepared(Struct):
    """The world read once: workspace, graph, plans and the batched cache probe."""

    ws: Workspace
    graph: TaskGraph
    plans: dict[TaskId, TaskPlan]
    index: FileIndex
    store: LocalStore | LayeredStore | None
    hits: Mapping[str, Entry]
    concurrency: int
    broad: bool
    cache_dir: Path
    policy: CachePolicy = CachePolicy()
    store_dir: Path | None = None  # entries and artifacts, when not in cache_dir
    remote: LayeredStore | None = None  # when a remote layer is on (also `store`)
    remote_hits: frozenset[str] = frozenset()  # `--dry` only: keys the remote holds
    notices: tuple[tuple[str, str], ...] = ()  # (message, info | warning)
    retention: CacheRetention | None = None  # the workspace's cacheRetention
    configs: Mapping[
        str, ProjectConfig
    ] = {}  # package -> ProjectConfig, as loaded (--verify speaks each one's file)
    # `--exclude-dependencies`: the whole graph the keys were taken on (`graph` is what
    # runs), and each task that lost an edge -> the dependency it no longer waits for
    keyed_graph: TaskGraph | None = None
    cut: Mapping[TaskId, TaskId] = {}
    schedule: ScheduleConfig = ScheduleConfig()  # the workspace's `schedule`
    # the REAPI server remote tasks run on, and its capacity and bounds
    remote_exec: RemoteSettings | None = None
    remote_config: RemoteExecution = RemoteExecution()
    plugins: Host | None = None  # the workspace's plugins (vx.plugins.host), when it declares any


class Knobs(Struct, frozen=True):
    """The run's settings, each merged once from the request, the workspace config (as the
    plugins' `config` hooks left it) and the host's environment: the steps of `prepare` read them
    here, never from the config. A bad `--cache` or VX_CACHE_SCOPE is refused when the cache is
    planned (`_cache_plan`) and a bad `--concurrency` last (`width`), where a run always refused
    them: of two mistakes, the same one is told."""

    cache_dir: Path  # --cache-dir > cacheDir > VX_CACHE_DIR > <root>/.vx/cache
    shared_store: bool  # entries go to the repository's shared store (no cache dir is named)
    affected_base: str | None  # the ref `--affected` compares with by default
    workspace_reads: tuple[str, ...]  # what the workspace config read: `--affected` on it
    exclusive_outputs: bool  # `rules.exclusiveOutputs`
    timeout_ms: int | None  # a task's that names none: --timeout > VX_TASK_TIMEOUT > timeout
    retries: int | None  # --retry, for a task that names none
    framework_inference: bool
    sandbox_trace: bool  # `sandbox.trace`, what a task's own `exec.sandbox.trace` overrides
    no_cache: bool
    force: bool  # --force, or --verify (a traced run reads no cache)
    cache_spec: str | None  # --cache
    remote_cache: RemoteCacheConfig | None
    cache_scope: str | None  # `cacheScope` (VX_CACHE_SCOPE wins, in `_cache_plan`)
    remote_execution: RemoteExecution  # `remoteExecution`, its defaults when absent
    retention: CacheRetention | None
    schedule: ScheduleConfig
    concurrency: str | None  # --concurrency as typed (N or N%), read by `width`
    workspace_concurrency: int | None  # `concurrency`

    @classmethod
    def resolve(
        cls, req: RunRequest, ws: Workspace, ws_config: WorkspaceConfig, host_env: Mapping[str, str]
    ) -> Knobs:
        """The knobs of a run of `req`, once the plugins' hooks shaped the workspace and its
        config (a `cacheDir` a hook set is where the cache goes)."""
        from vx.store import location

        return cls(
            cache_dir=location.cache_dir(req.cwd, req.cache_dir, ws, ws_config, host_env),
            shared_store=location.shares(req.cache_dir, ws_config, host_env),
            affected_base=ws_config.affected_base,
            workspace_reads=ws_config.reads,
            exclusive_outputs=ws_config.exclusive_outputs,
            timeout_ms=default_timeout(req.timeout_ms, ws_config.timeout_ms, host_env),
            retries=req.retries,
            framework_inference=req.framework_inference,
            sandbox_trace=ws_config.sandbox_trace,
            no_cache=req.no_cache,
            force=req.force or req.verify is not None,
            cache_spec=req.cache_spec,
            remote_cache=ws_config.remote_cache,
            cache_scope=ws_config.cache_scope,
            remote_execution=ws_config.remote_execution or RemoteExecution(),
            retention=ws_config.cache_retention,
            schedule=ws_config.schedule,
            concurrency=req.concurrency,
            workspace_concurrency=ws_config.concurrency,
        )

    def width(self) -> int:
        """How many tasks run at once: `--concurrency` (N, or N% of the CPUs), else the
        workspace's `concurrency`, else the CPUs (cgroup-aware)."""
        from vx.plan import environment

        cpus = environment.default_concurrency()
        if self.concurrency is not None:
            return environment.parse_concurrency(self.concurrency, cpus)
        return self.workspace_concurrency or cpus


# The steps of `prepare` hand these to each other: load -> graph -> keys -> open -> probe.


class World(Struct, frozen=True):
    """What the load step read: the workspace (the plugins' `discover` hooks applied), the run's
    knobs, each project's config and the plugins; the projects whose config was refused, with
    the refusal (each an empty config in `configs` until the graph step settles its scope)."""

    ws: Workspace
    knobs: Knobs
    configs: dict[str, ProjectConfig]
    host: Host | None
    broken: dict[str, ConfigError] = {}


class Selected(Struct, frozen=True):
    """What the graph step chose: the graph the request selects, the tasks that add to their
    upstream's outputs, whether the selection is broad (it streams as such), and the notice
    that nothing is affected."""

    graph: TaskGraph
    additive: frozenset[TaskId]
    broad: bool
    notice: str | None
    warnings: tuple[str, ...] = ()  # each broken config outside the run's scope (vx.plan.scope)
    unordered: frozenset[TaskId] = frozenset()  # share outputs with a task no edge orders


class Site(Struct, frozen=True):
    """Where the run's cache lives: entries and artifacts (with the note when an unsafe home kept
    them in the workspace), and where the memos go (None: none this run)."""

    store_dir: Path
    note: str | None
    memo_dir: Path | None


class Keyed(Struct, frozen=True):
    """Every task's plan and key, and the graph that runs. `--exclude-dependencies` keys on the
    whole graph (`keyed_graph`), then cuts: `cut` maps each task that lost an edge to the
    dependency it no longer waits for, and `run_plans` are the plans of what runs."""

    plans: dict[TaskId, TaskPlan]
    graph: TaskGraph
    run_plans: Mapping[TaskId, TaskPlan]
    keyed_graph: TaskGraph | None = None
    cut: Mapping[TaskId, TaskId] = {}


class Cache(Struct):
    """The run's cache layers and axes, the plugins' layers, and the local store's index opening
    on its own thread (None: the run reads and writes no cache)."""

    plan: CachePlan
    layers: list[PluginLayer]
    opening: Opening | None


class Opened(Struct):
    """The local store once its index is open (None: no cache, or a full disk turned it off), the
    local axes, and the notice that it was turned off."""

    store: LocalStore | None
    policy: CachePolicy
    notice: str | None = None


class Probed(Struct):
    """The store the run uses (the remote layers behind the local one when they are on), the
    local hits and, under `--dry`, the keys the remote holds."""

    store: LocalStore | LayeredStore | None
    hits: dict[str, Entry]
    remote: LayeredStore | None = None
    remote_hits: frozenset[str] = frozenset()


def prepare(
    req: RunRequest,
    host_env: Mapping[str, str],
    stages: Stages,
    lock: RunLock | None = None,
    warn: Callable[[str], None] | None = None,
) -> Prepared:
    """Everything up to (not including) execution; `--dry` stops here. With `lock`, take the run
    lock as soon as the root is known, so the probe sees what the previous run saved. Plugins
    set up here are torn down again if planning fails, and what they warned meanwhile goes to
    `warn` before the failure is told."""
    loaded: list = []
    try:
        return _prepare(req, host_env, stages, lock, loaded)
    except BaseException:
        for host in loaded:
            for message in host.teardown():
                if warn is not None:
                    warn(message)
        raise


def _prepare(
    req: RunRequest, host_env: Mapping[str, str], stages: Stages, lock: RunLock | None, loaded: list
) -> Prepared:
    from vx.files import index as files

    warmed: dict[RemoteSettings, RemoteLayer] = {}  # remote layers opening early (`_warm`)
    with stages("discover"):
        ws = workspace.discover(req.cwd)
        _refuse_nested_run(ws, host_env)
        if lock is not None:
            lock.acquire(ws.root)
        pending = files.FileIndex.start(ws.root)  # git lists on the other core while configs load
    try:
        with stages("load configs"):
            ws_config = config.load_workspace(ws.root, host_env)
            host = None
            if ws_config.plugins:  # a workspace without plugins never imports the seam
                from vx.plugins.shaped import load_plugins

                host, ws_config = load_plugins(ws.root, ws_config, host_env, loaded)
                if host.has("discover"):
                    ws = host.discovered(ws)
            knobs = Knobs.resolve(req, ws, ws_config, host_env)
            warmed.update(_warm(knobs, host, host_env))  # before the projects' configs load
            world = _load(req, ws, ws_config, host, host_env, knobs)
        chosen = _graph(req, world, host_env, stages)
    except BaseException:
        pending.close()
        _close(warmed)
        raise
    try:
        with stages("git enumeration"):
            index = pending.finish(world.knobs.cache_dir / "files.db")
        site = _site(world, index, host_env)
        keyed, cache = _keys(req, world, chosen, index, site, host_env, stages)
        opened = _open(cache, knobs.cache_dir, stages)
        probed = _probe(req, keyed, cache, opened.store, stages, warmed)
    finally:
        _close(warmed)  # what the run did not take (`_open_remote` takes what it uses)
    concurrency = knobs.width()
    told = [(m, "warning") for m in (*cache.plan.notices, site.note, opened.notice) if m]
    told += [(chosen.notice, "info")] if chosen.notice else []
    told += [(line, "warning") for line in chosen.warnings]
    return Prepared(
        ws=world.ws,
        graph=keyed.graph,
        plans=keyed.plans,
        index=index,
        store=probed.store,
        hits=probed.hits,
        concurrency=concurrency,
        broad=chosen.broad,
        cache_dir=knobs.cache_dir,
        policy=opened.policy,
        store_dir=site.store_dir,
        remote=probed.remote,
        remote_hits=probed.remote_hits,
        notices=tuple(told),
        retention=knobs.retention,
        configs=world.configs,
        keyed_graph=keyed.keyed_graph,
        cut=keyed.cut,
        schedule=knobs.schedule,
        remote_exec=_remote_exec(keyed.run_plans, knobs, host_env),
        remote_config=knobs.remote_execution,
        plugins=world.host,
    )


def _load(
    req: RunRequest,
    ws: Workspace,
    ws_config: WorkspaceConfig,
    host: Host | None,
    host_env: Mapping[str, str],
    knobs: Knobs,
) -> World:
    """The load step, once the workspace config is read and the run's knobs resolved: each
    project's config as the plugins' `project` hooks shape it."""
    shape = host.shape_project if host is not None and host.has("project") else None
    broken: dict[str, ConfigError] = {}
    return World(ws, knobs, config.load_all(ws, host_env, shape, broken, req.frozen), host, broken)


def _graph(req: RunRequest, world: World, host_env: Mapping[str, str], stages: Stages) -> Selected:
    """The graph step: the tasks the request selects (`--filter`, `--affected`, the plugins'
    `graph` hooks), and the requests no graph can honour refused before anything is keyed."""
    ws, configs, host = world.ws, world.configs, world.host
    notice = None
    with stages("build graph"):
        cwd_pkg = package_of(ws, req.cwd)
        projects, unmatched = filtered(req, ws, configs, cwd_pkg) if req.select else (None, "")
        warnings = _scoped(req, world, cwd_pkg, projects) if world.broken else ()
        everything = req.all or req.affected is not None
        selection = Selection(req.names, cwd_pkg, everything, projects, req.configuration)
        try:
            graph = build_graph(ws, configs, selection)
        except VxError as exc:  # a task only a config not read declares is not known
            if world.broken:
                skipped = ", ".join(sorted(e.file for e in world.broken.values()))
                exc.facts += (f"not read (broken, outside this run's scope): {skipped}",)
            raise
        if projects is not None and not graph.requested:  # turbo's "no tasks were executed"
            from vx.plan.filters import nothing_to_run

            notice = nothing_to_run(req.select.said(), projects, req.names)
        elif req.affected is not None:
            graph, notice = _affected(req, world, graph, cwd_pkg, host_env)
        notice = "\n".join(n for n in (unmatched, notice) if n) or None
        if host is not None and host.has("graph"):
            graph = host.shape_graph(graph, configs)
        for tid in graph.nodes if world.broken else ():  # the scope held: never reached
            if tid.package in world.broken:
                raise world.broken[tid.package]
        unordered: set[TaskId] = set()
        additive = refuse_overlaps(graph.nodes, configs, world.knobs.exclusive_outputs, unordered)
    _refuse_group_only_args(graph, req)
    if req.exclude_deps:
        from vx.plan.graph import refuse_unknown_exclusions

        refuse_unknown_exclusions(graph, frozenset(req.exclude_deps))
    return Selected(
        graph, additive, _broad(req, graph, cwd_pkg), notice, warnings, frozenset(unordered)
    )


def _scoped(
    req: RunRequest, world: World, cwd_pkg: str, projects: frozenset[str] | None
) -> tuple[str, ...]:
    """The broken configs settled against the run's scope (vx.plan.scope): the first one in it
    refused, a warning line for each of the others. Everything is in scope for `--all`,
    `--affected`, a plugin's `graph` hook and a bare task name from the root."""
    from vx.plan import scope

    named = {n.rpartition("#")[0] or ROOT_PROJECT for n in req.names if "#" in n}
    host = world.host
    seeds: set[str] | None = None
    if req.all or req.affected is not None or (host is not None and host.has("graph")):
        seeds = None
    elif projects is not None:
        seeds = set(projects) | named
    elif cwd_pkg != ROOT_PROJECT:
        seeds = {cwd_pkg} | named
    elif req.names and all("#" in n for n in req.names):
        seeds = named
    reached = None if seeds is None else scope.reached(world.ws, world.configs, seeds)
    return scope.settle(world.broken, reached)


def _broad(req: RunRequest, graph: TaskGraph, cwd_pkg: str) -> bool:
    """A selection across projects. `vx run web#build` at the root names its tasks one by one:
    what the user asked for streams as it would from web's own directory."""
    named = bool(req.names) and all("#" in name for name in req.names)
    return (
        req.all
        or bool(req.select)
        or (
            cwd_pkg == ROOT_PROJECT
            and not named
            and any(t.package != ROOT_PROJECT for t in graph.requested)
        )
    )


def _site(world: World, index: FileIndex, host_env: Mapping[str, str]) -> Site:
    """Where the cache lives, once the listing says what is tracked and which remotes the
    repository has."""
    from vx.store import location

    cache_dir, root = world.knobs.cache_dir, world.ws.root
    location.refuse_shipped_state(index, root, cache_dir)
    store_dir, note = cache_dir, None
    if world.knobs.shared_store:
        store_dir, note = location.store_dir(
            cache_dir, root, index.toplevel, index.remotes, host_env
        )
    # The memos (lockfile shares, toolchains) go only into a cache dir that was there before the
    # store's thread could make it, so that whether a first run writes them never hangs on a race.
    return Site(store_dir, note, cache_dir if cache_dir.is_dir() else None)


def _keys(
    req: RunRequest,
    world: World,
    chosen: Selected,
    index: FileIndex,
    site: Site,
    host_env: Mapping[str, str],
    stages: Stages,
) -> tuple[Keyed, Cache]:
    """The keys step, and the cache planned and opening. The index opens on a thread of its own
    while the keys are made (SQLite makes and sets up its files without holding the
    interpreter); a plugin's cache layers are asked for after its key hook, as always, and the
    index then opens once the keys are made."""
    plugin_layers = world.host is not None and world.host.has("cache")
    cache = None if plugin_layers else _cache(world, site, host_env)
    try:
        keyed = _keyed(req, world, chosen, index, site, host_env, stages)
    except BaseException:
        if cache is not None and cache.opening is not None:
            cache.opening.discard()
        raise
    return keyed, cache if cache is not None else _cache(world, site, host_env)


def _cache(world: World, site: Site, host_env: Mapping[str, str]) -> Cache:
    """The run's cache layers and axes, and the local store opening when the run reads or
    writes a cache at all."""
    host = world.host
    layers = host.cache_layers() if host is not None and host.has("cache") else []
    plan = _cache_plan(world.knobs, host_env, layers)
    opening = None
    if plan.axes.reads or plan.axes.writes:
        from vx.store.local import Opening

        opening = Opening(
            world.knobs.cache_dir, world.ws.root, site.store_dir, fallback=site.note is not None
        )
    return Cache(plan, layers, opening)


def _cache_plan(knobs: Knobs, host_env: Mapping[str, str], layers: list[PluginLayer]) -> CachePlan:
    """The run's cache layers and axes (`vx.store.policy.plan_cache`), the plugins' layers first."""
    from vx.store.policy import cache_scope, plan_cache

    return plan_cache(
        no_cache=knobs.no_cache,
        force=knobs.force,
        spec=knobs.cache_spec,
        cfg=knobs.remote_cache,
        env=host_env,
        scope=cache_scope(knobs.cache_scope, host_env),
        plugins=[layer.settings for layer in layers],
    )


def _keyed(
    req: RunRequest,
    world: World,
    chosen: Selected,
    index: FileIndex,
    site: Site,
    host_env: Mapping[str, str],
    stages: Stages,
) -> Keyed:
    """Every task's plan and key, and the graph that runs (`--exclude-dependencies` keys on the
    whole graph, then cuts)."""
    knobs, host, graph = world.knobs, world.host, chosen.graph
    with stages("keys"):
        opts = RunOptions(
            forward_args=req.forward_args,
            timeout_ms=knobs.timeout_ms,
            retries=knobs.retries,
            cache_dir=site.memo_dir,  # where the memos go (None: none this run)
            store_dir=site.store_dir,
            framework_inference=knobs.framework_inference,
            sandbox_trace=knobs.sandbox_trace,
            remote_execution=knobs.remote_execution,
            plugin_key=host.key_material if host is not None and host.has("key") else None,
        )
        declared = frozenset(n for n, c in world.configs.items() if "build" in c.tasks)
        builds = (declared, frozenset(n for n, c in world.configs.items() if c.nx) - declared)
        plans = make_plans(
            world.ws, graph, index, opts, host_env, chosen.additive, builds, chosen.unordered
        )
        plans = origins.told(plans, graph, world.configs)  # what their warnings will say
    keyed = Keyed(plans, graph, plans)
    if req.exclude_deps is not None:  # keyed on the whole graph above; only the rest runs
        from vx.plan.graph import exclude_dependencies

        schedule = exclude_dependencies(graph, frozenset(req.exclude_deps) or None)
        run_plans = {t: p for t, p in plans.items() if t in schedule.graph.nodes}
        keyed = Keyed(plans, schedule.graph, run_plans, graph, schedule.cut)
    if host is not None and host.has("schedule"):
        from msgspec.structs import replace

        keyed = replace(keyed, graph=replace(keyed.graph, priority=host.weights(keyed.graph)))
    return keyed


def _warm(
    knobs: Knobs, host: Host | None, host_env: Mapping[str, str]
) -> dict[RemoteSettings, RemoteLayer]:
    """The remote layers of a run that will look up, opening now while the configs load and the
    keys are made: REAPI's grpc import and channel, with `GetCapabilities` on a thread; an HTTP
    cache's connections, each on a thread (`Wire.warm`). The run takes them when its store
    opens (`_open_remote`).

    Only a workspace with no cache dir yet (a fresh clone, a new CI runner): a run over an
    existing cache may find every task here and must then load none of grpc. A plugin's cache
    layers come after its key hook, so a workspace with one opens none early; a cache plan
    refused here (a bad `--cache`) is refused where it always is, later."""
    if knobs.no_cache or knobs.force or knobs.cache_dir.exists():
        return {}
    if host is not None and host.has("cache"):
        return {}
    try:  # the cache plan imports nothing of the remote cache where none is configured
        plan = _cache_plan(knobs, host_env, [])
    except VxError:
        return {}
    # every REAPI layer (as before), and an HTTP one only first in the chain: every lookup asks
    # it, a later layer only what the first missed
    read = [s for i, (s, _written) in enumerate(plan.layers) if s.kind == "reapi" or i == 0]
    if not (plan.axes.remote_read and read):
        return {}
    from vx.store import remote

    warmed: dict[RemoteSettings, RemoteLayer] = {}
    for settings in read:
        if settings not in warmed:
            layer = remote.open_layer(settings)
            getattr(layer, "warm", lambda: None)()
            warmed[settings] = layer
    return warmed


def _close(warmed: dict[RemoteSettings, RemoteLayer]) -> None:
    for layer in warmed.values():
        layer.close()
    warmed.clear()


def _open(cache: Cache, cache_dir: Path, stages: Stages) -> Opened:
    """The open step: the local store, once its index is open."""
    policy = CachePolicy(read=cache.plan.axes.reads, write=cache.plan.axes.writes)
    if cache.opening is None:
        return Opened(None, policy)
    with stages("open cache"):
        from vx.store.local import CacheFull

        try:
            return Opened(cache.opening.result(), policy)
        except CacheFull as exc:  # a full disk costs the cache, never the build
            off = f"the cache is off for this run: {exc.message} ({cache_dir}); {exc.hint}"
            return Opened(None, CachePolicy(read=False, write=False), off)


def _probe(
    req: RunRequest,
    keyed: Keyed,
    cache: Cache,
    local: LocalStore | None,
    stages: Stages,
    warmed: dict[RemoteSettings, RemoteLayer] | None = None,
) -> Probed:
    """The probe step: the local hits in one batch, then the remote layers behind the local store
    (`--dry` asks them which keys they hold; a run prefetches what it wants)."""
    if local is None:
        return Probed(None, {})
    hits: dict[str, Entry] = {}
    if cache.plan.axes.local_read:
        with stages("probe"):
            hits = local.probe(p.key for p in keyed.run_plans.values() if p.outputs is not None)
    if cache.plan.remote is None:
        return Probed(local, hits)
    with stages("remote probe" if req.dry else "prefetch"):
        graph = keyed.keyed_graph or keyed.graph
        remote = _open_remote(local, cache.plan, keyed.run_plans, hits, graph, cache.layers, warmed)
        remote_hits: set[str] = set()
        if req.dry and cache.plan.axes.remote_read:
            remote_hits = remote.probe_remote(remote.wanted)
        if not req.dry:
            remote.prefetch(remote.wanted)
    return Probed(remote, hits, remote, frozenset(remote_hits))


def _remote_exec(
    plans: Mapping[TaskId, TaskPlan], knobs: Knobs, host_env: Mapping[str, str]
) -> RemoteSettings | None:
    """The REAPI server for the run's remote tasks, when some task may go remote and one is
    configured (remoteCache.reapi or VX_REAPI_ENDPOINT); else they run here."""
    if not any(p.remote for p in plans.values()):
        return None
    from vx.store import remote

    found = remote.resolve(knobs.remote_cache, host_env)
    if found.settings is None or found.settings.kind != "reapi" or found.problem:
        return None
    return found.settings


def _affected(
    req: RunRequest, world: World, graph: TaskGraph, cwd_pkg: str, host_env: Mapping[str, str]
) -> tuple[TaskGraph, str | None]:
    """Only the requested tasks a change since the base reaches; the notice when none is. A root
    file a plugin claims is answered by its plugin."""
    from vx.plan import affected

    ws, configs, host = world.ws, world.configs, world.host
    root = str(ws.root)
    ref = affected.base_ref(root, req.affected, world.knobs.affected_base, host_env)
    paths = affected.changed_paths(root, ref)
    base = affected.merge_base(root, ref)
    claims = host.claimed_affected(ws, base) if host is not None and host.claims else None
    seeded = affected.seeds(ws, configs, paths, base, claims, world.knobs.workspace_reads)
    keep = affected.reached(graph, seeded)
    if not keep:
        return build_graph(ws, configs, Selection((), cwd_pkg)), f"nothing affected since {ref}"
    if len(keep) == len(graph.requested):
        return graph, None
    return build_graph(
        ws, configs, Selection(tuple(f"{t.package}#{t.task}" for t in keep), cwd_pkg)
    ), None


def filtered(req: RunRequest, ws: Workspace, configs, cwd_pkg: str) -> tuple[frozenset[str], str]:
    """The projects `--filter`, `-p` and `--exclude` select, and the line that says which
    patterns matched no project ("" when all did). In an Nx workspace `-p` and `--exclude` take
    Nx's patterns; elsewhere each is a `--filter` (`!` for an exclude)."""
    from vx.plan import filters

    cwd_rel = os.path.relpath(req.cwd, ws.root)
    sel = req.select
    texts = list(sel.filters)
    nx = bool(sel.projects or sel.exclude) and os.path.lexists(os.path.join(ws.root, "nx.json"))
    if not nx:
        texts += [*sel.projects, *(f"!{p}" for p in sel.exclude)]
    chosen = (
        filters.select(
            [filters.parse(t) for t in texts],
            ws,
            configs,
            cwd_pkg,
            "" if cwd_rel == "." else cwd_rel,
        )
        if texts
        else frozenset(ws.packages)
    )
    if not nx:
        return chosen, ""
    picked, unmatched = filters.nx_select(sel.projects, sel.exclude, ws, configs)
    return chosen & picked, filters.unmatched_line(unmatched)


def _open_remote(
    local,
    cache,
    plans: Mapping[TaskId, TaskPlan],
    hits: Mapping[str, object],
    graph: TaskGraph,
    plugin_layers=(),
    warmed: dict[RemoteSettings, RemoteLayer] | None = None,
):
    """Put the remote layers (the plugins' `plugin_layers`, then the configured remote) behind
    the local store; it learns which keys the run wants — not the keys taken up front for tasks
    keyed late: those download once keyed. A layer `_warm` opened early is taken from `warmed`."""
    from vx.plan.tasks import late_tasks
    from vx.store.layered import LayeredStore, wanted_from
    from vx.store.remote import open_layer

    opened = []
    for settings, written in cache.layers:
        layer = next((p for p in plugin_layers if p.settings is settings), None)
        if layer is None and warmed and settings in warmed:
            layer = warmed.pop(settings)
            if cache.scope is not None:
                from vx.store.remote.scope import ScopedLayer

                layer = ScopedLayer(layer, cache.scope)
        elif layer is None:
            layer = open_layer(settings, cache.scope)
        elif (
            cache.scope is not None
        ):  # a plugin's layer keeps a scope's writes apart as a server does
            from vx.store.remote.scope import ScopedLayer

            layer = ScopedLayer(layer, cache.scope)
        opened.append((layer, written))
    if len(opened) == 1:
        layer = opened[0][0]
    else:
        from vx.store.remote.chain import ChainLayer

        layer = ChainLayer(opened)
    layered = LayeredStore(local, layer, cache.axes)
    late = late_tasks(graph)
    layered.wanted = wanted_from(plans, hits, later=late)
    return layered


def _refuse_nested_run(ws: Workspace, host_env: Mapping[str, str]) -> None:
    """A `vx run` from inside a task of the same workspace would wait on its own lock."""
    if host_env.get("VX_RUN_WORKSPACE") == str(ws.root):
        raise UsageError(
            f"`vx run` inside a task of the same workspace (from {host_env.get('VX_RUN_TASK', '?')})",
            hint="make the inner task a dependsOn entry of the outer one instead",
        )


def _refuse_group_only_args(graph: TaskGraph, req: RunRequest) -> None:
    if req.forward_args and all(graph.nodes[t].is_group for t in graph.requested):
        raise UsageError(
            "arguments after `--` need a task with a command; every requested task is a group",
            hint="name a task that has `exec`, or drop the arguments",
        )


# ---------------------------------------------------------------- dry


def dry_plan(prep: Prepared) -> list[PlannedTask]:
    """Predict each task's cache status without executing anything."""
    from vx.engine import taskcache

    rows = []
    lazy = taskcache.not_started(prep.graph, prep.plans, prep.hits)
    for tid in prep.graph.order:
        node, plan = prep.graph.nodes[tid], prep.plans[tid]
        if node.is_group:
            predicted = "group"
        elif tid in lazy:
            predicted = "not-started"
        elif plan.outputs is None or prep.store is None:
            predicted = "no-cache"
        elif plan.key in prep.hits:
            predicted = "hit-local"
        else:
            predicted = "hit-remote" if plan.key in prep.remote_hits else "miss"
        # A task's files, and a keyed implicit group's (what its dependants' keys fold through it)
        keyed = plan.outputs is not None or node.config.implicit
        inputs = plan.inputs.files if plan.inputs is not None and keyed else None
        rows.append(
            PlannedTask(
                tid,
                plan.command,
                plan.key,
                predicted,
                node.deps,
                node.project_dir,
                inputs,
                node.config.implicit,
            )
        )
    return rows
