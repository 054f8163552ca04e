"""Find out, once per process, whether this machine can host the sandbox and trace it.

bwrap missing or refused is fatal for a sandboxed task (it never runs unsandboxed); strace
missing or refused only means "untraced": enforced, but nothing reported (sandbox.md §4.2).
`VX_BWRAP` / `VX_STRACE` name the programs explicitly; set to "" they count as absent.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from typing import Mapping

from msgspec import Struct

INSTALL_BWRAP = (
    "install bubblewrap (apt install bubblewrap / dnf install bubblewrap / pacman -S bubblewrap)"
)
INSTALL_STRACE = "install strace >= 5.3 (apt install strace) to have violations reported"
_PROBE_TIMEOUT_S = 5.0
_SMOKE = [
    "--unshare-all",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--",
]


class Capability(Struct, frozen=True):
    """What the probe found: the programs, their versions, and why something cannot be used."""

    bwrap: str | None = None
    bwrap_version: str = ""
    strace: str | None = None
    strace_version: str = ""
    problem: str | None = None  # the sandbox is unavailable: why
    hint: str | None = None
    untraced: str | None = None  # strace cannot be used: why

    @property
    def available(self) -> bool:
        return self.problem is None

    @property
    def traced(self) -> bool:
        return self.available and self.untraced is None

    @property
    def status(self) -> str:
        """`bwrap 0.8.0 (traced: strace 6.1)`, `bwrap 0.8.0 (untraced: …)` or `unavailable: …`."""
        if not self.available:
            return f"unavailable: {self.problem}"
        if self.untraced:
            return f"bwrap {self.bwrap_version} (untraced: {self.untraced})"
        return f"bwrap {self.bwrap_version} (traced: strace {self.strace_version})"


def probe(environ: Mapping[str, str] | None = None) -> Capability:
    """Probe bwrap and strace (memoised per VX_BWRAP/VX_STRACE/PATH)."""
    env = os.environ if environ is None else environ
    return _probe(env.get("VX_BWRAP"), env.get("VX_STRACE"), env.get("PATH", os.defpath))


@functools.lru_cache(maxsize=8)
def _probe(bwrap_override: str | None, strace_override: str | None, path: str) -> Capability:
    bwrap = _find("bwrap", bwrap_override, path)
    if bwrap is None:
        return Capability(problem="bwrap not found", hint=INSTALL_BWRAP)
    version = _version([bwrap, "--version"], r"bubblewrap\s+(\S+)")
    problem = _smoke(bwrap, ["/bin/true"])
    if problem:
        return Capability(bwrap, version, problem=problem, hint=_namespace_hint(problem))
    strace = _find("strace", strace_override, path)
    if strace is None:
        return Capability(bwrap, version, untraced="strace not found")
    return _with_strace(bwrap, version, strace)


def _with_strace(bwrap: str, version: str, strace: str) -> Capability:
    strace_version = _version([strace, "-V"], r"version\s+(\d+(?:\.\d+)+)")
    if _numbers(strace_version) < (5, 3):
        return Capability(
            bwrap,
            version,
            strace,
            strace_version,
            untraced=f"strace {strace_version or '?'} is older than 5.3 (no --seccomp-bpf)",
        )
    check = [
        strace,
        "-f",
        "-qq",
        "--seccomp-bpf",
        "-e",
        "trace=openat",
        "-o",
        "/dev/null",
        "/bin/true",
    ]
    problem = _smoke(bwrap, check)
    if problem:
        return Capability(
            bwrap, version, strace, strace_version, untraced=f"strace cannot trace here: {problem}"
        )
    return Capability(bwrap, version, strace, strace_version)


def _find(name: str, override: str | None, path: str) -> str | None:
    if override is not None:
        return shutil.which(override) if override else None
    return shutil.which(name, path=path)


def _version(argv: list[str], pattern: str) -> str:
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(pattern, out.stdout + out.stderr)
    return match.group(1) if match else ""


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3]) or (0,)


def _smoke(bwrap: str, command: list[str]) -> str | None:
    """Run `command` in a minimal sandbox; the first line bwrap (or the command) complained with."""
    try:
        out = subprocess.run(
            [bwrap, *_SMOKE, *command],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"`{os.path.basename(command[0])}` in a sandbox did not finish within {_PROBE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"cannot run {bwrap}: {exc.strerror}"
    if out.returncode == 0:
        return None
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    return lines[0].strip() if lines else f"exit {out.returncode}"


def _namespace_hint(problem: str) -> str:
    """Map what bwrap said to the fix (docs/sandbox.md)."""
    if "uid map" in problem:
        return (
            "unprivileged user namespaces are restricted (Ubuntu >= 23.10 AppArmor): allow them "
            "with `sysctl kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for bwrap"
        )
    if "Operation not permitted" in problem or "No permissions" in problem:
        return (
            "this machine (often a container) refuses new namespaces: run the container with a "
            "seccomp profile that allows user namespaces, or run vx outside it"
        )
    if "proc" in problem:
        return "mounting /proc failed (a nested container?): run vx outside the container"
    return INSTALL_BWRAP


def sandbox_status() -> str:
    """Say what the sandbox can do on this machine, for `vx info`: `bwrap 0.8.0 (traced: strace 6.1)`."""
    return probe().status
