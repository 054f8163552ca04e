"""Long-running tasks (EX-07, EX-08, GR-18, issue 17): real node HTTP servers on loopback ports,
probed with real requests; every wait is on an output line, a file or a process, bounded by
a generous timeout that can only fail a test, never pass one."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from support.workspace import Repo, vx_env

WAIT_S = 90  # only ever reached when something is broken

# An HTTP server on an ephemeral loopback port. It writes its port to port.txt and its pid to
# pid.txt *before* it says it listens, appends to ../../logs/starts.log on each start, answers
# `hello from <name>`, and on `/crash` exits 1. SIGTERM ends it unless `stubborn` is given.
SERVER = r"""
const fs = require('fs'), http = require('http');
const [name, mode] = process.argv.slice(2);
fs.mkdirSync('../../logs', {recursive: true});
fs.appendFileSync('../../logs/starts.log', name + '\n');
const s = http.createServer((req, res) => {
  if (req.url === '/crash') { console.log(name + ' crashing'); process.exit(1); }
  res.end('hello from ' + name + '\n');
});
s.listen(0, '127.0.0.1', () => {
  fs.writeFileSync('port.txt', String(s.address().port));
  fs.writeFileSync('pid.txt', String(process.pid));
  console.log(name + ' listening on ' + s.address().port);
});
process.on('SIGTERM', () => { if (mode !== 'stubborn') process.exit(0); });
process.on('SIGINT', () => { if (mode !== 'stubborn') process.exit(0); });
"""

# Fetch http://127.0.0.1:<port of ../<pkg>/port.txt>/ and print the body: a dependant that only
# passes when the server is up when it starts.
PROBE = r"""
const fs = require('fs'), http = require('http');
const port = fs.readFileSync('../' + process.argv[2] + '/port.txt', 'utf8');
http.get('http://127.0.0.1:' + port + '/', res => {
  let body = ''; res.on('data', d => body += d); res.on('end', () => { console.log('probe: ' + body.trim()); });
}).on('error', e => { console.error('probe failed: ' + e.message); process.exit(1); });
"""


def serve_task(
    name: str, ready: str | None = "listening on", deps=(), mode: str = "", **exec_extra
) -> dict:
    persistent = {"readyWhen": ready} if ready else {}
    task = {
        "exec": {
            "command": f"node ../../server.js {name} {mode}".strip(),
            "persistent": persistent,
            **exec_extra,
        }
    }
    if deps:
        task["dependsOn"] = list(deps)
    return task


def workspace(repo: Repo, packages: dict[str, dict]) -> Repo:
    files: dict[str, object] = {
        "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
        ".gitignore": "node_modules/\ndist/\n.vx/\nlogs/\nport.txt\npid.txt\n",
        "server.js": SERVER,
        "probe.js": PROBE,
    }
    for name, spec in packages.items():
        deps = {d: "*" for d in spec.get("deps", ())}
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": deps,
        }
        files[f"packages/{name}/vx.config.json"] = {"tasks": spec["tasks"]}
        for rel, content in spec.get("files", {}).items():
            files[f"packages/{name}/{rel}"] = content
    return repo.write(files).commit()


def starts(repo: Repo) -> list[str]:
    log = repo.root / "logs" / "starts.log"
    return log.read_text().split() if log.exists() else []


def gone(pid: int) -> bool:
    """Dead or a zombie: nothing of it runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


def get(port: int, path: str = "/") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S) as res:
        return res.read().decode()


def refused(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


class Live:
    """`vx` running in the background: its stdout and stderr lines as they come, signals, its exit code."""

    def __init__(self, repo: Repo, *args: str, cwd: str = "", env: dict | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vx", *args],
            cwd=repo.root / cwd,
            env=vx_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.seen: dict[str, list[str]] = {"out": [], "err": []}
        self._open = 2
        for name, pipe in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._read, args=(name, pipe), daemon=True).start()

    @property
    def out(self) -> list[str]:
        return self.seen["out"]

    @property
    def err(self) -> str:
        return "\n".join(self.seen["err"])

    def _read(self, name: str, pipe) -> None:
        for line in pipe:
            self.lines.put((name, line.rstrip("\n")))
        self.lines.put((name, None))

    def _take(self, deadline: float) -> bool:
        """Read one more line into `seen`; False once both streams are closed."""
        if not self._open:
            return False
        name, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        if line is None:
            self._open -= 1
        else:
            self.seen[name].append(line)
        return True

    def wait_for(self, text: str, stream: str = "out") -> str:
        """The first line of `stream` holding `text`; fails if vx ends first or nothing comes in time."""
        deadline = time.monotonic() + WAIT_S
        checked = 0
        while True:
            lines = self.seen[stream]
            for line in lines[checked:]:
                if text in line:
                    return line
            checked = len(lines)
            if not self._take(deadline):
                self.proc.wait(WAIT_S)
                pytest.fail(
                    f"vx ended (exit {self.proc.returncode}) before {text!r}:\n"
                    + "\n".join(self.out)
                    + "\n"
                    + self.err
                )

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def finish(self) -> int:
        code = self.proc.wait(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while self._take(deadline):
            pass
        return code

    def kill(self) -> None:
        """SIGTERM (vx tears its servers down), SIGKILL if it does not end."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def live():
    started: list[Live] = []

    def start(*args, **kwargs) -> Live:
        started.append(Live(*args, **kwargs))
        return started[-1]

    yield start
    for one in started:  # a failed test must not leave vx or a server behind
        one.kill()


def port_of(line: str) -> int:
    return int(line.rsplit(" ", 1)[1])


def pid_in(repo: Repo, pkg: str) -> int:
    return int((repo.root / "packages" / pkg / "pid.txt").read_text())


# ---------------------------------------------------------------- readiness and dependants


@pytest.mark.feature("EX-07")
def test_dependants_start_once_the_server_is_ready_and_it_is_stopped_after(repo):
    """`e2e` reads the server's port file (written just before the ready line) and requests it:
    it passes only when it starts after the server is ready. The server was not requested, so it
    is stopped once the graph is done, and nothing of it survives the run."""
    workspace(
        repo,
        {
            "api": {"tasks": {"serve": serve_task("api")}},
            "web": {
                "deps": ["api"],
                "tasks": {
                    "e2e": {
                        "exec": {"command": "node ../../probe.js api"},
                        "dependsOn": ["api#serve"],
                    }
                },
            },
        },
    )
    res = repo.vx("run", "e2e", cwd="packages/web", timeout=WAIT_S)
    assert res.code == 0, res.out + res.err
    assert "probe: hello from api" in res.out
    serve = res.task("api#serve")
    assert serve["status"] == "success" and "stopped at the end of the run" in serve["reason"], (
        serve
    )
    assert gone(pid_in(repo, "api"))
    assert starts(repo) == ["api"]


@pytest.mark.feature("GR-18")
def test_a_server_only_cache_hits_need_is_never_started(repo):
    """Second run: `e2e` is a hit, so the server it depends on is not started at all."""
    workspace(
        repo,
        {
            "api": {"tasks": {"serve": serve_task("api")}},
            "web": {
                "deps": ["api"],
                "files": {"src/a.js": "1"},
                "tasks": {
                    "e2e": {
                        "exec": {
                            "command": "mkdir -p dist && node ../../probe.js api > dist/probe.txt"
                        },
                        "dependsOn": ["api#serve"],
                        "cache": {
                            "inputs": {"files": ["src/**"]},
                            "outputs": {"files": ["dist/**"]},
                        },
                    }
                },
            },
        },
    )
    first = repo.vx("run", "e2e", cwd="packages/web", timeout=WAIT_S)
    assert first.code == 0, first.out + first.err
    assert starts(repo) == ["api"]
    dry = repo.vx("run", "e2e", "--dry=json", cwd="packages/web")
    assert {t["id"]: t["predicted"] for t in json.loads(dry.out)["tasks"]} == {
        "api#serve": "not-started",
        "web#e2e": "hit-local",
    }, dry.out + dry.err
    second = repo.vx("run", "e2e", cwd="packages/web", timeout=WAIT_S)
    assert second.code == 0, second.out + second.err
    assert second.task("web#e2e")["cache"] in ("up-to-date", "local")
    assert "not started" in second.task("api#serve")["reason"]
    assert starts(repo) == ["api"], "the lazy server was started although no task needed it"
    (repo.root / "packages/web/src/a.js").write_text("2")
    third = repo.vx("run", "e2e", cwd="packages/web", timeout=WAIT_S)  # a miss needs it again
    assert third.code == 0 and starts(repo) == ["api", "api"], third.out + third.err


@pytest.mark.feature("EX-07")
def test_a_ready_when_that_never_matches_fails_the_task_and_stops_it(repo):
    workspace(
        repo,
        {
            "api": {"tasks": {"serve": serve_task("api", ready="NEVER PRINTED", timeout=1500)}},
            "web": {
                "deps": ["api"],
                "tasks": {
                    "e2e": {
                        "exec": {"command": "node ../../probe.js api"},
                        "dependsOn": ["api#serve"],
                    }
                },
            },
        },
    )
    res = repo.vx("run", "e2e", cwd="packages/web", env={"VX_READY_NOTICE_MS": "0"}, timeout=WAIT_S)
    assert res.code == 1, res.out + res.err
    assert (
        "api#serve: still waiting for a line matching /NEVER PRINTED/ (exec.persistent.readyWhen)"
        in res.err
    )
    serve = res.task("api#serve")
    assert serve["status"] == "failed"
    assert (
        "not ready: timed out after 1500 ms waiting for a line matching /NEVER PRINTED/"
        in serve["reason"]
    )
    assert res.task("web#e2e")["status"] == "skipped"
    assert "api listening on" in res.out  # its log is in the failure's frame
    assert gone(pid_in(repo, "api"))


@pytest.mark.feature("EX-07")
def test_a_server_that_exits_before_it_is_ready_fails_not_ready(repo):
    workspace(
        repo,
        {
            "api": {
                "tasks": {
                    "serve": {
                        "exec": {
                            "command": "node -e \"console.log('booting'); process.exit(3)\"",
                            "persistent": {"readyWhen": "ready"},
                        }
                    }
                }
            }
        },
    )
    res = repo.vx("run", "serve", cwd="packages/api", timeout=WAIT_S)
    assert res.code == 1, res.out + res.err
    assert res.task("api#serve")["reason"] == "not ready: exited with code 3"
    assert "booting" in res.out


@pytest.mark.feature("EX-07")
def test_a_ready_line_with_colour_codes_and_no_newline_counts(repo):
    """ANSI escapes are stripped and the trailing partial line is tested too."""
    command = (
        "node -e \"require('fs').writeFileSync('pid.txt', String(process.pid)); "
        "process.stdout.write('\\x1b[32mREADY\\x1b[0m at last'); setInterval(() => {}, 1000)\""
    )
    workspace(
        repo,
        {
            "api": {
                "tasks": {
                    "serve": {
                        "exec": {"command": command, "persistent": {"readyWhen": "^READY at"}}
                    }
                }
            },
            "web": {
                "deps": ["api"],
                "tasks": {
                    "after": {"exec": {"command": "echo dependant ran"}, "dependsOn": ["api#serve"]}
                },
            },
        },
    )
    res = repo.vx("run", "after", cwd="packages/web", timeout=WAIT_S)
    assert res.code == 0, res.out + res.err
    assert "dependant ran" in res.out
    assert gone(pid_in(repo, "api"))


# ---------------------------------------------------------------- the foreground (EX-08)


def two_servers(repo: Repo, mode: str = "") -> Repo:
    lib_build = {
        "exec": {"command": "mkdir -p dist && echo built > dist/out.txt && echo lib built"},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    return workspace(
        repo,
        {
            "lib": {"files": {"src/a.js": "1"}, "tasks": {"build": lib_build}},
            "api": {
                "deps": ["lib"],
                "tasks": {"dev": serve_task("api", deps=["^build"], mode=mode)},
            },
            "web": {
                "deps": ["lib"],
                "tasks": {"dev": serve_task("web", deps=["^build"], mode=mode)},
            },
        },
    )


@pytest.mark.feature("EX-08")
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_servers_stay_in_the_foreground_until_a_signal_tears_them_down(repo, live, sig, code):
    """`vx run dev` at the root: both servers are served, each line as `id │ line`, after the
    summary; Ctrl-C (or SIGTERM) stops both process groups and nothing survives. Run twice: the
    second run must start the servers again (a run with servers is never replayed)."""
    two_servers(repo)
    for attempt in range(2):
        run = live(repo, "run", "dev")
        ports = {
            name: port_of(run.wait_for(f"{name}#dev │ {name} listening on"))
            for name in ("api", "web")
        }
        for name, port in ports.items():
            assert get(port) == f"hello from {name}\n"
        pids = [pid_in(repo, "api"), pid_in(repo, "web")]
        run.wait_for(
            "api#dev, web#dev still running; Ctrl-C stops them", "err"
        )  # after the summary
        run.signal(sig)
        assert run.finish() == code, "\n".join(run.out) + run.err
        assert all(gone(pid) for pid in pids)
        assert all(refused(port) for port in ports.values())
        assert ("lib#build" in run.err) == (attempt == 0), (
            run.err
        )  # built once, then a hit (silent)
    assert sorted(starts(repo)) == ["api", "api", "web", "web"]


@pytest.mark.feature("EX-11")
def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(repo, live):
    two_servers(repo, mode="stubborn")
    run = live(repo, "run", "dev", env={"VX_KILL_GRACE_MS": "300"})
    run.wait_for("api#dev │ api listening on")
    run.wait_for("web#dev │ web listening on")
    pids = [pid_in(repo, "api"), pid_in(repo, "web")]
    run.wait_for("still running", "err")
    run.signal(signal.SIGINT)
    assert run.finish() == 130, run.err
    assert all(gone(pid) for pid in pids)


@pytest.mark.feature("EX-08")
def test_a_server_that_crashes_after_ready_stops_the_others_and_fails_the_run(repo, live):
    two_servers(repo)
    run = live(repo, "run", "dev")
    api = port_of(run.wait_for("api#dev │ api listening on"))
    run.wait_for("web#dev │ web listening on")
    web_pid = pid_in(repo, "web")
    run.wait_for("still running", "err")
    with pytest.raises(OSError):  # the server dies mid-request
        get(api, "/crash")
    assert run.finish() == 1, "\n".join(run.out) + run.err
    assert "api#dev exited with code 1; stopping 1 other" in run.err
    assert gone(web_pid) and gone(pid_in(repo, "api"))


@pytest.mark.feature("EX-08")
def test_a_server_that_exits_cleanly_ends_the_foreground_with_exit_0(repo):
    command = "node -e \"console.log('up'); setTimeout(() => console.log('bye'), 1)\""
    workspace(
        repo,
        {
            "api": {
                "tasks": {"dev": {"exec": {"command": command, "persistent": {"readyWhen": "up"}}}}
            }
        },
    )
    res = repo.vx("run", "dev", cwd="packages/api", timeout=WAIT_S)
    assert res.code == 0, res.out + res.err
    assert "api#dev │ bye" in res.out


@pytest.mark.feature("EX-08")
def test_nothing_is_kept_when_another_task_failed(repo):
    workspace(
        repo,
        {
            "api": {
                "tasks": {
                    "dev": serve_task("api"),
                    "lint": {"exec": {"command": "echo bad; exit 4"}},
                }
            },
        },
    )
    res = repo.vx("run", "dev", "lint", cwd="packages/api", timeout=WAIT_S)
    assert res.code == 1, res.out + res.err
    assert "still running" not in res.err
    assert gone(pid_in(repo, "api"))


# ---------------------------------------------------------------- turbo.json


@pytest.mark.feature("EX-07")
def test_turbo_dev_builds_its_dependencies_then_serves(repo, live):
    """turbo.json `dev: {persistent: true, dependsOn: ["^build"]}`: vx builds, then serves."""
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules/\ndist/\n.vx/\nlogs/\nport.txt\npid.txt\n",
            "server.js": SERVER,
            "turbo.json": {
                "tasks": {
                    "build": {"dependsOn": ["^build"], "outputs": ["dist/**"]},
                    "dev": {"cache": False, "persistent": True, "dependsOn": ["^build"]},
                }
            },
            "packages/ui/package.json": {
                "name": "ui",
                "version": "1.0.0",
                "scripts": {"build": "mkdir -p dist && echo ui > dist/ui.txt && echo ui built"},
            },
            "packages/app/package.json": {
                "name": "app",
                "version": "1.0.0",
                "dependencies": {"ui": "*"},
                "scripts": {"dev": "cat ../ui/dist/ui.txt && node ../../server.js app"},
            },
        }
    ).commit()
    run = live(repo, "run", "dev")
    run.wait_for("app#dev │ ui")  # the dependency's build ran first
    port = port_of(run.wait_for("app#dev │ app listening on"))
    assert get(port) == "hello from app\n"
    run.wait_for("app#dev still running", "err")
    run.signal(signal.SIGINT)
    assert run.finish() == 130, run.err
    assert refused(port)


# ---------------------------------------------------------------- config


@pytest.mark.feature("EX-07")
@pytest.mark.parametrize(
    "exec_extra, field, words",
    [
        ({"persistent": {}}, "tasks.dev.cache", "`cache` on persistent task `dev`"),
        ({"interactive": True}, "tasks.dev.cache", "`cache` on interactive task `dev`"),
    ],
)
def test_cache_on_a_persistent_or_interactive_task_is_refused_at_load(
    repo, exec_extra, field, words
):
    workspace(
        repo,
        {
            "api": {
                "tasks": {
                    "dev": {
                        "exec": {"command": "node server.js", **exec_extra},
                        "cache": {"inputs": {"files": []}, "outputs": {"files": []}},
                    }
                }
            }
        },
    )
    res = repo.vx("run", "dev", cwd="packages/api")
    assert res.code == 2, res.out + res.err
    assert words in res.err and "packages/api/vx.config.json" in res.err and field in res.err
    assert "hint:" in res.err and "Traceback" not in res.err


@pytest.mark.feature("EX-07")
def test_a_bad_ready_when_is_refused_at_load(repo):
    workspace(
        repo,
        {
            "api": {
                "tasks": {"dev": {"exec": {"command": "x", "persistent": {"readyWhen": "(open"}}}}
            }
        },
    )
    res = repo.vx("run", "dev", cwd="packages/api")
    assert (
        res.code == 2 and "not a valid regular expression" in res.err and "readyWhen" in res.err
    ), res.err


@pytest.mark.feature("EX-08")
def test_the_turbo_example_builds_then_serves_each_package_until_ctrl_c(tmp_path, live):
    """`vx run dev` on examples/turbo: every package's dev server, after its dependencies' builds."""
    import shutil

    root = tmp_path / "turbo"
    example = Path(__file__).resolve().parents[2] / "examples" / "turbo"
    shutil.copytree(
        example, root, ignore=shutil.ignore_patterns(".vx", "dist", "node_modules", ".turbo")
    )
    repo = Repo(root).commit("example")
    run = live(repo, "run", "dev")
    for name in ("app", "core", "utils"):
        line = run.wait_for(f"@turbo/{name}: listening on http://127.0.0.1:")
        assert line.startswith(f"@turbo/{name}#dev") and " │ " in line
        assert get(int(line.rsplit(":", 1)[1])) == f"hello from @turbo/{name}\n"
    run.wait_for("still running; Ctrl-C stops them", "err")
    assert (
        "@turbo/core#build" in run.err and "@turbo/utils#build" in run.err
    )  # app's ^build, and core's
    run.signal(signal.SIGINT)
    assert run.finish() == 130, run.err
    assert "Traceback" not in run.err


@pytest.mark.feature("EX-04")
def test_a_servers_secret_is_masked_live_and_in_its_failure_frame(repo):
    """A server's output is masked like any task's: streamed lines and the tail of a failed one."""
    token = "canary-srv-5e1b9d"
    command = 'echo "token $MY_TOKEN"; exit 2'
    workspace(
        repo,
        {
            "api": {
                "tasks": {
                    "serve": {
                        "exec": {
                            "command": command,
                            "persistent": {"readyWhen": "never"},
                            "env": {"passThrough": ["MY_TOKEN"]},
                        }
                    }
                }
            }
        },
    )
    res = repo.vx("run", "serve", cwd="packages/api", env={"MY_TOKEN": token}, timeout=WAIT_S)
    assert res.code == 1, res.out + res.err
    assert "token ***" in res.out and token not in res.out + res.err + json.dumps(res.summary)
