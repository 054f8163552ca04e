"""`vx run --verify=inputs` (LG-03): run every cached task traced, name each file it read undeclared.

A cache is only as sound as its declared inputs: a task that reads `../shared/x.js` without
declaring it is restored from the cache after `x.js` changed. Under `--verify=inputs` every
task with `cache` executes (cache reads off, writes as usual) under `strace -f --seccomp-bpf`,
and each file it opened for reading or executed inside the workspace is checked against
what its key covers: its own `cache.inputs`, its `package.json`, the root lockfiles, its
outputs, and the inputs and outputs of every upstream task whose key folds into its own
(transitively). A file that could be an input (listed by git, not excluded by KEY-17) but
is covered by none of these is reported with the `cache.inputs` entry that would cover it,
and the run exits 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

from msgspec import Struct

from vx import keys
from vx.errors import EnvironmentFailure, UsageError
from vx.executor import Launch
from vx.files import FINGERPRINT_FILES
from vx.model import TaskGraph, TaskId, TaskNode

MODES = ("inputs",)
LATER_MODES = ("determinism", "fingerprint", "all")
READ_KINDS = ("read", "rdwr", "exec")  # Access kinds (sandbox.trace) that make a file an input


class Undeclared(Struct, frozen=True):
    """One file a task read but its key does not cover."""

    path: str  # workspace-relative
    shown: str  # as the task saw it: relative to its project dir
    fix: str  # the declaration that would cover it, as config text


class Verdict(Struct, frozen=True):
    """What one traced task read that its declaration missed."""

    id: TaskId
    undeclared: tuple[Undeclared, ...]


class VerifyReport(Struct, frozen=True):
    verdicts: tuple[Verdict, ...]  # one per traced task, in graph order
    untraced: tuple[TaskId, ...] = ()  # cached tasks that did not execute (skipped, aborted)

    @property
    def count(self) -> int:
        return sum(len(v.undeclared) for v in self.verdicts)

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
    probe = subprocess.run([strace, "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "--", "/bin/true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        raise EnvironmentFailure(f"`--verify=inputs` cannot trace: {reason}",
                                 hint="strace needs ptrace (in a container: --cap-add SYS_PTRACE) and "
                                      "seccomp-bpf (strace >= 5.3)")
    return strace


class InputTracer:
    """Wrap each cached task's attempts in strace, one trace file per attempt, and parse them.

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
        if plan.outputs is None or node.id in self.skip or plan.command is None or plan.sandbox is not None:
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
        out = []
        for path in paths:
            with open(path, encoding="ascii", errors="replace") as lines:
                out += TraceParser(str(cwd)).feed(lines)
        return out

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def strace_prefix(strace: str, output: Path) -> list[str]:
    """The sandbox's strace flags and syscall set, writing to `output`, tracer in our group."""
    from vx.sandbox.trace import SYSCALLS

    return [strace, "-D", "-f", "-qq", "-y", "-xx", "--seccomp-bpf", "-e", "signal=none",
            "-e", "trace=" + ",".join(SYSCALLS), "-e", "inject=io_uring_setup:error=ENOSYS",
            "-o", str(output), "--"]  # fmt: skip


# ---------------------------------------------------------------- checking


def check(root: Path, graph: TaskGraph, plans: Mapping[TaskId, object], index, tracer: InputTracer,
          extra: Mapping[TaskId, list] | None = None) -> VerifyReport:
    """Compare each traced task's reads with what its key covers; `extra` holds accesses of
    tasks traced elsewhere (sandboxed ones), keyed like the tracer's."""
    verdicts, untraced = [], []
    for tid in graph.order:
        node, plan = graph.nodes[tid], plans[tid]
        if node.is_group or plan.outputs is None:
            continue
        accesses = (extra or {}).get(tid)
        if accesses is None:
            accesses = tracer.accesses(tid, root / node.project_dir)
        if accesses is None:
            untraced.append(tid)
            continue
        reads = read_paths(accesses, root)
        verdicts.append(Verdict(tid, tuple(_undeclared(root, graph, plans, index, node, reads))))
    return VerifyReport(tuple(verdicts), tuple(untraced))


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
        return path[len(base) + 1:]
    return None


def _undeclared(root: Path, graph: TaskGraph, plans, index, node: TaskNode, reads: list[str]) -> list[Undeclared]:
    """The reads no part of the key covers: a candidate input (git lists it, KEY-17 allows it)
    or another task's declared output (usually gitignored, so only a task edge covers it)."""
    closure = key_closure(graph, node.id)
    covered = _covered_files(graph, plans, node, closure)
    outputs = [plans[t].outputs for t in (node.id, *closure) if plans[t].outputs is not None]
    out = []
    for path in reads:
        if path in covered or any(o.allows(path) for o in outputs):
            continue
        producer = _producer(graph, plans, node.id, path)
        if producer is not None:
            fix = _task_fix(node, producer)
        elif index.could_be_input(path):
            fix = "cache.inputs." + cover_entry(path, node.project_dir, _nested(graph, node))
        else:
            continue
        out.append(Undeclared(path, _shown(path, node.project_dir), fix))
    return out


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


def _nested(graph: TaskGraph, node: TaskNode) -> set[str]:
    base = node.project_dir
    dirs = {n.project_dir for n in graph.nodes.values()}
    return {d for d in dirs if d != base and (base == "" or d.startswith(base + "/"))}


def cover_entry(path: str, project_dir: str, nested: Iterable[str] = ()) -> str:
    """`files: ["src/x.js"]` inside the task's own project, else `workspaceFiles: [...]` (KEY-19)."""
    prefix = project_dir + "/" if project_dir else ""
    inside = path.startswith(prefix) and not any(path.startswith(d + "/") for d in nested)
    if inside:
        return f'files: ["{path[len(prefix):]}"]'
    return f'workspaceFiles: ["{path}"]'


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


# ---------------------------------------------------------------- the report


def render(report: VerifyReport) -> list[str]:
    """One block per task with undeclared inputs, then the count (plain text, no colour)."""
    lines: list[str] = []
    for verdict in report.verdicts:
        if verdict.undeclared:
            lines += _block(verdict)
    traced = len(report.verdicts)
    if report.count:
        tasks = sum(1 for v in report.verdicts if v.undeclared)
        lines.append(f"verify: {_plural(report.count, 'undeclared input')} in {tasks} of "
                     f"{_plural(traced, 'traced task')}")
    else:
        lines.append(f"verify: every traced task declared what it read ({_plural(traced, 'task')})")
    if report.untraced:
        lines.append(f"verify: not traced (did not run): {', '.join(str(t) for t in report.untraced)}")
    return lines


def _block(verdict: Verdict) -> list[str]:
    lines = [f"{verdict.id} read {_plural(len(verdict.undeclared), 'undeclared input')}:"]
    width = max(len(u.shown) for u in verdict.undeclared)
    for u in verdict.undeclared:
        lines.append(f"  {u.shown.ljust(width)}  add {u.fix}")
    return lines + [""]


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
