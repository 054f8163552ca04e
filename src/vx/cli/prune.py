"""`vx prune PKG… [--docker] [--out-dir DIR]`: turbo's prune — a partial workspace holding the
named packages, the workspace packages they depend on (all dependency fields, transitively), the
root's files and a lockfile cut to that closure (vx.files.lockfile_subset).

With `--docker` the output is split for an image's layer cache: `json/` holds what an install
reads (every kept manifest, the lockfile, the manager's config), `full/` the whole pruned
workspace, and the lockfile sits at the top of the out dir too, as turbo puts it.

The output is written into a fresh directory beside the out dir and renamed into place, so a
failed prune leaves nothing half-written; every path is checked to stay inside it, and nothing
is ever written through a link.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from vx.cli.args import Args
from vx.errors import ConfigError, EnvironmentFailure, UsageError, suggestion
from vx.files.lockfile import LOCKFILES
from vx.model import ROOT_PROJECT, Workspace

# Root files an install reads besides the manifests and the lockfile: they go into `json/` too.
INSTALL_FILES = (
    "pnpm-workspace.yaml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "bunfig.toml",
    ".pnpmfile.cjs",
)
INSTALL_DIRS = (".yarn/releases", ".yarn/plugins", ".yarn/patches", "patches")
_NEVER_COPIED = frozenset({".git", ".vx", "node_modules"})


def prune_verb(args: Args, say) -> int:
    from vx.workspace import discover as workspace

    targets = [*args.names, *args.scope]
    if not targets:
        raise UsageError(
            "`vx prune` needs the package(s) to keep", hint="e.g. `vx prune web --docker`"
        )
    ws = workspace.discover(Path(os.getcwd()))
    root = str(ws.root)
    out = _out_dir(root, args.out_dir or "out")
    keep = _closure(ws, targets)
    lockfiles = _pruned_lockfiles(ws, keep)
    files = _listing(ws.root)
    members = {p.dir for n, p in ws.packages.items() if n != ROOT_PROJECT}
    kept_dirs = {ws.packages[n].dir for n in keep}
    plan = _plan(ws, files, kept_dirs, members - kept_dirs, lockfiles, args.docker)
    _write_all(root, out, plan)
    shown = os.path.relpath(out) if out.startswith(os.getcwd() + os.sep) else out
    lines = [f"Generating pruned monorepo for {', '.join(targets)} in {shown}"]
    lines += [f" - Added {name}" for name in sorted(keep)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _out_dir(root: str, given: str) -> str:
    """The out dir, relative to the workspace root as turbo's is; it must be new or empty."""
    out = os.path.abspath(os.path.join(root, given))
    if out == root or root.startswith(out + os.sep):
        raise UsageError(
            f"--out-dir {given} would hold the workspace itself",
            hint="choose a new directory, e.g. `--out-dir out`",
        )
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out) or os.listdir(out)):
        raise UsageError(
            f"the out dir {out} already exists and is not empty",
            hint=f"remove it first (`rm -rf {given}`) or choose another with --out-dir",
        )
    return out


def _closure(ws: Workspace, targets: list[str]) -> set[str]:
    """The named packages and every workspace package they link to, transitively."""
    names = [n for n in ws.packages if n != ROOT_PROJECT]
    todo = []
    for name in targets:
        if name == ROOT_PROJECT or name not in ws.packages:
            raise UsageError(
                f"no package named `{name}` in the workspace",
                hint=suggestion(name, names, noun="packages") or "see `vx show` for the packages",
            )
        todo.append(name)
    keep: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(ws.packages[name].deps)
    return keep


def _pruned_lockfiles(ws: Workspace, keep: set[str]) -> dict[str, str]:
    """Each root lockfile present, cut to the kept packages; the kept set grows by any workspace
    package the lockfile links them to that the manifests did not show."""
    from vx.files.lockfile_subset import subset

    root = str(ws.root)
    present = [name for name in LOCKFILES if os.path.isfile(os.path.join(root, name))]
    if not present and os.path.isfile(os.path.join(root, "bun.lockb")):
        raise ConfigError(
            "vx cannot prune bun's binary lockfile",
            file="bun.lockb",
            hint="`bun install --save-text-lockfile` writes the text bun.lock vx reads (bun 1.2 "
            "writes it by default); then delete bun.lockb",
        )
    projects = {p.dir: {"name": p.name, "manifest": ""} for p in ws.packages.values()}
    by_dir = {p.dir: n for n, p in ws.packages.items()}
    out: dict[str, str] = {}
    for name in present:
        text = _read_text(root, name)
        while True:
            dirs = {ws.packages[n].dir for n in keep}
            cut = subset(name, text, root, projects, dirs)
            outside = sorted(d for d in cut.reached if d not in by_dir)
            if outside:
                raise ConfigError(
                    f"the kept packages depend on `{outside[0]}`, which is no workspace package",
                    file=name,
                    hint="a pruned workspace holds only workspace packages; make it one, or "
                    "depend on a published version",
                )
            more = {by_dir[d] for d in cut.reached} - keep - {ROOT_PROJECT}
            if not more:
                break
            keep |= more
        out[name] = cut.text
    return out


def _read_text(root: str, name: str) -> str:
    try:
        with open(os.path.join(root, name), "rb") as f:
            return f.read().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the lockfile: {exc.strerror}", file=name) from None
    except UnicodeDecodeError:
        raise ConfigError(
            "the lockfile is not UTF-8 text", file=name, hint="reinstall to rewrite it"
        ) from None


def _listing(root: Path) -> list[str]:
    """The workspace's files as the copy sees them: what git lists (tracked, and untracked but not
    ignored), or every file outside a git repository; never .git, .vx or node_modules."""
    from vx.files.tree import _walk_files

    paths: set[str] = set()
    proc = None
    if shutil.which("git"):
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
        )
    if proc is not None and proc.returncode == 0:
        for raw in proc.stdout.split(b"\0"):
            rel = os.fsdecode(raw)
            if not rel:
                continue
            if os.path.isdir(os.path.join(root, rel)) and not os.path.islink(
                os.path.join(root, rel)
            ):
                paths.update(_walk_files(root, rel, _descend))  # a nested repository: its files
            else:
                paths.add(rel)
    else:  # not a git repository (or no git): the tree as it is
        paths.update(_walk_files(root, "", _descend))
    return sorted(p for p in paths if not _NEVER_COPIED.intersection(p.split("/")))


def _descend(rel: str) -> bool:
    return rel.rpartition("/")[2] not in _NEVER_COPIED


def _under(path: str, d: str) -> bool:
    return d == "" or path.startswith(d + "/")


def _plan(
    ws: Workspace,
    files: list[str],
    kept: set[str],
    pruned: set[str],
    lockfiles: dict[str, str],
    docker: bool,
) -> dict[str, str | bytes]:
    """Out-dir-relative path -> the source file (workspace-relative) or the bytes to write."""
    full, json_dir = ("full/", "json/") if docker else ("", None)
    manifests = {ws.packages[n].manifest_path for n in ws.packages if ws.packages[n].dir in kept}
    manifests.add("package.json")
    plan: dict[str, str | bytes] = {}
    for rel in files:
        if "/" not in rel:  # a root file: the workspace's configs
            if rel in LOCKFILES or rel == "bun.lockb":
                continue  # the pruned lockfiles are written below; a stale one is not copied
            plan[full + rel] = rel
            if json_dir is not None and (rel in INSTALL_FILES or rel in manifests):
                plan[json_dir + rel] = rel
            continue
        if any(_under(rel, d) for d in INSTALL_DIRS):
            plan[full + rel] = rel
            if json_dir is not None:
                plan[json_dir + rel] = rel
            continue
        home = max((d for d in (*kept, *pruned) if d and _under(rel, d)), key=len, default=None)
        if home is None or home in pruned:
            continue  # outside every member, or in a package the target does not need
        plan[full + rel] = rel
        if json_dir is not None and rel in manifests:
            plan[json_dir + rel] = rel
    for name, text in lockfiles.items():
        data = text.encode("utf-8")
        plan[full + name] = data
        if json_dir is not None:
            plan[json_dir + name] = data
            plan[name] = data
    return plan


def _write_all(root: str, out: str, plan: dict[str, str | bytes]) -> None:
    """Write the plan into a fresh directory beside `out`, then rename it into place."""
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
    """One file of the plan: its parents made one by one as real directories (a link on the way
    is refused), the file created new (`O_EXCL | O_NOFOLLOW`). A link is copied as a link."""
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
