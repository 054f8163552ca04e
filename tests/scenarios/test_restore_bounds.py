"""A restore writes only what the task owns, and a hostile or damaged artifact costs a miss, never the
run (the store's promises in docs/caching.md, "What vx promises")."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import build_task, npm_workspace

from vx import CACHE_VERSION
from vx.store.archive import LOG_ENTRY, META_ENTRY, OUTPUTS, encode_log
from vx.store.packing import _TarWriter
from vx.store.zstd import codec


def plant(repo, key: str, members: dict[str, bytes]) -> None:
    """Replace the artifact of `key` with one holding `members` (workspace-relative names, written
    as vx's packer writes them, sum and all) and make its index row agree on the size: an artifact
    anyone with the team token could have uploaded."""
    cache = repo.root / ".vx" / "cache"
    raw = io.BytesIO()
    with codec().ZstdCompressor(level=3).stream_writer(raw, closefd=False) as z:
        tar = _TarWriter(z)
        tar.add_bytes(LOG_ENTRY, encode_log([]))
        for name, body in members.items():
            tar.add_stream(OUTPUTS + name, io.BytesIO(body), len(body), 0o644, 0)
        meta = {"version": CACHE_VERSION, "key": key, "files": {n: [0o644, 0] for n in members}}
        tar.add_bytes(META_ENTRY, json.dumps(meta).encode())
        tar.finish()
    (cache / f"{key}.tar.zst").write_bytes(raw.getvalue())
    with sqlite3.connect(cache / "cache.db") as db:
        db.execute("UPDATE entries SET size_bytes=? WHERE hash=?", (len(raw.getvalue()), key))


def only_key(repo) -> str:
    [art] = (repo.root / ".vx" / "cache").glob("*.tar.zst")
    return art.name.split(".")[0]


WIDE = {"files": ["dist/**"], "workspaceFiles": ["**/pre-commit", "**/receipts/*", "**/*.js"]}


def wide_workspace(repo) -> None:
    task = build_task(deps=())
    task["cache"]["outputs"] = WIDE
    repo.write(npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}},
                              "other": {"files": {"src/index.js": "OTHER;"}}})).commit()


@pytest.mark.parametrize("hostile", [
    ".git/hooks/pre-commit",
    ".vx/receipts/planted.js",
    "packages/app/node_modules/left-pad/index.js",
    "packages/other/src/index.js",
])
def test_item1_a_restore_refuses_members_the_task_cannot_own(repo, hostile):
    """Item 1: the output globs match these paths, but a restore never writes .git, .vx, an
    unnamed node_modules or another project's sources: the entry is a miss, with a warning
    naming the member, and the task runs."""
    wide_workspace(repo)
    assert repo.vx("run", "build", "--all").code == 0
    before = (repo.root / hostile).read_bytes() if (repo.root / hostile).exists() else None
    plant(repo, only_key(repo), {"packages/app/dist/out.js": b"A;", hostile: b"#!/bin/sh\necho pwned\n"})
    (repo.root / "packages/app/dist/out.js").unlink()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert res.task("app#build")["cache"] == "miss"
    warnings = [line for line in res.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and hostile in warnings[0], res.err
    after = (repo.root / hostile).read_bytes() if (repo.root / hostile).exists() else None
    assert after == before
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;"


@pytest.mark.parametrize("outputs, field", [
    ({"files": ["dist/**"], "workspaceFiles": [".git/**"]}, "cache.outputs.workspaceFiles[0]"),
    ({"files": ["dist/**", ".vx/**"]}, "cache.outputs.files[1]"),
    ({"files": ["src/**"]}, "cache.outputs.files[0]"),
    ({"files": ["dist/**"], "workspaceFiles": ["**"]}, "cache.outputs.workspaceFiles[0]"),
])
def test_item1_outputs_that_could_take_what_is_not_the_tasks_are_refused_at_load(repo, outputs, field):
    """Item 1: `.git`, `.vx`, the task's own inputs (`src/**` with inputs `src/**`) and the whole
    workspace are refused when the config loads: file, field, hint, exit 2, nothing run."""
    task = build_task(deps=())
    task["cache"]["outputs"] = outputs
    repo.write(npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2, res.err
    assert "packages/app/vx.config.json" in res.err and field in res.err, res.err
    assert "hint" in res.err.lower() and "Traceback" not in res.err
    assert not (repo.root / "packages/app/dist").exists()
