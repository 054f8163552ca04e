"""Decide everything about every task before anything runs: inputs, key, command, env, outputs.

Keys are static (no early cutoff), so the whole plan is known up front; `--dry` is this module
with nothing executed, and the store is probed for every key in one batch.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import Mapping, Sequence

from msgspec import Struct

from vx import environment, files, keys, witness
from vx.globs import GlobSet
from vx.model import ROOT_PROJECT, HashRecord, TaskGraph, TaskId, TaskNode, TaskPlan, Workspace
from vx.outputs import claimable, walk_outputs, wipe_outputs

MAX_TIMEOUT_MS = 2**31 - 1


class InputQuery(Struct, frozen=True):
    """What `files` needs to enumerate (and later re-check) one task's inputs."""

    project_dir: str
    globs: GlobSet
    workspace_globs: GlobSet | None
    excluded: GlobSet | None
    nested: tuple[str, ...]


class OutputSpec:
    """A cached task's declared outputs: walked to save, wiped before exec/restore, and the
    only paths a restore may write (LC-08, LC-09). `members` are the dirs of every project:
    what the globs match is this task's only when `owns` says so (`vx.outputs.claimable`)."""

    def __init__(self, project_dir: str, patterns: Sequence[str], ws_patterns: Sequence[str], query: InputQuery,
                 members: frozenset[str] = frozenset()):
        self.project_dir = project_dir
        self.members = members
        self.patterns = tuple(patterns)
        self.globs = GlobSet(patterns) if patterns else None
        self.ws_globs = GlobSet(ws_patterns) if ws_patterns else None
        self.declares_files = bool(patterns or ws_patterns)
        self.input_query = query
        self._prefix = project_dir + "/" if project_dir else ""
        self._node_modules = any(g is not None and g.names("node_modules") for g in (self.globs, self.ws_globs))

    def walk(self, root: Path, seen: dict | None = None) -> list[str]:
        if not self.declares_files:
            return []
        return [p for p in walk_outputs(root, self.project_dir, self.globs, self.ws_globs, seen=seen) if self.owns(p)]

    def walk_for_save(self, root: Path) -> tuple[list[str], list[str]]:
        """What the globs match now: what the task owns, and what it may not keep (`owns`). The
        second withholds the save: dropping those files would make a hit that lacks them."""
        owned: list[str] = []
        disowned: list[str] = []
        if self.declares_files:
            for p in walk_outputs(root, self.project_dir, self.globs, self.ws_globs):
                (owned if self.owns(p) else disowned).append(p)
        return owned, disowned

    def state(self, root: Path) -> tuple[list[str], dict[str, bool]]:
        """Where the outputs live and what walking them reads: the absolute glob roots, and each
        path the walk listed (True) or probed (False) — what a receipt keeps per task."""
        notes = witness.Notes()
        if self.declares_files:
            walk_outputs(root, self.project_dir, self.globs, self.ws_globs, notes=notes)
        base = os.path.join(root, self.project_dir) if self.project_dir else str(root)
        roots = [os.path.join(base, r) if r else base for r in (self.globs.roots() if self.globs else ())]
        roots += [os.path.join(root, r) if r else str(root) for r in (self.ws_globs.roots() if self.ws_globs else ())]
        return roots, notes.table

    def wipe(self, root: Path) -> None:
        if self.declares_files:
            wipe_outputs(root, self.project_dir, self.globs, self.ws_globs, owns=self.owns)

    def allows(self, path: str) -> bool:
        """Whether a restore may write `path`: matched by the output globs, and `owns` it."""
        if self.ws_globs is not None and self.ws_globs.matches(path):
            return self.owns(path)
        prefix = self._prefix
        return (self.globs is not None and path.startswith(prefix) and self.globs.matches(path[len(prefix):])
                and self.owns(path))

    def owns(self, path: str) -> bool:
        """Whether a path the output globs match is this task's to write and wipe: never `.git`,
        `.vx`, an unnamed `node_modules`, another project's tree, or one of the task's inputs."""
        return claimable(path, self.project_dir, self.members, self._node_modules) and not self._is_input(path)

    def _is_input(self, path: str) -> bool:
        """Whether `path` is in the task's input set: what the input globs match, less what the
        project output globs carve out (KEY-17, as `files.FileIndex.inputs` selects)."""
        q, prefix = self.input_query, self._prefix
        if path.startswith(prefix):
            rel = path[len(prefix):]
            if q.excluded is not None and q.excluded.match(rel):
                return False
            if q.globs.match(rel):
                return True
        return q.workspace_globs is not None and q.workspace_globs.match(path) is not None


class RunOptions(Struct, frozen=True):
    """The parts of the command line that shape plans (not the cache policy or the flow)."""

    forward_args: tuple[str, ...] = ()
    timeout_ms: int | None = None
    retries: int | None = None
    workspace_timeout_ms: int | None = None
    cache_dir: Path | None = None  # a sandbox walls it off when it lies inside the workspace (SB-05)


def make_plans(ws: Workspace, graph: TaskGraph, index: files.FileIndex, opts: RunOptions,
               host_env: Mapping[str, str]) -> dict[TaskId, TaskPlan]:
    """Plan every node in topological order, so upstream keys exist before they are folded."""
    fingerprint = files.fingerprint(ws.root, index)
    nested = _nested_dirs(ws)
    members = frozenset(p.dir for p in ws.packages.values())
    default_timeout = _default_timeout(opts, host_env)
    plans: dict[TaskId, TaskPlan] = {}
    for tid in graph.order:
        node = graph.nodes[tid]
        if node.is_group:
            plans[tid] = _group_plan(node, plans)
        else:
            plans[tid] = _task_plan(ws, node, index, opts, host_env, fingerprint, nested.get(node.project_dir, ()),
                                    plans, default_timeout, members)
            if node.config.exec.sandbox is not None:
                plans[tid] = _with_sandbox(ws, graph, node, plans[tid], opts, host_env)
    return plans


def _with_sandbox(ws: Workspace, graph: TaskGraph, node: TaskNode, plan: TaskPlan, opts: RunOptions,
                  host_env: Mapping[str, str]) -> TaskPlan:
    """Resolve `exec.sandbox` now, so a grant no run could honour is refused before anything runs (SB-04)."""
    from msgspec.structs import replace

    from vx.sandbox import grants

    cfg = node.config
    folded = grants.folded_packages(graph.nodes, node.id, keys.select_upstream) if cfg.cache else None
    spec = grants.plan_sandbox(cfg.exec.sandbox, root=ws.root, project_rel=node.project_dir, task=str(node.id),
                               task_name=node.id.task, projects={p.dir: p.name for p in ws.packages.values()},
                               linked=grants.linked_packages(ws.packages, node.id.package), folded=folded,
                               cache_dir=opts.cache_dir, home=host_env.get("HOME"))
    return replace(plan, sandbox=spec)


def _group_plan(node: TaskNode, plans: Mapping[TaskId, TaskPlan]) -> TaskPlan:
    key = keys.group_key((str(dep), plans[dep].key) for dep in node.deps)
    return TaskPlan(key=key, inputs=None, command=None, env={}, timeout_ms=None, retries=0, outputs=None)


def _task_plan(ws, node: TaskNode, index, opts: RunOptions, host_env, fingerprint: str, nested: tuple[str, ...],
               plans: Mapping[TaskId, TaskPlan], default_timeout: int | None,
               members: frozenset[str] = frozenset()) -> TaskPlan:
    cfg = node.config
    assert cfg.exec is not None
    query = _input_query(node, nested)
    inputs = index.inputs(query.project_dir, query.globs, query.workspace_globs, excluded=query.excluded, nested=nested)
    forward = opts.forward_args if node.requested else ()
    command = _forwarded(cfg.exec.command, forward) if forward else cfg.exec.command
    upstream = keys.select_upstream(node.id, node.deps, cfg.cache.input_tasks if cfg.cache else None)
    record = HashRecord(
        task_id=str(node.id),
        fingerprint=fingerprint,
        package_json=index.identity(_join(node.project_dir, "package.json")),
        config=cfg.canonical,
        forward_args=forward,
        env=tuple((name, host_env.get(name))
                  for name in environment.matching(cfg.cache.input_env if cfg.cache else (), host_env)),
        upstream=tuple(sorted(((str(d), plans[d].key) for d in upstream), key=lambda p: (p[1], p[0]))),
        files=inputs.files,
    )
    root = str(ws.root)
    env = environment.task_env(host=host_env, pass_through=cfg.exec.env.pass_through, define=cfg.exec.env.define,
                               project_dir_abs=os.path.join(root, node.project_dir) if node.project_dir else root,
                               root=root, workspace_id=root, task_id=str(node.id))
    outputs = None
    if cfg.cache is not None:
        outputs = OutputSpec(node.project_dir, cfg.cache.output_files, cfg.cache.output_workspace_files, query,
                             members)
    timeout = cfg.exec.timeout_ms if cfg.exec.timeout_ms is not None else default_timeout
    retries = cfg.exec.retries if cfg.exec.retries is not None else (opts.retries or 0)
    return TaskPlan(keys.task_key(record), inputs, command, env, timeout, retries, outputs, record=record)


def _input_query(node: TaskNode, nested: tuple[str, ...]) -> InputQuery:
    cache = node.config.cache
    if cache is None:  # an uncached task still keys its whole project for its dependants (KEY-20)
        return InputQuery(node.project_dir, GlobSet(["**"]), None, None, nested)
    excluded = GlobSet(cache.output_files) if cache.output_files else None
    ws_globs = GlobSet(cache.input_workspace_files) if cache.input_workspace_files else None
    return InputQuery(node.project_dir, GlobSet(cache.input_files), ws_globs, excluded, nested)


def _nested_dirs(ws: Workspace) -> dict[str, tuple[str, ...]]:
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


def _default_timeout(opts: RunOptions, host_env: Mapping[str, str]) -> int | None:
    if opts.timeout_ms is not None:
        return opts.timeout_ms
    raw = host_env.get("VX_TASK_TIMEOUT", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return min(int(raw), MAX_TIMEOUT_MS)  # clamped, never refused (8.1)
    return opts.workspace_timeout_ms


def _forwarded(command: str, args: tuple[str, ...]) -> str:
    from vx.forwarding import forward_args  # only with `--` args

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
