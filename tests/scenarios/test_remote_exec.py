"""Remote execution on a REAPI v2 server (RC-10): tasks run on a real BuildGrid's workers
(PostgreSQL scheduler, Bots API workers started here), come back byte-identical to a local
build and are saved locally; a worker killed mid-action does not lose the run; a dead server
means running here with one warning; a command that fails on a worker fails the task."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import end, start_vx
from support.reapi_servers import ExecStack, one_remote_task, stack_fixture, two_workers
from support.remote_servers import free_port
from support.workspace import SRC, Repo, vx_env

CACHE = {"inputs": {"files": ["package.json"]}, "outputs": {"files": ["dist/**"]}}
GEN = Path(__file__).resolve().parents[2] / "bench" / "gen_monorepo.py"


stack = stack_fixture("bgd-exec")
workers = two_workers  # two fresh workers for one test, ended after it


def leases_done(stack) -> int:
    return sum(
        log.read_text().count(" done, exit code ") for log in stack.workdir.glob("worker-*.log")
    )


def dist_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.glob("packages/*/dist/**/*"))
        if p.is_file()
    }


def start_run(repo: Repo, stack) -> subprocess.Popen:
    """`vx run build --all` in the background, with the stack's endpoint."""
    return start_vx("run", "build", "--all", cwd=repo.root, env=vx_env(stack.env()))


def wait_for_line(
    path: Path, proc: subprocess.Popen, within_s: float = 120, lines: int = 1
) -> None:
    """Until the command wrote its `lines`-th line (an event, with a hard deadline)."""
    deadline = time.monotonic() + within_s
    while (
        not path.exists()
        or not path.read_text().endswith("\n")
        or len(path.read_text().splitlines()) < lines
    ):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the action never started on a worker"
        time.sleep(0.05)


def gated_task(repo: Repo, tmp_path: Path) -> tuple[Path, Path]:
    """One remote task that appends "$PPID $$" (its runner's pid, its shell's) to `mark` each time
    it starts, then waits for `go` to exist before it builds: the test acts while it runs."""
    mark, go = tmp_path / "mark", tmp_path / "go"
    one_remote_task(
        repo,
        'echo "$PPID $$" >> "$MARK"; while [ ! -e "$GO" ]; do sleep 0.05; done; '
        "mkdir -p dist && cp src/in.txt dist/out.txt",
        define={"MARK": str(mark), "GO": str(go)},
    )
    return mark, go


@pytest.mark.feature("RC-10")
def test_generated_workspace_builds_on_two_workers_byte_identical_to_a_local_build(
    tmp_path, stack, workers
):
    """50 generated packages, every build remote (`remoteExecution.default`): each dependant
    reads its dependencies' dist from the input root the upstream outputs joined; the outputs
    written back equal a local build's byte for byte, are saved locally, and the warm run
    after serves them from the local cache without loading grpc."""
    root = tmp_path / "remote"
    subprocess.run(
        [sys.executable, str(GEN), str(root), "--packages", "50", "-f", "4", "--tools", "vx"],
        check=True,
        capture_output=True,
    )
    ws = json.loads((root / "vx.workspace.json").read_text())
    ws["remoteExecution"] = {"default": True, "capacity": 4}
    repo = Repo(root)
    repo.write({"vx.workspace.json": ws}).commit("remote execution")
    local = Repo(tmp_path / "local")
    shutil.copytree(root, local.root, symlinks=True)
    time.sleep(1.1)  # files older than git's index, as in a real checkout (test_acceptance_100)

    built_here = local.vx("run", "build", timeout=600)
    assert built_here.code == 0, built_here.err[-2000:]
    before = leases_done(stack)
    res = repo.vx("run", "build", env=stack.env(), timeout=900)
    assert res.code == 0, res.err[-3000:]
    assert len(res.summary["tasks"]) == 50
    assert {(t["status"], t["cache"]) for t in res.summary["tasks"]} == {("success", "miss")}
    assert f"remote execution: 50 tasks ran on {stack.endpoint}" in res.err, res.err[-2000:]
    assert "ran here instead" not in res.err
    assert leases_done(stack) - before == 50  # the workers ran them, not this process
    remote_files, local_files = dist_files(repo.root), dist_files(local.root)
    assert len(remote_files) == 50 and remote_files == local_files

    warm = repo.vx("run", "build", env=stack.env())
    assert warm.code == 0, warm.err
    assert {t["cache"] for t in warm.summary["tasks"]} <= {"up-to-date", "local"}
    assert leases_done(stack) - before == 50
    shutil.rmtree(repo.root / "packages" / "pkg-0003" / "dist")
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom vx.cli.main import main\ncode = main(sys.argv[1:])\n"
            "print('grpc loaded:', 'grpc' in sys.modules, file=sys.stderr)\nsys.exit(code)\n",
            "run",
            "build",
        ],
        cwd=repo.root,
        env={**os.environ, **stack.env(), "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert "grpc loaded: False" in probe.stderr  # a restore from the local cache asks no server
    assert dist_files(repo.root) == local_files


@pytest.mark.feature("RC-10")
def test_a_worker_killed_mid_action_does_not_lose_the_run(repo, tmp_path, stack, workers):
    """The action's first run tells its worker's pid and waits; that worker is SIGKILLed.
    The server re-queues the action on the other worker (or, had it given up, vx would run
    it here): either way the run finishes with the right output."""
    mark, go = gated_task(repo, tmp_path)
    proc = start_run(repo, stack)
    try:
        wait_for_line(mark, proc)
        worker_pid, shell_pid = map(int, mark.read_text().split())
        assert worker_pid in {w.pid for w in workers}
        os.kill(worker_pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # gone with its worker (PDEATHSIG) or now
            os.kill(shell_pid, signal.SIGKILL)
        go.touch()
        out, err = proc.communicate(timeout=300)
    finally:
        end(proc)
    assert proc.returncode == 0, err
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"
    assert len(mark.read_text().splitlines()) == 2  # it ran again, after the kill
    assert "remote execution: 1 task ran" in err or "ran here instead" in err, err


@pytest.mark.feature("RC-10")
def test_a_dead_server_means_running_here_with_one_warning(repo):
    """Nothing listens on the endpoint: every remote task runs here, the first says why once."""
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            **{
                f"packages/{n}/package.json": {"name": n, "version": "1.0.0"}
                for n in ("a", "b", "c")
            },
            **{
                f"packages/{n}/vx.config.json": {
                    "tasks": {
                        "build": {
                            "exec": {
                                "command": f"mkdir -p dist && echo {n} > dist/out",
                                "remote": True,
                            },
                            "cache": {
                                "inputs": {"files": ["package.json"]},
                                "outputs": {"files": ["dist/**"]},
                            },
                        }
                    }
                }
                for n in ("a", "b", "c")
            },
        }
    ).commit()
    res = repo.vx(
        "run", "build", "--all", env={"VX_REAPI_ENDPOINT": f"grpc://127.0.0.1:{free_port()}"}
    )
    assert res.code == 0, res.err
    assert {s for s in res.statuses().values()} == {("success", "miss")}
    assert res.err.count("remote execution failed") == 1, res.err
    assert "ran here instead" in res.err
    for n in ("a", "b", "c"):
        assert (repo.root / f"packages/{n}/dist/out").read_text() == f"{n}\n"


@pytest.mark.feature("RC-10")
def test_a_command_failing_on_a_worker_fails_the_task_with_its_log(repo, stack, workers):
    before = leases_done(stack)
    one_remote_task(repo, "echo reached-the-worker; echo it-broke >&2; exit 3")
    res = repo.vx("run", "build", "--all", env=stack.env())
    assert res.code == 1, res.err
    assert res.statuses() == {"a#build": ("failed", "miss")}
    assert "it-broke" in res.out + res.err and "reached-the-worker" in res.out + res.err
    assert "remote execution failed" not in res.err  # the command failed, not the server
    assert leases_done(stack) - before == 1


@pytest.mark.feature("RC-10")
@pytest.mark.parametrize(
    ("task", "message"),
    [
        ({"exec": {"command": "true", "remote": True}}, "which has no `cache`"),
        (
            {"exec": {"command": "true", "remote": "sometimes"}, "cache": CACHE},
            "must be true, false",
        ),
        (
            {
                "exec": {"command": "true", "remote": True, "env": {"passThrough": ["TOKEN"]}},
                "cache": CACHE,
            },
            "never leave this machine",
        ),
        (
            {"exec": {"command": "true", "platform": {"OSFamily": 1}}, "cache": CACHE},
            "platform.OSFamily",
        ),
        (
            {
                "exec": {"command": "true", "remote": True},
                "cache": {**CACHE, "outputs": {"files": [], "workspaceFiles": ["out/**"]}},
            },
            "a worker returns only what is under the task's own directory",
        ),
    ],
)
def test_a_task_that_cannot_go_remote_is_refused(repo, task, message):
    repo.write(
        {
            "package.json": {"name": "a", "version": "1.0.0"},
            "vx.config.json": {"tasks": {"build": task}},
        }
    ).commit()
    res = repo.vx("run", "build")
    assert res.code == 2, res.err
    assert "vx.config.json" in res.err and message in res.err, res.err


def chain(repo: Repo) -> None:
    """a → b → c built remotely, each adding a line to its upstream's file; l (here) reads b's."""

    def task(name: str, up: str | None, remote: bool) -> dict:
        read = f"cat ../{up}/dist/out > dist/out && " if up else ""
        return {
            "tasks": {
                "build": {
                    "exec": {
                        "command": f"mkdir -p dist && {read}echo {name} >> dist/out",
                        "remote": remote,
                    },
                    **({"dependsOn": [f"{up}#build"]} if up else {}),
                    "cache": CACHE,
                }
            }
        }

    files: dict = {"package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]}}
    for name, up, remote in (
        ("a", None, True),
        ("b", "a", True),
        ("c", "b", True),
        ("l", "b", False),
    ):
        files[f"packages/{name}/package.json"] = {"name": name, "version": "1.0.0"}
        files[f"packages/{name}/vx.config.json"] = task(name, up, remote)
    repo.write(files).commit()


@pytest.mark.feature("RC-12")
def test_download_toplevel_leaves_upstream_outputs_on_the_server_until_a_local_task_needs_them(
    repo, stack, workers
):
    """`--download=toplevel`: only the requested task's outputs come back; its upstream's go
    from worker to worker by digest. A later task that runs here fetches them first, and they
    are saved then as a normal local entry."""
    chain(repo)
    out = lambda n: repo.root / f"packages/{n}/dist/out"  # noqa: E731
    top = repo.vx("run", "c#build", "--download=toplevel", env=stack.env())
    assert top.code == 0, top.err
    assert out("c").read_text() == "a\nb\nc\n"  # b's and a's outputs reached c's worker
    assert not out("a").exists() and not out("b").exists()
    assert set(top.statuses().values()) == {("success", "miss")}
    assert "the outputs of 2 were left there" in top.err, top.err

    here = repo.vx("run", "l#build", "--download=none", env=stack.env())
    assert here.code == 0, here.err
    assert out("l").read_text() == "a\nb\nl\n"
    assert out("b").read_text() == "a\nb\n" and out("a").read_text() == "a\n"
    again = repo.vx("run", "b#build", env=stack.env())
    assert again.statuses() == {
        "a#build": ("success", "up-to-date"),
        "b#build": ("success", "up-to-date"),
    }, again.err


@pytest.mark.feature("RC-12")
def test_download_refuses_an_unknown_mode(repo):
    chain(repo)
    res = repo.vx("run", "c#build", "--download=some")
    assert res.code == 2 and "`--download some` is not a mode" in res.err, res.err


def install_and_build(repo: Repo, marker: Path) -> None:
    """`a#install` is remote only (an install for the workers); `b#build` reads what it left."""
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/a/vx.config.json": {
                "tasks": {
                    "install": {
                        "exec": {
                            "command": 'mkdir -p vendor && echo lib > vendor/lib.txt && touch "$MARK"',
                            "remote": "only",
                            "env": {"define": {"MARK": str(marker)}},
                        },
                        "cache": {
                            "inputs": {"files": ["package.json"]},
                            "outputs": {"files": ["vendor/**"]},
                        },
                    }
                }
            },
            "packages/b/package.json": {"name": "b", "version": "1.0.0"},
            "packages/b/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {
                            "command": "mkdir -p dist && cat ../a/vendor/lib.txt > dist/out",
                            "remote": True,
                        },
                        "dependsOn": ["a#install"],
                        "cache": CACHE,
                    }
                }
            },
        }
    ).commit()


@pytest.mark.feature("RC-11")
def test_a_remote_only_task_runs_on_a_worker_and_its_outputs_never_come_here(
    repo, tmp_path, stack, workers
):
    """`exec.remote: "only"`: the install runs on a worker; its outputs reach the dependant's
    worker by digest and are never written here, not even by `--download=all`."""
    install_and_build(repo, tmp_path / "installed")
    res = repo.vx("run", "b#build", env=stack.env())
    assert res.code == 0, res.err
    assert (repo.root / "packages/b/dist/out").read_text() == "lib\n"
    assert not (repo.root / "packages/a/vendor").exists()
    assert (tmp_path / "installed").exists()  # it did run (on a worker of this machine)
    assert "remote execution: 2 tasks ran" in res.err, res.err


@pytest.mark.feature("RC-11")
def test_a_remote_only_task_without_a_remote_executor_is_a_no_op(repo, tmp_path):
    install_and_build(repo, tmp_path / "installed")
    res = repo.vx("run", "a#install")
    assert res.code == 0, res.err
    assert res.statuses() == {"a#install": ("success", "no-cache")}, res.summary
    assert not (tmp_path / "installed").exists() and not (repo.root / "packages/a/vendor").exists()


@pytest.mark.feature("RC-10")
def test_force_runs_the_action_again_on_a_worker(repo, stack, workers):
    """`--force` skips the server's action cache too (`skip_cache_lookup`): a worker runs the
    command again instead of the server answering with the last result."""
    one_remote_task(repo, "mkdir -p dist && cp src/in.txt dist/out.txt")
    before = leases_done(stack)
    first = repo.vx("run", "build", "--all", env=stack.env())
    assert first.code == 0, first.err
    forced = repo.vx("run", "build", "--all", "--force", env=stack.env())
    assert forced.code == 0, forced.err
    assert forced.statuses() == {"a#build": ("success", "miss")}
    assert leases_done(stack) - before == 2
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"


@pytest.mark.feature("RC-10")
def test_an_interrupt_cancels_the_action_on_its_worker(repo, tmp_path, stack, workers):
    """Ctrl-C while a task runs on a worker: vx does not wait for the action; the task is
    aborted (exit 130) and the server is asked to cancel it, which stops the worker's command."""
    mark = tmp_path / "mark"
    one_remote_task(
        repo,
        'echo started >> "$MARK"; sleep 600; mkdir -p dist',
        define={"MARK": str(mark)},
    )
    proc = start_run(repo, stack)
    try:
        wait_for_line(mark, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # far less than the command's 600 s
    finally:
        end(proc)
    assert proc.returncode == 130, err
    assert "aborted" in out + err
    logs = [w.log for w in workers]
    deadline = time.monotonic() + 60
    while not any("cancelled by server" in log.read_text() for log in logs):
        assert time.monotonic() < deadline, "the worker's action was never cancelled"
        time.sleep(0.1)


@pytest.mark.feature("RC-10")
def test_a_timeout_on_a_worker_fails_the_task_as_a_local_timeout_does(repo, stack, workers):
    """`exec.timeout` travels as the action's timeout: the worker stops the command, the task
    fails as timed out (not a server failure, so nothing runs here instead)."""
    one_remote_task(repo, "sleep 120; mkdir -p dist")
    config = repo.root / "packages/a/vx.config.json"
    data = json.loads(config.read_text())
    data["tasks"]["build"]["exec"]["timeout"] = 1000
    repo.write({"packages/a/vx.config.json": data}).commit()
    res = repo.vx("run", "build", "--all", env=stack.env(), timeout=110)
    assert res.code == 1, res.err
    assert res.statuses() == {"a#build": ("failed", "miss")}
    assert res.task("a#build").get("timedOut") is True, res.summary
    assert "remote execution failed" not in res.err and "ran here instead" not in res.err


@pytest.mark.feature("RC-10")
def test_a_server_killed_mid_action_means_running_here_with_one_warning(repo, tmp_path):
    """The server dies while its worker runs the action: the dropped stream is re-attached
    (WaitExecution) until that is hopeless, then the task runs here, with one warning."""
    server = ExecStack(tmp_path / "bgd")
    try:
        server.add_worker()
        mark, go = gated_task(repo, tmp_path)
        proc = start_run(repo, server)
        try:
            wait_for_line(mark, proc)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=30)
            wait_for_line(mark, proc, lines=2)  # the fallback started it here
            os.kill(int(mark.read_text().split()[1]), signal.SIGKILL)  # the worker's, orphaned
            go.touch()
            out, err = proc.communicate(timeout=300)
        finally:
            end(proc)
    finally:
        server.stop()
    assert proc.returncode == 0, err
    assert err.count("remote execution failed") == 1, err
    assert "1 ran here instead" in err, err
    assert int(mark.read_text().split()[2]) == proc.pid  # the second run was vx's own child
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"


@pytest.mark.feature("RC-10")
def test_remote_execution_sends_and_reads_past_the_servers_batch_limit_over_bytestream(
    repo, stack, workers
):
    """Uploads and downloads of a remote action honour the batch limit the server advertises:
    told a 2 KiB limit, the 8 KB input file goes up over ByteStream Write (not a batch call)
    and the 8 KB output comes back over ByteStream Read."""
    import hashlib

    from support.reapi_proxy import Proxy

    def small_batches(reply) -> None:
        reply.cache_capabilities.max_batch_total_size_bytes = 3 << 10  # 2 KiB past the framing

    one_remote_task(repo, "mkdir -p dist && cp src/big.bin dist/big.bin")
    big = bytes(range(256)) * 32
    (repo.root / "packages/a/src/big.bin").write_bytes(big)
    repo.commit("a big input")
    digest = f"{hashlib.sha256(big).hexdigest()}/{len(big)}"
    proxy = Proxy(stack.port, capabilities=small_batches)
    try:
        res = repo.vx("run", "build", "--all", env={"VX_REAPI_ENDPOINT": proxy.endpoint})
    finally:
        proxy.stop()
    assert res.code == 0, res.err
    assert "remote execution: 1 task ran" in res.err and "ran here instead" not in res.err
    assert (repo.root / "packages/a/dist/big.bin").read_bytes() == big
    writes = [r for r in proxy.resources if "/uploads/" in r or r.startswith("uploads/")]
    assert any(r.endswith(f"blobs/{digest}") for r in writes), proxy.resources
    reads = [r for r in proxy.resources if r not in writes]
    assert any(r.endswith(f"blobs/{digest}") for r in reads), proxy.resources
    batched = [
        raw for method, raw in proxy.requests if method in ("BatchUpdateBlobs", "BatchReadBlobs")
    ]
    assert batched and not any(big in raw for raw in batched)  # the blob's bytes, in no batch


def wait_until(check, proc: subprocess.Popen, what: str, within_s: float = 180) -> None:
    """Until `check()` holds (an event, with a hard deadline)."""
    deadline = time.monotonic() + within_s
    while not check():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.feature("RC-10")
def test_a_server_that_stops_answering_mid_action_means_running_here_with_one_warning(
    repo, tmp_path
):
    """A server that vanishes without closing the connection (SIGSTOP: the socket stays open,
    nothing answers) no longer leaves the action waiting forever: after `updateTimeout` with
    no word vx asks once where the action is, hears nothing again, and runs the task here."""
    server = ExecStack(tmp_path / "bgd")
    stopped = False
    try:
        server.add_worker()
        mark, go = gated_task(repo, tmp_path)
        repo.write({"vx.workspace.json": {"remoteExecution": {"updateTimeout": 2000}}}).commit()
        proc = start_run(repo, server)

        def runs() -> list[list[int]]:
            text = mark.read_text() if mark.exists() else ""
            return [list(map(int, line.split())) for line in text.splitlines(keepends=True)
                    if line.endswith("\n")]  # fmt: skip

        try:
            wait_until(lambda: len(runs()) >= 1, proc, "the action never started")
            server.proc.send_signal(signal.SIGSTOP)
            stopped = True
            wait_until(
                lambda: any(ppid == proc.pid for ppid, _ in runs()), proc, "it never ran here"
            )
            for ppid, shell in runs():
                if ppid != proc.pid:
                    os.kill(shell, signal.SIGKILL)  # the worker's run, left waiting
            go.touch()
            out, err = proc.communicate(timeout=300)
        finally:
            end(proc)
    finally:
        if stopped:
            server.proc.send_signal(signal.SIGCONT)
        server.stop()
    assert proc.returncode == 0, err
    assert err.count("remote execution failed") == 1, err
    assert "no word from the server" in err and "1 ran here instead" in err, err
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"


@pytest.mark.feature("RC-10")
def test_an_action_no_worker_takes_runs_here_after_the_queue_timeout(repo, stack, workers):
    """An action whose platform no worker offers (the workers are `OSFamily=linux`) waited in
    the server's queue forever. After `queueTimeout` the task runs here, with one warning that
    names the platform; the server stays in use for the run's other tasks."""
    before = leases_done(stack)
    one_remote_task(repo, "mkdir -p dist && cp src/in.txt dist/out.txt")
    config = repo.root / "packages/a/vx.config.json"
    data = json.loads(config.read_text())
    data["tasks"]["build"]["exec"]["platform"] = {"OSFamily": "plan9"}
    repo.write(
        {
            "packages/a/vx.config.json": data,
            "packages/b/package.json": {"name": "b", "version": "1.0.0"},
            "packages/b/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {"command": "mkdir -p dist && echo b > dist/out", "remote": True},
                        "cache": CACHE,
                    }
                }
            },
            "vx.workspace.json": {"remoteExecution": {"queueTimeout": 1000}},
        }
    ).commit()
    res = repo.vx("run", "build", "--all", env=stack.env(), timeout=300)
    assert res.code == 0, res.err
    assert res.statuses() == {"a#build": ("success", "miss"), "b#build": ("success", "miss")}
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"
    assert (repo.root / "packages/b/dist/out").read_text() == "b\n"
    assert res.err.count("no worker took the action") == 1, res.err
    assert "platform OSFamily=plan9" in res.err, res.err
    assert "remote execution: 1 task ran" in res.err and "1 ran here instead" in res.err, res.err
    assert leases_done(stack) - before == 1  # b's, on a worker; a's never left the queue there


ADMIT = """
import os
def plugin(options):
    def admit(task, running, ctx):
        with open(os.environ["ADMIT_LOG"], "a") as log:
            log.write(f"{task.id} {','.join(running)}\\n")
        return task.project != "x" or not running  # x runs alone here
    return {"admit": admit}
"""


@pytest.mark.feature("RC-10", "PL-02")
def test_a_remote_task_that_falls_back_asks_admit_before_it_runs_here(repo, tmp_path):
    """`admit` packs what runs on this machine: a task on a worker is not asked (it takes
    nothing here), but one whose server failed runs here and must be. The plugin holds x
    while y runs; x goes remote to a dead server, falls back, and waits for y to end."""
    log, admitted, go = tmp_path / "steps.log", tmp_path / "admit.log", tmp_path / "go"

    def task(command: str, remote: bool, deps=()) -> dict:
        return {
            "tasks": {
                "build": {
                    "exec": {"command": f"{command} && mkdir -p dist", "remote": remote},
                    "dependsOn": list(deps),
                    "cache": CACHE,
                }
            }
        }

    waits = 'while [ ! -e "{0}" ]; do sleep 0.05; done'
    files: dict = {
        "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
        "vx.workspace.json": {"plugins": ["solo"]},
        "solo.py": ADMIT,
    }
    for name, spec in {
        "y": task(f"echo y:start >> {log} && {waits.format(go)} && echo y:end >> {log}", False),
        # c starts x only once y runs, so x's turn comes while y holds this machine
        "c": task(f"until grep -q y:start {log} 2>/dev/null; do sleep 0.05; done", False),
        "x": task(f"echo x:start >> {log}", True, deps=("c#build",)),
    }.items():
        files[f"packages/{name}/package.json"] = {"name": name, "version": "1.0.0"}
        files[f"packages/{name}/vx.config.json"] = spec
    repo.write(files).commit()
    env = vx_env(
        {"ADMIT_LOG": str(admitted), "VX_REAPI_ENDPOINT": f"grpc://127.0.0.1:{free_port()}"}
    )
    proc = start_vx("run", "build", "--all", "--concurrency", "2", cwd=repo.root, env=env)
    try:
        held = lambda: admitted.exists() and "x#build y#build\n" in admitted.read_text()  # noqa: E731
        ran = lambda: log.exists() and "x:start" in log.read_text()  # noqa: E731
        wait_until(lambda: held() or ran(), proc, "x neither asked admit nor ran")
        go.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        end(proc)
    assert proc.returncode == 0, err
    assert "1 ran here instead" in err and "`admit` hook" not in err, err
    assert held(), admitted.read_text() if admitted.exists() else "admit never asked"
    steps = log.read_text().split()
    assert steps.index("y:end") < steps.index("x:start"), steps  # held apart, as admit said


@pytest.mark.feature("RC-10")
def test_a_remote_task_shows_its_queued_and_executing_stages(repo, tmp_path, stack, workers):
    """Per-task stage lines were missing: a remote task now says when a worker starts it (and
    when the server queues it, where the stream shows that stage), a line per change; a task
    run here shows none."""
    import threading

    go = tmp_path / "go"
    one_remote_task(
        repo,
        f'while [ ! -e "{go}" ]; do sleep 0.05; done; mkdir -p dist && cp src/in.txt dist/out.txt',
    )
    proc = start_run(repo, stack)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")))
    reader.start()
    try:
        executing = "vx: a#build executing on a remote worker"
        wait_until(lambda: any(executing in line for line in lines), proc, "no executing line")
        go.touch()
        proc.wait(timeout=300)
        reader.join(timeout=60)
    finally:
        end(proc)
    err = "".join(lines)
    assert proc.returncode == 0, err
    stages = [line for line in lines if line.startswith("vx: a#build ")]
    assert executing + "\n" in stages, err  # (re-queued from a lost worker: both again)
    assert all(a != b for a, b in zip(stages, stages[1:])), err  # a line per change, no repeats
    assert set(stages) <= {executing + "\n", "vx: a#build queued at the remote server\n"}, err
    assert (repo.root / "packages/a/dist/out.txt").read_text() == "input\n"
    here = repo.vx("run", "build", "--all", "--force", env={"VX_REAPI_ENDPOINT": ""})
    assert here.code == 0 and "remote worker" not in here.err, here.err


@pytest.mark.feature("RC-10")
@pytest.mark.parametrize("field", ["updateTimeout", "queueTimeout"])
def test_a_bad_remote_execution_bound_is_refused(repo, field):
    one_remote_task(repo, "mkdir -p dist")
    repo.write({"vx.workspace.json": {"remoteExecution": {field: 0}}}).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2, res.err
    assert "vx.workspace.json" in res.err and field in res.err, res.err
    assert "Traceback" not in res.err
