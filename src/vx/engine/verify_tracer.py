"""The tracer of `vx run --verify=inputs` (`vx.engine.verify`): each task's attempts run under
`strace -f --seccomp-bpf`, one trace file per attempt, parsed into accesses once the run is over.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from vx.errors import EnvironmentFailure
from vx.model import TaskId, TaskNode
from vx.proc.executor import Launch


def find_strace(env: Mapping[str, str]) -> str:
    """strace's path once it has traced `/bin/true` with --seccomp-bpf, else a refusal."""
    strace = shutil.which("strace", path=env.get("PATH"))
    hint = "install strace (Debian/Ubuntu: `apt-get install strace`); --verify=inputs observes tasks with it"
    if strace is None:
        raise EnvironmentFailure("`--verify=inputs` needs strace, which is not on PATH", hint=hint)
    probe = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "--", "/bin/true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        raise EnvironmentFailure(
            f"`--verify=inputs` cannot trace: {reason}",
            hint="strace needs ptrace (in a container: --cap-add SYS_PTRACE) and "
            "seccomp-bpf (strace >= 5.3)",
        )
    return strace


class InputTracer:
    """Wrap each task's attempts (uncached ones too: cached readers read what they write) in strace,
    one trace file per attempt, and parse them.

    `-D` (not the sandbox's `-DD`): the tracer stays in the task's process group, so the
    run's teardown owns it like every other process the task left behind; the task's own
    pid and exit status are the command's.
    """

    def __init__(self, strace: str, skip: Iterable[TaskId] = ()):
        self.strace = strace
        self.skip = frozenset(skip)  # tasks traced elsewhere (the sandbox's own trace)
        self.directory = Path(tempfile.mkdtemp(prefix="vx-verify-"))
        self.traces: dict[TaskId, list[Path]] = {}
        self.observed: dict[TaskId, list] = {}  # sandboxed tasks: the sandbox's own trace
        self._count = 0

    def launch(self, node: TaskNode, plan, attempt: int) -> Launch | None:
        """The executor Launch for one attempt, or None for tasks not verified here."""
        if node.id in self.skip or plan.command is None or plan.sandbox is not None:
            return None  # a sandboxed task is traced inside its sandbox: see observe()
        self._count += 1  # not the directory's size: a trace file appears only once strace starts
        path = self.directory / f"{self._count}.trace"
        self.traces.setdefault(node.id, []).append(path)
        return Launch(argv=[*strace_prefix(self.strace, path), "/bin/sh", "-c", plan.command])

    def observe(self, tid: TaskId, accesses) -> None:
        """Take a sandboxed attempt's accesses (Hooks.observe); attempts accumulate."""
        self.observed.setdefault(tid, []).extend(accesses)

    def accesses(self, tid: TaskId, cwd: Path) -> list | None:
        """Every access of every attempt of `tid` in trace order; None when it never ran."""
        from vx.sandbox.trace import TraceParser

        if tid in self.observed:
            return self.observed[tid]
        paths = [p for p in self.traces.get(tid, []) if p.exists()]
        if not paths:
            return None
        out: list[Any] = []
        for path in paths:
            with open(path, encoding="ascii", errors="replace") as lines:
                out += TraceParser(str(cwd)).feed(lines)
        return out

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def strace_prefix(strace: str, output: Path) -> list[str]:
    """The sandbox's strace flags and syscall set, writing to `output`, tracer in our group."""
    from vx.sandbox.trace import HANDLES, SYSCALLS

    return [strace, "-D", "-f", "-qq", "-y", "-xx", "--seccomp-bpf", "-e", "signal=none", "-e", HANDLES,
            "-e", "trace=" + ",".join(SYSCALLS), "-e", "inject=io_uring_setup:error=ENOSYS",
            "-o", str(output), "--"]  # fmt: skip
