"""Sandboxed tasks reach the network only through the run's proxy (SB-08): real bwrap, socat,
curl and node against a loopback HTTP server; a refused request is a violation of the task
that made it, even when the task survived it (SB-12)."""

import socket
import subprocess
import time
import urllib.request

import pytest
from support.commands import needs
from support.processes import start_vx
from support.sandbox import hello_origin
from support.workspace import npm_workspace, vx_env

pytestmark = needs("bwrap", "socat", "curl", "node")


@pytest.fixture(scope="module")
def origin():
    with hello_origin() as port:
        yield port


def sandboxed(command: str, network, **more) -> dict:
    allow = {"network": network, "read": ["package.json"]}  # node reads its package scope
    return {"exec": {"command": command, "sandbox": {"allow": allow, **more}}}


def frame_violations(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "SANDBOX VIOLATIONS" in line)
    return [line for line in lines[start + 1 :] if line.startswith("│")]


def test_curl_reaches_a_listed_host_and_an_unlisted_one_is_a_violation(repo, origin):
    cmd = f"curl -sS http://127.0.0.1:{origin}/listed; echo; curl -sS -p http://unlisted.example.org/; exit 0"
    repo.write(npm_workspace({"app": {"tasks": {"fetch": sandboxed(cmd, ["127.0.0.1"])}}})).commit()
    res = repo.vx("run", "app#fetch")
    assert res.code == 1, res.err
    assert "hello /listed" in res.out and "CONNECT tunnel failed, response 403" in res.out
    assert res.task("app#fetch")["sandboxViolations"] == [
        {
            "kind": "network",
            "path": "unlisted.example.org:80",
            "grant": 'allow.network "unlisted.example.org"',
        }
    ]
    assert frame_violations(res.out) == [
        '│ network unlisted.example.org:80  → allow.network "unlisted.example.org"'
    ]


def test_node_fetch_goes_through_the_proxy_on_every_node_version(repo, origin):
    script = (
        f"fetch('http://127.0.0.1:{origin}/node').then(r=>r.text()).then(console.log);"
        "fetch('http://blocked.example.net:8080/').catch(e=>console.log('refused:', e.cause.message))"
    )
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"fetch": sandboxed(f'node -e "{script}"', ["127.0.0.1"])}}}
        )
    ).commit()
    res = repo.vx("run", "app#fetch")
    assert (
        "hello /node" in res.out
        and "refused: the vx sandbox proxy refused blocked.example.net:8080" in res.out
    )
    assert [v["path"] for v in res.task("app#fetch")["sandboxViolations"]] == [
        "blocked.example.net:8080"
    ]


def test_refusals_belong_to_the_task_that_asked_and_ignore_silences_them(repo, origin):
    asks = "curl -sS http://asked.example.org/; exit 0"
    repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"net": sandboxed(asks, ["127.0.0.1"])}},
                "b": {
                    "tasks": {
                        "net": sandboxed(f"curl -sS http://127.0.0.1:{origin}/b", ["127.0.0.1"])
                    }
                },
                "c": {
                    "tasks": {
                        "net": sandboxed(
                            asks, ["127.0.0.1"], ignore={"network": ["ASKED.example.org:80"]}
                        )
                    }
                },
            }
        )
    ).commit()
    res = repo.vx("run", "net", "--all")
    assert res.statuses() == {
        "a#net": ("failed", "no-cache"),
        "b#net": ("success", "no-cache"),
        "c#net": ("success", "no-cache"),
    }, res.out
    assert [v["path"] for v in res.task("a#net")["sandboxViolations"]] == ["asked.example.org:80"]


def test_a_deny_pattern_wins_over_the_allow_list(repo, origin):
    cmd = f"curl -sS -o /dev/null -w '%{{http_code}}' http://localhost:{origin}/; exit 0"
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {
                        "fetch": sandboxed(cmd, ["localhost"], deny={"network": ["localhost"]})
                    }
                }
            }
        )
    ).commit()
    res = repo.vx("run", "app#fetch")
    assert "403" in res.out
    assert res.task("app#fetch")["sandboxViolations"] == [
        {
            "kind": "network",
            "path": f"localhost:{origin}",
            "grant": 'denied by deny.network "localhost"',
        }
    ]


# ---------------------------------------------------------------- allow.localBinding ports (SB-09)

SERVE_JS = """const http = require('http');
const fs = require('fs');
const port = Number(process.argv[2]);
const server = http.createServer((req, res) => res.end('hello from inside the sandbox'));
server.listen(port, '127.0.0.1', () => {
  fs.writeFileSync('out/ready', 'x');
  const until = Date.now() + 15000;
  const wait = setInterval(() => {
    if (fs.existsSync('out/done') || Date.now() > until) { clearInterval(wait); server.close(); }
  }, 20);
});
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(port: int, command: str, **allow) -> dict:
    grants = {
        "read": ["package.json", "src/**"],
        "write": ["out/"],
        "localBinding": [port],
        **allow,
    }
    return {"exec": {"command": command, "sandbox": {"allow": grants}}}


@pytest.mark.feature("SB-09")
def test_a_listed_port_is_bridged_out_to_the_host_while_the_task_runs(repo):
    port = free_port()
    files = {"src/serve.js": SERVE_JS}
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {"serve": serving(port, f"node src/serve.js {port}")},
                    "files": files,
                }
            }
        )
    ).commit()
    out = repo.root / "packages/app/out"
    app_dir = repo.root / "packages/app"
    proc = start_vx("run", "serve", cwd=app_dir, env=vx_env(), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not (out / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the server never came up"
            time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as reply:
            assert reply.read() == b"hello from inside the sandbox"
    finally:
        (out / "done").write_text("x")
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, output
    with socket.socket() as s:  # the host side ended with the task
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.feature("SB-09")
def test_a_listed_port_taken_on_the_host_fails_the_task_before_it_starts(repo):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        repo.write(
            npm_workspace({"app": {"tasks": {"t": serving(port, "echo ran > out/ran.txt")}}})
        ).commit()
        res = repo.vx("run", "t", cwd="packages/app")
    assert res.code == 1 and not (repo.root / "packages/app/out/ran.txt").exists()
    assert (
        f"allow.localBinding port {port} cannot be bridged to the host: 127.0.0.1:{port} is already taken"
        in res.out + res.err
    )
