"""Bridge a sandboxed task's listening ports out to the host (`allow.localBinding: [ports]`, SB-09).

A sandboxed task has a network namespace of its own, so a server it starts on 127.0.0.1:3000
is reachable only from inside. For each listed port, two socat processes make one pipe out:

    host 127.0.0.1:P  --socat-->  <dir>/P.sock  --socat (inside)-->  sandbox 127.0.0.1:P

The unix socket lives in a directory of the attempt that is bind-mounted into the sandbox;
the socat inside listens on it and is started by the task's prelude, before the command. The
host side is started by vx before the sandbox and stopped when the attempt ends. A port that
is taken on the host is refused before the task starts, naming the port.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from msgspec import Struct

_READY_S = 2.0  # how long a host listener may take to come up before the port counts as refused
_TCP_LISTEN = "0A"  # /proc/net/tcp state of a listening socket


class PortError(Exception):
    """A listed port cannot be bridged (taken on the host, or socat would not start)."""


class PortPlan(Struct, frozen=True):
    """What the sandbox needs for the bridge: a writable bind of the socket directory, and the
    prelude that starts the inside listeners."""

    bwrap_args: tuple[str, ...]
    prelude: str


class HostBridge:
    """The host-side listeners of one attempt; `stop()` ends them."""

    def __init__(self, socat: str, directory: Path, ports: tuple[int, ...]) -> None:
        self.socat, self.directory, self.ports = socat, directory, ports
        self._procs: list[subprocess.Popen] = []

    def start(self) -> PortPlan:
        """Listen on 127.0.0.1:P on the host for every port; PortError if one cannot be had."""
        taken = [port for port in self.ports if _listening(port)]
        if taken:
            raise PortError(_taken(taken[0]))
        self.directory.mkdir(mode=0o700, exist_ok=True)
        for port in self.ports:
            self._procs.append(self._listen(port))
        deadline = time.monotonic() + _READY_S
        for port, proc in zip(self.ports, self._procs):
            while not _listening(port):
                if proc.poll() is not None or time.monotonic() > deadline:  # lost a race for the port
                    self.stop()
                    raise PortError(_taken(port))
                time.sleep(0.005)
        directory = str(self.directory)
        return PortPlan(("--bind", directory, directory), inside_prelude(self.socat, self.directory, self.ports))

    def _listen(self, port: int) -> subprocess.Popen:
        target = "UNIX-CONNECT:" + _socat_path(self.directory / f"{port}.sock")
        argv = [self.socat, f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork", target]
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        """End every listener and the connections it forked (each socat leads its own group)."""
        for proc in self._procs:
            _signal_group(proc, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        self._procs.clear()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def inside_prelude(socat: str, directory: Path, ports: tuple[int, ...]) -> str:
    """Shell text that starts one socat per port inside the sandbox and waits for its socket."""
    out = []
    for port in ports:
        sock = directory / f"{port}.sock"
        listen = "UNIX-LISTEN:" + _socat_path(sock) + ",fork,unlink-early"
        out.append(f"{shlex.quote(socat)} {shlex.quote(listen)} TCP:127.0.0.1:{port} </dev/null >/dev/null 2>&1 & "
                   f"until [ -S {shlex.quote(str(sock))} ]; do kill -0 $! 2>/dev/null || "
                   f"{{ echo 'vx: the localBinding bridge (socat) for port {port} did not start' >&2; exit 125; }}; "
                   f"done;")
    return " ".join(out)


def _socat_path(path: Path) -> str:
    return str(path).replace(",", "\\,").replace(":", "\\:")


def _listening(port: int) -> bool:
    """Whether something in this network namespace listens on `port`, on any address."""
    suffix = f":{port:04X}"  # any address: a dual-stack `::` listener takes 127.0.0.1 too
    for table_path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table_path, encoding="ascii") as table:
                next(table, None)
                if any(f[1].endswith(suffix) and f[3] == _TCP_LISTEN for f in (line.split() for line in table)):
                    return True
        except OSError:
            continue
    return False


def _taken(port: int) -> str:
    return (f"allow.localBinding port {port} cannot be bridged to the host: 127.0.0.1:{port} is already "
            f"taken on this machine; stop what listens there, or list another port")
