"""The AF_UNIX filter (SB-09): a real bwrap refuses socket(AF_UNIX) and allows the rest."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from vx.sandbox.seccomp import unix_socket_filter

PROBE = (
    "import socket\n"
    "for family in (socket.AF_INET, socket.AF_UNIX):\n"
    "    try:\n"
    "        socket.socket(family).close(); print(family.name, 'ok')\n"
    "    except OSError as e:\n"
    "        print(family.name, 'refused', e.errno)\n"
    "a, b = socket.socketpair(); print('socketpair ok')\n"
)


def test_programs_exist_for_x86_64_and_arm64_only():
    for machine in ("x86_64", "aarch64"):
        program = unix_socket_filter(machine)
        assert (
            program and len(program) % 8 == 0 and len(program) // 8 < 256
        )  # jump offsets are one byte
    assert unix_socket_filter("riscv64") is None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is installed by dev/test")
@pytest.mark.skipif(
    unix_socket_filter() is None, reason="the seccomp filter is built for x86_64 and arm64 only"
)
def test_bwrap_with_the_filter_refuses_only_af_unix():
    fd = os.memfd_create("t")
    os.write(fd, unix_socket_filter())
    os.lseek(fd, 0, 0)
    argv = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--seccomp",
        str(fd),
        "--",
        "python3",
        "-c",
        PROBE,
    ]
    out = subprocess.run(argv, pass_fds=(fd,), capture_output=True, text=True, check=True).stdout
    os.close(fd)
    assert out.splitlines() == ["AF_INET ok", "AF_UNIX refused 1", "socketpair ok"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is installed by dev/test")
@pytest.mark.skipif(
    unix_socket_filter() is None, reason="the seccomp filter is built for x86_64 and arm64 only"
)
def test_with_unix_sockets_granted_the_filter_keeps_only_its_other_rules():
    fd = os.memfd_create("t")
    os.write(fd, unix_socket_filter(unix_sockets=True))
    os.lseek(fd, 0, 0)
    probe = PROBE + (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('ptrace', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"
    )
    argv = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--unshare-pid",
        "--proc",
        "/proc",
        "--seccomp",
        str(fd),
        "--",
        "python3",
        "-c",
        probe,
    ]
    out = subprocess.run(argv, pass_fds=(fd,), capture_output=True, text=True, check=True).stdout
    os.close(fd)
    assert out.splitlines() == ["AF_INET ok", "AF_UNIX ok", "socketpair ok", "ptrace -1 1"]
