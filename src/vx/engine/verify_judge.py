"""The judging of `vx run --verify=inputs` (`vx.engine.verify`): each traced task's reads held
against what its key covers, its writes against its declared outputs, and the fix for each
finding, as few globs as cover the files, never an edge that would close a cycle.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from msgspec.structs import replace

from vx.engine.verify_findings import Undeclared, Verdict, plural
from vx.engine.verify_fixes import VX_FIXES, TurboFixes, TurboFold, json_list
from vx.files.globs import GlobSet
from vx.files.index import FINGERPRINT_FILES, never_input
from vx.model import TaskGraph, TaskId, TaskNode
from vx.plan import keys

if TYPE_CHECKING:
    from vx.config.turbo import TurboRoot
    from vx.model import TaskPlan

READ_KINDS = ("read", "rdwr", "exec")  # Access kinds (sandbox.trace) that make a file an input


def judge(
    root: Path,
    graph: TaskGraph,
    plans: Mapping[TaskId, TaskPlan],
    index,
    traced: Mapping[TaskId, list],
    packages: Mapping[str, object],
    configs: Mapping[str, object],
) -> tuple[list[Verdict], list[str]]:
    """A verdict for each cached task of `traced` (task -> its accesses), in its order, and the
    run-wide notes. What every traced task wrote counts, an uncached one's too: cached readers
    may read it."""
    run = _Run(root, graph, plans, index, packages, configs)
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
    run.count_outputs(reads)
    verdicts = [
        _with_env(
            _verdict(run, graph.nodes[tid], reads[tid], found[tid]),
            graph.nodes[tid],
            plans[tid],
            traced[tid],
        )
        for tid in reads
    ]
    verdicts = [replace(v, unnamed=_unnamed(traced[v.id])) for v in verdicts]
    return verdicts, run.global_notes()


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


def _unnamed(accesses) -> tuple[str, ...]:
    """The mounts the task opened a file in by a handle the trace never saw made (sandbox.trace)."""
    return tuple(sorted({a.path for a in accesses if a.kind == "unnamed"}))


_ENVIRON = re.compile(r"^/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/environ$")


def unkeyed_env(node: TaskNode, plan) -> tuple[str, ...]:
    """The variables the task was given that its key does not fold: what its `passThrough`
    brought (the essential list, `define` literals, vx's own and the package manager's for a
    script are accounted for elsewhere)."""
    from vx.plan.environment import ESSENTIAL_ENV
    from vx.plan.lifecycle import is_script_variable

    keyed = {name for name, _ in plan.record.env} if plan.record is not None else set()
    execs = node.config.exec
    define = execs.env.define if execs is not None else ()
    own = {*ESSENTIAL_ENV, *define, "VX_RUN_WORKSPACE", "VX_RUN_TASK"}
    script = execs is not None and bool(execs.script)
    return tuple(
        sorted(
            n
            for n in plan.env
            if n not in keyed and n not in own and not (script and is_script_variable(n))
        )
    )


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
        elif (owner := run.owner(path, node.id)) is not None:
            yield "task", path, owner  # the output of a task this run did not select
        elif index.could_be_input(path):
            yield "input", path, None


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
            or never_input(rel, ())
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
        # (task, an undeclared output entry) -> the `!` entries that keep tools' caches out of it
        self.taken_back: dict[tuple[TaskId, str], tuple[str, ...]] = {}
        self.folds: dict[str, TurboFold] = {}  # a turbo.json definition -> its fixes, folded
        self.members: dict[str | None, set[str]] = {}  # a definition -> its traced packages
        # (definition, undeclared output entry, root-relative?) -> the packages that write it
        self.writers: dict[tuple[str | None, str, bool], set[str]] = {}

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

    def output_glob(self, tid: TaskId, path: str) -> str:
        """The output glob `tid` declares that holds `path`, workspace-relative (else `path`)."""
        task = getattr(self.configs.get(tid.package), "tasks", {}).get(tid.task)
        pkg = self.packages.get(tid.package)
        cache = getattr(task, "cache", None)
        if cache is None or pkg is None:
            return path
        prefix = _base(getattr(pkg, "dir", ""))
        for glob in cache.output_files:
            inside = path.startswith(prefix) and GlobSet([glob]).matches(path[len(prefix) :])
            if not glob.startswith("!") and inside:
                return prefix + glob
        for glob in cache.output_workspace_files:
            if not glob.startswith("!") and GlobSet([glob]).matches(path):
                return glob
        return path

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
            if isinstance(self.dialect(tid), TurboFixes):
                for kind, path, _ in items:
                    if kind == "input" and not _inside(path, node.project_dir, self.nested(node)):
                        self.shared.setdefault(path, set()).add(tid.package)

    def count_outputs(self, tids: Iterable[TaskId]) -> None:
        """Which packages of each turbo.json definition write each undeclared output entry."""
        for tid in tids:
            dialect = self.dialect(tid)
            if isinstance(dialect, TurboFixes):
                self.members.setdefault(dialect.where, set()).add(tid.package)
                for entry, wide, _ in self.output_groups(tid):
                    self.writers.setdefault((dialect.where, entry, wide), set()).add(tid.package)

    def alone(self, tid: TaskId, entry: str, wide: bool) -> bool:
        """Whether `tid`'s package alone, of several that run its turbo.json definition, writes
        `entry`: it then goes to a `pkg#name` definition of its own (`TurboFold`)."""
        where = self.dialect(tid).where if isinstance(self.dialect(tid), TurboFixes) else None
        return len(self.members.get(where, ())) > 1 and self.writers.get((where, entry, wide)) == {
            tid.package
        }

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
                return TurboFixes.of(
                    self._turbo, self.root, self.packages[tid.package], tid.task, source
                )
        return VX_FIXES

    def output_groups(self, tid: TaskId) -> list[tuple[str, bool, list[str]]]:
        """A cached task's undeclared outputs as (entry, root-relative?, files), fewest globs."""
        if tid not in self._outputs:
            self._outputs[tid] = _output_groups(self, self.graph.nodes[tid])
        return self._outputs[tid]

    def output_entry(self, tid: TaskId, path: str) -> tuple[str, bool]:
        """The undeclared output entry of `tid` that holds `path`, and whether it is root-relative."""
        return next(
            ((e, w) for e, w, members in self.output_groups(tid) if path in members), (path, True)
        )

    def fold(self, fixes: TurboFixes, task: str) -> TurboFold:
        """The fixes of one turbo.json definition, over the packages of the run that have it."""
        if fixes.where not in self.folds:
            self.folds[fixes.where] = TurboFold(fixes, task)
        return self.folds[fixes.where]

    def global_notes(self) -> list[str]:
        """The run-wide fixes: each turbo.json definition's, then `globalDependencies`."""
        out = [line for fold in self.folds.values() for line in fold.lines()]
        if not self.globals or self._turbo is None:
            return out
        merged = list(dict.fromkeys([*self._turbo.global_inputs, *self.globals]))
        return out + [
            f'{self._turbo.source} with these fixes: "globalDependencies": {json_list(merged)}'
        ]


def _output_groups(run: _Run, node: TaskNode) -> list[tuple[str, bool, list[str]]]:
    plan = run.plans[node.id]
    if plan.outputs is None:
        return []
    mine = run.writes.get(node.id, [])
    undeclared = [p for p in mine if not plan.outputs.allows(p)]
    written = set(mine)
    caches: dict[str, None] = {}  # tools' caches inside a directory the task wrote (.next/cache)

    def whole(d: str) -> bool:
        """Every file now under `d` is one this task wrote, or a tool's cache (taken back with a
        `!` entry): safe to wipe as an output."""
        found = []
        for top, _dirs, names in os.walk(os.path.join(run.root, d)):
            for name in names:
                rel = _relative(os.path.join(top, name), run.root) or ""
                cache = _TOOL_CACHES.search(rel)
                if cache is not None:
                    found.append(rel[: cache.end()])  # a directory's ends with "/"
                elif rel not in written:
                    return False
        caches.update(dict.fromkeys(found))
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
    for entry, wide, _ in groups:  # `.next/**` keeps Next's cache out: `!.next/cache/**`
        base = "" if wide else _base(node.project_dir)
        tree = base + entry.removesuffix("/**") + "/"
        back = [c[len(base) :] for c in caches if entry.endswith("/**") and c.startswith(tree)]
        if back:
            run.taken_back[node.id, entry] = tuple(
                f"!{c}**" if c.endswith("/") else f"!{c}" for c in back
            )
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
    lines += _produced_lines(run, node, dialect, found)
    lines.sort(key=lambda line: min(order[p] for p in line[0]))
    outputs = _output_lines(run, node, dialect)
    if isinstance(dialect, TurboFixes):  # said once for the definition, after the blocks
        own = [
            text
            for (entry, wide, _), u in zip(run.output_groups(node.id), outputs)
            if u.add
            for text in dialect.outputs_text(entry, wide, run.taken_back.get((node.id, entry), ()))
        ]
        added = [("$TURBO_ROOT$/" if wide else "") + e for e, wide, shared in entries if not shared]
        fold = run.fold(dialect, node.id.task)
        fold.add(node.id.package, corrections, used, added, own, _empty(run, node))
        notes = []
    return Verdict(node.id, tuple(u for _, u in lines), tuple(outputs), tuple(notes))


def _empty(run: _Run, node: TaskNode) -> tuple[str, ...]:
    """The task's own input globs that match no file now, the run over (a glob an upstream task
    of the run satisfied matches); none beside `$TURBO_DEFAULT$`, which only adds ignored files."""
    plan, cache = run.plans[node.id], node.config.cache
    if plan.inputs is None or plan.outputs is None or cache is None:
        return ()
    if cache.input_reach is not None:
        return ()
    own = tuple(g for g in plan.inputs.unmatched_globs if g in cache.input_files)
    return run.index.unmatched_now(plan.outputs.input_query, own) if own else ()


def _output_lines(run: _Run, node: TaskNode, dialect) -> list[Undeclared]:
    """A line for each undeclared output entry the task wrote."""
    outputs = []
    for entry, wide, members in run.output_groups(node.id):
        path = entry if wide else _base(node.project_dir) + entry
        shown = _shown(path.removesuffix("/**"), node.project_dir)
        shown = f"{shown}/** ({plural(len(members), 'file')})" if entry.endswith("/**") else shown
        owner = run.owner(members[0], node.id)
        if owner is not None:  # tsc -b building a referenced project: another task's output
            fix = (
                f"no output of its own: {owner} declares it; let one task write it (two writers "
                "restore each other's copy)"
            )
            outputs.append(Undeclared(path, shown, fix, len(members), add=False))
        else:
            back = run.taken_back.get((node.id, entry), ())
            alone = run.alone(node.id, entry, wide)
            where = dialect.alone(node.id) if alone else dialect
            outputs.append(
                Undeclared(path, shown, where.output_fix(entry, wide, back=back), len(members))
            )
    return outputs


def _produced_lines(run: _Run, node: TaskNode, dialect, found: list) -> list:
    """Lines for reads of what another task writes. The output another task declares, read with
    no dependsOn path to that task, is one line per output glob: what it is, whose output, the
    edge that is missing (it fails only when the wipe before the producer's run comes first)."""
    lines = []
    missing: dict[tuple[TaskId, str], list[str]] = {}
    written: dict[tuple[TaskId, str, bool], list[str]] = {}
    for kind, path, producer in found:
        cycle = _edge_fix(run, node, producer, path) if kind == "task" else None
        if kind == "task" and cycle is None and not _reaches(run.graph, node.id, producer):
            missing.setdefault((producer, run.output_glob(producer, path)), []).append(path)
            continue
        if kind == "written":  # one line per entry of the writer's undeclared outputs
            written.setdefault((producer, *run.output_entry(producer, path)), []).append(path)
            continue
        if kind != "task":
            continue
        fix = cycle or _task_fix_for(dialect, node, producer, run)
        shown = _shown(path, node.project_dir)
        lines.append(([path], Undeclared(path, shown, fix, add=not fix.startswith("no edge:"))))
    for (producer, entry, wide), paths in written.items():
        fix = _written_fix(run, node, producer, paths[0])
        if len(paths) > 1 or entry.endswith("/**"):
            glob = entry if wide else _base(run.graph.nodes[producer].project_dir) + entry
            line = _line(node, glob, len(paths), fix)
            lines.append((paths, replace(line, add=not fix.startswith("no edge:"))))
        else:
            shown = _shown(paths[0], node.project_dir)
            lines.append(
                (paths, Undeclared(paths[0], shown, fix, add=not fix.startswith("no edge:")))
            )
    for (producer, glob), paths in missing.items():
        fix = f"the output of {producer}, with no edge to it: add " + dialect.dependency(
            node, producer, _caret(run, node, producer)
        )
        tree = glob.endswith("/**")
        shown = _shown(glob.removesuffix("/**"), node.project_dir) + ("/**" if tree else "")
        shown += f" ({plural(len(paths), 'file')})" if tree else ""
        lines.append((paths, Undeclared(glob, shown, fix, len(paths), add=False)))
    return lines


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
        shared = isinstance(dialect, TurboFixes) and all(
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
    of = f"{count} of its {total} files read" if total is not None else plural(count, "file")
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
    entry, wide = run.output_entry(producer, path)
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
    back = run.taken_back.get((producer, entry), ())
    fix = run.dialect(producer).output_fix(entry, wide, owner=producer, back=back)
    return fix if edge is None else f"{fix}; and {edge}"


def _caret(run: _Run, node: TaskNode, producer: TaskId) -> bool:
    """Whether the edge is `^name`: a task of a package this one depends on."""
    pkg = run.packages.get(node.id.package)
    return pkg is not None and producer.package in pkg.deps


def _reaches(graph: TaskGraph, start: TaskId, goal: TaskId) -> bool:
    """Whether a dependsOn path leads from `start` to `goal` (a task outside the run: none)."""
    seen, stack = {start}, [start]
    while stack:
        tid = stack.pop()
        if tid == goal:
            return True
        if tid not in graph.nodes:
            continue
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
