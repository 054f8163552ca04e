"""Read one artifact back: validate everything before it counts, all or nothing.

The zstd frame must fill the file exactly; every header, pax record, name and size is
checked and every byte is counted against the decompressed ceiling; only regular files
under the task's declared outputs are written, and a refused artifact leaves the workspace
as it was. `check` runs the same reader with nothing written.

The reader works on plain values (`unpack_plain`): it imports no records, no `pathlib`, no
`typing`, and the codec without the zstandard package's `__init__`, so a replay restoring
outputs loads little to read one (docs/optimizations.md #22). `unpack` and
`check` build the pipeline's records from what it returns.
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from _thread import _local

from vx import CACHE_VERSION
from vx.errors import EnvironmentFailure
from vx.store.archive import (
    BLOCK,
    CHUNK,
    LOG_ENTRY,
    META_ENTRY,
    MODE_MASK,
    OUTPUTS,
    PATH_MAX,
    SUM_ENTRY,
    USTAR_MAGIC,
    ZERO_BLOCK,
    ArchiveError,
    check_name,
    split_log,
)
from vx.store.zstd import codec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, BinaryIO, Callable, Mapping, NoReturn, Sequence

    from vx.model import LogChunk, OutputFile

    Frame = tuple[int, bytes]  # (stream, bytes) of one log chunk
    File = tuple[str, int, int, int]  # (path, size, mode, mtime_ms) of one output

PAX_CAP = 1 << 20  # a pax header over 1 MiB is refused
MAX_UNPACKED = 2 << 30  # the decompressed ceiling, counted while streaming
IN_MEMORY_CAP = 64 << 20  # the log and meta entries are read whole; bound them

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class Unpacked:
    """What `unpack` restored: the task's log and its output records."""

    __slots__ = ("log", "files")

    def __init__(self, log: tuple[LogChunk, ...], files: tuple[OutputFile, ...]):
        self.log, self.files = log, files


def _frame_end(read_at: Callable[[int, int], bytes]) -> int:
    """Walk the zstd frame's block headers to find where the frame ends; `read_at(n, pos)`
    reads the artifact's bytes.

    The decompressor stops at the frame end without telling us what follows, so this is
    how truncation and trailing bytes are caught before anything is decoded.
    """
    zstd = codec()
    head = read_at(18, 0)
    if head[:4] != _ZSTD_MAGIC:
        raise ArchiveError("not a zstd artifact (bad magic)")
    try:
        pos = zstd.frame_header_size(head)
    except zstd.ZstdError:
        raise ArchiveError("truncated artifact: the zstd frame header is cut short") from None
    while True:
        block = read_at(3, pos)
        if len(block) < 3:
            raise ArchiveError("truncated artifact: the zstd frame ends early")
        value = int.from_bytes(block, "little")
        kind, size = (value >> 1) & 3, value >> 3
        if kind == 3:
            raise ArchiveError("corrupt artifact: reserved zstd block type")
        pos += 3 + (1 if kind == 1 else size)
        if value & 1:
            return pos + (4 if head[4] & 0x04 else 0)


class _Inflow:
    """Exact reads from the decompressed stream, counted against MAX_UNPACKED."""

    def __init__(self, reader: BinaryIO):
        self._reader = reader
        self._error = codec().ZstdError
        self.total = 0
        self.crc = 0  # running CRC-32 over entry names, NULs and bodies

    def body(self, n: int) -> bytes:
        """Read entry body bytes, folding them into the running sum."""
        data = self.read(n)
        self.crc = zlib.crc32(data, self.crc)
        return data

    def reserve(self, n: int, what: str) -> None:
        if self.total + n > MAX_UNPACKED:
            raise ArchiveError(
                f"artifact too large: {what} goes past the {MAX_UNPACKED} byte ceiling"
            )

    def read(self, n: int) -> bytes:
        if self.total + n > MAX_UNPACKED:
            self.reserve(n, "the decompressed stream")
        data = self._read_some(n)
        while len(data) < n:
            more = self._read_some(n - len(data))
            if not more:
                raise ArchiveError("truncated artifact: the tar stream ends early")
            data += more
        self.total += n
        return data

    def rest_is_zero(self) -> bool:
        """Consume what follows the end-of-archive blocks; only zero padding may follow."""
        while chunk := self._read_some(CHUNK):
            self.total += len(chunk)
            self.reserve(0, "padding")
            if chunk.count(0) != len(chunk):
                return False
        return True

    def _read_some(self, n: int) -> bytes:
        try:
            return self._reader.read(n)
        except self._error as e:
            raise ArchiveError(f"corrupt artifact: {e}") from None


def _number(field: bytes, what: str) -> int:
    digits = field.rstrip(b"\0 ").lstrip(b" ")
    if digits.translate(None, b"01234567"):  # anything left is not an octal digit
        raise ArchiveError(f"corrupt tar header: {what} is not octal")
    return int(digits or b"0", 8)


def _header_sum(block: bytes) -> int:
    """The ustar checksum of a 512-byte header: the sum of its bytes, the checksum field counted
    as eight spaces — `sum(block[:148]) + 8 * 0x20 + sum(block[156:])`, the same number.

    Summed in C: Adler-32's first half started at 0 is the byte sum modulo 65521, exact for
    up to 257 bytes (257 * 255 < 65521), so three slices of at most 256 bytes give the sum
    itself. `sum()` over bytes made a Python int per byte: a tenth of a small artifact's
    extraction (docs/benchmarks.md, "Restore at 100: the tar header's sum")."""
    view = memoryview(block)
    return (
        (zlib.adler32(view[:148], 0) & 0xFFFF)
        + 8 * 0x20
        + (zlib.adler32(view[156:412], 0) & 0xFFFF)
        + (zlib.adler32(view[412:], 0) & 0xFFFF)
    )


def _parse_header(block: bytes) -> tuple[bytes, int, bytes, int]:
    """Check one ustar header; return (raw name, size, typeflag, mode)."""
    if block[257:265] != USTAR_MAGIC:
        raise ArchiveError("corrupt artifact: not a ustar header")
    stored = _number(block[148:156], "checksum")
    if stored != _header_sum(block):
        raise ArchiveError("corrupt artifact: tar header checksum mismatch")
    name, prefix = block[:100].split(b"\0", 1)[0], block[345:500].split(b"\0", 1)[0]
    return (
        (prefix + b"/" + name if prefix else name),
        _number(block[124:136], "size"),
        block[156:157],
        _number(block[100:108], "mode"),
    )


def _parse_pax(body: bytes) -> dict[str, str]:
    """Parse `<len> key=value\\n` records; anything malformed refuses the archive."""
    records, pos = {}, 0
    try:
        while pos < len(body):
            length = int(body[pos : body.index(b" ", pos)])
            record = body[pos : pos + length]
            if length <= 0 or not record.endswith(b"\n"):
                raise ValueError
            key, value = record[record.index(b" ") + 1 : -1].split(b"=", 1)
            records[key.decode()] = value.decode()
            pos += length
    except ValueError:  # includes UnicodeDecodeError
        raise ArchiveError("corrupt artifact: malformed pax header") from None
    return records


def _pax_size(value: str) -> int:
    if not value.isascii() or not value.isdigit():
        raise ArchiveError(f"corrupt artifact: pax size {value!r} is not a non-negative integer")
    return int(value)


def _next_entry(inflow: _Inflow) -> tuple[str, int, int] | None:
    """Read headers up to the next regular entry as (name, size, header mode); None at the end."""
    pax: dict[str, str] = {}
    while True:
        block = inflow.read(BLOCK)
        if block == ZERO_BLOCK:
            if pax:
                raise ArchiveError("corrupt artifact: a pax header with no entry")
            return None
        raw_name, size, typeflag, mode = _parse_header(block)
        if typeflag == b"x":
            if size > PAX_CAP:
                raise ArchiveError(f"refused artifact: pax header of {size} bytes is over 1 MiB")
            pax.update(_parse_pax(_read_body(inflow, size, summed=False)))
            continue
        if typeflag not in (b"0", b"\0"):
            raise ArchiveError(
                f"refused artifact: non-regular entry {raw_name!r} (type {typeflag!r})"
            )
        return _entry_name(raw_name, pax), _pax_size(pax["size"]) if "size" in pax else size, mode


def _entry_name(raw: bytes, pax: Mapping[str, str]) -> str:
    if "path" in pax:
        return pax["path"]
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ArchiveError(f"refused entry name {raw!r}: not UTF-8") from None


def _read_body(inflow: _Inflow, size: int, *, summed: bool = True) -> bytes:
    body = inflow.body(size) if summed else inflow.read(size)
    inflow.read(-size % BLOCK)
    return body


def _temp_name() -> str:
    return f".vx-restore-{os.urandom(6).hex()}"  # what secrets.token_hex does, without its imports


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CANNOT_HOLD = frozenset(
    (errno.ENAMETOOLONG, errno.EILSEQ, errno.EINVAL, errno.EFBIG, errno.EOVERFLOW)
)


class Dirs:
    """Open directory descriptors by workspace-relative path ("" is the root), so every write of a
    restore is made relative to a directory that was opened without following a link.

    Why descriptors, not path strings: a directory swapped for a symlink between a check and a
    write (a racing `renameat2` exchange) would redirect a path-string write outside the
    workspace; a write through an open descriptor lands in the directory that was checked,
    wherever it has been moved. Each component is opened `O_NOFOLLOW|O_DIRECTORY` relative to
    its parent's descriptor. A caller restoring many artifacts shares one (parents they share
    are opened once); at most `LIMIT` stay open, then all but the root are closed and reopened
    on demand (the same checked walk): restore threads each hold one, under `ulimit -n` 1024."""

    LIMIT = 64

    def __init__(self, root: str):
        self.root = root
        self._fds: dict[str, int] = {"": os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)}

    def fd(self, rel: str, made: list[tuple[str, str]] | None, entry: str) -> int:
        """The descriptor of directory `rel`, opening (and, with `made`, creating) each component."""
        fd = self._fds.get(rel)
        if fd is not None:
            return fd
        if len(self._fds) > self.LIMIT:
            self._shed()
        parent, _, name = rel.rpartition("/")
        pfd = self.fd(parent, made, entry)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except FileNotFoundError as e:
            if made is None:  # gone since it was made: the workspace changed under the restore
                _refused_by_machine(entry, os.path.join(self.root, rel), e)
            try:
                os.mkdir(name, 0o777, dir_fd=pfd)
            except FileExistsError:
                pass  # made meanwhile: the open below checks what it is
            except OSError as e:
                _refused_by_machine(entry, os.path.join(self.root, rel), e)
            else:
                made.append((parent, name))
            fd = self._open_dir(pfd, name, rel, entry)
        except OSError:
            fd = self._open_dir(pfd, name, rel, entry)
        self._fds[rel] = fd
        return fd

    def _open_dir(self, pfd: int, name: str, rel: str, entry: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    link = stat.S_ISLNK(os.stat(name, dir_fd=pfd, follow_symlinks=False).st_mode)
                except OSError:
                    link = False
                if link:
                    raise ArchiveError(
                        f"refused entry {entry}: parent {rel} is a symlink",
                        hint="a restore never writes through a link; remove the link and run again",
                    ) from None
                raise ArchiveError(f"refused entry {entry}: {rel} is not a directory") from None
            _refused_by_machine(entry, os.path.join(self.root, rel), e)

    def forget(self, rel: str) -> None:
        fd = self._fds.pop(rel, None)
        if fd is not None:
            os.close(fd)

    def _shed(self) -> None:
        for rel in [r for r in self._fds if r]:
            self.forget(rel)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


class _Extraction:
    """The first pass: bodies land where nothing is, or in temp siblings; `commit` renames, `abandon` erases.

    A restore runs after its outputs were wiped, so most entries have nothing at their
    final path: those are written in place (no temp, no rename: half the file-system work on
    a big restore). An entry whose path is taken is written to a temp sibling and renamed over
    it at commit. Either way `abandon` removes every file this extraction created, and the
    directories it made, so a refused archive leaves the workspace as it was. Every call is
    relative to a directory descriptor (`Dirs`): nothing is ever written through a link.
    """

    def __init__(self, root: str, dirs: Dirs | None = None):
        self.root = root
        self._root_bytes = len(root.encode())
        self.temps: dict[
            str, tuple[str, str]
        ] = {}  # rel -> (its dir, the name written: final or a temp)
        self.sizes: dict[str, int] = {}
        self.modes: dict[str, int] = {}  # the mode applied while writing (the header's)
        self.dirs = dirs if dirs is not None else Dirs(root)
        self._own_dirs = dirs is None
        self._dirs_made: list[tuple[str, str]] = []

    def write(self, rel: str, inflow: _Inflow, size: int, mode: int = 0o644) -> None:
        """Stream one output body into place, or beside a file that is in the way."""
        if (
            self._root_bytes + len(rel.encode()) + 2 > PATH_MAX
        ):  # restorable by descriptor, but no tool could open it
            raise ArchiveError(
                f"refused entry {rel[:80]}…: its path in this workspace is longer than {PATH_MAX} bytes"
            )
        parent, _, name = rel.rpartition("/")
        dfd = self.dirs.fd(parent, self._dirs_made, rel)
        inflow.reserve(size, f"entry {rel}")
        fd, written = self._create(rel, dfd, name)
        self.temps[rel], self.sizes[rel] = (parent, written), size
        try:
            left = size
            while left:
                data = memoryview(inflow.body(min(CHUNK, left)))
                left -= len(data)
                while data:
                    data = data[self._guarded(rel, os.write, fd, data) :]
            self.modes[rel] = mode & MODE_MASK
            self._guarded(rel, os.fchmod, fd, mode & MODE_MASK)
        finally:
            os.close(fd)
        inflow.read(-size % BLOCK)

    def _create(self, rel: str, dfd: int, name: str) -> tuple[int, str]:
        """A new file `name` in the directory, or beside whatever is there (a temp sibling renamed
        over it at commit); a directory in the way is refused. O_EXCL|O_NOFOLLOW: never an existing
        file, never through a link. Creating first, looking only when that fails, is one system
        call for the usual case — outputs wiped before a restore."""
        try:
            return os.open(name, _NEW_FILE, 0o600, dir_fd=dfd), name
        except FileExistsError:
            pass
        except OSError as e:
            self._refused_by_machine(rel, e)
        try:
            in_way = stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            in_way = False
        if in_way:
            raise ArchiveError(f"refused entry {rel}: a directory is in the way")
        temp = _temp_name()
        return self._guarded(rel, os.open, temp, _NEW_FILE, 0o600, dir_fd=dfd), temp

    def commit(self, files: Sequence[File]) -> None:
        """Apply mode and mtime to each file, then rename the temps into place."""
        dirs = self.dirs
        for rel, _size, mode, mtime_ms in files:
            parent, written = self.temps[rel]
            dfd, ns = dirs.fd(parent, None, rel), mtime_ms * 10**6
            if self.modes.get(rel) != mode:  # the meta overrides the header: rare, by descriptor
                fd = self._guarded(
                    rel, os.open, written, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
                )
                try:
                    self._guarded(rel, os.fchmod, fd, mode & MODE_MASK)
                finally:
                    os.close(fd)
            self._guarded(rel, os.utime, written, ns=(ns, ns), dir_fd=dfd, follow_symlinks=False)
        for rel, *_ in files:
            parent, written = self.temps.pop(rel)
            name = rel.rpartition("/")[2]
            if written != name:
                dfd = dirs.fd(parent, None, rel)
                self._guarded(rel, os.replace, written, name, src_dir_fd=dfd, dst_dir_fd=dfd)

    def abandon(self) -> None:
        """Remove every temp and every directory this extraction created."""
        for parent, written in self.temps.values():
            try:
                os.unlink(written, dir_fd=self.dirs.fd(parent, None, written))
            except (OSError, ArchiveError, EnvironmentFailure):
                pass
        for parent, name in reversed(self._dirs_made):
            self.dirs.forget(f"{parent}/{name}" if parent else name)
            try:
                os.rmdir(name, dir_fd=self.dirs.fd(parent, None, name))
            except (OSError, ArchiveError, EnvironmentFailure):
                pass

    def close(self) -> None:
        if self._own_dirs:
            self.dirs.close()

    def _guarded(self, rel: str, fn: Callable, *args, **kwargs):
        """Run a workspace write; the machine refusing it is an environment failure, not damage."""
        try:
            return fn(*args, **kwargs)
        except OSError as e:
            self._refused_by_machine(rel, e)

    def _refused_by_machine(self, rel: str, e: OSError) -> NoReturn:
        _refused_by_machine(rel, os.path.join(self.root, rel), e)


def _refused_by_machine(rel: str, path: str, e: OSError) -> NoReturn:
    """A write the workspace refused: a name or size the file system cannot hold is the artifact's
    fault (damaged: a miss, the run goes on); anything else — a full disk, permissions — is the
    machine's, and fails the task that restores."""
    if e.errno in _CANNOT_HOLD:
        raise ArchiveError(
            f"refused entry {rel}: the file system cannot hold it ({e.strerror})"
        ) from None
    raise EnvironmentFailure(
        f"cannot restore {rel}: {e.strerror}", facts=(f"path: {path}",)
    ) from None


class _Read:
    """Everything the first pass learned, checked by `_verify` before any rename."""

    __slots__ = ("log", "meta", "sum_ok")

    def __init__(self) -> None:
        self.log: tuple[Frame, ...] = ()
        self.meta: dict | None = None
        self.sum_ok = False


def _read_entries(
    inflow: _Inflow, extraction: _Extraction, allowed: Callable[[str], bool]
) -> _Read:
    """Walk the archive once: stream outputs into temps, keep log and meta, check the sum."""
    seen: set[str] = set()
    found = _Read()
    while (entry := _next_entry(inflow)) is not None:
        name, size, mode = entry
        if name in seen:
            raise ArchiveError(f"refused artifact: duplicate entry {name!r}")
        seen.add(name)
        if name == SUM_ENTRY:
            _check_sum(inflow, size)
            found.sum_ok = True
            break
        inflow.crc = zlib.crc32(name.encode() + b"\0", inflow.crc)
        _read_one(name, size, mode, inflow, extraction, allowed, found)
    if not found.sum_ok:
        raise ArchiveError("damaged artifact: the checksum entry is missing")
    if not inflow.rest_is_zero():
        raise ArchiveError("refused artifact: data after the end of the archive")
    return found


def _check_sum(inflow: _Inflow, size: int) -> None:
    """Compare the sum entry with what was read; nothing but the end may follow it."""
    expected = f"{inflow.crc:08x}".encode()
    if size != len(expected) or _read_body(inflow, size, summed=False) != expected:
        raise ArchiveError("damaged artifact: checksum mismatch")
    if _next_entry(inflow) is not None:
        raise ArchiveError("refused artifact: an entry follows the checksum")


def _read_one(
    name: str,
    size: int,
    mode: int,
    inflow: _Inflow,
    extraction: _Extraction,
    allowed: Callable[[str], bool],
    found: _Read,
) -> None:
    """Handle one entry before the sum: an output to a temp file, or the log, or the meta."""
    if name.startswith(OUTPUTS):
        rel = check_name(name[len(OUTPUTS) :])
        if not allowed(rel):
            raise ArchiveError(f"refused entry {rel}: not a declared output of this task")
        extraction.write(rel, inflow, size, mode)
        return
    if name not in (LOG_ENTRY, META_ENTRY):
        raise ArchiveError(f"refused artifact: unexpected entry {name!r}")
    if size > IN_MEMORY_CAP:
        raise ArchiveError(f"refused artifact: {name} entry of {size} bytes is too large")
    body = _read_body(inflow, size)
    if name == LOG_ENTRY:
        found.log = split_log(body)
    else:
        found.meta = _load_meta(body)


def _load_meta(body: bytes) -> dict:
    try:
        meta = _json_value(body.decode("utf-8"))
    except (ValueError, StopIteration, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ArchiveError("damaged artifact: .vx-meta.json is not JSON") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("files"), dict):
        raise ArchiveError("damaged artifact: .vx-meta.json lacks a files map")
    return meta


class _JsonSettings:
    """What `json.loads` hands its C scanner by default (json.decoder.JSONDecoder's settings)."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = {
        "-Infinity": float("-inf"),
        "Infinity": float("inf"),
        "NaN": float("nan"),
    }.__getitem__


_JSON_SPACE = " \t\n\r"  # JSON's whitespace, exactly what json.decoder skips around a value
_scan_json: Callable[[str, int], tuple[Any, int]] | None = None


def _json_value(text: str):
    """`json.loads(text)` through the C scanner `json.loads` itself uses (`_json`), without
    `json.decoder`, whose regexes cost a replay `re` (docs/optimizations.md #22). Raises
    ValueError or StopIteration (no value) like the scanner does; falls back to `json.loads`
    where `_json` is missing."""
    global _scan_json
    if _scan_json is None:
        try:
            from _json import make_scanner

            _scan_json = make_scanner(_JsonSettings)  # type: ignore[arg-type]  # the scanner reads these class attributes
        except ImportError:
            from json import loads

            _scan_json = lambda text, _at: (loads(text), len(text))  # noqa: E731
    text = text.strip(_JSON_SPACE)
    value, end = _scan_json(text, 0)
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


_MTIME_MS_LIMIT = (2**63 - 1) // 10**6  # beyond this the ns timestamp overflows


def _recorded(rel: str, size: int, spec: Any) -> File:
    """One meta `files` row as (path, size, mode, mtime_ms), refusing values a filesystem cannot take."""
    ok = isinstance(spec, list) and len(spec) == 2 and all(type(v) is int for v in spec)
    if not ok or not 0 <= spec[0] <= 0o7777 or abs(spec[1]) > _MTIME_MS_LIMIT:
        raise ArchiveError(f"damaged artifact: bad mode/mtime for {rel} in .vx-meta.json")
    return rel, size, spec[0] & MODE_MASK, spec[1]


def _verify(found: _Read, extraction: _Extraction, key: str) -> tuple[File, ...]:
    """Check the meta against the key and against the outputs actually present."""
    meta = found.meta
    if meta is None:
        raise ArchiveError("damaged artifact: .vx-meta.json is missing")
    if meta.get("version") != CACHE_VERSION:
        raise ArchiveError(
            f"refused artifact: container version {meta.get('version')!r} is not {CACHE_VERSION}"
        )
    if meta.get("key") != key:
        raise ArchiveError(f"refused artifact: it records key {meta.get('key')!r}, not {key}")
    recorded = meta["files"]
    if set(recorded) != set(extraction.sizes):
        missing = sorted(set(recorded) ^ set(extraction.sizes))
        raise ArchiveError(
            f"damaged artifact: outputs and meta disagree on {', '.join(missing[:3])}"
        )
    return tuple(_recorded(rel, size, recorded[rel]) for rel, size in extraction.sizes.items())


WHOLE_READ = 1 << 20  # an artifact up to this size is read in one system call, not streamed


def _frame_reader(fd: int):
    """A streaming reader over the one zstd frame that must fill the file exactly (no tail, no
    cut). A small artifact is read whole first: one `read` instead of a buffered file's
    `ioctl`, `lseek` and the frame walk's `pread`s (a restore of many small outputs is mostly
    system calls)."""
    size = os.fstat(fd).st_size
    if size <= WHOLE_READ:
        whole = os.read(fd, size + 1)
        while (
            0 < len(whole) < size
        ):  # a regular file reads short only at its end, or cut by a signal
            if not (more := os.read(fd, size + 1 - len(whole))):
                break
            whole += more
        return _whole_reader(whole)
    source, end = open(fd, "rb", closefd=False), _frame_end(lambda n, pos: os.pread(fd, n, pos))
    return _checked_reader(source, end, size)


def _whole_reader(whole: bytes):
    """`_frame_reader` over an artifact already in memory."""
    return _checked_reader(whole, _frame_end(lambda n, pos: whole[pos : pos + n]), len(whole))


def _checked_reader(source: bytes | BinaryIO, end: int, size: int):
    if end != size:
        raise ArchiveError(
            "truncated artifact"
            if end > size
            else "refused artifact: trailing data after the zstd frame"
        )
    return _decompressor().stream_reader(source, read_across_frames=False, closefd=False)


_per_thread = _local()


def _decompressor():
    """This thread's decompressor, made once: making one per artifact allocates and frees its
    context each time, most of what decoding a small artifact costs. Each reader starts a fresh
    session on it; no thread reads two artifacts at once (every reader here is read to its end,
    or dropped, before the next is made)."""
    found = getattr(_per_thread, "zstd", None)
    if found is None:
        found = _per_thread.zstd = codec().ZstdDecompressor()
    return found


def unpack_plain(
    src: str, *, key: str, allowed: Callable[[str], bool], root: str, dirs: Dirs | None = None
) -> tuple[tuple[Frame, ...], tuple[File, ...]]:
    """Validate the artifact at `src` and extract its outputs under `root`, all or nothing; return
    its log as (stream, bytes) frames and its outputs as (path, size, mode, mtime_ms). `dirs`, when
    given, is a `Dirs` of `root` shared by a caller restoring many artifacts (the parents they
    share are opened once); the caller closes it.

    Raises ArchiveError when the artifact or a name is refused (whatever it wrote is removed again),
    EnvironmentFailure when the workspace refuses a write, OSError when `src` is unreadable.
    """
    found, files, _crc = _extract(src, key, allowed, root, dirs)
    return found.log, files


def _extract(
    src: str | bytes, key: str, allowed: Callable[[str], bool], root: str, dirs: Dirs | None
) -> tuple[_Read, tuple[File, ...], int]:
    """The one pass of `unpack_plain`: what it read, the outputs it wrote, and the sum. `src` is
    a path, or the artifact's bytes."""
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC) if isinstance(src, str) else -1
    try:
        inflow = _Inflow(_whole_reader(src) if isinstance(src, bytes) else _frame_reader(fd))
        extraction = _Extraction(root, dirs)
        try:
            found = _read_entries(inflow, extraction, allowed)
            files = _verify(found, extraction, key)
            extraction.commit(files)
        except BaseException:
            extraction.abandon()
            raise
        finally:
            extraction.close()
    finally:
        if fd >= 0:
            os.close(fd)
    return found, files, inflow.crc


def read_outputs(src: Path, wanted: set[str]) -> dict[str, bytes]:
    """The bytes of the `wanted` outputs (workspace-relative paths) an artifact holds, nothing
    written: what a miss compares a touched output with (`LocalStore.entry_on_disk`)."""
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        inflow = _Inflow(_frame_reader(fd))
        found: dict[str, bytes] = {}
        while len(found) < len(wanted) and (member := _next_entry(inflow)) is not None:
            name, size, _mode = member
            body = _read_body(inflow, size, summed=False)
            path = name[len(OUTPUTS) :] if name.startswith(OUTPUTS) else None
            if path in wanted:
                found[path] = body
        return found
    finally:
        os.close(fd)


def unpack(src: Path, *, key: str, allowed: Callable[[str], bool], root: Path) -> Unpacked:
    """`unpack_plain`, with the pipeline's records: LogChunk and OutputFile."""
    log, files = unpack_plain(str(src), key=key, allowed=allowed, root=str(root))
    return Unpacked(*_records(log, files))


def _records(
    log: tuple[Frame, ...], files: tuple[File, ...]
) -> tuple[tuple[LogChunk, ...], tuple[OutputFile, ...]]:
    from vx.model import LogChunk, OutputFile

    return tuple(LogChunk(*frame) for frame in log), tuple(OutputFile(*f) for f in files)


# ---------------------------------------------------------------- checking without extracting


class Checked:
    """What `check` proved about an artifact: its outputs, log, meta and sum, nothing written."""

    __slots__ = ("files", "log", "meta", "crc")

    def __init__(
        self,
        files: tuple[OutputFile, ...],
        log: tuple[LogChunk, ...],
        meta: Mapping[str, object],
        crc: str,
    ):
        self.files, self.log, self.meta, self.crc = files, log, meta, crc


class _Tally:
    """A stand-in for `_Extraction` that folds each body into the sum and writes nothing."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}

    def write(self, rel: str, inflow: _Inflow, size: int, mode: int = 0) -> None:
        self.sizes[rel] = size
        inflow.reserve(size, f"entry {rel}")
        left = size
        while left:
            left -= len(inflow.body(min(CHUNK, left)))
        inflow.read(-size % BLOCK)


def unpack_checked(
    src: Path | bytes, *, key: str, allowed: Callable[[str], bool], root: Path
) -> Checked:
    """`unpack` that also returns what `check` proves (the meta and the sum), from the same pass.

    Why: a downloaded artifact restored at once is read, checked and written in one decode;
    it enters the local store only after this succeeded, so every check still comes first
    for the store, and the workspace gets all of it or nothing."""
    found, files, crc = _extract(
        src if isinstance(src, bytes) else str(src), key, allowed, str(root), None
    )
    from types import MappingProxyType

    log, records = _records(found.log, files)
    return Checked(records, log, MappingProxyType(dict(found.meta or {})), f"{crc:08x}")


def check(src: Path | bytes, *, key: str, allowed: Callable[[str], bool]) -> Checked:
    """Run every check `unpack` runs on the artifact at `src`, without writing anything.

    Why: an artifact from a remote is proven before it enters the local store, long
    before its task's turn to restore it; the same reader guards both doors.
    """
    fd = -1 if isinstance(src, bytes) else os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        reader = _whole_reader(src) if isinstance(src, bytes) else _frame_reader(fd)
        inflow, tally = _Inflow(reader), _Tally()
        found = _read_entries(inflow, tally, allowed)  # type: ignore[arg-type]
        files = _verify(found, tally, key)  # type: ignore[arg-type]
    finally:
        if fd >= 0:
            os.close(fd)
    from types import MappingProxyType

    log, records = _records(found.log, files)
    return Checked(records, log, MappingProxyType(dict(found.meta or {})), f"{inflow.crc:08x}")
