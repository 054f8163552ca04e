"""The command line: parse, dispatch, render refusals. The only place that exits.

`vx --version` must stay fast, so this module imports nothing heavy at the top; each verb
imports what it needs when it runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Sequence

if TYPE_CHECKING:
    from vx.cli.args import Args
    from vx.events import Notice

from vx import __version__, witness
from vx.errors import EXIT_OK, EXIT_TASK_FAILED, UsageError, VxError, did_you_mean
from vx.fastpath import receipt

HELP = """vx — a fast, correct task runner and build cache for JavaScript monorepos

usage: vx <verb> [options]

verbs:
  run [OPTIONS] [TASK | PKG#TASK …] [-- ARGS]   run tasks and what they depend on
  run-many -t TASK … [-p P,…] [--exclude P,…]  Nx's spelling of `vx run TASK … --all`
  affected -t TASK … [--base REF]             Nx's spelling of `vx run TASK … --affected=REF`
  watch [OPTIONS] TASK …                      run, then run again on every change that matters
  init [--dry] [--force]                      a vx.config.json per package, from its scripts
  migrate [--from turbo|nx] [--dry] [--force] vx configs written from turbo.json or Nx's targets
  info                                        what vx sees here: versions, workspace, cache, sandbox
  show [PROJECT | PROJECT#TASK | TASK]        the configs as vx resolved them (--format json)
  why PKG#TASK                                what changed between the task's last two keys
  last [RUNID] [--list[=N]] [--failed]        what the latest run did, and how to re-run what failed
  history [PKG#TASK | TASK …] [--window N]    each task's recorded durations, which order a run
  prune PKG … [--docker] [--out-dir DIR]      a partial workspace for PKG, its lockfile cut to it
  cache prune [--older-than D] [--max-size S] evict old and least recently used cache entries
  mcp                                         an MCP server on stdin/stdout: tasks, runs, keys for an agent
  completions bash|zsh|fish                   a completion script for the shell
  help [VERB]                                 show help for vx or one verb
  version                                     print the version (also --version)

`vx help run` lists every flag of `vx run`.
"""

RUN_HELP = """usage: vx run [OPTIONS] [TASK | PKG#TASK …] [-- ARGS]

Runs the named tasks (and everything they depend on) in the project that holds the current
directory; from the workspace root, a task the root does not declare runs in every project
that declares it. Arguments after `--` reach the requested tasks only, and are in their keys.

selection:
  --all                     every project that declares the task
  --filter, -F SELECTOR     only these projects (repeatable): name, @scope/*, ./dir, ., //,
                            tag:x, name... (and its dependencies), ...name (and dependents),
                            name^... / ...^name (without itself), [ref] (changed since ref),
                            !name (exclude)
  --affected[=REF]          only tasks a change since REF reaches (its inputs, or its deps');
                            REF defaults to affectedBase, origin/HEAD, main or master, HEAD~1
options:
  --concurrency N|N%        tasks run at once (default: CPUs, cgroup-aware)
  --continue[=MODE]         never | deps-ok (default) | always (bare: always)
  --force                   ignore cache hits, run everything, save the results
  --no-cache                neither read nor write the cache
  --cache SPEC              read/write per layer, e.g. local:rw,remote:r (`remote:` = off)
  --cache-dir PATH          the cache directory (default: <root>/.vx/cache)
  --download all|toplevel|none  remotely executed outputs fetched: all (default), only the
                            requested tasks', or none (fetched when a task here needs them)
  --timeout MS              default per-task timeout in milliseconds
  --retry N                 default extra attempts for a failing task
  --dry[=text|json]         print the plan with predicted cache status; run nothing
  --graph[=FILE.dot]        the plan as Graphviz DOT, coloured by predicted status; run nothing
  --output-logs MODE        full | new-only | errors-only | hash-only | none: which task
                            output to show (default: by flow; failures are never silent)
  --summarize[=PATH]        write the run summary JSON (default: <cache>/runs/<id>.json)
  --report[=markdown]       a markdown table of the run on stdout (task, status, cache, time)
  --report-file PATH        append that table to PATH, e.g. "$GITHUB_STEP_SUMMARY"
  --format text|json        json: the run's record on stdout (as `vx last --format json`), the
                            rows and frames on stderr; a refusal is {"ok":false,"error":{…}}
  --profile[=FILE]          a Chrome trace of the run (default: profile.json): one span per task
  --verify[=inputs]         run every task traced (no cache reads) and fail on files a
                            cached task read undeclared or wrote outside its outputs
  --framework-inference B   true (default) | false: whether a turbo.json task keys and passes
                            its framework's variables (NEXT_PUBLIC_*, VITE_*, …), as turbo's flag
  --only                    run the named tasks, not their dependencies (turbo's --only; Nx's
                            --exclude-task-dependencies); they are still keyed: a task whose
                            dependency did not run may hit, but is never saved
  --exclude-dependencies[=T,…]  --only for the dependencies named T only (bare: all of them)
  --ui stream|tui           stream (default): rows and frames; tui: a split view on a terminal,
                            the task list and the selected task's output (j/k, q quits)
Nx's spellings (an Nx workspace's `project:target[:configuration]` names work too):
  -t, --targets T,…         the tasks to run         -p, --projects P,…   --filter each
  --exclude P,…             --filter !P for each     -c, --configuration C  run each target's C
  --base REF                --affected=REF           --head HEAD  (vx compares with the working tree)
  --parallel N, --skip-nx-cache: --concurrency, --force

turbo's spellings: --dry-run, --parallel=N, --only; --remote-only, --env-mode, --log-prefix and
--log-order are refused with what to write instead.

exit: 0 all tasks ok · 1 a task failed, was skipped or aborted · 2 usage or config error
      130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP (`--format json` changes none)
"""

INFO_HELP = """usage: vx info

Prints what vx sees from here: its version, git and node, the workspace root, package manager,
projects and tasks (or the config error), the cache dir and its size, workers, and the sandbox.
"""

CACHE_HELP = """usage: vx cache prune [--older-than DUR] [--max-size SIZE] [--dry-run] [--format text|json]
                      [--cache-dir PATH]

Evicts local cache entries not used for longer than DUR (30d, 12h, 90m, 45s, 2w), then the least
recently used until the cache fits in SIZE (10G, 500MB, 64KB; K/M/G/T are powers of 1024), and
sweeps artifacts and temp files no index row accounts for (an hour old) and rows whose artifact
is gone. Waits for a `vx run` of the same workspace to finish first.

  --dry-run        say what would go; remove nothing
  --format json    print {dryRun, evicted, bytesFreed, orphans, orphanBytes, phantoms, kept, keptBytes}

(turbo's prune, a partial workspace for one package, is `vx prune PKG`.)
"""

WATCH_HELP = """usage: vx watch [RUN OPTIONS] TASK [PKG#TASK …] [-- ARGS]

Runs the tasks as `vx run` would, then again each time a file a run could read changes (judged
by content: a save that changes nothing is no edit). Never a trigger: outputs, gitignored paths,
node_modules, .git, .vx. A failing cycle or a broken config keeps watching. Ctrl-C stops
(exit 0). VX_WATCH_POLL=1 polls every 250 ms instead of using the OS's file events.
`--dry`, `--graph`, `--summarize`, `--ui` and `--format` are refused.
"""

INIT_HELP = """usage: vx init [--dry] [--force] [--cache]

Writes a vx.config.json beside each package.json, from its scripts: each script a task running
it (npm's pre/post hooks folded in), `build` after its dependencies' builds, `test` and
`typecheck` after the package's own build, and for each build the cache block to turn on, as a
comment with the output directories its tooling suggests (`--cache`: written on). Long-running
scripts (dev, start, serve, watch, preview, a watcher) become persistent tasks. A root script
that runs one script in every member (`npm run build --workspaces`, `turbo run build`) is no
task: in the root package.json it becomes `vx run build`. Existing configs are kept (`--force`
replaces them); `--dry` prints what it would write. In a Turborepo repository vx already runs
turbo.json unchanged, and in an Nx workspace nx.json and project.json, so `vx init` there
needs `--force`.
"""

MIGRATE_HELP = """usage: vx migrate [--from turbo|nx] [--dry] [--force] [--format json|ts]

Writes a vx.config.json (JSON with comments) beside each project that has tasks, holding the
tasks vx runs today from turbo.json, or from nx.json and the project targets: the same tasks,
dependencies, inputs and outputs, so `vx run build --dry=json` plans the same. Whatever has no
vx field is a `TODO(vx-migrate)` comment saying why (a target executor vx cannot run is a task
that fails saying so). vx.workspace.json gets `"migrated": "turbo"` (or "nx"): from then on vx
reads tasks from the vx configs only. `--from` picks the tool where both files exist (default:
turbo.json). `--format ts` writes vx.config.ts files and a vx-preset.ts with the global lists.
An existing vx.config is refused (exit 2) unless `--force`; `--dry` prints the files instead.
"""

WHY_HELP = """usage: vx why PKG#TASK [--format=json]

Names what changed between the task's last two keys: files (added, removed, edited), declared
env variables, its declaration, its package.json, the workspace's lockfiles, arguments after
`--`, and upstream tasks (each with the next `vx why` to ask). Reads the cache's history only.
"""

LAST_HELP = """usage: vx last [RUNID] [--list[=N]] [--failed] [--log PKG#TASK] [--format text|json]
                [--cache-dir DIR]

Shows the latest recorded run (or the one whose id starts RUNID): its verdict, command, time and
counts, then each task, failures first, with its reason, time, CPU parallelism and peak RSS, and
ends with the command that re-runs what failed. A task whose key has both passed and failed on
record, or that passed on a retry, is marked flaky. `--failed` picks the latest failed run;
`--list[=N]` lists the last N runs (default 10) by their shortest unique id prefixes;
`--log PKG#TASK` prints a failed task's kept log. Reads the run history in the cache only.
"""

HISTORY_HELP = """usage: vx history [PKG#TASK | TASK …] [--window N] [--format text|json] [--cache-dir DIR]

Shows the durations the scheduler expects, from the run history in the cache: for each task that
executed and passed, the number of such runs in the window (the last N, default the workspace's
schedule.window or 20), their median — what orders a run's ready tasks by the longest expected
chain still to run — and the last, fastest and slowest. A bare TASK names it in every project.
Also lists the workspace's schedule.assume entries and its timings file.
"""

SHOW_HELP = """usage: vx show [PROJECT | PROJECT#TASK | TASK] [--format text|json]

Prints the configs as vx resolved them — from vx.config files, configs written as code, or a
Turborepo repository's turbo.json — each task as its key folds it. Without a name: one row per
project with its workspace dependencies, tasks and config file. Nx's `vx show projects` and
`vx show project NAME` work too (in an Nx workspace `vx show project NAME --json` prints the
project as `nx show project NAME --json` does), and `vx ls` is `vx show` (turbo's `ls`).
"""

PRUNE_HELP = """usage: vx prune PKG [PKG …] [--docker] [--out-dir DIR]

Writes a partial workspace for the packages named (turbo's `prune`): them and every workspace
package they depend on, the root's files (package.json, the vx, turbo and package manager
configs), and the lockfile cut to what those packages install — npm, pnpm, yarn (classic and
berry) and bun's text lockfile, each in its own format, so a frozen install accepts it.
Only what git lists is copied (never node_modules or ignored files). The out dir must be new
or empty. (Evicting cache entries is `vx cache prune`.)

  --docker         out/json: the manifests, lockfile and install configs (for the install
                   layer); out/full: the whole pruned workspace; the lockfile also in out/
  --out-dir DIR    where to write, relative to the workspace root (default: out)
  --scope PKG      turbo 1's spelling of a package to keep
"""

MCP_HELP = """usage: vx mcp

A Model Context Protocol server on stdin and stdout (JSON-RPC 2.0, one message a line), for an
agent or editor started in the workspace. Its tools: listTasks, getConfig, planTasks, runTasks,
getRunHistory, getFailures, getTaskLog, whyDidThisRerun, explainCacheKey, getCacheStats,
pruneCache, planInit, getWorkspaceInfo. Only protocol messages go to stdout; vx's and the
tasks' output goes to stderr or into a tool's result. Ends when stdin does.
"""

COMPLETIONS_HELP = """usage: vx completions bash|zsh|fish

Prints a completion script for the shell: verbs and every flag each verb's help names.
  bash: eval "$(vx completions bash)"      zsh: source <(vx completions zsh)
  fish: vx completions fish | source
"""

NX_VERB_HELP = """usage: vx run-many -t TASK[,TASK…] [TASK…] [RUN OPTIONS]
       vx affected -t TASK[,TASK…] [--base REF] [RUN OPTIONS]

Nx's verbs: `run-many` is `vx run … --all`, `affected` is `vx run … --affected[=REF]` (REF from
--base, else affectedBase, origin/HEAD, main or master, HEAD~1). `vx help run` lists the options.
"""

# Flags of `vx run` (and `vx watch`): name -> (kind, dest), kinds as in vx.cli.args: flag | value |
# optional (a value only after `=`) | list (repeatable).
RUN_FLAGS = {
    "--all": ("flag", "all"),
    "--filter": ("list", "filters"),
    "--output-logs": ("value", "output_logs"),
    "--affected": ("optional", "affected"),
    "--concurrency": ("value", "concurrency"),
    "--continue": ("optional", "continue_mode"),
    "--force": ("flag", "force"),
    "--no-cache": ("flag", "no_cache"),
    "--cache": ("value", "cache"),
    "--cache-dir": ("value", "cache_dir"),
    "--download": ("value", "download"),
    "--timeout": ("value", "timeout"),
    "--retry": ("value", "retry"),
    "--dry": ("optional", "dry"),
    "--graph": ("optional", "graph"),
    "--summarize": ("optional", "summarize"),
    "--report": ("optional", "report"),
    "--profile": ("optional", "profile"),
    "--report-file": ("value", "report_file"),
    "--format": ("value", "format"),
    "--verify": ("optional", "verify"),
    "--framework-inference": ("value", "framework_inference"),
    "--ui": ("value", "ui"),
    "--exclude-dependencies": ("optional", "exclude_deps"),
    "--only": ("flag", "only"),
    # Nx's spellings
    "--configuration": ("value", "configuration"),
    "--exclude": ("list", "exclude"),
    "--projects": ("list", "projects"),
    "--targets": ("list", "targets"),
    "--base": ("value", "base"),
    "--head": ("value", "head"),
}
FLAG_ALIASES = {
    "--dry-run": "--dry",
    "--parallel": "--concurrency",
    "--skip-nx-cache": "--force",
    "-F": "--filter",
    "-p": "--projects",
    "-c": "--configuration",
    "-t": "--targets",
    "--target": "--targets",
    "--exclude-task-dependencies": "--only",  # Nx's spelling
}
RUN_SHOWN = (
    "-F",
    "-t",
    "-p",
    "-c",
    "--parallel",
    "--skip-nx-cache",
    "--dry-run",
    "--exclude-task-dependencies",
)  # the aliases RUN_HELP names
WATCH_REFUSED = (
    "--dry",
    "--graph",
    "--summarize",
    "--ui",
    "--format",
)  # run flags that make no sense on every change
# Flags turbo and Nx users type that vx spells otherwise or does not have: what to write instead.
FOREIGN_FLAGS = {
    "--remote-only": "turbo's --remote-only is `--cache=local:,remote:rw` (no local layer)",
    "--env-mode": "vx's environment is always strict: a task sees only the variables it declares "
    "(exec.env.passThrough, cache.inputs.env) and a few system ones",
    "--log-prefix": "vx frames each task's output (`┌─ id`) and prefixes a server's lines (`id │`); "
    "`--output-logs` chooses whose output is shown",
    "--log-order": "vx streams the one task you ask for and prints every other task's output whole, "
    "in one frame each; `--output-logs` chooses whose",
    "--output-style": "`--output-logs` (full, new-only, errors-only, hash-only, none)",
}
CONTINUE_ALIASES = {"dependencies-successful": "deps-ok", "": "always"}
FOREIGN_VERBS = {
    "build": "run build",
    "test": "run test",
    "lint": "run lint",
    "exec": "run",
    "graph": "run --dry",
}
_HELP_FLAG = {"--help": ("flag", "help")}  # for verbs that take -h/--help anywhere on the line
_HELP_ALIAS = {"-h": "--help"}


class Verb:
    """One row of the verb table: its help text, its flags (and their aliases; `shown` are the
    aliases its help names, which completions offer too), the flags it parses only to refuse,
    and whether words after `--` are forwarded. `_VERB_RUNNERS` below runs it."""

    __slots__ = ("help", "flags", "aliases", "shown", "refused", "forwards")

    def __init__(
        self,
        help: str,
        flags: dict[str, tuple[str, str]] | None = None,
        aliases: dict[str, str] | None = None,
        shown: tuple[str, ...] = (),
        refused: tuple[str, ...] = (),
        forwards: bool = False,
    ):
        self.help, self.flags, self.aliases = help, flags or {}, aliases or {}
        self.shown, self.refused, self.forwards = shown, refused, forwards

    def completions(self) -> list[str]:
        """The flags a shell completes for this verb."""
        return sorted({*self.flags, *self.shown, "--help"} - set(self.refused))


VERBS = {
    "run": Verb(RUN_HELP, RUN_FLAGS, FLAG_ALIASES, shown=RUN_SHOWN, forwards=True),
    "run-many": Verb(
        NX_VERB_HELP, RUN_FLAGS, FLAG_ALIASES, shown=RUN_SHOWN, forwards=True
    ),  # Nx's verbs
    "affected": Verb(NX_VERB_HELP, RUN_FLAGS, FLAG_ALIASES, shown=RUN_SHOWN, forwards=True),
    "watch": Verb(
        WATCH_HELP, RUN_FLAGS, FLAG_ALIASES, shown=RUN_SHOWN, refused=WATCH_REFUSED, forwards=True
    ),
    "init": Verb(
        INIT_HELP,
        {
            "--dry": ("flag", "dry"),
            "--force": ("flag", "force"),
            "--cache": ("flag", "cache"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "migrate": Verb(
        MIGRATE_HELP,
        {
            "--from": ("value", "source"),
            "--dry": ("flag", "dry"),
            "--force": ("flag", "force"),
            "--format": ("value", "format"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "info": Verb(INFO_HELP),
    "show": Verb(
        SHOW_HELP,
        {"--format": ("value", "format"), "--json": ("flag", "json"), **_HELP_FLAG},
        _HELP_ALIAS,
    ),
    "ls": Verb(
        SHOW_HELP,
        {"--format": ("value", "format"), "--json": ("flag", "json"), **_HELP_FLAG},
        _HELP_ALIAS,
    ),  # turbo's name for the listing
    "why": Verb(WHY_HELP, {"--format": ("value", "format"), **_HELP_FLAG}, _HELP_ALIAS),
    "last": Verb(
        LAST_HELP,
        {
            "--list": ("optional", "list"),
            "--failed": ("flag", "failed"),
            "--log": ("value", "log"),
            "--format": ("value", "format"),
            "--cache-dir": ("value", "cache_dir"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "history": Verb(
        HISTORY_HELP,
        {
            "--window": ("value", "window"),
            "--format": ("value", "format"),
            "--cache-dir": ("value", "cache_dir"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "cache": Verb(
        CACHE_HELP,
        {
            "--older-than": ("value", "older_than"),
            "--max-size": ("value", "max_size"),
            "--dry-run": ("flag", "dry_run"),
            "--format": ("value", "format"),
            "--cache-dir": ("value", "cache_dir"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "prune": Verb(
        PRUNE_HELP,
        {
            "--docker": ("flag", "docker"),
            "--out-dir": ("value", "out_dir"),
            "--scope": ("list", "scope"),  # turbo 1's spelling of the package
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "mcp": Verb(MCP_HELP),
    "completions": Verb(COMPLETIONS_HELP),
    "help": Verb("usage: vx help [VERB]\n"),
    "version": Verb("usage: vx version\n"),
}
VERB_HELP = {name: verb.help for name, verb in VERBS.items()}


def entry() -> NoReturn:
    """The `vx` command: run `main`, flush, and leave without the interpreter's teardown.

    Everything a run opens is closed before `main` returns — the store (uploads drained), the
    run lock, the sandbox session, every pool and child — so all the interpreter has left to do
    at exit is free memory object by object (docs/optimizations.md #17). `main` itself still
    returns normally for callers in-process."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away, or the stream is closed
            pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["version"]):
        print(f"vx {__version__}")
        return EXIT_OK
    try:
        return _dispatch(args)
    except VxError as exc:
        return _refused(exc, args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # an uncaught exception is a bug: say so, and where
        return _uncaught(exc, args)


def _uncaught(exc: Exception, argv: Sequence[str]) -> int:
    """Out of file descriptors is the machine's limit, said as a refusal; anything else a bug."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        from vx.errors import FDS_HINT, OutOfFds

        return _refused(OutOfFds(f"vx ran out of file descriptors: {exc}", hint=FDS_HINT), argv)
    return _internal_error(exc, argv)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON on stdout: `--format json`, `--format=json` or
    `--dry=json` (`--json` for show) before any `--`, whatever the verb (migrate's `--format`
    is the format of the files it writes). A refusal then answers in JSON too."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    if words[:1] == ["migrate"]:
        return False
    for i, word in enumerate(words):
        if word in ("--format=json", "--dry=json", "--dry-run=json") or (
            word == "--format" and words[i + 1 : i + 2] == ["json"]
        ):
            return True
    return words[:1] in (["show"], ["ls"]) and "--json" in words


def _refused(exc: VxError, argv: Sequence[str]) -> int:
    """Say the refusal on stderr; under JSON also as one line on stdout. The exit code is the
    same either way."""
    _say(_masked(exc.render()))
    if wants_json(argv):
        _refusal_json(exc.code, _masked(exc.prose()))
    return exc.exit_code


def _masked(text: str) -> str:
    """`text` with the environment's secret values shown as *** (`vx.proc.masking`): an error
    may quote what vx was given, a remote's header value or token among it."""
    from vx.proc.masking import mask_text, secrets_of

    return mask_text(text, secrets_of(os.environ)) or ""


def _refusal_json(code: str, message: str) -> None:
    import json

    from vx.errors import docs_of

    doc = {"ok": False, "error": {"code": code, "message": message, "docs": docs_of(code)}}
    try:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        print(HELP, end="")
        return EXIT_OK if args else EXIT_TASK_FAILED
    name, rest = args[0], args[1:]
    verb = VERBS.get(name)
    if verb is None:
        code = _plugin_verb(name, rest)
        if code is None:
            raise _unknown_verb(name)
        return code
    if rest[:1] in (["-h"], ["--help"]):
        print(verb.help, end="")
        return EXIT_OK
    if name == "help":
        return _help(rest)
    if name == "completions":
        return _verb_completions(rest)
    if name == "cache":
        return _verb_cache(rest)
    from vx.cli.args import parse

    tokens = rest
    if verb.flags is RUN_FLAGS:
        tokens = _nx_parallel(rest)
        for tok in tokens[: tokens.index("--")] if "--" in tokens else tokens:
            if (
                tok.partition("=")[0] in FOREIGN_FLAGS
            ):  # turbo's or Nx's: say what vx writes instead
                raise UsageError(
                    f"unknown flag `{tok.partition('=')[0]}` for `vx run`",
                    hint=FOREIGN_FLAGS[tok.partition("=")[0]],
                )
    parsed = parse(name, tokens, verb.flags, verb.aliases, verb.forwards)
    if getattr(parsed, "help", False):
        print(verb.help, end="")
        return EXIT_OK
    for flag in verb.refused:
        if getattr(parsed, verb.flags[flag][1]) is not None:
            raise UsageError(
                f"`{flag}` cannot be used with `vx {name}`",
                hint="watch runs the tasks on every change",
            )
    return _VERB_RUNNERS[name](parsed, rest, args)


def _no_arguments(name: str, parsed) -> None:
    if parsed.names:
        raise UsageError(
            f"`vx {name}` takes no arguments, got `{parsed.names[0]}`", hint=f"see `vx help {name}`"
        )


def _verb_run(parsed, rest: list[str], argv: list[str]) -> int:
    return _run(parsed, argv)


def _verb_run_many(parsed, rest: list[str], argv: list[str]) -> int:
    parsed.all = True  # Nx's `run-many`: `vx run … --all`
    return _run(parsed, argv)


def _verb_affected(parsed, rest: list[str], argv: list[str]) -> int:
    if parsed.affected is None:  # Nx's `affected`: `vx run … --affected`
        parsed.affected = ""
    return _run(parsed, argv)


def _verb_watch(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.watch import watch_verb

    return watch_verb(rest, parsed, os.environ, _say)


def _verb_info(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.info import info_rows, render

    _no_arguments("info", parsed)
    print(render(info_rows(Path(os.getcwd()), os.environ)), end="")
    return EXIT_OK


def _verb_init(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.init import init_verb

    _no_arguments("init", parsed)
    return init_verb(parsed, _say)


def _verb_migrate(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.migrate import migrate_verb

    _no_arguments("migrate", parsed)
    return migrate_verb(parsed, _say)


def _verb_why(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.why import why_verb

    return why_verb(parsed, os.environ)


def _verb_last(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.last import last_verb

    return last_verb(parsed, os.environ)


def _verb_history(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.history import history_verb

    return history_verb(parsed, os.environ)


def _verb_show(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.show import show_verb

    return show_verb(parsed, os.environ)


def _verb_mcp(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.mcp import mcp_verb

    return mcp_verb(parsed, os.environ)


def _verb_prune(parsed, rest: list[str], argv: list[str]) -> int:
    from vx.cli.prune import prune_verb

    return prune_verb(parsed)


def _verb_cache(rest: list[str]) -> int:
    """`vx cache prune …`: the subcommand is a word of its own, then the flags."""
    from vx.cli.args import parse
    from vx.cli.cache import cache_verb, refuse_subcommand

    verb = VERBS["cache"]
    if not rest:
        print(verb.help, end="")
        return EXIT_OK
    if rest[0] != "prune":
        raise refuse_subcommand(rest[0])
    docker = "--docker" in rest[1:]  # turbo's `prune app --docker`, under the cache's verb
    parsed = parse(
        "cache prune", [w for w in rest[1:] if w != "--docker"], verb.flags, verb.aliases
    )
    if parsed.help:
        print(verb.help, end="")
        return EXIT_OK
    if parsed.names or docker:
        raise UsageError(
            "`vx cache prune` evicts cache entries and takes no package",
            hint=f"`vx prune {parsed.names[0] if parsed.names else 'PKG'} --docker` writes a "
            "partial workspace for a package, as turbo's prune does",
        )
    return cache_verb(parsed, os.environ, _say)


def _verb_completions(rest: list[str]) -> int:
    from vx.cli.completions import script

    if len(rest) != 1:
        print(VERBS["completions"].help, end="")
        return EXIT_OK if rest else 2
    flags = {name: verb.completions() for name, verb in VERBS.items()}
    flags.update({verb: [] for verb in _plugin_verbs()})
    print(script(rest[0], flags), end="")
    return EXIT_OK


def _plugin_verbs() -> list[str]:
    """The verbs the workspace's plugins add, for `vx completions`: none where it declares no
    plugins. A plugin that fails to load is warned about and its verbs left out, and so is a
    verb no shell word can spell unquoted (the scripts write verbs bare)."""
    try:
        host = _workspace_plugins()
    except VxError as exc:
        _say(f"vx: warning: plugin verbs left out of the completions: {exc.message}")
        return []
    return [verb for verb in host.verbs() if _shell_word(verb)] if host is not None else []


def _shell_word(text: str) -> bool:
    return text.isascii() and text[:1].isalnum() and all(c.isalnum() or c in "_.:+-" for c in text)


_VERB_RUNNERS = {
    "run": _verb_run,
    "run-many": _verb_run_many,
    "affected": _verb_affected,
    "watch": _verb_watch,
    "info": _verb_info,
    "init": _verb_init,
    "migrate": _verb_migrate,
    "why": _verb_why,
    "last": _verb_last,
    "history": _verb_history,
    "show": _verb_show,
    "ls": _verb_show,
    "prune": _verb_prune,
    "mcp": _verb_mcp,
}


def _workspace_plugins():
    """The plugins of the workspace around the current directory, loaded without a run (no
    `setup`); None outside a workspace or where none is declared."""
    from vx.config.loader import load_workspace
    from vx.workspace.discover import find_root

    try:
        root = find_root(Path(os.getcwd()))
    except VxError:  # no workspace here (or no readable one): no plugin verbs either
        return None
    config = load_workspace(root, os.environ, remote=False)
    if not config.plugins:
        return None
    from vx.plugins.host import load

    return load(config.plugins, root, witness.ReadEnv(os.environ), setup=False)


def _plugin_verb(name: str, rest: list[str]) -> int | None:
    """Run a verb a declared plugin adds; None when no plugin adds it."""
    host = _workspace_plugins()
    if host is None or name not in host.verbs():
        return None
    return host.run_verb(name, rest)


def _plugin_help() -> str:
    """The "Plugin commands" part of `vx help`: nothing outside a workspace with plugin verbs,
    or where loading them fails (the verb itself then says why)."""
    try:
        host = _workspace_plugins()
    except VxError:
        return ""
    verbs = host.verbs() if host is not None else {}
    if not verbs:
        return ""
    width = max(len(v) for v in verbs)
    lines = [
        f"  {verb:<{width}}  {command.get('description', '')} (plugin {plugin.name})"
        for verb, (plugin, command) in sorted(verbs.items())
    ]
    return "\nPlugin commands:\n" + "\n".join(lines) + "\n"


def _help(rest: list[str]) -> int:
    if not rest:
        print(HELP + _plugin_help(), end="")
        return EXIT_OK
    verb = "show" if rest[0] == "ls" else rest[0]
    if verb not in VERB_HELP:
        host = _workspace_plugins()
        added = host.verbs().get(verb) if host is not None else None
        if added is None:
            raise _unknown_verb(verb)
        plugin, command = added
        print(f"vx {verb}: {command.get('description') or 'a verb'} (plugin {plugin.name})")
        return EXIT_OK
    print(VERB_HELP[verb], end="")
    return EXIT_OK


def _unknown_verb(verb: str) -> UsageError:
    if verb in FOREIGN_VERBS:
        return UsageError(f"`{verb}` is not a vx verb", hint=f"try `vx {FOREIGN_VERBS[verb]}`")
    if "#" in verb:
        return UsageError(f"`{verb}` is not a vx verb", hint=f"try `vx run {verb}`")
    near = did_you_mean(verb, VERB_HELP)
    return UsageError(
        f"unknown verb `{verb}`", hint=f"did you mean `vx {near}`?" if near else "see `vx help`"
    )


# ---------------------------------------------------------------- parsing


def _nx_flags(args: Args) -> None:
    """Nx's flags in vx's terms: `-t a,b` names tasks, `-p a,b` and `--exclude a,b` filter projects,
    `--base` is the ref `--affected` compares with."""
    for value in args.targets:
        args.names += [t for t in value.split(",") if t]
    for value in args.projects:
        args.filters += [p for p in value.split(",") if p]
    for value in args.exclude:
        args.filters += [f"!{p}" for p in value.split(",") if p]
    if args.head is not None and args.head != "HEAD":
        raise UsageError(
            f"`--head={args.head}`: vx compares the base with the working tree",
            hint=f"check out {args.head} first, then `vx affected --base=<ref>`",
        )
    if args.base is not None:
        if args.affected not in (None, ""):
            raise UsageError("both `--base` and `--affected=REF`", hint="keep one")
        args.affected = args.base


def _next_is_number(tokens: Sequence[str], i: int) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1].isdigit()


def _nx_parallel(tokens: Sequence[str]) -> list[str]:
    """Nx's `--parallel`: `--parallel=false` runs one at a time, bare or `=true` is the default;
    with a number it is `--concurrency` (an alias)."""
    out: list[str] = []
    for i, tok in enumerate(tokens):
        if tok == "--":
            return out + list(tokens[i:])
        name, eq, value = tok.partition("=")
        if name == "--parallel" and (
            value in ("true", "false") or not eq and not _next_is_number(tokens, i)
        ):
            if value == "false":
                out.append("--concurrency=1")
            continue
        out.append(tok)
    return out


def _no_task_named() -> UsageError:
    """Refuse a bare `vx run`, listing the tasks there are to run from here (off a TTY)."""
    from vx.plan.tasks import package_of
    from vx.plugins.shaped import shaped_projects
    from vx.workspace import discover as workspace

    hint = "e.g. `vx run build`; `vx run build --all` for every project"
    try:
        # the tasks a run would see: those the plugins' `project` hooks add too
        ws, configs = shaped_projects(workspace.discover(Path(os.getcwd())), os.environ)
    except VxError:
        return UsageError("name a task to run", hint=hint)
    here = package_of(ws, Path(os.getcwd()))
    tasks = sorted(configs[here].tasks) or sorted({t for c in configs.values() for t in c.tasks})
    if not tasks:
        return UsageError(
            "name a task to run; no project here declares any task",
            hint="add tasks to a vx.config.json (see docs/config.md)",
        )
    shown = ", ".join(tasks[:20]) + (", …" if len(tasks) > 20 else "")
    return UsageError(
        "name a task to run", facts=(f"tasks: {shown}",), hint=f"e.g. `vx run {tasks[0]}`"
    )


def _framework_inference(text: str | None) -> bool:
    """`--framework-inference true|false`, turbo's flag: whether a turbo.json task keys and passes
    its framework's variables (`NEXT_PUBLIC_*`, …). On unless turned off."""
    if text is None or text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    raise UsageError(
        f"`--framework-inference` takes true or false, got `{text}`",
        hint="e.g. `--framework-inference=false`",
    )


def _plain_int(flag: str, text: str | None) -> int | None:
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 15:
        raise UsageError(
            f"`{flag}` must be a plain decimal number, got `{text}`", hint=f"e.g. `{flag} 3`"
        )
    return int(text)


def _download_mode(text: str | None) -> str:
    if text is None:
        return "all"
    if text not in DOWNLOAD_MODES:
        near = did_you_mean(text, DOWNLOAD_MODES)
        raise UsageError(
            f"`--download {text}` is not a mode",
            hint=f"did you mean `--download {near}`?" if near else "use all, toplevel or none",
        )
    return text


DOWNLOAD_MODES = ("all", "toplevel", "none")


def _continue_mode(text: str | None) -> str:
    if text is None:
        return "deps-ok"  # the scheduler (and asyncio) load only to check a given mode
    from vx.engine.scheduler import CONTINUE_MODES

    mode = CONTINUE_ALIASES.get(text, text)
    if mode not in CONTINUE_MODES:
        near = did_you_mean(text, CONTINUE_MODES)
        raise UsageError(
            f"`--continue={text}` is not a mode",
            hint=f"did you mean `--continue={near}`?" if near else "use never, deps-ok or always",
        )
    return mode


def _dry_format(text: str | None) -> str | None:
    if text is None:
        return None
    if text.startswith("graph="):  # --graph[=path], set above
        return text
    if text in ("", "text"):
        return "text"
    if text == "json":
        return "json"
    raise UsageError(
        f"`--dry={text}` is not a format", hint="use `--dry`, `--dry=text` or `--dry=json`"
    )


# ---------------------------------------------------------------- run


def _run(args: Args, argv: list[str]) -> int:
    import time

    from vx.pipeline import RunRequest

    timer_start = time.perf_counter()
    _nx_flags(args)
    if not args.names:
        raise _no_task_named()
    timeout = _plain_int("--timeout", args.timeout)
    if timeout is not None and not 1 <= timeout <= 2**31 - 1:
        raise UsageError(f"`--timeout` must be between 1 and {2**31 - 1} ms, got {timeout}")
    dry: str | None = args.dry  # --graph plans as a dry run that draws
    if args.dry is not None and args.summarize is not None:
        raise UsageError(
            "`--summarize` cannot be combined with `--dry`",
            hint="a dry run executes nothing to summarise",
        )
    if args.report not in (None, "", "markdown"):
        raise UsageError(
            f"`--report={args.report}` is not a format", hint="--report (or --report=markdown)"
        )
    if (args.report is not None or args.report_file is not None or args.profile is not None) and (
        args.dry is not None or args.graph is not None
    ):
        raise UsageError(
            "`--report` and `--profile` cannot be combined with `--dry` or `--graph`",
            hint="a plan runs nothing to report",
        )
    if args.graph is not None:
        if args.summarize is not None or args.dry is not None:
            raise UsageError(
                "`--graph` cannot be combined with `--dry` or `--summarize`",
                hint="`--graph` plans and draws; nothing runs",
            )
        from vx.report.dry import graph_target

        dry = "graph=" + graph_target(args.graph)
    verify = _verify_mode(args.verify, dry)
    as_json = _run_format(args)
    tui = _tui(args.ui, dry is not None)
    if args.filters:
        from vx.plan.filters import parse

        for text in args.filters:
            parse(text)  # a malformed filter is refused before anything is read
    req = RunRequest(
        cwd=Path(os.getcwd()),
        names=tuple(args.names),
        all=args.all,
        filters=tuple(args.filters),
        affected=_affected_ref(args.affected),
        forward_args=tuple(args.forward),
        concurrency=args.concurrency,
        continue_mode=_continue_mode(args.continue_mode),
        download=_download_mode(args.download),
        no_cache=args.no_cache,
        force=args.force,
        cache_dir=args.cache_dir,
        timeout_ms=timeout,
        retries=_plain_int("--retry", args.retry),
        cache_spec=args.cache,
        dry=dry is not None,
        verify=verify,
        framework_inference=_framework_inference(args.framework_inference),
        configuration=args.configuration,
        fast_paths=os.environ.get("VX_FASTPATH", "") not in ("0", "false", "no", "off"),
        lend_terminal=not tui and not as_json,  # an interactive task would write into the JSON
        exclude_deps=_exclude_deps(args, argv),
    )
    report = (args.report is not None, args.report_file)
    profile = (args.profile or "profile.json") if args.profile is not None else None
    with _document_stdout(as_json or _dry_format(dry) == "json"):
        return _run_request(
            req,
            _dry_format(dry),
            args.summarize,
            timer_start,
            argv,
            _output_logs(args.output_logs),
            report,
            profile,
            tui,
            as_json,
        )


_DOCUMENT: list = []  # under JSON, the kept stdout that the run's document alone is written to


class _document_stdout:
    """Under JSON, stdout is the document's alone: for the run, fd 1 (so a plugin's print, a
    stray write, a child a plugin starts) is stderr, and the document goes to the kept stdout."""

    def __init__(self, on: bool):
        self.on, self.kept = on, -1

    def __enter__(self) -> None:
        if self.on:
            sys.stdout.flush()
            self.kept = os.dup(1)
            os.dup2(2, 1)
            _DOCUMENT.append(os.fdopen(self.kept, "w", encoding="utf-8", closefd=False))

    def __exit__(self, *exc) -> None:
        if not self.on:
            return
        stream = _DOCUMENT.pop()
        for out in (stream, sys.stdout):  # what is buffered goes where it was written to
            try:
                out.flush()
            except (BrokenPipeError, ValueError):
                pass
        os.dup2(self.kept, 1)
        os.close(self.kept)


def _document_out():
    return _DOCUMENT[-1] if _DOCUMENT else sys.stdout


_CLASH_HINTS = {
    "--dry": "a plan as JSON is `--dry=json`",
    "--graph": "`--graph` draws the plan and runs nothing; drop one of them",
    "--report": "`--report-file PATH` writes the table to a file instead",
    "--ui=tui": "the split view needs the terminal; `--format json` is for scripts",
}


def _run_format(args: Args) -> bool:
    """`--format json`: the run's record on stdout, everything else on stderr. Refused beside
    the flags that print their own product on stdout."""
    from vx.cli.args import one_of

    if one_of("--format", args.format, ("text", "json"), "text") == "text":
        return False
    clash = [
        flag
        for flag, given in (
            ("--dry", args.dry is not None),
            ("--graph", args.graph is not None),
            ("--report", args.report is not None and args.report_file is None),
            ("--ui=tui", args.ui == "tui"),
        )
        if given
    ]
    if clash:
        raise UsageError(
            f"`--format json` cannot be combined with `{clash[0]}`",
            hint=_CLASH_HINTS[clash[0]],
        )
    return True


def _exclude_deps(args: Args, argv: list[str]) -> tuple[str, ...] | None:
    """`--only`, `--exclude-dependencies` (every edge) or `--exclude-dependencies=a,b` (edges to
    tasks named a or b); an empty `=` is refused."""
    if args.exclude_deps is None:
        return () if args.only else None
    if args.exclude_deps == "" and "--exclude-dependencies=" in argv[: _forwarded_at(argv)]:
        raise UsageError(
            "`--exclude-dependencies=` names no task",
            hint="`--exclude-dependencies` alone drops every dependency; `=build,lint` only those",
        )
    names = tuple(n.strip() for n in args.exclude_deps.split(",") if n.strip())
    if args.exclude_deps and not names:
        raise UsageError(f"`--exclude-dependencies={args.exclude_deps}` names no task")
    return names


def _forwarded_at(argv: list[str]) -> int:
    return argv.index("--") if "--" in argv else len(argv)


def _tui(value: str | None, dry: bool) -> bool:
    """`--ui=tui` (turbo's flag): the split view when vx has a terminal; off one, the stream."""
    from vx.cli.args import one_of

    if one_of("--ui", value, ("stream", "tui"), "stream") == "stream" or dry:
        return False
    ci = os.environ.get("CI", "").lower() not in ("", "0", "false")
    if ci or not (sys.stdin.isatty() and sys.stdout.isatty()):
        _say("vx: --ui=tui needs a terminal (stdin and stdout); streaming the output instead")
        return False
    from vx.report.tui import available

    if not available():
        from vx.errors import EnvironmentFailure

        raise EnvironmentFailure(
            "`--ui=tui` needs the textual package, which is not installed",
            hint="pip install 'vx[tui]' (or textual), or drop `--ui=tui`",
        )
    return True


def _affected_ref(value: str | None) -> str | None:
    """`--affected` ("" : the default base) or `--affected=<ref>`, checked before anything is read."""
    if value:
        from vx.files.git import check_ref

        check_ref(value)
    return value


def _run_request(
    req,
    dry: str | None,
    summarize: str | None,
    timer_start: float,
    argv: list[str],
    output_logs: str | None = None,
    report: tuple[bool, str | None] = (False, None),
    profile: str | None = None,
    tui: bool = False,
    as_json: bool = False,
) -> int:
    import time

    from vx import pipeline as run
    from vx.runlock import RunLock
    from vx.stages import Stages

    stages = Stages(os.environ.get("VX_TIMING", "") not in ("", "0"), timer_start)
    env = witness.ReadEnv(os.environ)
    if dry is not None:
        return _dry(run.prepare(req, env, stages, warn=_warning), dry)
    receipted = (
        summarize is None
        and profile is None
        and not any(report)
        and not req.verify
        and not tui  # a receipt prints as the stream does
        and receipt.enabled(env)
    )
    started_ns = time.time_ns()
    if receipted:
        witness.start()
    if env.get(
        "VX_KILL_GRACE_MS"
    ):  # unset is the default; the executor (and asyncio) load only to check a value
        from vx.proc.executor import kill_grace_ms

        kill_grace_ms(env)  # a bad VX_KILL_GRACE_MS is refused before anything runs
    tracer = _input_tracer(env) if req.verify else None
    reporter, summary = None, None
    logs: dict = {}
    record: tuple[list, list[list]] | None = None
    noticed: list[Notice] = []
    lock = RunLock(lambda msg: _say(f"vx: {msg}"))
    prep = None
    try:
        prep = run.prepare(req, env, stages, lock=lock, warn=_warning)
        flow = _flow(prep.broad, env, output_logs)
        reporter = _tui_reporter(env) if tui else _reporter(flow, env, as_json)
        profiler = _profiler() if profile is not None else None
        emit = _noting(reporter, noticed)
        summary = run.execute(
            prep,
            req,
            profiler.wrap(emit) if profiler else emit,
            stages,
            launch_for=tracer.launch if tracer else None,
            observe=tracer.observe if tracer else None,
            on_graph_end=lock.release,
        )  # kept servers write no cache: another run may start
        with stages("history"):
            logs = run.keep_failure_logs(prep, summary)
            record = run.record_run(prep, req, summary, argv, logs)
        if tui:
            reporter.outcome(summary.exit_code, summary.interrupted)
        if receipted:
            with stages("receipt"):
                _keep_receipt(
                    argv,
                    req,
                    prep,
                    summary,
                    env,
                    started_ns,
                    flow == "broad" and not noticed,
                    as_json,
                )
    finally:
        if receipted:
            witness.stop()
        lock.release()
        if reporter is not None:
            reporter.close()  # erase a live status region even on an exception
        if tracer is not None and summary is None:
            tracer.close()
        if prep is not None and prep.plugins is not None:
            for message in prep.plugins.teardown():
                _say(f"vx: warning: {message}")
    for tid, path in logs.items():  # after the reporter closed: a live region is gone by now
        _say(f"vx: {tid} failed; its full log: {path}")
    if summarize is not None:
        _write_summary(summary, prep, summarize)
    if any(report):
        _report(summary, report[1])
    if profiler is not None and profile is not None:
        profiler.write(summary, Path(profile))
        _say(f"vx: profile written to {profile} (open it in chrome://tracing or ui.perfetto.dev)")
    code = (
        summary.exit_code
        if tracer is None
        else _verify_report(tracer, prep, summary, sys.stderr if as_json else sys.stdout)
    )
    stages.print(sys.stderr)
    if as_json and record is not None:
        _print_record(str(prep.cache_dir), record)
    return code


def _print_record(cache_dir: str, record: tuple[list, list[list]]) -> None:
    """The run's record on stdout, the shape `vx last --format json` prints (`vx.store.runs`)."""
    import json
    import sqlite3

    from vx.store import runs

    invocation, rows = record
    tasks = [dict(zip(runs.RUN_COLUMNS, row)) for row in rows]
    flaky: set[tuple[str, str]] = set()
    try:
        db = runs.connect(cache_dir, create=False)
        if db is not None:
            try:
                flaky = runs.flaky(db, tasks)
            finally:
                db.close()
    except (OSError, sqlite3.Error):
        pass  # the history is never a reason to fail a run: no task is called flaky
    out = runs.run_record(dict(zip(runs.INVOCATION_COLUMNS, invocation)), tasks, flaky)
    try:
        document = _document_out()
        document.write(json.dumps(out, indent=2) + "\n")
        document.flush()
    except BrokenPipeError:
        pass


def _verify_mode(text: str | None, dry: str | None) -> str | None:
    if text is None:
        return None  # vx.engine.verify pulls in the executor and asyncio: not on a plain run's path
    from vx.engine.verify import parse_mode

    mode = parse_mode(text)
    if mode is not None and dry is not None:
        raise UsageError(
            "`--verify` cannot be combined with `--dry`", hint="verifying means running the tasks"
        )
    return mode


def _input_tracer(env: dict[str, str]):
    from vx.engine.verify import InputTracer, find_strace

    return InputTracer(find_strace(env))


def _verify_report(tracer, prep, summary, out) -> int:
    """Print --verify's findings to `out` (stdout; stderr under `--format json`); exit 1 for an
    undeclared input (a failed run wins)."""
    from vx.engine.verify import check, render

    try:
        if summary.interrupted:
            return summary.exit_code
        report = check(
            prep.ws.root,
            prep.graph,
            prep.plans,
            prep.index,
            tracer,
            packages=prep.ws.packages,
            configs=prep.configs,
        )
    finally:
        tracer.close()
    try:
        print("\n".join(render(report)), file=out, flush=True)
    except BrokenPipeError:
        pass
    return summary.exit_code or report.exit_code


def _flow(broad: bool, env: dict[str, str], output_logs: str | None = None) -> str:
    if output_logs is not None:
        return output_logs
    ci = env.get("CI", "").lower() not in ("", "0", "false")
    return "ci" if ci else ("broad" if broad else "focused")


def _output_logs(value: str | None) -> str | None:
    """`--output-logs`, turbo's values; checked before anything runs."""
    if value is None:
        return None
    from vx.report.plain import OUTPUT_LOGS

    if value in OUTPUT_LOGS:
        return value
    near = did_you_mean(value, OUTPUT_LOGS)
    raise UsageError(
        f"`--output-logs={value}` is not a choice ({', '.join(OUTPUT_LOGS)})",
        hint=f"did you mean `{near}`?" if near else "`errors-only` shows only what failed",
    )


def _profiler():
    from vx.report.profile import Profiler

    return Profiler()


def _noting(reporter, noticed: list):
    """The reporter, noting whether any Notice went by (a run with one has no receipt)."""
    from vx.events import Notice

    def emit(event) -> None:
        if isinstance(event, Notice):
            noticed.append(event)
        reporter(event)

    return emit


def _keep_receipt(
    argv, req, prep, summary, env, started_ns: int, silent: bool, as_json: bool
) -> None:
    """Write this run's receipt when it qualifies (docs/optimizations.md #18), else drop any old one."""
    from vx import pipeline as run
    from vx.pipeline import receipt_tasks

    noted = witness.stop()
    tasks = receipt_tasks(prep, summary, started_ns) if silent else None
    cwd, root = str(req.cwd), str(prep.ws.root)
    if tasks is None or not receipt.write(
        argv=argv,
        cwd=cwd,
        root=root,
        cache_dir=str(prep.cache_dir),
        store_dir=str(prep.store_dir or prep.cache_dir),
        started_ns=started_ns,
        env=env,
        noted=noted,
        vouched=prep.index.vouched,
        tasks=tasks,
        toplevel=str(prep.index.toplevel) if prep.index.toplevel else None,
        history=run.replay_history(prep, req, summary, argv),
        as_json=as_json,
    ):
        receipt.forget(root, cwd, argv)


def _reporter(flow: str, env: dict[str, str], as_json: bool = False):
    """The rows and frames: task output on stdout, the rest on stderr (all of it there under
    `--format json`, whose stdout is the record)."""
    from vx.report.reporters import make_reporter
    from vx.style import color_enabled

    ci = flow == "ci"
    color = color_enabled(env, sys.stderr)
    live = sys.stderr.isatty() and not ci
    github = env.get("GITHUB_ACTIONS") == "true" and not live
    return make_reporter(
        flow=flow,
        color=color,
        live=live,
        version=__version__,
        out=sys.stderr if as_json else sys.stdout,
        err=sys.stderr,
        github=github,
    )


def _tui_reporter(env: dict[str, str]):
    from vx.report.tui import TuiReporter
    from vx.style import color_enabled

    return TuiReporter(
        version=__version__, out=sys.stdout, err=sys.stderr, color=color_enabled(env, sys.stderr)
    )


def _dry(prep, fmt: str) -> int:
    from vx.pipeline import dry_plan
    from vx.report.dry import graph_dot, render_dry

    if fmt.startswith("graph="):
        _write_graph(graph_dot(dry_plan(prep)), fmt[len("graph=") :])
    else:
        render_dry(dry_plan(prep), fmt, _document_out())
    if prep.store is not None:
        prep.store.close()
    notes = list(prep.notices)
    if prep.plugins is not None:
        notes += [(m, "warning") for m in prep.plugins.teardown()]
    for message, level in notes + (prep.remote.messages() if prep.remote is not None else []):
        _say(f"vx: warning: {message}" if level == "warning" else f"vx: {message}")
    return EXIT_OK


def _warning(message: str) -> None:
    _say(f"vx: warning: {message}")


def _report(summary, target: str | None) -> None:
    """`--report` (markdown on stdout) or `--report-file` (appended, e.g. $GITHUB_STEP_SUMMARY)."""
    from vx.report.summary import append_report, markdown

    text = markdown(summary, summary.interrupted)
    if target:
        append_report(text, Path(target))
    else:
        sys.stdout.write(text)


def _write_graph(dot: str, target: str) -> None:
    """DOT on stdout, or into the file named."""
    if not target:
        sys.stdout.write(dot)
        return
    try:
        Path(target).write_text(dot)
    except OSError as exc:
        from vx.errors import EnvironmentFailure

        raise EnvironmentFailure(
            f"cannot write the graph: {exc.strerror or exc}",
            facts=(f"path: {target}",),
            hint="name a file in a writable directory",
        ) from None
    _say(f"vx: graph written to {target}")


def _write_summary(summary, prep, target: str) -> None:
    from vx.report.summary import write_summary

    if target:
        path = Path(target)
    else:
        path = Path(prep.cache_dir) / "runs" / f"{summary.run_id}.json"
    write_summary(summary, path)
    _say(f"vx: summary written to {path}")


# ---------------------------------------------------------------- output


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr)
    except BrokenPipeError:
        pass


def _internal_error(exc: BaseException, argv: Sequence[str] = ()) -> int:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    _say(_masked(f"vx: internal error: {type(exc).__name__}: {exc}{where}"))
    _say("this is a bug in vx; set VX_DEBUG=1 for the full traceback and please report it")
    if os.environ.get("VX_DEBUG"):
        traceback.print_exception(exc)
    if wants_json(argv):
        _refusal_json(
            "VX_E_INTERNAL", _masked(f"internal error: {type(exc).__name__}: {exc}{where}")
        )
    return EXIT_TASK_FAILED
