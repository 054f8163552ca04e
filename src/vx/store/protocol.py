"""The face of a cache store as the engine uses it: the local store and the layered store (a
local store with a remote layer) both have it, and so does the memory store of the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Protocol, Sequence

if TYPE_CHECKING:
    from vx.model import LogChunk


class Store(Protocol):
    # An entry is whatever probe() returned (or a download the layered store made): opaque here.
    def probe(self, keys: Iterable[str]) -> dict[str, Any]: ...

    def is_up_to_date(self, entry: Any, current: Collection[str]) -> bool: ...

    def log_of(self, entry: Any) -> tuple[LogChunk, ...]: ...

    def restore(self, entry: Any, allowed: Callable[[str], bool]) -> tuple[LogChunk, ...]: ...

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
