"""Know every input file of the workspace once per run, and give each a content identity.

The only module that reads input files (KEY-12..17, KEY-21). One bulk git enumeration per
run (`ls-files`, `status` and `config`, spawned together) lists what exists; a clean, trusted
tracked file is then identified by its index blob OID without being opened or even stat'ed —
on a warm run that is nearly every file, and it is what makes keying 1000 packages cheap.
Everything else (dirty, untracked, untrusted) is hashed in-process exactly as `git
hash-object` would, memoised on its stat in a small SQLite table so a file is read once.

Paths are POSIX strings relative to the workspace root ("" is the root), kept in one sorted
list so a project's files are a `bisect` slice, not a scan. Outside a git repo the tree is
walked instead: slower, same identities.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from msgspec import Struct

from vx.errors import EnvironmentFailure
from vx.globs import GlobSet
from vx.model import InputSet

# A file whose mtime (or ctime) is this close to "now" may still be changing inside one
# timestamp tick, so neither its memoised hash nor a clean stat can be trusted.
RACY_NS = 50_000_000
COARSE_RACY_NS = 2_000_000_000  # file systems with whole-second timestamps

FINGERPRINT_FILES = (
    "pnpm-lock.yaml", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "bun.lock",
    "bun.lockb", "pnpm-workspace.yaml", ".yarnrc.yml", ".npmrc", "bunfig.toml",
)

# KEY-17: never inputs, whatever the globs say.
_ALWAYS_EXCLUDED = re.compile(
    r"(?:^|/)(?:\.git|\.vx|\.[0-9a-fA-F]{16}-[0-9a-fA-F]{8}\.tmp)/"
    r"|\.tsbuildinfo$|\.bun-build$|(?:^|/)vx-lock\.json$"
)
_EXCLUDED_SUFFIXES = (".tsbuildinfo", ".bun-build", "vx-lock.json")
_NODE_MODULES = re.compile(r"(?:^|/)node_modules/")
_NEVER_OUTPUT = re.compile(r"(?:^|/)(?:\.git|\.vx)(?:/|$)")
_WALK_SKIP = frozenset({".git", ".vx", "node_modules"})
_MODE_PREFIX = {"100755": "100755:", "120000": "120000:"}
_CLEAN_FILTER_ATTRS = frozenset({"text", "eol", "crlf", "ident", "filter", "working-tree-encoding"})
_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})

Stat = tuple[int, int, int, int]  # (mtime_ns, size, ctime_ns, ino)


class Snapshot(Struct, frozen=True):
    """The lstat of each input just before a task ran (KEY-21); None where a path was missing."""

    stats: tuple[tuple[str, Stat | None], ...]
    taken_ns: int


# ---------------------------------------------------------------- blob hashing


def _stat_key(st: os.stat_result) -> Stat:
    return (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino)


def _racy(st: os.stat_result, now_ns: int) -> bool:
    """Whether the file may change again without its stat changing (still inside one tick)."""
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    coarse = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    return newest >= now_ns - (COARSE_RACY_NS if coarse else RACY_NS)


def blob_oid(data: bytes, algo: str = "sha1") -> str:
    """Hash bytes as a git blob (`git hash-object`): `<algo>("blob <len>\\0" + data)`."""
    import hashlib  # only a dirty tree hashes: the clean path never loads OpenSSL

    h = hashlib.new(algo, b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def _hash_open_file(f, size: int, algo: str) -> str:
    """Stream a file into a blob hash; re-read whole if it changed length under us."""
    import hashlib

    h = hashlib.new(algo, b"blob %d\0" % size)
    seen = 0
    while chunk := f.read(1 << 20):
        h.update(chunk)
        seen += len(chunk)
    if seen == size:
        return h.hexdigest()
    f.seek(0)
    return blob_oid(f.read(), algo)


class _BlobMemo:
    """Blob OIDs of worktree files keyed on their stat, persisted in SQLite across runs.

    sqlite3 is imported only when the first dirty or untracked file needs hashing, so a
    clean warm run never pays for it. Any SQLite trouble just disables the memo: it is an
    optimisation, never a source of truth.
    """

    def __init__(self, path: Path | None, algo: str):
        self._path, self._algo = path, algo
        self._rows: dict[str, tuple[Stat, str]] | None = None
        self._pending: dict[str, tuple[Stat, str]] = {}
        self._lock = threading.Lock()

    def get(self, rel: str, key: Stat) -> str | None:
        """The remembered OID of `rel`, only if its stat is still `key`."""
        with self._lock:
            if self._rows is None:
                self._rows = self._load()
            row = self._pending.get(rel) or self._rows.get(rel)
        return row[1] if row and row[0] == key else None

    def put(self, rel: str, key: Stat, oid: str) -> None:
        """Remember an OID; nothing is written until `flush`."""
        with self._lock:
            self._pending[rel] = (key, oid)

    def _connect(self):
        import sqlite3

        assert self._path is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, timeout=5)
        db.execute(
            "CREATE TABLE IF NOT EXISTS file_blob_memo (path TEXT PRIMARY KEY, algo TEXT,"
            " mtime_ns INTEGER, size INTEGER, ctime_ns INTEGER, ino INTEGER, oid TEXT)"
        )
        return db

    def _load(self) -> dict[str, tuple[Stat, str]]:
        if self._path is None:
            return {}
        import sqlite3

        try:
            db = self._connect()
            try:
                rows = db.execute(
                    "SELECT path, mtime_ns, size, ctime_ns, ino, oid FROM file_blob_memo WHERE algo = ?",
                    (self._algo,),
                ).fetchall()
            finally:
                db.close()
        except (sqlite3.Error, OSError):
            self._path = None
            return {}
        return {r[0]: ((r[1], r[2], r[3], r[4]), r[5]) for r in rows}

    def flush(self) -> None:
        """Write the hashes learnt since the last flush, in one transaction."""
        with self._lock:
            pending, self._pending = self._pending, {}
            if self._rows is not None:
                self._rows.update(pending)
        if not pending or self._path is None:
            return
        import sqlite3

        rows = [(p, self._algo, *key, oid) for p, (key, oid) in pending.items()]
        try:
            db = self._connect()
            with db:
                db.executemany("INSERT OR REPLACE INTO file_blob_memo VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.close()
        except (sqlite3.Error, OSError):
            self._path = None


# ---------------------------------------------------------------- git listing


class _Listing(Struct):
    """What one enumeration learnt: candidate paths and what git vouches for."""

    paths: list[str]  # sorted: tracked and present, plus untracked (not ignored)
    trusted: dict[str, str]  # clean tracked path -> identity (mode prefix + index OID)
    untracked: frozenset[str]
    ignored_dirs: frozenset[str]  # no trailing slash
    ignored_files: frozenset[str]
    algo: str = "sha1"
    git: bool = True


def _repo_root(root: Path) -> Path | None:
    """The nearest directory at or above root holding `.git` (a dir, or a worktree's file)."""
    for d in (root, *root.parents):
        if (d / ".git").exists():
            return d
    return None


def _git_dir(toplevel: Path) -> Path:
    """The common git dir (where `info/attributes` lives), following worktree `.git` files."""
    dot = toplevel / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text()
    except OSError:
        return dot
    gitdir = Path(text.partition("gitdir:")[2].strip())
    gitdir = gitdir if gitdir.is_absolute() else toplevel / gitdir
    common = gitdir / "commondir"
    if common.is_file():
        return (gitdir / common.read_text().strip()).resolve()
    return gitdir


def _spawn_git(cwd: Path, args: Sequence[str]) -> subprocess.Popen:
    # Optional locks stay on: `git status` then writes back the stat data it refreshed, as it does
    # for the user. With them off, files committed in the same second as written stay "racy" and
    # git re-reads every one of them on every run, which costs the warm path its zero reads.
    return subprocess.Popen(
        ["git", *args], cwd=cwd,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _collect(proc: subprocess.Popen, what: str, root: Path, required: bool = True) -> str:
    """Read a spawned git to the end; refuse plainly (never a traceback) if it failed."""
    out, err = proc.communicate()
    if proc.returncode != 0 and not required:
        return ""
    if proc.returncode != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        hint = "run `git status` in the workspace to see what git objects to"
        if any("dubious ownership" in line for line in message):
            hint = f"trust the repository: git config --global --add safe.directory {root}"
        raise EnvironmentFailure(
            f"git could not list the workspace files ({what})",
            facts=(f"in: {root}", *(message[:3] or [f"exit {proc.returncode}"])), hint=hint,
        )
    return out.decode("utf-8", "surrogateescape")


def _spawn_git_listing(root: Path) -> tuple[subprocess.Popen, ...]:
    """Spawn the three listings at once (KEY-13); `_run_git_listing` reads them."""
    return (
        _spawn_git(root, ["ls-files", "-s", "-v", "-z"]),
        _spawn_git(root, ["status", "--porcelain=v1", "-z", "-uall", "--ignored=matching", "--no-renames",
                          "--", "."]),
        _spawn_git(root, ["config", "-z", "--list"]),
    )


def _run_git_listing(root: Path, procs: tuple[subprocess.Popen, ...] | None = None) -> tuple[str, str, str]:
    """Read the three listings (spawning them first unless `procs` already runs them)."""
    procs = procs or _spawn_git_listing(root)
    try:
        ls = _collect(procs[0], "ls-files", root)
        status = _collect(procs[1], "status", root)
        config = _collect(procs[2], "config", root, required=False)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return ls, status, config


_LS_FILES_RECORD = re.compile(r"(\S) (\d+) ([0-9a-f]+) (\d)\t([^\0]*)\0")


def _parse_ls_files(text: str) -> tuple[dict[str, str], set[str], list[str]]:
    """Index identities (path -> mode prefix + OID), the paths git cannot vouch for, gitlinks.

    Tag `H` at stage 0 is a normal cached entry; lowercase tags are assume-unchanged, `S`
    skip-worktree and stages 1-3 a conflict — `git status` does not check any of those.
    One regex over the whole listing keeps the per-file cost in C.
    """
    entries: dict[str, str] = {}
    untrusted: set[str] = set()
    gitlinks: list[str] = []
    for tag, mode, oid, stage, path in _LS_FILES_RECORD.findall(text):
        if mode == "160000":
            gitlinks.append(path)
            continue
        if tag != "H" or stage != "0":
            untrusted.add(path)
        entries[path] = _MODE_PREFIX[mode] + oid if mode in _MODE_PREFIX else oid
    return entries, untrusted, gitlinks


class _Status(Struct):
    dirty: set[str]
    deleted: set[str]
    untracked: list[str]
    untracked_dirs: list[str]  # embedded repos, listed as `dir/`
    ignored_dirs: list[str]
    ignored_files: set[str]
    workspace_ignored: bool = False  # the workspace root itself lies in a gitignored dir


def _parse_status(text: str, prefix: str) -> _Status:
    """Sort `status --porcelain -z` records; its paths are repo-relative, so strip `prefix`."""
    st = _Status(set(), set(), [], [], [], set())
    cut = len(prefix)
    for record in text.split("\0"):
        if record.startswith("!! ") and record.endswith("/") and prefix.startswith(record[3:]):
            st.workspace_ignored = True
        if len(record) < 4 or not record.startswith(prefix, 3):
            continue
        xy, path = record[:2], record[3 + cut:]
        if xy == "??":
            (st.untracked_dirs if path.endswith("/") else st.untracked).append(path.rstrip("/"))
        elif xy == "!!":
            if path.endswith("/"):
                st.ignored_dirs.append(path.rstrip("/"))
            else:
                st.ignored_files.add(path)
        elif xy in _UNMERGED:
            st.dirty.add(path)
        elif xy[1] == "D":
            st.deleted.add(path)
        elif xy[1] != " ":
            st.dirty.add(path)
    return st


def _parse_config(text: str) -> dict[str, str]:
    config = {}
    for record in text.split("\0"):
        key, _, value = record.partition("\n")
        if key:
            config[key.lower()] = value
    return config


def _attributes_risky(text: str) -> bool:
    """Whether an attributes file could set a clean filter (KEY-14); macros count as risky."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[attr]"):
            return True
        for token in line.split()[1:]:
            name = token.split("=", 1)[0]
            if name in _CLEAN_FILTER_ATTRS:  # `-text` and `!text` never convert
                return True
    return False


def _file_risky(path: Path) -> bool:
    try:
        return _attributes_risky(path.read_text("utf-8", "replace"))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return False
    except OSError:
        return True


def _attribute_files(root: Path, toplevel: Path, config: dict[str, str], paths: Iterable[str]) -> list[Path]:
    """Every attributes file that could apply: in-tree, above the workspace, repo, global, system."""
    files = [root / p for p in paths if p == ".gitattributes" or p.endswith("/.gitattributes")]
    d = root
    while d != toplevel and toplevel in d.parents:
        d = d.parent
        files.append(d / ".gitattributes")
    files.append(_git_dir(toplevel) / "info" / "attributes")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    files.append(Path(os.path.expanduser(config.get("core.attributesfile", f"{xdg}/git/attributes"))))
    files.append(Path("/etc/gitattributes"))
    return files


def _filters_possible(root: Path, toplevel: Path, config: dict[str, str], paths: Iterable[str]) -> bool:
    """Whether git might not be vouching for worktree bytes at all (KEY-14), so trust nothing.

    A clean filter or eol conversion means the index blob is not the worktree bytes; weakened
    stat checks mean `git status` may call a changed file clean.
    """
    if config.get("core.autocrlf", "false").lower() in ("true", "input", "1", "yes", "on"):
        return True
    if config.get("core.trustctime", "true").lower() in ("false", "0", "no", "off"):
        return True
    if config.get("core.checkstat", "default").lower() == "minimal":
        return True
    return any(_file_risky(f) for f in _attribute_files(root, toplevel, config, paths))


def _git_listing(root: Path, toplevel: Path, procs: tuple[subprocess.Popen, ...] | None = None) -> _Listing:
    """Turn one bulk enumeration into sorted candidates and trusted identities."""
    ls, status_text, config_text = _run_git_listing(root, procs)
    prefix = root.relative_to(toplevel).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    entries, untrusted, gitlinks = _parse_ls_files(ls)
    st = _parse_status(status_text, prefix)
    if st.workspace_ignored:  # git would call every file ignored: key by content instead
        return _walk_listing(root)
    config = _parse_config(config_text)
    present = [p for p in entries if p not in st.deleted]
    untracked = list(st.untracked)
    for d in (*gitlinks, *st.untracked_dirs):  # KEY-15: nested repos, by content
        untracked += _walk_files(root, d, _not_skipped)
    paths = sorted(set(present).union(untracked))
    untrusted |= st.dirty
    trusted: dict[str, str] = {}
    if not _filters_possible(root, toplevel, config, [*paths, *st.ignored_files]):
        trusted = {p: entries[p] for p in present if p not in untrusted}
    algo = "sha256" if config.get("extensions.objectformat") == "sha256" else "sha1"
    return _Listing(paths, trusted, frozenset(untracked), frozenset(st.ignored_dirs),
                    frozenset(st.ignored_files), algo)


def _walk_listing(root: Path) -> _Listing:
    """No git: every file under the root is a candidate, hashed from disk."""
    paths = sorted(_walk_files(root, "", _not_skipped))
    return _Listing(paths, {}, frozenset(paths), frozenset(), frozenset(), git=False)


# ---------------------------------------------------------------- walking


def _walk_files(root: Path, start: str, descend: Callable[[str], bool]) -> list[str]:
    """Workspace-relative files and symlinks at or under `start`, never following a link.

    `descend(rel_dir)` decides which directories are entered; the caller says where
    (`_not_skipped` keeps out of `.git`, `.vx` and `node_modules`).
    """
    out: list[str] = []
    base = os.path.join(root, start) if start else str(root)
    try:
        st = os.lstat(base)
    except OSError:
        return out
    if not stat.S_ISDIR(st.st_mode):
        return [start] if start and _is_file_or_link(st.st_mode) else out
    stack = [start]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, d) if d else root))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            rel = f"{d}/{e.name}" if d else e.name
            if e.is_dir(follow_symlinks=False):
                if descend(rel):
                    stack.append(rel)
            elif e.is_file(follow_symlinks=False) or e.is_symlink():
                out.append(rel)
    return out


def _never_input(path: str, untracked: frozenset[str] | tuple[str, ...]) -> bool:
    """KEY-17's fixed exclusions: `.git`, `.vx`, build info, Bun temp files, untracked node_modules."""
    if path in untracked and "node_modules" in path and _NODE_MODULES.search(path):
        return True
    # Cheap substring tests first: the regex scan is what 10^4 paths per load would pay for.
    if ".git" in path or ".vx" in path or ".tmp/" in path or path.endswith(_EXCLUDED_SUFFIXES):
        return _ALWAYS_EXCLUDED.search(path) is not None
    return False


def _not_skipped(rel: str) -> bool:
    return rel.rpartition("/")[2] not in _WALK_SKIP


def _is_file_or_link(mode: int) -> bool:
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _symlinked_ancestor(root: Path, rel: str, seen: dict[str, bool | None] | None = None) -> str | None:
    """The first directory on the way to `rel` that is a symlink (a walk must not pass it).

    `seen` remembers each ancestor's answer (True: a link, None: missing) across the walks of
    one batch, where nothing runs in between: a thousand projects share `packages/`."""
    parts = rel.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        head = "/".join(parts[:i])
        link = seen.get(head, False) if seen is not None and head in seen else _is_link(root, head)
        if seen is not None:
            seen[head] = link
        if link is None:
            return None
        if link:
            return head
    return None


def _is_link(root: Path, head: str) -> bool | None:
    try:
        return stat.S_ISLNK(os.lstat(os.path.join(root, head)).st_mode)
    except OSError:
        return None


def _under(path: str, dirs: frozenset[str] | set[str]) -> bool:
    """Whether `path` is one of `dirs` or below one: a set lookup per ancestor, not a scan."""
    if not dirs or not path:
        return False
    if path in dirs:
        return True
    at = path.find("/")
    while at > 0:
        if path[:at] in dirs:
            return True
        at = path.find("/", at + 1)
    return False


def _base(project_dir: str) -> str:
    return project_dir + "/" if project_dir else ""


def _root_path(base: str, root: str) -> str:
    """A glob root joined onto a project base ("" + "" is the workspace root)."""
    return base + root if root else base.rstrip("/")


# ---------------------------------------------------------------- the index


class PendingIndex:
    """A workspace enumeration in flight: git is spawned on creation, read by `finish`.

    `started_ns` is taken before git starts, so `changed_since` treats anything that moves
    while git lists as possibly changed (KEY-21). `close` reaps git when the run is refused
    before the index is needed.
    """

    def __init__(self, root: Path):
        self.started_ns = time.time_ns()
        self.root = root
        self.toplevel = _repo_root(root)
        use_git = self.toplevel is not None and shutil.which("git")
        self.procs = _spawn_git_listing(root) if use_git else None

    def finish(self, memo_path: Path | None = None) -> FileIndex:
        procs, self.procs = self.procs, None
        if procs is not None:
            listing = _git_listing(self.root, self.toplevel, procs)
        else:
            listing = _walk_listing(self.root)
        return FileIndex(self.root, listing, memo_path, self.started_ns)

    def close(self) -> None:
        for proc in self.procs or ():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        self.procs = None


class FileIndex:
    """Every candidate input file of the workspace, as enumerated once at the start of a run."""

    def __init__(self, root: Path, listing: _Listing, memo_path: Path | None, started_ns: int):
        self.root = root
        self.started_ns = started_ns  # before enumeration: the safe `started_ns` for changed_since
        self.git = listing.git
        self._l = listing
        self._path_set = frozenset(listing.paths)  # everything git listed (or the walk found)
        # The task-independent exclusions, applied once here rather than per task.
        self._paths = [p for p in listing.paths if not _never_input(p, listing.untracked)]
        self._memo = _BlobMemo(memo_path, listing.algo)
        self._identities: dict[str, str | None] = {}

    @classmethod
    def load(cls, root: Path, memo_path: Path | None = None) -> FileIndex:
        """Enumerate the workspace: git's listing when inside a repo, else a walk of the tree."""
        return cls.start(root).finish(memo_path)

    @classmethod
    def start(cls, root: Path) -> PendingIndex:
        """Spawn the git listing now and read it later, so git runs while configs load."""
        return PendingIndex(Path(root).resolve())

    def __len__(self) -> int:
        return len(self._l.paths)

    def could_be_input(self, rel_path: str) -> bool:
        """Whether a glob could make this file an input: listed at load (tracked, or untracked
        and not ignored) and not excluded by KEY-17. `--verify=inputs` asks it of every read."""
        return rel_path in self._path_set and not _never_input(rel_path, self._l.untracked)

    # ------------------------------------------------------------ identities

    def identity(self, rel_path: str) -> str:
        """A file's identity (KEY-05, KEY-12), or "" when it is absent; ignored files count too."""
        ident = self._identity(rel_path)
        self._memo.flush()
        return ident or ""

    def _identity(self, path: str) -> str | None:
        known = self._l.trusted.get(path)
        if known is not None:
            return known
        if path in self._identities:
            return self._identities[path]
        ident = self._hash_from_disk(path)
        self._identities[path] = ident
        return ident

    def _hash_from_disk(self, path: str) -> str | None:
        """Hash a worktree file as git would; None when it is missing or not a file."""
        abs_path = os.path.join(self.root, path)
        try:
            st = os.lstat(abs_path)
            if stat.S_ISLNK(st.st_mode):
                return "120000:" + blob_oid(os.readlink(os.fsencode(abs_path)), self._l.algo)
            if not stat.S_ISREG(st.st_mode):
                return None
            oid = self._regular_oid(path, abs_path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise EnvironmentFailure(f"cannot read input file {path}", facts=(str(e),),
                                     hint="check the file's permissions") from None
        return oid

    def _regular_oid(self, path: str, abs_path: str) -> str:
        with open(abs_path, "rb") as f:
            st = os.fstat(f.fileno())
            key = _stat_key(st)
            oid = self._memo.get(path, key)
            if oid is None:
                oid = _hash_open_file(f, st.st_size, self._l.algo)
                settled = _stat_key(os.fstat(f.fileno())) == key  # unchanged while we read
                if settled and not _racy(st, time.time_ns()):
                    self._memo.put(path, key, oid)
        return ("100755:" if st.st_mode & stat.S_IXUSR else "") + oid

    # ------------------------------------------------------------ selection

    def _range(self, path: str) -> list[tuple[int, int]]:
        """Index ranges of `path` itself and everything below it in the sorted listing."""
        paths = self._paths
        if not path:
            return [(0, len(paths))]
        i = bisect.bisect_left(paths, path)
        own = [(i, i + 1)] if i < len(paths) and paths[i] == path else []
        return own + [(bisect.bisect_left(paths, path + "/"), bisect.bisect_left(paths, path + "0"))]

    def _candidates(self, base: str, roots: Sequence[str], skip: Sequence[str]) -> list[str]:
        """Listed paths under the glob roots, minus the `skip` subtrees (nested projects)."""
        paths, out = self._paths, []
        holes = sorted(r for d in skip for r in self._range(d)[-1:]) if skip else []
        for root in roots:
            for lo, hi in self._range(_root_path(base, root)):
                for a, b in _subtract(lo, hi, holes) if holes else ((lo, hi),):
                    out += paths[a:b]
        return out

    @staticmethod
    def _not_output(path: str, base: str, excluded: GlobSet | None) -> bool:
        """KEY-17: a task's own outputs are never its inputs (a `!` taken-back output stays one)."""
        if excluded is None or not path.startswith(base):
            return True
        return not excluded.match(path[len(base):])

    def inputs(
        self,
        project_dir: str,
        globs: GlobSet,
        workspace_globs: GlobSet | None = None,
        *,
        excluded: GlobSet | None = None,
        nested: Sequence[str] = (),
        excluded_workspace: GlobSet | None = None,
    ) -> InputSet:
        """The task's input files with identities, sorted by workspace-relative path (KEY-12, KEY-17).

        `globs` match project-relative below `project_dir`, never inside `nested` projects;
        `workspace_globs` match root-relative anywhere (KEY-19). `excluded` is the task's own
        outputs (project-relative), `excluded_workspace` its root-relative outputs.
        """
        base = _base(project_dir)
        own = self._select(base, globs, nested, excluded)
        wide: list[str] = []
        if workspace_globs:
            wide = [p for p in self._select("", workspace_globs, (), excluded_workspace)
                    if self._not_output(p, base, excluded)]
        ids = self._identities_of(own + wide if wide else own)
        # KEY-23: a pattern whose only matches vanished before they were hashed matched nothing.
        cut = len(base)
        unmatched = globs.unmatched([p[cut:] for p in own if ids[p] is not None])
        if workspace_globs:
            unmatched += workspace_globs.unmatched([p for p in wide if ids[p] is not None])
        return InputSet(tuple(sorted((p, i) for p, i in ids.items() if i is not None)), unmatched)

    def _identities_of(self, paths: list[str]) -> dict[str, str | None]:
        """Identities of many paths: the trusted index OIDs first (a dict hit each), the rest hashed."""
        trusted = self._l.trusted
        ids = {p: trusted.get(p) for p in paths}
        rest = [p for p, i in ids.items() if i is None]
        if rest:
            ids.update((p, self._identity(p)) for p in rest)
            self._memo.flush()
        return ids

    def _select(self, base: str, globs: GlobSet, nested: Sequence[str], excluded: GlobSet | None) -> list[str]:
        """Listed paths matching `globs` below `base`, minus the task's outputs (every candidate is
        below `base`, so the output globs match the cut path directly)."""
        match, cut = globs.match, len(base)
        chosen: list[str] = []
        for root in globs.roots():  # a root the globs cover whole (`src` of `src/**`) needs no matching
            found = self._candidates(base, (root,), nested)
            chosen += found if globs.covers(root) else [p for p in found if match(p[cut:])]
        if excluded and _overlap(globs.roots(), excluded.roots()):
            out = excluded.match
            chosen = [p for p in chosen if not out(p[cut:])]
        return chosen

    # ------------------------------------------------------------ KEY-21

    def snapshot(self, inputs: InputSet, extra: Sequence[str] = ()) -> Snapshot:
        """lstat every input (and `extra` paths such as the package.json) before a task runs."""
        stats = []
        for path in [p for p, _ in inputs.files] + list(extra):
            try:
                stats.append((path, _stat_key(os.lstat(os.path.join(self.root, path)))))
            except OSError:
                stats.append((path, None))
        return Snapshot(tuple(stats), time.time_ns())

    def changed_since(
        self,
        snapshot: Snapshot,
        project_dir,
        globs=None,
        workspace_globs: GlobSet | None = None,
        excluded: GlobSet | None = None,
        nested: Sequence[str] = (),
        started_ns: int | None = None,
    ) -> str | None:
        """The first input that changed, vanished or appeared since the key was taken; None if none.

        The rule (KEY-21): a path counts as changed when its lstat (mtime, size, ctime, inode)
        differs from the snapshot, when it is gone, or when its mtime or ctime is at or after
        `T - 50 ms`, T being the earlier of `started_ns` and this index's own `started_ns`
        (read before git ran). Every identity in a key was read after T, so the last clause
        catches an edit made between reading an identity and the snapshot (which the stat
        comparison alone cannot see), one inside the snapshot's timestamp tick, and — through
        ctime — one whose mtime was forged back. A file some earlier task of this run wrote
        counts too: the key was planned before that write.
        A path appeared when a re-walk under the glob roots (git is not re-run) finds a file
        the same rules would have chosen that is not in the snapshot; a new path git has not
        seen is asked of `git check-ignore` first, so a new gitignored file does not count.

        `project_dir` may instead be a query carrying `project_dir`, `globs`,
        `workspace_globs`, `excluded` and `nested` attributes; `globs` is then `started_ns`.
        """
        if not isinstance(project_dir, str):
            q = project_dir
            started_ns = globs if started_ns is None else started_ns
            project_dir, globs, workspace_globs, excluded, nested = (
                q.project_dir, q.globs, q.workspace_globs, q.excluded, q.nested)
        since = self.started_ns if started_ns is None else min(started_ns, self.started_ns)
        changed = self._first_changed(snapshot, since)
        if changed is not None:
            return changed
        known = {p for p, _ in snapshot.stats}
        now = self._walk_inputs(project_dir, globs, workspace_globs, excluded, nested)
        return self._first_not_ignored(sorted(now - known))

    def _first_changed(self, snapshot: Snapshot, started_ns: int) -> str | None:
        limit = started_ns - RACY_NS
        for path, before in snapshot.stats:
            try:
                st = os.lstat(os.path.join(self.root, path))
            except OSError:
                if before is not None:
                    return path
                continue
            if before is None or _stat_key(st) != before or max(st.st_mtime_ns, st.st_ctime_ns) >= limit:
                return path
        return None

    def _walk_inputs(self, project_dir, globs, workspace_globs, excluded, nested) -> set[str]:
        """What `inputs` would choose from the file system as it is now (no git)."""
        base = _base(project_dir)
        found = set()
        walked = list(self._walk_matching(base, globs, nested))
        if workspace_globs:
            walked += self._walk_matching("", workspace_globs, ())
        for path in walked:
            untracked = path in self._l.untracked or path not in self._path_set
            if not _never_input(path, (path,) if untracked else ()) and self._not_output(path, base, excluded):
                found.add(path)
        return found

    def _walk_matching(self, base: str, globs: GlobSet, nested: Sequence[str]) -> Iterator[str]:
        ignored_dirs, ignored_files = self._l.ignored_dirs, self._l.ignored_files
        nested = frozenset(nested)
        cut = len(base)

        def descend(rel: str) -> bool:
            name = rel.rpartition("/")[2]
            if name in _WALK_SKIP or _under(rel, ignored_dirs) or _under(rel, nested):
                return False
            return globs.could_match_under(rel[cut:])

        for root in globs.roots():
            start = _root_path(base, root)
            if _under(start, ignored_dirs) or _under(start, nested) or _symlinked_ancestor(self.root, start):
                continue
            for path in _walk_files(self.root, start, descend):
                if path not in ignored_files and not _under(path, ignored_dirs) and globs.match(path[cut:]):
                    yield path

    def _first_not_ignored(self, new: list[str]) -> str | None:
        """The first new path git would not ignore (all of them count without git)."""
        unknown = [p for p in new if p not in self._path_set]
        if not self.git or not unknown:
            return new[0] if new else None
        proc = subprocess.run(
            ["git", "check-ignore", "--stdin", "-z"], cwd=self.root, input="\0".join(unknown).encode() + b"\0",
            capture_output=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
        if proc.returncode not in (0, 1):  # git failed: count every new path, the safe side
            return new[0]
        ignored = {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}
        return next((p for p in new if p not in ignored), None)


def _overlap(roots: Sequence[str], others: Sequence[str]) -> bool:
    """Whether a path could lie under one of `roots` and one of `others` (glob roots: literal heads)."""
    return any(a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")
               for a in roots for b in others)


def _subtract(lo: int, hi: int, holes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi) outside the sorted `holes`."""
    out, at = [], lo
    for a, b in holes:
        if b <= at or a >= hi:
            continue
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < hi:
        out.append((at, hi))
    return out


# ---------------------------------------------------------------- fingerprint


_BUN_PATCHES = re.compile(r'"patchedDependencies"\s*:\s*\{([^}]*)\}')
_JSON_STRING_VALUE = re.compile(r':\s*"([^"]+)"')


def _bun_patch_files(root: Path) -> list[str]:
    """The patch files `bun.lock` names (KEY-04): editing a patch changes every install."""
    try:
        text = (root / "bun.lock").read_text("utf-8", "replace")
    except OSError:
        return []
    block = _BUN_PATCHES.search(text)
    return sorted(set(_JSON_STRING_VALUE.findall(block.group(1)))) if block else []


def fingerprint(root: Path, index: FileIndex) -> str:
    """xxh3-64 hex of the root lockfiles and install settings present (KEY-04), in a fixed order.

    Each file contributes `name NUL identity NUL`, the identity being the index OID when git
    vouches for it, so a clean lockfile is never read.
    """
    import xxhash

    h = xxhash.xxh3_64()
    names = list(FINGERPRINT_FILES)
    if index.identity("bun.lock"):
        names += [p for p in _bun_patch_files(Path(root)) if not p.startswith(("/", "../"))]
    for name in names:
        ident = index.identity(name)
        if ident:
            h.update(f"{name}\0{ident}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


# ---------------------------------------------------------------- outputs


def _output_descend(base: str, globs: GlobSet, nested: Sequence[str]) -> Callable[[str], bool]:
    """Where an output walk may go: never .git/.vx or a nested project; node_modules if named."""
    cut = len(base)
    nested = frozenset(nested)
    allow_nm = globs.names("node_modules")

    def descend(rel: str) -> bool:
        name = rel.rpartition("/")[2]
        if name in (".git", ".vx") or (name == "node_modules" and not allow_nm) or _under(rel, nested):
            return False
        return globs.could_match_under(rel[cut:])

    return descend


def _walk_output_set(root: Path, base: str, globs: GlobSet, nested: Sequence[str],
                     seen: dict[str, bool | None] | None = None) -> set[str]:
    found = set()
    cut = len(base)
    descend = _output_descend(base, globs, nested)
    for glob_root in globs.roots():
        start = _root_path(base, glob_root)
        link = _symlinked_ancestor(root, start, seen) if start else None
        paths = [link] if link else _walk_files(root, start, descend)
        for path in paths:
            if path.startswith(base) and not _NEVER_OUTPUT.search(path) and globs.match(path[cut:]):
                found.add(path)
    return found


def walk_outputs(
    root: Path, project_dir: str, globs: GlobSet | None, workspace_globs: GlobSet | None = None,
    *, nested: Sequence[str] = (), seen: dict[str, bool | None] | None = None,
) -> list[str]:
    """The files and symlinks that now match a task's declared outputs, sorted (LC-08).

    Only the glob roots are walked, links are never followed, `.git`/`.vx` never entered,
    `node_modules` only when a glob names it, and a nested project is not this task's.
    `seen` shares ancestor checks across a batch of walks (the hit lane's).
    """
    found = _walk_output_set(root, _base(project_dir), globs, nested, seen) if globs else set()
    if workspace_globs:
        found |= _walk_output_set(root, "", workspace_globs, (), seen)
    return sorted(found)


def wipe_outputs(
    root: Path, project_dir: str, globs: GlobSet | None, workspace_globs: GlobSet | None = None,
    *, nested: Sequence[str] = (),
) -> list[str]:
    """Remove every current output (files and links, never a link's target); return what went.

    Emptied directories are pruned up to the project dir, but the literal root of a wildcard
    glob (`dist` of `dist/**`) is kept: tools often expect it to exist.
    """
    root = Path(root)
    removed = walk_outputs(root, project_dir, globs, workspace_globs, nested=nested)
    for path in removed:
        try:
            os.unlink(os.path.join(root, path))
        except FileNotFoundError:
            continue
        except OSError as e:
            raise EnvironmentFailure(f"cannot remove output {path}", facts=(str(e),),
                                     hint="check the permissions of the file and its directory") from None
    keep = _kept_dirs(project_dir, globs, workspace_globs)
    _prune_empty_dirs(root, removed, keep)
    return removed


def _kept_dirs(project_dir: str, globs: GlobSet | None, workspace_globs: GlobSet | None) -> set[str]:
    base = _base(project_dir)
    keep = {"", project_dir} | {_root_path(base, r) for r in (globs.wildcard_roots() if globs else ())}
    if workspace_globs:
        keep |= set(workspace_globs.wildcard_roots())
    return keep


def _prune_empty_dirs(root: Path, removed: Iterable[str], keep: set[str]) -> None:
    """rmdir the now-empty ancestors of removed files, deepest first, stopping at `keep`."""
    dirs: set[str] = set()
    for path in removed:
        d = path.rpartition("/")[0]
        while d and d not in keep and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    for d in sorted(dirs, key=lambda x: x.count("/"), reverse=True):
        try:
            os.rmdir(os.path.join(root, d))
        except OSError:
            pass  # not empty (or already gone): some other file still lives there
