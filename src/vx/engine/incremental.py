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

A build info outside the outputs (a `tsBuildInfoFile` elsewhere, or tsc's own default beside the
tsconfig when `rootDir` is set) survives the wipe and describes outputs that are gone: tsc would
emit only what changed since, and the entry would lack the rest. Such a file is removed before
the run, so tsc builds from nothing, and the run says why it cannot stay incremental.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from vx.engine import tsconfig
from vx.engine.tsconfig import is_build_info
from vx.files.outputs import file_stamp as _stamp

if TYPE_CHECKING:
    from vx.files.outputs import OutputSpec
    from vx.store.protocol import Store

EPOCH_NS = 1_000_000_000  # 1970: a build info dated so always has its program checked
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
    roots: frozenset[str] = frozenset()  # the files of `files` that are the config's own roots


class Kept(Struct):
    """The outputs left in place for a run: each file's stamp, each build info's program, and the
    key of the entry they are."""

    stamps: dict[str, tuple[int, ...]]
    programs: dict[str, Program]
    key: str = ""


def prepare(
    root: Path,
    outputs: OutputSpec,
    store: Store[Any],
    task_id: str,
    spare_since_ns: int | None = None,
    command: str = "",
) -> Kept | None:
    """Leave the outputs in place (and return what they were) when they hold a build info and are
    exactly an entry of this task; otherwise wipe them, as for any miss (sparing what changed
    since `spare_since_ns`), and return None. Each kept build info is dated (`_dates`); `command`
    names the tsconfigs that tell which files tsc compares."""
    try:
        kept = _keepable(root, outputs, store, task_id)
    except OSError:
        kept = None
    if kept is None:
        outputs.wipe(root, spare_since_ns)
        return None
    try:
        dates = _dates(root, outputs, store, kept, command)
    except OSError:
        dates = {}
    for path in kept.programs:
        full = os.path.join(root, path)
        when = dates.get(path)
        try:
            os.utime(full, ns=(when or EPOCH_NS,) * 2, follow_symlinks=False)
            if when is not None and os.lstat(full).st_mtime_ns != when:  # a coarser file system
                os.utime(full, ns=(EPOCH_NS, EPOCH_NS), follow_symlinks=False)
        except OSError:
            outputs.wipe(root, spare_since_ns)
            return None
    return kept


def _dates(
    root: Path, outputs: OutputSpec, store: Store[Any], kept: Kept, command: str
) -> dict[str, int]:
    """The time each kept build info can be given (engine/dating.py); one not named is dated to
    the epoch.

    `tsc -b` trusts timestamps first: a build info newer than an edited source (another project's
    `tsc -b` touches the build infos it references) says "up to date" and nothing is emitted, and
    one newer than a changed file tsc does not compare (a declaration in node_modules, a
    referenced project's restored output) as well. Dated to the epoch, the build info always has
    its program checked, and its file hashes, not the clock, decide what is emitted again. Dated
    to a time of this workspace from before its entry was built or restored, it lets tsc skip
    what is up to date — given only when nothing tsc's timestamps would miss changed since."""
    from vx.engine import dating

    noted = store.kept_since(kept.key)
    if noted is None or not tsconfig.runs_tsc(command):
        return {}
    base = os.path.join(root, "")
    stamps = {base + path: stamp for path, stamp in noted.stamps.items()}
    configs = tsconfig.projects(command, os.path.join(root, outputs.project_dir))
    checks = dating.Dating(str(root), noted, stamps)
    dates = {}
    for path, program in kept.programs.items():
        found = configs.get(os.path.join(root, path))
        config = found[0] if found is not None else None
        when = checks.time_for(program.files, program.roots, config)
        if when is not None:
            dates[path] = when
    return dates


def _keepable(root: Path, outputs: OutputSpec, store: Store[Any], task_id: str) -> Kept | None:
    from vx.files.outputs import AdditiveOutputs

    if not outputs.declares_files or isinstance(outputs, AdditiveOutputs):
        return None  # one adding to its upstream's outputs owns only what it adds: never kept
    current = outputs.walk(root)
    infos = [p for p in current if is_build_info(p)]
    if not infos:
        return None
    entry = store.entry_on_disk(task_id, current)
    if entry is None:
        return None
    programs = {}
    for path in infos:
        program = _read(root, path)
        if program is None:
            return None
        programs[path] = program
    return Kept({p: _stamp(root, p) for p in current}, programs, entry.key)


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
        if is_build_info(path) or path not in present or _stamp(root, path) != stamp:
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
    paths = [os.path.normpath(os.path.join(here, n)) if isinstance(n, str) else "" for n in names]
    files = frozenset(p for p in paths if p)
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
        _roots(info.get("root"), paths),
    )


def _roots(ids: Any, paths: list[str]) -> frozenset[str]:
    """The root files a build info names (`root`: 1-based file ids, or [first, last] runs of
    them); one it names in a way vx does not know is left out, so is checked as a file tsc does
    not compare."""
    found = set()
    for item in ids if isinstance(ids, list) else ():
        first, last = (item, item) if isinstance(item, int) else (item + [0, 0])[:2]
        if isinstance(first, int) and isinstance(last, int) and 0 < first <= last <= len(paths):
            found.update(paths[first - 1 : last])
    found.discard("")
    return frozenset(found)


def _rel(root: Path, path: str) -> str:
    return os.path.relpath(path, root)


def loose_build_infos(root: Path, outputs: OutputSpec, command: str) -> list[tuple[str, str]]:
    """(tsconfig, build info), workspace-relative, for each build info a `tsc` of `command` keeps
    outside the task's outputs and that exists now: one it would take for the state of outputs a
    miss is about to wipe. Only a task whose command runs tsc pays a look at its tsconfigs."""
    if not outputs.declares_files or not tsconfig.runs_tsc(command):
        return []
    project = os.path.join(root, outputs.project_dir)
    found = []
    for config, build, cli in tsconfig.command_configs(command, project):
        info = tsconfig.build_info(config, build, cli)
        if info is None or not os.path.lexists(info):
            continue
        rel = os.path.relpath(info, root)
        if rel.startswith("..") or not outputs.allows(rel.replace(os.sep, "/")):
            found.append((os.path.relpath(config, root), rel))
    return sorted(set(found))


def remove_loose_build_infos(
    root: Path, outputs: OutputSpec, command: str, task_id: str
) -> str | None:
    """Remove the loose build infos (`loose_build_infos`) that are the project's own files, and
    say so; None when there are none. One outside the project is named, never removed."""
    lines = []
    for config, info in loose_build_infos(root, outputs, command):
        inside = outputs.project_dir in ("", ".") or info.startswith(outputs.project_dir + os.sep)
        removed = False
        if inside and is_build_info(info):
            try:
                os.unlink(os.path.join(root, info))
                removed = True
            except OSError:
                pass
        lines.append(
            f"{task_id}: {config} keeps tsc's build info at {info}, outside the task's outputs: "
            + (
                "removed before the run, so tsc emits every file (one kept would describe the"
                " outputs this miss wiped)"
                if removed
                else "vx cannot remove it, so tsc may emit only what changed and the entry lack"
                " the rest"
            )
            + "; set tsBuildInfoFile inside the outputs (e.g. under outDir) to keep tsc incremental"
        )
    return "\n".join(lines) or None
