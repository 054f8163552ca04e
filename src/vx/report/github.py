"""GitHub Actions: a run's job summary, its check run, and the cache scope a run there gets.

Off Actions (`GITHUB_ACTIONS` is not `true`) every part declines and does nothing. On Actions:

- The job summary is the run's markdown table (`vx.report.summary.markdown`) under a title,
  appended to `$GITHUB_STEP_SUMMARY`. GitHub shows at most 1 MiB of one step's summary, so the
  rows that would pass that (counting what the step wrote before) are cut and counted instead.
- With `GITHUB_TOKEN`, a completed check run is created on `GITHUB_SHA` through the REST API at
  `GITHUB_API_URL` (GitHub Enterprise Server's own, when set): the counts as its summary and the
  table as its text, each cut to the API's 65,535 characters. A 5xx, a 429 or a dropped
  connection is asked again, at most `ATTEMPTS` times in all with a growing pause; any other
  answer is final. Nothing here fails a build: a problem comes back as a warning to print.
- The cache scope (`cacheScope`) of a run: `trusted` on the default branch, `pr-<n>` on a pull
  request, `ref-<name>` on any other ref.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Callable, Mapping

from msgspec import Struct

from vx import __version__
from vx.model import RunSummary, Status
from vx.report.summary import markdown

SUMMARY_CAP = 1 << 20  # bytes of one step's summary GitHub shows
TEXT_CAP = 65535  # characters of a check run's output.summary and output.text
ATTEMPTS = 3
PAUSE_S = 1.0  # before the second attempt; doubled before each one after
TIMEOUT_S = 10.0
API_VERSION = "2022-11-28"
DEFAULT_TITLE = "vx"
DEFAULT_CHECK = "vx"
SCOPE_NAME = re.compile(r"[^A-Za-z0-9._\-/@]")
SCOPE_MOST = 128


def on_actions(env: Mapping[str, str]) -> bool:
    return env.get("GITHUB_ACTIONS") == "true"


# ---------------------------------------------------------------- the job summary


def job_summary(summary: RunSummary, title: str = DEFAULT_TITLE, room: int = SUMMARY_CAP) -> str:
    """The run's table under `### title`, in at most `room` bytes: rows past it are cut, the
    header line kept, and a last line says how many were left out."""
    text = f"### {title}\n\n" + markdown(summary, summary.interrupted)
    if len(text.encode()) <= room:
        return text
    lines = text.splitlines(keepends=True)
    head, rows = lines[: _table_start(lines) + 2], lines[_table_start(lines) + 2 :]
    kept: list[str] = []
    used = sum(len(line.encode()) for line in head)
    for i, row in enumerate(rows):
        note = _cut_note(len(rows) - i)
        if used + len(row.encode()) + len(note.encode()) > room:
            return "".join(head + kept) + note
        kept.append(row)
        used += len(row.encode())
    return "".join(head + kept)


def _table_start(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith("| Task |"))


def _cut_note(left: int) -> str:
    return f"\n… and {left} more tasks, cut at GitHub's 1 MiB limit on a step summary\n"


def write_job_summary(
    summary: RunSummary, env: Mapping[str, str], title: str = DEFAULT_TITLE, path: str | None = None
) -> str | None:
    """Append the job summary to `path` (default `$GITHUB_STEP_SUMMARY`); a warning, or None."""
    target = path or env.get("GITHUB_STEP_SUMMARY")
    if not on_actions(env) or not target:
        return None
    try:
        written = os.path.getsize(target)
    except OSError:
        written = 0
    room = SUMMARY_CAP - written
    if room <= len(_cut_note(0).encode()) + 64:
        return (
            f"the step summary {target} is already at GitHub's 1 MiB limit; vx's table is left out"
        )
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(job_summary(summary, title, room))
    except OSError as exc:
        return f"cannot write the job summary to {target}: {exc.strerror or exc}"
    return None


# ---------------------------------------------------------------- the check run


def check_run(summary: RunSummary, name: str, sha: str, title: str = DEFAULT_TITLE) -> dict:
    """The body of `POST /repos/{owner}/{repo}/check-runs` for a finished run."""
    table = markdown(summary, summary.interrupted)
    counts, _, rows = table.partition("\n\n")
    if summary.interrupted:
        conclusion = "cancelled"
    elif summary.exit_code == 0:
        conclusion = "success"
    else:
        conclusion = "failure"
    failed = [str(r.id) for r in summary.results if r.status is Status.FAILED]
    head = f"{len(failed)} failed: {', '.join(failed)}" if failed else counts.strip("*")
    return {
        "name": name,
        "head_sha": sha,
        "status": "completed",
        "conclusion": conclusion,
        "started_at": _stamp(summary.started_at),
        "completed_at": _stamp(summary.ended_at),
        "output": {
            "title": _cut(f"{title}: {head}", 255),
            "summary": _cut(counts, TEXT_CAP),
            "text": _cut(rows, TEXT_CAP),
        },
    }


def _stamp(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def _cut(text: str, most: int) -> str:
    if len(text) <= most:
        return text
    note = "\n… cut at GitHub's limit"
    return text[: most - len(note)] + note


def post_check_run(
    summary: RunSummary,
    env: Mapping[str, str],
    name: str = DEFAULT_CHECK,
    title: str = DEFAULT_TITLE,
    pause: Callable[[float], None] = time.sleep,
) -> str | None:
    """Create the run's check run when `GITHUB_TOKEN` is set on Actions; a warning, or None."""
    token, repo, sha = env.get("GITHUB_TOKEN"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_SHA")
    if not on_actions(env) or not token:
        return None
    if not repo or not sha:
        return "no check run: GITHUB_REPOSITORY and GITHUB_SHA must be set"
    api = (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
    body = json.dumps(check_run(summary, name, sha, title)).encode()
    problem = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            pause(PAUSE_S * 2 ** (attempt - 1))
        status, problem = _post(f"{api}/repos/{repo}/check-runs", token, body)
        if status is not None and 200 <= status < 300:
            return None
        if status is not None and status < 500 and status != 429:
            break  # the answer is final: asking again gets the same one
    hint = " (the job needs `permissions: checks: write`)" if "403" in problem else ""
    return f"no check run: {problem}{hint}"


def _post(url: str, token: str, body: bytes) -> tuple[int | None, str]:
    """(HTTP status or None when no answer came, what went wrong)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": API_VERSION,
            "Content-Type": "application/json",
            "User-Agent": f"vx/{__version__}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            return reply.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, f"{url} answered {exc.code} {exc.reason}"
    except (OSError, ValueError) as exc:  # refused, reset, timed out, a malformed URL
        return None, f"{url}: {getattr(exc, 'reason', None) or exc}"


# ---------------------------------------------------------------- the cache scope


# The events whose run on the default branch builds that branch's own code. Others put
# GITHUB_REF on the default branch too (issue_comment, workflow_run, …), and their workflows
# often check out a pull request's head: never trusted.
TRUSTED_EVENTS = frozenset({"push", "schedule", "workflow_dispatch"})


def cache_scope(env: Mapping[str, str]) -> str | None:
    """`trusted` on a push (a schedule, a dispatch) to the repository's default branch,
    `pr-<n>` on a pull request, `ref-<name>` otherwise; None off Actions. The default branch is
    read from the event's payload (`GITHUB_EVENT_PATH`): without it no ref is taken for the
    default one."""
    if not on_actions(env):
        return None
    ref, event = env.get("GITHUB_REF", ""), _event(env)
    pr = re.fullmatch(r"refs/pull/(\d+)/(?:merge|head)", ref)
    if pr:
        return f"pr-{pr.group(1)}"
    if env.get("GITHUB_EVENT_NAME", "").startswith("pull_request"):
        number = (event.get("pull_request") or {}).get("number") or event.get("number")
        if isinstance(number, int):
            return f"pr-{number}"
    default = (event.get("repository") or {}).get("default_branch")
    own = env.get("GITHUB_EVENT_NAME") in TRUSTED_EVENTS
    if own and isinstance(default, str) and default and ref == f"refs/heads/{default}":
        return "trusted"
    name = env.get("GITHUB_REF_NAME") or ref.removeprefix("refs/heads/").removeprefix("refs/")
    return ("ref-" + SCOPE_NAME.sub("_", name or "unknown"))[:SCOPE_MOST]


def _event(env: Mapping[str, str]) -> dict:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            event = json.load(fh)
    except (OSError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}


# ---------------------------------------------------------------- the integration


class GitHubOptions(Struct, frozen=True):
    """What a workspace asks of the integration (`summaryFile`, `title`, `checks`, `checkName`,
    `cacheScope`), each with its default."""

    summary_file: str | None = None  # default: $GITHUB_STEP_SUMMARY
    title: str = DEFAULT_TITLE
    checks: bool = True  # a check run, when GITHUB_TOKEN is set
    check_name: str = DEFAULT_CHECK
    cache_scope: bool = True  # the run's cacheScope from its ref


_OPTIONS = {
    "summaryFile": ("summary_file", str),
    "title": ("title", str),
    "checks": ("checks", bool),
    "checkName": ("check_name", str),
    "cacheScope": ("cache_scope", bool),
}


def options_of(raw: Mapping[str, object]) -> GitHubOptions | str:
    """The options, or what is wrong with them."""
    fields: dict[str, object] = {}
    for name, value in raw.items():
        if name not in _OPTIONS:
            return f"unknown option `{name}` (known: {', '.join(_OPTIONS)})"
        field, kind = _OPTIONS[name]
        if not isinstance(value, kind) or (kind is str and not value):
            what = "a non-empty string" if kind is str else "true or false"
            return f"option `{name}` must be {what}, got {json.dumps(value)}"
        fields[field] = value
    return GitHubOptions(**fields)  # type: ignore[arg-type]


def scoped(ws: dict, env: Mapping[str, str], options: GitHubOptions) -> dict:
    """The workspace config data with the ref's `cacheScope` when none is set (on Actions)."""
    scope = cache_scope(env) if options.cache_scope else None
    if scope is None or "cacheScope" in ws:
        return ws
    return {**ws, "cacheScope": scope}


def finished(summary: RunSummary, env: Mapping[str, str], options: GitHubOptions) -> list[str]:
    """Report a finished run to GitHub (off Actions: nothing); the warnings to print."""
    warnings = [write_job_summary(summary, env, options.title, options.summary_file)]
    if options.checks:
        warnings.append(post_check_run(summary, env, options.check_name, options.title))
    return [w for w in warnings if w]
