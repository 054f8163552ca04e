"""`vx run --verify=inputs` (LG-03): run every task traced, name each file a cached task read
undeclared or wrote outside its declared outputs.

A cache is only as sound as its declarations: a task that reads `../shared/x.js` without
declaring it is restored from the cache after `x.js` changed, and a file it writes outside its
outputs is missing after a restore. Under `--verify=inputs` every task executes (cache reads off,
writes as usual) under `strace -f --seccomp-bpf`, and each file a cached task opened for reading
or executed inside the workspace is checked against what its key covers: its own `cache.inputs`,
its `package.json`, the root lockfiles, its outputs, and the inputs and outputs of every upstream
task whose key folds into its own (transitively). A file that could be an input (listed by git,
not a fixed exclusion), another task's output, or a file another traced task (uncached ones too)
wrote, covered by none of these, is reported; so is each file a cached task left behind outside
its outputs. Fixes are written in the task's own config vocabulary (vx.config or turbo.json),
as few globs as cover the files, never as an edge that would close a cycle. The run exits 1.

The environment is seen only where a read of it is a system call: a task that reads its whole
environment from `/proc/self/environ` is reported for each variable that reached it without being
in its key (its `passThrough` ones; the essential list is passed unkeyed by design). A node task's
`process.env.X` reads nothing from the kernel, so each traced task's unkeyed `passThrough`
variables are listed as a note instead.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from msgspec import Struct
from msgspec.structs import replace

from vx.errors import EnvironmentFailure, UsageError
from vx.files.globs import GlobSet
from vx.files.index import FINGERPRINT_FILES, _never_input
from vx.model import TaskGraph, TaskId, TaskNode
from vx.plan import keys
from vx.proc.executor import Launch

if TYPE_CHECKING:
    from vx.config.turbo import TurboRoot
    from vx.model import TaskPlan

MODES = ("inputs",)
LATER_MODES = ("determinism", "fingerprint", "all")
READ_KINDS = ("read", "rdwr", "exec")  # Access kinds (sandbox.trace) that make a file an input


class Undeclared(Struct, frozen=True):
    """One line of a task's findings: a file (or a directory tree of `count` files) its key misses."""

    path: str  # workspace-relative (a tree: its glob)
    shown: str  # as the task saw it: relative to its project dir
    fix: str  # the declaration that would cover it, as config text
    count: int = 1  # files the line stands for
    add: bool = True  # False: `fix` says what to do instead, no declaration covers it


class Verdict(Struct, frozen=True):
    """What one traced task read, and wrote, that its declaration missed."""

    id: TaskId
    undeclared: tuple[Undeclared, ...]  # reads
    outputs: tuple[Undeclared, ...] = ()  # files it left behind outside its declared outputs
    notes: tuple[str, ...] = ()  # a declared glob that matches nothing; the whole list to paste
    unkeyed: tuple[str, ...] = ()  # passThrough variables that reached it outside its key


class VerifyReport(Struct, frozen=True):
    verdicts: tuple[Verdict, ...]  # one per traced task, in graph order
    untraced: tuple[TaskId, ...] = ()  # cached tasks that did not execute (skipped, aborted)
    unobserved: tuple[
        TaskId, ...
    ] = ()  # sandboxed tasks with `sandbox.trace: false`: they ran, untraced
    notes: tuple[str, ...] = ()  # run-wide fixes (turbo.json's globalDependencies)

    @property
    def inputs(self) -> int:
        return sum(u.count for v in self.verdicts for u in v.undeclared)

    @property
    def written(self) -> int:
        return sum(u.count for v in self.verdicts for u in v.outputs)

    @property
    def count(self) -> int:
        return self.inputs + self.written

    @property
    def exit_code(self) -> int:
        return 1 if self.count else 0


def parse_mode(text: str | None) -> str | None:
    """`--verify[=MODE]`: bare means inputs; the reference's other modes are named, not run."""
    if text is None:
        return None
    mode = text or "inputs"
    if mode in MODES:
        return mode
    if mode in LATER_MODES:
        raise UsageError(f"`--verify={mode}` is not implemented yet", hint="use `--verify=inputs`")
    raise UsageError(f"`--verify={text}` is not a mode", hint="use `--verify` or `--verify=inputs`")


# ---------------------------------------------------------------- tracing


def find_strace(env: Mapping[str, str]) -> str:
    """strace's path once it has traced `/bin/true` with --seccomp-bpf, else a refusal."""
    strace = shutil.which("strace", path=env.get("PATH"))
    hint = "install strace (Debian/Ubuntu: `apt-get install strace`); --verify=inputs observes tasks with it"
    if strace is None:
        raise EnvironmentFailure("`--verify=inputs` needs strace, which is not on PATH", hint=hint)
    probe = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "--", "/bin/true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        raise EnvironmentFailure(
            f"`--verify=inputs` cannot trace: {reason}",
            hint="strace needs ptrace (in a container: --cap-add SYS_PTRACE) and "
            "seccomp-bpf (strace >= 5.3)",
        )
    return strace


class InputTracer:
    """Wrap each task's attempts (uncached ones too: cached readers read what they write) in strace,
    one trace file per attempt, and parse them.

    `-D` (not the sandbox's `-DD`): the tracer stays in the task's process group, so the
    run's teardown owns it like every other process the task left behind; the task's own
    pid and exit status are the command's.
    """

    def __init__(self, strace: str, skip: Iterable[TaskId] = ()):
        self.strace = strace
        self.skip = frozenset(skip)  # tasks traced elsewhere (the sandbox's own trace)
        self.directory = Path(tempfile.mkdtemp(prefix="vx-verify-"))
        self.traces: dict[TaskId, list[Path]] = {}
        self.observed: dict[TaskId, list] = {}  # sandboxed tasks: the sandbox's own trace
        self._count = 0

    def launch(self, node: TaskNode, plan, attempt: int) -> Launch | None:
        """The executor Launch for one attempt, or None for tasks not verified here."""
        if node.id in self.skip or plan.command is None or plan.sandbox is not None:
            return None  # a sandboxed task is traced inside its sandbox: see observe()
        self._count += 1  # not the directory's size: a trace file appears only once strace starts
        path = self.directory / f"{self._count}.trace"
        self.traces.setdefault(node.id, []).append(path)
        return Launch(argv=[*strace_prefix(self.strace, path), "/bin/sh", "-c", plan.command])

    def observe(self, tid: TaskId, accesses) -> None:
        """Take a sandboxed attempt's accesses (RunContext.observe); attempts accumulate."""
        self.observed.setdefault(tid, []).extend(accesses)

    def accesses(self, tid: TaskId, cwd: Path) -> list | None:
        """Every access of every attempt of `tid` in trace order; None when it never ran."""
        from vx.sandbox.trace import TraceParser

        if tid in self.observed:
            return self.observed[tid]
        paths = [p for p in self.traces.get(tid, []) if p.exists()]
        if not paths:
            return None
        out: list[Any] = []
        for path in paths:
            with open(path, encoding="ascii", errors="replace") as lines:
                out += TraceParser(str(cwd)).feed(lines)
        return out

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def strace_prefix(strace: str, output: Path) -> list[str]:
    """The sandbox's strace flags and syscall set, writing to `output`, tracer in our group."""
    from vx.sandbox.trace import SYSCALLS

    return [strace, "-D", "-f", "-qq", "-y", "-xx", "--seccomp-bpf", "-e", "signal=none", "-e", "verbose=none",
            "-e", "trace=" + ",".join(SYSCALLS), "-e", "inject=io_uring_setup:error=ENOSYS",
            "-o", str(output), "--"]  # fmt: skip


# ---------------------------------------------------------------- checking


def check(
    root: Path,
    graph: TaskGraph,
    plans: Mapping[TaskId, TaskPlan],
    index,
    tracer: InputTracer,
    extra: Mapping[TaskId, list] | None = None,
    packages: Mapping[str, object] | None = None,
    configs: Mapping[str, object] | None = None,
) -> VerifyReport:
    """Compare each traced task's reads with what its key covers, and its writes with its declared
    outputs; `extra` holds accesses of tasks traced elsewhere (sandboxed ones), keyed like the
    tracer's. Uncached tasks are traced too: what they write, cached readers may read."""
    traced, untraced, unobserved = {}, [], []
    for tid in graph.order:
        node, plan = graph.nodes[tid], plans[tid]
        if node.is_group:
            continue
        if plan.sandbox is not None and not plan.sandbox.trace:
            unobserved.append(tid)
            continue
        accesses = (extra or {}).get(tid)
        if accesses is None:
            accesses = tracer.accesses(tid, root / node.project_dir)
        if accesses is None:
            if plan.outputs is not None:
                untraced.append(tid)
            continue
        traced[tid] = accesses
    run = _Run(root, graph, plans, index, packages or {}, configs or {})
    for tid, accesses in traced.items():
        run.writes[tid] = written_paths(accesses, root, index)
    reads = {
        tid: read_paths(accesses, root)
        for tid, accesses in traced.items()
        if plans[tid].outputs is not None
    }
    found = {
        tid: list(_undeclared(root, graph, plans, index, graph.nodes[tid], paths, run))
        for tid, paths in reads.items()
    }
    run.count_shared(found)
    verdicts = [
        _with_env(
            _verdict(run, graph.nodes[tid], reads[tid], found[tid]),
            graph.nodes[tid],
            plans[tid],
            traced[tid],
        )
        for tid in reads
    ]
    return VerifyReport(
        tuple(verdicts),
        tuple(untraced),
        unobserved=tuple(unobserved),
        notes=tuple(run.global_notes()),
    )


def _with_env(verdict: Verdict, node: TaskNode, plan, accesses) -> Verdict:
    """The verdict with the task's unkeyed variables: findings when it read its whole environment."""
    unkeyed = unkeyed_env(node, plan)
    if not unkeyed:
        return verdict
    found: tuple[Undeclared, ...] = ()
    if any(a.ok and a.kind == "read" and _ENVIRON.search(a.path) for a in accesses):
        found = tuple(
            Undeclared(
                f"${name}", f"${name}", f'cache.inputs.env: ["{name}"] (it read /proc/self/environ)'
            )
            for name in unkeyed
        )
    return replace(verdict, undeclared=verdict.undeclared + found, unkeyed=unkeyed)


_ENVIRON = re.compile(r"^/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/environ$")


def unkeyed_env(node: TaskNode, plan) -> tuple[str, ...]:
    """The variables the task was given that its key does not fold: what its `passThrough`
    brought (the essential list, `define` literals and vx's own are accounted for elsewhere)."""
    from vx.plan.environment import ESSENTIAL_ENV

    keyed = {name for name, _ in plan.record.env} if plan.record is not None else set()
    define = node.config.exec.env.define if node.config.exec is not None else ()
    own = {*ESSENTIAL_ENV, *define, "VX_RUN_WORKSPACE", "VX_RUN_TASK"}
    return tuple(sorted(n for n in plan.env if n not in keyed and n not in own))


def read_paths(accesses: Iterable, root: Path) -> list[str]:
    """Workspace-relative files read (or executed) before the task itself wrote them, in order."""
    written: set[str] = set()
    out: dict[str, None] = {}
    for access in accesses:
        rel = _relative(access.real or access.path, root)
        if rel is None:
            continue
        if access.kind in READ_KINDS and access.ok and rel not in written:
            out[rel] = None
        if access.kind in ("write", "rdwr"):
            written.add(rel)
    return list(out)


def _relative(path: str, root: Path) -> str | None:
    base = str(root)
    if path.startswith(base + "/"):
        return path[len(base) + 1 :]
    return None


def _undeclared(
    root: Path, graph: TaskGraph, plans, index, node: TaskNode, reads: list[str], run: _Run
):
    """The reads no part of the key covers, as (kind, path, producer): a candidate input (git lists
    it, the exclusions allow it), another task's declared output (kind "task"), or a file another traced
    task wrote without declaring it (kind "written"); either output usually gitignored, so only
    the producer's declaration and a task edge cover it."""
    closure = key_closure(graph, node.id)
    covered = _covered_files(graph, plans, node, closure)
    covered.update(
        [index.real_path(p) for p in covered]
    )  # an input seen through a link is read at its target
    outputs = [plans[t].outputs for t in (node.id, *closure) if plans[t].outputs is not None]
    for path in reads:
        if path in covered or any(o.allows(path) for o in outputs):
            continue
        producer = _producer(graph, plans, node.id, path)
        writer = run.writer(path, node.id) if producer is None else None
        if producer is not None:
            yield "task", path, producer
        elif writer is not None:
            if writer in closure and plans[writer].outputs is None:
                continue  # an uncached upstream always runs, and its key folds into this one
            yield "written", path, writer
        elif index.could_be_input(path):
            yield "input", path, None


def _task_fix(node: TaskNode, producer: TaskId) -> str:
    """Fold the producer's key: an inputs.tasks entry for a dependency, else a new edge."""
    where = "cache.inputs.tasks" if producer in node.deps else "dependsOn"
    return f'{where}: ["{producer}"] ({producer} outputs it)'


def key_closure(graph: TaskGraph, tid: TaskId) -> set[TaskId]:
    """Every task whose key folds into `tid`'s, transitively (a group folds all its deps)."""
    out: set[TaskId] = set()
    stack = [tid]
    while stack:
        for dep in _folded(graph.nodes[stack.pop()]):
            if dep not in out:
                out.add(dep)
                stack.append(dep)
    return out


def _folded(node: TaskNode) -> list[TaskId]:
    if node.is_group:
        return list(node.deps)
    cache = node.config.cache
    return keys.select_upstream(node.id, node.deps, cache.input_tasks if cache else None)


def _covered_files(graph: TaskGraph, plans, node: TaskNode, closure: set[TaskId]) -> set[str]:
    covered = set(FINGERPRINT_FILES)
    for tid in (node.id, *closure):
        inputs = plans[tid].inputs
        if inputs is not None:
            covered.update(p for p, _ in inputs.files)
        covered.add(_join(graph.nodes[tid].project_dir, "package.json"))
    return covered


def _shown(path: str, project_dir: str) -> str:
    return os.path.relpath(path, project_dir or ".")


def _producer(graph: TaskGraph, plans, tid: TaskId, path: str) -> TaskId | None:
    """A task of this run (not `tid`) that declares `path` among its outputs."""
    for other in graph.order:
        plan = plans[other]
        if other != tid and plan.outputs is not None and plan.outputs.allows(path):
            return other
    return None


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


# ---------------------------------------------------------------- what tasks wrote

# Writes that are no task's outcome: tools' own caches (babel-loader's and terser's
# node_modules/.cache, vite's deps, Next's, Parcel's, Angular's, eslint's, turbo's and Nx's stores).
# A restore need not bring them back, and a reader of one reads a cache, not a build.
_TOOL_CACHES = re.compile(
    r"(?:^|/)(?:node_modules/\.cache|node_modules/\.vite(?:-temp)?|\.turbo|\.nx|\.cache"
    r"|\.next/cache|\.parcel-cache|\.angular/cache)/|(?:^|/)\.(?:eslint|stylelint)cache$"
)
LARGE = 8  # this many undeclared reads in one top directory are suggested as its `dir/**`


def written_paths(accesses: Iterable, root: Path, index) -> list[str]:
    """Workspace-relative files the task wrote that are still there, in order, leaving out what
    is no output: the fixed exclusions (`.git`, `.vx`, build info, temp files), tools' caches, and
    files git tracks (a source the task rewrote is not an output to restore)."""
    seen: dict[str, None] = {}
    for access in accesses:
        if access.kind == "write" and access.ok:
            seen[access.path] = None
    out: dict[str, None] = {}
    for path in seen:
        rel = _relative(
            os.path.realpath(path), root
        )  # through a node_modules link, the package's file
        if (
            rel is None
            or rel in out
            or _never_input(rel, ())
            or _TOOL_CACHES.search(rel)
            or index.tracked(rel)
            or not os.path.isfile(os.path.join(root, rel))
        ):
            continue
        out[rel] = None
    return list(out)


class _Run:
    """What the check of one task needs of the others: who wrote what, each task's config
    vocabulary, and which files outside a package several packages' tasks read."""

    def __init__(self, root: Path, graph: TaskGraph, plans, index, packages, configs):
        self.root, self.graph, self.plans, self.index = root, graph, plans, index
        self.packages, self.configs = packages, configs
        self.writes: dict[TaskId, list[str]] = {}
        self._writers: dict[str, list[TaskId]] | None = None
        self._dialects: dict[TaskId, object] = {}
        self._outputs: dict[TaskId, list] = {}
        self._turbo: TurboRoot | None = None
        self._declared: list | None = None  # every config's cached tasks' output globs, for owner()
        self.shared: dict[
            str, set[str]
        ] = {}  # outside file -> packages of turbo tasks that read it undeclared
        self.globals: dict[str, None] = {}  # globalDependencies entries suggested

    @property
    def project_dirs(self) -> set[str]:
        """Every project's dir (the workspace's, else the run's): a suggested `dir/**` stops at them."""
        dirs = {getattr(p, "dir", "") for p in self.packages.values()}
        return dirs | {n.project_dir for n in self.graph.nodes.values()}

    def nested(self, node: TaskNode) -> set[str]:
        base = node.project_dir
        return {
            d for d in self.project_dirs if d != base and (base == "" or d.startswith(base + "/"))
        }

    def owner(self, path: str, tid: TaskId) -> TaskId | None:
        """A task (not `tid`) that declares `path` among its outputs: of this run, else of any
        project's config (a task outside the run still restores over it)."""
        found = _producer(self.graph, self.plans, tid, path)
        if found is not None:
            return found
        if self._declared is None:
            self._declared = []
            for name, cfg in self.configs.items():
                pkg = self.packages.get(name)
                for task in getattr(cfg, "tasks", {}).values():
                    cache = task.cache
                    if (
                        pkg is not None
                        and cache is not None
                        and (cache.output_files or cache.output_workspace_files)
                    ):
                        globs = GlobSet(cache.output_files) if cache.output_files else None
                        wide = (
                            GlobSet(cache.output_workspace_files)
                            if cache.output_workspace_files
                            else None
                        )
                        self._declared.append(
                            (TaskId(name, task.name), _base(pkg.dir), globs, wide)
                        )
        for other, prefix, globs, wide in self._declared:
            if other != tid and (
                (wide is not None and wide.matches(path))
                or (
                    globs is not None
                    and path.startswith(prefix)
                    and globs.matches(path[len(prefix) :])
                )
            ):
                return other
        return None

    def writer(self, path: str, tid: TaskId) -> TaskId | None:
        """The first traced task (not `tid`) that left `path` behind."""
        if self._writers is None:
            self._writers = {}
            for other, paths in self.writes.items():
                for p in paths:
                    self._writers.setdefault(p, []).append(other)
        return next((t for t in self._writers.get(path, ()) if t != tid), None)

    def count_shared(self, found: Mapping[TaskId, list]) -> None:
        for tid, items in found.items():
            node = self.graph.nodes[tid]
            if isinstance(self.dialect(tid), _Turbo):
                for kind, path, _ in items:
                    if kind == "input" and not _inside(path, node.project_dir, self.nested(node)):
                        self.shared.setdefault(path, set()).add(tid.package)

    def dialect(self, tid: TaskId):
        if tid not in self._dialects:
            self._dialects[tid] = self._make_dialect(tid)
        return self._dialects[tid]

    def _make_dialect(self, tid: TaskId):
        source = getattr(self.configs.get(tid.package), "source", "")
        if (
            os.path.basename(source) in ("turbo.json", "turbo.jsonc")
            and tid.package in self.packages
        ):
            from vx.config import turbo

            if self._turbo is None:
                self._turbo = turbo.find_root(str(self.root))
            if self._turbo is not None:
                return _Turbo.of(
                    self._turbo, self.root, self.packages[tid.package], tid.task, source
                )
        return _VX

    def output_groups(self, tid: TaskId) -> list[tuple[str, bool, list[str]]]:
        """A cached task's undeclared outputs as (entry, root-relative?, files), fewest globs."""
        if tid not in self._outputs:
            self._outputs[tid] = _output_groups(self, self.graph.nodes[tid])
        return self._outputs[tid]

    def global_notes(self) -> list[str]:
        if not self.globals or self._turbo is None:
            return []
        merged = list(dict.fromkeys([*self._turbo.global_inputs, *self.globals]))
        return [f'{self._turbo.source} with these fixes: "globalDependencies": {_json(merged)}']


def _output_groups(run: _Run, node: TaskNode) -> list[tuple[str, bool, list[str]]]:
    plan = run.plans[node.id]
    if plan.outputs is None:
        return []
    mine = run.writes.get(node.id, [])
    undeclared = [p for p in mine if not plan.outputs.allows(p)]
    written = set(mine)

    def whole(
        d: str,
    ) -> bool:  # every file now under `d` is one this task wrote: safe to wipe as an output
        for top, _dirs, names in os.walk(os.path.join(run.root, d)):
            if any(_relative(os.path.join(top, n), run.root) not in written for n in names):
                return False
        return True

    nested = run.nested(node)
    groups = []
    owners = {p: run.owner(p, node.id) for p in undeclared}
    for owner in dict.fromkeys(
        owners.values()
    ):  # another task's declared outputs apart: a different finding
        paths = [p for p in undeclared if owners[p] == owner]
        own = [p for p in paths if _inside(p, node.project_dir, nested)]
        other = [p for p in paths if p not in set(own)]
        groups += [
            (e, False, m) for e, m, _ in collapse(own, node.project_dir, whole, _walls(nested))
        ]
        groups += [
            (e, True, m)
            for e, m, _ in collapse(other, "", whole, _walls(run.project_dirs, strict=True))
        ]
    return groups


def collapse(
    paths: list[str], base: str, whole, blocked, listed=None
) -> list[tuple[str, list[str], int | None]]:
    """The fewest entries covering `paths` (all below `base`), relative to `base`, in the order of
    `paths`: a directory's `dir/**` where every file under it qualifies (`whole`) and it holds two
    or more of `paths`; with `listed`, also a top directory holding LARGE or more of them, with its
    file count. `blocked` directories (other projects) are never a glob's."""
    prefix = _base(base)
    memo: dict[str, bool] = {}
    trees: dict[str, list[str]] = {}
    singles: list[str] = []
    for path in paths:
        parts = path[len(prefix) :].split("/")[:-1]
        best = None
        for i in range(1, len(parts) + 1):  # the highest directory that qualifies
            d = prefix + "/".join(parts[:i])
            if blocked(d):
                continue
            if d not in memo:
                memo[d] = whole(d)
            if memo[d]:
                best = d
                break
        (trees.setdefault(best, []) if best else singles).append(path)
    out: list[tuple[str, list[str], int | None]] = []
    for d, members in trees.items():
        if len(members) >= 2:
            out.append((d[len(prefix) :] + "/**", members, None))
        else:
            singles += members
    if listed is not None:
        tops: dict[str, list[str]] = {}
        for path in singles:
            rel = path[len(prefix) :]
            if "/" in rel and not blocked(prefix + rel.split("/")[0]):
                tops.setdefault(rel.split("/")[0], []).append(path)
        for top, members in tops.items():
            if len(members) >= LARGE:
                out.append((top + "/**", members, len(listed(prefix + top))))
                singles = [p for p in singles if p not in set(members)]
    out += [(p[len(prefix) :], [p], None) for p in singles]
    first = {p: i for i, p in enumerate(paths)}
    return sorted(out, key=lambda entry: min(first[p] for p in entry[1]))


def _walls(dirs: Iterable[str], strict: bool = False):
    """Directories a suggested `dir/**` may not be: another project's (or, `strict`, one holding one)."""
    dirs = {d for d in dirs if d}

    def blocked(d: str) -> bool:
        return (not strict and d in dirs) or any(p.startswith(d + "/") for p in dirs)

    return blocked


def _inside(path: str, project_dir: str, nested: Iterable[str]) -> bool:
    prefix = _base(project_dir)
    return path.startswith(prefix) and not any(path.startswith(d + "/") for d in nested)


def _base(project_dir: str) -> str:
    return project_dir + "/" if project_dir else ""


# ---------------------------------------------------------------- one task's findings


def _verdict(run: _Run, node: TaskNode, reads: list[str], found: list) -> Verdict:
    dialect = run.dialect(node.id)
    order = {p: i for i, p in enumerate(reads)}
    corrections = _corrections(run, node)
    inputs = [p for kind, p, _ in found if kind == "input"]
    lines, entries, used = _input_lines(run, node, dialect, inputs, set(reads), corrections)
    notes = [
        dialect.glob_note(wrong, right) for wrong, right in corrections.items() if wrong not in used
    ]
    for kind, path, producer in found:
        if kind == "task":
            fix = _edge_fix(run, node, producer, path) or _task_fix_for(
                dialect, node, producer, run
            )
        elif kind == "written":
            fix = _written_fix(run, node, producer, path)
        else:
            continue
        lines.append(
            (
                [path],
                Undeclared(
                    path, _shown(path, node.project_dir), fix, add=not fix.startswith("no edge:")
                ),
            )
        )
    lines.sort(key=lambda line: min(order[p] for p in line[0]))
    outputs = []
    for entry, wide, members in run.output_groups(node.id):
        path = entry if wide else _base(node.project_dir) + entry
        shown = _shown(path.removesuffix("/**"), node.project_dir)
        shown = f"{shown}/** ({_plural(len(members), 'file')})" if entry.endswith("/**") else shown
        owner = run.owner(members[0], node.id)
        if owner is not None:  # tsc -b building a referenced project: another task's output
            fix = (
                f"no output of its own: {owner} declares it; let one task write it (two writers "
                "restore each other's copy)"
            )
            outputs.append(Undeclared(path, shown, fix, len(members), add=False))
        else:
            outputs.append(Undeclared(path, shown, dialect.output_fix(entry, wide), len(members)))
    own_outputs = [g for g, u in zip(run.output_groups(node.id), outputs) if u.add]
    notes += dialect.merged(entries, corrections, own_outputs)
    return Verdict(node.id, tuple(u for _, u in lines), tuple(outputs), tuple(notes))


def _input_lines(
    run: _Run,
    node: TaskNode,
    dialect,
    inputs: list[str],
    seen: set[str],
    corrections: Mapping[str, str | None],
) -> tuple[list, list, set[str]]:
    """Lines for undeclared candidate inputs: files a corrected glob would take, then the fewest
    `dir/**` and files inside the project, then files outside it (for turbo, `globalDependencies`
    when tasks of two or more packages read them). Also the entries suggested, as (entry as the
    config writes it, root-relative?, globalDependencies?), and the corrected globs used."""
    nested = run.nested(node)
    own = [p for p in inputs if _inside(p, node.project_dir, nested)]
    other = [p for p in inputs if p not in set(own)]
    prefix = _base(node.project_dir)
    lines, entries, used = [], [], set()
    for wrong, right in corrections.items():
        if right is None:
            continue
        globs = GlobSet([right])
        members = [p for p in own if globs.matches(p[len(prefix) :])]
        if members:
            used.add(wrong)
            own = [p for p in own if p not in set(members)]
            lines.append(
                (
                    members,
                    _line(
                        node,
                        prefix + right,
                        len(members),
                        dialect.input_fix(right, False, instead=wrong),
                    ),
                )
            )
            entries.append((right, False, False))

    def whole(d: str) -> bool:
        files = run.index.listed_under(d)
        return bool(files) and all(f in seen for f in files)

    for entry, members, total in collapse(
        own, node.project_dir, whole, _walls(nested), run.index.listed_under
    ):
        lines.append(
            (
                members,
                _line(node, prefix + entry, len(members), dialect.input_fix(entry, False), total),
            )
        )
        entries.append((entry, False, False))
    for entry, members, total in collapse(
        other, "", whole, _walls(run.project_dirs, strict=True), run.index.listed_under
    ):
        shared = isinstance(dialect, _Turbo) and all(
            len(run.shared.get(p, ())) >= 2 for p in members
        )
        if shared:
            run.globals[entry] = None
        lines.append(
            (
                members,
                _line(
                    node, entry, len(members), dialect.input_fix(entry, True, shared=shared), total
                ),
            )
        )
        entries.append((entry, True, shared))
    return lines, entries, used


def _line(node: TaskNode, path: str, count: int, fix: str, total: int | None = None) -> Undeclared:
    if not path.endswith("/**"):
        return Undeclared(path, _shown(path, node.project_dir), fix)
    shown = _shown(path[:-3], node.project_dir) + "/**"
    of = f"{count} of its {total} files read" if total is not None else _plural(count, "file")
    return Undeclared(path, f"{shown} ({of})", fix, count)


def _corrections(run: _Run, node: TaskNode) -> dict[str, str | None]:
    """Declared project-relative globs that match nothing here but do from the workspace root, each
    with the same glob from the project dir (None when it cannot be had). Turbo's inputs are
    package-relative too: `packages/**/src/**` in packages/dom means packages/dom/packages/**/src/**."""
    plan, cache = run.plans[node.id], node.config.cache
    if plan.inputs is None or cache is None:
        return {}
    everything = run.index.listed_under("")
    out = {}
    for glob in plan.inputs.unmatched_globs:
        if glob not in cache.input_files or glob.startswith("!"):
            continue
        from_root = GlobSet([glob])
        if not any(map(from_root.matches, everything)):
            continue  # nothing to explain (it matched nothing, as warned): a shared definition's glob
        out[glob] = project_relative(glob, node.project_dir)
    return out


def project_relative(glob: str, project_dir: str) -> str | None:
    """`glob` with its leading segments matched against the project dir taken off (`packages/**/src/**`
    at `packages/dom` is `src/**`); None when they do not lead to the project."""
    segs, dirs = glob.split("/"), project_dir.split("/") if project_dir else []
    i = j = 0
    while j < len(dirs) and i < len(segs) - 1:
        if segs[i] == "**":
            return (
                "/".join(segs[i + 1 :]) if i + 1 < len(segs) else None
            )  # `**` takes the rest of the dir
        if not fnmatch.fnmatchcase(dirs[j], segs[i]):
            return None
        i, j = i + 1, j + 1
    return "/".join(segs[i:]) if j == len(dirs) and i < len(segs) else None


def _edge_fix(run: _Run, node: TaskNode, producer: TaskId, path: str) -> str | None:
    """What to say instead of an edge that would close a cycle (GR: the graph stays acyclic)."""
    caret = _caret(run, node, producer)
    if not (
        _reaches(run.graph, producer, node.id)
        or (caret and _package_reaches(run.packages, producer.package, node.id.package))
    ):
        return None
    text = (
        f"no edge: {producer} outputs it and depends on this task (dependsOn would close a cycle), so this "
        "read is of an earlier build; move the read out of this task"
    )
    if run.index.could_be_input(path):
        return (
            text
            + f", or declare it an input ({run.dialect(node.id).input_fix(path, True)}) if that is intended"
        )
    return text + " (a gitignored file cannot be an input)"


def _task_fix_for(dialect, node: TaskNode, producer: TaskId, run: _Run) -> str:
    return dialect.edge_fix(node, producer, _caret(run, node, producer))


def _written_fix(run: _Run, node: TaskNode, producer: TaskId, path: str) -> str:
    """The producer's outputs (it wrote the file without declaring it), and the edge when its key
    does not fold into this one's."""
    entry, wide = next(
        ((e, w) for e, w, members in run.output_groups(producer) if path in members), (path, True)
    )
    edge = None
    if producer not in key_closure(run.graph, node.id):
        edge = _edge_fix(run, node, producer, path)
        if edge is not None:
            return edge  # a cycle: no declaration makes this read sound
        edge = _task_fix_for(run.dialect(node.id), node, producer, run)
    if (
        run.plans[producer].outputs is None
    ):  # uncached: it always runs, only an edge orders and folds it
        assert edge is not None  # _undeclared skips an uncached writer the key already folds
        return edge.replace(" outputs it)", " writes it, uncached)")
    fix = (
        run.dialect(producer).output_fix(entry, wide, owner=producer)
        + f" ({producer} writes it undeclared)"
    )
    return fix if edge is None else f"{fix}; and {edge}"


def _caret(run: _Run, node: TaskNode, producer: TaskId) -> bool:
    """Whether the edge is turbo's `^name`: the same task of a package this one depends on."""
    pkg = run.packages.get(node.id.package)
    return producer.task == node.id.task and pkg is not None and producer.package in pkg.deps


def _reaches(graph: TaskGraph, start: TaskId, goal: TaskId) -> bool:
    seen, stack = {start}, [start]
    while stack:
        tid = stack.pop()
        if tid == goal:
            return True
        for dep in graph.nodes[tid].deps:
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return False


def _package_reaches(packages: Mapping[str, object], start: str, goal: str) -> bool:
    seen, stack = {start}, [start]
    while stack:
        name = stack.pop()
        if name == goal:
            return True
        for dep in getattr(packages.get(name), "deps", ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return False


def _json(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


# ---------------------------------------------------------------- vocabularies


class _Vx:
    """Fixes as vx.config text."""

    @staticmethod
    def input_fix(entry: str, wide: bool, instead: str | None = None, shared: bool = False) -> str:
        text = f'cache.inputs.{"workspaceFiles" if wide else "files"}: ["{entry}"]'
        if instead:
            text += f' (in place of "{instead}": files globs are project-relative)'
        return text

    @staticmethod
    def output_fix(entry: str, wide: bool, owner: TaskId | None = None) -> str:
        text = f'cache.outputs.{"workspaceFiles" if wide else "files"}: ["{entry}"]'
        return f"{owner}'s {text}" if owner is not None else text

    @staticmethod
    def edge_fix(node: TaskNode, producer: TaskId, caret: bool) -> str:
        return _task_fix(node, producer)

    @staticmethod
    def glob_note(glob: str, right: str | None) -> str:
        if right is None:
            return (
                f'"{glob}" in cache.inputs.files matches nothing: files globs are project-relative; '
                "cache.inputs.workspaceFiles takes it from the root"
            )
        return (
            f'"{glob}" in cache.inputs.files matches nothing: files globs are project-relative; '
            f'"{right}" here, or cache.inputs.workspaceFiles for a root-relative glob'
        )

    @staticmethod
    def merged(added, corrections, outputs) -> list[str]:
        return []


_VX = _Vx()


class _Turbo:
    """Fixes as turbo.json text, at the definition the task was mapped from."""

    def __init__(self, turbo, file: str, key: str, body: dict):
        self.turbo, self.file, self.key, self.body = turbo, file, key, body

    @classmethod
    def of(cls, turbo, root: Path, pkg, task: str, source: str) -> _Turbo:
        from vx.config.turbo import _definitions, read_package

        own = read_package(str(root / pkg.dir), source) if source != turbo.source else None
        body = _definitions(turbo, pkg, own).get(task, {})
        if own is not None and task in own["tasks"]:
            return cls(turbo, source, _task_key(task), body)
        qualified = f"{pkg.name}#{task}"
        return cls(
            turbo, turbo.source, _task_key(qualified if qualified in turbo.tasks else task), body
        )

    @property
    def where(self) -> str:
        return f"{self.file} {self.key}"

    def input_fix(
        self, entry: str, wide: bool, instead: str | None = None, shared: bool = False
    ) -> str:
        if shared:
            return f'"{entry}" to {self.turbo.source} "globalDependencies" (tasks of several packages read it)'
        text = f'"{"$TURBO_ROOT$/" if wide else ""}{entry}" to {self.where} "inputs"'
        if instead:
            text += f' (in place of "{instead}": turbo inputs are package-relative)'
        return text

    def output_fix(self, entry: str, wide: bool, owner: TaskId | None = None) -> str:
        return f'"{"$TURBO_ROOT$/" if wide else ""}{entry}" to {self.where} "outputs"'

    def edge_fix(self, node: TaskNode, producer: TaskId, caret: bool) -> str:
        dep = (
            f"^{producer.task}"
            if caret
            else producer.task
            if producer.package == node.id.package
            else str(producer)
        )
        return f'"{dep}" to {self.where} "dependsOn" ({producer} outputs it)'

    def glob_note(self, glob: str, right: str | None) -> str:
        if right is None:
            return (
                f'"{glob}" in {self.where} "inputs" matches nothing: turbo inputs are package-relative; '
                f'"$TURBO_ROOT$/{glob}" matches from the root'
            )
        return (
            f'"{glob}" in {self.where} "inputs" matches nothing: turbo inputs are package-relative; '
            f'"{right}" here, or "$TURBO_ROOT$/{glob}" for root-relative'
        )

    def merged(self, entries: list, corrections: Mapping[str, str | None], outputs) -> list[str]:
        """The definition's whole lists with every fix of the block, to paste."""
        out = []
        added = [
            ("$TURBO_ROOT$/" if wide else "") + entry
            for entry, wide, shared in entries
            if not shared
        ]
        if added:
            declared = [
                corrections.get(g) or g for g in self.body.get("inputs") or ["$TURBO_DEFAULT$"]
            ]
            out.append(
                f'{self.where} with these fixes: "inputs": {_json(list(dict.fromkeys([*declared, *added])))}'
            )
        if outputs:
            entries = [("$TURBO_ROOT$/" if wide else "") + e for e, wide, _ in outputs]
            merged = list(dict.fromkeys([*self.body.get("outputs", []), *entries]))
            out.append(f'{self.where} with these fixes: "outputs": {_json(merged)}')
        return out


def _task_key(name: str) -> str:
    return f"tasks.{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name) else f'tasks["{name}"]'


# ---------------------------------------------------------------- the report


def render(report: VerifyReport) -> list[str]:
    """One block per task with findings, then the count (plain text, no colour)."""
    lines: list[str] = []
    for verdict in report.verdicts:
        if verdict.undeclared or verdict.outputs:
            lines += _block(verdict)
    lines += [
        _unkeyed_note(v)
        for v in report.verdicts
        if v.unkeyed and not any(u.path.startswith("$") for u in v.undeclared)
    ]
    lines += report.notes
    traced = len(report.verdicts)
    if report.count:
        tasks = sum(1 for v in report.verdicts if v.undeclared or v.outputs)
        what = ", ".join(
            part
            for part in (
                _plural(report.inputs, "undeclared input") if report.inputs else "",
                _plural(report.written, "undeclared output") if report.written else "",
            )
            if part
        )
        lines.append(f"verify: {what} in {tasks} of {_plural(traced, 'traced task')}")
    else:
        lines.append(f"verify: every traced task declared what it read ({_plural(traced, 'task')})")
    if report.untraced:
        lines.append(
            f"verify: not traced (did not run): {', '.join(str(t) for t in report.untraced)}"
        )
    if report.unobserved:
        lines.append(
            f"verify: not traced (sandbox.trace is false, so what they read is unknown): "
            f"{', '.join(str(t) for t in report.unobserved)}"
        )
    return lines


def _block(verdict: Verdict) -> list[str]:
    lines: list[str] = []
    for items, verb, noun in (
        (verdict.undeclared, "read", "undeclared input"),
        (verdict.outputs, "wrote", "undeclared output"),
    ):
        if items:
            lines.append(f"{verdict.id} {verb} {_plural(sum(u.count for u in items), noun)}:")
            width = max(len(u.shown) for u in items)
            lines += [f"  {u.shown.ljust(width)}  {'add ' if u.add else ''}{u.fix}" for u in items]
    lines += [f"  {note}" for note in verdict.notes]
    return lines + [""]


def _unkeyed_note(verdict: Verdict) -> str:
    names = ", ".join(verdict.unkeyed)
    return (
        f"note: {verdict.id} gets {names} (passThrough) outside its key; a read of a variable is not "
        f"visible to the trace — if it shapes the output, list it in cache.inputs.env"
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
