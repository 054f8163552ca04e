"""What happens during a run, as values. The core emits; reporters render (never back)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from vx.model import CacheStatus, LogChunk, RunSummary, TaskGraph, TaskId, TaskResult


@dataclass(frozen=True, slots=True)
class RunStarted:
    graph: TaskGraph
    concurrency: int


@dataclass(frozen=True, slots=True)
class TaskStarted:
    id: TaskId
    command: str
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class TaskOutput:
    id: TaskId
    chunk: LogChunk


@dataclass(frozen=True, slots=True)
class TaskRetrying:
    id: TaskId
    attempt: int  # the attempt about to start
    total: int
    after: str  # "exit 1" or "a timeout"


@dataclass(frozen=True, slots=True)
class TaskFinished:
    result: TaskResult


@dataclass(frozen=True, slots=True)
class CacheRestored:
    id: TaskId
    cache: CacheStatus


@dataclass(frozen=True, slots=True)
class Notice:
    """A one-line message for the user (a warning about the cache, a withheld save)."""

    message: str
    level: str = "warning"  # info | warning
    id: TaskId | None = None


@dataclass(frozen=True, slots=True)
class RunFinished:
    summary: RunSummary


Event = RunStarted | TaskStarted | TaskOutput | TaskRetrying | TaskFinished | CacheRestored | Notice | RunFinished


@dataclass(frozen=True, slots=True)
class PlannedTask:
    """One row of `--dry`: what would happen to a task, predicted without running anything."""

    id: TaskId
    command: str | None  # None for a group
    key: str | None
    predicted: str  # hit-local | miss | no-cache | group
    deps: tuple[TaskId, ...]
    project_dir: str


class Reporter(Protocol):
    def __call__(self, event: Event) -> None: ...


Emit = Callable[[Event], None]


class ListReporter:
    """Keeps every event; the fake reporter for tests."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)
