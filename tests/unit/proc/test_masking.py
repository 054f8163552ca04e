"""EX-04: which values are secret, and the streaming masker (split values, both streams)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from vx.model import LogChunk
from vx.proc.masking import Masker, mask_log, secrets_of


def test_names_lengths_suffixes_and_declared_names():
    env = {
        "NPM_TOKEN": "abcdef",
        "API_KEY": "short",
        "SECRET_FILE": "/run/secret-file",
        "MY_PASSWD": "pw-123456",
        "PLAIN": "visible-value",
        "DB": "x",
        "AWS_Credential": "cred-value",
    }
    assert set(secrets_of(env)) == {b"abcdef", b"pw-123456", b"cred-value"}
    assert b"x" in secrets_of(env, declared=["DB"]) and b"visible-value" not in secrets_of(
        env, declared=["DB"]
    )


def test_a_multi_line_value_is_masked_line_by_line_and_quoted_spellings_too():
    secrets = secrets_of({"GH_TOKEN": "line-one-xx\nline-two-yy", "Q_SECRET": "it's a secret"})
    out = mask_log([LogChunk(1, b"line-two-yy alone; 'it'\"'\"'s a secret' quoted\n")], secrets)
    assert b"".join(c.data for c in out) == b"*** alone; *** quoted\n"


def test_a_value_split_across_chunks_and_interleaved_with_the_other_stream_is_caught():
    masker = Masker(secrets_of({"NPM_TOKEN": "s3cr3t-value"}))
    pieces = [
        masker.feed(LogChunk(1, b"token=s3cr")),
        masker.feed(LogChunk(2, b"warn\n")),
        masker.feed(LogChunk(1, b"3t-value done\n")),
        masker.feed(LogChunk(1, b"ends with s3c")),
    ]
    pieces += masker.flush()
    assert [(c.stream, c.data) for c in pieces if c is not None] == [
        (1, b"token="),
        (2, b"warn\n"),
        (1, b"*** done\n"),
        (1, b"ends with "),
        (1, b"s3c"),
    ]


@given(st.binary(max_size=60), st.lists(st.integers(min_value=0, max_value=80), max_size=6))
def test_any_chunking_masks_like_the_whole(text, cuts):
    secrets = secrets_of({"A_TOKEN": "abcabd-x", "B_KEY": "zz-abc-zz"})
    data = text + b"abcabd-x" + text + b"zz-abc-zz"
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [LogChunk(1, data[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    whole = b"".join(c.data for c in mask_log([LogChunk(1, data)], secrets))
    assert b"".join(c.data for c in mask_log(chunks, secrets)) == whole
    assert b"abcabd-x" not in whole and b"zz-abc-zz" not in whole


def test_remote_header_values_and_tokens_are_secret_whatever_they_are_called():
    """Item: secret masking of REAPI headers — a header value is a credential by nature."""
    from vx.proc.masking import credentials

    env = {
        "VX_REAPI_HEADERS": "authorization=Bearer abc.def==,x-team=team-77\nx-buildbuddy-api-key=k",
        "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN": "nx-token-1",
        "TURBO_TOKEN": "t",
        "PLAIN": "visible-value",
    }
    assert credentials(env) == (
        "t", "nx-token-1", "Bearer abc.def==", "abc.def==", "team-77", "k"
    )  # fmt: skip
    found = set(secrets_of({"PLAIN": "visible-value"}, host=env))
    assert {b"Bearer abc.def==", b"abc.def==", b"team-77", b"nx-token-1"} <= found
    assert b"visible-value" not in found and not any(b"authorization" in s for s in found)
    # A one-letter stand-in (a test's TURBO_TOKEN=t) is shorter than any credential: masking it
    # would turn every "t" and "k" of the output into *** and protect nothing.
    assert b"t" not in found and b"k" not in found
    assert set(secrets_of(env)) == found  # the same, when the task was given them


def test_the_mcp_server_masks_a_remote_header_value_in_what_its_tools_return(tmp_path):
    """Item: secret masking of REAPI headers — the MCP tools' results are masked for the header
    values of the server's environment, whatever the header is called."""
    from vx.cli.mcp_tools import Tools

    tools = Tools(tmp_path, {"VX_REAPI_HEADERS": "authorization=Bearer zq-hdr-77"})
    shown = tools.masked({"log": ["sent Bearer zq-hdr-77", "token zq-hdr-77"]})
    assert shown == {"log": ["sent ***", "token ***"]}
