"""The workspace as the plugins shape it: its config after their `config` hooks, its projects
after their `discover` and `project` hooks. A run reads it so (`vx.prepare`), and so do the
verbs that show what a run sees (`vx show`, `vx watch`) or read what it left (`vx why`, `vx last`,
`vx history`, `vx cache`, `vx mcp`): they look where the run wrote, a `cacheDir` a hook set too.

The seam itself (`host.py`) is imported only where the workspace declares a plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from msgspec import Struct

from vx.config import loader as config

if TYPE_CHECKING:
    from vx.model import ProjectConfig, Workspace, WorkspaceConfig
    from vx.plugins.host import Host


def shaped_projects(
    ws: Workspace, host_env: Mapping[str, str], session: Host | None = None
) -> tuple[Workspace, dict[str, ProjectConfig]]:
    """The workspace and its project configs as a run sees them, the plugins' `discover` and
    `project` hooks applied (for `vx show`); the plugins are set up and torn down around it,
    unless they are a `vx watch` session's (`session`), set up once for all of it."""
    ws_config = config.load_workspace(ws.root, host_env, remote=False)
    if not ws_config.plugins:
        return ws, config.load_all(ws, host_env)
    if session is not None and [(p.name, p.options) for p in session.plugins] == [
        (s.name, dict(s.options)) for s in ws_config.plugins
    ]:
        if session.has("discover"):
            ws = session.discovered(ws)
        shape = session.shape_project if session.has("project") else None
        return ws, config.load_all(ws, host_env, shape)
    loaded: list = []
    try:
        host, ws_config = load_plugins(ws.root, ws_config, host_env, loaded)
        if host.has("discover"):
            ws = host.discovered(ws)
        shape = host.shape_project if host.has("project") else None
        return ws, config.load_all(ws, host_env, shape)
    finally:
        for host in loaded:
            host.teardown()


def shaped_workspace_config(root: Path, host_env: Mapping[str, str]) -> WorkspaceConfig:
    """vx.workspace as a run reads it, the plugins' `config` hooks applied (their `setup` is not
    called, as for a plugin verb): the commands that find a run's cache and history (`vx why`,
    `vx last`, `vx cache`) look where the run wrote, a `cacheDir` a hook set too."""
    ws_config = config.load_workspace(root, host_env)
    if not ws_config.plugins:
        return ws_config
    from vx.plugins import host as plugins

    host = plugins.load(ws_config.plugins, root, host_env, setup=False)
    if not host.has("config"):
        return ws_config
    shaped = host.shape_config(config.workspace_data(root, host_env), ws_config)
    return config.rooted(shaped, root)


def load_plugins(root: Path, ws_config, host_env: Mapping[str, str], loaded: list):
    """The workspace's plugins, loaded and set up, and its config as their `config` hooks left it."""
    from vx.plugins import host as plugins

    host = plugins.load(ws_config.plugins, root, host_env)
    loaded.append(host)
    if host.has("config"):
        shaped = host.shape_config(config.workspace_data(root, host_env), ws_config)
        ws_config = config.rooted(shaped, root)
    return host, ws_config


class VerbCache(Struct, frozen=True):
    """Where a verb outside a run finds what runs left: the workspace, its config as a run reads
    it, the cache dir, the store dir (the cache dir unless a shared store is on) and the note
    finding a shared store made, or None."""

    ws: Workspace
    config: WorkspaceConfig
    cache_dir: Path
    store_dir: Path
    note: str | None


def open_for_verb(cwd: Path, cache_dir_flag: str | None, host_env: Mapping[str, str]) -> VerbCache:
    """The workspace around `cwd` and the cache a run there uses (`--cache-dir` when given),
    for a verb that reads it (`vx why`, `vx last`, `vx history`, `vx cache`, `vx mcp`)."""
    from vx.store import location
    from vx.workspace import discover as workspace

    ws = workspace.discover(cwd)
    ws_config = shaped_workspace_config(ws.root, host_env)
    cache_dir, store_dir, note = location.store_of(cwd, cache_dir_flag, ws, ws_config, host_env)
    return VerbCache(ws, ws_config, cache_dir, store_dir, note)
