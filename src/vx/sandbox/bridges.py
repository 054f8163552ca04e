"""The bridges into a sandbox's network namespace, run from outside its pid namespace.

A task with network hosts reaches the run's proxy through 127.0.0.1:3128 in its own network
namespace, and a bridged port (`allow.localBinding`) is forwarded into it; both are socat
processes that need unix sockets. They run *outside* the sandbox: `nsenter --net` (and
`--user` of the namespace's owner, when bwrap made one) puts them in the task's network
namespace only, so they share neither its pid namespace nor its mounts.
Nothing the task can see is outside its seccomp filter — a bridge in its pid namespace would
be, and the task could take it over through /proc/<pid>/mem (seccomp cannot see that path) to
open a unix socket. The proxy's socket is not even mounted in.

They can start only once bwrap has made the namespace (its `child-pid`), so the task waits at
a gate: the prelude reads a FIFO that vx writes `go` to once every bridge listens, or `fail`.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import stat
import time
from pathlib import Path

from vx.sandbox.socats import Socats, address

_READY_S = 30.0  # a fuse: a socat listens within milliseconds; on a loaded machine, well under this
_TCP_LISTEN = "0A"
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
GATE_FAILED = 125

NSENTER_HINT = "install util-linux's nsenter (apt install util-linux)"


class InsideBridges:
    """One attempt's socats in the sandbox's network namespace; `stop()` ends them."""

    def __init__(
        self,
        socat: str,
        nsenter: str,
        *,
        proxy_socket: str | None,
        proxy_port: int,
        ports: tuple[tuple[int, Path], ...],
    ) -> None:
        self.socat, self.nsenter = socat, nsenter
        self.proxy_socket, self.proxy_port, self.ports = proxy_socket, proxy_port, ports
        self._socats = Socats()
        self.stopped = False

    def open(self, pid: int) -> str | None:
        """Start the bridges in the network namespace of `pid` (bwrap's child) and wait until they
        listen; None when they do, else what went wrong."""
        fds: list[int] = []
        try:
            # Opened now, by vx: once nsenter has joined the user namespace it may no longer open
            # /proc/<pid>/ns/net itself. The namespace's owner (bwrap's user namespace, made by
            # this user) may join it, and then its network namespace.
            net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            fds.append(net)
            enter = [self.nsenter, f"--net=/proc/self/fd/{net}"]
            owner = fcntl.ioctl(net, _NS_GET_USERNS)
            fds.append(owner)
            if os.fstat(owner).st_ino != os.stat("/proc/self/ns/user").st_ino:
                enter += [f"--user=/proc/self/fd/{owner}", "--preserve-credentials"]
            if self.proxy_socket is not None:
                listen = (
                    f"TCP4-LISTEN:{self.proxy_port},reuseaddr,fork,nodelay"  # only `lo` is there
                )
                self._socats.spawn(
                    enter
                    + ["--", self.socat, listen, "UNIX-CONNECT:" + address(self.proxy_socket)],
                    fds,
                )
            for port, sock in self.ports:
                listen = "UNIX-LISTEN:" + address(sock) + ",fork,unlink-early"
                self._socats.spawn(enter + ["--", self.socat, listen, f"TCP:127.0.0.1:{port}"], fds)
        except OSError as exc:
            return f"the sandbox's network bridge could not start: {exc}"
        finally:
            for fd in fds:
                os.close(fd)
        deadline = time.monotonic() + _READY_S
        while not self._ready(pid):
            if self.stopped or not os.path.exists(f"/proc/{pid}"):
                return "the sandbox ended before its network bridge listened"
            dead = next((p for p in self._socats.procs if p.poll() is not None), None)
            if dead is not None:
                return f"the sandbox's network bridge (socat) exited {dead.returncode} before it listened"
            if time.monotonic() > deadline:
                return f"the sandbox's network bridge did not listen within {_READY_S:.0f} s"
            time.sleep(0.002)
        return None

    def _ready(self, pid: int) -> bool:
        for _port, sock in self.ports:
            try:
                if not stat.S_ISSOCK(os.stat(sock).st_mode):
                    return False
            except OSError:
                return False
        return self.proxy_socket is None or _listening(pid, self.proxy_port)

    def stop(self) -> None:
        """End every bridge and the connections it forked."""
        self.stopped = True
        self._socats.stop()


def nsenter_path() -> str | None:
    return shutil.which("nsenter")


def gate_prelude(fifo: str) -> str:
    """Shell text run inside before the task: wait for vx's word that the bridges listen."""
    return (
        f'read -r vx_go < {shlex.quote(fifo)}; [ "$vx_go" = go ] || {{ echo \'vx: the sandbox network '
        f"bridge did not start' >&2; exit {GATE_FAILED}; }}; unset vx_go;"
    )


class Gate:
    """The FIFO the prelude waits on. vx's end is opened read-write (so opening never blocks and
    what it writes stays in the pipe until the prelude reads it) and kept until the attempt ends."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        os.mkfifo(self.path, 0o600)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)

    def say(self, word: str) -> None:
        if self._fd is not None:
            os.write(self._fd, word.encode() + b"\n")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _listening(pid: int, port: int) -> bool:
    """Whether something listens on `port` in the network namespace of `pid`."""
    suffix = f":{port:04X}"
    try:
        with open(f"/proc/{pid}/net/tcp", encoding="ascii") as table:
            next(table, None)
            return any(
                f[1].endswith(suffix) and f[3] == _TCP_LISTEN
                for f in (line.split() for line in table)
            )
    except OSError:
        return False
