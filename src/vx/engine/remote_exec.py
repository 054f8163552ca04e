"""Run one task on a REAPI v2 server's workers: its input root as a Merkle tree of Directory
messages, a Command and an Action uploaded to the CAS, Execute (re-attached with
WaitExecution when the stream drops), and the outputs the worker returns written back into
the workspace.

The input root is the workspace root as the task's declared inputs see it: its input files,
its package.json and the outputs of the tasks upstream of it, each uploaded only when the
server lacks it (FindMissingBlobs). File digests are SHA-256 of the bytes read for the
upload, never memoised. The environment is what the task's key declares; nothing else of
the host's leaves the machine. The worker provides the platform: /bin/sh, node and the tools
the command names (docs/remote-execution.md).

A failure of the server or the worker raises `ExecFailure` (the engine runs the task here
instead); a command that ran and failed is a result like any other.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
import time
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import grpc
from msgspec import Struct

from vx.store.remote.layer import RemoteFailure, RemoteSettings
from vx.store.remote.reapi import ReapiLayer
from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb
from vx.store.remote.reapi_pb.google.longrunning import operations_pb2 as ops_pb

_EXEC = "/build.bazel.remote.execution.v2.Execution/"
_OPS = "/google.longrunning.Operations/"
_CAS = "/build.bazel.remote.execution.v2.ContentAddressableStorage/"
# The worker's PATH unless the task defines one: where a platform keeps /bin/sh and node.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# How many times a dropped Execute stream is re-attached in a row before the action counts as lost.
REATTACH = 5
_FIND_BATCH = 5000  # digests per FindMissingBlobs
# What each blob of a batch call adds to the message beside its bytes: its digest (a 64-digit hash,
# a size), the entry's framing and, in a read's reply, a status. The capabilities' slack covers
# one blob's; a batch of hundreds of small files must count each one's, or the message passes
# gRPC's 4 MiB cap and the server refuses it (RESOURCE_EXHAUSTED).
_ENTRY_BYTES = 128


class _Empty:
    """google.protobuf.Empty, the reply of CancelOperation: nothing to decode."""

    @staticmethod
    def FromString(data: bytes) -> None:  # noqa: N802 — the protobuf spelling
        return None


class ExecFailure(Exception):
    """The server or its worker failed (not the command): the task runs here instead."""


class Unplaced(ExecFailure):
    """No worker took the action within the queue bound: the server is alive, the platform is
    what nothing offers (or every worker stayed busy)."""

    def __init__(self, message: str, platform: tuple[tuple[str, str], ...]):
        super().__init__(message)
        self.platform = platform


class _Watch:
    """Cancels the action's current stream when the server says nothing for `quiet_s` (a
    partition: the connection stays open, nothing answers) or the action sits `queue_s` in the
    QUEUED stage; `why` says which. One thread per action, ended by `close`."""

    def __init__(self, quiet_s: float, queue_s: float):
        self.quiet_s, self.queue_s = quiet_s, queue_s
        self.heard = time.monotonic()
        self.queued_since: float | None = None
        self.call: grpc.Future | None = None
        self.why: str | None = None  # "quiet" | "queued", once it fired
        self._cond = threading.Condition()
        self._closed = False
        threading.Thread(target=self._run, name="vx-remote-watch", daemon=True).start()

    def follow(self, call) -> None:
        with self._cond:
            self.call, self.why = call, None
            self.heard = time.monotonic()
            self._cond.notify()

    def heard_from(self, stage: int | None) -> None:
        with self._cond:
            self.heard = time.monotonic()
            if stage == re_pb.ExecutionStage.QUEUED:
                if self.queued_since is None:
                    self.queued_since = self.heard
            elif stage is not None and stage != re_pb.ExecutionStage.UNKNOWN:
                self.queued_since = None  # a worker has it (or a re-queue starts the clock again)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                at, why = self.heard + self.quiet_s, "quiet"
                if self.queued_since is not None and self.queued_since + self.queue_s < at:
                    at, why = self.queued_since + self.queue_s, "queued"
                left = at - time.monotonic()
                if left > 0 or self.call is None or self.why is not None:
                    self._cond.wait(max(left, 0.05) if self.why is None else None)
                    continue
                self.why = why
                self.call.cancel()


class Outcome(Struct, frozen=True):
    """What the worker's run of the command gave."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    cached: bool = False  # the server answered from its own action cache
    written: int = 0  # output files written into the workspace
    # not fetched: what the worker returned, for `materialise` or a dependant's input root
    listing: Listing | None = None


class Listing(Struct, frozen=True):
    """Outputs left on the server: workspace paths to digests, allowed by the task's globs."""

    files: tuple[tuple[str, str, int, bool], ...]  # (path, sha256, size, executable)
    links: tuple[tuple[str, str], ...] = ()  # (path, target)


class RemoteTask(Struct, frozen=True):
    """One task as a worker is to run it. `fetch=False` leaves the outputs on the server
    (`Outcome.listing`); `grafted` are upstream outputs left there, put into the input root by
    digest; `skip_cache_lookup` asks a worker even when the server's action cache has a result."""

    root: str
    project_dir: str
    inputs: Sequence[str]  # workspace paths: the input root holds these and `grafted`
    command: str
    env: Mapping[str, str]
    platform: tuple[tuple[str, str], ...]
    output_paths: tuple[str, ...]
    timeout_ms: int | None
    allows: Callable[[str], bool]  # whether the task's output globs take a path
    on_stage: Callable[[str], None] | None = None
    fetch: bool = True
    grafted: tuple[Listing, ...] = ()
    skip_cache_lookup: bool = False


class _Blob(Struct):
    digest: object  # re_pb.Digest
    path: str | None = None  # read from here when uploaded
    data: bytes | None = None


class RemoteExecutor:
    """One REAPI server's Execution service and CAS. Thread-safe: each task runs in a thread."""

    def __init__(self, settings: RemoteSettings, quiet_s: float = 60.0, queue_s: float = 900.0):
        self.layer = ReapiLayer(settings)
        self.instance = settings.instance
        self.quiet_s = quiet_s  # no word on the operation this long: ask again, then give up
        self.queue_s = queue_s  # queued this long with no worker taking it: run it here
        self.skip_cache_lookup = False  # `--force`: the server runs the action again too
        self.in_flight: set[str] = set()  # operation names, for `cancel_all`
        self._lock = threading.Lock()

    def close(self) -> None:
        self.layer.close()

    def cancel_all(self) -> None:
        """The run is stopping: ask the server to cancel each action in flight (so its worker
        stops), then close the channel, which ends every call still waiting."""
        with self._lock:
            names = list(self.in_flight)
        for name in names:
            try:
                self.layer._call(
                    _OPS + "CancelOperation",
                    ops_pb.CancelOperationRequest(name=name),
                    _Empty,
                    5.0,
                )
            except RemoteFailure:
                pass  # the server may not support it, or be gone: closing the channel still ends ours
        self.layer.close()

    def run(self, task: RemoteTask) -> Outcome:
        """Run `task` on a worker and return what its command gave."""
        with _as_exec_failure():
            return self._run(task)

    # ------------------------------------------------------------ one action

    def materialise(self, root: str, listing: Listing) -> int:
        """Fetch outputs left on the server and write them into the workspace."""
        with _as_exec_failure():
            return self._write_listing(root, listing)

    def _run(self, task: RemoteTask) -> Outcome:
        blobs: dict[str, _Blob] = {}
        root, project_dir = task.root, task.project_dir
        root_digest = _input_root(root, task.inputs, project_dir, blobs, task.grafted)
        props = re_pb.Platform(
            properties=[re_pb.Platform.Property(name=k, value=v) for k, v in sorted(task.platform)]
        )
        cmd = re_pb.Command(
            arguments=["/bin/sh", "-c", task.command],
            environment_variables=[
                re_pb.Command.EnvironmentVariable(name=k, value=v)
                for k, v in sorted(task.env.items())
            ],
            output_paths=sorted(set(task.output_paths)),
            working_directory=project_dir,
            platform=props,
        )
        cmd_digest = _message_blob(cmd, blobs)
        action = re_pb.Action(
            command_digest=cmd_digest, input_root_digest=root_digest, platform=props
        )
        if task.timeout_ms:
            action.timeout.seconds = -(-task.timeout_ms // 1000)  # whole seconds, rounded up
        action_digest = _message_blob(action, blobs)
        self._upload(root, blobs)
        watch = _Watch(self.quiet_s, self.queue_s)
        skip_cache_lookup = task.skip_cache_lookup or self.skip_cache_lookup
        try:
            response = self._execute(
                action_digest, task.on_stage, watch, tuple(sorted(task.platform)), skip_cache_lookup
            )
        finally:
            watch.close()
        if response.status.code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]:
            return Outcome(143, b"", response.status.message.encode(), timed_out=True)
        if response.status.code != 0:
            raise ExecFailure(
                f"{_status_name(response.status.code)}: {response.status.message or 'no detail'}"
            )
        result = response.result
        stdout = self._text(result.stdout_raw, result.stdout_digest)
        stderr = self._text(result.stderr_raw, result.stderr_digest)
        written, listing = 0, None
        if result.exit_code == 0:
            listing = self._listing(project_dir, result, task.allows)
            if task.fetch:
                written, listing = self._write_listing(root, listing), None
        return Outcome(
            result.exit_code,
            stdout,
            stderr,
            cached=response.cached_result,
            written=written,
            listing=listing,
        )

    def _execute(self, action_digest, on_stage, watch: _Watch, platform, skip_cache_lookup):
        """Execute, then WaitExecution on the operation's name whenever the stream ends early.
        `watch` bounds the silence (one re-attach asks a quiet server where the action is; a
        second silence means it is gone) and the time in the queue."""
        request = re_pb.ExecuteRequest(
            instance_name=self.instance,
            action_digest=action_digest,
            skip_cache_lookup=skip_cache_lookup,
        )
        name, dropped, last_stage, probing = "", 0, 0, False
        call = self.layer.channel.unary_stream(
            _EXEC + "Execute",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=ops_pb.Operation.FromString,
        )
        stream = call(request, metadata=self.layer.metadata)
        watch.follow(stream)
        while True:
            try:
                for op in stream:
                    dropped, probing = 0, False
                    if op.name and op.name != name:
                        name = op.name
                        with self._lock:
                            self.in_flight.add(name)
                    meta = re_pb.ExecuteOperationMetadata()
                    stage = meta.stage if op.metadata.Unpack(meta) else None
                    watch.heard_from(stage)
                    if stage is not None and stage != last_stage:
                        last_stage = stage
                        if on_stage is not None:
                            on_stage(re_pb.ExecutionStage.Value.Name(stage).lower())
                    if op.done:
                        if op.HasField("error"):
                            raise ExecFailure(
                                f"{_status_name(op.error.code)}: {op.error.message or 'no detail'}"
                            )
                        with self._lock:
                            self.in_flight.discard(name)
                        response = re_pb.ExecuteResponse()
                        if not op.response.Unpack(response):
                            raise ExecFailure("the operation's response is not an ExecuteResponse")
                        return response
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                if watch.why == "queued":
                    self._cancel(name)
                    shown = ", ".join(f"{k}={v}" for k, v in platform) or "no properties"
                    raise Unplaced(
                        f"no worker took the action in {_seconds(self.queue_s)} (platform {shown})",
                        platform,
                    ) from None
                if watch.why == "quiet":
                    if probing or not name:
                        raise ExecFailure(
                            f"no word from the server for {_seconds(self.quiet_s)}"
                        ) from None
                    probing = True  # ask where the action is: a live server answers at once
                    stream = self._wait(name)
                    watch.follow(stream)
                    continue
                if not name or code not in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.INTERNAL,
                    grpc.StatusCode.UNKNOWN,
                ):
                    raise
            dropped += 1
            if not name or dropped > REATTACH:
                raise ExecFailure("the execution stream ended before the action finished")
            if dropped > 1:
                time.sleep(min(2.0, 0.1 * 2**dropped))  # the server is restarting: back off
            stream = self._wait(name)
            watch.follow(stream)

    def _wait(self, name: str):
        wait = self.layer.channel.unary_stream(
            _EXEC + "WaitExecution",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=ops_pb.Operation.FromString,
        )
        return wait(re_pb.WaitExecutionRequest(name=name), metadata=self.layer.metadata)

    def _cancel(self, name: str) -> None:
        """Ask the server to drop an action vx no longer waits for (best effort)."""
        with self._lock:
            self.in_flight.discard(name)
        if not name:
            return
        try:
            self.layer._call(
                _OPS + "CancelOperation", ops_pb.CancelOperationRequest(name=name), _Empty, 5.0
            )
        except RemoteFailure:
            pass  # it stays queued until the server forgets it

    # ------------------------------------------------------------ the CAS

    def _upload(self, root: str, blobs: dict[str, _Blob]) -> None:
        listed = list(blobs.values())
        missing: list[_Blob] = []
        for at in range(0, len(listed), _FIND_BATCH):
            part = listed[at : at + _FIND_BATCH]
            reply = self.layer._call(
                _CAS + "FindMissingBlobs",
                re_pb.FindMissingBlobsRequest(
                    instance_name=self.instance, blob_digests=[b.digest for b in part]
                ),
                re_pb.FindMissingBlobsResponse,
                self.layer.settings.upload_timeout_s,
            )
            missing += [blobs[d.hash] for d in reply.missing_blob_digests if d.hash in blobs]
        batch: list = []
        size = 0
        limit = self.layer.capabilities().batch_bytes  # what the server said one call may carry
        for blob in missing:
            digest = blob.digest
            if digest.size_bytes > limit:  # type: ignore[attr-defined]
                assert blob.path is not None  # messages are small
                with open(os.path.join(root, blob.path), "rb") as src:
                    self.layer._write(digest, src, self.layer.settings.upload_timeout_s)
                continue
            cost = digest.size_bytes + _ENTRY_BYTES  # type: ignore[attr-defined]
            if batch and size + cost > limit:
                self._batch_write(batch)
                batch, size = [], 0
            data = blob.data if blob.data is not None else _read(root, blob.path or "")
            if hashlib.sha256(data).hexdigest() != digest.hash:  # type: ignore[attr-defined]
                raise ExecFailure(f"{blob.path} changed while it was uploaded")
            batch.append(re_pb.BatchUpdateBlobsRequest.Request(digest=digest, data=data))
            size += cost
        if batch:
            self._batch_write(batch)

    def _batch_write(self, requests: list) -> None:
        reply = self.layer._call(
            _CAS + "BatchUpdateBlobs",
            re_pb.BatchUpdateBlobsRequest(instance_name=self.instance, requests=requests),
            re_pb.BatchUpdateBlobsResponse,
            self.layer.settings.upload_timeout_s,
        )
        bad = [r.status.message for r in reply.responses if r.status.code != 0]
        if bad:
            raise ExecFailure(f"BatchUpdateBlobs: {bad[0]}")

    def _fetch(self, digests: list) -> dict[str, bytes]:
        """Blobs by hash, each re-hashed; a missing or wrong one is the server's failure."""
        out: dict[str, bytes] = {}
        small = []
        limit = self.layer.capabilities().batch_bytes
        for d in {d.hash: d for d in digests}.values():
            if d.size_bytes == 0:
                out[d.hash] = b""
            elif d.size_bytes > limit:
                out[d.hash] = self._stream(d)
            else:
                small.append(d)
        at = 0
        while at < len(small):
            part: list = []
            size = 0
            while at < len(small) and (
                not part or size + small[at].size_bytes + _ENTRY_BYTES <= limit
            ):
                part.append(small[at])
                size += small[at].size_bytes + _ENTRY_BYTES
                at += 1
            reply = self.layer._call(
                _CAS + "BatchReadBlobs",
                re_pb.BatchReadBlobsRequest(instance_name=self.instance, digests=part),
                re_pb.BatchReadBlobsResponse,
                self.layer.settings.timeout_s,
            )
            for r in reply.responses:
                if r.status.code == 0:
                    out[r.digest.hash] = r.data
        for d in digests:
            data = out.get(d.hash)
            if data is None:
                raise ExecFailure(f"the server lost output blob {d.hash[:12]}")
            if len(data) != d.size_bytes or hashlib.sha256(data).hexdigest() != d.hash:
                raise ExecFailure(f"output blob {d.hash[:12]} does not match its digest")
        return out

    def _stream(self, digest) -> bytes:
        class Sink:
            def __init__(self):
                self.parts: list[bytes] = []

            def write(self, data: bytes) -> int:
                self.parts.append(data)
                return len(data)

        sink = Sink()
        if not self.layer._read(digest, sink):
            raise ExecFailure(f"the server lost output blob {digest.hash[:12]}")
        return b"".join(sink.parts)

    def _text(self, raw: bytes, digest) -> bytes:
        if raw or not digest.hash:
            return bytes(raw)
        return self._fetch([digest])[digest.hash]

    # ------------------------------------------------------------ outputs

    def _listing(self, project_dir: str, result, allows) -> Listing:
        """What the worker returned, each path confined to the task and allowed by its output
        globs (as a restore is); the rest is dropped."""
        files: list[tuple[str, object, bool]] = []  # (workspace path, digest, executable)
        links: list[tuple[str, str]] = []
        for f in result.output_files:
            files.append((_confined(project_dir, f.path), f.digest, f.is_executable))
        for link in list(result.output_symlinks) + list(result.output_file_symlinks):
            links.append((_confined(project_dir, link.path), link.target))
        trees = self._fetch([d.tree_digest for d in result.output_directories])
        for d in result.output_directories:
            tree = re_pb.Tree.FromString(trees[d.tree_digest.hash])
            by_hash = {
                hashlib.sha256(c.SerializeToString(deterministic=True)).hexdigest(): c
                for c in tree.children
            }
            base = _confined(project_dir, d.path) if d.path else project_dir
            _walk_tree(tree.root, base, by_hash, files, links, 0)
        for path, target in links:
            if allows(path) and (os.path.isabs(target) or _escapes(path, target)):
                raise ExecFailure(f"output symlink {path} points outside the workspace")
        total = sum(d.size_bytes for p, d, _ in files if allows(p))  # type: ignore[attr-defined]
        if total > self.layer.settings.max_artifact_bytes:
            raise ExecFailure(f"the outputs are {total} bytes, over the configured limit")
        return Listing(
            tuple(
                (p, d.hash, d.size_bytes, x)  # type: ignore[attr-defined]
                for p, d, x in files
                if allows(p)
            ),
            tuple((p, t) for p, t in links if allows(p)),
        )

    def _write_listing(self, root: str, listing: Listing) -> int:
        digests = [re_pb.Digest(hash=h, size_bytes=n) for _, h, n, _ in listing.files]
        data = self._fetch(digests)
        for path, digest, _, executable in listing.files:
            _write(root, path, data[digest], executable)
        for path, target in listing.links:
            if os.path.isabs(target) or _escapes(path, target):
                raise ExecFailure(f"output symlink {path} points outside the workspace")
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if os.path.lexists(full):
                os.unlink(full)
            os.symlink(target, full)
        return len(listing.files)


# ---------------------------------------------------------------- the Merkle tree


def _input_root(
    root: str,
    inputs: Iterable[str],
    workdir: str,
    blobs: dict[str, _Blob],
    grafted: Iterable[Listing] = (),
):
    """The Directory tree of `inputs` (workspace-relative) and of `grafted` outputs (by digest:
    the server holds them), every message and input file in `blobs`; the working directory
    always exists in it (a task with no inputs still has its cwd)."""
    tree: dict = {}
    for listing in grafted:
        for rel, sha, size, executable in listing.files:
            digest = re_pb.Digest(hash=sha, size_bytes=size)
            _dir(tree, rel.split("/")[:-1])[rel.rsplit("/", 1)[-1]] = ("file", digest, executable)
        for rel, target in listing.links:
            _dir(tree, rel.split("/")[:-1])[rel.rsplit("/", 1)[-1]] = ("link", target)
    for rel in sorted(set(inputs)):
        full = os.path.join(root, rel)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            continue  # deleted since it was listed: the worker sees what is there now
        node = _dir(tree, rel.split("/")[:-1])
        name = rel.rsplit("/", 1)[-1]
        if stat.S_ISLNK(st.st_mode):
            node[name] = ("link", os.readlink(full))
        elif stat.S_ISREG(st.st_mode):
            digest = _file_digest(full)
            blobs.setdefault(digest.hash, _Blob(digest, path=rel))
            node[name] = ("file", digest, bool(st.st_mode & stat.S_IXUSR))
    if workdir:
        _dir(tree, workdir.split("/"))
    return _encode(tree, blobs)


def _dir(tree: dict, parts: list[str]) -> dict:
    for part in parts:
        entry = tree.get(part)
        if not isinstance(entry, dict):
            entry = tree[part] = {}
        tree = entry
    return tree


def _encode(tree: dict, blobs: dict[str, _Blob]):
    """A Directory message for `tree`, children first; entries sorted by name, as the API asks."""
    msg = re_pb.Directory()
    for name in sorted(tree):
        entry = tree[name]
        if isinstance(entry, dict):
            msg.directories.add(name=name, digest=_encode(entry, blobs))
        elif entry[0] == "file":
            msg.files.add(name=name, digest=entry[1], is_executable=entry[2])
        else:
            msg.symlinks.add(name=name, target=entry[1])
    return _message_blob(msg, blobs)


def _message_blob(msg, blobs: dict[str, _Blob]):
    data = msg.SerializeToString(deterministic=True)
    digest = re_pb.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
    blobs.setdefault(digest.hash, _Blob(digest, data=data))
    return digest


def _file_digest(path: str):
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return re_pb.Digest(hash=h.hexdigest(), size_bytes=size)


def _read(root: str, rel: str) -> bytes:
    with open(os.path.join(root, rel), "rb") as f:
        return f.read()


def _walk_tree(directory, base: str, by_hash, files, links, depth: int) -> None:
    if depth > 256:
        raise ExecFailure("an output directory nests deeper than 256 levels")
    for f in directory.files:
        files.append((_confined(base, f.name), f.digest, f.is_executable))
    for link in directory.symlinks:
        links.append((_confined(base, link.name), link.target))
    for sub in directory.directories:
        child = by_hash.get(sub.digest.hash)
        if child is None:
            raise ExecFailure(f"an output Tree lacks directory {sub.name}")
        _walk_tree(child, _confined(base, sub.name), by_hash, files, links, depth + 1)


def _confined(base: str, rel: str) -> str:
    """`base/rel` as a workspace path, refused when `rel` is absolute or climbs out."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ExecFailure(f"the worker returned an output path outside the task: {rel!r}")
    return f"{base}/{rel}" if base else rel


def _escapes(path: str, target: str) -> bool:
    depth = len(path.split("/")) - 1
    for part in target.split("/"):
        depth += -1 if part == ".." else (0 if part in ("", ".") else 1)
        if depth < 0:
            return True
    return False


def _write(root: str, rel: str, data: bytes, executable: bool) -> None:
    full = os.path.join(root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    real = os.path.realpath(os.path.dirname(full))
    if real != os.path.realpath(root) and not real.startswith(os.path.realpath(root) + os.sep):
        raise ExecFailure(f"output {rel} would be written through a symlink out of the workspace")
    temp = f"{full}.vx-remote-{os.getpid()}"
    with open(temp, "wb") as f:
        f.write(data)
    os.chmod(temp, 0o755 if executable else 0o644)
    os.replace(temp, full)


def _status_name(code: int) -> str:
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status.name
    return f"status {code}"


def _seconds(value: float) -> str:
    return f"{value:g} s"


@contextlib.contextmanager
def _as_exec_failure() -> Iterator[None]:
    """A server's failure, as the ExecFailure the caller falls back on."""
    try:
        yield
    except RemoteFailure as exc:
        raise ExecFailure(str(exc)) from None
    except grpc.RpcError as exc:
        raise ExecFailure(_code_name(exc)) from None


def _code_name(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    return f"Execute: {code.name if code is not None else 'UNKNOWN'}"
