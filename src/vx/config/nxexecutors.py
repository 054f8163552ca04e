"""An Nx target's executor (`@nx/js:tsc`, a local plugin's `@ws/tools:echo`), resolved as Nx
resolves it and run as one process of `nxexec.cjs`, which calls the executor through the
workspace's own `nx` as `nx run P:T` does.

Resolving here, before anything runs, is what lets a run refuse an executor that is not there by
name (exit 2), key the task on the executor's identity (its package and version, or a local
plugin's files) and know a `continuous` one from its schema, as Nx's normalizeTarget does. The
runner is handed the workspace's projects as vx read them (`context`), in a file under
`.vx/nx-exec/` named by its content, so no executor task recomputes Nx's project graph.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
from typing import Any, Callable, Mapping

from vx import witness
from vx.errors import did_you_mean
from vx.model import Package

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nxexec.cjs")
FORMAT = 1  # bump when nxexec.cjs changes what it runs: every executor task's key moves
CONTEXT_DIR = posixpath.join(".vx", "nx-exec")


class Unresolved(Exception):
    """An executor Nx could not resolve either: the message and the hint."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def _read(path: str) -> Any:
    """A JSON file, None when missing or unreadable; what it read is a receipt's."""
    witness.read(path)
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def _installed(root: str, package: str) -> str | None:
    """`node_modules/<package>` from the workspace root up, as require.resolve looks; None without it."""
    here = root
    while True:
        candidate = os.path.join(here, "node_modules", package)
        if os.path.isfile(os.path.join(candidate, "package.json")):
            return candidate
        witness.probed(os.path.join(candidate, "package.json"))
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def _local(root: str, package: str, packages: Mapping[str, Package]) -> str | None:
    """A local plugin's directory (workspace-relative), as Nx's lookupLocalPlugin finds it: the
    project holding a tsconfig `paths` entry of the name, else the workspace package of the name."""
    for name in ("tsconfig.base.json", "tsconfig.json"):
        tsconfig = _read(os.path.join(root, name))
        if tsconfig is None:
            continue
        paths = ((tsconfig.get("compilerOptions") or {}).get("paths") or {}).get(package) or []
        dirs = sorted((p.dir for p in packages.values() if p.dir), key=len, reverse=True)
        for entry in paths if isinstance(paths, list) else ():
            target = posixpath.normpath(str(entry))
            for d in dirs:
                if target == d or target.startswith(d + "/"):
                    return d
        break  # Nx reads the first of the two only
    for pkg in packages.values():
        if pkg.manifest.get("name") == package and pkg.dir:
            return pkg.dir
    return None


def resolve(root: str, executor: str, packages: Mapping[str, Package]) -> dict:
    """The executor's identity for the key: `{"executor", "package", "nx", "local"?, "continuous"}`
    (a local plugin: its workspace-relative directory). Raises Unresolved."""
    package, _, name = executor.partition(":")
    if not package or not name:
        raise Unresolved(
            f"`{executor}` is not an executor name",
            'write it `<package>:<executor>`, e.g. "@nx/js:tsc"',
        )
    nx_dir = _installed(root, "nx")
    if nx_dir is None:
        raise Unresolved(
            "vx runs an executor through the workspace's `nx`, which is not installed",
            "install it (`npm i -D nx`)",
        )
    local = None
    where = _installed(root, package)
    if where is None:
        local = _local(root, package, packages)
        where = os.path.join(root, local) if local is not None else None
    if where is None:
        raise Unresolved(
            f"`{package}` is neither installed (node_modules/{package}) nor a local plugin "
            "(a tsconfig `paths` entry or a workspace package of that name)",
            f"install it (`npm i -D {package}`), or fix the executor's name",
        )
    manifest = _read(os.path.join(where, "package.json")) or {}
    listed = manifest.get("executors") or manifest.get("builders")
    if not isinstance(listed, str):
        raise Unresolved(
            f"`{package}` has no executors (its package.json names no `executors` file)",
            "an executor is `<package>:<name>` of a package that declares `executors`",
        )
    listing = _read(os.path.join(where, listed)) or {}
    executors = listing.get("executors") or {}
    builders = listing.get("builders") or {}
    if name not in executors and name in builders:
        # an Angular builder: the runner hands it to Nx's Angular adapter, as Nx's run does
        executors = builders
    if name not in executors:
        near = did_you_mean(name, list(executors))
        there = ", ".join(sorted(executors)) or "none"
        raise Unresolved(
            f"`{package}` has no executor `{name}` (in {posixpath.join(local or package, listed)})",
            f"did you mean `{package}:{near}`?" if near else f"the executors there: {there}",
        )
    entry = executors[name]
    schema = (
        _read(os.path.join(os.path.dirname(os.path.join(where, listed)), entry["schema"]))
        if isinstance(entry, dict) and isinstance(entry.get("schema"), str)
        else None
    )
    nx_manifest = _read(os.path.join(nx_dir, "package.json")) or {}
    out: dict[str, Any] = {
        "executor": executor,
        "package": f"{package}@{manifest.get('version', '')}",
        "nx": str(nx_manifest.get("version", "")),
        "runner": FORMAT,
        "continuous": bool(isinstance(schema, dict) and schema.get("continuous")),
    }
    if local is not None:
        out["local"] = local
    return out


def command(
    pkg_dir: str, project: str, target: str, configuration: str | None, context_file: str
) -> str:
    """The task's command, run in its project directory: to the workspace root, then the runner."""
    hop = posixpath.relpath(".", pkg_dir or ".")
    prefix = "" if hop == "." else f"cd {shlex.quote(hop)} || exit 1\n"
    words = [RUNNER, context_file, project, target, configuration or ""]
    return prefix + "node " + " ".join(shlex.quote(w) for w in words)


def write_context(
    root: str,
    packages: Mapping[str, Package],
    shaped: Callable[[Package], tuple[str, dict] | None],
) -> str:
    """The workspace's projects for the runner, as `nx show project NAME --json` prints each, and
    their workspace dependencies, in `.vx/nx-exec/<digest>.json`; its workspace-relative path.
    An unwritable `.vx` leaves the runner to ask Nx for its project graph."""
    import xxhash

    from vx.dotvx import ignored_dir, write_whole

    projects: dict[str, dict] = {}
    names: dict[str, str] = {}
    for pkg in packages.values():
        found = shaped(pkg)
        if found is not None:
            projects[found[0]] = found[1]
            names[pkg.name] = found[0]
    dependencies = {
        names[pkg.name]: [names[d] for d in pkg.deps if d in names]
        for pkg in packages.values()
        if pkg.name in names
    }
    # in the order the files wrote them: an executor sees its options in Nx's order
    data = json.dumps({"projects": projects, "dependencies": dependencies}).encode()
    rel = posixpath.join(CONTEXT_DIR, xxhash.xxh3_128_hexdigest(data) + ".json")
    path = os.path.join(root, rel)
    try:
        if os.path.exists(path):
            os.utime(path)  # the newest again: kept by the pruning below
        else:
            ignored_dir(os.path.join(root, CONTEXT_DIR))
            write_whole(path, data)
            _prune(os.path.join(root, CONTEXT_DIR))
    except OSError:
        pass
    return rel


KEEP = 8  # context files kept: a run still going holds an older one; a missing one costs Nx's graph


def _prune(directory: str) -> None:
    entries = sorted(
        (e.stat().st_mtime_ns, e.path) for e in os.scandir(directory) if e.name.endswith(".json")
    )
    for _mtime, path in entries[:-KEEP]:
        os.unlink(path)
