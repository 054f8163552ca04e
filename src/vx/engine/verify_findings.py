"""What `vx run --verify=inputs` found (`vx.engine.verify`): each traced task's undeclared
reads and writes, as records, and as the text the run prints after its summary.
"""

from __future__ import annotations

from msgspec import Struct

from vx.model import TaskId


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
    unnamed: tuple[str, ...] = ()  # mounts it opened a file in by a handle the trace never saw made


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
    lines += [_unnamed_warning(v) for v in report.verdicts if v.unnamed]
    lines += report.notes
    traced = len(report.verdicts)
    unnamed = sum(1 for v in report.verdicts if v.unnamed)
    if report.count:
        tasks = sum(1 for v in report.verdicts if v.undeclared or v.outputs)
        what = ", ".join(
            part
            for part in (
                plural(report.inputs, "undeclared input") if report.inputs else "",
                plural(report.written, "undeclared output") if report.written else "",
            )
            if part
        )
        lines.append(f"verify: {what} in {tasks} of {plural(traced, 'traced task')}")
    elif unnamed:
        lines.append(
            f"verify: no undeclared read named in {plural(traced, 'traced task')}, but "
            f"{plural(unnamed, 'task')} opened files by handle that the trace cannot name"
        )
    else:
        lines.append(f"verify: every traced task declared what it read ({plural(traced, 'task')})")
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
            lines.append(f"{verdict.id} {verb} {plural(sum(u.count for u in items), noun)}:")
            width = max(len(u.shown) for u in items)
            lines += [f"  {u.shown.ljust(width)}  {'add ' if u.add else ''}{u.fix}" for u in items]
    lines += [f"  {note}" for note in verdict.notes]
    return lines + [""]


def _unnamed_warning(verdict: Verdict) -> str:
    mounts = ", ".join(verdict.unnamed)
    return (
        f"warning: {verdict.id} read through open_by_handle_at a file that was not attributed (a "
        f"handle made outside the trace, under {mounts}): what it read is not all known"
    )


def _unkeyed_note(verdict: Verdict) -> str:
    names = ", ".join(verdict.unkeyed)
    return (
        f"note: {verdict.id} gets {names} (passThrough) outside its key; a read of a variable is not "
        f"visible to the trace — if it shapes the output, list it in cache.inputs.env"
    )


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
