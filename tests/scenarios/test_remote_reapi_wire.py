"""What a REAPI remote cache negotiates with a real BuildGrid on loopback (RC-09): the server's
capabilities (digest function, batch limit, read-only ActionCache, zstd blobs), TLS and mTLS,
and headers that the server itself checks. A recording proxy in front of BuildGrid shows the
wire; every build passes, whatever the server says."""

import hashlib

import pytest
from support.reapi_proxy import ZSTD, Proxy
from support.reapi_servers import BuildGrid, GarbageServer, Tls, assert_reapi_refused
from support.remote_servers import clone, outputs, shop_files, strays
from test_remote_reapi import EXPECTED, action_results, keys_of

from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb

BIG = (  # 1 MiB of incompressible bytes per package: one batch call under BuildGrid's 4 MiB
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/big.bin',require('crypto').randomBytes(SIZE))\""
)


@pytest.fixture
def buildgrid(tmp_path):
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests")
    yield server
    server.stop()


def proxied_env(proxy: Proxy, server: BuildGrid) -> dict[str, str]:
    return {"VX_REAPI_ENDPOINT": proxy.endpoint, "VX_REAPI_INSTANCE": server.instance, "CI": "1"}


def local_artifacts(repo) -> dict[str, bytes]:
    return {
        p.name.split(".")[0]: p.read_bytes() for p in (repo.root / ".vx/cache").glob("*.tar.zst")
    }


def assert_stored_as_built(server: BuildGrid, repo, env) -> None:
    """BuildGrid's ActionCache names, for every task, the SHA-256 of the artifact vx built."""
    keys = keys_of(repo, env)
    stored = action_results(server, keys.values())
    local = local_artifacts(repo)
    assert set(stored) == set(keys.values())
    for key, result in stored.items():
        (blob,) = result.output_files
        assert blob.digest.hash == hashlib.sha256(local[key]).hexdigest()


def small_limit(caps: re_pb.ServerCapabilities) -> None:
    caps.cache_capabilities.max_batch_total_size_bytes = 256 << 10


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize("advertised", ["buildgrid", "256KiB"])
def test_the_advertised_batch_limit_decides_batch_or_bytestream(
    repo, tmp_path, buildgrid, advertised
):
    """GetCapabilities is asked once per run and its `max_batch_total_size_bytes` honoured: a
    1 MiB artifact goes in one batch call under BuildGrid's own 4 MiB limit, and over ByteStream
    both ways when the server says 256 KiB. No zstd is offered, so none is sent."""
    proxy = Proxy(buildgrid.port, capabilities=small_limit if advertised == "256KiB" else None)
    try:
        repo.write(shop_files(None, build_command=BIG.replace("SIZE", str(1 << 20)))).commit()
        env = proxied_env(proxy, buildgrid)
        cold = repo.vx("run", "build", "--all", env=env)
        assert cold.code == 0, cold.err
        assert "warning" not in cold.err, cold.err
        up = proxy.methods()
        assert up.count("GetCapabilities") == 1 and up[0] == "GetCapabilities"
        other = clone(repo, tmp_path / "b")
        warm = other.vx("run", "build", "--all", env=env)
        assert warm.code == 0, warm.err
        assert set(warm.statuses().values()) == {("success", "remote")}, warm.err
        assert outputs(other) == outputs(repo) and strays(other) == []
        down = proxy.methods()[len(up) :]
        assert down.count("GetCapabilities") == 1
        if advertised == "buildgrid":
            assert (up.count("BatchUpdateBlobs"), up.count("Write")) == (4, 0)
            assert 1 <= down.count("BatchReadBlobs") <= 4 and down.count("Read") == 0
            assert len(proxy.blobs_read()) == len(set(proxy.blobs_read())) == 4
            assert proxy.batch_compressors and {c for _, c in proxy.batch_compressors} == {0}
        else:
            assert (up.count("BatchUpdateBlobs"), up.count("Write")) == (0, 4)
            assert (down.count("BatchReadBlobs"), down.count("Read")) == (0, 4)
            assert len(proxy.resources) == 8
            assert all("/blobs/" in r and "compressed-blobs" not in r for r in proxy.resources)
        assert_stored_as_built(buildgrid, repo, env)
    finally:
        proxy.stop()


@pytest.mark.feature("RC-09")
def test_a_server_without_sha256_turns_the_layer_off_with_one_line(repo, buildgrid):
    """vx hashes with SHA-256 only: a server offering other digest functions is not asked for
    anything more, said once, and the build runs locally."""

    def sha1_only(caps):
        del caps.cache_capabilities.digest_functions[:]
        caps.cache_capabilities.digest_functions.append(re_pb.DigestFunction.SHA1)

    proxy = Proxy(buildgrid.port, capabilities=sha1_only)
    try:
        repo.write(shop_files(None)).commit()
        res = repo.vx("run", "build", "--all", env=proxied_env(proxy, buildgrid))
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        assert outputs(repo) == EXPECTED and strays(repo) == []
        line = "offers no SHA-256 digests (only SHA1); the remote cache is off for this run"
        assert res.err.count(line) == 1, res.err
        assert set(proxy.methods()) == {"GetCapabilities"}
    finally:
        proxy.stop()


@pytest.mark.feature("RC-09")
def test_a_read_only_action_cache_is_read_and_never_written(repo, tmp_path):
    """BuildGrid with `allow-updates: false` advertises `update_enabled: false`: a CI run still
    looks every task up, uploads nothing (no blob either), and says so once as a note."""
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests", allow_updates=False)
    proxy = Proxy(server.port)
    try:
        repo.write(shop_files(None)).commit()
        res = repo.vx("run", "build", "--all", env=proxied_env(proxy, server))
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        assert "warning" not in res.err, res.err
        note = (
            "takes no ActionCache updates (update_enabled is false); uploads are off for this run"
        )
        assert res.err.count(note) == 1, res.err
        called = proxy.methods()
        assert called.count("GetActionResult") == 4
        assert not {"FindMissingBlobs", "BatchUpdateBlobs", "Write", "UpdateActionResult"} & set(
            called
        )
        assert action_results(server, keys_of(repo, {}).values()) == {}
    finally:
        proxy.stop()
        server.stop()


@pytest.mark.feature("RC-09")
def test_a_spoiled_blob_in_a_shared_batch_call_is_a_miss_for_its_task_alone(
    repo, tmp_path, buildgrid
):
    """Downloads share BatchReadBlobs calls, and each checks its own blob: with one blob's bytes
    spoiled in every reply (whichever call carries it), that task alone misses, with one
    warning, and builds; the other three are remote hits, byte for byte."""
    proxy = Proxy(buildgrid.port, spoil_first_blob=True)
    try:
        repo.write(shop_files(None)).commit()
        env = proxied_env(proxy, buildgrid)
        cold = repo.vx("run", "build", "--all", env=env)
        assert cold.code == 0, cold.err
        other = clone(repo, tmp_path / "b")
        warm = other.vx("run", "build", "--all", env=env)
        assert warm.code == 0, warm.err
        assert proxy.spoiled is not None and proxy.spoiled in proxy.blobs_read()
        assert (
            sorted(warm.statuses().values()) == [("success", "miss")] + [("success", "remote")] * 3
        ), warm.err
        assert warm.err.count("does not match its digest") == 1, warm.err
        assert outputs(other) == outputs(repo) and strays(other) == []
    finally:
        proxy.stop()


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize("size", [64 << 10, 5 << 20], ids=["batch", "bytestream"])
def test_zstd_blobs_when_the_server_offers_them(repo, tmp_path, buildgrid, size):
    """A server offering zstd (the proxy offers it for BuildGrid, which stores the plain blob)
    gets `compressed-blobs/zstd/` ByteStream names past the batch limit and `compressor: ZSTD`
    batch calls under it; the clone restores every byte and BuildGrid holds the right digests."""
    proxy = Proxy(buildgrid.port, zstd=True)
    try:
        repo.write(shop_files(None, build_command=BIG.replace("SIZE", str(size)))).commit()
        env = proxied_env(proxy, buildgrid)
        cold = repo.vx("run", "build", "--all", env=env)
        assert cold.code == 0, cold.err
        other = clone(repo, tmp_path / "b")
        warm = other.vx("run", "build", "--all", env=env)
        assert warm.code == 0, warm.err
        assert set(warm.statuses().values()) == {("success", "remote")}, cold.err + warm.err
        assert outputs(other) == outputs(repo) and strays(other) == []
        if size > 4 << 20:
            assert len(proxy.resources) == 8
            assert all("/compressed-blobs/zstd/" in r for r in proxy.resources), proxy.resources
        else:
            assert not proxy.resources
            kinds = proxy.batch_compressors
            assert kinds.count(("BatchUpdateBlobs", ZSTD)) == 4, kinds
            reads = kinds.count(("BatchReadBlobs", ZSTD))
            assert 1 <= reads <= 4 and len(kinds) == 4 + reads, kinds
            assert len(proxy.blobs_read()) == 4
        assert_stored_as_built(buildgrid, repo, env)
    finally:
        proxy.stop()


@pytest.mark.feature("RC-09")
def test_headers_reach_the_server_that_checks_them(repo, tmp_path):
    """BuildGrid's header authorization serves only calls whose `x-request-actor` matches: with
    VX_REAPI_HEADERS the second clone hits what the first uploaded; without it the server refuses
    and the layer is off with one line. The header's value is printed nowhere."""
    secret = "vxcanary-actor-5e1f"
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests", actor=secret)
    try:
        repo.write(shop_files(None)).commit()
        bare = repo.vx("run", "build", "--all", env=server.env())
        assert bare.code == 0, bare.err
        assert set(bare.statuses().values()) == {("success", "miss")}
        assert bare.err.count("the remote cache is off for this run (check VX_REAPI_HEADERS") == 1
        env = {**server.env(), "VX_REAPI_HEADERS": f"x-request-actor={secret}"}
        keyed = clone(repo, tmp_path / "b")
        cold = keyed.vx("run", "build", "--all", env=env)
        assert cold.code == 0 and "warning" not in cold.err, cold.err
        other = clone(repo, tmp_path / "c")
        warm = other.vx("run", "build", "--all", env=env)
        assert warm.code == 0, warm.err
        assert set(warm.statuses().values()) == {("success", "remote")}, warm.err
        for res in (bare, cold, warm):
            assert secret not in res.out + res.err
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize("mtls", [False, True], ids=["tls", "mtls"])
def test_grpcs_with_a_private_ca_and_client_certificate(repo, tmp_path, mtls):
    """BuildGrid serving TLS with a CA made for the test: VX_REAPI_CA_CERT (and, when the server
    demands one, VX_REAPI_CLIENT_CERT/KEY) gives remote hits in a second clone. A wrong CA, or
    no client certificate, is a miss with one warning naming the handshake, never a failed
    build; no key material is ever printed."""
    tls = Tls(tmp_path / "tls")
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests", tls=tls, mtls=mtls)
    try:
        repo.write(shop_files(None)).commit()
        client = {}
        if mtls:
            client = {
                "VX_REAPI_CLIENT_CERT": str(tls.client_cert),
                "VX_REAPI_CLIENT_KEY": str(tls.client_key),
            }
        stranger = Tls(tmp_path / "other-ca", name="stranger")
        wrong = {**server.env(), **client, "VX_REAPI_CA_CERT": str(stranger.ca)}
        refused = {"the TLS handshake failed": repo.vx("run", "build", "--all", env=wrong)}
        if mtls:  # the right CA, but no certificate of our own
            bare = clone(repo, tmp_path / "d").vx("run", "build", "--all", env=server.env())
            refused["the server closed the TLS connection; if it wants a client certificate"] = bare
        for says, res in refused.items():
            assert res.code == 0, res.err
            assert set(res.statuses().values()) == {("success", "miss")}
            assert res.err.count(says) == 1, res.err
            assert "ssl_transport_security" not in res.err  # gRPC's own log lines stay quiet
        first = clone(repo, tmp_path / "b")
        cold = first.vx("run", "build", "--all", env={**server.env(), **client})
        assert cold.code == 0 and "warning" not in cold.err, cold.err
        assert set(cold.statuses().values()) == {("success", "miss")}
        other = clone(repo, tmp_path / "c")
        warm = other.vx("run", "build", "--all", env={**server.env(), **client})
        assert warm.code == 0, warm.err
        assert set(warm.statuses().values()) == {("success", "remote")}, warm.err
        assert outputs(other) == EXPECTED
        keys = [tls.client_key.read_text(), tls.server_key.read_text()]
        body = [line for k in keys for line in k.splitlines() if "PRIVATE KEY" not in line]
        for res in [*refused.values(), cold, warm]:
            assert not any(line in res.out + res.err for line in body)
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
def test_tls_files_named_in_the_workspace_file(repo, tmp_path):
    """`remoteCache.reapi.caCert` (a path from the workspace root, committed with the repo)
    trusts the private CA for a run started inside a package, as VX_REAPI_CA_CERT would."""
    tls = Tls(tmp_path / "tls")
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests", tls=tls)
    try:
        remote = {
            "reapi": {"endpoint": server.endpoint, "instance": "vx-tests", "caCert": "certs/ca.pem"}
        }
        repo.write({**shop_files(remote), "certs/ca.pem": tls.ca.read_text()}).commit()
        cold = repo.vx("run", "build", env={"CI": "1"}, cwd="packages/app")
        assert cold.code == 0 and "warning" not in cold.err, cold.err
        other = clone(repo, tmp_path / "b")
        warm = other.vx("run", "build", "--all", env={"CI": "1"})
        assert warm.code == 0, warm.err
        statuses = warm.statuses()
        assert {statuses[t] for t in ("lib#build", "ui#build", "app#build")} == {
            ("success", "remote")
        }
        assert statuses["docs#build"] == ("success", "miss")
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "reapi,says",
    [
        (
            {"endpoint": "grpc://127.0.0.1:1", "caCert": "ca.pem"},
            "`caCert` needs a grpcs:// endpoint",
        ),
        ({"endpoint": "grpcs://cache.example.com", "clientCert": "c.pem"}, "no `clientKey`"),
        ({"endpoint": "grpcs://cache.example.com", "clientKey": "c.key"}, "no `clientCert`"),
        (
            {"endpoint": "grpcs://cache.example.com", "tlsCertificate": "ca.pem"},
            "in vx it is `caCert`",
        ),
    ],
)
def test_bad_tls_config_is_refused(repo, reapi, says):
    assert_reapi_refused(repo, reapi, says)


@pytest.mark.feature("RC-09")
def test_a_10_mib_output_streams_over_bytestream_in_pieces(repo, tmp_path, buildgrid):
    """An artifact of 10 MiB of incompressible bytes goes up as one ByteStream Write of 1 MiB
    pieces and comes down as a ByteStream Read; the clone's output is byte for byte the same."""
    proxy = Proxy(buildgrid.port)
    try:
        ten = BIG.replace("SIZE", str(10 << 20))
        files = shop_files(None)
        from support.workspace import build_task

        files["packages/lib/vx.config.json"] = {"tasks": {"build": build_task(command=ten)}}
        repo.write(files).commit()
        env = proxied_env(proxy, buildgrid)
        cold = repo.vx("run", "build", "--all", env=env)
        assert cold.code == 0, cold.err
        (big,) = [r for r in proxy.resources if "/uploads/" in r]
        size = int(big.rsplit("/", 1)[1])
        assert size > 10 << 20 and proxy.write_pieces == [(size + (1 << 20) - 1) >> 20]
        other = clone(repo, tmp_path / "b")
        warm = other.vx("run", "build", "--all", env=env)
        assert warm.code == 0, warm.err
        assert set(warm.statuses().values()) == {("success", "remote")}, warm.err
        tail = big.split("/blobs/", 1)[1]
        assert [r for r in proxy.resources if "/uploads/" not in r] == [f"vx-tests/blobs/{tail}"]
        restored = outputs(other)
        assert len(restored["packages/lib/dist/big.bin"]) == 10 << 20
        assert restored == outputs(repo)
    finally:
        proxy.stop()


def _bomb(method: str, request: bytes) -> bytes:
    """A server offering zstd whose blob, named as 64 bytes, expands to 256 MiB of zeros."""
    import zstandard

    from vx.store.remote.reapi import ARTIFACT_PATH

    digest = re_pb.Digest(hash="ab" * 32, size_bytes=64)
    if method.endswith("/GetCapabilities"):
        cache = re_pb.CacheCapabilities(supported_compressors=[ZSTD])
        return re_pb.ServerCapabilities(cache_capabilities=cache).SerializeToString()
    if method.endswith("/GetActionResult"):
        out = re_pb.OutputFile(path=ARTIFACT_PATH, digest=digest)
        return re_pb.ActionResult(output_files=[out]).SerializeToString()
    if method.endswith("/BatchReadBlobs"):
        data = zstandard.ZstdCompressor(level=1).compress(bytes(256 << 20))
        reply = re_pb.BatchReadBlobsResponse.Response(digest=digest, data=data, compressor=ZSTD)
        return re_pb.BatchReadBlobsResponse(responses=[reply]).SerializeToString()
    return b""


@pytest.mark.feature("RC-09")
def test_a_zstd_blob_expanding_past_its_digest_is_stopped(repo):
    """A hostile server's zstd blob that decompresses far past its digest's size is cut off at
    the first piece over it: a miss (`bad response`), nothing of it kept, the build local."""
    server = GarbageServer(_bomb)
    try:
        repo.write(shop_files(None)).commit()
        res = repo.vx("run", "build", "--all", env={"VX_REAPI_ENDPOINT": server.endpoint})
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        assert outputs(repo) == EXPECTED and strays(repo) == []
        assert res.err.count("the server sent more than the digest says") == 1, res.err
        assert not list((repo.root / ".vx/cache").glob("*.remote.tmp"))
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
def test_a_tls_file_holding_no_pem_turns_the_layer_off_with_one_line(repo, tmp_path):
    """A CA file that is not PEM (DER, or the wrong file) is said once, before any connection,
    and the build runs locally; gRPC logs nothing of its own."""
    der = tmp_path / "ca.der"
    der.write_bytes(b"0\x82\x01\x0a" + bytes(64))
    repo.write(shop_files(None)).commit()
    env = {"VX_REAPI_ENDPOINT": "grpcs://127.0.0.1:1", "VX_REAPI_CA_CERT": str(der)}
    res = repo.vx("run", "build", "--all", env=env)
    assert res.code == 0, res.err
    assert set(res.statuses().values()) == {("success", "miss")}
    line = f"cannot be used: the CA certificate {der} holds no PEM CA certificate; the remote cache is off"
    assert res.err.count(line) == 1, res.err
    assert "ssl_" not in res.err and "Traceback" not in res.err
