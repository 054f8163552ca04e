"""A loopback gRPC proxy in front of a real REAPI server (BuildGrid) for the REAPI scenarios
(RC-09): it forwards every call byte for byte and records what the client sent (method,
metadata, ByteStream resource names, the batch calls' compressors), so a test can see the wire.

Three options change what the client is told, never what the server stores:
- `capabilities`: rewrites the server's GetCapabilities reply (a smaller batch limit, other
  digest functions), to check the client honours what it is told.
- `zstd=True`: offers zstd blobs, which BuildGrid 0.9.1 does not. The proxy then stands in for a
  server that does: `compressed-blobs/zstd/...` ByteStream calls and zstd batch calls are
  decompressed on the way in and compressed on the way out, so BuildGrid stores plain blobs
  under the same digests and the test can read them back itself.
- `spoil_first_blob=True`: the first blob a BatchReadBlobs call asks for comes back with one
  byte changed in that reply and every later one (`spoiled` is its digest).
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Callable, Iterator

import grpc
import zstandard

from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb
from vx.store.remote.reapi_pb.google.bytestream import bytestream_pb2 as bs_pb

ZSTD = re_pb.Compressor.ZSTD
_CAS = "/build.bazel.remote.execution.v2.ContentAddressableStorage/"
_BS = "/google.bytestream.ByteStream/"


class Proxy:
    """Forwards to `upstream_port` on 127.0.0.1; `calls` holds (method, metadata) in order,
    `resources` every ByteStream resource name, `batch_compressors` each batch call's."""

    def __init__(
        self,
        upstream_port: int,
        *,
        capabilities: Callable[[re_pb.ServerCapabilities], None] | None = None,
        zstd: bool = False,
        spoil_first_blob: bool = False,
    ):
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.resources: list[str] = []
        self.batch_compressors: list[tuple[str, int]] = []
        self.write_pieces: list[int] = []  # how many WriteRequests each ByteStream Write sent
        self.requests: list[tuple[str, bytes]] = []  # every other call's request messages
        self._lock = threading.Lock()
        self._edit = capabilities
        self._zstd = zstd
        # the first blob asked for in a BatchReadBlobs call: its bytes spoiled in every reply
        self._spoil = spoil_first_blob
        self.spoiled: str | None = None
        self._up = grpc.insecure_channel(
            f"127.0.0.1:{upstream_port}",
            options=[("grpc.max_receive_message_length", 64 << 20)],
        )
        proxy = self

        class Generic(grpc.GenericRpcHandler):
            def service(self, details):
                return grpc.stream_stream_rpc_method_handler(proxy._handler(details.method))

        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8),
            options=[("grpc.max_receive_message_length", 64 << 20)],
        )
        self.server.add_generic_rpc_handlers((Generic(),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.endpoint = f"grpc://127.0.0.1:{self.port}"

    def methods(self) -> list[str]:
        with self._lock:
            return [m.rsplit("/", 1)[-1] for m, _ in self.calls]

    def blobs_read(self) -> list[str]:
        """Every digest hash the client asked for in BatchReadBlobs calls, in order (one call may
        ask for many downloads' blobs: how many share a call depends on timing)."""
        with self._lock:
            raws = [raw for method, raw in self.requests if method == "BatchReadBlobs"]
        return [d.hash for raw in raws for d in re_pb.BatchReadBlobsRequest.FromString(raw).digests]

    def stop(self) -> None:
        self.server.stop(grace=None)
        self._up.close()

    # ------------------------------------------------------------ forwarding

    def _handler(self, method: str):
        def handle(requests: Iterator[bytes], context) -> Iterator[bytes]:
            metadata = {k: v for k, v in context.invocation_metadata() if k != "user-agent"}
            with self._lock:
                self.calls.append((method, metadata))
            try:
                yield from self._route(method, requests, tuple(metadata.items()))
            except grpc.RpcError as exc:
                context.abort(exc.code(), exc.details() or "")

        return handle

    def _forward(self, method: str, requests: Iterator[bytes], metadata) -> Iterator[bytes]:
        call = self._up.stream_stream(method)
        yield from call(self._kept(method, requests), metadata=metadata, timeout=60)

    def _kept(self, method: str, requests: Iterator[bytes]) -> Iterator[bytes]:
        for raw in requests:
            if not method.startswith(_BS):
                with self._lock:
                    self.requests.append((method.rsplit("/", 1)[-1], raw))
            yield raw

    def _route(self, method: str, requests: Iterator[bytes], metadata) -> Iterator[bytes]:
        name = method.rsplit("/", 1)[-1]
        if name == "GetCapabilities":
            for raw in self._forward(method, requests, metadata):
                yield self._capabilities(raw)
        elif method == _BS + "Write":
            yield from self._write(requests, metadata)
        elif method == _BS + "Read":
            yield from self._read(requests, metadata)
        elif method == _CAS + "BatchUpdateBlobs":
            yield from self._batch_update(requests, metadata)
        elif method == _CAS + "BatchReadBlobs":
            yield from self._batch_read(requests, metadata)
        else:
            yield from self._forward(method, requests, metadata)

    def _capabilities(self, raw: bytes) -> bytes:
        reply = re_pb.ServerCapabilities.FromString(raw)
        if self._zstd:
            reply.cache_capabilities.supported_compressors.append(ZSTD)
            reply.cache_capabilities.supported_batch_update_compressors.append(ZSTD)
        if self._edit is not None:
            self._edit(reply)
        return reply.SerializeToString()

    # ------------------------------------------------------------ ByteStream

    def _write(self, requests: Iterator[bytes], metadata) -> Iterator[bytes]:
        messages = [bs_pb.WriteRequest.FromString(r) for r in requests]
        name = messages[0].resource_name if messages else ""
        with self._lock:
            self.resources.append(name)
            self.write_pieces.append(len(messages))
        data = b"".join(m.data for m in messages)
        if "compressed-blobs/zstd/" in name and self._zstd:
            plain = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            name = name.replace("compressed-blobs/zstd/", "blobs/")
        else:
            plain = data
        chunks = [
            bs_pb.WriteRequest(
                resource_name=name if at == 0 else "",
                write_offset=at,
                finish_write=at + (1 << 20) >= len(plain),
                data=plain[at : at + (1 << 20)],
            ).SerializeToString()
            for at in range(0, max(len(plain), 1), 1 << 20)
        ]
        for raw in self._forward(_BS + "Write", iter(chunks), metadata):
            reply = bs_pb.WriteResponse.FromString(raw)
            if plain is not data:
                reply.committed_size = len(data)  # compressed uploads count the bytes sent
            yield reply.SerializeToString()

    def _read(self, requests: Iterator[bytes], metadata) -> Iterator[bytes]:
        (request,) = [bs_pb.ReadRequest.FromString(r) for r in requests]
        with self._lock:
            self.resources.append(request.resource_name)
        compressed = self._zstd and "compressed-blobs/zstd/" in request.resource_name
        if compressed:
            request.resource_name = request.resource_name.replace(
                "compressed-blobs/zstd/", "blobs/"
            )
        replies = self._forward(_BS + "Read", iter([request.SerializeToString()]), metadata)
        if not compressed:
            yield from replies
            return
        plain = b"".join(bs_pb.ReadResponse.FromString(r).data for r in replies)
        packed = zstandard.ZstdCompressor(level=3).compress(plain)
        for at in range(0, len(packed), 1 << 20):
            yield bs_pb.ReadResponse(data=packed[at : at + (1 << 20)]).SerializeToString()

    # ------------------------------------------------------------ batches

    def _batch_update(self, requests: Iterator[bytes], metadata) -> Iterator[bytes]:
        (request,) = [re_pb.BatchUpdateBlobsRequest.FromString(r) for r in requests]
        for blob in request.requests:
            with self._lock:
                self.batch_compressors.append(("BatchUpdateBlobs", blob.compressor))
            if blob.compressor == ZSTD and self._zstd:
                blob.data = zstandard.ZstdDecompressor().decompressobj().decompress(blob.data)
                blob.compressor = re_pb.Compressor.IDENTITY
        yield from self._forward(
            _CAS + "BatchUpdateBlobs", iter([request.SerializeToString()]), metadata
        )

    def _batch_read(self, requests: Iterator[bytes], metadata) -> Iterator[bytes]:
        (request,) = [re_pb.BatchReadBlobsRequest.FromString(r) for r in requests]
        wants = ZSTD in request.acceptable_compressors
        with self._lock:
            self.batch_compressors.append(("BatchReadBlobs", ZSTD if wants else 0))
            if self._spoil and self.spoiled is None and request.digests:
                self.spoiled = request.digests[0].hash
        del request.acceptable_compressors[:]
        for raw in self._forward(
            _CAS + "BatchReadBlobs", iter([request.SerializeToString()]), metadata
        ):
            reply = re_pb.BatchReadBlobsResponse.FromString(raw)
            for blob in reply.responses:  # the same length: only the hash can tell
                if blob.digest.hash == self.spoiled and blob.data:
                    blob.data = blob.data[:-1] + bytes([blob.data[-1] ^ 0xFF])
            if wants and self._zstd:
                for blob in reply.responses:
                    if blob.status.code == 0:
                        blob.data = zstandard.ZstdCompressor(level=3).compress(blob.data)
                        blob.compressor = ZSTD
            yield reply.SerializeToString()
