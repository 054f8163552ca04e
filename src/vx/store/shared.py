"""The shared store of one repository: where its entries and artifacts live, so that every
worktree and clone of the repository hits what any of them saved.

`~/.vx/<id>/cache/` holds `store.db` (entries, logs, output files) and the `*.tar.zst`
artifacts; each workspace keeps its own `.vx/cache/cache.db` (stamps, key history) beside its
memos, and attaches the store. `<id>` is 16 hex digits of a double sha256 over the repository's
identity and the workspace's path inside it. The identity is the normalised remote
(`host/owner/repo`, lower case: `git@github.com:a/b.git` is `https://github.com/a/b`), `origin`
first, then `upstream`, `base`, the first listed; with no remote, the repository's root commit,
which every clone and worktree of one history shares and which does not move with the directory
(a path would share nothing between worktrees). With no commit, or outside git, nothing is shared.

Every level under the home is made 0700 and must be a directory of this user's that nobody else
can write: an entry is a promise about what a build produced, and whoever can write the store can
make every workspace that reads it restore their files. A home that fails (another user's, writable
by others, a symlinked level) keeps the cache in the workspace with one note.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Sequence

STORE_DB = "store.db"
_PREFERRED = ("origin", "upstream", "base")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(.*)$")  # [user@]host:path, git's scp-like form
_ROOT_MEMO = "repo-id"  # the root commit, found once per workspace (a spawn the warm path skips)


def preferred_remote(remotes: Sequence[tuple[str, str]]) -> str | None:
    """The URL of the remote that names the repository: `origin`, `upstream`, `base`, else the
    first `git config` lists."""
    urls = {name.lower(): url for name, url in remotes if url.strip()}
    for name in _PREFERRED:
        if name in urls:
            return urls[name]
    return next(iter(urls.values()), None)


def normalise_remote(url: str, toplevel: Path) -> str:
    """One spelling per repository: `host/owner/repo` in lower case for a network remote (no
    user, password, port, `.git` or trailing slash); the real path for a local one."""
    url = url.strip()
    if _SCHEME.match(url):
        scheme, _, rest = url.partition("://")
        if scheme.lower() == "file":
            return _local(rest, toplevel)
        host, _, path = rest.partition("/")
        host = host.rpartition("@")[2].split(":")[0]
    else:
        scp = _SCP.match(url)
        if scp is None or "/" in scp.group(1):
            return _local(url, toplevel)
        host, path = scp.group(1), scp.group(2)
    return f"{host}/{_bare(path)}".lower()


def _local(path: str, toplevel: Path) -> str:
    real = os.path.realpath(os.path.join(toplevel, os.path.expanduser(path)))
    return "file:/" + _bare(real)


def _bare(path: str) -> str:
    path = path.strip("/")
    return path[: -len(".git")] if path.endswith(".git") else path


def store_id(identity: str, subpath: str) -> str:
    sha256 = _sha256()
    inner = sha256(f"{identity}\0{subpath}".encode("utf-8", "surrogateescape")).digest()
    return sha256(inner).hexdigest()[:16]


def _sha256():
    """The interpreter's own sha256: hashlib loads OpenSSL, which a warm run otherwise never pays for."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef]
        except ImportError:
            from hashlib import sha256
    return sha256


def identity(toplevel: Path, remotes: Sequence[tuple[str, str]], memo_dir: Path) -> str | None:
    """The repository's identity: its preferred remote, else its root commit, else None."""
    url = preferred_remote(remotes)
    if url is not None:
        return normalise_remote(url, toplevel)
    memo = memo_dir / _ROOT_MEMO
    known = _read_memo(memo)
    if known:
        return known
    proc = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"],
        cwd=toplevel,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    commits = proc.stdout.split() if proc.returncode == 0 else []
    if not commits:
        return None  # no commit yet: nothing to share by
    found = f"commit:{commits[-1]}"  # the oldest root when unrelated histories were merged
    if memo_dir.is_dir():  # the store makes the dir (with its .gitignore); until then, ask again
        _write_memo(memo, found)
    return found


# The memo is opened O_NOFOLLOW: a repository can commit `.vx/cache/repo-id` as a link, and vx
# must neither write through it (to a file outside the workspace) nor read another file as the id.
def _read_memo(memo: Path) -> str:
    try:
        fd = os.open(memo, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        text = f.read(200).decode("utf-8", "replace").strip()
    return text if text.startswith("commit:") else ""


def _write_memo(memo: Path, found: str) -> None:
    try:
        os.unlink(memo)  # a link (or a stale memo) goes; the new one is a file of vx's
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        fd = os.open(
            memo, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
    except OSError:
        return  # another run wrote it meanwhile, or the dir is read-only: asked again next time
    with os.fdopen(fd, "w") as f:
        f.write(found + "\n")


def store_dir(
    root: Path,
    toplevel: Path | None,
    remotes: Sequence[tuple[str, str]],
    memo_dir: Path,
    home: str | None,
) -> tuple[Path | None, str | None]:
    """(the shared store's directory, made and checked, or None; a note when the home is unsafe)."""
    if toplevel is None:
        return None, None
    ident = identity(toplevel, remotes, memo_dir)
    if ident is None:
        return None, None
    try:
        sub = root.relative_to(toplevel).as_posix()
    except ValueError:
        return None, None
    if not home:
        return None, _note("no home directory is set ($HOME)")
    levels = (".vx", store_id(ident, "" if sub == "." else sub), "cache")
    why = _safe_home(home)
    path = Path(home)
    for name in levels:
        if why is not None:
            break
        path = path / name
        why = _private_dir(path)
    if why is not None:
        return None, _note(why)
    return path, None


def remake(store: Path) -> bool:
    """A store dir (`<home>/.vx/<id>/cache`) removed while a run wrote to it, made again level by
    level as `store_dir` makes and checks them; False when a level fails a check, or the home
    itself is gone (then nothing is made)."""
    levels = (store.parent.parent, store.parent, store)
    if not levels[0].parent.is_dir():
        return False
    return all(_private_dir(level) is None for level in levels)


def _note(why: str) -> str:
    return (
        f"the shared cache store is off: {why}; this workspace keeps its cache in .vx/cache"
        " (make ~/.vx a directory of yours that only you can write, mode 700)"
    )


def _safe_home(home: str) -> str | None:
    try:
        st = os.stat(home)
    except OSError as e:
        return f"the home {home} cannot be read ({e.strerror})"
    if st.st_uid != os.getuid():
        return f"the home {home} belongs to another user"
    if st.st_mode & 0o022:
        return f"the home {home} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _private_dir(path: Path) -> str | None:
    """Make `path` 0700 if missing; None when it is a directory of this user's that only they can
    write (read bits for others are taken away), else why not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # another run made it meanwhile
            pass
        except OSError as e:
            return f"{path} cannot be made ({e.strerror})"
        try:
            st = os.lstat(path)
        except OSError as e:
            return f"{path} cannot be read ({e.strerror})"
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.getuid():
        return f"{path} belongs to another user"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return f"{path} is writable by others (mode {mode:o})"
    if mode != 0o700:
        try:
            os.chmod(path, 0o700)
        except OSError as e:
            return f"{path} cannot be made private ({e.strerror})"
    return None
