"""Know every input file of the workspace once per run, and give each a content identity.

The only module that opens input files to identify them (KEY-12..17, KEY-21). One bulk git enumeration per
run (`ls-files`, `status` and `config`, spawned together) lists what exists; a clean, trusted
tracked file is then identified by its index blob OID without being opened or even stat'ed —
on a warm run that is nearly every file, and it is what makes keying 1000 packages cheap.
Everything else (dirty, untracked, untrusted) is hashed in-process exactly as `git
hash-object` would, memoised on its stat in a small SQLite table so a file is read once.

Paths are POSIX strings relative to the workspace root ("" is the root), kept in one sorted
list so a project's files are a `bisect` slice, not a scan. Outside a git repo the tree is
walked instead: slower, same identities.

The enumeration is `vx.listing`, the hashing and its memo `vx.blobs`, the tree walks
`vx.walk`; a task's outputs are walked and wiped by `vx.outputs`.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
import subprocess
import time
from pathlib import Path
from typing import Iterator, Sequence

from msgspec import Struct

from vx import witness
from vx.blobs import Stat, _BlobMemo, _hash_open_file, _stat_key, blob_oid
from vx.errors import EnvironmentFailure
from vx.globs import GlobSet
from vx.listing import _git_listing, _Listing, _repo_root, _spawn_git_listing, _walk_listing, let_finish
from vx.model import InputSet
from vx.walk import _WALK_SKIP, _base, _root_path, _symlinked_ancestor, _under, _walk_files

FINGERPRINT_FILES = (
    "pnpm-lock.yaml", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "bun.lock",
    "bun.lockb", "pnpm-workspace.yaml", ".yarnrc.yml", ".npmrc", "bunfig.toml",
)

# KEY-17: never inputs, whatever the globs say.
_ALWAYS_EXCLUDED = re.compile(
    r"(?:^|/)(?:\.git|\.vx|\.[^/]{16}-[^/]{8}\.tmp)/"  # Bun's temp dir: the reference's `?`, any character
    r"|\.tsbuildinfo$|\.bun-build$|(?:^|/)vx-lock\.json$"
)
_EXCLUDED_SUFFIXES = (".tsbuildinfo", ".bun-build", "vx-lock.json")
_NODE_MODULES = re.compile(r"(?:^|/)node_modules/")


class Snapshot(Struct, frozen=True):
    """The lstat of each input just before a task ran (KEY-21); None where a path was missing."""

    stats: tuple[tuple[str, Stat | None], ...]
    taken_ns: int


def _never_input(path: str, untracked: frozenset[str] | tuple[str, ...]) -> bool:
    """KEY-17's fixed exclusions: `.git`, `.vx`, build info, Bun temp files, untracked node_modules."""
    if path in untracked and "node_modules" in path and _NODE_MODULES.search(path):
        return True
    # Cheap substring tests first: the regex scan is what 10^4 paths per load would pay for.
    if ".git" in path or ".vx" in path or ".tmp/" in path or path.endswith(_EXCLUDED_SUFFIXES):
        return _ALWAYS_EXCLUDED.search(path) is not None
    return False


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
        use_git = self.toplevel is not None and _on_path("git")
        self.procs = _spawn_git_listing(root) if use_git else None

    def finish(self, memo_path: Path | None = None) -> FileIndex:
        procs, self.procs = self.procs, None
        if procs is not None:
            listing = _git_listing(self.root, self.toplevel, procs)
        else:
            listing = _walk_listing(self.root)
        index = FileIndex(self.root, listing, memo_path, self.started_ns)
        index.toplevel = self.toplevel if procs is not None else None
        return index

    def close(self) -> None:
        for proc in self.procs or ():
            let_finish(proc)
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
        self.toplevel: Path | None = None  # the git repository's root, when git listed

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

    def vouched(self, rel_path: str) -> bool:
        """Whether git vouches for the file: tracked, clean by `git status`, no filter possible
        (KEY-14). Its bytes are then pinned by the `ls-files` and `status` listings themselves."""
        return rel_path in self._l.trusted

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
        witness.read(abs_path)
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
                if settled and not witness.racy(st, time.time_ns()):
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
        limit = started_ns - witness.RACY_NS
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
    witness.read(os.path.join(root, "bun.lock"))
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


def _on_path(program: str) -> bool:
    """Whether PATH holds an executable `program`: what `shutil.which` answers, without importing
    shutil, whose archive support loads bz2 and lzma (~1.5 ms of every run)."""
    search = os.environ.get("PATH")
    if search is None:
        search = os.confstr("CS_PATH") or os.defpath
    for directory in search.split(os.pathsep) if search else ():
        path = os.path.join(directory or os.curdir, program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return True
    return False
