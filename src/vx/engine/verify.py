"""`vx run --verify=inputs`: run every task traced, name each file a cached task read
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

This module is the entry (the mode, the check); `vx.engine.verify_tracer` runs the tasks traced,
`vx.engine.verify_judge` holds what they read and wrote against their declarations,
`vx.engine.verify_fixes` writes each fix in the task's config vocabulary, and
`vx.engine.verify_findings` holds the findings and prints them. The run verb takes all it needs
from here: `render`, `InputTracer` and `find_strace` are re-exported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from vx.engine.verify_findings import VerifyReport
from vx.engine.verify_findings import render as render
from vx.engine.verify_judge import judge
from vx.engine.verify_tracer import InputTracer
from vx.engine.verify_tracer import find_strace as find_strace
from vx.errors import UsageError
from vx.model import TaskGraph, TaskId

if TYPE_CHECKING:
    from vx.model import TaskPlan

MODES = ("inputs", "determinism", "all")  # all: inputs and determinism
LATER_MODES = ("fingerprint",)


def parse_mode(text: str | None) -> str | None:
    """`--verify[=MODE]`: bare means inputs; the reference's fingerprint mode is named, not run."""
    if text is None:
        return None
    mode = text or "inputs"
    if mode in MODES:
        return mode
    hint = "use `--verify=inputs`, `--verify=determinism` or `--verify=all`"
    if mode in LATER_MODES:
        raise UsageError(f"`--verify={mode}` is not implemented yet", hint=hint)
    raise UsageError(f"`--verify={text}` is not a mode", hint=hint)


def traces(mode: str | None) -> bool:
    """Whether the mode runs the tasks under strace (`inputs`, `all`)."""
    return mode in ("inputs", "all")


def reruns(mode: str | None) -> bool:
    """Whether the mode runs each cached task again to compare (`determinism`, `all`)."""
    return mode in ("determinism", "all")


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
    verdicts, notes = judge(root, graph, plans, index, traced, packages or {}, configs or {})
    return VerifyReport(
        tuple(verdicts),
        tuple(untraced),
        unobserved=tuple(unobserved),
        notes=tuple(notes),
    )
