"""`--affected[=<ref>]`: only the requested tasks a git change reaches.

The change: from the merge-base of the base ref and HEAD to the worktree, untracked files
included. It seeds *tasks*, not projects — a cached task when a changed path is one of its
declared inputs (`cache.inputs.files` in its project, `workspaceFiles` anywhere); every task of a
project whose `package.json` or config changed, or which holds a changed path no cached task of it
declares; an uncached task for any change in its project. A requested task runs when it, or
anything its `dependsOn` reaches, is a seed. A root fingerprint file (a lockfile, the workspace
config, the root turbo.json, nx.json) selects everything — but a lockfile vx reads per project
(vx.files.lockfile): its change seeds every task of the projects whose share of it moved, the
base's lockfile read from git; and a root file a plugin claims seeds every task of the projects
its plugin names. In an Nx workspace with `plugins`, a file the inference read (a vite.config.ts,
a project.json) seeds every task of its project, and one outside every project
(tsconfig.base.json) everything: the targets themselves may have moved; so does a lockfile, which
may move a plugin. Beyond a project's own files (`_moved_beyond`): a file its code config read
(what the evaluation recorded, `ProjectConfig.reads`), a package its manifest names that was a
member at the base and is none now, a project newly nested in it and a submodule it is in (a
change of the submodule's commit, or in its worktree) all seed its every task; a file the
workspace config read selects everything.

The base: the ref given, else the workspace's `affectedBase`, else on a GitHub pull request
`origin/$GITHUB_BASE_REF`, else `origin/HEAD`, else the first
of `origin/main`, `origin/master`, `main`, `master` that exists and is not the branch checked out,
else `HEAD~1`.
"""

from __future__ import annotations

import os
import subprocess
from typing import Callable, Iterable, Mapping

from vx import witness
from vx.errors import EnvironmentFailure, UsageError
from vx.files.git import check_ref
from vx.files.globs import GlobSet
from vx.files.index import FINGERPRINT_FILES
from vx.model import ROOT_PROJECT, ProjectConfig, TaskGraph, TaskId, Workspace

_WORKSPACE_FILES = (
    "vx.workspace.json",
    "vx.workspace.jsonc",
    "vx.workspace.ts",
    "vx.workspace.mts",
    "vx.workspace.js",
    "vx.workspace.mjs",
    "turbo.json",
    "turbo.jsonc",
    "package.json",
    "nx.json",  # Nx's own answer: an nx.json change touches every project
)
_PROJECT_FILES = ("package.json", "turbo.json", "project.json")
_FALLBACKS = ("origin/main", "origin/master", "main", "master")


def base_ref(
    root: str, given: str | None, configured: str | None, env: Mapping[str, str] | None = None
) -> str:
    """The base: the ref given, the workspace's `affectedBase`, a GitHub pull request's base branch
    (`GITHUB_BASE_REF`), then the usual suspects, then HEAD~1."""
    if not _git(root, ["rev-parse", "--git-dir"], "HEAD", quiet=True).strip():
        raise UsageError(
            f"--affected compares git commits, and {root} is not in a git repository",
            hint="run it in a clone, or name the projects with --filter instead",
        )
    if given:
        return check_ref(given)
    if configured:
        return check_ref(configured)
    pull = (env or {}).get("GITHUB_BASE_REF", "")
    if pull:
        ref = check_ref(f"origin/{pull}")
        if not _resolves(root, ref):
            raise UsageError(
                f"--affected: this is a pull request into `{pull}` (GITHUB_BASE_REF), and {ref} "
                "is not in this clone",
                hint=f"fetch it first: `git fetch --no-tags origin {pull}:refs/remotes/origin/{pull}` "
                "(or `fetch-depth: 0` in actions/checkout)",
            )
        return ref
    if _resolves(root, "origin/HEAD"):
        return "origin/HEAD"
    current = _git(root, ["rev-parse", "--abbrev-ref", "HEAD"], "HEAD", quiet=True).strip()
    for ref in _FALLBACKS:
        if ref != current and ref != f"origin/{current}" and _resolves(root, ref):
            return ref
    if _resolves(root, "HEAD~1"):
        return "HEAD~1"
    raise UsageError(
        "--affected: no base to compare with (no origin/HEAD, main or master, and HEAD has no parent)",
        hint="name one: --affected=<ref>; in a shallow clone, `git fetch --unshallow` first",
    )


def changed_paths(root: str, ref: str, flag: str = "--affected") -> list[str]:
    """Workspace-relative paths changed since the merge-base of `ref` and HEAD, untracked included;
    git's commands go to the receipt, so a replay sees a new change."""
    base = merge_base(root, ref, flag)
    paths = _git(
        root, ["diff", "--name-only", "--no-renames", "--relative", "-z", base], ref, flag=flag
    ).split("\0")
    paths += _git(root, ["ls-files", "--others", "--exclude-standard", "-z"], ref, flag=flag).split(
        "\0"
    )
    return sorted({p for p in paths if p})


def merge_base(root: str, ref: str, flag: str = "--affected") -> str:
    """The commit `ref` and HEAD share; when there is none, why, and what to fetch (a shallow clone)."""
    base = _git(root, ["merge-base", ref, "HEAD"], ref, quiet=True, flag=flag).strip()
    if not base:
        _no_merge_base(root, ref, flag)
    return base


# ---------------------------------------------------------------- seeds


def seeds(
    ws: Workspace,
    configs: Mapping[str, ProjectConfig],
    paths: Iterable[str],
    base: str | None = None,
    claims: Mapping[str, Callable[[], Iterable[str] | None]] | None = None,
    workspace_reads: Iterable[str] = (),
) -> set[TaskId] | None:
    """The tasks the change seeds; None when it reaches everything (a root fingerprint file, or
    a file the workspace config read). With `base` (the merge-base), a changed lockfile seeds
    only the projects its change reaches. `claims`: per root file a plugin keys, the names of the
    projects its change touches (None: every project), as the plugin answers."""
    from vx.files import lockfile

    paths = list(paths)
    claims = claims or {}
    moved = _moved_beyond(ws, configs, paths, base, workspace_reads)
    if moved is None:
        return None
    for p in paths:
        if p in claims:
            names = claims[p]()
            if names is None:
                return None
            moved |= {ws.packages[n].dir for n in names}
        elif p in lockfile.LOCKFILES and base is not None and ws.nx is None:
            # (with Nx's plugins, a lockfile edit may move a plugin and so every inferred target:
            # every project, as Nx answers for any lockfile edit)
            dirs = _lock_moved(ws, p, base)
            if dirs is None:
                return None
            moved |= dirs
        elif p in FINGERPRINT_FILES or p in _WORKSPACE_FILES:
            return None
        elif ws.nx is not None and p in ws.nx.reads:
            # a file Nx's plugins read to infer the targets: every target of its project may move
            holder = ws.package_at(os.path.dirname(p))
            if holder is None or holder.name == ROOT_PROJECT:
                return None
            moved.add(holder.dir)
    by_project_paths = by_project(
        ws, [p for p in paths if p not in lockfile.LOCKFILES and p not in claims]
    )
    out: set[TaskId] = {
        TaskId(name, task)
        for name, pkg in ws.packages.items()
        if pkg.dir in moved and name in configs
        for task in configs[name].tasks
    }
    for project, rels in by_project_paths.items():
        out |= _project_seeds(project, configs[project], rels)
    for name, config in configs.items():  # workspaceFiles reach across projects
        for task, cfg in config.tasks.items():
            if cfg.cache is not None and cfg.cache.input_workspace_files:
                globs = GlobSet(cfg.cache.input_workspace_files, cfg.cache.turbo_globs)
                if any(globs.matches(p) for p in paths):
                    out.add(TaskId(name, task))
            # A turbo.json root task's globs reach into every package (`apps/**`), as turbo's do.
            if (
                name == ROOT_PROJECT
                and cfg.cache is not None
                and cfg.cache.turbo_globs
                and cfg.exec is not None
            ):
                globs = GlobSet(cfg.cache.input_files, True)
                if any(globs.matches(p) for p in paths):
                    out.add(TaskId(name, task))
    return out


def _moved_beyond(
    ws: Workspace,
    configs: Mapping[str, ProjectConfig],
    paths: list[str],
    base: str | None,
    workspace_reads: Iterable[str],
) -> set[str] | None:
    """The project dirs a change reaches from outside their own files: a file their code config
    read (a preset it imports, what that imports in turn); a submodule they are in; a package
    their manifest names that
    was a member at the base and is none now (deleted or renamed); a project newly nested in
    theirs (their files moved to it). None: a file the workspace config read (everything)."""
    changed = set(paths)
    if changed.intersection(workspace_reads):
        return None
    moved = {
        pkg.dir
        for name, pkg in ws.packages.items()
        if name in configs and changed.intersection(configs[name].reads)
    }
    # a submodule is one path to git (its commit): the projects at or under it
    moved |= {
        pkg.dir
        for pkg in ws.packages.values()
        if pkg.dir and changed.intersection(_and_above(pkg.dir))
    }
    if base is not None:
        moved |= _former_dependents(ws, paths, base) | _nest_parents(ws, paths, base)
    return moved


def _and_above(directory: str) -> list[str]:
    """`a/b/c`, `a/b` and `a`."""
    parts = directory.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]


_DEPENDENCY_FIELDS = (
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
)


def _former_dependents(ws: Workspace, paths: list[str], base: str) -> set[str]:
    """The dirs of the projects whose manifest names a package that a changed package.json named
    at the base and no project is named now: their link to it is gone, and what they resolve
    in its place may differ."""
    import json

    gone: set[str] = set()
    for path in paths:
        if os.path.basename(path) != "package.json" or not os.path.dirname(path):
            continue  # (the root's is the workspace's: a change there selects everything)
        text = _git(str(ws.root), ["show", f"{base}:./{path}"], base, quiet=True)
        try:
            name = json.loads(text).get("name") if text else None
        except (ValueError, AttributeError):
            continue
        if isinstance(name, str) and name not in ws.packages:
            gone.add(name)
    if not gone:
        return set()
    return {
        pkg.dir
        for pkg in ws.packages.values()
        for field in _DEPENDENCY_FIELDS
        if isinstance(named := pkg.manifest.get(field), dict) and gone.intersection(named)
    }


def _nest_parents(ws: Workspace, paths: list[str], base: str) -> set[str]:
    """The dirs of the projects a project new since the base is nested in, when its dir held
    files at the base: those were the parent's, and are no longer."""
    root = str(ws.root)
    dirs = {pkg.dir for pkg in ws.packages.values()}
    out: set[str] = set()
    for path in paths:
        here = os.path.dirname(path)
        if os.path.basename(path) != "package.json" or not here or here not in dirs:
            continue
        if _git(root, ["ls-tree", "--name-only", base, "--", path], base, quiet=True).strip():
            continue  # a project at the base already
        if not _git(
            root, ["ls-tree", "-r", "--name-only", base, "--", here + "/"], base, quiet=True
        ):
            continue  # nothing of the parent's was there
        parents = [d for d in dirs if d != here and (not d or here.startswith(d + "/"))]
        if parents:
            out.add(max(parents, key=len))
    return out


def _lock_moved(ws: Workspace, name: str, base: str) -> set[str] | None:
    """The project dirs whose share of lockfile `name` differs between `base` and the worktree;
    None when that cannot be told (the base had none, or either side does not parse)."""
    from vx.errors import VxError
    from vx.files import lockfile

    root = str(ws.root)
    old = _git(root, ["show", f"{base}:./{name}"], base, quiet=True)
    if not old:
        return None
    projects = {p.dir: {"name": p.name, "manifest": ""} for p in ws.packages.values()}
    try:
        with open(os.path.join(root, name), encoding="utf-8") as f:
            new = f.read()
        before, after = (
            lockfile.of_text(root, name, old, projects),
            lockfile.of_text(root, name, new, projects),
        )
    except (OSError, UnicodeDecodeError, VxError):
        return None
    return {d for d in projects if before[d].digest != after[d].digest}


def by_project(ws: Workspace, paths: list[str]) -> dict[str, list[str]]:
    """Each path under its deepest project, relative to that project's dir."""
    dirs = sorted(((pkg.dir, name) for name, pkg in ws.packages.items()), key=lambda d: -len(d[0]))
    out: dict[str, list[str]] = {}
    for path in paths:
        for d, name in dirs:
            if not d:
                out.setdefault(name, []).append(path)
                break
            if path.startswith(d + "/"):
                out.setdefault(name, []).append(path[len(d) + 1 :])
                break
    return out


def _project_seeds(project: str, config: ProjectConfig, rels: list[str]) -> set[TaskId]:
    # vx's implicit groups (a missing `build`, turbo tasks without a script) are keyed on the
    # project's files: any change in the project reaches them.
    implicit = {TaskId(project, name) for name, cfg in config.tasks.items() if cfg.implicit}
    if "build" not in config.tasks:
        implicit.add(TaskId(project, "build"))
    return implicit | _declared_seeds(project, config, rels)


def _declared_seeds(project: str, config: ProjectConfig, rels: list[str]) -> set[TaskId]:
    tasks = {name: cfg for name, cfg in config.tasks.items() if cfg.exec is not None}
    every = {TaskId(project, name) for name in tasks}
    if any(r in _PROJECT_FILES or r.startswith("vx.config.") for r in rels):
        return every
    out: set[TaskId] = set()
    undeclared = False
    cached = {
        name: (
            GlobSet(cfg.cache.input_files, cfg.cache.turbo_globs),
            GlobSet(cfg.cache.output_files, cfg.cache.turbo_globs),
        )
        for name, cfg in tasks.items()
        if cfg.cache is not None
    }
    for rel in rels:
        takers = {
            name
            for name, (inputs, outputs) in cached.items()
            if inputs.matches(rel) and not (outputs and outputs.matches(rel))
        }
        out |= {TaskId(project, name) for name in takers}
        undeclared = undeclared or not takers
    if undeclared and project != ROOT_PROJECT:
        return every
    return out | {TaskId(project, name) for name, cfg in tasks.items() if cfg.cache is None}


def reached(graph: TaskGraph, seeded: set[TaskId] | None) -> list[TaskId]:
    """The requested tasks that are, or depend (transitively) on, a seed; all of them for None."""
    if seeded is None:
        return list(graph.requested)
    hit: dict[TaskId, bool] = {}
    for tid in graph.order:  # dependencies first
        node = graph.nodes[tid]
        hit[tid] = tid in seeded or any(hit[d] for d in node.deps)
    return [tid for tid in graph.requested if hit[tid]]


# ---------------------------------------------------------------- git


def _no_merge_base(root: str, ref: str, flag: str) -> None:
    """Say why `ref` and HEAD share no commit, and what to fetch: in a shallow clone (CI's
    default) the history that joins them is simply not here."""
    if not _resolves(root, ref):
        _git(
            root, ["rev-parse", "--verify", f"{ref}^{{commit}}"], ref, flag=flag
        )  # raises, naming the ref
    shallow = (
        _git(root, ["rev-parse", "--is-shallow-repository"], ref, quiet=True, flag=flag).strip()
        == "true"
    )
    if shallow:
        raise UsageError(
            f"{flag}: `{ref}` and HEAD share no commit in this shallow clone",
            hint="fetch the history that joins them: `git fetch --deepen=200` (or `--unshallow`; "
            "`fetch-depth: 0` in actions/checkout)",
        )
    raise UsageError(
        f"{flag}: `{ref}` and HEAD share no commit (unrelated histories)",
        hint="name a base on this branch's history: --affected=<ref>",
    )


def _resolves(root: str, ref: str) -> bool:
    return bool(
        _git(
            root, ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], ref, quiet=True
        ).strip()
    )


def _git(
    root: str, args: list[str], ref: str, quiet: bool = False, flag: str = "--affected"
) -> str:
    argv = ["git", *args]
    try:
        proc = subprocess.run(
            argv,
            cwd=root,
            capture_output=True,
            timeout=60,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except FileNotFoundError:
        raise EnvironmentFailure(
            f"vx requires git for {flag}, and `git` is not on PATH", hint="install git"
        ) from None
    witness.ran(argv, proc.returncode, proc.stdout)
    if proc.returncode != 0 and not quiet:
        detail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no detail"]
        raise UsageError(
            f"{flag}: cannot compare with `{ref}`: {detail[0]}",
            hint="is it a ref of this repository? a shallow clone may need `git fetch --unshallow`",
        )
    return proc.stdout.decode("utf-8", errors="surrogateescape") if proc.returncode == 0 else ""
