"""The locale is in an Nx task's key under vx, as it is in every task's, though Nx hashes no
environment variable its inputs do not name: it reaches the task, and what a build makes may
follow it (Node's default `Intl` locale is LANG's). docs/config.md, § the key differences."""

from __future__ import annotations

import shutil

from support.npm_packages import installed_or_skip
from support.nx import nx_cli

LOCALE = (
    "node -e \"const f=require('fs');f.mkdirSync('dist/app',{recursive:true});"
    "f.writeFileSync('dist/app/locale.txt',Intl.DateTimeFormat().resolvedOptions().locale)\""
)


def test_a_locale_change_rebuilds_where_nx_replays_another_locales_output(repo, tmp_path):
    ws = repo.write(
        {
            "package.json": {"name": "root", "private": True},
            "nx.json": {},
            ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
            "apps/app/src/main.js": "main;\n",
            "apps/app/project.json": {
                "name": "app",
                "targets": {
                    "build": {
                        "command": LOCALE,
                        "outputs": ["{workspaceRoot}/dist/app"],
                        "cache": True,
                    }
                },
            },
        }
    ).commit()
    nx_root = tmp_path / "nx"
    shutil.copytree(ws.root, nx_root)
    (nx_root / "node_modules").mkdir()
    (nx_root / "node_modules" / "nx").symlink_to(installed_or_skip("nx"))
    made: dict[str, list[str]] = {"nx": [], "vx": []}
    for lang in ("en_US.UTF-8", "de_DE.UTF-8"):
        nx_cli(nx_root, "run", "app:build", cache=True, env={"LANG": lang})
        made["nx"].append((nx_root / "dist/app/locale.txt").read_text())
        result = ws.vx("run", "app:build", env={"LANG": lang})
        assert result.code == 0, result.err + result.out
        made["vx"].append((ws.root / "dist/app/locale.txt").read_text())
    assert made["nx"] == ["en-US", "en-US"]  # Nx's hash left LANG out: the first build replayed
    assert made["vx"] == ["en-US", "de-DE"]
    assert result.statuses()["app#build"][1] == "miss"
