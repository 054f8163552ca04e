"""A remote cache that fails never fails the build (RC-02, RC-05; reliability C.18-C.24).

Each fault ends the same way: exit 0, every task run or restored correctly, one warning per
failure class (repeats counted at the end), nothing written outside the outputs, and the
token nowhere in what vx printed or wrote.
"""

import io
import json
import tarfile

import pytest
import zstandard
from support.remote_servers import (
    CANARY,
    SIGNING_KEY,
    FaultServer,
    TurboServer,
    assert_secret_kept,
    clone,
    free_port,
    outputs,
    put_raw,
    shop_files,
    strays,
)

EXPECTED = {
    "packages/lib/dist/out.js": b"LIB;",
    "packages/ui/dist/out.js": b"UI;",
    "packages/app/dist/out.js": b"APP;",
    "packages/docs/dist/out.js": b"DOCS;",
}


def turbo_env(url: str, team: str = "t", token: str = CANARY) -> dict[str, str]:
    return {"TURBO_API": url, "TURBO_TOKEN": token, "TURBO_TEAM": team}


def assert_built_anyway(repo, res, statuses=frozenset({("success", "miss")})) -> None:
    assert res.code == 0, res.err
    assert set(res.statuses().values()) <= set(statuses), res.statuses()
    assert outputs(repo) == EXPECTED
    assert strays(repo) == []
    assert_secret_kept(repo, res)


def keys_of(repo, env) -> dict[str, str]:
    plan = json.loads(repo.vx("run", "build", "--all", "--dry=json", env=env, summary=False).out)
    return {t["id"]: t["key"] for t in plan["tasks"]}


@pytest.mark.feature("RC-02")
def test_server_down_at_start(repo):
    repo.write(shop_files({"turbo": {"team": "t"}, "upload": "always"})).commit()
    res = repo.vx("run", "build", "--all", env=turbo_env(f"http://127.0.0.1:{free_port()}"))
    assert_built_anyway(repo, res)
    assert res.err.count("connection refused") == 1
    assert "failures: unreachable ×" in res.err


@pytest.mark.feature("RC-02")
@pytest.mark.parametrize(
    "host, said",
    [
        ("cache..example", "the host name did not resolve"),
        ("cachü..example", "the host name is not a valid DNS name"),
    ],
)
def test_a_host_name_no_resolver_can_take_is_a_miss(repo, host, said):
    """A server URL whose host has an empty label (`cache..example`, a slip of the keyboard)
    made the resolver's name encoding raise, and vx stopped with an internal error: it is a
    remote that cannot be reached like any other, and the build goes on."""
    repo.write(shop_files({"turbo": {"team": "t"}, "upload": "always"})).commit()
    res = repo.vx("run", "build", "--all", env=turbo_env(f"https://{host}:9"))
    assert "internal error" not in res.err
    assert_built_anyway(repo, res)
    assert res.err.count(said) == 1
    assert "failures: unreachable ×" in res.err


@pytest.mark.feature("RC-02")
def test_server_dies_mid_run(repo, tmp_path):
    server = TurboServer(tmp_path / "srv", token=CANARY)
    try:
        pid_file = tmp_path / "server.pid"
        pid_file.write_text(str(server.proc.pid))
        kill = f"(kill -9 $(cat {pid_file}) 2>/dev/null; true) && "
        from support.workspace import build_task

        cmd = kill + build_task()["exec"]["command"]
        repo.write(
            shop_files({"turbo": {"team": "t"}, "upload": "always"}, build_command=cmd)
        ).commit()
        res = repo.vx("run", "build", "--all", env=turbo_env(server.url))
        assert server.proc.wait(timeout=10) == -9  # the first task really killed it
        assert_built_anyway(repo, res)
        assert (
            "failures: unreachable ×" in res.err
        )  # downloads in flight or uploads, whichever met the corpse
        again = clone(repo, tmp_path / "b").vx("run", "build", "--all", env=turbo_env(server.url))
        assert again.code == 0 and set(again.statuses().values()) == {("success", "miss")}
    finally:
        server.kill()


def test_a_501_is_asked_once_and_the_warning_claims_no_retries(repo):
    """501 is not a status worth retrying; the warning once claimed "after 2 retries"."""
    server = FaultServer("501")
    try:
        repo.write(shop_files({"turbo": {"team": "t"}, "upload": "always"})).commit()
        res = repo.vx("run", "build", "--all", env=turbo_env(server.url))
        assert_built_anyway(repo, res)
        artifacts = [r for r in server.seen if not r.startswith("GET /v8/artifacts/status")]
        assert len(artifacts) == len(set(artifacts)), server.seen  # each asked once
        assert "answered 501" in res.err and "retries" not in res.err, res.err
    finally:
        server.close()


def test_500_on_every_call_is_retried_twice_then_the_breaker_opens(repo):  # C.19, C.20
    server = FaultServer("500")
    try:
        repo.write(shop_files({"turbo": {"team": "t"}, "upload": "always"})).commit()
        res = repo.vx("run", "build", "--all", env=turbo_env(server.url))
        assert_built_anyway(repo, res)
        artifacts = [r for r in server.seen if not r.startswith("GET /v8/artifacts/status")]
        assert len(artifacts) == 4 * 3 and all(r.startswith("GET ") for r in artifacts), (
            server.seen
        )  # 2 retries each
        assert (
            len(server.seen) - len(artifacts) <= 3
        )  # at most one status check, retried, before the breaker
        assert res.err.count("answered 500") == 1
        assert "failures: server error ×" in res.err and not [
            r for r in server.seen if r.startswith("PUT")
        ]
    finally:
        server.close()


def test_slow_server_past_the_timeout(repo):  # C.21
    server = FaultServer("stall")
    try:
        repo.write(
            shop_files({"turbo": {"team": "t"}, "upload": "always", "timeout": 3000})
        ).commit()
        res = repo.vx("run", "build", "--all", env=turbo_env(server.url))
        assert_built_anyway(repo, res)
        assert res.err.count("no answer in 3 s") == 1
        # One timeout per run, not one per task: no lookup went out after the first had timed
        # out (asked together, or held back by the breaker) — arrival order, not the run's wall.
        assert server.arrived and max(server.arrived) - min(server.arrived) < 3.0, server.seen
        assert not [r for r in server.seen if r.startswith("PUT")]  # the breaker kept uploads off
    finally:
        server.close()


@pytest.mark.feature("RC-02")
def test_wrong_token_turns_the_layer_off_with_one_line(repo, turbo_server):
    wrong = "vxcanary-wrong-token-0000"
    repo.write(shop_files({"turbo": {"team": "wrong-token"}, "upload": "always"})).commit()
    res = repo.vx(
        "run", "build", "--all", env=turbo_env(turbo_server.url, "wrong-token", token=wrong)
    )
    assert_built_anyway(repo, res)
    assert res.err.count("answered 401") == 1 and "the remote cache is off for this run" in res.err
    assert wrong not in res.out + res.err
    assert_secret_kept(repo, res, wrong)
    assert not [r for r in turbo_server.requests("PUT") if "wrong-token" in r]


def test_tampered_artifact_with_signing_on_is_a_miss(repo, tmp_path, signed_server, team):  # C.18
    repo.write(
        shop_files({"turbo": {"team": team, "signature": True}, "upload": "always"})
    ).commit()
    env = {**turbo_env(signed_server.url, team), "TURBO_REMOTE_CACHE_SIGNATURE_KEY": SIGNING_KEY}
    assert repo.vx("run", "build", "--all", env=env).code == 0
    lib_key = keys_of(repo, env)["lib#build"]
    stored = signed_server.artifact(team, lib_key)
    body = bytearray(stored.read_bytes())
    body[len(body) // 2] ^= 0x01  # one bit
    stored.write_bytes(bytes(body))
    other = clone(repo, tmp_path / "b")
    res = other.vx("run", "build", "--all", env=env)
    assert_built_anyway(other, res, {("success", "miss"), ("success", "remote")})
    assert res.statuses()["lib#build"] == ("success", "miss")
    assert res.statuses()["docs#build"] == ("success", "remote")
    assert res.err.count("signature check") == 1 and lib_key in res.err
    assert SIGNING_KEY not in res.out + res.err


def hostile_artifact(key: str, name: str) -> bytes:
    """A zstd tar whose one output entry tries to leave the workspace."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for entry, data in (
            ("log", b""),
            (name, b"pwned"),
            (
                ".vx-meta.json",
                json.dumps(
                    {"key": key, "version": "vx-py-cache-v1", "files": {name[8:]: [420, 0]}}
                ).encode(),
            ),
        ):
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return zstandard.ZstdCompressor().compress(raw.getvalue())


@pytest.mark.feature("RC-05")
def test_artifact_with_a_dotdot_entry_is_refused_and_writes_nothing(
    repo, tmp_path, turbo_server, team
):
    repo.write(shop_files({"turbo": {"team": team}})).commit()
    env = turbo_env(turbo_server.url, team)
    keys = keys_of(repo, env)
    for tid, name in (
        ("lib#build", "outputs/packages/lib/../../../evil.txt"),
        ("docs#build", "outputs/../evil.txt"),
    ):
        assert put_raw(turbo_server.url, team, keys[tid], hostile_artifact(keys[tid], name)) == 200
    res = repo.vx("run", "build", "--all", env=env)
    assert_built_anyway(repo, res)
    assert res.err.count("refused entry name") == 1 and "`..` component" in res.err
    assert "rejected artifact ×2" in res.err
    assert not list(tmp_path.rglob("evil.txt"))


@pytest.mark.feature("RC-05")
def test_oversized_artifact_is_not_downloaded(repo, tmp_path, turbo_server, team):
    repo.write(
        shop_files({"turbo": {"team": team}, "upload": "always", "maxArtifactSize": 64})
    ).commit()
    env = turbo_env(turbo_server.url, team)
    assert repo.vx("run", "build", "--all", env=env).code == 0
    other = clone(repo, tmp_path / "b")
    res = other.vx("run", "build", "--all", env=env)
    assert_built_anyway(other, res)
    assert res.err.count("over the 64 byte bound") == 1
    assert "too large ×4" in res.err


@pytest.mark.feature("RC-02")
def test_upload_refused_as_too_large_keeps_the_local_cache(repo, tmp_path):  # C.19 (413)
    server = TurboServer(tmp_path / "srv", token=CANARY, body_limit=64)
    try:
        repo.write(shop_files({"turbo": {"team": "t"}, "upload": "always"})).commit()
        res = repo.vx("run", "build", "--all", env=turbo_env(server.url))
        assert_built_anyway(repo, res)
        assert res.err.count("(413)") == 1 and "too large ×4" in res.err
        again = repo.vx("run", "build", "--all", env=turbo_env(server.url))
        assert set(again.statuses().values()) == {("success", "up-to-date")}
    finally:
        server.kill()
