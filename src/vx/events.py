"""What happens during a run, as values. The core emits; reporters render (never back)."""

from __future__ import annotations

from typing import Callable, Protocol

from msgspec import Struct

from vx.model import CacheStatus, LogChunk, RunSummary, TaskGraph, TaskId, TaskResult


class RunStarted(Struct, frozen=True):
    graph: TaskGraph
    concurrency: int


class TaskStarted(Struct, frozen=True):
    id: TaskId
    command: str
    attempt: int = 1
    terminal: bool = False  # an interactive task holds the terminal until its TaskFinished


class TaskReady(Struct, frozen=True):
    """A persistent task is ready: its dependants may start; it goes on running."""

    id: TaskId
    duration_ms: float


class ServersKept(Struct, frozen=True):
    """The graph is done and these persistent tasks stay in the foreground."""

    ids: tuple[TaskId, ...]


class TaskOutput(Struct, frozen=True):
    id: TaskId
    chunk: LogChunk


class TaskRetrying(Struct, frozen=True):
    id: TaskId
    attempt: int  # the attempt about to start
    total: int
    after: str  # "exit 1" or "a timeout"


class TaskStage(Struct, frozen=True):
    """A task on a remote worker changed stage: `queued` at the server, `executing` on a worker."""

    id: TaskId
    stage: str


class TaskFinished(Struct, frozen=True):
    result: TaskResult


class CacheRestored(Struct, frozen=True):
    id: TaskId
    cache: CacheStatus


class Notice(Struct, frozen=True):
    """A one-line message for the user (a warning about the cache, a withheld save)."""

    message: str
    level: str = "warning"  # info | warning
    id: TaskId | None = None


class RunFinished(Struct, frozen=True):
    summary: RunSummary


Event = (
    RunStarted
    | TaskStarted
    | TaskReady
    | ServersKept
    | TaskOutput
    | TaskRetrying
    | TaskStage
    | TaskFinished
    | CacheRestored
    | Notice
    | RunFinished
)


class PlannedTask(Struct, frozen=True):
    """One row of `--dry`: what would happen to a task, predicted without running anything."""

    id: TaskId
    command: str | None  # None for a group
    key: str | None
    predicted: str  # hit-local | miss | no-cache | group
    deps: tuple[TaskId, ...]
    project_dir: str
    inputs: tuple[tuple[str, str], ...] | None = (
        None  # the files its key folds: (workspace path, identity)
    )
    implicit: bool = False  # a group vx made: keyed on its project's files (an Nx one's: on none)


class Reporter(Protocol):
    def __call__(self, event: Event) -> None: ...


Emit = Callable[[Event], None]
