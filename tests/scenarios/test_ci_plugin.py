"""`vx.plugins.ci` declared in a real workspace: `vx run` on (an environment that is) GitHub
Actions writes the job summary, creates the check run on a loopback API that checks GitHub's
request shape, and takes its cache scope from the pull request's ref, which a real
turborepo-remote-cache server sees in the keys it is sent. Off Actions it does nothing."""

import json

import pytest
from fakes import GitHubApi
from support.remote_servers import shop_files
from support.workspace import npm_workspace

FAIL = "node -e \"console.error('broken');process.exit(2)\""


@pytest.fixture
def api():
    server = GitHubApi([503])  # the first attempt meets a server error
    yield server
    server.close()


def actions_env(tmp_path, api, **extra):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}, "number": 9}))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md"),
        "GITHUB_TOKEN": "ghs_plugin_token",
        "GITHUB_REPOSITORY": "octo/shop",
        "GITHUB_SHA": "b" * 40,
        "GITHUB_API_URL": api.url,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REF": "refs/pull/9/merge",
        "GITHUB_REF_NAME": "9/merge",
        **extra,
    }


def declare(files, remote=None, **options):
    files["vx.workspace.json"] = {
        **({"remoteCache": remote} if remote else {}),
        "plugins": [{"name": "vx.plugins.ci", "options": options}],
    }
    return files


@pytest.mark.feature("PL-10")
def test_a_run_on_actions_writes_its_summary_and_check_run(repo, tmp_path, api):
    """Every run remembered and explained: declared, the CI plugin appends the run's table to
    the step summary and creates a completed check run (after one 503) naming the failure."""
    files = npm_workspace(
        {
            "web": {
                "tasks": {
                    "build": {"exec": {"command": "node -e 1"}},
                    "test": {"exec": {"command": FAIL}},
                }
            }
        }
    )
    repo.write(declare(files, title="Shop CI", checkName="vx / shop")).commit()
    res = repo.vx("run", "build", "test", "--all", env=actions_env(tmp_path, api))
    assert res.code == 1, res.err
    summary = (tmp_path / "step-summary.md").read_text()
    assert summary.startswith("### Shop CI\n\n**vx run: failed** · 2 tasks")
    assert "| `web#test` | failed |" in summary and "| `web#build` | success |" in summary
    assert len(api.requests) == 2  # the 503, then the check run
    req = api.requests[1]
    assert req["path"] == "/api/v3/repos/octo/shop/check-runs"
    assert req["headers"]["Authorization"] == "Bearer ghs_plugin_token"
    body = req["body"]
    assert (body["name"], body["head_sha"], body["status"], body["conclusion"]) == (
        "vx / shop",
        "b" * 40,
        "completed",
        "failure",
    )
    assert body["output"]["title"] == "Shop CI: 1 failed: web#test"
    assert "warning" not in res.err


def uploaded(turbo_server, team: str) -> set[str]:
    """The keys of the artifacts the team's runs uploaded to the turbo server."""
    return {
        r.split("/v8/artifacts/")[1].split("?")[0]
        for r in turbo_server.requests("PUT")
        if team in r
    }


@pytest.mark.feature("PL-10", "RC-06")
def test_on_a_pull_request_the_remote_sees_the_scope_keys(repo, tmp_path, api, turbo_server, team):
    """Every run remembered and explained: the plugin's config stage scopes a pull request's
    run (`pr-9`), so what it uploads is under the scope's keys, never the task keys."""
    repo.write(declare(shop_files(None), {"turbo": {"team": team}}, checks=False)).commit()
    env = {**actions_env(tmp_path, api), **turbo_server.env(team), "CI": "1"}
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    task_keys = {t["hash"] for t in res.summary["tasks"]}
    sent = uploaded(turbo_server, team)
    assert len(sent) == 4 and not sent & task_keys
    assert api.requests == []  # checks: false


@pytest.mark.feature("PL-10")
def test_off_actions_the_plugin_declines(repo, tmp_path, api):
    """Every run remembered and explained: without GITHUB_ACTIONS=true nothing is written or sent."""
    files = npm_workspace({"web": {"tasks": {"build": {"exec": {"command": "node -e 1"}}}}})
    repo.write(declare(files)).commit()
    env = actions_env(tmp_path, api, GITHUB_ACTIONS="")
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    assert not (tmp_path / "step-summary.md").exists() and api.requests == []


@pytest.mark.feature("PL-10")
def test_a_bad_option_is_refused_naming_the_plugin(repo, tmp_path, api):
    """Every run remembered and explained: a wrong option stops the run before anything runs."""
    files = npm_workspace({"web": {"tasks": {"build": {"exec": {"command": "node -e 1"}}}}})
    repo.write(declare(files, checks="yes")).commit()
    res = repo.vx("run", "build", "--all", env=actions_env(tmp_path, api))
    assert res.code == 2
    assert (
        "vx.plugins.ci" in res.err and 'option `checks` must be true or false, got "yes"' in res.err
    )
    assert "Traceback" not in res.err


@pytest.mark.feature("PL-10", "RC-06")
@pytest.mark.parametrize("event_name", ["issue_comment", "workflow_run"])
def test_events_a_pull_request_starts_are_not_trusted(
    repo, tmp_path, api, turbo_server, team, event_name
):
    """Every run remembered and explained: a comment on a pull request (`/ci`) and a
    workflow_run after one run with GITHUB_REF on the default branch, and such a workflow
    commonly checks out the pull request's head; the plugin took the ref alone and scoped the
    run `trusted`, so a fork's code uploaded under the task keys the default branch reads."""
    repo.write(declare(shop_files(None), {"turbo": {"team": team}}, checks=False)).commit()
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}, "issue": {"number": 9}}))
    env = {
        **actions_env(tmp_path, api),
        **turbo_server.env(team),
        "CI": "1",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
    }
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    task_keys = {t["hash"] for t in res.summary["tasks"]}
    sent = uploaded(turbo_server, team)
    assert len(sent) == 4 and not sent & task_keys

    push = {**env, "GITHUB_EVENT_NAME": "push"}  # a push to the default branch is trusted
    res = repo.vx("run", "build", "--all", "--force", env=push)
    assert res.code == 0, res.err
    sent = uploaded(turbo_server, team)
    assert task_keys <= sent
