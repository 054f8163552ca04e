"""Test doubles for the seams of a run: the store, the executor and the reporter.

Each keeps to the interface the engine uses (`vx.store.protocol.Store`, `vx.proc.executor.execute`,
`vx.events.Reporter`) and remembers what was asked of it, so a unit test can drive the rebuilder
or the scheduler without spawning a process or opening a cache. `GitHubApi` stands in for
GitHub's check-runs endpoint on loopback.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Mapping, Sequence

from msgspec import Struct

from vx.events import Event
from vx.model import LogChunk, ProcessResult
from vx.store.local import DamagedEntry
from vx.store.unpacking import Unpacked

if TYPE_CHECKING:
    from vx.store.protocol import LocalLayer


class ListReporter:
    """Keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


class MemoryEntry(Struct, frozen=True):
    key: str
    files: Mapping[str, bytes]  # workspace-relative path -> content
    log: tuple[LogChunk, ...]
    duration_ms: float

    @property
    def size_bytes(self) -> int:
        return sum(len(data) for data in self.files.values())


class MemoryStore:
    """A cache in a dict: `save` reads the outputs from disk under `root`, `restore` writes them
    back. `damaged` keys fail to restore, as a damaged artifact does. It is its own local layer
    (`vx.store.protocol.LocalLayer`), so the hit lane can restore from it too."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries: dict[str, MemoryEntry] = {}
        self.damaged: set[str] = set()
        self.saved: list[str] = []
        self.restored: list[str] = []
        self.kept: dict[str, tuple[int, int, tuple[str, ...]]] = {}  # note_kept's notes
        self.spans: dict[str, list[float]] = {"save": [], "restore": []}

    def probe(self, keys: Iterable[str]) -> dict[str, MemoryEntry]:
        return {k: self.entries[k] for k in keys if k in self.entries}

    def is_up_to_date(self, entry: MemoryEntry, current: Collection[str]) -> bool:
        if set(current) != set(entry.files):
            return False
        return all((self.root / path).read_bytes() == data for path, data in entry.files.items())

    def log_of(self, entry: MemoryEntry) -> tuple[LogChunk, ...]:
        return entry.log

    def logs_of(self, entries: Sequence[MemoryEntry]) -> dict[str, tuple[LogChunk, ...]]:
        return {e.key: e.log for e in entries}

    def restore(self, entry: MemoryEntry, allowed: Callable[[str], bool]) -> tuple[LogChunk, ...]:
        return self.finish_restore(entry, self.extract(entry, allowed), 0.0)

    def extract(self, entry: MemoryEntry, allowed: Callable[[str], bool]) -> Unpacked | str:
        if entry.key in self.damaged:
            return "damaged in memory"
        for path, data in entry.files.items():
            assert allowed(path), path
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_bytes(data)
        return Unpacked(entry.log, ())

    def finish_restore(
        self, entry: MemoryEntry, extracted: Unpacked | str, seconds: float
    ) -> tuple[LogChunk, ...]:
        if isinstance(extracted, str):
            raise DamagedEntry(extracted)
        self.restored.append(entry.key)
        self.spans["restore"].append(seconds)
        return extracted.log

    def entry_on_disk(self, task_id: str, current: Collection[str]) -> MemoryEntry | None:
        return None  # nothing is kept for an incremental tool here

    def note_kept(self, key: str, since_ns: int, dated_ns: int, upstream: Sequence[str]) -> None:
        self.kept[key] = (since_ns, dated_ns, tuple(upstream))

    def kept_since(self, key: str) -> None:
        return None  # nothing is kept here, so nothing is dated

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
    ) -> int:
        data = {path: (self.root / path).read_bytes() for path in files}
        self.entries[key] = MemoryEntry(key, data, tuple(log), duration_ms)
        self.saved.append(key)
        return sum(len(v) for v in data.values())

    save_local = save  # no other layer


if TYPE_CHECKING:  # `mypy tests/fakes.py` holds the fake to the face it stands in for

    def _face(store: MemoryStore) -> LocalLayer[MemoryEntry]:
        return store


# What a scripted command does when it "runs": writes files (relative to its cwd) and ends so.
Script = Callable[[Path], int]


class ScriptedExecutor:
    """`vx.proc.executor.execute`'s stand-in: each command is looked up in `scripts`, which may write
    files into the task's directory and returns its exit code; nothing is spawned."""

    def __init__(self, scripts: Mapping[str, Script]) -> None:
        self.scripts = scripts
        self.ran: list[tuple[str, Path]] = []

    async def __call__(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout_ms: int | None,
        on_output: Callable[[LogChunk], None],
        **_: object,
    ) -> ProcessResult:
        self.ran.append((command, cwd))
        code = self.scripts[command](cwd)
        chunk = LogChunk(1, f"ran {command}\n".encode())
        on_output(chunk)
        return ProcessResult(exit_code=code, duration_ms=1.0, log=(chunk,))


def writes(files: Mapping[str, str], code: int = 0) -> Script:
    """A script that writes `files` (relative to the task's directory) and exits with `code`."""

    def script(cwd: Path) -> int:
        for rel, text in files.items():
            os.makedirs((cwd / rel).parent, exist_ok=True)
            (cwd / rel).write_text(text)
        return code

    return script


class GitHubApi:
    """A loopback stand-in for the check-runs endpoint: answers each POST with the next status
    of `statuses` (201 once they run out) and keeps every request it was sent."""

    def __init__(self, statuses=()):
        self.statuses, self.requests = list(statuses), []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers["Content-Length"])
                api.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                status = api.statuses.pop(0) if api.statuses else 201
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"id": 1}' if status == 201 else b'{"message": "no"}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v3"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
