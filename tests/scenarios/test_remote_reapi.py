"""A Bazel REAPI v2 server as the remote cache (RC-09), against a real BuildGrid on loopback:
shared between clones with byte-identical outputs, large artifacts over ByteStream, a dead or
hostile server is a miss and never a failed build, and a bad `remoteCache.reapi` is refused."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
from support.reapi_servers import BuildGrid, GarbageServer, assert_reapi_refused
from support.remote_servers import clone, free_port, outputs, shop_files, strays
from support.workspace import SRC

EXPECTED = {
    "packages/lib/dist/out.js": b"LIB;",
    "packages/ui/dist/out.js": b"UI;",
    "packages/app/dist/out.js": b"APP;",
    "packages/docs/dist/out.js": b"DOCS;",
}


@pytest.fixture
def buildgrid(tmp_path):
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests")
    yield server
    server.stop()


def keys_of(repo, env) -> dict[str, str]:
    plan = json.loads(repo.vx("run", "build", "--all", "--dry=json", env=env, summary=False).out)
    return {t["id"]: t["key"] for t in plan["tasks"]}


def action_results(server, keys) -> dict[str, object]:
    """What BuildGrid's ActionCache holds for each key, read with the vendored stubs."""
    import grpc

    from vx.store.remote.reapi import action_digest
    from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (
        remote_execution_pb2 as re_pb,
    )

    found = {}
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        get = channel.unary_unary(
            "/build.bazel.remote.execution.v2.ActionCache/GetActionResult",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=re_pb.ActionResult.FromString,
        )
        for key in keys:
            request = re_pb.GetActionResultRequest(
                instance_name=server.instance, action_digest=action_digest(key)
            )
            try:
                found[key] = get(request, timeout=30)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.NOT_FOUND, exc
    return found


@pytest.mark.feature("RC-09")
def test_buildgrid_shared_by_two_clones(repo, tmp_path, buildgrid):
    """A miss uploads (blob first, then the ActionResult naming it); in a second clone `--dry`
    predicts remote hits without downloading, and a run restores every output byte for byte
    from BuildGrid, configured by the workspace file alone."""
    remote = {"reapi": {"endpoint": buildgrid.endpoint, "instance": buildgrid.instance}}
    repo.write(shop_files(remote)).commit()
    env = {"CI": "1"}
    keys = keys_of(repo, env)
    assert action_results(buildgrid, keys.values()) == {}
    cold = repo.vx("run", "build", "--all", env=env)
    assert cold.code == 0, cold.err
    assert set(cold.statuses().values()) == {("success", "miss")}
    stored = action_results(buildgrid, keys.values())
    assert set(stored) == set(keys.values())
    local = {
        p.name.split(".")[0]: p.read_bytes() for p in (repo.root / ".vx/cache").glob("*.tar.zst")
    }
    for key, result in stored.items():
        (blob,) = result.output_files
        assert blob.digest.hash == hashlib.sha256(local[key]).hexdigest()
    other = clone(repo, tmp_path / "b")
    dry = other.vx("run", "build", "--all", "--dry=json", env=env)
    assert dry.code == 0, dry.err
    assert {t["predicted"] for t in json.loads(dry.out)["tasks"]} == {"hit-remote"}
    assert not list((other.root / ".vx/cache").glob("*.tar.zst"))  # --dry only asked
    warm = other.vx("run", "build", "--all", env=env)
    assert warm.code == 0, warm.err
    assert set(warm.statuses().values()) == {("success", "remote")}
    assert "warning" not in warm.err
    assert len(list((other.root / ".vx/cache").glob("*.tar.zst"))) == 4  # where --dry left none
    assert outputs(other) == outputs(repo) == EXPECTED and strays(other) == []


@pytest.mark.feature("RC-09")
def test_large_artifact_goes_over_bytestream(repo, tmp_path, buildgrid):
    """An artifact past the batch limit (5 MiB of incompressible bytes) streams both ways: in one
    batch call it would pass BuildGrid's 4 MiB message cap and be refused."""
    cmd = (
        "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
        "fs.writeFileSync('dist/big.bin',require('crypto').randomBytes(5<<20))\""
    )
    repo.write(shop_files(None, build_command=cmd)).commit()
    cold = repo.vx("run", "build", "--all", env=buildgrid.env())
    assert cold.code == 0, cold.err
    other = clone(repo, tmp_path / "b")
    warm = other.vx("run", "build", "--all", env=buildgrid.env())
    assert warm.code == 0, warm.err
    assert set(warm.statuses().values()) == {("success", "remote")}, cold.err + warm.err
    restored = outputs(other)
    assert len(restored) == 4 and all(len(b) == 5 << 20 for b in restored.values())
    assert restored == outputs(repo)


@pytest.mark.feature("RC-09")
def test_server_down_builds_locally_with_one_warning(repo):
    repo.write(shop_files(None)).commit()
    env = {"VX_REAPI_ENDPOINT": f"grpc://127.0.0.1:{free_port()}", "CI": "1"}
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    assert set(res.statuses().values()) == {("success", "miss")}
    assert outputs(repo) == EXPECTED and strays(repo) == []
    assert res.err.count("GetCapabilities: UNAVAILABLE; treated as a miss") == 1, res.err
    assert "failures: unreachable ×" in res.err
    again = repo.vx("run", "build", "--all", env=env)
    assert again.code == 0, again.err
    assert set(again.statuses().values()) == {("success", "up-to-date")}, again.statuses()


def _tampered(method: str, request: bytes) -> bytes:
    """An ActionResult for any key naming a blob whose bytes then do not match its digest."""
    from vx.store.remote.reapi import ARTIFACT_PATH
    from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (
        remote_execution_pb2 as re_pb,
    )

    honest = b"a real artifact"
    digest = re_pb.Digest(hash=hashlib.sha256(honest).hexdigest(), size_bytes=len(honest))
    if method.endswith("/GetActionResult"):
        out = re_pb.OutputFile(path=ARTIFACT_PATH, digest=digest)
        return re_pb.ActionResult(output_files=[out]).SerializeToString()
    if method.endswith("/BatchReadBlobs"):
        swapped = b"evil artifact!!"  # the same length: only the hash can tell
        reply = re_pb.BatchReadBlobsResponse.Response(digest=digest, data=swapped)
        return re_pb.BatchReadBlobsResponse(responses=[reply]).SerializeToString()
    if method.endswith("/FindMissingBlobs"):
        return re_pb.FindMissingBlobsResponse().SerializeToString()
    return re_pb.ActionResult().SerializeToString()


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "answer,kind",
    [
        (lambda method, request: b"\xff\xfe not a protobuf \x00\x01", "server error"),
        (_tampered, "bad response"),
    ],
    ids=["undecodable", "blob-not-matching-its-digest"],
)
def test_hostile_reply_is_a_miss(repo, answer, kind):
    server = GarbageServer(answer)
    try:
        repo.write(shop_files(None)).commit()
        env = {"VX_REAPI_ENDPOINT": server.endpoint}
        res = repo.vx("run", "build", "--all", env=env)
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        assert outputs(repo) == EXPECTED and strays(repo) == []
        assert res.err.count(f"further `{kind}` failures are counted") == 1, res.err
        assert server.seen[0].endswith("/GetCapabilities")  # asked once, before anything else
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "reapi,says",
    [
        ({"endpoint": "http://cache.example.com"}, "`endpoint` must be grpc://host:port"),
        ({"endpoint": "grpc://cache.example.com"}, "`endpoint` must be grpc://host:port"),
        ({"instance": "x"}, "needs an `endpoint`"),
        ({"endpoint": "grpc://127.0.0.1:1", "headers": {"k": "v"}}, "VX_REAPI_HEADERS"),
        ({"endpoint": "grpc://127.0.0.1:1", "url": "x"}, "in vx it is `endpoint`"),
    ],
)
def test_bad_reapi_config_is_refused(repo, reapi, says):
    assert_reapi_refused(repo, reapi, says)


@pytest.mark.feature("RC-09")
def test_headers_never_travel_in_clear_text_and_are_never_printed(repo):
    repo.write(shop_files(None)).commit()
    secret = "vxcanary-reapi-key-0b1c"
    env = {
        "VX_REAPI_ENDPOINT": "grpc://cache.example.com:9092",
        "VX_REAPI_HEADERS": f"x-buildbuddy-api-key={secret}",
    }
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    assert "clear text" in res.err and secret not in res.err + res.out
    assert set(res.statuses().values()) == {("success", "miss")}


GRPC_PROBE = (
    "import sys\nfrom vx.cli.main import main\ncode = main(sys.argv[1:])\n"
    "print('grpc loaded:', 'grpc' in sys.modules, file=sys.stderr)\nsys.exit(code)\n"
)


def grpc_loaded(repo, env: dict[str, str]) -> bool:
    proc = subprocess.run(
        [sys.executable, "-c", GRPC_PROBE, "run", "build", "--all"],
        cwd=repo.root,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI", "TURBO_"))},
            **env,
            "PYTHONPATH": SRC,
        },
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return "grpc loaded: True" in proc.stderr


@pytest.mark.feature("RC-09")
def test_a_stalled_server_is_a_miss_after_the_deadline(repo):
    """`remoteCache.timeout` is each call's gRPC deadline; the server never answers at all."""
    server = GarbageServer(None)
    try:
        remote = {"reapi": {"endpoint": server.endpoint}, "timeout": 1000}
        repo.write(shop_files(remote)).commit()
        res = repo.vx("run", "build", "--all")
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        assert outputs(repo) == EXPECTED and strays(repo) == []
        assert res.err.count("GetCapabilities: DEADLINE_EXCEEDED; treated as a miss") == 1, res.err
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
def test_instance_and_headers_reach_the_server(repo):
    server = GarbageServer(lambda method, request: b"")  # an empty ActionResult: no artifact
    try:
        repo.write(shop_files(None)).commit()
        env = {
            "VX_REAPI_ENDPOINT": server.endpoint,
            "VX_REAPI_INSTANCE": "main/linux",
            "VX_REAPI_HEADERS": "x-buildbuddy-api-key=k1, X-Other=two",
        }
        res = repo.vx("run", "build", "--all", env=env)
        assert res.code == 0, res.err
        assert "names no vx-artifact.tar.zst" in res.err
        assert server.metadata and all(
            m.get("x-buildbuddy-api-key") == "k1" and m.get("x-other") == "two"
            for m in server.metadata
        )
        assert "k1" not in res.err + res.out
        from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (
            remote_execution_pb2 as re_pb,
        )

        asked = [
            re_pb.GetActionResultRequest.FromString(body).instance_name
            for method, body in server.requests
            if method.endswith("/GetActionResult")
        ]
        assert asked and set(asked) == {"main/linux"}
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
def test_grpc_loads_only_for_a_reapi_lookup(repo, buildgrid):
    """With a REAPI remote a cold run loads grpc; a fully local-cached run (the warm path) does
    not, and neither does a run with no REAPI remote."""
    repo.write(shop_files(None)).commit()
    assert grpc_loaded(repo, buildgrid.env())
    assert not grpc_loaded(repo, buildgrid.env())
    assert not grpc_loaded(repo, {})
