"""The shared store survives a schema change (LC-13): after the index is reset (a release with a
new schema), the artifacts are indexed again from their own bytes when a run asks for their keys,
so the next run hits and restores byte-identical outputs; a tampered artifact is neither indexed
nor served, and its task runs again. Real git, real node, real `vx`, the real shared store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from test_shared_store import PACKAGES, chain, home_of, shared, stores


def outputs(repo) -> dict[str, bytes]:
    return {p: (repo.root / f"packages/{p}/dist/out.js").read_bytes() for p in PACKAGES}


def reset_schema(*dbs: Path) -> None:
    """What a release with another index schema finds: a version that is not its own."""
    for path in dbs:
        db = sqlite3.connect(path)
        with db:
            db.execute("UPDATE schema_meta SET version = 'v0-old'")
        db.close()


def rows(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        db.close()


def build(repo, env):
    result = repo.vx("run", "build", env=env)
    assert result.code == 0, result.err
    return result


@pytest.mark.feature("LC-13")
def test_a_schema_reset_keeps_the_shared_store_warm(repo, tmp_path):
    chain(repo)
    env = shared(home_of(tmp_path))
    first = build(repo, env)
    assert {cache for _, cache in first.statuses().values()} == {"miss"}
    want = outputs(repo)
    [store] = stores(home_of(tmp_path))
    reset_schema(store / "store.db", repo.root / ".vx" / "cache" / "cache.db")
    for p in PACKAGES:
        shutil.rmtree(repo.root / f"packages/{p}/dist")
    again = build(repo, env)
    assert rows(store / "store.db") == len(PACKAGES)  # indexed again, from the artifacts
    assert {cache for _, cache in again.statuses().values()} == {"local"}
    assert outputs(repo) == want
    assert {cache for _, cache in build(repo, env).statuses().values()} == {"up-to-date"}


@pytest.mark.feature("LC-13")
@pytest.mark.parametrize("how", ["tampered", "truncated"])
def test_a_damaged_artifact_is_not_indexed_again_nor_served(repo, tmp_path, how):
    chain(repo)
    env = shared(home_of(tmp_path))
    first = build(repo, env)
    want = outputs(repo)
    [store] = stores(home_of(tmp_path))
    reset_schema(store / "store.db", repo.root / ".vx" / "cache" / "cache.db")
    artifact = store / f"{first.task('b#build')['hash']}.tar.zst"
    data = artifact.read_bytes()
    if how == "truncated":
        artifact.write_bytes(data[: len(data) // 2])
    else:  # one byte of the compressed stream flipped
        i = len(data) // 2
        artifact.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :])
    for p in PACKAGES:
        shutil.rmtree(repo.root / f"packages/{p}/dist")
    again = build(repo, env)
    caches = {tid: cache for tid, (_, cache) in again.statuses().items()}
    assert caches == {"a#build": "local", "b#build": "miss", "c#build": "local"}
    assert outputs(repo) == want
