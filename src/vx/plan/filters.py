"""`--filter`: which projects a run covers, in pnpm's selector language.

Forms: `<name-glob>` (a scope-less name also matches `@scope/name` when exactly one package has it),
`./<dir>`, `{<dir>}` and `./<glob>` (the package there, or the packages under it), `.` (the cwd's),
`//` (the root project), `tag:<pattern>`, `<p>...` (with its dependencies), `...<p>` (with its
dependents), `<p>^...` / `...^<p>` (only those, not the match itself), `...<p>...`, `[<ref>]`
(packages with files changed since ref, uncommitted and untracked included), `<p>[<ref>]`,
`<p>...[<ref>]`, and `!<selector>` to exclude. Includes are unioned, then excludes removed. Graph
walks follow the workspace's package edges, as turbo's do: a `dependsOn` naming another project's
task adds that task to a run, not that project to a walk; `<p>...` also reaches the root package's
workspace dependencies (turbo's package graph has every package depend on the root). A selection
may be empty (nothing changed since the ref, a glob that matches no name, excludes that remove
everything): as in turbo, the run then has nothing to do. A filter that names a package or a
directory the workspace does not have is refused, as turbo refuses it.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

from msgspec import Struct

from vx.errors import UnknownTaskError, UsageError, suggestion
from vx.model import ROOT_PROJECT, ProjectConfig, Workspace

_FORM_HINT = (
    "forms: name, @scope/*, ./dir, {dir}, ., //, tag:x, name..., ...name, name^..., ...^name, "
    "[ref], name[ref], !name"
)


class Filter(Struct, frozen=True):
    text: str
    exclude: bool = False
    base: str = (
        ""  # the selector proper: a name glob, a dir, `tag:…`, `.`, `//`, or "" (only a ref)
    )
    dependencies: bool = False  # `<p>...`
    dependents: bool = False  # `...<p>`
    keep_match: bool = True  # False with `^`: the walked ones only
    since: str | None = None  # `[<ref>]`


def parse(text: str) -> Filter:
    """One `--filter` value, or a UsageError saying what is wrong with it."""
    body = text.strip()
    exclude = body.startswith("!")
    body = body[1:] if exclude else body
    since = None
    m = re.fullmatch(r"(.*)\[([^\[\]]*)\]", body)
    if m:
        body, since = m.group(1), m.group(2)
        if not since or since.startswith(("-", "^")) or ".." in since or ":" in since:
            raise UsageError(
                f"--filter {text}: `[{since}]` is not a git ref vx will compare against",
                hint="write a branch, tag or commit, e.g. [origin/main] or [HEAD~1]",
            )
    dependents = body.startswith("...")
    body = body[3:] if dependents else body
    dependencies = body.endswith("...")
    body = body[:-3] if dependencies else body
    keep = True
    if dependents and body.startswith("^"):
        body, keep = body[1:], False
    if dependencies and body.endswith("^"):
        body, keep = body[:-1], False
    if not body and since is None:
        raise UsageError(f"--filter {text!r} selects nothing", hint=_FORM_HINT)
    if "^" in body or "..." in body or body.startswith("!"):
        raise UsageError(f"--filter {text}: cannot read `{body}`", hint=_FORM_HINT)
    return Filter(text, exclude, body, dependencies, dependents, keep, since)


# ---------------------------------------------------------------- selecting


def select(
    filters: Iterable[Filter],
    ws: Workspace,
    configs: Mapping[str, ProjectConfig],
    cwd_package: str,
    cwd_rel: str,
) -> frozenset[str]:
    """The projects the filters select (includes unioned, then excludes removed); empty when
    they select none. A filter naming a package or directory that does not exist is refused."""
    filters = list(filters)
    for f in filters:
        _refuse_missing(f, ws, cwd_rel)
    includes = [f for f in filters if not f.exclude]
    chosen: set[str] = set()
    for f in includes or [Filter("", base="*")]:  # excludes alone start from everything
        chosen |= _one(f, ws, configs, cwd_package, cwd_rel)
    for f in filters:
        if f.exclude:
            chosen -= _one(f, ws, configs, cwd_package, cwd_rel)
    return frozenset(chosen)


def nothing_to_run(texts: Iterable[str], projects: frozenset[str], names: Iterable[str]) -> str:
    """The one line a run whose filters leave it no task says (it exits 0, as turbo's does);
    `texts` as typed (`--filter=x`, `-p y`)."""
    said = " ".join(texts)
    tasks = " or ".join(f"`{n}`" for n in names)
    if not projects:
        return f"nothing to run: {said} selects no project"
    if projects == {ROOT_PROJECT}:
        return f"nothing to run: {said} selects only the root project (//), which has no {tasks}"
    shown = ", ".join(sorted(projects)[:8]) + (", …" if len(projects) > 8 else "")
    return f"nothing to run: no project {said} selects ({shown}) has {tasks}"


# ---------------------------------------------------------------- Nx's project patterns

_NX_GLOB = frozenset("*|{}()[")
_NX_TYPES = ("name", "tag", "directory", "unlabeled")


def nx_select(
    projects: Iterable[str],
    exclude: Iterable[str],
    ws: Workspace,
    configs: Mapping[str, ProjectConfig],
) -> tuple[frozenset[str], list[str]]:
    """`-p` and `--exclude` as `nx run-many` reads them: the projects `-p`'s patterns match (every
    project without any), less those `--exclude`'s match among them; and the patterns that matched
    no project. A pattern is Nx's (findMatchingProjects): a project's name, a glob on names, else a
    glob on project roots (`examples/**`, `packages/*`), `tag:` a tag or tag glob, `name:` and
    `directory:` one kind only, a leading `!` takes away, and a bare word matches the names it is
    a word of (`foo` matches `foo_bar`, not `foo-e2e`)."""
    root = ws.nx_root
    names = {n: (root if n == ROOT_PROJECT and root is not None else n) for n in ws.packages}
    nodes = {
        names[name]: (pkg.dir or ".", tuple(configs[name].tags) if name in configs else ())
        for name, pkg in ws.packages.items()
        if name != ROOT_PROJECT or root is not None
    }
    unmatched: list[str] = []
    wanted = list(projects)
    chosen = _nx_matching(wanted, nodes, unmatched) if wanted else set(nodes)
    gone = _nx_matching(list(exclude), {n: nodes[n] for n in chosen}, unmatched)
    back = {nx_name: n for n, nx_name in names.items()}
    return frozenset(back[n] for n in chosen - gone), unmatched


def unmatched_line(patterns: list[str]) -> str:
    """The one line that names the patterns that matched no project ("" when each did)."""
    if not patterns:
        return ""
    shown = ", ".join(f"`{p}`" for p in dict.fromkeys(patterns))
    return f"{shown} matched no project" if len(patterns) > 1 else f"{shown} matches no project"


def _nx_matching(
    patterns: list[str], nodes: Mapping[str, tuple[str, tuple[str, ...]]], unmatched: list[str]
) -> set[str]:
    matched: set[str] = set()
    if patterns and patterns[0].startswith("!"):
        patterns = ["*", *patterns]  # an exclude first: from every project
    for text in patterns:
        exclude = text.startswith("!")
        kind, value = _nx_pattern(text[1:] if exclude else text, nodes)
        hits = _nx_hits(kind, value, nodes)
        if not hits and text != "*":
            unmatched.append(text)
        matched = matched - hits if exclude else matched | hits
    return matched


def _nx_pattern(text: str, nodes: Mapping[str, object]) -> tuple[str, str]:
    if text in nodes or ":" not in text:
        return ("name" if text in nodes else "unlabeled"), text
    kind, _, value = text.partition(":")
    return (kind, value) if kind in _NX_TYPES else ("unlabeled", text)


def _nx_hits(kind: str, value: str, nodes: Mapping[str, tuple[str, tuple[str, ...]]]) -> set[str]:
    """The projects one pattern (its `!` taken off) matches, as Nx's waterfall finds them."""
    if value == "*":
        return set(nodes)
    if kind == "tag":
        glob = _nx_regex(value) if _NX_GLOB & set(value) else None
        return {
            n
            for n, (_root, tags) in nodes.items()
            if value in tags or glob is not None and any(glob.fullmatch(t) for t in tags)
        }
    hits: set[str] = set()
    if kind in ("name", "unlabeled"):
        if value in nodes:
            return {value}
        if _NX_GLOB & set(value):
            glob = _nx_regex(value)
            hits = {n for n in nodes if glob.fullmatch(n)}
        else:
            word = re.compile(rf"(?<![@a-zA-Z0-9-]){re.escape(value)}(?![@a-zA-Z0-9-])", re.I)
            hits = {n for n in nodes if word.search(n)}
        if hits or kind == "name":
            return hits
    root_glob = _nx_regex(value)
    return {n for n, (root, _tags) in nodes.items() if root == value or root_glob.fullmatch(root)}


def _nx_regex(pattern: str) -> re.Pattern:
    from vx.config.nxinference import glob_regex

    return glob_regex(pattern, literal=True)


def _refuse_missing(f: Filter, ws: Workspace, cwd_rel: str) -> None:
    """A filter that names a package (no glob) or a directory the workspace does not have is a
    typo, not an empty selection: refused, as turbo refuses it."""
    base = f.base
    if not base or base in (".", "//") or base.startswith("tag:"):
        return
    if base.startswith(("./", "../", "/")) or (base.startswith("{") and base.endswith("}")):
        spec = base.strip("{}")
        if any(c in spec for c in "*?") or _by_dir(spec, ws, cwd_rel):
            return
        where = os.path.normpath(os.path.join(cwd_rel, spec)) if not spec.startswith("/") else spec
        if not (ws.root / where).is_dir():
            raise UsageError(
                f"--filter {f.text}: no directory `{spec}` in the workspace",
                facts=(f"looked for: {ws.root / where}",),
                hint="a directory filter names a folder holding packages, e.g. `./packages/*`",
            )
        return
    if any(c in base for c in "*?") or _matched(f, ws, {}, "", cwd_rel):
        return
    names = [n for n in ws.packages if n != ROOT_PROJECT]
    raise UnknownTaskError(
        f"--filter {f.text}: no package named `{base}`",
        hint=suggestion(base, names, noun="packages") or "`vx show` lists the packages",
    )


def _one(f: Filter, ws: Workspace, configs, cwd_package: str, cwd_rel: str) -> set[str]:
    matched = _matched(f, ws, configs, cwd_package, cwd_rel) if f.base else set(ws.packages)
    if f.since is not None:
        matched &= changed_since(ws, f.since)
    out = set(matched) if f.keep_match or not (f.dependencies or f.dependents) else set()
    if f.dependencies:
        out |= _walk(matched, _dependencies(ws))
    if f.dependents:
        out |= _walk(matched, _dependents(ws))
    return out


def _matched(f: Filter, ws: Workspace, configs, cwd_package: str, cwd_rel: str) -> set[str]:
    base = f.base
    if base == ".":
        return {cwd_package}
    if base == "//":
        return {ROOT_PROJECT}
    if base.startswith("tag:"):
        pattern = _glob(base[4:])
        return {
            name for name, cfg in configs.items() if any(pattern.fullmatch(t) for t in cfg.tags)
        }
    if base.startswith(("./", "../")) or (base.startswith("{") and base.endswith("}")):
        return _by_dir(base.strip("{}"), ws, cwd_rel)
    pattern = _glob(base)
    named = {name for name in ws.packages if name != ROOT_PROJECT and pattern.fullmatch(name)}
    if named or "/" in base or "*" in base:
        return named
    scoped = [
        name for name in ws.packages if name.rpartition("/")[2] == base and name.startswith("@")
    ]
    return set(scoped) if len(scoped) == 1 else set()


def _by_dir(spec: str, ws: Workspace, cwd_rel: str) -> set[str]:
    """The package at a (cwd-relative) dir or glob, or the packages under it."""
    joined = os.path.normpath(os.path.join(cwd_rel, spec)) if not spec.startswith("/") else spec
    rel = "" if joined == "." else joined
    if rel.startswith(".."):
        return set()
    if "*" in rel or "?" in rel:
        pattern = _dir_glob(rel)
        return {name for name, pkg in ws.packages.items() if pkg.dir and pattern.fullmatch(pkg.dir)}
    prefix = rel + "/" if rel else ""
    return {
        name
        for name, pkg in ws.packages.items()
        if pkg.dir == rel or (pkg.dir + "/").startswith(prefix)
    }


def _glob(text: str) -> re.Pattern:
    """A name glob: `*` matches any run (slashes too, as pnpm's do), `?` one character."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)
    )


def _dir_glob(text: str) -> re.Pattern:
    """A directory glob: `*` stays within one segment, `**` crosses them."""
    parts = re.split(r"(\*\*|\*|\?)", text)
    table = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(table.get(part, re.escape(part)) for part in parts))


def _dependencies(ws: Workspace) -> dict[str, list[str]]:
    """Each package's dependencies as turbo walks them for `<p>...`: its own, and the root
    package's workspace dependencies (turbo's package graph has every package depend on the root:
    leafygreen-ui's root devDepends on its own CLI, which `--filter=@leafygreen-ui/lib...` then
    runs). The root project itself is not added."""
    root = ws.packages.get(ROOT_PROJECT)
    shared = [d for d in root.deps if d != ROOT_PROJECT] if root is not None else []
    return {
        name: [*pkg.deps, *shared] if name != ROOT_PROJECT else list(pkg.deps)
        for name, pkg in ws.packages.items()
    }


def _dependents(ws: Workspace) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in ws.packages}
    for name, pkg in ws.packages.items():
        for dep in pkg.deps:
            out.setdefault(dep, []).append(name)
    return out


def _walk(start: set[str], edges: Mapping[str, Iterable[str]]) -> set[str]:
    seen: set[str] = set()
    stack = [n for s in start for n in edges.get(s, ())]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(edges.get(name, ()))
    return seen


# ---------------------------------------------------------------- changed since a ref


def changed_since(ws: Workspace, ref: str) -> set[str]:
    """Packages holding a file changed between the merge-base of `ref` and HEAD and the worktree,
    untracked files included; a root-level file changes the root project."""
    from vx.plan.affected import by_project, changed_paths

    return set(by_project(ws, changed_paths(str(ws.root), ref, flag="--filter")))
