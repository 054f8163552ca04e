"""Find the workspace root, expand its member globs, and link the package graph.

Discovery reads the world once: one scandir per directory a
glob names and one read per member manifest, no stat per candidate — a thousand-package
repo must be known in a few milliseconds, because every `vx` verb starts here.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, cast

from msgspec import Struct

from vx import witness
from vx.errors import ConfigError, WorkspaceError
from vx.model import ROOT_PROJECT, Package, Workspace
from vx.workspace import frameworks
from vx.workspace.semver import satisfies

_DEP_FIELDS = ("dependencies", "devDependencies", "optionalDependencies")
_MANAGERS = ("npm", "pnpm", "yarn", "bun")
_LOCKFILES = (
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lock", "bun"),
    ("bun.lockb", "bun"),
)
_EXTGLOB = re.compile(r"[!@+*?]\(")
_TURBO_FILES = ("turbo.json", "turbo.jsonc")  # config/turbo.py's FILE_NAMES, a layer above


def discover(cwd: Path) -> Workspace:
    """The workspace that holds `cwd`, with every member package and the root as `//`."""
    root = _find_root(Path(os.path.abspath(cwd)))
    for here in (
        root.dir,
        *root.dir.parents,
    ):  # `resolve` below: a link on the way would move the root
        witness.probed(str(here))
    globs = root.member_globs()
    expanded: dict[str, list[str]] = {}
    dirs = _member_dirs(str(root.dir), globs, expanded)
    manifests = {rel: m for rel in dirs if (m := _read_manifest(root.dir, rel)) is not None}
    manager = _manager(root)
    nx = _is_nx(root.dir)
    paths: dict[str, str] = {}
    renamed: dict[str, str] = {}
    resolved = nx_root = None
    if nx:  # every project.json is a project too, and every project Nx's plugins infer
        from vx.workspace.nxprojects import members, root_name

        manifests, paths, renamed, resolved, edges = members(str(root.dir), manifests, set(dirs))
        nx_root = root_name(str(root.dir), root.manifest, resolved)
    packages = _packages(
        root, manifests, _linker(root, manager), paths, peers=nx and _nx_runs(root.dir)
    )
    if nx:
        packages = _nx_packages(str(root.dir), packages, renamed, paths, edges, nx_root)
    return Workspace(
        root=root.dir.resolve(),
        manager=manager,
        packages=packages,
        member_globs=tuple(g.text for g in globs),
        member_globs_file=root.globs_file if globs else "",
        empty_member_globs=tuple(
            g for g, found in expanded.items() if not any(d in manifests for d in found)
        ),
        nx=resolved,
        nx_root=nx_root,
    )


def find_root(cwd: Path) -> Path:
    """The root of the workspace that holds `cwd`, its members unread (a plugin verb's start)."""
    return _find_root(Path(os.path.abspath(cwd))).dir.resolve()


# ---------------------------------------------------------------- the root


class _Root(Struct, frozen=True):
    """A root candidate: a directory with pnpm-workspace.yaml or a package.json."""

    dir: Path
    manifest: dict[str, Any] | None  # the root package.json, None when absent
    globs: tuple[str, ...]  # member globs as written; () in single-package mode
    globs_file: str  # where the globs came from, for errors
    globs_field: str
    pnpm: bool

    def member_globs(self) -> list[MemberGlob]:
        return [
            MemberGlob.parse(g, self.globs_file, f"{self.globs_field}[{i}]")
            for i, g in enumerate(self.globs)
        ]


def _find_root(start: Path) -> _Root:
    """Walk up from `start`: the nearest candidate whose globs claim `start` wins.

    A member has its own package.json, so stopping at the first candidate would make a
    run inside a package treat that package as the whole workspace. When nothing claims
    `start`, the nearest candidate is the root (single-package mode or a plain subdir).
    """
    below: list[Path] = []
    nearest: _Root | None = None
    for here in (start, *start.parents):
        found = _candidate(here)
        if found is not None:
            nearest = nearest or found
            if _claims(found, below):
                return found
            if found.pnpm:
                break  # pnpm-workspace.yaml bounds the walk
        below.append(here)
    if nearest is None:
        raise WorkspaceError(
            f"no workspace root found from {start}",
            facts=("looked for pnpm-workspace.yaml or package.json here and in every parent",),
            hint="run vx inside a JavaScript project, or create a package.json (`npm init -y`)",
        )
    return nearest


def _candidate(here: Path) -> _Root | None:
    yaml_text = _read_text(here / "pnpm-workspace.yaml")
    manifest = _read_json(here, "package.json")
    if yaml_text is not None:
        globs = _pnpm_globs(yaml_text, "pnpm-workspace.yaml")
        return _Root(here, manifest, globs, "pnpm-workspace.yaml", "packages", pnpm=True)
    if manifest is None:
        return None
    globs, field = _manifest_globs(manifest)
    return _Root(here, manifest, globs, "package.json", field, pnpm=False)


def _pnpm_globs(text: str, file: str) -> tuple[str, ...]:
    import yaml  # lazily: only pnpm workspaces pay for PyYAML

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            file=file,
            field=where,
            hint="pnpm-workspace.yaml lists `packages:` globs",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "pnpm-workspace.yaml must be a mapping",
            file=file,
            hint="write `packages:` followed by a list of globs",
        )
    return _glob_list(data.get("packages", []), file, "packages")


def _manifest_globs(manifest: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """npm/yarn/bun `workspaces`: an array, or yarn's `{packages: [...]}`; absent = single."""
    ws = manifest.get("workspaces")
    if ws is None:
        return (), ""
    if isinstance(ws, dict):
        field = "workspaces.packages"
        return _glob_list(ws.get("packages", []), "package.json", field), field
    return _glob_list(ws, "package.json", "workspaces"), "workspaces"


def _glob_list(value: Any, file: str, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        raise ConfigError(
            f"`{field}` must be an array of glob strings",
            file=file,
            field=field,
            hint='e.g. ["packages/*", "apps/*"]',
        )
    return tuple(value)


def _claims(root: _Root, below: list[Path]) -> bool:
    """Whether one of the directories between `root` and the start is one of its members."""
    if not below or not root.globs:
        return False
    globs = root.member_globs()
    rels = [d.relative_to(root.dir).as_posix() for d in below]
    return any(_is_member(rel, globs) for rel in rels)


def _is_member(rel: str, globs: list[MemberGlob]) -> bool:
    parts = rel.split("/")
    if any(g.negated and g.matches(parts) for g in globs):
        return False
    return any(not g.negated and g.matches(parts) for g in globs)


# ---------------------------------------------------------------- member globs


class MemberGlob(Struct, frozen=True):
    """One entry of the member list, in the package managers' grammar."""

    text: str  # normalised spelling, `!` kept
    negated: bool
    segments: tuple[str | re.Pattern[str], ...]  # "**", a literal name, or a segment regex

    @classmethod
    def parse(cls, raw: str, file: str, field: str) -> MemberGlob:
        text = _normalise(raw, file, field)
        negated = text.startswith("!")
        body = text[1:] if negated else text
        segments = tuple(_segment(s) for s in body.split("/")) if body else ()
        return cls(text, negated, segments)

    def matches(self, parts: list[str]) -> bool:
        """Whether a member directory (split on `/`) falls under this glob.

        A negation also takes back the tree under what it names (`!packages/legacy`).
        """
        return _match(self.segments, parts, prefix=self.negated)


def _normalise(raw: str, file: str, field: str) -> str:
    """`./a`, `a//b`, `a/./b` and `a/` all mean `a`; extglob and escapes are refused."""
    negated = raw.startswith("!")
    body = raw[1:] if negated else raw
    body = re.sub(r"/+", "/", body.strip())
    while body.startswith("./"):
        body = body[2:]
    body = body.replace("/./", "/").rstrip("/")
    body = "" if body == "." else body.removesuffix("/.")
    _refuse_member_glob(raw, body, file, field)
    return ("!" if negated else "") + body


def _refuse_member_glob(raw: str, body: str, file: str, field: str) -> None:
    if _EXTGLOB.search(body):
        raise ConfigError(
            f"member glob `{raw}` is an extglob, which vx does not read",
            file=file,
            field=field,
            hint=_extglob_rewrite(body),
        )
    if body.startswith("/") or ".." in body.split("/") or "\\" in body:
        raise ConfigError(
            f"member glob `{raw}` reaches outside the workspace root",
            file=file,
            field=field,
            hint="members live under the root; move the package inside it",
        )


def _extglob_rewrite(body: str) -> str:
    """Suggest `*` plus `!` entries for the common `dir/!(a|b)` shape."""
    found = re.fullmatch(r"(.*/)?!\(([^()]*)\)", body)
    if not found or not all(re.fullmatch(r"[\w.@-]+", n) for n in found.group(2).split("|")):
        return "list the members with `*`, `{a,b}` or separate `!` exclusions"
    head = found.group(1) or ""
    entries = [f"{head}*"] + [f"!{head}{n}" for n in found.group(2).split("|")]
    return "write it as " + json.dumps(entries)


def _segment(text: str) -> str | re.Pattern[str]:
    if text == "**" or not re.search(r"[*?\[{]", text):
        return text
    return re.compile(_segment_regex(text) + r"\Z")


def _segment_regex(text: str) -> str:
    """One path segment: `*`, `?`, `[...]`, `{a,b}`; a leading wildcard skips dotfiles."""
    out = "(?!\\.)" if text[0] in "*?[{" else ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[" and "]" in text[i + 2 :]:
            end = text.index("]", i + 2)
            out += "[" + text[i + 1 : end].replace("!", "^", 1 if text[i + 1] == "!" else 0) + "]"
            i = end
        elif c == "{" and "}" in text[i:]:
            end = text.index("}", i)
            out += (
                "(?:"
                + "|".join(_segment_regex(a) if a else "" for a in text[i + 1 : end].split(","))
                + ")"
            )
            i = end
        else:
            out += re.escape(c)
        i += 1
    return out


def _match(segments: tuple[str | re.Pattern[str], ...], parts: list[str], prefix: bool) -> bool:
    if not segments:
        return prefix or not parts
    head, rest = segments[0], segments[1:]
    if head == "**":
        return any(_match(rest, parts[i:], prefix) for i in range(len(parts) + 1))
    if not parts or not _segment_matches(head, parts[0]):
        return False
    return _match(rest, parts[1:], prefix)


def _segment_matches(segment: str | re.Pattern[str], name: str) -> bool:
    return segment == name if isinstance(segment, str) else segment.match(name) is not None


def _member_dirs(
    root: str, globs: list[MemberGlob], expanded: dict[str, list[str]] | None = None
) -> list[str]:
    """Expand the positive globs against the tree, then take the `!` entries back. `expanded`,
    when given, receives each positive glob's own expansion (to name a glob that found nothing)."""
    listing = _Listing(root)
    found: dict[str, None] = {}
    for glob in globs:
        if not glob.negated and glob.segments:
            dirs = _expand(glob.segments, listing)
            found.update(dict.fromkeys(dirs))
            if expanded is not None:
                expanded[glob.text] = dirs
    negations = [g for g in globs if g.negated]
    members = sorted(
        rel for rel in found if rel and not any(g.matches(rel.split("/")) for g in negations)
    )
    for rel in members:
        _refuse_linked_member(root, rel, listing)
    return members


def _refuse_linked_member(root: str, rel: str, listing: _Listing) -> None:
    """A member reached through a symlinked directory: its outputs would be walked, wiped and
    restored through the link, which vx never follows there — a save would hold nothing and a hit
    restore nothing. Refused, naming the real directory to list instead."""
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        here = "/".join(parts[:i])
        # Wildcard segments were scanned (links noted); a literal one is checked with one lstat.
        if here in listing.links or (
            here not in listing.memo and os.path.islink(os.path.join(root, here))
        ):
            real = os.path.relpath(os.path.realpath(os.path.join(root, rel)), root)
            raise ConfigError(
                f"workspace member {rel} is reached through the symlink {here} (to {real})",
                hint=f"list the real directory ({real}) in the workspace globs instead, or "
                "replace the link with the directory: vx follows no links for outputs",
            )


def _expand(segments: tuple[str | re.Pattern[str], ...], listing: _Listing) -> list[str]:
    frontier = [""]
    for segment in segments:
        if segment == "**":
            frontier = [d for rel in frontier for d in listing.tree(rel)]
        elif isinstance(segment, str):
            frontier = [_join(rel, segment) for rel in frontier if segment != "node_modules"]
        else:
            frontier = [
                _join(rel, n) for rel in frontier for n in listing.subdirs(rel) if segment.match(n)
            ]
    return frontier


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


class _Listing:
    """Subdirectory names per directory, each directory scanned at most once."""

    def __init__(self, root: str):
        self.root = root
        self.memo: dict[str, list[str]] = {}
        self.links: set[str] = set()  # symlinked directories: listed, never walked into

    def subdirs(self, rel: str) -> list[str]:
        if rel not in self.memo:
            self.memo[rel] = list(self._scan(rel))
        return self.memo[rel]

    def _scan(self, rel: str) -> Iterator[str]:
        path = os.path.join(self.root, rel) if rel else self.root
        witness.read(path)
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.name != "node_modules" and _is_dir(entry):
                        if entry.is_symlink():
                            self.links.add(_join(rel, entry.name))
                        yield entry.name
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return

    def tree(self, rel: str) -> Iterator[str]:
        """`rel` and every directory under it, dot directories and node_modules skipped."""
        stack = [rel]
        while stack:
            here = stack.pop()
            yield here
            if here not in self.links:  # a link cycle would never end
                stack.extend(_join(here, n) for n in self.subdirs(here) if not n.startswith("."))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


# ---------------------------------------------------------------- manifests


def _read_text(path: Path) -> str | None:
    witness.read(str(path))
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None  # an unreadable file above the repo is no root signal


def _read_manifest(root: Path, rel: str) -> dict[str, Any] | None:
    """A member's package.json, or None when the directory holds none (not a package)."""
    return _read_json(root, f"{rel}/package.json" if rel else "package.json")


def _read_json(root: Path, rel: str) -> dict[str, Any] | None:
    path = os.path.join(root, rel)
    witness.read(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        bad = exc if isinstance(exc, json.JSONDecodeError) else None
        where = f"line {bad.lineno}, column {bad.colno}" if bad else ""
        raise ConfigError(
            f"invalid JSON: {bad.msg if bad else exc}",
            file=rel,
            field=where,
            hint="package.json must be strict JSON",
        ) from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number"
        )
        raise ConfigError(
            f"package.json must hold an object, not {kind}",
            file=rel,
            hint='a package.json is one JSON object, such as {"name": "app", "version": "1.0.0"}',
        )
    return value


def _manager(root: _Root) -> str:
    """The package manager: `packageManager` first, then the lockfile at the root."""
    declared = (root.manifest or {}).get("packageManager")
    if isinstance(declared, str) and declared.split("@")[0] in _MANAGERS:
        return declared.split("@")[0]
    witness.read(str(root.dir))
    names = set(os.listdir(root.dir))
    for lockfile, manager in _LOCKFILES:
        if lockfile in names:
            return manager
    return "pnpm" if root.pnpm else "npm"


# ---------------------------------------------------------------- packages


class _Member(Struct, frozen=True):
    name: str
    dir: str
    manifest: dict[str, Any]
    manifest_path: str


def _is_nx(root: Path) -> bool:
    path = root / "nx.json"
    if os.path.lexists(path):
        return True
    witness.probed(str(path))
    return False


def _nx_runs(root: Path) -> bool:
    """Whether nx.json, not a turbo.json beside it (which wins), gives the tasks: then peers are
    edges, as in Nx's project graph; turbo's package graph has none."""
    for name in _TURBO_FILES:
        path = root / name
        if os.path.lexists(path):
            return False
        witness.probed(str(path))
    return True


def _nx_packages(
    root: str,
    packages: dict[str, Package],
    renamed: dict[str, str],
    paths: dict[str, str],
    edges: Mapping[str, Any] | None = None,
    nx_root: str | None = None,
) -> dict[str, Package]:
    """Nx's names (a project.json `name` over package.json's), `implicitDependencies` applied, and
    the edges of Nx's project graph (source imports) where vx asked Nx for them."""
    from msgspec.structs import replace

    from vx.workspace.nxprojects import implicit_dependencies

    if renamed:
        names = {n: renamed.get(p.dir, n) for n, p in packages.items()}
        for rel, name in renamed.items():
            if list(names.values()).count(name) > 1:
                raise ConfigError(
                    f"two projects are named `{name}`",
                    file=f"{rel}/project.json",
                    field="name",
                    hint="project names must be unique in a workspace; rename one",
                )
        packages = {
            names[n]: replace(p, name=names[n], deps=tuple(sorted(names.get(d, d) for d in p.deps)))
            for n, p in packages.items()
        }
    implicit = implicit_dependencies(root, packages, paths, nx_root)
    packages = {
        n: replace(p, deps=implicit[n]) if n in implicit else p for n, p in packages.items()
    }
    if not edges:
        return packages
    ours = {n: n for n in packages}
    if nx_root:
        ours[nx_root] = ROOT_PROJECT
    for source, targets in edges.items():
        own = ours.get(source)
        if own is None:
            continue
        added = {ours[t] for t, _type in targets if t in ours and ours[t] != own}
        if added - set(packages[own].deps):
            pkg = packages[own]
            packages[own] = replace(pkg, deps=tuple(sorted(set(pkg.deps) | added)))
    return packages


def _packages(
    root: _Root,
    manifests: dict[str, dict[str, Any]],
    linker: _Linker,
    paths: dict[str, str] | None = None,
    *,
    peers: bool = False,
) -> dict[str, Package]:
    members = [_member(rel, m, (paths or {}).get(rel)) for rel, m in manifests.items()]
    root_member = _Member(
        ROOT_PROJECT, "", root.manifest or {}, "package.json" if root.manifest is not None else ""
    )
    by_name = _unique_names(members)
    deps = _package_edges([root_member, *members], by_name, linker, peers)
    return {
        m.name: Package(
            name=m.name,
            dir=m.dir,
            deps=deps[m.name],
            manifest_path=m.manifest_path,
            scripts=_scripts(m.manifest),
            framework=frameworks.detect(m.manifest, by_name),
            manifest=m.manifest,
        )
        for m in (root_member, *members)
    }


def _member(rel: str, manifest: dict[str, Any], path: str | None = None) -> _Member:
    path = path or f"{rel}/package.json"
    name = manifest.get("name")
    problem = _name_problem(name)
    if problem:
        raise ConfigError(
            f"package name {json.dumps(name)} {problem}",
            file=path,
            field="name",
            hint="every workspace member needs a plain string `name`",
        )
    return _Member(cast(str, name), rel, manifest, path)  # _name_problem: a plain string


def _name_problem(name: Any) -> str | None:
    if not isinstance(name, str):
        return "is missing" if name is None else "is not a string"
    if not name or name.strip() != name:
        return "is empty" if not name.strip() else "has surrounding whitespace"
    if "#" in name:
        return "contains `#`, which separates a package from its task"
    return None


def _unique_names(members: list[_Member]) -> dict[str, _Member]:
    """Members by name; two with one name is an error naming both manifests. The root's
    package.json name is never one of them: the root is `//` (as turbo calls it), so a member
    may share its name (npm links that member for it, and `-w x` runs the member's script)."""
    by_name: dict[str, _Member] = {}
    for m in members:
        other = by_name.get(m.name)
        if other is not None:
            raise ConfigError(
                f"two packages are named `{m.name}`: {other.manifest_path} and {m.manifest_path}",
                file=m.manifest_path,
                field="name",
                hint="package names must be unique in a workspace; rename one",
            )
        by_name[m.name] = m
    return by_name


def _scripts(manifest: dict[str, Any]) -> dict[str, str]:
    scripts = manifest.get("scripts")
    if not isinstance(scripts, dict):
        return {}
    return {k: v for k, v in scripts.items() if isinstance(v, str)}


# ---------------------------------------------------------------- package graph


class _Linker(Struct, frozen=True):
    """How the package manager links a workspace package for a plain range.

    `ranges`: whether a range the member's version satisfies links it (npm, yarn, bun; pnpm < 9 or
    `link-workspace-packages=true`). `locked`: pnpm-lock.yaml's importers, dir -> dep -> (specifier,
    resolved version): what the last install did, which wins while its specifier is the manifest's."""

    ranges: bool = True
    locked: dict[str, dict[str, tuple[str | None, str]]] = {}


def _package_edges(
    members: list[_Member], by_name: dict[str, _Member], linker: _Linker, peers: bool
) -> dict[str, tuple[str, ...]]:
    """Direct workspace deps per package, from the fields turbo 2 builds its package graph from.
    With `peers` (an Nx workspace: Nx's graph has them) `peerDependencies` too, but a peer edge
    that closes a cycle is dropped."""
    edges = {m.name: set(_linked(m, _DEP_FIELDS, by_name, linker)) for m in members}
    for m in sorted(members, key=lambda m: m.name) if peers else []:
        for target in sorted(
            set(_linked(m, ("peerDependencies",), by_name, linker)) - edges[m.name]
        ):
            if not _reaches(edges, target, m.name):
                edges[m.name].add(target)
    return {name: tuple(sorted(targets)) for name, targets in edges.items()}


def _linked(
    m: _Member, fields: tuple[str, ...], by_name: dict[str, _Member], linker: _Linker
) -> Iterator[str]:
    """Names of workspace packages the package manager would link for these fields."""
    locked = linker.locked.get(m.dir or ".", {})
    for field in fields:
        specs = m.manifest.get(field)
        if not isinstance(specs, dict):
            continue
        for dep, spec in specs.items():
            target = (
                _link_target(m, dep, spec, by_name, linker.ranges, locked.get(dep))
                if isinstance(spec, str)
                else None
            )
            if target is not None and target != m.name:
                yield target


def _link_target(
    m: _Member,
    dep: str,
    spec: str,
    by_name: dict[str, _Member],
    ranges: bool,
    locked: tuple[str | None, str] | None,
) -> str | None:
    spec = spec.strip()
    if spec.startswith("workspace:"):
        return _workspace_protocol(dep, spec[len("workspace:") :], by_name)
    if spec.startswith(
        ("file:", "link:")
    ):  # pnpm copies a `file:` member in (injected): still its build
        return _member_at(m, spec.split(":", 1)[1], by_name)
    if locked is not None and locked[0] in (
        None,
        spec,
    ):  # a plain range, installed from this very spec
        version = locked[1]
        return (
            _member_at(m, version[len("link:") :], by_name) if version.startswith("link:") else None
        )
    target = by_name.get(dep)
    if target is None or not ranges:
        return None
    return dep if _version_links(target.manifest.get("version"), spec) else None


def _member_at(m: _Member, rel: str, by_name: dict[str, _Member]) -> str | None:
    path = posixpath.normpath(posixpath.join(m.dir, rel))
    path = "" if path == "." else path
    return next((n for n, o in by_name.items() if o.dir == path), None)


def _linker(root: _Root, manager: str) -> _Linker:
    """npm, yarn and bun link a workspace package for any range its version satisfies; pnpm 9
    and later only for `workspace:`, `link:` and `file:` unless `link-workspace-packages` is on."""
    if manager != "pnpm":
        return _Linker()
    lock_text = _read_text(root.dir / "pnpm-lock.yaml")
    major = _pnpm_major(root.manifest, lock_text)
    setting = _npmrc_setting(_read_text(root.dir / ".npmrc"))
    if setting is None and (
        major is None or major >= 10
    ):  # pnpm 10 reads settings from the yaml too
        setting = _yaml_setting(_read_text(root.dir / "pnpm-workspace.yaml"))
    ranges = setting if setting is not None else (major is not None and major < 9)
    return _Linker(ranges=ranges, locked=_lock_importers(lock_text) if lock_text else {})


def _pnpm_major(manifest: dict[str, Any] | None, lock_text: str | None) -> int | None:
    """pnpm's major version: `packageManager`, else 8 for a lockfile format older than 9.0 (which
    pnpm 9 and 10 both write: None, like no lockfile at all)."""
    declared = (manifest or {}).get("packageManager")
    found = re.match(r"pnpm@(\d+)", declared) if isinstance(declared, str) else None
    if found:
        return int(found.group(1))
    version = re.match(r"lockfileVersion: '?(\d+)", lock_text or "")
    if version:
        return None if int(version.group(1)) >= 9 else 8
    return None


def _npmrc_setting(text: str | None) -> bool | None:
    """`link-workspace-packages` in the root .npmrc: true and `deep` link ranges, false does not."""
    value = None
    for line in (text or "").splitlines():
        key, eq, raw = line.partition("=")
        if eq and key.strip() == "link-workspace-packages":
            value = raw.strip().strip("\"'")
    return None if value is None else value in ("true", "deep")


def _yaml_setting(text: str | None) -> bool | None:
    found = re.search(r"^linkWorkspacePackages:\s*['\"]?(\w+)", text or "", re.M)
    return None if found is None else found.group(1) in ("true", "deep")


def _lock_importers(text: str) -> dict[str, dict[str, tuple[str | None, str]]]:
    """pnpm-lock.yaml's `importers`, read by indentation rather than by a YAML parser: a lockfile can
    be megabytes, and discovery starts every verb. Formats 6 and 9 nest `specifier`/`version` under
    each dependency; 5.x writes `dep: version` with the specifiers in a section of their own."""
    start = text.find("\nimporters:")
    if start < 0:
        return {}
    out: dict[str, dict[str, tuple[str | None, str]]] = {}
    specifiers: dict[str, dict[str, str]] = {}
    importer = section = dep = None
    spec: str | None = None
    for line in text[start + 1 :].splitlines()[1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            break
        key, _, value = stripped.partition(":")
        key, value = _unquote(key), _unquote(value.strip())
        if indent == 2:
            importer, section, dep = key, None, None
            out.setdefault(key, {})
        elif indent == 4:
            section, dep = key, None
        elif indent == 6 and importer is not None and section == "specifiers":
            specifiers.setdefault(importer, {})[key] = value
        elif indent == 6 and importer is not None and section in _DEP_FIELDS:
            dep, spec = key, None
            if value:  # 5.x: `dep: version`
                out[importer][key] = (specifiers.get(importer, {}).get(key), value)
        elif indent == 8 and importer is not None and dep is not None and section in _DEP_FIELDS:
            if key == "specifier":
                spec = value
            elif key == "version":
                out[importer][dep] = (spec, value)
    return out


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _workspace_protocol(dep: str, rest: str, by_name: dict[str, _Member]) -> str | None:
    """`workspace:*|^|~|<range>` links by name; `workspace:other@range` is an alias."""
    if dep in by_name:
        return dep
    alias = re.fullmatch(r"(@?[^@\s]+)@.*", rest)
    return alias.group(1) if alias and alias.group(1) in by_name else None


def _version_links(version: Any, spec: str) -> bool:
    """Whether a plain range links to the local package (`^1` beside 2.0.0 does not)."""
    if spec in ("", "*", "x", "X"):
        return True
    return isinstance(version, str) and satisfies(version, spec)


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, stack = {start}, [start]
    while stack:
        here = stack.pop()
        if here == goal:
            return True
        for nxt in edges.get(here, ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False
