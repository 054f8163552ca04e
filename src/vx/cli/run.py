"""`vx run`, and Nx's `run-many` and `affected`: the flags and the environment resolved once into
the run's settings (`resolve`), the pipeline called with them, and what the run leaves and prints
besides its events: the run history and the receipt, the summary, report, profile, graph and
verify findings, and under `--format json` the run's record.

Imported when a run-like verb is parsed (`vx.cli.main`), never for `vx --version` or a replay.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from msgspec import Struct
from msgspec.structs import replace

from vx import __version__, witness
from vx.cli.args import say, warning
from vx.errors import EXIT_OK, UsageError, did_you_mean
from vx.fastpath import receipt

if TYPE_CHECKING:
    from vx.cli.args import Args
    from vx.events import Notice
    from vx.model import RunSummary, TaskId
    from vx.prepare import Prepared, RunRequest
    from vx.store.runs import RunFacts

CONTINUE_ALIASES = {"dependencies-successful": "deps-ok", "": "always"}
DOWNLOAD_MODES = ("all", "toplevel", "none")
_CLASH_HINTS = {
    "--dry": "a plan as JSON is `--dry=json`",
    "--graph": "`--graph` draws the plan and runs nothing; drop one of them",
    "--report": "`--report-file PATH` writes the table to a file instead",
    "--ui=tui": "the split view needs the terminal; `--format json` is for scripts",
}


def run_verb(args: Args, argv: list[str]) -> int:
    import time

    timer_start = time.perf_counter()
    told = turbo_environment(args, os.environ)
    argv = scrubbed(argv)  # the history, the record and the receipt never hold a token
    settings = resolve(args, argv, os.environ)
    if told:  # flags stood for the environment a replay checks: this run leaves no receipt
        settings = replace(settings, receipted_ok=False)
    with _document_stdout(settings.as_json or settings.dry == "json"):
        return _run(settings, timer_start, argv)


def run_many_verb(args: Args, argv: list[str]) -> int:
    args.all = True  # Nx's `run-many`: `vx run … --all`
    return run_verb(args, argv)


def affected_verb(args: Args, argv: list[str]) -> int:
    if args.affected is None:  # Nx's `affected`: `vx run … --affected`
        args.affected = ""
    return run_verb(args, argv)


# ---------------------------------------------------------------- settings


class RunSettings(Struct, frozen=True):
    """A run's command line and environment, resolved once (`resolve`): the request the
    pipeline takes, and what the CLI prints around the run."""

    request: RunRequest
    dry: str | None = None  # text | json | graph=<file, or "" for stdout>: plan, run nothing
    summarize: str | None = None  # `--summarize[=PATH]`
    report: bool = False  # `--report`: the markdown table (on stdout unless `report_file`)
    report_file: str | None = None
    profile: str | None = None  # `--profile`'s file
    tui: bool = False  # `--ui=tui` (or turbo.json's `"ui": "tui"`) on a terminal
    keep_ui: bool = False  # `--keep-ui`: the split view stays open after the run
    as_json: bool = False  # `--format json`
    output_logs: str | None = None
    timing: bool = False  # VX_TIMING: the stage table on stderr
    tags: tuple[tuple[str, str], ...] = ()  # `--tag k=v`, in the order given, masked
    receipted_ok: bool = True  # False: a flag set the environment (`turbo_environment`)

    @property
    def receipted(self) -> bool:
        """Whether the flags let the run write a receipt: its replay prints only the stream."""
        return (
            self.receipted_ok
            and self.summarize is None
            and self.profile is None
            and not self.report
            and self.report_file is None
            and not self.request.verify
            and not self.tui
        )


def resolve(args: Args, argv: list[str], env: Mapping[str, str]) -> RunSettings:
    """The settings of a run: every flag checked (before anything is read) and turned, with the
    environment, into the one record the rest of the run reads. The conflicts between flags are
    the verb table's (`vx.cli.main.RUN_CONFLICTS`), refused as the line is parsed."""
    from vx.prepare import RunRequest, Selectors

    nx_flags(args)
    if not args.names:
        raise _no_task_named()
    timeout = _plain_int("--timeout", args.timeout)
    if timeout is not None and not 1 <= timeout <= 2**31 - 1:
        raise UsageError(f"`--timeout` must be between 1 and {2**31 - 1} ms, got {timeout}")
    if args.report not in (None, "", "markdown"):
        raise UsageError(
            f"`--report={args.report}` is not a format", hint="--report (or --report=markdown)"
        )
    dry: str | None = args.dry  # --graph plans as a dry run that draws
    if args.graph is not None:
        from vx.report.dry import graph_target

        dry = "graph=" + graph_target(args.graph)
    verify = _verify_mode(args.verify)
    as_json = _run_format(args)
    cache_spec = _turbo_modes(args)
    tui = _tui(args.ui, dry is not None or as_json, env)
    if args.filters:
        from vx.plan.filters import parse

        for text in args.filters:
            parse(text)  # a malformed filter is refused before anything is read
    request = RunRequest(
        cwd=Path(os.getcwd()),
        names=tuple(args.names),
        all=args.all,
        select=Selectors(
            tuple(args.filters), project_patterns(args.projects), project_patterns(args.exclude)
        ),
        affected=_affected_ref(args.affected),
        forward_args=tuple(args.forward),
        concurrency=args.concurrency,
        continue_mode=_continue_mode(args.continue_mode),
        download=_download_mode(args.download),
        no_cache=args.no_cache,
        frozen=args.frozen,
        force=args.force,
        cache_dir=args.cache_dir,
        timeout_ms=timeout,
        retries=_plain_int("--retry", args.retry),
        cache_spec=cache_spec,
        dry=dry is not None,
        verify=verify,
        framework_inference=_framework_inference(args.framework_inference),
        configuration=args.configuration,
        fast_paths=env.get("VX_FASTPATH", "") not in ("0", "false", "no", "off"),
        lend_terminal=not tui and not as_json,  # an interactive task would write into the JSON
        exclude_deps=_exclude_deps(args, argv),
    )
    return RunSettings(
        request,
        dry=_dry_format(dry),
        summarize=_summarize(args.summarize),
        report=args.report is not None,
        report_file=args.report_file,
        profile=(args.profile or "profile.json") if args.profile is not None else None,
        tui=tui,
        keep_ui=args.keep_ui,
        as_json=as_json,
        output_logs=_output_logs(args.output_logs),
        timing=env.get("VX_TIMING", "") not in ("", "0"),
        tags=_tags(args.tags, env) if args.tags else (),
    )


# turbo's flags that stand for the variables turbo reads for them (docs/cli.md § turbo's flags)
TURBO_ENV_FLAGS = {
    "api": "TURBO_API",
    "team": "TURBO_TEAM",
    "token": "TURBO_TOKEN",
    "remote_cache_timeout": "TURBO_REMOTE_CACHE_TIMEOUT",
}
SECRET_FLAGS = ("--token",)


def turbo_environment(args: Args, environ) -> bool:
    """turbo's flags that are its variables — `--token`, `--team`, `--api`,
    `--remote-cache-timeout`, `--remote-cache-read-only`, `--color`, `--no-color` — set in
    `environ` (the flag wins, as in turbo), where the remote cache, the palette and the secret
    masking read them; `--cwd` moves into its directory. Whether any was given."""
    told = False
    if args.cwd is not None:
        where = Path(args.cwd).expanduser()
        if not where.is_dir():
            raise UsageError(
                f"`--cwd {args.cwd}`: no such directory", hint="name a directory of the workspace"
            )
        os.chdir(where)
    timeout = args.remote_cache_timeout
    if timeout is not None and not _seconds(timeout):
        raise UsageError(
            f"`--remote-cache-timeout {timeout}` is not a number of seconds",
            hint="e.g. `--remote-cache-timeout 30` (0 keeps the default)",
        )
    for dest, name in TURBO_ENV_FLAGS.items():
        value = getattr(args, dest)
        if value is not None:
            environ[name], told = value, True
    if args.remote_read_only:
        environ["TURBO_REMOTE_CACHE_READ_ONLY"], told = "1", True
    if args.no_color:
        environ["NO_COLOR"], told = "1", True
    elif args.color:
        environ.pop("NO_COLOR", None)
        environ["FORCE_COLOR"], told = "1", True
    return told


def _seconds(text: str) -> bool:
    try:
        return 0 <= float(text) <= 2**31 // 1000
    except ValueError:
        return False


def scrub_tags(argv: list[str], tags: tuple[tuple[str, str], ...]) -> list[str]:
    """`argv` with each `--tag k=v` written with the value kept (masked where it was), so the
    command the history shows never holds more than its tags do."""
    if not any("***" in v for _k, v in tags):
        return argv
    kept = dict(tags)
    out: list[str] = []
    after = False
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        if after or word.startswith("--tag="):
            text = word if after else word[len("--tag=") :]
            key = text.partition("=")[0]
            if key in kept:
                word = f"{key}={kept[key]}" if after else f"--tag={key}={kept[key]}"
        after = word == "--tag"
        out.append(word)
    return out


def scrubbed(argv: list[str]) -> list[str]:
    """`argv` with the value of a secret flag (`--token`) shown as ***, before any `--`."""
    out: list[str] = []
    hide = False
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        name, eq, _ = word.partition("=")
        out.append("***" if hide else f"{name}=***" if eq and name in SECRET_FLAGS else word)
        hide = not eq and word in SECRET_FLAGS
    return out


_LOG_ORDERS = {
    "auto": None,
    "grouped": None,
    "stream": "vx never interleaves tasks' output: the task you name streams live, every other "
    "task's output is printed whole, one frame each, when it ends (turbo's `grouped`)",
}
_LOG_PREFIXES = {
    "auto": None,
    "none": None,
    "task": "vx does not prefix each line: a task's output is one frame headed by its id "
    "(`┌─ web#build`), never interleaved with another's",
}


def _turbo_modes(args: Args) -> str | None:
    """turbo's modes, checked (`--env-mode`, `--log-order`, `--log-prefix`, `--cache-workers`),
    and the cache layers `--cache`, `--remote-only` and `--remote-cache-read-only` ask for."""
    if args.env_mode not in (None, "", "strict"):
        if args.env_mode == "loose":
            raise UsageError(
                "`--env-mode=loose`: vx never passes a task the whole environment",
                hint="declare what a task needs in turbo.json's `passThroughEnv` (or "
                "`globalPassThroughEnv`); vx is always strict, turbo's default",
            )
        raise UsageError(f"`--env-mode={args.env_mode}` is not a mode", hint="strict or loose")
    for flag, value, modes in (
        ("--log-order", args.log_order, _LOG_ORDERS),
        ("--log-prefix", args.log_prefix, _LOG_PREFIXES),
    ):
        if value is None:
            continue
        if value not in modes:
            raise UsageError(f"`{flag}={value}` is not a mode", hint=f"one of: {', '.join(modes)}")
        if modes[value] is not None:
            raise UsageError(f"vx does not do `{flag}={value}`", hint=modes[value])
    if args.cache_workers is not None and not _plain_int("--cache-workers", args.cache_workers):
        raise UsageError("`--cache-workers` must be at least 1", hint="e.g. `--cache-workers 10`")
    if args.remote_only and args.cache is not None:
        raise UsageError(
            "both `--remote-only` and `--cache`", hint="keep `--cache=local:,remote:rw` alone"
        )
    if args.remote_only:  # turbo's `--cache=remote:rw`: no local layer
        return "local:,remote:r" if args.remote_read_only else "local:,remote:rw"
    return args.cache


def _summarize(value: str | None) -> str | None:
    """`--summarize[=PATH]`; turbo's `--summarize=true|false` is the default place, or none."""
    if value is not None and value.lower() in ("true", "false"):
        return "" if value.lower() == "true" else None
    return value


def nx_flags(args: Args) -> None:
    """Nx's flags in vx's terms: `-t a,b` names tasks, `--base` is the ref `--affected` compares
    with (`-p a,b` and `--exclude a,b` go to the request as they are: `project_patterns`)."""
    for value in args.targets:
        args.names += [t for t in value.split(",") if t]
    if args.head is not None and args.head != "HEAD":
        raise UsageError(
            f"`--head={args.head}`: vx compares the base with the working tree",
            hint=f"check out {args.head} first, then `vx affected --base=<ref>`",
        )
    if args.base is not None:
        if args.affected not in (None, ""):
            raise UsageError("both `--base` and `--affected=REF`", hint="keep one")
        args.affected = args.base


def project_patterns(values: Sequence[str]) -> tuple[str, ...]:
    """`-p a,b -p c` (or `--exclude`) as the patterns, in order."""
    return tuple(p for value in values for p in value.split(",") if p)


def _next_is_number(tokens: Sequence[str], i: int) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1].isdigit()


def nx_parallel(tokens: Sequence[str]) -> list[str]:
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
    from vx.errors import VxError
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
    if text is None or text.lower() in ("", "true"):  # bare: true, as turbo's
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


def _tui(value: str | None, plain: bool, env: Mapping[str, str]) -> bool:
    """`--ui=tui` (turbo's flag), else the root turbo.json's `"ui"`: the split view when vx has a
    terminal; off one, the stream. `plain`: the run prints its own product (`--dry`, JSON)."""
    from vx.cli.args import one_of

    if one_of("--ui", value, ("stream", "tui"), "stream") == "stream" and value is not None:
        return False
    ci = env.get("CI", "").lower() not in ("", "0", "false")
    terminal = not ci and sys.stdin.isatty() and sys.stdout.isatty()
    from vx.report.tui import available

    if value is None:  # turbo.json's, read only where it could matter
        if plain or not terminal or _turbo_ui() != "tui":
            return False
        if not available():
            say('vx: turbo.json\'s "ui": "tui" needs the textual package; streaming the output')
        return available()
    if plain:
        return False
    if not terminal:
        say("vx: --ui=tui needs a terminal (stdin and stdout); streaming the output instead")
        return False
    if not available():
        from vx.errors import EnvironmentFailure
        from vx.install import extra_hint

        raise EnvironmentFailure(
            "`--ui=tui` needs the textual package, which is not installed",
            hint=f"{extra_hint('tui', 'textual')}; or drop `--ui=tui`",
        )
    return True


def _turbo_ui() -> str | None:
    """The root turbo.json's `"ui"`, None without one (or without a workspace: the run says so)."""
    from vx.config.turbo import find_root as turbo_root
    from vx.errors import WorkspaceError
    from vx.workspace.discover import find_root

    try:
        root = find_root(Path(os.getcwd()))
    except WorkspaceError:
        return None
    found = turbo_root(str(root))
    return found.ui if found is not None else None


def _affected_ref(value: str | None) -> str | None:
    """`--affected` ("" : the default base) or `--affected=<ref>`, checked before anything is read."""
    if value:
        from vx.files.git import check_ref

        check_ref(value)
    return value


TAG_KEY_MAX, TAG_VALUE_MAX = 64, 256


def _tags(given: list[str], env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """`--tag k=v` (repeatable), split at the first `=`: a key is a letter, then letters, digits,
    `_`, `.` or `-` (it names `vx.tag.<k>` in telemetry), each once. A value under a key that
    names a secret (TOKEN, KEY, …: as for the environment), or that holds a secret of the
    environment, is kept as *** (docs/cli.md § --tag)."""
    import re

    from vx.proc import masking

    secrets = masking.secrets_of(env)
    seen: dict[str, str] = {}
    for text in given:
        key, eq, value = text.partition("=")
        if not eq:
            raise UsageError(f"`--tag {text}` has no value", hint="write it as `--tag key=value`")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", key) or len(key) > TAG_KEY_MAX:
            raise UsageError(
                f"`--tag {text}`: {key!r} is not a tag key",
                hint=f"a key is a letter, then letters, digits, `_`, `.` or `-` (at most "
                f"{TAG_KEY_MAX}), e.g. `--tag pr=123`",
            )
        if key in seen:
            raise UsageError(f"`--tag {key}=…` is given twice", hint="give each key once")
        if len(value) > TAG_VALUE_MAX or not value.isprintable():
            raise UsageError(
                f"`--tag {key}=…`: the value must be printable, at most {TAG_VALUE_MAX} characters",
                hint="a tag labels a run (a PR number, a job, a commit); keep long text elsewhere",
            )
        masked = "***" if masking.is_secret_name(key) else masking.mask_text(value, secrets)
        seen[key] = masked or ""
    return tuple(seen.items())


def _verify_mode(text: str | None) -> str | None:
    if text is None:
        return None  # vx.engine.verify pulls in the executor and asyncio: not on a plain run's path
    from vx.engine.verify import parse_mode

    return parse_mode(text)


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


# ---------------------------------------------------------------- the run


class _Ran:
    """What a run leaves for the CLI to close and print, filled in as it goes."""

    __slots__ = ("prep", "flow", "summary", "reporter", "profiler", "logs", "record", "noticed")

    def __init__(self) -> None:
        self.prep: Prepared | None = None
        self.flow = ""  # which task output the stream shows (`_flow`)
        self.summary: RunSummary | None = None
        self.reporter: Any = None  # a report.reporters reporter, or the split view's
        self.profiler: Any = None
        self.logs: dict[TaskId, str] = {}
        self.record: tuple[list, list[list]] | None = None  # the history's rows of the run
        self.noticed: list[Notice] = []


def _run(settings: RunSettings, timer_start: float, argv: list[str]) -> int:
    """Plan (and stop there under `--dry`), or run: execute, keep the history and the receipt,
    close what the run opened even on an exception, then print what the flags ask for."""
    import time

    from vx.prepare import prepare
    from vx.runlock import RunLock
    from vx.stages import Stages

    req = settings.request
    stages = Stages(settings.timing, timer_start)
    env = witness.ReadEnv(os.environ)
    if settings.dry is not None:
        return _dry(prepare(req, env, stages, warn=warning), settings.dry)
    receipted = settings.receipted and receipt.enabled(env)
    started_ns = time.time_ns()
    if receipted:
        witness.start()
    # unset is the default; the executor (and asyncio) load only to check a value
    if env.get("VX_KILL_GRACE_MS"):
        from vx.proc.executor import kill_grace_ms

        kill_grace_ms(env)  # a bad VX_KILL_GRACE_MS is refused before anything runs
    tracer = _input_tracer(env) if req.verify in ("inputs", "all") else None
    rerun = _rerun() if req.verify in ("determinism", "all") else None
    ran = _Ran()
    lock = RunLock(lambda msg: say(f"vx: {msg}"))
    try:
        prep = ran.prep = prepare(req, env, stages, lock=lock, warn=warning)
        _collect_from_here()
        summary = ran.summary = _execute(settings, prep, ran, env, stages, lock, (tracer, rerun))
        with stages("history"):
            facts = _facts(prep, req, scrub_tags(argv, settings.tags), settings.tags)
            ran.logs, ran.record = _keep_run(facts, summary)
        if settings.tui:
            ran.reporter.outcome(summary.exit_code, summary.interrupted)
        if receipted:
            with stages("receipt"):
                _keep_receipt(argv, facts, ran, env, started_ns, settings.as_json)
    finally:
        if receipted:
            witness.stop()
        lock.release()
        _close(ran, tracer)
    return _conclude(settings, ran, (tracer, rerun), stages)


def _collect_from_here() -> None:
    """Turn the collector back on for the walk, where tasks may run for hours, when `vx.__main__`
    kept it off through start-up and planning; what those made is frozen out of every later pass.

    Why: nearly everything start-up and planning allocate (modules, classes, the graph, the
    plans) lives to the end, so each pass over it found nothing: 60-80 passes, 20-30 ms of a
    remote restore's CPU at 100 packages, most of it under the imports (docs/benchmarks.md).
    What it leaves uncollected are the few cycles planning dropped (about 600 objects of
    28,000 at 100 packages), kept to the exit of this one run."""
    import gc

    if not gc.isenabled():  # an in-process caller's collector is its own business
        gc.freeze()
        gc.enable()


def _execute(
    settings: RunSettings, prep: Prepared, ran: _Ran, env, stages, lock, verifying
) -> RunSummary:
    """Execute the prepared run, its reporter and profiler chosen (and kept in `ran`, to be
    closed whatever happens); its summary."""
    from vx import pipeline as run

    ran.flow = _flow(prep.broad, env, settings.output_logs)
    if settings.tui:
        ran.reporter = _tui_reporter(env, settings.keep_ui)
    else:
        ran.reporter = _reporter(ran.flow, env, settings.as_json)
    ran.profiler = _profiler() if settings.profile is not None else None
    emit = _noting(ran.reporter, ran.noticed)
    tracer, rerun = verifying
    return run.execute(
        prep,
        settings.request,
        ran.profiler.wrap(emit) if ran.profiler else emit,
        stages,
        launch_for=tracer.launch if tracer else None,
        observe=tracer.observe if tracer else None,
        on_graph_end=lock.release,
        rerun=rerun,
    )  # kept servers write no cache: another run may start


def _close(ran: _Ran, tracer) -> None:
    """What the run opened, closed whether it finished or not."""
    if ran.reporter is not None:
        ran.reporter.close()  # erase a live status region even on an exception
    if tracer is not None and ran.summary is None:
        tracer.close()
    if ran.prep is not None and ran.prep.plugins is not None:
        for message in ran.prep.plugins.teardown():
            warning(message)


def _conclude(settings: RunSettings, ran: _Ran, verifying, stages) -> int:
    """Print what the run's flags ask for once the reporter is closed; the exit code."""
    prep, summary = ran.prep, ran.summary
    assert prep is not None and summary is not None
    for tid, path in ran.logs.items():  # after the reporter closed: a live region is gone by now
        say(f"vx: {tid} failed; its full log: {path}")
    if settings.summarize is not None:
        _write_summary(summary, prep, settings.summarize, settings.tags)
    if settings.report or settings.report_file:
        _report(summary, settings.report_file)
    if ran.profiler is not None and settings.profile is not None:
        ran.profiler.write(summary, Path(settings.profile))
        say(
            f"vx: profile written to {settings.profile} "
            "(open it in chrome://tracing or ui.perfetto.dev)"
        )
    tracer, rerun = verifying
    out = sys.stderr if settings.as_json else sys.stdout
    code = summary.exit_code
    if tracer is not None:
        code = _verify_report(tracer, prep, summary, out)
    if rerun is not None:
        code = _determinism_report(rerun, prep, summary, out) or code
    stages.print(sys.stderr)
    if settings.as_json and ran.record is not None:
        _print_record(str(prep.cache_dir), ran.record)
    return code


def _tags_text(tags: tuple[tuple[str, str], ...]) -> str | None:
    """The tags as the history keeps them: a JSON object, None without one."""
    if not tags:
        return None
    import json

    return json.dumps(dict(tags), separators=(",", ":"))


def _facts(
    prep: Prepared, req: RunRequest, argv: list[str], tags: tuple[tuple[str, str], ...] = ()
) -> RunFacts:
    """What the run history keeps of the run beside its summary (`vx.store.runs.RunFacts`)."""
    from vx.store import runs

    axes = prep.remote.axes if prep.remote is not None else None
    dirty = prep.index.dirty  # what git status saw as the run began; None without git
    return runs.RunFacts(
        command=runs.shell_line(["vx", *argv]),
        cwd=str(req.cwd),
        names=req.names,
        policy=runs.policy_text(prep.policy, axes),
        concurrency=prep.concurrency,
        root=str(prep.ws.root),
        cache_dir=str(prep.cache_dir),
        dirty=None if dirty is None else int(dirty),
        schedule=prep.schedule,
        tags=_tags_text(tags),
    )


def _keep_run(facts: RunFacts, summary: RunSummary) -> tuple[dict, tuple[list, list[list]]]:
    """Keep the run in the history (`vx.store.runs`, read by `vx last`) with its failure logs,
    and once it is kept, fold what it executed into the workspace's timings file. None of it
    ever fails the run. The kept logs, and the run's rows, which `--format json` prints."""
    from vx.store import runs

    logs = runs.keep_failure_logs(facts, summary)
    invocation, rows = runs.run_rows(facts, summary, logs)
    if runs.record_run(facts, summary, invocation, rows) and facts.schedule.file is not None:
        from vx.store.timings import keep_timings  # only where the workspace keeps the file

        keep_timings(facts, summary)
    return logs, (invocation, rows)


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


def _keep_receipt(
    argv: list[str], facts: RunFacts, ran: _Ran, env, started_ns: int, as_json: bool
) -> None:
    """Write this run's receipt when it qualifies (docs/optimizations.md #18), else drop any old one."""
    from vx.pipeline import receipt_tasks
    from vx.store.runs import replay_history

    prep, summary = ran.prep, ran.summary
    assert prep is not None and summary is not None
    noted = witness.stop()
    silent = ran.flow == "broad" and not ran.noticed  # a receipt prints as the stream does
    tasks = receipt_tasks(prep, summary, started_ns) if silent else None
    if tasks is None or not receipt.write(
        argv=argv,
        cwd=facts.cwd,
        root=facts.root,
        cache_dir=facts.cache_dir,
        store_dir=str(prep.store_dir or prep.cache_dir),
        started_ns=started_ns,
        env=env,
        noted=noted,
        vouched=prep.index.vouched,
        tasks=tasks,
        toplevel=str(prep.index.toplevel) if prep.index.toplevel else None,
        history=replay_history(facts, summary),
        as_json=as_json,
    ):
        receipt.forget(facts.root, facts.cwd, argv)


def _flow(broad: bool, env: Mapping[str, str], output_logs: str | None = None) -> str:
    if output_logs is not None:
        return output_logs
    ci = env.get("CI", "").lower() not in ("", "0", "false")
    return "ci" if ci else ("broad" if broad else "focused")


def _reporter(flow: str, env: Mapping[str, str], as_json: bool = False):
    """The rows and frames: task output on stdout, the rest on stderr (all of it there under
    `--format json`, whose stdout is the record)."""
    from vx.report.reporters import make_reporter
    from vx.style import color_depth

    ci = flow == "ci"
    color = color_depth(env, sys.stderr)  # how many colours: none, 16, 256 or truecolour
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


def _tui_reporter(env: Mapping[str, str], keep: bool):
    from vx.report.tui import TuiReporter
    from vx.style import color_depth

    color = color_depth(env, sys.stderr)
    return TuiReporter(version=__version__, out=sys.stdout, err=sys.stderr, color=color, keep=keep)


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


def _input_tracer(env: Mapping[str, str]):
    from vx.engine.verify import InputTracer, find_strace

    return InputTracer(find_strace(env))


def _rerun():
    from vx.engine.verify_determinism import Rerun

    return Rerun()


def _determinism_report(rerun, prep, summary, out) -> int:
    """Print --verify=determinism's findings to `out`; exit 1 when a task's outputs differ (a
    failed run wins)."""
    from vx.engine.verify_determinism import exit_code, render

    if summary.interrupted:
        return summary.exit_code
    found = rerun.report(prep.graph.order)
    try:
        print("\n".join(render(found)), file=out, flush=True)
    except BrokenPipeError:
        pass
    return summary.exit_code or exit_code(found)


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


# ---------------------------------------------------------------- what a run prints


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


def _dry(prep, fmt: str) -> int:
    from vx.prepare import dry_plan
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
        say(f"vx: warning: {message}" if level == "warning" else f"vx: {message}")
    return EXIT_OK


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
    say(f"vx: graph written to {target}")


def _write_summary(summary, prep, target: str, tags=()) -> None:
    from vx.report.summary import write_summary

    if target:
        path = Path(target)
    else:
        path = Path(prep.cache_dir) / "runs" / f"{summary.run_id}.json"
    write_summary(summary, path, dict(tags))
    say(f"vx: summary written to {path}")
