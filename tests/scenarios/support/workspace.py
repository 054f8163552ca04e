"""A workspace from a dict, committed with real git, and the real `vx` run on it: `Repo` (the
`repo` fixture of conftest.py), its `Result`, and the builders of package trees and tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support import schemas

SRC = str(Path(__file__).resolve().parents[3] / "src")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def vx_env(extra: dict | None = None) -> dict:
    """The environment a vx under test runs with: none of the caller's vx or CI settings (the
    suite's shared-store switch kept) nor proxies (a remote cache on loopback is reached
    directly), this checkout's source, plain output, then `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith(("VX_", "CI")) or k == "VX_SHARED_STORE")
        and not k.lower().endswith("_proxy")
    }
    env.update({"PYTHONPATH": SRC, "NO_COLOR": "1", **(extra or {})})
    return env


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
        self.configs: set[str] = set()  # vx config files written, held to their schemas

    def write(self, files: dict[str, object]) -> "Repo":
        for rel, content in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = content if isinstance(content, str) else json.dumps(content, indent=2)
            path.write_text(text)
            if path.name in schemas.CONFIG_FILES:
                self.configs.add(rel)
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
        full_env = vx_env(env)
        proc = subprocess.run(
            [sys.executable, "-m", "vx", *argv],
            cwd=self.root / cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        # Every JSON product the suite makes is held to its schema (src/vx/schemas).
        schemas.check_output(argv, proc.stdout)
        schemas.check_summaries(argv, self.root / cwd)
        if proc.returncode in (0, 1) and argv[:1] in (["run"], ["show"], ["ls"]):
            schemas.check_configs(self.root, self.configs)  # vx took them: so must the schemas
        data = json.loads(summary_path.read_text()) if summary_path.exists() else None
        return Result(proc.returncode, proc.stdout, proc.stderr, data)


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


# A build that writes dist/o and says `built`.
BUILDS = (
    "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
    "require('fs').writeFileSync('dist/o','x');console.log('built')\""
)


def cached_build(command: str = BUILDS, deps=()) -> dict:
    """A task running `command`, cached on its package's JSON files with dist/** as outputs."""
    return build_task(deps=deps, command=command, inputs=("*.json",))


def lib_and_app(test_command: str, **app_tasks: dict) -> dict[str, object]:
    """lib <- app, each with a cached build of dist/o; app's `test` runs `test_command` after its
    build, and `app_tasks` are app's other tasks."""
    test = {"exec": {"command": test_command}, "dependsOn": ["build"]}
    return npm_workspace(
        {
            "lib": {"tasks": {"build": cached_build()}},
            "app": {
                "deps": ["lib"],
                "tasks": {"build": cached_build(deps=["^build"]), "test": test, **app_tasks},
            },
        }
    )


def one_build(command: str | None = None, name: str = "app", source: str = "A;") -> dict:
    """A workspace of one project, `name`, whose `build` (`build_task`'s own without `command`)
    depends on nothing, reads src/a.js (holding `source`) and writes dist/."""
    build = build_task(deps=(), command=command)
    return npm_workspace({name: {"tasks": {"build": build}, "files": {"src/a.js": source}}})
