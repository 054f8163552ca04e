"""Every noun of vx, as frozen values. No I/O here: the rest of vx passes these around.

Paths inside these values are POSIX strings relative to the workspace root ("" is the
root itself) unless a field says it is absolute. Collections are tuples and mappings so
values can be shared between threads, hashed and compared.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from msgspec import Struct, field

if TYPE_CHECKING:  # types only: the model imports nothing of vx at run time
    from vx.files.outputs import OutputSpec

ROOT_PROJECT = "//"


class TaskId(Struct, frozen=True, order=True):
    """`package#task`; the root project is `//`."""

    package: str
    task: str

    def __str__(self) -> str:
        return f"{self.package}#{self.task}"


# ---------------------------------------------------------------- workspace


class Package(Struct, frozen=True):
    """One workspace member (or the root project `//`)."""

    name: str
    dir: str  # workspace-relative, "" for the root
    deps: tuple[str, ...]  # names of workspace packages it links to, sorted
    manifest_path: str  # workspace-relative path of its package.json
    scripts: Mapping[str, str] = field(default_factory=dict)
    framework: str = (
        ""  # turbo's slug for the framework its dependencies name (vx.workspace.frameworks)
    )
    # its package.json as parsed: what a package manager flattens into `npm_package_*`
    manifest: Mapping[str, Any] = field(default_factory=dict)


class NxResolved(Struct, frozen=True):
    """An Nx workspace's projects as its own Nx resolves them, the targets its `plugins` infer
    merged in (vx.config.nxinference): each as `nx show project NAME --json` prints it, by root
    ("" for the workspace root), and each one's source map (field path -> [file, plugin])."""

    projects: Mapping[str, Any]
    sources: Mapping[str, Any]
    version: str = ""  # the workspace's nx
    reads: frozenset[str] = frozenset()  # the files the answer depends on, workspace-relative
    # Nx's project graph edges to other workspace projects (source imports, tsconfig paths,
    # implicitDependencies), by Nx name: [[target, "static"|"dynamic"|"implicit"], …]
    dependencies: Mapping[str, Any] = field(default_factory=dict)


class Workspace(Struct, frozen=True):
    root: Path  # absolute, resolved
    manager: str  # npm | pnpm | yarn | bun
    packages: Mapping[str, Package]  # by name; the root project is under ROOT_PROJECT
    member_globs: tuple[str, ...] = ()
    member_globs_file: str = (
        ""  # where the member globs are written (package.json or pnpm-workspace.yaml)
    )
    empty_member_globs: tuple[str, ...] = ()  # positive globs under which no package.json was found
    nx: NxResolved | None = None  # where nx.json declares `plugins`: what Nx resolves
    nx_root: str | None = None  # the root project's Nx name, where Nx sees a root project

    def package_at(self, rel_dir: str) -> Package | None:
        """The deepest package whose dir contains rel_dir."""
        best: Package | None = None
        for pkg in self.packages.values():
            d = pkg.dir
            if d == "" or rel_dir == d or rel_dir.startswith(d + "/"):
                if best is None or len(d) > len(best.dir):
                    best = pkg
        return best


# ---------------------------------------------------------------- config


class EnvConfig(Struct, frozen=True):
    pass_through: tuple[str, ...] = ()
    define: Mapping[str, str] = field(default_factory=dict)
    secret: tuple[str, ...] = ()
    framework: str = (
        ""  # a turbo.json task's inferred framework: its variables are keyed and passed
    )


class SandboxConfig(Struct, frozen=True):
    """`exec.sandbox` as declared: the task's whole permission surface.

    Paths stay as written (project-relative, absolute or `~`); the sandbox resolves them
    against the project when the task starts. `network` is True (the host's network), or
    host patterns served through the run's proxy; `()` is no network at all.
    """

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: bool | tuple[str, ...] = ()
    unix_sockets: bool | tuple[str, ...] = False
    local_binding: bool | tuple[int, ...] = False
    pty: bool = False
    git_config: bool = False
    deny_network: tuple[str, ...] = ()
    ignore_read: tuple[str, ...] = ()
    ignore_write: tuple[str, ...] = ()
    ignore_network: tuple[str, ...] = ()
    trace: bool | None = (
        None  # `trace`: False enforces without reporting; None follows the workspace's
    )


class PersistentConfig(Struct, frozen=True):
    """`exec.persistent`: a task that keeps running (a dev server, a watcher). Its
    dependants start once it is ready: when a line of its output matches `ready_when`, or at
    once when there is none."""

    ready_when: str | None = None  # a regular expression, checked at load


class ExecConfig(Struct, frozen=True):
    command: str
    env: EnvConfig = EnvConfig()
    timeout_ms: int | None = None  # for a persistent task: how long it may take to be ready
    retries: int | None = None
    sandbox: SandboxConfig | None = None
    persistent: PersistentConfig | None = None
    interactive: bool = False  # the terminal's stdin and stdout, alone, when vx runs on one
    # `remote`: True runs it on a REAPI worker, "only" never on this machine; None: the
    # workspace's `remoteExecution.default` decides
    remote: bool | str | None = None
    platform: tuple[tuple[str, str], ...] = ()  # REAPI platform properties, sorted
    # the package.json script it runs (a turbo.json or Nx mapping): it gets the variables the
    # workspace's package manager sets for that script (plan/lifecycle.py). Not in `canonical`:
    # the script text already is, as the command.
    script: str = ""


class CacheConfig(Struct, frozen=True):
    input_files: tuple[str, ...]
    output_files: tuple[str, ...]
    input_workspace_files: tuple[str, ...] = ()
    output_workspace_files: tuple[str, ...] = ()
    input_env: tuple[str, ...] = ()
    input_tasks: tuple[str, ...] | None = None  # None means ('*', '^*')
    input_runtime: tuple[str, ...] = ()  # probes run in the project dir
    input_ws_runtime: tuple[str, ...] = ()  # probes run at the root, once per run
    # A turbo.json task: its globs are turbo's, and only `input_reach` (its explicit
    # inputs, `$TURBO_DEFAULT$` aside) reaches files git ignores; None: every input glob does.
    turbo_globs: bool = False
    input_reach: tuple[str, ...] | None = None
    # Mapped from turbo.json or an Nx target: neither tool wipes outputs, so two such tasks may
    # share them, each adding to what is there (plan/ownership.py).
    shared_outputs: bool = False


class TaskConfig(Struct, frozen=True):
    """One task as declared. `canonical` is the JSON text of the declaration (sorted keys),
    which is what the key folds."""

    name: str
    canonical: str
    exec: ExecConfig | None = None
    depends_on: tuple[str, ...] = ()
    # on a group only when `implicit` (and not an Nx project's pass-over): the files its key folds
    cache: CacheConfig | None = None
    description: str | None = None
    # Made by vx, not declared: a project's missing `build` or a turbo.json task whose script
    # the package lacks. A group keyed on its project's files (an Nx project's: on nothing of its
    # own, `^` inputs say which files count); a bare task name never selects it.
    implicit: bool = False

    @property
    def is_group(self) -> bool:
        return self.exec is None


class ProjectConfig(Struct, frozen=True):
    source: str  # workspace-relative path of the config file ("" when none)
    tasks: Mapping[str, TaskConfig] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    # task name -> why vx cannot run it (turbo's persistent); an Nx target's is (message, file, field, hint)
    not_runnable: Mapping[str, str | tuple[str, str, str, str]] = field(default_factory=dict)
    # A mapped task's fields as the user wrote them (an Nx target): `tasks.build.dependsOn` ->
    # (`libs/a/project.json`, `targets.build.dependsOn`), so a refusal names the user's file.
    origins: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # the workspace files a code config read besides itself (its imports, in turn): `--affected`
    reads: tuple[str, ...] = ()
    # its tasks are its Nx targets: without a `build`, `^build` passes over it as Nx's does, and
    # what of its files a dependant keys is the dependant's `^` inputs' to say (plan.graph)
    nx: bool = False

    def located(self, path: str) -> tuple[str, str]:
        """The file and field a refusal of `path` (`tasks.build.cache.outputs.files[0]`) names:
        the nearest written origin of a mapped task, else this config's file and `path`."""
        key = path
        while self.origins and key:
            if key in self.origins:
                return self.origins[key]
            key = key[: max(key.rfind("."), key.rfind("["), 0)]
        return self.source, path


class RemoteCacheConfig(Struct, frozen=True):
    """Workspace `remoteCache`. Never a token: those come from the environment."""

    kind: str  # turbo | nx | reapi
    url: str | None = None  # turbo `apiUrl`, nx `url`, reapi `endpoint`
    team: str | None = None
    team_id: str | None = None
    signature: bool | None = None  # None: on exactly when TURBO_REMOTE_CACHE_SIGNATURE_KEY is set
    upload: str = "ci"  # ci | always | never
    timeout_ms: int | None = None
    max_artifact_bytes: int | None = None
    instance: str | None = None  # reapi `instance`
    ca_cert: str | None = None  # reapi `caCert`, `clientCert`, `clientKey`: file paths
    client_cert: str | None = None
    client_key: str | None = None
    max_connections: int | None = None  # reapi `maxConnections`: calls in flight at most


class RemoteExecution(Struct, frozen=True):
    """Workspace `remoteExecution`: the REAPI server's workers as a pool beside the local slots."""

    capacity: int = 4  # actions in flight at once
    default: bool = False  # eligible tasks with no `exec.remote` run remotely
    platform: tuple[tuple[str, str], ...] = ()  # properties every remote task sends, sorted
    # no word from the server on an action this long: ask once where it is, then run it here
    update_timeout_ms: int = 60_000
    queue_timeout_ms: int = 900_000  # queued this long, no worker taking it: run it here
    # where every worker has this workspace installed (the same lockfile): the input root links
    # the install's package store there instead of shipping it (docs/remote-execution.md)
    worker_install: str | None = None


class CacheRetention(Struct, frozen=True):
    """How long the local cache keeps entries: unused for longer than, and at most this much."""

    older_than_s: float | None = None
    max_bytes: int | None = None


class ScheduleConfig(Struct, frozen=True):
    """Workspace `schedule`: how ready tasks are ordered when slots are short."""

    history: bool = True  # order by the expected remaining critical path from recorded durations
    window: int = 20  # the last runs of a task its expected duration is the median of
    assume: Mapping[str, int] = {}  # `PKG#TASK` or `TASK` -> ms, for tasks with no record
    file: str | None = None  # workspace-relative: timings read at start and written at the end


class WorkspaceConfig(Struct, frozen=True):
    source: str = ""
    concurrency: int | None = None
    cache_dir: str | None = None
    timeout_ms: int | None = None
    remote_cache: RemoteCacheConfig | None = None
    cache_retention: CacheRetention | None = None
    affected_base: str | None = None  # the ref `--affected` compares with by default
    exclusive_outputs: bool = True  # `rules.exclusiveOutputs`: false allows additive outputs
    sandbox_trace: bool = (
        True  # `sandbox.trace`: whether sandboxed tasks are traced, unless a task says
    )
    migrated: str | None = None  # `migrated`: turbo | nx — that tool's files give no tasks
    remote_execution: RemoteExecution | None = None
    cache_scope: str | None = None  # `cacheScope`: trusted | read-only | a scope's name
    schedule: ScheduleConfig = ScheduleConfig()
    plugins: tuple[PluginSpec, ...] = ()  # `plugins`, in declaration order (precedence)
    reads: tuple[str, ...] = ()  # what a code config read besides itself: `--affected` on it


class PluginSpec(Struct, frozen=True):
    """One entry of `plugins`: the plugin's name (a `vx.plugins` entry point or a module) and the
    options its factory is called with."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- graph


class TaskNode(Struct, frozen=True):
    id: TaskId
    config: TaskConfig
    project_dir: str  # workspace-relative
    deps: tuple[TaskId, ...]  # direct upstream tasks, in dependsOn order, deduplicated
    requested: bool = False

    @property
    def is_group(self) -> bool:
        return self.config.exec is None

    @property
    def exec(self) -> ExecConfig:
        """The command's config, which every task that is not a group has."""
        exec_ = self.config.exec
        assert exec_ is not None, f"{self.id} is a group: it has no command"
        return exec_


class TaskGraph(Struct, frozen=True):
    nodes: Mapping[TaskId, TaskNode]
    order: tuple[TaskId, ...]  # a topological order (dependencies first)
    priority: Mapping[TaskId, int]  # count of transitive dependents
    requested: tuple[TaskId, ...]


# ---------------------------------------------------------------- keys


class InputSet(Struct, frozen=True):
    """The files a task's key folds: sorted (workspace-relative path, identity)."""

    files: tuple[tuple[str, str], ...]
    unmatched_globs: tuple[str, ...] = ()


class CachePolicy(Struct, frozen=True):
    """The local cache axes: `--no-cache` turns both off, `--force` turns reads off."""

    read: bool = True
    write: bool = True


# ---------------------------------------------------------------- sandbox


class Matcher(Protocol):
    """What a grant's glob is asked (`vx.files.globs.GlobSet`)."""

    patterns: tuple[str, ...]

    def matches(self, path: str) -> bool: ...


class Grant(Struct, frozen=True):
    """One allow entry resolved: the path it reaches and, for a glob, what inside counts.

    `base` is absolute (the static prefix of a glob). `pattern` is None when the grant is
    `base` and its whole tree; `directory` marks a grant that names a directory (a trailing
    `/`, a collapsed `/**`, or a directory glob whose matches are directories).
    """

    text: str
    base: str
    pattern: Matcher | None = None  # a files.globs.GlobSet
    directory: bool = False
    dir_glob: bool = False  # pattern names directories (from `<glob>/**`): expanded at start
    lexical: str = ""  # `base` as written, when a symlink on the way made realpath move it

    def covers(self, path: str) -> bool:
        """Whether `path` (absolute, normalised) is inside what the grant allows."""
        if path == self.base:
            return self.pattern is None
        if not path.startswith(self.base + "/") and self.base != "/":
            return False
        if self.pattern is None:
            return True
        rel = path[len(self.base) + 1 :] if self.base != "/" else path[1:]
        parts = rel.split("/")
        return any(self.pattern.matches("/".join(parts[: i + 1])) for i in range(len(parts)))


class SandboxSpec(Struct, frozen=True):
    """Everything planned about one task's sandbox before the run (pure data, no I/O left)."""

    task: str
    source: str  # the config file, workspace-relative (for hints)
    root: str  # the workspace root, realpath
    project: str  # the project dir, realpath
    home: str
    config: SandboxConfig
    reads: tuple[Grant, ...]
    writes: tuple[Grant, ...]
    walls: tuple[str, ...]  # other projects, .git, .vx, an in-workspace cache dir
    projects: Mapping[str, str]  # every other project's dir -> its package name
    linked: tuple[str, ...]  # dirs of linked workspace packages granted
    withheld: Mapping[str, str]  # linked package dir -> name, withheld from a cached task
    ignore_read: tuple[Grant, ...] = ()
    ignore_write: tuple[Grant, ...] = ()
    private: tuple[
        str, ...
    ] = ()  # hidden outside the workspace: a cache dir there (every task's artifacts)
    trace: bool = True  # False (`sandbox.trace: false`): enforced, never traced, nothing reported
    # the withheld packages that declare no `build`: `dependsOn "<name>#build"` reaches the
    # implicit one (a group keyed on the package's files), which a hint says
    implicit_builds: frozenset[str] = frozenset()
    # those of them whose implicit `build` keys nothing of its own (an Nx project's: `^build`
    # passes over it), so the hint names no `build` of theirs
    passed_over: frozenset[str] = frozenset()

    @property
    def git_granted(self) -> bool:
        return any(
            g.base == self.root + "/.git" or g.base.startswith(self.root + "/.git/")
            for g in self.reads
        )

    def rel(self, path: str) -> str:
        """Spell `path` for a report: workspace-relative inside the workspace, `~/…` at home."""
        if path == self.root:
            return "."
        if path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        if self.home and path.startswith(self.home + "/"):
            return "~/" + path[len(self.home) + 1 :]
        return path

    def grant_text(self, path: str) -> str:
        """How a grant naming `path` is written in this project's config."""
        if path == self.project:
            return "."
        if path.startswith(self.project + "/"):
            return path[len(self.project) + 1 :]
        if path.startswith(self.root + "/"):
            return os.path.relpath(path, self.project)
        if self.home and path.startswith(self.home + "/"):
            return "~/" + path[len(self.home) + 1 :]
        return path


class Told(Struct, frozen=True):
    """What a task's warnings say, in the words of the file the user wrote (vx.plan.origins).

    `unmatched` pairs each input glob that matched nothing when the run was planned, as the task
    matches it (asked again as it starts: an upstream task of the run may write what it names),
    with the line said while it still matches nothing; a line shared by the tasks of one
    turbo.json definition is said once a run. `outputs` names the field the task's outputs were
    written in when it is not its own `cache.outputs` (`turbo.json tasks.build.outputs`)."""

    unmatched: tuple[tuple[str, str], ...] = ()
    outputs: str = ""

    def inputs_lines(self, still: tuple[str, ...]) -> list[str]:
        """The lines for the globs that `still` match nothing, each once."""
        return list(dict.fromkeys(line for glob, line in self.unmatched if glob in still))

    def outputs_line(self, tid: TaskId, declared: tuple[str, ...]) -> str:
        """What a run whose outputs matched no file says (turbo's words for a turbo.json task);
        nothing for outputs an Nx inference plugin declared (@nx/vite's `test` names a coverage
        folder written only with coverage on): nobody wrote them, and Nx names none."""
        if " (inferred by " in self.outputs:
            return ""
        if not self.outputs:
            return f"{tid}: cache.outputs matched no files ({', '.join(declared)})"
        return f"no output files found for task {tid}: check {self.outputs}"


class TaskPlan(Struct, frozen=True):
    """Everything decided about a task before the walk: its key, inputs, final command and env.

    Here rather than in rebuilder.py so planning and a fully cached run never import the
    executor's asyncio machinery."""

    key: str
    inputs: InputSet | None
    command: str | None
    env: Mapping[str, str]
    timeout_ms: int | None
    retries: int
    outputs: OutputSpec | None  # globs to walk, wipe and allow (None when the task caches nothing)
    sandbox: SandboxSpec | None = None  # when the task declares exec.sandbox
    record: HashRecord | None = None  # the HashRecord the key was folded from (kept for `vx why`)
    framework: str = (
        ""  # a vx-config task's package framework (vx.workspace.frameworks), for the hint on a miss
    )
    # "" runs here; "on" on a REAPI worker when one is configured; "only" never here
    remote: str = ""
    platform: tuple[tuple[str, str], ...] = ()  # the task's properties over the workspace's
    told: Told = Told()  # what its warnings say: the globs that match nothing, in the user's words


class HashRecord(Struct, frozen=True):
    """Every component of a task key, in fold order (docs/caching.md)."""

    task_id: str
    fingerprint: str
    package_json: str
    config: str
    forward_args: tuple[str, ...]
    env: tuple[tuple[str, str | None], ...]  # (name, value); None = unset
    upstream: tuple[tuple[str, str], ...]  # (task id, key), sorted by key
    files: tuple[tuple[str, str], ...]
    # What `fingerprint` folded of the lockfile, for `vx why` only (not folded again): per root
    # lockfile, its name and the project's vx.files.lockfile.Closure (shared, not copied, per task).
    lockfile: tuple[tuple[str, object], ...] = ()
    # the Node version on the task's PATH, then each runtime probe's stdout and stderr,
    # as (label, value); folded after the files, and only when present.
    runtime: tuple[tuple[str, str], ...] = ()
    # what the plugins' `key` hooks returned, as sorted (`plugin/name`, value); folded last, and
    # only when present
    plugin: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- outcomes


class Status(str, Enum):
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    ABORTED = "aborted"


class CacheStatus(str, Enum):
    MISS = "miss"
    LOCAL = "local"
    REMOTE = "remote"
    UP_TO_DATE = "up-to-date"
    NO_CACHE = "no-cache"


class LogChunk(Struct, frozen=True):
    """A piece of a task's output, in arrival order. stream is 1 (stdout) or 2 (stderr)."""

    stream: int
    data: bytes


class OutputFile(Struct, frozen=True):
    """One output as recorded: workspace-relative path, bytes, permission bits, mtime in ms."""

    path: str
    size: int
    mode: int
    mtime_ms: int


class ProcessResult(Struct, frozen=True):
    exit_code: int  # 128+n for a signal death; 143 on timeout (137 if SIGKILL took it)
    duration_ms: float
    log: tuple[LogChunk, ...] = ()
    timed_out: bool = False
    aborted: bool = False  # ended because the run is stopping
    signal: int | None = None
    cpu_ms: float | None = None
    peak_rss_bytes: int | None = None
    spawn_error: str | None = None
    # processes the shell left running, stopped before the outputs were read: "SIGTERM" or "SIGKILL"
    stopped_strays: str | None = None


class Violation(Struct, frozen=True):
    """One access a sandboxed task made outside its grants.

    `kind` is read, write or network; `path` is workspace-relative (absolute outside it,
    `host:port` for network); `grant_hint` is the grant that would allow it, as config text.
    """

    kind: str
    path: str
    grant_hint: str


class TaskResult(Struct, frozen=True):
    id: TaskId
    status: Status
    cache: CacheStatus
    key: str | None = None
    duration_ms: float = 0.0
    exit_code: int | None = None
    log: tuple[LogChunk, ...] = ()
    reason: str | None = None  # failure label, skip cause, or why a save was withheld
    blocked_by: TaskId | None = None
    command: str | None = None
    saved: bool = False
    attempts: int = 0
    timed_out: bool = False
    cpu_ms: float | None = None
    peak_rss_bytes: int | None = None
    violations: tuple[Violation, ...] = ()
    stored_ms: float | None = None  # a hit: how long the run that saved it took (the time it saved)
    persistent: bool = False  # a persistent task's `reason`: served, stopped or not started


class RunSummary(Struct, frozen=True):
    run_id: str
    results: tuple[TaskResult, ...]
    started_at: float
    ended_at: float
    exit_code: int
    interrupted: bool = False
