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


def test_item4_downloads_in_flight_share_one_temp_bound(tmp_path):
    """Item 4: FETCH_WORKERS downloads of a hostile server, each under the per-artifact bound,
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
