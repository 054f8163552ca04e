"""Know every input file of the workspace once per run, and give each a content identity.

The only module that opens input files to identify them. One bulk git enumeration per
run (`ls-files`, `status` and `config`, spawned together) lists what exists; a clean, trusted
tracked file is then identified by its index blob OID without being opened or even stat'ed —
on a warm run that is nearly every file, and it is what makes keying 1000 packages cheap.
Everything else (dirty, untracked, untrusted) is hashed in-process exactly as `git
hash-object` would, memoised on its stat in a small SQLite table so a file is read once.

Paths are POSIX strings relative to the workspace root ("" is the root), kept in one sorted
list so a project's files are a `bisect` slice, not a scan. Outside a git repo the tree is
walked instead: slower, same identities.

The enumeration is `vx.files.git`, the hashing and its memo `vx.files.blobs`, the tree walks
`vx.files.tree`; a task's outputs are walked and wiped by `vx.files.outputs`.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from msgspec import Struct

from vx import witness
from vx.errors import ConfigError, EnvironmentFailure
from vx.files import links
from vx.files.blobs import BlobMemo, Stat, blob_oid, hash_open_file, stat_key
from vx.files.git import (
    Listing,
    git_listing,
    let_finish,
    repo_root,
    spawn_git_listing,
    walk_listing,
)
from vx.files.globs import GlobSet
from vx.files.tree import WALK_SKIP, base_of, is_under, root_path, symlinked_ancestor, walk_files
from vx.model import InputSet

if TYPE_CHECKING:
    from vx.files.outputs import InputQuery

FINGERPRINT_FILES = (
    "pnpm-lock.yaml",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "bun.lock",
    "bun.lockb",
    "pnpm-workspace.yaml",
    ".yarnrc.yml",
    ".npmrc",
    "bunfig.toml",
)

# never inputs, whatever the globs say.
_ALWAYS_EXCLUDED = re.compile(
    r"(?:^|/)(?:\.git|\.vx|\.[^/]{16}-[^/]{8}\.tmp)/"  # Bun's temp dir: the reference's `?`, any character
    r"|\.tsbuildinfo$|\.bun-build$|(?:^|/)vx-lock\.json$"
)
_EXCLUDED_SUFFIXES = (".tsbuildinfo", ".bun-build", "vx-lock.json")
_NODE_MODULES = re.compile(r"(?:^|/)node_modules/")
# Nx's scratch (its graph, its local cache): Nx's own file walk never hashes it, and Nx (vx's
# own call for the project graph too) rewrites it on every graph — in a repository that does not
# gitignore `.nx`, keyed it would miss every task whose globs reach it
_NX_SCRATCH = re.compile(r"(?:^|/)\.nx/(?:cache|workspace-data)/")


class Snapshot(Struct, frozen=True):
    """The lstat of each input just before a task ran; None where a path was missing.
    `idents` holds, in the same order, the identity the key used for each path ("" for absent):
    what a touched file is re-hashed against."""

    stats: tuple[tuple[str, Stat | None], ...]
    taken_ns: int
    idents: tuple[str, ...] = ()


def never_input(path: str, untracked: frozenset[str] | tuple[str, ...]) -> bool:
    """The fixed exclusions: `.git`, `.vx`, build info, Bun temp files, untracked node_modules
    and untracked `.nx/cache`, `.nx/workspace-data`."""
    if "node_modules" in path and path in untracked and _NODE_MODULES.search(path):
        return True
    if ".nx/" in path and path in untracked and _NX_SCRATCH.search(path):
        return True
    # Cheap substring tests first: the regex scan is what 10^4 paths per load would pay for.
    if ".git" in path or ".vx" in path or ".tmp/" in path or path.endswith(_EXCLUDED_SUFFIXES):
        return _ALWAYS_EXCLUDED.search(path) is not None
    return False


# ---------------------------------------------------------------- the index


class PendingIndex:
    """A workspace enumeration in flight: git is spawned on creation, read by `finish`.

    `started_ns` is taken before git starts, so `changed_since` treats anything that moves
    while git lists as possibly changed. `close` reaps git when the run is refused
    before the index is needed.
    """

    def __init__(self, root: Path):
        self.started_ns = time.time_ns()
        self.root = root
        self.toplevel = repo_root(root)
        use_git = self.toplevel is not None and _on_path("git")
        self.procs = spawn_git_listing(root) if use_git else None

    def finish(self, memo_path: Path | None = None) -> FileIndex:
        procs, self.procs = self.procs, None
        if procs is not None:
            assert self.toplevel is not None  # procs run only inside a repository
            listing = git_listing(self.root, self.toplevel, procs, memo_path)
        else:
            listing = walk_listing(self.root)
        index = FileIndex(self.root, listing, memo_path, self.started_ns)
        index.toplevel = self.toplevel if procs is not None else None
        return index

    def close(self) -> None:
        for proc in self.procs or ():
            let_finish(proc)
        self.procs = None


class FileIndex:
    """Every candidate input file of the workspace, as enumerated once at the start of a run."""

    def __init__(self, root: Path, listing: Listing, memo_path: Path | None, started_ns: int):
        self.root = root
        self.started_ns = started_ns  # before enumeration: the safe `started_ns` for changed_since
        self.git = listing.git
        self._l = listing
        self._path_set = frozenset(listing.paths)  # everything git listed (or the walk found)
        # The task-independent exclusions, applied once here rather than per task.
        self._paths = [p for p in listing.paths if not never_input(p, listing.untracked)]
        self._memo = BlobMemo(memo_path, listing.algo)
        self._identities: dict[str, str | None] = {}
        self._ignored: list[str] | None = (
            None  # git's ignored files and dirs, sorted, when first asked
        )
        self._ignored_heads: set[str] = set()
        self._ignored_below: dict[
            str, list[str]
        ] = {}  # a project base -> what is ignored at or below it
        self._wide: dict[tuple, list[str]] = {}  # workspace globs -> the paths they select
        self._reached: set[str] = set()  # ignored files some task's globs reached
        self.toplevel: Path | None = None  # the git repository's root, when git listed
        self.remotes = listing.remotes
        self.dirty = listing.dirty  # what git status saw in the workspace as the run began
        self.fingerprinted: list[str] = []  # the paths `fingerprint` folded: re-checked after tasks
        # Symlinks followed for keys (vx.files.links): the paths seen through a directory link join the
        # candidates, each an alias of the real path whose identity it takes.
        self._links = (
            links.find(root, [p for p in listing.links if not never_input(p, listing.untracked)])
            if listing.links
            else links.Links()
        )
        self._alias: dict[str, str] = {}
        if self._links.dirs:
            self._alias = links.aliases(self._links, self._paths, self._below)
            self._paths = sorted([*self._paths, *self._alias])

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
        and not ignored) and not a fixed exclusion. `--verify=inputs` asks it of every read."""
        if rel_path in self._reached:
            return True
        return rel_path in self._path_set and not never_input(rel_path, self._l.untracked)

    def tracked(self, rel_path: str) -> bool:
        """Whether git tracks the file (listed, not untracked): a source, never a task's output."""
        return rel_path in self._path_set and rel_path not in self._l.untracked

    def tracked_below(self, rel_dir: str) -> str | None:
        """The first file git tracks below the workspace-relative directory `rel_dir`, else None."""
        paths, below = self._l.paths, rel_dir + "/"
        i = bisect.bisect_left(paths, below)
        while i < len(paths) and paths[i].startswith(below):
            if paths[i] not in self._l.untracked:
                return paths[i]
            i += 1
        return None

    def listed_under(self, rel_dir: str) -> list[str]:
        """The candidate inputs below `rel_dir`, sorted: `--verify` asks whether a task read them all."""
        lo, hi = self._range(rel_dir)[-1]
        return self._paths[lo:hi]

    def real_path(self, rel_path: str) -> str:
        """The path an input seen through a symlink stands for (vx.files.links); itself otherwise."""
        return self._alias.get(rel_path) or self._links.files.get(rel_path) or rel_path

    def vouched(self, rel_path: str) -> bool:
        """Whether git vouches for the file: tracked, clean by `git status`, no filter possible
        (a converted file's size is checked each run, so a receipt stats it).
        Its bytes are then pinned by the `ls-files` and `status` listings themselves."""
        return rel_path in self._l.trusted and rel_path not in self._l.converted

    # ------------------------------------------------------------ identities

    def identity(self, rel_path: str) -> str:
        """A file's identity, or "" when it is absent; ignored files count too."""
        ident = self._identity(rel_path)
        self._memo.flush()
        return ident or ""

    def _identity(self, path: str) -> str | None:
        if self._links and path in self._links.files:
            return self._followed(path)
        known = self._l.trusted.get(path)
        if known is not None:
            if path in self._l.converted:
                self._note_converted((path,))
            return known
        real = self._alias.get(path) if self._alias else None
        if real is not None:
            return self._identity(real)
        if path in self._identities:
            return self._identities[path]
        ident = self._hash_from_disk(path)
        self._identities[path] = ident
        return ident

    def _note_converted(self, paths: Sequence[str]) -> None:
        """A file a clean filter could have converted is trusted by its index entry's recorded
        size (vx.files.attributes), which the listing does not show: a receipt stats it."""
        if witness.noting():
            base = os.path.join(self.root, "")
            for path in self._l.converted.intersection(paths):
                witness.read(base + path)

    def _followed(self, link: str, fresh: bool = False) -> str | None:
        """A link to a file: its own identity and that of the content it leads to."""
        own = (
            self._hash_from_disk(link)
            if fresh
            else (self._l.trusted.get(link) or self._hash_from_disk(link))
        )
        target = self._links.files[link]
        content = self._hash_from_disk(target) if fresh else self._identity(target)
        return f"{own}>{content}" if own and content else own

    def _fresh(self, path: str) -> str | None:
        """The identity of `path` as it is on disk now (the re-check before a save)."""
        if self._links and path in self._links.files:
            return self._followed(path, fresh=True)
        return self._hash_from_disk(path)

    def _below(self, path: str) -> list[str]:
        lo, hi = self._range(path)[-1]
        return self._paths[lo:hi]

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
            raise EnvironmentFailure(
                f"cannot read input file {path}",
                facts=(str(e),),
                hint="check the file's permissions",
            ) from None
        return oid

    def _regular_oid(self, path: str, abs_path: str) -> str:
        with open(abs_path, "rb") as f:
            st = os.fstat(f.fileno())
            key = stat_key(st)
            oid = self._memo.get(path, key)
            if oid is None:
                oid = hash_open_file(f, st.st_size, self._l.algo)
                settled = stat_key(os.fstat(f.fileno())) == key  # unchanged while we read
                if settled and not witness.racy(st, time.time_ns()):
                    self._memo.put(path, key, oid)
        return ("100755:" if st.st_mode & stat.S_IXUSR else "") + oid

    # ------------------------------------------------------------ selection

    def _range(self, path: str, paths: list[str] | None = None) -> list[tuple[int, int]]:
        """Index ranges of `path` itself and everything below it in the sorted listing."""
        paths = self._paths if paths is None else paths
        if not path:
            return [(0, len(paths))]
        i = bisect.bisect_left(paths, path)
        own = [(i, i + 1)] if i < len(paths) and paths[i] == path else []
        return own + [
            (bisect.bisect_left(paths, path + "/"), bisect.bisect_left(paths, path + "0"))
        ]

    def _candidates(self, base: str, roots: Sequence[str], skip: Sequence[str]) -> list[str]:
        """Listed paths under the glob roots, minus the `skip` subtrees (nested projects)."""
        paths, out = self._paths, []
        holes = sorted(r for d in skip for r in self._range(d)[-1:]) if skip else []
        for root in roots:
            for lo, hi in self._range(root_path(base, root)):
                for a, b in _subtract(lo, hi, holes) if holes else ((lo, hi),):
                    out += paths[a:b]
        return out

    @staticmethod
    def _not_output(path: str, base: str, excluded: GlobSet | None) -> bool:
        """A task's own outputs are never its inputs (a `!` taken-back output stays one)."""
        if excluded is None or not path.startswith(base):
            return True
        return not excluded.match(path[len(base) :])

    def inputs(
        self,
        project_dir: str,
        globs: GlobSet,
        workspace_globs: GlobSet | None = None,
        *,
        excluded: GlobSet | None = None,
        nested: Sequence[str] = (),
        excluded_workspace: GlobSet | None = None,
        reach: GlobSet | None = None,
        links_as_links: bool = False,
    ) -> InputSet:
        """The task's input files with identities, sorted by workspace-relative path.

        `globs` match project-relative below `project_dir`, never inside `nested` projects;
        `workspace_globs` match root-relative anywhere. `excluded` is the task's own
        outputs (project-relative), `excluded_workspace` its root-relative outputs. Files git
        ignores are inputs where `reach` (`globs` unless given) reaches them (`GlobSet.toward`).
        A link out of the workspace the globs reach is refused, unless `links_as_links` (vx's
        own `**`, which no user wrote): then it is keyed as the link, the path it holds, as it
        is under turbo's `$TURBO_DEFAULT$` (git's view), where only the explicit globs (`reach`)
        are refused for it.
        """
        base = base_of(project_dir)
        if self._links.outside and not links_as_links:
            self._refuse_outside(base, globs if reach is None else reach, nested)
            if workspace_globs:
                self._refuse_outside("", workspace_globs, ())
        own = self._select(base, globs, nested, excluded, globs if reach is None else reach)
        wide: list[str] = []
        if workspace_globs:
            # Shared by every task (turbo's globalDependencies): selected once per run, since a
            # glob like `**/.env.*local` walks each ignored directory it can reach.
            memo = (
                workspace_globs.patterns,
                workspace_globs.turbo,
                excluded_workspace and excluded_workspace.patterns,
            )
            chosen = self._wide.get(memo)
            if chosen is None:
                chosen = self._wide[memo] = self._select(
                    "", workspace_globs, (), excluded_workspace, workspace_globs
                )
            wide = [p for p in chosen if self._not_output(p, base, excluded)]
        ids = self._identities_of(own + wide if wide else own)
        # a pattern whose only matches vanished before they were hashed matched nothing.
        cut = len(base)
        unmatched = globs.unmatched([p[cut:] for p in own if ids[p] is not None])
        if workspace_globs:
            unmatched += workspace_globs.unmatched([p for p in wide if ids[p] is not None])
        return InputSet(tuple(sorted((p, i) for p, i in ids.items() if i is not None)), unmatched)

    def _refuse_outside(self, base: str, globs: GlobSet, nested: Sequence[str]) -> None:
        """A link out of the workspace that the globs reach cannot be keyed: refused, by name."""
        cut = len(base)
        for link, target in self._links.outside.items():
            if (
                link.startswith(base)
                and not is_under(link, frozenset(nested))
                and (globs.match(link[cut:]) or globs.could_match_under(link[cut:]))
            ):
                message, hint = links.refusal(link, link[cut:], target, globs.turbo)
                raise ConfigError(message, file=link, hint=hint)

    def _identities_of(self, paths: list[str]) -> dict[str, str | None]:
        """Identities of many paths: the trusted index OIDs first (a dict hit each), the rest hashed."""
        trusted = self._l.trusted
        ids = {p: trusted.get(p) for p in paths}
        if self._links.files:
            ids.update((p, None) for p in paths if p in self._links.files)
        if self._l.converted:
            self._note_converted(paths)
        rest = [p for p, i in ids.items() if i is None]
        if rest:
            ids.update((p, self._identity(p)) for p in rest)
            self._memo.flush()
        return ids

    def _select(
        self,
        base: str,
        globs: GlobSet,
        nested: Sequence[str],
        excluded: GlobSet | None,
        reach: GlobSet | None = None,
    ) -> list[str]:
        """Listed paths matching `globs` below `base`, and the ignored files `reach` reaches, minus
        the task's outputs (every candidate is below `base`, so the output globs match the cut path
        directly)."""
        match, cut = globs.match, len(base)
        chosen: list[str] = []
        for (
            root
        ) in globs.roots():  # a root the globs cover whole (`src` of `src/**`) needs no matching
            found = self._candidates(base, (root,), nested)
            chosen += found if globs.covers(root) else [p for p in found if match(p[cut:])]
        if reach and (self._l.ignored_files or self._l.ignored_dirs):
            ignored = self._ignored_inputs(base, reach, nested)
            if ignored:
                self._reached.update(ignored)
                chosen = list(
                    dict.fromkeys(chosen + ignored)
                )  # a tracked file in an ignored dir comes twice
        if excluded and _overlap(globs.roots(), excluded.roots()):
            out = excluded.match
            chosen = [p for p in chosen if not out(p[cut:])]
        return chosen

    def _ignored_entries(self, start: str) -> list[str]:
        """What git reported ignored at or below `start` (files, and directories it did not
        descend), or the ignored directory holding `start`."""
        dirs = self._l.ignored_dirs
        if self._ignored is None:
            self._ignored = sorted(self._l.ignored_files | dirs)
            # Every ignored path and each directory above one: a start outside this set (nearly
            # every glob root of a warm run) has nothing ignored below it, a set lookup to know.
            self._ignored_heads = {""}
            for p in self._ignored:
                at = p.find("/")
                while at > 0:
                    self._ignored_heads.add(p[:at])
                    at = p.find("/", at + 1)
                self._ignored_heads.add(p)
        heads = self._ignored_heads
        if start not in heads:
            up = start.rpartition("/")[0]
            while up not in heads:  # the nearest directory above with something ignored at or below
                up = up.rpartition("/")[0]
            return (
                [up] if up in dirs else []
            )  # the ignored dir holding `start` (git reports the outermost)
        found = self._ignored
        return [p for lo, hi in self._range(start, found) for p in found[lo:hi]]

    def _ignored_inputs(
        self, base: str, reach: GlobSet, nested: Sequence[str], present: bool = False
    ) -> list[str]:
        """The ignored files `reach` reaches below `base`: those git names one by one, and the
        files of an ignored directory some glob reaches — only such a directory is walked, pruned
        by the globs. `present` keeps only files on disk now (for the re-check)."""
        cut, dirs = len(base), self._l.ignored_dirs
        out: list[str] = []
        nested_set = frozenset(nested)
        if (
            base
        ):  # what is ignored in a project is few paths (its dist, a .env): ask the globs of each
            below = self._ignored_below.get(base)
            if below is None:
                below = self._ignored_below[base] = self._ignored_entries(base[:-1])
            for entry in below:
                if entry.startswith(base) and reach.toward(entry[cut:]) is not None:
                    break
            else:
                return out
        for root in reach.roots():
            start = root_path(base, root)
            for entry in self._ignored_entries(start):
                rel = entry[cut:]
                if (
                    not rel
                    or not entry.startswith(base)
                    or is_under(entry, nested_set)
                    or never_input(entry, ())
                ):
                    continue
                part = reach.toward(rel)
                if part is None:
                    continue
                if entry not in dirs:
                    if part.match(rel) and (
                        not present or os.path.lexists(os.path.join(self.root, entry))
                    ):
                        out.append(entry)
                    continue
                out += self._walk_ignored(
                    start if len(start) > len(entry) else entry, part, cut, nested_set
                )
        return out

    def _walk_ignored(
        self, start: str, part: GlobSet, cut: int, nested: frozenset[str]
    ) -> list[str]:
        if symlinked_ancestor(self.root, start):
            return []
        into_modules = part.names("node_modules")

        def descend(rel: str) -> bool:
            name = rel.rpartition("/")[2]
            if (
                name in (".git", ".vx")
                or (name == "node_modules" and not into_modules)
                or is_under(rel, nested)
            ):
                return False
            return part.could_match_under(rel[cut:])

        return [
            p
            for p in walk_files(self.root, start, descend)
            if part.match(p[cut:]) and not never_input(p, ())
        ]

    def _reaches(self, path: str, entry: str, query) -> bool:
        """Whether a new ignored `path`, ignored as `entry` (itself or its outermost ignored
        directory), is one the query's globs reach (the re-check's question)."""
        base, reach, ws_reach = query
        for b, globs in ((base, reach), ("", ws_reach)):
            if globs and entry.startswith(b) and entry != b.rstrip("/"):
                part = globs.toward(entry[len(b) :])
                if part is not None and part.match(path[len(b) :]):
                    return True
        return False

    def unmatched_now(self, query, patterns: Sequence[str]) -> tuple[str, ...]:
        """Of `patterns`, unmatched when the run was planned, those that still match no file on
        disk: an upstream task may have written what they name since."""
        found = self._walk_inputs(
            query.project_dir,
            query.globs,
            query.workspace_globs,
            query.excluded,
            query.nested,
            query.reach,
        )
        base = base_of(query.project_dir)
        still = set(query.globs.unmatched([p[len(base) :] for p in found if p.startswith(base)]))
        if query.workspace_globs:
            still |= set(query.workspace_globs.unmatched(found))
        return tuple(p for p in patterns if p in still)

    # ------------------------------------------------------------ the re-check before a save

    def snapshot(self, inputs: InputSet | None, extra: Sequence[str] = ()) -> Snapshot:
        """lstat every input (and `extra` paths such as the package.json or the lockfiles, whose
        identities planning read already) before a task runs."""
        files = list(inputs.files) if inputs is not None else []
        if self._links.files:  # what a file link leads to is re-checked too
            files += [
                (t, self.identity(t)) for t in (self._links.files.get(p) for p, _ in files) if t
            ]
        files += [(p, self.identity(p)) for p in extra]
        stats: list[tuple[str, Stat | None]] = []
        for path, _ in files:
            try:
                stats.append((path, stat_key(os.lstat(os.path.join(self.root, path)))))
            except OSError:
                stats.append((path, None))
        return Snapshot(tuple(stats), time.time_ns(), tuple(ident for _, ident in files))

    def changed_since(
        self, snapshot: Snapshot, query: InputQuery, started_ns: int | None = None
    ) -> str | None:
        """The first input that changed, vanished or appeared since the key was taken; None if none.

        The rule: a path is *touched* when its lstat (mtime, size, ctime, inode)
        differs from the snapshot, when it is gone or appeared, or when its mtime or ctime is at
        or after `T - 50 ms`, T being the earlier of `started_ns` and this index's own
        `started_ns` (read before git ran). Every identity in a key was read after T, so the last
        clause catches an edit made between reading an identity and the snapshot (which the stat
        comparison alone cannot see), one inside the snapshot's timestamp tick, and — through
        ctime — one whose mtime was forged back; a file some earlier task of this run wrote too.
        The 50 ms reach back before T also takes in files written just before the run (a fresh
        checkout, a test's setup) that nothing touched since. So a touched path is re-hashed,
        and it is changed only when its bytes are no longer the identity the key used.
        A path appeared when a re-walk under the glob roots (git is not re-run) finds a file
        the same rules would have chosen that is not in the snapshot; a new path git has not
        seen is asked of `git check-ignore` first, so a new gitignored file does not count.

        Ignored files the globs reach count like any other (re-walked where they were walked).
        """
        q = query
        project_dir, globs, reach = q.project_dir, q.globs, q.reach
        since = self.started_ns if started_ns is None else min(started_ns, self.started_ns)
        changed = self._first_changed(snapshot, since)
        if changed is not None:
            return changed
        known = {p for p, _ in snapshot.stats}
        now = self._walk_inputs(project_dir, globs, q.workspace_globs, q.excluded, q.nested, reach)
        return self._first_not_ignored(
            sorted(now - known),
            (base_of(project_dir), globs if reach is None else reach, q.workspace_globs),
        )

    def task_snapshot(
        self, inputs: InputSet | None, project_dir: str, package_json: str | None
    ) -> Snapshot:
        """A task's snapshot: its inputs, its package.json (`package_json` is the identity its key
        used; None when the task writes it, a declared output) and the files the fingerprint
        folded, each of which its key also used."""
        path = f"{project_dir}/package.json" if project_dir else "package.json"
        snap = self.snapshot(inputs, self.fingerprinted)
        if package_json is None:
            return snap
        try:
            st: Stat | None = stat_key(os.lstat(os.path.join(self.root, path)))
        except OSError:
            st = None
        return Snapshot(snap.stats + ((path, st),), snap.taken_ns, snap.idents + (package_json,))

    def fresh_inputs(self, query) -> InputSet:
        """A task's inputs as they are on disk now, every identity hashed from disk: for a
        task keyed late, after an uncached task upstream (of any project) that may have
        rewritten, added or deleted files since git listed them. `query` carries what
        `changed_since` takes."""
        q, base = query, base_of(query.project_dir)
        reach = getattr(q, "reach", None)
        found = self._walk_inputs(
            q.project_dir, q.globs, q.workspace_globs, q.excluded, q.nested, reach
        )
        kept = self._not_ignored(
            sorted(found), (base, q.globs if reach is None else reach, q.workspace_globs)
        )
        hashed = {p: self._hash_from_disk(p) for p in kept}
        self._memo.flush()
        ids = {p: oid for p, oid in hashed.items() if oid is not None}
        present = [p for p in kept if p in ids]
        unmatched = q.globs.unmatched(
            [p[len(base) :] for p in present if p.startswith(base)]
        )  # as unmatched_now
        if q.workspace_globs:
            unmatched += q.workspace_globs.unmatched(present)
        return InputSet(tuple((p, ids[p]) for p in present), unmatched)

    def fresh_identity(self, rel_path: str) -> str:
        """A file's identity hashed from disk now, whatever git listed; "" when absent."""
        ident = self._hash_from_disk(rel_path)
        self._memo.flush()
        return ident or ""

    def changed_files(self, snapshot: Snapshot, started_ns: int | None = None) -> str | None:
        """The first path of `snapshot` whose content is no longer the identity the key used (the
        stat and re-hash rule of `changed_since`, without looking for new paths); None if none."""
        since = self.started_ns if started_ns is None else min(started_ns, self.started_ns)
        return self._first_changed(snapshot, since)

    def _first_changed(self, snapshot: Snapshot, started_ns: int) -> str | None:
        limit = started_ns - witness.RACY_NS
        idents = snapshot.idents
        for i, (path, before) in enumerate(snapshot.stats):
            try:
                st = os.lstat(os.path.join(self.root, path))
            except OSError:
                if before is not None and not (idents and idents[i] == ""):
                    return path
                continue
            if (
                before is None
                or stat_key(st) != before
                or max(st.st_mtime_ns, st.st_ctime_ns) >= limit
            ):
                # Touched, or inside the racy window: only its bytes can tell. A file rewritten with
                # the bytes the key used (a build that regenerates a tracked file, a checkout just
                # before the run) is unchanged; without the key's identity it counts as changed.
                if not idents or self._current(path) != idents[i]:
                    self._memo.flush()
                    return path
        self._memo.flush()
        return None

    def _current(self, path: str) -> str | None:
        """The file's identity on disk now ("" when absent); None when it cannot be read, which
        counts as changed: a re-check never fails the run."""
        try:
            return self._fresh(path) or ""
        except EnvironmentFailure:
            return None

    def _walk_inputs(
        self, project_dir, globs, workspace_globs, excluded, nested, reach=None
    ) -> set[str]:
        """What `inputs` would choose from the file system as it is now (no git)."""
        base = base_of(project_dir)
        reach = globs if reach is None else reach
        found: set[str] = set()
        walked = list(self._walk_matching(base, globs, nested))
        if workspace_globs:
            walked += self._walk_matching("", workspace_globs, ())
        if self._l.ignored_files or self._l.ignored_dirs:
            if reach:
                found.update(
                    p
                    for p in self._ignored_inputs(base, reach, nested, present=True)
                    if self._not_output(p, base, excluded)
                )
            if workspace_globs:
                found.update(self._ignored_inputs("", workspace_globs, (), present=True))
        for path in walked:
            untracked = path in self._l.untracked or path not in self._path_set
            if not never_input(path, (path,) if untracked else ()) and self._not_output(
                path, base, excluded
            ):
                found.add(path)
        return found

    def _walk_matching(self, base: str, globs: GlobSet, nested: Sequence[str]) -> Iterator[str]:
        ignored_dirs, ignored_files = self._l.ignored_dirs, self._l.ignored_files
        inner = frozenset(nested)
        cut = len(base)

        def descend(rel: str) -> bool:
            name = rel.rpartition("/")[2]
            if name in WALK_SKIP or is_under(rel, ignored_dirs) or is_under(rel, inner):
                return False
            return globs.could_match_under(rel[cut:])

        for root in globs.roots():
            start = root_path(base, root)
            if (
                is_under(start, ignored_dirs)
                or is_under(start, inner)
                or symlinked_ancestor(self.root, start)
            ):
                continue
            for path in walk_files(self.root, start, descend):
                if (
                    path not in ignored_files
                    and not is_under(path, ignored_dirs)
                    and globs.match(path[cut:])
                ):
                    yield path

        def into(rel: str) -> bool:
            return rel.rpartition("/")[2] not in WALK_SKIP and not is_under(rel, ignored_dirs)

        for (
            link,
            target,
        ) in self._links.dirs.items():  # what a directory link leads to, seen through it
            if (
                link.startswith(base)
                and not is_under(link, inner)
                and globs.could_match_under(link[cut:])
            ):
                for real in walk_files(self.root, target, into):
                    path = link + real[len(target) :]
                    if (
                        real not in ignored_files
                        and not is_under(real, ignored_dirs)
                        and globs.match(path[cut:])
                    ):
                        yield path

    def _first_not_ignored(self, new: list[str], query=None) -> str | None:
        """The first new path git would not ignore, or that the globs reach though it is ignored
        (all of them count without git)."""
        kept = self._not_ignored(new, query)
        return kept[0] if kept else None

    def _not_ignored(self, new: list[str], query=None) -> list[str]:
        """`new` less the paths git ignores that the globs do not reach (`_first_not_ignored`)."""
        unknown = [p for p in new if p not in self._path_set and p not in self._l.ignored_files]
        if not self.git or not unknown:
            return new
        ignored = self._check_ignore(unknown)
        if ignored is None:  # git failed: count every new path, the safe side
            return new
        entries: dict[str, str] = {}
        if ignored and query is not None:  # each ignored path's outermost ignored directory, if any
            ancestors = sorted({p[:i] for p in ignored for i in _slashes(p)})
            dirs = self._check_ignore(ancestors) if ancestors else set()
            for p in ignored:
                entries[p] = next((p[:i] for i in _slashes(p) if dirs is None or p[:i] in dirs), p)
        return [
            p
            for p in new
            if p not in ignored or (query is not None and self._reaches(p, entries[p], query))
        ]

    def _check_ignore(self, paths: list[str]) -> set[str] | None:
        """Which of `paths` git ignores; None when git failed."""
        proc = subprocess.run(
            ["git", "check-ignore", "--stdin", "-z"],
            cwd=self.root,
            input="\0".join(paths).encode() + b"\0",
            capture_output=True,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
        if proc.returncode not in (0, 1):
            return None
        return {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}


def _slashes(path: str) -> list[int]:
    return [i for i, ch in enumerate(path) if ch == "/"]


def _overlap(roots: Sequence[str], others: Sequence[str]) -> bool:
    """Whether a path could lie under one of `roots` and one of `others` (glob roots: literal heads)."""
    return any(
        a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")
        for a in roots
        for b in others
    )


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
    """The patch files `bun.lock` names: editing a patch changes every install."""
    witness.read(os.path.join(root, "bun.lock"))
    try:
        text = (root / "bun.lock").read_text("utf-8", "replace")
    except OSError:
        return []
    block = _BUN_PATCHES.search(text)
    return sorted(set(_JSON_STRING_VALUE.findall(block.group(1)))) if block else []


def fingerprint_paths(root: Path, index: FileIndex) -> list[str]:
    """The files the workspace fingerprint folds, present or not (all re-checked after tasks)."""
    names = list(FINGERPRINT_FILES)
    if index.identity("bun.lock"):
        names += [p for p in _bun_patch_files(Path(root)) if not p.startswith(("/", "../"))]
    return names


def fingerprint(root: Path, index: FileIndex, skip: Sequence[str] = ()) -> str:
    """xxh3-64 hex of the root lockfiles and install settings present, in a fixed order; `skip`
    names the lockfiles keyed per project instead (vx.files.lockfile), which are still
    re-checked after a task ran.

    Each file contributes `name NUL identity NUL`, the identity being the index OID when git
    vouches for it, so a clean lockfile is never read.
    """
    import xxhash

    h = xxhash.xxh3_64()
    index.fingerprinted = fingerprint_paths(root, index)
    for name in index.fingerprinted:
        if name in skip:
            continue
        ident = index.identity(name)
        if ident:
            h.update(f"{name}\0{ident}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _on_path(program: str) -> bool:
    """Whether PATH holds an executable `program`: what `shutil.which` answers, without importing
    shutil, whose archive support loads bz2 and lzma (docs/optimizations.md #24)."""
    search = os.environ.get("PATH")
    if search is None:
        search = os.confstr("CS_PATH") or os.defpath
    for directory in search.split(os.pathsep) if search else ():
        path = os.path.join(directory or os.curdir, program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return True
    return False
