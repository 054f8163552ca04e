"""Prove a downloaded artifact before it enters the local store.

Accepted only if: it is vx's container at this CACHE_VERSION and records the key that was
asked for; every output lies within the task's declared outputs (no absolute path, no `..`,
nothing outside the globs); no path is both a file and a directory; the CRC-32 sum holds;
and it stayed under the size bounds while it streamed — compressed at download
(`remoteCache.maxArtifactSize`), decompressed while checking (the archive reader's ceiling),
so a decompression bomb stops at the ceiling instead of filling the disk.

The checks are the archive reader's own (`unpacking.check`, the one `unpack` uses), run once
here on the whole artifact with nothing written, and again at restore.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from vx.store import archive, unpacking
from vx.store.remote import REJECTED, RemoteFailure


def ingest(path: Path | bytes, *, key: str, allowed: Callable[[str], bool]) -> unpacking.Checked:
    """Return what the artifact at `path` (or these bytes) holds, or raise RemoteFailure(REJECTED)
    saying why not."""
    try:
        checked = unpacking.check(path, key=key, allowed=allowed)
    except archive.ArchiveError as exc:
        raise RemoteFailure(REJECTED, exc.message) from None
    clash = file_dir_clash(f.path for f in checked.files)
    if clash:
        raise RemoteFailure(REJECTED, f"{clash} is both a file and a directory in the artifact")
    return checked


def file_dir_clash(paths: Iterable[str]) -> str | None:
    """A path that is a file and also the parent directory of another path, if any."""
    files = set(paths)
    for path in sorted(files):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in files:
                return parent
    return None
