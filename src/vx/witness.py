"""What a run read to reach its outcome, so a receipt can later tell whether all of it still holds.

Off unless a run turns it on (`start`). Then every reader planning uses notes each absolute
path it touched: `read` for a file whose bytes were used or a directory whose entries were
listed, `probed` for a path whose kind alone mattered (a file, a directory, a link, missing).
A plain module-level table rather than a recorder handed down: the readers sit deep in
discovery, the config loader, the git listing and the walks, and threading one object through
all of them would change every signature for a single concern. Stdlib `os` only: the replay
of a receipt (`vx.fastpath.receipt`) imports this module before anything else of vx.

The environment is witnessed the same way: `ReadEnv` is the host environment as a dict that
remembers every name looked up in it, or that it was read whole.
"""

from __future__ import annotations

import os

# A file whose mtime (or ctime) is this close to a moment may still change inside one
# timestamp tick, so neither a hash memoised on its stat nor a stat comparison can trust it.
RACY_NS = 50_000_000
COARSE_RACY_NS = 2_000_000_000  # file systems with whole-second timestamps

Identity = tuple[int, int, int, int, int]  # (mode, size, mtime_ns, ctime_ns, ino)

_table: dict[str, bool] | None = (
    None  # absolute path -> True: bytes or entries used; False: kind only
)
_ran: list[tuple[tuple[str, ...], int, str, bytes | None]] | None = (
    None  # (argv, exit code, xxh3 of stdout, status)
)
_views: dict[str, tuple[str | tuple[str, ...], list[str]]] | None = (
    None  # directory -> (prefix, the names with it)
)


def start() -> None:
    """Start noting (again, from empty)."""
    global _table, _ran, _views
    _table, _ran, _views = {}, [], {}


def noting() -> bool:
    """Whether a run is noting what it reads (so a caller may skip building what it would note)."""
    return _table is not None


def read(path: str) -> None:
    """Note a file whose bytes were used, or a directory whose entries were listed."""
    if _table is not None:
        _table[path] = True


def probed(path: str) -> None:
    """Note a path whose kind alone mattered (exists, is a directory, is a link)."""
    if _table is not None and path not in _table:
        _table[path] = False


def ran(argv, returncode: int, stdout: bytes) -> None:
    """Note a command whose output was used (git's listing), by a digest of that output; `git
    status` also by the output itself (small: changed, untracked and ignored paths only), which a
    receipt divides into planning's part and the part that is the run's own outputs."""
    if _ran is not None:
        import xxhash

        status = stdout if len(argv) > 1 and argv[1] == "status" else None
        _ran.append((tuple(argv), returncode, xxhash.xxh3_128_hexdigest(stdout), status))


def stop() -> tuple[dict[str, bool], list, dict[str, tuple[str | tuple[str, ...], list[str]]]]:
    """Stop noting; return the paths, the commands and the directory views noted."""
    global _table, _ran, _views
    table, commands, views, _table, _ran, _views = _table, _ran, _views, None, None, None
    return table or {}, commands or [], views or {}


class Notes:
    """A table of its own for a walk whose reads are not planning's: a task's outputs are the
    run's outcome, not its inputs, and a receipt keeps them per task (`OutputSpec.state`)."""

    def __init__(self) -> None:
        self.table: dict[str, bool] = {}

    def read(self, path: str) -> None:
        self.table[path] = True

    def probed(self, path: str) -> None:
        self.table.setdefault(path, False)


class _Unnoted:
    def read(self, path: str) -> None:
        pass

    def probed(self, path: str) -> None:
        pass


UNNOTED = _Unnoted()


def listed(directory: str, prefix: str | tuple[str, ...], names: list[str]) -> None:
    """Note a directory listed only for the names that start with `prefix` (a config file's):
    a receipt then holds while those names stay the same, whatever else comes and goes there."""
    if _views is not None:
        kept = sorted(n for n in names if n.startswith(prefix))
        if directory in _views:  # the root: `vx.workspace` then `vx.config`, both kept
            was, seen = _views[directory]
            prefix = tuple(dict.fromkeys((*_prefixes(was), *_prefixes(prefix))))
            # each listing's names for its own prefix: one made between the two listings was
            # not seen by the first reader, and a replay must find it a change
            kept = sorted({*seen, *kept})
        _views[directory] = (prefix, kept)


def _prefixes(prefix: str | tuple[str, ...]) -> tuple[str, ...]:
    return (prefix,) if isinstance(prefix, str) else prefix


def identity(path: str, whole: bool) -> Identity | None:
    """The lstat identity a receipt keeps of a path: all of it when its bytes or entries were
    used, its type and inode alone when only its kind mattered; None when it is missing."""
    try:
        return identity_of(os.lstat(path), whole)
    except OSError:
        return None


def identity_of(st: os.stat_result, whole: bool) -> Identity:
    if whole:
        return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return (st.st_mode & 0o170000, 0, 0, 0, st.st_ino)


def racy(st: os.stat_result, now_ns: int) -> bool:
    """Whether the file may change again without its stat changing (still inside one tick)."""
    return racy_times(st.st_mtime_ns, st.st_ctime_ns, now_ns)


def racy_times(mtime_ns: int, ctime_ns: int, now_ns: int) -> bool:
    """`racy` for a recorded mtime and ctime: changed within a tick (two seconds on file
    systems with whole-second timestamps) of `now_ns`."""
    coarse = mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0
    return max(mtime_ns, ctime_ns) >= now_ns - (COARSE_RACY_NS if coarse else RACY_NS)


def output_stat(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What the up-to-date rule compares of an output file: (mode, size, ms mtime, ino, ctime)."""
    return (st.st_mode, st.st_size, st.st_mtime_ns // 1_000_000, st.st_ino, st.st_ctime_ns)


class ReadEnv(dict):
    """The host environment, remembering each name looked up (`names`); reading it whole —
    iterating, copying, listing its keys — sets `whole`, and then all of it counts."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.names: set[str] = set()
        self.whole = False

    def __getitem__(self, name):
        self.names.add(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self.names.add(name)
        return super().get(name, default)

    def __contains__(self, name) -> bool:
        self.names.add(name)
        return super().__contains__(name)

    def _all(self):
        self.whole = True
        return self

    def __iter__(self):
        return super(ReadEnv, self._all()).__iter__()

    def keys(self):
        return super(ReadEnv, self._all()).keys()

    def items(self):
        return super(ReadEnv, self._all()).items()

    def values(self):
        return super(ReadEnv, self._all()).values()

    def copy(self) -> dict:
        return dict(super(ReadEnv, self._all()).items())
