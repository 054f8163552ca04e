"""The local store with a remote layer behind it: the run's store when a remote
cache is configured.

Reads go local first, then remote. Every remote GET is fired before scheduling (`prefetch`)
on a bounded pool, so a fully remote-cached run waits on bandwidth, not on the graph's
depth; a task whose turn comes awaits its own download (`fetched`). A downloaded artifact is
proven (`ingest`) and adopted into the local store byte for byte, so the hit is restored by
the local path and reported `remote`, and the next run hits locally.

Saves are local and synchronous; the upload of the very same `<key>.tar.zst` then runs on a
second bounded pool owned by the run, and `close` drains it before the run ends. No remote
failure escapes this module: each becomes a miss or a skipped upload (see `remote.health`).

With the remote configured but local writes off (`--cache=local:r,remote:rw`), downloads
stay temp files restored straight from where they landed, and saves pack to a temp file
that only the upload reads.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Mapping, Sequence

from msgspec import Struct

from vx.errors import EnvironmentFailure
from vx.model import LogChunk
from vx.store import archive, packing, unpacking
from vx.store.ingest import ingest
from vx.store.local import DamagedEntry, Entry, KeptSince, LocalStore
from vx.store.policy import CacheAxes
from vx.store.remote import BAD_RESPONSE, REJECTED, TOO_LARGE, RemoteFailure, RemoteLayer
from vx.store.remote.health import Health, Say
from vx.store.remote.layer import FETCH_WORKERS

if TYPE_CHECKING:
    import asyncio

UPLOAD_WORKERS = 4
_LOCAL_TROUBLE = (OSError, EnvironmentFailure)


class Wanted(Struct, frozen=True):
    """What a download needs to know about its task: who it is and what it may write.

    `early` is the task's outputs when its download may be restored into the workspace at
    once, by the thread that fetched it, rather than at the task's turn (`wanted_from` says
    when that is safe)."""

    task_id: str
    command: str
    allowed: Callable[[str], bool]
    early: Any = None  # OutputSpec | None


class Downloaded(Struct, frozen=True):
    """A remote hit kept out of the local store (local writes off): restored from its temp file."""

    key: str
    path: Path
    checked: unpacking.Checked
    duration_ms: float | None = None  # how long the run that uploaded it took, when the server says


class _TempBudget:
    """The temp space every download in flight may hold together, counted as bytes arrive.

    Why: the per-artifact bound alone lets FETCH_WORKERS concurrent downloads from a hostile or
    broken server fill that many times the bound before each is refused. A download that would
    pass the shared bound stops there and is a miss; its bytes are given back when its temp
    file goes (deleted, or renamed into the store)."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0
        self._lock = threading.Lock()
        self._held: dict[object, int] = {}  # by what holds them: a temp file's path, a landing

    def take(self, path: object, n: int) -> None:
        with self._lock:
            if self.used + n > self.limit:
                raise RemoteFailure(
                    TOO_LARGE, f"downloads in flight reached their {self.limit} byte temp bound"
                )
            self.used += n
            self._held[path] = self._held.get(path, 0) + n

    def give_back(self, path: object) -> None:
        with self._lock:
            self.used -= self._held.pop(path, 0)


SMALL_DOWNLOAD = unpacking.WHOLE_READ  # a download up to this size stays in memory


class _NoTemp(OSError):
    """No temp file could be made for a download (already reported)."""


class _Landing:
    """Where a download's bytes arrive: memory while they are few, else a temp file in the
    cache dir; every write is first taken from the shared budget.

    Why memory: creating a file in the cache dir, where every download lands, is the dearest
    system call of a remote restore. A small artifact is checked and restored from memory and
    written to the store once, by the thread that indexes it (`LocalStore.adopt`)."""

    def __init__(self, layered: "LayeredStore", key: str, *, in_memory: bool):
        self._layered, self._key = layered, key
        self.data: bytearray | None = bytearray() if in_memory else None
        self.path: Path | None = None
        self._raw: Any = None

    def write(self, chunk: bytes) -> int:
        budget = self._layered._budget
        if self.data is not None and len(self.data) + len(chunk) <= SMALL_DOWNLOAD:
            budget.take(self, len(chunk))
            self.data += chunk
            return len(chunk)
        if self._raw is None:
            self._spill()
        assert self.path is not None  # made by _spill
        budget.take(self.path, len(chunk))
        return self._raw.write(chunk)

    def _spill(self) -> None:
        """Move to a temp file (what is held so far included)."""
        made = self._layered._made_temp(self._key)
        if made is None:
            raise _NoTemp()
        self.path, fd = made
        self._raw = open(fd, "wb")
        if self.data:
            self._layered._budget.take(self.path, len(self.data))
            self._raw.write(self.data)
        self._layered._budget.give_back(self)
        self.data = None

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()

    def source(self) -> Path | bytes:
        """The whole download: its bytes, or its temp file."""
        if self.data is not None:
            return bytes(self.data)
        if self.path is None:  # an empty body never opened one
            self._spill()
            self.close()
        assert self.path is not None
        return self.path

    def adopted(self) -> None:
        """In the store now: the temp file (renamed in) is no longer ours to remove."""
        layered = self._layered
        if self.path is not None:
            with layered._lock:
                layered._temps.discard(self.path)
            layered._budget.give_back(self.path)
        layered._budget.give_back(self)

    def discard(self) -> None:
        self.close()
        if self.path is not None:
            self._layered._forget(self.path)
        self._layered._budget.give_back(self)


class LayeredStore:
    """The LocalStore's face (probe, is_up_to_date, log_of, restore, save, close) over two layers."""

    def __init__(self, local: LocalStore, remote: RemoteLayer, axes: CacheAxes):
        self.local, self.remote, self.axes = local, remote, axes
        per_layer = getattr(remote, "breaks_per_layer", False)  # a chain: a breaker per layer
        self.health = Health(remote.settings.endpoint, breaker=not per_layer)
        if per_layer:
            remote.tell = self.health.tell  # type: ignore[attr-defined]
        listen = getattr(remote, "listen", None)  # a layer with something of its own to say
        if listen is not None:
            listen(self.health.tell)
        self._fetches: dict[str, Future] = {}
        self._uploads: list[Future] = []
        self._temps: set[Path] = set()
        self._lock = threading.Lock()
        self._fetch_pool: ThreadPoolExecutor | None = None
        self._upload_pool: ThreadPoolExecutor | None = None
        self._status_answer: Future[bool] | None = None
        self.wanted: dict[str, Wanted] = {}  # set by the run: the keys it would download
        self._budget = _TempBudget(remote.settings.max_artifact_bytes)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._logs: dict[str, tuple[LogChunk, ...]] = {}  # of the downloads restored at once

    # ------------------------------------------------------------ lifecycle

    def attach(self, say: Say) -> None:
        """Route remote warnings to `say`, which runs on the reporter's (main) thread: pool threads
        queue theirs and wake the event loop, once one runs, to deliver them there."""
        self.health.attach(say, wake=self._wake_loop)

    def _wake_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.health.flush)

    def messages(self) -> list[tuple[str, str]]:
        """Warnings nobody heard yet (a `--dry` run has no reporter attached)."""
        return self.health.drain()

    def close(
        self, say: Say | None = None, settle: Callable[[LocalStore], None] | None = None
    ) -> None:
        """Drain the uploads, stop the pools, tell the tally, `settle` the local store (retention:
        only once nothing is still uploading from it), close it."""
        wait(list(self._uploads))
        for pool in (self._fetch_pool, self._upload_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self.remote.close()
        for temp in list(self._temps):
            _unlink(temp)
        self.health.attach(say)
        line = self.health.tally()
        if line is not None:
            self.health.tell(*line)
        if settle is not None:
            settle(self.local)
        self.local.close(leave_open=True)  # the run's end: no checkpoint (LocalStore.close)

    def _pool(self, kind: str) -> ThreadPoolExecutor:
        with self._lock:
            if kind == "fetch":
                if self._fetch_pool is None:
                    # A layer with a `fetch_width` (REAPI: its calls in flight, which its
                    # throttle lowers on pushback) gets that many: each download waits two round
                    # trips, so behind a link 16 bound the restore (docs/benchmarks.md).
                    width = getattr(self.remote, "fetch_width", FETCH_WORKERS)
                    self._fetch_pool = ThreadPoolExecutor(
                        max(1, width), thread_name_prefix="vx-remote-get"
                    )
                return self._fetch_pool
            if self._upload_pool is None:
                self._upload_pool = ThreadPoolExecutor(
                    UPLOAD_WORKERS, thread_name_prefix="vx-remote-put"
                )
            return self._upload_pool

    # ------------------------------------------------------------ planning probes

    def probe_remote(self, keys: Iterable[str]) -> set[str]:
        """Ask the remote whether it holds each key: existence only, nothing downloaded."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return set()
        futures = {key: self._pool("fetch").submit(self._has, key) for key in keys}
        return {key for key, future in futures.items() if future.result()}

    def _has(self, key: str) -> bool:
        if not self.health.allows(writing=False):
            return False
        try:
            found = self.remote.has(key)
        except RemoteFailure as failure:
            self.health.failed("HEAD", key, failure, "predicted as a miss")
            return False
        self.health.succeeded()
        return found is not None

    # ------------------------------------------------------------ prefetch

    def prefetch(self, wanted: Mapping[str, Wanted]) -> None:
        """Fire one background GET per key the local layer lacks, in plan order (dependencies first)."""
        if not self.axes.remote_read or not wanted:
            return
        pool = self._pool("fetch")
        for key, want in wanted.items():
            if key not in self._fetches:
                self._fetches[key] = pool.submit(self._fetch, key, want)

    async def fetched(self, key: str) -> Entry | Downloaded | None:
        """The remote hit for `key` once its download is proven, or None for a miss."""
        import asyncio  # the walk's, loaded by now: opening the layer need not wait for it

        if (
            self._loop is None
        ):  # the walk's loop: from now on pool threads wake it to deliver warnings
            self._loop = asyncio.get_running_loop()
            self.health.flush()
        future = self._fetches.get(key)
        if future is None:
            return None
        return await asyncio.wrap_future(future)

    def _fetch(self, key: str, want: Wanted) -> Entry | Downloaded | None:
        if not self.health.allows(writing=False):
            return None
        # local writes off: the download is restored from its temp file, so it goes to one
        landing = _Landing(self, key, in_memory=self.axes.local_write)
        try:
            return self._download(key, want, landing)
        except _NoTemp:
            pass  # said by `_made_temp`
        except RemoteFailure as failure:
            self.health.failed("GET", key, failure, "treated as a miss")
        except _LOCAL_TROUBLE as exc:
            self.health.failed(
                "GET", key, RemoteFailure("local store", _local_why(exc)), "treated as a miss"
            )
        landing.discard()
        return None

    def _download(self, key: str, want: Wanted, landing: "_Landing") -> Entry | Downloaded | None:
        try:
            found = self.remote.get(key, landing)
        finally:
            landing.close()
        self.health.succeeded()
        if found is None:
            self.health.count("misses")
            landing.discard()
            return None
        source = landing.source()
        restored = want.early is not None and self.axes.local_write
        checked = self._restore_now(key, want, source) if restored else None
        if checked is None:
            restored = False
            checked = ingest(source, key=key, allowed=self.local.guard(want.allowed))
        size = len(source) if isinstance(source, bytes) else os.path.getsize(source)
        self.health.count("hits")
        self.health.count("bytes_down", size)
        if not self.axes.local_write:
            assert isinstance(source, Path)  # never held in memory then
            return Downloaded(key, source, checked, found.duration_ms)
        entry = self.local.adopt(
            source,
            key,
            task_id=want.task_id,
            command=want.command,
            duration_ms=found.duration_ms or 0.0,
            checked=checked,
            size_bytes=size,
        )
        landing.adopted()
        self._copy_back(key, found.duration_ms or 0.0)
        if restored:
            self.local.stamp_restored(entry.key, [f.path for f in checked.files])
            with self._lock:
                self._logs[entry.key] = checked.log
        return entry

    def _restore_now(self, key: str, want: Wanted, temp: Path | bytes) -> unpacking.Checked | None:
        """Wipe the task's outputs and restore the download into them in the one pass that
        checks it; None when the workspace refused a write (the task's turn restores it then,
        and reports that). A refused artifact wrote nothing and is a miss, as with `ingest`
        (a path that is both a file and a directory cannot be extracted, so it is refused too)."""
        t0 = time.perf_counter()
        try:
            want.early.wipe(self.local.root)
            checked = unpacking.unpack_checked(
                temp, key=key, allowed=self.local.guard(want.allowed), root=self.local.root
            )
        except archive.ArchiveError as exc:
            raise RemoteFailure(REJECTED, exc.message) from None
        except _LOCAL_TROUBLE:
            return None
        self.local.spans["restore"].append(time.perf_counter() - t0)
        return checked

    # ------------------------------------------------------------ the local store's face

    def probe(self, keys: Iterable[str]) -> dict[str, Entry]:
        return self.local.probe(keys) if self.axes.local_read else {}

    def entry_on_disk(self, task_id: str, current: Collection[str]) -> Entry | None:
        return self.local.entry_on_disk(task_id, current) if self.axes.local_read else None

    def note_kept(self, key: str, since_ns: int, dated_ns: int, upstream: Sequence[str]) -> None:
        if self.axes.local_write:
            self.local.note_kept(key, since_ns, dated_ns, upstream)

    def kept_since(self, key: str) -> KeptSince | None:
        return self.local.kept_since(key) if self.axes.local_read else None

    def save_local(self, key: str, **fields: Any) -> int:
        """Save to the local layer only: a result built on kept incremental state is never
        uploaded (a remote layer gets clean builds)."""
        return self.local.save(key, **fields) if self.axes.local_write else 0

    def is_up_to_date(self, entry: Any, current: Collection[str]) -> bool:
        return not isinstance(entry, Downloaded) and self.local.is_up_to_date(entry, current)

    def log_of(self, entry: Any) -> tuple[LogChunk, ...]:
        if isinstance(entry, Downloaded):
            return entry.checked.log
        with self._lock:
            log = self._logs.get(entry.key)
        return log if log is not None else self.local.log_of(entry)

    def restore(self, entry: Any, allowed: Callable[[str], bool]) -> tuple[LogChunk, ...]:
        """Restore a local entry, or a downloaded temp file (then removed); damage is a miss."""
        if not isinstance(entry, Downloaded):
            return self.local.restore(entry, allowed)
        try:
            return unpacking.unpack(
                entry.path, key=entry.key, allowed=self.local.guard(allowed), root=self.local.root
            ).log
        except archive.ArchiveError as exc:
            raise DamagedEntry(exc.message) from None
        finally:
            self._forget(entry.path)

    def save(self, key: str, **fields: Any) -> int:
        """Save locally (when local writes are on), then queue the upload of the same bytes."""
        if self.axes.local_write:
            size = self.local.save(key, **fields)
            self._queue_upload(key, self.local.artifact(key), fields["duration_ms"], owned=False)
            return size
        if not self.axes.remote_write:
            return 0
        temp = self._temp(key)
        if temp is None:
            return 0
        try:
            info = packing.pack(
                temp,
                key=key,
                log=fields["log"],
                files=[(p, self.local.root / p) for p in fields["files"]],
            )
        except BaseException:
            self._forget(temp)
            raise
        self._queue_upload(key, temp, fields["duration_ms"], owned=True)
        return info.size_bytes

    # ------------------------------------------------------------ uploads

    def _queue_upload(self, key: str, path: Path, duration_ms: float, *, owned: bool) -> None:
        if self.axes.remote_write and self.health.allows(writing=True):
            self._uploads.append(
                self._pool("upload").submit(self._upload, key, path, duration_ms, owned)
            )
        elif owned:
            self._forget(path)

    def _upload(self, key: str, path: Path, duration_ms: float, owned: bool) -> None:
        try:
            if self.health.allows(writing=True) and self._uploads_allowed(key):
                self._put(key, path, duration_ms)
        finally:
            if owned:
                self._forget(path)

    def _put(self, key: str, path: Path, duration_ms: float) -> None:
        try:
            with open(path, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                self.remote.put(key, src, size, duration_ms)
        except RemoteFailure as failure:
            self.health.failed("PUT", key, failure, "not uploaded (the local cache has it)")
            return
        except OSError as exc:
            self.health.failed(
                "PUT", key, RemoteFailure("local store", _local_why(exc)), "not uploaded"
            )
            return
        self.health.succeeded()
        self.health.count("uploads")
        self.health.count("bytes_up", size)

    def _copy_back(self, key: str, duration_ms: float) -> None:
        """A hit a later layer of a chain served, proven and in the local store, written to the
        chain's earlier written layers in the background; a failure there is warned as an
        upload's is, never the run's."""
        copy_back = getattr(self.remote, "copy_back", None)
        if copy_back is None or not self.axes.remote_write:
            return

        def copy() -> None:
            path = self.local.artifact(key)
            try:
                with open(path, "rb") as src:
                    copy_back(key, src, os.fstat(src.fileno()).st_size, duration_ms)
            except RemoteFailure as failure:
                self.health.failed("PUT", key, failure, "not copied back (the local cache has it)")
            except OSError:
                pass  # the local entry went meanwhile: nothing to copy

        self._uploads.append(self._pool("upload").submit(copy))

    def _uploads_allowed(self, key: str) -> bool:
        """Before the first upload, ask a turbo server whether caching is enabled for the team.

        Every uploader waits for that one answer: an upload must not slip past a status check
        that is still retrying against a failing server."""
        status = getattr(self.remote, "status", None)
        if status is None:
            return True
        with self._lock:
            first = self._status_answer is None
            if first:
                self._status_answer = Future()
        told = self._status_answer
        assert told is not None  # made by the first uploader, above
        if first:
            answer = False
            try:
                answer = self._check_status(status, key)
            finally:  # even on an unexpected error, never leave the other uploaders waiting
                told.set_result(answer)
        return told.result()

    def _check_status(self, status: Callable[[], object], key: str) -> bool:
        try:
            status()
        except RemoteFailure as failure:
            if failure.kind == BAD_RESPONSE:  # a server without /status is fine; a dead one is not
                return bool(self.health.allows(writing=True))
            self.health.failed("PUT", key, failure, "not uploaded (the local cache has it)")
            return False
        return True

    # ------------------------------------------------------------ temp files

    def _temp(self, key: str) -> Path | None:
        """A fresh temp file in the cache dir (named like the local store's, so sweeps find it)."""
        made = self._made_temp(key)
        if made is None:
            return None
        os.close(made[1])
        return made[0]

    def _made_temp(self, key: str) -> tuple[Path, int] | None:
        """`_temp`, left open for writing: a download writes through the descriptor that made it
        (creating a file in a busy cache dir is a restore's dearest system call; once is enough)."""
        try:
            name, fd = self.local.new_temp(key, ".remote.tmp")  # a removed cache dir made again
        except OSError as exc:
            why = RemoteFailure("local store", _local_why(exc))
            self.health.failed("GET", key, why, "skipped")
            return None
        path = Path(name)
        with self._lock:
            self._temps.add(path)
        return path, fd

    def _forget(self, path: Path) -> None:
        with self._lock:
            self._temps.discard(path)
        _unlink(path)
        self._budget.give_back(path)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _local_why(exc: BaseException) -> str:
    if isinstance(exc, EnvironmentFailure):
        return exc.message
    return f"{getattr(exc, 'strerror', None) or type(exc).__name__}"


def wanted_from(
    plans: Mapping[Any, Any],
    skip: Collection[str],
    *,
    early: bool = True,
    later: Collection[Any] = (),
) -> dict[str, Wanted]:
    """The downloads a run wants: each cacheable task's key that the local probe did not hit.

    With `early`, a download is restored as soon as it is proven when no other task of the run
    can touch its outputs: plain outputs (not `exclusiveOutputs: false`), none outside its
    project, and no other task of its project declaring outputs. Another task's wipe, run or
    save then never meets them, whatever order the two take; the task's turn still checks
    they are as restored (the up-to-date check) and restores again if not. Tasks in `later`
    (keyed only at their turn) are wanted then, not now, but their outputs count here."""
    per_project: dict[str, int] = {}
    for plan in plans.values():
        spec = plan.outputs
        if spec is not None and spec.declares_files:
            per_project[spec.project_dir] = per_project.get(spec.project_dir, 0) + 1
    out: dict[str, Wanted] = {}
    for tid, plan in plans.items():
        spec = plan.outputs
        if tid in later:
            continue
        if spec is not None and plan.key not in skip and plan.key not in out:
            alone = (
                early
                and not spec.additive
                and spec.ws_globs is None
                and per_project.get(spec.project_dir) == 1
            )
            out[plan.key] = Wanted(
                str(tid), plan.command or "", spec.allows, spec if alone else None
            )
    return out
