"""`vx run --verify=determinism`: each cached task run again against its entry, and each output
file that came out different named, with the first line (text) or byte offset (binary) where it
does.

A cache is only as useful as a task is deterministic: a build that embeds the time, a random id
or an absolute path makes a new entry on every machine and every run, so it is never a hit
anywhere else. Under `--verify=determinism` the rebuilder (`rebuilder._rerun`) executes each
cached task once more from the same inputs: against its entry when the cache has one, else
twice (the first run saved as usual, then run again). The entry is the result that is kept: it
is what every hit so far was served, and a second result that differs has no better claim. After
a second run whose outputs differ, the entry is restored over them, so the workspace holds what
a hit would have left and nothing the cache does not hold can be taken for a hit.

This module holds the comparison and what it found (`Rerun`), and prints it (`render`). The run
exits 1 when a task's outputs differ (docs/cli.md § --verify).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

from vx.model import TaskId

if TYPE_CHECKING:
    from pathlib import Path

    from vx.files.outputs import OutputSpec
    from vx.store.local import Entry, LocalStore

SHOWN = 80  # characters of a differing line shown
SHOWN_FILES = 20  # files named for one task before the rest fold into a count


class Difference(Struct, frozen=True):
    """One output file whose second run differs from its entry's."""

    path: str  # workspace-relative
    line: int | None = None  # text: the first differing line (1-based)
    before: str | None = None  # that line in the entry (truncated)
    after: str | None = None  # that line in the second run
    offset: int | None = None  # binary: the first differing byte
    only: str | None = None  # "entry": the second run did not write it; "rerun": only it did


class Comparison(Struct, frozen=True):
    """One task's verdict: the files that differ (none: deterministic), or why it was not
    compared."""

    id: TaskId
    differences: tuple[Difference, ...] = ()
    files: int = 0  # output files compared
    skipped: str | None = None  # why no comparison was made (it failed, was not saved…)


class Rerun:
    """What `--verify=determinism` found, filled in by the rebuilder as tasks run again."""

    def __init__(self) -> None:
        self.found: dict[TaskId, Comparison] = {}

    def compare(
        self, tid: TaskId, store: LocalStore, entry: Entry, outputs: OutputSpec, root: Path
    ) -> bool:
        """Hold what the task just left against `entry`'s files (run on a worker thread);
        whether they differ."""
        found = compare(store, entry, outputs, root)
        self.found[tid] = Comparison(tid, found[0], files=found[1])
        return bool(found[0])

    def skip(self, tid: TaskId, why: str) -> None:
        self.found[tid] = Comparison(tid, skipped=why)

    def report(self, order: tuple[TaskId, ...]) -> list[Comparison]:
        return [self.found[t] for t in order if t in self.found]


def compare(
    store: LocalStore, entry: Entry, outputs: OutputSpec, root: Path
) -> tuple[tuple[Difference, ...], int]:
    """The differences between the entry's output files and the ones in the workspace now, in
    path order, and how many files were compared."""
    saved = store.output_bytes(entry)
    present, _ = outputs.walk_for_save(root)
    paths = sorted(set(saved) | set(present))
    found = []
    for path in paths:
        if path not in present:
            found.append(Difference(path, only="entry"))
            continue
        if path not in saved:
            found.append(Difference(path, only="rerun"))
            continue
        try:
            with open(root / path, "rb") as f:
                now = f.read()
        except OSError:
            found.append(Difference(path, only="entry"))
            continue
        if now != saved[path]:
            found.append(where(path, saved[path], now))
    return tuple(found), len(paths)


def where(path: str, before: bytes, after: bytes) -> Difference:
    """Where two versions of a file first differ: the line of a text file, the byte of another."""
    text = _text(before), _text(after)
    if text[0] is not None and text[1] is not None:
        old, new = text[0].split("\n"), text[1].split("\n")
        for n, (a, b) in enumerate(zip(old, new), 1):
            if a != b:
                return Difference(path, line=n, before=_cut(a), after=_cut(b))
        n = min(len(old), len(new)) + 1  # one is the other, with more lines
        more = old if len(old) > len(new) else new
        last = _cut(more[n - 1])
        return Difference(
            path,
            line=n,
            before=last if more is old else None,
            after=last if more is new else None,
        )
    offset = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), None)
    return Difference(path, offset=min(len(before), len(after)) if offset is None else offset)


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _cut(line: str) -> str:
    line = line.rstrip("\r")
    shown = line if len(line) <= SHOWN else line[: SHOWN - 1] + "…"
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in shown)


# ---------------------------------------------------------------- the report


def render(found: list[Comparison]) -> list[str]:
    """One block per task whose outputs differ, the tasks that could not be compared, then the
    count (plain text, no colour)."""
    lines: list[str] = []
    differ = [c for c in found if c.differences]
    for c in differ:
        n = len(c.differences)
        lines.append(
            f"{c.id}: {n} {'output differs' if n == 1 else 'outputs differ'} on a second run:"
        )
        for d in c.differences[:SHOWN_FILES]:
            lines += _difference(d)
        if len(c.differences) > SHOWN_FILES:
            lines.append(f"  … and {len(c.differences) - SHOWN_FILES} more")
        lines.append("")
    same = [c for c in found if not c.differences and c.skipped is None]
    skipped = [c for c in found if c.skipped is not None]
    lines += [f"determinism: {c.id} not compared: {c.skipped}" for c in skipped]
    compared = len(differ) + len(same)
    if differ:
        lines.append(
            f"determinism: {len(differ)} of {_plural(compared, 'task')} wrote different outputs "
            "from the same inputs (the cache keeps the first result)"
        )
    elif compared:
        lines.append(
            f"determinism: every task wrote the same outputs twice ({_plural(compared, 'task')})"
        )
    else:
        lines.append("determinism: no cached task ran to compare")
    return lines


def _difference(d: Difference) -> list[str]:
    if d.only == "entry":
        return [f"  {d.path}  only in the first run"]
    if d.only == "rerun":
        return [f"  {d.path}  only in the second run"]
    if d.offset is not None:
        return [f"  {d.path}  byte {d.offset}"]
    lines = [f"  {d.path}:{d.line}"]
    lines.append(
        f"    first:  {d.before}" if d.before is not None else "    first:  (no such line)"
    )
    lines.append(f"    second: {d.after}" if d.after is not None else "    second: (no such line)")
    return lines


def exit_code(found: list[Comparison]) -> int:
    return 1 if any(c.differences for c in found) else 0


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
