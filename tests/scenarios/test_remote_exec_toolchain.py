"""Remote execution against workers whose toolchain is not the one the key names (RC-10): the
key's Node version and `inputs.runtime` outputs were measured here, so the action checks them
on the worker before the command runs. A worker that differs builds nothing that is kept: the
task runs here with one warning, a `"remote": "only"` task fails saying why, and a later clone
never gets what that worker did. The server keeps failed actions' results (BuildGrid's
default), the harder case: its refusal must not stand in the way of a worker that matches."""

import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from support.processes import end
from support.reapi_servers import one_remote_task, stack_fixture
from support.workspace import Repo

OTHER_NODE = "v18.20.0"


stack = stack_fixture("bgd-exec-toolchain", cache_failed=True)


@pytest.fixture
def started(stack):
    """Workers a test starts (`started.append(...)`), SIGKILLed after it."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        end(proc, timeout=30)


def real_node() -> str:
    return subprocess.run(["node", "-v"], capture_output=True, text=True, check=True).stdout.strip()


def worker_tools(tmp_path: Path, tools: dict[str, str]) -> Path:
    """A directory of executable shell scripts, put ahead of a worker's PATH."""
    bin_dir = tmp_path / "worker-bin"
    bin_dir.mkdir()
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def other_node(tmp_path: Path) -> Path:
    """A `node` that says it is another version and runs the real one for anything else."""
    real = shutil.which("node")
    return worker_tools(
        tmp_path,
        {"node": f'case "$1" in -v|--version) echo {OTHER_NODE}; exit 0 ;; esac\nexec {real} "$@"'},
    )


def leases(worker: subprocess.Popen) -> int:
    return worker.log.read_text().count(" done, exit code ")  # type: ignore[attr-defined]


def node_task(repo: Repo) -> None:
    """One remote task whose output says which Node built it."""
    one_remote_task(repo, "mkdir -p dist && node -v > dist/node.txt && cp src/in.txt dist/out.txt")


@pytest.mark.feature("RC-10")
def test_a_worker_with_another_node_builds_nothing_that_is_kept(repo, tmp_path, stack, started):
    """A worker whose PATH finds a `node` of another version: the action refuses on it, vx
    builds here with one warning naming both versions and saves that; a second clone, with
    the server's action cache holding the refusal, gets a matching worker's build, never the
    other Node's."""
    node_task(repo)
    clone = Repo(tmp_path / "clone")
    shutil.copytree(repo.root, clone.root, symlinks=True)
    here = real_node()
    assert here != OTHER_NODE
    bad = stack.add_worker(path_prefix=other_node(tmp_path))
    started.append(bad)

    res = repo.vx("run", "build", env=stack.env(), timeout=300)
    assert res.code == 0, res.err[-3000:]
    told = [line for line in res.err.splitlines() if f"worker has node {OTHER_NODE}" in line]
    assert len(told) == 1, res.err[-3000:]
    assert f"the key has {here}" in told[0] and "a#build" in told[0]
    assert leases(bad) == 1  # the worker took the action, and refused it
    assert (repo.root / "packages/a/dist/node.txt").read_text().strip() == here
    assert "ran here instead" in res.err
    shutil.rmtree(repo.root / "packages/a/dist")
    warm = repo.vx("run", "build", env=stack.env())
    assert warm.code == 0, warm.err
    assert [t["cache"] for t in warm.summary["tasks"]] == ["local"]  # what was saved: here's
    assert (repo.root / "packages/a/dist/node.txt").read_text().strip() == here

    bad.send_signal(signal.SIGKILL)
    bad.wait(timeout=30)
    good = stack.add_worker()
    started.append(good)
    again = clone.vx("run", "build", env=stack.env(), timeout=300)
    assert again.code == 0, again.err[-3000:]
    assert (clone.root / "packages/a/dist/node.txt").read_text().strip() == here
    assert f"remote execution: 1 task ran on {stack.endpoint}" in again.err, again.err[-2000:]
    assert "ran here instead" not in again.err and "worker has node" not in again.err
    assert leases(good) == 1  # a worker ran it again: the cached refusal was not the answer


@pytest.mark.feature("RC-10")
def test_a_runtime_input_that_differs_on_the_worker(repo, tmp_path, stack, started):
    """`inputs.runtime: ["flavour"]` prints `here` on this machine and `there` on the worker:
    the task runs here with one warning naming the probe and both values, while a task of the
    same run without the probe, started after the refusal, still runs on that worker (a
    refusal is not a server failure);
    the same task as `"remote": "only"` (it never runs here) fails with exit 1 and that line."""

    def write(remote, source: str) -> None:
        repo.write(
            {
                "packages/a/src/in.txt": source,
                "packages/a/vx.config.json": {
                    "tasks": {
                        "build": {
                            "exec": {
                                "command": "mkdir -p dist && cp src/in.txt dist/out.txt",
                                "remote": remote,
                            },
                            "cache": {
                                "inputs": {
                                    "files": ["src/**", "package.json"],
                                    "runtime": ["flavour"],
                                },
                                "outputs": {"files": ["dist/**"]},
                            },
                        }
                    }
                },
            }
        ).commit()

    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/b/package.json": {
                "name": "b",
                "version": "1.0.0",
                "dependencies": {"a": "1.0.0"},
            },
            "packages/b/src/in.txt": "b\n",
            "packages/b/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {
                            "command": "mkdir -p dist && cp src/in.txt dist/out.txt",
                            "remote": True,
                        },
                        "dependsOn": ["^build"],  # after a#build's refusal
                        "cache": {
                            "inputs": {"files": ["src/**"]},
                            "outputs": {"files": ["dist/**"]},
                        },
                    }
                }
            },
            ".gitignore": "node_modules/\n",
        }
    )
    local_bin = repo.root / "node_modules" / ".bin"
    local_bin.mkdir(parents=True)
    (local_bin / "flavour").write_text("#!/bin/sh\necho here\n")
    (local_bin / "flavour").chmod(0o755)
    write(True, "input\n")
    worker = stack.add_worker(path_prefix=worker_tools(tmp_path, {"flavour": "echo there"}))
    started.append(worker)

    res = repo.vx("run", "build", env=stack.env(), timeout=300)
    assert res.code == 0, res.err[-3000:]
    told = [line for line in res.err.splitlines() if "runtime input `flavour`" in line]
    assert len(told) == 1, res.err[-3000:]
    assert "prints there on the worker, the key has here" in told[0]
    assert leases(worker) == 2  # a#build, refused, and b#build
    assert f"remote execution: 1 task ran on {stack.endpoint}, 1 ran here instead" in res.err
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"
    assert (repo.root / "packages/b/dist/out.txt").read_text() == "b\n"

    write("only", "changed\n")  # a miss again
    only = repo.vx("run", "build", env=stack.env(), timeout=300)
    assert only.code == 1, only.err[-3000:]
    assert "prints there on the worker, the key has here" in only.out  # the task's log
    assert only.statuses()["a#build"] == ("failed", "miss"), only.err
