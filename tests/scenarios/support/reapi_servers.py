"""Real and hostile REAPI v2 servers on loopback for the REAPI remote cache scenarios (RC-09).

- `BuildGrid`: BuildGrid 0.9.1 (PyPI) as a cache-only server (ActionCache + CAS + ByteStream,
  in memory, no database). It needs Python >= 3.13, so it lives in its own venv made with
  pyenv's 3.13 (or `VX_TEST_PYTHON313`), installed once under the test cache dir the npm
  packages use. Without a 3.13 the scenarios skip (fail under `VX_REQUIRE_ALL=1`, as dev/test
  runs them).
- `ExecStack`: BuildGrid with the Execution service (remote execution, RC-10): its SQL
  scheduler on a throwaway PostgreSQL 15 cluster (Debian's), and `reapi_worker.py` bots (a
  pure-Python Bots API worker that runs each action on this machine, unsandboxed), started
  and killed by the test. Without PostgreSQL the scenarios skip (fail under `VX_REQUIRE_ALL=1`).
- `GarbageServer`: a gRPC server that answers every REAPI call with bytes of its own choosing:
  undecodable junk, or a well-formed ActionResult whose blob does not match its digest.

The cache-only BuildGrid's options: TLS (`Tls`, a CA made here with the openssl CLI; with
`mtls` the server demands a client certificate that CA signed), a read-only ActionCache, and
BuildGrid's header authorization (only calls whose `x-request-actor` matches are served).

`PYTHONPATH=tests/scenarios python3 -m support.reapi_servers --install` pre-installs BuildGrid
(dev/test).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path
from typing import Any, Callable

import pytest

from support.npm_packages import cache_root, made_once
from support.processes import end

BUILDGRID = "0.9.1"
CONFIG = """\
server:
  - !channel
    address: "127.0.0.1:{port}"
{channel}
authorization:
{authorization}
storages:
  - !lru-storage &cas
    size: 256MB
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 10000
    allow-updates: {allow_updates}
    cache-failed-actions: false
instances:
  - name: "{instance}"
    services:
      - !action-cache
        cache: *ac
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
"""


def python313() -> str | None:
    """A Python >= 3.13 to run BuildGrid on, or None."""
    given = os.environ.get("VX_TEST_PYTHON313")
    if given:
        return given
    try:
        prefix = (
            subprocess.run(["pyenv", "prefix", "3.13"], capture_output=True, text=True, check=False)
            .stdout.split(":")[0]
            .strip()
        )
    except FileNotFoundError:
        prefix = ""
    if prefix and Path(prefix, "bin", "python3").exists():
        return str(Path(prefix, "bin", "python3"))
    for root in sorted(Path.home().glob(".pyenv/versions/3.1[3-9]*"), reverse=True):
        if (root / "bin" / "python3").exists():
            return str(root / "bin" / "python3")
    return shutil.which("python3.13")


def install_buildgrid() -> Path:
    """The venv holding BuildGrid (installed once; a file lock guards racing installs)."""
    base = cache_root() / "reapi"
    venv = base / f"buildgrid-{BUILDGRID}"
    if (venv / "bin" / "bgd").exists():
        return venv
    py = python313()
    if py is None:
        pytest.skip("BuildGrid needs Python >= 3.13 (pyenv install 3.13, or set VX_TEST_PYTHON313)")

    def make() -> None:
        temp = venv.with_name(f"{venv.name}.tmp-{os.getpid()}")
        shutil.rmtree(temp, ignore_errors=True)
        subprocess.run([py, "-m", "venv", str(temp)], check=True, timeout=300)
        subprocess.run(
            [str(temp / "bin" / "python"), "-m", "pip", "install", "-q", f"buildgrid=={BUILDGRID}"],
            check=True,
            timeout=900,
            stdout=subprocess.DEVNULL,
        )
        shutil.rmtree(venv, ignore_errors=True)
        temp.rename(venv)  # scripts keep the temp path in their #!: run them via the python

    made_once(base / ".install.lock", (venv / "bin" / "bgd").exists, make)
    return venv


class Tls:
    """A throwaway CA and the certificates it signs (openssl CLI), all PEM files in `workdir`:
    `ca`, `server_cert`/`server_key` for 127.0.0.1, `client_cert`/`client_key`."""

    def __init__(self, workdir: Path, name: str = "vx-test"):
        workdir.mkdir(parents=True, exist_ok=True)
        self.ca, ca_key = workdir / "ca.pem", workdir / "ca.key"
        _openssl(workdir, "req", "-x509", *_EC, "-keyout", ca_key, "-out", self.ca,
                 "-subj", f"/CN={name} CA")  # fmt: skip
        self.server_cert, self.server_key = self._signed(workdir, "server", ca_key, "serverAuth")
        self.client_cert, self.client_key = self._signed(workdir, "client", ca_key, "clientAuth")

    def _signed(self, workdir: Path, who: str, ca_key: Path, usage: str) -> tuple[Path, Path]:
        cert, key, csr = (workdir / f"{who}{ext}" for ext in (".pem", ".key", ".csr"))
        ext = workdir / f"{who}.ext"
        ext.write_text(f"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n")
        _openssl(workdir, "req", *_EC, "-keyout", key, "-out", csr, "-subj", f"/CN=vx-test {who}")
        _openssl(workdir, "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key,
                 "-CAcreateserial", "-days", "2", "-out", cert, "-extfile", ext)  # fmt: skip
        return cert, key


_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2")


def _openssl(cwd: Path, *args: object) -> None:
    subprocess.run(
        ["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60
    )


class BuildGrid:
    """One cache-only `bgd server` on 127.0.0.1, its log in `workdir`; `stop()` when done.

    `tls` serves grpcs:// with its server certificate (and demands a client one with `mtls`);
    `allow_updates=False` makes the ActionCache read-only; `actor` turns on BuildGrid's header
    authorization, serving only calls whose `x-request-actor` header matches it exactly.
    `limits` are top-level settings of BuildGrid's own, such as `{"thread-pool-size": 5}` or
    `{"maximum-concurrent-rpcs": 2}`; none keeps its defaults (5 threads a core, and as many
    concurrent calls as threads: past them it answers RESOURCE_EXHAUSTED)."""

    def __init__(
        self,
        workdir: Path,
        instance: str = "",
        *,
        tls: Tls | None = None,
        mtls: bool = False,
        allow_updates: bool = True,
        actor: str | None = None,
        limits: dict[str, int] | None = None,
    ):
        from support.remote_servers import free_port

        venv = install_buildgrid()
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.instance = instance
        self.tls = tls
        channel = "    insecure-mode: true"
        if tls is not None:
            channel = (
                "    insecure-mode: false\n    credentials:\n"
                f"      tls-server-key: {tls.server_key}\n      tls-server-cert: {tls.server_cert}"
                + (f"\n      tls-client-certs: {tls.ca}" if mtls else "")
            )
        authorization = "  method: none"
        if actor is not None:
            acl = workdir / "acl.yml"
            acl.write_text(f'"{instance}":\n  allow:\n    - actor: "^{actor}$"\n')
            authorization = f"  method: headers\n  acl-config: {acl}"
        config = workdir / "bgd.yml"
        config.write_text(
            CONFIG.format(
                port=self.port,
                instance=instance,
                channel=channel,
                authorization=authorization,
                allow_updates="true" if allow_updates else "false",
            )
            + "".join(f"{key}: {value}\n" for key, value in (limits or {}).items())
        )
        self.log = workdir / "bgd.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(venv / "bin" / "python"),
                    str(venv / "bin" / "bgd"),
                    "server",
                    "start",
                    str(config),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.endpoint = f"grpc{'s' if tls else ''}://127.0.0.1:{self.port}"
        self.mtls = mtls
        self._await_ready()

    def _await_ready(self, within_s: float = 90.0) -> None:
        """Block until the server answers a gRPC connection (an event, with a hard deadline)."""
        import grpc

        target = f"127.0.0.1:{self.port}"
        tls, mtls = getattr(self, "tls", None), getattr(self, "mtls", False)
        if tls is None:
            opened = grpc.insecure_channel(target)
        else:
            creds = grpc.ssl_channel_credentials(
                tls.ca.read_bytes(),
                tls.client_key.read_bytes() if mtls else None,
                tls.client_cert.read_bytes() if mtls else None,
            )
            opened = grpc.secure_channel(target, creds)
        with opened as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=within_s)
            except grpc.FutureTimeoutError:
                self.stop()
                raise RuntimeError(f"bgd did not start:\n{self.log.read_text()[-2000:]}") from None

    def env(self) -> dict[str, str]:
        env = {"VX_REAPI_ENDPOINT": self.endpoint, "CI": "1"}
        if self.instance:
            env["VX_REAPI_INSTANCE"] = self.instance
        if self.tls is not None:
            env["VX_REAPI_CA_CERT"] = str(self.tls.ca)
        return env

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


EXEC_CONFIG = """\
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
authorization:
  method: none
connections:
  - !sql-connection &sql
    connection-string: postgresql://postgres@127.0.0.1:{pg_port}/bgd
    pool-size: 5
    max-overflow: 5
storages:
  - !lru-storage &cas
    size: 256MB
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 10000
    allow-updates: true
    cache-failed-actions: {cache_failed}
schedulers:
  - !sql-scheduler &sched
    sql: *sql
    storage: *cas
    action-cache: *ac
    bot-session-keepalive-timeout: {keepalive}
    assigners:
      - !priority-age-assigner
        count: 1
        interval: 0.02
        jitter-factor: 0.02
    property-set: !dynamic-property-set
      match-property-keys: []
      wildcard-property-keys: [container-image]
instances:
  - name: ""
    services:
      - !action-cache
        cache: *ac
      - !execution
        scheduler: *sched
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
thread-pool-size: 20
"""
PG_BIN = Path("/usr/lib/postgresql/15/bin")
WORKER = Path(__file__).with_name("reapi_worker.py")


class ExecStack:
    """PostgreSQL + an executing `bgd server` on loopback, and workers `add_worker()` starts;
    `stop()` ends every process it started, by its pid. The server forgets a killed worker
    after `keepalive` seconds (BuildGrid needs more than about 4) and re-queues its action.
    `cache_failed` keeps failed actions' results in the action cache (BuildGrid's default)."""

    def __init__(self, workdir: Path, keepalive: int = 6, cache_failed: bool = False):
        import tempfile

        from support.remote_servers import free_port

        if not (PG_BIN / "initdb").exists():
            pytest.skip("remote execution needs PostgreSQL 15 (apt-get install postgresql-15)")
        self.venv = install_buildgrid()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.workers: list[subprocess.Popen] = []
        self.proc: subprocess.Popen | None = None
        # postgres refuses to run as root and must reach its data dir: a world-traversable temp dir
        self.pg = Path(tempfile.mkdtemp(prefix="vx-pg-"))
        self.pg.chmod(0o755)
        as_pg = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        if as_pg:
            shutil.chown(self.pg, "postgres", "postgres")
        self.as_pg = as_pg
        self.pg_port = free_port()
        data = self.pg / "data"
        run = dict(check=True, capture_output=True, timeout=120)
        subprocess.run(
            [*as_pg, str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
            **run,
        )
        subprocess.run(
            [
                *as_pg,
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(self.pg / "log"),
                "-w",
                "-o",
                f"-c listen_addresses=127.0.0.1 -p {self.pg_port} -k {self.pg} "
                "-c fsync=off -c synchronous_commit=off",
                "start",
            ],
            **run,
        )
        try:
            url = f"postgresql://postgres@127.0.0.1:{self.pg_port}"
            subprocess.run([str(PG_BIN / "psql"), url, "-qc", "create database bgd"], **run)
            subprocess.run(
                [str(self.venv / "bin" / "python"), str(self.venv / "bin" / "bgd"), "migrate",
                 "apply", f"{url}/bgd"],
                **run,
            )  # fmt: skip
            self.port = free_port()
            config = workdir / "bgd-exec.yml"
            config.write_text(
                EXEC_CONFIG.format(
                    port=self.port,
                    pg_port=self.pg_port,
                    keepalive=keepalive,
                    cache_failed=str(cache_failed).lower(),
                )
            )
            self.log = workdir / "bgd-exec.log"
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(
                    [str(self.venv / "bin" / "python"), str(self.venv / "bin" / "bgd"), "server",
                     "start", str(config)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                )  # fmt: skip
            self.endpoint = f"grpc://127.0.0.1:{self.port}"
            BuildGrid._await_ready(self)  # type: ignore[arg-type]
        except BaseException:
            self.stop()
            raise

    @property
    def scratch(self) -> Path:
        """Where the workers make each action's directory: `stop()` ends what still runs there."""
        path = self.workdir / "actions"
        path.mkdir(exist_ok=True)
        return path

    def add_worker(self, path_prefix: Path | None = None) -> subprocess.Popen:
        """One more bot (capacity 1), its log beside the server's; `path_prefix` goes ahead of
        every action's PATH (a worker with other tools)."""
        n = len(self.workers)
        extra = ["--path-prefix", str(path_prefix)] if path_prefix is not None else []
        with open(self.workdir / f"worker-{n}.log", "wb") as log:
            proc = subprocess.Popen(
                [str(self.venv / "bin" / "python"), str(WORKER), "--remote",
                 f"127.0.0.1:{self.port}", "--heartbeat", "1", "--poll-timeout", "5",
                 "--scratch", str(self.scratch), *extra],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        proc.log = self.workdir / f"worker-{n}.log"  # type: ignore[attr-defined]
        self.workers.append(proc)
        return proc

    def env(self) -> dict[str, str]:
        return {"VX_REAPI_ENDPOINT": self.endpoint}

    def stop(self) -> None:
        for proc in [*self.workers, *([self.proc] if self.proc is not None else [])]:
            end(proc, timeout=30)
        _kill_running_in(self.scratch)
        if (self.pg / "data" / "postmaster.pid").exists():
            subprocess.run(
                [*self.as_pg, str(PG_BIN / "pg_ctl"), "-D", str(self.pg / "data"), "-m",
                 "immediate", "-w", "stop"],
                capture_output=True, timeout=60, check=False,
            )  # fmt: skip
        shutil.rmtree(self.pg, ignore_errors=True)


def stack_fixture(name: str, **options: Any) -> Any:
    """A module-scoped pytest fixture of one ExecStack (`options`: its own) in a temp dir named
    `name`, stopped after the module's tests: `stack = stack_fixture("bgd-exec")`."""

    @pytest.fixture(scope="module")
    def stack(tmp_path_factory):
        server = ExecStack(tmp_path_factory.mktemp(name), **options)
        yield server
        server.stop()

    return stack


@pytest.fixture
def two_workers(stack):
    """Two fresh workers of the module's `stack` for one test, ended after it (a test module
    takes it as `workers = two_workers`)."""
    started = [stack.add_worker(), stack.add_worker()]
    yield started
    for proc in started:
        end(proc, timeout=30)


def assert_reapi_refused(repo, reapi: dict, says: str) -> None:
    """A shop whose `remoteCache.reapi` is `reapi` is refused before anything runs (exit 2): the
    error names the file and the field, and `says` what is wrong."""
    from support.remote_servers import shop_files

    repo.write(shop_files({"reapi": reapi})).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2, res.err
    assert "vx.workspace.json" in res.err and "remoteCache.reapi" in res.err
    assert says in res.err and "Traceback" not in res.err


def one_remote_task(repo, command: str, *, remote=True, define=None, outputs=("dist/**",)) -> None:
    """Commit a workspace of one project, a, whose `build` runs `command` (remote by default,
    with `define` in its env), cached on src/** and package.json."""
    exec_ = {"command": command, "remote": remote}
    if define:
        exec_["env"] = {"define": define}
    repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "packages/a/package.json": {"name": "a", "version": "1.0.0"},
            "packages/a/src/in.txt": "input\n",
            "packages/a/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": exec_,
                        "cache": {
                            "inputs": {"files": ["src/**", "package.json"]},
                            "outputs": {"files": list(outputs)},
                        },
                    }
                }
            },
        }
    ).commit()


def _kill_running_in(directory: Path) -> None:
    """SIGKILL every process whose working directory is under `directory`: what a killed
    worker's action started (its own session, so the worker's death does not reach it) must not
    outlive the test."""
    prefix = str(directory.resolve()) + os.sep
    for _ in range(50):  # a kill may race a fork: look again until none is left
        found = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if (cwd + os.sep).startswith(prefix):
                found += 1
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if not found:
            return


class Abort(Exception):
    """What a `GarbageServer` answer raises to end the call with a status: `code` (a
    grpc.StatusCode), its message, and `details`, a serialized `google.rpc.Status` sent as the
    `grpc-status-details-bin` trailer (RetryInfo, PreconditionFailure)."""

    def __init__(self, code, message: str = "", details: bytes | None = None):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


class GarbageServer:
    """A gRPC server whose every unary reply is `answer(method, request_bytes)` (raw bytes, or
    an `Abort` raised); `answer=None` stalls every call until `stop()`. The metadata of each
    call is kept, and when it came (`times`, monotonic). `workers` calls are answered at once."""

    def __init__(self, answer: Callable[[str, bytes], bytes] | None, workers: int = 4):
        import threading

        import grpc

        self.seen: list[str] = []
        self.metadata: list[dict[str, str]] = []
        self.requests: list[tuple[str, bytes]] = []
        self.times: list[float] = []
        self.release = threading.Event()

        def handler(details):
            method = details.method

            def unary(request: bytes, context) -> bytes:
                self.times.append(time.monotonic())
                self.seen.append(method)
                self.requests.append((method, request))
                self.metadata.append(dict(context.invocation_metadata()))
                if answer is None:
                    self.release.wait(120)
                    context.abort(grpc.StatusCode.UNAVAILABLE, "stalled")
                try:
                    return answer(method, request)
                except Abort as abort:
                    if abort.details is not None:
                        context.set_trailing_metadata((("grpc-status-details-bin", abort.details),))
                    context.abort(abort.code, abort.message)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=None, response_serializer=None
            )

        generic = type("Generic", (grpc.GenericRpcHandler,), {"service": lambda s, d: handler(d)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
        self.server.add_generic_rpc_handlers((generic(),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.endpoint = f"grpc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.release.set()
        self.server.stop(grace=None)


if __name__ == "__main__" and sys.argv[1:] == ["--install"]:
    try:
        print(install_buildgrid())
    except BaseException as exc:  # pytest.skip outside pytest: say why, do not fail dev/test
        print(f"BuildGrid not installed: {exc}", file=sys.stderr)
