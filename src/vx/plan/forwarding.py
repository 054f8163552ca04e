"""Append `vx run … -- args` to a task's command the way a shell would read them.

Each argument is POSIX single-quoted unless all-safe, and lands on the command's last line of
code: before a trailing `#` comment and outside any heredoc body.
"""

from __future__ import annotations

import re
import shlex
from typing import Sequence

_HEREDOC = re.compile(r"<<(-?)[ \t]*")
_WORD_END = " \t;&|<>()"


def forward_args(command: str, args: Sequence[str]) -> str:
    """Append `args` (single-quoted unless all-safe) to the command's last line of code.

    The last line is the last one outside a heredoc body, and the args go before its
    trailing `#` comment, so `cat <<EOF` or `tsc # compile` still mean what they said.
    """
    if not args:
        return command
    quoted = " ".join(shlex.quote(arg) for arg in args)
    lines = command.split("\n")
    target = _last_code_line(lines)
    if target is None:
        return f"{command} {quoted}"
    line = lines[target]
    cut, _ = _scan_line(line)
    code = line[:cut].rstrip()
    lines[target] = f"{code} {quoted}{line[len(code) :]}"
    return "\n".join(lines)


def _last_code_line(lines: Sequence[str]) -> int | None:
    """Index of the last line with code that is not part of a heredoc body."""
    target, pending, i = None, [], 0
    while i < len(lines):
        cut, heredocs = _scan_line(lines[i])
        if lines[i][:cut].strip():
            target = i
        pending += heredocs
        i += 1
        for delimiter, strip_tabs in pending:  # skip each body, in order
            while (
                i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != delimiter
            ):
                i += 1
            i += 1
        pending = []
    return target


def _scan_line(line: str) -> tuple[int, list[tuple[str, bool]]]:
    """Find where a line's trailing comment starts and the heredocs (delimiter, `<<-`) it opens."""
    heredocs: list[tuple[str, bool]] = []
    quote, i = "", 0
    while i < len(line):
        c = line[i]
        if quote:
            i, quote = _step_in_quote(line, i, quote)
            continue
        if c == "\\":
            i += 2
        elif c in "'\"":
            quote, i = c, i + 1
        elif c == "#" and (i == 0 or line[i - 1] in _WORD_END):
            return i, heredocs
        elif line.startswith("<<", i) and not line.startswith("<<<", i):
            i = _read_heredoc(line, i, heredocs)
        else:
            i += 1
    return len(line), heredocs


def _step_in_quote(line: str, i: int, quote: str) -> tuple[int, str]:
    """Advance within a quote: past its closing mark, an escape pair (in "..."), or one char."""
    if line[i] == quote:
        return i + 1, ""
    if quote == '"' and line[i] == "\\":
        return i + 2, quote
    return i + 1, quote


def _read_heredoc(line: str, i: int, heredocs: list[tuple[str, bool]]) -> int:
    """Record the heredoc starting at `<<` and return the index after its delimiter word."""
    match = _HEREDOC.match(line, i)
    assert match is not None
    j = match.end()
    while j < len(line) and line[j] not in _WORD_END:
        j += 1
    word = line[match.end() : j]
    delimiter = word.replace("'", "").replace('"', "").replace("\\", "")
    if delimiter:
        heredocs.append((delimiter, match.group(1) == "-"))
    return j
