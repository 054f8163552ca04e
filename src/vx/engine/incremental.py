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
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from vx.files.outputs import file_stamp as _stamp

if TYPE_CHECKING:
    from vx.files.outputs import OutputSpec
    from vx.store.protocol import Store

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


def prepare(
    root: Path,
    outputs: OutputSpec,
    store: Store[Any],
    task_id: str,
    spare_since_ns: int | None = None,
) -> Kept | None:
    """Leave the outputs in place (and return what they were) when they hold a build info and are
    exactly an entry of this task; otherwise wipe them, as for any miss (sparing what changed
    since `spare_since_ns`), and return None."""
    try:
        kept = _keepable(root, outputs, store, task_id)
    except OSError:
        kept = None
    if kept is None:
        outputs.wipe(root, spare_since_ns)
        return None
    # `tsc -b` trusts timestamps first: a build info newer than an edited source (another
    # project's `tsc -b` touches the build infos it references) says "up to date" and nothing
    # is emitted. Dated to the epoch, the build info always has its program checked, and its
    # file hashes, not the clock, decide what is emitted again.
    for path in kept.programs:
        try:
            os.utime(os.path.join(root, path), (1, 1), follow_symlinks=False)
        except OSError:
            outputs.wipe(root, spare_since_ns)
            return None
    return kept


def _keepable(root: Path, outputs: OutputSpec, store: Store[Any], task_id: str) -> Kept | None:
    from vx.files.outputs import AdditiveOutputs

    if not outputs.declares_files or isinstance(outputs, AdditiveOutputs):
        return None  # one adding to its upstream's outputs owns only what it adds: never kept
    current = outputs.walk(root)
    infos = [p for p in current if p.endswith(BUILD_INFO)]
    if not infos or store.entry_on_disk(task_id, current) is None:
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


def _rel(root: Path, path: str) -> str:
    return os.path.relpath(path, root)


# `tsc` as a command word: bare, or the path of its bin script (`node …/typescript/bin/tsc`).
_TSC = re.compile(r"(?:^|[\s/'\"])tsc(?=$|[\s;&|)'\"])")
_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ")", ";;", ">", ">>", "<"})


def loose_build_infos(root: Path, outputs: OutputSpec, command: str) -> list[tuple[str, str]]:
    """(tsconfig, build info), workspace-relative, for each build info a `tsc` of `command` keeps
    outside the task's outputs and that exists now: one it would take for the state of outputs a
    miss is about to wipe. Only a task whose command runs tsc pays a look at its tsconfigs."""
    if not outputs.declares_files or _TSC.search(command) is None:
        return []
    project = os.path.join(root, outputs.project_dir)
    found = []
    for match in _TSC.finditer(command):
        for config, build, cli in _configs(command[match.end() :], project):
            info = _build_info(config, build, cli)
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
        if inside and info.endswith(BUILD_INFO):
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


def _configs(words: str, project: str) -> list[tuple[str, bool, dict[str, Any]]]:
    """The tsconfig files a tsc command line builds (`-p X`, `-b [X …]`, else tsconfig.json), each
    with whether it is a build (`-b`, which always keeps a build info) and the options the command
    line sets that place one (`--incremental`, `--tsBuildInfoFile X`, `--outDir X`, …)."""
    lexer = shlex.shlex(words, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        args = list(lexer)
    except ValueError:
        return []
    cut = next((i for i, a in enumerate(args) if a in _SHELL_OPERATORS), len(args))
    args = args[:cut]
    build = bool(args) and args[0] in ("-b", "--build")
    named: list[str] = []
    cli: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        option = arg[2:] if arg.startswith("--") else ""
        if arg in ("-p", "--project") and i + 1 < len(args):
            named.append(args[i + 1])
            i += 1
        elif arg in ("-i", "--incremental", "--composite"):
            cli[option or "incremental"] = True
        elif option in _PATH_OPTIONS and i + 1 < len(args):
            cli[option] = os.path.normpath(os.path.join(project, args[i + 1]))
            i += 1
        elif build and not arg.startswith("-") and i > 0:
            named.append(arg)
        i += 1
    out = []
    for name in named or ["."]:
        path = os.path.normpath(os.path.join(project, name))
        config = os.path.join(path, "tsconfig.json") if os.path.isdir(path) else path
        out.append((config, build, cli))
    return out


def _build_info(config: str, build: bool, cli: dict[str, Any] | None = None) -> str | None:
    """Where tsc keeps the build info of `config` (its rule in getTsBuildInfoEmitOutputFilePath),
    or None when it keeps none or the config cannot be read."""
    options = _options(config, 0)
    if options is None:
        return None
    options.update(cli or {})
    if not (build or options.get("incremental") or options.get("composite")):
        return None
    if isinstance(options.get("tsBuildInfoFile"), str):
        return options["tsBuildInfoFile"]
    stem = os.path.splitext(config)[0]
    if isinstance(options.get("outFile"), str):
        stem = os.path.splitext(options["outFile"])[0]
    elif isinstance(options.get("outDir"), str):
        if isinstance(options.get("rootDir"), str):
            stem = os.path.normpath(
                os.path.join(options["outDir"], os.path.relpath(stem, options["rootDir"]))
            )
        else:
            stem = os.path.join(options["outDir"], os.path.basename(stem))
    return stem + BUILD_INFO


_PATH_OPTIONS = ("tsBuildInfoFile", "outDir", "outFile", "rootDir")


def _options(config: str, depth: int) -> dict[str, Any] | None:
    """The compiler options of `config` after its relative `extends`, paths made absolute from
    the file that set them; None when it cannot be read."""
    from vx.config import jsonc
    from vx.errors import VxError

    try:
        with open(config, encoding="utf-8") as f:
            data = jsonc.loads(f.read(), config)
    except (OSError, UnicodeDecodeError, VxError):
        return None
    if not isinstance(data, dict):
        return None
    merged: dict[str, Any] = {}
    parents = data.get("extends")
    for parent in [parents] if isinstance(parents, str) else parents or []:
        if isinstance(parent, str) and parent.startswith(".") and depth < 8:
            path = os.path.normpath(os.path.join(os.path.dirname(config), parent))
            if not path.endswith(".json") and not os.path.isfile(path):
                path += ".json"
            merged.update(_options(path, depth + 1) or {})
    own = data.get("compilerOptions")
    if isinstance(own, dict):
        here = os.path.dirname(config)
        for key, value in own.items():
            is_path = key in _PATH_OPTIONS and isinstance(value, str)
            merged[key] = os.path.normpath(os.path.join(here, value)) if is_path else value
    return merged
