"""Write one artifact: a tar of the log, the outputs and the meta, closed by the sum and
compressed as one zstd frame, into a temp path the caller renames into place.

Outputs are opened under the symlink and file-type rules and streamed through a
fixed buffer; an output that changes while it is read is refused. `zstandard` is imported
where it is used, never at module top.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import TYPE_CHECKING, BinaryIO, Mapping, Sequence

from msgspec import Struct

from vx import CACHE_VERSION
from vx.model import LogChunk, OutputFile
from vx.store.archive import (
    BLOCK,
    CHUNK,
    LOG_ENTRY,
    META_ENTRY,
    MODE_MASK,
    OUTPUTS,
    SUM_ENTRY,
    USTAR_MAGIC,
    ZERO_BLOCK,
    ArchiveError,
    check_name,
    encode_log,
)
from vx.store.zstd import codec

if TYPE_CHECKING:
    from io import FileIO


class PackInfo(Struct, frozen=True):
    """What `pack` wrote. `stamps` are (path, ino, ctime_ns) of the regular files packed
    (none for symlinked outputs, whose link can never count as current)."""

    size_bytes: int
    files: tuple[OutputFile, ...]
    crc: str
    stamps: tuple[tuple[str, int, int], ...] = ()


OCTAL_LIMIT = 8**11  # sizes at or above this need a pax `size` record


def _octal(value: int, width: int) -> bytes:
    return f"{value:0{width - 1}o}".encode() + b"\0"


def _ustar(name: bytes, size: int, mode: int, mtime: int, typeflag: bytes) -> bytes:
    """Build one 512-byte ustar header with its checksum."""
    h = bytearray(BLOCK)
    h[0 : len(name)] = name
    h[100:108] = _octal(mode & 0o7777, 8)
    h[108:116] = _octal(0, 8)
    h[116:124] = _octal(0, 8)
    h[124:136] = _octal(size, 12)
    h[136:148] = _octal(min(max(mtime, 0), OCTAL_LIMIT - 1), 12)
    h[148:156] = b" " * 8
    h[156:157] = typeflag
    h[257:265] = USTAR_MAGIC
    h[148:156] = f"{sum(h):06o}\0 ".encode()
    return bytes(h)


def _pax_record(key: str, value: str) -> bytes:
    """One `<len> key=value\\n` record; the length counts its own digits."""
    payload = f" {key}={value}\n".encode()
    n = len(payload) + 1
    while len(str(n)) + len(payload) != n:
        n = len(str(n)) + len(payload)
    return str(n).encode() + payload


def _headers(name: str, size: int, mode: int, mtime_s: int) -> bytes:
    """Header block(s) for one regular entry: a pax header first when ustar cannot hold it."""
    raw = name.encode()
    pax = {}
    if len(raw) > 100 or not name.isascii():
        pax["path"] = name
    if size >= OCTAL_LIMIT:
        pax["size"] = str(size)
    if not pax:
        return _ustar(raw, size, mode, mtime_s, b"0")
    body = b"".join(_pax_record(k, v) for k, v in pax.items())
    head = _ustar(b"././@PaxHeader", len(body), 0o644, 0, b"x") + body + bytes(-len(body) % BLOCK)
    placeholder = name.encode("ascii", "replace")[:100]
    return head + _ustar(placeholder, size if size < OCTAL_LIMIT else 0, mode, mtime_s, b"0")


class _TarWriter:
    """Stream entries into `out`, folding each entry's name, NUL and body into the sum."""

    def __init__(self, out: BinaryIO):
        self._out = out
        self._crc = 0

    def add_bytes(self, name: str, body: bytes, mode: int = 0o644) -> None:
        self._begin(name, len(body), mode, 0)
        self._body(body)
        self._out.write(bytes(-len(body) % BLOCK))

    def add_stream(self, name: str, src: FileIO, size: int, mode: int, mtime_s: int) -> None:
        """Copy exactly `size` bytes of `src`; a file that shrank meanwhile is refused."""
        self._begin(name, size, mode, mtime_s)
        view, left = memoryview(bytearray(min(CHUNK, max(size, 1)))), size
        while left:
            n = src.readinto(view[: min(len(view), left)])
            if not n:
                raise ArchiveError(
                    f"output changed while it was being saved: {name[len(OUTPUTS) :]}"
                )
            self._body(view[:n])
            left -= n
        self._out.write(bytes(-size % BLOCK))

    def finish(self) -> str:
        """Write the sum entry and the end-of-archive blocks; return the sum."""
        digest = f"{self._crc:08x}"
        self.add_bytes(SUM_ENTRY, digest.encode())
        self._out.write(ZERO_BLOCK * 2)
        return digest

    def _begin(self, name: str, size: int, mode: int, mtime_s: int) -> None:
        self._out.write(_headers(name, size, mode, mtime_s))
        self._crc = zlib.crc32(name.encode() + b"\0", self._crc)

    def _body(self, data: bytes | memoryview) -> None:
        self._out.write(data)
        self._crc = zlib.crc32(data, self._crc)


class _Source(Struct, frozen=True):
    """An output opened for packing, with the stat that describes what was read."""

    rel: str
    handle: FileIO
    st: os.stat_result
    via_link: bool


def _root_of(rel: str, src: Path) -> Path:
    """Derive the workspace root from (relative, absolute): src is root/rel by contract."""
    depth = len(PurePosixPath(rel).parts)
    if tuple(src.parts[-depth:]) != PurePosixPath(rel).parts:
        raise ValueError(f"output source {src} does not end with its relative path {rel}")
    return src.parents[depth - 1]


def _refuse_link(rel: str, src: Path, real_root: str, outputs: _Outputs) -> None:
    """Refuse a symlinked output whose target is missing, a directory, outside root, or not itself
    one of the artifact's outputs: the save must never copy what the task did not produce
    (a sandboxed task's `dist/leak -> ../../other/secret.txt` would otherwise be cached, and
    restored, as the secret's bytes)."""
    try:
        target = os.stat(src)
    except FileNotFoundError:
        raise ArchiveError(f"refused output {rel}: a dangling symlink") from None
    if stat.S_ISDIR(target.st_mode):
        raise ArchiveError(
            f"refused output {rel}: a symlink to a directory",
            hint="declare the files inside it, or make it a real directory",
        )
    real = os.path.realpath(src)
    if not _within(real, real_root):
        raise ArchiveError(f"refused output {rel}: a symlink pointing outside the workspace")
    if real not in outputs.real():
        raise ArchiveError(
            f"refused output {rel}: a symlink to {os.path.relpath(real, real_root)}, which is not "
            f"one of the task's outputs",
            hint="a saved link is followed only to another output; copy the file instead",
        )


class _Outputs:
    """The real paths of an artifact's outputs, resolved only when it holds a link."""

    def __init__(self, files: Sequence[tuple[str, Path]]):
        self._files = files
        self._real: set[str] | None = None

    def real(self) -> set[str]:
        if self._real is None:
            # where each output itself is (its last component not followed: a link names its own place)
            self._real = {
                os.path.join(os.path.realpath(os.path.dirname(src)), os.path.basename(src))
                for _rel, src in self._files
            }
        return self._real


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _open_output(rel: str, src: Path, real_roots: dict[Path, str], outputs: _Outputs) -> _Source:
    """Open one output for reading after the symlink and file-type rules."""
    check_name(rel)
    root = _root_of(rel, src)
    real_root = real_roots.get(root) or real_roots.setdefault(root, os.path.realpath(root))
    try:
        lst = os.lstat(src)
        via_link = stat.S_ISLNK(lst.st_mode)
        if via_link:
            _refuse_link(rel, src, real_root, outputs)
        elif not _within(os.path.realpath(src), real_root):
            raise ArchiveError(
                f"refused output {rel}: reached through a symlink outside the workspace"
            )
        handle = open(src, "rb", buffering=0)
    except FileNotFoundError:
        raise ArchiveError(f"output vanished before it could be saved: {rel}") from None
    except PermissionError as e:
        raise ArchiveError(f"cannot read output {rel}: {e.strerror}") from None
    st = os.fstat(handle.fileno())
    if not stat.S_ISREG(st.st_mode):
        handle.close()
        raise ArchiveError(f"refused output {rel}: not a regular file")
    return _Source(rel, handle, st, via_link)


def _pack_output(tar: _TarWriter, source: _Source) -> OutputFile:
    """Stream one output into the archive and describe what was stored."""
    st = source.st
    mode = stat.S_IMODE(st.st_mode) & MODE_MASK
    tar.add_stream(OUTPUTS + source.rel, source.handle, st.st_size, mode, st.st_mtime_ns // 10**9)
    after = os.fstat(source.handle.fileno())
    if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise ArchiveError(f"output changed while it was being saved: {source.rel}")
    return OutputFile(source.rel, st.st_size, mode, st.st_mtime_ns // 10**6)


def _meta_json(key: str, files: Sequence[OutputFile], extra: Mapping[str, object]) -> bytes:
    meta = dict(extra)
    meta.update(version=CACHE_VERSION, key=key, files={f.path: [f.mode, f.mtime_ms] for f in files})
    return json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()


def pack(
    dest: Path,
    *,
    key: str,
    log: Sequence[LogChunk],
    files: Sequence[tuple[str, Path]],
    meta: Mapping[str, object] = MappingProxyType({}),
) -> PackInfo:
    """Write the artifact for `key` into `dest` (a temp path the caller renames later).

    `files` are (workspace-relative path, absolute source); the root is derived from them.
    Bodies stream through a fixed buffer, so big outputs never sit in memory.
    """
    zstd = codec()
    real_roots: dict[Path, str] = {}
    stored, stamps = [], []
    with open(dest, "wb") as raw:
        with zstd.ZstdCompressor(level=3, write_checksum=True).stream_writer(
            raw, closefd=False
        ) as z:
            tar = _TarWriter(z)
            tar.add_bytes(LOG_ENTRY, encode_log(log))
            outputs = _Outputs(files)
            for rel, src in dict(files).items():
                source = _open_output(rel, Path(src), real_roots, outputs)
                with source.handle:
                    stored.append(_pack_output(tar, source))
                if not source.via_link:
                    stamps.append((rel, source.st.st_ino, source.st.st_ctime_ns))
            tar.add_bytes(META_ENTRY, _meta_json(key, stored, meta))
            crc = tar.finish()
        size = raw.tell()
    return PackInfo(size, tuple(stored), crc, tuple(stamps))
