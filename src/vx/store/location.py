"""Where the local cache lives: one answer for `vx run` and every verb that reads the cache."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from vx.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from vx.model import Workspace, WorkspaceConfig


def cache_dir(
    cwd: Path,
    flag: str | None,
    ws: Workspace,
    ws_config: WorkspaceConfig,
    host_env: Mapping[str, str],
) -> Path:
    """flag (cwd-relative) > workspace `cacheDir` > VX_CACHE_DIR > `<root>/.vx/cache`."""
    if flag:
        path, source, field = (cwd / flag), "--cache-dir", ""
    elif ws_config.cache_dir:
        path, source, field = (
            (ws.root / Path(ws_config.cache_dir).expanduser()),
            ws_config.source,
            "cacheDir",
        )
    elif host_env.get("VX_CACHE_DIR"):
        path, source, field = Path(host_env["VX_CACHE_DIR"]).expanduser(), "VX_CACHE_DIR", ""
    else:
        return ws.root / ".vx" / "cache"
    path = Path(os.path.abspath(path))
    _refuse_inside_sources(path, ws, source, field)
    return path


def _refuse_inside_sources(path: Path, ws: Workspace, source: str, field: str) -> None:
    project_dirs = {ws.root / p.dir for p in ws.packages.values()}
    if path in project_dirs or ws.root.is_relative_to(path):
        msg = f"the cache dir {path} is a project directory or contains the workspace"
        hint = "pick a directory of its own, e.g. .vx/cache or a path outside the workspace"
        if source.startswith("--") or source == "VX_CACHE_DIR":
            raise UsageError(msg, facts=(f"from: {source}",), hint=hint)
        raise ConfigError(msg, file=source, field=field, hint=hint)
