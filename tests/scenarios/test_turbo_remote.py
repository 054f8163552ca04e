"""A Turborepo repository's remote cache, as it is (RC-13): turbo.json `remoteCache` and the
`.turbo/config.json` that `turbo link` writes, against the real turborepo-remote-cache server.
The token comes from the environment only (TURBO_TOKEN)."""

from __future__ import annotations

import json

import pytest
from support.remote_servers import CANARY, clone

BUILD = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/out.js',fs.readFileSync('src/index.js','utf8'))\""
)


def turbo_repo(repo, remote: dict | None, link: dict | None = None):
    files: dict[str, object] = {
        "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
        ".gitignore": "node_modules/\ndist/\n.vx/\n",
        "turbo.json": {
            "tasks": {"build": {"dependsOn": ["^build"], "outputs": ["dist/**"]}},
            **({"remoteCache": remote} if remote is not None else {}),
        },
    }
    for name in ("a", "b"):
        files[f"packages/{name}/package.json"] = {"name": name, "scripts": {"build": BUILD}}
        files[f"packages/{name}/src/index.js"] = f"export const {name} = 1;\n"
    if link is not None:
        files[".turbo/config.json"] = link
    return repo.write(files).commit()


@pytest.mark.feature("RC-13")
def test_turbo_json_and_turbo_link_point_vx_at_the_remote(repo, tmp_path, turbo_server, team):
    ws = turbo_repo(repo, {"apiUrl": turbo_server.url}, link={"teamslug": team})
    env = {"TURBO_TOKEN": CANARY, "CI": "true"}
    first = ws.vx("run", "build", env=env)
    assert first.code == 0, first.err
    other = clone(ws, tmp_path / "elsewhere")
    (other.root / ".turbo").mkdir(exist_ok=True)
    (other.root / ".turbo/config.json").write_text(json.dumps({"teamslug": team}))
    second = other.vx("run", "build", env=env)
    assert second.code == 0, second.err
    assert set(second.statuses().values()) == {("success", "remote")}
    assert (other.root / "packages/a/dist/out.js").read_text() == "export const a = 1;\n"


@pytest.mark.feature("RC-13")
def test_without_a_token_or_when_disabled_there_is_no_remote(repo, turbo_server, team):
    ws = turbo_repo(repo, {"apiUrl": turbo_server.url, "teamSlug": team})
    plain = ws.vx("run", "build", env={"CI": "true"})
    assert plain.code == 0 and "remote" not in plain.err.lower()
    (ws.root / "turbo.json").write_text(
        json.dumps(
            {
                "tasks": {"build": {"outputs": ["dist/**"]}},
                "remoteCache": {"enabled": False, "apiUrl": "http://127.0.0.1:9"},
            }
        )
    )
    off = ws.vx("run", "build", env={"TURBO_TOKEN": CANARY, "CI": "true"})
    assert off.code == 0 and "remote" not in off.err.lower(), (
        off.err
    )  # port 9 would have been a warning


@pytest.mark.feature("RC-13")
def test_a_bad_remote_cache_field_is_refused_with_its_field(repo):
    ws = turbo_repo(repo, {"enabled": "yes"})
    result = ws.vx("run", "build", env={"TURBO_TOKEN": "t"})
    assert result.code == 2 and "in: turbo.json, remoteCache.enabled" in result.err
