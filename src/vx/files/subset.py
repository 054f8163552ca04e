"""A part of the workspace written elsewhere (`vx prune`): the files it may copy — what git lists,
never .git, .vx or node_modules — and the writing of the copy, which stays inside its out dir.

The copy is written into a fresh directory beside the out dir and renamed into place, so a
failed write leaves nothing half-done. Each path is checked to stay inside it, every parent is
made as a real directory (a link on the way is refused), each file is created new with
`O_EXCL | O_NOFOLLOW`, and a link is copied as a link — nothing is written through one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from vx.errors import ConfigError, EnvironmentFailure, UsageError

_NEVER_COPIED = frozenset({".git", ".vx", "node_modules"})


def out_dir(root: str, given: str) -> str:
    """The out dir, relative to the workspace root as turbo's is; it must be new or empty, hold
    neither the workspace nor a file git tracks, and lie outside .git and .vx."""
    out = os.path.abspath(os.path.join(root, given))
    if os.path.commonpath([out, root]) == out:  # the root or above it (`/` included)
        raise UsageError(
            f"--out-dir {given} would hold the workspace itself",
            hint="choose a new directory, e.g. `--out-dir out`",
        )
    inside = os.path.relpath(out, root).split(os.sep) if out.startswith(root + os.sep) else []
    if ".git" in inside or ".vx" in inside:  # an empty .git/hooks would take root files as hooks
        raise UsageError(
            f"--out-dir {given} lies inside .git or .vx",
            hint="choose a directory of its own, e.g. `--out-dir out`",
        )
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out) or os.listdir(out)):
        tracked = _tracked(root, "/".join(inside)) if inside else None
        if tracked:
            raise UsageError(  # never a hint to remove sources
                f"--out-dir {given} holds files of the workspace",
                hint="choose a new directory, e.g. `--out-dir out`",
            )
        # the command only for an earlier prune's output, which git does not track; a dir
        # outside the workspace may be anything of the user's
        remove = f"remove it first (`rm -rf {given}`)" if tracked is False else "remove it first"
        raise UsageError(
            f"the out dir {out} already exists and is not empty",
            hint=f"{remove} or choose another with --out-dir",
        )
    return out


def _tracked(root: str, rel: str) -> bool | None:
    """Whether git tracks `rel` or a file under it; None outside git (nobody can tell)."""
    try:
        proc = subprocess.run(["git", "ls-files", "-z", "--", rel], cwd=root, capture_output=True)
    except OSError:
        return None
    return bool(proc.stdout) if proc.returncode == 0 else None


def listing(root: Path) -> list[str]:
    """The workspace's files as the copy sees them: what git lists (tracked, and untracked but not
    ignored), or every file outside a git repository; never .git, .vx or node_modules."""
    from vx.files.tree import walk_files

    paths: set[str] = set()
    proc = None
    if shutil.which("git"):
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
        )
    # git vouches for the workspace only if it lists the root's own manifest: inside a directory
    # an outer repository ignores, it lists nothing, and the tree is walked instead
    if proc is not None and proc.returncode == 0 and _lists_root(proc.stdout, root):
        for raw in proc.stdout.split(b"\0"):
            rel = os.fsdecode(raw)
            if not rel:
                continue
            if os.path.isdir(os.path.join(root, rel)) and not os.path.islink(
                os.path.join(root, rel)
            ):
                paths.update(walk_files(root, rel, _descend))  # a nested repository: its files
            else:
                paths.add(rel)
    else:  # not a git repository (or no git): the tree as it is
        paths.update(walk_files(root, "", _descend))
    return sorted(p for p in paths if not _NEVER_COPIED.intersection(p.split("/")))


def _lists_root(out: bytes, root: Path) -> bool:
    names = set(out.split(b"\0"))
    return any(
        name in names
        for name in (b"package.json", b"pnpm-workspace.yaml")
        if (root / name.decode()).exists()
    )


def _descend(rel: str) -> bool:
    return rel.rpartition("/")[2] not in _NEVER_COPIED


def write_tree(root: str, out: str, plan: dict[str, str | bytes]) -> None:
    """Write `plan` (out-dir-relative path -> a workspace-relative file to copy, or the bytes to
    write) into a fresh directory beside `out`, then rename it into place."""
    parent = os.path.dirname(out)
    try:
        os.makedirs(parent, exist_ok=True)
        temp = os.path.join(parent, f".{os.path.basename(out)}.vx-prune-{os.getpid()}")
        os.mkdir(temp, 0o755)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot create the out dir {out}: {exc.strerror}",
            hint="check the permissions of its parent, or choose another with --out-dir",
        ) from None
    try:
        for rel in sorted(plan):
            _write_one(temp, rel, plan[rel], root)
        if os.path.isdir(out):
            os.rmdir(out)  # empty (checked before): replaced by the finished tree
        os.rename(temp, out)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot write the pruned workspace: {exc.strerror}",
            facts=(f"at: {exc.filename}",) if exc.filename else (),
            hint="check the free space and permissions where the out dir goes",
        ) from None
    finally:
        if os.path.isdir(temp):
            shutil.rmtree(temp, ignore_errors=True)  # ours alone: made above, removed on failure


def _write_one(base: str, rel: str, what: str | bytes, root: str) -> None:
    """One file of the plan, never through a link (the module's docstring)."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(  # discovery keeps members under the root; this is the backstop
            f"refusing to write `{rel}`: the path leaves the out dir", file=rel
        )
    here = base
    for part in parts[:-1]:
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            os.mkdir(here, 0o755)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise ConfigError(
                f"refusing to write `{rel}`: `{os.path.relpath(here, base)}` is not a directory",
                file=rel,
                hint="a file and a directory share a path in the workspace's listing",
            )
    dest = os.path.join(here, parts[-1])
    if isinstance(what, bytes):
        data, mode = what, 0o644
    else:
        src = os.path.join(root, what)
        try:
            st = os.lstat(src)
        except FileNotFoundError:
            return  # listed by git, deleted since
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dest)
            return
        if not stat.S_ISREG(st.st_mode):
            return
        with open(src, "rb") as f:
            data = f.read()
        mode = 0o755 if st.st_mode & 0o111 else 0o644
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
