"""Walking and wiping a task's declared outputs.

Only the glob roots are walked, links are never followed and `.git`/`.vx` never entered; a
wipe removes files and links (never a link's target) and prunes the directories it emptied.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

from msgspec import Struct

from vx import witness
from vx.errors import EnvironmentFailure
from vx.files.globs import GlobSet
from vx.files.tree import base_of, is_under, root_path, symlinked_ancestor, walk_files

_NEVER_OUTPUT = re.compile(r"(?:^|/)(?:\.git|\.vx)(?:/|$)")


class InputQuery(Struct, frozen=True):
    """What `files` needs to enumerate (and later re-check) one task's inputs."""

    project_dir: str
    globs: GlobSet
    workspace_globs: GlobSet | None
    excluded: GlobSet | None
    nested: tuple[str, ...]
    reach: GlobSet | None = None  # the globs that reach ignored files, when not `globs` itself
    # vx's own `**` (a task without `cache`, the implicit build), not globs the user wrote: a
    # link out of the workspace is keyed as the link, never refused (vx.files.links)
    links_as_links: bool = False


class OutputSpec:
    """A cached task's declared outputs: walked to save, wiped before exec/restore, and the
    only paths a restore may write. `members` are the dirs of every project:
    what the globs match is this task's only when `owns` says so (`vx.files.outputs.claimable`)."""

    additive = False  # adds to files an upstream task also writes (AdditiveOutputs)
    spared: tuple[str, ...] = ()  # what the last wipe left: other tasks' writes of this run

    def __init__(
        self,
        project_dir: str,
        patterns: Sequence[str],
        ws_patterns: Sequence[str],
        query: InputQuery,
        members: frozenset[str] = frozenset(),
        tracked: Callable[[str], bool] | None = None,
    ):
        self.project_dir = project_dir
        self.members = members
        self.tracked = tracked
        self.patterns = tuple(patterns)
        self.globs = GlobSet(patterns) if patterns else None
        self.ws_globs = GlobSet(ws_patterns) if ws_patterns else None
        self.declares_files = bool(patterns or ws_patterns)
        self.input_query = query
        self._prefix = project_dir + "/" if project_dir else ""
        self.manifest = self._prefix + "package.json"
        self._node_modules = any(
            g is not None and g.names("node_modules") for g in (self.globs, self.ws_globs)
        )

    def walk(self, root: Path, seen: dict | None = None) -> list[str]:
        if not self.declares_files:
            return []
        return [
            p
            for p in walk_outputs(root, self.project_dir, self.globs, self.ws_globs, seen=seen)
            if self.owns(p)
        ]

    def walk_for_save(self, root: Path) -> tuple[list[str], list[str]]:
        """What the globs match now: what the task owns, and what it may not keep (`owns`). The
        second withholds the save: dropping those files would make a hit that lacks them."""
        owned: list[str] = []
        disowned: list[str] = []
        if self.declares_files:
            for p in walk_outputs(root, self.project_dir, self.globs, self.ws_globs):
                (owned if self.owns(p) else disowned).append(p)
        return owned, disowned

    def state(self, root: Path) -> tuple[list[str], dict[str, bool]]:
        """Where the outputs live and what walking them reads: the absolute glob roots, and each
        path the walk listed (True) or probed (False) — what a receipt keeps per task."""
        notes = witness.Notes()
        if self.declares_files:
            walk_outputs(root, self.project_dir, self.globs, self.ws_globs, notes=notes)
        base = os.path.join(root, self.project_dir) if self.project_dir else str(root)
        roots = [
            os.path.join(base, r) if r else base for r in (self.globs.roots() if self.globs else ())
        ]
        roots += [
            os.path.join(root, r) if r else str(root)
            for r in (self.ws_globs.roots() if self.ws_globs else ())
        ]
        return roots, notes.table

    def wipe(self, root: Path, spare_since_ns: int | None = None) -> None:
        """Delete what the output globs match and the task owns. With `spare_since_ns` (the run's
        start, at a task's first opening), a file changed since then stays, and `spared` names
        it: another task of this run wrote it before this one started, as a `tsc -b` building a
        referenced project into that project's outputs does. Deleting it under that writer would
        break its build, and nothing this run wrote is a stale output."""
        self.spared = ()
        if not self.declares_files:
            return
        owns = self._wipeable
        if spare_since_ns is not None:
            spared: list[str] = []
            owns = functools.partial(self._not_fresh, root, spare_since_ns, spared)
        wipe_outputs(root, self.project_dir, self.globs, self.ws_globs, owns=owns)
        if spare_since_ns is not None:
            self.spared = tuple(sorted(spared))

    def _wipeable(self, path: str) -> bool:
        """A file git tracks is a source (a committed `legacy.js` beside a compiler's `*.js`): the
        task may overwrite it, a restore writes it back, but a wipe never deletes it. Nor the
        project's package.json (an output when its build rewrites it), tracked or not."""
        if path == self.manifest:
            return False
        return self.owns(path) and not (self.tracked is not None and self.tracked(path))

    def _not_fresh(self, root: Path, since_ns: int, spared: list[str], path: str) -> bool:
        """`_wipeable`, and not changed since `since_ns` (its ctime, which no tool sets back)."""
        if not self._wipeable(path):
            return False
        try:
            fresh = os.lstat(os.path.join(root, path)).st_ctime_ns >= since_ns
        except OSError:
            return True
        if fresh:
            spared.append(path)
        return not fresh

    def allows(self, path: str) -> bool:
        """Whether a restore may write `path`: matched by the output globs, and `owns` it."""
        if self.ws_globs is not None and self.ws_globs.matches(path):
            return self.owns(path)
        prefix = self._prefix
        return (
            self.globs is not None
            and path.startswith(prefix)
            and self.globs.matches(path[len(prefix) :])
            and self.owns(path)
        )

    def owns(self, path: str) -> bool:
        """Whether a path the output globs match is this task's to write and wipe: never `.git`,
        `.vx`, an unnamed `node_modules`, another project's tree, or one of the task's inputs."""
        return claimable(
            path, self.project_dir, self.members, self._node_modules
        ) and not self._is_input(path)

    def _is_input(self, path: str) -> bool:
        """Whether `path` is in the task's input set: what the input globs match, less what the
        project output globs carve out (as `files.FileIndex.inputs` selects)."""
        q, prefix = self.input_query, self._prefix
        if path.startswith(prefix):
            rel = path[len(prefix) :]
            if q.excluded is not None and q.excluded.match(rel):
                return False
            if q.globs.match(rel):
                return True
        return q.workspace_globs is not None and q.workspace_globs.match(path) is not None


class AdditiveOutputs(OutputSpec):
    """A dependant that adds to its upstream's outputs (`rules.exclusiveOutputs: false`).

    Nothing is wiped before it runs or before a restore — that would delete the upstream's files —
    so the files under its globs are stamped instead, and it owns (saves) only the files it added or
    changed. One that removed a file saves nothing: restoring its artifact could not remove it again.
    """

    additive = True
    # An Nx target's entry holds every file under its outputs when it ends, as Nx archives them:
    # a restore then gives back what an upstream without outputs wrote there (nx-console's
    # `extract-dependencies` copying codicons into `_build`'s dist), which the upstream's own
    # wipe-and-restore deletes (docs/caching.md, additive outputs).
    whole = False

    def __init__(self, *args, whole: bool = False):
        super().__init__(*args)
        self._stamps: dict[str, tuple[int, ...]] | None = None
        self.removed: tuple[str, ...] = ()
        self.whole = whole

    def wipe(self, root: Path, spare_since_ns: int | None = None) -> None:
        self._stamps = (
            {p: file_stamp(root, p) for p in super().walk(root)} if self.declares_files else {}
        )
        self.removed = ()

    def walk(self, root: Path, seen: dict | None = None) -> list[str]:
        files = super().walk(root, seen)
        if self._stamps is None:  # a hit's up-to-date check: the whole tree under its globs
            return files
        present = set(files)
        self.removed = tuple(sorted(p for p in self._stamps if p not in present))
        return [p for p in files if self._stamps.get(p) != file_stamp(root, p)]

    def walk_for_save(self, root: Path) -> tuple[list[str], list[str]]:
        owned, disowned = super().walk_for_save(root)
        if self._stamps is None:
            return owned, disowned
        self.removed = tuple(sorted(set(self._stamps) - set(owned) - set(disowned)))
        moved = [p for p in disowned if self._stamps.get(p) != file_stamp(root, p)]
        if self.whole:  # a file it may not keep withholds the save only when this task wrote it
            return owned, moved
        return [p for p in owned if self._stamps.get(p) != file_stamp(root, p)], moved


def file_stamp(root: Path, rel: str) -> tuple[int, ...]:
    """What tells that a file changed without reading it (size, times, inode, mode); () if gone."""
    try:
        st = os.lstat(os.path.join(root, rel))
    except OSError:
        return ()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def claimable(path: str, project_dir: str, members: frozenset[str], node_modules: bool) -> bool:
    """Whether an output path (root-relative, matched by the output globs) is one a task may own:
    never inside `.git` or `.vx`, inside `node_modules` only when a glob names it, and never in
    another project's tree (the deepest project holding it is the task's own, or the root).
    The walk that saves outputs keeps the same rules (`_output_descend`); this guards restores."""
    if _NEVER_OUTPUT.search(path):
        return False
    parts = path.split("/")
    if not node_modules and "node_modules" in parts:
        return False
    for depth in range(len(parts) - 1, 0, -1):
        holder = "/".join(parts[:depth])
        if holder == project_dir:
            return True
        if holder in members:
            return False
    return True


def _output_descend(base: str, globs: GlobSet, nested: Sequence[str]) -> Callable[[str], bool]:
    """Where an output walk may go: never .git/.vx or a nested project; node_modules if named."""
    cut = len(base)
    inner = frozenset(nested)
    allow_nm = globs.names("node_modules")

    def descend(rel: str) -> bool:
        name = rel.rpartition("/")[2]
        if (
            name in (".git", ".vx")
            or (name == "node_modules" and not allow_nm)
            or is_under(rel, inner)
        ):
            return False
        return globs.could_match_under(rel[cut:])

    return descend


def _walk_output_set(
    root: Path,
    base: str,
    globs: GlobSet,
    nested: Sequence[str],
    seen: dict[str, bool | None] | None,
    notes,
) -> set[str]:
    found = set()
    cut = len(base)
    descend = _output_descend(base, globs, nested)
    for glob_root in globs.roots():
        start = root_path(base, glob_root)
        link = symlinked_ancestor(root, start, seen, notes) if start else None
        paths = [link] if link else walk_files(root, start, descend, notes)
        for path in paths:
            if path.startswith(base) and not _NEVER_OUTPUT.search(path) and globs.match(path[cut:]):
                found.add(path)
    return found


def walk_outputs(
    root: Path,
    project_dir: str,
    globs: GlobSet | None,
    workspace_globs: GlobSet | None = None,
    *,
    nested: Sequence[str] = (),
    seen: dict[str, bool | None] | None = None,
    notes=witness.UNNOTED,
) -> list[str]:
    """The files and symlinks that now match a task's declared outputs, sorted.

    Only the glob roots are walked, links are never followed, `.git`/`.vx` never entered,
    `node_modules` only when a glob names it, and a nested project is not this task's.
    `seen` shares ancestor checks across a batch of walks (the hit lane's). What the walk
    reads is no planning input: `notes` (by default, nobody) hears of it.
    """
    found = (
        _walk_output_set(root, base_of(project_dir), globs, nested, seen, notes) if globs else set()
    )
    if workspace_globs:
        found |= _walk_output_set(root, "", workspace_globs, (), seen, notes)
    return sorted(found)


def wipe_outputs(
    root: Path,
    project_dir: str,
    globs: GlobSet | None,
    workspace_globs: GlobSet | None = None,
    *,
    nested: Sequence[str] = (),
    owns: Callable[[str], bool] | None = None,
) -> list[str]:
    """Remove every current output (files and links, never a link's target); return what went.

    Emptied directories are pruned up to the project dir, but the literal root of a wildcard
    glob (`dist` of `dist/**`) is kept: tools often expect it to exist. `owns`, when given,
    keeps what the globs match but the task may not own (`OutputSpec.owns`).
    """
    root = Path(root)
    removed = walk_outputs(root, project_dir, globs, workspace_globs, nested=nested)
    if owns is not None:  # what the globs match but the task may not own is never deleted
        removed = [p for p in removed if owns(p)]
    if not removed:
        return removed
    beneath = _Beneath(str(root))
    try:
        for path in removed:
            try:
                beneath.remove(path, os.unlink)
            except (FileNotFoundError, _Moved):
                continue
            except OSError as e:
                raise EnvironmentFailure(
                    f"cannot remove output {path}",
                    facts=(str(e),),
                    hint="check the permissions of the file and its directory",
                ) from None
        _prune_empty_dirs(beneath, removed, _kept_dirs(project_dir, globs, workspace_globs))
    finally:
        beneath.close()
    return removed


class _Moved(Exception):
    """A directory on the way is no longer a directory (a link now): what was walked is not there."""


class _Beneath:
    """Removes paths under the root through directory descriptors, each component opened
    `O_NOFOLLOW|O_DIRECTORY` from its parent's: a directory swapped for a symlink during the wipe
    can never make an unlink land outside the workspace (as restores write: store.unpacking.Dirs).
    Paths come sorted, so only the current directory's chain is kept open."""

    _FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, root: str):
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.chain: list[
            tuple[str, int]
        ] = []  # (name, fd) of each component of the current directory

    def remove(self, rel: str, fn: Callable[..., None]) -> None:
        parent, _, name = rel.rpartition("/")
        fn(name, dir_fd=self._dir(parent.split("/") if parent else []))

    def _dir(self, parts: list[str]) -> int:
        keep = 0
        while keep < len(self.chain) and keep < len(parts) and self.chain[keep][0] == parts[keep]:
            keep += 1
        for _, fd in self.chain[keep:]:
            os.close(fd)
        del self.chain[keep:]
        fd = self.chain[-1][1] if self.chain else self.root_fd
        for name in parts[keep:]:
            try:
                fd = os.open(name, self._FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _Moved from None
                raise
            self.chain.append((name, fd))
        return fd

    def close(self) -> None:
        for _, fd in self.chain:
            os.close(fd)
        os.close(self.root_fd)


def _kept_dirs(
    project_dir: str, globs: GlobSet | None, workspace_globs: GlobSet | None
) -> set[str]:
    base = base_of(project_dir)
    keep = {"", project_dir} | {
        root_path(base, r) for r in (globs.wildcard_roots() if globs else ())
    }
    if workspace_globs:
        keep |= set(workspace_globs.wildcard_roots())
    return keep


def _prune_empty_dirs(beneath: _Beneath, removed: Iterable[str], keep: set[str]) -> None:
    """rmdir the now-empty ancestors of removed files, deepest first, stopping at `keep`."""
    dirs: set[str] = set()
    for path in removed:
        d = path.rpartition("/")[0]
        while d and d not in keep and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    for d in sorted(dirs, key=lambda x: (-x.count("/"), x)):
        try:
            beneath.remove(d, os.rmdir)
        except (OSError, _Moved):
            pass  # not empty (or already gone): some other file still lives there
