"""Sandboxed tasks reach the network only through the run's proxy (SB-08): real bwrap, socat,
curl and node against a loopback HTTP server; a refused request is a violation of the task
that made it, even when the task survived it (SB-12)."""

import http.server
import shutil
import threading

import pytest

from conftest import npm_workspace

pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in ("bwrap", "socat", "curl", "node")),
                                reason="bwrap, socat, curl and node are installed by dev/test")


class _Origin(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def origin():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Origin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def sandboxed(command: str, network, **more) -> dict:
    allow = {"network": network, "read": ["package.json"]}  # node reads its package scope
    return {"exec": {"command": command, "sandbox": {"allow": allow, **more}}}


def frame_violations(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "SANDBOX VIOLATIONS" in line)
    return [line for line in lines[start + 1:] if line.startswith("│")]


def test_curl_reaches_a_listed_host_and_an_unlisted_one_is_a_violation(repo, origin):
    cmd = f"curl -sS http://127.0.0.1:{origin}/listed; echo; curl -sS -p http://unlisted.example.org/; exit 0"
    repo.write(npm_workspace({"app": {"tasks": {"fetch": sandboxed(cmd, ["127.0.0.1"])}}})).commit()
    res = repo.vx("run", "app#fetch")
    assert res.code == 1, res.err
    assert "hello /listed" in res.out and "CONNECT tunnel failed, response 403" in res.out
    assert res.task("app#fetch")["sandboxViolations"] == [
        {"kind": "network", "path": "unlisted.example.org:80", "grant": 'allow.network "unlisted.example.org"'}]
    assert frame_violations(res.out) == ['│ network unlisted.example.org:80  → allow.network "unlisted.example.org"']


def test_node_fetch_goes_through_the_proxy_on_every_node_version(repo, origin):
    script = (f"fetch('http://127.0.0.1:{origin}/node').then(r=>r.text()).then(console.log);"
              "fetch('http://blocked.example.net:8080/').catch(e=>console.log('refused:', e.cause.message))")
    repo.write(npm_workspace({"app": {"tasks": {"fetch": sandboxed(f'node -e "{script}"', ["127.0.0.1"])}}})).commit()
    res = repo.vx("run", "app#fetch")
    assert "hello /node" in res.out and "refused: the vx sandbox proxy refused blocked.example.net:8080" in res.out
    assert [v["path"] for v in res.task("app#fetch")["sandboxViolations"]] == ["blocked.example.net:8080"]


def test_refusals_belong_to_the_task_that_asked_and_ignore_silences_them(repo, origin):
    asks = "curl -sS http://asked.example.org/; exit 0"
    repo.write(npm_workspace({
        "a": {"tasks": {"net": sandboxed(asks, ["127.0.0.1"])}},
        "b": {"tasks": {"net": sandboxed(f"curl -sS http://127.0.0.1:{origin}/b", ["127.0.0.1"])}},
        "c": {"tasks": {"net": sandboxed(asks, ["127.0.0.1"], ignore={"network": ["ASKED.example.org:80"]})}},
    })).commit()
    res = repo.vx("run", "net", "--all")
    assert res.statuses() == {"a#net": ("failed", "no-cache"), "b#net": ("success", "no-cache"),
                              "c#net": ("success", "no-cache")}, res.out
    assert [v["path"] for v in res.task("a#net")["sandboxViolations"]] == ["asked.example.org:80"]


def test_a_deny_pattern_wins_over_the_allow_list(repo, origin):
    cmd = f"curl -sS -o /dev/null -w '%{{http_code}}' http://localhost:{origin}/; exit 0"
    repo.write(npm_workspace({"app": {"tasks": {"fetch": sandboxed(cmd, ["localhost"],
                                                                   deny={"network": ["localhost"]})}}})).commit()
    res = repo.vx("run", "app#fetch")
    assert "403" in res.out
    assert res.task("app#fetch")["sandboxViolations"] == [
        {"kind": "network", "path": f"localhost:{origin}", "grant": 'denied by deny.network "localhost"'}]
