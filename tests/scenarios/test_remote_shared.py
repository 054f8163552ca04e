"""Two checkouts share one real turborepo-remote-cache server: what one built, the other restores
byte for byte (RC-02, RC-03, RC-13), and the bytes on the server are the local artifact's."""

import pytest
from support.remote_servers import assert_secret_kept, clone, outputs, shop_files, strays


def two_clones(repo, tmp_path, server, team, **remote):
    repo.write(shop_files({"turbo": {"team": team}, **remote})).commit()
    return repo, clone(repo, tmp_path / "b")


def test_clone_b_restores_everything_clone_a_built(repo, tmp_path, turbo_server, team):
    a, b = two_clones(repo, tmp_path, turbo_server, team)
    env = turbo_server.env(team)
    cold = a.vx("run", "build", "--all", "--cache=local:rw,remote:rw", env=env)
    assert cold.code == 0, cold.err
    assert set(cold.statuses().values()) == {("success", "miss")}
    assert len([r for r in turbo_server.requests("PUT") if team in r]) == 4

    warm = b.vx("run", "build", "--all", env=env)
    assert warm.code == 0, warm.err
    assert set(warm.statuses().values()) == {("success", "remote")}
    assert outputs(b) == outputs(a) and len(outputs(b)) == 4
    assert "remote cache" in warm.err and "4 hits" in warm.err
    assert strays(b) == []
    assert_secret_kept(a, cold)
    assert_secret_kept(b, warm)


def test_the_server_holds_the_local_artifact_byte_for_byte(repo, tmp_path, turbo_server, team):
    a, b = two_clones(repo, tmp_path, turbo_server, team, upload="always")
    env = turbo_server.env(team)
    assert a.vx("run", "build", "--all", env=env).code == 0  # upload: always
    local_a = {
        p.name.split(".")[0]: p.read_bytes() for p in (a.root / ".vx/cache").glob("*.tar.zst")
    }
    assert len(local_a) == 4
    for key, body in local_a.items():
        assert turbo_server.artifact(team, key).read_bytes() == body
    assert b.vx("run", "build", "--all", env=env).code == 0
    local_b = {
        p.name.split(".")[0]: p.read_bytes() for p in (b.root / ".vx/cache").glob("*.tar.zst")
    }
    assert local_b == local_a  # downloaded bytes are adopted verbatim


def test_a_remote_hit_is_local_next_time_and_asks_the_server_nothing(
    repo, tmp_path, turbo_server, team
):
    a, b = two_clones(repo, tmp_path, turbo_server, team, upload="always")
    env = turbo_server.env(team)
    a.vx("run", "build", "--all", env=env)
    assert b.vx("run", "build", "--all", env=env).code == 0
    asked = len(turbo_server.requests())
    again = b.vx("run", "build", "--all", env=env)
    assert set(again.statuses().values()) == {("success", "up-to-date")}
    assert len(turbo_server.requests()) == asked
    assert "remote cache" not in again.err  # nothing to tally when the remote was never needed


@pytest.mark.feature("LC-15", "RC-06")
def test_off_ci_the_remote_is_read_only_by_default(repo, tmp_path, turbo_server, team):
    a, _ = two_clones(repo, tmp_path, turbo_server, team)
    res = a.vx("run", "build", "--all", env=turbo_server.env(team))
    assert res.code == 0, res.err
    assert not [r for r in turbo_server.requests("PUT") if team in r]
    on_ci = a.vx("run", "build", "--all", "--force", env={**turbo_server.env(team), "CI": "1"})
    assert on_ci.code == 0, on_ci.err
    assert len([r for r in turbo_server.requests("PUT") if team in r]) == 4


@pytest.mark.feature("CLI-27")
def test_remote_off_by_flag_sends_nothing(repo, tmp_path, turbo_server, team):
    a, _ = two_clones(repo, tmp_path, turbo_server, team, upload="always")
    res = a.vx("run", "build", "--all", "--cache=remote:", env=turbo_server.env(team))
    assert res.code == 0, res.err
    assert not [r for r in turbo_server.requests() if team in r]
    assert set(res.statuses().values()) == {("success", "miss")}


@pytest.mark.feature("LC-15", "RC-01")
def test_remote_only_layers_keep_nothing_locally(repo, tmp_path, turbo_server, team):
    a, b = two_clones(repo, tmp_path, turbo_server, team)
    env = turbo_server.env(team)
    up = a.vx("run", "build", "--all", "--cache=local:,remote:rw", env=env)
    assert up.code == 0, up.err
    assert len([r for r in turbo_server.requests("PUT") if team in r]) == 4
    down = b.vx("run", "build", "--all", "--cache=local:,remote:r", env=env)
    assert down.code == 0, down.err
    assert set(down.statuses().values()) == {("success", "remote")}
    assert outputs(b) == outputs(a)
    for clone_ in (a, b):
        assert not list((clone_.root / ".vx/cache").glob("*.tar.zst")) and strays(clone_) == []
