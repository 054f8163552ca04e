"""Nx's projects: in a workspace whose root holds nx.json, every `project.json` under the
root is a project beside the package.json members, named by its `name` (else its directory's), and
each project's `implicitDependencies` add to (or, with `!`, take from) its dependencies.

Read during discovery, so only the workspace's parts it needs are loaded, and only for Nx.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from typing import Any, Mapping, NamedTuple

from vx import witness
from vx.config import jsonc
from vx.config.fields import At, as_object, as_strings, kind_of
from vx.errors import ConfigError
from vx.model import ROOT_PROJECT, NxResolved, Package

_GLOB_CHARS = re.compile(r"[*?\[{]")


def read_json(path: str, source: str) -> Any:
    """A JSON (with comments) file, None when missing; what it read is a receipt's."""
    witness.read(path)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start})", file=source, hint="save it as UTF-8"
        ) from None
    return jsonc.loads(text, source)


def members(
    root: str, manifests: dict[str, dict], globbed: set[str]
) -> tuple[dict[str, dict], dict[str, str], dict[str, str], NxResolved | None, Mapping[str, Any]]:
    """Nx's projects: the workspace's package.json members plus every project.json directory, and,
    where nx.json declares `plugins`, every project they infer (vx.config.nxinference).

    Returns the manifests by directory (a project.json-only project gets `{"name": …}`), the file
    each is named by, the Nx name of each directory whose Nx name is not its package's, what
    Nx resolved (None without plugins) and its project graph's edges by Nx name (source imports;
    empty where vx does not ask Nx)."""
    paths = {rel: f"{rel}/package.json" for rel in manifests}
    renamed: dict[str, str] = {}
    out = dict(manifests)
    dirs, files = _walk(root)
    for rel in dirs:
        if rel == "":
            continue  # the root project stays `//`
        source = f"{rel}/project.json"
        obj = as_object(read_json(os.path.join(root, rel, "project.json"), source), At(source))
        name = obj.get("name")
        if name is not None and not isinstance(name, str):
            At(source).key("name").refuse(f"`name` must be a string, got {kind_of(name)}")
        if rel in out:
            npm_name = out[rel].get("name")
            if name and name != npm_name:
                renamed[rel] = name
            continue
        out[rel] = {"name": name or posixpath.basename(rel), "private": True}
        paths[rel] = source
    resolved, edges = _inferred(root, files)
    if resolved is not None:
        _add_inferred(resolved, out, paths, renamed)
    return out, paths, renamed, resolved, edges


def _inferred(root: str, files: list[str]) -> tuple[NxResolved | None, Mapping[str, Any]]:
    """What the workspace's Nx resolves, where nx.json declares `plugins`, and the edges of Nx's
    project graph (source imports): without `plugins` too, where Nx analyses the sources' imports
    and is installed (without it, only the edges the files declare: docs/config.md, Nx)."""
    from vx.config.nxinference import analyses_sources, declares_plugins, nx_installed, resolve

    nx_json = read_json(os.path.join(root, "nx.json"), "nx.json")
    if declares_plugins(nx_json):
        resolved = resolve(root, files, nx_json["plugins"])
        return resolved, resolved.dependencies
    manifest = read_json(os.path.join(root, "package.json"), "package.json")
    if analyses_sources(nx_json, manifest) and nx_installed(root):
        return None, resolve(root, files, None).dependencies
    return None, {}


def _add_inferred(
    resolved: NxResolved, out: dict[str, dict], paths: dict[str, str], renamed: dict[str, str]
) -> None:
    """The projects only a plugin makes (no package.json or project.json of their own), named by
    the file it made them from; Nx's name for each project whose package is named otherwise."""
    for rel, project in resolved.projects.items():
        name = project.get("name")
        if rel == "" or not isinstance(name, str):
            continue
        if rel in out:
            if name != out[rel].get("name"):
                renamed[rel] = name
            continue
        made = (resolved.sources.get(rel) or {}).get("root") or [f"{rel}/project.json"]
        out[rel] = {"name": name, "private": True}
        paths[rel] = made[0] or f"{rel}/project.json"


def _walk(root: str) -> tuple[list[str], list[str]]:
    """The directories holding a project.json, and every file the walk saw (workspace-relative).
    `node_modules`, dot-directories and the directories the .gitignore and .nxignore files
    ignore are not walked, as Nx's own file walk leaves them out: a build writing its gitignored outputs moves
    nothing Nx's answer depends on."""
    found: list[str] = []
    files: list[str] = []

    def walk(rel: str, rules: list[_Rule]) -> None:
        path = os.path.join(root, rel) if rel else root
        witness.read(path)  # a directory's identity moves when an entry comes or goes
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        # Nx's walk honours .nxignore files as it does .gitignore (a fixture workspace in it
        # holds project.json files that are no projects of this one)
        for name in (".gitignore", ".nxignore"):
            ignore = os.path.join(path, name)
            if rel == "":
                witness.read(ignore)
            if any(e.name == name for e in entries):
                witness.read(ignore)
                rules = [*rules, *_gitignore_rules(ignore, rel)]
        for entry in entries:
            if entry.is_file():
                files.append(f"{rel}/{entry.name}" if rel else entry.name)
                if entry.name == "project.json":
                    found.append(rel)
        for entry in sorted(entries, key=lambda e: e.name):
            child = f"{rel}/{entry.name}" if rel else entry.name
            if (
                entry.is_dir(follow_symlinks=False)
                and entry.name != "node_modules"
                and not entry.name.startswith(".")
                and not _ignored(child, rules)
            ):
                walk(child, rules)

    walk("", [])
    return sorted(found), sorted(files)


class _Rule(NamedTuple):
    base: str  # the directory of its .gitignore, "" or ending in "/"
    regex: re.Pattern  # a path relative to base
    negated: bool


def _ignored(rel: str, rules: list[_Rule]) -> bool:
    """Whether git ignores directory `rel`: the last rule that matches it says (a deeper
    .gitignore's rules come later)."""
    verdict = False
    for rule in rules:
        if rel.startswith(rule.base) and rule.regex.fullmatch(rel[len(rule.base) :]):
            verdict = not rule.negated
    return verdict


_EVERYTHING = re.compile(".*")


def _gitignore_rules(path: str, rel: str) -> list[_Rule]:
    """A .gitignore's rules, as git reads them for a directory. A line this reading does not
    follow (an escape) might re-include anything: it stands as a negation matching every path,
    so nothing below it is skipped wrongly (walking too much only costs asking Nx again)."""
    base = f"{rel}/" if rel else ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    rules = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = (line[1:] if negated else line).rstrip(" ").rstrip("/")
        if not pattern:
            continue
        try:
            if "\\" in pattern:
                raise ValueError(pattern)
            anchored = "/" in pattern
            body = _gitignore_regex(pattern[1:] if pattern.startswith("/") else pattern)
            regex = re.compile(body if anchored else "(?:.*/)?" + body)
        except (ValueError, re.error):
            rules.append(_Rule(base, _EVERYTHING, True))
            continue
        rules.append(_Rule(base, regex, negated))
    return rules


def _gitignore_regex(pattern: str) -> str:
    """A gitignore pattern as a regex over a path relative to its .gitignore's directory: `**/`
    any leading directories, a final `/**` everything inside, `*` and `?` within one segment."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif c == "*":
            while i < len(pattern) and pattern[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                raise ValueError(pattern)
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body[:1] in ("!", "^") else body
            out.append("[" + body.replace("[", "\\[") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def implicit_dependencies(
    root: str,
    packages: Mapping[str, Package],
    paths: Mapping[str, str],
    nx_root: str | None = None,
) -> dict[str, tuple]:
    """Each project's deps with its `implicitDependencies` applied: names and globs add, `!name` takes away.
    `nx_root`: the root project's Nx name, which an entry names it by (vx's `//`)."""
    out: dict[str, tuple] = {}
    names = sorted(n for n in packages if n != ROOT_PROJECT)
    if nx_root is not None and ROOT_PROJECT in packages and nx_root not in packages:
        names = sorted([*names, nx_root])
    ours = {n: n for n in names}
    if nx_root in ours and nx_root not in packages:
        ours[nx_root] = ROOT_PROJECT
    for name, pkg in packages.items():
        if name == ROOT_PROJECT:
            continue
        own, source, field_path = own_nx(root, pkg)
        entries = own.get("implicitDependencies")
        if entries is None:
            continue
        at = At(source).key(field_path + "implicitDependencies")
        deps = set(pkg.deps)
        for i, entry in enumerate(as_strings(entries, at, "project names")):
            negated = entry.startswith("!")
            pattern = entry[1:] if negated else entry
            matched = (
                [n for n in names if fnmatch.fnmatchcase(n, pattern)]
                if _GLOB_CHARS.search(pattern)
                else [pattern]
            )
            if (
                not negated
                and not _GLOB_CHARS.search(pattern)
                and pattern not in ours
                and pattern not in packages
            ):  # Nx passes over a `!` one
                at.item(i).refuse(
                    f"implicitDependencies entry `{entry}` names no project",
                    hint=f"projects: {', '.join(names[:12])}",
                )
            found = {ours.get(n, n) for n in matched}
            deps = deps - found if negated else deps | (found - {name})
        out[name] = tuple(sorted(deps))
    return out


def root_name(
    root: str, manifest: Mapping[str, Any] | None, resolved: NxResolved | None
) -> str | None:
    """The Nx name of the workspace's root project — its project.json `name`, else its package.json
    `name` — or None where Nx sees no root project (a root package.json without an `nx` block or a
    project.json beside it, and no plugin that makes one). vx names it `//`; the Nx name reaches it
    too (`vx run root:test:sherif`, `-p root`)."""
    if resolved is not None:
        project = resolved.projects.get("")
        name = project.get("name") if isinstance(project, dict) else None
        return name if isinstance(name, str) else None
    own = read_json(os.path.join(root, "project.json"), "project.json")
    if own is None and "nx" not in (manifest or {}):
        return None
    named = own.get("name") if isinstance(own, dict) else None
    name = named or (manifest or {}).get("name") or os.path.basename(root)
    return name if isinstance(name, str) else None


def own_nx(root: str, pkg: Package) -> tuple[dict, str, str]:
    """The project's project.json (or, without one, package.json's `nx` block), its file and field prefix."""
    directory = os.path.join(root, pkg.dir) if pkg.dir else root
    source = f"{pkg.dir}/project.json" if pkg.dir else "project.json"
    obj = read_json(os.path.join(directory, "project.json"), source)
    if obj is not None:
        return as_object(obj, At(source)), source, ""
    manifest = pkg.manifest_path or "package.json"
    data = read_json(os.path.join(root, manifest), manifest) or {}
    nx = data.get("nx") if isinstance(data, dict) else None
    return (as_object(nx, At(manifest).key("nx")) if nx is not None else {}), manifest, "nx."
