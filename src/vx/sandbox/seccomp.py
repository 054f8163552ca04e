"""The seccomp program bwrap installs in every sandbox it can (SB-09 `unixSockets`, foreign ABIs).

A unix socket is a door out of any mount and network namespace — to a Docker daemon, an
ssh-agent, a build daemon — so a sandboxed task may not create one unless its grant says
`allow.unixSockets`. Classic BPF, handed to bwrap's `--seccomp FD`; no libseccomp needed.
`socketpair` (which node and worker pools use for IPC) stays allowed, and so do sockets
inherited from outside.

A filter that matches syscall numbers is only sound for the ABI they belong to: an i386
`int $0x80` (or arm32) call, or an x32 one, arrives with other numbers and would pass. So, as
bubblewrap's own examples, Docker and systemd's `SystemCallArchitectures=native` do, every
call from a foreign architecture or the x32 ABI kills the process. On an architecture not
listed here there is no filter.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_AF_UNIX = 1
_X32 = 0x40000000
_NEGATIVE = 0x80000000  # strace's injection turns a call into number -1, and seccomp looks again
# machine -> (AUDIT_ARCH_*, __NR_socket)
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The program for this machine (`platform.machine()`), or None where vx has none."""
    found = _ARCHES.get(machine or platform.machine())
    if found is None:
        return None
    arch, socket_nr = found
    return b"".join([
        _op(_LD_W_ABS, 0, 0, 4),              # 0: A = seccomp_data.arch
        _op(_JEQ_K, 0, 8, arch),              # 1: a foreign ABI (i386, arm32) -> kill (10)
        _op(_LD_W_ABS, 0, 0, 0),              # 2: A = seccomp_data.nr
        _op(_JGE_K, 0, 1, _X32),              # 3: the x32 range -> 4, else -> 5
        _op(_JGE_K, 4, 5, _NEGATIVE),         # 4: -1 (a call a tracer skipped) -> allow (9), x32 -> kill (10)
        _op(_JEQ_K, 0, 3, socket_nr),         # 5: socket -> 6, anything else -> allow (9)
        _op(_LD_W_ABS, 0, 0, 16),             # 6: A = args[0] (low half: the domain)
        _op(_JEQ_K, 0, 1, _AF_UNIX),          # 7: AF_UNIX -> refuse (8), else allow (9)
        _op(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),  # 8
        _op(_RET_K, 0, 0, _RET_ALLOW),                # 9
        _op(_RET_K, 0, 0, _RET_KILL_PROCESS),         # 10
    ])  # fmt: skip
