"""Files a target without `outputs` writes into another target's outputs come back as under Nx.

nx-console's `generate-ui-v2`: `_build` (outputs `dist/apps/generate-ui-v2`) <- `extract-dependencies`
(cached, no outputs: copies codicons into that dist) <- `build` (the same outputs). Nx archives
everything under `build`'s outputs when it ends, so every restore gives the codicons back. vx
saved only what `build` itself wrote: `_build`'s restore (a wipe first) took the codicons, and
`build`'s restore did not bring them back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.npm_packages import installed_or_skip
from support.nx import nx_cli


def write(path: str, text: str) -> str:
    return (
        f"node -e \"const f=require('fs');f.mkdirSync(require('path').dirname('{path}'),"
        f"{{recursive:true}});f.writeFileSync('{path}','{text}')\""
    )


def workspace(copy_cache: bool) -> dict[str, object]:
    return {
        "package.json": {"name": "root", "private": True},
        "nx.json": {},
        ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
        "apps/app/src/main.js": "main;\n",
        "apps/app/project.json": {
            "name": "app",
            "targets": {
                "_build": {
                    "command": write("dist/app/main.js", "main"),
                    "outputs": ["{workspaceRoot}/dist/app"],
                    "cache": True,
                },
                "copy": {
                    "command": write("dist/app/vendor/extra.txt", "extra"),
                    "dependsOn": ["_build"],
                    "cache": copy_cache,
                },
                "build": {
                    "command": write("dist/app/out.css", "css"),
                    "outputs": ["{workspaceRoot}/dist/app"],
                    "dependsOn": ["copy"],
                    "cache": True,
                },
            },
        },
    }


def dist(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "dist").rglob("*") if p.is_file())


WANTED = ["dist/app/main.js", "dist/app/out.css", "dist/app/vendor/extra.txt"]


@pytest.mark.parametrize("copy_cache", [True, False], ids=["copy-cached", "copy-uncached"])
def test_a_restore_keeps_what_an_upstream_without_outputs_wrote_as_nx_does(
    repo, tmp_path, copy_cache
):
    ws = repo.write(workspace(copy_cache)).commit()
    nx_root = tmp_path / "nx"
    shutil.copytree(ws.root, nx_root)
    (nx_root / "node_modules").mkdir()
    (nx_root / "node_modules" / "nx").symlink_to(installed_or_skip("nx"))

    seen: dict[str, list[list[str]]] = {"nx": [], "vx": []}
    for step in ("cold", "warm", "deleted", "warm again"):
        if step == "deleted":
            shutil.rmtree(nx_root / "dist")
            shutil.rmtree(ws.root / "dist")
        nx_cli(nx_root, "run", "app:build", cache=True)
        seen["nx"].append(dist(nx_root))
        result = ws.vx("run", "app:build")
        assert result.code == 0, result.err + result.out
        seen["vx"].append(dist(ws.root))
    assert seen["nx"] == [WANTED] * 4  # the oracle: each state holds the copied file
    assert seen["vx"] == seen["nx"]
