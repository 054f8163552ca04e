"""GitHub Actions reporting (vx.report.github): the job summary and its 1 MiB cap, the check run
against a loopback server that holds each request to GitHub's documented shape, and the cache
scope a run on Actions gets."""

import json

import pytest
from fakes import GitHubApi

from vx.model import CacheStatus, RunSummary, Status, TaskId, TaskResult
from vx.report import github

ACTIONS = {"GITHUB_ACTIONS": "true"}


def result(name, status=Status.SUCCESS, cache=CacheStatus.MISS):
    package, _, task = name.partition("#")
    return TaskResult(TaskId(package, task), status, cache, key="k" * 16, duration_ms=1200.0)


def run(*results, code=0):
    return RunSummary("0190-run", tuple(results), 1_700_000_000.0, 1_700_000_003.5, code)


@pytest.fixture
def api():
    server = GitHubApi()
    yield server
    server.close()


def env_for(api, **extra):
    return {
        **ACTIONS,
        "GITHUB_TOKEN": "ghs_token_value",
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_SHA": "a" * 40,
        "GITHUB_API_URL": api.url,
        **extra,
    }


@pytest.mark.feature("PL-10")
def test_a_check_run_is_created_as_github_documents_it(api):
    """Every run remembered and explained: with GITHUB_TOKEN on Actions a run becomes a
    completed check run — POST /repos/{owner}/{repo}/check-runs with GitHub's Accept, a bearer
    token and the API version, and the body fields the API documents."""
    pauses = []
    summary = run(result("web#build"), result("web#test", Status.FAILED), code=1)
    assert github.post_check_run(summary, env_for(api), "vx ci", pause=pauses.append) is None
    (req,) = api.requests
    assert req["method"] == "POST" and req["path"] == "/api/v3/repos/octo/repo/check-runs"
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["authorization"] == "Bearer ghs_token_value"
    assert headers["x-github-api-version"] == "2022-11-28"
    body = req["body"]
    assert (body["name"], body["head_sha"], body["status"], body["conclusion"]) == (
        "vx ci",
        "a" * 40,
        "completed",
        "failure",
    )
    assert set(body["output"]) == {"title", "summary", "text"}
    assert body["output"]["title"] == "vx: 1 failed: web#test"
    assert "| `web#test` | failed | miss | 1.20s |" in body["output"]["text"]
    assert body["output"]["summary"].startswith("**vx run: failed** · 2 tasks")
    assert pauses == []


@pytest.mark.feature("PL-10")
def test_a_server_error_is_asked_again_and_a_refusal_is_not():
    """Every run remembered and explained: a 5xx is retried (bounded), a 4xx is final and
    comes back as a warning naming what the job lacks; neither fails the build."""
    flaky = GitHubApi([502])
    try:
        pauses = []
        assert (
            github.post_check_run(run(result("a#b")), env_for(flaky), pause=pauses.append) is None
        )
        assert len(flaky.requests) == 2 and pauses == [github.PAUSE_S]
        assert flaky.requests[1]["body"]["conclusion"] == "success"
    finally:
        flaky.close()
    down = GitHubApi([500, 503, 500, 500])
    try:
        warning = github.post_check_run(run(result("a#b")), env_for(down), pause=lambda s: None)
        assert len(down.requests) == github.ATTEMPTS and "answered 500" in warning
    finally:
        down.close()
    refused = GitHubApi([403])
    try:
        warning = github.post_check_run(run(result("a#b")), env_for(refused), pause=lambda s: None)
        assert len(refused.requests) == 1
        assert "answered 403" in warning and "permissions: checks: write" in warning
    finally:
        refused.close()


@pytest.mark.feature("PL-10")
def test_check_run_text_is_cut_at_the_api_limit(api):
    """Every run remembered and explained: a check run's text stays within 65,535 characters."""
    many = [result(f"p{i:05}#build-with-a-rather-long-name") for i in range(2000)]
    github.post_check_run(run(*many), env_for(api), pause=lambda s: None)
    text = api.requests[0]["body"]["output"]["text"]
    assert len(text) <= github.TEXT_CAP and text.endswith("cut at GitHub's limit")


@pytest.mark.feature("PL-10")
def test_off_actions_nothing_is_written_or_sent(api, tmp_path):
    """Every run remembered and explained: without GITHUB_ACTIONS=true the integration declines."""
    summary_file = tmp_path / "summary.md"
    env = {k: v for k, v in env_for(api).items() if k != "GITHUB_ACTIONS"}
    env["GITHUB_STEP_SUMMARY"] = str(summary_file)
    assert github.post_check_run(run(result("a#b")), env) is None
    assert github.write_job_summary(run(result("a#b")), env) is None
    assert api.requests == [] and not summary_file.exists()


@pytest.mark.feature("PL-10")
def test_the_job_summary_is_appended_and_capped_at_one_mebibyte(tmp_path):
    """Every run remembered and explained: the table is appended to $GITHUB_STEP_SUMMARY after
    what the step wrote, and rows past GitHub's 1 MiB are cut and counted."""
    target = tmp_path / "step.md"
    target.write_text("earlier step output\n")
    env = {**ACTIONS, "GITHUB_STEP_SUMMARY": str(target)}
    assert github.write_job_summary(run(result("web#build")), env, title="CI build") is None
    text = target.read_text()
    assert text.startswith("earlier step output\n### CI build\n\n**vx run: ok** · 1 tasks")
    assert "| `web#build` | success | miss | 1.20s |" in text

    many = run(*(result(f"package-{i:06}#build") for i in range(30000)))
    target.write_text("x" * 1000)
    assert github.write_job_summary(many, env) is None
    data = target.read_bytes()
    assert len(data) <= github.SUMMARY_CAP
    left = int(data.decode().rsplit("… and ", 1)[1].split()[0])
    assert 0 < left < 30000 and data.decode().count("| `package-") == 30000 - left


@pytest.mark.feature("PL-10")
@pytest.mark.parametrize(
    "env, event, scope",
    [
        (
            {
                "GITHUB_REF": "refs/heads/main",
                "GITHUB_REF_NAME": "main",
                "GITHUB_EVENT_NAME": "push",
            },
            "main",
            "trusted",
        ),
        (
            {
                "GITHUB_REF": "refs/heads/main",
                "GITHUB_REF_NAME": "main",
                "GITHUB_EVENT_NAME": "issue_comment",
            },
            "main",
            "ref-main",
        ),
        ({"GITHUB_REF": "refs/heads/dev", "GITHUB_REF_NAME": "dev"}, "main", "ref-dev"),
        (
            {"GITHUB_REF": "refs/pull/42/merge", "GITHUB_EVENT_NAME": "pull_request"},
            "main",
            "pr-42",
        ),
        (
            {"GITHUB_REF": "refs/heads/main", "GITHUB_EVENT_NAME": "pull_request_target"},
            "main",
            "pr-7",
        ),
        ({"GITHUB_REF": "refs/tags/v1.0", "GITHUB_REF_NAME": "v1.0"}, "main", "ref-v1.0"),
        ({"GITHUB_REF": "refs/heads/main", "GITHUB_REF_NAME": "main"}, None, "ref-main"),
        ({"GITHUB_REF": "refs/heads/a b", "GITHUB_REF_NAME": "feat/a b"}, "main", "ref-feat/a_b"),
    ],
)
def test_the_cache_scope_follows_the_ref(tmp_path, env, event, scope):
    """Every run remembered and explained: trusted on a push to the default branch (not on an
    event a pull request can start there, such as a comment), pr-<n> on a pull request
    (pull_request_target too: it builds the PR's head), ref-<name> otherwise; without
    the event payload no branch is taken for the default one."""
    full = {**ACTIONS, **env}
    if event is not None:
        payload = tmp_path / "event.json"
        body = {"repository": {"default_branch": event}}
        if env.get("GITHUB_EVENT_NAME", "").startswith("pull_request"):
            body["pull_request"] = {"number": 7}
        payload.write_text(json.dumps(body))
        full["GITHUB_EVENT_PATH"] = str(payload)
    assert github.cache_scope(full) == scope
    assert github.cache_scope(env) is None  # off Actions


@pytest.mark.feature("PL-10")
def test_options_are_checked_and_the_scope_fills_only_an_unset_one(api, tmp_path):
    """Every run remembered and explained: the integration's options are refused by name when
    wrong; its scope goes into a workspace config that sets none; a finished run reports both."""
    assert github.options_of({"title": "CI"}).title == "CI"
    assert (
        github.options_of({"checks": "yes"}) == 'option `checks` must be true or false, got "yes"'
    )
    assert github.options_of({"check": True}).startswith("unknown option `check` (known: ")
    env = {**ACTIONS, "GITHUB_REF": "refs/pull/3/merge"}
    options = github.options_of({})
    assert github.scoped({"concurrency": 2}, env, options) == {
        "concurrency": 2,
        "cacheScope": "pr-3",
    }
    assert github.scoped({"cacheScope": "read-only"}, env, options) == {"cacheScope": "read-only"}
    off = github.options_of({"cacheScope": False})
    assert github.scoped({}, env, off) == {}
    target = tmp_path / "step.md"
    full = env_for(api, GITHUB_STEP_SUMMARY=str(target))
    assert (
        github.finished(run(result("a#b")), full, github.options_of({"checkName": "build"})) == []
    )
    assert api.requests[0]["body"]["name"] == "build" and "| `a#b` |" in target.read_text()
