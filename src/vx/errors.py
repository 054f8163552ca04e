"""The error tree. A refusal carries facts, a hint and a stable code; the CLI renders it and
picks the exit.

Exit codes (docs/cli.md): 0 ok, 1 task failure, 2 usage or config error (every refusal),
130/143/129 on a signal. A failed task is a result, never an exception. `code` is what a
`--format json` refusal names (`VX_E_…`, one of CODES); each class carries its own, so no
refusal is ever classified by its wording.
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

# The stable codes of a refusal (docs/cli.md § Error codes has a section for each).
CODES = (
    "VX_E_USAGE",
    "VX_E_UNKNOWN_TASK",
    "VX_E_CONFIG",
    "VX_E_CYCLE",
    "VX_E_NO_WORKSPACE",
    "VX_E_NO_HISTORY",
    "VX_E_FDS",
    "VX_E_REFUSED",
    "VX_E_INTERNAL",
)
DOCS = "docs/cli.md#"  # a code's section: DOCS + the code in lower case


def docs_of(code: str) -> str:
    """Where the fix for `code` is written."""
    return DOCS + code.lower()


class VxError(Exception):
    """A refusal a user can act on: message, where (facts), and a hint."""

    exit_code = EXIT_USAGE
    code = "VX_E_USAGE"

    def __init__(self, message: str, *, facts: Sequence[str] = (), hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.facts = tuple(facts)
        self.hint = hint

    def render(self) -> str:
        return "error: " + self.prose()

    def prose(self) -> str:
        """The refusal in words, as `render` prints it without the `error:` tag."""
        lines = [self.message]
        lines += [f"  {fact}" for fact in self.facts]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class ToolchainRefused(Exception):
    """A plugin executor reported building a task with another toolchain than its key names:
    nothing it did may be kept, and vx builds the task itself."""


class UsageError(VxError):
    code = "VX_E_USAGE"


class ConfigError(VxError):
    """A config file is wrong. `where` names the file and field path (no file: the workspace's
    layout itself)."""

    code = "VX_E_CONFIG"

    def __init__(self, message: str, *, file: str = "", field: str = "", hint: str | None = None):
        where = f"in: {file}" + (f", {field}" if field else "")
        super().__init__(message, facts=(where,) if file else (), hint=hint)
        self.file = file
        self.field = field


class WorkspaceError(VxError):
    """No workspace root holds the directory vx started in."""

    code = "VX_E_NO_WORKSPACE"


class CycleError(VxError):
    code = "VX_E_CYCLE"


class UnknownTaskError(VxError):
    """A task or project named that does not resolve."""

    code = "VX_E_UNKNOWN_TASK"


class NoHistoryError(VxError):
    """What was asked about needs a run on record, and there is none."""

    code = "VX_E_NO_HISTORY"


class EnvironmentFailure(VxError):
    """The machine refused something vx needs (a path not writable, a missing git)."""

    code = "VX_E_REFUSED"


class OutOfFds(EnvironmentFailure):
    """The process ran out of file descriptors (EMFILE, ENFILE)."""

    code = "VX_E_FDS"


FDS_HINT = "too many open files; raise the limit with `ulimit -n 4096`, or run fewer tasks at once"


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
