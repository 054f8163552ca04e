"""The tools `vx mcp` offers, each a thin reader over a verb's own code: `vx show` (listTasks,
getConfig), `vx run --dry=json` (planTasks), `vx run` (runTasks), `vx last` (getRunHistory,
getFailures, getTaskLog), `vx why` (whyDidThisRerun, explainCacheKey), `vx info`
(getWorkspaceInfo, getCacheStats), `vx cache prune` (pruneCache) and `vx init --dry` (planInit).

Arguments are checked against the tool's inputSchema and never coerced: `"5"` is no integer and
`1` no boolean. Every string a tool returns is masked for the values of the server's secret
environment variables (`vx.proc.masking`), and a config's value under a secret-looking name is
masked whatever its length. `vx run` runs as a child process of its own with its output captured,
so a task's output reaches the result, never the protocol's stream.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from vx.errors import UsageError, VxError
from vx.install import module_argv
from vx.proc.masking import MASK, is_secret_name, mask_text, secrets_of

OUTPUT_TAIL = 16 << 10  # bytes of a run's output a result carries, its end
LOG_DEFAULT = 64 << 10  # bytes of a kept log a result carries unless asked for more
LOG_MOST = 1 << 20
LISTED_FILES = 500  # input files explainCacheKey names before it only counts the rest
RECENT_RUNS = 100  # runs getCacheStats counts hits over

_TASK = {
    "type": "string",
    "minLength": 1,
    "maxLength": 512,
    "pattern": "^[^-]",
    "description": "PKG#TASK (//#TASK for the root project), or a task of the project vx mcp "
    "was started in",
}
_TASKS = {
    "type": "array",
    "items": {**_TASK, "description": "a task name, or PKG#TASK"},
    "minItems": 1,
    "maxItems": 100,
    "description": "the tasks, as `vx run` takes them",
}
_RUN_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 36,
    "pattern": "^[0-9a-f-]+$",
    "description": "a run id or a prefix of one (getRunHistory lists them)",
}
_SELECTION = {
    "tasks": _TASKS,
    "filter": {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": 512},
        "maxItems": 50,
        "description": "project selectors, as `--filter` takes them (web..., ...[origin/main], !x)",
    },
    "all": {"type": "boolean", "description": "every project that declares the task"},
    "affected": {
        "type": "string",
        "maxLength": 256,
        "description": "only tasks a change since this git ref reaches; empty: the default base",
    },
    "only": {"type": "boolean", "description": "the named tasks alone, not their dependencies"},
    "args": {
        "type": "array",
        "items": {"type": "string", "maxLength": 4096},
        "maxItems": 100,
        "description": "arguments for the named tasks (after `--`; in their keys)",
    },
}


def _object(properties: dict, required: tuple[str, ...] = ()) -> dict:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


class Tool:
    __slots__ = ("name", "title", "description", "schema", "run", "read_only")

    def __init__(self, name, title, description, schema, run, read_only=True):
        self.name, self.title, self.description = name, title, description
        self.schema, self.run, self.read_only = schema, run, read_only

    def listed(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.name == "pruneCache",
                "openWorldHint": False,
            },
        }


class Tools:
    """The tool table of one server: the workspace it was started in and its environment."""

    def __init__(self, cwd: Path, env: Mapping[str, str]):
        self.cwd, self.env = cwd, env
        self.secrets = secrets_of(env)
        self.table = {t.name: t for t in _tools(self)}

    def listed(self) -> list[dict]:
        return [t.listed() for t in self.table.values()]

    def has(self, name: str) -> bool:
        return name in self.table

    def call(self, name: str, arguments: dict) -> Any:
        tool = self.table[name]
        problem = check(tool.schema, arguments, "arguments")
        if problem:
            raise UsageError(f"{name}: {problem}", hint="tools/list gives each tool's inputSchema")
        return self.masked(tool.run(arguments))

    def failure(self, exc: Exception) -> str:
        """The text of a tool's error result."""
        if isinstance(exc, VxError):
            return self.masked(exc.render())
        return self.masked(
            f"internal error: {type(exc).__name__}: {exc}\nthis is a bug in vx; please report it"
        )

    def masked(self, value: Any) -> Any:
        if isinstance(value, str):
            return mask_text(value, self.secrets)
        if isinstance(value, dict):
            return {k: self.masked(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.masked(v) for v in value]
        return value

    # ------------------------------------------------------------ the tools

    def list_tasks(self, a: dict) -> dict:
        from vx.cli.show import resolved

        projects = resolved([], self.cwd, self.env)["projects"]
        if "project" in a:
            projects = [p for p in projects if p["name"] == a["project"]]
            if not projects:
                resolved([a["project"]], self.cwd, self.env)  # refuses with the nearest names
        return {
            "projects": [
                {
                    "name": p["name"],
                    "dir": p["dir"],
                    "tasks": p["tasks"],
                    "dependencies": p["dependencies"],
                }
                for p in projects
            ]
        }

    def get_config(self, a: dict) -> dict:
        from vx.cli.show import resolved

        return _defines_masked(resolved([a["name"]] if "name" in a else [], self.cwd, self.env))

    def plan_tasks(self, a: dict) -> dict:
        code, out, err = self._vx(["run", *_run_words(a, "--dry=json")])
        if code != 0:
            raise _refused(code, err)
        return json.loads(out)

    def run_tasks(self, a: dict) -> dict:
        flags = [
            flag for flag, name in (("--force", "force"), ("--no-cache", "noCache")) if a.get(name)
        ]
        if "concurrency" in a:
            flags.append(f"--concurrency={a['concurrency']}")
        if "continue" in a:
            flags.append(f"--continue={a['continue']}")
        with tempfile.TemporaryDirectory(prefix="vx-mcp-") as tmp:
            summary = Path(tmp) / "summary.json"
            words = _run_words(a, *flags, f"--summarize={summary}")
            code, out, err = self._vx(["run", *words])
            try:
                run_id = json.loads(summary.read_text())["runId"]
            except (OSError, ValueError, KeyError):
                raise _refused(code, err) from None
        report = self._report(run_id)
        return {
            **report,
            "ok": code == 0,
            "exitCode": code,
            "output": _tail(out + err, OUTPUT_TAIL),
        }

    def get_run_history(self, a: dict) -> dict:
        from vx.store import runs

        with _history(self) as db:
            listed = (
                runs.invocations(db, a.get("limit", 10), a.get("failedOnly", False)) if db else []
            )
        return {"runs": [runs.invocation_record(r) for r in listed]}

    def get_failures(self, a: dict) -> dict:
        report = self._report(a.get("run"), failed="run" not in a)
        if report["run"] is None:
            return {"run": None, "failures": [], "rerun": None}
        failures = [t for t in report["tasks"] if t["status"] in ("failed", "skipped")]
        return {"run": report["run"], "failures": failures, "rerun": report["rerun"]}

    def get_task_log(self, a: dict) -> dict:
        from vx.cli.last import kept_log, pick
        from vx.store import runs

        with _history(self) as db:
            run = pick(db, a.get("run"), False) if db else None
            if run is None:
                raise UsageError("no run recorded yet", hint="runTasks runs tasks")
            task, data = kept_log(run, runs.task_rows(db, run["run_id"]), a["task"])
        most = a.get("maxBytes", LOG_DEFAULT)
        return {
            "run": run["run_id"],
            "task": task,
            "bytes": len(data),
            "truncated": len(data) > most,
            "log": _tail(data, most),
        }

    def why_did_this_rerun(self, a: dict) -> dict:
        from vx.cli.why import why

        return why(a["task"], self.cwd, self.env)

    def explain_cache_key(self, a: dict) -> dict:
        from vx.cli.why import key_history

        task, rows, unsaved = key_history(a["task"], self.cwd, self.env)
        if not rows:
            return {"task": task, "key": None, "recorded": False}
        key, at, parts = rows[0]
        files = sorted(parts.get("files", {}))
        return {
            "task": task,
            "key": key,
            "recorded": True,
            "recordedAt": at,
            "notSaved": unsaved,
            "components": {
                "workspace": parts.get("fingerprint"),
                "packageJson": parts.get("package"),
                "config": parts.get("config"),
                "forwardedArgs": parts.get("args") is not None,
                "env": {name: value is not None for name, value in parts.get("env", {}).items()},
                "runtime": sorted(parts.get("runtime", {})),
                "lockfile": sorted(parts.get("lockfile", {})),
                "upstream": parts.get("upstream", {}),
                "fileCount": len(files),
                "files": files[:LISTED_FILES],
            },
        }

    def get_cache_stats(self, a: dict) -> dict:
        from vx.cli.info import cache_usage
        from vx.plugins.shaped import open_for_verb
        from vx.store import runs

        found = open_for_verb(self.cwd, None, self.env)
        cache_dir, store_dir = found.cache_dir, found.store_dir
        entries, size = cache_usage(store_dir) or (0, 0)
        with _history(self) as db:
            recent = runs.invocations(db, RECENT_RUNS) if db else []
        tasks = sum(r["task_count"] for r in recent)
        hits = sum(r["hit_count"] for r in recent)
        return {
            "cacheDir": str(cache_dir),
            "store": str(store_dir),
            "entries": entries,
            "bytes": size,
            "recentRuns": {
                "runs": len(recent),
                "tasks": tasks,
                "hits": hits,
                "localHits": sum(r["hit_local_count"] for r in recent),
                "remoteHits": sum(r["hit_remote_count"] for r in recent),
                "upToDate": sum(r["up_to_date_count"] for r in recent),
                "hitRate": round(hits / tasks, 4) if tasks else None,
            },
        }

    def prune_cache(self, a: dict) -> dict:
        from vx.cli.cache import prune_workspace, pruned_data, retention_of

        retention = retention_of(a.get("olderThan"), a.get("maxSize"), ("olderThan", "maxSize"))
        notes: list[str] = []
        pruned = prune_workspace(
            self.cwd, retention, None, a.get("dryRun", False), self.env, notes.append
        )
        if pruned is None:
            return {"pruned": False, "notes": notes}
        return {"pruned": True, **pruned_data(pruned), "notes": notes}

    def plan_init(self, a: dict) -> dict:
        words = ["init", "--dry", *(f"--{n}" for n in ("force", "cache") if a.get(n))]
        code, out, err = self._vx(words)
        if code != 0:
            raise _refused(code, err)
        return {"files": out, "notes": err}

    def get_workspace_info(self, a: dict) -> dict:
        from vx.cli.info import info_rows

        return {"info": dict(info_rows(self.cwd, self.env))}

    # ------------------------------------------------------------ helpers

    def _report(self, prefix: str | None, failed: bool = False) -> dict:
        """`vx last --format json` for the run `prefix` names (the latest, or latest failed)."""
        from vx.cli.last import pick
        from vx.store import runs

        with _history(self) as db:
            run = pick(db, prefix, failed) if db else None
            if run is None:
                return {"run": None, "tasks": [], "rerun": None}
            rows = runs.task_rows(db, run["run_id"])
            return runs.run_record(run, rows, runs.flaky(db, rows))

    def _vx(self, words: list[str]) -> tuple[int, str, str]:
        """Run `vx WORDS` in the server's directory: (exit code, stdout, stderr). Its stdin is
        /dev/null; what it prints is captured, never the protocol's."""
        env = {**self.env, "NO_COLOR": "1"}
        done = subprocess.run(
            [*module_argv("vx"), *words],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        decode = lambda b: b.decode("utf-8", "replace")  # noqa: E731
        return done.returncode, decode(done.stdout), decode(done.stderr)


class _history:
    """The run history, read-only, for a `with` block; None when nothing is recorded yet."""

    def __init__(self, tools: Tools):
        self.tools, self.db = tools, None

    def __enter__(self):
        from vx.cli.last import open_history

        _cache, self.db = open_history(self.tools.cwd, None, self.tools.env)
        return self.db

    def __exit__(self, *exc) -> None:
        if self.db is not None:
            self.db.close()


def _defines_masked(value: Any) -> Any:
    """A config with each `exec.env.define` value masked whose name looks secret or that
    `secret` lists, whatever its length: a config is shown, not run."""
    if isinstance(value, list):
        return [_defines_masked(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _defines_masked(v) for k, v in value.items()}
    define, listed = value.get("define"), value.get("secret", ())
    if isinstance(define, dict):
        out["define"] = {
            name: MASK.decode() if is_secret_name(name) or name in listed else v
            for name, v in define.items()
        }
    return out


def _run_words(a: dict, *flags: str) -> list[str]:
    """`vx run`'s words for a selection, then `flags`; values glued to their flags, so none reads
    as a flag. The task arguments come last: every word after `--` is the tasks', not vx's."""
    words = [*a["tasks"], *flags]
    words += [f"--filter={f}" for f in a.get("filter", ())]
    if a.get("all"):
        words.append("--all")
    if "affected" in a:
        words.append(f"--affected={a['affected']}" if a["affected"] else "--affected")
    if a.get("only"):
        words.append("--only")
    if "args" in a:
        words += ["--", *a["args"]]
    return words


def _refused(code: int, err: str) -> VxError:
    text = err.strip() or f"vx run exited {code}"
    message = text.removeprefix("error: ").splitlines()
    return UsageError(message[0], facts=tuple(line.strip() for line in message[1:]))


def _tail(data: str | bytes, most: int) -> str:
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) <= most:
        return raw.decode("utf-8", "replace")
    return "…" + raw[-most:].decode("utf-8", "replace")


# Each tool: its name, title, description, inputSchema, the `Tools` method that answers it, and
# whether it only reads. In the order tools/list gives them.
_SPECS: tuple[tuple[str, str, str, dict, str, bool], ...] = (
    (
        "listTasks",
        "List tasks",
        "Every project of the workspace with its tasks and workspace dependencies (as `vx show`).",
        _object({"project": {"type": "string", "minLength": 1, "maxLength": 512}}),
        "list_tasks",
        True,
    ),
    (
        "getConfig",
        "Resolved config",
        "The configs as vx resolved them (as `vx show NAME --format json`): without a name "
        "every project; a project; PKG#TASK; or a task in every project that declares it.",
        _object({"name": {"type": "string", "minLength": 1, "maxLength": 512}}),
        "get_config",
        True,
    ),
    (
        "planTasks",
        "Plan a run",
        "What `vx run` would do, running nothing (as `vx run … --dry=json`): each task with "
        "its predicted cache status (hit-local, hit-remote, miss, …), key, command, "
        "dependencies and input files.",
        _object(_SELECTION, ("tasks",)),
        "plan_tasks",
        True,
    ),
    (
        "runTasks",
        "Run tasks",
        "Run tasks and what they depend on (as `vx run`). Returns the run as getFailures "
        "and `vx last` see it — verdict, every task's status, the command that re-runs "
        "what failed — and the end of the output. A failed task is a result (ok: false), "
        "not an error.",
        _object(
            {
                **_SELECTION,
                "force": {"type": "boolean", "description": "ignore hits, run everything"},
                "noCache": {
                    "type": "boolean",
                    "description": "neither read nor write the cache",
                },
                "concurrency": {"type": "integer", "minimum": 1, "maximum": 1024},
                "continue": {"type": "string", "enum": ["never", "deps-ok", "always"]},
            },
            ("tasks",),
        ),
        "run_tasks",
        False,
    ),
    (
        "getRunHistory",
        "Run history",
        "The latest recorded runs, newest first (as `vx last --list --format json`).",
        _object(
            {
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                "failedOnly": {"type": "boolean"},
            }
        ),
        "get_run_history",
        True,
    ),
    (
        "getFailures",
        "Failures",
        "The failed and skipped tasks of the latest failed run (or the run named), with "
        "their reasons, kept log paths and the command that re-runs them.",
        _object({"run": _RUN_ID}),
        "get_failures",
        True,
    ),
    (
        "getTaskLog",
        "Task log",
        "A failed task's kept output in the latest run (or the run named), its end when "
        "longer than maxBytes (as `vx last --log`).",
        _object(
            {
                "task": _TASK,
                "run": _RUN_ID,
                "maxBytes": {"type": "integer", "minimum": 1, "maximum": LOG_MOST},
            },
            ("task",),
        ),
        "get_task_log",
        True,
    ),
    (
        "whyDidThisRerun",
        "Why did this re-run",
        "What changed between the task's last two keys — files, env variables, its "
        "declaration, package.json, lockfiles, arguments, upstream tasks (as `vx why`).",
        _object({"task": _TASK}, ("task",)),
        "why_did_this_rerun",
        True,
    ),
    (
        "explainCacheKey",
        "Explain a cache key",
        "What the task's newest recorded key folds: the workspace fingerprint, package.json, "
        "declaration, env variables (set or unset; never their values), runtime probes, "
        "lockfile entries, upstream keys and input files.",
        _object({"task": _TASK}, ("task",)),
        "explain_cache_key",
        True,
    ),
    (
        "getCacheStats",
        "Cache stats",
        "The cache's location, its entries and their size, and hits over the recent runs.",
        _object({}),
        "get_cache_stats",
        True,
    ),
    (
        "pruneCache",
        "Prune the cache",
        "Evict cache entries unused for longer than olderThan (30d, 12h), then the least "
        "recently used until the cache fits maxSize (10G, 500MB); dryRun says what would go "
        "(as `vx cache prune`).",
        _object(
            {
                "olderThan": {"type": "string", "minLength": 1, "maxLength": 32},
                "maxSize": {"type": "string", "minLength": 1, "maxLength": 32},
                "dryRun": {"type": "boolean"},
            }
        ),
        "prune_cache",
        False,
    ),
    (
        "planInit",
        "Plan vx init",
        "The vx.config.json files `vx init` would write from each package's scripts, written "
        "nowhere (as `vx init --dry`); force: replace existing configs; cache: the cache "
        "blocks on.",
        _object({"force": {"type": "boolean"}, "cache": {"type": "boolean"}}),
        "plan_init",
        True,
    ),
    (
        "getWorkspaceInfo",
        "Workspace info",
        "What vx sees here (as `vx info`): versions, the workspace root, package manager, "
        "projects, cache, workers, sandbox.",
        _object({}),
        "get_workspace_info",
        True,
    ),
)


def _tools(t: Tools) -> list[Tool]:
    return [
        Tool(name, title, description, schema, getattr(t, method), read_only)
        for name, title, description, schema, method, read_only in _SPECS
    ]


# ---------------------------------------------------------------- argument checks

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def check(schema: dict, value: Any, where: str) -> str | None:
    """The first way `value` breaks `schema` (the subset the tools' schemas use), or None."""
    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        return f"{where}: expected {_article(kind)} {kind}, got {_json_kind(value)} {_shown(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {_shown(value)} is not one of {', '.join(schema['enum'])}"
    if kind == "string":
        if len(value) < schema.get("minLength", 0):
            return f"{where}: must not be empty" if value == "" else f"{where}: too short"
        if len(value) > schema.get("maxLength", len(value)):
            return f"{where}: longer than {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{where}: {_shown(value)} does not match {schema['pattern']}"
    if kind == "integer":
        if value < schema.get("minimum", value):
            return f"{where}: {value} is below {schema['minimum']}"
        if value > schema.get("maximum", value):
            return f"{where}: {value} is above {schema['maximum']}"
    if kind == "array":
        if len(value) < schema.get("minItems", 0):
            return f"{where}: needs at least {schema['minItems']} item(s)"
        if len(value) > schema.get("maxItems", len(value)):
            return f"{where}: more than {schema['maxItems']} items"
        for i, item in enumerate(value):
            problem = check(schema.get("items", {}), item, f"{where}[{i}]")
            if problem:
                return problem
    if kind == "object":
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"{where}: `{name}` is required"
        for name, item in value.items():
            if name not in props:
                if schema.get("additionalProperties", True) is False:
                    known = ", ".join(props) or "none"
                    return f"{where}: unknown argument `{name}` (known: {known})"
                continue
            problem = check(props[name], item, f"{where}.{name}")
            if problem:
                return problem
    return None


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def _json_kind(value: Any) -> str:
    for name, test in (
        ("null", lambda v: v is None),
        ("boolean", _TYPES["boolean"]),
        ("integer", _TYPES["integer"]),
        ("number", lambda v: isinstance(v, float)),
        ("string", _TYPES["string"]),
        ("array", _TYPES["array"]),
    ):
        if test(value):
            return name
    return "object"


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
