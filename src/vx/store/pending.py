"""The runs a replay appends to `runs.pending` (`vx.store.runs`), as the fold reads them back: one
JSON line per run, decoded field by field into the history's columns. The file is the
workspace's, so anything may be in it (an archive, a torn append, another tool): a line that is
not exactly one run of the right shape is left out, never inserted and never an error.
"""

from __future__ import annotations

import msgspec


class Invocation(msgspec.Struct, array_like=True):
    """An `invocations` row, in `runs.INVOCATION_COLUMNS` order."""

    run_id: str
    command: str
    cwd: str
    requested_tasks: str
    cache_policy: str | None
    concurrency: int | None
    started_at: float
    ended_at: float
    total_duration_ms: float
    task_count: int
    failed_count: int
    hit_count: int
    hit_local_count: int
    hit_remote_count: int
    up_to_date_count: int
    exit_code: int
    exit_ok: int
    replayed: int
    host: str | None
    os: str | None
    arch: str | None
    vx_version: str
    git_sha: str | None
    git_branch: str | None
    git_dirty: int | None
    ci_provider: str | None
    tags: str | None = None  # absent from a line an older vx's replay appended


class TaskRow(msgspec.Struct, array_like=True):
    """A `runs` row, in `runs.RUN_COLUMNS` order."""

    run_id: str
    project: str
    task: str
    hash: str
    status: str
    cache: str
    exit_code: int | None
    duration_ms: float
    cpu_ms: float | None
    peak_rss_bytes: int | None
    attempts: int
    timed_out: int
    cached: int
    restored: int
    blocked_by: str | None
    reason: str | None
    sandbox_violations: int
    log_path: str | None


class PendingRun(msgspec.Struct, array_like=True):
    invocation: Invocation
    rows: list[TaskRow]


_DECODER = msgspec.json.Decoder(PendingRun)


def runs_in(data: bytes) -> list:
    """Each whole, well-formed line of a pending file as [invocation, rows] in column order; the
    last line without its newline is an append a crash tore, and is left out with the others
    that do not decode."""
    out = []
    for line in data.split(b"\n")[:-1]:
        try:
            run = _DECODER.decode(line)
        except msgspec.DecodeError:  # not JSON, or not a run (ValidationError is one)
            continue
        out.append(
            [
                msgspec.structs.astuple(run.invocation),
                [msgspec.structs.astuple(r) for r in run.rows],
            ]
        )
    return out
