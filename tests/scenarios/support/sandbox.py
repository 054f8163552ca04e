"""Sandboxed tasks for the sandbox scenarios: a task's config with its grants, the violation
rows of a run's frame, a one-project workspace, and a loopback origin a task may fetch from."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from support.workspace import npm_workspace


def sandboxed(command: str, read=(), write=(), cache=None, **allow) -> dict:
    """A task running `command` in the sandbox with these grants (`allow`: the other kinds, such
    as `network`); with `cache`, cached on src/** with those outputs."""
    task = {
        "exec": {
            "command": command,
            "sandbox": {"allow": {"read": list(read), "write": list(write), **allow}},
        }
    }
    if cache:
        task["cache"] = {"inputs": {"files": ["src/**"]}, "outputs": {"files": list(cache)}}
    return task


def violation_lines(out: str) -> list[str]:
    """The rows under every SANDBOX VIOLATIONS heading of a run's output (none without one)."""
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if "SANDBOX VIOLATIONS" in line]
    return (
        [line for i in starts for line in lines[i + 1 :] if line.startswith("│")] if starts else []
    )


def app(repo, tasks: dict, files: dict | None = None, **pkgs) -> None:
    """Commit a workspace whose project `app` has `tasks` and src/a.js (and `files`); `deps` are
    its dependencies and the other keywords the other projects."""
    packages = {
        "app": {
            "tasks": tasks,
            "files": {"src/a.js": "a\n", **(files or {})},
            "deps": pkgs.pop("deps", []),
        }
    }
    packages.update(pkgs)
    repo.write(npm_workspace(packages)).commit()


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def hello_origin() -> Iterator[int]:
    """An HTTP server on loopback answering every GET with `hello PATH`; its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
