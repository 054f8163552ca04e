"""Config files written as code — vx.config.{js,mjs,cjs,ts,mts} — evaluated by the workspace's own
Node (WS-05), every one of a run in one process, and kept until something they read changes.

`evaluate.mjs` imports each module with loader hooks that transpile TypeScript (the workspace's
`typescript` or `esbuild`) and report every file loaded, checks the default export is JSON data
(WS-06), and says which environment variables the configs read. The evaluated objects are kept in
`<root>/.vx/configs/`, under a key of the config files' contents and the Node binary; a kept
evaluation is used only while every file it loaded has the same identity (mode, size, mtime, ctime,
inode) and every variable it read has the same value, so an edited preset or a changed variable
evaluates again. What it read is also noted for receipts (`vx.witness`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any, Mapping

import xxhash

from vx import witness
from vx.errors import ConfigError

KEEP_DIR = os.path.join(".vx", "configs")
FORMAT = 1  # bump when evaluate.mjs changes what it returns
TIMEOUT_S = 120
_HERE = os.path.dirname(os.path.abspath(__file__))


def evaluate(root: str, files: Mapping[str, str], env: Mapping[str, str]) -> dict[str, Any]:
    """The default export of each code config, by absolute path; `files` maps each path to the
    workspace-relative name refusals use. Raises ConfigError for the first config that fails."""
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
            raise ConfigError(problem["message"], file=files[path], field=problem.get("field") or "",
                              hint=problem.get("hint"))
    return {path: results[path]["value"] for path in files}


def _node(env: Mapping[str, str], source: str) -> str:
    node = shutil.which("node", path=env.get("PATH") or os.defpath)
    if node is None:
        raise ConfigError("a config written as code needs Node.js, and `node` is not on PATH", file=source,
                          hint="install Node.js (20 or newer), or write the config as vx.config.json")
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
    """A kept evaluation that still holds: every file it loaded unchanged, every variable read the same."""
    try:
        with open(os.path.join(root, KEEP_DIR, f"{key}.json"), "rb") as f:
            kept = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if kept.get("format") != FORMAT:
        return None
    for path, identity in kept["deps"]:
        if list(witness.identity(path, True) or ()) != identity:
            return None
    if kept["envWhole"] is not None:
        return kept if dict(env) == kept["envWhole"] else None
    return kept if all(env.get(name) == value for name, value in kept["env"].items()) else None


def _run(root: str, node: str, paths: list[str], files: Mapping[str, str], env: Mapping[str, str]) -> dict:
    started = time.time_ns()
    request = json.dumps({"root": root, "files": paths})
    try:
        proc = subprocess.run([node, os.path.join(_HERE, "evaluate.mjs")], input=request.encode(), cwd=root,
                              env=dict(os.environ) if isinstance(env, witness.ReadEnv) else dict(env),
                              capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"evaluating the config files took longer than {TIMEOUT_S} s", file=files[paths[0]],
                          hint="a config must not wait on the network or a prompt; compute less at load") from None
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        detail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ConfigError(f"Node could not evaluate the config files: {detail[0]}", file=files[paths[0]],
                          hint="`node --version` must be 20.6 or newer (module hooks)") from None
    deps = [[path, list(ident)] for path in out["deps"] if (ident := witness.identity(path, True)) is not None]
    racy = any(witness.racy_times(ident[2], ident[3], started) for _path, ident in deps)
    return {"format": FORMAT, "results": out["results"], "deps": deps, "racy": racy,
            "env": {name: env.get(name) for name in out["env"]},
            "envWhole": dict(os.environ) if out["envWhole"] else None}


def _keep(root: str, key: str, kept: dict) -> None:
    """Write the evaluation where the next run finds it; never one whose files were still changing,
    nor a failed one (what made it fail — a missing transpiler, say — may not be among its files)."""
    if kept.pop("racy") or any("error" in r for r in kept["results"].values()):
        return
    from vx.receipt import ignored_dir

    directory = os.path.join(root, KEEP_DIR)
    try:
        ignored_dir(directory)
        temp = os.path.join(directory, f".{key}.{os.getpid()}.tmp")
        with open(temp, "w") as f:
            json.dump(kept, f)
        os.replace(temp, os.path.join(directory, f"{key}.json"))
    except OSError:
        pass  # keeping is an optimisation: the next run evaluates again


def _note(kept: dict, env: Mapping[str, str]) -> None:
    """What the evaluation read, for a receipt: its files, and its variables through `env`."""
    for path, _identity in kept["deps"]:
        witness.read(path)
    if kept["envWhole"] is not None:
        dict(env)  # reading it whole is what a ReadEnv notes
    for name in kept["env"]:
        env.get(name)
