"""Remote restore, the CI case: a clone with an empty local cache restores every task from a
real turborepo-remote-cache server, each download checked and restored in one pass by the
thread that fetched it, and indexed a batch per transaction (RC-03, RC-05).

A download that breaks off halfway, or a run killed while downloads are being restored and
indexed, leaves no half entry: what the store holds afterwards is whole and restores again.
"""

import http.client
import json
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from support.processes import Stderr, start_vx
from support.remote_servers import CANARY, clone, outputs, shop_files, strays
from support.workspace import vx_env

EXPECTED = {
    "packages/lib/dist/out.js": b"LIB;",
    "packages/ui/dist/out.js": b"UI;",
    "packages/app/dist/out.js": b"APP;",
    "packages/docs/dist/out.js": b"DOCS;",
}


class _Relay(BaseHTTPRequestHandler):
    server: "Relay"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        relay = self.server
        upstream = http.client.HTTPConnection(relay.host, relay.port, timeout=30)
        upstream.request("GET", self.path, headers={"Authorization": self.headers["Authorization"]})
        reply = upstream.getresponse()
        body = reply.read()
        upstream.close()
        cut = relay.cut is not None and f"/{relay.cut}?" in self.path
        if cut and relay.mode == "stall":
            relay.stalled.set()
            relay.release.wait(60)  # answers nothing until the test is over
            self.close_connection = True
            return
        self.send_response(reply.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if cut:  # the whole length promised, half of it sent, then the connection drops
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)
        with relay.lock:
            relay.served += 1
            relay.lock.notify_all()


class Relay(ThreadingHTTPServer):
    """Passes GETs to the real server; the artifact `cut` breaks off halfway ("half") or is
    never answered ("stall", `stalled` set once it was asked for)."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client killed mid-exchange is the point

    def __init__(self, upstream: str, cut: str | None, mode: str):
        super().__init__(("127.0.0.1", 0), _Relay)
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname, parts.port
        self.cut, self.mode = cut, mode
        self.stalled, self.release = threading.Event(), threading.Event()
        self.lock, self.served = threading.Condition(), 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


def turbo_env(url: str, team: str) -> dict[str, str]:
    return {"TURBO_API": url, "TURBO_TOKEN": CANARY, "TURBO_TEAM": team}


def uploaded(repo, server, team) -> dict[str, str]:
    """Build `repo` once with uploads on; the task keys by id."""
    repo.write(shop_files({"turbo": {"team": team}, "upload": "always"})).commit()
    env = turbo_env(server.url, team)
    assert repo.vx("run", "build", "--all", env=env).code == 0
    plan = json.loads(repo.vx("run", "build", "--all", "--dry=json", env=env, summary=False).out)
    return {t["id"]: t["key"] for t in plan["tasks"]}


def store_entries(repo) -> dict[str, bool]:
    """Each key the store's index holds, and whether its artifact passes every check."""
    import sqlite3

    from vx.store import unpacking

    cache = repo.root / ".vx" / "cache"
    db = sqlite3.connect(cache / "cache.db")
    keys = [row[0] for row in db.execute("SELECT hash FROM entries")]
    db.close()
    whole = {}
    for key in keys:
        try:
            unpacking.check(cache / f"{key}.tar.zst", key=key, allowed=lambda _p: True)
            whole[key] = True
        except Exception:
            whole[key] = False
    return whole


def unindexed_artifacts(repo) -> set[str]:
    """The whole artifacts on disk that have no row: a kill between an artifact's rename into
    place and its row's commit leaves one, and the next run indexes it again (after every check a
    restore makes) rather than download it twice."""
    from vx.store import unpacking

    cache = repo.root / ".vx" / "cache"
    indexed = set(store_entries(repo))
    whole = set()
    for path in cache.glob("*.tar.zst"):
        key = path.name.removesuffix(".tar.zst")
        if key in indexed:
            continue
        try:
            unpacking.check(path, key=key, allowed=lambda _p: True)
        except Exception:
            continue
        whole.add(key)
    return whole


@pytest.mark.feature("RC-03", "RC-05")
def test_a_download_cut_off_halfway_is_a_miss_and_leaves_no_half_entry(
    repo, tmp_path, turbo_server, team
):
    """Remote restore, the CI case: the body of lib's artifact stops halfway. lib runs instead,
    the other three are restored from their downloads, and nothing half-written is kept."""
    keys = uploaded(repo, turbo_server, team)
    relay = Relay(turbo_server.url, keys["lib#build"], "half")
    try:
        b = clone(repo, tmp_path / "b")
        res = b.vx("run", "build", "--all", env=turbo_env(relay.url, team))
    finally:
        relay.close()
    assert res.code == 0, res.err
    assert res.statuses() == {
        "lib#build": ("success", "miss"),
        "ui#build": ("success", "remote"),
        "app#build": ("success", "remote"),
        "docs#build": ("success", "remote"),
    }
    assert outputs(b) == EXPECTED
    assert strays(b) == []  # no output, download or temp file left over
    assert "mid-body" in res.err or "ended after" in res.err, res.err
    assert store_entries(b) == dict.fromkeys(keys.values(), True)  # lib's from its own build


@pytest.mark.feature("RC-03")
def test_a_run_killed_while_downloads_are_restored_leaves_a_store_that_restores_again(
    repo, tmp_path, turbo_server, team
):
    """Remote restore, the CI case: the run is killed (SIGKILL) once three downloads are
    served and app's is in flight. Whatever had been indexed is whole, and the next run
    restores every task, from the local store or the remote."""
    keys = uploaded(repo, turbo_server, team)
    b = clone(repo, tmp_path / "b")
    relay = Relay(turbo_server.url, keys["app#build"], "stall")
    env = vx_env(turbo_env(relay.url, team))  # as `Repo.vx` runs it
    proc = start_vx("run", "build", "--all", cwd=b.root, env=env, stdout=subprocess.DEVNULL)
    err = Stderr(proc)
    try:
        assert relay.stalled.wait(60), err.text
        with relay.lock:
            assert relay.lock.wait_for(lambda: relay.served == 3, 60), err.text
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(60) == -signal.SIGKILL
    finally:
        relay.close()
    entries = store_entries(b)
    unindexed = unindexed_artifacts(b)
    # How many of the three served downloads are indexed depends on where the kill lands (none
    # to all three); app's, never answered, cannot be. Each row has a whole artifact.
    served = {keys[t] for t in ("lib#build", "ui#build", "docs#build")}
    assert set(entries) <= served and all(entries.values()), entries
    assert unindexed <= served, unindexed
    res = b.vx("run", "build", "--all", env=turbo_env(turbo_server.url, team))
    assert res.code == 0, res.err
    assert res.statuses()["app#build"] == ("success", "remote")
    assert set(res.statuses().values()) <= {("success", "remote"), ("success", "local")}
    local = {keys[t] for t, (_, cache) in res.statuses().items() if cache == "local"}
    # what was indexed, or saved whole without its row, is what restores here
    assert local == set(entries) | unindexed, (local, entries, unindexed)
    assert outputs(b) == EXPECTED
    assert store_entries(b) == dict.fromkeys(keys.values(), True)
