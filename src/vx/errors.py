"""The error tree. A refusal carries facts and a hint; cli.py renders it and picks the exit.

Exit codes (docs/cli.md): 0 ok, 1 task failure, 2 usage or config error, 130/143/129 on a
signal. A failed task is a result, never an exception.
"""

from __future__ import annotations

TYPE_CHECKING = False  # annotations only: a replay never needs `typing` (docs/optimizations.md #22)
if TYPE_CHECKING:
    from typing import Iterable, Sequence

EXIT_OK = 0
EXIT_TASK_FAILED = 1
EXIT_USAGE = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
EXIT_SIGHUP = 129


class VxError(Exception):
    """A refusal a user can act on: message, where (facts), and a hint."""

    code = EXIT_USAGE
    kind = "VX_E_USAGE"

    def __init__(self, message: str, *, facts: Sequence[str] = (), hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.facts = tuple(facts)
        self.hint = hint

    def render(self) -> str:
        lines = [f"error: {self.message}"]
        lines += [f"  {fact}" for fact in self.facts]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class UsageError(VxError):
    kind = "VX_E_USAGE"


class ConfigError(VxError):
    """A config file is wrong. `where` names the file and field path."""

    kind = "VX_E_CONFIG"

    def __init__(self, message: str, *, file: str, field: str = "", hint: str | None = None):
        where = f"in: {file}" + (f", {field}" if field else "")
        super().__init__(message, facts=(where,), hint=hint)
        self.file = file
        self.field = field


class WorkspaceError(VxError):
    kind = "VX_E_NO_WORKSPACE"


class CycleError(VxError):
    kind = "VX_E_CYCLE"


class UnknownTaskError(VxError):
    kind = "VX_E_UNKNOWN_TASK"


class EnvironmentFailure(VxError):
    """The machine refused something vx needs (a path not writable, a missing git)."""

    kind = "VX_E_REFUSED"


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The nearest spelling of `word` among `choices`, or None when nothing is close."""
    import difflib  # only on the way to an error message: not on every run's start-up

    best = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return best[0] if best else None


def suggestion(word: str, choices: Iterable[str], *, noun: str = "") -> str | None:
    """A hint line: did-you-mean when one is close, else the list of what exists."""
    choices = sorted(set(choices))
    near = did_you_mean(word, choices)
    if near:
        return f"did you mean `{near}`?"
    if not choices:
        return None
    shown = ", ".join(choices[:12]) + (", …" if len(choices) > 12 else "")
    return f"{noun + ' ' if noun else ''}available: {shown}"
