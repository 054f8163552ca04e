"""Run one task inside the sandbox and judge what it touched.

One attempt: look at the grants as the file system is now, build the bwrap argv (with strace
inside when it works here), start it through `executor.execute` — so process groups,
timeouts, Ctrl-C and the drain bound are the executor's — then parse the trace and judge it.
A task with violations fails with exit 1 whatever it exited with itself; the rebuilder
never caches a failure.

A `Session` holds what is shared by a run: the probe (armed lazily: a run whose sandboxed
tasks are all hits never probes), the run's temp root, the network proxy, and the
notes said once per run ("untraced").
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from msgspec import Struct
from msgspec.structs import replace

from vx.model import LogChunk, ProcessResult, SandboxSpec, Violation
from vx.proc import executor, warden
from vx.sandbox import bridges, grants, mounts, ports, seccomp, trace
from vx.sandbox.grants import Layout
from vx.sandbox.probe import Capability, probe
from vx.sandbox.violations import Report, judge

SHELL = "/bin/sh"


class Outcome(Struct, frozen=True):
    """One sandboxed attempt: how the process ended, what it broke, what vx has to say.

    `notes` are shown whatever happened; `failure_hints` only when the task failed.
    """

    process: ProcessResult
    violations: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = ()
    failure_hints: tuple[str, ...] = ()
    accesses: tuple[
        trace.Access, ...
    ] = ()  # the whole trace, kept only when Session.keep_accesses (--verify)


class Bridge(Struct, frozen=True):
    """What a task with `allow.network` hosts needs to reach the run's proxy."""

    bwrap_args: tuple[str, ...]
    socket: str  # the task's own proxy socket, bridged to from outside the sandbox
    port: int  # where the proxy listens inside the sandbox's network namespace
    env: Mapping[str, str]


class Session:
    """Per-run sandbox state; `close()` stops the proxy and removes the run's temp root."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._capability: Capability | None = None
        self._base: Path | None = None
        self._proxy: Any = None
        self._said: set[str] = set()
        self._count = 0
        self.keep_accesses = False  # --verify=inputs reads the trace after the judge
        # Write-grant paths vx created in this run -> the live attempts whose binds touch them: the
        # first task to finish must not remove a `gen/` another task is still writing.
        self._made: dict[str, int] = {}
        self._made_lock = threading.Lock()

    @property
    def probed(self) -> Capability | None:
        return self._capability

    @property
    def capability(self) -> Capability:
        if self._capability is None:
            self._capability = probe(self._environ)
        return self._capability

    def once(self, key: str, note: str) -> tuple[str, ...]:
        """`(note,)` the first time `key` is said in this run, `()` after."""
        if key in self._said:
            return ()
        self._said.add(key)
        return (note,)

    def task_dir(self, task: str) -> Path:
        """A fresh 0700 directory for one attempt, with `tmp/` as the task's TMPDIR."""
        if self._base is None:
            self._base = Path(
                tempfile.mkdtemp(prefix="vx-sandbox-", dir=_temp_parent(self._environ))
            )
            warden.remove_at_end(str(self._base))  # traces and TMPDIRs must not outlive a killed vx
        self._count += 1
        path = self._base / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', task)}-{self._count}"
        (path / "tmp").mkdir(parents=True, mode=0o700)
        os.chmod(path, 0o700)
        return path

    def expand(self, spec: SandboxSpec) -> Layout:
        """`grants.expand`, holding every created write-grant path this attempt's binds touch."""
        with (
            self._made_lock
        ):  # expand and hold as one step: a path made now is held before anyone looks
            layout = grants.expand(spec)
            for path in layout.placeholders:
                self._made.setdefault(path, 0)
            layout.held = [p for p in self._made if _related(p, layout)]
            for path in layout.held:
                self._made[path] += 1
        return layout

    def release(self, layout: Layout) -> None:
        """Let go of an attempt's held paths, and remove those no live attempt holds any more and
        the tasks left empty (under the lock: an attempt expanding now must not bind one of them)."""
        with self._made_lock:
            free = []
            for path in layout.held:
                self._made[path] -= 1
                if self._made[path] == 0:
                    del self._made[path]
                    free.append(path)
            layout.held = []
            _remove_placeholders(free)

    def private_dirs(self) -> list[str]:
        """vx's own temp directories — this run's and any other run's task dirs (TMPDIRs, traces)
        and proxy dirs — which no task may see. Under /tmp the sandbox's private /tmp hides them
        already; elsewhere (`$TMPDIR`, `$XDG_RUNTIME_DIR`) each is covered by a tmpfs."""
        parents = {os.path.dirname(self._base)} if self._base is not None else set()
        parents.add(tempfile.gettempdir())  # where the proxy puts its sockets
        found = []
        for parent in sorted(p for p in parents if not _at_or_under(os.path.realpath(p), "/tmp")):
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            found += [
                os.path.join(parent, n)
                for n in sorted(names)
                if n.startswith(("vx-sandbox-", "vx-net-"))
            ]
        return found

    def bridge(self, spec: SandboxSpec) -> Bridge | None:
        """Start the run's proxy on first use and attach this task to it with its own allow and
        deny patterns; None when the proxy cannot be had (the task stays offline)."""
        try:
            from vx.sandbox import proxy as netproxy
        except ImportError:
            return None
        if self._proxy is None:
            self._proxy = netproxy.Proxy()
            self._proxy.start([])  # every task is attached with its own policy below
        plan = netproxy.network_plan(
            self._proxy,
            spec.task,
            node_options=self._environ.get("NODE_OPTIONS", ""),
            allow=list(_hosts(spec)),
            deny=list(spec.config.deny_network),
        )
        return Bridge(tuple(plan.bwrap_args), plan.socket, netproxy.BRIDGE_PORT, dict(plan.env))

    def network_violations(self, spec: SandboxSpec) -> list[Violation]:
        if self._proxy is None:
            return []
        # The task's socket stays until the run ends: a retry or a later task may attach again.
        return self._proxy.violations(spec.task, ignore=spec.config.ignore_network)

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()
            self._proxy = None
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            warden.removed(str(self._base))
            self._base = None


def _related(path: str, layout: Layout) -> bool:
    """Whether an attempt's write binds hold `path` or lie inside it."""
    return any(
        _at_or_under(path, b) or _at_or_under(b, path) for b in (*layout.rw, *layout.placeholders)
    )


def _at_or_under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _temp_parent(environ: Mapping[str, str]) -> str | None:
    """`$XDG_RUNTIME_DIR` when it exists (a private tmpfs), else the system temp dir."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    return runtime if runtime and os.path.isdir(runtime) else None


# ---------------------------------------------------------------- one attempt


async def run_sandboxed(
    session: Session,
    spec: SandboxSpec,
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_ms: int | None,
    on_output: Callable[[LogChunk], None],
    table: executor.ProcessTable,
    on_note: Callable[[str], None] | None = None,
) -> Outcome:
    """Run `command` sandboxed to the end; never raises for the task (like executor.execute).

    `on_note` hears what must be said before the task runs (a write grant that will fail); without
    it those notes come back in the Outcome with the rest."""
    cap = session.probed
    if cap is None:  # the probe spawns: once, off the loop
        cap = await asyncio.to_thread(lambda: session.capability)
    missing = _missing(spec, cap)
    if missing is not None:
        return missing
    try:
        attempt = await _prepare(session, spec, cap)
    except OSError as exc:  # a write grant vx could not create, a temp dir it could not make
        return Outcome(
            ProcessResult(
                exit_code=1, duration_ms=0.0, spawn_error=f"cannot prepare the sandbox: {exc}"
            )
        )
    notes = _pre_notes(session, spec, attempt.layout, cap)
    if on_note is not None:
        for note in notes:
            on_note(note)
        notes = ()

    async def run(attempt: _Attempt) -> ProcessResult:
        return await attempt.run(command, cwd, env, timeout_ms, on_output, table)

    try:
        proc = await run(attempt)
        # once more; a second failure fails the task, never a blind pass
        if attempt.strace_failed(proc):
            attempt.close()
            try:
                attempt = await _prepare(session, spec, cap)
            except OSError as exc:
                return Outcome(
                    replace(proc, spawn_error=f"cannot prepare the sandbox again: {exc}")
                )
            proc = _traced_twice(attempt, await run(attempt))
        traced = attempt.trace is not None and proc.spawn_error is None
        report = await asyncio.to_thread(attempt.judge) if traced else Report()
        proc = _whole(proc, report)
    finally:
        attempt.close()
    return _judged(session, spec, attempt, proc, report, notes)


def _missing(spec: SandboxSpec, cap: Capability) -> Outcome | None:
    """The task's failure when the sandbox it needs cannot be had here; None when it can."""
    if not cap.available:
        return _unavailable(cap.problem or "", cap.hint)
    if (_hosts(spec) or _ports(spec)) and shutil.which("socat") is None:
        return _unavailable(
            "socat not found (it bridges the sandbox to the network proxy and to bridged ports)",
            _SOCAT_HINT,
        )
    if (_hosts(spec) or _ports(spec)) and bridges.nsenter_path() is None:
        return _unavailable(
            "nsenter not found (it starts the network bridges in the sandbox's network namespace)",
            bridges.NSENTER_HINT,
        )
    return None


def _traced_twice(attempt: _Attempt, proc: ProcessResult) -> ProcessResult:
    """The second attempt's result, failed when strace failed it too."""
    if not attempt.strace_failed(proc):
        return proc
    return replace(
        proc,
        exit_code=proc.exit_code or 1,
        spawn_error=f"the sandbox's tracer failed twice: {_complaint(proc, 'strace: ')}",
    )


def _whole(proc: ProcessResult, report: Report) -> ProcessResult:
    """A trace cut short or emptied fails the task, never passes it."""
    if report.whole or proc.aborted:
        return proc
    return replace(
        proc,
        exit_code=proc.exit_code or 1,
        spawn_error="the sandbox's trace is incomplete (the task's start or bwrap's exit is "
        "missing from it), so what the task touched is unknown",
    )


def _judged(
    session: Session,
    spec: SandboxSpec,
    attempt: _Attempt,
    proc: ProcessResult,
    report: Report,
    notes: tuple[str, ...],
) -> Outcome:
    """The attempt's outcome: its violations (the trace's, the network's, the config files it
    created), failing a task that exited 0, and the hints when it failed."""
    created = [v for v in _created_config(spec, attempt) if v not in report.violations]
    violations = tuple(report.violations) + tuple(session.network_violations(spec)) + tuple(created)
    failed = violations or proc.exit_code != 0
    # the pid namespace hides the task's rusage
    proc = replace(
        proc,
        exit_code=1 if violations and proc.exit_code == 0 else proc.exit_code,
        cpu_ms=None,
        peak_rss_bytes=None,
    )
    hints = tuple(report.failure_hints(spec)) if failed else ()
    return Outcome(proc, violations, notes + tuple(report.notes), hints, tuple(attempt.kept))


async def _prepare(session: Session, spec: SandboxSpec, cap: Capability) -> _Attempt:
    """Look at the grants as the file system is now, and set up one attempt (OSError if it cannot)."""
    return _Attempt(session, spec, await asyncio.to_thread(session.expand, spec), cap)


def _created_config(spec: SandboxSpec, attempt: _Attempt) -> tuple[Violation, ...]:
    """A config file, manifest or lockfile the task created inside a write grant: removed, and a
    violation (an existing one is mounted read-only; a new one cannot be)."""
    return tuple(
        Violation(
            "write",
            spec.rel(path),
            "none: a task never writes vx config files, package.json, "
            "lockfiles or install settings",
        )
        for path in grants.created_config(attempt.layout)
    )


def _unavailable(problem: str, hint: str | None) -> Outcome:
    """No bwrap (or one that cannot make namespaces): the task fails, never runs unsandboxed."""
    error = (
        f"sandbox not available: {problem}; {hint}" if hint else f"sandbox not available: {problem}"
    )
    return Outcome(ProcessResult(exit_code=1, duration_ms=0.0, spawn_error=error))


def _hosts(spec: SandboxSpec) -> tuple[str, ...]:
    """The hosts a task reaches through the run's proxy; `true` (the host's network) needs none."""
    network = spec.config.network
    return network if isinstance(network, tuple) else ()


def _ports(spec: SandboxSpec) -> tuple[int, ...]:
    """The ports bridged out to the host; on the host's network a task binds them itself."""
    listed = spec.config.local_binding
    return listed if isinstance(listed, tuple) and spec.config.network is not True else ()


_SOCAT_HINT = "install socat (apt install socat)"


def _pre_notes(
    session: Session, spec: SandboxSpec, layout: Layout, cap: Capability
) -> tuple[str, ...]:
    notes: tuple[str, ...] = ()
    if not cap.traced and spec.trace:
        notes += session.once(
            "untraced",
            f"sandbox: tasks are enforced but untraced ({cap.untraced}), so no "
            f"violations are reported; {_STRACE_HINT}",
        )
    for grant in layout.mountless:
        if grant.base == spec.project or not _at_or_under(
            grant.base, spec.project
        ):  # never advise `./**`
            advice = "have the tool write into a directory of its own and grant that, or under its TMPDIR"
        else:
            advice = f"grant the directory instead: {spec.grant_text(grant.base)}/"
        notes += session.once(
            f"mountless:{spec.task}:{grant.text}",
            f"{spec.task}: the write grant {grant.text} matches nothing yet, and a read-only "
            f"mount holds its directory, so a file the task creates under it will fail with "
            f'"Read-only file system"; {advice}',
        )
    return notes


_STRACE_HINT = "install strace >= 5.3 (apt install strace) to have them reported"


class _Attempt:
    """The moving parts of one attempt: task dir, trace file, status pipe, the bwrap argv."""

    def __init__(
        self, session: Session, spec: SandboxSpec, layout: Layout, cap: Capability
    ) -> None:
        self.session, self.spec, self.layout, self.cap = session, spec, layout, cap
        self.dir = session.task_dir(spec.task)
        self.tmpdir = str(self.dir / "tmp")
        # strace writes it; nothing inside sees it. `trace: false` runs the task enforced but untraced.
        self.trace = str(self.dir / "trace") if cap.traced and spec.trace else None
        self.seccomp_fd = _seccomp_fd(spec)
        self.kept: list[trace.Access] = []
        self.status = _Status()
        self.cwd = spec.project
        self.ports: ports.HostBridge | None = None
        self.inside: bridges.InsideBridges | None = (
            None  # the bridges in the sandbox's network namespace
        )
        self.gate: bridges.Gate | None = None
        self._opening: asyncio.Future | None = None
        self.tracer_done = True  # False: the tracer was still writing when vx stopped waiting

    async def run(
        self,
        command: str,
        cwd: Path,
        env: Mapping[str, str],
        timeout_ms: int | None,
        on_output: Callable[[LogChunk], None],
        table: executor.ProcessTable,
    ) -> ProcessResult:
        self.cwd = str(cwd)
        bridge = self.session.bridge(self.spec) if _hosts(self.spec) else None
        try:
            port_plan = await asyncio.to_thread(self._bridge_ports)  # waits for the host listeners
        except ports.PortError as exc:
            return ProcessResult(exit_code=1, duration_ms=0.0, spawn_error=str(exc))
        if bridge is not None or port_plan is not None:
            self.gate = bridges.Gate(self.dir / "gate")
            self.inside = bridges.InsideBridges(
                shutil.which("socat") or "socat",
                bridges.nsenter_path() or "nsenter",
                proxy_socket=bridge.socket if bridge else None,
                proxy_port=bridge.port if bridge else 0,
                ports=port_plan.inside if port_plan else (),
            )
            self.status.on_child = self._open_bridges
        argv = self.argv(command, bridge)
        passed = (self.status.write_fd,) + (
            (self.seccomp_fd,) if self.seccomp_fd is not None else ()
        )
        # strace's tracer (a detached grandchild) keeps this pipe's write end until it exits: its
        # EOF says the trace is written to the end, which bwrap's own exit does not.
        done_r, done_w = os.pipe() if self.trace is not None else (None, None)
        launch = executor.Launch(
            argv,
            pass_fds=passed + ((done_w,) if done_w is not None else ()),
            polite_group=lambda: self.status.child_pid,
        )
        self.status.watch()
        try:
            proc = await executor.execute(
                command,
                cwd=cwd,
                env=self.env(env, bridge),
                timeout_ms=timeout_ms,
                on_output=on_output,
                table=table,
                launch=launch,
            )
        finally:
            self.status.finish()
            if done_w is not None:
                os.close(done_w)
            if self.inside is not None:
                self.inside.stopped = True  # the sandbox is gone: a bridge still waiting gives up
            if self._opening is not None:
                await self._opening
        if done_r is not None:
            self.tracer_done = await _closed(done_r, _TRACER_WAIT_S)
        if (
            self.status.child_pid is None
            and proc.spawn_error is None
            and not proc.aborted
            and not self.strace_failed(proc)
        ):
            proc = replace(
                proc, spawn_error=f"the sandbox could not start: {_bwrap_complaint(proc)}"
            )
        return proc

    def _open_bridges(self, pid: int) -> None:
        """bwrap made the sandbox's namespaces (its child is `pid`): start the bridges in its network
        namespace, off the loop, and open the gate the task waits at."""
        inside, gate = self.inside, self.gate
        assert inside is not None and gate is not None

        def opened() -> None:
            problem = inside.open(pid)
            gate.say("go" if problem is None else "fail")

        self._opening = asyncio.ensure_future(asyncio.to_thread(opened))

    def _bridge_ports(self) -> ports.PortPlan | None:
        listed = _ports(self.spec)
        if not listed:
            return None
        self.ports = ports.HostBridge(shutil.which("socat") or "socat", self.dir / "ports", listed)
        return self.ports.start()

    def argv(self, command: str, bridge: Bridge | None) -> list[str]:
        """[strace …] bwrap …, then [the bridges' gate], then `sh -c command`."""
        spec = self.spec
        argv = mounts.bwrap_argv(
            self.cap.bwrap or "bwrap",
            spec,
            self.layout,
            tmpdir=self.tmpdir,
            status_fd=self.status.write_fd,
            share_net=spec.config.network is True,
            seccomp_fd=self.seccomp_fd,
            private=self.session.private_dirs(),
        )
        binds = list(bridge.bwrap_args if bridge else ())
        if self.gate is not None:
            binds += ["--ro-bind", self.gate.path, self.gate.path]
        argv[argv.index("--chdir") : argv.index("--chdir")] = binds
        if self.gate is not None:  # the task starts once its bridges listen, outside the sandbox
            argv += [SHELL, "-c", bridges.gate_prelude(self.gate.path) + ' exec "$@"', "vx-net"]
        if self.trace is not None:
            argv[:0] = trace.strace_argv(self.cap.strace or "strace", self.trace)
        return argv + [SHELL, "-c", command]

    def env(self, env: Mapping[str, str], bridge: Bridge | None) -> dict[str, str]:
        """The task's env with the runtime's variables over it."""
        out = dict(env)
        out.update(
            {
                "TMPDIR": self.tmpdir,
                "TMP": self.tmpdir,
                "TEMP": self.tmpdir,
                "UV_USE_IO_URING": "0",
                "VX_SANDBOX": "1",
            }
        )
        if self.spec.git_granted:
            out["GIT_DISCOVERY_ACROSS_FILESYSTEM"] = "1"
        if bridge is not None:
            out.update(bridge.env)
        return out

    def strace_failed(self, proc: ProcessResult) -> bool:
        """strace never got the sandbox going: it said why on stderr and traced no `execve`.

        A sandbox that fails on its own always leaves bwrap's execve in the trace first."""
        if (
            self.trace is None
            or proc.exit_code == 0
            or proc.aborted
            or proc.spawn_error is not None
        ):
            return False
        if _complaint(proc, "strace: ") is None:
            return False
        try:
            with open(self.trace, "rb") as head:
                return b"execve(" not in head.read(4096)
        except FileNotFoundError:
            return True

    def judge(self) -> Report:
        assert self.trace is not None
        try:
            lines = open(self.trace, encoding="ascii", errors="surrogateescape")
        except FileNotFoundError:
            lines = open(os.devnull, encoding="ascii")
        with lines:
            parser = trace.TraceParser(self.cwd, sandbox=True)
            accesses: Iterable[trace.Access] = parser.feed(lines)
            if self.session.keep_accesses:
                accesses = self.kept = list(accesses)
            report = judge(accesses, self.spec, self.layout, self.tmpdir)
        report.whole = parser.started and parser.ended and self.tracer_done
        return report

    def close(self) -> None:
        if self.seccomp_fd is not None:
            os.close(self.seccomp_fd)
        self.seccomp_fd = None
        if self.inside is not None:
            self.inside.stop()
            self.inside = None
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        if self.ports is not None:
            self.ports.stop()
            self.ports = None
        self.status.close()
        self.session.release(self.layout)
        shutil.rmtree(self.dir, ignore_errors=True)


class _Status:
    """bwrap's `--json-status-fd`: read line by line (it may arrive in pieces) for
    the `child-pid`, which is the process group the polite signals go to."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.child_pid: int | None = None
        self.on_child: Callable[[int], None] | None = None  # told the child-pid once, on the loop
        self._buffer = b""
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.read_fd, self._read)

    def finish(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.read_fd)
            self._loop = None
        self._read()

    def _read(self) -> None:
        try:
            while data := os.read(self.read_fd, 4096):
                self._buffer += data
        except (BlockingIOError, OSError):
            pass
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        try:
            value = json.loads(line)
        except ValueError:
            return
        if isinstance(value, dict) and isinstance(value.get("child-pid"), int):
            first = self.child_pid is None
            self.child_pid = value["child-pid"]
            if first and self.on_child is not None:
                self.on_child(self.child_pid)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


_TRACER_WAIT_S = (
    30.0  # once bwrap is gone nothing is left to trace: strace ends at once, this is a fuse
)


async def _closed(fd: int, timeout_s: float) -> bool:
    """Wait until every write end of the pipe `fd` reads from is closed (then close `fd`); False on timeout."""
    loop = asyncio.get_running_loop()
    ended = loop.create_future()
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            while data := os.read(fd, 4096):
                del data
        except BlockingIOError:
            return
        except OSError:
            pass
        if not ended.done():
            ended.set_result(True)

    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(ended, timeout_s)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _seccomp_fd(spec: SandboxSpec) -> int | None:
    """An fd holding the sandbox's filter for bwrap (without its AF_UNIX rule when the task may
    use unix sockets). Every process inside gets it, bwrap's pid 1 too: the network
    bridges, which need unix sockets, run outside (`vx.sandbox.bridges`)."""
    program = seccomp.unix_socket_filter(unix_sockets=bool(spec.config.unix_sockets))
    if program is None:
        return None
    fd = os.memfd_create("vx-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _bwrap_complaint(proc: ProcessResult) -> str:
    return _complaint(proc, "bwrap:", last=True) or f"bwrap exited {proc.exit_code}"


def _complaint(proc: ProcessResult, prefix: str, *, last: bool = False) -> str | None:
    """The first (or last) line of the attempt's stderr that starts with `prefix`: what a
    program of the sandbox's own (bwrap, strace) said before the task could run."""
    stderr = b"".join(c.data for c in proc.log if c.stream == 2).decode(errors="replace")
    lines = [line for line in stderr.splitlines() if line.startswith(prefix)]
    return (lines[-1] if last else lines[0]) if lines else None


def _remove_placeholders(paths: list[str]) -> None:
    """Remove what vx created for write grants and the task left empty."""
    for path in paths:  # files first, then directories deepest first
        try:
            if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == 0:
                os.unlink(path)
        except OSError:
            pass
    for path in sorted((p for p in paths if os.path.isdir(p)), key=len, reverse=True):
        try:
            os.rmdir(path)
        except OSError:
            pass
