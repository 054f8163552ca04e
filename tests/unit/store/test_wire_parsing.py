"""The wire's response headers: read by splitting lines instead of by `email.parser`, they must
answer what `http.client`'s own parse answers for every field the wire and http.client read."""

import http.client
import io

import pytest

from vx.store.remote.wire import _Headers

BLOCKS = [
    b"Content-Type: application/octet-stream\r\nContent-Length: 1048\r\n"
    b"x-artifact-duration: 123\r\nConnection: keep-alive\r\nKeep-Alive: timeout=72\r\n\r\n",
    b"content-length: 5\r\nCONTENT-LENGTH: 7\r\ntransfer-encoding: chunked\r\n\r\n",  # the first wins
    b"x-artifact-tag:   c2lnbmVk  \r\nconnection: close\r\n\r\n",  # blanks before the value go, after it stay
    b"Date: Tue, 01 Dec 2026 18:00:00 GMT\r\nRetry-After: 3\r\n\r\n",
    b"\r\n",  # no fields at all
]
NAMES = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "x-artifact-tag",
    "x-artifact-duration",
    "retry-after",
    "Content-Type",
]


def _lines(block: bytes) -> list[bytes]:
    return [line + b"\n" for line in block.split(b"\n")[:-1]]


@pytest.mark.feature("RC-03")
@pytest.mark.parametrize("block", BLOCKS)
def test_headers_answer_as_http_clients_parse_does(block):
    ours = _Headers(_lines(block))
    theirs = http.client.parse_headers(io.BytesIO(block))
    for name in NAMES:
        assert ours.get(name) == theirs.get(name), name
        assert ours.get_all(name) == theirs.get_all(name), name
    assert ours.items() == list(theirs.items())


@pytest.mark.feature("RC-03")
def test_a_folded_line_continues_its_field_and_a_line_without_a_colon_is_no_field():
    ours = _Headers(
        _lines(b"x-artifact-tag: abc\r\n def\r\nnot a header\r\nretry-after: 2\r\n\r\n")
    )
    assert ours.get("x-artifact-tag") == "abc def"
    assert ours.get("retry-after") == "2"
    assert [name for name, _ in ours.items()] == ["x-artifact-tag", "retry-after"]
