"""Real cache servers on loopback for the remote-cache scenarios (RC-01..RC-14).

- `TurboServer`: ducktors' `turborepo-remote-cache` (the npm package most self-hosted turbo
  setups run), installed once into a cache dir and started per fixture on a random port with
  local storage. Its JSON log is kept, so tests can count the requests it really served.
- `NxServer`: a minimal server for Nx's self-hosted cache API (`/v1/cache/{hash}`), written
  here because npm has no maintained one: GET 200/404, PUT with Content-Length, 401 for a
  wrong token, 403 for a read-only token writing, 409 for an existing record.
- `FaultServer`: answers every request badly on purpose (500s, or a stall past any timeout).

`PYTHONPATH=tests/scenarios python3 -m support.npm_packages --install` pre-installs the npm server
(dev/test).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from support.npm_packages import installed
from support.workspace import Repo, build_task, npm_workspace

TRC_PACKAGE = "turborepo-remote-cache"
_LISTENING = re.compile(r"listening at http://127\.0\.0\.1:(\d+)")


def install_turbo_server() -> Path:
    """The server's cli.js (the pinned npm package, installed once)."""
    return installed(TRC_PACKAGE) / "dist" / "cli.js"


class TurboServer:
    """One `turborepo-remote-cache` process on 127.0.0.1 with its own storage dir."""

    def __init__(
        self,
        workdir: Path,
        *,
        token: str = "vx-test-token",
        signature_key: str | None = None,
        body_limit: int | None = None,
    ):
        self.storage = workdir / "storage"
        self.storage.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/tmp"),
            "PORT": "0",
            "HOST": "127.0.0.1",
            "STORAGE_PROVIDER": "local",
            "STORAGE_PATH": str(self.storage),
            "STORAGE_PATH_USE_TMP_FOLDER": "false",
            "TURBO_TOKEN": token,
            "LOG_LEVEL": "info",
        }
        if signature_key:
            env["TURBO_REMOTE_CACHE_SIGNATURE_KEY"] = signature_key  # makes the server keep tags
        if body_limit:
            env["BODY_LIMIT"] = str(body_limit)
        self.token = token
        self.log: list[dict] = []
        self.proc = subprocess.Popen(
            ["node", str(install_turbo_server())],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self.port = self._await_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()

    def _await_port(self, within_s: float = 30.0) -> int:
        """Read the log until the server says where it listens (no sleeping, a hard deadline)."""
        deadline, buffered = time.monotonic() + within_s, b""
        fd = self.proc.stdout.fileno()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                break
            buffered += chunk
            found = _LISTENING.search(buffered.decode(errors="replace"))
            if found:
                self._keep(buffered)
                return int(found.group(1))
        self.kill()
        raise RuntimeError(
            f"turborepo-remote-cache did not start:\n{buffered.decode(errors='replace')[-2000:]}"
        )

    def _keep(self, data: bytes) -> None:
        for line in data.decode(errors="replace").splitlines():
            try:
                self.log.append(json.loads(line))
            except ValueError:
                pass

    def _read_log(self) -> None:
        for line in self.proc.stdout:
            self._keep(line)

    def requests(self, method: str | None = None) -> list[str]:
        """`METHOD url` of each request the server received, in order."""
        rows = [f"{e['req']['method']} {e['req']['url']}" for e in list(self.log) if "req" in e]
        return [r for r in rows if method is None or r.startswith(method + " ")]

    def artifact(self, team: str, key: str) -> Path:
        return self.storage / team / key

    def env(self, team: str, token: str | None = None) -> dict[str, str]:
        """The turbo environment a client uses to reach this server."""
        return {"TURBO_API": self.url, "TURBO_TOKEN": token or self.token, "TURBO_TEAM": team}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    stop = kill


# ---------------------------------------------------------------- Nx self-hosted API (tests only)


class _NxHandler(BaseHTTPRequestHandler):
    server: "NxServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _auth(self) -> str | None:
        header = self.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else None
        return self.server.tokens.get(token or "")

    def _key(self) -> str | None:
        found = re.fullmatch(r"/v1/cache/([0-9a-fA-F]+)", self.path)
        return found.group(1) if found else None

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header(
            "Content-Type", "application/octet-stream" if status == 200 else "text/plain"
        )
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append(f"GET {self.path}")
        key, role = self._key(), self._auth()
        if role is None:
            return self._answer(401, b"unauthorized")
        body = self.server.records.get(key or "")
        self._answer(200, body) if body is not None else self._answer(404, b"not found")

    def do_PUT(self) -> None:
        self.server.seen.append(f"PUT {self.path}")
        key, role = self._key(), self._auth()
        length = self.headers.get("Content-Length")
        if length is None:
            return self._answer(411, b"length required")
        body = self.rfile.read(int(length))
        if role is None:
            return self._answer(401, b"unauthorized")
        if role != "write":
            return self._answer(403, b"read-only token")
        if key is None:
            return self._answer(400, b"bad hash")
        if key in self.server.records:
            return self._answer(409, b"cannot override an existing record")
        self.server.records[key] = body
        self._answer(200)


class NxServer(ThreadingHTTPServer):
    """The Nx self-hosted cache API on 127.0.0.1, records in memory; `close()` when done."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client hanging up mid-exchange is the point of these tests

    def __init__(self, tokens: dict[str, str], tls=None):
        super().__init__(("127.0.0.1", 0), _NxHandler)
        if tls is not None:  # a `reapi_servers.Tls`: https:// with its server certificate
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.server_cert, tls.server_key)
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.tokens = tokens  # token -> "read" | "write"
        self.records: dict[str, bytes] = {}
        self.seen: list[str] = []
        self.connections = 0  # TCP connections accepted: keep-alive reuse shows here
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def process_request(self, request, client_address) -> None:
        self.connections += 1
        super().process_request(request, client_address)

    def close(self) -> None:
        self.shutdown()
        self.server_close()


# ---------------------------------------------------------------- deliberately bad servers


class _FaultHandler(BaseHTTPRequestHandler):
    server: "FaultServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _any(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        self.server.arrived.append(time.monotonic())
        if self.server.mode == "stall":
            self.server.release.wait(self.server.stall_cap_s)  # answer nothing until the test ends
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b'{"message":"boom"}'
        self.send_response(int(self.server.mode))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_HEAD = do_POST = _any


class FaultServer(ThreadingHTTPServer):
    """`mode="500"` (or another status) answers it to everything; `mode="stall"` accepts and never answers."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client hanging up mid-exchange is the point of these tests

    def __init__(self, mode: str, stall_cap_s: float = 60.0):
        super().__init__(("127.0.0.1", 0), _FaultHandler)
        self.mode, self.stall_cap_s = mode, stall_cap_s
        self.release = threading.Event()
        self.seen: list[str] = []
        self.arrived: list[float] = []  # time.monotonic() of each request in `seen`
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


def free_port() -> int:
    """A loopback port nothing listens on (for 'server down' cases)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- workspaces, fixtures, checks

CANARY = "vxcanary-3f9d2c7e5b1a4d08a6e1c0b2f4d6e8a1"  # the token every remote scenario uses
PACKAGES = ("lib", "ui", "app", "docs")


def shop_files(remote: dict | None, build_command: str | None = None) -> dict[str, object]:
    """lib <- ui <- app, and docs alone; each build concatenates src/ into dist/out.js."""
    task = build_task(deps=("^build",), command=build_command)
    files = npm_workspace(
        {
            "lib": {"tasks": {"build": task}, "files": {"src/a.js": "LIB;"}},
            "ui": {"deps": ["lib"], "tasks": {"build": task}, "files": {"src/u.js": "UI;"}},
            "app": {"deps": ["ui"], "tasks": {"build": task}, "files": {"src/p.js": "APP;"}},
            "docs": {"tasks": {"build": task}, "files": {"src/d.js": "DOCS;"}},
        }
    )
    if remote is not None:
        files["vx.workspace.json"] = {"remoteCache": remote}
    return files


def clone(repo, dest: Path):
    """A second, separate checkout of `repo` (its own .git, no .vx)."""
    subprocess.run(
        ["git", "clone", "-q", str(repo.root), str(dest)], check=True, capture_output=True
    )
    return Repo(dest)


def outputs(repo) -> dict[str, bytes]:
    """Every file under a package's dist/, by workspace-relative path."""
    return {
        str(p.relative_to(repo.root)): p.read_bytes()
        for p in sorted(repo.root.glob("packages/*/dist/**/*"))
        if p.is_file()
    }


def strays(repo) -> list[str]:
    """Files that are neither committed, nor outputs, nor vx's own: what a run must never leave."""
    listing = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = [line[3:] for line in listing.splitlines()]
    temps = [str(p) for p in (repo.root / ".vx" / "cache").glob(".*.tmp")]
    return [p for p in paths if not re.match(r"(packages/\w+/dist/|\.vx/)", p)] + temps


def assert_secret_kept(repo, result, secret: str = CANARY) -> None:
    """The token appears nowhere a user or a log could see it: output, summary, .vx files."""
    seen = result.out + result.err + json.dumps(result.summary)
    assert secret not in seen
    for path in (repo.root / ".vx").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def put_raw(
    url: str, team: str, key: str, body: bytes, token: str = CANARY, tag: str | None = None
) -> int:
    """PUT an artifact the way a turbo client does (for planting tampered or hostile bodies)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/octet-stream",
        "Content-Length": str(len(body)),
        "x-artifact-duration": "10",
    }
    if tag:
        headers["x-artifact-tag"] = tag
    conn.request("PUT", f"/v8/artifacts/{key}?slug={team}", body=body, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


try:
    import pytest

    @pytest.fixture(scope="session")
    def turbo_server(tmp_path_factory):
        """One plain server for the session; each test isolates itself with its own team slug."""
        server = TurboServer(tmp_path_factory.mktemp("turbo"), token=CANARY)
        yield server
        server.kill()

    @pytest.fixture(scope="session")
    def signed_server(tmp_path_factory):
        """A server that keeps `x-artifact-tag`s (it never checks them: clients do)."""
        server = TurboServer(
            tmp_path_factory.mktemp("turbo-signed"), token=CANARY, signature_key="server-side"
        )
        yield server
        server.kill()

    @pytest.fixture
    def team(request) -> str:
        return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:60]
except ImportError:  # run as a script (--install)
    pass


SIGNING_KEY = "vxcanary-signing-key-7d1e"


def node_tag(key: str, team_id: str, body: bytes, secret: str = SIGNING_KEY) -> str:
    """turbo's x-artifact-tag computed by an independent implementation (node's crypto)."""
    script = (
        "const c=require('crypto');const [k,t,s]=process.argv.slice(1);const h=c.createHmac('sha256',s);"
        "const chunks=[];process.stdin.on('data',d=>chunks.push(d)).on('end',()=>{"
        "h.update(Buffer.concat([Buffer.from(k),Buffer.from(t),...chunks]));"
        "process.stdout.write(h.digest('base64'))})"
    )
    return subprocess.run(
        ["node", "-e", script, key, team_id, secret], input=body, capture_output=True, check=True
    ).stdout.decode()


if __name__ == "__main__" and sys.argv[1:] == ["--install"]:
    print(install_turbo_server())


def threads_named(name: str) -> set[threading.Thread]:
    """The live threads called `name`: what a remote layer opening early runs on."""
    return {t for t in threading.enumerate() if t.name == name}


def planned(repo: Repo, monkeypatch, at_keys, remote_env: dict[str, str]) -> None:
    """`prepare` a `run build --all` against the remote `remote_env` names (no shared store),
    calling `at_keys()` as the keys step begins: what a fresh clone opens while it plans."""
    import vx.prepare as preparing
    from vx.prepare import RunRequest, prepare
    from vx.stages import Stages

    keyed = preparing._keyed

    def keyed_after(*args, **kwargs):
        at_keys()
        return keyed(*args, **kwargs)

    monkeypatch.setattr(preparing, "_keyed", keyed_after)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI", "TURBO_", "NX_"))}
    env.update(remote_env, VX_SHARED_STORE="0")
    prep = prepare(RunRequest(cwd=repo.root, names=("build",), all=True), env, Stages(False))
    assert prep.store is not None
    prep.store.close()
