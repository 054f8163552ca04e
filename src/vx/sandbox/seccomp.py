"""The seccomp program every sandbox gets unless its task may use unix sockets (`unixSockets`).

A unix socket is a door out of any mount and network namespace — to a Docker daemon, an
ssh-agent, a build daemon — so a sandboxed task may not create one unless its grant says
`allow.unixSockets`. Classic BPF, handed to bwrap's `--seccomp FD`, so every process inside,
bwrap's pid 1 too, is under it (a task's network bridges, which need unix sockets, run outside
the sandbox: `vx.sandbox.bridges`). No libseccomp needed. `socketpair` (which node and worker pools
use for IPC) stays allowed, and so do sockets inherited from outside.

The same program refuses `ptrace(PTRACE_ATTACH | PTRACE_SEIZE)` and `process_vm_readv/writev`:
nothing inside may take over another process of the sandbox;
`PTRACE_TRACEME`, with which a task's own child asks to be traced, is allowed.

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
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_AF_UNIX = 1
_X32 = 0x40000000
_NEGATIVE = 0x80000000  # strace's injection turns a call into number -1, and seccomp looks again
_PTRACE_ATTACH, _PTRACE_SEIZE = 16, 0x4206
# machine -> AUDIT_ARCH_*, and the numbers of socket, ptrace, process_vm_readv, process_vm_writev
_ARCHES = {"x86_64": (0xC000003E, 41, 101, 310, 311), "aarch64": (0xC00000B7, 198, 117, 270, 271)}


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _assemble(program: list[tuple]) -> bytes:
    """Lay out (code, true-label, false-label, k) and ("label", name) entries; labels become offsets."""
    at, index = {}, 0
    for entry in program:
        if entry[0] == "label":
            at[entry[1]] = index
        else:
            index += 1
    out, index = [], 0
    for entry in program:
        if entry[0] == "label":
            continue
        code, jt, jf, k = entry
        index += 1
        out.append(
            _op(
                code,
                at[jt] - index if isinstance(jt, str) else jt,
                at[jf] - index if isinstance(jf, str) else jf,
                k,
            )
        )
    return b"".join(out)


def unix_socket_filter(machine: str | None = None, *, unix_sockets: bool = False) -> bytes | None:
    """The program for this machine (`platform.machine()`), or None where vx has none.

    `unix_sockets` (the task's `allow.unixSockets`) drops the AF_UNIX rule and keeps the rest."""
    found = _ARCHES.get(machine or platform.machine())
    if found is None:
        return None
    arch, socket_nr, ptrace_nr, vm_read, vm_write = found
    socket_nr = (
        0xFFFFFFFF if unix_sockets else socket_nr
    )  # a number no call has: the rule never fires
    return _assemble([
        (_LD_W_ABS, 0, 0, 4),                          # A = seccomp_data.arch
        (_JEQ_K, 0, "kill", arch),                     # a foreign ABI (i386, arm32)
        (_LD_W_ABS, 0, 0, 0),                          # A = seccomp_data.nr
        (_JGE_K, 0, "native", _X32),
        (_JGE_K, "allow", "kill", _NEGATIVE),          # -1 (a call a tracer skipped) passes; x32 dies
        ("label", "native"),
        (_JEQ_K, "socket", 0, socket_nr),
        (_JEQ_K, "ptrace", 0, ptrace_nr),
        (_JEQ_K, "refuse", 0, vm_read),
        (_JEQ_K, "refuse", "allow", vm_write),
        ("label", "socket"),
        (_LD_W_ABS, 0, 0, 16),                         # A = args[0] (low half): the domain
        (_JEQ_K, "refuse", "allow", _AF_UNIX),
        ("label", "ptrace"),
        (_LD_W_ABS, 0, 0, 16),                         # A = args[0]: the request
        (_JEQ_K, "refuse", 0, _PTRACE_ATTACH),
        (_JEQ_K, "refuse", "allow", _PTRACE_SEIZE),
        ("label", "refuse"),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        ("label", "allow"),
        (_RET_K, 0, 0, _RET_ALLOW),
        ("label", "kill"),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
    ])  # fmt: skip
