"""How a REAPI remote is resolved from the environment and `remoteCache.reapi` (RC-09)."""

import hashlib

import pytest

from vx.model import RemoteCacheConfig
from vx.store.remote import configured, resolve


@pytest.mark.feature("RC-09")
def test_endpoint_alone_turns_the_remote_on():
    env = {"VX_REAPI_ENDPOINT": "grpc://127.0.0.1:50051"}
    assert configured(None, env)
    found = resolve(None, env)
    assert found.problem is None
    assert (found.settings.kind, found.settings.url, found.settings.instance) == (
        "reapi",
        "grpc://127.0.0.1:50051",
        "",
    )


@pytest.mark.feature("RC-09")
def test_environment_wins_over_the_workspace_file():
    cfg = RemoteCacheConfig(kind="reapi", url="grpcs://cache.example.com", instance="ci")
    s = resolve(cfg, {"VX_REAPI_INSTANCE": "dev"}).settings
    assert (s.url, s.instance) == ("grpcs://cache.example.com", "dev")
    s = resolve(cfg, {"VX_REAPI_ENDPOINT": "grpc://localhost:9092"}).settings
    assert (s.url, s.instance) == ("grpc://localhost:9092", "ci")


@pytest.mark.feature("RC-09")
def test_headers_parse_and_stay_out_of_repr():
    env = {
        "VX_REAPI_ENDPOINT": "grpcs://remote.buildbuddy.io",
        "VX_REAPI_HEADERS": "x-buildbuddy-api-key=s3cret,X-Team = web",
    }
    s = resolve(None, env).settings
    assert s.headers == (("x-buildbuddy-api-key", "s3cret"), ("x-team", "web"))
    assert "s3cret" not in repr(s)


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "env,says",
    [
        ({"VX_REAPI_ENDPOINT": "http://127.0.0.1:1"}, "no usable REAPI endpoint"),
        ({"VX_REAPI_ENDPOINT": "grpc://127.0.0.1"}, "needs a port"),
        ({"VX_REAPI_ENDPOINT": "grpc://127.0.0.1:1/path"}, "host:port alone"),
        ({"VX_REAPI_ENDPOINT": "grpc://u:p@127.0.0.1:1"}, "host:port alone"),
        (
            {"VX_REAPI_ENDPOINT": "grpc://cache.example.com:1", "VX_REAPI_HEADERS": "k=vxsecret1"},
            "clear text",
        ),
        (
            {"VX_REAPI_ENDPOINT": "grpc://127.0.0.1:1", "VX_REAPI_HEADERS": "a=b,vxsecret1"},
            "name=value",
        ),
        (
            {"VX_REAPI_ENDPOINT": "grpc://127.0.0.1:1", "VX_REAPI_HEADERS": "x-bin=vxsecret1"},
            "-bin",
        ),
        ({"VX_REAPI_ENDPOINT": "grpc://127.0.0.1:1", "VX_REAPI_HEADERS": "grpc-x=1"}, "grpc-*"),
    ],
)
def test_unusable_settings_turn_the_remote_off_with_one_line(env, says):
    found = resolve(None, env)
    assert found.settings is None and says in found.problem
    assert "vxsecret1" not in found.problem


@pytest.mark.feature("RC-09")
def test_action_digest_is_the_references_mapping():
    from vx.store.remote.reapi import action_digest

    key = "0123abcd" * 8
    d = action_digest(key)
    assert d.hash == hashlib.sha256(b"vx-reapi-v1\0" + key.encode()).hexdigest()
    assert d.size_bytes == len(b"vx-reapi-v1\0") + len(key)


@pytest.mark.feature("RC-09")
def test_a_grpc_that_fails_to_load_is_a_remote_failure_not_a_crash(monkeypatch):
    import io
    import sys

    from vx.store.remote import UNREACHABLE, RemoteFailure, open_layer

    layer = open_layer(resolve(None, {"VX_REAPI_ENDPOINT": "grpc://127.0.0.1:1"}).settings)
    monkeypatch.setitem(sys.modules, "vx.store.remote.reapi", None)  # import raises ImportError
    for call in (lambda: layer.has("ab"), lambda: layer.put("ab", io.BytesIO(b"x"), 1, 1.0)):
        with pytest.raises(RemoteFailure) as caught:
            call()
        assert caught.value.kind == UNREACHABLE and "grpc did not load" in caught.value.detail
    layer.close()


@pytest.mark.feature("RC-09")
def test_tls_files_come_from_the_environment_over_the_workspace_file(tmp_path):
    for name in ("ca.pem", "c.pem", "c.key", "env-ca.pem"):
        (tmp_path / name).write_text("PEM")
    cfg = RemoteCacheConfig(
        kind="reapi",
        url="grpcs://cache.example.com",
        ca_cert=str(tmp_path / "ca.pem"),
        client_cert=str(tmp_path / "c.pem"),
        client_key=str(tmp_path / "c.key"),
    )
    found = resolve(cfg, {"VX_REAPI_CA_CERT": str(tmp_path / "env-ca.pem")})
    assert found.problem is None
    s = found.settings
    assert (s.ca_cert, s.client_cert, s.client_key) == (
        str(tmp_path / "env-ca.pem"),
        str(tmp_path / "c.pem"),
        str(tmp_path / "c.key"),
    )


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "extra,says",
    [
        ({"VX_REAPI_CA_CERT": "{d}/ca.pem"}, "needs a grpcs:// endpoint"),
        ({"VX_REAPI_CLIENT_CERT": "{d}/ca.pem"}, "needs its key"),
        ({"VX_REAPI_CLIENT_KEY": "{d}/ca.pem"}, "needs its key"),
        ({"VX_REAPI_CA_CERT": "{d}/missing.pem"}, "is not a readable file"),
    ],
)
def test_unusable_tls_files_turn_the_remote_off_with_one_line(tmp_path, extra, says):
    (tmp_path / "ca.pem").write_text("PEM")
    scheme = "grpc://127.0.0.1:1" if "grpcs" in says else "grpcs://cache.example.com"
    env = {"VX_REAPI_ENDPOINT": scheme, **{k: v.format(d=tmp_path) for k, v in extra.items()}}
    found = resolve(None, env)
    assert found.settings is None and says in found.problem, found.problem


def _caps(**cache):
    from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (
        remote_execution_pb2 as re_pb,
    )

    return re_pb.ServerCapabilities(cache_capabilities=re_pb.CacheCapabilities(**cache))


@pytest.mark.feature("RC-09")
def test_capabilities_decide_batch_size_zstd_and_writes():
    from vx.store.remote.reapi import (
        BATCH_CEILING_BYTES,
        BATCH_OVERHEAD,
        SHA256,
        ZSTD,
        capabilities_of,
    )
    from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (
        remote_execution_pb2 as re_pb,
    )

    bare = capabilities_of(_caps())  # a server that fills in nothing: SHA-256, no limit of its own
    assert (bare.batch_bytes, bare.zstd, bare.zstd_batch_update, bare.updates) == (
        BATCH_CEILING_BYTES - BATCH_OVERHEAD,
        False,
        False,
        True,
    )
    big = capabilities_of(_caps(digest_functions=[SHA256], max_batch_total_size_bytes=64 << 20))
    assert big.batch_bytes == BATCH_CEILING_BYTES - BATCH_OVERHEAD  # never past gRPC's message cap
    small = capabilities_of(_caps(max_batch_total_size_bytes=256 << 10))
    assert small.batch_bytes == (256 << 10) - BATCH_OVERHEAD
    offered = capabilities_of(
        _caps(
            supported_compressors=[ZSTD],
            action_cache_update_capabilities=re_pb.ActionCacheUpdateCapabilities(),
        )
    )
    assert (offered.zstd, offered.zstd_batch_update, offered.updates) == (True, False, False)


@pytest.mark.feature("RC-09")
def test_a_server_without_sha256_is_unsupported():
    from vx.store.remote import UNSUPPORTED, RemoteFailure
    from vx.store.remote.reapi import capabilities_of
    from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (
        remote_execution_pb2 as re_pb,
    )

    sha = re_pb.DigestFunction
    with pytest.raises(RemoteFailure) as caught:
        capabilities_of(_caps(digest_functions=[sha.SHA1, sha.BLAKE3]))
    assert caught.value.kind == UNSUPPORTED and "only SHA1, BLAKE3" in caught.value.detail
    assert capabilities_of(_caps(digest_functions=[sha.BLAKE3, sha.SHA256])).updates
    with pytest.raises(RemoteFailure) as caught:  # a function newer than the stubs know
        capabilities_of(_caps(digest_functions=[99]))
    assert "only 99" in caught.value.detail


@pytest.mark.feature("RC-09")
def test_calls_in_flight_are_capped_by_the_environment_over_the_workspace_file():
    from vx.config.workspace_file import validate_workspace
    from vx.errors import ConfigError, UsageError

    endpoint = "grpc://127.0.0.1:50051"
    ws = validate_workspace(
        {"remoteCache": {"reapi": {"endpoint": endpoint, "maxConnections": 4}}}, "vx.workspace.json"
    )
    assert ws.remote_cache is not None and ws.remote_cache.max_connections == 4
    assert resolve(ws.remote_cache, {}).settings.max_concurrency == 4
    env = {"VX_REAPI_MAX_CONCURRENCY": "2"}
    assert resolve(ws.remote_cache, env).settings.max_concurrency == 2
    assert resolve(None, {"VX_REAPI_ENDPOINT": endpoint}).settings.max_concurrency is None
    with pytest.raises(UsageError, match="VX_REAPI_MAX_CONCURRENCY=0 is not a number of calls"):
        resolve(ws.remote_cache, {"VX_REAPI_MAX_CONCURRENCY": "0"})
    for bad, says in ((0, "must be in 1..10000"), ("8", "must be an integer")):
        with pytest.raises(ConfigError, match=says):
            validate_workspace(
                {"remoteCache": {"reapi": {"endpoint": endpoint, "maxConnections": bad}}}, "f"
            )
    with pytest.raises(ConfigError) as raised:
        validate_workspace(
            {"remoteCache": {"reapi": {"endpoint": endpoint, "maxConcurrency": 8}}}, "f"
        )
    assert "in vx it is `maxConnections`" in f"{raised.value} {raised.value.hint}"


def _rpc_error(code_name: str, details: list[tuple[str, bytes]] = ()):
    import grpc

    from vx.store.remote.reapi_pb.google.rpc import status_pb2

    status = status_pb2.Status(code=getattr(grpc.StatusCode, code_name).value[0])
    for type_url, value in details:
        status.details.add(type_url=type_url, value=value)

    class Failed(grpc.RpcError):
        def code(self):
            return getattr(grpc.StatusCode, code_name)

        def trailing_metadata(self):
            return (("grpc-status-details-bin", status.SerializeToString()),)

    return Failed()


@pytest.mark.feature("RC-09")
def test_resource_exhausted_is_a_busy_server_and_too_large_is_what_the_server_says_of_a_size():
    from vx.store.remote import BUSY, REJECTED, TOO_LARGE
    from vx.store.remote.reapi import capabilities_of
    from vx.store.remote.reapi import failure_of as failure

    def violation(kind: bytes, said: bytes) -> bytes:
        inner = b"\x0a" + bytes([len(kind)]) + kind + b"\x1a" + bytes([len(said)]) + said
        return b"\x0a" + bytes([len(inner)]) + inner

    url = "type.googleapis.com/google.rpc.PreconditionFailure"
    method = "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"
    assert failure(method, _rpc_error("RESOURCE_EXHAUSTED")).kind == BUSY
    big = _rpc_error("FAILED_PRECONDITION", [(url, violation(b"TOO_LARGE", b"over 1 MiB"))])
    assert (failure(method, big).kind, failure(method, big).detail) == (
        TOO_LARGE,
        "GetActionResult: FAILED_PRECONDITION (over 1 MiB)",
    )
    missing = _rpc_error("FAILED_PRECONDITION", [(url, violation(b"MISSING", b"blobs/ab/1"))])
    assert failure(method, missing).kind == REJECTED
    assert capabilities_of(_caps(max_cas_blob_size_bytes=1 << 20)).max_blob == 1 << 20
    assert capabilities_of(_caps()).max_blob == 0
