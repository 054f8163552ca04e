"""Turn a task's `exec.sandbox` into what it may touch: grants, walls, hidden stores.

Two moments. When the run is planned, `plan_sandbox` resolves every grant against the
project (realpath, `~`, `..`), computes the walls and the dependency grant, and refuses what
no run could honour, with the config file and field. When the task starts,
`expand` looks at the file system as it is *then* (a dependency may just have created
what a grant names): it creates missing write grants, expands directory globs, and says
which binds the mount plan needs.

A grant is the whole permission surface: nothing is derived from `cache`, except
that a cached task's dependency grant narrows to the packages its key folds.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

from msgspec import Struct, field

from vx.errors import ConfigError
from vx.files.globs import GlobSet
from vx.model import Grant, SandboxConfig, SandboxSpec

CREDENTIAL_STORES = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".bunfig.toml",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".config/containers/auth.json",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
)  # fmt: skip  (relative to HOME)
PROTECTED_NAMES = (
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".gitconfig",
    ".gitmodules",
    ".mcp.json",
    ".ripgreprc",
    ".vscode",
    ".idea",
)
PROTECTED_GIT = (".git/hooks", ".git/config")
# What decides how the next run plans, keys and sandboxes tasks: never writable, whatever a write
# grant holds (a task that rewrote its own vx.config.json would run unsandboxed next time). The
# lockfiles and install settings are vx.files.index.FINGERPRINT_FILES (not imported: plan-time cost).
CONFIG_FILES = (
    "vx.config.json", "vx.config.jsonc", "vx.workspace.json", "package.json", "turbo.json", "turbo.jsonc",
    "pnpm-lock.yaml", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "bun.lock", "bun.lockb",
    "pnpm-workspace.yaml", ".yarnrc.yml", ".npmrc", "bunfig.toml",
)  # fmt: skip
_WILDCARD = re.compile(r"[*?]")
_BRACE = re.compile(r"\{([^{}]*)\}")
_PROTECT_DEPTH = 3
_PROTECT_DIRS_CAP = 400
_GLOB_DEPTH = 6


# ---------------------------------------------------------------- values


# ---------------------------------------------------------------- plan time


def plan_sandbox(
    config: SandboxConfig,
    *,
    root: Path,
    project_rel: str,
    task: str,
    task_name: str,
    projects: Mapping[str, str],
    linked: Iterable[str],
    folded: Iterable[str] | None,
    cache_dir: Path | None,
    home: str | None = None,
    builds: Iterable[str] = (),
    passed_over: Iterable[str] = (),
) -> SandboxSpec:
    """Resolve a task's sandbox against its workspace; refuse what no run could honour.

    `projects` maps every project's workspace-relative dir to its package name; `linked` names
    the workspace packages the project links to (transitively); `folded` the packages whose
    tasks the key folds, or None for an uncached task (which gets every linked package);
    `builds` the packages that declare a `build` (the others have the implicit one);
    `passed_over` those whose implicit one keys nothing of its own (an Nx project's).
    """
    real_root = os.path.realpath(root)
    project = os.path.realpath(os.path.join(real_root, project_rel)) if project_rel else real_root
    home = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    source = _config_source(real_root, project_rel)
    at = f"tasks.{task_name}.exec.sandbox"
    reads = _resolve_all(config.read, project, home)
    writes = _resolve_all(config.write, project, home)
    dirs = {os.path.join(real_root, d) if d else real_root: name for d, name in projects.items()}
    others = {d: n for d, n in dirs.items() if d != project}
    walls = _walls(real_root, others, cache_dir)
    _refuse_writes(config.write, writes, project, walls, real_root, source, f"{at}.allow.write")
    _refuse_config_writes(config.write, writes, project, real_root, source, f"{at}.allow.write")
    granted, withheld = _dependency_grant(project, dirs, linked, folded)
    cache = os.path.realpath(cache_dir) if cache_dir is not None else None
    private = (cache,) if cache is not None and not _at_or_under(cache, real_root) else ()
    return SandboxSpec(
        task,
        source,
        real_root,
        project,
        home,
        config,
        reads,
        writes,
        walls,
        others,
        granted,
        withheld,
        _resolve_all(config.ignore_read, project, home, strict=False),
        _resolve_all(config.ignore_write, project, home, strict=False),
        private,
        implicit_builds=frozenset(withheld.values()) - frozenset(builds),
        passed_over=frozenset(withheld.values()) & frozenset(passed_over),
    )


def _resolve_all(
    texts: Iterable[str], project: str, home: str, *, strict: bool = True
) -> tuple[Grant, ...]:
    return tuple(g for text in texts for g in resolve(text, project, home, realpath=strict))


def resolve(text: str, project: str, home: str, *, realpath: bool = True) -> list[Grant]:
    """Resolve one grant text into Grants (one per brace alternative), realpath'd static prefixes."""
    out = []
    for alternative in _braces(text):
        directory = alternative.endswith("/") or alternative in (".", "..")
        body, collapsed = _collapse(alternative.rstrip("/") or "/")
        static, pattern = (body, None) if body.startswith(("/", "~")) else _split_static(body)
        written = _absolute(
            static, project, home
        )  # split first: the project's own path may hold a `*`
        base = os.path.realpath(written) if realpath else written
        glob = GlobSet([pattern]) if pattern else None
        out.append(
            Grant(
                text,
                base,
                glob,
                directory or collapsed,
                dir_glob=collapsed and glob is not None,
                lexical=written if base != written else "",
            )
        )
    return out


def _braces(text: str) -> list[str]:
    """Expand `{a,b}` alternatives (innermost first) so each becomes its own grant."""
    match = _BRACE.search(text)
    if match is None:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    return [alt for option in match.group(1).split(",") for alt in _braces(head + option + tail)]


def _collapse(path: str) -> tuple[str, bool]:
    """`dir/**` and `dir/**/*` are `dir` itself: the directory and its tree."""
    for suffix in ("/**/*", "/**"):
        if path.endswith(suffix):
            return path[: -len(suffix)] or "/", True
    return path, False


def _absolute(path: str, project: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif not path.startswith("/"):
        path = os.path.join(project, path)
    return os.path.normpath(path)


def _split_static(path: str) -> tuple[str, str | None]:
    """Split a relative grant at its first wildcard segment: (literal directory, glob below it)."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _WILDCARD.search(part):
            return "/".join(parts[:i]) or ".", "/".join(parts[i:])
    return path, None


def _walls(root: str, others: Mapping[str, str], cache_dir: Path | None) -> tuple[str, ...]:
    """Other projects, the repository, vx's own dir and an in-workspace cache dir."""
    walls = set(others) - {root}
    walls |= {f"{root}/.git", f"{root}/.vx"}
    if cache_dir is not None:
        cache = os.path.realpath(cache_dir)
        if cache.startswith(root + "/"):
            walls.add(cache)
    return tuple(sorted(walls))


def _refuse_writes(
    texts: Iterable[str],
    writes: tuple[Grant, ...],
    project: str,
    walls: tuple[str, ...],
    root: str,
    source: str,
    field: str,
) -> None:
    """A write grant stays in its project (links included) and opens no wall."""
    index = {text: i for i, text in enumerate(texts)}
    for grant in writes:
        where = f"{field}[{index.get(grant.text, 0)}]"
        inside_workspace = grant.base == root or grant.base.startswith(root + "/")
        if inside_workspace and not _at_or_under(grant.base, project):
            raise ConfigError(
                f"write grant `{grant.text}` leaves the project (it resolves to {grant.base})",
                file=source,
                field=where,
                hint="a task writes only inside its own project; a link there may point "
                "elsewhere — grant the project's own directory instead",
            )
        for wall in walls:
            if _at_or_under(grant.base, wall):
                raise ConfigError(
                    f"write grant `{grant.text}` would make {os.path.relpath(wall, root)} writable",
                    file=source,
                    field=where,
                    hint="nested projects, .git, .vx and the cache dir stay read-only; "
                    "let the project that owns the path write it",
                )


def _refuse_config_writes(
    texts: Iterable[str],
    writes: tuple[Grant, ...],
    project: str,
    root: str,
    source: str,
    field: str,
) -> None:
    """A write grant never names a config file, manifest or lockfile of its project or the root
    (`package.json`, `*.json`); a directory grant that holds them gets them read-only (`expand`)."""
    index = {text: i for i, text in enumerate(texts)}
    for grant in writes:
        for top in {project, root}:
            named = next(
                (
                    n
                    for n in CONFIG_FILES
                    if grant.covers(f"{top}/{n}")
                    and (grant.pattern is not None or grant.base == f"{top}/{n}")
                ),
                None,
            )
            if named is not None:
                raise ConfigError(
                    f"write grant `{grant.text}` would make {os.path.relpath(f'{top}/{named}', root)} "
                    f"writable",
                    file=source,
                    field=f"{field}[{index.get(grant.text, 0)}]",
                    hint="vx config files, package.json, lockfiles and install settings are never "
                    "writable by a task; grant the files the task writes, e.g. `*.tsbuildinfo`",
                )


def _dependency_grant(
    project: str, dirs: Mapping[str, str], linked: Iterable[str], folded: Iterable[str] | None
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The linked workspace packages granted, and those withheld from a cached task.

    Never a link back to the task's own project or a directory holding it: following one
    would re-grant the whole project.
    """
    by_name = {name: d for d, name in dirs.items()}
    names = {n for n in linked if n in by_name and not _at_or_under(project, by_name[n])}
    keep = names if folded is None else names & set(folded)
    withheld = {by_name[n]: n for n in sorted(names - keep)}
    return tuple(sorted(by_name[n] for n in keep)), withheld


def _config_source(root: str, project_rel: str) -> str:
    """The project's config file, workspace-relative (only refusals and hints name it)."""
    for name in ("vx.config.json", "vx.config.jsonc"):
        rel = f"{project_rel}/{name}" if project_rel else name
        if os.path.exists(os.path.join(root, rel)):
            return rel
    return f"{project_rel}/vx.config.json" if project_rel else "vx.config.json"


def _at_or_under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


# ---------------------------------------------------------------- task start


class Layout(Struct):
    """What the sandbox mounts for one attempt, decided from the file system as it is now."""

    ro: list[str] = field(default_factory=list)  # read-only binds (files or dirs)
    rw: list[str] = field(default_factory=list)  # writable binds (dirs)
    walls: list[str] = field(default_factory=list)  # tmpfs + remount-ro, inside some bind
    hidden_dirs: list[str] = field(default_factory=list)  # credential stores (dirs)
    hidden_files: list[str] = field(default_factory=list)  # credential stores (files)
    protected: list[str] = field(default_factory=list)  # config files kept read-only in rw binds
    pinned: list[str] = field(
        default_factory=list
    )  # read-only grants inside rw binds: kept read-only
    unborn: list[str] = field(
        default_factory=list
    )  # config files absent at the top of rw binds: watched
    placeholders: list[str] = field(
        default_factory=list
    )  # created for write grants; removed if unwritten
    held: list[str] = field(
        default_factory=list
    )  # created paths (by this or a concurrent attempt) in use
    scratch: list[Grant] = field(
        default_factory=list
    )  # write globs that matched nothing: in the anchor
    mountless: list[Grant] = field(default_factory=list)  # …and ones a read-only bind holds: warned
    # (path, target) of each workspace symlink a read grant was written through (`lib/**` where
    # `lib -> ../../shared`): made again inside, so the path the task uses leads to the bound target
    links: list[tuple[str, str]] = field(default_factory=list)


def expand(spec: SandboxSpec) -> Layout:
    """Decide the binds for an attempt starting now; create missing write grants."""
    layout = Layout()
    for path in dependency_paths(spec):
        if os.path.exists(path):
            layout.ro.append(path)
    for grant in spec.reads:
        _bind_read(grant, layout)
        if grant.lexical and os.path.exists(grant.base):
            layout.links += [
                link for link in _links_on_way(grant.lexical, spec.root) if link not in layout.links
            ]
    for grant in spec.writes:
        _bind_write(grant, spec, layout)
    _sort_pending(spec, layout)
    layout.walls = [w for w in spec.walls if _inside_a_bind(w, layout) and os.path.isdir(w)]
    _hide_credentials(spec, layout)
    layout.hidden_dirs.extend(p for p in spec.private if os.path.isdir(p))
    _protect(spec, layout)
    _pin_reads(spec, layout)
    return layout


def dependency_paths(spec: SandboxSpec) -> tuple[str, ...]:
    """What core grants every task: node_modules, the linked packages, and the project's
    own package.json, which every key folds (node reads it to know a script's module type)."""
    return (
        f"{spec.root}/node_modules",
        f"{spec.project}/node_modules",
        f"{spec.project}/package.json",
        *spec.linked,
    )


def _bind_read(grant: Grant, layout: Layout) -> None:
    """A read grant binds its static prefix read-only; a missing one is simply absent."""
    if os.path.exists(grant.base):
        layout.ro.append(grant.base)


def _links_on_way(path: str, root: str) -> list[tuple[str, str]]:
    """The symlinks inside the workspace on the way to `path`, outermost first, with their targets
    as written; a link's own target may pass through another, which then follows."""
    out: list[tuple[str, str]] = []
    pending, seen = [path], set()
    while pending:
        at = pending.pop()
        parts = at.split("/")
        for i in range(2, len(parts) + 1):
            head = "/".join(parts[:i])
            if (
                not _at_or_under(head, root)
                or head == root
                or head in seen
                or not os.path.islink(head)
            ):
                continue
            seen.add(head)
            target = os.readlink(head)
            out.append((head, target))
            pending.append(
                os.path.normpath(os.path.join(os.path.dirname(head), target, *parts[i:]))
            )
            break
    return out


def _bind_write(grant: Grant, spec: SandboxSpec, layout: Layout) -> None:
    if grant.dir_glob:
        matches = _matching_dirs(grant)
        if matches:
            layout.rw.extend(matches)
        else:
            layout.scratch.append(grant)  # sorted into scratch/mountless once every bind is known
        return
    if grant.pattern is not None or grant.directory or os.path.isdir(grant.base):
        _make_dir(grant.base, layout)
        layout.rw.append(grant.base)
        return
    if not _at_or_under(grant.base, spec.root):
        # Outside the workspace nothing is widened: an existing file is bound alone, and a missing
        # grant is a directory (`~/.cache/tool`), never a file that would make `~/.cache` writable.
        if not os.path.isfile(grant.base):
            _make_dir(grant.base, layout)
        layout.rw.append(grant.base)
        return
    _make_file(grant.base, layout)  # a file grant widens to its directory (atomic renames)
    layout.rw.append(os.path.dirname(grant.base))


def _matching_dirs(grant: Grant) -> list[str]:
    """Existing directories a directory glob (`.*.tmp/**`) names, as deep as its pattern reaches."""
    assert grant.pattern is not None
    text = grant.pattern.patterns[0]
    depth = _GLOB_DEPTH if "**" in text else text.count("/") + 1
    return [
        d
        for d in _subdirs(grant.base, depth)
        if grant.pattern.matches(os.path.relpath(d, grant.base))
    ]


def _subdirs(top: str, depth: int) -> list[str]:
    """The directories below `top`, at most `depth` levels down; links and node_modules skipped."""
    found, level = [], [top]
    for _ in range(depth):
        below = []
        for directory in level:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            below += [
                e.path
                for e in entries
                if e.is_dir(follow_symlinks=False) and e.name != "node_modules"
            ]
        found += below
        level = below
    return found


def _make_dir(path: str, layout: Layout) -> None:
    missing = _missing_ancestors(path)
    os.makedirs(path, exist_ok=True)
    layout.placeholders.extend(missing)


def _make_file(path: str, layout: Layout) -> None:
    _make_dir(os.path.dirname(path), layout)
    if not os.path.lexists(path):
        with open(path, "x"):
            pass
        layout.placeholders.append(path)


def _missing_ancestors(path: str) -> list[str]:
    missing = []
    while path and path != "/" and not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def _sort_pending(spec: SandboxSpec, layout: Layout) -> None:
    """A write glob that matched nothing lands in the anchor's scratch unless a bind holds its
    directory read-only, or it lies outside the workspace (then it can only fail: warned)."""
    pending, layout.scratch = layout.scratch, []
    for grant in pending:
        in_workspace = _at_or_under(grant.base, spec.root)
        held = any(_at_or_under(grant.base, b) for b in (*layout.ro, *layout.rw))
        (layout.scratch if in_workspace and not held else layout.mountless).append(grant)


def _inside_a_bind(wall: str, layout: Layout) -> bool:
    return any(wall != b and _at_or_under(wall, b) for b in (*layout.ro, *layout.rw))


def _hide_credentials(spec: SandboxSpec, layout: Layout) -> None:
    """Credential stores are hidden unless a grant names them or something inside."""
    if not spec.home or spec.home == "/":
        return
    granted = [g.base for g in (*spec.reads, *spec.writes)]
    for rel in CREDENTIAL_STORES:
        path = f"{spec.home}/{rel}"
        if not os.path.lexists(path) or any(_at_or_under(g, path) for g in granted):
            continue
        (layout.hidden_dirs if os.path.isdir(path) else layout.hidden_files).append(path)


def _protect(spec: SandboxSpec, layout: Layout) -> None:
    """Inside write binds, read-only: shell and tool config files 3 levels down, and the
    config files, manifests and lockfiles of the project and the root, with their `.vx` and
    `.git` — what decides the next run. One of those that does not exist yet cannot be mounted
    over; it is watched instead (`created_config`). Elsewhere (`dist/package.json`) they are
    plain outputs."""
    names = PROTECTED_NAMES + (PROTECTED_GIT if not spec.config.git_config else PROTECTED_GIT[:1])
    tops = [t for t in layout.rw if os.path.isdir(t)]
    for top in tops:
        for directory in [top, *_subdirs(top, _PROTECT_DEPTH)][:_PROTECT_DIRS_CAP]:
            layout.protected.extend(
                p for p in (os.path.join(directory, n) for n in names) if os.path.lexists(p)
            )
    whole = CONFIG_FILES + (".vx",) + (() if spec.config.git_config else (".git",))
    for directory in dict.fromkeys((spec.project, spec.root)):
        for path in (os.path.join(directory, n) for n in whole):
            if not any(_at_or_under(path, t) for t in tops):
                continue
            if os.path.lexists(path):
                layout.protected.append(path)
            elif not path.endswith((".vx", ".git")):
                layout.unborn.append(path)


def _pin_reads(spec: SandboxSpec, layout: Layout) -> None:
    """A path granted only for reading stays read-only when a write bind holds it (a file grant
    widened to its directory, a glob's directory): bound again, read-only, inside the write bind."""
    for grant in spec.reads:
        base = grant.base
        inside = any(base != top and _at_or_under(base, top) for top in layout.rw)
        if inside and os.path.lexists(base) and not any(w.covers(base) for w in spec.writes):
            layout.pinned.append(base)


def created_config(layout: Layout) -> list[str]:
    """Config files the task created at the top of a write bind: removed, and returned to be reported."""
    made = [p for p in layout.unborn if os.path.lexists(p)]
    for path in made:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            pass
    return made


# ---------------------------------------------------------------- what the key and the links reach


def linked_packages(packages: Mapping[str, object], name: str) -> set[str]:
    """The workspace packages `name` links to, transitively: an import of one follows its own links."""
    seen: set[str] = set()
    pending = list(getattr(packages.get(name), "deps", ()))
    while pending:
        dep = pending.pop()
        if dep not in seen and dep in packages:
            seen.add(dep)
            pending.extend(getattr(packages[dep], "deps", ()))
    return seen


def folded_packages(nodes: Mapping[Any, Any], tid: Any, select) -> set[str]:
    """The packages with a task whose key `tid`'s key folds, transitively.

    `select(owner, deps, patterns)` is keys.select_upstream; a group folds all its deps, but
    its own package only when it is keyed on files (an implicit `build`): one keyed on nothing
    of its own (an Nx project's implicit `build`, a plain group) grants no file of it.
    """
    seen: set[object] = set()
    pending = [tid]
    while pending:
        node = nodes[pending.pop()]
        cache = node.config.cache  # type: ignore[attr-defined]
        if node.is_group:  # type: ignore[attr-defined]
            ups = list(node.deps)  # type: ignore[attr-defined]
        else:
            ups = select(node.id, node.deps, cache.input_tasks if cache else None)  # type: ignore[attr-defined]
        for up in ups:
            if up not in seen:
                seen.add(up)
                pending.append(up)
    return {
        up.package  # type: ignore[attr-defined]
        for up in seen
        if not (nodes[up].is_group and nodes[up].config.cache is None)  # type: ignore[attr-defined]
    }
