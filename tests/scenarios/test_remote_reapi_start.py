"""A fresh clone's REAPI layer opens while the run plans (grpc's import, the channel,
`GetCapabilities` on a thread of its own), so its first lookup does not wait for them after the
keys; a run over a cache it already has opens nothing early and, every task a local hit, asks
the server nothing. In-process `prepare` against a gRPC server of the test's own, so the test
can stand inside the keys step (no timing: an event, with a bound on the test)."""

import os
import threading

import grpc
import pytest
from support.reapi_servers import Abort, GarbageServer
from support.remote_servers import planned, shop_files, threads_named

CAPS = "/build.bazel.remote.execution.v2.Capabilities/GetCapabilities"
BOUND_S = 60  # what the test waits for an answer that comes at once when all is well


@pytest.fixture
def server():
    asked = threading.Event()

    def answer(method: str, request: bytes) -> bytes:
        if method == CAPS:
            asked.set()
            return b""  # empty capabilities: SHA-256, no limits
        raise Abort(grpc.StatusCode.NOT_FOUND)  # every lookup a miss

    made = GarbageServer(answer)
    made.asked = asked
    yield made
    made.stop()


def reapi_env(server) -> dict[str, str]:
    return {"VX_REAPI_ENDPOINT": server.endpoint}


@pytest.mark.feature("RC-09")
def test_a_fresh_clone_asks_the_capabilities_while_its_keys_are_made(repo, server, monkeypatch):
    repo.write(shop_files(None)).commit()
    assert not (repo.root / ".vx").exists()
    during_keys: list[bool] = []
    planned(
        repo, monkeypatch, lambda: during_keys.append(server.asked.wait(BOUND_S)), reapi_env(server)
    )
    assert during_keys == [True]  # before: asked only by the first lookup, after the keys
    assert server.seen[0] == CAPS and server.seen.count(CAPS) == 1, server.seen


@pytest.mark.feature("RC-09")
def test_a_run_over_its_own_cache_opens_nothing_early_and_asks_nothing(repo, server, monkeypatch):
    repo.write(shop_files(None)).commit()
    first = repo.vx("run", "build", "--all", env={"VX_SHARED_STORE": "0"})
    assert first.code == 0, first.err
    during_keys: list[bool] = []
    earlier = threads_named("vx-reapi-open")  # another test's, still asking on a loaded machine

    def at_keys() -> None:
        during_keys.append(server.asked.is_set() or bool(threads_named("vx-reapi-open") - earlier))

    planned(repo, monkeypatch, at_keys, reapi_env(server))
    assert during_keys == [False]
    assert server.seen == []  # every task a local hit: the remote is never asked


WATCH = """
import os
set_keys = []
setitem = os._Environ.__setitem__
def watched(self, key, value):
    set_keys.append(key)
    setitem(self, key, value)
os._Environ.__setitem__ = watched
import vx.store.remote.reapi
print(sorted(set(set_keys)), repr(os.environ.get("GRPC_VERBOSITY")), repr(os.getenv("GRPC_VERBOSITY")))
"""


@pytest.mark.feature("RC-09")
def test_loading_grpc_never_touches_the_environment_the_keys_are_made_from():
    """grpc is quieted through the C environment alone: with the import on a thread beside the
    keys, a GRPC_VERBOSITY set in `os.environ` for its while could reach a key or a task."""
    import subprocess
    import sys

    from support.workspace import SRC

    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    env["PYTHONPATH"] = SRC
    out = subprocess.run(
        [sys.executable, "-c", WATCH], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "None", "None"], out.stdout
