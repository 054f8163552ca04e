"""What vx keeps of a workspace's secrets and state, and where: the per-user digest seed under
`$XDG_CACHE_HOME/vx` (never in the workspace), the digests of variable values made with it, and the
git-ignored directories under `.vx/`, and how a file there or in the cache dir is written whole.

A leaf: the replay of a receipt loads it, and so do the store's key history and the kept config
evaluations, which keep digests of values too.
"""

from __future__ import annotations

import os


def write_whole(path: str, data: bytes, mode: int = 0o644) -> None:
    """`data` at `path`, all or nothing: written to a temp file beside it and renamed over it, so
    a reader never finds half a file. When any step fails (a full disk) the temp file is removed
    before the error goes on: a run on a full disk leaves nothing behind."""
    head, name = os.path.split(path)
    temp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def cache_home() -> str | None:
    """`$XDG_CACHE_HOME`, or `~/.cache` when it is unset or relative (the XDG rule); None without
    a home either. A relative one would put this user's secrets under whatever directory vx runs
    in, the workspace."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):
        return base
    home = os.path.expanduser("~")  # "~" itself when neither HOME nor the passwd entry says
    return os.path.join(home, ".cache") if os.path.isabs(home) else None


def env_digest(value: str | None) -> str | None:
    """What vx keeps in the workspace of a variable's value (receipts, kept config evaluations,
    the key history): a digest, never the value — a run may look up a token (TURBO_TOKEN). Seeded
    with this user's secret seed, kept outside the workspace, so a short secret cannot be found
    again from `.vx/` by trying every candidate."""
    import xxhash  # already loaded by the run lock

    if value is None:
        return None
    return xxhash.xxh3_64_hexdigest(value.encode("utf-8", "surrogateescape"), seed=_seed())


_SEED: list[int] = []


def _seed() -> int:
    """The user's digest seed: 8 random bytes in `$XDG_CACHE_HOME/vx/digest-seed` (owner-only),
    made on first use; 0 where no such file can be kept."""
    if not _SEED:
        base = cache_home()
        _SEED.append(0 if base is None else _seed_in(os.path.join(base, "vx", "digest-seed")))
    return _SEED[0]


def _seed_in(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return int.from_bytes(f.read(8), "little")
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            data = os.urandom(8)
            f.write(data)
        return int.from_bytes(data, "little")
    except OSError:
        return 0  # another process made it first (read it next time), or nowhere to keep one


def ignored_dir(directory: str) -> None:
    """Make `directory` (and parents) holding a `*` .gitignore, so git never lists what vx keeps
    there — receipts here, kept config evaluations (`vx.config.evaluation`). Raises OSError."""
    os.makedirs(directory, exist_ok=True)
    ignore = os.path.join(directory, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w") as f:
            f.write("*\n")
