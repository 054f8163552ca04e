"""The remote cache through an HTTP proxy named by the environment, as curl reads it
(docs/remote-cache.md § Proxies): a real proxy on loopback (support/proxies.py) in front of a
real Nx-API server, plain and over TLS."""

import base64

import pytest
from support.commands import needs
from support.proxies import HttpProxy
from support.reapi_servers import Tls
from support.remote_servers import CANARY, NxServer, shop_files


@pytest.fixture
def proxy():
    server = HttpProxy()
    yield server
    server.close()


def nx_env(server, **extra: str) -> dict[str, str]:
    return {
        "NX_SELF_HOSTED_REMOTE_CACHE_SERVER": server.url,
        "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN": CANARY,
        "CI": "1",
        **extra,
    }


def test_an_http_cache_is_reached_through_http_proxy(repo, proxy):
    nx = NxServer({CANARY: "write"})
    try:
        repo.write(shop_files({"nx": {}})).commit()
        res = repo.vx("run", "build", "--all", env=nx_env(nx, http_proxy=f"127.0.0.1:{proxy.port}"))
        assert res.code == 0, res.err
        assert len(nx.records) == 4, res.err
        host = nx.url.removeprefix("http://")
        puts = [s for s in proxy.seen if s.startswith(f"PUT http://{host}/v1/cache/")]
        assert len(puts) == 4, proxy.seen
    finally:
        nx.close()


@needs("openssl")
def test_an_https_cache_is_tunnelled_with_the_proxys_credentials(repo, proxy, tmp_path):
    """CONNECT to the cache's host and port, `Proxy-Authorization` from the URL's user and
    percent-decoded password; TLS runs end to end (the cache's CA, not the proxy's)."""
    tls = Tls(tmp_path / "tls")
    nx = NxServer({CANARY: "write"}, tls=tls)
    proxy.require = "Basic " + base64.b64encode(b"me:p@ss").decode()
    try:
        repo.write(shop_files({"nx": {}})).commit()
        env = nx_env(
            nx, HTTPS_PROXY=f"http://me:p%40ss@127.0.0.1:{proxy.port}", SSL_CERT_FILE=str(tls.ca)
        )
        res = repo.vx("run", "build", "--all", env=env)
        assert res.code == 0, res.err
        assert len(nx.records) == 4, res.err
        host = nx.url.removeprefix("https://")
        assert proxy.seen and set(proxy.seen) == {f"CONNECT {host}"}, proxy.seen
    finally:
        nx.close()


@needs("openssl")
def test_a_proxy_that_refuses_the_credentials_is_a_miss_with_its_reason(repo, proxy, tmp_path):
    tls = Tls(tmp_path / "tls")
    nx = NxServer({CANARY: "write"}, tls=tls)
    proxy.require = "Basic " + base64.b64encode(b"me:right").decode()
    try:
        repo.write(shop_files({"nx": {}})).commit()
        env = nx_env(
            nx, https_proxy=f"http://me:wrong@127.0.0.1:{proxy.port}", SSL_CERT_FILE=str(tls.ca)
        )
        res = repo.vx("run", "build", "--all", env=env)
        assert res.code == 0, res.err  # a remote's failure is never a failed build
        assert nx.records == {}
        assert "the proxy refused the tunnel (407)" in res.err, res.err
        assert "wrong" not in res.err
    finally:
        nx.close()


@pytest.mark.parametrize(
    "env",
    [
        {"no_proxy": "127.0.0.1"},
        {"NO_PROXY": "localhost, 127.0.0.0/8"},
        {"no_proxy": "*"},
        {"HTTP_PROXY": "use-this"},  # curl reads http_proxy in lowercase only
    ],
    ids=["ip", "cidr", "star", "uppercase-http-proxy-ignored"],
)
def test_no_proxy_and_uppercase_http_proxy_go_direct(repo, proxy, env):
    nx = NxServer({CANARY: "write"})
    proxied = f"127.0.0.1:{proxy.port}"
    env = {k: proxied if v == "use-this" else v for k, v in env.items()}
    if "HTTP_PROXY" not in env:
        env["http_proxy"] = proxied
    try:
        repo.write(shop_files({"nx": {}})).commit()
        res = repo.vx("run", "build", "--all", env=nx_env(nx, **env))
        assert res.code == 0, res.err
        assert len(nx.records) == 4, res.err
        assert proxy.seen == []
    finally:
        nx.close()


def test_a_socks_proxy_is_refused_with_its_reason(repo):
    nx = NxServer({CANARY: "write"})
    try:
        repo.write(shop_files({"nx": {}})).commit()
        res = repo.vx("run", "build", "--all", env=nx_env(nx, http_proxy="socks5://127.0.0.1:9"))
        assert res.code == 0, res.err
        assert nx.records == {}
        assert "socks5://127.0.0.1 is not supported" in res.err, res.err
        assert "Traceback" not in res.err
    finally:
        nx.close()
