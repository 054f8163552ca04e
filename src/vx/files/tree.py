"""Walking the workspace tree: files and symlinks under a start, never following a link.

Shared by the input listing (no git, nested repos), the index's re-walk before a save and the output
walks; paths are POSIX strings relative to the workspace root ("" is the root).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from vx import witness

WALK_SKIP = frozenset({".git", ".vx", "node_modules"})


def walk_files(root: Path, start: str, descend: Callable[[str], bool], notes=witness) -> list[str]:
    """Workspace-relative files and symlinks at or under `start`, never following a link.

    `descend(rel_dir)` decides which directories are entered; the caller says where
    (`not_skipped` keeps out of `.git`, `.vx` and `node_modules`). `notes` is told what was
    listed and probed: planning's witness unless the caller keeps its own (`witness.Notes`).
    """
    out: list[str] = []
    base = os.path.join(root, start) if start else str(root)
    notes.probed(base)
    try:
        st = os.lstat(base)
    except OSError:
        return out
    if not stat.S_ISDIR(st.st_mode):
        return [start] if start and _is_file_or_link(st.st_mode) else out
    stack = [start]
    while stack:
        d = stack.pop()
        here = os.path.join(root, d) if d else str(root)
        notes.read(here)
        try:
            entries = list(os.scandir(here))
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


def not_skipped(rel: str) -> bool:
    return rel.rpartition("/")[2] not in WALK_SKIP


def _is_file_or_link(mode: int) -> bool:
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def symlinked_ancestor(
    root: Path, rel: str, seen: dict[str, bool | None] | None = None, notes=witness
) -> str | None:
    """The first directory on the way to `rel` that is a symlink (a walk must not pass it).

    `seen` remembers each ancestor's answer (True: a link, None: missing) across the walks of
    one batch, where nothing runs in between: a thousand projects share `packages/`."""
    parts = rel.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        head = "/".join(parts[:i])
        link = (
            seen.get(head, False)
            if seen is not None and head in seen
            else _is_link(root, head, notes)
        )
        if seen is not None:
            seen[head] = link
        if link is None:
            return None
        if link:
            return head
    return None


def _is_link(root: Path, head: str, notes=witness) -> bool | None:
    path = os.path.join(root, head)
    notes.probed(path)
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return None


def is_under(path: str, dirs: frozenset[str] | set[str]) -> bool:
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


def base_of(project_dir: str) -> str:
    return project_dir + "/" if project_dir else ""


def root_path(base: str, root: str) -> str:
    """A glob root joined onto a project base ("" + "" is the workspace root)."""
    return base + root if root else base.rstrip("/")
