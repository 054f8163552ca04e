"""Keep an incremental tool's state across a miss (docs/caching.md § Incremental tools).

Before a miss the outputs are wiped, so nothing stale can reach the entry. That wipe also takes
`tsc`'s build info (`*.tsbuildinfo`) and every later edit type-checks from scratch. A build info
describes the outputs beside it, so it is never kept alone (TypeScript, told by a build info that
everything is emitted, emits nothing): the outputs and their build info are left in place
together, and only when they are exactly an entry this task saved or restored here. After the
run, what the tool left is checked before it is saved: a file that left a program (a removed or
renamed source), changed compiler options or version, or a kept output that no program source
emits (another tool's leftover) means a clean build could differ — the task then runs again on
wiped outputs and that result is saved.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

if TYPE_CHECKING:
    from vx.plan.tasks import OutputSpec

BUILD_INFO = ".tsbuildinfo"
# What tsc emits for a source: declarations, JavaScript, JSON, and the maps of each.
_EMITTED = re.compile(r"(\.d\.[mc]?ts|\.[mc]?js|\.jsx|\.json)(\.map)?$")
_SOURCE = re.compile(r"\.([mc]?tsx?|[mc]?jsx?|json)$")
_DECLARATION = re.compile(r"\.d(\.[^./]+)?\.[mc]?ts$")


class Program(Struct, frozen=True):
    """What one build info says about its program: the files in it (absolute), the settings
    that shape its emit, where it emits, and the stems of the sources it emits from."""

    files: frozenset[str]
    settings: str  # the compiler options and version, canonical JSON
    emit_dirs: tuple[str, ...]
    stems: frozenset[str]  # every trailing run of path parts of each source, extension cut
    common: str  # the sources' common directory: where tsc roots its emit when no rootDir is set


class Kept(Struct):
    """The outputs left in place for a run: each file's stamp, and each build info's program."""

    stamps: dict[str, tuple[int, ...]]
    programs: dict[str, Program]


def prepare(root: Path, outputs: OutputSpec, store: Any, task_id: str) -> Kept | None:
    """Leave the outputs in place (and return what they were) when they hold a build info and are
    exactly an entry of this task; otherwise wipe them, as for any miss, and return None."""
    try:
        kept = _keepable(root, outputs, store, task_id)
    except OSError:
        kept = None
    if kept is None:
        outputs.wipe(root)
        return None
    # `tsc -b` trusts timestamps first: a build info newer than an edited source (another
    # project's `tsc -b` touches the build infos it references) says "up to date" and nothing
    # is emitted. Dated to the epoch, the build info always has its program checked, and its
    # file hashes, not the clock, decide what is emitted again.
    for path in kept.programs:
        try:
            os.utime(os.path.join(root, path), (1, 1), follow_symlinks=False)
        except OSError:
            outputs.wipe(root)
            return None
    return kept


def _keepable(root: Path, outputs: OutputSpec, store: Any, task_id: str) -> Kept | None:
    from vx.plan.tasks import AdditiveOutputs

    if not outputs.declares_files or isinstance(outputs, AdditiveOutputs):
        return None  # one adding to its upstream's outputs owns only what it adds: never kept
    current = outputs.walk(root)
    infos = [p for p in current if p.endswith(BUILD_INFO)]
    find = getattr(store, "entry_on_disk", None)
    if not infos or find is None or find(task_id, current) is None:
        return None
    programs = {}
    for path in infos:
        program = _read(root, path)
        if program is None:
            return None
        programs[path] = program
    return Kept({p: _stamp(root, p) for p in current}, programs)


def stale(root: Path, outputs: OutputSpec, kept: Kept) -> str | None:
    """Why the outputs a kept run left may differ from a clean build's, or None when they cannot."""
    present = set(outputs.walk(root))
    after: list[Program] = []
    for path, before in kept.programs.items():
        now = _read(root, path) if path in present else None
        if now is None:
            return f"{path} is gone or unreadable"
        if now.settings != before.settings:
            return f"{path}: the compiler options or version changed"
        left = before.files - now.files
        if left:
            return f"{_rel(root, min(left))} left the program of {path}"
        if now.common != before.common:
            return f"{path}: the sources' common directory moved"
        after.append(now)
    for path, stamp in kept.stamps.items():
        if path.endswith(BUILD_INFO) or path not in present or _stamp(root, path) != stamp:
            continue  # state, removed, or written again by this run
        if not _emitted(os.path.join(root, path), after):
            return f"{path} was kept from the last build and is no program's output"
    return None


def _emitted(path: str, programs: list[Program]) -> bool:
    """Whether a program emits `path`: under its emit dir, named as one of its sources."""
    match = _EMITTED.search(path)
    if match is None:
        return False
    for program in programs:
        for base in program.emit_dirs:
            if path.startswith(base + os.sep):
                if path[len(base) + 1 : match.start()] in program.stems:
                    return True
    return False


def _read(root: Path, path: str) -> Program | None:
    """The program a build info describes, or None when it is not one vx can read."""
    full = os.path.join(root, path)
    try:
        with open(full, "rb") as f:
            info = json.loads(f.read())
        names, options = info["fileNames"], info.get("options", {})
        version = info["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(names, list) or not isinstance(options, dict):
        return None
    here = os.path.dirname(full)
    files = frozenset(os.path.normpath(os.path.join(here, n)) for n in names if isinstance(n, str))
    sources = [
        f[: _SOURCE.search(f).start()]  # type: ignore[union-attr]  # filtered just below
        for f in files
        if _SOURCE.search(f) and not _DECLARATION.search(f) and "/node_modules/" not in f
    ]
    stems: set[str] = set()
    for stem in sources:
        parts = stem.split(os.sep)
        stems.update("/".join(parts[i:]) for i in range(1, len(parts)))
    emit_dirs = tuple(
        os.path.normpath(os.path.join(here, options[k]))
        for k in ("outDir", "declarationDir")
        if isinstance(options.get(k), str)
    )
    return Program(
        files,
        json.dumps([options, version], sort_keys=True),
        emit_dirs,
        frozenset(stems),
        os.path.commonpath(sources) if sources else "",
    )


def _stamp(root: Path, rel: str) -> tuple[int, ...]:
    try:
        st = os.lstat(os.path.join(root, rel))
    except OSError:
        return ()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def _rel(root: Path, path: str) -> str:
    return os.path.relpath(path, root)
