"""The cache artifact's container: a ustar/pax tar of vx's own inside one zstd frame.

Entries, in order: `log` (the ordered stdout/stderr chunks),
`outputs/<workspace-relative path>` per output file, `.vx-meta.json`, and `.vx-sum`, the
CRC-32 of every earlier entry's name, NUL and body, which must be last.

Both directions are written by hand (`packing` writes, `unpacking` reads) rather than with
`tarfile` because the reader is the security boundary of the cache: artifacts may come from
a remote, so every name, size and header is checked, nothing but regular files is
materialised, and nothing is kept in the workspace unless the whole archive has proven itself:
a refused one leaves the workspace as the restore's wipe left it.

This module holds what both directions share: the entry names and block constants,
`ArchiveError`, the log framing and the name rule. It imports no records (msgspec, `vx.model`):
a replay restoring outputs loads it before anything heavy (docs/optimizations.md #22).
"""

from __future__ import annotations

from vx.errors import VxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable

    from vx.model import LogChunk

BLOCK = 512
CHUNK = 1 << 20  # body copy buffer: big files stream through this, never held whole

LOG_ENTRY = "log"
META_ENTRY = ".vx-meta.json"
SUM_ENTRY = ".vx-sum"
OUTPUTS = "outputs/"

ZERO_BLOCK = bytes(BLOCK)
USTAR_MAGIC = b"ustar\x0000"
_FRAME = 5  # a log frame's header: stream (1 byte), length (4, big-endian); no `struct` to import
NAME_MAX, PATH_MAX = 255, 4096  # Linux's limits: a name, and a whole path with its NUL
MODE_MASK = 0o777  # never restore setuid/setgid/sticky bits from an artifact


class ArchiveError(VxError):
    """An artifact or an output was refused; the message says why and names the path."""

    code = "VX_E_REFUSED"


# ---------------------------------------------------------------- log framing


def encode_log(log: Iterable[LogChunk]) -> bytes:
    """Frame the chunks as [stream:1][length:4 BE][data], so order and streams survive."""
    return b"".join(bytes((c.stream,)) + len(c.data).to_bytes(4, "big") + c.data for c in log)


def decode_log(data: bytes) -> tuple[LogChunk, ...]:
    """Framed log bytes back as chunks; a malformed frame is a damaged artifact."""
    from vx.model import LogChunk

    return tuple(LogChunk(stream, body) for stream, body in split_log(data))


def split_log(data: bytes) -> tuple[tuple[int, bytes], ...]:
    """Split framed log bytes into (stream, bytes) pairs; a malformed frame is a damaged artifact."""
    chunks, pos, view = [], 0, memoryview(data)
    while pos < len(data):
        if pos + _FRAME > len(data):
            raise ArchiveError("malformed log entry: a frame header is cut short")
        stream, size = data[pos], int.from_bytes(data[pos + 1 : pos + _FRAME], "big")
        pos += _FRAME
        if stream not in (1, 2) or pos + size > len(data):
            raise ArchiveError("malformed log entry: bad stream or length")
        chunks.append((stream, bytes(view[pos : pos + size])))
        pos += size
    return tuple(chunks)


# ---------------------------------------------------------------- names


def check_name(rel: str) -> str:
    """Return `rel` if it is a clean workspace-relative POSIX path, else refuse it.

    The same rule guards both directions: what we would never extract, we never pack.
    """
    if not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel:
        raise ArchiveError(
            f"refused entry name {rel!r}: absolute, empty, or has a backslash or NUL"
        )
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ArchiveError(f"refused entry name {rel!r}: empty, `.` or `..` component")
    if len(rel.encode()) >= PATH_MAX or any(len(p.encode()) > NAME_MAX for p in parts):
        raise ArchiveError(
            f"refused entry name {rel[:80]!r}…: longer than a file system holds "
            f"({NAME_MAX} bytes a name, {PATH_MAX} a path)"
        )
    return rel
