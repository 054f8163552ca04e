"""The Nx self-hosted cache API (`/v1/cache/{hash}`, RC-14): shared between clones, 409 on a
re-put is done, a read-only token reads and never writes."""

import pytest
from support.remote_servers import (
    CANARY,
    NxServer,
    assert_secret_kept,
    clone,
    outputs,
    shop_files,
    strays,
)

READ_ONLY = "vxcanary-nx-read-only"


@pytest.fixture
def nx():
    server = NxServer({CANARY: "write", READ_ONLY: "read"})
    yield server
    server.close()


def nx_env(server, token=CANARY) -> dict[str, str]:
    return {
        "NX_SELF_HOSTED_REMOTE_CACHE_SERVER": server.url,
        "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN": token,
        "CI": "1",
    }


@pytest.mark.feature("RC-14")
def test_nx_server_shared_by_two_clones(repo, tmp_path, nx):
    repo.write(shop_files({"nx": {}})).commit()
    cold = repo.vx("run", "build", "--all", env=nx_env(nx))
    assert cold.code == 0, cold.err
    assert len(nx.records) == 4
    assert {
        p.name.split(".")[0]: p.read_bytes() for p in (repo.root / ".vx/cache").glob("*.tar.zst")
    } == nx.records
    other = clone(repo, tmp_path / "b")
    warm = other.vx("run", "build", "--all", env=nx_env(nx))
    assert warm.code == 0, warm.err
    assert set(warm.statuses().values()) == {("success", "remote")}
    assert outputs(other) == outputs(repo) and strays(other) == []
    assert_secret_kept(other, warm)


@pytest.mark.feature("RC-14")
def test_env_alone_selects_nx(repo, nx):
    repo.write(shop_files(None)).commit()
    res = repo.vx("run", "build", "--all", env=nx_env(nx))
    assert res.code == 0, res.err
    assert len(nx.records) == 4


@pytest.mark.feature("RC-14")
def test_409_on_a_re_put_counts_as_done(repo, nx):
    repo.write(shop_files({"nx": {}})).commit()
    assert repo.vx("run", "build", "--all", env=nx_env(nx)).code == 0
    again = repo.vx("run", "build", "--all", "--force", env=nx_env(nx))
    assert again.code == 0, again.err
    assert len([r for r in nx.seen if r.startswith("PUT")]) == 8
    assert "warning" not in again.err and "4 uploads" in again.err


@pytest.mark.feature("RC-14")
def test_read_only_token_reads_and_turns_uploads_off_once(repo, tmp_path, nx):
    repo.write(shop_files({"nx": {}})).commit()
    assert repo.vx("run", "build", "--all", env=nx_env(nx)).code == 0
    (repo.root / "packages/docs/src/d.js").write_text("DOCS2;")
    repo.commit("docs changed")
    res = clone(repo, tmp_path / "b").vx("run", "build", "--all", env=nx_env(nx, READ_ONLY))
    assert res.code == 0, res.err
    assert res.statuses()["docs#build"] == ("success", "miss")
    assert res.statuses()["app#build"] == ("success", "remote")
    assert res.err.count("uploads are off for this run") == 1
    assert READ_ONLY not in res.out + res.err
