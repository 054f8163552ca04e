"""One keep-alive connection per thread (the remote wire): a body read to its end frees the
connection for the thread's next request. A fetch thread that downloads twice in a row must
not see `ResponseNotReady` — which a loaded machine used to turn into a spurious miss."""

import io

from support.remote_servers import CANARY, NxServer

from vx.store.remote import RemoteSettings
from vx.store.remote.nx import NxLayer


def test_one_thread_downloads_twice_over_one_kept_alive_connection():
    server = NxServer({CANARY: "write"})
    try:
        server.records.update({"a" * 16: b"A" * 1000, "b" * 16: b"B" * 70_000})
        layer = NxLayer(RemoteSettings(kind="nx", url=server.url, token=CANARY))
        for key, body in (
            ("a" * 16, b"A" * 1000),
            ("b" * 16, b"B" * 70_000),
            ("a" * 16, b"A" * 1000),
        ):
            sink = io.BytesIO()
            assert layer.get(key, sink) is not None
            assert sink.getvalue() == body
        assert (
            layer.get("c" * 16, io.BytesIO()) is None
        )  # and a 404 after them, on the same connection
        layer.close()
    finally:
        server.close()
    assert server.connections == 1  # all four requests on one kept-alive connection
