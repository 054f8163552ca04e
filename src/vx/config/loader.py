"""Find and read each project's vx.config and the root vx.workspace file.

Loaders are a table keyed by extension: JSON (with comments) is read here; code configs
(`.ts`, `.mts`, `.js`, `.mjs`, `.cjs`) are evaluated by the workspace's Node, every one of a
run in one process (`vx.config.evaluation`). A package directory is listed once instead of
probing eight names, because a thousand projects times eight stats is most of a cold start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, NoReturn

from msgspec import Struct
from msgspec.structs import replace

from vx import witness
from vx.config import jsonc
from vx.config.schema import validate_project, validate_workspace
from vx.errors import ConfigError
from vx.model import Package, ProjectConfig, Workspace, WorkspaceConfig

if TYPE_CHECKING:
    from vx.config.nx import NxRoot
    from vx.config.turbo import TurboRoot

# The code configs' default exports and the files each read, by path (evaluation.Evaluated).
Evaluation = tuple[Mapping[str, Any], Mapping[str, tuple[str, ...]]]

_CODE_EXTENSIONS = (".ts", ".mts", ".js", ".mjs", ".cjs")


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
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start})", file=source, hint="save the config as UTF-8"
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            "is a directory, not a config file",
            file=source,
            hint="rename or remove the directory; a config is a file",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot be read: {exc.strerror}", file=source, hint="check the file's permissions"
        ) from None
    return Loaded(text, lambda: jsonc.loads(text, source))


def _refuse_cts(path: str, source: str) -> NoReturn:
    raise ConfigError(
        "a CommonJS TypeScript config (.cts) is not supported",
        file=source,
        hint="write it as vx.config.ts (an ES module), vx.config.cjs or vx.config.json",
    )


# One row per extension a config file may have; code configs are evaluated by Node in one
# batch (`vx.config.evaluation`), so their row is None here.
LOADERS: dict[str, Callable[[str, str], Loaded] | None] = {
    ".json": _read_jsonc,
    ".jsonc": _read_jsonc,
    ".cts": _refuse_cts,
    **{ext: None for ext in _CODE_EXTENSIONS},
}


class Found(Struct, frozen=True):
    path: str  # absolute
    ext: str
    source: str  # workspace-relative, as refusals name it


# Generated and copy-pasted monorepos repeat one config text in many projects. Whether a
# text is valid does not depend on where it sits, so each distinct text is decoded and
# validated once per process; only successes are remembered.
_PROJECT_MEMO: dict[str, ProjectConfig] = {}
_PROJECT_MEMO_LIMIT = 4096


def _config_file(
    directory: str, stem: str, rel_dir: str, also: str | None = None
) -> tuple[str, str] | None:
    """The one `stem.<ext>` file in `directory` that a loader reads, and its extension; a receipt
    also keeps whether the file named `also` is there (a package's turbo.json)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        witness.read(directory)  # missing: the receipt keeps that
        return None
    witness.listed(directory, (stem, also) if also else stem, names)
    found = sorted(n for n in names if n.startswith(stem) and n[len(stem) :] in LOADERS)
    if len(found) > 1:
        shown = ", ".join(_rel(rel_dir, n) for n in found)
        raise ConfigError(
            f"more than one config file: {shown}",
            file=_rel(rel_dir, found[0]),
            hint="keep one; vx would not know which to read",
        )
    return (os.path.join(directory, found[0]), found[0][len(stem) :]) if found else None


def _rel(rel_dir: str, name: str) -> str:
    return f"{rel_dir}/{name}" if rel_dir else name


def load_project(
    workspace_root: Path,
    pkg: Package,
    turbo: TurboRoot | None = None,
    manager: str = "npm",
    env: Mapping[str, str] | None = None,
) -> ProjectConfig:
    """The project config beside `pkg`'s package.json; else, in a Turborepo repository (`turbo`),
    its tasks as turbo would run them; else empty (source "")."""
    found = _locate(str(workspace_root), pkg, turbo)
    evaluated = _evaluate(str(workspace_root), [found], env)
    return _project(str(workspace_root), pkg, found, evaluated, turbo, manager)


# A plugin's `project` hook: (package, the config as decoded ({} for none), its file) -> the
# config to validate and use instead, or None to keep it.
Shape = Callable[[Package, Any, str], Any]


def load_all(
    ws: Workspace,
    env: Mapping[str, str] | None = None,
    shape: Shape | None = None,
    broken: dict[str, ConfigError] | None = None,
    frozen: bool = False,
) -> dict[str, ProjectConfig]:
    """Every package's project config, by package name (the root under `//`); the ones written as
    code evaluated together, in one Node process. With `shape`, each project read from a vx
    config (or from none) passes through it before it is validated. With `broken`, a project
    whose own config is refused is put there (by name) with its refusal, and given an empty
    config (its file as the source): the run decides whether it reaches it (`vx.plan.scope`).
    What every project reads (the root turbo.json, nx.json) is refused whatever. `frozen`: the
    code configs' values come from vx-lock.json, and Node is not started for them."""
    root = str(ws.root)
    turbo = turbo_root(root)
    nx = nx_root(root, ws) if turbo is None else None
    passes_over = False  # migrated from Nx: `^build` passes over a project without it, as before
    if (turbo is not None or nx is not None) and (migrated := _migrated(ws.root, env)):
        passes_over = nx is not None and migrated == "nx"
        turbo = nx = None  # `vx migrate` wrote every project's config: those files give no tasks
    errors: dict[str, ConfigError] | None = None if broken is None else {}
    found: dict[str, Found | None] = {}
    for name, pkg in ws.packages.items():
        try:
            found[name] = _locate(root, pkg, turbo)
        except ConfigError as exc:
            if broken is None:
                raise
            broken[name], found[name] = exc, None
    evaluated = _evaluate(root, found.values(), env, errors, frozen)
    manager = ws.manager
    if turbo is not None or nx is not None:
        from vx.config.turbo import hook_manager

        manager = hook_manager(ws.manager, root)

    def one(name: str, pkg: Package) -> ProjectConfig:
        located = found[name]
        if nx is not None and located is None:
            return from_nx(nx, pkg, manager)
        config = _project(root, pkg, located, evaluated, None if nx else turbo, manager, shape)
        return replace(config, nx=True) if passes_over else config

    if broken is None:
        return {name: one(name, pkg) for name, pkg in ws.packages.items()}
    configs: dict[str, ProjectConfig] = {}
    for name, pkg in ws.packages.items():
        located = found[name]
        try:
            if name in broken:
                raise broken[name]
            if errors and located is not None and located.path in errors:
                raise errors[located.path]
            configs[name] = one(name, pkg)
        except ConfigError as exc:
            broken[name] = exc
            configs[name] = ProjectConfig(source=exc.file)
    return configs


def _migrated(root: Path, env: Mapping[str, str] | None) -> str | None:
    """What vx.workspace's `migrated` says (`turbo`, `nx`): read only where a turbo.json or
    nx.json is."""
    return load_workspace(root, env, remote=False).migrated


def nx_root(root: str, ws: Workspace) -> NxRoot | None:
    """nx.json, read only where there is one; a turbo.json, where both are, wins."""
    path = os.path.join(root, "nx.json")
    if not os.path.lexists(path):
        witness.probed(path)  # a receipt keeps that there is none
        return None
    from vx.config.nx import find_root

    return find_root(root, ws.packages, ws.nx)


def from_nx(nx: NxRoot, pkg: Package, manager: str) -> ProjectConfig:
    from vx.config.nx import project

    return project(nx, pkg, manager)


def load_workspace(
    root: Path, env: Mapping[str, str] | None = None, remote: bool = True
) -> WorkspaceConfig:
    """The root vx.workspace file, or the defaults when there is none; without a
    `remoteCache` of its own, a Turborepo repository's remote cache unless `migrated`."""
    env = os.environ if env is None else env
    located = _config_file(str(root), "vx.workspace", "")
    config = WorkspaceConfig()
    if located is not None:
        path, ext = located
        found = Found(path, ext, os.path.basename(path))
        values, reads = _evaluate(str(root), [found], env)
        config = rooted(validate_workspace(_decoded(found, values), found.source), root)
        if reads.get(path):
            config = replace(config, reads=reads[path])
    if (
        remote
        and config.remote_cache is None
        and config.migrated is None
        and (env.get("TURBO_TOKEN") or env.get("VERCEL_ARTIFACTS_TOKEN"))
    ):
        remote = _turbo_remote(str(root))
        if remote is not None:
            config = replace(config, remote_cache=remote)
    return config


def rooted(config: WorkspaceConfig, root: Path) -> WorkspaceConfig:
    """The config with `remoteCache.reapi`'s TLS file paths made absolute, relative ones taken
    from the workspace root (the run may start in any package)."""
    remote = config.remote_cache
    if remote is None or remote.kind != "reapi":
        return config
    paths = {
        name: os.path.join(root, path)
        for name in ("ca_cert", "client_cert", "client_key")
        if (path := getattr(remote, name)) is not None
    }
    return replace(config, remote_cache=replace(remote, **paths)) if paths else config


def workspace_data(root: Path, env: Mapping[str, str] | None = None) -> Any:
    """The root vx.workspace file as decoded (an empty object when there is none): what a
    plugin's `config` hook edits before it is validated again."""
    env = os.environ if env is None else env
    located = _config_file(str(root), "vx.workspace", "")
    if located is None:
        return {}
    path, ext = located
    found = Found(path, ext, os.path.basename(path))
    return _decoded(found, _evaluate(str(root), [found], env)[0])


def _turbo_remote(root: str):
    """turbo.json's `remoteCache`, then `.turbo/config.json` over it (as `turbo link` wrote it)."""
    turbo = turbo_root(root)
    if turbo is None or turbo.remote_off:
        return None
    from vx.config.turbo import linked

    base, link = turbo.remote_cache, linked(root)
    if link is None:
        return base
    if base is None:
        return link
    return replace(
        base,
        url=link.url or base.url,
        team=link.team or base.team,
        team_id=link.team_id or base.team_id,
    )


# turbo.FILE_NAMES, spelled again so that a workspace without a turbo.json never loads turbo.py
# (the import points one way: loader -> turbo; a unit test holds the two equal).
TURBO_FILES = ("turbo.json", "turbo.jsonc")


def turbo_root(root: str) -> TurboRoot | None:
    """The root turbo.json, read only where there is one (a receipt keeps that there is none)."""
    paths = [os.path.join(root, name) for name in TURBO_FILES]
    if not any(os.path.lexists(p) for p in paths):
        for path in paths:
            witness.probed(path)
        return None
    from vx.config.turbo import find_root

    return find_root(root)


def _locate(root: str, pkg: Package, turbo: TurboRoot | None) -> Found | None:
    directory = os.path.join(root, pkg.dir) if pkg.dir else root
    located = _config_file(
        directory, "vx.config", pkg.dir, also="turbo.json" if turbo and pkg.dir else None
    )
    if located is None:
        return None
    path, ext = located
    return Found(path, ext, _rel(pkg.dir, os.path.basename(path)))


def code_configs(ws: Workspace) -> dict[str, str]:
    """Every project's config written as code: its workspace-relative name, by absolute path."""
    root = str(ws.root)
    found = (_locate(root, pkg, None) for pkg in ws.packages.values())
    return {f.path: f.source for f in found if f is not None and LOADERS[f.ext] is None}


def _evaluate(
    root: str,
    found,
    env: Mapping[str, str] | None,
    errors: dict[str, ConfigError] | None = None,
    frozen: bool = False,
) -> Evaluation:
    """The code configs among `found`, evaluated: their default exports by path, and the files
    each read (with `errors`, each failing one's refusal there, by path); `frozen`, as locked."""
    code = {f.path: f.source for f in found if f is not None and LOADERS[f.ext] is None}
    if not code:
        return ({}, {})
    if frozen:
        from vx.config.lock import locked

        return locked(root, code)
    from vx.config.evaluation import evaluate

    evaluated = evaluate(root, code, os.environ if env is None else env, errors)
    return evaluated.values, evaluated.reads


def _decoded(found: Found, values: Mapping[str, Any]) -> Any:
    loader = LOADERS[found.ext]
    return values[found.path] if loader is None else loader(found.path, found.source).decode()


def _project(
    root: str,
    pkg: Package,
    found: Found | None,
    evaluated: Evaluation,
    turbo: TurboRoot | None,
    manager: str,
    shape: Shape | None = None,
) -> ProjectConfig:
    """The project's config, with the files its code config read (`--affected` follows them)."""
    config = _read_project(root, pkg, found, evaluated[0], turbo, manager, shape)
    reads = evaluated[1].get(found.path) if found is not None else None
    return replace(config, reads=reads) if reads else config


def _read_project(
    root: str,
    pkg: Package,
    found: Found | None,
    values: Mapping[str, Any],
    turbo: TurboRoot | None,
    manager: str,
    shape: Shape | None,
) -> ProjectConfig:
    if shape is not None and (found is not None or turbo is None):
        source = found.source if found is not None else _rel(pkg.dir, "package.json")
        data = _decoded(found, values) if found is not None else {}
        shaped = shape(pkg, data, source)
        if shaped is not None:
            return validate_project(shaped[0], shaped[1])
    if found is None:
        if turbo is None:
            return ProjectConfig(source="")
        directory = os.path.join(root, pkg.dir) if pkg.dir else root
        return from_turbo(directory, pkg, turbo, manager)
    loader = LOADERS[found.ext]
    if loader is None:
        return validate_project(values[found.path], found.source)
    loaded = loader(found.path, found.source)
    known = _PROJECT_MEMO.get(loaded.text)
    if known is not None:
        return replace(known, source=found.source)
    config = validate_project(loaded.decode(), found.source)
    if len(_PROJECT_MEMO) >= _PROJECT_MEMO_LIMIT:
        _PROJECT_MEMO.clear()
    _PROJECT_MEMO[loaded.text] = config
    return config


def from_turbo(directory: str, pkg: Package, turbo: TurboRoot, manager: str) -> ProjectConfig:
    from vx.config.turbo import project, read_package

    source = _rel(pkg.dir, "turbo.json")
    own = read_package(directory, source) if pkg.dir else None
    return project(turbo, pkg, manager, own, source)
