"""`vx migrate`: the live mapping of turbo.json or Nx, written as vx configs.

Nothing is derived here: each project's tasks are what the live mapping (`vx.config.turbo`,
`vx.config.nx`) makes of them, and a task's declaration is the vx-schema object the mapping
validated (its `canonical` text), so a migrated repository plans what the live one does. What the
mapping adds past vx's schema is written back in vx's own fields where it can be, and is a
`TODO(vx-migrate)` comment with the reason where it cannot (turbo's env patterns and framework
variables, character classes in globs, Nx executors vx does not run).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any, Iterable

from msgspec import Struct

from vx.config import jsonc
from vx.errors import UsageError
from vx.files.globs import GlobSet, class_members, normalise
from vx.model import ROOT_PROJECT, Package, ProjectConfig, TaskConfig, Workspace

TODO = "TODO(vx-migrate)"
# Fields the live mappings put in a declaration beside vx's schema (what the key folds besides).
_MAPPED_EXTRAS = ("implicit", "turboGlobs", "turboEnv", "nxEnv", "nxTsConfig", "nxJson")
_ORDER = ("description", "exec", "dependsOn", "cache")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Top-level fields the live mappings do not use: said in vx.workspace.json, with where vx has them.
_TURBO_UNUSED = {
    "remoteCache": "vx.workspace.json `remoteCache.turbo` (see docs/remote-cache.md)",
    "concurrency": "vx.workspace.json `concurrency`",
    "cacheDir": "vx.workspace.json `cacheDir`",
    "envMode": "vx is strict: a task sees only the variables its config names",
    "ui": "`vx run --ui=tui` (vx.workspace.json has no default UI)",
    "daemon": "vx runs without a daemon",
    "dangerouslyDisablePackageManagerCheck": "not needed by vx",
    "boundaries": "vx has no boundaries check",
    "futureFlags": "not used by vx",
    "noUpdateNotifier": "not used by vx",
}
_NX_UNUSED = {
    "plugins": "a plugin's inferred targets are not seen; write them as tasks",
    "parallel": "vx.workspace.json `concurrency`",
    "cacheDirectory": "vx.workspace.json `cacheDir`",
    "nxCloudId": "no Nx Cloud; vx.workspace.json `remoteCache.nx` for a self-hosted Nx cache",
    "nxCloudAccessToken": "no Nx Cloud; vx.workspace.json `remoteCache.nx` for a self-hosted Nx cache",
    "nxCloudUrl": "no Nx Cloud; vx.workspace.json `remoteCache.nx` for a self-hosted Nx cache",
    "release": "vx does not release packages",
    "generators": "vx has no generators",
    "sync": "vx has no sync generators",
    "defaultBase": "vx.workspace.json `affectedBase`",
}
_TURBO_TASK_UNUSED = {
    "outputLogs": "the `--output-logs` flag of `vx run`",
    "interruptible": "vx restarts nothing in watch mode",
    "with": "write the sibling task as a dependsOn entry, or run both",
}


class Written(Struct, frozen=True):
    path: str  # workspace-relative
    text: str
    replaces: bool = False  # a file of that name (or another vx.config) is there


class Entry(Struct, frozen=True):
    """One task as written: its declaration, the TODOs it leaves and plain notes."""

    name: str
    body: dict
    todos: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def detect(root: str, wanted: str | None) -> str:
    """Which tool's files to migrate from: `--from`, else turbo.json's, else nx.json's."""
    has_turbo = any(os.path.lexists(os.path.join(root, n)) for n in ("turbo.json", "turbo.jsonc"))
    has_nx = os.path.lexists(os.path.join(root, "nx.json"))
    found = {"turbo": has_turbo, "nx": has_nx}
    if wanted is not None:
        if not found[wanted]:
            name = "turbo.json" if wanted == "turbo" else "nx.json"
            raise UsageError(
                f"--from {wanted}: there is no {name} at the workspace root ({root})",
                hint="run `vx migrate` in a Turborepo or Nx workspace",
            )
        return wanted
    if has_turbo:
        return "turbo"
    if has_nx:
        return "nx"
    raise UsageError(
        f"there is nothing to migrate: no turbo.json or nx.json at the workspace root ({root})",
        hint="`vx init` writes vx configs from the package.json scripts",
    )


def live_configs(ws: Workspace, tool: str) -> dict[str, ProjectConfig]:
    """Every project's tasks as the live mapping gives them, a project's own vx.config aside."""
    from vx.config.loader import from_nx, from_turbo, nx_root, turbo_root
    from vx.config.turbo import hook_manager

    root = str(ws.root)
    manager = hook_manager(ws.manager, root)
    out: dict[str, ProjectConfig] = {}
    if tool == "turbo":
        turbo = turbo_root(root)
        assert turbo is not None  # detect() saw the file
        for name, pkg in ws.packages.items():
            directory = os.path.join(root, pkg.dir) if pkg.dir else root
            out[name] = from_turbo(directory, pkg, turbo, manager)
    else:
        nx = nx_root(root, ws)
        assert nx is not None
        for name, pkg in ws.packages.items():
            out[name] = from_nx(nx, pkg, manager)
    return out


def entries(config: ProjectConfig, root: bool = False, directory: str = "") -> list[Entry]:
    """The project's tasks in vx's schema, in the mapping's order; then the ones vx cannot run.
    `root`: the root project's, whose turbo globs reach into every package."""
    out = [_entry(name, task, root, directory) for name, task in config.tasks.items()]
    for name, why in config.not_runnable.items():
        out.append(_refused(name, why))
    return out


def _entry(name: str, task: TaskConfig, root: bool = False, directory: str = "") -> Entry:
    declared = json.loads(task.canonical)
    extras = {k: declared.pop(k) for k in _MAPPED_EXTRAS if k in declared}
    # In the order docs/config.md shows a task (the canonical text's keys are sorted).
    body = {k: declared[k] for k in _ORDER if k in declared}
    body.update((k, v) for k, v in declared.items() if k not in body)
    todos: list[str] = []
    notes: list[str] = []
    if extras.get("implicit"):
        notes.append(_implicit_note(name))
    executor = (body.get("exec") or {}).get("command")
    if isinstance(executor, dict):  # an Nx executor: run by the workspace's own `nx run`
        body["exec"] = {**body["exec"], "command": _nx_run(executor)}
        notes.append(
            f"runs the Nx executor `{executor['executor']}` through `nx run`, which the workspace's "
            "`nx` must stay installed for"
        )
    turbo_env = extras.get("turboEnv")
    if turbo_env:
        todos += _turbo_env(body, turbo_env)
    cache = task.cache
    if root and cache is not None and cache.turbo_globs and body["cache"]["inputs"]["files"]:
        notes.append(_root_inputs(body))
    if extras.get("nxEnv") and "cache" in body:
        body["cache"]["inputs"]["env"] = list(extras["nxEnv"])
    if extras.get("nxTsConfig") and "cache" in body:  # Nx hashes the root tsconfig into every task
        inputs = body["cache"]["inputs"]
        tsconfig = extras["nxTsConfig"]["file"]
        inputs["workspaceFiles"] = list(
            dict.fromkeys([*inputs.get("workspaceFiles", []), tsconfig])
        )
    if task.exec is not None and task.exec.env.framework:
        todos.append(
            f"turbo inferred the `{task.exec.env.framework}` framework for this package and keyed "
            "and passed its variables (NEXT_PUBLIC_*, VITE_*, …); list the ones the build reads in "
            "cache.inputs.env and exec.env.passThrough"
        )
    if cache is not None and cache.turbo_globs and cache.input_reach is None and "cache" in body:
        _negated_inputs(body, cache.input_files, root, directory, todos, notes)
    if cache is not None and cache.turbo_globs and "cache" in body:
        left = _classes_as_braces(body["cache"])
        if left:
            todos.append(
                f"turbo matches {', '.join(left)} with a character class; vx reads `[` as "
                "itself: write the alternatives as {a,b}"
            )
    return Entry(name, body, tuple(todos), tuple(notes))


def _nx_run(identity: dict) -> str:
    """The command a migrated executor target runs: this one task, by Nx, without its cache (vx's
    is in front) or its task dependencies (vx runs them)."""
    return f"nx run {identity['run']} --exclude-task-dependencies --skip-nx-cache"


def _implicit_note(name: str) -> str:
    if not name.startswith("nx-inputs."):
        return "runs nothing (`true`): kept so that what depends on it waits and keys as before"
    named = name.split(".", 1)[1]
    return (
        f"runs nothing (`true`): keyed on this project's `{named}` files, for its dependants' "
        f"`^{named}` input"
    )


def _turbo_env(body: dict, turbo_env: dict) -> list[str]:
    """turbo's env and passThroughEnv, into the task's key and env where they name variables;
    the TODO for the patterns, which vx cannot write."""
    keyed, todo_k = _names(turbo_env.get("keyed", []))
    passed, todo_p = _names(turbo_env.get("passThrough", []))
    if keyed and "cache" in body:
        body["cache"]["inputs"]["env"] = keyed
    if passed:
        body["exec"].setdefault("env", {})["passThrough"] = passed
    patterns = _unique([*todo_k, *todo_p])
    if not patterns:
        return []
    return [
        f"turbo.json env patterns {', '.join(patterns)} were matched against the host's "
        "variables; vx names variables one by one: list the ones this task reads in "
        "cache.inputs.env (and exec.env.passThrough)"
    ]


def _root_inputs(body: dict) -> str:
    """A root task's input globs as workspaceFiles: turbo's globs of a root task see into the
    packages; vx's project-relative globs of the root stop at them, its workspace files do not."""
    inputs = body["cache"]["inputs"]
    # (`!` takes paths back wherever it stands, so the global files may lead.)
    inputs["workspaceFiles"] = [*inputs.get("workspaceFiles", []), *inputs.pop("files")]
    body["cache"]["inputs"] = {"files": [], **inputs}
    return "inputs as workspaceFiles: turbo's globs of a root task reach into the packages"


def _negated_inputs(
    body: dict,
    input_files: Iterable[str],
    root: bool,
    directory: str,
    todos: list[str],
    notes: list[str],
) -> None:
    """turbo's inputs beside negations, written so that vx takes what turbo hashes: a negated
    directory's tree, and a file named outright that a negation matches."""
    files, named = _named_outright(input_files)
    # turbo's walk skips a directory a negation matches; a vx.config's negation matches
    # paths, so the tree is spelt out
    trees = [
        f"{g}/**"
        for g in files
        if g.startswith("!") and re.search(r"[*?\[{]", g) and not g.endswith("/**")
    ]
    if trees:
        files = [*files, *trees]
        listed = "workspaceFiles" if root else "files"  # a root task's went there before
        inputs = body["cache"]["inputs"]
        inputs[listed] = [*inputs.get(listed, []), *trees]
    # a name with an extension is taken for a file (a directory would only key more)
    moved = [] if root else [f for f in named if "." in f.rpartition("/")[2]]
    if moved:
        # a vx.config's negation would take them back; its workspaceFiles are apart
        inputs = body["cache"]["inputs"]
        inputs["workspaceFiles"] = [
            *inputs.get("workspaceFiles", []),
            *(f"{directory}/{normalise(f)}" if directory else normalise(f) for f in moved),
        ]
        inputs["files"] = [f for f in files if f not in moved]
        notes.append(
            f"{', '.join(moved)} in workspaceFiles: turbo hashes a file named outright "
            "whatever the negations beside it say"
        )
    left_named = [f for f in named if f not in moved]
    if left_named:
        todos.append(
            f"turbo hashes {', '.join(left_named)} whatever the negations say, if it is a "
            "file; in vx a negation takes back a file it matches: move the file to "
            "cache.inputs.workspaceFiles"
        )


def _named_outright(globs) -> tuple[list[str], list[str]]:
    """The globs, and those that name one path outright that one of the negations beside them
    matches."""

    globs = list(globs)
    negations = [g for g in globs if g.startswith("!")]
    if not negations:
        return globs, []
    kept = GlobSet(["**", *negations], turbo=True, walk=True)
    return globs, [
        g
        for g in globs
        if not g.startswith("!") and not re.search(r"[*?\[{]", g) and not kept.matches(normalise(g))
    ]


_CLASS = re.compile(r"\[([^\]]*)\]")


def _classes_as_braces(cache: dict) -> list[str]:
    """turbo's character classes (`*.[jt]s`, `[a-c]*`), in place as the braces vx has (`*.{j,t}s`),
    which match the same names; the globs where a class cannot be written so (negated, or inside
    braces) are returned, left as they are."""
    left = []
    for side in ("inputs", "outputs"):
        for key in ("files", "workspaceFiles"):
            globs = cache.get(side, {}).get(key)
            for i, glob in enumerate(globs or ()):
                if "[" not in glob:
                    continue
                written = _CLASS.sub(_braces, glob)
                if "[" in written or _inside_braces(glob):
                    left.append(glob)
                else:
                    globs[i] = written
    return left


def _braces(m: re.Match) -> str:
    body = m.group(1)
    if not body or body[0] in "!^" or any(c in body for c in "{},*?/\\"):
        return m.group(0)  # kept: the caller sees the `[` and leaves a TODO
    chars = list(dict.fromkeys(class_members(body)))
    return chars[0] if len(chars) == 1 else "{" + ",".join(chars) + "}"


def _inside_braces(glob: str) -> bool:
    depth = 0
    for c in glob:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "[" and depth:
            return True
    return False


def _refused(name: str, why: str | tuple[str, str, str, str]) -> Entry:
    """A target the live mapping refuses by name: written as a task that fails saying so, so no
    run looks whole without it (a `^build` passing over a missing task would)."""
    if isinstance(why, tuple):
        message, file, field, hint = why
        reason = f"{file}, {field}: {message}; {hint}"
    else:
        reason = why
    say = f"{TODO}: {name} is not migrated ({reason})"
    return Entry(
        name,
        {"exec": {"command": f"echo {shlex.quote(say)} >&2; exit 1"}},
        (f"{reason.replace(chr(10), ' ')}; write its command here",),
    )


def _names(items: Iterable[str]) -> tuple[list[str], list[str]]:
    """Plain variable names, and the patterns (`NEXT_PUBLIC_*`, `!SECRET`) vx's schema has not."""
    names: list[str] = []
    patterns: list[str] = []
    for item in items:
        (names if _ENV_NAME.match(item) else patterns).append(item)
    return names, patterns


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------- the files


def project_file(
    pkg: Package, config: ProjectConfig, tool: str, fmt: str, preset: dict[str, list[str]]
) -> str:
    """The text of `pkg`'s vx.config.json (JSON with comments) or vx.config.ts."""
    origin = (
        "turbo.json and package.json"
        if tool == "turbo"
        else "nx.json, project.json and package.json"
    )
    head = [f"// Written by `vx migrate` from {origin}: the tasks vx ran from them."]
    items = entries(config, pkg.name == ROOT_PROJECT, pkg.dir)
    if fmt == "ts":
        depth = pkg.dir.count("/") + 1 if pkg.dir else 0
        rel = "./" if depth == 0 else "../" * depth
        uses = sorted({k for e in items for k in _preset_uses(e.body, preset)})
        if uses:
            head.append(f'import {{ {", ".join(uses)} }} from "{rel}vx-preset";')
        head.append("")
        head.append("export default {")
    else:
        head.append("{")
    lines = head
    if config.tags:
        lines.append(f"  {_key('tags', fmt)}: {json.dumps(list(config.tags))},")
    lines.append(f"  {_key('tasks', fmt)}: {{")
    for i, e in enumerate(items):
        lines += [f"    // {TODO}: {t}" for t in e.todos]
        lines += [f"    // {n}" for n in e.notes]
        value = _ts(e.body, preset, "    ") if fmt == "ts" else _json(e.body, "    ")
        comma = "," if i < len(items) - 1 or fmt == "ts" else ""
        lines.append(f"    {json.dumps(e.name)}: {value}{comma}")
    lines.append("  }," if fmt == "ts" else "  }")
    lines.append("};" if fmt == "ts" else "}")
    return "\n".join(lines) + "\n"


def preset_of(configs: Iterable[tuple[Package, ProjectConfig]]) -> dict[str, list[str]]:
    """What is global: the lists every cached task starts with (turbo's globalDependencies and
    globalEnv, Nx's sharedGlobals), by the name `vx-preset.ts` exports them under."""
    lists: dict[str, list[list[str]]] = {"workspaceFiles": [], "env": [], "passThrough": []}
    for pkg, config in configs:
        for e in entries(config, pkg.name == ROOT_PROJECT, pkg.dir):
            for name, value in _lists(e.body):
                lists[name].append(value)
    out = {}
    for name, values in lists.items():
        if len(values) < 2:
            continue
        prefix = values[0]
        for v in values[1:]:
            n = 0
            while n < min(len(prefix), len(v)) and prefix[n] == v[n]:
                n += 1
            prefix = prefix[:n]
        if prefix:
            out[name] = prefix
    return out


def preset_file(preset: dict[str, list[str]], tool: str) -> str:
    origin = {"turbo": "turbo.json's global fields", "nx": "nx.json's shared inputs"}[tool]
    lines = [f"// Written by `vx migrate`: {origin}, shared by every project's vx.config.ts."]
    names = {
        "workspaceFiles": "workspace files",
        "env": "keyed variables",
        "passThrough": "passed variables",
    }
    for name, value in preset.items():
        lines.append(f"// The {names[name]} every task starts with.")
        lines.append(f"export const {name} = {json.dumps(value)};")
    return "\n".join(lines) + "\n"


def _lists(body: dict) -> list[tuple[str, list[str]]]:
    out = []
    inputs = body.get("cache", {}).get("inputs", {})
    for name in ("workspaceFiles", "env"):
        if inputs.get(name):
            out.append((name, inputs[name]))
    passed = body.get("exec", {}).get("env", {}).get("passThrough")
    if passed:
        out.append(("passThrough", passed))
    return out


def _preset_uses(body: dict, preset: dict[str, list[str]]) -> list[str]:
    return [name for name, value in _lists(body) if name in preset and _starts(value, preset[name])]


def _starts(value: list[str], prefix: list[str]) -> bool:
    return value[: len(prefix)] == prefix


def _key(name: str, fmt: str) -> str:
    return name if fmt == "ts" else json.dumps(name)


def _json(value: Any, indent: str) -> str:
    """`value` as indented JSON, each list of strings on one line."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        parts = [f"{inner}{json.dumps(k)}: {_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(parts) + f"\n{indent}}}"
    return json.dumps(value)


def _ts(value: Any, preset: dict[str, list[str]], indent: str, key: str = "") -> str:
    """`value` as a TypeScript literal, a preset's list spread where a list starts with it."""
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{}"
        parts = [f"{inner}{json.dumps(k)}: {_ts(v, preset, inner, k)}," for k, v in value.items()]
        return "{\n" + "\n".join(parts) + f"\n{indent}}}"
    if isinstance(value, list) and key in preset and value and _starts(value, preset[key]):
        rest = value[len(preset[key]) :]
        return "[" + ", ".join([f"...{key}", *(json.dumps(v) for v in rest)]) + "]"
    return json.dumps(value)


def workspace_file(root: str, tool: str) -> tuple[str, str | None]:
    """The root vx.workspace file with `migrated` set — a JSON one already there keeps its text,
    the field added — and a TODO for each field of turbo.json or nx.json vx does not use.
    Returns its path and text; no text for a code file (vx migrate edits no code)."""
    from vx.config.loader import LOADERS

    names = sorted(
        n for n in os.listdir(root) if n.startswith("vx.workspace") and n[12:] in LOADERS
    )
    name = names[0] if names else "vx.workspace.json"
    todos = [f"// {TODO}: {where}" for where in _unused(root, tool)]
    field = f'"migrated": "{tool}"'
    why = (
        f"  // vx reads no {'turbo.json' if tool == 'turbo' else 'nx.json or project.json targets'} "
        "for tasks: every project's vx.config says them (remove this to go back)"
    )
    if not names:
        return name, "\n".join([*todos, "{", why, f"  {field}", "}"]) + "\n"
    if not name.endswith((".json", ".jsonc")):
        return name, None
    with open(os.path.join(root, name), encoding="utf-8") as f:
        text = f.read()
    data = jsonc.loads(text, name)
    if isinstance(data, dict) and "migrated" in data:
        if data["migrated"] != tool:
            raise UsageError(
                f"{name} says `migrated: {json.dumps(data['migrated'])}`; this is --from {tool}",
                hint=f"remove `migrated` from {name} to migrate again",
            )
        return name, text
    brace = text.index("{")
    rest = text[brace + 1 :]
    sep = "," if rest.strip() and not rest.strip().startswith("}") else ""
    new = text[:brace] + "{\n" + why + "\n  " + field + sep + rest
    return name, "\n".join([*todos, new]) if todos else new


def _unused(root: str, tool: str) -> list[str]:
    """The fields of the tool's root file (and turbo.json definitions) vx does not use."""
    name = (
        "nx.json"
        if tool == "nx"
        else next(
            (n for n in ("turbo.json", "turbo.jsonc") if os.path.lexists(os.path.join(root, n))),
            "turbo.json",
        )
    )
    with open(os.path.join(root, name), encoding="utf-8") as f:
        data = jsonc.loads(f.read(), name)
    table = _TURBO_UNUSED if tool == "turbo" else _NX_UNUSED
    out = [f"{name} `{k}` is not migrated: {table[k]}" for k in data if k in table]
    if tool == "turbo":
        for task, body in (data.get("tasks") or data.get("pipeline") or {}).items():
            for k in body if isinstance(body, dict) else ():
                if k in _TURBO_TASK_UNUSED:
                    out.append(f"{name} tasks.{task}.{k} is not migrated: {_TURBO_TASK_UNUSED[k]}")
    return out


def config_path(pkg: Package, fmt: str) -> str:
    name = "vx.config.ts" if fmt == "ts" else "vx.config.json"
    return f"{pkg.dir}/{name}" if pkg.dir else name


def has_tasks(pkg: Package, config: ProjectConfig) -> bool:
    """Whether the project gets a file: it has tasks, tags or refused targets (the root only
    with tasks of its own)."""
    if pkg.name == ROOT_PROJECT:
        return bool(config.tasks or config.not_runnable)
    return bool(config.tasks or config.tags or config.not_runnable)
