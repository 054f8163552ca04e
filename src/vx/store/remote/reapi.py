"""A Bazel Remote Execution API v2 server used as a remote cache (BuildGrid, BuildBuddy, Buildbarn,
bazel-remote, NativeLink): the ActionCache and the CAS, nothing executed remotely.

The mapping is the TypeScript vx's: a task key becomes the synthetic action digest
`sha256("vx-reapi-v1\\0" + key)` (no Action blob exists; the prefix keeps vx's entries apart from
real Bazel actions on a shared server), the artifact (the zstd tar) is one CAS blob named in
`output_files`, and the task's duration rides in `stdout_raw`. Every blob read back is re-hashed
against its digest, so a corrupt or substituted blob is a miss. Every call has a deadline.

The server's capabilities are asked once, at the layer's first call: SHA-256 must be among its
digest functions (else the layer is off), its batch limit decides batch call or ByteStream, zstd
blobs are used when it offers them, a server that takes no ActionCache updates is read-only, and
an artifact over its `max_cas_blob_size_bytes` is not sent.

A transient status (RESOURCE_EXHAUSTED, UNAVAILABLE...) is tried again as `retry.py` decides,
and RESOURCE_EXHAUSTED lowers the calls in flight for the rest of the run: it is a server
pushing back, never an artifact too large. "Too large" is what the server says of a size.

grpc and the vendored stubs are imported here, when a REAPI layer opens: never on a run
without one.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import uuid
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Iterator, TypeVar, cast
from urllib.parse import urlsplit

# gRPC's C core logs on its own to stderr (a failed TLS handshake at INFO, past vx's one warning).
# It reads GRPC_VERBOSITY once, at import: quiet it then, unless the user set it. In the C
# environment alone (putenv), never in `os.environ`: a fresh clone imports this on a thread while
# the main one makes keys and task environments from `os.environ`.
_QUIET = "GRPC_VERBOSITY" not in os.environ
if _QUIET:
    os.putenv("GRPC_VERBOSITY", "ERROR")
try:
    import grpc
finally:
    if _QUIET:
        os.unsetenv("GRPC_VERBOSITY")
import zstandard  # noqa: E402

from vx.store.remote.layer import (  # noqa: E402
    BAD_RESPONSE,
    BUSY,
    READ_ONLY,
    REFUSED,
    REJECTED,
    SERVER_ERROR,
    TIMEOUT,
    TOO_LARGE,
    UNREACHABLE,
    UNSUPPORTED,
    Found,
    RemoteFailure,
    RemoteSettings,
    Sink,
    checked_key,
)
from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (  # noqa: E402
    remote_execution_pb2 as re_pb,
)
from vx.store.remote.reapi_pb.google.bytestream import bytestream_pb2 as bs_pb  # noqa: E402
from vx.store.remote.reapi_pb.google.rpc import status_pb2  # noqa: E402
from vx.store.remote.retry import (  # noqa: E402
    Refusal,
    Retrier,
    Throttle,
    calls_in_flight,
    retry_delay,
    size_violation,
)

T = TypeVar("T")

ACTION_PREFIX = b"vx-reapi-v1\0"
ARTIFACT_PATH = "vx-artifact.tar.zst"
DURATION_PREFIX = b"vx-duration-ms="
# A blob goes in one batch call when it and the request around it fit the server's advertised
# `max_batch_total_size_bytes`, and never past gRPC's default message cap, which most servers keep
# whatever they advertise; larger blobs stream over ByteStream.
BATCH_CEILING_BYTES = 4 << 20
BATCH_OVERHEAD = 1 << 10  # the request's own fields around the blob (instance, digest, framing)
MAX_BATCH_BYTES = 3 << 20  # what every server takes in one batch call, capabilities unasked
CHUNK_BYTES = 1 << 20
KEEPALIVE_MS = 300_000
ZSTD_LEVEL = 1  # the artifact is a zstd tar already: zstd blobs are for servers that store them so
SHA256 = re_pb.DigestFunction.SHA256
ZSTD = re_pb.Compressor.ZSTD

_AC = "/build.bazel.remote.execution.v2.ActionCache/"
_CAS = "/build.bazel.remote.execution.v2.ContentAddressableStorage/"
_BS = "/google.bytestream.ByteStream/"
_CAPS = "/build.bazel.remote.execution.v2.Capabilities/"

# Calls that change nothing on the server: a passed deadline is tried again on these alone.
READS = frozenset(
    {"GetCapabilities", "GetActionResult", "FindMissingBlobs", "BatchReadBlobs", "Read",
     "GetOperation", "GetTree"}
)  # fmt: skip
_DETAILS = "grpc-status-details-bin"

_KIND = {
    grpc.StatusCode.UNAVAILABLE: UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: TIMEOUT,
    grpc.StatusCode.UNAUTHENTICATED: REFUSED,
    grpc.StatusCode.PERMISSION_DENIED: REFUSED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: BUSY,
    grpc.StatusCode.INVALID_ARGUMENT: REJECTED,
    grpc.StatusCode.FAILED_PRECONDITION: REJECTED,
}
# What health.py reads from `status`: 401 turns the whole layer off, 403 on an upload only uploads.
_STATUS = {grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403}


def action_digest(key: str) -> re_pb.Digest:
    data = ACTION_PREFIX + checked_key(key).encode()
    return re_pb.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the server said it can do, as far as a cache client cares."""

    batch_bytes: int  # the largest blob sent or read in one batch call
    zstd: bool  # ByteStream `compressed-blobs/zstd/` and zstd batch reads
    zstd_batch_update: bool  # BatchUpdateBlobs with `compressor: ZSTD`
    updates: bool  # UpdateActionResult allowed
    max_blob: int = 0  # the largest blob the server stores (0: no limit said)


def capabilities_of(reply) -> Capabilities:
    """Read a ServerCapabilities; raises when SHA-256 is not offered (vx hashes nothing else)."""
    cache = reply.cache_capabilities
    functions = list(cache.digest_functions)
    if functions and SHA256 not in functions:  # a server listing none predates the field
        names = ", ".join(_digest_name(f) for f in functions)
        raise RemoteFailure(UNSUPPORTED, f"offers no SHA-256 digests (only {names})")
    advertised = cache.max_batch_total_size_bytes  # 0: no limit of its own
    limit = min(advertised, BATCH_CEILING_BYTES) if advertised > 0 else BATCH_CEILING_BYTES
    updates = True
    if cache.HasField("action_cache_update_capabilities"):
        updates = cache.action_cache_update_capabilities.update_enabled
    return Capabilities(
        batch_bytes=max(limit - BATCH_OVERHEAD, 0),
        zstd=ZSTD in cache.supported_compressors,
        zstd_batch_update=ZSTD in cache.supported_batch_update_compressors,
        updates=updates,
        max_blob=max(cache.max_cas_blob_size_bytes, 0),
    )


def _digest_name(value: int) -> str:
    try:
        return re_pb.DigestFunction.Value.Name(value)
    except ValueError:  # a function newer than these stubs
        return str(value)


class ReapiLayer:
    """One REAPI v2 server (`grpc://host:port` or `grpcs://`), one instance name."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        parts = urlsplit(settings.url)
        target = f"{parts.netloc}" if parts.port else f"{parts.netloc}:443"  # grpcs only (checked)
        options = [
            ("grpc.max_receive_message_length", BATCH_CEILING_BYTES + CHUNK_BYTES),
            ("grpc.enable_retries", 0),  # a failure is a miss; health.py decides what comes next
            # Pings while a call is open (an Execute stream can wait long with no message), so a
            # connection to a server that stopped answering ends. Not more often than a gRPC
            # server takes by default (5 minutes apart, else GOAWAY too_many_pings), not
            # without calls, and not capped by the client's own sending (it sends nothing then).
            ("grpc.keepalive_time_ms", KEEPALIVE_MS),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        if settings.url.startswith("grpcs://"):
            self.channel = grpc.secure_channel(target, _tls(settings), options=options)
        else:
            self.channel = grpc.insecure_channel(target, options=options)
        self.metadata = tuple((k.lower(), v) for k, v in settings.headers)
        self.instance = settings.instance
        self._caps: Capabilities | RemoteFailure | None = None
        self._caps_lock = threading.Lock()
        self._caps_failures = 0  # how many times asking GetCapabilities failed
        self._caps_failed: RemoteFailure | None = None  # how the last time failed
        self.retrier = Retrier(Throttle(calls_in_flight(settings.max_concurrency)))
        self._batched = _BlobReads(self._batch_read)
        self._stubs: dict[tuple, grpc.UnaryUnaryMultiCallable] = {}  # by method, for `_call`
        self.tell: Callable[[str, str], None] | None = None  # where the pushback line goes

    def listen(self, tell: Callable[[str, str], None]) -> None:
        """Say what the run should hear (`tell(message, level)`): the pushback line, once."""
        self.tell = tell

    @property
    def fetch_width(self) -> int:
        """How many downloads the run keeps going at once: as many as calls may be in flight."""
        return calls_in_flight(self.settings.max_concurrency)

    # ------------------------------------------------------------ the seam

    def capabilities(self) -> Capabilities:
        """The server's capabilities, asked once (pool threads wait for the one answer). A
        transport failure is asked again next time, but not by the threads that waited for it:
        they take it as theirs. An unusable answer stands for the run."""
        failures = self._caps_failures
        with self._caps_lock:
            if self._caps is None:
                if self._caps_failures != failures and self._caps_failed is not None:
                    raise self._caps_failed  # failed while this thread waited for the answer
                try:
                    reply = self._call(
                        _CAPS + "GetCapabilities",
                        re_pb.GetCapabilitiesRequest(instance_name=self.instance),
                        re_pb.ServerCapabilities,
                        self.settings.timeout_s,
                    )
                    self._caps = capabilities_of(reply)
                except RemoteFailure as failure:
                    if failure.kind == UNSUPPORTED:
                        self._caps = failure
                    elif failure.status == 501:  # no Capabilities service: assume the basics
                        self._caps = Capabilities(MAX_BATCH_BYTES, False, False, True)
                    else:
                        self._caps_failed = failure
                        self._caps_failures += 1
                        raise
            if isinstance(self._caps, RemoteFailure):
                raise self._caps
            return self._caps

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
        caps = self.capabilities()
        if not caps.updates:
            raise RemoteFailure(READ_ONLY, "takes no ActionCache updates (update_enabled is false)")
        if caps.max_blob and size > caps.max_blob:
            raise RemoteFailure(
                TOO_LARGE, f"the artifact is {size} bytes, over the server's {caps.max_blob}"
            )
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
            re_pb.FindMissingBlobsRequest(
                instance_name=self.instance, blob_digests=[blob], digest_function=SHA256
            ),
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
                instance_name=self.instance,
                action_digest=action_digest(key),
                action_result=result,
                digest_function=SHA256,
            ),
            re_pb.ActionResult,
            timeout,
        )

    def close(self) -> None:
        self.retrier.close()
        self.channel.close()
        throttle = self.retrier.throttle
        if self.tell is not None and throttle.cuts:
            self.tell(
                f"remote cache: {self.settings.endpoint} pushed back (RESOURCE_EXHAUSTED: too "
                f"many calls at once) {self.retrier.pushed} times; vx lowered its calls in "
                f"flight to {throttle.limit} for the rest of the run and tried each again "
                "(VX_REAPI_MAX_CONCURRENCY caps them from the start)",
                "info",
            )

    # ------------------------------------------------------------ calls

    def _call(self, method: str, request, reply_type, timeout: float):
        call = self._stubs.get((method, reply_type))
        if call is None:  # made once a method: making one costs CPU on every call otherwise
            call = self._stubs[method, reply_type] = self.channel.unary_unary(
                method,
                request_serializer=_serialized,
                response_deserializer=reply_type.FromString,
            )

        def attempt(deadline: float):
            try:
                return call(request, timeout=deadline, metadata=self.metadata)
            except grpc.RpcError as exc:
                raise _refusal(exc) from None

        return self._tried(method, attempt, timeout)

    def _tried(self, method: str, attempt: Callable[[float], T], timeout: float) -> T:
        """`attempt` as the retrier tries it; its last refusal as a RemoteFailure."""
        reading = method.rsplit("/", 1)[-1] in READS
        try:
            return self.retrier.run(attempt, timeout_s=timeout, reading=reading)
        except Refusal as refusal:
            cause = refusal.cause
            if isinstance(cause, grpc.RpcError):
                raise self._failure(method, cause) from None
            raise RemoteFailure(UNREACHABLE, f"{method.rsplit('/', 1)[-1]}: {cause}") from None

    def _action_result(self, key: str):
        """The ActionResult for `key`, or None on NOT_FOUND (a miss)."""
        self.capabilities()
        request = re_pb.GetActionResultRequest(
            instance_name=self.instance,
            action_digest=action_digest(key),
            inline_stdout=True,
            digest_function=SHA256,
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
        caps = self.capabilities()
        digest, seen = hashlib.sha256(), 0
        if blob.size_bytes <= caps.batch_bytes:
            found = self._batched.read(blob, caps)
            if found is None or found.status.code == grpc.StatusCode.NOT_FOUND.value[0]:
                return False
            if found.status.code != 0:
                raise RemoteFailure(SERVER_ERROR, f"BatchReadBlobs: {found.status.message}")
            chunks: Iterable[bytes] = (found.data,)
            if found.compressor == ZSTD:
                chunks = _unzstd(chunks)
            elif found.compressor != re_pb.Compressor.IDENTITY:
                raise RemoteFailure(BAD_RESPONSE, "BatchReadBlobs: a compressor vx did not ask for")
        else:
            chunks = self._stream_read(blob, caps.zstd)
            if caps.zstd:
                chunks = _unzstd(chunks)
        try:
            for chunk in chunks:
                seen += len(chunk)
                if seen > blob.size_bytes:
                    raise RemoteFailure(BAD_RESPONSE, "the server sent more than the digest says")
                digest.update(chunk)
                sink.write(chunk)
        except _Missing:
            return False
        except zstandard.ZstdError:
            raise RemoteFailure(BAD_RESPONSE, "the zstd blob does not decompress") from None
        if seen != blob.size_bytes or digest.hexdigest() != blob.hash:
            raise RemoteFailure(BAD_RESPONSE, "the artifact blob does not match its digest")
        return True

    def _batch_read(self, blobs: list, caps: Capabilities) -> dict[str, object]:
        """One BatchReadBlobs call for `blobs` (distinct digests): each digest's response, by
        hash; a digest the reply leaves out is absent (a miss for whoever wanted it)."""
        reply = self._call(
            _CAS + "BatchReadBlobs",
            re_pb.BatchReadBlobsRequest(
                instance_name=self.instance,
                digests=blobs,
                acceptable_compressors=[ZSTD] if caps.zstd else [],
                digest_function=SHA256,
            ),
            re_pb.BatchReadBlobsResponse,
            self.settings.timeout_s,
        )
        wanted = {b.hash for b in blobs}
        out: dict[str, object] = {}
        for r in reply.responses:  # only what was asked; the first answer for a digest
            if r.digest.hash in wanted and r.digest.hash not in out:
                out[r.digest.hash] = r
        return out

    def _stream_read(self, blob, zstd: bool) -> Iterator[bytes]:
        """The blob's bytes over ByteStream. Tried again until its first message arrives (past
        that, bytes are in the sink: a cut stream is a miss); it streams outside the throttle."""
        kind = "compressed-blobs/zstd" if zstd else "blobs"
        name = self._resource(f"{kind}/{blob.hash}/{blob.size_bytes}")
        call = self.channel.unary_stream(
            _BS + "Read",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=bs_pb.ReadResponse.FromString,
        )

        def opened(deadline: float):
            stream = call(
                bs_pb.ReadRequest(resource_name=name), timeout=deadline, metadata=self.metadata
            )
            try:
                return stream, next(stream, None)
            except grpc.RpcError as exc:
                raise _refusal(exc) from None

        try:
            stream, first = self._tried(_BS + "Read", opened, self.settings.timeout_s)
        except RemoteFailure as refused:
            if refused.status == 404:
                raise _Missing() from None
            raise
        if first is None:
            return
        try:
            yield first.data
            for reply in stream:
                yield reply.data
        except grpc.RpcError as exc:
            failure = self._failure(_BS + "Read", exc)
            if failure.status == 404:
                raise _Missing() from None
            raise failure from None

    def _write(self, blob, src: BinaryIO, timeout: float) -> None:
        caps = self.capabilities()
        if blob.size_bytes <= caps.batch_bytes:
            data = src.read(blob.size_bytes)
            compressor = re_pb.Compressor.IDENTITY
            if caps.zstd_batch_update:
                packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
                if len(packed) <= caps.batch_bytes:  # incompressible bytes grow a little
                    data, compressor = packed, ZSTD
            reply = self._call(
                _CAS + "BatchUpdateBlobs",
                re_pb.BatchUpdateBlobsRequest(
                    instance_name=self.instance,
                    requests=[
                        re_pb.BatchUpdateBlobsRequest.Request(
                            digest=blob, data=data, compressor=compressor
                        )
                    ],
                    digest_function=SHA256,
                ),
                re_pb.BatchUpdateBlobsResponse,
                timeout,
            )
            bad = [r.status.message for r in reply.responses if r.status.code != 0]
            if bad or not reply.responses:
                raise RemoteFailure(REJECTED, f"BatchUpdateBlobs: {bad[0] if bad else 'no reply'}")
            return
        self._stream_write(blob, src, timeout, caps.zstd)

    def _stream_write(self, blob, src: BinaryIO, timeout: float, zstd: bool) -> None:
        """The blob over ByteStream. A try the retrier repeats starts again from the first byte
        under a new upload name (Bazel asks QueryWriteStatus and resumes)."""
        kind = "compressed-blobs/zstd" if zstd else "blobs"
        start = src.tell()
        sent = 0

        def chunks(name: str) -> Iterator[bs_pb.WriteRequest]:
            # The server re-hashes what it receives, so a file changed since it was hashed is
            # refused there (INVALID_ARGUMENT), never stored under the wrong digest. Offsets
            # count the bytes on the wire (compressed ones, for zstd).
            nonlocal sent
            pieces = _zstd(src) if zstd else iter(lambda: src.read(CHUNK_BYTES), b"")
            piece = next(pieces, b"")
            while True:
                after = next(pieces, None)
                yield bs_pb.WriteRequest(
                    resource_name=name if sent == 0 else "",
                    write_offset=sent,
                    finish_write=after is None,
                    data=piece,
                )
                sent += len(piece)
                if after is None:
                    return
                piece = after

        call = self.channel.stream_unary(
            _BS + "Write",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=bs_pb.WriteResponse.FromString,
        )

        def attempt(deadline: float):
            nonlocal sent
            src.seek(start)
            sent = 0
            name = self._resource(f"uploads/{uuid.uuid4()}/{kind}/{blob.hash}/{blob.size_bytes}")
            try:
                return call(chunks(name), timeout=deadline, metadata=self.metadata)
            except grpc.RpcError as exc:
                raise _refusal(exc) from None

        reply = self._tried(_BS + "Write", attempt, timeout)
        if reply.committed_size not in (blob.size_bytes, sent, -1):
            raise RemoteFailure(REJECTED, f"ByteStream Write committed {reply.committed_size}")

    def _failure(self, method: str, exc: grpc.RpcError) -> RemoteFailure:
        failure = failure_of(method, exc)
        if failure.kind == UNREACHABLE and self.settings.url.startswith("grpcs://"):
            hint = _tls_hint(exc, self.settings)
            if hint:
                return RemoteFailure(UNREACHABLE, f"{failure.detail} ({hint})")
        return failure

    def _resource(self, tail: str) -> str:
        return f"{self.instance}/{tail}" if self.instance else tail


def _tls(settings: RemoteSettings) -> grpc.ChannelCredentials:
    """The channel's TLS: the given CA file's roots (or the system's), and a client certificate
    for mTLS. A file that cannot be read, or holds no PEM of its kind (a DER file, the wrong
    file), turns the layer off with one line; gRPC would only log its own lines and fail."""

    def read(path: str | None, what: str, marker: bytes) -> bytes | None:
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise RemoteFailure(
                UNSUPPORTED, f"cannot be used: the {what} {path} cannot be read ({exc.strerror})"
            ) from None
        if b"-----BEGIN " not in data or marker not in data:
            raise RemoteFailure(
                UNSUPPORTED, f"cannot be used: the {what} {path} holds no PEM {what}"
            )
        return data

    return grpc.ssl_channel_credentials(
        root_certificates=read(settings.ca_cert, "CA certificate", b"CERTIFICATE-----"),
        private_key=read(settings.client_key, "client key", b"PRIVATE KEY-----"),
        certificate_chain=read(settings.client_cert, "client certificate", b"CERTIFICATE-----"),
    )


def _serialized(message) -> bytes:
    return message.SerializeToString()


def _zstd(src: BinaryIO) -> Iterator[bytes]:
    """`src` as a zstd stream, in pieces of at most CHUNK_BYTES."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    yield from compressor.read_to_iter(src, read_size=CHUNK_BYTES, write_size=CHUNK_BYTES)


def _unzstd(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Decompress a zstd stream in bounded pieces: the caller stops reading once more comes than
    the digest says, so a small blob cannot expand into memory unchecked."""
    source = cast(BinaryIO, _Chunks(chunks))
    reader = zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True)
    while piece := reader.read(CHUNK_BYTES):
        yield piece


class _Chunks(io.RawIOBase):
    """An iterator of byte strings as a readable file (what zstandard's reader wants)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks, self._left = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while not self._left:
            piece = next(self._chunks, None)
            if piece is None:
                return b""
            self._left = piece
        if size < 0 or size >= len(self._left):
            out, self._left = self._left, b""
        else:
            out, self._left = self._left[:size], self._left[size:]
        return out


BATCH_READS_AT_ONCE = 4  # BatchReadBlobs calls in flight; more blob reads wait to share one
BATCH_BLOB_OVERHEAD = 128  # one more digest in a batch call: its hash, size and framing


class _Want:
    """One download's blob read, waiting to go in a batch call, then its answer."""

    __slots__ = ("blob", "ready", "lead", "response", "error")

    def __init__(self, blob):
        self.blob = blob
        self.ready = threading.Event()
        self.lead = False  # handed a call slot: this thread makes the next batch call
        self.response: object = None
        self.error: BaseException | None = None


class _BlobReads:
    """Many downloads' blob reads in few BatchReadBlobs calls: a hit is a lookup, then its blob,
    and a blob read that finds BATCH_READS_AT_ONCE calls out waits, with the others that come
    meanwhile, for the next call to take them all (up to the server's batch limit). The thread
    whose call ends hands its slot to the first waiter, which makes that call; nothing waits on a
    timer, and a blob read with a slot free goes at once, alone. Each download still checks its
    own blob against its digest (`ReapiLayer._read`): sharing a call shares no trust."""

    def __init__(self, call: Callable[[list, Capabilities], dict[str, object]]):
        self._call = call
        self._lock = threading.Lock()
        self._waiting: list[_Want] = []
        self._busy = 0

    def read(self, blob, caps: Capabilities):
        """The BatchReadBlobs response for `blob`, or None when the reply left it out."""
        want = _Want(blob)
        with self._lock:
            if self._busy < BATCH_READS_AT_ONCE:
                self._busy += 1
                want.lead = True
            else:
                self._waiting.append(want)
        if not want.lead:
            want.ready.wait()  # set by the call that took it, or when a slot is handed over
        if want.lead:
            self._lead(want, caps)
        if want.error is not None:
            raise want.error
        return want.response

    def _lead(self, want: _Want, caps: Capabilities) -> None:
        """Make one call for `want` and every waiter that fits beside it, then pass the slot on."""
        batch = [want]
        with self._lock:
            room = caps.batch_bytes - want.blob.size_bytes
            keep = []
            for other in self._waiting:
                cost = other.blob.size_bytes + BATCH_BLOB_OVERHEAD
                if cost <= room:
                    batch.append(other)
                    room -= cost
                else:
                    keep.append(other)
            self._waiting = keep
        try:
            distinct = {w.blob.hash: w.blob for w in batch}
            found = self._call(list(distinct.values()), caps)
            for w in batch:
                w.response = found.get(w.blob.hash)
        except BaseException as exc:  # every read in the call failed as the call did
            for w in batch:
                w.error = exc
        finally:
            with self._lock:
                nxt = self._waiting.pop(0) if self._waiting else None
                if nxt is None:
                    self._busy -= 1
            if nxt is not None:
                nxt.lead = True
                nxt.ready.set()
            for w in batch:
                if w is not want:
                    w.lead = False
                    w.ready.set()


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


def failure_of(method: str, exc: grpc.RpcError) -> RemoteFailure:
    """What a failed call is to the layer: its class (and the status health.py reads)."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    op = method.rsplit("/", 1)[-1]
    detail = f"{op}: {code.name}"
    if code == grpc.StatusCode.NOT_FOUND:
        return RemoteFailure(BAD_RESPONSE, detail, status=404)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return RemoteFailure(SERVER_ERROR, detail, status=501)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        said = size_violation(_details(exc))
        if said is not None:
            return RemoteFailure(TOO_LARGE, f"{detail} ({said})")
    return RemoteFailure(_KIND.get(code, SERVER_ERROR), detail, status=_STATUS.get(code))


def _refusal(exc: grpc.RpcError) -> Refusal:
    """A failed try as the retrier reads it: the code's name and any RetryInfo delay."""
    code = exc.code() if hasattr(exc, "code") else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    return Refusal(name, exc, retry_delay(_details(exc)) if name != "NOT_FOUND" else None)


def _details(exc: grpc.RpcError) -> list[tuple[str, bytes]]:
    """The `google.rpc.Status` details a server put in the trailers, as (type URL, value)."""
    trailers = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == _DETAILS and isinstance(value, bytes):
            try:
                status = status_pb2.Status.FromString(value)
            except Exception:  # a malformed trailer says nothing
                return []
            return [(d.type_url, bytes(d.value)) for d in status.details]
    return []


def _tls_hint(exc: grpc.RpcError, settings: RemoteSettings) -> str | None:
    """What gRPC's own text (made on this side, never the server's) says about a TLS failure."""
    text = (exc.details() if hasattr(exc, "details") else "") or ""
    if "handshake" in text.lower() or "CERTIFICATE_VERIFY_FAILED" in text:
        return "the TLS handshake failed: check VX_REAPI_CA_CERT and the client certificate"
    if "Socket closed" in text and not settings.client_cert:
        # TLS 1.3: a server that demands a client certificate just closes the connection
        return (
            "the server closed the TLS connection; if it wants a client certificate, "
            "set VX_REAPI_CLIENT_CERT and VX_REAPI_CLIENT_KEY"
        )
    return None
