"""Decide everything about every task before anything runs: inputs, key, command, env, outputs.

Keys are static (no early cutoff), so the whole plan is known up front; `--dry` is this module
with nothing executed, and the store is probed for every key in one batch. The exception is
`late_tasks`: a task after an uncached task (of any project) is keyed again by
`rekeyed` when it becomes ready.
"""

from __future__ import annotations

import bisect
import os
import re
from pathlib import Path
from typing import Callable, Mapping

from msgspec import Struct

from vx.files import index as files
from vx.files.globs import GlobSet
from vx.files.outputs import AdditiveOutputs, InputQuery, OutputSpec
from vx.model import (
    ROOT_PROJECT,
    HashRecord,
    InputSet,
    RemoteExecution,
    TaskGraph,
    TaskId,
    TaskNode,
    TaskPlan,
    Workspace,
)
from vx.plan import environment, keys, lifecycle

MAX_TIMEOUT_MS = 2**31 - 1


class RunOptions(Struct, frozen=True):
    """The settings that shape plans (not the cache policy or the flow), as the run resolved them."""

    forward_args: tuple[str, ...] = ()
    timeout_ms: int | None = None  # a task's that names none (`default_timeout`)
    retries: int | None = None
    cache_dir: Path | None = None  # the workspace's: memos (lockfile shares, toolchains)
    # entries and artifacts: a sandbox walls them off; else in cache_dir
    store_dir: Path | None = None
    framework_inference: bool = (
        True  # `--framework-inference=false`: a turbo.json task keys no framework variables
    )
    sandbox_trace: bool = (
        True  # vx.workspace.json `sandbox.trace`, what a task's own `exec.sandbox.trace` overrides
    )
    remote_execution: RemoteExecution | None = None  # vx.workspace.json `remoteExecution`
    # the plugins' `key` hooks: (node, plan) -> (sorted (`plugin/name`, value), the claimed
    # fingerprint files that leave the task's key); None without any
    plugin_key: (
        Callable[[TaskNode, TaskPlan], tuple[tuple[tuple[str, str], ...], frozenset[str]]] | None
    ) = None


def make_plans(
    ws: Workspace,
    graph: TaskGraph,
    index: files.FileIndex,
    opts: RunOptions,
    host_env: Mapping[str, str],
    additive: frozenset[TaskId] = frozenset(),
    builds: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
    unordered: frozenset[TaskId] = frozenset(),
) -> dict[TaskId, TaskPlan]:
    """Plan every node in topological order, so upstream keys exist before they are folded;
    `additive` tasks add to their upstream's outputs (`unordered` ones also to outputs of a task
    no edge orders them with); `builds`, for a sandbox's hint: the projects that declare a
    `build`, and those whose implicit one keys nothing of its own (`grants.plan_sandbox`)."""
    from vx.files import lockfile

    memo_dir = str(opts.cache_dir / "lockfiles") if opts.cache_dir is not None else None
    by_release: dict[frozenset[str], dict[str, tuple[str, tuple]]] = {}

    def fingerprints_without(claimed: frozenset[str]) -> dict[str, tuple[str, tuple]]:
        """Each project dir's fingerprint with the `claimed` files (a plugin keys them) left out."""
        if claimed not in by_release:
            settings = files.fingerprint(ws.root, index, skip=(*lockfile.LOCKFILES, *claimed))
            by_release[claimed] = lockfile.fingerprints(
                ws.root, ws.packages.values(), index, settings, memo_dir, skip=claimed
            )
        return by_release[claimed]

    fingerprints = fingerprints_without(frozenset())
    from vx.plan.toolchain import Toolchain

    tools = Toolchain(str(opts.cache_dir) if opts.cache_dir is not None else None, str(ws.root))
    scripts = ScriptEnv(ws, tools, host_env)
    nested = nested_dirs(ws)
    members = frozenset(p.dir for p in ws.packages.values())
    # An additive Nx target saves its whole output tree only when every other writer there is in
    # its key: not below an uncached task (it may write what no key folds) nor beside a task no
    # edge orders (its files, maybe half written, are no function of this key): stale restores.
    rewritten = {t for t, task in late_tasks(graph).items() if task} if additive else set()
    plans: dict[TaskId, TaskPlan] = {}
    for tid in graph.order:
        node = graph.nodes[tid]
        fingerprint = fingerprints.get(node.project_dir) or fingerprints[""]
        if node.is_group and node.config.cache is None:
            plans[tid] = _group_plan(node, plans)
        elif node.is_group:
            plans[tid] = _keyed_group_plan(
                node,
                index,
                host_env,
                fingerprint,
                nested.get(node.project_dir, ()),
                plans,
                _group_framework(ws, node, opts),
            )
        else:
            plans[tid] = _task_plan(
                ws,
                node,
                index,
                opts,
                host_env,
                fingerprint,
                nested.get(node.project_dir, ()),
                plans,
                members,
                tid in additive,
                tools,
                scripts,
                tid in additive and tid not in rewritten and tid not in unordered,
            )
            if opts.plugin_key is not None:
                plans[tid] = _with_plugin_key(
                    node, plans[tid], opts.plugin_key, fingerprints_without
                )
            if node.config.exec is not None and node.config.exec.sandbox is not None:
                plans[tid] = _with_sandbox(ws, graph, node, plans[tid], opts, host_env, builds)
    tools.save()
    return plans


def _with_plugin_key(node: TaskNode, plan: TaskPlan, material, fingerprints_without) -> TaskPlan:
    """The plan keyed again with what the plugins' `key` hooks add (nothing: as it was). A
    claimed fingerprint file leaves the key only here, for a task its plugin keyed something of:
    the plugin's material stands for it then."""
    if plan.record is None:
        return plan
    folded, released = material(node, plan)
    if not folded:
        return plan
    from msgspec.structs import replace

    record = replace(plan.record, plugin=folded)
    if released:
        table = fingerprints_without(released)
        fingerprint, lock = table.get(node.project_dir) or table[""]
        record = replace(record, fingerprint=fingerprint, lockfile=lock)
    return replace(plan, key=keys.task_key(record), record=record)


def _with_sandbox(
    ws: Workspace,
    graph: TaskGraph,
    node: TaskNode,
    plan: TaskPlan,
    opts: RunOptions,
    host_env: Mapping[str, str],
    builds: tuple[frozenset[str], frozenset[str]],
) -> TaskPlan:
    """Resolve `exec.sandbox` now, so a grant no run could honour is refused before anything runs."""
    from msgspec.structs import replace

    from vx.sandbox import grants

    cfg = node.config
    assert cfg.exec is not None and cfg.exec.sandbox is not None  # make_plans asks only then
    folded = (
        grants.folded_packages(graph.nodes, node.id, keys.select_upstream) if cfg.cache else None
    )
    spec = grants.plan_sandbox(
        cfg.exec.sandbox,
        root=ws.root,
        project_rel=node.project_dir,
        task=str(node.id),
        task_name=node.id.task,
        projects={p.dir: p.name for p in ws.packages.values()},
        linked=grants.linked_packages(ws.packages, node.id.package),
        folded=folded,
        cache_dir=opts.store_dir if opts.store_dir is not None else opts.cache_dir,
        home=host_env.get("HOME"),
        builds=builds[0],
        passed_over=builds[1],
    )
    traced = cfg.exec.sandbox.trace if cfg.exec.sandbox.trace is not None else opts.sandbox_trace
    return replace(plan, sandbox=spec if traced else replace(spec, trace=False))


def _group_plan(node: TaskNode, plans: Mapping[TaskId, TaskPlan]) -> TaskPlan:
    key = keys.group_key((str(dep), plans[dep].key) for dep in node.deps)
    return TaskPlan(
        key=key, inputs=None, command=None, env={}, timeout_ms=None, retries=0, outputs=None
    )


def _keyed_group_plan(
    node: TaskNode,
    index,
    host_env,
    fingerprint: tuple,
    nested: tuple[str, ...],
    plans: Mapping[TaskId, TaskPlan],
    framework: str = "",
) -> TaskPlan:
    """An implicit group (a turbo task without its script): it runs nothing, and its key
    folds its project's files as a task's would, so its dependants' keys move with them;
    `framework`'s variables too (turbo keys them for a task whose script the package lacks)."""
    query = _input_query(node, nested)
    inputs = _inputs(index, query)
    declared = node.config.cache.input_env if node.config.cache else ()
    inferred = environment.inferred(framework, declared, host_env) if framework else ()
    record = _record(
        node,
        index,
        fingerprint,
        plans,
        inputs,
        (),
        environment.keyed(declared, inferred, {}, host_env),
    )
    return TaskPlan(keys.task_key(record), inputs, None, {}, None, 0, None, record=record)


def _group_framework(ws: Workspace, node: TaskNode, opts: RunOptions) -> str:
    """The framework a turbo.json task without its script keys the variables of: its package's,
    as for the task the script would make (vx's own implicit `build` infers none)."""
    cache = node.config.cache
    if cache is None or not cache.turbo_globs or not opts.framework_inference:
        return ""
    pkg = ws.packages.get(node.id.package)
    return pkg.framework if pkg is not None else ""


def _record(
    node: TaskNode,
    index,
    fingerprint: tuple,
    plans: Mapping[TaskId, TaskPlan],
    inputs,
    forward: tuple[str, ...],
    env: tuple,
    runtime: tuple = (),
) -> HashRecord:
    cfg = node.config
    upstream = keys.select_upstream(
        node.id, node.deps, cfg.cache.input_tasks if cfg.cache else None
    )
    return HashRecord(
        task_id=str(node.id),
        fingerprint=fingerprint[0],
        package_json=index.identity(_join(node.project_dir, "package.json")),
        config=cfg.canonical,
        forward_args=forward,
        env=env,
        upstream=tuple(
            sorted(((str(d), plans[d].key) for d in upstream), key=lambda p: (p[1], p[0]))
        ),
        files=inputs.files,
        lockfile=fingerprint[1],
        runtime=runtime,
    )


def _task_plan(
    ws,
    node: TaskNode,
    index,
    opts: RunOptions,
    host_env,
    fingerprint: tuple,
    nested: tuple[str, ...],
    plans: Mapping[TaskId, TaskPlan],
    members: frozenset[str] = frozenset(),
    additive: bool = False,
    tools=None,
    scripts: ScriptEnv | None = None,
    whole: bool = False,
) -> TaskPlan:
    cfg = node.config
    assert cfg.exec is not None
    query = _input_query(node, nested)
    inputs = _inputs(index, query)
    forward = opts.forward_args if node.requested else ()
    command = _forwarded(cfg.exec.command, forward) if forward else cfg.exec.command
    declared = cfg.cache.input_env if cfg.cache else ()
    root = str(ws.root)
    env, inferred = _task_env(root, node, opts, host_env, declared)
    if cfg.exec.script and scripts is not None:
        _with_script_env(env, scripts.variables(node, env["PATH"], forward), cfg.exec.env.define)
    runtime = _runtime(node, tools, env["PATH"], root, host_env) if tools is not None else ()
    record = _record(
        node,
        index,
        fingerprint,
        plans,
        inputs,
        forward,
        environment.keyed(declared, inferred, env, host_env),
        runtime,
    )
    outputs = _outputs(node, query, members, index, additive, whole)
    timeout = cfg.exec.timeout_ms if cfg.exec.timeout_ms is not None else opts.timeout_ms
    retries = cfg.exec.retries if cfg.exec.retries is not None else (opts.retries or 0)
    pkg = ws.packages.get(node.id.package)
    hint = (
        pkg.framework
        if pkg is not None and cfg.cache is not None and not cfg.exec.env.framework
        else ""
    )
    remote, platform = _remote(cfg, outputs, opts.remote_execution)
    return TaskPlan(
        keys.task_key(record),
        inputs,
        command,
        env,
        timeout,
        retries,
        outputs,
        record=record,
        framework=hint,
        remote=remote,
        platform=platform,
    )


def _inputs(index, query: InputQuery) -> InputSet:
    """The files the query takes, as the listing has them."""
    return index.inputs(
        query.project_dir,
        query.globs,
        query.workspace_globs,
        excluded=query.excluded,
        nested=query.nested,
        reach=query.reach,
        links_as_links=query.links_as_links,
    )


def _task_env(
    root: str,
    node: TaskNode,
    opts: RunOptions,
    host_env: Mapping[str, str],
    declared: tuple[str, ...],
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The task's environment, and the variables its framework reads that pass through with it
    (inferred)."""
    assert node.config.exec is not None
    exec_env = node.config.exec.env
    framework = exec_env.framework if opts.framework_inference else ""
    inferred = (
        environment.inferred(framework, declared or exec_env.pass_through, host_env)
        if framework
        else ()
    )
    env = environment.task_env(
        host=host_env,
        pass_through=(*exec_env.pass_through, *inferred),
        define=exec_env.define,
        project_dir_abs=os.path.join(root, node.project_dir) if node.project_dir else root,
        root=root,
        workspace_id=root,
        task_id=str(node.id),
    )
    return env, inferred


def _with_script_env(env: dict[str, str], script_env: Mapping[str, str], define) -> None:
    """The package manager's variables over what the host passed (a manager sets its own), under
    the task's `define` literals (what the user wrote wins)."""
    env.update((name, value) for name, value in script_env.items() if name not in define)


class ScriptEnv:
    """One run's package manager, as the tasks that run a package.json script see it: found
    once, then each task's variables (plan/lifecycle.py)."""

    def __init__(self, ws: Workspace, tools, host_env: Mapping[str, str]):
        self.ws = ws
        self.tools = tools
        self.host_path = host_env.get("PATH") or os.defpath
        self._found: tuple[str, str, str] | None = None
        self._by_path: dict[tuple[str, bool], tuple[lifecycle.Manager, str, str | None]] = {}
        self._node_options: tuple[str] | None = None  # the .npmrc's node-options, once read

    def _manager(self) -> tuple[str, str, str]:
        """(name, version, bun's Node version): the version from `packageManager`, else (yarn 2+)
        the release `.yarnrc.yml` points at, else the package.json of the one on the host's PATH
        (where turbo finds it)."""
        if self._found is None:
            root = str(self.ws.root)
            top = self.ws.packages.get(ROOT_PROJECT)
            declared = top.manifest.get("packageManager") if top is not None else None
            yarnrc = _read_small(os.path.join(root, ".yarnrc.yml"))
            name, version = lifecycle.flavour(self.ws.manager, declared, yarnrc is not None)
            if not version and name == "berry":
                found = _YARN_RELEASE.search(yarnrc or "")
                version = found.group(1) if found else ""
            own_node = ""
            if not version or name == "bun":
                command = "yarn" if name == "berry" else name
                found_version, own_node = self.tools.manager(
                    command, _MANAGER_PACKAGES[name], self.host_path
                )
                version = version or found_version
            self._found = (name, version or "?", own_node)
        return self._found

    def _for_path(self, task_path: str, member: bool):
        """The manager, its user agent and Node's path for a task PATH (Node's version is the
        one the key folds)."""
        known = self._by_path.get((task_path, member))
        if known is None:
            import platform

            name, version, own_node = self._manager()
            node = own_node or self.tools.node(task_path)
            manager = lifecycle.Manager(name, version, node if node.startswith("v") else "?")
            agent = lifecycle.user_agent(
                manager,
                lifecycle.platform_name(),
                lifecycle.arch_name(platform.machine()),
                in_workspace=member,
            )
            known = (manager, agent, self.tools.node_path(task_path))
            self._by_path[(task_path, member)] = known
        return known

    def variables(self, node: TaskNode, task_path: str, args: tuple[str, ...]) -> dict[str, str]:
        assert node.config.exec is not None
        manager, agent, node_path = self._for_path(task_path, bool(node.project_dir))
        pkg = self.ws.packages.get(node.id.package)
        manifest = pkg.manifest if pkg is not None else {}
        event = node.config.exec.script
        scripts = manifest.get("scripts")
        script = scripts.get(event) if isinstance(scripts, dict) else None
        root = str(self.ws.root)
        found = lifecycle.variables(
            manager,
            manifest=manifest,
            event=event,
            script=script if isinstance(script, str) else "",
            args=args,
            project_dir=os.path.join(root, node.project_dir) if node.project_dir else root,
            root=root,
            node_path=node_path,
            agent=agent,
        )
        if self._node_options is None:  # the .npmrc is keyed (the workspace fingerprint)
            npmrc = _read_small(os.path.join(root, ".npmrc"))
            self._node_options = (lifecycle.node_options(manager.name, npmrc) or "",)
        if self._node_options[0]:
            found["NODE_OPTIONS"] = self._node_options[0]
        return found


_YARN_RELEASE = re.compile(r"yarn-(\d+\.\d+\.\d+[^/\s'\"]*?)\.c?js")


_MANAGER_PACKAGES = {
    "npm": ("npm",),
    "pnpm": ("pnpm", "@pnpm/exe"),
    "yarn": ("yarn",),
    "berry": ("@yarnpkg/cli-dist",),
    "bun": ("bun",),
}


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(65536)
    except OSError:
        return None


def _outputs(
    node: TaskNode,
    query: InputQuery,
    members: frozenset[str],
    index,
    additive: bool,
    whole: bool = False,
) -> OutputSpec | None:
    """What a cached task writes (None: the task is not cached); an additive task's adds to its
    upstream's. `whole`: an additive Nx target saves the whole tree under its outputs, as Nx
    does, unless an uncached task is upstream (`AdditiveOutputs.whole`)."""
    cache = node.config.cache
    if cache is None:
        return None
    args = (
        node.project_dir,
        cache.output_files,
        cache.output_workspace_files,
        query,
        members,
        index.tracked if index.git else None,
    )
    if not additive:
        return OutputSpec(*args)
    return AdditiveOutputs(*args, whole=whole and cache.shared_outputs)


def _remote(
    cfg, outputs: OutputSpec | None, ws: RemoteExecution | None
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Where the task may run ("", "on", "only") and its platform properties. Only a cached task
    whose whole world can be shipped goes: its outputs under its own directory, nothing passed
    through from the host (docs/remote-execution.md)."""
    wanted = cfg.exec.remote if cfg.exec.remote is not None else (ws is not None and ws.default)
    if not wanted:
        return "", ()
    if (
        outputs is None
        or (outputs.ws_globs is not None and wanted != "only")
        or cfg.exec.sandbox is not None
        or cfg.exec.persistent is not None
        or cfg.exec.interactive
        or cfg.exec.env.pass_through
        or cfg.exec.env.secret
    ):
        return "", ()
    platform = dict(ws.platform if ws is not None else ())
    platform.update(cfg.exec.platform)
    return ("only" if wanted == "only" else "on"), tuple(sorted(platform.items()))


def _runtime(
    node: TaskNode, tools, task_path: str, root: str, host_env
) -> tuple[tuple[str, str], ...]:
    """Runtime inputs: the Node version the task's PATH leads to, then its declared probes' outputs."""
    out = [("node", tools.node(task_path))]
    cache = node.config.cache
    if cache is None or not (cache.input_runtime or cache.input_ws_runtime):
        return tuple(out)
    task, here = str(node.id), os.path.join(root, node.project_dir) if node.project_dir else root
    for cmd in cache.input_runtime:
        stdout, stderr = tools.probe(task, here, cmd, task_path)
        out += [(f"runtime:{cmd}:stdout", stdout), (f"runtime:{cmd}:stderr", stderr)]
    root_path = environment.task_path(host_env.get("PATH"), root, root)
    for cmd in cache.input_ws_runtime:
        stdout, stderr = tools.probe(task, root, cmd, root_path)
        out += [(f"ws-runtime:{cmd}:stdout", stdout), (f"ws-runtime:{cmd}:stderr", stderr)]
    return tuple(out)


def _input_query(node: TaskNode, nested: tuple[str, ...]) -> InputQuery:
    cache = node.config.cache
    if cache is None:  # an uncached task still keys its whole project for its dependants
        return InputQuery(node.project_dir, GlobSet(["**"]), None, None, nested, None, True)
    turbo = cache.turbo_globs
    excluded = GlobSet(cache.output_files, turbo) if cache.output_files else None
    # turbo walks for its explicit inputs: a file named outright is hashed whatever the negations
    # say, and a negation matching a directory takes its tree; under `$TURBO_DEFAULT$` (the only
    # case with a reach) the negations match files, and take back from everything
    exact = turbo and cache.input_reach is None
    ws_globs = (
        GlobSet(cache.input_workspace_files, turbo, exact) if cache.input_workspace_files else None
    )
    globs = GlobSet(cache.input_files, turbo, exact)
    if not turbo:  # the implicit build's `**` is vx's, not a glob the user wrote
        return InputQuery(
            node.project_dir, globs, ws_globs, excluded, nested, None, node.config.implicit
        )
    # turbo's globs see every file below the package, other packages' included: a root task's
    # `apps/**` reaches into the apps.
    reach = GlobSet(cache.input_reach, True) if cache.input_reach is not None else globs
    return InputQuery(node.project_dir, globs, ws_globs, excluded, (), reach)


# ---------------------------------------------------------------- late keys


def late_tasks(graph: TaskGraph) -> dict[TaskId, bool]:
    """The tasks whose key is taken only once they are ready: True for a task with an
    uncached task upstream, of any project — nothing says what it writes, so it may have rewritten,
    added or deleted the task's inputs (a codegen filling a sibling's `src/`), which are read again
    from disk — and False for a group that only folds a late key. Nothing else is late: the key
    taken up front stands."""
    rewritten: set[TaskId] = set()  # tasks with an uncached task upstream
    late: dict[TaskId, bool] = {}
    folded = {dep for node in graph.nodes.values() for dep in node.deps}
    for tid in graph.order:
        node = graph.nodes[tid]
        if any(dep in rewritten or _rewriter(graph.nodes[dep]) for dep in node.deps):
            rewritten.add(tid)
        if _rewriter(node) and tid not in folded:
            continue  # an uncached task nothing depends on: no hit, no save and no dependant read its key
        if tid in rewritten and (not node.is_group or node.config.cache is not None):
            late[tid] = True  # a task, or an implicit group keyed like one (its project's files)
        elif any(dep in late for dep in node.deps):
            late[tid] = False
    return late


def _rewriter(node: TaskNode) -> bool:
    """An uncached task: nothing says what it writes, so it may write its own project's sources."""
    return not node.is_group and node.config.cache is None


def rekeyed(
    index: files.FileIndex,
    node: TaskNode,
    plans: Mapping[TaskId, TaskPlan],
    fresh: bool,
    nested: tuple[str, ...],
) -> TaskPlan:
    """The task's plan keyed now, its dependencies done: upstream keys as they ended up
    and, when `fresh`, its input files and package.json as they are on disk."""
    from msgspec.structs import replace

    plan = plans[node.id]
    if node.is_group and node.config.cache is None:
        return replace(plan, key=keys.group_key((str(dep), plans[dep].key) for dep in node.deps))
    cfg = node.config
    upstream = keys.select_upstream(
        node.id, node.deps, cfg.cache.input_tasks if cfg.cache else None
    )
    assert plan.record is not None  # a task with a key to redo has its record
    record = replace(
        plan.record,
        upstream=tuple(
            sorted(((str(d), plans[d].key) for d in upstream), key=lambda p: (p[1], p[0]))
        ),
    )
    inputs = plan.inputs
    if fresh:
        query = plan.outputs.input_query if plan.outputs is not None else _input_query(node, nested)
        inputs = index.fresh_inputs(query)
        record = replace(
            record,
            files=inputs.files,
            package_json=index.fresh_identity(_join(node.project_dir, "package.json")),
        )
    return replace(plan, key=keys.task_key(record), inputs=inputs, record=record)


def nested_dirs(ws: Workspace) -> dict[str, tuple[str, ...]]:
    """For each project dir, the dirs of projects nested inside it (the root holds all members).

    The dirs under a prefix are one contiguous run of the sorted list, so each is a bisect and
    a short scan, not a pass over every project (that was O(projects²))."""
    dirs = sorted({p.dir for p in ws.packages.values()})
    out: dict[str, tuple[str, ...]] = {}
    for d in dirs:
        prefix = d + "/" if d else ""
        i = bisect.bisect_left(dirs, prefix)
        j = i
        while j < len(dirs) and dirs[j].startswith(prefix):
            j += 1
        out[d] = tuple(o for o in dirs[i:j] if o != d)
    return out


def default_timeout(
    flag: int | None, workspace: int | None, host_env: Mapping[str, str]
) -> int | None:
    """A task's timeout when it names none: `--timeout` (`flag`), else VX_TASK_TIMEOUT, else the
    workspace's `timeout`."""
    if flag is not None:
        return flag
    raw = host_env.get("VX_TASK_TIMEOUT", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return min(int(raw), MAX_TIMEOUT_MS)  # clamped, never refused (8.1)
    return workspace


def _forwarded(command: str, args: tuple[str, ...]) -> str:
    from vx.plan.forwarding import forward_args  # only with `--` args

    return forward_args(command, args)


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


def package_of(ws: Workspace, cwd: Path) -> str:
    """The name of the project that holds cwd (the deepest member), or the root project."""
    try:
        rel = Path(os.path.relpath(cwd, ws.root)).as_posix()
    except ValueError:
        return ROOT_PROJECT
    rel = "" if rel == "." else rel
    pkg = ws.package_at(rel)
    return pkg.name if pkg else ROOT_PROJECT
