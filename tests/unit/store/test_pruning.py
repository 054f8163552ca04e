"""Keeping the local cache bounded (LC-16): the bounds, what goes, and pruning a real store
(real SQLite, real artifacts, real files)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from vx.model import CacheRetention
from vx.store.local import LocalStore
from vx.store.pruning import (
    REINDEX_WINDOW_S,
    SWEEP_MIN_AGE_S,
    Row,
    choose,
    clean,
    due,
    parse_duration,
    parse_size,
    prune,
)


@pytest.mark.feature("LC-16")
@pytest.mark.parametrize(
    "text, seconds",
    [("45s", 45), ("90m", 5400), ("12h", 43200), ("30d", 2592000), ("2w", 1209600), ("1.5h", 5400)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.feature("LC-16")
@pytest.mark.parametrize(
    "text, said",
    [("0d", "zero"), ("30", "no duration"), ("1y", "no duration"), ("", "no duration")],
)
def test_bad_durations_say_why(text, said):
    assert said in parse_duration(text)


@pytest.mark.feature("LC-16")
@pytest.mark.parametrize(
    "text, size",
    [
        ("64KB", 64 << 10),
        ("500MB", 500 << 20),
        ("10G", 10 << 30),
        ("2GiB", 2 << 30),
        ("1024B", 1024),
        ("1.5k", 1536),
        ("1T", 1 << 40),
    ],
)
def test_sizes_are_powers_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.feature("LC-16")
@pytest.mark.parametrize(
    "text, said", [("10", "no unit"), ("0MB", "zero"), ("ten MB", "no size"), ("5 PB", "no size")]
)
def test_bad_sizes_say_why(text, said):
    assert said in parse_size(text)


def rows(*specs) -> list[Row]:
    return [Row(key, f"{key}#build", size, accessed, "crc") for key, size, accessed in specs]


@pytest.mark.feature("LC-16")
def test_age_goes_first_then_the_least_recently_used_until_it_fits():
    now = 10_000.0
    table = rows(
        ("old", 10, now - 5000),
        ("mid", 40, now - 300),
        ("new", 30, now - 10),
        ("newer", 20, now - 1),
    )
    evicted, kept = choose(table, CacheRetention(older_than_s=3600, max_bytes=55), now)
    assert [r.key for r in evicted] == ["old", "mid"] and [r.key for r in kept] == ["new", "newer"]
    evicted, kept = choose(table, CacheRetention(max_bytes=100), now)
    assert evicted == [] and len(kept) == 4  # 100 bytes fit exactly
    assert due((4, 100, now - 5000), CacheRetention(older_than_s=3600), now)
    assert not due((4, 100, now - 5000), CacheRetention(max_bytes=100), now)


@pytest.fixture
def filled(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "dist").mkdir(parents=True)
    store = LocalStore(tmp_path / "cache", ws)
    for i, key in enumerate(("k1", "k2", "k3")):
        (ws / "dist" / f"{key}.js").write_text("x" * (1000 * (i + 1)))
        store.save(
            key,
            task_id=f"p{i}#build",
            command="c",
            log=(),
            files=[f"dist/{key}.js"],
            duration_ms=1.0,
        )
    store.close()
    db = sqlite3.connect(tmp_path / "cache" / "cache.db")
    now = time.time()
    with db:
        for key, age in (("k1", 90000), ("k2", 600), ("k3", 60)):
            db.execute("UPDATE entries SET accessed_at=? WHERE hash=?", (now - age, key))
    db.close()
    yield tmp_path / "cache", ws


@pytest.mark.feature("LC-16")
def test_prune_evicts_rows_and_artifacts_together(filled):
    cache, ws = filled
    with LocalStore(cache, ws) as store:
        pruned = prune(store, CacheRetention(older_than_s=86400), dry_run=False)
        assert [r.key for r in pruned.evicted] == ["k1"] and pruned.kept == 2
        assert set(store.probe(["k1", "k2", "k3"])) == {"k2", "k3"}
    assert not (cache / "k1.tar.zst").exists() and (cache / "k2.tar.zst").exists()


@pytest.mark.feature("LC-16")
def test_a_dry_run_removes_nothing(filled):
    cache, ws = filled
    with LocalStore(cache, ws) as store:
        pruned = prune(store, CacheRetention(max_bytes=1), dry_run=True)
        assert len(pruned.evicted) == 3 and pruned.kept == 0 and pruned.bytes_freed > 0
        assert set(store.probe(["k1", "k2", "k3"])) == {"k1", "k2", "k3"}


@pytest.mark.feature("LC-16")
def test_the_sweep_takes_old_orphans_and_temps_and_drops_rows_without_artifacts(filled):
    cache, ws = filled
    old = time.time() - SWEEP_MIN_AGE_S - 60
    orphans = (
        "0f0f0f0f0f0f0f0f.tar.zst",
        ".0f0f0f0f0f0f0f09.abc.tmp",
        ".0f0f0f0f0f0f0f08.tar.zst.1-2.old",
    )
    for name in (*orphans, "photos.tar.zst"):  # the last is no name vx gives: never swept
        (cache / name).write_bytes(b"z" * 100)
        os.utime(cache / name, (old, old))
    (cache / "0f0f0f0f0f0f0f0a.tar.zst").write_bytes(
        b"being saved right now"
    )  # a save in flight: its row comes next
    (cache / "k2.tar.zst").unlink()  # a phantom row
    with LocalStore(cache, ws) as store:
        pruned = prune(store, CacheRetention(), dry_run=False)
        assert (pruned.orphans, pruned.orphan_bytes, pruned.phantoms) == (3, 300, 1)
        assert [r[0] for r in sorted(store.entry_rows())] == ["k1", "k3"]
    assert sorted(p.name for p in cache.iterdir() if p.name.endswith((".zst", ".tmp", ".old"))) == [
        "0f0f0f0f0f0f0f0a.tar.zst",
        "k1.tar.zst",
        "k3.tar.zst",
        "photos.tar.zst",
    ]


@pytest.mark.feature("LC-13")
def test_the_sweep_leaves_what_a_schema_reset_unindexed_and_clean_takes_it(tmp_path):
    """After a reset every artifact is row-less until a probe indexes it again: the sweep keeps
    those saved before the reset (for REINDEX_WINDOW_S), `vx cache clean` takes them."""
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    (ws / "dist").mkdir(parents=True)
    keys = [f"{i:016x}" for i in (1, 2, 3)]
    old = time.time() - SWEEP_MIN_AGE_S - 60
    with LocalStore(cache, ws) as store:
        for key in keys:
            (ws / "dist" / f"{key}.js").write_text(key)
            store.save(
                key, task_id="p#b", command="c", log=(), files=[f"dist/{key}.js"], duration_ms=1.0
            )
            os.utime(cache / f"{key}.tar.zst", (old, old))
        store._db.execute("UPDATE schema_meta SET version='v0-old'")
    with LocalStore(cache, ws) as store:
        assert store.entry_rows() == []
        assert prune(store, CacheRetention(), dry_run=False).orphans == 0
        assert set(store.probe([keys[0]])) == {keys[0]}  # indexed again, from its bytes
    later = time.time() + REINDEX_WINDOW_S
    with LocalStore(cache, ws) as store:
        assert prune(store, CacheRetention(), dry_run=False, now=later).orphans == 2
        assert [r[0] for r in store.entry_rows()] == [keys[0]]
    with LocalStore(cache, ws) as store:
        store._db.execute("UPDATE schema_meta SET version='v0-old'")
    with LocalStore(cache, ws) as store:
        assert clean(store, dry_run=False).orphans == 1
    assert not list(cache.glob("*.tar.zst"))
