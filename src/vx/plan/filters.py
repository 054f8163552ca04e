"""`--filter`: which projects a run covers, in pnpm's selector language.

Forms: `<name-glob>` (a scope-less name also matches `@scope/name` when exactly one package has it),
`./<dir>`, `{<dir>}` and `./<glob>` (the package there, or the packages under it), `.` (the cwd's),
`//` (the root project), `tag:<pattern>`, `<p>...` (with its dependencies), `...<p>` (with its
dependents), `<p>^...` / `...^<p>` (only those, not the match itself), `...<p>...`, `[<ref>]`
(packages with files changed since ref, uncommitted and untracked included), `<p>[<ref>]`,
`<p>...[<ref>]`, and `!<selector>` to exclude. Includes are unioned, then excludes removed. Graph
walks follow the workspace's package edges. A filter that selects nothing refuses the run.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

from msgspec import Struct

from vx.errors import UsageError, suggestion
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
    """The projects the filters select (includes unioned, then excludes removed)."""
    filters = list(filters)
    includes = [f for f in filters if not f.exclude]
    chosen: set[str] = set()
    for f in includes or [Filter("", base="*")]:  # excludes alone start from everything
        chosen |= _one(f, ws, configs, cwd_package, cwd_rel)
    if not chosen:
        shown = ", ".join(f.text for f in includes)
        raise UsageError(f"--filter {shown} selects no project", hint=_nothing_hint(includes, ws))
    before = set(chosen)
    for f in filters:
        if f.exclude:
            chosen -= _one(f, ws, configs, cwd_package, cwd_rel)
    if not chosen:
        removed = ", ".join("!" + f.text.lstrip("!") for f in filters if f.exclude)
        raise UsageError(
            f"the excludes {removed} removed every selected project ({len(before)})",
            hint="narrow the excludes, or drop them",
        )
    return frozenset(chosen)


def _one(f: Filter, ws: Workspace, configs, cwd_package: str, cwd_rel: str) -> set[str]:
    matched = _matched(f, ws, configs, cwd_package, cwd_rel) if f.base else set(ws.packages)
    if f.since is not None:
        matched &= changed_since(ws, f.since)
    out = set(matched) if f.keep_match or not (f.dependencies or f.dependents) else set()
    if f.dependencies:
        out |= _walk(matched, {name: pkg.deps for name, pkg in ws.packages.items()})
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


def _nothing_hint(includes: list[Filter], ws: Workspace) -> str:
    for f in includes:
        if (
            f.base
            and not f.base.startswith(("./", "../", "{", "tag:", "["))
            and f.base not in (".", "//")
            and "*" not in f.base
        ):
            near = suggestion(
                f.base, [n for n in ws.packages if n != ROOT_PROJECT], noun="packages"
            )
            if near:
                return near
    if any(f.since is not None for f in includes):
        return "nothing changed there since that ref; drop the [ref] part to run regardless"
    return _FORM_HINT


# ---------------------------------------------------------------- changed since a ref


def changed_since(ws: Workspace, ref: str) -> set[str]:
    """Packages holding a file changed between the merge-base of `ref` and HEAD and the worktree,
    untracked files included; a root-level file changes the root project."""
    from vx.plan.affected import by_project, changed_paths

    return set(by_project(ws, changed_paths(str(ws.root), ref, flag="--filter")))
