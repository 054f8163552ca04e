"""BuildGrid as it ships, and as it is tuned down: a server that holds only so many calls at
once answers the rest RESOURCE_EXHAUSTED ("Concurrent RPC limit exceeded"). That is pushback,
not an artifact too large: vx tries the call again and sends fewer at once, so a fresh clone of
a generated 100-package build gets every build from the server, byte for byte."""

from collections import Counter

import pytest
from support.corpora import generated
from support.reapi_servers import BuildGrid
from support.remote_servers import clone, outputs

PACKAGES = 100


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The generated workspace, committed once; each test builds in its own clones of it."""
    return generated(tmp_path_factory.mktemp("limits") / "ws", "vx", packages=PACKAGES)


@pytest.mark.feature("RC-09")
@pytest.mark.parametrize(
    "limits",
    [{}, {"thread-pool-size": 5}, {"maximum-concurrent-rpcs": 2}],
    ids=["default-pool", "five-threads", "two-calls"],
)
def test_a_fresh_clone_gets_every_build_from_a_server_that_pushes_back(workspace, tmp_path, limits):
    """BuildGrid's default pool is 5 threads a core (10 calls on 2 cores) against vx's 16
    downloads and 4 uploads at once; `maximum-concurrent-rpcs: 2` pushes back on nearly every
    call. The first clone's uploads and the second's lookups all land all the same."""
    server = BuildGrid(tmp_path / "bgd", limits=limits)
    try:
        first = clone(workspace, tmp_path / "first")
        cold = first.vx("run", "build", env=server.env(), timeout=600)
        assert cold.code == 0, cold.err[-3000:]
        assert "uploads" in cold.err and f"{PACKAGES} uploads" in cold.err, cold.err[-3000:]
        second = clone(workspace, tmp_path / "second")
        warm = second.vx("run", "build", env=server.env(), timeout=600)
        assert warm.code == 0, warm.err[-3000:]
        assert Counter(warm.statuses().values()) == {("success", "remote"): PACKAGES}, warm.err
        assert f"{PACKAGES} hits, 0 misses" in warm.err, warm.err
        assert "too large" not in cold.err + warm.err and "failures" not in cold.err + warm.err
        for run in (cold, warm):  # one line a run when it lowered its calls in flight
            assert run.err.count("pushed back (RESOURCE_EXHAUSTED") <= 1, run.err
        if "maximum-concurrent-rpcs" in limits:
            assert "vx lowered its calls in flight to" in warm.err, warm.err
        built = outputs(first)
        assert len(built) >= PACKAGES and outputs(second) == built
    finally:
        server.stop()
