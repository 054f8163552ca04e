"""The local store: save, probe, up-to-date proof, restore, damage, concurrency, schema gate.

Rows LC-01, LC-03, LC-05, LC-06, LC-07, LC-10, LC-12, LC-14, LC-17. Real SQLite, real zstd.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from vx.errors import EnvironmentFailure
from vx.model import LogChunk
from vx.store import local
from vx.store.archive import ArchiveError
from vx.store.local import CacheFull, DamagedEntry, LocalStore, bound_log

ALL = lambda path: True  # noqa: E731
OUTPUTS = ["dist/a.js", "dist/sub/b.js"]
LOG = (LogChunk(1, b"building\n"), LogChunk(2, b"warning\n"), LogChunk(1, b"done\n"))


def build(ws: Path, rels=OUTPUTS) -> None:
    for rel in rels:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(f"content of {rel}".encode())


def save(store: LocalStore, key: str = "k1", rels=OUTPUTS, log=LOG) -> int:
    return store.save(
        key, task_id="web#build", command="tsc", log=log, files=rels, duration_ms=12.5, cpu_ms=3.0
    )


def wipe(ws: Path) -> None:
    shutil.rmtree(ws / "dist")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    build(root)
    return root


@pytest.fixture
def store(tmp_path: Path, ws: Path):
    with LocalStore(tmp_path / "cache", ws) as opened:
        yield opened


# ---------------------------------------------------------------- save and probe


@pytest.mark.feature("LC-05", "LC-06")
def test_save_then_probe_is_a_hit_with_rows_and_log(store, ws):
    size = save(store)
    hit = store.probe(["k1", "nope"])
    assert list(hit) == ["k1"]
    entry = hit["k1"]
    assert size == entry.size_bytes == store.artifact("k1").stat().st_size
    assert (entry.task_id, entry.command, entry.duration_ms, entry.cpu_ms) == (
        "web#build",
        "tsc",
        12.5,
        3.0,
    )
    assert [f.path for f in entry.files] == sorted(OUTPUTS)
    assert store.log_of(entry) == LOG


@pytest.mark.feature("LC-06")
def test_probe_never_opens_the_artifact(store, ws, monkeypatch):
    save(store)
    monkeypatch.setattr(
        local.unpacking, "unpack", lambda *a, **k: pytest.fail("probe opened an artifact")
    )
    assert "k1" in store.probe(["k1"])


def test_probe_batches_past_the_parameter_limit(store, ws):
    save(store)
    keys = [f"missing{i}" for i in range(2500)] + ["k1"]
    assert list(store.probe(keys)) == ["k1"]


@pytest.mark.feature("LC-12")
def test_probe_drops_a_vanished_artifact(store, ws):
    save(store)
    store.artifact("k1").unlink()
    assert store.probe(["k1"]) == {}
    assert store._db.execute("SELECT count(*) FROM entries").fetchone() == (0,)


@pytest.mark.feature("LC-12")
def test_probe_treats_a_torn_artifact_as_a_miss(store, ws):
    save(store)
    with store.artifact("k1").open("ab") as f:
        f.write(b"torn")
    assert store.probe(["k1"]) == {}


def test_resave_replaces_the_entry(store, ws):
    save(store)
    (ws / "dist/a.js").write_bytes(b"second version, longer")
    save(store, rels=["dist/a.js"], log=(LogChunk(1, b"again"),))
    entry = store.probe(["k1"])["k1"]
    assert [f.path for f in entry.files] == ["dist/a.js"]
    assert store.log_of(entry) == (LogChunk(1, b"again"),)
    assert [p.name for p in store.cache_dir.iterdir() if p.name.endswith((".tmp", ".old"))] == []


def test_save_refuses_a_symlink_to_a_directory_and_leaves_no_temp(store, ws):
    os.symlink(ws / "dist/sub", ws / "dist/dirlink")
    with pytest.raises(ArchiveError, match="dist/dirlink"):
        save(store, rels=["dist/dirlink"])
    assert store.probe(["k1"]) == {}
    assert sorted(
        p.name for p in store.cache_dir.iterdir() if not p.name.startswith("cache.db")
    ) == [".gitignore"]


@pytest.mark.feature("LC-05")
def test_a_failed_commit_takes_the_artifact_back_out(store, ws, monkeypatch):
    save(store)
    before = store.artifact("k1").read_bytes()
    (ws / "dist/a.js").write_bytes(b"changed")

    def broken(*args):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_write_rows", broken)
    with pytest.raises(
        CacheFull
    ):  # the disk's trouble: the save is dropped, the build goes on (item 5)
        save(store, key="k1")
    with pytest.raises(CacheFull):
        save(store, key="k2")
    assert store.artifact("k1").read_bytes() == before  # the previous artifact is back
    assert not store.artifact("k2").exists()
    assert list(store.probe(["k1", "k2"])) == ["k1"]


def test_concurrent_saves_from_threads_all_land(tmp_path, ws):
    keys = [f"k{i}" for i in range(12)]
    errors: list[BaseException] = []
    with LocalStore(tmp_path / "cache", ws) as store:

        def worker(key: str) -> None:
            try:
                save(store, key=key)
                save(store, key="shared")
                store.probe([key, "shared"])
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in keys]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        hits = store.probe(keys + ["shared"])
        assert sorted(hits) == sorted(keys + ["shared"])
        wipe(ws)
        assert store.restore(hits["shared"], ALL) == LOG
    assert (ws / "dist/a.js").read_bytes() == b"content of dist/a.js"


def test_two_stores_on_one_cache_dir_save_concurrently(tmp_path, ws):
    first, second = LocalStore(tmp_path / "cache", ws), LocalStore(tmp_path / "cache", ws)
    with first, second:
        threads = [
            threading.Thread(target=save, args=(s, f"k{i}"))
            for i, s in enumerate([first, second] * 4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(first.probe(f"k{i}" for i in range(8))) == 8


# ---------------------------------------------------------------- up to date (LC-07)


@pytest.mark.feature("LC-07")
def test_up_to_date_right_after_save_and_in_a_new_run(tmp_path, store, ws):
    save(store)
    assert store.is_up_to_date(store.probe(["k1"])["k1"], OUTPUTS)
    store.close()
    with LocalStore(tmp_path / "cache", ws) as reopened:
        assert reopened.is_up_to_date(reopened.probe(["k1"])["k1"], set(OUTPUTS))


@pytest.mark.feature("LC-07")
def test_not_up_to_date_after_touch(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    os.utime(ws / "dist/a.js", ns=(10**18, 10**18))
    assert not store.is_up_to_date(entry, OUTPUTS)


@pytest.mark.feature("LC-07")
def test_not_up_to_date_after_a_same_size_edit_with_mtime_forged_back(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    path = ws / "dist/a.js"
    st = os.stat(path)
    path.write_bytes(path.read_bytes().upper())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not store.is_up_to_date(entry, OUTPUTS)  # the ctime stamp catches it


@pytest.mark.feature("LC-07")
def test_not_up_to_date_after_a_chmod(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    os.chmod(ws / "dist/a.js", 0o755)
    assert not store.is_up_to_date(entry, OUTPUTS)


@pytest.mark.feature("LC-07")
def test_not_up_to_date_with_an_extra_or_a_deleted_file(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    assert not store.is_up_to_date(entry, OUTPUTS + ["dist/extra.js"])
    (ws / "dist/sub/b.js").unlink()
    assert not store.is_up_to_date(entry, ["dist/a.js"])
    assert not store.is_up_to_date(entry, OUTPUTS)  # a stale listing still fails the lstat


@pytest.mark.feature("LC-07")
def test_a_symlinked_output_is_never_current(store, ws):
    os.rename(ws / "dist/a.js", ws / "dist/real.js")
    os.symlink("real.js", ws / "dist/a.js")
    save(store, rels=OUTPUTS + ["dist/real.js"])
    assert not store.is_up_to_date(store.probe(["k1"])["k1"], OUTPUTS)


@pytest.mark.feature("LC-07")
def test_another_workspace_without_stamps_is_not_current_until_restored(tmp_path, store, ws):
    save(store)
    other = tmp_path / "other"
    shutil.copytree(ws, other, copy_function=shutil.copy2)  # same bytes, modes, mtimes
    with LocalStore(tmp_path / "cache", other) as there:
        entry = there.probe(["k1"])["k1"]
        assert not there.is_up_to_date(entry, OUTPUTS)
        assert there.restore(entry, ALL) == LOG
        assert there.is_up_to_date(entry, OUTPUTS)
    assert store.is_up_to_date(
        store.probe(["k1"])["k1"], OUTPUTS
    )  # the first workspace's stamps stand


# ---------------------------------------------------------------- restore and damage (LC-09, LC-12)


@pytest.mark.feature("LC-09", "LC-12")
def test_restore_brings_back_files_and_stamps_them(tmp_path, store, ws):
    os.chmod(ws / "dist/a.js", 0o751)
    save(store)
    originals = {rel: (ws / rel).read_bytes() for rel in OUTPUTS}
    wipe(ws)
    entry = store.probe(["k1"])["k1"]
    assert store.restore(entry, ALL) == LOG
    assert {rel: (ws / rel).read_bytes() for rel in OUTPUTS} == originals
    assert os.stat(ws / "dist/a.js").st_mode & 0o777 == 0o751
    store.close()
    with LocalStore(tmp_path / "cache", ws) as reopened:
        assert reopened.is_up_to_date(reopened.probe(["k1"])["k1"], OUTPUTS)


@pytest.mark.feature("LC-12")
def test_a_damaged_artifact_raises_and_drops_the_entry(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    data = bytearray(store.artifact("k1").read_bytes())
    data[len(data) // 2] ^= 0xFF
    store.artifact("k1").write_bytes(bytes(data))
    wipe(ws)
    with pytest.raises(DamagedEntry) as err:
        store.restore(entry, ALL)
    assert err.value.reason
    assert not (ws / "dist").exists()
    assert store.probe(["k1"]) == {}
    assert not store.artifact("k1").exists()


@pytest.mark.feature("LC-09", "LC-12")
def test_an_artifact_pruned_after_the_probe_is_a_damaged_entry(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    store.artifact("k1").unlink()
    with pytest.raises(DamagedEntry, match="vanished"):
        store.restore(entry, ALL)


@pytest.mark.feature("LC-09", "LC-12")
def test_a_refused_name_is_a_damaged_entry(store, ws):
    save(store)
    entry = store.probe(["k1"])["k1"]
    with pytest.raises(DamagedEntry, match="not a declared output"):
        store.restore(entry, lambda p: p != "dist/sub/b.js")
    assert store.probe(["k1"]) == {}


# ---------------------------------------------------------------- log bound (LC-10)


@pytest.mark.feature("LC-10")
def test_the_stored_log_keeps_head_and_tail_and_names_the_cut(store, ws, monkeypatch):
    monkeypatch.setattr(local, "LOG_HALF", 10)
    log = (LogChunk(1, b"0123456789ab"), LogChunk(2, b"middle" * 5), LogChunk(1, b"tail-end-xyz"))
    save(store, log=log)
    kept = store.log_of(store.probe(["k1"])["k1"])
    assert kept[0] == LogChunk(1, b"0123456789")
    assert kept[2] == LogChunk(1, b"il-end-xyz")
    assert len(kept) == 3 and kept[1].stream == 2 and b"34 bytes of output cut" in kept[1].data


@pytest.mark.feature("LC-10")
def test_bound_log_does_not_split_utf8_and_passes_short_logs_through():
    short = (LogChunk(1, b"ok"),)
    assert bound_log(short, half=10) == short
    cut = bound_log((LogChunk(1, "é".encode() * 20),), half=5)
    assert cut[0].data.decode() == "éé" and cut[-1].data.decode() == "éé"


# ---------------------------------------------------------------- the directory and schema (LC-03, LC-14, LC-17)


@pytest.mark.feature("LC-03")
def test_vx_writes_a_gitignore_only_into_a_directory_it_creates(tmp_path, ws):
    with LocalStore(tmp_path / "new/cache", ws):
        pass
    assert (tmp_path / "new/cache/.gitignore").read_text() == "*\n"
    (tmp_path / "mine").mkdir()
    with LocalStore(tmp_path / "mine", ws):
        pass
    assert not (tmp_path / "mine/.gitignore").exists()


@pytest.mark.feature("LC-17")
def test_an_unwritable_cache_dir_is_an_environment_failure_naming_it(tmp_path, ws):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(EnvironmentFailure) as err:
        LocalStore(tmp_path / "file/cache", ws)
    assert str(tmp_path / "file/cache") in err.value.render()
    with pytest.raises(EnvironmentFailure, match="not a directory"):
        LocalStore(tmp_path / "file", ws)


def _reset_schema(store: LocalStore) -> None:
    """What a release with a new index schema finds: the version this one wrote is not its own."""
    store._db.execute("UPDATE schema_meta SET version='v0-old'")


@pytest.mark.feature("LC-14")
def test_a_schema_mismatch_resets_the_index_silently_and_keeps_artifacts(tmp_path, ws):
    with LocalStore(tmp_path / "cache", ws) as store:
        save(store)
        before = store.probe(["k1"])["k1"]
        _reset_schema(store)
        store._db.execute("CREATE TABLE runs (id INTEGER)")  # another module's table survives
    with LocalStore(tmp_path / "cache", ws) as store:
        assert store._db.execute("SELECT count(*) FROM entries").fetchone() == (0,)
        assert store._db.execute("SELECT version FROM schema_meta").fetchall() == [
            (local.SCHEMA_VERSION,)
        ]
        assert store._db.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        assert store.artifact("k1").exists()
        save(store)
        assert "k1" in store.probe(["k1"])
    assert before.task_id == "web#build"


@pytest.mark.feature("LC-13")
def test_a_row_less_artifact_is_indexed_again_from_its_bytes(tmp_path, ws):
    with LocalStore(tmp_path / "cache", ws) as store:
        save(store)
        before = store.probe(["k1"])["k1"]
        _reset_schema(store)
    with LocalStore(tmp_path / "cache", ws) as store:
        again = store.probe(["k1", "k2"])
        assert list(again) == ["k1"]
        got = again["k1"]
        for field in ("task_id", "command", "files", "duration_ms", "size_bytes", "cpu_ms", "crc"):
            assert getattr(got, field) == getattr(before, field), field
        assert store.log_of(got) == LOG
        wipe(ws)
        assert store.restore(got, ALL) == LOG
        assert (ws / "dist/sub/b.js").read_bytes() == b"content of dist/sub/b.js"
    with LocalStore(tmp_path / "cache", ws) as store:  # a row again: no second read
        assert store._db.execute("SELECT count(*) FROM entries").fetchone() == (1,)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # one byte of the compressed body flipped
        i = len(data) // 2
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :])


@pytest.mark.feature("LC-13")
@pytest.mark.parametrize("how", ["truncated", "tampered"])
def test_a_damaged_row_less_artifact_is_not_indexed_nor_served(tmp_path, ws, how):
    with LocalStore(tmp_path / "cache", ws) as store:
        save(store)
        _reset_schema(store)
    _damage(tmp_path / "cache/k1.tar.zst", how)
    with LocalStore(tmp_path / "cache", ws) as store:
        assert store.probe(["k1"]) == {}
        assert store._db.execute("SELECT count(*) FROM entries").fetchone() == (0,)
        assert not store.artifact("k1").exists()


@pytest.mark.feature("LC-13")
def test_an_artifact_without_task_facts_stays_cold(tmp_path, ws, monkeypatch):
    """An artifact an older vx wrote holds no task facts: a miss, never a guessed row."""
    real = LocalStore._pack
    monkeypatch.setattr(
        LocalStore,
        "_pack",
        lambda self, key, log, files, cpu, rss, task: real(self, key, log, files, cpu, rss, {}),
    )
    with LocalStore(tmp_path / "cache", ws) as store:
        save(store)
        _reset_schema(store)
    with LocalStore(tmp_path / "cache", ws) as store:
        assert store.probe(["k1"]) == {}
        assert not store.artifact("k1").exists()


@pytest.mark.feature("LC-06")
def test_close_records_access_times_for_hits(tmp_path, store, ws):
    save(store)
    store._db.execute("UPDATE entries SET accessed_at=0")
    store.probe(["k1"])
    store.close()
    store.close()  # idempotent
    db = sqlite3.connect(tmp_path / "cache" / local.DB_NAME)
    assert db.execute("SELECT accessed_at FROM entries").fetchone()[0] > 0
    db.close()


# ---------------------------------------------------------------- kept outputs' notes


def test_a_note_on_a_kept_entry_comes_back_with_its_and_its_upstreams_stamps(tmp_path, ws):
    """What a kept build info may be dated to (engine/dating.py): the note, after a close and a
    reopen, with the stamps of the entry's outputs and of its upstream's; an upstream saved again
    with other bytes since is not what the entry was built on, so its stamps are left out."""
    cache = tmp_path / "cache"
    with LocalStore(cache, ws) as store:
        assert store.kept_since("k1") is None  # nothing noted: no table asked into being
        save(store, "up", rels=["dist/a.js"])
        save(store, "k1", rels=["dist/sub/b.js"])
        store.note_kept("k1", 10, 20, ["up", "not-an-entry"])
        noted = store.kept_since("k1")
        assert noted is not None and (noted.since_ns, noted.dated_ns) == (10, 20)
    with LocalStore(cache, ws) as store:
        noted = store.kept_since("k1")
        assert noted is not None and (noted.since_ns, noted.dated_ns) == (10, 20)
        st = os.lstat(ws / "dist/a.js")
        assert noted.stamps["dist/a.js"] == (st.st_ino, st.st_ctime_ns)
        assert set(noted.stamps) == {"dist/a.js", "dist/sub/b.js"}
        (ws / "dist/a.js").write_bytes(b"other bytes")
        save(store, "up", rels=["dist/a.js"])
    with LocalStore(cache, ws) as store:
        noted = store.kept_since("k1")
        assert noted is not None and set(noted.stamps) == {"dist/sub/b.js"}
        entry = store.probe(["k1"])["k1"]
        store.evict([(entry.key, entry.crc)])
        assert store.kept_since("k1") is None  # dropped with its entry


def test_a_note_table_of_another_shape_is_remade_not_a_failed_close(tmp_path, ws):
    cache = tmp_path / "cache"
    with LocalStore(cache, ws) as store:
        save(store, "k1")
    db = sqlite3.connect(cache / "cache.db")
    db.execute("CREATE TABLE kept_since (hash TEXT, root TEXT, since_ns INTEGER, upstream TEXT)")
    db.commit()
    db.close()
    with LocalStore(cache, ws) as store:
        assert store.kept_since("k1") is None
        store.note_kept("k1", 1, 2, [])
    with LocalStore(cache, ws) as store:
        noted = store.kept_since("k1")
        assert noted is not None and noted.dated_ns == 2
