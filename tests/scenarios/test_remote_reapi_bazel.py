"""Bazel and vx on one REAPI server (RC-09): the CAS is shared by digest, the ActionCache is not.

vx stores a task under a synthetic action digest (`sha256("vx-reapi-v1\\0" + key)`) that no Bazel
Action can hash to, so the two never read each other's ActionCache entries; a blob, though, is
named by the SHA-256 of its bytes for every client. Here Debian's `bazel-bootstrap` (4.2.3) reads
through BuildGrid the artifact blob vx uploaded, by its digest alone. Skips without `bazel`."""

import shutil
import subprocess

import grpc
import pytest
from support.reapi_proxy import Proxy
from support.reapi_servers import BuildGrid
from support.remote_servers import shop_files
from test_remote_reapi import action_results, keys_of

from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb

BUILD = 'genrule(name = "blob", outs = ["out.bin"], cmd = "echo bazel-made > $@")\n'


def bazel(workspace, root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bazel", "--batch", "--nohome_rc", f"--output_user_root={root}", *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.feature("RC-09")
def test_bazel_reads_the_blob_vx_wrote_by_its_digest(repo, tmp_path):
    """vx uploads its artifacts; Bazel builds a genrule against the same server and uploads its
    ActionResult. That entry is then pointed at the digest of vx's artifact (what a shared CAS
    means: the digest is the whole contract), and after `bazel clean` Bazel's remote cache hit
    downloads vx's blob, byte for byte vx's local artifact."""
    if shutil.which("bazel") is None:
        pytest.skip("no bazel (apt-get install bazel-bootstrap)")
    server = BuildGrid(tmp_path / "bgd", instance="vx-tests")
    proxy = Proxy(server.port)
    try:
        repo.write(shop_files(None)).commit()
        cold = repo.vx("run", "build", "--all", env={**server.env()})
        assert cold.code == 0, cold.err
        key = keys_of(repo, {})["lib#build"]
        (vx_blob,) = action_results(server, [key])[key].output_files
        artifact = (repo.root / ".vx/cache" / f"{key}.tar.zst").read_bytes()

        ws, root = tmp_path / "bazel-ws", tmp_path / "bazel-root"
        ws.mkdir()
        (ws / "WORKSPACE").write_text("")
        (ws / "BUILD").write_text(BUILD)
        remote = [
            f"--remote_cache=grpc://127.0.0.1:{proxy.port}",
            "--remote_instance_name=vx-tests",
        ]
        first = bazel(ws, root, "build", *remote, "//:blob")
        assert first.returncode == 0, first.stderr
        assert (ws / "bazel-bin/out.bin").read_bytes() == b"bazel-made\n"
        (update,) = [
            re_pb.UpdateActionResultRequest.FromString(raw)
            for method, raw in proxy.requests
            if method == "UpdateActionResult"
        ]
        (out,) = update.action_result.output_files
        out.digest.CopyFrom(vx_blob.digest)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            channel.unary_unary(
                "/build.bazel.remote.execution.v2.ActionCache/UpdateActionResult",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=re_pb.ActionResult.FromString,
            )(update, timeout=30)

        assert bazel(ws, root, "clean").returncode == 0
        second = bazel(ws, root, "build", *remote, "//:blob")
        assert second.returncode == 0, second.stderr
        assert "1 remote cache hit" in second.stderr, second.stderr
        assert (ws / "bazel-bin/out.bin").read_bytes() == artifact
        d = vx_blob.digest  # Bazel 4.2.3 downloads over ByteStream, by the digest alone
        reads = [r for r in proxy.resources if "/uploads/" not in r]
        assert f"vx-tests/blobs/{d.hash}/{d.size_bytes}" in reads, reads
    finally:
        proxy.stop()
        server.stop()
