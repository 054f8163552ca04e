"""The real Nx as the oracle: its CLI run offline (no daemon, no cloud, no terminal UI) in a
workspace, and an Nx 21 workspace whose targets come from inference plugins, linked to the
pinned `nx-plugins` bundle (npm_packages.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.corpora import tool_env

OFFLINE = {
    "NX_DAEMON": "false",
    "NX_NO_CLOUD": "true",
    "NX_TUI": "false",
    "NX_SKIP_NX_CACHE": "true",
    "NX_VERBOSE_LOGGING": "false",
    "DO_NOT_TRACK": "1",
    "NO_COLOR": "1",
}


def nx_cli(
    root: Path, *args: str, check: bool = True, cache: bool = False, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`nx ARGS` with the workspace's own nx (node_modules/nx), offline; `cache`: with Nx's local
    cache (in the workspace's .nx/), to ask Nx whether a task hits; `env`: variables added."""
    env = {**OFFLINE, **({"NX_SKIP_NX_CACHE": "false"} if cache else {}), **(env or {})}
    proc = subprocess.run(
        ["node", str(root / "node_modules" / "nx" / "bin" / "nx.js"), *args],
        cwd=root,
        env=tool_env("NX_", env),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def nx_show(root: Path, project: str) -> dict:
    return json.loads(nx_cli(root, "show", "project", project, "--json").stdout)


def nx_projects(root: Path) -> list[str]:
    return sorted(json.loads(nx_cli(root, "show", "projects", "--json").stdout))


VITE_CONFIG = """import { defineConfig } from 'vite';

export default defineConfig({
  root: __dirname,
  build: { outDir: './OUT', emptyOutDir: true },
});
"""


def inferred_workspace(out_dir: str = "dist") -> dict[str, object]:
    """Three projects whose targets only Nx's plugins know: lib-a (a tsconfig.lib.json:
    @nx/js/typescript infers `build` and `typecheck`), web (a vite.config.ts: @nx/vite/plugin
    infers `build`, `serve`, `preview`) and lib-b (a jest.config.cjs: @nx/jest/plugin infers
    `test`). web depends on lib-a."""
    ts = {"composite": True, "declaration": True, "module": "nodenext"}
    return {
        "package.json": {"name": "tw", "private": True, "workspaces": ["packages/*"]},
        ".gitignore": "node_modules\ndist\nbuild\n.nx\n.vx\nout-tsc\n",
        "nx.json": {
            "namedInputs": {
                "default": ["{projectRoot}/**/*"],
                "production": ["default", "!{projectRoot}/**/?(*.)+(spec|test).[jt]s?(x)?(.snap)"],
            },
            "targetDefaults": {"build": {"cache": True}},
            "plugins": [
                {
                    "plugin": "@nx/js/typescript",
                    "options": {
                        "typecheck": {"targetName": "typecheck"},
                        "build": {"targetName": "build", "configName": "tsconfig.lib.json"},
                    },
                },
                {
                    "plugin": "@nx/vite/plugin",
                    "options": {"buildTargetName": "build", "serveTargetName": "serve"},
                },
                {"plugin": "@nx/jest/plugin", "options": {"targetName": "test"}},
            ],
        },
        "tsconfig.base.json": {
            "compilerOptions": {
                **ts,
                "moduleResolution": "nodenext",
                "target": "es2022",
                "strict": True,
                "skipLibCheck": True,
            }
        },
        "tsconfig.json": {
            "extends": "./tsconfig.base.json",
            "files": [],
            "references": [{"path": "./packages/lib-a"}],
        },
        "packages/lib-a/package.json": {
            "name": "@tw/lib-a",
            "version": "1.0.0",
            "type": "module",
            "main": "./dist/index.js",
            "types": "./dist/index.d.ts",
        },
        "packages/lib-a/tsconfig.json": {
            "extends": "../../tsconfig.base.json",
            "files": [],
            "references": [{"path": "./tsconfig.lib.json"}],
        },
        "packages/lib-a/tsconfig.lib.json": {
            "extends": "../../tsconfig.base.json",
            "compilerOptions": {
                "rootDir": "src",
                "outDir": "dist",
                "tsBuildInfoFile": "dist/tsconfig.lib.tsbuildinfo",
            },
            "include": ["src/**/*.ts"],
        },
        "packages/lib-a/src/index.ts": "export const a = (): string => 'a';\n",
        "packages/web/package.json": {
            "name": "@tw/web",
            "version": "1.0.0",
            "private": True,
            "dependencies": {"@tw/lib-a": "*"},
        },
        "packages/web/vite.config.ts": VITE_CONFIG.replace("OUT", out_dir),
        "packages/web/index.html": "<!doctype html><script type=module src=./src/main.js></script>\n",
        "packages/web/src/main.js": "console.log('web');\n",
        "packages/lib-b/package.json": {"name": "@tw/lib-b", "version": "1.0.0"},
        "packages/lib-b/jest.config.cjs": "module.exports = { testEnvironment: 'node' };\n",
        "packages/lib-b/src/b.test.js": "test('b', () => expect(1).toBe(1));\n",
    }


def link_modules(root: Path, node_modules: Path) -> None:
    """The workspace's node_modules: the bundle's, linked (Nx and its plugins resolve from the root)."""
    (root / "node_modules").symlink_to(node_modules, target_is_directory=True)
