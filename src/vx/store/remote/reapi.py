"""A Bazel Remote Execution API v2 server used as a remote cache (BuildGrid, BuildBuddy, Buildbarn,
bazel-remote, NativeLink): the ActionCache and the CAS, nothing executed remotely.

The mapping is the TypeScript vx's: a task key becomes the synthetic action digest
`sha256("vx-reapi-v1\\0" + key)` (no Action blob exists; the prefix keeps vx's entries apart from
real Bazel actions on a shared server), the artifact (the zstd tar) is one CAS blob named in
`output_files`, and the task's duration rides in `stdout_raw`. Every blob read back is re-hashed
against its digest, so a corrupt or substituted blob is a miss. Every call has a deadline.

grpc and the vendored stubs are imported here, when a REAPI layer opens: never on a run
without one.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import BinaryIO, Iterable, Iterator
from urllib.parse import urlsplit

import grpc

from vx.store.remote.layer import (
    BAD_RESPONSE,
    REFUSED,
    REJECTED,
    SERVER_ERROR,
    TIMEOUT,
    TOO_LARGE,
    UNREACHABLE,
    Found,
    RemoteFailure,
    RemoteSettings,
    Sink,
    checked_key,
)
from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb
from vx.store.remote.reapi_pb.google.bytestream import bytestream_pb2 as bs_pb

ACTION_PREFIX = b"vx-reapi-v1\0"
ARTIFACT_PATH = "vx-artifact.tar.zst"
DURATION_PREFIX = b"vx-duration-ms="
# Blobs up to this size go in one batch call; larger ones stream over ByteStream. Servers
# advertise a cap (BuildGrid and Bazel's default: 4 MiB less a little); this stays under it
# without spending a GetCapabilities round trip on every run.
MAX_BATCH_BYTES = 3 << 20
CHUNK_BYTES = 1 << 20

_AC = "/build.bazel.remote.execution.v2.ActionCache/"
_CAS = "/build.bazel.remote.execution.v2.ContentAddressableStorage/"
_BS = "/google.bytestream.ByteStream/"

_KIND = {
    grpc.StatusCode.UNAVAILABLE: UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: TIMEOUT,
    grpc.StatusCode.UNAUTHENTICATED: REFUSED,
    grpc.StatusCode.PERMISSION_DENIED: REFUSED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: TOO_LARGE,
    grpc.StatusCode.INVALID_ARGUMENT: REJECTED,
    grpc.StatusCode.FAILED_PRECONDITION: REJECTED,
}
# What health.py reads from `status`: 401 turns the whole layer off, 403 on an upload only uploads.
_STATUS = {grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403}


def action_digest(key: str) -> re_pb.Digest:
    data = ACTION_PREFIX + checked_key(key).encode()
    return re_pb.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class ReapiLayer:
    """One REAPI v2 server (`grpc://host:port` or `grpcs://`), one instance name."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        parts = urlsplit(settings.url)
        target = f"{parts.netloc}" if parts.port else f"{parts.netloc}:443"  # grpcs only (checked)
        options = [
            ("grpc.max_receive_message_length", MAX_BATCH_BYTES + CHUNK_BYTES),
            ("grpc.enable_retries", 0),  # a failure is a miss; health.py decides what comes next
        ]
        if settings.url.startswith("grpcs://"):
            creds = grpc.ssl_channel_credentials()
            self.channel = grpc.secure_channel(target, creds, options=options)
        else:
            self.channel = grpc.insecure_channel(target, options=options)
        self.metadata = tuple((k.lower(), v) for k, v in settings.headers)
        self.instance = settings.instance

    # ------------------------------------------------------------ the seam

    def has(self, key: str) -> Found | None:
        result = self._action_result(key)
        if result is None:
            return None
        blob = _artifact(result)
        return Found(blob.size_bytes, _duration(result))

    def get(self, key: str, sink: Sink) -> Found | None:
        result = self._action_result(key)
        if result is None:
            return None
        blob = _artifact(result)
        if blob.size_bytes > self.settings.max_artifact_bytes:
            raise RemoteFailure(
                TOO_LARGE, f"the artifact is {blob.size_bytes} bytes, over the configured limit"
            )
        if not self._read(blob, sink):
            return None  # the AC outlived its CAS blob (evicted): a miss
        return Found(blob.size_bytes, _duration(result))

    def put(self, key: str, src: BinaryIO, size: int, duration_ms: float) -> None:
        """Upload the blob (unless the server has it), then the ActionResult that names it:
        in this order, so no entry ever points at a blob that is not there."""
        digest, seen = hashlib.sha256(), 0
        for chunk in iter(lambda: src.read(CHUNK_BYTES), b""):
            digest.update(chunk)
            seen += len(chunk)
        if seen != size:
            raise RemoteFailure(REJECTED, f"the artifact changed size while uploading ({size})")
        src.seek(0)
        blob = re_pb.Digest(hash=digest.hexdigest(), size_bytes=size)
        timeout = self.settings.upload_timeout_s
        missing = self._call(
            _CAS + "FindMissingBlobs",
            re_pb.FindMissingBlobsRequest(instance_name=self.instance, blob_digests=[blob]),
            re_pb.FindMissingBlobsResponse,
            timeout,
        )
        if any(d.hash == blob.hash for d in missing.missing_blob_digests):
            self._write(blob, src, timeout)
        result = re_pb.ActionResult(
            output_files=[re_pb.OutputFile(path=ARTIFACT_PATH, digest=blob)],
            exit_code=0,
            stdout_raw=DURATION_PREFIX + str(round(duration_ms)).encode(),
        )
        self._call(
            _AC + "UpdateActionResult",
            re_pb.UpdateActionResultRequest(
                instance_name=self.instance, action_digest=action_digest(key), action_result=result
            ),
            re_pb.ActionResult,
            timeout,
        )

    def close(self) -> None:
        self.channel.close()

    # ------------------------------------------------------------ calls

    def _call(self, method: str, request, reply_type, timeout: float):
        call = self.channel.unary_unary(
            method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=reply_type.FromString,
        )
        try:
            return call(request, timeout=timeout, metadata=self.metadata)
        except grpc.RpcError as exc:
            raise _failure(method, exc) from None

    def _action_result(self, key: str):
        """The ActionResult for `key`, or None on NOT_FOUND (a miss)."""
        request = re_pb.GetActionResultRequest(
            instance_name=self.instance,
            action_digest=action_digest(key),
            inline_stdout=True,
        )
        try:
            return self._call(
                _AC + "GetActionResult", request, re_pb.ActionResult, self.settings.timeout_s
            )
        except RemoteFailure as failure:
            if failure.status == 404:
                return None
            raise

    def _read(self, blob, sink: Sink) -> bool:
        """Fetch `blob` into `sink`, hashing as it comes; False when the server lacks it. A
        mismatch raises after the bytes are written: the caller drops its temp file."""
        digest, seen = hashlib.sha256(), 0
        if blob.size_bytes <= MAX_BATCH_BYTES:
            reply = self._call(
                _CAS + "BatchReadBlobs",
                re_pb.BatchReadBlobsRequest(instance_name=self.instance, digests=[blob]),
                re_pb.BatchReadBlobsResponse,
                self.settings.timeout_s,
            )
            found = [r for r in reply.responses if r.digest.hash == blob.hash]
            if not found or found[0].status.code == grpc.StatusCode.NOT_FOUND.value[0]:
                return False
            if found[0].status.code != 0:
                raise RemoteFailure(SERVER_ERROR, f"BatchReadBlobs: {found[0].status.message}")
            chunks: Iterable[bytes] = (found[0].data,)
        else:
            chunks = self._stream_read(blob)
        try:
            for chunk in chunks:
                seen += len(chunk)
                if seen > blob.size_bytes:
                    raise RemoteFailure(BAD_RESPONSE, "the server sent more than the digest says")
                digest.update(chunk)
                sink.write(chunk)
        except _Missing:
            return False
        if seen != blob.size_bytes or digest.hexdigest() != blob.hash:
            raise RemoteFailure(BAD_RESPONSE, "the artifact blob does not match its digest")
        return True

    def _stream_read(self, blob) -> Iterator[bytes]:
        name = self._resource(f"blobs/{blob.hash}/{blob.size_bytes}")
        call = self.channel.unary_stream(
            _BS + "Read",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=bs_pb.ReadResponse.FromString,
        )
        try:
            for reply in call(
                bs_pb.ReadRequest(resource_name=name),
                timeout=self.settings.timeout_s,
                metadata=self.metadata,
            ):
                yield reply.data
        except grpc.RpcError as exc:
            failure = _failure(_BS + "Read", exc)
            if failure.status == 404:
                raise _Missing() from None
            raise failure from None

    def _write(self, blob, src: BinaryIO, timeout: float) -> None:
        if blob.size_bytes <= MAX_BATCH_BYTES:
            data = src.read(blob.size_bytes)
            reply = self._call(
                _CAS + "BatchUpdateBlobs",
                re_pb.BatchUpdateBlobsRequest(
                    instance_name=self.instance,
                    requests=[re_pb.BatchUpdateBlobsRequest.Request(digest=blob, data=data)],
                ),
                re_pb.BatchUpdateBlobsResponse,
                timeout,
            )
            bad = [r.status.message for r in reply.responses if r.status.code != 0]
            if bad or not reply.responses:
                raise RemoteFailure(REJECTED, f"BatchUpdateBlobs: {bad[0] if bad else 'no reply'}")
            return
        name = self._resource(f"uploads/{uuid.uuid4()}/blobs/{blob.hash}/{blob.size_bytes}")

        def chunks() -> Iterator[bs_pb.WriteRequest]:
            # The server re-hashes what it receives, so a file changed since it was hashed is
            # refused there (INVALID_ARGUMENT), never stored under the wrong digest.
            for at in range(0, blob.size_bytes, CHUNK_BYTES):
                yield bs_pb.WriteRequest(
                    resource_name=name if at == 0 else "",
                    write_offset=at,
                    finish_write=at + CHUNK_BYTES >= blob.size_bytes,
                    data=src.read(CHUNK_BYTES),
                )

        call = self.channel.stream_unary(
            _BS + "Write",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=bs_pb.WriteResponse.FromString,
        )
        try:
            reply = call(chunks(), timeout=timeout, metadata=self.metadata)
        except grpc.RpcError as exc:
            raise _failure(_BS + "Write", exc) from None
        if reply.committed_size not in (blob.size_bytes, -1):
            raise RemoteFailure(REJECTED, f"ByteStream Write committed {reply.committed_size}")

    def _resource(self, tail: str) -> str:
        return f"{self.instance}/{tail}" if self.instance else tail


class _Missing(Exception):
    """ByteStream said NOT_FOUND: the blob was evicted after the ActionResult was read."""


def _artifact(result):
    """The one output file vx wrote; an entry without it is not vx's (or is broken)."""
    for f in result.output_files:
        if f.path == ARTIFACT_PATH and len(f.digest.hash) == 64:
            return f.digest
    raise RemoteFailure(BAD_RESPONSE, f"the action result names no {ARTIFACT_PATH}")


def _duration(result) -> float | None:
    raw = bytes(result.stdout_raw)
    if raw.startswith(DURATION_PREFIX):
        try:
            return float(raw[len(DURATION_PREFIX) :])
        except ValueError:
            return None
    return None


def _failure(method: str, exc: grpc.RpcError) -> RemoteFailure:
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    op = method.rsplit("/", 1)[-1]
    detail = f"{op}: {code.name}"
    if code == grpc.StatusCode.NOT_FOUND:
        return RemoteFailure(BAD_RESPONSE, detail, status=404)
    return RemoteFailure(_KIND.get(code, SERVER_ERROR), detail, status=_STATUS.get(code))
