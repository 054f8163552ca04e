#!/usr/bin/env python3
"""Minimal REAPI worker ("bot") for BuildGrid, speaking the Remote Workers API
(google.devtools.remoteworkers.v1test2.Bots) -- a pure-Python stand-in for
buildbox-worker + buildbox-run-hosttools (which are C++ and not packaged on
PyPI or Debian 12).

It runs each Action directly on the host, in a fresh temp dir (NO sandbox):
  1. CreateBotSession, then long-poll UpdateBotSession for leases;
  2. lease.payload is an Action (or its Digest); fetch Command + input tree
     (BatchReadBlobs, level by level) + files (batch / ByteStream) and lay
     them out;
  3. run Command.arguments in working_directory with exactly the Command's
     environment, honouring Action.timeout;
  4. upload outputs (files, directories as Tree messages, stdout/stderr),
     put the ActionResult into lease.result, state COMPLETED, and report it
     on the next UpdateBotSession (the server then writes the ActionCache).

Usage (in the venv that has buildgrid, for its generated protos):
    python reapi_worker.py --remote 127.0.0.1:50051 [--instance ""]

The test suite starts it (tests/scenarios/support/reapi_servers.py ExecStack).
"""

import argparse
import hashlib
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2_grpc as re_grpc
from buildgrid._protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import (
    bots_pb2,
    bots_pb2_grpc,
    worker_pb2,
)
from buildgrid._protos.google.rpc import code_pb2, status_pb2

LOG = logging.getLogger("mini_worker")
BATCH_LIMIT = 3 * 1024 * 1024  # stay under the server's max_batch_total_size_bytes (4 MiB here)
STREAM_CHUNK = 1024 * 1024
SETPRIV = (
    shutil.which("setpriv") or "/usr/bin/setpriv"
)  # found on the worker's PATH, not the action's


def digest_of(data: bytes) -> re.Digest:
    return re.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def dkey(d: re.Digest) -> tuple[str, int]:
    return (d.hash, d.size_bytes)


class Cas:
    """CAS helper: batch RPCs for small blobs, ByteStream for big ones."""

    def __init__(self, channel: grpc.Channel, instance: str):
        self.instance = instance
        self.cas = re_grpc.ContentAddressableStorageStub(channel)
        self.bs = bytestream_pb2_grpc.ByteStreamStub(channel)

    def _res(self, *parts: str) -> str:
        return "/".join(p for p in (self.instance, *parts) if p)

    def read_many(self, digests) -> dict:
        out, batch, size = {}, [], 0
        uniq = {dkey(d): d for d in digests if d.size_bytes > 0}
        for k, d in uniq.items():
            if d.size_bytes > BATCH_LIMIT:
                out[k] = b"".join(
                    r.data
                    for r in self.bs.Read(
                        bytestream_pb2.ReadRequest(
                            resource_name=self._res("blobs", d.hash, str(d.size_bytes))
                        )
                    )
                )
                continue
            if size + d.size_bytes > BATCH_LIMIT and batch:
                out.update(self._batch_read(batch))
                batch, size = [], 0
            batch.append(d)
            size += d.size_bytes
        if batch:
            out.update(self._batch_read(batch))
        for d in digests:
            if d.size_bytes == 0:
                out[dkey(d)] = b""
        return out

    def _batch_read(self, digests) -> dict:
        resp = self.cas.BatchReadBlobs(
            re.BatchReadBlobsRequest(instance_name=self.instance, digests=digests)
        )
        out = {}
        for r in resp.responses:
            if r.status.code != code_pb2.OK:
                raise LookupError(
                    f"missing blob {r.digest.hash}/{r.digest.size_bytes}: {r.status.message}"
                )
            out[dkey(r.digest)] = r.data
        return out

    def write_many(self, blobs: list) -> list:
        digests = [digest_of(b) for b in blobs]
        by_key = {dkey(d): (d, b) for d, b in zip(digests, blobs)}
        missing = self.cas.FindMissingBlobs(
            re.FindMissingBlobsRequest(
                instance_name=self.instance, blob_digests=[d for d, _ in by_key.values()]
            )
        ).missing_blob_digests
        batch, size = [], 0
        for m in missing:
            d, b = by_key[dkey(m)]
            if d.size_bytes > BATCH_LIMIT:
                self._stream_write(d, b)
                continue
            if size + d.size_bytes > BATCH_LIMIT and batch:
                self._batch_write(batch)
                batch, size = [], 0
            batch.append(re.BatchUpdateBlobsRequest.Request(digest=d, data=b))
            size += d.size_bytes
        if batch:
            self._batch_write(batch)
        return digests

    def _batch_write(self, reqs):
        resp = self.cas.BatchUpdateBlobs(
            re.BatchUpdateBlobsRequest(instance_name=self.instance, requests=reqs)
        )
        for r in resp.responses:
            if r.status.code != code_pb2.OK:
                raise IOError(f"upload of {r.digest.hash} failed: {r.status.message}")

    def _stream_write(self, d, data):
        name = self._res("uploads", str(uuid.uuid4()), "blobs", d.hash, str(d.size_bytes))

        def chunks():
            for off in range(0, max(len(data), 1), STREAM_CHUNK):
                part = data[off : off + STREAM_CHUNK]
                yield bytestream_pb2.WriteRequest(
                    resource_name=name,
                    write_offset=off,
                    data=part,
                    finish_write=off + len(part) >= len(data),
                )

        self.bs.Write(chunks())


def fetch_tree(cas: Cas, root_digest: re.Digest) -> dict:
    """All Directory messages under root, keyed by (hash, size).

    Read level by level with BatchReadBlobs, keyed by the digests the client
    sent. (GetTree would be one call, but it returns Directory messages
    without their digests, so they would have to be re-hashed, which only
    works if the client serialized them exactly as we would.)
    """
    dirs, level = {}, [root_digest]
    while level:
        blobs = cas.read_many(level)
        nxt = []
        for d in level:
            msg = re.Directory()
            msg.ParseFromString(blobs[dkey(d)])
            dirs[dkey(d)] = msg
            nxt.extend(sub.digest for sub in msg.directories if dkey(sub.digest) not in dirs)
        level = list({dkey(d): d for d in nxt}.values())
    return dirs


def materialize(cas: Cas, root_digest: re.Digest, dest: str) -> None:
    dirs = fetch_tree(cas, root_digest)
    files = []  # (path, FileNode)

    def walk(dkey_, path):
        d = dirs[dkey_]
        os.makedirs(path, exist_ok=True)
        for f in d.files:
            files.append((os.path.join(path, f.name), f))
        for s in d.symlinks:
            os.symlink(s.target, os.path.join(path, s.name))
        for sub in d.directories:
            walk(dkey(sub.digest), os.path.join(path, sub.name))

    walk(dkey(root_digest), dest)
    blobs = cas.read_many([f.digest for _, f in files])
    for path, f in files:
        with open(path, "wb") as fh:
            fh.write(blobs[dkey(f.digest)])
        if f.is_executable:
            os.chmod(path, 0o755)


def directory_tree(path: str, blobs: list) -> tuple[re.Tree, re.Directory]:
    """Build a REAPI Tree for an output directory; file contents go into blobs."""
    children = []

    def build(p) -> re.Directory:
        d = re.Directory()
        for name in sorted(os.listdir(p)):  # REAPI: entries sorted by name (byte order)
            full = os.path.join(p, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                d.symlinks.add(name=name, target=os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                sub = build(full)
                children.append(sub)
                d.directories.add(
                    name=name, digest=digest_of(sub.SerializeToString(deterministic=True))
                )
            elif stat.S_ISREG(st.st_mode):
                data = open(full, "rb").read()
                blobs.append(data)
                d.files.add(
                    name=name, digest=digest_of(data), is_executable=bool(st.st_mode & 0o111)
                )
        return d

    root = build(path)
    return re.Tree(root=root, children=children), root


def _dying_with_worker(argv: list[str]) -> list[str]:
    """`argv` SIGKILLed when the worker dies, as an action dies with its worker's container (a
    SIGKILLed worker would otherwise leave its running action behind): util-linux `setpriv`
    sets PR_SET_PDEATHSIG and execs it. Not a `preexec_fn`: Python code run in the forked child
    of this gRPC process can finalise gRPC objects there, which aborts the child (SIGABRT, a
    gRPC log line on the action's stderr)."""
    return [SETPRIV, "--pdeathsig", "KILL", "--", *argv]


class Runner:
    def __init__(
        self, cas: Cas, worker_name: str, scratch: str | None = None, path_prefix: str | None = None
    ):
        self.cas = cas
        self.worker_name = worker_name
        self.scratch = scratch
        self.path_prefix = path_prefix  # put ahead of the action's PATH: this worker's own tools
        self.proc = None

    def run(self, action: re.Action) -> re.ActionResult:
        meta = re.ExecutedActionMetadata(worker=self.worker_name)
        meta.worker_start_timestamp.GetCurrentTime()
        command = re.Command()
        command.ParseFromString(
            self.cas.read_many([action.command_digest])[dkey(action.command_digest)]
        )
        with tempfile.TemporaryDirectory(prefix="mini-worker-", dir=self.scratch) as root:
            meta.input_fetch_start_timestamp.GetCurrentTime()
            materialize(self.cas, action.input_root_digest, root)
            meta.input_fetch_completed_timestamp.GetCurrentTime()
            cwd = os.path.join(root, command.working_directory)
            os.makedirs(cwd, exist_ok=True)
            outputs = list(command.output_paths) or list(command.output_files) + list(
                command.output_directories
            )
            for out in outputs:  # the worker must create parents of declared outputs
                os.makedirs(os.path.dirname(os.path.join(cwd, out)) or cwd, exist_ok=True)
            env = {e.name: e.value for e in command.environment_variables}
            if self.path_prefix:  # as an image whose /usr/local/bin holds other tools would
                env["PATH"] = f"{self.path_prefix}:{env.get('PATH', '')}"
            timeout = (
                action.timeout.ToTimedelta().total_seconds() if action.HasField("timeout") else None
            )
            meta.execution_start_timestamp.GetCurrentTime()
            self.proc = subprocess.Popen(
                _dying_with_worker(list(command.arguments)),
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            try:
                out, err = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                out, err = self.proc.communicate()
                raise TimeoutError(f"action timed out after {timeout}s") from None
            meta.execution_completed_timestamp.GetCurrentTime()
            result = re.ActionResult(exit_code=self.proc.returncode)
            meta.output_upload_start_timestamp.GetCurrentTime()
            blobs = [out, err]
            result.stdout_digest.CopyFrom(digest_of(out))
            result.stderr_digest.CopyFrom(digest_of(err))
            for rel in outputs:
                full = os.path.join(cwd, rel)
                if os.path.islink(full):
                    result.output_symlinks.add(path=rel, target=os.readlink(full))
                elif os.path.isdir(full):
                    tree, _ = directory_tree(full, blobs)
                    tree_bytes = tree.SerializeToString(deterministic=True)
                    blobs.append(tree_bytes)
                    result.output_directories.add(path=rel, tree_digest=digest_of(tree_bytes))
                elif os.path.isfile(full):
                    data = open(full, "rb").read()
                    blobs.append(data)
                    result.output_files.add(
                        path=rel, digest=digest_of(data), is_executable=os.access(full, os.X_OK)
                    )
                # a missing output is simply not reported (per the spec)
            self.cas.write_many(blobs)
            meta.output_upload_completed_timestamp.GetCurrentTime()
        meta.worker_completed_timestamp.GetCurrentTime()
        result.execution_metadata.CopyFrom(meta)
        return result

    def cancel(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)


def lease_action(cas: Cas, lease: bots_pb2.Lease) -> re.Action:
    action = re.Action()
    if lease.payload.Is(re.Action.DESCRIPTOR):
        lease.payload.Unpack(action)
    else:
        digest = re.Digest()
        lease.payload.Unpack(digest)
        action.ParseFromString(cas.read_many([digest])[dkey(digest)])
    return action


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", default="127.0.0.1:50051")
    ap.add_argument("--instance", default="")
    ap.add_argument(
        "--poll-timeout", type=float, default=30.0, help="gRPC deadline of each UpdateBotSession"
    )
    ap.add_argument("--heartbeat", type=float, default=5.0)
    ap.add_argument("--property", action="append", default=[], help="KEY=VALUE device property")
    ap.add_argument(
        "--scratch", help="where each action's directory is made (default: the temp dir)"
    )
    ap.add_argument(
        "--path-prefix", help="a directory put ahead of every action's PATH (this worker's tools)"
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )

    channel = grpc.insecure_channel(args.remote)
    bots = bots_pb2_grpc.BotsStub(channel)
    cas = Cas(channel, args.instance)
    bot_id = f"{socket.gethostname()}-{os.getpid()}"
    props = [("OSFamily", "linux")] + [tuple(p.split("=", 1)) for p in args.property]
    worker = worker_pb2.Worker(
        devices=[
            worker_pb2.Device(
                handle=bot_id,
                properties=[worker_pb2.Device.Property(key=k, value=v) for k, v in props],
            )
        ]
    )
    worker.configs.add(key="capacity", value="1")
    session = bots.CreateBotSession(
        bots_pb2.CreateBotSessionRequest(
            parent=args.instance,
            bot_session=bots_pb2.BotSession(
                bot_id=bot_id, status=bots_pb2.BotStatus.OK, worker=worker
            ),
        ),
        timeout=args.poll_timeout,
    )
    LOG.info("bot session %s", session.name)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    pool = ThreadPoolExecutor(max_workers=1)

    def update(sess, timeout):
        return bots.UpdateBotSession(
            bots_pb2.UpdateBotSessionRequest(name=sess.name, bot_session=sess), timeout=timeout
        )

    while not stop.is_set():
        try:
            session = update(session, args.poll_timeout)  # long-polls while we have no lease
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                continue
            LOG.warning("UpdateBotSession failed: %s %s", e.code(), e.details())
            time.sleep(1)
            continue
        for lease in session.leases:
            if lease.state not in (bots_pb2.LeaseState.PENDING, bots_pb2.LeaseState.ACTIVE):
                continue
            lease.state = bots_pb2.LeaseState.ACTIVE
            LOG.info("lease %s", lease.id)
            runner = Runner(cas, bot_id, args.scratch, args.path_prefix)
            fut = pool.submit(lambda r=runner, l=lease: r.run(lease_action(cas, l)))
            cancelled = False
            while True:  # heartbeat while the action runs
                try:
                    fut.result(timeout=args.heartbeat)
                    break
                except TimeoutError:
                    pass
                except Exception:
                    break
                if fut.done():
                    break
                try:
                    hb = update(session, 10)
                    if not any(l.id == lease.id for l in hb.leases):
                        LOG.info("lease %s cancelled by server", lease.id)
                        runner.cancel()
                        cancelled = True
                    session = hb
                except grpc.RpcError as e:
                    LOG.warning("heartbeat failed: %s", e.code())
            if cancelled:
                continue
            lease = next(l for l in session.leases if l.id == lease.id)
            lease.state = bots_pb2.LeaseState.COMPLETED
            try:
                result = fut.result()
                lease.status.CopyFrom(status_pb2.Status(code=code_pb2.OK))
                lease.result.Pack(result)
                LOG.info("lease %s done, exit code %d", lease.id, result.exit_code)
            except TimeoutError as e:
                lease.status.CopyFrom(
                    status_pb2.Status(code=code_pb2.DEADLINE_EXCEEDED, message=str(e))
                )
            except LookupError as e:  # missing input blob: client must re-upload
                lease.status.CopyFrom(
                    status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=str(e))
                )
            except Exception as e:  # noqa: BLE001
                LOG.exception("lease %s failed", lease.id)
                lease.status.CopyFrom(status_pb2.Status(code=code_pb2.INTERNAL, message=repr(e)))
            # the completed lease is reported by the next UpdateBotSession at the loop top
    LOG.info("stopping")


if __name__ == "__main__":
    main()
