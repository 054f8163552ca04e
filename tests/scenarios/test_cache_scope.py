"""`cacheScope` against a real turborepo-remote-cache server: a pull request's scope writes under
keys of its own and reads its own, then the trusted ones; trusted runs never see a scope's
uploads; read-only writes nothing. Checkouts are separate clones of one repository."""

import json

import pytest
from support.remote_servers import clone, shop_files


def put_keys(server, team) -> set[str]:
    return {
        r.split("/v8/artifacts/")[1].split("?")[0]
        for r in server.requests("PUT")
        if team in r and "/v8/artifacts/" in r
    }


@pytest.mark.feature("RC-06")
def test_a_scope_writes_its_own_keys_and_reads_the_trusted_ones(repo, tmp_path, turbo_server, team):
    """Every run remembered and explained: the cache scope a CI run gets — a pull request's
    uploads serve that pull request only, the default branch's serve everyone."""
    repo.write(shop_files({"turbo": {"team": team}})).commit()
    env = {**turbo_server.env(team), "CI": "1"}

    pr = repo.vx("run", "build", "--all", env={**env, "VX_CACHE_SCOPE": "pr-5"})
    assert pr.code == 0, pr.err
    task_keys = {t["hash"] for t in pr.summary["tasks"]}
    scoped = put_keys(turbo_server, team)
    assert len(scoped) == 4 and not scoped & task_keys  # under the scope's keys only

    same_pr = clone(repo, tmp_path / "same-pr")
    again = same_pr.vx("run", "build", "--all", env={**env, "VX_CACHE_SCOPE": "pr-5"})
    assert set(again.statuses().values()) == {("success", "remote")}, again.err

    trusted = clone(repo, tmp_path / "main")
    main = trusted.vx("run", "build", "--all", env=env)  # on CI, no scope: trusted
    assert set(main.statuses().values()) == {("success", "miss")}, main.err
    assert put_keys(turbo_server, team) - scoped == task_keys

    other_pr = clone(repo, tmp_path / "other-pr")
    puts = len(turbo_server.requests("PUT"))
    other = other_pr.vx("run", "build", "--all", env={**env, "VX_CACHE_SCOPE": "pr-6"})
    assert set(other.statuses().values()) == {("success", "remote")}, other.err
    assert len(turbo_server.requests("PUT")) == puts


@pytest.mark.feature("RC-06")
def test_read_only_writes_nothing_even_on_ci(repo, turbo_server, team):
    """Every run remembered and explained: `cacheScope: "read-only"` keeps a CI run's results
    off the server."""
    files = shop_files({"turbo": {"team": team}})
    files["vx.workspace.json"] = {
        "remoteCache": {"turbo": {"team": team}},
        "cacheScope": "read-only",
    }
    repo.write(files).commit()
    res = repo.vx("run", "build", "--all", env={**turbo_server.env(team), "CI": "1"})
    assert res.code == 0, res.err
    assert put_keys(turbo_server, team) == set()


@pytest.mark.feature("RC-06")
def test_a_bad_scope_is_refused_with_where_it_came_from(repo):
    """Every run remembered and explained: a scope name outside [A-Za-z0-9._-/@] or past 128
    characters is refused, from the workspace file or from VX_CACHE_SCOPE."""
    files = shop_files(None)
    files["vx.workspace.json"] = {"cacheScope": "pr 5"}
    repo.write(files).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "`cacheScope` 'pr 5' holds ' '" in res.err and "vx.workspace.json" in res.err
    repo.write({"vx.workspace.json": json.dumps({"cacheScope": "trusted"})}).commit()
    res = repo.vx("run", "build", "--all", env={"VX_CACHE_SCOPE": "x" * 129})
    assert res.code == 2 and "VX_CACHE_SCOPE is longer than 128 characters" in res.err
    assert "Traceback" not in res.err
