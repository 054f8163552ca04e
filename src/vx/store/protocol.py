"""The face of a cache store as the engine uses it: the local store and the layered store (a
local store with a remote layer) both have it, and so does the memory store of the tests.

A store is typed by its entries (`Store[E]`): the local store's `Entry`, or for the layered store
also a download it restores from a temp file. The hit lane restores the batched probe's hits
from the local layer (`LocalLayer`: a layered store's `local`, or the local store itself), in
worker threads or forked processes that unpack (`extract`) while the index is written on the
main thread (`finish_restore`).
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Protocol,
    Sequence,
    TypeVar,
)

if TYPE_CHECKING:
    from vx.model import LogChunk
    from vx.store.local import KeptSince
    from vx.store.unpacking import Unpacked


class Entry(Protocol):
    """What the engine reads of an entry: its key, and how long the run that saved it took."""

    @property
    def key(self) -> str: ...

    @property
    def duration_ms(self) -> float | None: ...


class LocalEntry(Entry, Protocol):
    """An entry of the local layer: the size of its artifact sizes a batch of restores."""

    @property
    def size_bytes(self) -> int: ...


E = TypeVar("E", bound=Entry)
L = TypeVar("L", bound=LocalEntry)


class Store(Protocol[E]):
    def probe(self, keys: Iterable[str]) -> Mapping[str, E]: ...

    def is_up_to_date(self, entry: E, current: Collection[str]) -> bool: ...

    def log_of(self, entry: E) -> tuple[LogChunk, ...]: ...

    def restore(self, entry: E, allowed: Callable[[str], bool]) -> tuple[LogChunk, ...]: ...

    # The entry of the task the workspace holds exactly, if any: what an incremental tool's
    # state may be kept from (engine/incremental.py).
    def entry_on_disk(self, task_id: str, current: Collection[str]) -> E | None: ...

    # An entry of a task that runs tsc was saved or restored here at `dated_ns`: its outputs stand
    # on what was on disk at `since_ns` or later, but for the outputs of the `upstream` entries.
    # What a kept build info may be dated to (engine/dating.py); `kept_since` reads it back.
    def note_kept(
        self, key: str, since_ns: int, dated_ns: int, upstream: Sequence[str]
    ) -> None: ...

    def kept_since(self, key: str) -> KeptSince | None: ...

    def save(
        self,
        key: str,
        *,
        task_id: str,
        command: str,
        log: Sequence[LogChunk],
        files: Sequence[str],
        duration_ms: float,
        cpu_ms: float | None = None,
        peak_rss_bytes: int | None = None,
    ) -> int: ...

    # `save`, to the local layer only: a result built on kept incremental state is never
    # uploaded (a remote layer gets clean builds).
    def save_local(
        self,
        key: str,
        *,
        task_id: str,
        command: str,
        log: Sequence[LogChunk],
        files: Sequence[str],
        duration_ms: float,
        cpu_ms: float | None = None,
        peak_rss_bytes: int | None = None,
    ) -> int: ...


class LocalLayer(Store[L], Protocol[L]):
    """The layer the run's batched probe answered from, as the hit lane restores its hits."""

    spans: dict[str, list[float]]  # seconds per save and restore, for VX_TIMING

    def logs_of(self, entries: Sequence[L]) -> Mapping[str, tuple[LogChunk, ...]]: ...

    # The file half of `restore`, which never touches the index (a forked worker may run it):
    # what was unpacked, or why the artifact is damaged.
    def extract(self, entry: L, allowed: Callable[[str], bool]) -> Unpacked | str: ...

    # The index half, on the thread that owns the index: the log, or DamagedEntry.
    def finish_restore(
        self, entry: L, extracted: Unpacked | str, seconds: float
    ) -> tuple[LogChunk, ...]: ...
