"""Config files written as code — vx.config.{js,mjs,cjs,ts,mts} — evaluated by the workspace's own
Node, every one of a run in one process, and kept until something they read changes.

`evaluate.mjs` imports each module with loader hooks that transpile TypeScript (the workspace's
`typescript` or `esbuild`) and report every file loaded, checks the default export is JSON data,
and says which environment variables the configs read. The evaluated objects are kept in
`<root>/.vx/configs/`, under a key of the config files' contents and the Node binary; a kept
evaluation is used only while every file it loaded has the same identity (mode, size, mtime, ctime,
inode) and every variable it read has the same value, so an edited preset or a changed variable
evaluates again. What it read is also noted for receipts (`vx.witness`), and kept per config
(`Evaluated.reads`): `--affected` selects a project when a file its config read changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Mapping, NamedTuple

import xxhash

from vx import witness
from vx.errors import ConfigError

KEEP_DIR = os.path.join(".vx", "configs")
FORMAT = 3  # bump when evaluate.mjs changes what it returns
KEEP = 8  # kept evaluations per workspace, the newest
TIMEOUT_S = 120
_HERE = os.path.dirname(os.path.abspath(__file__))


class Evaluated(NamedTuple):
    """Each code config's default export, and the workspace files its evaluation read besides
    itself (workspace-relative), both by the config's absolute path."""

    values: dict[str, Any]
    reads: dict[str, tuple[str, ...]]
    env: tuple[str, ...] = ()  # the variables the evaluation read, by name


def evaluate(
    root: str,
    files: Mapping[str, str],
    env: Mapping[str, str],
    errors: dict[str, ConfigError] | None = None,
) -> Evaluated:
    """The default export of each code config, by absolute path; `files` maps each path to the
    workspace-relative name refusals use. Raises ConfigError for the first config that fails,
    or with `errors` puts each failing config's there, by path, and leaves out its value (Node
    itself failing still raises: every config of the batch is then unread)."""
    node = _node(env, next(iter(files.values())))
    key = _key(node, files)
    kept = _kept(root, key, env)
    if kept is None:
        kept = _run(root, node, sorted(files), files, env)
        _keep(root, key, kept)
    _note(kept, env)
    results = kept["results"]
    for path in sorted(files):
        problem = results[path].get("error")
        if problem:
            refusal = ConfigError(
                problem["message"],
                file=files[path],
                field=problem.get("field") or "",
                hint=problem.get("hint"),
            )
            if errors is None:
                raise refusal
            errors[path] = refusal
    reads = kept["reads"]
    return Evaluated(
        {path: results[path]["value"] for path in files if errors is None or path not in errors},
        {path: tuple(reads.get(path, ())) for path in files},
        tuple(sorted(kept["env"])),
    )


def per_config(root: str, configs: list[str], deps: list[str], edges: list[list[str]]) -> dict:
    """The workspace files each config read, workspace-relative: the modules its imports reach
    (an edge each, so a module two configs share counts for both), plus every file no import ties
    to one config (one a config read through node:fs, a require()d one), which counts for all."""
    below: dict[str, set[str]] = {}
    for importer, imported in edges:
        below.setdefault(importer, set()).add(imported)
    reach: dict[str, set[str]] = {}
    for config in configs:
        seen, todo = {config}, [config]
        while todo:
            for child in below.get(todo.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        reach[config] = seen
    tied = set().union(*reach.values()) if reach else set()
    loose = [d for d in deps if d not in tied]
    prefixes = {os.path.join(r, "") for r in (root, os.path.realpath(root))}

    def inside(paths) -> list[str]:
        out = set()
        for path in paths:
            for prefix in prefixes:
                if path.startswith(prefix):
                    out.add(path[len(prefix) :])
        return sorted(out)

    return {c: inside(p for p in [*reach[c], *loose] if p != c) for c in configs}


def _node(env: Mapping[str, str], source: str) -> str:
    node = shutil.which("node", path=env.get("PATH") or os.defpath)
    if node is None:
        raise ConfigError(
            "a config written as code needs Node.js, and `node` is not on PATH",
            file=source,
            hint="install Node.js (20 or newer), or write the config as vx.config.json",
        )
    return node


def _key(node: str, files: Mapping[str, str]) -> str:
    """The config files' contents, the Node binary and the evaluator: what an evaluation is kept under."""
    h = xxhash.xxh3_128()
    st = os.stat(node)
    h.update(f"{FORMAT}\0{node}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for name in ("evaluate.mjs", "hooks.mjs"):
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(f.read())
    for path in sorted(files):
        with open(path, "rb") as f:
            h.update(f"{path}\0{len(data := f.read())}\0".encode() + data)
    return h.hexdigest()


def _kept(root: str, key: str, env: Mapping[str, str]) -> dict | None:
    """A kept evaluation that still holds: every file it loaded or read unchanged (or still
    missing), every variable read the same (compared by digest: values are never kept)."""
    from vx.dotvx import env_digest

    try:
        with open(os.path.join(root, KEEP_DIR, f"{key}.json"), "rb") as f:
            kept = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if kept.get("format") != FORMAT:
        return None
    for path, identity in kept["deps"]:
        now = witness.identity(path, True)
        if (list(now) if now is not None else None) != identity:
            return None
    return (
        kept
        if all(env_digest(env.get(name)) == value for name, value in kept["env"].items())
        else None
    )


def _run(
    root: str, node: str, paths: list[str], files: Mapping[str, str], env: Mapping[str, str]
) -> dict:
    """One Node process for every code config. The answer comes back through a file, not stdout:
    a config may print whatever it likes (it goes to vx's stderr)."""
    import tempfile

    from vx.dotvx import env_digest

    started = time.time_ns()
    with tempfile.TemporaryDirectory(prefix="vx-eval-") as scratch:
        answer = os.path.join(scratch, "answer.json")
        request = json.dumps({"root": root, "files": paths, "answer": answer})
        try:
            proc = subprocess.run(
                [node, os.path.join(_HERE, "evaluate.mjs")],
                input=request.encode(),
                cwd=root,
                env=dict(os.environ) if isinstance(env, witness.ReadEnv) else dict(env),
                stdout=stderr_fd(),
                stderr=subprocess.PIPE,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"evaluating the config files took longer than {TIMEOUT_S} s",
                file=files[paths[0]],
                hint="a config must not wait on the network or a prompt; compute less at load",
            ) from None
        try:
            with open(answer, "rb") as f:
                out = json.loads(f.read())
        except (OSError, ValueError):
            detail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [
                f"exit code {proc.returncode}"
            ]
            raise ConfigError(
                f"Node could not evaluate the config files: {detail[0]}",
                file=files[paths[0]],
                hint="`node --version` must be 20.6 or newer (module hooks)",
            ) from None
    deps = [
        [path, list(ident) if (ident := witness.identity(path, True)) is not None else None]
        for path in out["deps"]
    ]
    racy = any(
        ident is not None and witness.racy_times(ident[2], ident[3], started)
        for _path, ident in deps
    )
    return {
        "format": FORMAT,
        "results": out["results"],
        "deps": deps,
        "reads": per_config(root, paths, out["deps"], out["edges"]),
        "racy": racy or out["envWhole"],  # a config that read the whole environment is never kept
        "env": {name: env_digest(env.get(name)) for name in out["env"]},
        "envWhole": out["envWhole"],
    }


def stderr_fd():
    """Where a config's or a plugin's own output goes: vx's stderr (stdout is for a command's
    product)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


def _keep(root: str, key: str, kept: dict) -> None:
    """Write the evaluation where the next run finds it (owner-only, the newest `KEEP` kept); never
    one whose files were still changing, that read the whole environment, or that failed (what
    made it fail — a missing transpiler, say — may not be among its files)."""
    if kept.pop("racy") or any("error" in r for r in kept["results"].values()):
        return
    from vx.dotvx import ignored_dir, write_whole

    directory = os.path.join(root, KEEP_DIR)
    try:
        ignored_dir(directory)
        write_whole(os.path.join(directory, f"{key}.json"), json.dumps(kept).encode(), 0o600)
        _prune(directory)
    except OSError:
        pass  # keeping is an optimisation: the next run evaluates again


def _prune(directory: str) -> None:
    entries = sorted(
        (e.stat().st_mtime, e.path) for e in os.scandir(directory) if e.name.endswith(".json")
    )
    for _mtime, path in entries[:-KEEP]:
        try:
            os.unlink(path)
        except OSError:
            pass


def _note(kept: dict, env: Mapping[str, str]) -> None:
    """What the evaluation read, for a receipt: its files, and its variables through `env`."""
    for path, identity in kept["deps"]:
        if identity is None:
            witness.probed(path)  # missing then: a receipt holds while it stays missing
        else:
            witness.read(path)
    if kept["envWhole"]:
        dict(env)  # reading it whole is what a ReadEnv notes
    for name in kept["env"]:
        env.get(name)
