"""Nx's projects as the workspace's own Nx resolves them, for a workspace whose nx.json declares
`plugins` (`@nx/vite/plugin`, `@nx/js/typescript`, …): the targets those plugins infer exist only
in Nx's answer, so vx asks Nx rather than guessing.

`nxinfer.cjs` runs in the workspace's Node with the workspace's `nx`: it loads the plugins in
process and calls Nx's own `retrieveProjectConfigurations` — each plugin's `createNodes` over the
files its glob matches, merged with project.json, package.json and `targetDefaults` in Nx's order —
so every target is the one `nx show project NAME --json` prints, by construction — and then Nx's
`createProjectGraphAsync`, for the project graph's edges between workspace projects (source
imports above all), which vx adds to its package graph. Without `plugins`, where Nx analyses
source imports (`analyses_sources`) and is installed, only the edges are asked for. It also
reports what the plugins read: the files they opened or probed through `fs`, and the globs they
asked Nx's file index for.

The answer is kept in `.vx/nx/` and used while everything it depended on holds: the content of
each file read (nx.json, the lockfile, every file a plugin's glob matches — vite.config.ts,
jest.config.ts, tsconfig*.json, package.json, project.json — and whatever the plugins opened),
the installed versions of nx and of each plugin, the set of files each plugin glob (and each glob
a plugin asked for) matches in the workspace walk, the Node binary and this helper; and, for the
graph's import edges, every file of the workspace walk and the set of them (a source edit, an
untracked file added, asks Nx again). Files are
compared by identity first and by content when the identity moved, so a `git checkout` that
leaves a config's bytes alone infers nothing again. A warm run reads one small file and stats its
dependencies; a run a receipt replays does not get here at all (each dependency is noted for the
receipt). When the plugins cannot run — nx not installed, a plugin that throws — the run is refused
naming the plugin, the file and Nx's own message: never a smaller graph.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from typing import Any, Iterable, Mapping, Sequence

import xxhash

from vx import witness
from vx.config.evaluation import stderr_fd
from vx.errors import ConfigError
from vx.model import NxResolved

FORMAT = 2  # bump when nxinfer.cjs changes what it answers
KEEP_DIR = os.path.join(".vx", "nx")
KEEP = 4  # kept answers per workspace, the newest (a branch switch finds its own again)
TIMEOUT_S = 600
_HERE = os.path.dirname(os.path.abspath(__file__))
_SKIPPED = ("node_modules/", ".nx/", ".git/", ".vx/")


def declares_plugins(nx_json: Any) -> bool:
    """Whether nx.json lists `plugins`: only then do targets exist that no file spells out."""
    return (
        isinstance(nx_json, dict)
        and isinstance(nx_json.get("plugins"), list)
        and bool(nx_json["plugins"])
    )


# The root dependencies that turn Nx's analysis of source imports on where nx.json has no
# pluginsConfig["@nx/js"] (Nx 21's jsPluginConfig, nx/src/plugins/js/utils/config.js), and their
# @nrwl names, which older Nx read too: asking Nx where it would not analyse only costs time, its
# answer is still its own.
_ANALYSING = tuple(
    f"@{scope}/{name}"
    for scope in ("nx", "nrwl")
    for name in ("workspace", "js", "node", "next", "react", "angular", "web")
)


def analyses_sources(nx_json: Any, manifest: Any) -> bool:
    """Whether Nx's built-in JS plugin adds edges from source imports, as Nx decides it: by
    nx.json's pluginsConfig["@nx/js"].analyzeSourceFiles (on unless said otherwise) where that
    block exists, else by one of the @nx packages among the root package.json's dependencies."""
    config = nx_json.get("pluginsConfig") if isinstance(nx_json, dict) else None
    js = config.get("@nx/js") if isinstance(config, dict) else None
    if isinstance(js, (dict, list)) or js:  # JavaScript's truth: `{}` turns the block on
        return not isinstance(js, dict) or js.get("analyzeSourceFiles", True) is True
    if not isinstance(manifest, dict):
        return False
    declared: set[str] = set()
    for field in ("dependencies", "devDependencies"):
        if isinstance(manifest.get(field), dict):
            declared.update(manifest[field])
    return any(name in declared for name in _ANALYSING)


def nx_installed(root: str) -> bool:
    """Whether the workspace has its own nx (node_modules/nx at the root), noted for a receipt."""
    path = os.path.join(root, "node_modules", "nx", "package.json")
    if os.path.isfile(path):
        witness.read(path)
        return True
    witness.probed(path)
    return False


def resolve(root: str, files: Sequence[str], plugins: list | None) -> NxResolved:
    """The workspace's projects, by root ("" for the workspace root), as Nx resolves them; `files`
    are the workspace's files as the project walk listed them (workspace-relative). `plugins`
    None (nx.json declares none): only the project graph's edges, `projects` left empty."""
    node = _node(plugins is None)
    helper = _helper_digest(node, plugins is None)
    for kept in _kept(root):
        if kept.get("helper") == helper and _holds(root, kept, files):
            _note(root, kept)
            return _resolved(kept)
    answer = _run(root, node, plugins)
    kept = _record(root, answer, files, plugins, helper)
    _keep(root, kept)
    _note(root, kept)
    return _resolved(kept)


def _resolved(kept: dict) -> NxResolved:
    return NxResolved(
        projects=kept["projects"],
        sources=kept["sources"],
        version=kept["nx"],
        reads=frozenset(kept["files"]),
        dependencies=kept.get("dependencies") or {},
    )


def _node(graph_only: bool = False) -> str:
    node = shutil.which("node")
    if node is None:
        what = (
            "Nx analyses the source files' imports (the edges of its project graph)"
            if graph_only
            else "nx.json declares `plugins`, and resolving the targets they infer"
        )
        raise ConfigError(
            f"{what} needs Node.js, which is not on PATH",
            file="nx.json",
            field="" if graph_only else "plugins",
            hint="install Node.js (20 or newer): vx asks the workspace's own Nx for them",
        )
    return node


def _helper_digest(node: str, graph_only: bool) -> str:
    h = xxhash.xxh3_128()
    st = os.stat(node)
    h.update(f"{FORMAT}\0{graph_only}\0{node}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    with open(os.path.join(_HERE, "nxinfer.cjs"), "rb") as f:
        h.update(f.read())
    return h.hexdigest()


# ---------------------------------------------------------------- kept answers


def _kept(root: str) -> Iterable[dict]:
    """The kept answers, newest first."""
    directory = os.path.join(root, KEEP_DIR)
    try:
        entries = sorted(
            (e for e in os.scandir(directory) if e.name.endswith(".json")),
            key=lambda e: -e.stat().st_mtime_ns,
        )
    except OSError:
        return
    for entry in entries:
        try:
            with open(entry.path, "rb") as f:
                kept = json.loads(f.read())
        except (OSError, ValueError):
            continue
        if isinstance(kept, dict) and kept.get("format") == FORMAT:
            yield kept


def _holds(root: str, kept: dict, files: Sequence[str]) -> bool:
    """Whether every file the answer depended on is as it was, and every glob matches the same
    files."""
    stats = kept["stats"]
    for rel, digest in kept["files"].items():
        if _digest(root, rel, stats.get(rel)) != digest:
            return False
    return all(_matched(files, p, x) == d for p, x, d in kept["globs"])


def _digest(root: str, rel: str, known: list | None = None) -> str | None:
    """A file's content digest; "" for a directory, None when missing. `known`: the identity it
    had when its digest was taken — the same identity spares reading it."""
    path = os.path.join(root, rel)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if os.path.isdir(path):
        return ""
    if known is not None and list(witness.identity_of(st, True)) == known[:-1]:
        return known[-1]
    try:
        with open(path, "rb") as f:
            return xxhash.xxh3_128_hexdigest(f.read())
    except OSError:
        return None


def _note(root: str, kept: dict) -> None:
    """What the answer read, for a receipt."""
    for rel, digest in kept["files"].items():
        path = os.path.join(root, rel)
        if digest:
            witness.read(path)
        else:
            witness.probed(path)


def _keep(root: str, kept: dict) -> None:
    from vx.dotvx import ignored_dir, write_whole

    directory = os.path.join(root, KEEP_DIR)
    key = xxhash.xxh3_128_hexdigest(json.dumps([kept["files"], kept["globs"]]).encode())
    try:
        ignored_dir(directory)
        write_whole(os.path.join(directory, f"{key}.json"), json.dumps(kept).encode(), 0o600)
        entries = sorted(
            (e.stat().st_mtime_ns, e.path)
            for e in os.scandir(directory)
            if e.name.endswith(".json")
        )
        for _mtime, path in entries[:-KEEP]:
            os.unlink(path)
    except OSError:
        pass  # keeping is an optimisation: the next run asks Nx again


# ---------------------------------------------------------------- asking Nx


def _run(root: str, node: str, plugins: list | None) -> dict:
    """One Node process: the workspace's Nx resolves its projects (`plugins` None: its graph's
    edges only). Its answer comes back through a file: a plugin may print whatever it likes (it
    goes to vx's stderr)."""
    with tempfile.TemporaryDirectory(prefix="vx-nx-") as scratch:
        answer_path = os.path.join(scratch, "answer.json")
        request = json.dumps({"root": root, "answer": answer_path, "graphOnly": plugins is None})
        try:
            proc = subprocess.run(
                [node, os.path.join(_HERE, "nxinfer.cjs")],
                input=request.encode(),
                cwd=root,
                stdout=stderr_fd(),
                stderr=subprocess.PIPE,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"Nx's plugins took longer than {TIMEOUT_S} s to resolve the projects",
                file="nx.json",
                field="plugins",
                hint="`nx show projects` should say which plugin hangs",
            ) from None
        try:
            with open(answer_path, "rb") as f:
                answer = json.loads(f.read())
        except (OSError, ValueError):
            what = "build its project graph" if plugins is None else "resolve the projects"
            raise ConfigError(
                f"the workspace's Nx could not {what}: "
                + _failure(proc.stderr.decode(errors="replace"), proc.returncode),
                file="nx.json",
                field="" if plugins is None else "plugins",
                hint="`nx show projects` shows Nx's own error; vx needs nx 17 or newer",
            ) from None
    if answer.get("missing"):
        raise ConfigError(
            f"nx.json declares `plugins`, and the workspace's `{answer['missing']}` is not "
            "installed: the targets they infer cannot be known",
            file="nx.json",
            field="plugins",
            hint="install the workspace's dependencies (`npm install`); vx asks the workspace's "
            "own Nx for the targets its plugins infer",
        )
    if answer.get("errors") and plugins is None:
        raise ConfigError(
            "the workspace's Nx could not build its project graph (its edges from source "
            "imports): " + answer["errors"][0]["message"].strip().splitlines()[0],
            file="nx.json",
            hint="`nx graph --file=graph.json` shows Nx's own error; or turn Nx's analysis of "
            'source imports off in nx.json: pluginsConfig: {"@nx/js": {"analyzeSourceFiles": '
            "false}}",
        )
    if answer.get("errors"):
        _refuse(answer["errors"], plugins or [])
    return answer


FAILED = "vx: resolving the Nx projects failed: "


def _failure(stderr: str, code: int) -> str:
    """What went wrong, in one line: the error nxinfer.cjs reports (Node's message, not the stack
    under it), else the last line Node printed that is no stack frame."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(FAILED):
            return ln[len(FAILED) :]
    plain = [ln for ln in lines if not ln.startswith(("at ", "Node.js v", "- "))]
    return plain[-1] if plain else f"exit code {code}"


def _refuse(errors: list[dict], plugins: list) -> None:
    """The first plugin failure, as Nx tells it: the plugin, the file it was reading, Nx's message
    (and how many more failed)."""
    first = errors[0]
    plugin, file, message = first.get("plugin") or "", first.get("file") or "", first["message"]
    unloaded = re.match(r"Could not load plugin (\S+)", message)
    plugin = plugin or (unloaded.group(1) if unloaded else "")
    names = [p if isinstance(p, str) else (p or {}).get("plugin") for p in plugins]
    index = first.get("index")
    if not isinstance(index, int) or not 0 <= index < len(plugins):
        index = names.index(plugin) if plugin in names else None
    field = f"plugins[{index}]" if index is not None else "plugins"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    who = f"the Nx plugin `{plugin}`" if plugin else "Nx"
    where = f" on {file}" if file and file != "nx.json" else ""
    lines = [line.rstrip() for line in message.strip().splitlines() if line.strip()][:6]
    raise ConfigError(
        f"{who} failed{where}{more}: " + "\n  ".join(lines or ["no message"]),
        file=file or "nx.json",
        field="" if file and file != "nx.json" else field,
        hint="fix the file, or the plugin's entry in nx.json (`nx show projects` says the same); "
        "vx never runs a smaller graph than Nx would",
    )


# ---------------------------------------------------------------- what the answer depended on


def _record(
    root: str, answer: dict, files: Sequence[str], plugins: list | None, helper: str
) -> dict:
    """The answer and what it depended on: every file read inside the workspace, every file a
    plugin glob matches, nx's and each plugin's package.json; the match set of every glob."""
    now = time.time_ns()
    deps: set[str] = {"nx.json"}
    for path in answer.get("reads", ()):
        rel = os.path.relpath(path, root)
        if not rel.startswith("../") and rel != ".." and not rel.startswith(_SKIPPED):
            deps.add("" if rel == "." else rel)
    globs: list[list] = []
    for pattern in answer.get("patterns", ()):
        matched = _matches(files, [pattern], [])
        deps.update(matched)
        globs.append([[pattern], [], _set_digest(matched)])
    for patterns, exclude in answer.get("globs", ()):
        globs.append([patterns, exclude, _matched(files, patterns, exclude)])
    # Nx's graph reads every project's sources for its import edges (in its native code, out
    # of `fs`'s sight): every file the walk saw is a dependency, and so is the set of them
    sources = [f for f in files if not f.startswith(_SKIPPED)]
    deps.update(sources)
    globs.append([["**"], [], _set_digest(_matches(files, ["**"], []))])
    # typescript: Nx analyses imports only where it resolves (an install moves the edges)
    packages = ["nx", "@nx/js", "typescript", *(_package(p) for p in plugins or ())]
    deps.update(_package_files(root, packages))
    deps.discard("")
    digests, stats = {}, {}
    for rel in sorted(deps):
        digests[rel] = _digest(root, rel)
        try:
            st = os.stat(os.path.join(root, rel))
        except OSError:
            continue
        if digests[rel] and not witness.racy(st, now):
            stats[rel] = [*witness.identity_of(st, True), digests[rel]]
    return {
        "format": FORMAT,
        "helper": helper,
        "nx": answer["nx"],
        "files": digests,
        "stats": stats,
        "globs": globs,
        "projects": answer["projects"],
        "sources": answer["sources"],
        "dependencies": answer.get("dependencies") or {},
    }


def _package(plugin: Any) -> str:
    """The npm package a `plugins` entry loads (`@nx/vite/plugin` -> `@nx/vite`); a local path as is."""
    name = plugin if isinstance(plugin, str) else (plugin or {}).get("plugin", "")
    if not isinstance(name, str) or name.startswith("."):
        return ""
    parts = name.split("/")
    return "/".join(parts[:2] if name.startswith("@") else parts[:1])


def _package_files(root: str, packages: Iterable[str]) -> set[str]:
    """Each installed package's package.json (its version), as Node would find it from the root."""
    out = set()
    for name in packages:
        if name:
            out.add(f"node_modules/{name}/package.json")
    return out


def _matched(files: Sequence[str], patterns: list, exclude: list) -> str:
    return _set_digest(_matches(files, patterns, exclude))


def _set_digest(paths: list[str]) -> str:
    return xxhash.xxh3_128_hexdigest("\0".join(paths).encode())


def _matches(files: Sequence[str], patterns: list, exclude: list) -> list[str]:
    wanted = [glob_regex(p) for p in patterns if isinstance(p, str)]
    unwanted = [glob_regex(p) for p in exclude if isinstance(p, str)]
    return [
        f
        for f in files
        if any(r.fullmatch(f) for r in wanted) and not any(r.fullmatch(f) for r in unwanted)
    ]


_REGEX_MEMO: dict[tuple[str, bool], re.Pattern] = {}


def glob_regex(pattern: str, literal: bool = False) -> re.Pattern:
    """A glob as Nx's file index reads it (`**`, `*`, `?`, `{a,b}`, `[abc]`), as one regex; an
    extglob or an unclosed `{`/`[` it cannot read matches every path, so a change anywhere asks Nx
    again — or, with `literal`, only itself, as minimatch reads an unclosed brace (a project
    pattern that selects more than Nx would is wrong)."""
    known = _REGEX_MEMO.get((pattern, literal))
    if known is None:
        try:
            known = re.compile(_glob_body(pattern[2:] if pattern.startswith("./") else pattern))
        except (ValueError, re.error):
            known = re.compile(re.escape(pattern) if literal else ".*")
        _REGEX_MEMO[(pattern, literal)] = known
    return known


def _glob_body(pattern: str) -> str:
    if any(x in pattern for x in ("?(", "+(", "@(", "*(", "!(")):
        raise ValueError(pattern)
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "{":
            end, parts = _braces(pattern, i)
            out.append("(?:" + "|".join(_glob_body(p) for p in parts) + ")")
            i = end
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                raise ValueError(pattern)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body[:1] == "!" else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _braces(pattern: str, start: int) -> tuple[int, list[str]]:
    """The alternatives of the `{…}` group at `start`, and the index after it."""
    depth, parts, begin = 0, [], start + 1
    for i in range(start, len(pattern)):
        if pattern[i] == "{":
            depth += 1
        elif pattern[i] == "}":
            depth -= 1
            if depth == 0:
                parts.append(pattern[begin:i])
                return i + 1, parts
        elif pattern[i] == "," and depth == 1:
            parts.append(pattern[begin:i])
            begin = i + 1
    raise ValueError(pattern)


def projects_by_name(resolved: NxResolved) -> Mapping[str, str]:
    """Each resolved project's root, by its Nx name."""
    return {p.get("name", root): root for root, p in resolved.projects.items()}
