"""Blob reads that share BatchReadBlobs calls (`reapi._BlobReads`): no timing, a fake call that
blocks until the test lets it go."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("grpc")

from vx.store.remote.reapi import BATCH_READS_AT_ONCE, Capabilities, _BlobReads  # noqa: E402
from vx.store.remote.reapi_pb.build.bazel.remote.execution.v2 import (  # noqa: E402
    remote_execution_pb2 as re_pb,
)

CAPS = Capabilities(batch_bytes=1 << 20, zstd=False, zstd_batch_update=False, updates=True)


def blob(n: int, size: int = 10) -> re_pb.Digest:
    return re_pb.Digest(hash=f"{n:064x}", size_bytes=size)


class FakeServer:
    """Answers each call with every asked blob except `left_out`, once `gate` is open; a call
    asking for `failing` raises instead."""

    def __init__(self, left_out=(), failing=None):
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.left_out, self.failing = set(left_out), failing
        self._lock = threading.Lock()

    def __call__(self, blobs, caps):
        with self._lock:
            self.calls.append([b.hash for b in blobs])
        self.gate.wait()
        if self.failing is not None and self.failing in [b.hash for b in blobs]:
            raise RuntimeError("the call failed")
        return {b.hash: ("answer", b.hash) for b in blobs if b.hash not in self.left_out}


def until(reads: _BlobReads, done) -> None:
    while True:  # a count, not a clock
        with reads._lock:
            if done():
                return
        time.sleep(0.001)


def read_all(reads: _BlobReads, digests, server: FakeServer):
    """A thread per digest: the first BATCH_READS_AT_ONCE fill the calls (held at the gate), the
    rest wait behind them; then the gate opens."""
    results: dict[int, object] = {}

    def one(i, d):
        try:
            results[i] = reads.read(d, CAPS)
        except Exception as exc:  # noqa: BLE001  # the test looks at it
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i, d)) for i, d in enumerate(digests)]
    first = BATCH_READS_AT_ONCE
    for t in threads[:first]:
        t.start()
    until(reads, lambda: reads._busy == first and len(server.calls) == first)
    for n, t in enumerate(threads[first:], 1):  # one by one: they queue in this order
        t.start()
        until(reads, lambda n=n: len(reads._waiting) == n)
    server.gate.set()
    for t in threads:
        t.join()
    return results


def test_reads_past_the_calls_in_flight_share_the_next_call():
    server = FakeServer()
    reads = _BlobReads(server)
    digests = [blob(n) for n in range(20)]
    results = read_all(reads, digests, server)
    assert all(results[i] == ("answer", d.hash) for i, d in enumerate(digests))
    assert len(server.calls) < 20  # one call a read before
    assert server.calls[:BATCH_READS_AT_ONCE] == [[d.hash] for d in digests[:BATCH_READS_AT_ONCE]]
    assert sorted(h for call in server.calls for h in call) == sorted(d.hash for d in digests)
    assert reads._busy == 0 and not reads._waiting


def test_one_blob_wanted_twice_is_asked_once_and_answers_both():
    server = FakeServer()
    reads = _BlobReads(server)
    same = blob(77)
    # the calls that end hand their slots to the first waiters; the first of them takes the rest
    digests = [blob(n) for n in range(2 * BATCH_READS_AT_ONCE)] + [same, same]
    results = read_all(reads, digests, server)
    assert results[len(digests) - 2] == results[len(digests) - 1] == ("answer", same.hash)
    assert [h for call in server.calls for h in call].count(same.hash) == 1


def test_a_blob_the_reply_leaves_out_is_none_and_a_failed_call_fails_each_of_its_reads():
    left, bad = blob(3), blob(9)
    server = FakeServer(left_out=[left.hash], failing=bad.hash)
    reads = _BlobReads(server)
    digests = [blob(n) for n in range(12)]
    results = read_all(reads, digests, server)
    assert results[3] is None
    failed_call = next(c for c in server.calls if bad.hash in c)
    for i, d in enumerate(digests):
        if d.hash in failed_call:
            assert isinstance(results[i], RuntimeError)
        elif i != 3:
            assert results[i] == ("answer", d.hash)
    assert reads._busy == 0 and not reads._waiting


def test_a_call_takes_no_more_than_the_batch_limit():
    server = FakeServer()
    reads = _BlobReads(server)
    big = 400 << 10  # two fit in the 1 MiB limit with their overhead, three do not
    digests = [blob(n, big) for n in range(BATCH_READS_AT_ONCE + 6)]
    read_all(reads, digests, server)
    sizes = {d.hash: d.size_bytes for d in digests}
    assert all(sum(sizes[h] for h in call) <= CAPS.batch_bytes for call in server.calls)
    assert sorted(h for call in server.calls for h in call) == sorted(sizes)
