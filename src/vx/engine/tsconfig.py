"""What a `tsc` command line builds, read as tsc reads it: the tsconfig files it names (`-p X`,
`-b [X …]`, else `tsconfig.json`) and, for a build, every project they reference; each with its
compiler options after `extends`, the files it extends, its `include` and `files`, and where it
keeps its build info (tsc's rule in getTsBuildInfoEmitOutputFilePath).

engine/incremental.py asks where a build info lies (one outside a task's outputs goes with the
wipe); engine/dating.py asks which config files and source folders a kept build info's project
reads, to know when tsc's own timestamp check can be trusted with it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any

from msgspec import Struct

BUILD_INFO = ".tsbuildinfo"
_CONFIG_DIR = "${configDir}"  # TypeScript 5.5: the folder of the config tsc compiles, not the one that says it
# `tsc` as a command word: bare, or the path of its bin script (`node …/typescript/bin/tsc`).
_TSC = re.compile(r"(?:^|[\s/'\"])tsc(?=$|[\s;&|)'\"])")
_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ")", ";;", ">", ">>", "<"})
_PATH_OPTIONS = ("tsBuildInfoFile", "outDir", "outFile", "rootDir", "declarationDir")
_DEPTH = 8  # extends and references followed this deep: a cycle or a deeper chain reads as unknown


class Config(Struct, frozen=True):
    """One tsconfig as tsc reads it. `chain` is the file and every file it extends, each as found
    (an `extends` vx cannot find makes `complete` False); `include` and `files` are absolute (from
    the file that set them, as tsc takes them); `references` are the tsconfig files it names."""

    path: str
    options: dict[str, Any]
    chain: tuple[str, ...]
    include: tuple[str, ...] | None  # None: tsc's default, every file under the config's folder
    files: tuple[str, ...]
    references: tuple[str, ...]
    complete: bool


def runs_tsc(command: str) -> bool:
    """Whether the command line runs tsc as one of its words."""
    return _TSC.search(command) is not None


def command_configs(command: str, project: str) -> list[tuple[str, bool, dict[str, Any]]]:
    """The tsconfig files each `tsc` of `command` builds, each with whether it is a build (`-b`,
    which always keeps a build info) and the options the command line sets that place one."""
    found = []
    for match in _TSC.finditer(command):
        found += configs(command[match.end() :], project)
    return found


def configs(words: str, project: str) -> list[tuple[str, bool, dict[str, Any]]]:
    """The tsconfig files one tsc command line builds (`-p X`, `-b [X …]`, else tsconfig.json),
    each with whether it is a build (`-b`, which always keeps a build info) and the options the
    command line sets that place one (`--incremental`, `--tsBuildInfoFile X`, `--outDir X`, …)."""
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
        elif option in _PATH_OPTIONS[:4] and i + 1 < len(args):
            cli[option] = os.path.normpath(os.path.join(project, args[i + 1]))
            i += 1
        elif build and not arg.startswith("-") and i > 0:
            named.append(arg)
        i += 1
    return [(_config_file(os.path.join(project, name)), build, cli) for name in named or ["."]]


def is_build_info(path: str) -> bool:
    """A file named as tsc's build info: `*.tsbuildinfo`, or a `tsBuildInfoFile` whose name says
    so (create-t3-turbo's `${configDir}/.cache/tsbuildinfo.json`). Its content decides the rest."""
    name = os.path.basename(path).lower()
    return name.endswith(BUILD_INFO) or "tsbuildinfo" in name


def _config_file(path: str) -> str:
    path = os.path.normpath(path)
    return os.path.join(path, "tsconfig.json") if os.path.isdir(path) else path


def build_info(config: str, build: bool, cli: dict[str, Any] | None = None) -> str | None:
    """Where tsc keeps the build info of `config`, or None when it keeps none or the config cannot
    be read."""
    read = read_config(config)
    return None if read is None else build_info_of(read, build, cli)


def build_info_of(config: Config, build: bool, cli: dict[str, Any] | None = None) -> str | None:
    """`build_info` of a config already read."""
    options = {**config.options, **(cli or {})}
    if not (build or options.get("incremental") or options.get("composite")):
        return None
    if isinstance(options.get("tsBuildInfoFile"), str):
        return str(options["tsBuildInfoFile"])
    stem = os.path.splitext(config.path)[0]
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


def projects(command: str, project: str) -> dict[str, tuple[Config, dict[str, Any]]]:
    """Every project the tsc commands of `command` build, by the build info each keeps (absolute):
    its config and the command line's options. A build (`tsc -b`) builds the projects its configs
    reference too."""
    out: dict[str, tuple[Config, dict[str, Any]]] = {}
    seen: set[str] = set()
    todo = [(config, build, cli, 0) for config, build, cli in command_configs(command, project)]
    while todo:
        path, build, cli, depth = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        config = read_config(path)
        if config is None:
            continue
        info = build_info_of(config, build, cli)
        if info is not None:
            out.setdefault(os.path.normpath(info), (config, cli))
        if build and depth < _DEPTH:
            todo += [(ref, True, cli, depth + 1) for ref in config.references]
    return out


def read_config(config: str, depth: int = 0) -> Config | None:
    """The config after its `extends`, paths made absolute from the file that set them; None
    when it cannot be read."""
    data = _load(config)
    if data is None:
        return None
    here = os.path.dirname(config)
    options: dict[str, Any] = {}
    chain = [config]
    complete = True
    include: tuple[str, ...] | None = None
    files: tuple[str, ...] = ()
    parents = data.get("extends")
    for parent in [parents] if isinstance(parents, str) else parents or []:
        found = _extended(parent, here) if isinstance(parent, str) else None
        base = read_config(found, depth + 1) if found is not None and depth < _DEPTH else None
        if base is None:
            complete = False
            continue
        options.update(base.options)
        chain += [c for c in base.chain if c not in chain]
        complete = complete and base.complete
        include = base.include if base.include is not None else include
        files = base.files or files
    own = data.get("compilerOptions")
    if isinstance(own, dict):
        for key, value in own.items():
            is_path = key in _PATH_OPTIONS and isinstance(value, str)
            options[key] = _absolute(here, value) if is_path else value
    if isinstance(data.get("include"), list):
        include = tuple(_absolute(here, p) for p in data["include"] if isinstance(p, str))
    if isinstance(data.get("files"), list):
        files = tuple(_absolute(here, p) for p in data["files"] if isinstance(p, str))
        include = () if not isinstance(data.get("include"), list) else include
    if depth == 0:  # `${configDir}` is this config's folder, wherever in the chain it was written
        options = {k: _in_config_dir(here, v) for k, v in options.items()}
        include = None if include is None else tuple(_in_config_dir(here, p) for p in include)
        files = tuple(_in_config_dir(here, p) for p in files)
    references = tuple(
        _config_file(os.path.join(here, ref["path"]))
        for ref in data.get("references") or []
        if isinstance(ref, dict) and isinstance(ref.get("path"), str)
    )
    return Config(config, options, tuple(chain), include, files, references, complete)


def _load(config: str) -> dict[str, Any] | None:
    from vx.config import jsonc
    from vx.errors import VxError

    try:
        with open(config, encoding="utf-8") as f:
            data = jsonc.loads(f.read(), config)
    except (OSError, UnicodeDecodeError, VxError):
        return None
    return data if isinstance(data, dict) else None


def _absolute(here: str, pattern: str) -> str:
    """A path of the config in `here`, absolute; one that starts at `${configDir}` is left for
    the config tsc compiles to place (`_in_config_dir`)."""
    if pattern.startswith(_CONFIG_DIR):
        return pattern
    return os.path.normpath(os.path.join(here, pattern))


def _in_config_dir(here: str, value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_CONFIG_DIR):
        return os.path.normpath(here + value[len(_CONFIG_DIR) :])
    return value


def _extended(spec: str, here: str) -> str | None:
    """The file an `extends` names: a path (`.json` added when the file has none), or a package's
    file found through node_modules as Node finds a package. None when vx cannot tell: not found,
    or a package that maps its files with `exports`, which vx does not follow."""
    if spec.startswith((".", "/")):
        path = os.path.normpath(os.path.join(here, spec))
        if not os.path.isfile(path) and os.path.isfile(path + ".json"):
            path += ".json"
        return path if os.path.isfile(path) else None
    parts = spec.split("/")
    name = "/".join(parts[:2] if spec.startswith("@") else parts[:1])
    rest = spec[len(name) + 1 :]
    folder = here
    while True:
        package = os.path.join(folder, "node_modules", name)
        if os.path.isdir(package):
            return _in_package(package, rest)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _in_package(package: str, rest: str) -> str | None:
    try:
        with open(os.path.join(package, "package.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        manifest = {}
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or "exports" in manifest:
        return None
    if not rest:
        named = manifest.get("tsconfig")
        rest = named if isinstance(named, str) else "tsconfig.json"
    path = os.path.normpath(os.path.join(package, rest))
    for candidate in (path, path + ".json", os.path.join(path, "tsconfig.json")):
        if os.path.isfile(candidate):
            return candidate
    return None
