"""Walking and wiping a task's declared outputs.

Only the glob roots are walked, links are never followed and `.git`/`.vx` never entered; a
wipe removes files and links (never a link's target) and prunes the directories it emptied.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

from vx import witness
from vx.errors import EnvironmentFailure
from vx.files.globs import GlobSet
from vx.files.tree import _base, _root_path, _symlinked_ancestor, _under, _walk_files

_NEVER_OUTPUT = re.compile(r"(?:^|/)(?:\.git|\.vx)(?:/|$)")


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
            or _under(rel, inner)
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
        start = _root_path(base, glob_root)
        link = _symlinked_ancestor(root, start, seen, notes) if start else None
        paths = [link] if link else _walk_files(root, start, descend, notes)
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
        _walk_output_set(root, _base(project_dir), globs, nested, seen, notes) if globs else set()
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
    base = _base(project_dir)
    keep = {"", project_dir} | {
        _root_path(base, r) for r in (globs.wildcard_roots() if globs else ())
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
