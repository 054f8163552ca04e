"""The layered store's own logic against an in-memory remote (the real wire is in scenarios):
prefetch fires every GET up front on a bounded pool, uploads are drained at close, and the
local-writes-off modes keep their temp files to themselves (RC-01..RC-03)."""

import asyncio
import threading
from pathlib import Path

import pytest

from vx.model import LogChunk
from vx.store import packing
from vx.store.layered import FETCH_WORKERS, Downloaded, LayeredStore, Wanted
from vx.store.local import Entry, LocalStore
from vx.store.policy import CacheAxes
from vx.store.remote import Found, RemoteSettings


class MemoryRemote:
    """A RemoteLayer held in a dict; `gate` makes every GET wait until released."""

    def __init__(self, bodies=None, gate=None):
        self.settings = RemoteSettings(kind="turbo", url="http://127.0.0.1:9")
        self.bodies = dict(bodies or {})
        self.gate = gate
        self.gets, self.puts = [], []
        self.active = self.peak = 0
        self.lock = threading.Condition()

    def wait_for_gets(self, n):
        with self.lock:
            assert self.lock.wait_for(lambda: len(self.gets) >= n, timeout=10), self.gets

    def has(self, key):
        return Found() if key in self.bodies else None

    def get(self, key, sink):
        with self.lock:
            self.gets.append(key)
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.lock.notify_all()
        try:
            if self.gate is not None:
                assert self.gate.wait(10), "the GET was never released"
            if key not in self.bodies:
                return None
            sink.write(self.bodies[key])
            return Found(len(self.bodies[key]), 12.0)
        finally:
            with self.lock:
                self.active -= 1

    def put(self, key, src, size, duration_ms):
        self.puts.append((key, src.read(), size))

    def close(self):
        pass


def artifact(tmp_path: Path, key: str) -> bytes:
    root = tmp_path / "src-ws"
    (root / "dist").mkdir(parents=True, exist_ok=True)
    (root / "dist/out.js").write_text(f"built {key}")
    packing.pack(
        tmp_path / "a.tar.zst",
        key=key,
        log=[LogChunk(1, b"ok\n")],
        files=[("dist/out.js", root / "dist/out.js")],
    )
    return (tmp_path / "a.tar.zst").read_bytes()


def store(tmp_path, remote, axes=CacheAxes(True, True, True, True)):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return LayeredStore(LocalStore(tmp_path / "cache", ws), remote, axes)


WANT = Wanted("app#build", "build", lambda p: p.startswith("dist/"))


@pytest.mark.feature("RC-03")
def test_every_get_is_in_flight_before_any_is_awaited(tmp_path):
    keys = [f"{i:016x}" for i in range(3)]
    gate = threading.Event()
    remote = MemoryRemote({k: artifact(tmp_path, k) for k in keys}, gate=gate)
    layered = store(tmp_path, remote)
    layered.prefetch({k: WANT for k in keys})
    remote.wait_for_gets(3)
    assert sorted(remote.gets) == keys  # all three asked at once, none awaited yet
    gate.set()
    got = asyncio.run(layered.fetched(keys[0]))
    assert isinstance(got, Entry) and got.key == keys[0] and got.task_id == "app#build"
    layered.close()


@pytest.mark.feature("RC-03")
def test_the_download_pool_is_bounded(tmp_path):
    keys = [f"{i:016x}" for i in range(3 * FETCH_WORKERS)]
    gate = threading.Event()
    remote = MemoryRemote(gate=gate)
    layered = store(tmp_path, remote)
    layered.prefetch({k: WANT for k in keys})
    remote.wait_for_gets(FETCH_WORKERS)
    gate.set()
    assert asyncio.run(layered.fetched(keys[-1])) is None  # a miss
    layered.close()  # waits for the pool
    assert remote.peak == FETCH_WORKERS and len(remote.gets) == len(keys)


@pytest.mark.feature("RC-03")
def test_a_hit_is_adopted_verbatim_and_restores(tmp_path):
    key = "00000000000000aa"
    body = artifact(tmp_path, key)
    layered = store(tmp_path, MemoryRemote({key: body}))
    layered.prefetch({key: WANT})
    entry = asyncio.run(layered.fetched(key))
    assert (tmp_path / "cache" / f"{key}.tar.zst").read_bytes() == body
    assert layered.restore(entry, WANT.allowed) == (LogChunk(1, b"ok\n"),)
    assert (tmp_path / "ws/dist/out.js").read_text() == f"built {key}"
    layered.close()
    assert LocalStore(tmp_path / "cache", tmp_path / "ws").probe([key])  # a local hit next time


def test_local_writes_off_keeps_the_download_out_of_the_store(tmp_path):
    key = "00000000000000bb"
    layered = store(
        tmp_path, MemoryRemote({key: artifact(tmp_path, key)}), CacheAxes(True, False, True, False)
    )
    layered.prefetch({key: WANT})
    got = asyncio.run(layered.fetched(key))
    assert isinstance(got, Downloaded) and got.path.exists()
    layered.restore(got, WANT.allowed)
    assert not got.path.exists() and (tmp_path / "ws/dist/out.js").exists()
    layered.close()
    assert not list((tmp_path / "cache").glob("*.tar.zst")) and not list(
        (tmp_path / "cache").glob(".*tmp")
    )


def test_saves_upload_the_local_bytes_and_close_drains(tmp_path):
    remote = MemoryRemote()
    layered = store(tmp_path, remote)
    (tmp_path / "ws/dist").mkdir(parents=True)
    (tmp_path / "ws/dist/out.js").write_text("x")
    fields = dict(task_id="a#b", command="c", log=(), files=["dist/out.js"], duration_ms=5.0)
    layered.save("00000000000000cc", **fields)
    layered.close()
    ((key, body, size),) = remote.puts
    assert body == (tmp_path / "cache/00000000000000cc.tar.zst").read_bytes() and size == len(body)


def test_remote_only_writes_pack_a_temp_that_is_gone_after_the_upload(tmp_path):
    remote = MemoryRemote()
    layered = store(tmp_path, remote, CacheAxes(False, False, True, True))
    (tmp_path / "ws/dist").mkdir(parents=True)
    (tmp_path / "ws/dist/out.js").write_text("x")
    layered.save(
        "00000000000000dd",
        task_id="a#b",
        command="c",
        log=(),
        files=["dist/out.js"],
        duration_ms=5.0,
    )
    layered.close()
    assert len(remote.puts) == 1
    assert not [
        p
        for p in (tmp_path / "cache").iterdir()
        if p.name not in (".gitignore", "cache.db", "cache.db-wal", "cache.db-shm")
    ]


class HostileRemote(MemoryRemote):
    """Every GET streams 600 KiB (under the 1 MiB per-artifact bound), then all meet at a barrier:
    at that moment every download in flight has handed the store what it will hold."""

    def __init__(self, keys, parties):
        super().__init__({k: b"" for k in keys})
        self.settings = RemoteSettings(
            kind="turbo", url="http://127.0.0.1:9", max_artifact_bytes=1 << 20
        )
        self.barrier = threading.Barrier(parties, timeout=30)
        self.accepted = []  # bytes each GET could write into its temp file

    def get(self, key, sink):
        written = 0
        try:
            for _ in range(6):
                sink.write(b"\0" * (100 << 10))
                written += 100 << 10
        finally:
            with self.lock:
                self.accepted.append(written)
            self.barrier.wait()
        return Found(written, 1.0)


def test_downloads_in_flight_share_one_temp_bound(tmp_path):
    """FETCH_WORKERS downloads of a hostile server, each under the per-artifact bound,
    once held that bound times FETCH_WORKERS in temp files. Together they now stay within one
    bound: past it a download stops and is a miss, and its temp file goes."""
    keys = [f"{i:016x}" for i in range(FETCH_WORKERS)]
    remote = HostileRemote(keys, FETCH_WORKERS)
    layered = store(tmp_path, remote)
    layered.prefetch({k: WANT for k in keys})

    async def all_fetched():
        return [await layered.fetched(k) for k in keys]

    assert asyncio.run(all_fetched()) == [None] * FETCH_WORKERS  # not artifacts: misses either way
    assert sum(remote.accepted) <= 1 << 20, remote.accepted
    layered.close()
    assert not list((tmp_path / "cache").glob("*.tmp"))


class Outputs:
    """The part of an OutputSpec an early restore uses: `wipe` (counted) and `additive`."""

    additive = False

    def __init__(self):
        self.wiped = 0

    def wipe(self, root):
        self.wiped += 1
        for old in (Path(root) / "dist").glob("*"):
            old.unlink()


@pytest.mark.feature("RC-03")
def test_a_download_that_may_restore_early_is_restored_by_its_fetch(tmp_path):
    """Remote restore, the CI case: the fetching thread wipes, checks and extracts in one pass,
    so the task's turn finds its outputs current and replays the log without reading the index."""
    key = "00000000000000ac"
    body = artifact(tmp_path, key)
    spec = Outputs()
    (tmp_path / "ws/dist").mkdir(parents=True)
    (tmp_path / "ws/dist/stale.js").write_text("old")
    layered = store(tmp_path, MemoryRemote({key: body}))
    layered.prefetch({key: Wanted("app#build", "build", WANT.allowed, spec)})
    entry = asyncio.run(layered.fetched(key))
    assert isinstance(entry, Entry) and spec.wiped == 1
    assert sorted(p.name for p in (tmp_path / "ws/dist").iterdir()) == ["out.js"]
    assert (tmp_path / "ws/dist/out.js").read_text() == f"built {key}"
    assert layered.is_up_to_date(entry, ["dist/out.js"])
    assert layered.log_of(entry) == (LogChunk(1, b"ok\n"),)
    assert (tmp_path / "cache" / f"{key}.tar.zst").read_bytes() == body
    layered.close()
    assert LocalStore(tmp_path / "cache", tmp_path / "ws").probe([key])


def test_the_close_leaves_its_commits_in_the_wal_for_the_next_run(tmp_path):
    """A run with a remote layer ends without the index's checkpoint (no syncs at its end):
    the connection is left to the process's exit, every commit in the WAL, where another
    connection (the next run's) reads the adopted entry and the restore's stamps."""
    import sqlite3

    from vx.store import rows

    key = "00000000000000ad"
    body = artifact(tmp_path, key)
    layered = store(tmp_path, MemoryRemote({key: body}))
    layered.prefetch({key: Wanted("app#build", "build", WANT.allowed, Outputs())})
    assert isinstance(asyncio.run(layered.fetched(key)), Entry)
    layered.close()
    index = tmp_path / "cache" / "cache.db"
    assert Path(f"{index}-wal").stat().st_size > 0  # a checkpoint at close would have removed it
    other = sqlite3.connect(index)  # as another process would: not the connection left open
    try:
        assert other.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        stamped = {
            p for (p,) in other.execute("SELECT path FROM output_stamps WHERE hash=?", (key,))
        }
    finally:
        other.close()
    assert stamped == {"dist/out.js"}
    again = LocalStore(tmp_path / "cache", tmp_path / "ws")
    assert again.probe([key])
    again.close()  # an in-process caller's own close still closes (and checkpoints)
    rows._left_open.pop().close()  # what the exit would do: no connection outlives the test


@pytest.mark.feature("RC-05")
@pytest.mark.parametrize("damage", ["truncated", "bit flipped"])
def test_a_damaged_download_restored_early_writes_nothing_and_is_a_miss(tmp_path, damage):
    """Remote restore, the CI case: checking while extracting keeps the all-or-nothing rule —
    a cut or corrupted artifact leaves no output, no entry and no temp file behind."""
    key = "00000000000000ad"
    body = bytearray(artifact(tmp_path, key))
    if damage == "truncated":
        body = body[: len(body) // 2]
    else:
        body[len(body) // 2] ^= 0x01
    spec = Outputs()
    layered = store(tmp_path, MemoryRemote({key: bytes(body)}))
    layered.prefetch({key: Wanted("app#build", "build", WANT.allowed, spec)})
    assert asyncio.run(layered.fetched(key)) is None
    assert not list((tmp_path / "ws").rglob("*.js")) and not list((tmp_path / "ws").rglob(".vx-*"))
    messages = layered.messages()
    layered.close()
    assert any("rejected artifact" in text for text, _level in messages), messages
    assert not list((tmp_path / "cache").glob(f"*{key}*"))
    assert not LocalStore(tmp_path / "cache", tmp_path / "ws").probe([key])


def packed(tmp_path: Path, store: LocalStore, key: str):
    """A downloaded artifact in the store's cache dir, as `adopt` takes it."""
    from vx.store import unpacking

    body = artifact(tmp_path, key)
    temp = store.cache_dir / f".{key}.test.remote.tmp"
    temp.write_bytes(body)
    checked = unpacking.check(temp, key=key, allowed=lambda p: True)
    return temp, checked, len(body)


@pytest.mark.feature("RC-03")
def test_one_bad_adoption_in_a_batch_fails_only_itself(tmp_path):
    """Remote restore, the CI case: downloads are indexed a batch per transaction, and one that
    cannot be installed (its temp file gone) is retried alone, so the rest of the batch lands."""
    from vx.store.local import _Adoption, _Packed

    local = LocalStore(tmp_path / "cache", tmp_path / "ws")
    keys = [f"{i:016x}" for i in (1, 2, 3)]
    batch = []
    for key in keys:
        temp, checked, size = packed(tmp_path, local, key)
        batch.append((temp, checked, size))
    batch[1][0].unlink()  # the second one's download vanished
    items = []
    for key, (temp, checked, size) in zip(keys, batch):
        info = packing.PackInfo(size, checked.files, checked.crc)
        row = (key, "app#build", "build", 1.0, size, 0.0, None, None, checked.crc, 0.0)
        items.append(_Adoption(_Packed(temp, key, info), row, b""))
    local._adoptions._write(items)
    assert items[0].error is None and items[2].error is None
    assert isinstance(items[1].error, OSError)
    assert set(local.probe(keys)) == {keys[0], keys[2]}
    local.close()


_KILLED_MID_BATCH = """
import os, signal, sys
from pathlib import Path
from vx.store import local, packing, unpacking
cache, ws, art = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
store = local.LocalStore(cache, ws)
batch = []
for i in range(4):
    key = f"{i:016x}"
    temp = cache / f".{key}.test.remote.tmp"
    temp.write_bytes((art / key).read_bytes())
    checked = unpacking.check(temp, key=key, allowed=lambda p: True)
    info = packing.PackInfo(temp.stat().st_size, checked.files, checked.crc)
    row = (key, "app#build", "build", 1.0, info.size_bytes, 0.0, None, None, checked.crc, 0.0)
    batch.append((local._Packed(temp, key, info), row, b""))
written = local.LocalStore._write_rows
def dies_on_the_third(self, packed, row, log_blob):
    if packed.key == f"{2:016x}":  # two renamed in and written, the third renamed: no COMMIT
        os.kill(os.getpid(), signal.SIGKILL)
    written(self, packed, row, log_blob)
local.LocalStore._write_rows = dies_on_the_third
store._install_many(batch)
"""


@pytest.mark.feature("RC-03")
def test_a_process_killed_mid_batch_leaves_no_row_and_the_downloads_install_again(tmp_path):
    """Remote restore, the CI case: a process killed inside a batch's transaction, after some
    artifacts were renamed in, leaves none of the batch's rows (never a row for a half entry);
    what it renamed in is an orphan, and adopting the same downloads again works."""
    import os
    import signal
    import subprocess
    import sys

    arts = tmp_path / "arts"
    arts.mkdir()
    keys = [f"{i:016x}" for i in range(4)]
    for key in keys:
        (arts / key).write_bytes(artifact(tmp_path, key))
    cache, ws = tmp_path / "cache", tmp_path / "ws"
    ws.mkdir()
    src = str(Path(__file__).resolve().parents[3] / "src")
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_BATCH, str(cache), str(ws), str(arts)],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert (cache / f"{keys[2]}.tar.zst").exists()  # it died past the third rename
    local = LocalStore(cache, ws)
    assert local.probe(keys) == {}
    assert local._db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    layered = LayeredStore(local, MemoryRemote({k: (arts / k).read_bytes() for k in keys}), AXES)
    layered.prefetch({k: WANT for k in keys})
    for key in keys:
        assert isinstance(asyncio.run(layered.fetched(key)), Entry)
    layered.close()
    assert set(LocalStore(cache, ws).probe(keys)) == set(keys)


AXES = CacheAxes(True, True, True, True)


class _Spec:
    def __init__(self, project_dir, additive=False, ws_globs=None, declares_files=True):
        self.project_dir, self.additive, self.ws_globs = project_dir, additive, ws_globs
        self.declares_files = declares_files

    def allows(self, path):
        return True


class _Plan:
    def __init__(self, key, outputs):
        self.key, self.outputs, self.command = key, outputs, "build"


@pytest.mark.feature("RC-03")
def test_only_outputs_no_other_task_can_touch_are_restored_at_once():
    """Remote restore, the CI case: a download is restored by its fetch only when its task's
    outputs are plain, inside its project, and the only declared outputs of that project."""
    from vx.store.layered import wanted_from

    alone, additive, workspace = (
        _Spec("packages/a"),
        _Spec("packages/b", True),
        _Spec("c", False, "x"),
    )
    build, test, lint = (
        _Spec("packages/d"),
        _Spec("packages/d"),
        _Spec("packages/d", declares_files=False),
    )
    plans = {
        "a#build": _Plan("a1", alone),
        "b#build": _Plan("b1", additive),
        "c#build": _Plan("c1", workspace),
        "d#build": _Plan("d1", build),
        "d#test": _Plan("d2", test),
        "d#lint": _Plan("d3", lint),
        "e#build": _Plan("e1", _Spec("packages/e")),
    }
    wanted = wanted_from(plans, skip={"e1"})
    assert {k: w.early is not None for k, w in wanted.items()} == {
        "a1": True,
        "b1": False,
        "c1": False,
        "d1": False,
        "d2": False,
        "d3": False,
    }
    assert wanted_from({"a#build": plans["a#build"]}, (), early=False)["a1"].early is None
    late = {"a#build": plans["a#build"], "a#gen": _Plan("a2", _Spec("packages/a"))}
    assert {k: w.early for k, w in wanted_from(late, (), later={"a#gen"}).items()} == {"a1": None}


@pytest.mark.feature("RC-03")
@pytest.mark.parametrize("size", [100, 3 << 20])
def test_a_download_small_or_spilled_lands_whole_and_gives_its_budget_back(tmp_path, size):
    """Remote restore, the CI case: a small download is checked and restored from memory and
    written to the store once; one past the in-memory size goes to a temp file as it arrives.
    Either way the store gets the very bytes, no temp file stays, and the budget is returned."""
    import os

    key = "00000000000000ae"
    root = tmp_path / "src-ws"
    (root / "dist").mkdir(parents=True)
    (root / "dist/out.js").write_bytes(os.urandom(size))  # incompressible: the artifact is as big
    packing.pack(
        tmp_path / "a.tar.zst", key=key, log=[], files=[("dist/out.js", root / "dist/out.js")]
    )
    body = (tmp_path / "a.tar.zst").read_bytes()
    spec = Outputs()
    layered = store(tmp_path, MemoryRemote({key: body}))
    layered.prefetch({key: Wanted("app#build", "build", WANT.allowed, spec)})
    entry = asyncio.run(layered.fetched(key))
    assert isinstance(entry, Entry)
    assert (tmp_path / "ws/dist/out.js").read_bytes() == (root / "dist/out.js").read_bytes()
    assert (tmp_path / "cache" / f"{key}.tar.zst").read_bytes() == body
    assert layered._budget.used == 0
    layered.close()
    assert not list((tmp_path / "cache").glob(".*tmp"))
