"""What vx puts on a Turborepo server is what any turbo client can fetch, signed the way turbo
signs (RC-13; anchors-features § b); `--dry` only probes (RC-04)."""

import http.client
import io
import json
import tarfile
from urllib.parse import urlsplit

import pytest
import zstandard
from support.remote_servers import CANARY, SIGNING_KEY, clone, node_tag, put_raw, shop_files


def turbo_get(url: str, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    """A request shaped like turbo's own client: bearer token, slug query, turbo user agent."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request(
        method,
        path,
        headers={
            "Authorization": f"Bearer {CANARY}",
            "User-Agent": "turbo 2.5.0 1.86.0 linux x86_64",
        },
    )
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res.status, {k.lower(): v for k, v in res.getheaders()}, body


def local_artifacts(repo) -> dict[str, bytes]:
    return {
        p.name.split(".")[0]: p.read_bytes() for p in (repo.root / ".vx/cache").glob("*.tar.zst")
    }


def test_an_artifact_vx_wrote_reads_back_through_the_turbo_api(repo, turbo_server, team):
    repo.write(shop_files({"turbo": {"team": team}, "upload": "always"})).commit()
    assert repo.vx("run", "build", "--all", env=turbo_server.env(team)).code == 0
    for key, body in local_artifacts(repo).items():
        status, _, _ = turbo_get(turbo_server.url, f"/v8/artifacts/{key}?slug={team}", "HEAD")
        assert status == 200
        status, _, fetched = turbo_get(turbo_server.url, f"/v8/artifacts/{key}?slug={team}")
        assert status == 200 and fetched == body
        # A standard zstd-compressed ustar: turbo's container. The entries are vx's own layout.
        tar = tarfile.open(
            fileobj=io.BytesIO(zstandard.ZstdDecompressor().decompressobj().decompress(fetched))
        )
        names = tar.getnames()
        assert names[0] == "log" and names[-2:] == [".vx-meta.json", ".vx-sum"]
        assert all(n.startswith("outputs/packages/") for n in names[1:-2])
        assert json.loads(tar.extractfile(".vx-meta.json").read())["key"] == key


def test_uploads_carry_turbos_signature_tag(repo, signed_server, team):
    repo.write(
        shop_files({"turbo": {"team": team, "signature": True}, "upload": "always"})
    ).commit()
    env = {**signed_server.env(team), "TURBO_REMOTE_CACHE_SIGNATURE_KEY": SIGNING_KEY}
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    for key, body in local_artifacts(repo).items():
        stored_tag = (signed_server.artifact(team, key).with_name(f"{key}.tag")).read_text()
        assert stored_tag == node_tag(key, "", body)
    assert SIGNING_KEY not in res.out + res.err


def test_vx_restores_an_artifact_another_client_signed(repo, tmp_path, signed_server, team):
    repo.write(shop_files({"turbo": {"team": team, "signature": True}})).commit()
    env = {**signed_server.env(team), "TURBO_REMOTE_CACHE_SIGNATURE_KEY": SIGNING_KEY}
    assert (
        repo.vx("run", "build", "--all", env=env).code == 0
    )  # off CI: read-only, nothing uploaded
    for key, body in local_artifacts(
        repo
    ).items():  # another client uploads, tagging with node's HMAC
        assert put_raw(signed_server.url, team, key, body, tag=node_tag(key, "", body)) == 200
    other = clone(repo, tmp_path / "b")
    res = other.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    assert set(res.statuses().values()) == {("success", "remote")}


@pytest.mark.feature("RC-04")
def test_dry_only_probes_the_remote(repo, tmp_path, turbo_server, team):
    repo.write(shop_files({"turbo": {"team": team}, "upload": "always"})).commit()
    assert repo.vx("run", "build", "--all", env=turbo_server.env(team)).code == 0
    other = clone(repo, tmp_path / "b")
    before = len(turbo_server.requests())
    res = other.vx("run", "build", "--all", "--dry=json", env=turbo_server.env(team))
    assert res.code == 0, res.err
    assert {t["predicted"] for t in json.loads(res.out)["tasks"]} == {"hit-remote"}
    asked = turbo_server.requests()[before:]
    assert len(asked) == 4 and all(r.startswith("HEAD ") for r in asked)
    assert not list((other.root / ".vx/cache").glob("*.tar.zst"))
