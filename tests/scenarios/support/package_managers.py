"""The real package managers the lockfile and prune scenarios run (npm, pnpm 7–9, yarn 1 and
berry, bun): how to start each, the lockfile it writes, and the root of a workspace it
installs."""

from __future__ import annotations

import os
from pathlib import Path

from support.npm_packages import installed

# pnpm 9 writes lockfile v9, pnpm 8 v6 and pnpm 7 v5.4
LOCKFILE = {
    "npm": "package-lock.json",
    "yarn": "yarn.lock",
    "berry": "yarn.lock",
    "bun": "bun.lock",
}


def install_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment a package manager's real install runs in here: no corepack pinning, no
    telemetry, yarn berry's global folder and cache under `tmp`; `extra` on top."""
    return {
        **os.environ,
        "COREPACK_ENABLE_STRICT": "0",
        "npm_config_manage_package_manager_versions": "false",
        "YARN_ENABLE_TELEMETRY": "0",
        "YARN_GLOBAL_FOLDER": str(tmp / "berry"),
        "YARN_ENABLE_GLOBAL_CACHE": "1",
        **extra,
    }


def lockfile_name(pm: str) -> str:
    return LOCKFILE.get(pm, "pnpm-lock.yaml")


def command(pm: str) -> list[str]:
    """The argv that starts `pm` (npm from PATH, the others as npm_packages pins them)."""
    if pm == "npm":
        return ["npm"]
    if pm.startswith("pnpm"):
        return ["node", str(installed(pm) / "bin" / "pnpm.cjs")]
    if pm == "yarn":
        return ["node", str(installed("yarn") / "bin" / "yarn.js")]
    if pm == "berry":
        return ["node", str(installed("@yarnpkg/cli-dist") / "bin" / "yarn.js")]
    return [str(installed("bun") / "bin" / "bun.exe")]


def root_files(pm: str, root_extra=None, ignore: str = "", files=None) -> dict[str, object]:
    """The root of a workspace over packages/* that `pm` installs: package.json (kind-of as a
    dev dependency, and `root_extra`), .gitignore (and `ignore`), `files`, and what pnpm (its
    workspace file) or yarn berry (node_modules, no telemetry, a lockfile to fill) needs."""
    out: dict[str, object] = {
        "package.json": {
            "name": "root",
            "version": "1.0.0",
            "private": True,
            "workspaces": ["packages/*"],
            "devDependencies": {"kind-of": "6.0.3"},
            **(root_extra or {}),
        },
        ".gitignore": "node_modules/\ndist/\n.vx/\n.yarn/\n.pnp.*\n" + ignore,
        **(files or {}),
    }
    if pm.startswith("pnpm"):
        out.setdefault("pnpm-workspace.yaml", "packages:\n  - packages/*\n")
    if pm == "berry":
        out[".yarnrc.yml"] = "nodeLinker: node-modules\nenableTelemetry: false\n"
        out["yarn.lock"] = ""
    return out
