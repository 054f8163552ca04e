"""A fresh clone's HTTP cache connections open while the run plans (`Wire.warm`), so its first
downloads do not each pay a connection's round trip after the keys; the download threads take
them, and one the server closed while it sat idle is opened again, not a miss. A run over a
cache it already has opens nothing early. In-process `prepare` against the Nx API server of
the suite (it counts the connections it accepts), so the test can stand inside the keys step
(no timing: an event, with a bound on the test)."""

import io
import socket
import threading

import pytest
from support.remote_servers import CANARY, NxServer, planned, shop_files, threads_named

from vx.store.remote import RemoteSettings
from vx.store.remote.nx import NxLayer

BOUND_S = 60  # what the test waits for a connection that comes at once when all is well


class CountingServer(NxServer):
    """The Nx API; `accepted` is set at the first connection, `sockets` holds them all."""

    def __init__(self):
        self.accepted = threading.Event()
        self.sockets: list[socket.socket] = []
        self._changed = threading.Condition()
        super().__init__({CANARY: "write"})

    def process_request(self, request, client_address) -> None:
        with self._changed:
            self.sockets.append(request)
            self._changed.notify_all()
        self.accepted.set()
        super().process_request(request, client_address)

    def wait_for(self, count: int) -> None:
        """Until `count` connections are accepted (a client's connect returns before that)."""
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.sockets) >= count, BOUND_S)


@pytest.fixture
def server():
    made = CountingServer()
    yield made
    made.close()


def nx_env(server) -> dict[str, str]:
    return {
        "NX_SELF_HOSTED_REMOTE_CACHE_SERVER": server.url,
        "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN": CANARY,
    }


@pytest.mark.feature("RC-09")
def test_a_fresh_clone_opens_its_connections_while_its_keys_are_made(repo, server, monkeypatch):
    repo.write(shop_files(None)).commit()
    assert not (repo.root / ".vx").exists()
    during_keys: list[bool] = []
    planned(
        repo, monkeypatch, lambda: during_keys.append(server.accepted.wait(BOUND_S)), nx_env(server)
    )
    assert during_keys == [True]  # before: the first download connected, after the keys
    for thread in threads_named(
        "vx-remote-open"
    ):  # none outlives its test (a SYN the backlog dropped waits)
        thread.join(BOUND_S)


@pytest.mark.feature("RC-09")
def test_a_run_over_its_own_cache_opens_no_connection_early(repo, server, monkeypatch):
    repo.write(shop_files(None)).commit()
    first = repo.vx("run", "build", "--all", env={"VX_SHARED_STORE": "0"})
    assert first.code == 0, first.err
    during_keys: list[bool] = []
    earlier = threads_named(
        "vx-remote-open"
    )  # another test's, still connecting on a loaded machine

    def at_keys() -> None:
        during_keys.append(
            server.accepted.is_set() or bool(threads_named("vx-remote-open") - earlier)
        )

    planned(repo, monkeypatch, at_keys, nx_env(server))
    assert during_keys == [False]
    assert server.seen == []  # every task a local hit: the remote is never asked


def nx_layer(server) -> NxLayer:
    server.records.update({"a" * 16: b"A" * 1000, "b" * 16: b"B" * 70_000})
    return NxLayer(RemoteSettings(kind="nx", url=server.url, token=CANARY))


def warmed(layer: NxLayer, count: int) -> None:
    for thread in layer.wire.warm(count):  # the first starts the others before it ends
        thread.join(BOUND_S)
    assert len(layer.wire._idle) == count


def test_each_download_thread_takes_a_warmed_connection(server):
    layer = nx_layer(server)
    warmed(layer, 3)
    got: list[bytes] = []

    def download() -> None:
        sink = io.BytesIO()
        assert layer.get("a" * 16, sink) is not None
        got.append(sink.getvalue())

    for _ in range(3):  # one after another: each thread new, none holding a connection yet
        thread = threading.Thread(target=download)
        thread.start()
        thread.join(BOUND_S)
    layer.close()
    assert got == [b"A" * 1000] * 3
    assert server.connections == 3  # the warmed ones, no more


def test_a_warmed_connection_the_server_closed_while_idle_is_opened_again(server):
    """A server's keep-alive timeout can end a warmed connection before the keys are made: the
    download is tried once on a fresh connection, as after any idle one, and is a hit."""
    layer = nx_layer(server)
    warmed(layer, 2)
    server.wait_for(2)
    for sock in list(server.sockets):
        sock.shutdown(socket.SHUT_RDWR)
    for key, body in (("b" * 16, b"B" * 70_000), ("a" * 16, b"A" * 1000)):
        sink = io.BytesIO()
        assert layer.get(key, sink) is not None  # before the retry: "the server closed…", a miss
        assert sink.getvalue() == body
    layer.close()
    assert server.connections == 3  # the two warmed (closed) and the one that served both


def test_closing_the_layer_closes_the_connections_nobody_took(server):
    layer = nx_layer(server)
    warmed(layer, 2)
    idle = list(layer.wire._idle)
    layer.close()
    assert all(conn.sock is None for conn in idle) and layer.wire._idle == []


def test_a_connection_warmed_after_the_layer_closed_is_not_kept(server, monkeypatch):
    """A run that ends while its connections still open (it failed early) keeps none of them."""
    from vx.store.remote.wire import Wire

    layer = nx_layer(server)
    go, made = threading.Event(), []
    connect = Wire._connect

    def held(self, conn, timeout):
        assert go.wait(BOUND_S)
        made.append(conn)
        return connect(self, conn, timeout)

    monkeypatch.setattr(Wire, "_connect", held)
    threads = layer.wire.warm(2)
    layer.close()
    go.set()
    for thread in threads:
        thread.join(BOUND_S)
    assert len(made) == 2 and all(conn.sock is None for conn in made)
    assert layer.wire._idle == [] and layer.wire._open == set()
