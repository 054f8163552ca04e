"""The real turbo (the pinned npm package) as the oracle of a scenario: its binary, the quiet
environment it runs in, a run of it beside vx's on the same repo, and a small Turborepo
(turbo.json and package.json scripts only) that both can run."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from support.corpora import tool_env
from support.npm_packages import installed_or_skip

QUIET = {
    "TURBO_TELEMETRY_DISABLED": "1",
    "TURBO_NO_UPDATE_NOTIFIER": "1",
    "DO_NOT_TRACK": "1",
    "NO_COLOR": "1",
}


def turbo_binary() -> str:
    """The pinned turbo's native binary (the test skipped where npm cannot install it)."""
    where = installed_or_skip("turbo")
    native = sorted(where.parent.glob("@turbo/*/bin/turbo"))
    return str(native[0] if native else where.parent / ".bin" / "turbo")


@dataclass
class TurboResult:
    code: int
    out: str
    err: str


def turbo(repo, binary: str, *args: str, env: dict | None = None) -> TurboResult:
    """`turbo ARGS` in the repo's root, with none of the caller's turbo or CI settings."""
    proc = subprocess.run(
        [binary, *args],
        cwd=repo.root,
        env=tool_env("TURBO_", {**QUIET, **(env or {})}),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return TurboResult(proc.returncode, proc.stdout, proc.stderr)


def small_turborepo(readme: str = "# the repo\n") -> dict[str, object]:
    """An npm Turborepo, a <- b (b depends on a), each with a `build` script writing dist/; turbo.json
    declares `build` (after `^build`) and nothing else. The root has no `build` of its own."""
    build = (
        "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
        "require('fs').writeFileSync('dist/o','x');console.log('built')\""
    )
    files: dict[str, object] = {
        "package.json": {
            "name": "root",
            "private": True,
            "packageManager": "npm@10.9.0",
            "workspaces": ["packages/*"],
        },
        ".gitignore": "node_modules/\ndist/\n.vx/\n.turbo/\n",
        "README.md": readme,
        "turbo.json": {
            "$schema": "https://turborepo.com/schema.json",
            "tasks": {"build": {"dependsOn": ["^build"], "outputs": ["dist/**"]}},
        },
    }
    for name, deps in (("a", {}), ("b", {"a": "*"})):
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": deps,
            "scripts": {"build": build},
        }
        files[f"packages/{name}/src/index.js"] = f"export const {name} = 1;\n"
    return files
