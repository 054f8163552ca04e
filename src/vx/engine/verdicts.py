"""Say what a task's exit means: the failure label and a one-line hint.

Pure functions of a finished process (plus, for a hint, a look at the script that failed to
start): the executor, the rebuilder and the reporters all name outcomes the same way.
"""

from __future__ import annotations

import re
import shlex
import signal
from pathlib import Path
from typing import Iterator, Sequence

from vx.model import ProcessResult

_SIGNAL_CAUSES = {
    signal.SIGKILL: "usually the out-of-memory killer, or something ran `kill -9`",
    signal.SIGSEGV: "a crash (segmentation fault) in native code",
    signal.SIGBUS: "a crash (bus error), often a truncated memory-mapped file",
    signal.SIGABRT: "an abort: a failed assertion or abort() in native code",
    signal.SIGILL: "an illegal instruction: a binary built for another CPU?",
    signal.SIGFPE: "an arithmetic fault such as an integer division by zero",
    signal.SIGPIPE: "a write to a pipe whose reader had exited (such as `| head`)",
    signal.SIGXCPU: "the CPU-time limit (`ulimit -t`) ran out",
    signal.SIGXFSZ: "the file-size limit (`ulimit -f`) was exceeded",
    signal.SIGSYS: "a system call that a seccomp filter forbids",
    signal.SIGTERM: "something asked it to stop",
    signal.SIGINT: "an interrupt (Ctrl-C)",
    signal.SIGHUP: "its terminal or parent went away",
}
_MAX_DIRS_SHOWN = 6


def signal_name(number: int) -> str | None:
    """Name a signal number (`SIGKILL`), or None when it is not one."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def failure_label(result: ProcessResult) -> str:
    """Name why an attempt failed: `failed (exit 137, 128 + SIGKILL)` and the like."""
    outcome = "aborted" if result.aborted else "failed"
    if result.timed_out:
        return f"{outcome} (timed out, exit {result.exit_code})"
    if result.spawn_error:
        return f"{outcome} (exit {result.exit_code}, could not start)"
    name = signal_name(result.exit_code - 128) if result.exit_code > 128 else None
    if name:
        return f"{outcome} (exit {result.exit_code}, 128 + {name})"
    return f"{outcome} (exit {result.exit_code})"


def exit_hint(
    result: ProcessResult, command: str, path_dirs: Sequence[str], *, cwd: Path | None = None
) -> str | None:
    """Explain the shell's verdict in one line: what was missing, or which signal and why.

    `cwd` (the task's directory) lets a missing `./script` be told apart from one whose
    `#!` interpreter is missing or that has CRLF line endings.
    """
    if result.spawn_error:
        return result.spawn_error
    if result.timed_out:
        return "it ran past its timeout, so vx stopped its process group; raise `exec.timeout` or `--timeout`"
    stderr = b"".join(c.data for c in result.log if c.stream == 2).decode(errors="replace")
    if result.exit_code == 127:
        return _not_found_hint(_missing_word(stderr, command), path_dirs, cwd)
    if result.exit_code == 126:
        return _not_executable_hint(stderr, command, cwd)
    if result.exit_code > 128:
        return _signal_hint(result.exit_code - 128)
    return None


def _signal_hint(number: int) -> str | None:
    name = signal_name(number)
    if name is None:
        return None
    cause = _SIGNAL_CAUSES.get(signal.Signals(number), "")
    return f"it was ended by {name}" + (f": {cause}" if cause else "")


def _missing_word(stderr: str, command: str) -> str:
    """Find the word the shell could not run: from its message, else the command's first word."""
    for line in stderr.splitlines():
        env_miss = re.match(r"(?:\S*env): ['‘]?(.+?)['’]?: No such file or directory", line)
        if env_miss:
            return env_miss.group(1)
        if line.rstrip().endswith("not found") and ": " in line:
            return line.split(": ")[-2]
    return _first_word(command)


def _first_word(command: str) -> str:
    """The program a command runs, skipping `NAME=value` prefixes."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    programs = (w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w))
    return next(programs, command.strip())


def _not_found_hint(word: str, path_dirs: Sequence[str], cwd: Path | None) -> str:
    if "\r" in word:
        return (
            f"`{word.strip()}` ends in a carriage return: the script has Windows (CRLF) line endings; "
            "convert it to LF"
        )
    if "/" not in word:
        shown = list(path_dirs[:_MAX_DIRS_SHOWN]) + (
            ["…"] if len(path_dirs) > _MAX_DIRS_SHOWN else []
        )
        return f"`{word}` was not found on PATH (searched {', '.join(shown)}); is it installed?"
    script = (cwd / word) if cwd is not None else None
    if script is not None and script.is_file():
        return _shebang_hint(script, word)
    if cwd is None:
        return f"`{word}` was not found, or its `#!` interpreter is missing"
    return f"`{word}` does not exist in {cwd}"


def _shebang_hint(script: Path, word: str) -> str:
    """Explain why an existing script reads as `not found`: its `#!` line."""
    try:
        with open(script, "rb") as file:
            first = file.readline(512)
    except OSError:
        return f"`{word}` exists but could not be run"
    if first.rstrip(b"\n").endswith(b"\r"):
        return f"`{word}` has Windows (CRLF) line endings, so its `#!` interpreter is not found; convert it to LF"
    interpreter = first[2:].split()[0].decode(errors="replace") if first[2:].split() else "?"
    return f"`{word}` exists, but its `#!` interpreter `{interpreter}` is not installed"


def _not_executable_hint(stderr: str, command: str, cwd: Path | None) -> str:
    for line in stderr.splitlines():
        if "bad interpreter" in line:
            crlf = "^M" in line or "\r" in line
            return (
                "the script has Windows (CRLF) line endings; convert it to LF"
                if crlf
                else line.strip()
            )
        if "Exec format error" in line:
            return "it is not a program for this machine, or a script without a `#!` line"
    word = next(_words_denied(stderr), _first_word(command))
    if cwd is not None and (cwd / word).is_dir():
        return f"`{word}` is a directory, not a program"
    return f"`{word}` is not executable: run `chmod +x {word}`"


def _words_denied(stderr: str) -> Iterator[str]:
    for line in stderr.splitlines():
        if line.rstrip().endswith("Permission denied") and ": " in line:
            yield line.split(": ")[-2]
