"""How the environment picks a remote cache's proxy (store/remote/proxy.py): curl's rules."""

import pytest

from vx.store.remote.proxy import Proxy, ProxyError, bypassed, for_url


@pytest.mark.parametrize(
    ("host", "port", "listed", "expected"),
    [
        ("cache.example.com", 443, "example.com", True),  # a subdomain
        ("example.com", 443, ".example.com", True),  # a leading dot is the same name
        ("notexample.com", 443, "example.com", False),
        ("cache.example.com", 443, "other.org, example.com", True),  # commas and spaces
        ("anything", 80, "*", True),
        ("anything", 80, "*.example.com", False),  # `*` alone is the only wildcard
        ("10.1.2.3", 80, "10.0.0.0/8", True),
        ("10.1.2.3", 80, "10.1.2.3", True),
        ("11.1.2.3", 80, "10.0.0.0/8", False),
        ("::1", 80, "::1", True),
        ("fd00::5", 80, "[fd00::]/8", False),  # a bracketed network is no network
        ("fd00::5", 80, "fd00::/8", True),
        ("cache.example.com", 8443, "example.com:8443", True),
        ("cache.example.com", 443, "example.com:8443", False),
        ("127.0.0.1", 3000, "127.0.0.1:3000", True),
        ("::1", 3000, "[::1]:3000", True),
        ("::1", 80, "[::1]:3000", False),
        ("Cache.Example.COM.", 443, "example.com", True),
    ],
)
def test_no_proxy_entries(host, port, listed, expected):
    assert bypassed(host, port, {"no_proxy": listed}) is expected


def test_lowercase_first_and_http_proxy_in_lowercase_only():
    env = {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"}
    assert for_url("https://cache", env) == Proxy("low", 1, None)
    assert for_url("https://cache", {"HTTPS_PROXY": "up:2"}) == Proxy("up", 2, None)
    assert for_url("http://cache", {"HTTP_PROXY": "http://up:2"}) is None
    assert for_url("http://cache", {"http_proxy": "low"}) == Proxy("low", 80, None)
    assert for_url("http://cache", {"ALL_PROXY": "all:3"}) == Proxy("all", 3, None)
    assert for_url("https://cache", {"https_proxy": "", "ALL_PROXY": "all:3"}) is None
    assert (
        for_url("https://c.example.com", {"https_proxy": "p:1", "NO_PROXY": "example.com"}) is None
    )
    assert for_url("https://c", {"https_proxy": "p:1", "no_proxy": "", "NO_PROXY": "*"}) is not None


def test_credentials_are_basic_auth_percent_decoded():
    proxy = for_url("https://cache", {"https_proxy": "http://me%40corp:p%3Ass@proxy:3128"})
    assert proxy == Proxy("proxy", 3128, "Basic bWVAY29ycDpwOnNz")  # me@corp:p:ss


@pytest.mark.parametrize("value", ["https://proxy:443", "socks5://proxy:1080", "http://proxy:x"])
def test_proxies_vx_cannot_speak_to_are_refused(value):
    with pytest.raises(ProxyError):
        for_url("https://cache", {"https_proxy": value})
