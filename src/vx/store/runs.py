"""The run history: every finished run, one `invocations` row and a `runs` row per real task, in
`runs.db` beside the cache index (the DDL is in docs/caching.md; query it with `sqlite3`).

A file of its own, not a table of `cache.db`: a replayed run vouches for the index by its file
identities, and a write there per run would make every next replay read the index again. A
replay writes no SQLite either: it appends its record to `runs.pending` (one `write` under the
run lock), and the next run that records, or `vx last`, folds those in first.

Stdlib only, values in and out; sqlite3 is imported where a database is opened, and the fold's
decoder (`vx.store.pending`, msgspec's) where the pending file is read, so the replay (which only
appends) loads neither.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a replay loads this)
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

    from vx.model import CachePolicy, RunSummary, ScheduleConfig, TaskId, TaskResult
    from vx.store.policy import CacheAxes

DB_NAME = "runs.db"
PENDING = "runs.pending"
SCHEMA = "4"
# Versions whose tables the DDL only adds to (3 added an index, 4 the `tags` column, in
# `ADDED`): kept, not started afresh.
ADDITIVE_FROM = (2, 3)
ADDED = ("ALTER TABLE invocations ADD COLUMN tags TEXT",)
FOLD_AT = 1 << 20  # a pending file this big is folded by the replay that grew it
KEEP_RUNS = 1000  # invocations kept; older ones and their task rows go

INVOCATION_COLUMNS = (
    "run_id",
    "command",
    "cwd",
    "requested_tasks",
    "cache_policy",
    "concurrency",
    "started_at",
    "ended_at",
    "total_duration_ms",
    "task_count",
    "failed_count",
    "hit_count",
    "hit_local_count",
    "hit_remote_count",
    "up_to_date_count",
    "exit_code",
    "exit_ok",
    "replayed",
    "host",
    "os",
    "arch",
    "vx_version",
    "git_sha",
    "git_branch",
    "git_dirty",
    "ci_provider",
    "tags",  # `--tag k=v`: a JSON object, None without one
)
RUN_COLUMNS = (
    "run_id",
    "project",
    "task",
    "hash",
    "status",
    "cache",
    "exit_code",
    "duration_ms",
    "cpu_ms",
    "peak_rss_bytes",
    "attempts",
    "timed_out",
    "cached",
    "restored",
    "blocked_by",
    "reason",
    "sandbox_violations",
    "log_path",
)
DDL = (
    "CREATE TABLE IF NOT EXISTS invocations (run_id TEXT PRIMARY KEY, command TEXT NOT NULL,"
    " cwd TEXT NOT NULL, requested_tasks TEXT NOT NULL, cache_policy TEXT, concurrency INTEGER,"
    " started_at REAL NOT NULL, ended_at REAL NOT NULL, total_duration_ms REAL NOT NULL,"
    " task_count INTEGER NOT NULL, failed_count INTEGER NOT NULL, hit_count INTEGER NOT NULL,"
    " hit_local_count INTEGER NOT NULL, hit_remote_count INTEGER NOT NULL,"
    " up_to_date_count INTEGER NOT NULL, exit_code INTEGER NOT NULL, exit_ok INTEGER NOT NULL,"
    " replayed INTEGER NOT NULL, host TEXT, os TEXT, arch TEXT, vx_version TEXT NOT NULL,"
    " git_sha TEXT, git_branch TEXT, git_dirty INTEGER, ci_provider TEXT, tags TEXT)",
    "CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL,"
    " project TEXT NOT NULL, task TEXT NOT NULL, hash TEXT NOT NULL, status TEXT NOT NULL,"
    " cache TEXT NOT NULL, exit_code INTEGER, duration_ms REAL NOT NULL, cpu_ms REAL,"
    " peak_rss_bytes INTEGER, attempts INTEGER NOT NULL, timed_out INTEGER NOT NULL,"
    " cached INTEGER NOT NULL, restored INTEGER NOT NULL, blocked_by TEXT, reason TEXT,"
    " sandbox_violations INTEGER NOT NULL, log_path TEXT)",
    "CREATE INDEX IF NOT EXISTS runs_run_id ON runs (run_id)",
    "CREATE INDEX IF NOT EXISTS invocations_started_at ON invocations (started_at)",
    "CREATE INDEX IF NOT EXISTS runs_failed_hash ON runs (hash) WHERE status = 'failed'",
    "CREATE INDEX IF NOT EXISTS runs_executed ON runs (project, task, id) WHERE status = 'success'",
)


def run_id(now_ns: int | None = None) -> str:
    """A version-7 UUID (RFC 9562): 48 bits of Unix milliseconds, then random bits, so ids sort
    by time. Spelled by hand: `import uuid` costs a few ms of every start."""
    import time

    ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    b = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


CI_PROVIDERS = (
    ("GITHUB_ACTIONS", "github-actions"),
    ("GITLAB_CI", "gitlab"),
    ("BUILDKITE", "buildkite"),
    ("CIRCLECI", "circleci"),
    ("CI", "ci"),  # set by most others; names no provider
)


def ci_provider(environ) -> str | None:
    """The CI service this run is under, by the variable each one sets; None off CI."""
    for name, provider in CI_PROVIDERS:
        if environ.get(name, "").lower() not in ("", "0", "false"):
            return provider
    return None


def git_head(root: str) -> tuple[str | None, str | None]:
    """The commit and branch checked out at `root`'s repository, read from `.git` itself (HEAD,
    the ref's file, else packed-refs; a worktree's or submodule's `.git` file) — spawning git
    would cost every run more than the rest of this. (None, branch) on an unborn branch,
    (sha, None) on a detached HEAD, (None, None) outside git or on anything unreadable: the
    history is never a reason to fail a run."""
    try:
        return _git_head(root)
    except (OSError, ValueError, UnicodeError):
        return None, None


def _git_head(root: str) -> tuple[str | None, str | None]:
    here = os.path.abspath(root)
    while True:
        dot = os.path.join(here, ".git")
        if os.path.exists(dot):
            break
        parent = os.path.dirname(here)
        if parent == here:
            return None, None
        here = parent
    gitdir = dot
    if not os.path.isdir(dot):  # `gitdir: PATH`, relative to the file's directory
        with open(dot, encoding="utf-8") as f:
            line = f.readline().strip()
        if not line.startswith("gitdir:"):
            return None, None
        gitdir = os.path.join(here, line[7:].strip())
    common = gitdir
    try:  # a linked worktree keeps HEAD of its own, its refs in the main repository
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = os.path.join(gitdir, f.readline().strip())
    except FileNotFoundError:
        pass
    with open(os.path.join(gitdir, "HEAD"), encoding="utf-8") as f:
        head = f.readline().strip()
    if not head.startswith("ref:"):
        return (head if _is_sha(head) else None), None
    ref = head[4:].strip()
    branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
    for directory in (gitdir, common):
        try:
            with open(os.path.join(directory, ref), encoding="utf-8") as f:
                sha = f.readline().strip()
            return (sha if _is_sha(sha) else None), branch
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            pass
    try:
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as f:
            for line in f:
                sha, _, name = line.rstrip("\n").partition(" ")
                if name == ref and _is_sha(sha):
                    return sha, branch
    except FileNotFoundError:
        pass
    return None, branch  # an unborn branch: no commit yet


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def shell_line(words: Sequence[str]) -> str:
    """The words as a shell line, quoted only where a shell needs it (`#` inside a word, as in
    `app#build`, does not)."""
    import re
    import shlex

    plain = re.compile(r"[\w@%+=:,./-][\w@%+=:,./#-]*")
    return " ".join(w if plain.fullmatch(w) else shlex.quote(w) for w in words)


def append_pending(
    cache_dir: str, invocation: Sequence[Any], rows: Sequence[Sequence[Any]]
) -> None:
    """Append one run (an invocation row and its task rows, in column order) to `runs.pending`,
    as one JSON line in one `write`; past FOLD_AT bytes, fold the file into the database, so it
    stays bounded however long replays go on. Raises OSError."""
    data = _json_line([list(invocation), [list(r) for r in rows]])
    fd = os.open(
        os.path.join(cache_dir, PENDING),
        os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
        0o600,
    )
    try:
        os.write(fd, data)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if size > FOLD_AT:  # rare: a run of replays with no pipeline run between folds them here
        try:
            record(cache_dir, None)
        except Exception:  # the file stays for the next run that records
            # Not only sqlite3.Error and OSError: the pending file is the workspace's, and a line
            # holding an integer past SQLite's (2**63 <= n < 2**64 decodes) raises OverflowError.
            pass


def _json_line(value: list) -> bytes:
    """`value` as one line of JSON, by the C encoder `json.dumps` itself uses (`_json`), without
    `json`'s package, whose decoder's regexes cost a replay `re`."""
    try:
        from _json import encode_basestring_ascii, make_encoder
    except ImportError:
        import json

        return json.dumps(value, separators=(",", ":")).encode() + b"\n"

    def refuse(item):
        raise TypeError(f"not a history value: {type(item).__name__}")

    encode = make_encoder(None, refuse, encode_basestring_ascii, None, ":", ",", False, False, True)
    return "".join(encode(value, 0)).encode("ascii") + b"\n"


PENDING_LIMIT = 64 * FOLD_AT  # replays fold the file long before this: a bigger one is not theirs


def _pending(path: str) -> list:
    """The runs in a pending file: each whole line that decodes as one (`vx.store.pending`).
    A file past PENDING_LIMIT is not one replays wrote, and none of it is read."""
    try:
        with open(path, "rb") as f:
            data = f.read(PENDING_LIMIT + 1)
    except OSError:
        return []
    if len(data) > PENDING_LIMIT:
        return []
    from vx.store.pending import runs_in

    return runs_in(data)


def connect(cache_dir: str, create: bool = True):
    """The history database, its tables made; None when there is none and `create` is off.
    A damaged file (an OS crash can leave one: see `_open`) is dropped and started afresh.
    Raises sqlite3.Error / OSError."""
    import sqlite3

    path = os.path.join(cache_dir, DB_NAME)
    if not create and not os.path.exists(path):
        return None
    if create:
        os.makedirs(cache_dir, exist_ok=True)
    try:
        return _open(path)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):  # locked, unreadable: not damage
            raise
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass
        return _open(path)


def _open(path: str):
    """The database with WAL and no fsync: a commit and the checkpoint at close each cost a sync
    otherwise, on every run. The price is that an OS crash or power loss may lose the last runs
    or damage the file, which `connect` then starts afresh: the history is a record, never
    something a run's correctness rests on."""
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != int(SCHEMA):
            db.execute("BEGIN IMMEDIATE")
            if version not in ADDITIVE_FROM:  # a history of another shape starts afresh
                db.execute("DROP TABLE IF EXISTS runs")
                db.execute("DROP TABLE IF EXISTS invocations")
            for statement in DDL:
                db.execute(statement)
            columns = {r[1] for r in db.execute("PRAGMA table_info(invocations)")}
            if "tags" not in columns:  # a history kept by an older vx: the column added
                for statement in ADDED:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={int(SCHEMA)}")  # set last: the tables are there
            db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


def record(
    cache_dir: str, invocation: Sequence[Any] | None, rows: Sequence[Sequence[Any]] = ()
) -> None:
    """In one transaction: the pending runs replays appended, then this run (when given), and
    the oldest runs past KEEP_RUNS dropped. Raises sqlite3.Error / OSError."""
    db = connect(cache_dir)
    pending = os.path.join(cache_dir, PENDING)
    taken = f"{pending}.{os.getpid()}"
    try:
        try:
            os.rename(pending, taken)  # appends from now on start a new file
        except FileNotFoundError:
            taken = ""
        runs = _pending(taken) if taken else []
        if invocation is not None:
            runs.append([list(invocation), [list(r) for r in rows]])
        if not runs:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            _insert(db, runs)
            _drop_oldest(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if taken:
            os.unlink(taken)
    finally:
        db.close()


def _drop_oldest(db) -> None:
    """Drop the runs past the newest KEEP_RUNS; one index step when there are none."""
    (cut,) = db.execute(
        "SELECT COALESCE((SELECT started_at FROM invocations ORDER BY started_at DESC"
        " LIMIT 1 OFFSET ?), -1)",
        (KEEP_RUNS - 1,),
    ).fetchone()
    if cut < 0:
        return
    old = "SELECT run_id FROM invocations WHERE started_at < ?"
    db.execute(f"DELETE FROM runs WHERE run_id IN ({old})", (cut,))
    db.execute(f"DELETE FROM invocations WHERE run_id IN ({old})", (cut,))


def _insert(db, runs: list) -> None:
    inv = ",".join("?" * len(INVOCATION_COLUMNS))
    row = ",".join("?" * len(RUN_COLUMNS))
    for invocation, rows in runs:
        # a run an older vx's replay appended has fewer columns: the new ones are empty
        invocation = list(invocation) + [None] * (len(INVOCATION_COLUMNS) - len(invocation))
        db.execute(
            f"INSERT OR IGNORE INTO invocations ({','.join(INVOCATION_COLUMNS)}) VALUES ({inv})",
            invocation,
        )
        db.executemany(f"INSERT INTO runs ({','.join(RUN_COLUMNS)}) VALUES ({row})", rows)


def fold_pending(cache_dir: str) -> None:
    """Fold the runs replays appended into the database (before reading it)."""
    if os.path.exists(os.path.join(cache_dir, PENDING)):
        record(cache_dir, None)


# ---------------------------------------------------------------- reading


def invocations(db, limit: int, failed_only: bool = False) -> list[dict]:
    """The latest runs, newest first, as dicts by column."""
    where = " WHERE exit_ok = 0" if failed_only else ""
    cur = db.execute(
        f"SELECT {','.join(INVOCATION_COLUMNS)} FROM invocations{where}"
        " ORDER BY started_at DESC, run_id DESC LIMIT ?",
        (limit,),
    )
    return [dict(zip(INVOCATION_COLUMNS, r)) for r in cur]


def find(db, prefix: str) -> list[dict]:
    """The runs whose id starts with `prefix`."""
    cur = db.execute(
        f"SELECT {','.join(INVOCATION_COLUMNS)} FROM invocations WHERE run_id LIKE ? ESCAPE '!'"
        " ORDER BY started_at DESC",
        (prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%",),
    )
    return [dict(zip(INVOCATION_COLUMNS, r)) for r in cur]


def task_rows(db, run: str) -> list[dict]:
    cur = db.execute(
        f"SELECT {','.join(RUN_COLUMNS)} FROM runs WHERE run_id = ? ORDER BY id", (run,)
    )
    return [dict(zip(RUN_COLUMNS, r)) for r in cur]


def flaky(db, rows: Sequence[dict]) -> set[tuple[str, str]]:
    """The (project, task) of `rows` whose key has both passed and failed on record (the partial
    index on failed rows answers the failed side). Only cached tasks are judged: an uncached
    task's key says nothing about its inputs."""
    keys = sorted(
        {
            r["hash"]
            for r in rows
            if r["hash"] and r["cache"] != "no-cache" and r["status"] in ("success", "failed")
        }
    )
    if not keys:
        return set()
    marks = ",".join("?" * len(keys))
    failed = {
        h
        for (h,) in db.execute(
            f"SELECT DISTINCT hash FROM runs WHERE status = 'failed' AND hash IN ({marks})", keys
        )
    }
    if not failed:
        return set()
    marks = ",".join("?" * len(failed))
    passed = {
        h
        for (h,) in db.execute(
            f"SELECT DISTINCT hash FROM runs WHERE status = 'success' AND hash IN ({marks})",
            sorted(failed),
        )
    }
    return {(r["project"], r["task"]) for r in rows if r["hash"] in passed}


def durations(db, tasks: Sequence[tuple[str, str]], window: int) -> dict[tuple[str, str], list]:
    """The durations (ms) of the last `window` runs of each (project, task) that executed and
    passed, newest first: one index step per task (`runs_executed`), never a scan of the table.
    Tasks with none are left out."""
    out = {}
    query = (
        "SELECT duration_ms FROM runs WHERE project = ? AND task = ? AND status = 'success'"
        " ORDER BY id DESC LIMIT ?"
    )
    for project, task in tasks:
        found = [d for (d,) in db.execute(query, (project, task, window))]
        if found:
            out[(project, task)] = found
    return out


def peaks(db, tasks: Sequence[tuple[str, str]], window: int) -> dict[tuple[str, str], int]:
    """The highest peak RSS (bytes) over the last `window` executed, passed runs of each
    (project, task) that measured one (`runs_executed`); tasks with none are left out."""
    out = {}
    query = (
        "SELECT MAX(peak_rss_bytes) FROM (SELECT peak_rss_bytes FROM runs WHERE project = ?"
        " AND task = ? AND status = 'success' ORDER BY id DESC LIMIT ?)"
    )
    for project, task in tasks:
        (peak,) = db.execute(query, (project, task, window)).fetchone()
        if peak:
            out[(project, task)] = int(peak)
    return out


def executed_tasks(db) -> list[tuple[str, str]]:
    """Every (project, task) with an executed, passed run on record, sorted (`runs_executed`)."""
    cur = db.execute(
        "SELECT DISTINCT project, task FROM runs WHERE status = 'success' ORDER BY 1, 2"
    )
    return [(project, task) for project, task in cur]


def flaky_on_record(db) -> list[tuple[str, str]]:
    """Every (project, task) the kept history calls flaky, sorted: a cached task whose key has
    both passed and failed (as `flaky` judges one run's rows), or a task that passed on a retry."""
    cur = db.execute(
        "SELECT DISTINCT project, task FROM runs WHERE status = 'success' AND ("
        " attempts > 1 OR (hash != '' AND cache != 'no-cache'"
        " AND hash IN (SELECT hash FROM runs WHERE status = 'failed')))"
        " ORDER BY project, task"
    )
    return [(project, task) for project, task in cur]


# ---------------------------------------------------------------- the record of one run

_FAILURES_FIRST = {"failed": 0, "skipped": 1, "success": 2, "cache-hit-remote": 3, "cache-hit": 4}


def invocation_record(r: dict) -> dict:
    """An `invocations` row (by column) as JSON prints it: the requested tasks a list, the two
    flags booleans."""
    import json

    out = dict(r)
    out["requested_tasks"] = json.loads(r["requested_tasks"])
    out["exit_ok"], out["replayed"] = bool(r["exit_ok"]), bool(r["replayed"])
    out["tags"] = json.loads(r["tags"]) if r.get("tags") else {}
    return out


def run_record(run: dict, rows: Sequence[dict], flaky: set[tuple[str, str]]) -> dict:
    """One run as `vx last --format json` and `vx run --format json` both print it (the shape
    is `schemas/run.json`): whether it passed, its invocation row, its task rows failures first
    (each with its `PKG#TASK` id and the flags as booleans) and the command that re-runs what
    failed. `run` and `rows` are by column, as the history keeps them; `flaky` the (project,
    task) the history calls flaky (`flaky` above)."""
    tasks = []
    for r in sorted(rows, key=lambda r: _FAILURES_FIRST.get(r["status"], 5)):
        task = {"id": f"{r['project']}#{r['task']}", **r}
        task["timed_out"], task["cached"] = bool(r["timed_out"]), bool(r["cached"])
        retried = r["status"] == "success" and r["attempts"] > 1  # passed on a retry
        task["restored"] = bool(r["restored"])
        task["flaky"] = (r["project"], r["task"]) in flaky or retried
        tasks.append(task)
    redo = [t["id"] for t in tasks if t["status"] in ("failed", "skipped")]
    return {
        "ok": bool(run["exit_ok"]),
        "run": invocation_record(run),
        "tasks": tasks,
        "rerun": shell_line(["vx", "run", *redo]) if redo else None,
    }


# ---------------------------------------------------------------- a run's rows


class RunFacts:
    """What the history keeps of a run beside its summary, read off the prepared run by the CLI:
    the command line as a shell would read it, where it ran, the tasks it was asked for, its
    cache policy (`policy_text`), its concurrency, the workspace root, the cache dir, whether
    git saw the workspace dirty as it began (None without git) and the workspace's `schedule`.
    A plain class, not a Struct: a replay imports this module, and msgspec would cost it."""

    __slots__ = (
        "command",
        "cwd",
        "names",
        "policy",
        "concurrency",
        "root",
        "cache_dir",
        "dirty",
        "schedule",
        "tags",
    )

    def __init__(
        self,
        *,
        command: str,
        cwd: str,
        names: Sequence[str],
        policy: str,
        concurrency: int,
        root: str,
        cache_dir: str,
        dirty: int | None,
        schedule: ScheduleConfig,
        tags: str | None = None,
    ) -> None:
        self.command, self.cwd, self.names, self.policy = command, cwd, names, policy
        self.concurrency, self.root, self.cache_dir = concurrency, root, cache_dir
        self.dirty, self.schedule, self.tags = dirty, schedule, tags


def policy_text(policy: CachePolicy, axes: CacheAxes | None) -> str:
    """`lR,lW,rR,rW` with the letters of what is off left out (`lR,lW` with no remote); `axes`
    are the remote layer's, None without one."""
    parts = ["lR"] if policy.read else []
    parts += ["lW"] if policy.write else []
    parts += ["rR"] if axes is not None and axes.remote_read else []
    parts += ["rW"] if axes is not None and axes.remote_write else []
    return ",".join(parts)


def history_status(r: TaskResult) -> str:
    """The reference's status words: a hit is `cache-hit` (`cache-hit-remote` from a remote)."""
    from vx.model import CacheStatus, Status

    if r.status is Status.SUCCESS and r.cache in (CacheStatus.LOCAL, CacheStatus.UP_TO_DATE):
        return "cache-hit"
    if r.status is Status.SUCCESS and r.cache is CacheStatus.REMOTE:
        return "cache-hit-remote"
    return r.status.value


def run_rows(
    facts: RunFacts, summary: RunSummary, logs: Mapping[TaskId, str]
) -> tuple[list, list[list]]:
    """The run's invocation row and task rows, in column order, as the history keeps them and
    `vx run --format json` prints them (as `vx last` would): no row for an aborted task (groups
    are not in the summary). `logs` are the kept failure logs."""
    from vx.model import CacheStatus, Status

    restored = (CacheStatus.LOCAL, CacheStatus.REMOTE)
    rows = [
        [
            summary.run_id, r.id.package, r.id.task, r.key or "", history_status(r),
            r.cache.value, r.exit_code, r.duration_ms, r.cpu_ms, r.peak_rss_bytes, r.attempts,
            int(r.timed_out), int(r.saved), int(r.cache in restored),
            str(r.blocked_by) if r.blocked_by is not None else None, r.reason,
            len(r.violations), logs.get(r.id),
        ]
        for r in summary.results
        if r.status is not Status.ABORTED
    ]  # fmt: skip
    return invocation_row(facts, summary, len(rows)), rows


def invocation_row(facts: RunFacts, summary: RunSummary, tasks: int) -> list:
    """The run's `invocations` row in column order (`INVOCATION_COLUMNS`); `tasks` is the
    number of its task rows."""
    import json

    from vx import __version__
    from vx.model import CacheStatus, Status

    count = {c: sum(1 for r in summary.results if r.cache is c) for c in CacheStatus}
    local, remote = count[CacheStatus.LOCAL], count[CacheStatus.REMOTE]
    fresh = count[CacheStatus.UP_TO_DATE]
    started, ended, code = summary.started_at, summary.ended_at, summary.exit_code
    uname = os.uname()
    return [
        summary.run_id, facts.command, facts.cwd, json.dumps(list(facts.names)), facts.policy,
        facts.concurrency, started, ended, (ended - started) * 1000, tasks,
        sum(1 for r in summary.results if r.status is Status.FAILED), local + remote + fresh,
        local, remote, fresh, code, int(code == 0), 0,  # not replayed
        uname.nodename, uname.sysname.lower(), uname.machine, __version__,
        *git_head(facts.root), facts.dirty, ci_provider(os.environ), facts.tags,
    ]  # fmt: skip


def record_run(facts: RunFacts, summary: RunSummary, invocation: list, rows: list[list]) -> bool:
    """Keep the run's rows (`run_rows`) in the history, read by `vx last`: nothing for a run a
    signal stopped. Whether they were kept; a failure here never fails the run."""
    import sqlite3

    if summary.interrupted:
        return False
    try:
        record(facts.cache_dir, invocation, rows)
    except (OSError, sqlite3.Error):
        return False
    return True


def replay_history(facts: RunFacts, summary: RunSummary) -> list:
    """What a replay of this run records (`vx.fastpath.replay`): the invocation's fixed fields
    (command, cwd, requested tasks, cache policy, concurrency, host) and each task's
    (project, task, key); the replay fills in its own id, times and counts."""
    import json

    from vx import __version__

    uname = os.uname()
    fixed = [
        facts.command,
        facts.cwd,
        json.dumps(list(facts.names)),
        facts.policy,
        facts.concurrency,
        [
            uname.nodename,
            uname.sysname.lower(),
            uname.machine,
            __version__,
            facts.dirty,
            facts.tags,
        ],
    ]
    return [fixed, [[r.id.package, r.id.task, r.key or ""] for r in summary.results]]


# ---------------------------------------------------------------- failure logs

LOGS = "logs"
KEEP_LOGS = 50  # failure logs kept; the oldest go as new ones come
FAILURE_LOG_HALF = 1 << 20  # a kept failure log holds its first and last MiB


_HEX = frozenset("0123456789abcdef")


# A named cache dir may be any directory of the user's (`cacheDir` is the repository's to set):
# the pruning removes only the logs vx names, `<run id>-<task>.log`.
def _named_by_vx(name: str) -> bool:
    head = name[:36]
    return (
        len(name) > 41
        and name.endswith(".log")
        and name[36] == "-"
        and all(c == "-" if i in (8, 13, 18, 23) else c in _HEX for i, c in enumerate(head))
    )


def keep_log(cache_dir: str, run: str, task_id: str, data: bytes) -> str:
    """Write a failed task's output to `<cache>/logs/<run>-<task>.log` and prune the oldest past
    KEEP_LOGS; the path written. The caller bounds `data`. Raises OSError."""
    directory = os.path.join(cache_dir, LOGS)
    os.makedirs(directory, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in task_id)
    path = os.path.join(directory, f"{run}-{safe}.log")
    with open(path, "wb") as f:
        f.write(data)
    with os.scandir(directory) as entries:
        logs = sorted(
            (e.name for e in entries if _named_by_vx(e.name)), reverse=True
        )  # names start with the run id, which sorts by time
    for name in logs[KEEP_LOGS:]:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass
    return path


def keep_failure_logs(facts: RunFacts, summary: RunSummary) -> dict[TaskId, str]:
    """Each failed task's whole output (bounded: the first and last MiB) in the cache's `logs/`;
    where each went. A failure to write one is left out, never a failed run."""
    from vx.model import Status
    from vx.store.local import bound_log

    if summary.interrupted:
        return {}
    out: dict[TaskId, str] = {}
    for r in summary.results:
        if r.status is Status.FAILED and r.log:
            data = b"".join(c.data for c in bound_log(r.log, FAILURE_LOG_HALF))
            try:
                out[r.id] = keep_log(facts.cache_dir, summary.run_id, str(r.id), data)
            except OSError:
                pass
    return out
