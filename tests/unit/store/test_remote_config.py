"""`remoteCache` in vx.workspace.json (RC-13, RC-14): its shape, and never a secret in a file."""

import pytest

from vx.config.schema import validate_workspace
from vx.errors import ConfigError
from vx.model import RemoteCacheConfig


def remote(value):
    return validate_workspace({"remoteCache": value}, "vx.workspace.json").remote_cache


def refusal(value) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        remote(value)
    return info.value


def test_turbo_and_nx_shapes():
    assert remote(
        {
            "turbo": {
                "apiUrl": "https://c.example",
                "team": "web",
                "teamId": "team_1",
                "signature": True,
            },
            "upload": "always",
            "timeout": 5000,
            "maxArtifactSize": 1000,
        }
    ) == RemoteCacheConfig(
        kind="turbo",
        url="https://c.example",
        team="web",
        team_id="team_1",
        signature=True,
        upload="always",
        timeout_ms=5000,
        max_artifact_bytes=1000,
    )
    assert remote({"nx": {"url": "https://nx.example"}}) == RemoteCacheConfig(
        kind="nx", url="https://nx.example"
    )
    assert remote({"turbo": {}}) == RemoteCacheConfig(kind="turbo")


@pytest.mark.parametrize(
    "where",
    [{"turbo": {"token": "s"}}, {"nx": {"accessToken": "s"}}, {"turbo": {}, "signatureKey": "s"}],
)
def test_secrets_are_refused_with_the_env_to_use(where):
    err = refusal(where)
    assert "must not be written in a config file" in err.message and "TURBO_TOKEN" in err.hint


def test_exactly_one_wire():
    assert "exactly one" in refusal({}).message
    assert "exactly one" in refusal({"turbo": {}, "nx": {}}).message


def test_turbo_json_spellings_point_home():
    assert refusal({"apiUrl": "x"}).hint == "in vx it is remoteCache.turbo.apiUrl"
    assert refusal({"turbo": {"teamSlug": "x"}}).hint == "in vx it is `team`"
    assert "not supported yet" in refusal({"turbo": {}, "preflight": True}).message


@pytest.mark.parametrize(
    "value,field",
    [
        ({"turbo": {}, "upload": "sometimes"}, "remoteCache.upload"),
        ({"turbo": {"signature": "yes"}}, "remoteCache.turbo.signature"),
        ({"turbo": {}, "timeout": 0}, "remoteCache.timeout"),
        ({"nx": {"url": 3}}, "remoteCache.nx.url"),
    ],
)
def test_bad_values_name_their_field(value, field):
    assert refusal(value).field == field
