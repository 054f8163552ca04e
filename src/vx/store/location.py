"""Where the local cache lives: one answer for `vx run` and every verb that reads the cache."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from vx.errors import ConfigError, UsageError, WorkspaceError

if TYPE_CHECKING:
    from vx.files.index import FileIndex
    from vx.model import Workspace, WorkspaceConfig


def cache_dir(
    cwd: Path,
    flag: str | None,
    ws: Workspace,
    ws_config: WorkspaceConfig,
    host_env: Mapping[str, str],
) -> Path:
    """flag (cwd-relative) > workspace `cacheDir` > VX_CACHE_DIR > `<root>/.vx/cache`."""
    if flag:
        path, source, field = (cwd / flag), "--cache-dir", ""
    elif ws_config.cache_dir:
        path, source, field = (
            (ws.root / Path(ws_config.cache_dir).expanduser()),
            ws_config.source,
            "cacheDir",
        )
    elif host_env.get("VX_CACHE_DIR"):
        path, source, field = Path(host_env["VX_CACHE_DIR"]).expanduser(), "VX_CACHE_DIR", ""
    else:
        path = ws.root / ".vx" / "cache"
        refuse_linked_state(ws.root, path)
        return path
    path = Path(os.path.abspath(path))
    _refuse_inside_sources(path, ws, source, field)
    if field:
        _refuse_shared_stores(path, host_env, source)
    refuse_linked_state(ws.root, path)
    return path


def _refuse_shared_stores(path: Path, host_env: Mapping[str, str], source: str) -> None:
    """A workspace config may not name a cache dir among the shared stores (`~/.vx`): each is
    one repository's, and a config naming another's would read and write its entries."""
    home = host_env.get("HOME") or os.path.expanduser("~")
    stores = os.path.realpath(os.path.join(home, ".vx"))
    if home != "~" and Path(os.path.realpath(path)).is_relative_to(stores):
        raise ConfigError(
            f"cacheDir {path} lies in {stores}, where vx keeps each repository's shared store",
            file=source,
            field="cacheDir",
            hint="leave cacheDir out to use this repository's own shared store, or name a"
            " directory of the workspace's (e.g. .vx-cache)",
        )


# What vx itself keeps in a workspace. A repository can commit any of these as a symlink (`.vx ->
# ~`, `.vx/receipts -> ../..`), and vx would write through it — and prune what it finds there.
_STATE = (".vx", ".vx/receipts", ".vx/configs", ".vx/watch-probe")
_CACHE_NAMES = (
    ".gitignore",
    "cache.db",
    "files.db",
    "store.db",
    "runs.db",
    "runs.pending",
    "runs",
    "logs",
    "lockfiles",
    "toolchains.json",
    "repo-id",
    ".vx-swept",
)
_DB_SUFFIXES = ("-wal", "-shm", "-journal")


def refuse_linked_state(root: Path, cache: Path) -> None:
    """Refuse a workspace where `.vx`, a directory or file vx keeps in it, or a cache dir inside
    the workspace (and any directory on the way to it) is a symlink, or a directory of these is
    not one, or any of them is another user's (`foreign`): a WorkspaceError naming the path.
    A few lstats, no read."""
    paths = [root / name for name in _STATE]
    try:
        inside = cache.relative_to(root).parts
    except ValueError:
        inside = ()
    paths += [root.joinpath(*inside[: i + 1]) for i in range(len(inside))]
    if inside:
        for name in _CACHE_NAMES:
            paths.append(cache / name)
            if name.endswith(".db"):
                paths += [cache / (name + suffix) for suffix in _DB_SUFFIXES]
    dirs = {root / ".vx", root / ".vx" / "receipts", root / ".vx" / "configs", cache}
    dirs.update(root.joinpath(*inside[: i + 1]) for i in range(len(inside)))
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue  # absent: vx makes it, as a directory or file of its own
        if stat.S_ISLNK(st.st_mode):
            what = f"a symlink to {os.readlink(path)}: vx keeps its own state there and never"
            what += " writes through a link"
        elif path in dirs and not stat.S_ISDIR(st.st_mode):
            what = "not a directory: vx keeps its own state there"
        else:
            owner = foreign(st)
            if owner is None or _git_trusts(root, st.st_uid):
                continue
            rel = path.relative_to(root).as_posix()
            raise WorkspaceError(
                f"{rel} is {owner}: vx would restore what its cache holds as this machine's own"
                " builds",
                facts=(f"path: {path}",),
                hint=f"if you trust whoever wrote it, `chown -R $(id -u) {rel}`; otherwise remove"
                f" it (`rm -rf {rel}`)",
            )
        rel = path.relative_to(root).as_posix()
        raise WorkspaceError(
            f"{rel} is {what}",
            facts=(f"path: {path}",),
            hint=f"remove it (`rm {rel}`; if git tracks it, `git rm --cached {rel}` and commit);"
            " to keep the cache elsewhere, pass --cache-dir or set VX_CACHE_DIR",
        )


_TRUSTED_UIDS: set[int] = set()  # owners a `safe.directory` entry vouched for, this process


def _git_trusts(root: Path, owner: int) -> bool:
    """Whether the user told git to trust this repository whoever owns it (`safe.directory` in
    the global, system or command-line config, as git reads it: `*`, the root, or a `dir/*`
    prefix of it; never the repository's own, whose owner wrote it), as a container
    build over a mounted checkout does; then vx takes its state as git takes its objects.
    Asked only on the refusal path, so a usual run spawns nothing."""
    import subprocess

    try:
        proc = subprocess.run(
            ["git", "config", "--show-scope", "--get-all", "safe.directory"],
            cwd="/",  # git reads safe.directory only from the global and system config
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    here, trusted = os.path.realpath(root), False
    for line in proc.stdout.splitlines():
        scope, _, entry = line.partition("\t")
        if scope not in ("system", "global", "command"):
            continue  # a repository's own config (GIT_DIR may name it): its owner wrote that
        entry = entry.strip()
        if not entry:  # an empty value resets the list (git's rule)
            trusted = False
        elif entry == "*":
            trusted = True
        elif entry.endswith("/*"):
            prefix = os.path.expanduser(entry[:-2]) or "/"
            if os.path.isabs(prefix):  # git matches absolute paths: `./*` trusts nothing
                trusted |= (here + "/").startswith(os.path.realpath(prefix).rstrip("/") + "/")
        elif os.path.isabs(os.path.expanduser(entry)):  # `.` is not where vx happens to run
            trusted |= os.path.realpath(os.path.expanduser(entry)) == here
    if trusted:
        _TRUSTED_UIDS.add(owner)
    return trusted


def foreign(st: os.stat_result) -> str | None:
    """Why vx must not take a path of its own state as its own — another user owns it — or
    None. As git refuses a repository another user owns: whoever wrote vx's state decides what
    its cache hits restore, and an archive unpacked by root, or a directory on a shared disk,
    keeps the owner it came with. (Not the mode: under `umask 0` vx's own files are
    world-writable, and a file another user adds is theirs, which this catches.)"""
    uid = os.getuid()
    if st.st_uid == uid or (uid == 0 and str(st.st_uid) == os.environ.get("SUDO_UID")):
        return None  # as git: `sudo vx` may read the state of the user who ran sudo
    if st.st_uid in _TRUSTED_UIDS:
        return None  # its state passed `_git_trusts` in this run
    return f"owned by uid {st.st_uid}, not by the user running vx (uid {uid})"


def refuse_shipped_state(index: FileIndex, root: Path, cache: Path) -> None:
    """Refuse a workspace whose repository tracks a file in a directory vx reads its state from —
    `.vx/cache`, `.vx/receipts`, `.vx/configs`, a cache dir inside the workspace: an index and
    artifacts a clone checks out would be served as this machine's builds. A lookup in git's
    listing per directory."""
    if not index.git:
        return
    dirs = {".vx/cache", ".vx/receipts", ".vx/configs"}
    try:
        dirs.add(cache.relative_to(root).as_posix())
    except ValueError:
        pass
    for rel in sorted(dirs):
        found = index.tracked_below(rel)
        if found is not None:
            raise WorkspaceError(
                f"git tracks {found}: a repository must never ship vx's state (its cache entries"
                " would be restored as if this machine had built them)",
                facts=(f"path: {root / found}",),
                hint=f"`git rm -r --cached {rel}` and commit, and add `{rel}/` to .gitignore",
            )


def _refuse_inside_sources(path: Path, ws: Workspace, source: str, field: str) -> None:
    project_dirs = {ws.root / p.dir for p in ws.packages.values()}
    if path in project_dirs or ws.root.is_relative_to(path):
        msg = f"the cache dir {path} is a project directory or contains the workspace"
        hint = "pick a directory of its own, e.g. .vx/cache or a path outside the workspace"
        if source.startswith("--") or source == "VX_CACHE_DIR":
            raise UsageError(msg, facts=(f"from: {source}",), hint=hint)
        raise ConfigError(msg, file=source, field=field, hint=hint)


def shares(flag: str | None, ws_config: WorkspaceConfig, host_env: Mapping[str, str]) -> bool:
    """Whether entries go to the repository's shared store: no cache dir is named (a named
    one holds everything and shares nothing) and `VX_SHARED_STORE=0` does not turn it off."""
    named = flag or ws_config.cache_dir or host_env.get("VX_CACHE_DIR")
    return not named and host_env.get("VX_SHARED_STORE") != "0"


def store_dir(
    cache_dir: Path,
    root: Path,
    toplevel: Path | None,
    remotes: Sequence[tuple[str, str]],
    host_env: Mapping[str, str],
) -> tuple[Path, str | None]:
    """Where entries and artifacts live: the shared store, else `cache_dir` itself; and the note
    that says why an unsafe home kept them in the workspace."""
    from vx.store import shared

    home = host_env.get("HOME") or os.path.expanduser("~")
    found, note = shared.store_dir(
        root, toplevel, remotes, cache_dir, None if home == "~" else home
    )
    return (found if found is not None else cache_dir), note


def git_facts(root: Path) -> tuple[Path | None, tuple[tuple[str, str], ...]]:
    """(the git top level, each remote's name and URL) for a verb that lists no files (`vx cache
    prune`, `vx info`); a run takes them from its own listing."""
    import subprocess

    def git(*args: str) -> str:
        try:
            proc = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, stdin=subprocess.DEVNULL
            )
        except OSError:
            return ""
        return proc.stdout if proc.returncode == 0 else ""

    top = next((d for d in (root, *root.parents) if (d / ".git").exists()), None)
    if top is None:
        return None, ()
    remotes = []
    for record in git("config", "-z", "--get-regexp", r"^remote\..*\.url$").split("\0"):
        key, _, value = record.partition("\n")
        if key:
            remotes.append((key[7:-4], value))
    return top, tuple(remotes)


def store_of(
    cwd: Path,
    flag: str | None,
    ws: Workspace,
    ws_config: WorkspaceConfig,
    host_env: Mapping[str, str],
) -> tuple[Path, Path, str | None]:
    """(cache dir, store dir, note) for a verb outside a run (`vx cache prune`, `vx info`)."""
    cache = cache_dir(cwd, flag, ws, ws_config, host_env)
    if not shares(flag, ws_config, host_env):
        return cache, cache, None
    toplevel, remotes = git_facts(ws.root)
    store, note = store_dir(cache, ws.root, toplevel, remotes, host_env)
    return cache, store, note
