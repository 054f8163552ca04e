"""Bridge a sandboxed task's listening ports out to the host (`allow.localBinding: [ports]`).

A sandboxed task has a network namespace of its own, so a server it starts on 127.0.0.1:3000
is reachable only from inside. For each listed port, two socat processes make one pipe out:

    host 127.0.0.1:P  --socat-->  <dir>/P.sock  --socat (in the sandbox's netns)-->  sandbox 127.0.0.1:P

The unix socket lives in a directory of the attempt that the sandbox never sees: the second
socat runs outside the sandbox, in its network namespace only (`vx.sandbox.bridges`). The
host side is started by vx before the sandbox and stopped when the attempt ends. A port that
is taken on the host is refused before the task starts, naming the port.
"""

from __future__ import annotations

import time
from pathlib import Path

from msgspec import Struct

from vx.sandbox.socats import Socats, address

_READY_S = 2.0  # how long a host listener may take to come up before the port counts as refused
_TCP_LISTEN = "0A"  # /proc/net/tcp state of a listening socket


class PortError(Exception):
    """A listed port cannot be bridged (taken on the host, or socat would not start)."""


class PortPlan(Struct, frozen=True):
    """The inside half of each bridge: port -> the unix socket its socat listens on."""

    inside: tuple[tuple[int, Path], ...]


class HostBridge:
    """The host-side listeners of one attempt; `stop()` ends them."""

    def __init__(self, socat: str, directory: Path, ports: tuple[int, ...]) -> None:
        self.socat, self.directory, self.ports = socat, directory, ports
        self._socats = Socats()

    def start(self) -> PortPlan:
        """Listen on 127.0.0.1:P on the host for every port; PortError if one cannot be had."""
        taken = [port for port in self.ports if _listening(port)]
        if taken:
            raise PortError(_taken(taken[0]))
        self.directory.mkdir(mode=0o700, exist_ok=True)
        for port in self.ports:
            self._listen(port)
        deadline = time.monotonic() + _READY_S
        for port, proc in zip(self.ports, self._socats.procs):
            while not _listening(port):
                if (
                    proc.poll() is not None or time.monotonic() > deadline
                ):  # lost a race for the port
                    self.stop()
                    raise PortError(_taken(port))
                time.sleep(0.005)
        return PortPlan(tuple((port, self.directory / f"{port}.sock") for port in self.ports))

    def _listen(self, port: int) -> None:
        target = "UNIX-CONNECT:" + address(self.directory / f"{port}.sock")
        self._socats.spawn([self.socat, f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork", target])

    def stop(self) -> None:
        """End every listener and the connections it forked."""
        self._socats.stop()


def _listening(port: int) -> bool:
    """Whether something in this network namespace listens on `port`, on any address."""
    suffix = f":{port:04X}"  # any address: a dual-stack `::` listener takes 127.0.0.1 too
    for table_path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table_path, encoding="ascii") as table:
                next(table, None)
                if any(
                    f[1].endswith(suffix) and f[3] == _TCP_LISTEN
                    for f in (line.split() for line in table)
                ):
                    return True
        except OSError:
            continue
    return False


def _taken(port: int) -> str:
    return (
        f"allow.localBinding port {port} cannot be bridged to the host: 127.0.0.1:{port} is already "
        f"taken on this machine; stop what listens there, or list another port"
    )
