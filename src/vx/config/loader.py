"""Find and read each project's vx.config and the root vx.workspace file.

Loaders are a table keyed by extension, so JS/TS evaluation (WS-05) can later take its
row without touching the lookup; today those rows refuse with a hint. A package
directory is listed once instead of probing eight names, because a thousand projects
times eight stats is most of a cold start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from msgspec import Struct
from msgspec.structs import replace

from vx import witness
from vx.config import jsonc
from vx.config.schema import validate_project, validate_workspace
from vx.errors import ConfigError
from vx.model import Package, ProjectConfig, Workspace, WorkspaceConfig

if TYPE_CHECKING:
    from vx.config.turbo import TurboRoot

_JS_EXTENSIONS = (".ts", ".mts", ".js", ".mjs", ".cts", ".cjs")


class Loaded(Struct, frozen=True):
    """What a loader row hands back: the file's text (its identity) and how to decode it."""

    text: str
    decode: Callable[[], Any]


def _read_jsonc(path: str, source: str) -> Loaded:
    witness.read(path)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=source,
                          hint="save the config as UTF-8") from None
    return Loaded(text, lambda: jsonc.loads(text, source))


def _refuse_code(path: str, source: str) -> NoReturn:
    json_name = os.path.basename(path).rsplit(".", 1)[0] + ".json"
    raise ConfigError(
        "JS/TS config files are not supported yet in this version",
        file=source,
        hint=f"write the same object as JSON in {json_name} (comments and trailing commas are "
        "allowed)",
    )


# One row per extension: how to read the file into something to decode.
LOADERS: dict[str, Callable[[str, str], Loaded]] = {
    ".json": _read_jsonc,
    ".jsonc": _read_jsonc,
    **{ext: _refuse_code for ext in _JS_EXTENSIONS},
}

# Generated and copy-pasted monorepos repeat one config text in many projects. Whether a
# text is valid does not depend on where it sits, so each distinct text is decoded and
# validated once per process; only successes are remembered.
_PROJECT_MEMO: dict[str, ProjectConfig] = {}
_PROJECT_MEMO_LIMIT = 4096


def _config_file(directory: str, stem: str, rel_dir: str, also: str | None = None) -> tuple[str, str] | None:
    """The one `stem.<ext>` file in `directory` that a loader reads, and its extension; a receipt
    also keeps whether the file named `also` is there (a package's turbo.json)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        witness.read(directory)  # missing: the receipt keeps that
        return None
    witness.listed(directory, (stem, also) if also else stem, names)
    found = sorted(n for n in names if n.startswith(stem) and n[len(stem):] in LOADERS)
    if len(found) > 1:
        shown = ", ".join(_rel(rel_dir, n) for n in found)
        raise ConfigError(f"more than one config file: {shown}", file=_rel(rel_dir, found[0]),
                          hint="keep one; vx would not know which to read")
    return (os.path.join(directory, found[0]), found[0][len(stem):]) if found else None


def _rel(rel_dir: str, name: str) -> str:
    return f"{rel_dir}/{name}" if rel_dir else name


def load_project(workspace_root: Path, pkg: Package, turbo: TurboRoot | None = None,
                 manager: str = "npm") -> ProjectConfig:
    """The project config beside `pkg`'s package.json; else, in a Turborepo repository (`turbo`),
    its tasks as turbo would run them (TL-05); else empty (source "")."""
    directory = os.path.join(workspace_root, pkg.dir) if pkg.dir else str(workspace_root)
    found = _config_file(directory, "vx.config", pkg.dir, also="turbo.json" if turbo and pkg.dir else None)
    if found is None:
        return _from_turbo(directory, pkg, turbo, manager) if turbo is not None else ProjectConfig(source="")
    path, ext = found
    source = _rel(pkg.dir, os.path.basename(path))
    loaded = LOADERS[ext](path, source)
    known = _PROJECT_MEMO.get(loaded.text)
    if known is not None:
        return replace(known, source=source)
    config = validate_project(loaded.decode(), source)
    if len(_PROJECT_MEMO) >= _PROJECT_MEMO_LIMIT:
        _PROJECT_MEMO.clear()
    _PROJECT_MEMO[loaded.text] = config
    return config


def load_workspace(root: Path) -> WorkspaceConfig:
    """The root vx.workspace file (WS-11), or the defaults when there is none."""
    found = _config_file(str(root), "vx.workspace", "")
    if found is None:
        return WorkspaceConfig()
    path, ext = found
    source = os.path.basename(path)
    return validate_workspace(LOADERS[ext](path, source).decode(), source)


def load_all(ws: Workspace) -> dict[str, ProjectConfig]:
    """Every package's project config, by package name (the root under `//`)."""
    from vx.config.turbo import find_root

    turbo = find_root(str(ws.root))
    return {name: load_project(ws.root, pkg, turbo, ws.manager) for name, pkg in ws.packages.items()}


def _from_turbo(directory: str, pkg: Package, turbo: TurboRoot, manager: str) -> ProjectConfig:
    from vx.config.turbo import project, read_package

    source = _rel(pkg.dir, "turbo.json")
    own = read_package(directory, source) if pkg.dir else None
    return project(turbo, pkg, manager, own, source)
