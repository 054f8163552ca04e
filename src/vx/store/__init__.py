"""The cache store: a SQLite-indexed local store of zstd tar artifacts (LC-01).

Import this package lazily (from the run pipeline, not at `vx --version`): its modules
pull in `sqlite3` and `zstandard` only when a store opens or an artifact is packed.
"""

from vx.store.archive import ArchiveError, OutputFile, PackInfo
from vx.store.local import DamagedEntry, Entry, LocalStore
from vx.store.packing import pack
from vx.store.unpacking import Unpacked, unpack

__all__ = [
    "ArchiveError",
    "DamagedEntry",
    "Entry",
    "LocalStore",
    "OutputFile",
    "PackInfo",
    "Unpacked",
    "pack",
    "unpack",
]
