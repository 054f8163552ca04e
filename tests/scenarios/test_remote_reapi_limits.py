"""BuildGrid as it ships, and as it is tuned down: a server that holds only so many calls at
once answers the rest RESOURCE_EXHAUSTED ("Concurrent RPC limit exceeded"). That is pushback,
not an artifact too large: vx tries the call again and sends fewer at once, so a fresh clone of
a generated 100-package build gets every build from the server, byte for byte."""

from collections import Counter, defaultdict

import grpc
import pytest
from support.corpora import generated
from support.reapi_servers import Abort, BuildGrid, GarbageServer
from support.remote_servers import clone, outputs, shop_files

PACKAGES = 100


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The generated workspace, committed once; each test builds in its own clones of it."""
    return generated(tmp_path_factory.mktemp("limits") / "ws", "vx", packages=PACKAGES)


def two_clones(workspace, tmp_path, server, env=None):
    """A first clone builds and uploads everything, a second restores everything: the two
    runs, once their outputs are checked byte for byte and neither counted a failure."""
    env = {**server.env(), **(env or {})}
    first = clone(workspace, tmp_path / "first")
    cold = first.vx("run", "build", env=env, timeout=600)
    assert cold.code == 0, cold.err[-3000:]
    assert f"{PACKAGES} uploads" in cold.err, cold.err[-3000:]
    second = clone(workspace, tmp_path / "second")
    warm = second.vx("run", "build", env=env, timeout=600)
    assert warm.code == 0, warm.err[-3000:]
    assert Counter(warm.statuses().values()) == {("success", "remote"): PACKAGES}, warm.err
    assert f"{PACKAGES} hits, 0 misses" in warm.err, warm.err
    assert "too large" not in cold.err + warm.err and "failures" not in cold.err + warm.err
    built = outputs(first)
    assert len(built) >= PACKAGES and outputs(second) == built
    return cold, warm


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "limits",
    [{}, {"thread-pool-size": 5}, {"maximum-concurrent-rpcs": 2}],
    ids=["default-pool", "five-threads", "two-calls"],
)
def test_a_fresh_clone_gets_every_build_from_a_server_that_pushes_back(workspace, tmp_path, limits):
    """BuildGrid's default pool is 5 threads a core (10 calls on 2 cores) against vx's 64
    downloads and 4 uploads at once; `maximum-concurrent-rpcs: 2` pushes back on nearly every
    call. The first clone's uploads and the second's lookups all land all the same."""
    server = BuildGrid(tmp_path / "bgd", limits=limits)
    try:
        cold, warm = two_clones(workspace, tmp_path, server)
        for run in (cold, warm):  # one line a run when it lowered its calls in flight
            assert run.err.count("pushed back (RESOURCE_EXHAUSTED") <= 1, run.err
        if "maximum-concurrent-rpcs" in limits:
            assert "vx lowered its calls in flight to" in warm.err, warm.err
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
def test_calls_capped_below_the_servers_limit_are_never_pushed_back(workspace, tmp_path):
    """`VX_REAPI_MAX_CONCURRENCY=1` against `maximum-concurrent-rpcs: 2`: one call at a time
    from the start, so the server never refuses one (the margin of one covers a call the
    server still counts after its reply came)."""
    server = BuildGrid(tmp_path / "bgd", limits={"maximum-concurrent-rpcs": 2})
    try:
        cold, warm = two_clones(workspace, tmp_path, server, {"VX_REAPI_MAX_CONCURRENCY": "1"})
        assert "pushed back" not in cold.err + warm.err, cold.err + warm.err
    finally:
        server.stop()


GET = "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"
WAIT_S = 0.3  # what the RetryInfo asks: above the first backoff's 0.15 s at most


def pushback(delay_s: float | None = None) -> Abort:
    """RESOURCE_EXHAUSTED as a loaded server says it, with a RetryInfo delay when given."""
    from google.protobuf.duration_pb2 import Duration

    from vx.store.remote.reapi_pb.google.rpc import status_pb2

    status = status_pb2.Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
    if delay_s is not None:
        duration = Duration(nanos=int(delay_s * 1e9)).SerializeToString()
        status.details.add(
            type_url="type.googleapis.com/google.rpc.RetryInfo",
            value=b"\x0a" + bytes([len(duration)]) + duration,
        )
    details = status.SerializeToString()
    return Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!", details)


def asked(server) -> dict[bytes, list[float]]:
    """When each action digest's GetActionResult came, by its request."""
    by_request = defaultdict(list)
    for (method, request), when in zip(server.requests, server.times):
        if method == GET:
            by_request[request].append(when)
    return by_request


@pytest.mark.feature("RC-09")
def test_pushback_a_retry_cures_waits_what_retry_info_asks_and_is_no_failure(repo):
    """Each lookup is refused once with a RetryInfo of 0.3 s, then answered (NOT_FOUND): every
    key is asked twice, the second time no sooner than asked, and the run counts plain misses."""

    def answer(method: str, request: bytes) -> bytes:
        if method == GET:
            if len(asked(server)[request]) == 1:
                raise pushback(WAIT_S)
            raise Abort(grpc.StatusCode.NOT_FOUND)
        return b""  # empty capabilities: SHA-256 and no limits

    server = GarbageServer(answer)
    try:
        repo.write(shop_files(None)).commit()
        res = repo.vx("run", "build", "--all", env={"VX_REAPI_ENDPOINT": server.endpoint})
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        tries = asked(server)
        assert len(tries) == 4 and all(len(t) == 2 for t in tries.values()), res.err
        assert all(t[1] - t[0] >= WAIT_S for t in tries.values())
        assert "0 hits, 4 misses" in res.err and "failures" not in res.err, res.err
        assert "too large" not in res.err and res.err.count("pushed back") == 1, res.err
    finally:
        server.stop()


@pytest.mark.feature("RC-09")
def test_pushback_no_retry_cures_is_a_busy_server_never_too_large(repo):
    """A server that refuses every lookup for load: each is tried six times at most, then it
    is a miss (`server busy`, one warning), and the build runs here."""

    def answer(method: str, request: bytes) -> bytes:
        if method == GET:
            raise pushback()
        return b""

    server = GarbageServer(answer)
    try:
        repo.write(shop_files(None)).commit()
        res = repo.vx("run", "build", "--all", env={"VX_REAPI_ENDPOINT": server.endpoint})
        assert res.code == 0, res.err
        assert set(res.statuses().values()) == {("success", "miss")}
        assert all(len(t) <= 6 for t in asked(server).values())
        assert "GetActionResult: RESOURCE_EXHAUSTED; treated as a miss" in res.err, res.err
        assert "server busy" in res.err and "too large" not in res.err, res.err
    finally:
        server.stop()


WIDE = 48  # lookups the server holds until they are all in flight at once: more than 16


@pytest.mark.feature("RC-09")
def test_a_fresh_clone_keeps_many_lookups_in_flight_at_once(workspace, tmp_path):
    """Behind a link a download is two round trips, so the restore is bounded by how many vx
    keeps in flight. The server answers no lookup until WIDE of them wait at once (then every
    one, a miss); vx sent 16 at a time, so they waited out the server's patience (a bound on
    the test, not a measure) and the server never saw WIDE."""
    import threading

    held = threading.Condition()
    state = {"waiting": 0, "peak": 0, "filled": False}

    def answer(method: str, request: bytes) -> bytes:
        if method != GET:
            return b""  # empty capabilities: SHA-256 and no limits
        with held:
            state["waiting"] += 1
            state["peak"] = max(state["peak"], state["waiting"])
            if state["waiting"] >= WIDE:
                state["filled"] = True
                held.notify_all()
            held.wait_for(lambda: state["filled"], timeout=30)
            state["waiting"] -= 1
        raise Abort(grpc.StatusCode.NOT_FOUND)

    server = GarbageServer(answer, workers=2 * PACKAGES)
    try:
        second = clone(workspace, tmp_path / "clone")
        res = second.vx("run", "build", env={"VX_REAPI_ENDPOINT": server.endpoint}, timeout=600)
        assert res.code == 0, res.err[-3000:]
        assert set(res.statuses().values()) == {("success", "miss")}, res.err
        assert state["filled"] and state["peak"] >= WIDE, state
        assert "pushed back" not in res.err and "failures" not in res.err, res.err
    finally:
        server.stop()
