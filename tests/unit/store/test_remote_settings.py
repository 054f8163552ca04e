"""remoteCache + environment -> RemoteSettings (RC-13, RC-14): precedence, team params, secrets."""

from vx.model import RemoteCacheConfig
from vx.store.remote import DEFAULT_TURBO_API, configured, resolve
from vx.store.remote.turbo import team_query

SECRET = "vxcanary-unit-token"


def test_turbo_env_wins_over_the_config_like_turbo_itself():
    cfg = RemoteCacheConfig(
        kind="turbo", url="https://a.example", team="cfg-team", team_id="team_cfg"
    )
    s = resolve(
        cfg, {"TURBO_API": "https://b.example/", "TURBO_TEAM": "env-team", "TURBO_TOKEN": SECRET}
    ).settings
    assert (s.url, s.team, s.team_id, s.token) == (
        "https://b.example",
        "env-team",
        "team_cfg",
        SECRET,
    )


def test_a_token_and_team_in_the_env_alone_enable_vercel():
    env = {"TURBO_TOKEN": SECRET, "TURBO_TEAM": "web"}
    assert configured(None, env)
    assert resolve(None, env).settings.url == DEFAULT_TURBO_API
    assert not configured(None, {"TURBO_TOKEN": SECRET})  # turbo needs a team to cache remotely too


def test_vercel_build_env_is_understood():
    s = resolve(
        None, {"VERCEL_ARTIFACTS_TOKEN": SECRET, "VERCEL_ARTIFACTS_OWNER": "team_abc"}
    ).settings
    assert s.token == SECRET and s.team_id == "team_abc"


def test_team_id_is_sent_only_when_it_looks_like_one():
    s = resolve(
        RemoteCacheConfig(kind="turbo", url="https://x.example", team="web", team_id="team_1"), {}
    ).settings
    assert team_query(s) == {"teamId": "team_1", "slug": "web"}
    s = resolve(
        RemoteCacheConfig(kind="turbo", url="https://x.example", team_id="abc"), {}
    ).settings
    assert team_query(s) == {}


def test_secrets_never_show_in_repr_or_endpoint():
    env = {
        "TURBO_API": "https://cache.example:8443/api?x=1",
        "TURBO_TOKEN": SECRET,
        "TURBO_TEAM": "t",
        "TURBO_REMOTE_CACHE_SIGNATURE_KEY": "vxcanary-key",
    }
    s = resolve(None, env).settings
    assert SECRET not in repr(s) and "vxcanary-key" not in repr(s)
    assert not {"token", "signature_key", "headers"} & {name for name, _ in s.__rich_repr__()}
    assert s.endpoint == "https://cache.example:8443/api"
    assert s.signature and s.signature_key == b"vxcanary-key"  # a key alone turns signing on


def test_nx_comes_from_its_env_and_config():
    s = resolve(
        None,
        {
            "NX_SELF_HOSTED_REMOTE_CACHE_SERVER": "http://127.0.0.1:9/",
            "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN": SECRET,
        },
    ).settings
    assert (s.kind, s.url, s.token) == ("nx", "http://127.0.0.1:9", SECRET)
    assert (
        resolve(RemoteCacheConfig(kind="nx", url="https://nx.example"), {}).settings.url
        == "https://nx.example"
    )


def test_timeouts_and_bounds():
    cfg = RemoteCacheConfig(
        kind="turbo", url="https://x.example", timeout_ms=2500, max_artifact_bytes=1000
    )
    s = resolve(cfg, {}).settings
    assert (s.timeout_s, s.upload_timeout_s, s.max_artifact_bytes) == (2.5, 60.0, 1000)
    s = resolve(
        cfg, {"TURBO_REMOTE_CACHE_TIMEOUT": "7", "TURBO_REMOTE_CACHE_UPLOAD_TIMEOUT": "90"}
    ).settings
    assert (s.timeout_s, s.upload_timeout_s) == (7.0, 90.0)


def test_unsafe_setups_are_refused_with_a_reason():
    cases = {
        "https://u:p@cache.example": "carries credentials",
        "http://cache.example": "clear text",
        "ftp://cache.example": "no usable server URL",
    }
    for url, needle in cases.items():
        found = resolve(None, {"TURBO_API": url, "TURBO_TOKEN": SECRET})
        assert found.settings is None and needle in found.problem and SECRET not in found.problem
    assert (
        resolve(None, {"TURBO_API": "http://localhost:3000", "TURBO_TOKEN": SECRET}).settings
        is not None
    )


def test_a_remote_restore_over_http_loads_no_dataclasses():
    """The settings are a Struct: `dataclasses` (and the code a frozen dataclass generates) stays
    out of a fresh clone's way to its first download (docs/benchmarks.md)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, vx.store.layered, vx.store.remote.turbo, vx.store.remote.wire;"
        "print('dataclasses' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30
    )
    assert out.stdout.strip() == "False", out.stderr
