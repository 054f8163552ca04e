"""The network filter (SB-08): host patterns, and the proxy driven by real curl, socat and node.

The proxy listens on a unix socket; a socat bridge on an ephemeral loopback port stands in
for the in-sandbox bridge, and a loopback HTTP server is the "internet".
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from vx.model import Violation
from vx.sandbox import hosts
from vx.sandbox.bridges import Gate, InsideBridges, gate_prelude, nsenter_path
from vx.sandbox.proxy import BRIDGE_PORT, Proxy, network_env, network_plan

pytestmark = pytest.mark.skipif(
    shutil.which("socat") is None or shutil.which("curl") is None,
    reason="socat and curl are installed by dev/test",
)


# ---------------------------------------------------------------- patterns (pure)


@pytest.mark.parametrize(
    "text, host, wildcard, port",
    [
        ("registry.npmjs.org", "registry.npmjs.org", False, None),
        ("*.Example.COM:443", "example.com", True, 443),
        ("localhost:8080", "localhost", False, 8080),
        ("127.0.0.1", "127.0.0.1", False, None),
        ("[::1]:9000", "::1", False, 9000),
        ("example.com.", "example.com", False, None),
    ],
)
def test_pattern_forms(text, host, wildcard, port):
    pattern = hosts.parse(text)
    assert (pattern.host, pattern.wildcard, pattern.port) == (host, wildcard, port)


@pytest.mark.parametrize(
    "text, words",
    [
        ("https://example.com/x", "has a scheme"),
        ("*", "every host"),
        ("*.com", "top-level domain"),
        ("intranet", "no dot"),
        ("example.com/api", "has a path"),
        ("example.com:99999", "bad port"),
        ("ex*ample.com", "leading `*.`"),
        ("::1", "bare IPv6"),
        ("", "not a host pattern"),
    ],
)
def test_bad_patterns_are_refused_with_a_reason(text, words):
    problem = hosts.problem(text)
    assert problem is not None and words in problem[0], problem


def test_star_is_a_valid_deny_only():
    assert hosts.problem("*", deny=True) is None
    assert hosts.HostFilter(["example.com"], ["*"]).allows("example.com", 443) is False


def test_filter_denies_first_and_wildcards_match_subdomains_only():
    f = hosts.HostFilter(["*.example.com", "api.other.org:443"], ["secret.example.com"])
    assert f.allows("a.example.com", 80) and f.allows("A.B.EXAMPLE.COM.", 443)
    assert not f.allows("example.com", 443)  # the apex is not a subdomain
    assert not f.allows("secret.example.com", 443)
    assert f.denied_by("SECRET.example.com", 1).text == "secret.example.com"
    assert f.allows("api.other.org", 443) and not f.allows("api.other.org", 80)
    assert not f.allows("evil-example.com", 80)


# ---------------------------------------------------------------- the proxy, over real sockets


class _Origin(http.server.BaseHTTPRequestHandler):
    """The loopback "internet": echoes method, path and body."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/big/"):
            payload = b"x" * int(self.path.split("/")[2])
        else:
            payload = f"{self.command} {self.path} {body.decode()}|{self.headers.get('Proxy-Connection')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def origin():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Origin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


class Bridge:
    """socat on an ephemeral loopback port, relaying to one of the proxy's sockets."""

    def __init__(self, sock: Path):
        self.proc = subprocess.Popen(
            [
                "socat",
                "-d",
                "-d",
                "TCP-LISTEN:0,bind=127.0.0.1,fork,reuseaddr,nodelay",
                f"UNIX-CONNECT:{sock}",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stderr.readline()
        match = re.search(r"listening on .*:(\d+)$", line.strip())
        assert match, line
        self.port = int(match.group(1))
        threading.Thread(
            target=self.proc.stderr.read, daemon=True
        ).start()  # never let its log block it

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


@pytest.fixture
def proxy(tmp_path):
    p = Proxy(tmp_path)
    p.start(["127.0.0.1", "localhost:1"], ["denied.example.com"])
    bridges: list[Bridge] = []

    def bridge(label: str = "") -> int:
        bridges.append(Bridge(p.attach(label)))
        return bridges[-1].port

    p.bridge = bridge
    yield p
    for b in bridges:
        b.close()
    p.stop()


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "10", "--noproxy", "", *args],
        capture_output=True,
        text=True,
        timeout=20,
    )


def test_plain_http_connect_and_socks5_reach_an_allowed_host(proxy, origin):
    port = proxy.bridge()
    url = f"http://127.0.0.1:{origin}/a?b=1"
    plain = curl("-x", f"http://127.0.0.1:{port}", url)
    tunnel = curl("-p", "-x", f"http://127.0.0.1:{port}", url)
    socks = curl("-x", f"socks5h://127.0.0.1:{port}", url)
    # the absolute URI became origin-form and the proxy's hop headers were dropped
    assert plain.stdout == "GET /a?b=1 |None", plain
    assert tunnel.stdout == socks.stdout == "GET /a?b=1 |None", (tunnel, socks)
    assert proxy.violations() == []


def test_request_bodies_and_large_responses_pass_through(proxy, origin):
    port = proxy.bridge()
    posted = curl(
        "-x", f"http://127.0.0.1:{port}", "--data-binary", "payload", f"http://127.0.0.1:{origin}/p"
    )
    assert posted.stdout.startswith("POST /p payload"), posted
    size = 3 * 1024 * 1024 + 17
    big = subprocess.run(
        [
            "curl",
            "-sS",
            "--noproxy",
            "",
            "-p",
            "-x",
            f"http://127.0.0.1:{port}",
            f"http://127.0.0.1:{origin}/big/{size}",
        ],
        capture_output=True,
        timeout=20,
    )
    assert big.returncode == 0 and len(big.stdout) == size


def test_an_unlisted_host_is_refused_and_recorded(proxy):
    port = proxy.bridge("app#build")
    plain = curl("-x", f"http://127.0.0.1:{port}", "http://unlisted.example.org:8080/x")
    tunnel = curl("-p", "-x", f"http://127.0.0.1:{port}", "https://unlisted.example.org/")
    socks = curl("-x", f"socks5h://127.0.0.1:{port}", "http://denied.example.com/")
    assert "network access to unlisted.example.org:8080 is not granted" in plain.stdout
    assert tunnel.returncode == 56 and "403" in tunnel.stderr
    assert socks.returncode == 97
    assert proxy.violations("app#build") == [
        Violation("network", "unlisted.example.org:8080", 'allow.network "unlisted.example.org"'),
        Violation("network", "unlisted.example.org:443", 'allow.network "unlisted.example.org"'),
        Violation(
            "network", "denied.example.com:80", 'denied by deny.network "denied.example.com"'
        ),
    ]


def test_refusals_belong_to_the_socket_they_came_through_and_ignore_silences(proxy):
    a, b = proxy.bridge("a#t"), proxy.bridge("b#t")
    curl("-x", f"http://127.0.0.1:{a}", "http://one.example.org/")
    curl(
        "-x", f"http://127.0.0.1:{a}", "http://One.Example.org/again"
    )  # same endpoint: one violation
    curl("-x", f"http://127.0.0.1:{b}", "http://two.example.org/")
    assert [v.path for v in proxy.violations("a#t")] == ["one.example.org:80"]
    assert [v.path for v in proxy.violations("b#t")] == ["two.example.org:80"]
    assert proxy.violations("b#t", ignore=["TWO.example.org:80"]) == []
    assert len(proxy.refusals()) == 3


def test_a_port_restricted_pattern_refuses_other_ports(proxy, origin):
    port = proxy.bridge()
    refused = curl("-x", f"http://127.0.0.1:{port}", f"http://localhost:{origin}/")
    assert "localhost" in refused.stdout and [v.path for v in proxy.violations()] == [
        f"localhost:{origin}"
    ]


def test_nonsense_and_origin_form_requests_get_400_and_no_violation(proxy):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(proxy.attach("")))
        s.sendall(b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    with socket.socket(socket.AF_UNIX) as s:  # SOCKS5 BIND is not offered
        s.connect(str(proxy.attach("")))
        s.sendall(b"\x05\x01\x00")
        assert s.recv(2) == b"\x05\x00"
        s.sendall(b"\x05\x02\x00\x03\x0bexample.com\x00\x50")
        assert s.recv(10)[1] == 0x07
    assert proxy.refusals() == []


def test_private_directory_and_cleanup(tmp_path):
    p = Proxy(tmp_path)
    sock = p.start(["example.com"])
    directory = sock.parent
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700 and stat.S_ISSOCK(sock.stat().st_mode)
    assert p.attach("x") != sock and p.attach("x") == p.attach("x")
    p.detach("x")
    p.stop()
    assert not directory.exists()


# ---------------------------------------------------------------- what the sandbox gets


def test_network_env_points_every_client_at_the_bridge(tmp_path):
    env = network_env(3128, preload=Path("/t/p.cjs"), node_options="--max-old-space-size=512")
    assert (
        env["HTTPS_PROXY"]
        == env["http_proxy"]
        == env["npm_config_https_proxy"]
        == "http://127.0.0.1:3128"
    )
    assert env["ALL_PROXY"] == "socks5h://127.0.0.1:3128"
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1" and env["NODE_USE_ENV_PROXY"] == "1"
    assert env["NODE_OPTIONS"] == "--max-old-space-size=512 --require=/t/p.cjs"
    assert network_env(9, loopback_granted=True)["NO_PROXY"] == ""
    assert "NODE_OPTIONS" not in network_env(9)


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("bwrap", "socat", "curl")) or nsenter_path() is None,
    reason="bwrap, socat, curl and nsenter are installed by dev/test",
)
def test_the_bridge_runs_outside_the_sandbox_in_its_network_namespace(proxy, origin, tmp_path):
    plan = network_plan(proxy, "box#t")
    assert plan.env["HTTP_PROXY"] == f"http://127.0.0.1:{BRIDGE_PORT}"
    assert plan.socket not in plan.bwrap_args  # the proxy's socket is never mounted in
    gate = Gate(tmp_path / "gate")
    script = (
        gate_prelude(gate.path) + f" curl -sS http://127.0.0.1:{origin}/inside; echo; "
        "curl -sS http://outside.example.org/; echo; cat /proc/[0-9]*/comm | tr '\\n' ' '; exit 0"
    )
    status_r, status_w = os.pipe()
    argv = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        *plan.bwrap_args,
        "--ro-bind",
        gate.path,
        gate.path,
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--json-status-fd",
        str(status_w),
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        *[x for k, v in plan.env.items() for x in ("--setenv", k, v)],
        "--",
        "/bin/sh",
        "-c",
        script,
    ]
    box = subprocess.Popen(
        argv, pass_fds=(status_w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    os.close(status_w)
    status = os.fdopen(status_r)  # open until bwrap has written its exit status too
    pid = json.loads(status.readline())["child-pid"]
    bridge = InsideBridges(
        shutil.which("socat"),
        nsenter_path(),
        proxy_socket=plan.socket,
        proxy_port=BRIDGE_PORT,
        ports=(),
    )
    try:
        assert bridge.open(pid) is None
        gate.say("go")
        out, err = box.communicate(timeout=30)
    finally:
        bridge.stop()
        gate.close()
        status.close()
    assert box.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == "GET /inside |None"
    assert (
        "bwrap" in lines[-1] and "socat" not in lines[-1]
    )  # the bridge is not in the sandbox's view
    assert [v.path for v in proxy.violations("box#t")] == ["outside.example.org:80"]


def test_the_gate_fails_loudly_when_the_bridge_did_not_start(tmp_path):
    gate = Gate(tmp_path / "gate")
    gate.say("fail")
    script = gate_prelude(gate.path) + " echo never"
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=10)
    gate.close()
    assert done.returncode == 125 and "did not start" in done.stderr and "never" not in done.stdout


# ---------------------------------------------------------------- node's fetch on Node 20


def _node_major() -> int:
    if shutil.which("node") is None:
        return 0
    return int(
        subprocess.run(
            ["node", "-p", "process.versions.node"], capture_output=True, text=True
        ).stdout.split(".")[0]
    )


NODE_FETCH = """
const out = [];
const go = async (url) => { try { const r = await fetch(url); out.push(r.status + ' ' + (await r.text())); }
  catch (e) { out.push('error ' + ((e.cause && e.cause.message) || e.message)); } };
(async () => { for (const u of process.argv.slice(1)) await go(u); console.log(JSON.stringify(out)); })();
"""


@pytest.mark.skipif(not 18 <= _node_major() < 22, reason="the preload path is for Node < 22.21")
def test_node_fetch_goes_through_the_preload(proxy, origin, tmp_path):
    port = proxy.bridge("node#t")
    env = {**os.environ, **network_env(port, preload=proxy.preload), "NO_PROXY": ""}
    done = subprocess.run(
        [
            "node",
            "-e",
            NODE_FETCH,
            f"http://127.0.0.1:{origin}/fetched",
            "http://blocked.example.org/",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert json.loads(done.stdout) == [
        "200 GET /fetched |None",
        "error the vx sandbox proxy refused blocked.example.org:80 (HTTP 403)",
    ], done.stderr
    assert done.stderr == ""
    assert [v.path for v in proxy.violations("node#t")] == ["blocked.example.org:80"]


@pytest.mark.skipif(not 18 <= _node_major() < 22, reason="the preload path is for Node < 22.21")
@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is installed by dev/test")
def test_node_fetch_https_tunnels_and_verifies_tls(proxy, tmp_path):
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Origin)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        p = Proxy(tmp_path)
        p.start([f"localhost:{server.server_address[1]}"])
        bridge = Bridge(p.attach(""))
        env = {
            **os.environ,
            **network_env(bridge.port, preload=p.preload, loopback_granted=True),
            "NODE_EXTRA_CA_CERTS": str(cert),
        }
        done = subprocess.run(
            ["node", "-e", NODE_FETCH, f"https://localhost:{server.server_address[1]}/tls"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        bridge.close()
        p.stop()
    finally:
        server.shutdown()
    assert json.loads(done.stdout) == ["200 GET /tls |None"], done.stderr
