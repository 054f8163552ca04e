"""The command line: parse, dispatch, render refusals. The only place that exits.

`vx --version` must stay fast, so this module imports nothing heavy at the top; each verb
imports what it needs when it runs (its row's handler, `_lazy`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

if TYPE_CHECKING:
    from vx.cli.args import Args, Conflicts

from vx import __version__, witness
from vx.cli.args import say
from vx.cli.help import (
    CACHE_HELP,
    COMPLETIONS_HELP,
    HELP,
    HISTORY_HELP,
    INFO_HELP,
    INIT_HELP,
    LAST_HELP,
    LOCK_HELP,
    MCP_HELP,
    MIGRATE_HELP,
    NX_VERB_HELP,
    PRUNE_HELP,
    RUN_HELP,
    SHOW_HELP,
    WATCH_HELP,
    WHY_HELP,
)
from vx.errors import EXIT_OK, EXIT_TASK_FAILED, UsageError, VxError, did_you_mean

# Flags of `vx run` (and `vx watch`): name -> (kind, dest), kinds as in vx.cli.args: flag | value |
# optional (a value only after `=`) | list (repeatable).
RUN_FLAGS = {
    "--all": ("flag", "all"),
    "--filter": ("list", "filters"),
    "--output-logs": ("value", "output_logs"),
    "--affected": ("optional", "affected"),
    "--concurrency": ("value", "concurrency"),
    "--continue": ("optional", "continue_mode"),
    "--force": ("bool", "force"),
    "--no-cache": ("flag", "no_cache"),
    "--frozen": ("flag", "frozen"),
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
    "--tag": ("list", "tags"),
    "--framework-inference": ("optional", "framework_inference"),
    "--ui": ("value", "ui"),
    "--keep-ui": ("flag", "keep_ui"),
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
# turbo's flags of `turbo run` that vx takes with turbo's meaning and has no name of its own
# for (docs/cli.md § turbo's flags): the remote cache's settings, colour and the directory as
# the variables turbo reads for them, the layers as `--cache` would set them, turbo's switches
# that change no result (deprecated, tuning) as no-ops, and modes checked in `vx.cli.run`.
TURBO_FLAGS = {
    "--remote-only": ("bool", "remote_only"),
    "--remote-cache-read-only": ("bool", "remote_read_only"),
    "--cache-workers": ("value", "cache_workers"),
    "--env-mode": ("optional", "env_mode"),
    "--log-order": ("value", "log_order"),
    "--log-prefix": ("value", "log_prefix"),
    "--api": ("value", "api"),
    "--team": ("value", "team"),
    "--token": ("value", "token"),
    "--remote-cache-timeout": ("value", "remote_cache_timeout"),
    "--color": ("flag", "color"),
    "--no-color": ("flag", "no_color"),
    "--cwd": ("value", "cwd"),
    "--daemon": ("flag", "daemon"),
    "--no-daemon": ("flag", "no_daemon"),
    "--skip-infer": ("flag", "skip_infer"),
    "--no-update-notifier": ("flag", "no_update_notifier"),
    "--dangerously-disable-package-manager-check": ("flag", "no_package_manager_check"),
}
RUN_FLAGS.update(TURBO_FLAGS)
RUN_FLAGS["--help"] = ("flag", "help")  # anywhere on the line, as turbo's `-h, --help`
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
    "-h": "--help",
}
# the aliases RUN_HELP names
RUN_SHOWN = (
    "-F",
    "-t",
    "-p",
    "-c",
    "--parallel",
    "--skip-nx-cache",
    "--dry-run",
    "--exclude-task-dependencies",
)
# run flags that make no sense on every change
WATCH_REFUSED = (
    "--dry",
    "--graph",
    "--summarize",
    "--ui",
    "--keep-ui",
    "--format",
    "--cwd",
)
# Flags turbo and Nx users type that vx does not take: why, and what to write instead.
_PPROF = "a pprof profile of turbo itself; vx's `--profile` is a Chrome trace of the run"
FOREIGN_FLAGS = {
    "--anon-profile": "vx's `--profile` writes a Chrome trace that names the tasks; there is no "
    "anonymised one",
    "--json": "vx prints no NDJSON event stream; `--format json` prints the run's record on "
    "stdout once the run ends",
    "--log-file": "vx writes no structured log file; `--summarize[=PATH]` writes the run's "
    "summary, `--format json` prints its record",
    "--global-deps": "vx reads turbo.json's `globalDependencies` (in every task's key); add the "
    "glob there",
    "--single-package": "vx runs workspaces; a repository without one declares its root's tasks "
    "as `//#task` in turbo.json",
    "--root-turbo-json": "vx reads the turbo.json at the workspace root (and the packages' "
    "own); put the file there",
    "--login": "vx does not log in to a remote cache: give the token (`--token`, TURBO_TOKEN)",
    "--preflight": "vx's remote cache client sends no OPTIONS preflight request; drop the flag",
    "--heap": _PPROF,
    "--trace": _PPROF,
    "--verbosity": "vx has no log levels: VX_TIMING=1 prints a run's stages, VX_DEBUG=1 a "
    "refusal's traceback",
    "--version": "`vx --version` (or `vx version`)",
    "--output-style": "`--output-logs` (full, new-only, errors-only, hash-only, none)",
}
# turbo's OpenTelemetry flags (`--experimental-otel-endpoint`, …), refused as one
FOREIGN_PREFIXES = {
    "--experimental-otel-": "vx exports OpenTelemetry through the `vx.plugins.otel` plugin "
    "(docs/plugins.md), configured in vx.workspace.json",
}
FOREIGN_VERBS = {
    "build": "run build",
    "test": "run test",
    "lint": "run lint",
    "exec": "run",
    "graph": "run --dry",
}
_HELP_FLAG = {"--help": ("flag", "help")}  # for verbs that take -h/--help anywhere on the line
_HELP_ALIAS = {"-h": "--help"}
# Flags of `vx run` that cannot go together: `--flag` -> (the flags it cannot go with, what the
# refusal says, its hint), checked in this order as the line is parsed (`vx.cli.args`).
_PLANS = ("--dry", "--graph")
_REPORTS = (
    _PLANS,
    "`--report` and `--profile` cannot be combined with `--dry` or `--graph`",
    "a plan runs nothing to report",
)
RUN_CONFLICTS: Conflicts = {
    "--summarize": (
        ("--dry",),
        "`--summarize` cannot be combined with `--dry`",
        "a dry run executes nothing to summarise",
    ),
    "--report": _REPORTS,
    "--report-file": _REPORTS,
    "--profile": _REPORTS,
    "--graph": (
        ("--dry", "--summarize"),
        "`--graph` cannot be combined with `--dry` or `--summarize`",
        "`--graph` plans and draws; nothing runs",
    ),
    "--tag": (
        _PLANS,
        "`--tag` cannot be combined with `--dry` or `--graph`",
        "a tag is kept with a run's record, and a plan runs nothing",
    ),
    "--verify": (
        _PLANS,
        "`--verify` cannot be combined with `--dry`",
        "verifying means running the tasks",
    ),
}


Handler = Callable[..., int]  # (parsed Args, argv) -> exit code; a `words` verb: (words) -> code


def _lazy(module: str, function: str) -> Handler:
    """`vx.cli.<module>.<function>`, imported only when its verb runs: the table loads no verb."""

    def handler(*args: Any) -> int:
        return getattr(__import__(f"vx.cli.{module}", fromlist=[function]), function)(*args)

    return handler


class Verb:
    """One row of the verb table: its help text and its handler (`run`), its flags (and their
    aliases; `shown` are the aliases its help names, which completions offer too), the flags it
    parses only to refuse, the flags that cannot go together (`vx.cli.args.Conflicts`), whether
    it takes names (`names`) and forwards the words after `--`, and whether it reads its own
    words unparsed (`words`: `vx help`, `vx completions`, `vx cache`'s subcommand)."""

    __slots__ = (
        "help",
        "run",
        "flags",
        "aliases",
        "shown",
        "refused",
        "conflicts",
        "names",
        "forwards",
        "words",
    )

    def __init__(
        self,
        help: str,
        run: Handler,
        flags: dict[str, tuple[str, str]] | None = None,
        aliases: dict[str, str] | None = None,
        *,
        shown: tuple[str, ...] = (),
        refused: tuple[str, ...] = (),
        conflicts: Conflicts | None = None,
        names: bool = True,
        forwards: bool = False,
        words: bool = False,
    ):
        self.help, self.run, self.flags, self.aliases = help, run, flags or {}, aliases or {}
        self.shown, self.refused, self.conflicts = shown, refused, conflicts or {}
        self.names, self.forwards, self.words = names, forwards, words

    def completions(self) -> list[str]:
        """The flags a shell completes for this verb."""
        return sorted({*self.flags, *self.shown, "--help"} - set(self.refused))


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


def _completions(rest: list[str]) -> int:
    from vx.cli.completions import script

    if len(rest) != 1:
        print(VERBS["completions"].help, end="")
        return EXIT_OK if rest else 2
    flags = {name: verb.completions() for name, verb in VERBS.items()}
    flags.update({verb: [] for verb in _plugin_verbs()})
    print(script(rest[0], flags), end="")
    return EXIT_OK


def _cache(rest: list[str]) -> int:
    """`vx cache prune|clean …`: the subcommand is a word of its own, then the flags."""
    from vx.cli.args import parse
    from vx.cli.cache import SUBCOMMANDS, cache_verb, refuse_subcommand

    verb = VERBS["cache"]
    if not rest:
        print(verb.help, end="")
        return EXIT_OK
    if rest[0] not in SUBCOMMANDS:
        raise refuse_subcommand(rest[0])
    sub = rest[0]
    docker = "--docker" in rest[1:]  # turbo's `prune app --docker`, under the cache's verb
    parsed = parse(
        f"cache {sub}", [w for w in rest[1:] if w != "--docker"], verb.flags, verb.aliases
    )
    if parsed.help:
        print(verb.help, end="")
        return EXIT_OK
    if parsed.names or docker:
        raise UsageError(
            f"`vx cache {sub}` removes cache entries and takes no package",
            hint=f"`vx prune {parsed.names[0] if parsed.names else 'PKG'} --docker` writes a "
            "partial workspace for a package, as turbo's prune does",
        )
    return cache_verb(parsed, sub)


def _version(parsed: Args, argv: list[str]) -> int:
    print(version_line())
    return EXIT_OK


_RUN: dict[str, Any] = {
    "flags": RUN_FLAGS,
    "aliases": FLAG_ALIASES,
    "shown": RUN_SHOWN,
    "forwards": True,
}
_SHOW = {"--format": ("value", "format"), "--json": ("flag", "json"), **_HELP_FLAG}
VERBS = {
    "run": Verb(RUN_HELP, _lazy("run", "run_verb"), **_RUN, conflicts=RUN_CONFLICTS),
    "run-many": Verb(NX_VERB_HELP, _lazy("run", "run_many_verb"), **_RUN, conflicts=RUN_CONFLICTS),
    "affected": Verb(NX_VERB_HELP, _lazy("run", "affected_verb"), **_RUN, conflicts=RUN_CONFLICTS),
    "watch": Verb(WATCH_HELP, _lazy("watch", "watch_verb"), **_RUN, refused=WATCH_REFUSED),
    "init": Verb(
        INIT_HELP,
        _lazy("init", "init_verb"),
        {
            "--dry": ("flag", "dry"),
            "--force": ("bool", "force"),
            "--cache": ("flag", "cache"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
        names=False,
    ),
    "migrate": Verb(
        MIGRATE_HELP,
        _lazy("migrate", "migrate_verb"),
        {
            "--from": ("value", "source"),
            "--dry": ("flag", "dry"),
            "--force": ("bool", "force"),
            "--format": ("value", "format"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
        names=False,
    ),
    "info": Verb(
        INFO_HELP,
        _lazy("info", "info_verb"),
        {"--format": ("value", "format"), **_HELP_FLAG},
        _HELP_ALIAS,
        names=False,
    ),
    "show": Verb(SHOW_HELP, _lazy("show", "show_verb"), _SHOW, _HELP_ALIAS),
    "ls": Verb(SHOW_HELP, _lazy("show", "show_verb"), _SHOW, _HELP_ALIAS),  # turbo's listing
    "why": Verb(
        WHY_HELP,
        _lazy("why", "why_verb"),
        {"--format": ("value", "format"), "--run": ("value", "run"), **_HELP_FLAG},
        _HELP_ALIAS,
    ),
    "last": Verb(
        LAST_HELP,
        _lazy("last", "last_verb"),
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
        _lazy("history", "history_verb"),
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
        _cache,
        {
            "--older-than": ("value", "older_than"),
            "--max-size": ("value", "max_size"),
            "--dry-run": ("flag", "dry_run"),
            "--format": ("value", "format"),
            "--cache-dir": ("value", "cache_dir"),
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
        words=True,
    ),
    "prune": Verb(
        PRUNE_HELP,
        _lazy("prune", "prune_verb"),
        {
            "--docker": ("flag", "docker"),
            "--out-dir": ("value", "out_dir"),
            "--scope": ("list", "scope"),  # turbo 1's spelling of the package
            **_HELP_FLAG,
        },
        _HELP_ALIAS,
    ),
    "lock": Verb(
        LOCK_HELP,
        _lazy("lock", "lock_verb"),
        {"--check": ("flag", "check"), **_HELP_FLAG},
        _HELP_ALIAS,
        names=False,
    ),
    "mcp": Verb(MCP_HELP, _lazy("mcp", "mcp_verb")),
    "completions": Verb(COMPLETIONS_HELP, _completions, words=True),
    "help": Verb("usage: vx help [VERB]\n", _help, words=True),
    "version": Verb("usage: vx version\n", _version, names=False),
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


def version_line() -> str:
    """`vx 0.1.0 (npm, /repo/node_modules/@vx-build/vx-linux-x64/bin)`: the install said too."""
    from vx.install import described

    return f"vx {__version__} ({described()})"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["version"]):
        print(version_line())
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
    if _index_table_gone(exc):
        from vx.errors import EnvironmentFailure

        # A table or column of the cache index went away under this run: another vx (of another
        # version) reset the index it holds open. The machine's state, not a bug of this run.
        return _refused(
            EnvironmentFailure(
                f"the cache index changed under this run: {exc}",
                hint="another vx (another version, or one given another cache dir layout) reset"
                " it while this run held it open; run again",
            ),
            argv,
        )
    return _internal_error(exc, argv)


def _index_table_gone(exc: Exception) -> bool:
    """A table of vx's own cache index or run history named missing: only then the machine's
    state (another vx reset it); any other sqlite error, a missing column included, stays a bug."""
    import re
    import sqlite3

    if not isinstance(exc, sqlite3.OperationalError):
        return False
    found = re.fullmatch(r"no such table: (?:\w+\.)?(\w+)", str(exc))
    if found is None:
        return False
    from vx.store.local import INDEX_TABLES

    return found[1] in INDEX_TABLES


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
    say(_masked(exc.render()))
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
    if verb.words:
        return verb.run(rest)
    from vx.cli.args import parse, refuse_conflicts

    tokens = _run_words(rest) if verb.flags is RUN_FLAGS else rest
    parsed = parse(name, tokens, verb.flags, verb.aliases, verb.forwards)
    if getattr(parsed, "help", False):
        print(verb.help, end="")
        return EXIT_OK
    for flag in verb.refused:
        if getattr(parsed, verb.flags[flag][1]) not in (None, False):  # a flag's default: False
            raise UsageError(
                f"`{flag}` cannot be used with `vx {name}`",
                hint=f"`cd` there first: `cd {parsed.cwd} && vx watch …`"
                if flag == "--cwd"
                else "watch runs the tasks on every change",
            )
    refuse_conflicts(parsed, verb.flags, verb.conflicts)
    if parsed.names and not verb.names:
        raise UsageError(
            f"`vx {name}` takes no arguments, got `{parsed.names[0]}`", hint=f"see `vx help {name}`"
        )
    return verb.run(parsed, args)


def _run_words(rest: list[str]) -> list[str]:
    """The words of a run-like verb with Nx's `--parallel` spelt as vx's, and turbo's and Nx's
    flags vx does not have refused with what vx writes instead."""
    from vx.cli.run import nx_parallel

    tokens = nx_parallel(rest)
    for tok in tokens[: tokens.index("--")] if "--" in tokens else tokens:
        name = tok.partition("=")[0]
        reason = FOREIGN_FLAGS.get(name) or next(
            (why for prefix, why in FOREIGN_PREFIXES.items() if name.startswith(prefix)), None
        )
        if reason is not None:
            raise UsageError(f"`vx run` does not take `{name}`", hint=reason)
    return tokens


def _plugin_verbs() -> list[str]:
    """The verbs the workspace's plugins add, for `vx completions`: none where it declares no
    plugins. A plugin that fails to load is warned about and its verbs left out, and so is a
    verb no shell word can spell unquoted (the scripts write verbs bare)."""
    try:
        host = _workspace_plugins()
    except VxError as exc:
        say(f"vx: warning: plugin verbs left out of the completions: {exc.message}")
        return []
    return [verb for verb in host.verbs() if _shell_word(verb)] if host is not None else []


def _shell_word(text: str) -> bool:
    return text.isascii() and text[:1].isalnum() and all(c.isalnum() or c in "_.:+-" for c in text)


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


def _unknown_verb(verb: str) -> UsageError:
    if verb in FOREIGN_VERBS:
        return UsageError(f"`{verb}` is not a vx verb", hint=f"try `vx {FOREIGN_VERBS[verb]}`")
    if "#" in verb:
        return UsageError(f"`{verb}` is not a vx verb", hint=f"try `vx run {verb}`")
    near = did_you_mean(verb, VERB_HELP)
    return UsageError(
        f"unknown verb `{verb}`", hint=f"did you mean `vx {near}`?" if near else "see `vx help`"
    )


def _internal_error(exc: BaseException, argv: Sequence[str] = ()) -> int:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    say(_masked(f"vx: internal error: {type(exc).__name__}: {exc}{where}"))
    say("this is a bug in vx; set VX_DEBUG=1 for the full traceback and please report it")
    if os.environ.get("VX_DEBUG"):
        traceback.print_exception(exc)
    if wants_json(argv):
        _refusal_json(
            "VX_E_INTERNAL", _masked(f"internal error: {type(exc).__name__}: {exc}{where}")
        )
    return EXIT_TASK_FAILED
