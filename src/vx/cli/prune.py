"""`vx prune PKG… [--docker] [--out-dir DIR]`: turbo's prune — a partial workspace holding the
named packages, the workspace packages they depend on (all dependency fields, transitively), the
root's files and a lockfile cut to that closure (vx.files.lockfile_subset).

With `--docker` the output is split for an image's layer cache: `json/` holds what an install
reads (every kept manifest, the lockfile, the manager's config), `full/` the whole pruned
workspace, and the lockfile sits at the top of the out dir too, as turbo puts it. The copy
itself (what may be copied, and writing it without leaving the out dir) is vx.files.subset.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vx.cli.args import Args
from vx.errors import UnknownTaskError, UsageError, suggestion
from vx.files.lockfile import LOCKFILES
from vx.model import ROOT_PROJECT, Workspace

if TYPE_CHECKING:
    from vx.files.lockfile_subset import Pruned

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


def prune_verb(args: Args, argv: list[str]) -> int:
    from vx.files import subset
    from vx.files.lockfile_subset import prune_lockfiles
    from vx.workspace import discover as workspace

    targets = [*args.names, *args.scope]
    if not targets:
        raise UsageError(
            "`vx prune` needs the package(s) to keep", hint="e.g. `vx prune web --docker`"
        )
    ws = workspace.discover(Path(os.getcwd()))
    root = str(ws.root)
    out = subset.out_dir(root, args.out_dir or "out")
    keep = _closure(ws, targets)
    while True:  # a link only the lockfile shows (a manifest range vx did not match) joins too
        pruned = prune_lockfiles(ws, keep)
        if not pruned.more:
            break
        keep = _closure(ws, [*keep, *pruned.more])
    files = subset.listing(ws.root)
    members = {p.dir for n, p in ws.packages.items() if n != ROOT_PROJECT}
    kept_dirs = {ws.packages[n].dir for n in keep}
    plan = _plan(ws, files, kept_dirs, members - kept_dirs, pruned, args.docker)
    subset.write_tree(root, out, plan)
    shown = os.path.relpath(out) if out.startswith(os.getcwd() + os.sep) else out
    lines = [f"Generating pruned monorepo for {', '.join(targets)} in {shown}"]
    lines += [f" - Added {name}" for name in sorted(keep)]
    if not pruned.lockfiles:
        lines.append(" - no lockfile at the workspace root: none written")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _closure(ws: Workspace, targets: list[str]) -> set[str]:
    """The named packages and every workspace package they link to, transitively."""
    names = [n for n in ws.packages if n != ROOT_PROJECT]
    todo = []
    for name in targets:
        if name == ROOT_PROJECT or name not in ws.packages:
            raise UnknownTaskError(
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


def _under(path: str, d: str) -> bool:
    return d == "" or path.startswith(d + "/")


def _plan(
    ws: Workspace,
    files: list[str],
    kept: set[str],
    dropped: set[str],
    pruned: Pruned,
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
        home = max((d for d in (*kept, *dropped) if d and _under(rel, d)), key=len, default=None)
        if home is None or home in dropped:
            continue  # outside every member, or in a package the target does not need
        plan[full + rel] = rel
        if json_dir is not None and rel in manifests:
            plan[json_dir + rel] = rel
    for name, text in pruned.lockfiles.items():
        data = text.encode("utf-8")
        plan[full + name] = data
        if json_dir is not None:
            plan[json_dir + name] = data
            plan[name] = data
    for name, data in pruned.files.items():  # root files the cut changed (package.json, …)
        for at in (full, json_dir) if json_dir is not None else (full,):
            plan[at + name] = data
    return plan
