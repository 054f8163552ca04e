"""Scenario harness: build a workspace from a dict, commit it with real git, run real `vx`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass
class Result:
    code: int
    out: str
    err: str
    summary: dict | None

    def task(self, tid: str) -> dict:
        for t in (self.summary or {}).get("tasks", []):
            if t["id"] == tid:
                return t
        raise KeyError(
            f"{tid} not in summary: {[t['id'] for t in (self.summary or {}).get('tasks', [])]}"
        )

    def statuses(self) -> dict[str, tuple[str, str]]:
        return {t["id"]: (t["status"], t["cache"]) for t in (self.summary or {}).get("tasks", [])}


class Repo:
    def __init__(self, root: Path):
        self.root = root

    def write(self, files: dict[str, object]) -> "Repo":
        for rel, content in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = content if isinstance(content, str) else json.dumps(content, indent=2)
            path.write_text(text)
        return self

    def git(self, *args: str) -> str:
        env = {**os.environ, **GIT_ENV}
        return subprocess.run(
            ["git", *args], cwd=self.root, env=env, check=True, capture_output=True, text=True
        ).stdout

    def commit(self, message: str = "state") -> "Repo":
        if not (self.root / ".git").exists():
            self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self

    def vx(
        self,
        *args: str,
        cwd: str = "",
        env: dict | None = None,
        summary: bool = True,
        timeout: float = 60,
    ) -> Result:
        summary_path = self.root / ".vx" / "test-summary.json"
        summary_path.unlink(missing_ok=True)
        argv = list(args)
        if (
            summary
            and argv
            and argv[0] in ("run", "run-many", "affected")
            and not any(a.startswith("--dry") for a in argv)
        ):
            cut = argv.index("--") if "--" in argv else len(argv)
            argv.insert(cut, f"--summarize={summary_path}")
        full_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("VX_", "CI")) or k == "VX_SHARED_STORE"
        }
        full_env.update({"PYTHONPATH": SRC, "NO_COLOR": "1", **(env or {})})
        proc = subprocess.run(
            [sys.executable, "-m", "vx", *argv],
            cwd=self.root / cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        data = json.loads(summary_path.read_text()) if summary_path.exists() else None
        return Result(proc.returncode, proc.stdout, proc.stderr, data)


class Stderr:
    """A started process's stderr, read as it comes, so a test can wait for a line it prints
    (an event) instead of sleeping for a time that should be enough."""

    def __init__(self, proc: subprocess.Popen) -> None:
        import threading

        self.proc, self.text = proc, ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.text += line

    def wait_for(self, text: str, timeout: float = 120) -> None:
        import time

        deadline = time.monotonic() + timeout
        while text not in self.text:
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text}"
            assert self.proc.poll() is None or self._reader.is_alive(), self.text
            time.sleep(0.02)

    def finish(self, timeout: float = 120) -> str:
        """Wait for the process to end and its stderr to be read to the end; all of it."""
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return self.text


def plant_artifact(cache: Path, index: str, key: str, members: dict[str, bytes]) -> None:
    """Replace the artifact of `key` in `cache` with one holding `members` (workspace-relative
    names, written as vx's packer writes them, sum and all) and make its row in the `index`
    database agree on the size: what anyone able to write the store, or upload with the team's
    token, could leave there."""
    import io
    import json
    import sqlite3

    from vx import CACHE_VERSION
    from vx.store.archive import LOG_ENTRY, META_ENTRY, OUTPUTS, encode_log
    from vx.store.packing import _TarWriter
    from vx.store.zstd import codec

    raw = io.BytesIO()
    with codec().ZstdCompressor(level=3).stream_writer(raw, closefd=False) as z:
        tar = _TarWriter(z)
        tar.add_bytes(LOG_ENTRY, encode_log([]))
        for name, body in members.items():
            tar.add_stream(OUTPUTS + name, io.BytesIO(body), len(body), 0o644, 0)
        meta = {"version": CACHE_VERSION, "key": key, "files": {n: [0o644, 0] for n in members}}
        tar.add_bytes(META_ENTRY, json.dumps(meta).encode())
        tar.finish()
    (cache / f"{key}.tar.zst").write_bytes(raw.getvalue())
    with sqlite3.connect(cache / index) as db:
        db.execute("UPDATE entries SET size_bytes=? WHERE hash=?", (len(raw.getvalue()), key))


def npm_workspace(packages: dict[str, dict], root_extra: dict | None = None) -> dict[str, object]:
    """Files of an npm workspace: packages maps a dir name to {deps: [...], tasks: {...}, files: {...}}."""
    files: dict[str, object] = {
        "package.json": {
            "name": "root",
            "private": True,
            "workspaces": ["packages/*"],
            **(root_extra or {}),
        },
        ".gitignore": "node_modules/\ndist/\n.vx/\n",
    }
    for name, spec in packages.items():
        deps = {d: "workspace:*" for d in spec.get("deps", [])}
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": deps,
        }
        if "tasks" in spec:
            files[f"packages/{name}/vx.config.json"] = {"tasks": spec["tasks"]}
        for rel, content in spec.get("files", {}).items():
            files[f"packages/{name}/{rel}"] = content
    return files


def build_task(deps=("^build",), command=None, outputs=("dist/**",), inputs=("src/**",)) -> dict:
    """A node build: concatenates src/*.js into dist/out.js, after checking deps are built."""
    cmd = command or (
        "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
        "const s=fs.readdirSync('src').sort().map(f=>fs.readFileSync('src/'+f,'utf8')).join('');"
        "fs.writeFileSync('dist/out.js',s);console.log('built '+s.length)\""
    )
    return {
        "exec": {"command": cmd},
        "dependsOn": list(deps),
        "cache": {"inputs": {"files": list(inputs)}, "outputs": {"files": list(outputs)}},
    }


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    root = tmp_path / "ws"
    root.mkdir()
    return Repo(root)


# The real remote-cache servers (one per session, isolated per test by team): remote_servers.py.
from remote_servers import signed_server, team, turbo_server  # noqa: E402,F401
