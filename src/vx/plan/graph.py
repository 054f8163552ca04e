"""Build the task graph from declared configs: dependsOn micro-syntax, the `^` frontier, groups,
cycles and priorities. Pure: values in, values out.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from msgspec import Struct

from vx.errors import ConfigError, CycleError, UnknownTaskError, suggestion
from vx.model import (
    ROOT_PROJECT,
    CacheConfig,
    ProjectConfig,
    TaskConfig,
    TaskGraph,
    TaskId,
    TaskNode,
    Workspace,
)

IMPLICIT_BUILD = "build"


class Selection(Struct, frozen=True):
    """What the user asked for: task names or `pkg#task`, the cwd's project, and --all."""

    names: tuple[str, ...]
    cwd_package: str
    all: bool = False
    projects: frozenset[str] | None = (
        None  # `--filter`: the requested tasks run in these projects only
    )
    configuration: str | None = (
        None  # Nx's `--configuration c`: a target's `c` variant (`build:c`) where it has one
    )


def build_graph(ws: Workspace, configs: Mapping[str, ProjectConfig], sel: Selection) -> TaskGraph:
    """Resolve the requested tasks and everything they depend on into one graph."""
    requested = _resolve_requested(ws, configs, sel)
    wanted = set(requested)
    declared = _all_task_names(configs)  # once, not per `^` entry: that was O(projects²)
    nodes: dict[TaskId, TaskNode] = {}
    pending = list(requested)
    while pending:
        tid = pending.pop()
        if tid in nodes:
            continue
        task = task_of(configs, tid.package, tid.task)
        assert task is not None  # the selection and _expand_entry name only tasks that exist
        deps = _expand_depends_on(ws, configs, tid, task, declared)
        nodes[tid] = TaskNode(tid, task, ws.packages[tid.package].dir, deps, tid in wanted)
        pending.extend(d for d in deps if d not in nodes)
    order = _topological_order(nodes)
    _refuse_terminal_holders(nodes, configs)
    return TaskGraph(nodes, order, dependent_counts(nodes, order), tuple(requested))


# ---------------------------------------------------------------- selection


def _resolve_requested(
    ws: Workspace, configs: Mapping[str, ProjectConfig], sel: Selection
) -> list[TaskId]:
    out: dict[TaskId, None] = {}  # ordered and deduplicated in O(1) per task
    for name in sel.names:
        found = _resolve_one(ws, configs, sel, _nx_spelling(ws, configs, name))
        if sel.configuration:
            found = [_configured(configs, tid, sel.configuration) for tid in found]
        out.update(dict.fromkeys(found))
    return list(out)


def _nx_spelling(ws: Workspace, configs: Mapping[str, ProjectConfig], name: str) -> str:
    """Nx's `project:target[:configuration]` as `project#target[:configuration]`, when the part before
    the first `:` names a project (the root by its Nx name too) and no project declares the whole
    as a task (`build:prod` stays)."""
    if "#" in name or ":" not in name:
        return name
    project, _, rest = name.partition(":")
    if (
        project == ws.nx_root  # the root project, by its Nx name
        and project not in ws.packages
        and not any(name in c.tasks for c in configs.values())
    ):
        return f"{ROOT_PROJECT}#{rest}"
    if project not in ws.packages or any(
        name in c.tasks or name in c.not_runnable for c in configs.values()
    ):
        return name
    return f"{project}#{rest}"


def _configured(configs: Mapping[str, ProjectConfig], tid: TaskId, configuration: str) -> TaskId:
    variant = f"{tid.task}:{configuration}"
    known = configs[tid.package]
    if variant in known.not_runnable:
        _refuse_not_runnable({tid.package: known}, variant)
    return TaskId(tid.package, variant) if variant in known.tasks else tid


def _resolve_one(
    ws: Workspace, configs: Mapping[str, ProjectConfig], sel: Selection, name: str
) -> list[TaskId]:
    if "#" in name:
        pkg, _, task = name.rpartition("#")
        return [_qualified(ws, configs, pkg or ROOT_PROJECT, task, name)]
    holders = [p for p in sorted(configs) if _declares(configs[p], name)]
    if not holders:
        _refuse_not_runnable(configs, name)
        scripted = [p for p, pkg in sorted(ws.packages.items()) if name in pkg.scripts]
        pkg, colon, task = name.partition(":")
        nx = bool(colon) and pkg in ws.packages and task_of(configs, pkg, task) is not None
        empty = ws.empty_member_globs
        facts: tuple[str, ...] = (
            (f"a package.json script in: {', '.join(scripted[:8])}",) if scripted else ()
        )
        if empty:
            globs = ", ".join(f"`{g}`" for g in empty)
            plural = len(empty) > 1
            facts += (
                f"member glob{'s' if plural else ''} {globs} in {ws.member_globs_file} match"
                + ("" if plural else "es")
                + " no directory with a package.json",
            )
        raise UnknownTaskError(
            f"no project declares a task named `{name}`",
            facts=facts,
            hint=(
                f"`{name}` is Nx's spelling of a project's task; in vx it is `{pkg}#{task}`"
                if nx
                else "`vx init` turns package.json scripts into vx tasks (vx.config.json per package)"
                if scripted
                else suggestion(name, _all_task_names(configs), noun="tasks")
            ),
        )
    if sel.projects is not None:
        _refuse_nx_refusals(configs, name, sel.projects)
        return _filtered_holders(holders, sel.projects, name)
    if (
        sel.all
        or sel.cwd_package == ROOT_PROJECT
        and not _declares(configs.get(ROOT_PROJECT, ProjectConfig("")), name)
    ):
        _refuse_nx_refusals(configs, name, configs)
    if sel.all:
        return [TaskId(p, name) for p in holders]
    _refuse_nx_refusals(configs, name, [sel.cwd_package] if sel.cwd_package in configs else [])
    if _declares(configs.get(sel.cwd_package, ProjectConfig("")), name):
        return [TaskId(sel.cwd_package, name)]
    if sel.cwd_package == ROOT_PROJECT:
        # From the root, a task the root project does not declare means "everywhere" (as in turbo).
        return [TaskId(p, name) for p in holders]
    raise UnknownTaskError(
        f"project `{sel.cwd_package}` has no task `{name}` (no `{name}` script or task)",
        facts=(f"declared by: {', '.join(holders[:8])}{', …' if len(holders) > 8 else ''}",),
        hint=f"run it everywhere with `vx run {name} --all`, or name one: `vx run {holders[0]}#{name}`",
    )


def _filtered_holders(holders: list[str], projects: frozenset[str], name: str) -> list[TaskId]:
    """With `--filter`, the task in every selected project that declares it: none when no
    selected project does (as in turbo, a run with nothing to do, which the pipeline says)."""
    return [TaskId(p, name) for p in holders if p in projects]


def _qualified(
    ws: Workspace, configs: Mapping[str, ProjectConfig], pkg: str, task: str, text: str
) -> TaskId:
    if pkg not in ws.packages:
        raise UnknownTaskError(
            f"no package named `{pkg}` (in `{text}`)",
            hint=suggestion(pkg, ws.packages, noun="packages"),
        )
    if isinstance(
        configs[pkg].not_runnable.get(task), tuple
    ):  # an Nx target: refused, never the implicit build
        _refuse_not_runnable({pkg: configs[pkg]}, task)
    if task_of(configs, pkg, task) is None:
        _refuse_not_runnable({pkg: configs[pkg]}, task)
        holders = [p for p in sorted(configs) if _declares(configs[p], task)]
        scripted = [
            p
            for p, package in sorted(ws.packages.items())
            if task in package.scripts and p not in holders
        ]
        facts = tuple(
            line
            for line in (
                f"declared by: {', '.join(holders[:8])}{', …' if len(holders) > 8 else ''}"
                if holders
                else "",
                f"a package.json script (no vx task) in: {', '.join(scripted[:8])}"
                if scripted
                else "",
            )
            if line
        )
        hint = (
            f"run one that has it: `vx run {holders[0]}#{task}`"
            if holders
            else suggestion(task, configs[pkg].tasks, noun="tasks")
        )
        raise UnknownTaskError(
            f"package `{pkg}` has no task `{task}` (no `{task}` script or task)",
            facts=facts or (f"no package has a `{task}` task",),
            hint=hint,
        )
    return TaskId(pkg, task)


def _declares(config: ProjectConfig, name: str) -> bool:
    """Whether a bare `name` selects the project's task. The implicit `build` is only
    reached; a turbo.json task without its script is selected, as turbo runs its no-op."""
    return name in config.tasks


def task_of(configs: Mapping[str, ProjectConfig], pkg: str, name: str) -> TaskConfig | None:
    """The project's task `name`: declared, made by a config mapping, or the implicit `build`."""
    config = configs[pkg]
    task = config.tasks.get(name)
    if task is None and name == IMPLICIT_BUILD:
        return implicit_build(config)
    return task


def implicit_build(config: ProjectConfig) -> TaskConfig:
    """A project without `build` has one, a group of `^build` keyed on the project's files,
    so a dependant's key moves when a source-only package is edited. Its other tasks' declared
    outputs are left out: they are made by those tasks, and the key is taken before anything runs.
    An Nx project's is keyed on nothing of its own: Nx's `^build` passes over it, and the
    dependant's `^production` (or `^default`) input keys the files of it that Nx hashes."""
    if config.nx:
        return TaskConfig(
            name=IMPLICIT_BUILD,
            canonical='{"dependsOn":["^build"],"implicit":true,"nx":true}',
            depends_on=("^build",),
            implicit=True,
        )
    made = sorted(
        {
            g
            for t in config.tasks.values()
            if t.cache is not None and t.exec is not None
            for g in t.cache.output_files
            if not g.startswith("!")
        }
    )
    return TaskConfig(
        name=IMPLICIT_BUILD,
        canonical='{"dependsOn":["^build"],"implicit":true}',
        depends_on=("^build",),
        cache=CacheConfig(("**",), tuple(made)),
        implicit=True,
    )


def _refuse_not_runnable(configs: Mapping[str, ProjectConfig], name: str) -> None:
    """A task another tool's config declares but vx cannot run (turbo's `persistent`), named as such."""
    for pkg in sorted(configs):
        why = configs[pkg].not_runnable.get(name)
        if isinstance(why, tuple):  # an Nx target: (message, file, field, hint)
            message, file, field, hint = why
            raise ConfigError(message, file=file, field=field, hint=hint)
        if why:
            raise ConfigError(
                why,
                file=configs[pkg].source,
                field=f"tasks.{name}",
                hint="leave it out of `vx run`; vx runs the tasks that finish",
            )


def _refuse_nx_refusals(configs: Mapping[str, ProjectConfig], name: str, scope) -> None:
    """An Nx target vx cannot run is refused where the run would reach it, never skipped: a
    `build` run everywhere but in one project would look like a whole build."""
    for pkg in sorted(scope):
        if isinstance(configs[pkg].not_runnable.get(name), tuple):
            _refuse_not_runnable({pkg: configs[pkg]}, name)


def _all_task_names(configs: Mapping[str, ProjectConfig]) -> set[str]:
    return {t for cfg in configs.values() for t in cfg.tasks}


# ---------------------------------------------------------------- dependsOn


def _expand_depends_on(
    ws: Workspace,
    configs: Mapping[str, ProjectConfig],
    tid: TaskId,
    task: TaskConfig,
    declared: set[str],
) -> tuple[TaskId, ...]:
    out: dict[TaskId, None] = {}
    for i, entry in enumerate(task.depends_on):
        source, field = configs[tid.package].located(f"tasks.{tid.task}.dependsOn[{i}]")
        for dep in _expand_entry(ws, configs, tid, entry, source, field, declared):
            if dep == tid:  # only a written name reaches the task itself; `^` and `.*` never do
                raise CycleError(
                    f"`{tid}` depends on itself",
                    facts=(f"in: {source}, {field}", f"{tid} -> {tid}"),
                    hint=f"remove `{entry}` from its dependsOn; for the task in dependencies, "
                    f"write `^{tid.task}`",
                )
            out[dep] = None
    return tuple(out)


def _expand_entry(
    ws, configs, tid: TaskId, entry: str, source: str, field: str, declared: set[str]
) -> Iterable[TaskId]:
    if entry.startswith("^"):
        return _frontier(ws, configs, tid.package, entry[1:], source, field, declared)
    if "#" in entry:
        pkg, _, name = entry.rpartition("#")
        pkg = pkg or ROOT_PROJECT
        if pkg not in ws.packages:
            raise ConfigError(
                f"`{entry}` names an unknown package `{pkg}`",
                file=source,
                field=field,
                hint=suggestion(pkg, ws.packages, noun="packages"),
            )
        if name.endswith(".*"):
            return [TaskId(pkg, t) for t in _matching(configs[pkg], name)]
        if isinstance(configs[pkg].not_runnable.get(name), tuple):  # never the implicit build
            _refuse_not_runnable({pkg: configs[pkg]}, name)
        if task_of(configs, pkg, name) is None:
            raise ConfigError(
                f"`{entry}`: package `{pkg}` has no task `{name}`",
                file=source,
                field=field,
                hint=suggestion(name, configs[pkg].tasks, noun="tasks"),
            )
        return [TaskId(pkg, name)]
    tasks = configs[tid.package].tasks
    if entry.endswith(".*"):  # every other task of the project named `stem.<something>`
        return [
            TaskId(tid.package, t) for t in _matching(configs[tid.package], entry) if t != tid.task
        ]
    if isinstance(configs[tid.package].not_runnable.get(entry), tuple):
        _refuse_not_runnable({tid.package: configs[tid.package]}, entry)
    if task_of(configs, tid.package, entry) is None:
        raise ConfigError(
            f"`{entry}` is not a task of this project",
            file=source,
            field=field,
            hint=suggestion(entry, tasks, noun="tasks")
            or f"for the task in dependencies, write `^{entry}`",
        )
    return [TaskId(tid.package, entry)]


def _frontier(
    ws, configs, package: str, name: str, source: str, field: str, declared: set[str]
) -> list[TaskId]:
    """The nearest holders of `name` among the package's dependencies (sparse bridging);
    for `name.*`, each nearest dependency with a matching task gives all of its matches."""
    if name.endswith(".*"):
        return _pattern_frontier(ws, configs, package, name)
    if name not in declared and name != IMPLICIT_BUILD:
        raise ConfigError(
            f"`^{name}`: no project in the workspace declares a task `{name}`",
            file=source,
            field=field,
            hint=suggestion(name, declared, noun="tasks"),
        )
    found: list[TaskId] = []
    seen: set[str] = {package}
    stack = list(reversed(ws.packages[package].deps))
    while stack:
        dep = stack.pop()
        if dep in seen:
            continue
        seen.add(dep)
        if isinstance(
            configs[dep].not_runnable.get(name), tuple
        ):  # an Nx target: refused, never bridged
            _refuse_not_runnable({dep: configs[dep]}, name)
        if name in configs[dep].tasks or name == IMPLICIT_BUILD:  # every project has a build
            found.append(TaskId(dep, name))
        else:
            stack.extend(reversed(ws.packages[dep].deps))
    return sorted(found)


def _pattern_frontier(ws, configs, package: str, pattern: str) -> list[TaskId]:
    found: list[TaskId] = []
    seen: set[str] = {package}
    stack = list(reversed(ws.packages[package].deps))
    while stack:
        dep = stack.pop()
        if dep in seen:
            continue
        seen.add(dep)
        matches = _matching(configs[dep], pattern)
        if matches:
            found += [TaskId(dep, t) for t in matches]
        else:
            stack.extend(reversed(ws.packages[dep].deps))
    return sorted(found)


def _matching(config: ProjectConfig, pattern: str) -> list[str]:
    """The project's declared tasks `name.*` matches: `name.` and at least one more character. A
    pattern that matches nothing is legal."""
    prefix = pattern[:-1]
    return sorted(t for t in config.tasks if t.startswith(prefix) and len(t) > len(prefix))


# ---------------------------------------------------------------- --only


class Schedule(Struct, frozen=True):
    """The graph `--exclude-dependencies` leaves to run, and for each task that lost an edge the
    dependency it no longer waits for (it may hit, never save: that dependency's outputs on disk
    are whatever they were)."""

    graph: TaskGraph
    cut: Mapping[TaskId, TaskId]


def exclude_dependencies(graph: TaskGraph, names: frozenset[str] | None) -> Schedule:
    """Drop dependency edges from the schedule (turbo's `--only`): every edge of a task
    (None) or only the edges to tasks named in `names`. Keys are taken on the whole graph
    before this; a group's edges stay (its members are what it asks for), and so does an edge
    to a task the run schedules anyway."""
    nodes = graph.nodes

    def kept(node: TaskNode, dep: TaskId) -> bool:
        return (
            node.is_group or nodes[dep].requested or (names is not None and dep.task not in names)
        )

    scheduled: set[TaskId] = set()
    pending = list(graph.requested)
    while pending:
        tid = pending.pop()
        if tid in scheduled:
            continue
        scheduled.add(tid)
        pending.extend(d for d in nodes[tid].deps if kept(nodes[tid], d))
    out: dict[TaskId, TaskNode] = {}
    cut: dict[TaskId, TaskId] = {}
    for tid in scheduled:
        node = nodes[tid]
        deps = tuple(d for d in node.deps if d in scheduled)
        if len(deps) < len(node.deps):
            cut[tid] = next(d for d in node.deps if d not in scheduled)
            node = TaskNode(node.id, node.config, node.project_dir, deps, node.requested)
        out[tid] = node
    order = tuple(t for t in graph.order if t in scheduled)
    return Schedule(TaskGraph(out, order, dependent_counts(out, order), graph.requested), cut)


def refuse_unknown_exclusions(graph: TaskGraph, names: frozenset[str]) -> None:
    """`--exclude-dependencies=NAME` for a name no dependency in the run has is a typo, said so."""
    present = {d.task for n in graph.nodes.values() for d in n.deps}
    for name in sorted(names - present):
        raise UnknownTaskError(
            f"`--exclude-dependencies={name}`: no task of this run depends on a `{name}` task",
            hint=suggestion(name, present, noun="dependencies")
            or "name dependency tasks, e.g. `--exclude-dependencies=build`",
        )


# ---------------------------------------------------------------- terminal


def _refuse_terminal_holders(
    nodes: Mapping[TaskId, TaskNode], configs: Mapping[str, ProjectConfig]
) -> None:
    """A task both persistent and interactive holds the terminal until the run ends: a
    task after it could never start, and two of them cannot both hold it. Refused before anything
    runs, on or off a terminal, so a config's meaning does not depend on where it runs."""
    holders = sorted(
        tid
        for tid, n in nodes.items()
        if n.config.exec is not None
        and n.config.exec.interactive
        and n.config.exec.persistent is not None
    )
    if not holders:
        return
    if len(holders) > 1:
        raise ConfigError(
            f"`{holders[0]}` and `{holders[1]}` are both persistent and interactive: each holds "
            "the terminal until the run ends, and one run has one terminal",
            file=configs[holders[1].package].source or "package.json",
            field=f"tasks.{holders[1].task}.exec.interactive",
            hint="run them in separate `vx run`s, or make one of them not interactive",
        )
    held = holders[0]
    for tid in sorted(nodes):
        if held in nodes[tid].deps and _runs_after(nodes, tid):
            raise ConfigError(
                f"`{tid}` depends on `{held}`, which is persistent and interactive: it holds the "
                f"terminal until the run ends, so `{tid}` could never start",
                file=configs[tid.package].source or "package.json",
                field=f"tasks.{tid.task}.dependsOn",
                hint=f"drop `{held}` from its dependsOn, or make `{held}` persistent only "
                "(with a readyWhen) so that dependants start once it is ready",
            )


def _runs_after(nodes: Mapping[TaskId, TaskNode], tid: TaskId) -> bool:
    """Whether `tid` is a task with a command, or a group that such a task waits for."""
    if not nodes[tid].is_group:
        return True
    return any(tid in n.deps and _runs_after(nodes, d) for d, n in nodes.items())


def rebuilt(
    graph: TaskGraph,
    deps: Mapping[TaskId, tuple[TaskId, ...]],
    requested: tuple[TaskId, ...],
    configs: Mapping[str, ProjectConfig],
) -> TaskGraph:
    """`graph` with each task's dependencies and the requested tasks replaced (a plugin's
    `graph` hook), ordered and weighed again; a cycle, or a task waiting for one that holds the
    terminal, is refused as dependsOn's would be."""
    from msgspec.structs import replace

    wanted = set(requested)
    nodes = {
        tid: replace(node, deps=deps[tid], requested=tid in wanted)
        for tid, node in graph.nodes.items()
    }
    order = _topological_order(nodes)
    _refuse_terminal_holders(nodes, configs)
    return TaskGraph(nodes, order, dependent_counts(nodes, order), requested)


# ---------------------------------------------------------------- order


def _topological_order(nodes: Mapping[TaskId, TaskNode]) -> tuple[TaskId, ...]:
    """Dependencies first; an iterative DFS so deep graphs never hit a recursion limit."""
    state: dict[TaskId, int] = {}  # 1 = on the stack, 2 = done
    order: list[TaskId] = []
    for start in sorted(nodes):
        if start in state:
            continue
        stack: list[tuple[TaskId, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            tid, i = stack[-1]
            deps = nodes[tid].deps
            if i < len(deps):
                stack[-1] = (tid, i + 1)
                dep = deps[i]
                mark = state.get(dep)
                if mark == 1:
                    raise _cycle_error(nodes, [t for t, _ in stack], dep)
                if mark is None:
                    state[dep] = 1
                    stack.append((dep, 0))
            else:
                stack.pop()
                state[tid] = 2
                order.append(tid)
    return tuple(order)


def _cycle_error(
    nodes: Mapping[TaskId, TaskNode], path: Sequence[TaskId], back_to: TaskId
) -> CycleError:
    cycle = list(path[path.index(back_to) :]) + [back_to]
    return CycleError(
        "the task graph has a cycle",
        facts=(" -> ".join(str(t) for t in cycle),),
        hint="remove one of these dependsOn entries; a task cannot wait for itself",
    )


def dependent_counts(
    nodes: Mapping[TaskId, TaskNode], order: Sequence[TaskId]
) -> dict[TaskId, int]:
    """Exact transitive-dependent counts, as bitset popcounts (diamonds never double-count)."""
    index = {tid: i for i, tid in enumerate(order)}
    below: dict[TaskId, int] = {tid: 0 for tid in order}
    for tid in reversed(order):  # dependants come later in `order`, so they are done first
        bits = below[tid]
        for dep in nodes[tid].deps:
            below[dep] |= bits | (1 << index[tid])
    return {tid: bits.bit_count() for tid, bits in below.items()}
